"""Fast-forward tokens with canonical healing: forced bytes → tokens the model would write.

When the grammar allows exactly one continuation for a while (`Matcher.compute_ff_bytes`), the
host can append those bytes without asking the model. They must be appended as *tokens*, and
the tokens must be the ones the model's tokenizer would have chosen for the whole output, or the
model sees a token boundary it never saw in training and its next choice is skewed.

Two things get this wrong when the forced bytes are tokenized on their own:

- **The left edge.** A tokenizer's pre-tokenizer and merges may look at bytes *before* the
  forced ones. So the bytes of the last committed token are put in front, the whole is encoded,
  and the committed token is stripped again; if the encoding does not start with that token
  (the forced bytes would have merged into it), the forced bytes are encoded alone.
- **The right edge.** The output continues after the forced bytes, and the last forced bytes
  may belong to a longer token that reaches into that continuation: after `{"` a grammar forces
  `order` (keys `orderId` and `orderName`), and `order` alone is a token, but the model writes
  `orderId` as one token. So trailing tokens are dropped ("healed"): look at the bytes of the
  last `lookback` tokens; find the earliest position whose suffix some vocabulary token
  strictly extends *and* the grammar allows that token there; drop every token that reaches
  past that position. The dropped bytes are left for the model, whose mask allows exactly the
  tokens consistent with them.

`tokenize_partial` is the same without a grammar: it chops whenever any longer token exists.
Its tokens decode to a prefix of the input and are a prefix of the tokenization of the input
followed by (almost) any continuation.

Cost per call: one `compute_ff_bytes` (most decoding steps stop there, with no forced bytes);
with forced bytes one `encode` (memoised per tokenizer) and one call into the core per chop
(`Matcher.heal_position`), which walks the look-back window's suffixes in the trie and asks the
grammar only about suffixes that some token extends. No work is
proportional to the vocabulary except once per tokenizer (the longest token's length) and, for
grammars with special-token lexemes, a mask to see whether a special token is forced.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ._errors import ArgumentError

if TYPE_CHECKING:
    from ._matcher import Matcher
    from ._tokenizer import Tokenizer

__all__ = ["compute_ff_tokens", "tokenize_partial", "LOOKBACK_DEFAULT"]

LOOKBACK_DEFAULT: Final = 4
# Committed tokens put in front of forced bytes when encoding them (llguidance uses one).
CONTEXT_TOKENS_DEFAULT: Final = 1
# Forced special tokens (and the forced bytes between them) are followed this many rounds.
_SPECIAL_ROUNDS_MAX: Final = 8
_CACHE_ENTRIES_MAX: Final = 1 << 15
_CACHE_KEY_BYTES_MAX: Final = 512


class _TokenizerFacts:
    """Per-tokenizer memos: the longest text token and encodings."""

    __slots__ = ("token_length_max", "encodings")

    def __init__(self, tokenizer: Tokenizer) -> None:
        kinds = tokenizer._kinds
        self.token_length_max = max(
            (len(data) for token_id, data in enumerate(tokenizer._token_bytes) if kinds[token_id] == 0),
            default=0,
        )
        self.encodings: dict[bytes, tuple[int, ...]] = {}


_facts_by_tokenizer: weakref.WeakKeyDictionary[Any, _TokenizerFacts] = weakref.WeakKeyDictionary()
_specials_by_grammar: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


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
    matcher: Matcher | None,
) -> int:
    """The earliest byte offset in `data` from which a longer (allowed) token could start.

    Only the bytes of the last `lookback` tokens are examined; `len(data)` when nothing is found.
    One call into the core (its trie, and the grammar when `matcher` is given).
    """
    end = len(data)
    if lookback <= 0 or not tokens:
        return end
    tail_bytes = sum(len(tokenizer.token_bytes(t)) for t in tokens[-lookback:])
    start = max(0, end - tail_bytes, end - facts.token_length_max + 1)
    if start >= end:
        return end
    if matcher is None:
        from ._handles import token_heal_position

        return token_heal_position(tokenizer, data, start)
    return matcher.heal_position(data, start)


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


def _grammar_has_specials(grammar: Any) -> bool:
    found = _specials_by_grammar.get(grammar)
    if found is None:
        ir = getattr(grammar, "ir", None)
        lexemes = getattr(ir, "lexemes", None) or []
        found = any(getattr(lexeme, "kind", None) == "special" for lexeme in lexemes)
        _specials_by_grammar[grammar] = found
    return found


def _only_allowed_special(matcher: Matcher) -> int | None:
    """The one allowed token when it is a special token other than EOS, else None."""
    if matcher.is_accepting():
        return None
    mask = matcher.compute_bitmask()
    from ._matcher import numpy_or_none

    np = numpy_or_none()
    if np is None:
        nonzero = [index for index, word in enumerate(mask) if word]
    else:
        nonzero = np.flatnonzero(np.asarray(mask)).tolist()
    if len(nonzero) != 1:
        return None
    bits = int(mask[nonzero[0]]) & 0xFFFFFFFF
    if bits & (bits - 1):
        return None
    only = nonzero[0] * 32 + bits.bit_length() - 1
    tokenizer = matcher.tokenizer
    if only in tokenizer.eos_token_ids or not tokenizer.is_special(only):
        return None
    return only


def _ff_text_tokens(
    matcher: Matcher, lookback: int, recent_tokens: Sequence[int] | None
) -> tuple[list[int], bool]:
    """Healed tokens for the forced bytes, and whether all forced bytes were covered."""
    forced = matcher.compute_ff_bytes()
    if not forced:
        return [], True
    tokenizer = matcher.tokenizer
    facts = _facts(tokenizer)
    tokens = encode_in_context(tokenizer, forced, recent_tokens)
    # Chop until stable: dropping the tail can expose a kept token that a longer allowed token
    # would replace (`":` `[]` → drop `[]` → `":` itself is extended by `":[`).
    end = len(forced)
    dropped = 0
    while tokens and dropped < lookback:
        keep = _chop_position(tokenizer, facts, forced[:end], tokens, lookback - dropped, matcher)
        if keep >= end:
            break
        before = len(tokens)
        end = _drop_past(tokenizer, tokens, end, keep)
        dropped += before - len(tokens)
    return tokens, end == len(forced)


def compute_ff_tokens(
    matcher: Matcher,
    *,
    lookback: int = LOOKBACK_DEFAULT,
    context_tokens: Sequence[int] | None = None,
) -> list[int]:
    """The tokens the grammar forces next, healed so that they are canonical.

    Does not change the matcher's state.

    Args:
        matcher: the matcher.
        lookback: how many trailing tokens of the forced bytes may be dropped because a longer
            token the grammar allows could start inside them (0: no healing).
        context_tokens: the output's recent tokens (the last one is used as tokenizer context).

    Returns:
        Token ids to append, possibly empty. A special token the grammar forces (the only
        allowed token, not EOS) is included as its id, and forcing continues after it.

    Cost: a few µs with no forced bytes; with, one encode plus one core call per chop.
    """
    if lookback < 0:
        raise ArgumentError(f"lookback must be >= 0, not {lookback}")
    tokens, complete = _ff_text_tokens(matcher, lookback, context_tokens)
    if not complete or not _grammar_has_specials(matcher.grammar):
        return tokens
    # A forced special token can only be seen from the state after the forced bytes.
    consumed = 0
    recent = list(context_tokens or [])
    try:
        for _ in range(_SPECIAL_ROUNDS_MAX):
            if tokens[consumed:]:
                if not matcher.consume_tokens(tokens[consumed:]):
                    break
                recent.extend(tokens[consumed:])
                consumed = len(tokens)
            special = _only_allowed_special(matcher)
            if special is None or not matcher.consume_token(special):
                break
            tokens.append(special)
            recent.append(special)
            consumed = len(tokens)
            more, complete = _ff_text_tokens(matcher, lookback, recent)
            tokens.extend(more)
            if not complete:
                break
    finally:
        if consumed:
            matcher.rollback(consumed)
    return tokens

