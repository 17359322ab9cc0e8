"""The plain JavaScript host (`wasm/js/tokensieve.mjs`) computes the Python package's masks.

This test computes, under wasmtime, the masks, forced bytes and accepting flags along token
sequences for a few grammars and tokenizers, writes them with the inputs (token byte strings,
grammar IR bytes or regex text, limit values) to a JSON file, and runs `node --test
wasm/js/test/`: the JS binding rebuilds everything from those inputs through the ABI alone and
must agree, including after forks and rollbacks. Node is required (the test fails without it).
"""

from __future__ import annotations

import array
import base64
import json
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT
from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._tools.demo import EXAMPLES, compile_grammar
from tokensieve._decoding.matcher import mask_token_ids

JS_TESTS = REPO_ROOT / "wasm" / "js" / "test"
WASM = REPO_ROOT / "pybind" / "tokensieve" / "_wasm" / "tokensieve.wasm"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _tokenizer_spec(tok: Tokenizer) -> dict:
    blob, offsets, kinds = tok.core_tables()
    starts = array.array("I")
    starts.frombytes(offsets)
    return {
        "tokens": [_b64(blob[starts[i] : starts[i + 1]]) for i in range(tok.vocab_size)],
        "special": [i for i, kind in enumerate(kinds) if kind == 1],
        "eos": list(tok.eos_token_ids),
        "vocab_size": tok.vocab_size,
    }


def _case(name: str, tok_name: str, tok: Tokenizer, grammar: Grammar, text: str, *, regex: str | None = None) -> dict:
    ids = tok.encode(text)
    m = Matcher(tok, grammar)
    masks, forced, accepting = [], [], []
    refused = None
    for i in range(len(ids) + 1):
        masks.append(_b64(m.compute_bitmask().tobytes()))
        forced.append(_b64(m.compute_ff_bytes()))
        accepting.append(m.is_accepting())
        if i == len(ids):
            break
        if not m.consume_token(ids[i]):
            refused = ids[i]
            break
    if refused is None:  # a token the grammar refuses at the end, for the refusal check
        allowed = set(mask_token_ids(m.compute_bitmask(), tok.vocab_size))
        refused = next(t for t in range(tok.vocab_size) if t not in allowed and t not in tok.eos_token_ids)
    case = {
        "name": name,
        "tokenizer": tok_name,
        "ir": _b64(grammar.encoded_ir),
        "limits": grammar.limits.core_values(),
        "tokens": ids,
        "masks": masks,
        "forced": forced,
        "accepting": accepting,
        "refused": refused,
    }
    if regex is not None:
        case["regex"] = regex
    return case


def test_js_host_masks_equal_python_masks(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` is not on PATH: the JS host tests need Node.js >= 18; they never skip", pytrace=False)
    if not WASM.is_file():
        pytest.fail(f"{WASM} is missing: build the core with `python wasm/build_wasm.py`", pytrace=False)
    gpt2 = Tokenizer.default()
    # A tiny vocabulary from scratch: bytes, a few merges, EOS, and unused ids past the end.
    tiny_tokens = [bytes([b]) for b in range(32, 127)] + [b"ab", b"abc", b"12", b"123", b" a", b"<eos>"]
    tiny = Tokenizer.from_token_bytes(tiny_tokens, eos_token_ids=[len(tiny_tokens) - 1], vocab_size=len(tiny_tokens) + 40)
    cases = []
    for example in EXAMPLES:
        grammar = compile_grammar(example["kind"], example["text"])
        regex = example["text"] if example["kind"] == "regex" else None
        cases.append(_case(f"gpt2 {example['key']}", "gpt2", gpt2, grammar, example["input"], regex=regex))
    # The text leaves the grammar halfway: the masks stop at the refused token.
    cases.append(_case("gpt2 refused", "gpt2", gpt2, Grammar.regex(r"[0-9]{1,3}(, [0-9]{1,3})*"), "12, 345, 6x, 7"))
    cases.append(_case("tiny regex", "tiny", tiny, Grammar.regex(r"(abc|ab|[a-c])+ a?[0-9]{1,4}"), "abcab a123", regex=r"(abc|ab|[a-c])+ a?[0-9]{1,4}"))
    spec = {"tokenizers": {"gpt2": _tokenizer_spec(gpt2), "tiny": _tokenizer_spec(tiny)}, "cases": cases}
    cases_path = tmp_path / "cases.json"
    cases_path.write_text(json.dumps(spec))
    env = {"TOKENSIEVE_JS_CASES": str(cases_path), "TOKENSIEVE_WASM": str(WASM), "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        [node, "--test", "--test-reporter=spec", str(JS_TESTS)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    # Every case ran its three tests, plus the two error tests.
    assert f"pass {3 * len(cases) + 2}\n" in completed.stdout, completed.stdout[-3000:]
