"""`generate`: a small constrained-decoding loop around any model callable, with fast-forwarding
and prompt lookup.

The loop shows how the pieces fit: at each step it first asks the matcher for forced tokens
(`Matcher.compute_ff_tokens`, healed to be canonical) and appends them without calling the
model; otherwise it calls the model once, masks its logits with the grammar's bitmask and
samples (greedy, temperature, top-p). When the grammar is complete and only EOS may follow,
EOS is appended without a model call too. The stats say how many model calls that saved: in
plain decoding every generated token costs one call.

With prompt lookup, the one model call also checks a draft (`PromptLookup`): the draft's masks
come from one core call (`Matcher.fill_draft_masks`), every position is decided exactly as
plain decoding decides it — forced tokens taken without the model, others sampled from the
masked logits with that position's own random draw — and the draft stands up to the first
position where the decision differs from it. So the output is the plain output; only the
number of model calls changes.

Works with plain Python lists (Pyodide) and uses numpy when it is importable.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._grammar.grammar import Grammar
from .matcher import Matcher, mask_token_ids, numpy_or_none
from .prompt_lookup import PromptLookup
from .._tokenizer.tokenizer import Tokenizer

__all__ = ["Sampling", "GenerateResult", "generate"]

Model = Callable[[Sequence[int]], Any]


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen among the allowed ones.

    Args:
        temperature: 0 for greedy (argmax); otherwise logits are divided by it before softmax.
        top_p: nucleus sampling: keep the most likely tokens whose probabilities add up to at
            least `top_p` (1.0 keeps all).
        seed: seed of the random generator (None: nondeterministic).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"Sampling.temperature must be >= 0 (0 is greedy), not {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"Sampling.top_p must be in (0, 1], not {self.top_p}")


@dataclass
class GenerateResult:
    """What `generate` produced.

    Attributes:
        tokens: the new tokens (EOS included when it was emitted).
        text: the new tokens' bytes, EOS excluded, decoded as UTF-8 (invalid bytes replaced).
        stats: `model_calls`, `sampled_tokens`, `forced_tokens` (appended without a model call,
            EOS included), `model_calls_saved` (= forced tokens: plain decoding would have called
            the model once for each), `stop_reason` ("eos", "max_new_tokens", "no_allowed_token").
    """

    tokens: list[int]
    text: str
    stats: dict[str, Any] = field(default_factory=dict)


def generate(
    model: Model,
    tokenizer: Tokenizer,
    grammar: Grammar,
    prompt_tokens: Sequence[int],
    *,
    max_new_tokens: int,
    sampling: Sampling | None = None,
    lookback: int = 4,
    fast_forward: bool = True,
    vocab_size: int | None = None,
    prompt_lookup: PromptLookup | bool | None = None,
) -> GenerateResult:
    """Generate tokens that follow `grammar`, appending forced tokens without model calls.

    With `prompt_lookup`, each model call also verifies a draft (`PromptLookup.propose`, with
    the grammar): the model returns logits for every draft position in one call, each position
    is masked and sampled exactly as plain decoding would, and the draft is accepted up to the
    first position where the sampled token differs (that token is kept too). The output is
    token for token the one plain decoding produces with the same model and `sampling`: the
    random draw of output position p depends only on the seed and p.

    Args:
        model: without prompt lookup, called with the whole token sequence (prompt + new
            tokens), returning the next token's logits (a list or a 1-D array). With prompt
            lookup, called as `model(tokens, num_logits)` and returning `num_logits` rows: the
            logits after each of the last `num_logits` prefixes of `tokens` (row i predicts the
            token after `tokens[:len(tokens) - num_logits + 1 + i]`); `tokensieve.hf.CausalLM`
            wraps a transformers model this way, with its KV cache. Ids beyond a row's length
            are never chosen.
        tokenizer: the model's tokenizer.
        grammar: what the output must follow.
        prompt_tokens: the prompt; its last token is tokenizer context for the first forced bytes.
        max_new_tokens: at most this many new tokens.
        sampling: greedy when None.
        lookback: healing look-back of `compute_ff_tokens`.
        fast_forward: False to call the model for every token (for comparison).
        vocab_size: the model's logits width, when wider than the tokenizer's.
        prompt_lookup: True for `PromptLookup(tokenizer)`, or a `PromptLookup` with an empty
            context (this call feeds it the prompt and the output).

    Returns:
        A `GenerateResult`; with prompt lookup its stats also count `draft_tokens` (proposed)
        and `accepted_draft_tokens`.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
    sampling = sampling or Sampling()
    draws = _PositionDraws(sampling.seed)
    matcher = Matcher(tokenizer, grammar, vocab_size=vocab_size)
    lookup = _prompt_lookup(prompt_lookup, tokenizer)
    run = _Run(matcher, list(prompt_tokens), max_new_tokens, lookup)

    def rows_for(tokens: list[int], count: int) -> Any:
        return model(tokens, count) if lookup else [model(tokens)]

    def pick(logits: Any, mask: Any) -> int | None:
        return _sample(logits, mask, matcher.vocab_size, sampling, draws.draw(len(run.new)))

    run.decode(rows_for, pick, fast_forward=fast_forward, lookback=lookback)
    run.stats["model_calls_saved"] = len(run.new) - run.stats["model_calls"]
    eos_ids = tokenizer.eos_token_ids
    text_tokens = [t for t in run.new if t not in eos_ids]
    text = tokenizer.decode(text_tokens).decode("utf-8", "replace")
    return GenerateResult(tokens=run.new, text=text, stats=run.stats)


