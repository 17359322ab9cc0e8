"""The same module under Pyodide (in Node) computes the same masks as under wasmtime.

Pyodide has no numpy and no `tokenizers` here, so this also proves the package's pure-Python
paths: tokenizer.json parsing, the BPE fallback encoder, and `array`-based masks.
"""

from __future__ import annotations

import base64

import pytest

from tokensieve import Grammar, Matcher

PATTERNS = [r'[^"]*"', r"[0-9]{1,3}", r"(yes|no|日本語)[.!]", r"[a-z ]{0,40}\.", "lark:" + r"""
start: value
value: "{" "}" | "{" pair ("," pair)* "}" | "[" "]" | "[" value ("," value)* "]" | STRING | NUMBER
pair: STRING ":" value
STRING: /"[^"\\]*"/
NUMBER: /[0-9]+/
%ignore /[ ]+/
"""]
TEXTS = ['The quick brown fox says hi"', "123", "日本語!", "hello wor", '{"a": [1, 22, {"b": "c d"}], "e": "日本"}']


def make_grammar(pattern):
    return Grammar.lark(pattern[5:]) if pattern.startswith("lark:") else Grammar.regex(pattern)


PYODIDE_CODE = r"""
import base64, sys, tokensieve
from tokensieve import Grammar, Matcher, Tokenizer
def make_grammar(pattern):
    return Grammar.lark(pattern[5:]) if pattern.startswith("lark:") else Grammar.regex(pattern)
tok = Tokenizer.from_file("/tmp/llama3/tokenizer.json.gz")
out = {"platform": sys.platform, "masks": [], "tokens": []}
for variant in ("release", "safe"):
    import os
    os.environ["TOKENSIEVE_WASM_VARIANT"] = variant
    for pattern, text in zip(PATTERNS, TEXTS):
        m = Matcher(tok, make_grammar(pattern))
        ids = tok.encode(text)
        out["tokens"].append(ids)
        masks = [m.compute_bitmask().tobytes()]
        for t in ids:
            if not m.consume_token(t):
                break
            masks.append(m.compute_bitmask().tobytes())
        out["masks"].append([base64.b64encode(x).decode() for x in masks])
        out.setdefault("ff", []).append(Matcher(tok, make_grammar(pattern)).compute_ff_bytes().decode("utf-8", "replace"))
RESULT = out
"""


def test_pyodide_masks_equal_wasmtime_masks(pyodide_run, shared_dir):
    folder = shared_dir / "tokenizers" / "llama3"
    code = f"PATTERNS = {PATTERNS!r}\nTEXTS = {TEXTS!r}\n" + PYODIDE_CODE
    files = {f"/tmp/llama3/{name}": (folder / name).read_bytes() for name in ("tokenizer.json.gz", "tokenizer_config.json")}
    result = pyodide_run(code, files=files)
    assert result["platform"] == "emscripten"

    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    expected_masks = []
    expected_tokens = []
    expected_ff = []
    for pattern, text in zip(PATTERNS, TEXTS):
        m = Matcher(tok, make_grammar(pattern))
        ids = tok.encode(text)
        expected_tokens.append(ids)
        masks = [m.compute_bitmask().tobytes()]
        for t in ids:
            assert m.consume_token(t)
            masks.append(m.compute_bitmask().tobytes())
        expected_masks.append([base64.b64encode(x).decode() for x in masks])
        expected_ff.append(Matcher(tok, make_grammar(pattern)).compute_ff_bytes().decode("utf-8", "replace"))
    # Both module builds ran under Pyodide, one after the other.
    assert result["tokens"] == expected_tokens * 2
    assert result["ff"] == expected_ff * 2
    for got, want in zip(result["masks"], expected_masks * 2):
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"mask {i} differs"


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
texts = ["", "ab", "hello", "a", "xyzw", "q", "abcdefgh", "no"]
matchers = []
for text in texts:
    m = Matcher(tok, grammar)
    for t in tok.encode(text):
        assert m.consume_token(t)
    matchers.append(m)
words = matchers[0].mask_words
rows = [7, 0, 3, 5, 1, 6, 2, 4]
bitmask = array.array("i", bytes(4 * words * 9))
fill_bitmasks(matchers, bitmask, rows)
RESULT = {
    "equal": [bitmask[row * words : (row + 1) * words].tobytes() == m.compute_bitmask().tobytes() for m, row in zip(matchers, rows)],
    "untouched": not any(bitmask[8 * words :]),
    "some": sum(1 for x in bitmask if x),
}
"""
    result = pyodide_run(code)
    assert result["equal"] == [True] * 8
    assert result["untouched"] and result["some"] > 0
