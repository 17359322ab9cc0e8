"""llguidance's `%regex {"substring_…": …}`: a lexeme matching any contiguous run of chunks.

`substring_chunks: [c0, c1, …]` matches `c[n] + … + c[m-1]` for any `0 <= n <= m <= len`
(the empty text too); `substring_words: s` splits `s` into runs of whitespace, of word
characters (letters, digits, `_`) and of other characters; `substring_chars: s` into characters.

The pattern is built by halves, since a regex text cannot share the tails that llguidance's
suffix automaton shares, and the core bounds group nesting: for chunks W = U V,

    factors(W)  = factors(U) | factors(V) | suffixes(U) prefixes(V)
    prefixes(W) = prefixes(U) | U prefixes(V)
    suffixes(W) = suffixes(V) | suffixes(U) V

(each set with the empty text). The text is O(n log² n) for n chunks and its groups nest
O(log n) deep; `SUBSTRING_CHUNK_COUNT_MAX` bounds n.
"""

from __future__ import annotations

from .regex import _literal_rx

SUBSTRING_CHUNK_COUNT_MAX = 2_000
_FIELDS = ("substring_chunks", "substring_words", "substring_chars")


class SubstringError(ValueError):
    """A malformed `%regex` object; the message says what to change."""


def _char_class(ch: str) -> int:
    """0 whitespace, 1 word character, 2 other (Rust's `char` classes, as llguidance splits)."""
    if ch.isspace() and ch not in "\x1c\x1d\x1e\x1f":  # Python counts these separators as space; Rust does not
        return 0
    return 1 if ch.isalnum() or ch == "_" else 2


def split_words(text: str) -> list[str]:
    """`text` cut where the character class changes (whitespace / word / other)."""
    chunks: list[str] = []
    start = 0
    for i in range(1, len(text)):
        if _char_class(text[i]) != _char_class(text[i - 1]):
            chunks.append(text[start:i])
            start = i
    if text:
        chunks.append(text[start:])
    return chunks


def substring_pattern(spec: object) -> str:
    """The core regex for a `%regex` object.

    Raises:
        SubstringError: not exactly one known field, a value of the wrong type, or too many chunks.
    """
    if not isinstance(spec, dict):
        raise SubstringError('%regex takes a JSON object, e.g. %regex {"substring_words": "some text"}')
    unknown = [k for k in spec if k not in _FIELDS]
    if unknown:
        raise SubstringError(f"unknown %regex field {unknown[0]!r}; the fields are {', '.join(_FIELDS)}")
    if len(spec) != 1:
        raise SubstringError(f"%regex takes exactly one of {', '.join(_FIELDS)}, not {len(spec)}")
    (field, value), = spec.items()
    if field == "substring_chunks":
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise SubstringError("substring_chunks must be a list of strings")
        chunks = [c for c in value if c]  # an empty chunk adds no text
    elif not isinstance(value, str):
        raise SubstringError(f"{field} must be a string")
    else:
        chunks = split_words(value) if field == "substring_words" else list(value)
    if len(chunks) > SUBSTRING_CHUNK_COUNT_MAX:
        raise SubstringError(
            f"{field} has {len(chunks)} chunks, above {SUBSTRING_CHUNK_COUNT_MAX}; use a shorter text"
        )
    escaped = [_literal_rx(c, False).pattern for c in chunks]
    return _factors(escaped, 0, len(escaped))[0] if escaped else ""


def _factors(escaped: list[str], lo: int, hi: int) -> tuple[str, str, str]:
    """(factors, prefixes, suffixes) of chunks lo..hi as optional groups (recursion depth log n)."""
    if hi - lo == 1:
        one = f"(?:{escaped[lo]})?"
        return one, one, one
    mid = (lo + hi) // 2
    f1, p1, s1 = _factors(escaped, lo, mid)
    f2, p2, s2 = _factors(escaped, mid, hi)
    left, right = "".join(escaped[lo:mid]), "".join(escaped[mid:hi])
    return (
        f"(?:{f1}|{f2}|{s1}{p2})",
        f"(?:{p1}|{left}{p2})",
        f"(?:{s2}|{s1}{right})",
    )
