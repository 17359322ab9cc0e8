"""tokensieve as an SGLang grammar backend.

SGLang 0.5.23 has a registry for outside grammar backends
(`sglang.srt.constrained.base_grammar_backend.register_grammar_backend`) and a plugin entry point
group, `sglang.srt.plugins`, whose functions run at start-up in every process. tokensieve's
entry point is `register()`: it adds "tokensieve" to `--grammar-backend`'s choices and registers
the backend factory. Then `python -m sglang.launch_server --model-path M --grammar-backend
tokensieve` serves with it (`SGLANG_PLUGINS` may restrict which plugins load).

The grammar object implements SGLang's `BaseGrammarObject`: `accept_token`, `rollback`,
`is_terminated`, the vocab-mask methods (an int32 bitmask in the layout every engine uses,
applied with `tokensieve.torch.apply_token_bitmask_inplace`; a batch is filled in parallel over
the core instances by `fill_vocab_mask_batched`), `copy` (a fork: the compiled grammar is
shared) and jump-forward (`try_jump_forward` returns the grammar's forced tokens, healed to be
canonical, so no re-tokenization is needed). The backend dispatches `json`, `regex`, `ebnf`
(GBNF) and `structural_tag` requests.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarRow,
    InvalidGrammarObject,
    register_grammar_backend,
)

from .. import Matcher, Tokenizer, TokensieveError, fill_bitmasks
from ..torch import allocate_token_bitmask, apply_token_bitmask_inplace
from ._grammars import grammar_for
from ._request import RequestMatcher

BACKEND_NAME = "tokensieve"
_log = logging.getLogger(__name__)


class TokensieveGrammar(BaseGrammarObject):
    """One request's grammar for SGLang."""

    def __init__(self, request: RequestMatcher) -> None:
        super().__init__()
        self.request = request

    def accept_token(self, token: int) -> None:
        if self.finished:
            return
        if not self.request.accept_tokens([token]):
            raise ValueError(f"the grammar refused token {token}")
        if self.request.is_terminated():
            self.finished = True

    def rollback(self, k: int) -> None:
        if k <= 0:
            return
        self.request.rollback(k)
        self.finished = self.request.is_terminated()

    def is_terminated(self) -> bool:
        return self.request.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return allocate_token_bitmask(batch_size, self.request.matcher.vocab_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.request.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: list[GrammarRow], vocab_mask: torch.Tensor) -> None:
        ours = [entry for entry in entries if isinstance(entry.grammar, TokensieveGrammar)]
        if ours:
            fill_bitmasks([entry.grammar.request.matcher for entry in ours], vocab_mask, [entry.row for entry in ours])
        for entry in entries:
            if not isinstance(entry.grammar, TokensieveGrammar):
                entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> TokensieveGrammar:
        return TokensieveGrammar(self.request.fork())

    def try_jump_forward(self, tokenizer: Any) -> tuple[list[int], str] | None:
        tokens = self.request.jump_forward_tokens()
        return (tokens, "") if tokens else None

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        return "", -1

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int], next_state: int) -> None:
        pass


class TokensieveGrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's grammar requests with tokensieve (cached per request key by SGLang)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None, *, whitespace: str = "flexible") -> None:
        super().__init__()
        if getattr(tokenizer, "backend_tokenizer", None) is None:
            raise ValueError(
                f"the tokensieve grammar backend needs a fast Hugging Face tokenizer, got {type(tokenizer).__name__}"
            )
        # The logits' width, whatever the tokenizer's: a model may pad its rows, or leave out an
        # added token (Llama-3.2 Vision's `<|image|>`, past its 128,256 logits).
        ts_tokenizer = Tokenizer.from_hf(tokenizer, vocab_size=vocab_size)
        if eos_token_ids:
            ts_tokenizer = ts_tokenizer.with_eos_token_ids(sorted(eos_token_ids))
        self.ts_tokenizer = ts_tokenizer.prepare()  # the tries and encoder now, not in the first requests
        self.whitespace = whitespace

    def _compile(self, kind: str, key_string: str) -> BaseGrammarObject:
        try:
            grammar = grammar_for(kind, key_string, tokenizer=self.ts_tokenizer, whitespace=self.whitespace)
            return TokensieveGrammar(RequestMatcher(Matcher(self.ts_tokenizer, grammar)))
        except (TokensieveError, ValueError, TypeError) as err:
            _log.error("tokensieve: invalid %s grammar: %s", kind, err)
            return InvalidGrammarObject(str(err))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        return self._compile("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile("grammar", key_string)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compile("structural_tag", key_string)


def _create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> TokensieveGrammarBackend:
    disable = bool(getattr(server_args, "constrained_json_disable_any_whitespace", False))
    pattern = getattr(server_args, "constrained_json_whitespace_pattern", None)
    whitespace = pattern or ("compact" if disable else "flexible")
    return TokensieveGrammarBackend(tokenizer, vocab_size, eos_token_ids, whitespace=whitespace)


_registered = False


def register() -> None:
    """The `sglang.srt.plugins` entry point: make "tokensieve" a `--grammar-backend`."""
    global _registered
    if _registered:
        return
    _registered = True
    from sglang.srt.server_args import add_grammar_backend_choices

    add_grammar_backend_choices([BACKEND_NAME])
    register_grammar_backend(BACKEND_NAME, _create_backend)
