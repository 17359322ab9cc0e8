"""transformers integration: a logits processor for `model.generate`, and a causal LM as the
model of `tokensieve.generate` (with its KV cache).

```python
processor = tokensieve.hf.LogitsProcessor(hf_tokenizer, Grammar.json_schema(schema))
out = model.generate(**inputs, logits_processor=[processor], max_new_tokens=200)
```

Import this module only where transformers and torch are installed; `import tokensieve` does
not need them.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ._grammar.grammar import Grammar
from ._decoding.matcher import Matcher
from ._tokenizer.tokenizer import Tokenizer


__all__ = ["CausalLM", "LogitsProcessor"]


class LogitsProcessor:
    """A transformers logits processor that keeps every row of `model.generate` in its grammar.

    Each row gets its own matcher (one grammar for all rows, or one per row). At every step the
    processor consumes the token each row just produced, fills the rows' masks in parallel over
    the core instances (`tokensieve.fill_bitmasks`) and sets disallowed logits to -inf. Rows that
    emitted EOS are left alone (generate pads them).

    Where the grammar forces bytes, only the canonical token for them is allowed
    (`canonical_forced`, as llguidance does): after `{"` with a grammar that forces `name`, the
    model may write `name` but not `n` then `ame`, which a greedy search would otherwise pick
    when the split scores higher.

    Args:
        tokenizer: a `tokensieve.Tokenizer`, or a transformers fast tokenizer.
        grammars: one `Grammar` for every row, or one per row of the batch.
        canonical_forced: allow only the canonical token where the grammar forces bytes.

    Not reusable across `generate` calls: make one per call (or call `reset()`).
    """

    def __init__(self, tokenizer: Any, grammars: Grammar | Sequence[Grammar], *, canonical_forced: bool = True) -> None:
        if not isinstance(tokenizer, Tokenizer):
            tokenizer = Tokenizer.from_hf(tokenizer)
        self.tokenizer = tokenizer
        self.grammars = [grammars] if isinstance(grammars, Grammar) else list(grammars)
        if not self.grammars or not all(isinstance(g, Grammar) for g in self.grammars):
            raise TypeError("LogitsProcessor needs a tokensieve.Grammar or a list of them")
        self.canonical_forced = canonical_forced
        self._sparse_indexes: dict[tuple[Any, bytes], Any] = {}  # `_sparse_index`
        # What the first step would otherwise wait for, once per tokenizer: its trie in every
        # core instance and, for forced bytes, its encoder (Llama-3: ~0.2 s and ~0.55 s, paid
        # inside generate's first step before).
        tokenizer.prepare(encoder=canonical_forced)
        self.reset()

    def reset(self) -> None:
        """Forget the batch (before another `generate` call)."""
        self.matchers: list[Matcher] = []
        self._prompt_length = 0
        self._finished: list[bool] = []
        self._bitmask: Any = None

    def _start(self, batch: int, width: int) -> None:
        if len(self.grammars) not in (1, batch):
            raise ValueError(f"LogitsProcessor has {len(self.grammars)} grammars for a batch of {batch} rows")
        grammars = self.grammars * batch if len(self.grammars) == 1 else self.grammars
        self.matchers = [Matcher(self.tokenizer, g, vocab_size=width) for g in grammars]
        self._finished = [False] * batch
        self._bitmask = _numpy().zeros((batch, self.matchers[0].mask_words), dtype="int32")

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        from . import fill_bitmasks
        from .torch import apply_token_bitmask_inplace

        batch, length = input_ids.shape
        if not self.matchers:
            self._prompt_length = length
            self._start(batch, scores.shape[-1])
        elif batch != len(self.matchers):
            raise ValueError(f"the batch changed from {len(self.matchers)} to {batch} rows; beam search is not supported")
        else:
            last = input_ids[:, -1].tolist()
            for row, (matcher, token) in enumerate(zip(self.matchers, last)):
                if self._finished[row]:
                    continue
                if not matcher.consume_token(int(token)):
                    raise ValueError(f"row {row}: the model produced token {token}, which the grammar refuses")
                self._finished[row] = int(token) in self.tokenizer.eos_token_ids
        live = [row for row in range(batch) if not self._finished[row]]
        if not live:
            return scores
        bitmask = self._bitmask
        fill_bitmasks([self.matchers[row] for row in live], bitmask, live)
        width = scores.shape[-1]
        np = _numpy()
        # Counted and listed from the int32 words (4,008 for Llama-3), not from 128k unpacked bits.
        counts = _popcounts(np, bitmask[live])
        for count, row in zip(counts.tolist(), live):
            words = bitmask[row]
            forced = None
            if self.canonical_forced and count <= _FORCED_CHECK_MAX:
                # Forced bytes leave few tokens (their prefixes); only then is it worth asking.
                forced = self.matchers[row].compute_ff_tokens() or None
            if forced is not None or count * 8 < width:
                # A sparse mask is cheaper to apply by keeping the few allowed logits.
                if forced is not None:
                    index = torch.tensor(forced[:1], dtype=torch.long, device=scores.device)
                else:
                    index = self._sparse_index(np, words, width, scores.device)
                keep = scores[row, index]
                scores[row].fill_(float("-inf"))
                scores[row, index] = keep
            else:
                # A dense one (free text) by masking the refused ones.
                apply_token_bitmask_inplace(scores[row], torch.from_numpy(words))
        return scores

    def _sparse_index(self, np: Any, words: Any, width: int, device: Any) -> Any:
        """The allowed ids of a sparse mask as an index tensor, kept by the mask's nonzero
        words: a grammar's masks recur from step to step (its structure, whitespace runs), and
        listing them again took most of a step's work (unpacking the words, finding the bits,
        making the tensor: ~40 µs a row with warm caches, more after the model's forward pass)."""
        nonzero = np.flatnonzero(words)
        values = words[nonzero]
        key = (device, nonzero.tobytes() + values.tobytes())
        index = self._sparse_indexes.get(key)
        if index is None:
            import torch

            bits = np.unpackbits(values.view(np.uint8), bitorder="little").reshape(-1, 32)
            which, bit = np.nonzero(bits)
            ids = nonzero[which] * 32 + bit
            index = torch.from_numpy(ids[ids < width]).to(device)
            if len(self._sparse_indexes) >= _SPARSE_INDEXES_MAX:
                self._sparse_indexes.clear()
            self._sparse_indexes[key] = index
        return index


