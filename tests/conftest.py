"""Shared pytest fixtures.

Each section belongs to one part of the project; append new sections at the end
rather than editing another section.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PYBIND_DIR = REPO_ROOT / "pybind"
PACKAGE_DIR = PYBIND_DIR / "tokensieve"

# Tests run against the source tree when the package is not installed.
if importlib.util.find_spec("tokensieve") is None:
    sys.path.insert(0, str(PYBIND_DIR))


# =====================================================================================
# Runtime layer and the Pyodide-in-Node harness (owner: runtime backends)
#
# `pyodide_run(code, files=None, package=True)` runs Python source inside Pyodide
# under Node (tests/pyodide_runner.mjs) and returns the JSON value of its `RESULT`
# variable. With package=True the whole `pybind/tokensieve/` tree is copied to
# /lib/tokensieve_src/tokensieve/ in Pyodide's file system, so `import tokensieve`
# works there. Each call starts a fresh Node process (about 2 s of Pyodide start-up):
# batch many checks into one call and return them in RESULT.
#
# Pyodide comes from the npm package pinned in web-demo/package.json; the session
# fixture `pyodide_dist` installs it with `npm ci` when it is missing. If node or
# npm are missing these tests FAIL: CI must never skip the Pyodide backend quietly.
# =====================================================================================

WEB_DEMO_DIR = REPO_ROOT / "web-demo"
PYODIDE_RUNNER = REPO_ROOT / "tests" / "pyodide_runner.mjs"
PYODIDE_SRC_ROOT = "/lib/tokensieve_src"
PYODIDE_TIMEOUT_S = 300.0
NPM_INSTALL_TIMEOUT_S = 600.0

PyodideRun = Callable[..., Any]


def _pinned_pyodide_version() -> str:
    """Return the exact `pyodide` version web-demo/package.json pins."""
    manifest = json.loads((WEB_DEMO_DIR / "package.json").read_text())
    return str(manifest["dependencies"]["pyodide"])


def _installed_pyodide_version(dist: Path) -> str | None:
    """Return the version of the unpacked npm `pyodide` package, or None if absent."""
    try:
        manifest = json.loads((dist / "package.json").read_text())
    except (OSError, ValueError):
        return None
    if not (dist / "pyodide.mjs").is_file():
        return None
    return str(manifest.get("version"))


def _require_tool(name: str) -> str:
    """Return the path of a command-line tool, or fail the test session loudly."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` is not on PATH. The Pyodide backend tests need Node.js >= 18 "
            f"with npm (they run tokensieve inside Pyodide under Node). Install Node.js "
            f"and re-run; these tests never skip, so CI cannot pass without them.",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def pyodide_dist() -> Path:
    """Return web-demo/node_modules/pyodide, installing it with npm if needed.

    Raises:
        pytest.fail: node or npm is missing, or the install fails.
    """
    _require_tool("node")
    dist = WEB_DEMO_DIR / "node_modules" / "pyodide"
    pinned = _pinned_pyodide_version()
    if _installed_pyodide_version(dist) == pinned:
        return dist
    # pytest-xdist workers may get here together: one installs, the others wait for it.
    lock_path = Path(tempfile.gettempdir()) / f"tokensieve-npm-{hashlib.sha1(bytes(WEB_DEMO_DIR)).hexdigest()[:12]}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_pyodide(dist, pinned)


def _install_pyodide(dist: Path, pinned: str) -> Path:
    """Install the pinned npm `pyodide` into web-demo/ unless another process just did."""
    if _installed_pyodide_version(dist) == pinned:
        return dist
    npm = _require_tool("npm")
    locked = (WEB_DEMO_DIR / "package-lock.json").is_file()
    command = [npm, "ci" if locked else "install", "--no-audit", "--no-fund"]
    try:
        completed = subprocess.run(
            command,
            cwd=WEB_DEMO_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"`{' '.join(command)}` in {WEB_DEMO_DIR} took over "
            f"{NPM_INSTALL_TIMEOUT_S:.0f} s; check access to the npm registry",
            pytrace=False,
        )
    installed = _installed_pyodide_version(dist)
    if completed.returncode != 0 or installed != pinned:
        pytest.fail(
            f"`{' '.join(command)}` in {WEB_DEMO_DIR} did not install pyodide "
            f"{pinned} (exit {completed.returncode}, found {installed}):\n"
            f"{completed.stdout}\n{completed.stderr}",
            pytrace=False,
        )
    return dist


def _package_files() -> dict[str, bytes]:
    """Read every file of pybind/tokensieve/ keyed by its path in Pyodide's FS."""
    files: dict[str, bytes] = {}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        relative = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or "__pycache__" in relative.parts:
            continue
        if path.suffix in {".pyc", ".pyo"} or path.name.startswith("."):
            continue
        target = f"{PYODIDE_SRC_ROOT}/tokensieve/{relative.as_posix()}"
        files[target] = path.read_bytes()
    return files


def _encode_files(files: dict[str, bytes]) -> dict[str, str]:
    """Base64-encode file contents for the job file."""
    for target in files:
        if not target.startswith("/"):
            raise ValueError(f"Pyodide FS paths must be absolute, got {target!r}")
    return {target: base64.b64encode(data).decode("ascii") for target, data in files.items()}


