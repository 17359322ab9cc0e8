"""The regex dialect of Lark terminals (Python `re` syntax with flags) rewritten into the
core's regex syntax, and literals, ranges and repetitions as regexes (`_Rx`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


# ----------------------------------------------------------------------------------------------
# Regex building: patterns with a precedence level, so they can be combined with few groups.
# ----------------------------------------------------------------------------------------------

_ATOM, _QUANT, _SEQ, _ALT = 0, 1, 2, 3
_REGEX_META = frozenset("\\.^$|?*+()[]{}")
_QUANT_BRACE_RE = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_FLAG_GROUP_RE = re.compile(r"\(\?([A-Za-z-]*)([:)])")


class _PatternError(Exception):
    """A problem inside one /regex/; turned into a GrammarError at the regex."""


@dataclass(frozen=True)
class _Rx:
    """A regex and how tightly it binds: `_ATOM` (one atom), `_QUANT` (a quantified atom),
    `_SEQ` (a concatenation) or `_ALT` (has a top-level `|`). `literal` is the exact text when
    the regex matches only that text (case-sensitive literals), else None."""

    pattern: str
    level: int
    literal: str | None = None


_EMPTY_RX = _Rx("", _SEQ, "")


_LITERAL_ESCAPES = {ord(ch): "\\" + ch for ch in _REGEX_META} | {
    code: f"\\x{code:02X}" for code in (*range(0x20), 0x7F)
}


def _literal_rx(text: str, ci: bool) -> _Rx:
    if not ci:  # one `str.translate`: long alternations of literals spend their time here
        return _Rx(text.translate(_LITERAL_ESCAPES), _ATOM if len(text) == 1 else _SEQ, text)
    parts = []
    for ch in text:
        if ci and ch.isascii() and ch.isalpha():
            parts.append(f"[{ch.lower()}{ch.upper()}]")
        elif ch in _REGEX_META:
            parts.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            parts.append(f"\\x{ord(ch):02X}")
        else:
            parts.append(ch)
    has_letters = ci and any(c.isascii() and c.isalpha() for c in text)
    return _Rx("".join(parts), _ATOM if len(text) == 1 else _SEQ, None if has_letters else text)


def _class_char(ch: str) -> str:
    """One character written for use inside `[...]`."""
    if ch in "\\]-[^":
        return "\\" + ch
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02X}"
    return ch


def _range_rx(lo: str, hi: str) -> _Rx:
    body = _class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}"
    return _Rx(f"[{body}]", _ATOM)


def _concat_rx(parts: list[_Rx]) -> _Rx:
    parts = [p for p in parts if p.pattern != ""]
    if not parts:
        return _EMPTY_RX
    if len(parts) == 1:
        return parts[0]
    pattern = "".join(f"(?:{p.pattern})" if p.level == _ALT else p.pattern for p in parts)
    literals = [p.literal for p in parts]
    literal = "".join(t for t in literals if t is not None) if None not in literals else None
    return _Rx(pattern, _SEQ, literal)


def _alt_rx(parts: list[_Rx]) -> _Rx:
    if len(parts) == 1:
        return parts[0]
    return _Rx("|".join(p.pattern for p in parts), _ALT)


def _repeat_rx(part: _Rx, low: int, high: int | None) -> _Rx:
    if high == 0 or part.pattern == "":
        return _EMPTY_RX
    if low == high == 1:
        return part
    body = part.pattern if part.level == _ATOM else f"(?:{part.pattern})"
    if (low, high) in ((0, 1), (0, None), (1, None)):
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}[(low, high)]
    elif high is None:
        suffix = f"{{{low},}}"
    else:
        suffix = f"{{{low}}}" if low == high else f"{{{low},{high}}}"
    literal = part.literal * low if low == high and part.literal is not None else None
    return _Rx(body + suffix, _QUANT, literal)


def _regex_rx(pattern: str, flags: str) -> _Rx:
    """A /regex/ with flags → a flag-free pattern with its level.

    Raises:
        _PatternError: unbalanced parentheses, an unclosed class, an unsupported inline flag.
    """
    tokens = _regex_tokens(pattern)
    _check_balanced(tokens)
    if tokens and tokens[0] == ("anchor", "^"):
        tokens = tokens[1:]
    if tokens and tokens[-1] == ("anchor", "$"):
        tokens = tokens[:-1]
    active = frozenset(flags) & frozenset("is")
    return _Rx(_rewrite_regex(tokens, active), _regex_level(tokens))


def _regex_tokens(pattern: str) -> list[tuple[str, str]]:
    """Split a pattern into (kind, text) tokens: escape, class, open, open_flags (text = flags),
    flags (an inline `(?i)`, text = flags), close, alt, quant, dot, anchor, char."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            j = _escape_end(pattern, i)
            out.append(("escape", pattern[i:j]))
        elif c == "[":
            j = _class_end(pattern, i)
            out.append(("class", pattern[i:j]))
        elif c == "(":
            kind, text, j = _group_open(pattern, i)
            out.append((kind, text))
        elif c == "{" and _QUANT_BRACE_RE.match(pattern, i):
            m = _QUANT_BRACE_RE.match(pattern, i)
            assert m is not None
            j = m.end() + (1 if pattern[m.end() : m.end() + 1] == "?" else 0)
            out.append(("quant", pattern[i:j]))
        elif c in "*+?":
            j = i + 2 if pattern[i + 1 : i + 2] in ("?", "+") and i + 1 < len(pattern) else i + 1
            out.append(("quant", pattern[i:j]))
        else:
            kind = {")": "close", "|": "alt", ".": "dot", "^": "anchor", "$": "anchor"}.get(c, "char")
            j = i + 1
            out.append((kind, c))
        i = j
    return out


