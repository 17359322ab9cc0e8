"""Fuzzing (issue 9, item 6): grammar texts and token streams end in a result or a named
`TokensieveError`, within bounds, with a bystander matcher that stays correct.

The generators and the verdicts live in the package (`tokensieve._tools.fuzz`, also behind
`tokensieve fuzz --inputs N`); here Hypothesis drives the same generators through
`st.randoms()` (so failures shrink), derandomized and with a fixed number of examples per kind
and build, about 40 s in all. Every failure the long runs found is a case in
`tests/data/fuzz/cases.json` (format in tests/data/README.md), replayed under both builds.

What fails an input (see `tokensieve._tools.fuzz`): an exception that is not a `TokensieveError`, a
trap, a `LimitError` without its limit or from the wall-clock deadline, a `GrammarError` that
names no place, a step or compile over its bound, a mask that disagrees with consume or with
`is_accepting`, a history that disagrees with what was consumed, and a bystander matcher (on a
finite set of words, in the same core instance) whose mask differs from its oracle's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokensieve import Tokenizer, configure
from tokensieve._tools.fuzz import GENERATORS, KINDS, Fuzzer, FuzzFailure

CASES_PATH = Path(__file__).parent / "data" / "fuzz" / "cases.json"
CASES = json.loads(CASES_PATH.read_text(encoding="utf-8"))
EXAMPLES = {"release": 120, "safe": 40}  # per kind
# Bounds in CPU time of the calling thread; the safe build is several times slower.
STEP_MS_MAX = {"release": 100.0, "safe": 400.0}
COMPILE_S_MAX = {"release": 5.0, "safe": 15.0}

_fuzzers: dict[str, Fuzzer] = {}


@pytest.fixture(scope="module", autouse=True)
def one_instance():
    """Every input and the bystander share one core instance per build."""
    configure(instances=1)
    yield
    _fuzzers.clear()
    configure()


def fuzzer_for(variant: str) -> Fuzzer:
    if variant not in _fuzzers:
        _fuzzers[variant] = Fuzzer(Tokenizer.default(), step_ms_max=STEP_MS_MAX[variant],
                                   compile_s_max=COMPILE_S_MAX[variant], bystander_every=10)
    return _fuzzers[variant]


def run_input(fuzzer: Fuzzer, kind: str, value: object) -> str:
    try:
        return fuzzer.run(kind, value)
    except FuzzFailure as failure:
        raise AssertionError(f"{failure.what}: {failure.detail}\ninput: {json.dumps(value)[:3000]}") from None


@pytest.mark.parametrize("kind", KINDS)
def test_fuzzed_inputs_end_in_a_result_or_a_named_error(kind, wasm_variant):
    fuzzer = fuzzer_for(wasm_variant)

    @settings(max_examples=EXAMPLES[wasm_variant], derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.data_too_large])
    @given(st.randoms(use_true_random=False))
    def check(r):
        run_input(fuzzer, kind, GENERATORS[kind](r))

    check()
    fuzzer.check_bystander()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_fuzz_corpus_case(case, wasm_variant):
    fuzzer = fuzzer_for(wasm_variant)
    outcome = run_input(fuzzer, case["kind"], case["input"])
    if "expect" in case:
        assert outcome in case["expect"], f"{case['name']}: {outcome}, expected one of {case['expect']}"
    fuzzer.check_bystander()


def test_the_corpus_is_well_formed():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    for case in CASES:
        assert case["kind"] in KINDS and case.get("about"), case["name"]
