"""Compile the Zig core (`core/src/abi.zig`) into the package's two WebAssembly modules.

`tokensieve.wasm` is the release build (ReleaseFast, SIMD128); `tokensieve_safe.wasm` is the
bounds-checked build (ReleaseSafe) that the test suite also runs. Both are freestanding wasm32
modules with no imports. The compiler is the `ziglang` package from PyPI, so nothing but Python
is needed: `python wasm/build_wasm.py [OUT_DIR]`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
DEFAULT_OUT = ROOT / "pybind" / "tokensieve" / "_wasm"

VARIANTS = {"tokensieve.wasm": "ReleaseFast", "tokensieve_safe.wasm": "ReleaseSafe"}
# Must match `stack_size_bytes` in core/build.zig.
STACK_SIZE_BYTES = 8 * 1024 * 1024


def build(out_dir: Path = DEFAULT_OUT, cache_dir: Path | None = None) -> list[Path]:
    """Build both modules into `out_dir`; returns their paths. Raises on a compile error."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_dir or (CORE / ".zig-cache")
    built = []
    for name, mode in VARIANTS.items():
        target = out_dir / name
        cmd = [
            sys.executable, "-m", "ziglang", "build-exe", str(CORE / "src" / "abi.zig"),
            "-target", "wasm32-freestanding", "-mcpu=generic+simd128+bulk_memory",
            "-O", mode, "-fno-entry", "-rdynamic", "-fstrip",
            "--stack", str(STACK_SIZE_BYTES),
            "--cache-dir", str(cache), "--name", target.stem, f"-femit-bin={target}",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"zig failed to build {name}:\n{result.stderr}")
        built.append(target)
    return built


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in build(out):
        print(f"{path} ({path.stat().st_size} bytes)")
