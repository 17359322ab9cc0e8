"""The same module under Pyodide (in Node) computes the same masks as under wasmtime.

Pyodide has no numpy and no `tokenizers` here, so this also proves the package's pure-Python
paths: tokenizer.json parsing, the BPE fallback encoder, the grammar front-ends, and
`array`-based masks.

The masks compared come from the test corpus (tests/data: regex cases, Lark and GBNF grammars,
JSON Schema instances and keyword cases), one accepted text per case on the llama3 tokenizer:
the mask at each of the first STEPS_MAX steps and at the end, under both module builds in
Pyodide, against the release build under wasmtime. One Node process runs them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
STEPS_MAX = 12  # masks compared per text: steps 0..STEPS_MAX-1 and the last one

# Run as it is under wasmtime here and under Pyodide in Node: both sides execute this source.
RUN_CASES = r"""
import hashlib
from tokensieve import Grammar, Matcher


def make_grammar(case):
    kind, source = case["kind"], case["grammar"]
    if kind == "regex":
        return Grammar.regex(source)
    if kind == "lark":
        return Grammar.lark(source)
    if kind == "gbnf":
        return Grammar.gbnf(source)
    return Grammar.json_schema(source)


def run_case(tok, case, steps_max):
    try:
        grammar = make_grammar(case)
        m = Matcher(tok, grammar)
        ids = tok.encode(case["text"])
        masks = []
        for i, t in enumerate(ids + [None]):
            if i < steps_max or t is None:
                masks.append(hashlib.sha256(m.compute_bitmask().tobytes()).hexdigest()[:16])
            if t is None:
                break
            if not m.consume_token(t):
                masks.append(f"token {i} refused")
                break
        ff = Matcher(tok, grammar).compute_ff_bytes().hex()
        return {"tokens": ids, "masks": masks, "accepting": m.is_accepting(), "ff": ff}
    except Exception as error:  # the other side must fail alike
        return {"error": f"{type(error).__name__}: {error}"}
"""

PYODIDE_CODE = r"""
import json, os, sys
from tokensieve import Tokenizer
tok = Tokenizer.from_file("/tmp/llama3/tokenizer.json.gz")
cases = json.loads(open("/tmp/cases.json").read())
out = {"platform": sys.platform}
for variant in ("release", "safe"):
    os.environ["TOKENSIEVE_WASM_VARIANT"] = variant
    out[variant] = [run_case(tok, case, STEPS_MAX) for case in cases]
RESULT = out
"""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def corpus_cases() -> list[dict[str, Any]]:
    """One case per corpus entry: {name, kind, grammar, text} with an accepted text."""
    cases = []
    for case in json.loads((DATA / "regex_cases.json").read_text(encoding="utf-8")):
        cases.append({"name": f"regex/{case['name']}", "kind": "regex", "grammar": case["pattern"], "text": case["accept"][0]})
    for index, kind in (("cases.json", "lark"), ("gbnf_cases.json", "gbnf")):
        for case in json.loads((DATA / "grammars" / index).read_text(encoding="utf-8")):
            source = (DATA / "grammars" / case["file"]).read_text(encoding="utf-8")
            cases.append({"name": f"{kind}/{case['name']}", "kind": kind, "grammar": source, "text": case["accept"][0]})
    for case in json.loads((DATA / "json_schema" / "instances.json").read_text(encoding="utf-8")):
        if case["valid"]:
            text = _compact(case["valid"][0])
            cases.append({"name": f"json_schema/{case['name']}", "kind": "json_schema", "grammar": case["schema"], "text": text})
    from test_json_schema_keywords import CASES, POOL, oracle, ordered

    for name, schema, order in CASES:  # the first pool instance jsonschema calls valid
        validator = oracle(schema)
        value = next(ordered(v, order) for v in POOL if validator.is_valid(ordered(v, order)))
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        cases.append({"name": f"json_keywords/{name}", "kind": "json_schema", "grammar": schema, "text": text})
    return cases


def test_pyodide_masks_equal_wasmtime_masks(pyodide_run, shared_dir, monkeypatch):
    from conftest import load_shared_tokenizer

    monkeypatch.setenv("TOKENSIEVE_WASM_VARIANT", "release")
    cases = corpus_cases()
    assert len(cases) >= 100, "the corpus lost its cases"
    folder = shared_dir / "tokenizers" / "llama3"
    files = {f"/tmp/llama3/{name}": (folder / name).read_bytes() for name in ("tokenizer.json.gz", "tokenizer_config.json")}
    files["/tmp/cases.json"] = json.dumps(cases).encode()
    result = pyodide_run(f"STEPS_MAX = {STEPS_MAX}\n" + RUN_CASES + PYODIDE_CODE, files=files)
    assert result["platform"] == "emscripten"

    namespace: dict[str, Any] = {}
    exec(RUN_CASES, namespace)
    tok = load_shared_tokenizer("llama3")
    expected = [namespace["run_case"](tok, case, STEPS_MAX) for case in cases]
    errors = [(case["name"], want["error"]) for case, want in zip(cases, expected) if "error" in want]
    assert not errors, f"corpus cases fail under wasmtime: {errors}"
    for variant in ("release", "safe"):
        differ = [
            f"{case['name']}: {sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))} {got.get('error', '')}"
            for case, want, got in zip(cases, expected, result[variant], strict=True)
            if got != want
        ]
        assert not differ, f"the {variant} build under Pyodide differs from wasmtime on {len(differ)} cases:\n" + "\n".join(differ[:20])


@pytest.mark.parametrize("variant", ["release", "safe"])
def test_pyodide_reports_grammar_errors_and_traps(pyodide_run, variant):
    code = f"""