def _prompt_lookup(option: PromptLookup | bool | None, tokenizer: Tokenizer) -> PromptLookup | None:
    if option is None or option is False:
        return None
    if option is True:
        return PromptLookup(tokenizer)
    if not isinstance(option, PromptLookup):
        raise TypeError(f"prompt_lookup takes True or a tokensieve.PromptLookup, not {type(option).__name__}")
    if len(option):
        raise ValueError("prompt_lookup must have an empty context: generate feeds it the prompt and the output")
    return option


class _PositionDraws:
    """One uniform draw per output position, from the seed and the position alone, so decoding
    with and without drafts samples every position from the same random number."""

    def __init__(self, seed: int | None) -> None:
        self.base = seed if seed is not None else random.getrandbits(63)

    def draw(self, position: int) -> float:
        return random.Random(f"{self.base}:{position}").random()


class _Run:
    """The state of one `generate` call: the sequence, the new tokens, the counters."""

    def __init__(
        self,
        matcher: Matcher,
        prompt: list[int],
        max_new_tokens: int,
        lookup: PromptLookup | None,
        propose: Callable[[Matcher, bool], list[int]] | None = None,
    ) -> None:
        self.matcher = matcher
        # How a draft is made (benchmarks swap in other drafters).
        self.propose = propose or (lambda m, ff: lookup.propose(m, fast_forward=ff) if lookup else [])
        self.eos_ids = matcher.tokenizer.eos_token_ids
        self.sequence = prompt
        self.new: list[int] = []
        self.max_new_tokens = max_new_tokens
        self.lookup = lookup
        self.stopped = False
        self.stats: dict[str, Any] = {
            "model_calls": 0,
            "sampled_tokens": 0,
            "forced_tokens": 0,
            "stop_reason": "max_new_tokens",
        }
        if lookup is not None:
            lookup.extend(prompt)
        self.stats.update(draft_tokens=0, accepted_draft_tokens=0)

    def done(self) -> bool:
        return self.stopped or len(self.new) >= self.max_new_tokens

    def room(self) -> int:
        return self.max_new_tokens - len(self.new)

    def append(self, tokens: list[int]) -> None:
        self.new.extend(tokens)
        self.sequence.extend(tokens)
        if self.lookup is not None:
            self.lookup.extend(tokens)

    def fast_forward(self, lookback: int) -> bool:
        """Append what the grammar forces (EOS when only EOS may follow); True if anything."""
        matcher = self.matcher
        if matcher.is_stopped() and self.eos_ids and matcher.consume_token(self.eos_ids[0]):
            self.append([self.eos_ids[0]])
            self.stats["forced_tokens"] += 1
            self.stats["stop_reason"] = "eos"
            self.stopped = True
            return True
        forced = matcher.compute_ff_tokens(lookback=lookback, context_tokens=self.sequence[-lookback - 1 :])
        forced = forced[: self.room()]
        if not forced:
            return False
        if not matcher.consume_tokens(forced):
            raise RuntimeError(f"internal: the grammar refused its forced tokens {forced!r}")
        self.append(forced)
        self.stats["forced_tokens"] += len(forced)
        return True

    def decode(
        self,
        rows_for: Callable[[list[int], int], Any],
        pick: Callable[[Any, Any], int | None],
        *,
        fast_forward: bool,
        lookback: int,
    ) -> None:
        """The decoding loop: fast-forward, else draft, one model call, verify; until done.

        `rows_for(tokens, n)` is the model call (n rows of logits for the last n prefixes);
        `pick(logits, mask)` decides one position.
        """
        matcher = self.matcher
        while not self.done():
            if fast_forward and self.fast_forward(lookback):
                continue
            draft = self.propose(matcher, fast_forward)[: self.room() - 1]
            if draft:
                valid, masks = matcher.fill_draft_masks(draft)
                draft = draft[:valid]
                self.stats["draft_tokens"] += len(draft)
            else:
                masks = [matcher.compute_bitmask()]
            rows = rows_for(self.sequence + draft, len(draft) + 1)
            self.stats["model_calls"] += 1
            self.verify(draft, rows, masks, pick, fast_forward, lookback)

    def verify(self, draft: list[int], rows: Any, masks: Any, pick: Callable[[Any, Any], int | None], fast_forward: bool, lookback: int) -> None:
        """Take tokens for as many positions as the model's rows cover, exactly as plain
        decoding would: fast-forward where the grammar forces, sample elsewhere, and stop after
        the first sampled token that leaves the draft."""
        index = 0
        while not self.done():
            if index > 0 and fast_forward:
                before = len(self.new)
                if self.fast_forward(lookback):
                    forced = self.new[before:]
                    if draft[index : index + len(forced)] != forced:
                        return
                    index += len(forced)
                    continue
            if index > len(draft):
                return
            token = pick(rows[index], masks[index])
            if token is None or not self.matcher.consume_token(token):
                self.stats["stop_reason"] = "no_allowed_token"
                self.stopped = True
                return
            self.append([token])
            self.stats["sampled_tokens"] += 1
            if token in self.eos_ids:
                self.stats["stop_reason"] = "eos"
                self.stopped = True
                return
            if index == len(draft) or token != draft[index]:
                return
            self.stats["accepted_draft_tokens"] += 1
            index += 1


