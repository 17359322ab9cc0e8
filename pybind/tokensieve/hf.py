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

    Each row's matcher follows the row's tokens, not its place: when the rows are not the last
    call's rows one token longer, every row is matched to the earlier row whose tokens its own
    extend furthest (same grammar), whose matcher it takes (or a fork of it), rolled back and
    advanced to the row's tokens. So beam search (which reorders and duplicates rows at every
    step) and assisted decoding (`prompt_lookup_num_tokens`, an `assistant_model`: calls on
    draft tokens, then a cut back to the accepted ones) keep every row in its grammar. A row
    holding a token its grammar refuses (a beam that took a -inf candidate, a rejected draft
    token) gets every logit masked.

    Where the grammar forces bytes, only the canonical token for them is allowed
    (`canonical_forced`, as llguidance does): after `{"` with a grammar that forces `name`, the
    model may write `name` but not `n` then `ame`, which a greedy search would otherwise pick
    when the split scores higher.

    Args:
        tokenizer: a `tokensieve.Tokenizer`, or a transformers fast tokenizer.
        grammars: one `Grammar` for every row, or one per prompt of the batch (generate's rows
            for the beams or returned sequences of prompt i, which it places together, all get
            grammar i), or one per row.
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
        self._eos = frozenset(tokenizer.eos_token_ids)
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
        # Per row: its tokens hold an EOS (nothing more to mask), or a token its grammar
        # refuses (every logit masked); the generated tokens of every row at the last call.
        self._finished: list[bool] = []
        self._off: list[bool] = []
        self._seen: Any = None
        self._bitmask: Any = None

    def _start(self, batch: int, width: int) -> None:
        count = len(self.grammars)
        if batch % count:
            raise ValueError(
                f"LogitsProcessor has {count} grammars for a batch of {batch} rows: give one, one per "
                f"prompt or one per row"
            )
        # generate places a prompt's beams or returned sequences next to each other.
        self.matchers = [Matcher(self.tokenizer, g, vocab_size=width) for g in self.grammars for _ in range(batch // count)]
        self._finished = [False] * batch
        self._off = [False] * batch
        self._bitmask = _numpy().zeros((batch, self.matchers[0].mask_words), dtype="int32")

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        from . import fill_bitmasks
        from .torch import apply_token_bitmask_inplace

        batch, length = input_ids.shape
        if not self.matchers:
            self._prompt_length = length
            self._start(batch, scores.shape[-1])
            self._seen = input_ids[:, length:].clone()
        elif batch != len(self.matchers):
            raise ValueError(f"the batch changed from {len(self.matchers)} to {batch} rows (make a new processor, or reset it, for a new generate call)")
        elif length < self._prompt_length:
            raise ValueError(f"the rows are shorter ({length} tokens) than the prompt was ({self._prompt_length}): reset the processor for a new generate call")
        else:
            generated = input_ids[:, self._prompt_length :]
            seen = self._seen
            if generated.shape[1] == seen.shape[1] + 1 and torch.equal(generated[:, :-1], seen):
                # The common step: every row is its last call's row and one token more.
                for row, token in enumerate(generated[:, -1].tolist()):
                    if not (self._finished[row] or self._off[row]):
                        self._advance(row, (token,))
            else:
                self._follow(generated)
            self._seen = generated.clone()
        live = [row for row in range(batch) if not (self._finished[row] or self._off[row])]
        for row in range(batch):
            if self._off[row]:
                scores[row].fill_(float("-inf"))
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
            elif (width - count) * 8 < width:
                # A mask that refuses few (a string's body) by refusing those few: unpacking
                # and masking all 128k logits took ~90 µs a row.
                scores[row].index_fill_(0, self._sparse_index(np, ~words, width, scores.device), float("-inf"))
            else:
                # A dense one (free text) by masking the refused ones.
                apply_token_bitmask_inplace(scores[row], torch.from_numpy(words))
        return scores

    def _advance(self, row: int, tokens: Sequence[int]) -> None:
        """Consume `tokens` on row `row`'s matcher up to the first EOS (what follows it is
        generate's padding) or the first token its grammar refuses (the row is then off)."""
        matcher = self.matchers[row]
        for token in tokens:
            if not matcher.consume_token(int(token)):
                self._off[row] = True
                return
            if token in self._eos:
                self._finished[row] = True
                return

    def _follow(self, generated: Any) -> None:
        """Give each row the matcher of the last call's row whose consumed tokens its own
        extend furthest (same grammar; itself on a tie), rolled back to what they share and
        advanced over the rest: a matcher taken by several rows is forked (before any of them
        moves), one taken by none is dropped."""
        import torch

        batch = len(self.matchers)
        consumed = [len(m.consumed_tokens) for m in self.matchers]
        seen = self._seen
        shared = min(generated.shape[1], seen.shape[1])
        if shared:
            # common[r, s]: how many first tokens row r has in common with the last call's row s.
            equal = generated[:, None, :shared] == seen[None, :, :shared]
            common = equal.to(torch.int32).cumprod(dim=2).sum(dim=2).tolist()
        else:
            common = [[0] * batch for _ in range(batch)]
        grammars = [m.grammar for m in self.matchers]
        sources: list[tuple[int, int]] = []
        for row in range(batch):
            best, source = -1, row
            for other in range(batch):
                if grammars[other] is not grammars[row]:
                    continue
                usable = min(common[row][other], consumed[other])
                if usable > best or (usable == best and other == row):
                    best, source = usable, other
            sources.append((source, best))
        # Forks first, from the states of the last call; then each row moves its own matcher.
        taken: set[int] = set()
        matchers: list[Matcher] = []
        for source, _ in sources:
            matchers.append(self.matchers[source] if source not in taken else self.matchers[source].fork())
            taken.add(source)
        finished = self._finished
        self._finished = [finished[source] and keep == consumed[source] for source, keep in sources]
        self._off = [False] * batch
        self.matchers = matchers
        for row, (source, keep) in enumerate(sources):
            matcher = matchers[row]
            if consumed[source] > keep:
                matcher.rollback(consumed[source] - keep)
            if not self._finished[row]:
                self._advance(row, generated[row, keep:].tolist())

    def _sparse_index(self, np: Any, words: Any, width: int, device: Any) -> Any:
        """The ids (below `width`) whose bits are set in `words` (a sparse mask, or a dense
        one's complement) as an index tensor, kept by the words' nonzero words: a grammar's
        masks recur from step to step (its structure, whitespace runs), and listing them again
        took most of a step's work (unpacking the words, finding the bits, making the tensor:
        ~40 µs a row with warm caches, more after the model's forward pass)."""
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
