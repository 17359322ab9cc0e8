"""Adapters for serving engines and generation loops.

- `tokensieve.integrations.vllm`: vLLM's v1 structured-output backend (a `vllm.general_plugins`
  entry point registers it as `structured_outputs_config.backend="tokensieve"`).
- `tokensieve.integrations.sglang`: SGLang's grammar backend (a `sglang.srt.plugins` entry
  point registers `--grammar-backend tokensieve`).
- `tokensieve.hf`: a transformers `LogitsProcessor` and a KV-cached causal LM for `generate`.
- `tokensieve.torch`: the bitmask helpers engines apply to logits.

Each engine module imports its engine; this package itself imports nothing optional.
"""

from ._grammars import grammar_for as grammar_for
from ._request import RequestMatcher as RequestMatcher

__all__ = ["RequestMatcher", "grammar_for"]
