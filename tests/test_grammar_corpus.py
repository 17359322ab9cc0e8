"""Every grammar of the corpus (tests/data/grammars, format in tests/data/README.md), compiled by
its front-end and run in the core, against the reference recognizer on real tokenizers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfg_check import check_against_reference
from tokensieve import Grammar
from tokensieve._grammar.gbnf import gbnf_to_ir
from tokensieve._grammar.lark import lark_to_ir

DATA = Path(__file__).parent / "data" / "grammars"


def _cases(index: str, kind: str) -> list[tuple[str, dict]]:
    path = DATA / index
    return [(kind, case) for case in json.loads(path.read_text())] if path.exists() else []


CASES = _cases("cases.json", "lark") + _cases("gbnf_cases.json", "gbnf")


@pytest.mark.parametrize(("kind", "case"), CASES, ids=[f"{k}-{c['name']}" for k, c in CASES])
@pytest.mark.parametrize("tok_name", ["llama3", "mistral"])
def test_corpus_grammar_masks_follow_the_reference(kind, case, tok_name, wasm_variant):
    from conftest import load_shared_tokenizer

    text = (DATA / case["file"]).read_text()
    ir = gbnf_to_ir(text) if kind == "gbnf" else lark_to_ir(text)
    grammar = Grammar.from_ir(ir, source=text, kind=kind)
    check_against_reference(
        load_shared_tokenizer(tok_name), grammar, ir, case["accept"], case["reject"], seed=case["name"], steps_max=3
    )


def test_the_corpus_is_there():
    assert len(CASES) >= 8, "tests/data/grammars lost its cases"
