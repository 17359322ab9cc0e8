"""Strings as regexes over their JSON spelling: lengths, characters and escapes, property-name
lexemes, ECMA-262 `pattern`s translated to the core's syntax, and the `format` regexes."""

from __future__ import annotations

import functools
import json
import re
from typing import Sequence

from ..charset import CODE_POINT_MAX, Ranges, char_regex, class_regex, clip, complement, normalize
from ..._errors import GrammarError
from .numbers import _alt, _hex_range, int_range_regex
from ..ir import Lexeme, literal_lexeme, literal_regex

REPEAT_COUNT_MAX = 10_000  # the core's largest counted repetition
PATTERN_BRANCH_COUNT_MAX = 64  # branches of one pattern once groups with anchors are distributed
# Lookaheads inside a pattern (not at its start), each said with complements: nested ones, or
# many, made the lexer's emptiness checks run out of step fuel on strings of a few characters.
PATTERN_LOOKAHEADS_MAX = 2
_MARK = "\x00"  # around a lookahead's index in a branch's text (`_EcmaPattern._lookahead`)
# Characters of a repeated group's branches once its anchored iterations are split out (each
# branch repeats the group's plain iterations; nested groups with anchors grow the text).
PATTERN_ANCHORED_TEXT_MAX = 100_000
# One character of a JSON string body, as the grammar lets it be spelled. Every character has
# a fixed set of spellings, and every translation of a set of characters (patterns, enum
# values, keys) covers all of them, so a negation (`not_patterns`, keys other than the listed
# ones) stays exact: printable ASCII only raw (`"` and `\\` as their short escapes; no
# `\\u0041`, no `\\/`), controls as short or `\\u00XX` escapes, other BMP characters raw or
# `\\uXXXX` (either hex case), astral characters raw or as one surrogate-pair escape (one
# character for the lengths). A lone or mis-ordered surrogate escape is refused.
_H = "[0-9a-fA-F]"
_SURROGATE_PAIR = rf"\\u[dD][89abAB]{_H}{{2}}\\u[dD][c-fC-F]{_H}{{2}}"
# `\\u` then: a control, U+007F-U+0FFF, U+1000-U+CFFF or U+E000-U+FFFF, U+D000-U+D7FF, or a
# surrogate pair (the `\\u` written once, so the expression stays small for the core).
_ESCAPED_U = (
    rf"\\u(?:0(?:0(?:[0189a-fA-F]{_H}|7[fF])|[1-9a-fA-F]{_H}{{2}})|[1-9a-cA-CeEfF]{_H}{{3}}"
    rf"|[dD](?:[0-7]{_H}{{2}}|[89abAB]{_H}{{2}}\\u[dD][c-fC-F]{_H}{{2}}))"
)
STRING_CHAR = rf'(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|{_ESCAPED_U})'
_ANY_CHARS = STRING_CHAR + "*"  # any string body (what a search pattern leaves free)


@functools.lru_cache(maxsize=1024)
def string_regex(min_length: int, max_length: int | None) -> str:
    """The lexeme regex of a JSON string with min..max characters (max None = unbounded).

    Raises:
        GrammarError: `min_length` above `REPEAT_COUNT_MAX`.
    """
    if min_length > REPEAT_COUNT_MAX:
        raise GrammarError(f"minLength {min_length} is above {REPEAT_COUNT_MAX}, the largest supported")
    if max_length is not None and max_length > REPEAT_COUNT_MAX:
        max_length = None
    if min_length == 0 and max_length is None:
        count = "*"
    elif max_length is None:
        count = "+" if min_length == 1 else f"{{{min_length},}}"
    elif min_length == max_length:
        count = f"{{{min_length}}}"
    else:
        count = f"{{{min_length},{max_length}}}"
    return f'"{STRING_CHAR}{count}"'


_SHORT_ESCAPES = {0x08: "b", 0x09: "t", 0x0A: "n", 0x0C: "f", 0x0D: "r"}
def _json_char_regex(code: int) -> str:
    """One decoded character as the JSON-escaped text that may spell it (exact)."""
    ch = chr(code)
    if ch == '"':
        return r'\\"'
    if ch == "\\":
        return r"\\\\"
    if code < 0x20:
        forms = [r"\\u00" + _hex_range(code, code, 2)]
        if code in _SHORT_ESCAPES:
            forms.insert(0, "\\\\" + _SHORT_ESCAPES[code])
        return _alt(forms)
    if code < 0x7F:
        return char_regex(code)
    if code <= 0xFFFF:
        return _alt([char_regex(code), r"\\u" + _hex_range(code, code, 4)])
    high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
    return _alt([ch, r"\\u" + _hex_range(high, high, 4) + r"\\u" + _hex_range(low, low, 4)])


# A backslash before every ASCII character but letters and digits (`_key_regex`): one
# `str.translate` instead of a test per character (a new schema's property names are escaped
# on its first compile).
# (ASCII letters and digits map to themselves in the table: `str.translate` raises and clears a
# KeyError inside for each character a table lacks, which took half its time on property names.)
_KEY_ESCAPES = str.maketrans({chr(i): chr(i) if chr(i).isalnum() else "\\" + chr(i) for i in range(0x80)})


