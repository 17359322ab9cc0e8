"""`tokensieve bench web`: mask µs in headless Chromium (Pyodide) beside wasmtime, same work.

Both hosts run `tokensieve._demo.bench_cases` on the same cases with the same tokenizer: under
wasmtime in this process, and in the web demo's worker in Chromium (`tokensieve web`'s site,
driven by Playwright over the system's `chromium`). Both are warmed with one full pass (V8 tiers
WebAssembly up lazily; wasmtime compiles ahead of time); then the hosts take turns, ten cases
each, for `--rounds` rounds, and every mask keeps its fastest time: on a shared machine that
is the figure least distorted by other jobs, and both hosts see the same load.

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
    from tokensieve._tools import demo as _demo

    if not args.maskbench_every:
        return [{"kind": e["kind"], "text": e["text"], "inputs": [e["input"]]} for e in _demo.EXAMPLES]
    from tokensieve._tools.maskbench import find_maskbench_dir, instance_text, load_entries

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


class _Browser:
    """The demo site served on 127.0.0.1 and open in headless Chromium, ready for requests."""

    def __init__(self, chromium: str, tokenizer: Path | None) -> None:
        import http.server

        from playwright.sync_api import sync_playwright

        from tokensieve._tools.web import _Handler, build_site

        self.site = build_site(Path(tempfile.mkdtemp(prefix="tokensieve-bench-web-")))
        site = str(self.site)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: _Handler(*a, directory=site, **k))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        self.page = self.browser.new_page()
        self.page.goto(f"http://127.0.0.1:{self.server.server_address[1]}/")
        self.page.wait_for_selector('#status[data-state="ready"]', timeout=300_000)
        self.info = self.page.evaluate("tokensieve.ready")
        self.tokenizer_path = None
        if tokenizer is not None:
            for file in sorted(tokenizer.parent.iterdir()):
                if file.is_file() and file.stat().st_size < 64 << 20:
                    reply = self.call("put_file", {"path": f"/tmp/tokenizer/{file.name}", "base64": base64.b64encode(file.read_bytes()).decode()})
                    assert reply["ok"], reply
            self.tokenizer_path = f"/tmp/tokenizer/{tokenizer.name}"

    def call(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.page.evaluate("([method, args]) => tokensieve.call(method, args)", [method, args])  # type: ignore[no-any-return]

    def bench(self, cases: list[dict[str, Any]]) -> dict[str, Any]:
        reply = self.call("bench_cases", {"cases": cases, "tokenizer_path": self.tokenizer_path, "raw": True})
        if not reply["ok"]:
            raise SystemExit(f"the page failed: {reply['error']}")
        return reply["result"]  # type: ignore[no-any-return]

    def close(self) -> None:
        self.browser.close()
        self.playwright.stop()
        self.server.shutdown()
        shutil.rmtree(self.site, ignore_errors=True)


def _summary(values: list[float]) -> dict[str, float]:
    from tokensieve._tools.demo import _percentiles

    return _percentiles(values)


def _run(args: argparse.Namespace) -> int:
    from tokensieve._tools import demo as _demo

    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("no chromium on PATH: apt-get install -y chromium (or pass --chromium PATH)")
    cases = _cases(args)
    tokenizer = Path(args.tokenizer) if args.tokenizer else None
    if tokenizer is None and args.maskbench_every:
        from .basic import _default_tokenizer

        tokenizer = _default_tokenizer()
    print(f"{len(cases)} cases, tokenizer {tokenizer or 'GPT-2 (bundled)'}, {args.rounds} rounds", flush=True)
    tok_path = str(tokenizer) if tokenizer else None
    browser = _Browser(chromium, tokenizer)
    try:
        # Warm both hosts (V8 tiers WebAssembly up lazily), then alternate them chunk by chunk
        # so both see the same machine load; keep each mask's fastest of the rounds.
        _demo.bench_cases(cases, tokenizer_path=tok_path)
        browser.bench(cases)
        chunk = max(1, args.chunk)
        best: dict[str, dict[str, list[float]]] = {"wasmtime": {}, "chromium": {}}
        failed = {"wasmtime": 0, "chromium": 0}
        for _ in range(args.rounds):
            for start in range(0, len(cases), chunk):
                part = cases[start : start + chunk]
                for host in ("wasmtime", "chromium"):
                    if host == "wasmtime":
                        result = _demo.bench_cases(part, tokenizer_path=tok_path, raw=True)
                    else:
                        result = browser.bench(part)
                    failed[host] = max(failed[host], result["failed"]) if start == 0 else failed[host]
                    for key in ("mask_us_all", "compile_ms_all"):
                        slot = best[host].setdefault(f"{key}:{start}", [])
                        values = result[key]
                        best[host][f"{key}:{start}"] = values if not slot else [min(a, b) for a, b in zip(slot, values)]
        info = browser.info
        version = browser.browser.version
    finally:
        browser.close()
    out: dict[str, Any] = {}
    for host, slots in best.items():
        masks = [v for k, vs in slots.items() if k.startswith("mask") for v in vs]
        compiles = [v for k, vs in slots.items() if k.startswith("compile") for v in vs]
        out[host] = {"mask_us": _summary(masks), "compile_ms": _summary(compiles)}
    w, c = out["wasmtime"], out["chromium"]
    rows = [
        ("mask µs p50", w["mask_us"]["p50"], c["mask_us"]["p50"]),
        ("mask µs avg", w["mask_us"]["avg"], c["mask_us"]["avg"]),
        ("mask µs max", w["mask_us"]["max"], c["mask_us"]["max"]),
        ("compile ms p50", w["compile_ms"]["p50"], c["compile_ms"]["p50"]),
        ("compile ms avg", w["compile_ms"]["avg"], c["compile_ms"]["avg"]),
    ]
    print(f"{'':16}{'wasmtime':>12}{'Chromium':>12}{'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:16}{a:12.1f}{b:12.1f}{b / a if a else float('nan'):8.2f}")
    print(
        f"masks timed: {w['mask_us']['count']} / {c['mask_us']['count']} (each the fastest of {args.rounds} rounds); "
        f"Chromium {version}, cross-origin isolated: {info.get('isolated')}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({**out, "cases": len(cases), "rounds": args.rounds, "chromium_version": version}, indent=2))
    return 0


def add_web_bench(sub: Any) -> None:
    """Register `tokensieve bench web`."""
    p = sub.add_parser("web", help="mask µs in headless Chromium (Pyodide) beside wasmtime, on the same cases")
    p.add_argument("--tokenizer", help="tokenizer.json(.gz) (default: GPT-2; Llama-3 with --maskbench-every)")
    p.add_argument("--maskbench-every", type=int, default=0, help="every Nth MaskBench schema instead of the demo examples")
    p.add_argument("--data", help="the maskbench/ folder (default ../shared/data/jsonschemabench/maskbench)")
    p.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds; each mask keeps its fastest (default 3)")
    p.add_argument("--chunk", type=int, default=10, help="cases per turn when alternating the hosts (default 10)")
    p.add_argument("--json", help="write both hosts' summaries here")
    p.set_defaults(run=_run)
