"""Sets of Unicode code points as sorted, disjoint, non-adjacent inclusive ranges.

The front-ends (GBNF character classes, ECMA-262 patterns in JSON Schema) build character
classes with these and write them out as regexes with `class_regex`. Surrogates are never members: no text
contains them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CODE_POINT_MAX", "SURROGATES", "Ranges", "normalize", "complement", "union", "intersects",
           "intersection", "clip", "char_regex", "class_regex"]

CODE_POINT_MAX = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Ranges = tuple[tuple[int, int], ...]


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sort and merge ranges; drop the surrogates."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out: list[tuple[int, int]] = []
    for lo, hi in merged:
        if hi < SURROGATES[0] or lo > SURROGATES[1]:
            out.append((lo, hi))
            continue
        if lo < SURROGATES[0]:
            out.append((lo, SURROGATES[0] - 1))
        if hi > SURROGATES[1]:
            out.append((SURROGATES[1] + 1, hi))
    return tuple(out)


def complement(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Every code point not in `ranges`."""
    out: list[tuple[int, int]] = []
    next_lo = 0
    for lo, hi in normalize(ranges):
        if lo > next_lo:
            out.append((next_lo, lo - 1))
        next_lo = hi + 1
    if next_lo <= CODE_POINT_MAX:
        out.append((next_lo, CODE_POINT_MAX))
    return normalize(out)


def union(a: Ranges, b: Ranges) -> Ranges:
    return normalize(a + b) if a and b else (a or b)


def intersects(a: Ranges, b: Ranges) -> bool:
    """Do two sets share a code point? (linear merge)"""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def intersection(a: Ranges, b: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def clip(ranges: Ranges, lo: int, hi: int) -> Ranges:
    """The members of `ranges` within [lo, hi]."""
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if a <= hi and b >= lo)


def char_regex(code: int) -> str:
    """One code point as a regex atom (docs/lexer.md syntax, and Python's), valid inside and
    outside `[...]`: ASCII punctuation is escaped, ASCII controls are `\\xHH`, other characters
    stand for themselves."""
    ch = chr(code)
    if ch.isascii():
        if ch.isalnum() or ch == " ":
            return ch
        if 0x21 <= code <= 0x7E:
            return "\\" + ch
        return f"\\x{code:02X}"
    return ch


def class_regex(ranges: Ranges) -> str:
    """A regex for one character of a non-empty set: the character itself, or a class."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return char_regex(ranges[0][0])
    parts = []
    for lo, hi in ranges:
        if hi == lo:
            parts.append(char_regex(lo))
        elif hi == lo + 1:
            parts.append(char_regex(lo) + char_regex(hi))
        else:
            parts.append(f"{char_regex(lo)}-{char_regex(hi)}")
    return "[" + "".join(parts) + "]"