# Masks with at most this many allowed tokens are checked for forced bytes.
_FORCED_CHECK_MAX = 256
# Sparse masks' index tensors kept by a processor (then all dropped): at most ~6 MB of keys and
# ~16 MB of ids (a sparse mask allows under 16,000 of Llama-3's tokens).
_SPARSE_INDEXES_MAX = 128


def _popcounts(np: Any, rows: Any) -> Any:
    """Set bits per row of an int32 bitmask."""
    unsigned = np.ascontiguousarray(rows).view(np.uint32)
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(unsigned).sum(axis=1, dtype=np.int64)
    return np.unpackbits(unsigned.view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)


def _numpy() -> Any:
    import numpy

    return numpy


class CausalLM:
    """A transformers causal LM as the model callable of `tokensieve.generate`.

    `lm(tokens, num_logits)` returns the logits after each of the last `num_logits` prefixes of
    `tokens` (a float32 numpy array of shape (num_logits, vocab)); `lm(tokens)` returns the next
    token's logits. The KV cache of the previous call is kept and cut back to the longest prefix
    the new `tokens` share with it, so a rejected draft costs no recomputation of what was
    accepted, and every call runs the model only on the tokens it has not seen.

    Args:
        model: a transformers `PreTrainedModel` with a causal LM head (batch size 1).

    Not safe to share between threads or requests: it holds one sequence's cache.
    """

    def __init__(self, model: Any) -> None:
        import torch
        from transformers import DynamicCache

        self.model = model
        self._torch = torch
        self._new_cache = DynamicCache
        self._cache: Any = None
        self._cached: list[int] = []
        # transformers 5 renamed `past_key_values` to `cache` (the old name is deprecated).
        parameters = inspect.signature(model.forward).parameters
        self._cache_argument = "cache" if "cache" in parameters else "past_key_values"
        self._keep_argument = "logits_to_keep" if "logits_to_keep" in parameters else None
        self.forward_calls = 0

    def reset(self) -> None:
        """Forget the cache (a new sequence)."""
        self._cache = None
        self._cached = []

    def __call__(self, tokens: Sequence[int], num_logits: int | None = None) -> Any:
        rows = 1 if num_logits is None else num_logits
        tokens = list(tokens)
        if not 1 <= rows <= len(tokens):
            raise ValueError(f"num_logits must be in 1..{len(tokens)} (the sequence's length), not {rows}")
        common = 0
        limit = min(len(self._cached), len(tokens) - rows)
        while common < limit and self._cached[common] == tokens[common]:
            common += 1
        if self._cache is None or common == 0:
            self._cache = self._new_cache()
            common = 0
        elif common < len(self._cached):
            # A negative count removes that many tokens from the end (transformers 4 and 5).
            self._cache.crop(common - len(self._cached))
        torch = self._torch
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([tokens[common:]], dtype=torch.long, device=device)
        with torch.no_grad():
            arguments = {self._cache_argument: self._cache}
            if self._keep_argument:
                arguments[self._keep_argument] = rows
            out = self.model(input_ids=input_ids, use_cache=True, **arguments)
        self.forward_calls += 1
        self._cache = getattr(out, self._cache_argument)
        self._cached = tokens
        logits = out.logits[0, -rows:, :].float().cpu().numpy()
        return logits[0] if num_logits is None else logits
