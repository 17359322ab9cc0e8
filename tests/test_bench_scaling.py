"""`tokensieve bench scaling` runs end to end, and its probe finds no trap and no compile that
grows past its bound.

The probe builds each grammar shape at n and 8n and compiles it in a fresh process; here three
shapes at n = 300. At 2,400 optional parts in a row, the derivative's recursion ran past
wasmtime's stack for wasm before the seventeenth session (a trap, which the command flags);
it is refused at `derivative_depth` now.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT, shared_path


def test_bench_scaling_runs_and_flags_nothing(tmp_path) -> None:
    out = tmp_path / "scaling.json"
    env = dict(os.environ, TOKENSIEVE_SHARED=str(shared_path()), PYTHONPATH=str(REPO_ROOT / "pybind"))
    shapes = ("regex_optional_run", "json_one_of_consts", "gbnf_optional_run")
    args = ["scaling", "--size", "300", "--timeout", "120", "--json", str(out)]
    for shape in shapes:
        args += ["--shape", shape]
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [row["shape"] for row in rows] == list(shapes)
    for row in rows:
        for size in ("small", "large"):
            outcome = row[size]["outcome"]
            assert outcome == "ok" or outcome.startswith(("LimitError", "GrammarError")), (row["shape"], size, outcome)
            assert row[size]["seconds"] is not None and row[size]["seconds"] < 60, row
        assert not row["flagged"], row
    assert rows[0]["large"]["outcome"].startswith("LimitError")  # 2,400 optional parts: derivative_depth
