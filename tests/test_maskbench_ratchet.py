"""The MaskBench ratchet: no schema that passed may stop passing.

`tests/data/maskbench_expected.json` holds the expected result of each MaskBench schema
(`"pass"` or a short failure reason), written by `tokensieve bench maskbench --ratchet-update`.
This test runs tokensieve on a fixed, deterministic sample of SAMPLE_SIZE schemas spread over all
21 splits (`pick_sample`, seed SEED) drawn only from the ids present in the ratchet file (the
file may cover a subset of the 11,305 schemas; ids it lacks are never tested here), and fails
on any schema listed as `"pass"` that no longer passes. Improvements (a listed failure that now
passes) are printed, with the command that records them; they never fail the test.

Cost: about 10-30 s on one core (Llama-3 tokenizer; every mask of every test instance).
"""

from __future__ import annotations

import sys

import pytest
from conftest import REPO_ROOT, load_shared_tokenizer, shared_path

from tokensieve._tools.maskbench import Entry, compare_with_ratchet, load_entries, load_ratchet, pick_sample, run_maskbench

RATCHET = REPO_ROOT / "tests" / "data" / "maskbench_expected.json"
SAMPLE_SIZE = 150
SEED = 0
SCHEMA_TIMEOUT_S = 30.0


def _ratchet_entries() -> list[Entry]:
    """The MaskBench schemas the ratchet file lists, in data order."""
    data_dir = shared_path() / "data" / "jsonschemabench" / "maskbench"
    if not data_dir.is_dir():
        pytest.fail(f"the MaskBench data are missing: expected {data_dir} (set TOKENSIEVE_SHARED)")
    expected = load_ratchet(RATCHET)
    return [e for e in load_entries(data_dir) if e.id in expected]


def test_maskbench_ratchet_file_is_well_formed() -> None:
    expected = load_ratchet(RATCHET)
    assert expected, "the ratchet file is empty"
    assert all(isinstance(v, str) and v for v in expected.values())
    assert sum(v == "pass" for v in expected.values()) > 0
    known = {e.id for e in _ratchet_entries()}
    unknown = sorted(set(expected) - known)
    assert not unknown, f"the ratchet lists ids that are not MaskBench schemas: {unknown[:5]}"


def test_maskbench_sample_has_no_regression_from_the_ratchet() -> None:
    expected = load_ratchet(RATCHET)
    entries = _ratchet_entries()
    sample = pick_sample(entries, SAMPLE_SIZE, seed=SEED)
    assert len(sample) == min(SAMPLE_SIZE, len(entries))
    assert {e.split for e in sample} == {e.split for e in entries}, "the sample should touch every split"
    results = run_maskbench(sample, load_shared_tokenizer("llama3"), schema_timeout_s=SCHEMA_TIMEOUT_S,
                            progress=False)["ours"]
    regressions, improvements = compare_with_ratchet(results, expected)
    if improvements:
        print(f"\n{len(improvements)} MaskBench schema(s) now pass that the ratchet lists as failing:",
              file=sys.stderr)
        for r in improvements:
            print(f"  {r.id} (was: {expected[r.id]})", file=sys.stderr)
        print("record them: PYTHONPATH=pybind python -m tokensieve bench maskbench --ratchet-update",
              file=sys.stderr)
    assert not regressions, (
        f"{len(regressions)} MaskBench schema(s) expected to pass now fail:\n"
        + "\n".join(f"  {r.id}: {r.reason}" for r in regressions)
        + "\nfix them, or (if the change is intended) re-run the full benchmark with --ratchet-update"
    )
