"""The vLLM and SGLang adapters, driven the way the engines drive their grammar backends.

CI runs them against stand-in packages that define the engines' interfaces (tests/engines/fake,
see tests/engines/README.md); the real packages run tests/engines/*_check.py when
TOKENSIEVE_VLLM_PYTHON / TOKENSIEVE_SGLANG_PYTHON name an interpreter that has them.
Every mask is checked against the token the target text needs next (which must be allowed)
and against tokens that cannot follow (which must not be).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ENGINES = Path(__file__).resolve().parent / "engines"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}


@pytest.fixture(scope="module")
def fake_engines():
    sys.path.insert(0, str(ENGINES / "fake"))
    try:
        for name in ("tokensieve.integrations.vllm", "tokensieve.integrations.sglang"):
            sys.modules.pop(name, None)
        yield {
            "vllm": importlib.import_module("tokensieve.integrations.vllm"),
            "sglang": importlib.import_module("tokensieve.integrations.sglang"),
        }
    finally:
        sys.path.remove(str(ENGINES / "fake"))
        for name in list(sys.modules):
            if name.split(".")[0] in ("vllm", "sglang") or name in ("tokensieve.integrations.vllm", "tokensieve.integrations.sglang"):
                sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def hf_llama3(shared_dir, tmp_path_factory):
    import gzip

    from transformers import PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("llama3")
    (folder / "tokenizer.json").write_bytes(gzip.open(shared_dir / "tokenizers" / "llama3" / "tokenizer.json.gz").read())
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), eos_token="<|end_of_text|>")


def bit(bitmask_row: Any, token: int) -> bool:
    return bool((int(bitmask_row[token // 32]) >> (token % 32)) & 1)


def target_tokens(hf_tokenizer: Any) -> list[int]:
    text = json.dumps({"name": "Ada", "age": 36}, separators=(",", ":"))
    return hf_tokenizer.encode(text, add_special_tokens=False) + [hf_tokenizer.eos_token_id]


def test_vllm_backend_through_the_managers_calls(fake_engines, hf_llama3):
    """The manager's sequence per step (vllm/v1/structured_output/__init__.py): validate the
    drafts, fill one row per draft position (accepting each draft token) and the bonus row, roll
    the draft back, then accept the tokens the model kept."""
    vllm_adapter = fake_engines["vllm"]
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    width = 128_256 + 256
    config = SimpleNamespace(structured_outputs_config=SimpleNamespace(disable_any_whitespace=True))
    backend = vllm_adapter.TokensieveBackend(config, tokenizer=hf_llama3, vocab_size=width)
    eos = hf_llama3.eos_token_id
    grammar = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(SCHEMA), stop_token_ids={eos, 128_009})
    bitmask = backend.allocate_token_bitmask(8)
    assert tuple(bitmask.shape) == (8, (width + 31) // 32)
    target = target_tokens(hf_llama3)
    space = hf_llama3.encode(" ", add_special_tokens=False)[0]
    for position in range(len(target)):
        drafts = target[position : position + 3]
        assert grammar.validate_tokens(drafts + [-1, 5]) == drafts  # -1: speculative padding
        advanced = 0
        for index, token in enumerate(drafts):
            grammar.fill_bitmask(bitmask, index)
            assert bit(bitmask[index], token)
            assert not bit(bitmask[index], width - 1)  # ids past the vocabulary never
            if position + index == 0:
                assert not bit(bitmask[index], space)  # compact JSON: no leading whitespace
            if not grammar.is_terminated():
                assert grammar.accept_tokens("r", [token])
                advanced += 1
        grammar.rollback(advanced)
        assert grammar.accept_tokens("r", [target[position]])
    assert grammar.is_terminated()
    assert grammar.accept_tokens("r", [17, 18])  # after the end: ignored
    assert grammar.validate_tokens([17]) == []
    grammar.rollback(1)
    assert not grammar.is_terminated()
    grammar.fill_bitmask(bitmask, 0)
    assert bit(bitmask[0], eos) and bit(bitmask[0], 128_009)
    assert not bit(bitmask[0], hf_llama3.encode("}", add_special_tokens=False)[0])
    grammar.reset()
    grammar.fill_bitmask(bitmask, 1)
    assert bit(bitmask[1], target[0]) and not bit(bitmask[1], eos)
    from tokensieve import GrammarError

    with pytest.raises(GrammarError):
        backend.compile_grammar(StructuredOutputOptions.REGEX, "ab(c")


def test_vllm_request_types(fake_engines, hf_llama3):
    vllm_adapter = fake_engines["vllm"]
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    config = SimpleNamespace(structured_outputs_config=SimpleNamespace(disable_any_whitespace=False))
    backend = vllm_adapter.TokensieveBackend(config, tokenizer=hf_llama3, vocab_size=128_256)
    cases = [
        (StructuredOutputOptions.REGEX, r"\d{3}-\d{2}", "123-45"),
        (StructuredOutputOptions.CHOICE, json.dumps(["yes", "no"]), "no"),
        (StructuredOutputOptions.GRAMMAR, 'root ::= "a" [0-9]+', "a42"),
        (StructuredOutputOptions.GRAMMAR, 'start: "b" /[0-9]+/', "b7"),
        (StructuredOutputOptions.JSON_OBJECT, "", '{"x": [1]}'),
    ]
    for kind, spec, text in cases:
        grammar = backend.compile_grammar(kind, spec)
        tokens = hf_llama3.encode(text, add_special_tokens=False)
        assert grammar.accept_tokens("r", tokens), (kind, text)
        assert grammar.accept_tokens("r", [hf_llama3.eos_token_id]) and grammar.is_terminated()


def test_backends_take_a_width_narrower_than_the_tokenizer(fake_engines, hf_llama3):
    """A model whose logits leave out some of its tokenizer's added tokens (Llama-3.2 Vision's
    `<|image|>`): the engine's width is the masks' width, not the tokenizer's (here the last 56
    of Llama-3's reserved ids left out)."""
    vllm_adapter = fake_engines["vllm"]
    sglang_adapter = fake_engines["sglang"]
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    width = 128_200
    assert len(hf_llama3) > width
    config = SimpleNamespace(structured_outputs_config=SimpleNamespace(disable_any_whitespace=True))
    backend = vllm_adapter.TokensieveBackend(config, tokenizer=hf_llama3, vocab_size=width)
    bitmask = backend.allocate_token_bitmask(2)
    assert backend.vocab_size == width and tuple(bitmask.shape) == (2, (width + 31) // 32)
    grammar = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(SCHEMA))
    for token in target_tokens(hf_llama3):
        grammar.fill_bitmask(bitmask, 0)
        assert bit(bitmask[0], token)
        assert grammar.accept_tokens("r", [token])
    assert grammar.is_terminated()
    sglang_backend = sglang_adapter.TokensieveGrammarBackend(hf_llama3, width, {hf_llama3.eos_token_id})
    sglang_grammar = sglang_backend.dispatch_json(json.dumps(SCHEMA))
    assert sglang_grammar.allocate_vocab_mask(width, 1, "cpu").shape[-1] == (width + 31) // 32


