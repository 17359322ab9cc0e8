"""Text to tokens at the edge of an output that is still growing.

`encode_in_context` tokenizes bytes as the tokenizer would write them right after the tokens
already in the output; `tokenize_partial` keeps only the tokens no later bytes can change (the
rule and its examples are in `tokensieve._decoding.fastforward`, which heals forced bytes with
the same pieces plus the grammar). Encodings are memoised per tokenizer.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._core.handles import token_heal_position

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

LOOKBACK_DEFAULT: Final = 4
# Committed tokens put in front of forced bytes when encoding them (llguidance uses one).
CONTEXT_TOKENS_DEFAULT: Final = 1
_CACHE_ENTRIES_MAX: Final = 1 << 15
_CACHE_KEY_BYTES_MAX: Final = 512


class _TokenizerFacts:
    """Per-tokenizer memos: the longest text token and encodings."""

    __slots__ = ("token_length_max", "encodings")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.token_length_max = tokenizer.text_token_length_max
        self.encodings: dict[bytes, tuple[int, ...]] = {}


_facts_by_tokenizer: weakref.WeakKeyDictionary[Any, _TokenizerFacts] = weakref.WeakKeyDictionary()


def _facts(tokenizer: Tokenizer) -> _TokenizerFacts:
    facts = _facts_by_tokenizer.get(tokenizer)
    if facts is None:
        facts = _facts_by_tokenizer[tokenizer] = _TokenizerFacts(tokenizer)
    return facts


def _remember(cache: dict[bytes, Any], key: bytes, value: Any) -> None:
    if len(key) <= _CACHE_KEY_BYTES_MAX:
        if len(cache) >= _CACHE_ENTRIES_MAX:
            cache.clear()
        cache[key] = value


def _encode(tokenizer: Tokenizer, facts: _TokenizerFacts, data: bytes) -> tuple[int, ...]:
    found = facts.encodings.get(data)
    if found is None:
        found = tuple(tokenizer.encode(data))
        _remember(facts.encodings, data, found)
    return found


def _context(tokenizer: Tokenizer, recent_tokens: Sequence[int] | None, count: int) -> list[int]:
    """The last `count` recent tokens, stopping at a special token (its text is not text)."""
    if not recent_tokens or count <= 0:
        return []
    out: list[int] = []
    for token in reversed(recent_tokens[-count:]):
        if tokenizer.is_special(token):
            break
        out.append(token)
    out.reverse()
    return out


def encode_in_context(
    tokenizer: Tokenizer, data: bytes, recent_tokens: Sequence[int] | None, *, context_count: int = CONTEXT_TOKENS_DEFAULT
) -> list[int]:
    """Tokens for `data` as the tokenizer would write them after `recent_tokens`.

    Encodes the recent tokens' bytes followed by `data` and strips the recent tokens; when the
    encoding does not start with them (`data` would merge into them), encodes `data` alone.
    `decode` of the result is always `data`.
    """
    facts = _facts(tokenizer)
    context = _context(tokenizer, recent_tokens, context_count)
    if context:
        ids = _encode(tokenizer, facts, tokenizer.decode(context) + data)
        if list(ids[: len(context)]) == context:
            return list(ids[len(context) :])
    return list(_encode(tokenizer, facts, data))


def _chop_position(
    tokenizer: Tokenizer,
    facts: _TokenizerFacts,
    data: bytes,
    tokens: Sequence[int],
    lookback: int,
    heal: Callable[[bytes, int], int] | None,
) -> int:
    """The earliest byte offset in `data` from which a longer (allowed) token could start.

    Only the bytes of the last `lookback` tokens are examined; `len(data)` when nothing is found.
    One call into the core: `heal(data, start)` (a matcher's `heal_position`, which also asks
    the grammar), or the tokenizer's trie alone.
    """
    end = len(data)
    if lookback <= 0 or not tokens:
        return end
    tail_bytes = sum(len(tokenizer.token_bytes(t)) for t in tokens[-lookback:])
    start = max(0, end - tail_bytes, end - facts.token_length_max + 1)
    if start >= end:
        return end
    if heal is None:
        return token_heal_position(tokenizer, data, start)
    return heal(data, start)


def _drop_past(tokenizer: Tokenizer, tokens: list[int], total_bytes: int, keep_bytes: int) -> int:
    """Drop trailing tokens until they end at or before `keep_bytes`; return their end."""
    end = total_bytes
    while tokens and end > keep_bytes:
        end -= len(tokenizer.token_bytes(tokens.pop()))
    return end


def tokenize_partial(
    tokenizer: Tokenizer,
    new_bytes: bytes,
    recent_tokens: Sequence[int] | None = None,
    *,
    lookback: int = LOOKBACK_DEFAULT,
) -> tuple[list[int], bytes]:
    """Tokenize the start of `new_bytes` that no later bytes can change.

    Trailing tokens are dropped while some token strictly extends a suffix of the bytes of the
    last `lookback` tokens (no grammar: any continuation is possible).

    Args:
        tokenizer: the tokenizer.
        new_bytes: bytes to append to the output.
        recent_tokens: tokens already in the output; the last one is used as context for the
            tokenizer's pre-tokenization (needed after punctuation and spaces).
        lookback: how many trailing tokens may be dropped at most.

    Returns:
        (tokens, leftover): `decode(tokens) + leftover == new_bytes`.
    """
    data = bytes(new_bytes)
    if not data:
        return [], b""
    facts = _facts(tokenizer)
    tokens = encode_in_context(tokenizer, data, recent_tokens)
    keep = _chop_position(tokenizer, facts, data, tokens, lookback, None)
    end = _drop_past(tokenizer, tokens, len(data), keep)
    return tokens, data[end:]