def _escape_end(pattern: str, i: int) -> int:
    """Index after the escape sequence starting at `pattern[i] == "\\"`."""
    if i + 1 >= len(pattern):
        raise _PatternError("the regex ends with a lone backslash")
    kind = pattern[i + 1]
    if kind in "xupP" and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 2)
        return len(pattern) if close < 0 else close + 1
    width = {"x": 4, "u": 6, "p": 3, "P": 3}.get(kind, 2)
    return min(i + width, len(pattern))


def _class_end(pattern: str, i: int) -> int:
    """Index after the character class starting at `pattern[i] == "["` (a `]` right after `[`
    or `[^` is a literal, as in the core)."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    while j < len(pattern):
        if pattern[j] == "\\":
            j = _escape_end(pattern, j)
        elif pattern[j] == "]":
            return j + 1
        else:
            j += 1
    raise _PatternError("unclosed character class '['")


def _group_open(pattern: str, i: int) -> tuple[str, str, int]:
    """Classify the group opener at `pattern[i] == "("`: (kind, text, index after it)."""
    m = _FLAG_GROUP_RE.match(pattern, i)
    if m is not None and m.group(1) and re.fullmatch(r"[A-Za-z]*(?:-[A-Za-z]*)?", m.group(1)):
        return ("flags" if m.group(2) == ")" else "open_flags"), m.group(1), m.end()
    for opener in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
        if pattern.startswith(opener, i):
            return "open", opener, i + len(opener)
    if pattern.startswith("(?P<", i) or pattern.startswith("(?<", i):
        close = pattern.find(">", i)
        end = len(pattern) if close < 0 else close + 1
        return "open", pattern[i:end], end
    return "open", "(", i + 1


def _check_balanced(tokens: list[tuple[str, str]]) -> None:
    depth = 0
    for kind, _ in tokens:
        if kind in ("open", "open_flags"):
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth < 0:
                raise _PatternError("unbalanced ')' (write \\) for a literal parenthesis)")
    if depth > 0:
        raise _PatternError("unclosed '(' (write \\( for a literal parenthesis)")


def _regex_level(tokens: list[tuple[str, str]]) -> int:
    depth = 0
    pieces = 0
    quantified = False
    alternation = False
    for kind, _ in tokens:
        if kind in ("open", "open_flags"):
            if depth == 0:
                pieces += 1
                quantified = False
            depth += 1
        elif kind == "close":
            depth -= 1
        elif depth > 0 or kind == "flags":
            continue
        elif kind == "alt":
            alternation = True
        elif kind == "quant":
            quantified = True
        else:
            pieces += 1
            quantified = False
    if alternation:
        return _ALT
    if pieces == 1:
        return _QUANT if quantified else _ATOM
    return _SEQ


def _merge_flags(active: frozenset[str], spec: str) -> frozenset[str]:
    """Apply an inline flag spec such as `i`, `is`, `-s`, `i-s` to the active flags."""
    result = set(active)
    on = True
    for ch in spec:
        if ch == "-":
            on = False
        elif ch in "is":
            if on:
                result.add(ch)
            else:
                result.discard(ch)
        elif ch not in "muU":
            raise _PatternError(f"inline flag {ch!r} is not supported (only i and s)")
    return frozenset(result)


def _rewrite_regex(tokens: list[tuple[str, str]], flags: frozenset[str]) -> str:
    """Render tokens with the `i` and `s` flags compiled away (inline flags included)."""
    stack = [flags]
    out: list[str] = []
    for kind, text in tokens:
        active = stack[-1]
        if kind == "flags":
            stack[-1] = _merge_flags(active, text)
        elif kind == "open_flags":
            out.append("(?:")
            stack.append(_merge_flags(active, text))
        elif kind == "open":
            out.append(text)
            stack.append(active)
        elif kind == "close":
            out.append(")")
            stack.pop()
        elif kind == "dot":
            out.append(r"[\s\S]" if "s" in active else ".")
        elif kind in ("char", "escape") and "i" in active:
            ch = text if kind == "char" else _escape_char(text, in_class=False)
            out.append(f"[{ch.lower()}{ch.upper()}]" if ch and ch.isascii() and ch.isalpha() else text)
        elif kind == "class" and "i" in active:
            out.append(_fold_class(text))
        else:
            out.append(text)
    return "".join(out)


_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "e": "\x1b", "0": "\0"}


def _escape_char(escape: str, *, in_class: bool) -> str | None:
    """The one character an escape sequence stands for, or None (`\\d`, unknown escapes)."""
    kind = escape[1:2]
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind]
    if kind == "b":
        return "\b" if in_class else None
    if kind in ("x", "u"):
        digits = escape[3:-1] if escape[2:3] == "{" else escape[2:]
        if not re.fullmatch(r"[0-9a-fA-F]{1,6}", digits):
            return None
        code = int(digits, 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else None
    if not kind or kind.isalnum():
        return None
    return kind


def _fold_class(text: str) -> str:
    """A `[...]` class with the other case of every ASCII letter it names added."""
    body_end = len(text) - 1
    i = 1
    negated = text[1:2] == "^"
    if negated:
        i += 1
    items: list[str] = []
    extra: list[tuple[int, int]] = []
    while i < body_end:
        lo_text, lo, i = _class_item(text, i)
        if lo is not None and text[i : i + 1] == "-" and i + 1 < body_end:
            hi_text, hi, j = _class_item(text, i + 1)
            if hi is not None:
                items.append(f"{lo_text}-{hi_text}")
                extra.extend(_case_partners(ord(lo), ord(hi)))
                i = j
                continue
        items.append(lo_text)
        if lo is not None:
            extra.extend(_case_partners(ord(lo), ord(lo)))
    for a, b in extra:
        items.append(chr(a) if a == b else f"{chr(a)}-{chr(b)}")
    return "[" + ("^" if negated else "") + "".join(items) + "]"


def _class_item(text: str, i: int) -> tuple[str, str | None, int]:
    """One class member at `text[i]`: (rendered text, its character or None, next index)."""
    if text[i] == "\\":
        j = _escape_end(text, i)
        ch = _escape_char(text[i:j], in_class=True)
        return (text[i:j] if ch is None else _class_char(ch)), ch, j
    return _class_char(text[i]), text[i], i + 1


def _case_partners(lo: int, hi: int) -> list[tuple[int, int]]:
    """The other-case ranges of the ASCII letters in `lo..hi`."""
    out = []
    a, b = max(lo, ord("a")), min(hi, ord("z"))
    if a <= b:
        out.append((a - 32, b - 32))
    a, b = max(lo, ord("A")), min(hi, ord("Z"))
    if a <= b:
        out.append((a + 32, b + 32))
    return out