def _key_regex(lexeme: Lexeme) -> str:
    """The regex of a key lexeme (literal lexemes escaped)."""
    if lexeme.kind == "regex":
        return lexeme.value
    return lexeme.value.translate(_KEY_ESCAPES)


# JSON string contents spelled only one way: printable ASCII but `"` and `\\`.
_PLAIN_JSON_TEXT = re.compile(r'[\x20\x21\x23-\x5b\x5d-\x7e]*')


@functools.lru_cache(maxsize=16384)
def _json_string_lexeme(text: str) -> Lexeme:
    """The lexeme of one JSON string value (a key or an enum value): literal when plain.
    Cached (lexemes are immutable): property names recur from schema to schema."""
    # (Letters and digits, most names, without the regex: a fullmatch costs ten string tests.)
    if (text.isascii() and text.isalnum()) or _PLAIN_JSON_TEXT.fullmatch(text):
        return literal_lexeme(f'"{text}"')  # what json.dumps gives: nothing in it needs an escape
    body = "".join(_json_char_regex(ord(c)) for c in text)
    return Lexeme(json.dumps(text, ensure_ascii=False), "regex", f'"{body}"')


@functools.lru_cache(maxsize=16384)
def _json_string_regex(text: str) -> str:
    """The regex of `_json_string_lexeme(text)` (for not-patterns: names already taken)."""
    if text.isascii() and text.isalnum():  # (most names: `_key_regex` leaves letters and digits as they are)
        return f'\\"{text}\\"'
    return _key_regex(_json_string_lexeme(text))


def _json_strings_lexeme(texts: Sequence[str]) -> Lexeme:
    """One lexeme for several JSON string values: each spelled as `_json_string_lexeme` would."""
    unique = list(dict.fromkeys(texts))
    bodies = [
        literal_regex(t) if _PLAIN_JSON_TEXT.fullmatch(t) else "".join(_json_char_regex(ord(c)) for c in t)
        for t in unique
    ]
    # The first three as JSON texts: a plain text's is itself in quotes (what `json.dumps` gives
    # it, at a tenth of the cost; MaskBench service-schema names 239 such lists).
    shown = ", ".join(
        f'"{t}"' if _PLAIN_JSON_TEXT.fullmatch(t) else json.dumps(t, ensure_ascii=False) for t in unique[:3]
    )
    name = f"one of {len(bodies)} strings ({shown}, …)"
    return Lexeme(name, "regex", '"(?:' + "|".join(bodies) + ')"')


# =============================================================================================
# Character sets and ECMA-262 patterns
# =============================================================================================

_DIGIT: Ranges = [(0x30, 0x39)]
_WORD: Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE: Ranges = normalize(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
_DOT: Ranges = complement([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CHAR_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "0": 0x00}


def _surrogate_pairs_regex(lo: int, hi: int) -> str:
    """The surrogate-pair escapes (`\\uD83D\\uDE00`) of the astral code points in [lo, hi]."""
    high_lo, low_lo = 0xD800 + ((lo - 0x10000) >> 10), 0xDC00 + ((lo - 0x10000) & 0x3FF)
    high_hi, low_hi = 0xD800 + ((hi - 0x10000) >> 10), 0xDC00 + ((hi - 0x10000) & 0x3FF)

    def pair(h1: int, h2: int, l1: int, l2: int) -> str:
        return r"\\u" + _hex_range(h1, h2, 4) + r"\\u" + _hex_range(l1, l2, 4)

    if high_lo == high_hi:
        return pair(high_lo, high_lo, low_lo, low_hi)
    forms = [pair(high_lo, high_lo, low_lo, 0xDFFF)]
    if high_hi - high_lo > 1:
        forms.append(pair(high_lo + 1, high_hi - 1, 0xDC00, 0xDFFF))
    forms.append(pair(high_hi, high_hi, 0xDC00, low_hi))
    return _alt(forms)


def _charset_json_regex(ranges: Ranges) -> str | None:
    """A regex for every spelling `STRING_CHAR` allows of one character from `ranges`
    (surrogate code points have none)."""
    ranges = normalize(ranges)
    if not ranges:
        return None
    forms = []
    raw = normalize(
        r
        for piece in ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, CODE_POINT_MAX))
        for r in clip(ranges, *piece)
    )
    if raw:
        forms.append(class_regex(raw))
    for code, spelled in ((0x22, r'\\"'), (0x5C, r"\\\\")):
        if clip(ranges, code, code):
            forms.append(spelled)
    controls = clip(ranges, 0, 0x1F)
    shorts = [c for c in sorted(_SHORT_ESCAPES) if clip(controls, c, c)]
    if shorts:
        forms.append("\\\\" + class_regex(tuple((ord(_SHORT_ESCAPES[c]),) * 2 for c in shorts)))
    escaped = [r"\\u00" + _hex_range(lo, hi, 2) for lo, hi in controls]
    for piece in ((0x7F, 0xD7FF), (0xE000, 0xFFFF)):
        escaped += [r"\\u" + _hex_range(lo, hi, 4) for lo, hi in clip(ranges, *piece)]
    astral = clip(ranges, 0x10000, CODE_POINT_MAX)
    if astral == ((0x10000, CODE_POINT_MAX),):
        escaped.append(_SURROGATE_PAIR)
    else:
        escaped += [_surrogate_pairs_regex(lo, hi) for lo, hi in astral]
    forms += escaped
    return _alt(forms) if forms else None


