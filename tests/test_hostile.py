"""The hostile corpus (tests/data/hostile/cases.json): every case ends in a result, a refusal or
a `LimitError`/`GrammarError` that names its limit, and no step takes long.

"Long" is relative to a baseline measured in the same process and build (the first mask of a
small regex grammar, a partial walk of the Llama-3 trie: about 2 ms release, 3 ms safe), not
an absolute time: machines and loads differ. Before the bounds of issue 9 the corpus had steps
of 0.2 s to 5 s (300 to 3,000 baselines) and a GBNF front-end that ran for minutes; now a
step that runs into a limit stops after its fuel or parser items, 3 to 8 ms of CPU on this
machine (docs/limits.md, "Calibration"). Every case runs under both
builds of the core; random walks are cut to a few dozen tokens to keep the suite short (the
full drives are `tokensieve bench hostile`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tokensieve import Grammar, Matcher, configure
from tokensieve._tools.hostile import load_cases, run_ours

from conftest import load_shared_tokenizer

CASES = load_cases(Path(__file__).parent / "data" / "hostile" / "cases.json")
STEP_BASELINES_MAX = 40  # a step may take this many baseline calls
COMPILE_BASELINES_MAX = 3_000  # compiling (front-end included) may take this many
_baselines: dict[str, float] = {}


@pytest.fixture
def fresh_pools():
    """Cases reconfigure the default pool (one fresh instance each); restore it afterwards."""
    yield
    configure()


def baseline_ms(variant: str, *, again: bool = False) -> float:
    """Median of five first masks of a small regex grammar, in this process and build."""
    if again or variant not in _baselines:
        tok = load_shared_tokenizer("llama3")
        times = []
        for _ in range(6):
            m = Matcher(tok, Grammar.regex("[0-9a-f]{1,64}|[A-Z][a-z]+|[ -~]{2,5}"))
            t0 = time.perf_counter()
            m.compute_bitmask()
            times.append((time.perf_counter() - t0) * 1e3)
        _baselines[variant] = sorted(times[1:])[2]
    return _baselines[variant]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_case_ends_in_a_result_or_a_named_limit_within_the_bound(case, wasm_variant, fresh_pools):
    tok = load_shared_tokenizer("llama3")
    base = baseline_ms(wasm_variant)
    out = run_ours(case, tok, steps_max=40)
    if out.worst_ms > STEP_BASELINES_MAX * base or (out.compile_ms or 0) > COMPILE_BASELINES_MAX * base:
        # Wall-clock times: another process (a second pytest-xdist worker, another job) may have
        # had the core. Measure the baseline and the case once more; the slow steps this test
        # exists for took 300 to 3,000 baselines, so a second run does not hide them.
        configure()
        base = baseline_ms(wasm_variant, again=True)
        out = run_ours(case, tok, steps_max=40)
    kind = out.result.split(":")[0].split("@")[0]
    assert kind in case["expect"], f"{case['name']}: {out.result} (expected one of {case['expect']})"
    if kind == "limit":
        assert out.result != "limit:?", "a LimitError must name its limit"
    assert out.worst_ms <= STEP_BASELINES_MAX * base, (
        f"{case['name']}: a {out.worst_what} step took {out.worst_ms:.1f} ms, "
        f"{out.worst_ms / base:.0f} baselines of {base:.2f} ms")
    assert out.compile_ms is not None and out.compile_ms <= COMPILE_BASELINES_MAX * base, (
        f"{case['name']}: compiling took {out.compile_ms:.0f} ms, {out.compile_ms / base:.0f} baselines")
