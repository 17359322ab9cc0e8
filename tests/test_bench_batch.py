"""`tokensieve bench batch` and `bench hf` run end to end: the benchmarks issue 11's figures
come from.

`bench batch`'s warm-up checks that each request's matchers were spread evenly over the core
instances (else the modes would be measured on different placements) and stops otherwise; the
fifteenth session's pattern matchers, placed in the default pool, broke that without any test
noticing. Small runs here (16 requests and 2 steps beside llguidance; 4 generate steps of the
three processors) must finish and report sane figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT, shared_path


def _bench(*args: str) -> str:
    env = dict(os.environ, TOKENSIEVE_SHARED=str(shared_path()), PYTHONPATH=str(REPO_ROOT / "pybind"))
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_batch_runs_and_reports_both_engines() -> None:
    out = _bench("batch", "--sizes", "16", "--steps", "2", "--rounds", "1", "--vs", "llguidance", "--json")
    report = json.loads(out[out.index("\n{") + 1 :])
    (row,) = report["rows"]
    assert row["requests"] == 16 and row["instances"] >= 1
    for key in ("tokensieve_batch_us", "tokensieve_serial_us", "llguidance_batch_us", "llguidance_serial_us"):
        assert 0 < row[key] < 1e6, (key, row)


def test_bench_hf_runs_and_reports_the_three_processors() -> None:
    report = json.loads(_bench("hf", "--steps", "4", "--rounds", "1", "--json"))
    assert set(report) == {"none", "tokensieve", "llguidance", "xgrammar"}
    for name in ("tokensieve", "llguidance", "xgrammar"):
        assert 0 < report[name]["own_ms"] < report[name]["ms_per_step"], (name, report[name])