@functools.lru_cache(maxsize=4096)
def _set_regex(ranges: Ranges) -> str | None:
    """A pattern atom matching one character of `ranges` (`_charset_json_regex`, grouped where
    it is not one class); None for an empty set. Memoised: patterns are mostly literal
    characters, and 238 patterns of ~20 characters each cost a schema 50 ms (MaskBench
    service-schema)."""
    text = _charset_json_regex(ranges)
    if text is None:
        return None
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and 0x20 <= ranges[0][0] < 0x7F:
        if chr(ranges[0][0]) not in '"\\':
            return text  # one printable ASCII character: itself
    return text if text.startswith("[") and text.endswith("]") and "|" not in text else f"(?:{text})"


class _PatternError(Exception):
    """A pattern this translator refuses (message says why)."""


class _EcmaPattern:
    """Translate an ECMA-262 `pattern` into a lexeme regex over the JSON-escaped string body."""

    def __init__(self, pattern: str, *, lookaheads: bool = False) -> None:
        self.p = pattern
        self.i = 0
        self.depth = 0
        self.impossible = ""  # why a branch was dropped (`^` after text, text after `$`)
        # With `lookaheads`, a lookahead outside repetition is a mark in its branch's text
        # (`_MARK` around its index here: positive, what the rest of the string must match)
        # until `translate` intersects what follows the mark with it, in the core's regex
        # syntax: `(?~X)` is the strings X does not match.
        self.lookaheads = lookaheads
        self.looks: list[tuple[bool, str]] = []
        self.looking = 0  # inside a lookahead's body

    # Anchors. Search semantics make `^` and `$` mean something only at the edges of what
    # is matched: a pattern is translated into *branches* (anchored at start, text, anchored
    # at end), and a branch is `any* text any*` without the anchored sides. An unquantified
    # group that holds anchors is distributed into the branches around it
    # (`(^a|b)c` → `^ac | bc`), so `(^gs://.+)|(^https?://.+)`, `^$|(^\S+$)` and
    # `^([^,]|$)` are exact; so is a repeated one (`_repeated_with_anchors`: an iteration
    # anchored at the start can only be the first, one anchored at the end only the last, so
    # `^(a($|/))*$` is `^((a/)*|(a/)*a)$`); an anchor after text that must be non-empty is
    # refused.

    def translate(self) -> str:
        # `.*` at an unanchored end adds nothing to the search (`.*x` finds what `x` finds), and
        # leaving it in made the lexer track where the `.*` might have ended: a pattern key
        # `.*` cost 900,000 fuel units for one mask (MaskBench Github_hard---o82144).
        dot_star = self._set(_DOT) + "*"
        alts = []
        branches = self._alternation()
        if not branches and self.i == len(self.p):
            raise _PatternError(f"the pattern never matches: {self.impossible or 'nothing can match'}")
        for anchored_start, text, anchored_end in branches:
            if _MARK in text:
                alts.append(("" if anchored_start else _ANY_CHARS) + self._resolve(text, "" if anchored_end else _ANY_CHARS))
                continue
            while not anchored_start and text.startswith(dot_star):
                text = text[len(dot_star) :]
            while not anchored_end and text.endswith(dot_star):
                text = text[: -len(dot_star)]
            alts.append(("" if anchored_start else _ANY_CHARS) + text + ("" if anchored_end else _ANY_CHARS))
        if self.i != len(self.p):
            raise _PatternError(f"unbalanced ')' at offset {self.i}")
        alts = list(dict.fromkeys(alts))
        return _alt(alts) if len(alts) > 1 else alts[0]

    def _resolve(self, text: str, tail: str) -> str:
        """A branch's text with its lookahead marks, then `tail` (the rest of the string):
        from the last mark back, what follows a mark is intersected with its lookahead
        (`A(?=X)B` is `A((?~(?~B)|(?~X)))`, `A(?!X)B` is `A((?~(?~B)|X))`, X with the rest of
        the string after it unless X ends at `$`)."""
        pieces = text.split(_MARK)
        rest = pieces[-1] + tail
        for at in range(len(pieces) - 2, 0, -2):
            positive, looked = self.looks[int(pieces[at])]
            rest = pieces[at - 1] + (f"(?~(?~{rest})|(?~{looked}))" if positive else f"(?~(?~{rest})|{looked})")
        return rest

    def _lookahead(self, start: int, positive: bool) -> list[tuple[bool, str, bool]]:
        """A lookahead group (opened at `start`, `(?=`/`(?!` read) as a mark: what the rest
        of the string must (or must not) start with."""
        self.depth += 1
        alts = self._alternation()
        self.depth -= 1
        if self._peek() != ")":
            raise _PatternError(f"unclosed group opened at offset {start}")
        self.i += 1
        if any(s for s, _, _ in alts) or any(_MARK in t for _, t, _ in alts):
            raise _PatternError(f"'^' or a lookahead inside a lookahead at offset {start} (not supported)")
        looked = "|".join(t if e else t + _ANY_CHARS for _, t, e in alts) if alts else "(?~(?:)|" + _ANY_CHARS + ")"
        self.looks.append((positive, "(?:" + looked + ")"))
        return [(False, f"{_MARK}{len(self.looks) - 1}{_MARK}", False)]

    def _peek(self, k: int = 0) -> str:
        return self.p[self.i + k] if self.i + k < len(self.p) else ""

    def _alternation(self) -> list[tuple[bool, str, bool]]:
        alts = self._sequence()
        while self._peek() == "|":
            self.i += 1
            alts = alts + self._sequence()
        return alts

    def _sequence(self) -> list[tuple[bool, str, bool]]:
        """The branches of one sequence: (anchored at start, regex text, anchored at end)."""
        branches: list[tuple[bool, str, bool]] = [(False, "", False)]
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            at = self.i
            c = self.p[self.i]
            if c in "^$":
                self.i += 1
                parts = [(c == "^", "", c == "$")]
            elif c == "(":
                parts = self._group()
                q = self._quantifier()
                if not parts:  # the group never matches: only no iteration of it can
                    parts = [(False, "", False)] if q and _quantifier_bounds(q)[0] == 0 else []
                elif any(_MARK in t for _, t, _ in parts):
                    # A lookahead holds on the rest of the whole string, so it cannot repeat;
                    # an optional group's two cases are branches.
                    if q == "?":
                        parts = [*parts, (False, "", False)]
                    elif q:
                        raise _PatternError(f"a lookahead inside a repeated group at offset {at} (not supported)")
                elif q and any(s or e for s, _, e in parts):
                    parts = _repeated_with_anchors(parts, q, at)
                elif q or len(parts) > 1 and not any(s or e for s, _, e in parts):
                    parts = [(False, "(?:" + "|".join(t for _, t, _ in parts) + ")" + q, False)]
            else:
                parts = [(False, self._atom() + self._quantifier(), False)]
            joined = []
            for s1, t1, e1 in branches:
                for s2, t2, e2 in parts:
                    # `^` after text, or text after `$`: only where that text is empty.
                    head, tail = t1, t2
                    if s2 and head:
                        if not _matches_empty(head):
                            self.impossible = self.impossible or f"'^' in the middle of the pattern (offset {at})"
                            continue
                        head = ""
                    if e1 and tail:
                        if not _matches_empty(tail):
                            self.impossible = self.impossible or f"'$' in the middle of the pattern (offset {at})"
                            continue
                        tail = ""
                    joined.append((s1 or s2, head + tail, e1 or e2))
            if len(joined) > PATTERN_BRANCH_COUNT_MAX:
                raise _PatternError(f"anchors in groups make more than {PATTERN_BRANCH_COUNT_MAX} branches")
            branches = joined
        if self.depth == 0 and self._peek() == ")":
            raise _PatternError(f"unbalanced ')' at offset {self.i}")
        return branches

    def _quantifier(self) -> str:
        c = self._peek()
        if c in ("*", "+", "?"):
            self.i += 1
            q = c
        elif c == "{":
            close = self.p.find("}", self.i)
            body = self.p[self.i + 1 : close] if close > 0 else ""
            parts = body.split(",")
            if close < 0 or not (1 <= len(parts) <= 2) or not parts[0].isdigit() or not all(
                x.isdigit() for x in parts[1:] if x
            ):
                return ""  # not a quantifier: `{` is a literal (ECMA annex B)
            counts = [int(x) for x in parts if x]
            if any(n > REPEAT_COUNT_MAX for n in counts):
                raise _PatternError(f"a count above {REPEAT_COUNT_MAX} at offset {self.i}")
            if len(counts) == 2 and counts[0] > counts[1]:
                raise _PatternError(f"counts out of order at offset {self.i}")
            self.i = close + 1
            q = "{" + body + "}"
        else:
            return ""
        if self._peek() == "?":
            self.i += 1  # lazy: same language
        if self._peek() in ("*", "+", "?", "{") and self._peek() != "{":
            raise _PatternError(f"nothing to repeat at offset {self.i}")
        return q

    def _atom(self) -> str:
        c = self.p[self.i]
        if c == "[":
            return self._set(self._class())
        if c == ".":
            self.i += 1
            return self._set(_DOT)
        if c == "\\":
            return self._set(self._escape(in_class=False))
        if c in "*+?":
            raise _PatternError(f"nothing to repeat at offset {self.i}")
        self.i += 1
        code = ord(c)
        if 0xD800 <= code <= 0xDFFF:
            raise _PatternError(f"a lone surrogate at offset {self.i - 1}")
        return self._set([(code, code)])

    def _set(self, ranges: Ranges | list[tuple[int, int]]) -> str:
        text = _set_regex(tuple(ranges))
        if text is None:
            raise _PatternError("a character class that matches nothing")
        return text

    def _group(self) -> list[tuple[bool, str, bool]]:
        start = self.i
        self.i += 1
        if self._peek() == "?":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i) and self._peek(2) not in ("=", "!"):
                close = self.p.find(">", self.i)
                if close < 0:
                    raise _PatternError(f"unterminated group name at offset {start}")
                self.i = close + 1
            elif self.p.startswith("?=", self.i) and self.depth == 0 and self.p[_group_end(self.p, start):][:1] in ("", "|"):
                # A lookahead that ends a top-level branch: under search semantics `a(?=b)`
                # finds what `ab` finds (what follows the match is free).
                self.i += 2
                self.looking += 1
                try:
                    return self._group_body(start)
                finally:
                    self.looking -= 1
            elif self.lookaheads and self.p.startswith(("?=", "?!"), self.i):
                if self.looking or len(self.looks) >= PATTERN_LOOKAHEADS_MAX:
                    raise _PatternError(
                        f"a lookahead inside a lookahead, or more than {PATTERN_LOOKAHEADS_MAX} inside the pattern, at offset {start} (not supported)"
                    )
                self.i += 2
                self.looking += 1
                try:
                    return self._lookahead(start, self.p[self.i - 1] == "=")
                finally:
                    self.looking -= 1
            else:
                raise _PatternError(f"lookaround or unknown group at offset {start} (not supported)")
        return self._group_body(start)

    def _group_body(self, start: int) -> list[tuple[bool, str, bool]]:
        """The branches of the group opened at `start`, its opening read."""
        self.depth += 1
        if self.depth > 100:
            raise _PatternError("groups nested deeper than 100")
        alts = self._alternation()
        self.depth -= 1
        if self._peek() != ")":
            raise _PatternError(f"unclosed group opened at offset {start}")
        self.i += 1
        if alts and not any(s or e or _MARK in t for s, t, e in alts):
            return [(False, "(?:" + "|".join(text for _, text, _ in alts) + ")", False)]
        return alts

    def _class(self) -> Ranges:
        start = self.i
        self.i += 1
        negated = self._peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        while True:
            c = self._peek()
            if c == "":
                raise _PatternError(f"unclosed character class opened at offset {start}")
            if c == "]":
                self.i += 1
                break
            lo = self._class_atom()
            if self._peek() == "-" and self._peek(1) not in ("]", ""):
                self.i += 1
                hi = self._class_atom()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    raise _PatternError(f"a range with a class escape in the class at offset {start}")
                if lo[0][0] > hi[0][0]:
                    raise _PatternError(f"a range out of order in the class at offset {start}")
                ranges.append((lo[0][0], hi[0][0]))
            else:
                ranges += lo
        ranges = normalize(ranges)
        return complement(ranges) if negated else ranges

    def _class_atom(self) -> Ranges:
        c = self.p[self.i]
        if c == "\\":
            if self._peek(1) == "b":
                self.i += 2
                return [(0x08, 0x08)]
            return self._escape(in_class=True)
        self.i += 1
        return [(ord(c), ord(c))]

    def _escape(self, in_class: bool) -> Ranges:
        at = self.i
        c = self._peek(1)
        self.i += 2
        if c == "":
            raise _PatternError("a pattern ending in a backslash")
        if c.lower() in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[c.lower()]
            return complement(ranges) if c.isupper() else ranges
        if c in _CHAR_ESCAPES and not (c == "0" and self._peek().isdigit()):
            code = _CHAR_ESCAPES[c]
        elif c == "x":
            code = self._hex(2, at)
        elif c == "u":
            if self._peek() == "{":
                close = self.p.find("}", self.i)
                if close < 0:
                    raise _PatternError(f"bad \\u{{...}} escape at offset {at}")
                code = self._parse_hex(self.p[self.i + 1 : close], at)
                self.i = close + 1
            else:
                code = self._hex(4, at)
                if 0xD800 <= code <= 0xDBFF and self.p.startswith("\\u", self.i):
                    save = self.i
                    self.i += 2
                    low = self._hex(4, at)
                    if 0xDC00 <= low <= 0xDFFF:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    else:
                        self.i = save
        elif c == "c" and self._peek().isalpha():
            code = ord(self._peek()) % 32
            self.i += 1
        elif c in "bB":
            raise _PatternError(f"word boundary \\{c} at offset {at} (not supported)")
        elif c.isdigit():
            raise _PatternError(f"backreference \\{c} at offset {at} (not supported)")
        elif c in "pP":
            raise _PatternError(f"Unicode property \\{c}{{...}} at offset {at} (not supported)")
        elif c == "k":
            raise _PatternError(f"named backreference at offset {at} (not supported)")
        else:
            code = ord(c)  # identity escape: `\.`, `\-`, `\/` ...
        if 0xD800 <= code <= 0xDFFF:
            raise _PatternError(f"a lone surrogate at offset {at}")
        return [(code, code)]

    def _hex(self, count: int, at: int) -> int:
        text = self.p[self.i : self.i + count]
        self.i += count
        return self._parse_hex(text if len(text) == count else "", at)

    @staticmethod
    def _parse_hex(text: str, at: int) -> int:
        try:
            code = int(text, 16)
        except ValueError:
            raise _PatternError(f"bad hex escape at offset {at}") from None
        if code > CODE_POINT_MAX:
            raise _PatternError(f"code point above U+10FFFF at offset {at}")
        return code