import os
os.environ["TOKENSIEVE_WASM_VARIANT"] = {variant!r}
from tokensieve import Grammar, GrammarError, CoreTrap, Matcher, Tokenizer
out = {{}}
try:
    Grammar.regex("ab(c")
except GrammarError as e:
    out["position"] = e.position
tok = Tokenizer.default()
before = Matcher(tok, Grammar.regex("[0-9]+"))
core = before._core
try:
    core.debug_trap()
except CoreTrap as e:
    out["trap"] = True
m = Matcher(tok, Grammar.regex("[0-9]+"))
out["fresh_core"] = m._core is not core
out["ok_after_trap"] = m.consume_token(tok.encode("42")[0]) and before.consume_token(tok.encode("42")[0])
RESULT = out
"""
    result = pyodide_run(code)
    assert result == {"position": 2, "trap": True, "fresh_core": True, "ok_after_trap": True}


def test_pyodide_step_path_survives_heap_growth(pyodide_run):
    """The one-crossing step path copies masks into a stage in Pyodide's own heap; when
    Python's heap grows (its ArrayBuffer is replaced) and the core's memory grows, masks must
    still arrive intact: equal to the masks computed before the growth, and not empty."""
    code = r"""
from tokensieve import Grammar, Matcher, Tokenizer
tok = Tokenizer.default()
g = Grammar.regex(r"(Alice|Bob) [0-9]{2}:[0-5][0-9]")
ids = tok.encode("Alice 12:34")
def masks():
    m = Matcher(tok, g)
    out = [m.compute_bitmask().tobytes()]
    for t in ids:
        m.consume_token(t)
        out.append(m.compute_bitmask().tobytes())
    return out
before = masks()
ballast = [bytearray(64 << 20) for _ in range(3)]   # grows Pyodide's heap by 192 MiB
held = [Matcher(tok, Grammar.regex("x" * 50 + f"[a-z]{{1,{i + 40}}}")) for i in range(30)]  # and the core's
after = masks()
RESULT = {"same": before == after, "masks": len(after), "tokens": len(ids), "empty": sum(not any(b) for b in after)}
"""
    result = pyodide_run(code)
    assert result["same"] and result["masks"] == result["tokens"] + 1 and result["empty"] == 0, result


def test_pyodide_batch_fill_equals_single_fills(pyodide_run):
    """`fill_bitmasks` under Pyodide (one instance, no numpy, no row addresses): the batch
    call and the runtime's row copies into an `array` buffer, checked against each
    matcher's own mask."""
    code = r"""
import array
from tokensieve import Grammar, Matcher, Tokenizer, fill_bitmasks
tok = Tokenizer.default()
grammar = Grammar.regex("[a-z]{0,8}[.!]")
texts = ["", "ab", "hello", "a", "xyzw", "q", "abcdefgh", "no"] * 2  # 16: the batch path
matchers = []
for text in texts:
    m = Matcher(tok, grammar)
    for t in tok.encode(text):
        assert m.consume_token(t)
    matchers.append(m)
words = matchers[0].mask_words
rows = [7, 0, 3, 5, 1, 6, 2, 4, 15, 8, 11, 13, 9, 14, 10, 12]
bitmask = array.array("i", bytes(4 * words * 17))
fill_bitmasks(matchers, bitmask, rows)
RESULT = {
    "equal": [bitmask[row * words : (row + 1) * words].tobytes() == m.compute_bitmask().tobytes() for m, row in zip(matchers, rows)],
    "untouched": not any(bitmask[16 * words :]),
    "some": sum(1 for x in bitmask if x),
}
"""
    result = pyodide_run(code)
    assert result["equal"] == [True] * 16
    assert result["untouched"] and result["some"] > 0
