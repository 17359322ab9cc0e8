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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from .._errors import ArgumentError
from .._tokenizer.partial import LOOKBACK_DEFAULT, _chop_position, _drop_past, _facts, encode_in_context, tokenize_partial

if TYPE_CHECKING:
    from .matcher import Matcher

__all__ = ["compute_ff_tokens", "tokenize_partial", "LOOKBACK_DEFAULT"]

# Forced special tokens (and the forced bytes between them) are followed this many rounds.
_SPECIAL_ROUNDS_MAX: Final = 8


def _only_allowed_special(matcher: Matcher) -> int | None:
    """The one allowed token when it is a special token other than EOS, else None."""
    if matcher.is_accepting():
        return None
    mask = matcher.compute_bitmask()
    from .matcher import numpy_or_none

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
        keep = _chop_position(tokenizer, facts, forced[:end], tokens, lookback - dropped, matcher.heal_position)
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
    if not complete or not matcher.grammar.has_special_lexemes:
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