def _repeated_with_anchors(parts: list[tuple[bool, str, bool]], q: str, at: int) -> list[tuple[bool, str, bool]]:
    """The branches of a group repeated by `q` whose own branches (anchored at start, text,
    anchored at end) hold anchors. Iterations anchored at the start can only come first, all
    but the last of them empty; iterations anchored at the end only last, all but the first
    empty. So a result branch is: an optional start-anchored iteration, plain ones, an
    optional end-anchored one, the plain ones counted so that all of them meet `q`'s bounds
    (any count, when an iteration that can be empty may repeat). An iteration anchored at
    both ends is the only one that is not empty. Exact."""
    lo, hi = _quantifier_bounds(q)
    plain = list(dict.fromkeys(t for s, t, e in parts if not s and not e))
    starts = list(dict.fromkeys(t for s, t, e in parts if s and not e))
    ends = list(dict.fromkeys(t for s, t, e in parts if e and not s))
    boths = list(dict.fromkeys(t for s, t, e in parts if s and e))

    def nullable(texts: list[str]) -> bool:
        return any(not t or _matches_empty(t) for t in texts)

    def alternation(words: list[str]) -> str:
        return words[0] if len(words) == 1 and len(words[0]) <= 1 else "(?:" + "|".join(words) + ")"

    def group(texts: list[str]) -> str:
        """One iteration of these texts ("" among them: or none)."""
        words = [t for t in texts if t]
        if not words:
            return ""
        return alternation(words) + "?" if len(words) < len(texts) else alternation(words)

    def middle(anchored: int, padded: bool) -> str | None:
        """The plain iterations beside `anchored` anchored ones (None: the bounds forbid)."""
        least = 0 if padded or nullable(plain) else max(lo - anchored, 0)
        most = None if hi is None else hi - anchored
        if most is not None and most < 0:
            return None
        words = [t for t in plain if t]
        if not words or most == 0:
            return "" if least == 0 else None
        return alternation(words) + ("{%d,}" % least if most is None else "{%d,%d}" % (least, most))

    out: list[tuple[bool, str, bool]] = []
    for first in ([], starts) if starts else ([],):
        for last in ([], ends) if ends else ([],):
            text = middle(bool(first) + bool(last), nullable(first) or nullable(last))
            if text is not None:
                out.append((bool(first), group(first) + text + group(last), bool(last)))
    if boths and (hi is None or hi >= 1) and (lo <= 1 or nullable([t for _, t, _ in parts])):
        out.append((True, group(boths), True))
    if sum(len(t) for _, t, _ in out) > PATTERN_ANCHORED_TEXT_MAX:
        raise _PatternError(f"anchors in repeated groups make a regex of more than {PATTERN_ANCHORED_TEXT_MAX} characters (offset {at})")
    return out


