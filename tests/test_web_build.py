"""`tokensieve web --build-only`: the site's files and the package's pure wheel.

The wheel is checked as an installer would: every file listed in RECORD with its sha256 (computed
here with hashlib), both `.wasm` builds and the tokenizer inside, and the package importable
from the unpacked wheel alone.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile

from conftest import PACKAGE_DIR, PYBIND_DIR


def test_build_only_writes_the_page_pyodide_and_a_valid_pure_wheel(pyodide_dist, tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, PYTHONPATH=str(PYBIND_DIR), TOKENSIEVE_PYODIDE_DIR=str(pyodide_dist))
    done = subprocess.run(
        [sys.executable, "-m", "tokensieve", "web", "--build-only", "--no-install", "--out", str(site)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in ("index.html", "app.js", "worker.js", "style.css", "pyodide/pyodide.mjs", "pyodide/pyodide.asm.wasm",
                 "js/tokensieve.mjs", "js/tokensieve.wasm"):
        assert (site / name).is_file(), name
    wheel = site / "wheels" / (site / "wheels" / "latest.txt").read_text().strip()
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(record_name).decode())))
        listed = {row[0] for row in rows}
        assert listed == names
        for path, digest, size in rows:
            if path == record_name:
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data), path
        for required in ("tokensieve/_wasm/tokensieve.wasm", "tokensieve/_wasm/tokensieve_safe.wasm",
                         "tokensieve/data/gpt2.tokenizer.json.gz", "tokensieve/py.typed", "tokensieve/__init__.py"):
            assert required in names, required
            if required.endswith(".wasm"):
                assert archive.read(required) == (PACKAGE_DIR / required.split("/", 1)[1]).read_bytes()
        assert not any("__pycache__" in n for n in names)
        archive.extractall(tmp_path / "unpacked")
    probe = "import tokensieve, json; m = tokensieve.Matcher(tokensieve.Tokenizer.default(), tokensieve.Grammar.regex('[0-9]+')); print(tokensieve.__file__, m.is_accepting())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path / "unpacked")), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert str(tmp_path / "unpacked") in done.stdout and done.stdout.strip().endswith("False")
