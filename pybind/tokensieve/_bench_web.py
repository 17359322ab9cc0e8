"""`tokensieve bench web`: mask µs in headless Chromium (Pyodide) beside wasmtime, same work.

Both hosts run `tokensieve._demo.bench_cases` on the same cases with the same tokenizer: under
wasmtime in this process, and in the web demo's worker in Chromium (`tokensieve web`'s site,
driven by Playwright over the system's `chromium`). Each host runs the cases twice and reports
the second pass, so both are measured warm (V8 tiers WebAssembly up lazily; wasmtime compiles
ahead of time).

Cases: the demo's four examples with GPT-2 (default), and with `--maskbench-every N` every Nth
MaskBench schema with its valid instances (compact JSON), as `tokensieve bench maskbench` does.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["add_web_bench"]


def _cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    from . import _demo

    if not args.maskbench_every:
        return [{"kind": e["kind"], "text": e["text"], "inputs": [e["input"]]} for e in _demo.EXAMPLES]
    from ._maskbench import find_maskbench_dir, instance_text, load_entries

    data = Path(args.data) if args.data else find_maskbench_dir()
    if data is None:
        raise SystemExit("MaskBench data not found: pass --data DIR (…/jsonschemabench/maskbench)")
    cases = []
    for entry in load_entries(data)[:: args.maskbench_every]:
        record = entry.record()
        inputs = [instance_text(t["data"]) for t in record.get("tests", []) if t.get("valid")]
        if inputs:
            cases.append({"kind": "json_schema", "text": json.dumps(record["schema"]), "inputs": inputs, "id": entry.id})
    return cases


def _browser_run(cases: list[dict[str, Any]], tokenizer: Path | None, chromium: str) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from ._web import _Handler, build_site

    site = build_site(Path(tempfile.mkdtemp(prefix="tokensieve-bench-web-")))
    import http.server

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: _Handler(*a, directory=str(site), **k))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for_selector('#status[data-state="ready"]', timeout=300_000)
            info = page.evaluate("tokensieve.ready")
            path = None
            if tokenizer is not None:
                for file in sorted(tokenizer.parent.iterdir()):
                    if file.is_file() and file.stat().st_size < 64 << 20:
                        reply = page.evaluate(
                            "args => tokensieve.call('put_file', args)",
                            {"path": f"/tmp/tokenizer/{file.name}", "base64": base64.b64encode(file.read_bytes()).decode()},
                        )
                        assert reply["ok"], reply
                path = f"/tmp/tokenizer/{tokenizer.name}"
            result: dict[str, Any] = {}
            for _ in range(2):  # the first pass warms V8's tiers up
                reply = page.evaluate(
                    "args => tokensieve.call('bench_cases', args)", {"cases": cases, "tokenizer_path": path}
                )
                if not reply["ok"]:
                    raise SystemExit(f"the page failed: {reply['error']}")
                result = reply["result"]
            result["browser"] = browser.version
            result["isolated"] = info.get("isolated")
            browser.close()
            return result
    finally:
        server.shutdown()
        shutil.rmtree(site, ignore_errors=True)


def _run(args: argparse.Namespace) -> int:
    from . import _demo

    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("no chromium on PATH: apt-get install -y chromium (or pass --chromium PATH)")
    cases = _cases(args)
    tokenizer = Path(args.tokenizer) if args.tokenizer else None
    if tokenizer is None and args.maskbench_every:
        from ._bench import _default_tokenizer

        tokenizer = _default_tokenizer()
    print(f"{len(cases)} cases, tokenizer {tokenizer or 'GPT-2 (bundled)'}", flush=True)
    wasmtime: dict[str, Any] = {}
    for _ in range(2):
        wasmtime = _demo.bench_cases(cases, tokenizer_path=str(tokenizer) if tokenizer else None)
    chrome = _browser_run(cases, tokenizer, chromium)
    rows = [
        ("mask µs p50", wasmtime["mask_us"]["p50"], chrome["mask_us"]["p50"]),
        ("mask µs avg", wasmtime["mask_us"]["avg"], chrome["mask_us"]["avg"]),
        ("mask µs max", wasmtime["mask_us"]["max"], chrome["mask_us"]["max"]),
        ("compile ms p50", wasmtime["compile_ms"]["p50"], chrome["compile_ms"]["p50"]),
        ("compile ms avg", wasmtime["compile_ms"]["avg"], chrome["compile_ms"]["avg"]),
    ]
    print(f"{'':16}{'wasmtime':>12}{'Chromium':>12}{'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:16}{a:12.1f}{b:12.1f}{b / a if a else float('nan'):8.2f}")
    print(
        f"masks timed: {wasmtime['mask_us']['count']} / {chrome['mask_us']['count']}; failed cases: "
        f"{wasmtime['failed']} / {chrome['failed']}; Chromium {chrome['browser']}, cross-origin isolated: "
        f"{chrome['isolated']}"
    )
    if args.json:
        for result in (wasmtime, chrome):
            result.pop("per_case", None)
        Path(args.json).write_text(json.dumps({"wasmtime": wasmtime, "chromium": chrome, "cases": len(cases)}, indent=2))
    return 0


def add_web_bench(sub: Any) -> None:
    """Register `tokensieve bench web`."""
    p = sub.add_parser("web", help="mask µs in headless Chromium (Pyodide) beside wasmtime, on the same cases")
    p.add_argument("--tokenizer", help="tokenizer.json(.gz) (default: GPT-2; Llama-3 with --maskbench-every)")
    p.add_argument("--maskbench-every", type=int, default=0, help="every Nth MaskBench schema instead of the demo examples")
    p.add_argument("--data", help="the maskbench/ folder (default ../shared/data/jsonschemabench/maskbench)")
    p.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    p.add_argument("--json", help="write both hosts' summaries here")
    p.set_defaults(run=_run)