@functools.lru_cache(maxsize=1024)
def _matches_empty(text: str) -> bool:
    """Whether a translated regex matches the empty string."""
    if _MARK in text:
        raise _PatternError("an anchor next to a lookahead (not supported)")
    return re.fullmatch(text, "") is not None


def _quantifier_bounds(q: str) -> tuple[int, int | None]:
    """A quantifier's (least, most) counts; most None: unbounded."""
    if q in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
    body = q[1:-1]
    least, comma, most = body.partition(",")
    return int(least), (int(most) if most else None) if comma else int(least)


# A pattern that is a plain text anchored at both ends (`pattern_to_json_regex`'s shortcut): ASCII
# letters, digits, spaces and the punctuation that means nothing in ECMA syntax outside a class
# (quantifier braces and `]` left out), and how the translation spells it.
_PLAIN_PUNCTUATION = "!#%&',-/:;<=>@_`~"
_ANCHORED_PLAIN = re.compile(r"\^[A-Za-z0-9 " + re.escape(_PLAIN_PUNCTUATION) + r"]*\$")
_PLAIN_PUNCTUATION_ESCAPES = str.maketrans(
    {chr(i): "\\" + chr(i) if chr(i) in _PLAIN_PUNCTUATION else chr(i) for i in range(0x80)}
)


