"""tokensieve as a vLLM (v1) structured-output backend.

vLLM 0.33 keeps a fixed list of backends (`structured_outputs_config.backend`:
"auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer") and builds them by name in
`StructuredOutputManager.grammar_init`. Outside backends plug in through the
`vllm.general_plugins` entry point, which vLLM calls in every process before it parses its
arguments. tokensieve's entry point is `register()` below. It:

1. adds "tokensieve" to the backend names (the config's `Literal`, rebuilt so pydantic and the
   command line accept it);
2. teaches request validation (`SamplingParams._validate_structured_outputs`) to compile a
   request's grammar with tokensieve when the backend is "tokensieve", so a bad grammar is a
   400 error naming its place instead of an engine-side failure;
3. wraps `StructuredOutputManager.grammar_init` to build `TokensieveBackend` when a request
   resolves to "tokensieve" (the other names keep their backends).

Use: `pip install tokensieve` in vLLM's environment, then
`vllm serve MODEL --structured-outputs-config '{"backend": "tokensieve"}'` (or
`LLM(model, structured_outputs_config={"backend": "tokensieve"})`). The plugin is active only
where the entry point is loaded (`VLLM_PLUGINS` may restrict which plugins load).

What the backend does per request type: `json` → `Grammar.json_schema` (compact whitespace
with `disable_any_whitespace`), `json_object` → any JSON object, `regex`, `grammar` (Lark-like
or GBNF, told apart by `::=`), `choice`, `structural_tag` (XGrammar's format, both the current
and the legacy `structures`/`triggers` form). The request's stop tokens (`stop_token_ids`:
EOS and user stop ids) are allowed exactly where the grammar may end. Speculative decoding
uses `validate_tokens` and `rollback`, which are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from .. import Matcher, Tokenizer, TokensieveError
from ._grammars import grammar_for
from ._request import RequestMatcher

if TYPE_CHECKING:
    import torch

BACKEND_NAME = "tokensieve"

_KINDS = {
    StructuredOutputOptions.JSON: "json",
    StructuredOutputOptions.JSON_OBJECT: "json_object",
    StructuredOutputOptions.REGEX: "regex",
    StructuredOutputOptions.GRAMMAR: "grammar",
    StructuredOutputOptions.CHOICE: "choice",
    StructuredOutputOptions.STRUCTURAL_TAG: "structural_tag",
}


def tokensieve_tokenizer(tokenizer: Any, vocab_size: int) -> Tokenizer:
    """vLLM's tokenizer (a transformers fast tokenizer) as a tokensieve `Tokenizer` of the
    model's logits width."""
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise ValueError(
            f"the tokensieve structured-output backend needs a fast Hugging Face tokenizer, "
            f"got {type(tokenizer).__name__}; use tokenizer_mode='hf'"
        )
    # The logits' width, whatever the tokenizer's: a model may pad its rows, or leave out an
    # added token (Llama-3.2 Vision's `<|image|>`, past its 128,256 logits).
    return Tokenizer.from_hf(tokenizer, vocab_size=vocab_size)


@dataclass
class TokensieveBackend(StructuredOutputBackend):
    """Engine-level backend: the model's tokenizer, compiled grammars shared across requests."""

    def __post_init__(self) -> None:
        config = self.vllm_config.structured_outputs_config
        self.whitespace = "compact" if config.disable_any_whitespace else "flexible"
        self.ts_tokenizer = tokensieve_tokenizer(self.tokenizer, self.vocab_size).prepare()
        self.vocab_size = self.ts_tokenizer.vocab_size

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> StructuredOutputGrammar:
        grammar = request_grammar(request_type, grammar_spec, self.ts_tokenizer, self.whitespace)
        tokenizer = self.ts_tokenizer
        if stop_token_ids:
            tokenizer = tokenizer.with_eos_token_ids(sorted(stop_token_ids))
        return TokensieveGrammar(Matcher(tokenizer, grammar))

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        from ..torch import allocate_token_bitmask

        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        pass


class TokensieveGrammar(RequestMatcher, StructuredOutputGrammar):
    """Request-level grammar: vLLM's method names over `RequestMatcher`."""

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:  # type: ignore[override]
        return RequestMatcher.accept_tokens(self, _strip_padding(tokens))

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        return RequestMatcher.validate_tokens(self, _strip_padding(tokens))

    def fill_bitmask(self, bitmask: torch.Tensor, idx: int) -> None:
        self.matcher.fill_bitmask(bitmask, idx)


