"""Slow, independent references for the matcher's answers.

`RegexOracle` decides "can `text` still be extended to a full match of the pattern?" with the
`regex` module's partial matching, which works on characters. Byte strings that end inside a
UTF-8 character are decided by trying completions of that character: the completions form one
contiguous range of code points, and a pattern can only tell code points apart at the edges of
the ranges it mentions, so trying the range's ends plus every code point the pattern names (and
its neighbours) covers every case.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

import regex


def _utf8_prefix_ok(data: bytes) -> bool:
    """True when `data` is valid UTF-8 or a valid UTF-8 text cut inside its last character."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError as err:
        return err.reason == "unexpected end of data" and err.end == len(data)


def split_incomplete(data: bytes) -> tuple[str, bytes] | None:
    """Split into (decoded text, incomplete final character bytes); None if invalid UTF-8."""
    for cut in range(0, min(4, len(data)) + 1):
        head = data[: len(data) - cut]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        tail = data[len(data) - cut :]
        if cut == 0 or (_utf8_prefix_ok(data) and _tail_len(tail[0]) > cut):
            return text, tail
        return None
    return None


def _tail_len(lead: int) -> int:
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    if lead >= 0xC0:
        return 2
    return 1


def completion_range(tail: bytes) -> tuple[int, int]:
    """The lowest and highest code points whose UTF-8 encoding starts with `tail`."""
    n = _tail_len(tail[0])

    def extreme(pick_max: bool) -> int:
        current = bytearray(tail)
        while len(current) < n:
            candidates = range(0xBF, 0x7F, -1) if pick_max else range(0x80, 0xC0)
            for b in candidates:
                if _utf8_prefix_ok(bytes(current) + bytes([b])):
                    current.append(b)
                    break
            else:
                raise AssertionError(f"no completion for {tail!r}")
        return ord(bytes(current).decode("utf-8"))

    return extreme(False), extreme(True)


_ESCAPE_RE = re.compile(r"\\u\{?([0-9a-fA-F]{1,6})\}?|\\x([0-9a-fA-F]{2})")


class RegexOracle:
    """Prefix-completability of byte strings for one anchored pattern."""

    def __init__(self, pattern: str, *, dot_all: bool = False, ignore_case: bool = False) -> None:
        flags = regex.ASCII | (regex.DOTALL if dot_all else 0) | (regex.IGNORECASE if ignore_case else 0)
        self.pattern = pattern
        self.compiled = regex.compile(pattern, flags)
        points = {ord(c) for c in pattern}
        for m in _ESCAPE_RE.finditer(pattern):
            points.add(int(m.group(1) or m.group(2), 16))
        points |= {0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0xD7FF, 0xE000, 0x10FFFF}
        self.points = sorted({q for p in points for q in (p - 1, p, p + 1) if 0 <= q <= 0x10FFFF})

    def full_match(self, data: bytes) -> bool:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.compiled.fullmatch(text) is not None

    @lru_cache(maxsize=1 << 16)
    def completable(self, data: bytes) -> bool:
        """Can `data` be extended (by zero or more bytes) to a full match?"""
        return self.completable_uncached(data)

    def completable_uncached(self, data: bytes) -> bool:
        """`completable` without the cache, for scans that ask each question once."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return self.compiled.fullmatch(text, partial=True) is not None
        split = split_incomplete(data)
        if split is None:
            return False
        text, tail = split
        if not tail:
            return self.compiled.fullmatch(text, partial=True) is not None
        lo, hi = completion_range(tail)
        for cp in [lo, hi] + [p for p in self.points if lo < p < hi]:
            if 0xD800 <= cp <= 0xDFFF:
                continue
            if self.compiled.fullmatch(text + chr(cp), partial=True) is not None:
                return True
        return False


@cache
def regex_oracle(pattern: str) -> RegexOracle:
    """One `RegexOracle` per pattern for the session, so its answers are computed once."""
    return RegexOracle(pattern)