@functools.lru_cache(maxsize=4096)
def pattern_to_json_regex(pattern: str) -> str:
    """Translate an ECMA-262 `pattern` (search semantics) into a regex over the JSON-escaped
    body of a string (without the quotes). See the module docstring for what is exact.

    Raises:
        GrammarError: the pattern is malformed or uses an unsupported construct.
    """
    if _ANCHORED_PLAIN.fullmatch(pattern):
        # `^text$` of letters, digits, spaces and punctuation that is no ECMA syntax: the text
        # with a backslash before each punctuation mark, which is how the parser below spells
        # it, at C speed instead of ~3,000 bytecodes a pattern (MaskBench service-schema's
        # checker translates 238 `^Task@N$` patterns for its task names: ~8 ms of its first
        # compile; the translations are cached for the process).
        return pattern[1:-1].translate(_PLAIN_PUNCTUATION_ESCAPES)
    try:
        return _EcmaPattern(pattern).translate()
    except _PatternError as err:
        raise GrammarError(f"pattern {pattern!r}: {err}") from None



def _group_end(pattern: str, start: int) -> int:
    """The index just past the `)` that closes the group opened at `start`, skipping escapes
    and classes (in ECMA `[]` and `[^]` are classes of their own); -1 when unclosed."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _has_top_level_bar(pattern: str) -> bool:
    """Whether `pattern` has a `|` outside every group and class."""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            end = _group_end(pattern, i)
            if end < 0:
                return False  # malformed: the translation says so
            i = end
        elif c == "|":
            return True
        else:
            i += 1
    return False


def _class_end(pattern: str, start: int) -> int:
    """The index just past the `]` that closes the class opened at `start` (or the end)."""
    i = start + 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _lookaheads(pattern: str, i: int) -> tuple[list[tuple[bool, str]], int]:
    """The lookahead groups `(?=X)` / `(?!X)` in a row from `i`: (positive, X) each, and the
    index after them."""
    found = []
    while pattern.startswith(("(?=", "(?!"), i):
        end = _group_end(pattern, i)
        if end < 0:
            raise _PatternError(f"unclosed group opened at offset {i}")
        found.append((pattern[i + 2] == "=", pattern[i + 3 : end - 1]))
        i = end
    return found, i


# A single character: `.`, a class, or an escape of one (what a tempered loop consumes).
_ONE_CHAR = re.compile(r"\.|\[(?:\\.|[^\]\\])*\]|\\[^1-9bBkpPux]")


@functools.lru_cache(maxsize=1024)
def pattern_parts(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An ECMA `pattern` as the regexes over a string's JSON-escaped body that a string it finds
    matches (every one) and does not match (any): its one translation (`pattern_to_json_regex`),
    or, for lookaheads said exactly with intersections, `pattern_lookahead_parts`.

    Raises:
        GrammarError: the translation's error, when lookaheads do not help either.
    """
    try:
        return (pattern_to_json_regex(pattern),), ()
    except GrammarError as err:
        try:
            return pattern_lookahead_parts(pattern)
        except GrammarError:
            pass
        try:
            return (_translate(pattern),), ()
        except _PatternError:
            raise err from None