@pytest.fixture(scope="session")
def pyodide_run(pyodide_dist: Path) -> Iterator[PyodideRun]:
    """Return `run(code, files=None, package=True, timeout_s=300) -> RESULT`.

    The callable runs `code` in a fresh Pyodide under Node and returns the JSON value
    of the Python variable `RESULT` (None if unset). Python output inside Pyodide
    goes to this process's stderr (shown by pytest on failure).

    Args (of the callable):
        code: Python source; assign the answer to `RESULT`.
        files: extra files, {absolute Pyodide path: bytes}.
        package: also ship pybind/tokensieve/ so `import tokensieve` works.
        timeout_s: wall-clock limit for the whole Node process.

    Raises (from the callable):
        AssertionError: the code raised (message carries the Python traceback), the
            runner crashed, or it timed out.
    """
    node = _require_tool("node")
    package_encoded: dict[str, str] | None = None
    job_dir = Path(tempfile.mkdtemp(prefix="tokensieve-pyodide-"))

    def run(
        code: str,
        files: dict[str, bytes] | None = None,
        package: bool = True,
        timeout_s: float = PYODIDE_TIMEOUT_S,
    ) -> Any:
        nonlocal package_encoded
        encoded: dict[str, str] = {}
        if package:
            if package_encoded is None:
                package_encoded = _encode_files(_package_files())
            encoded.update(package_encoded)
        encoded.update(_encode_files(files or {}))
        job = {"files": encoded, "sys_path": [PYODIDE_SRC_ROOT], "code": code}
        with tempfile.NamedTemporaryFile(
            "w", dir=job_dir, suffix=".json", delete=False
        ) as job_file:
            json.dump(job, job_file)
        environment = dict(os.environ, TOKENSIEVE_PYODIDE_DIR=str(pyodide_dist))
        try:
            completed = subprocess.run(
                [node, str(PYODIDE_RUNNER), job_file.name],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=environment,
            )
        except subprocess.TimeoutExpired as error:
            raise AssertionError(
                f"Pyodide job timed out after {timeout_s:.0f} s; stderr:\n"
                f"{error.stderr!r}"
            ) from None
        finally:
            os.unlink(job_file.name)
        if completed.stderr:
            sys.stderr.write(completed.stderr)
        lines = [line for line in completed.stdout.splitlines() if line.strip()]
        try:
            answer = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise AssertionError(
                f"the Pyodide runner crashed (exit {completed.returncode}); stdout:\n"
                f"{completed.stdout}\nstderr:\n{completed.stderr}"
            ) from None
        if not answer.get("ok"):
            raise AssertionError(
                "Python code failed inside Pyodide:\n" + str(answer.get("error"))
            )
        return answer.get("result")

    yield run
    shutil.rmtree(job_dir, ignore_errors=True)


# =====================================================================================
# Real tokenizers and module builds (owner: matcher core)
#
# `shared_dir`: the fixtures folder `../shared` (or $TOKENSIEVE_SHARED); missing fixtures
# FAIL the tests that need them. `tokenizer` is parametrized over the real tokenizers the
# matcher suites run on (each loaded once per session); `wasm_variant` runs a test under both
# module builds (release and the bounds-checked safe build).
# =====================================================================================

MATCHER_TOKENIZERS = ("gpt2", "llama3", "qwen2_5", "mistral")


def shared_path() -> Path:
    """The shared fixtures folder; fails loudly when it is missing."""
    env = os.environ.get("TOKENSIEVE_SHARED")
    path = Path(env) if env else REPO_ROOT.parent / "shared"
    if not (path / "tokenizers").is_dir():
        pytest.fail(f"the shared fixtures are missing: expected {path}/tokenizers (set TOKENSIEVE_SHARED)")
    return path


_TOKENIZER_CACHE: dict[str, Any] = {}


def load_shared_tokenizer(name: str) -> Any:
    """A tokenizer from ../shared/tokenizers/<name>, loaded once per session."""
    if name not in _TOKENIZER_CACHE:
        from tokensieve import Tokenizer

        _TOKENIZER_CACHE[name] = Tokenizer.from_file(shared_path() / "tokenizers" / name / "tokenizer.json.gz")
    return _TOKENIZER_CACHE[name]


_LLGUIDANCE_TOKENIZER_CACHE: dict[str, Any] = {}


def load_llguidance_tokenizer(name: str) -> Any:
    """llguidance's tokenizer for ../shared/tokenizers/<name> (no slices), built once per session."""
    if name not in _LLGUIDANCE_TOKENIZER_CACHE:
        import gzip

        import llguidance

        text = gzip.decompress((shared_path() / "tokenizers" / name / "tokenizer.json.gz").read_bytes()).decode()
        _LLGUIDANCE_TOKENIZER_CACHE[name] = llguidance.LLTokenizer(text, slices=[])
    return _LLGUIDANCE_TOKENIZER_CACHE[name]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_path()


@pytest.fixture(scope="session", params=MATCHER_TOKENIZERS)
def tokenizer_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def tokenizer(tokenizer_name: str) -> Any:
    return load_shared_tokenizer(tokenizer_name)


@pytest.fixture(params=("release", "safe"))
def wasm_variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test under one build of the core (TOKENSIEVE_WASM_VARIANT)."""
    monkeypatch.setenv("TOKENSIEVE_WASM_VARIANT", str(request.param))
    return str(request.param)
