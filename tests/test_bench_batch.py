"""`tokensieve bench batch` runs end to end: the benchmark issue 11's figures come from.

Its warm-up checks that each request's matchers were spread evenly over the core instances
(else the modes would be measured on different placements) and stops otherwise; the
fifteenth session's pattern matchers, placed in the default pool, broke that without any test
noticing. A small run here (16 requests, 2 steps, beside llguidance) must finish and report
sane figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT, shared_path


def test_bench_batch_runs_and_reports_both_engines() -> None:
    env = dict(os.environ, TOKENSIEVE_SHARED=str(shared_path()), PYTHONPATH=str(REPO_ROOT / "pybind"))
    done = subprocess.run(
        [sys.executable, "-m", "bench", "batch", "--sizes", "16", "--steps", "2", "--rounds", "1",
         "--vs", "llguidance", "--json"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout[done.stdout.index("\n{") + 1 :])
    (row,) = report["rows"]
    assert row["requests"] == 16 and row["instances"] >= 1
    for key in ("tokensieve_batch_us", "tokensieve_serial_us", "llguidance_batch_us", "llguidance_serial_us"):
        assert 0 < row[key] < 1e6, (key, row)