def _sample(logits: Any, mask: Any, vocab_size: int, sampling: Sampling, draw: float) -> int | None:
    """Choose a token among those `mask` allows; None when none is allowed."""
    np = numpy_or_none()
    if np is None:
        return _sample_lists(logits, mask, vocab_size, sampling, draw)
    values = np.asarray(logits, dtype=np.float64).reshape(-1)
    width = min(len(values), vocab_size)
    bits = np.unpackbits(np.asarray(mask, dtype=np.int32).view(np.uint8), bitorder="little")[:width]
    allowed = np.flatnonzero(bits)
    if allowed.size == 0:
        return None
    scores = values[allowed]
    if sampling.temperature == 0.0:
        return int(allowed[int(np.argmax(scores))])
    scores = (scores - scores.max()) / sampling.temperature
    probs = np.exp(scores)
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    return int(allowed[_nucleus_pick(probs[order].tolist(), order.tolist(), sampling.top_p, draw)])


def _sample_lists(logits: Any, mask: Any, vocab_size: int, sampling: Sampling, draw: float) -> int | None:
    """`_sample` with plain Python lists (no numpy)."""
    values = [float(v) for v in logits]
    allowed = mask_token_ids(mask, min(len(values), vocab_size))
    if not allowed:
        return None
    if sampling.temperature == 0.0:
        return max(allowed, key=lambda t: (values[t], -t))
    top = max(values[t] for t in allowed)
    weights = [math.exp((values[t] - top) / sampling.temperature) for t in allowed]
    total = sum(weights)
    order = sorted(range(len(allowed)), key=lambda i: -weights[i])
    return allowed[_nucleus_pick([weights[i] / total for i in order], order, sampling.top_p, draw)]


def _nucleus_pick(sorted_probs: list[float], order: list[int], top_p: float, draw: float) -> int:
    """Pick an index of `order` from its probabilities (descending), keeping the top-p set, with
    the uniform random number `draw` in [0, 1)."""
    kept = len(sorted_probs)
    cumulative = 0.0
    for index, p in enumerate(sorted_probs):
        cumulative += p
        if cumulative >= top_p:
            kept = index + 1
            break
    total = sum(sorted_probs[:kept])
    point = draw * total
    running = 0.0
    for index in range(kept):
        running += sorted_probs[index]
        if point < running:
            return order[index]
    return order[kept - 1]