@functools.lru_cache(maxsize=1024)
def pattern_lookahead_parts(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An ECMA `pattern` with lookaheads in the two places where they can be said exactly with
    intersections: the regexes over a string's JSON-escaped body that it must match (every
    one) and those it must not match (any), for `Lexeme.and_patterns` / `not_patterns`.

    - Right after a leading `^`, with no top-level `|`: `^(?!X)(?=Y)R` holds on the strings
      that `^R` finds, `^Y` finds and `^X` does not (a lookahead at the start sees the whole
      string).
    - A tempered loop over the whole string, `^(?:(?!X)C)*$` with C one character (`.`, a
      class, an escape): the strings of C's characters in which X matches nowhere, i.e. that
      `X` (search semantics) does not find. Refused when X can match the empty string.

    Raises:
        GrammarError: anything else, or a part the translation refuses.
    """
    try:
        return _lookahead_parts(pattern)
    except _PatternError as err:
        raise GrammarError(f"pattern {pattern!r}: {err}") from None


def _lookahead_parts(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not pattern.startswith("^") or _has_top_level_bar(pattern):
        raise _PatternError("a lookaround that is not at the start of the pattern (not supported)")
    heads, rest_at = _lookaheads(pattern, 1)
    if heads:
        musts = [_translate_plain("^" + pattern[rest_at:])]
        musts += [_translate_plain(f"^(?:{x})") for positive, x in heads if positive]
        nots = [_translate_plain(f"^(?:{x})") for positive, x in heads if not positive]
        return tuple(musts), tuple(nots)
    for opener in ("^(?:", "^("):
        if pattern.startswith(opener) and pattern.endswith(")*$"):
            end = _group_end(pattern, 1)
            heads, char_at = _lookaheads(pattern, len(opener))
            char = pattern[char_at : end - 1]
            if end != len(pattern) - 2 or not heads or not all(not positive for positive, _ in heads):
                break
            if not _ONE_CHAR.fullmatch(char):
                break
            nots = []
            for _, x in heads:
                if re.fullmatch(_translate_plain(f"^(?:{x})$"), ""):
                    raise _PatternError(f"a tempered lookahead that matches the empty string: (?!{x})")
                nots.append(_translate_plain(x))
            return (_translate_plain(f"^(?:{char})*$"),), tuple(nots)
    raise _PatternError("a lookaround that is not at the start of the pattern (not supported)")


def _translate(pattern: str) -> str:
    """A pattern's body regex, lookaheads anywhere outside repetition included."""
    return _EcmaPattern(pattern, lookaheads=True).translate()