def _strip_padding(tokens: list[int]) -> list[int]:
    """Speculative decoding pads rejected draft positions with -1: drop from the first."""
    for index, token in enumerate(tokens):
        if token < 0:
            return tokens[:index]
    return tokens


def request_grammar(request_type: StructuredOutputOptions, spec: Any, tokenizer: Tokenizer, whitespace: str) -> Any:
    """The compiled grammar of one request (cached across requests)."""
    kind = _KINDS.get(request_type)
    if kind is None:
        raise ValueError(f"tokensieve does not handle structured-output requests of type {request_type}")
    return grammar_for(kind, spec, tokenizer=tokenizer, whitespace=whitespace)


# -- registration ------------------------------------------------------------------------------

_registered = False


def register() -> None:
    """The `vllm.general_plugins` entry point: make "tokensieve" a structured-output backend.

    Safe to call several times and in every vLLM process (vLLM loads plugins in each).
    """
    global _registered
    if _registered:
        return
    _registered = True
    _accept_backend_name()
    _validate_with_tokensieve()
    _build_in_manager()


def _accept_backend_name() -> None:
    from pydantic.dataclasses import rebuild_dataclass

    import vllm.config.structured_outputs as config_module

    names = get_args(config_module.StructuredOutputsBackend)
    if BACKEND_NAME in names:
        return
    extended = Literal[(*names, BACKEND_NAME)]  # type: ignore[valid-type]
    config_module.StructuredOutputsBackend = extended
    config_class = config_module.StructuredOutputsConfig
    # The annotation (type hints), the dataclass field (vLLM's command-line choices) and the
    # pydantic field (validation) all carry the Literal; rebuild the validators that embed it.
    config_class.__annotations__["backend"] = extended
    config_class.__dataclass_fields__["backend"].type = extended
    config_class.__pydantic_fields__["backend"].annotation = extended
    config_class.__pydantic_complete__ = False
    rebuild_dataclass(config_class, force=True)
    from vllm.config import VllmConfig

    VllmConfig.__pydantic_complete__ = False
    rebuild_dataclass(VllmConfig, force=True)


def _validate_with_tokensieve() -> None:
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output.request import get_structured_output_key

    original = SamplingParams._validate_structured_outputs
    if getattr(original, "_tokensieve", False):
        return

    def validate(self: Any, structured_outputs_config: Any, tokenizer: Any) -> None:
        if self.structured_outputs is None or structured_outputs_config.backend != BACKEND_NAME:
            return original(self, structured_outputs_config, tokenizer)
        if tokenizer is None:
            raise VLLMValidationError("structured outputs need a tokenizer; do not use skip_tokenizer_init")
        self.structured_outputs._backend = BACKEND_NAME
        request_type, spec = get_structured_output_key(self.structured_outputs)
        whitespace = "compact" if structured_outputs_config.disable_any_whitespace else "flexible"
        try:
            request_grammar(request_type, spec, _cached_tokenizer(tokenizer), whitespace)
        except (TokensieveError, ValueError, TypeError) as err:
            raise VLLMValidationError(f"Invalid grammar specification: {err}") from err

    validate._tokensieve = True  # type: ignore[attr-defined]
    SamplingParams._validate_structured_outputs = validate  # type: ignore[method-assign]


_tokenizers: dict[int, Tokenizer] = {}


def _cached_tokenizer(tokenizer: Any) -> Tokenizer:
    """The tokensieve tokenizer of a front-end tokenizer object, converted once."""
    found = _tokenizers.get(id(tokenizer))
    if found is None:
        found = _tokenizers[id(tokenizer)] = tokensieve_tokenizer(tokenizer, len(tokenizer))
    return found


def _build_in_manager() -> None:
    import vllm.v1.structured_output as manager_module

    manager = manager_module.StructuredOutputManager
    original = manager.grammar_init
    if getattr(original, "_tokensieve", False):
        return

    def grammar_init(self: Any, request: Any) -> None:
        structured = request.structured_output_request
        if structured is not None and self.backend is None:
            outputs = request.sampling_params.structured_outputs
            if outputs._backend == BACKEND_NAME:
                self.backend = TokensieveBackend(
                    self.vllm_config,
                    tokenizer=self.tokenizer,
                    vocab_size=self.vllm_config.model_config.get_vocab_size(),
                )
                self.backend_name = BACKEND_NAME
        return original(self, request)

    grammar_init._tokensieve = True  # type: ignore[attr-defined]
    manager.grammar_init = grammar_init  # type: ignore[method-assign]

