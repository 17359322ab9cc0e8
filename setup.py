"""Build hook: compile the Zig core to WebAssembly as part of building the package."""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _load_build_wasm():
    spec = importlib.util.spec_from_file_location("build_wasm", ROOT / "wasm" / "build_wasm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithWasm(build_py):
    """`build_py` that also compiles `core/` into `tokensieve/_wasm/*.wasm`."""

    def run(self):
        super().run()
        build_wasm = _load_build_wasm()
        if getattr(self, "editable_mode", False):
            out = ROOT / "pybind" / "tokensieve" / "_wasm"
        else:
            out = Path(self.build_lib) / "tokensieve" / "_wasm"
        build_wasm.build(out, cache_dir=Path(self.build_temp if hasattr(self, "build_temp") else ROOT / "build") / "zig-cache")


setup(cmdclass={"build_py": BuildPyWithWasm})
