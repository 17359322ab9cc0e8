"""Drive tokensieve's SGLang backend through SGLang's own grammar-backend code (no GPU, no model).

Run with the Python of an environment where sglang==0.5.23 is installed and tokensieve importable:
    TOKENSIEVE_SHARED=../shared python tests/engines/sglang_check.py
It prints "ok" when every check passes. Checks, through SGLang's classes: the plugin adds
"tokensieve" to `--grammar-backend`'s choices and registers the factory; the factory builds the
backend; `BaseGrammarBackend.get_cached_or_future_value` compiles a JSON schema (and an invalid
regex becomes an `InvalidGrammarObject`); copies of the cached grammar decode a valid instance
with batched masks, jump forward, accept, rollback and apply the mask to logits.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch

import tokensieve.integrations.sglang as adapter
from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY, GrammarRow, InvalidGrammarObject


def main() -> None:
    from transformers import PreTrainedTokenizerFast

    shared = Path(os.environ.get("TOKENSIEVE_SHARED", Path(__file__).resolve().parents[3] / "shared"))
    folder = Path(tempfile.mkdtemp())
    (folder / "tokenizer.json").write_bytes(gzip.open(shared / "tokenizers" / "llama3" / "tokenizer.json.gz").read())
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), eos_token="<|end_of_text|>")

    adapter.register()
    assert "tokensieve" in GRAMMAR_BACKEND_CHOICES
    args = SimpleNamespace(constrained_json_disable_any_whitespace=True, constrained_json_whitespace_pattern=None)
    backend = GRAMMAR_BACKEND_REGISTRY["tokensieve"](args, tokenizer, 128_256, {tokenizer.eos_token_id})

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
    key = ("json", json.dumps(schema))
    value, hit = backend.get_cached_or_future_value(key, False)
    assert not hit
    template = value.result()
    assert isinstance(template, adapter.TokensieveGrammar), template
    backend.set_cache(key, template)
    bad, _ = backend.get_cached_or_future_value(("regex", "ab(c"), False)
    assert isinstance(bad.result(), InvalidGrammarObject)

    grammars = [backend.get_cached_or_future_value(key, False)[0] for _ in range(2)]
    assert all(isinstance(g, adapter.TokensieveGrammar) and g is not template for g in grammars)
    mask = grammars[0].allocate_vocab_mask(128_256, 2, "cpu")
    text = json.dumps({"name": "Ada", "age": 36}, separators=(",", ":"))
    target = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    for step, token in enumerate(target):
        type(grammars[0]).fill_vocab_mask_batched([GrammarRow(i, g) for i, g in enumerate(grammars)], mask)
        logits = torch.zeros(2, 128_256)
        type(grammars[0]).apply_vocab_mask(logits, type(grammars[0]).move_vocab_mask(mask, "cpu"))
        assert torch.isfinite(logits[:, token]).all(), (step, token)
        if step == 1:
            jump = grammars[0].try_jump_forward(tokenizer)
            assert jump is not None and tokenizer.decode(jump[0]).startswith("name"), jump
        for g in grammars:
            g.accept_token(token)
    assert all(g.is_terminated() for g in grammars)
    grammars[1].rollback(1)
    assert not grammars[1].is_terminated()
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