def test_sglang_backend_through_its_calls(fake_engines, hf_llama3):
    sglang_adapter = fake_engines["sglang"]
    from sglang.srt.constrained.base_grammar_backend import GrammarRow, InvalidGrammarObject

    backend = sglang_adapter.TokensieveGrammarBackend(hf_llama3, 128_256, {hf_llama3.eos_token_id}, whitespace="compact")
    template = backend.dispatch_json(json.dumps(SCHEMA))
    assert isinstance(template, sglang_adapter.TokensieveGrammar)
    assert isinstance(backend.dispatch_regex("ab(c"), InvalidGrammarObject)
    grammars = [template.copy() for _ in range(3)]  # SGLang copies the cached template per request
    mask = grammars[0].allocate_vocab_mask(128_256, 3, "cpu")
    target = target_tokens(hf_llama3)
    for step, token in enumerate(target):
        sglang_adapter.TokensieveGrammar.fill_vocab_mask_batched([GrammarRow(i, g) for i, g in enumerate(grammars)], mask)
        for i in range(3):
            assert bit(mask[i], token)
        if step == 1:  # after `{"` the grammar forces the first key
            jumped = grammars[0].try_jump_forward(hf_llama3)
            assert jumped is not None and hf_llama3.decode(jumped[0]).startswith("name")
        for g in grammars:
            g.accept_token(token)
    assert all(g.is_terminated() and g.finished for g in grammars)
    grammars[0].rollback(2)
    assert not grammars[0].is_terminated()
    import torch

    grammars[0].fill_vocab_mask(mask, 0)  # after "36": a digit, "," or "}" may follow
    logits = torch.zeros(3, 128_256)
    sglang_adapter.TokensieveGrammar.apply_vocab_mask(logits, mask)
    close, quote = (hf_llama3.encode(t, add_special_tokens=False)[0] for t in ("}", '"'))
    assert torch.isfinite(logits[0, close]) and torch.isinf(logits[0, quote])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_real_engine_packages(engine, shared_dir):
    python = os.environ.get(f"TOKENSIEVE_{engine.upper()}_PYTHON")
    if not python:
        pytest.skip(f"set TOKENSIEVE_{engine.upper()}_PYTHON to a Python with {engine} installed (tests/engines/README.md)")
    env = dict(os.environ, TOKENSIEVE_SHARED=str(shared_dir), PYTHONPATH=str(Path(__file__).resolve().parents[1] / "pybind"))
    result = subprocess.run([python, str(ENGINES / f"{engine}_check.py")], capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stdout[-2000:] + result.stderr[-3000:]
