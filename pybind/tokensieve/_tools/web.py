"""`tokensieve web`: build the browser demo and serve it on 127.0.0.1, offline.

The site is three things side by side in one folder:

- the page itself (`web-demo/index.html`, `app.js`, `worker.js`, `style.css` of a source
  checkout);
- Pyodide, copied from the npm package `web-demo/package.json` pins (the first run installs it
  with `npm ci` in `web-demo/` when it is missing; nothing is fetched while serving);
- `js/`: the plain-JavaScript host `wasm/js/tokensieve.mjs` and the core, for pages that want
  the module without Python;
- the tokensieve package as a pure wheel (`py3-none-any`) with both `.wasm` builds and the
  bundled GPT-2 tokenizer inside, built here from the package's own files
  (`build_wheel`), which the page's worker unpacks into Pyodide's site-packages.

The server adds `Cross-Origin-Opener-Policy`/`Cross-Origin-Embedder-Policy`, which makes the
page cross-origin isolated: browsers then give `performance.now()` (and so Python's
`time.perf_counter` under Pyodide) microsecond-class resolution instead of 100 µs steps, so
the µs per mask the page shows mean something.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.server
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

__all__ = ["build_wheel", "build_site", "serve", "add_web_command"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_DIR.parent.parent
PAGE_FILES = ("index.html", "app.js", "worker.js", "style.css")
# The parts of the npm `pyodide` package the page loads (the rest is for other setups).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
WASM_FILES = ("tokensieve.wasm", "tokensieve_safe.wasm")


def _version() -> str:
    from .. import __version__

    return __version__


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _ensure_wasm() -> None:
    """Build the core into the package when a source checkout has not built it yet."""
    missing = [name for name in WASM_FILES if not (PACKAGE_DIR / "_wasm" / name).is_file()]
    if not missing:
        return
    script = REPO_ROOT / "wasm" / "build_wasm.py"
    if not script.is_file():
        raise SystemExit(
            f"tokensieve web: the package has no {', '.join(missing)} and this is not a source "
            "checkout; reinstall tokensieve"
        )
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_wasm", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(PACKAGE_DIR / "_wasm")


def build_wheel(out_dir: Path) -> Path:
    """Write `tokensieve-<version>-py3-none-any.whl` from the package's own files.

    The wheel holds every `.py` module, `py.typed`, the `.wasm` builds and `data/`; it is
    pure (the core is WebAssembly), so Pyodide installs it by unpacking it.

    Returns:
        The wheel's path.
    """
    _ensure_wasm()
    version = _version()
    dist_info = f"tokensieve-{version}.dist-info"
    files: list[tuple[str, bytes]] = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PACKAGE_DIR)
        if path.suffix in (".py", ".wasm", ".typed") or rel.parts[0] == "data":
            files.append((f"tokensieve/{rel.as_posix()}", path.read_bytes()))
    metadata = (
        f"Metadata-Version: 2.1\nName: tokensieve\nVersion: {version}\n"
        "Summary: Constrained decoding: grammar token masks from a sandboxed WebAssembly core\n"
        "Requires-Python: >=3.10\n"
    ).encode()
    wheel = b"Wheel-Version: 1.0\nGenerator: tokensieve web\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files += [(f"{dist_info}/METADATA", metadata), (f"{dist_info}/WHEEL", wheel)]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    record += f"{dist_info}/RECORD,,\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"tokensieve-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            archive.writestr(name, data)
        archive.writestr(f"{dist_info}/RECORD", record)
    return target


def _pyodide_dir(web_demo: Path, *, install: bool) -> Path:
    explicit = os.environ.get("TOKENSIEVE_PYODIDE_DIR")
    folder = Path(explicit) if explicit else web_demo / "node_modules" / "pyodide"
    missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
    npm = shutil.which("npm")
    if missing and install and not explicit and npm and (web_demo / "package.json").is_file():
        # Once per checkout: the pinned npm package (package-lock.json), then offline for good.
        print(f"tokensieve web: installing the pinned pyodide package into {web_demo} (npm ci)…", flush=True)
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web_demo, check=False)
        missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
    if missing:
        raise SystemExit(
            f"tokensieve web: Pyodide is not installed at {folder} (missing {', '.join(missing)}); "
            f"run `npm ci` in {web_demo} once (it installs the pinned npm package `pyodide`), "
            "or set TOKENSIEVE_PYODIDE_DIR to an unpacked copy"
        )
    return folder


def build_site(out_dir: Path, *, web_demo: Path | None = None, install: bool = True) -> Path:
    """Assemble the static site in `out_dir`: the page, Pyodide, the wheel.

    With `install`, a checkout without Pyodide gets it once with `npm ci` (the version
    `web-demo/package-lock.json` pins); serving never touches the network.

    Returns:
        `out_dir`.

    Raises:
        SystemExit: the page's files or Pyodide are missing (with what to run).
    """
    web_demo = web_demo or REPO_ROOT / "web-demo"
    missing = [name for name in PAGE_FILES if not (web_demo / name).is_file()]
    if missing:
        raise SystemExit(
            f"tokensieve web: the page's files are not in {web_demo} (missing {', '.join(missing)}); "
            "run it from a source checkout or pass --web-demo"
        )
    pyodide = _pyodide_dir(web_demo, install=install)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in PAGE_FILES:
        shutil.copyfile(web_demo / name, out_dir / name)
    (out_dir / "pyodide").mkdir(exist_ok=True)
    for name in PYODIDE_FILES:
        target = out_dir / "pyodide" / name
        if not target.exists() or target.stat().st_size != (pyodide / name).stat().st_size:
            shutil.copyfile(pyodide / name, target)
    # The plain-JS host (no Pyodide) and the core beside it: the page does not need them, the
    # browser test loads them to check the JS binding in a browser too.
    js_source = REPO_ROOT / "wasm" / "js" / "tokensieve.mjs"
    if js_source.is_file():
        (out_dir / "js").mkdir(exist_ok=True)
        shutil.copyfile(js_source, out_dir / "js" / "tokensieve.mjs")
    wheel = build_wheel(out_dir / "wheels")
    if js_source.is_file():
        shutil.copyfile(PACKAGE_DIR / "_wasm" / "tokensieve.wasm", out_dir / "js" / "tokensieve.wasm")
    (out_dir / "wheels" / "latest.txt").write_text(wheel.name + "\n")
    return out_dir


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files with the isolation headers and the MIME types the page needs."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".whl": "application/zip",
        ".json": "application/json",
    }

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        if os.environ.get("TOKENSIEVE_WEB_LOG"):
            super().log_message(format, *args)


def serve(site: Path, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve `site` until interrupted; prints the page's URL first (port 0: any free port)."""
    handler = lambda *a, **k: _Handler(*a, directory=str(site), **k)  # noqa: E731
    with http.server.ThreadingHTTPServer((host, port), handler) as server:
        address = server.server_address
        print(f"tokensieve web: serving {site} at http://{address[0]}:{address[1]}/", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def _run(args: argparse.Namespace) -> int:
    web_demo = Path(args.web_demo) if args.web_demo else None
    if args.out:
        site = build_site(Path(args.out), web_demo=web_demo, install=not args.no_install)
    else:
        site = build_site(
            Path(tempfile.mkdtemp(prefix="tokensieve-web-")), web_demo=web_demo, install=not args.no_install
        )
    if args.build_only:
        print(f"tokensieve web: built {site}")
        return 0
    serve(site, host=args.host, port=args.port)
    return 0


def add_web_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `tokensieve web`."""
    web = sub.add_parser(
        "web",
        help="build the in-browser demo (Pyodide + this package) and serve it on 127.0.0.1, offline",
    )
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=8000, help="port (0: any free port; default 8000)")
    web.add_argument("--out", help="build the site into this folder (default: a fresh temporary folder)")
    web.add_argument("--web-demo", help="the page's source folder (default: web-demo/ of the checkout)")
    web.add_argument("--build-only", action="store_true", help="build the site and exit")
    web.add_argument("--no-install", action="store_true", help="do not run `npm ci` when Pyodide is missing")
    web.set_defaults(run=_run)