def _translate_plain(pattern: str) -> str:
    return _EcmaPattern(pattern).translate()

# =============================================================================================
# Formats (ASCII-only, so the JSON-escaped text is the text itself)
# =============================================================================================

# RFC 3339 full-date with the days of each month; 29 February only in leap years.
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (
    r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = (
    rf"P(?:[0-9]+W|[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?(?:{_DUR_TIME})?|[0-9]+M(?:[0-9]+D)?(?:{_DUR_TIME})?"
    rf"|[0-9]+D(?:{_DUR_TIME})?|{_DUR_TIME})"
)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_OCTET = int_range_regex(0, 255)
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_IPV6 = "(?:" + "|".join(
    [
        rf"(?:{_H16}:){{7}}{_H16}",
        rf"(?:{_H16}:){{1,7}}:",
        rf"(?:{_H16}:){{1,6}}:{_H16}",
        rf"(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}",
        rf"(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}",
        rf"(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}",
        rf"(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}",
        rf"{_H16}:(?::{_H16}){{1,6}}",
        rf":(?:(?::{_H16}){{1,7}}|:)",
        rf"(?:{_H16}:){{6}}{_IPV4}",
        rf"::(?:{_H16}:){{0,5}}{_IPV4}",
        rf"(?:{_H16}:){{1,5}}:(?:{_H16}:){{0,4}}{_IPV4}",
    ]
) + ")"
# RFC 3986, section 3 and appendix A; an IPv6 literal host is any bracketed hex digits, colons and
# dots with a colon (a superset: the exact IPv6 regex made URI masks twice as slow). RFC 3987's
# IRIs are the same forms with more characters: `ucs` (ucschar) beside the unreserved ones and
# `private` (iprivate) in the query.
_URI_PCT = r"%[0-9A-Fa-f]{2}"


def _uri_forms(ucs: str = "", private: str = "") -> tuple[str, str]:
    """(absolute, relative reference): RFC 3986's `URI` and `relative-ref`, or RFC 3987's
    `IRI` and `irelative-ref` with the non-ASCII classes `ucs` and `private` (regex text
    inside a class; empty for URIs)."""
    pchar = rf"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@{ucs}]|{_URI_PCT})"
    query = rf"(?:{pchar}|[/?{private}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    authority = (
        rf"(?:(?:[A-Za-z0-9\-._~!$&'()*+,;=:{ucs}]|{_URI_PCT})*@)?"
        rf"(?:\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\]|\[v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;={ucs}]|{_URI_PCT})*)"
        r"(?::[0-9]*)?"
    )
    abempty = rf"(?:/{pchar}*)*"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    # hier-part and relative-part share "//authority path-abempty" and path-absolute; they
    # differ in the rootless path (a relative reference's first segment has no colon).
    rooted = rf"//{authority}{abempty}|/(?:{pchar}+{abempty})?"
    absolute = rf"[A-Za-z][A-Za-z0-9+.\-]*:(?:{rooted}|{pchar}+{abempty})?{tail}"
    relative = rf"(?:{rooted}|(?:[A-Za-z0-9\-._~!$&'()*+,;=@{ucs}]|{_URI_PCT})+{abempty})?{tail}"
    return absolute, relative


_URI, _URI_RELATIVE = _uri_forms()
# RFC 3987, section 2.2: ucschar and iprivate (the planes' last two code points left out).
_UCSCHAR = class_regex(
    ((0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF))
    + tuple((plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14))
    + ((0xE1000, 0xEFFFD),)
)[1:-1]
_IPRIVATE = class_regex(((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)))[1:-1]
_IRI, _IRI_RELATIVE = _uri_forms(_UCSCHAR, _IPRIVATE)
# RFC 5321 mailbox: a dot-atom local part (quoted local parts are not accepted: a subset), a
# host name or an address literal.
_EMAIL_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_EMAIL = rf"{_EMAIL_ATOM}(?:\.{_EMAIL_ATOM})*@(?:{_HOSTNAME}|\[(?:{_IPV4}|IPv6:{_IPV6})\])"
# RFC 6570: literals (printable ASCII but space " ' % < > \\ ^ ` { | }, non-ASCII characters raw,
# percent escapes) and expressions `{op? varname(:prefix|*)?, ...}`.
_UT_VARCHAR = rf"(?:[A-Za-z0-9_]|{_URI_PCT})"
_UT_VARSPEC = rf"{_UT_VARCHAR}(?:\.?{_UT_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = (
    rf"(?:[!#$&(-;=?-\[\]_a-z~]|[^\x00-\x7f]|{_URI_PCT}|\{{[+#./;?&=,!@|]?{_UT_VARSPEC}(?:,{_UT_VARSPEC})*\}})*"
)
FORMAT_REGEXES: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_URI_RELATIVE})",
    "uri-template": _URI_TEMPLATE,
    "iri": _IRI,
    "iri-reference": rf"(?:{_IRI}|{_IRI_RELATIVE})",
}


# =============================================================================================
