"""transformers integration: a causal LM as a `generate` model, with its KV cache.

Import this module only where transformers and torch are installed; `import tokensieve` does
not need them.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

__all__ = ["CausalLM"]


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
