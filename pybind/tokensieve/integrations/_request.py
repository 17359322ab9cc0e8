"""The request-level shape serving engines call: accept, validate, rollback, fill bitmask,
is terminated, reset, fork, jump forward.

vLLM's `StructuredOutputGrammar` and SGLang's `BaseGrammarObject` both ask for this shape with
small differences (which tokens count after the end, how a rollback counts the EOS); the engine
adapters in this package subclass `RequestMatcher` with the engine's own base class and method
names. Everything here is one or two core calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._decoding.matcher import Matcher


class RequestMatcher:
    """One request's grammar state.

    *Terminated* means an end-of-sequence id (one of the tokenizer's, or the request's stop ids
    given to the tokenizer with `Tokenizer.with_eos_token_ids`) was accepted. Tokens after it
    are ignored, as every engine expects. Not the same as `Matcher.is_stopped()`, which is
    true one step earlier, when only EOS may follow: an engine that stops filling masks there
    lets the model write anything next.

    Args:
        matcher: the request's matcher (its own; forks share the compiled grammar).
    """

    def __init__(self, matcher: Matcher) -> None:
        self.matcher = matcher
        self._eos = frozenset(matcher.tokenizer.eos_token_ids)
        self._terminated = False

    # -- the engine calls ------------------------------------------------------------------

    def accept_tokens(self, tokens: Sequence[int]) -> bool:
        """Advance by `tokens` (all or nothing); tokens after an accepted EOS are ignored.

        Returns False when the grammar refuses one (nothing is consumed).
        """
        if self._terminated:
            return True
        tokens = list(tokens)
        for index, token in enumerate(tokens):
            if token in self._eos:
                tokens = tokens[: index + 1]
                break
        if not tokens:
            return True
        # One token (a step without speculation) goes by `consume_token`, which the next fill
        # applies in its own call when the mask allowed the token.
        if not (self.matcher.consume_token(tokens[0]) if len(tokens) == 1 else self.matcher.consume_tokens(tokens)):
            return False
        self._terminated = tokens[-1] in self._eos
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> list[int]:
        """The prefix of `tokens` the grammar accepts (up to and including an EOS); the state
        does not change."""
        if self._terminated:
            return []
        tokens = [int(t) for t in tokens]
        accepted = tokens[: self.matcher.validate_tokens(tokens)]
        for index, token in enumerate(accepted):
            if token in self._eos:
                return accepted[: index + 1]
        return accepted

    def rollback(self, count: int) -> None:
        """Undo the last `count` accepted tokens (an accepted EOS counts as one)."""
        if count <= 0:
            return
        self.matcher.rollback(count)
        consumed = self.matcher.consumed_tokens
        self._terminated = bool(consumed) and consumed[-1] in self._eos

    def fill_bitmask(self, bitmask: Any, index: int) -> None:
        """Write the allowed-token mask into row `index` of an int32 (batch, words) array."""
        self.matcher.fill_bitmask(bitmask, index)

    def is_terminated(self) -> bool:
        return self._terminated

    def reset(self) -> None:
        self.matcher.reset()
        self._terminated = False

    def fork(self) -> RequestMatcher:
        """An independent copy at the same position (same compiled grammar)."""
        copy = object.__new__(type(self))
        RequestMatcher.__init__(copy, self.matcher.fork())
        copy._terminated = self._terminated
        return copy

    def jump_forward_tokens(self) -> list[int]:
        """The tokens the grammar forces next, healed to be canonical (possibly none)."""
        if self._terminated:
            return []
        return self.matcher.compute_ff_tokens()
