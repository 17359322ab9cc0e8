"""The core's own Zig unit tests (`zig build test`, native), run from the Python suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core"


def test_zig_unit_tests_pass():
    result = subprocess.run(
        [sys.executable, "-m", "ziglang", "build", "test", "--summary", "all"],
        cwd=CORE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "test success" in output, output
