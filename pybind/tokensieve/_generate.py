"""`generate`: a small constrained-decoding loop around any model callable, with fast-forwarding.

The loop shows how the pieces fit: at each step it first asks the matcher for forced tokens
(`Matcher.compute_ff_tokens`, healed to be canonical) and appends them without calling the
model; otherwise it calls the model once, masks its logits with the grammar's bitmask and
samples (greedy, temperature, top-p). When the grammar is complete and only EOS may follow,
EOS is appended without a model call too. The stats say how many model calls that saved: in
plain decoding every generated token costs one call.

Works with plain Python lists (Pyodide) and uses numpy when it is importable.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._grammar import Grammar
from ._matcher import Matcher, mask_token_ids
from ._tokenizer import Tokenizer

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
) -> GenerateResult:
    """Generate tokens that follow `grammar`, appending forced tokens without model calls.

    Args:
        model: called with the whole token sequence (prompt + new tokens); returns the logits of
            the next token (a list or a 1-D array; ids beyond its length are never chosen).
        tokenizer: the model's tokenizer.
        grammar: what the output must follow.
        prompt_tokens: the prompt; its last token is tokenizer context for the first forced bytes.
        max_new_tokens: at most this many new tokens.
        sampling: greedy when None.
        lookback: healing look-back of `compute_ff_tokens`.
        fast_forward: False to call the model for every token (for comparison).
        vocab_size: the model's logits width, when wider than the tokenizer's.

    Returns:
        A `GenerateResult`.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
    sampling = sampling or Sampling()
    rng = random.Random(sampling.seed)
    matcher = Matcher(tokenizer, grammar, vocab_size=vocab_size)
    eos_ids = tokenizer.eos_token_ids
    sequence = list(prompt_tokens)
    new: list[int] = []
    stats: dict[str, Any] = {"model_calls": 0, "sampled_tokens": 0, "forced_tokens": 0, "stop_reason": "max_new_tokens"}
    while len(new) < max_new_tokens:
        if fast_forward:
            if matcher.is_stopped() and eos_ids and matcher.consume_token(eos_ids[0]):
                new.append(eos_ids[0])
                stats["forced_tokens"] += 1
                stats["stop_reason"] = "eos"
                break
            forced = matcher.compute_ff_tokens(lookback=lookback, context_tokens=sequence[-1:])
            forced = forced[: max_new_tokens - len(new)]
            if forced:
                if not matcher.consume_tokens(forced):
                    raise RuntimeError(f"internal: the grammar refused its forced tokens {forced!r}")
                new.extend(forced)
                sequence.extend(forced)
                stats["forced_tokens"] += len(forced)
                continue
        logits = model(sequence)
        stats["model_calls"] += 1
        token = _sample(logits, matcher.compute_bitmask(), matcher.vocab_size, sampling, rng)
        if token is None or not matcher.consume_token(token):
            stats["stop_reason"] = "no_allowed_token"
            break
        new.append(token)
        sequence.append(token)
        stats["sampled_tokens"] += 1
        if token in eos_ids:
            stats["stop_reason"] = "eos"
            break
    stats["model_calls_saved"] = stats["forced_tokens"]
    text_tokens = [t for t in new if t not in eos_ids]
    text = tokenizer.decode(text_tokens).decode("utf-8", "replace")
    return GenerateResult(tokens=new, text=text, stats=stats)


def _sample(logits: Any, mask: Any, vocab_size: int, sampling: Sampling, rng: random.Random) -> int | None:
    """Choose a token among those `mask` allows; None when none is allowed."""
    try:
        import numpy as np
    except ImportError:
        return _sample_lists(logits, mask, vocab_size, sampling, rng)
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
    return int(allowed[_nucleus_pick(probs[order].tolist(), order.tolist(), sampling.top_p, rng)])


def _sample_lists(logits: Any, mask: Any, vocab_size: int, sampling: Sampling, rng: random.Random) -> int | None:
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
    return allowed[_nucleus_pick([weights[i] / total for i in order], order, sampling.top_p, rng)]


def _nucleus_pick(sorted_probs: list[float], order: list[int], top_p: float, rng: random.Random) -> int:
    """Sample an index of `order` from its probabilities (descending), keeping the top-p set."""
    kept = len(sorted_probs)
    cumulative = 0.0
    for index, p in enumerate(sorted_probs):
        cumulative += p
        if cumulative >= top_p:
            kept = index + 1
            break
    total = sum(sorted_probs[:kept])
    point = rng.random() * total
    running = 0.0
    for index in range(kept):
        running += sorted_probs[index]
        if point < running:
            return order[index]
    return order[kept - 1]
