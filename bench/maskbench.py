"""`tokensieve bench maskbench`: MaskBench correctness and mask speed, beside llguidance.

MaskBench (Geng et al., arXiv:2501.10868; data in `../shared/data/jsonschemabench`) is 11,305
real-world JSON Schemas, each with valid and invalid instances. For every schema the run:

1. compiles it (`Grammar.json_schema` plus the first `Matcher`, timed as "compile µs"); an
   unsupported schema is a compile error, the schema fails;
2. for every test instance: serializes it compactly (`json.dumps(data, separators=(",", ":"),
   ensure_ascii=False)`), tokenizes it (Llama-3 by default), and for each token computes the mask
   (timed as "mask µs"), checks the token's bit, and consumes it;
3. scores the instance: a valid one must be accepted to the end with the matcher accepting
   (else a *validation error*); an invalid one must be rejected at some token or not be
   accepting at the end (else an *invalidation error*).

A schema *passes* when it compiles and every instance behaves. A `LimitError`, `CoreTrap`, a mask
that disagrees with `consume_token`, or a schema running past `--schema-timeout` is a failure of
that schema with its reason recorded, never a crash of the run.

With `--vs llguidance` the same token ids go through llguidance in the same process, so every
figure has its llguidance counterpart measured on the same machine at the same time.

The ratchet (`tests/data/maskbench_expected.json`) records each schema's expected result:
`"pass"` or a short failure reason. `tests/test_maskbench_ratchet.py` fails when a schema listed
as `"pass"` stops passing; `--ratchet-update` rewrites the file from a full run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import time
from array import array
from collections import defaultdict

from pathlib import Path
from typing import Any, Iterable, Sequence


from tokensieve._tools.maskbench import (
    KINDS, SPLITS, Entry, SchemaResult, compare_with_ratchet, find_maskbench_dir,
    load_entries, load_ratchet, pick_sample, run_maskbench, write_ratchet,
)

RATCHET_DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "maskbench_expected.json"


class LlgEngine:
    """llguidance on the same tokenizer and the same token ids."""

    name = "llguidance"

    def __init__(self, tokenizer_json: str) -> None:
        import llguidance
        import llguidance.numpy as llg_np

        self.llg = llguidance
        self.llg_np = llg_np
        self.tokenizer = llguidance.LLTokenizer(tokenizer_json)
        self.buf = llg_np.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    def run(self, entry: Entry, record: dict[str, Any], tests: list[tuple[bool, list[int]]],
            deadline_s: float) -> SchemaResult:
        llg, fill_into = self.llg, self.llg_np.fill_next_token_bitmask
        res = SchemaResult(entry.id, entry.split, tests=len(tests))
        start = time.perf_counter()
        try:
            t0 = time.perf_counter()
            grammar = llg.LLMatcher.grammar_from_json_schema(record["schema"])
            first = llg.LLMatcher(self.tokenizer, grammar, log_level=0)
            compile_us = (time.perf_counter() - t0) * 1e6
        except Exception as err:  # llguidance raises only for API misuse, e.g. a non-dict schema
            res.fail("compile", f"{type(err).__name__}: {err}")
            return res
        if first.is_error():
            res.fail("compile", first.get_error())
            res.wall_s = time.perf_counter() - start
            return res
        res.compile_us = compile_us
        buf, times = self.buf, res.mask_us
        for k, (valid, ids) in enumerate(tests):
            m = first.deep_copy()
            accepted = True
            timed_out = False
            for i, t in enumerate(ids):
                t0 = time.perf_counter()
                fill_into(m, buf, 0)
                times.append((time.perf_counter() - t0) * 1e6)
                if m.is_error():
                    res.fail("limit", f"test {k} token {i}: {m.get_error()}")
                    accepted = False
                    break
                allowed = (int(buf[0, t >> 5]) >> (t & 31)) & 1
                if not allowed or not m.consume_token(t):
                    accepted = False
                    res.rejected(k, valid, i, len(ids))
                    break
                if time.perf_counter() - start > deadline_s:
                    timed_out = True
                    break
            if timed_out:
                res.fail("timeout", f"over {deadline_s:g} s at test {k}")
                break
            if accepted:
                res.ended(k, valid, m.is_accepting())
        res.wall_s = time.perf_counter() - start
        return res


# -- figures ---------------------------------------------------------------------------------


def _percentiles(values: Iterable[float], qs: Sequence[float]) -> list[float]:
    import numpy as np

    arr = np.asarray(values if isinstance(values, (array, list)) else list(values), dtype=np.float64)
    if arr.size == 0:
        return [math.nan] * len(qs)
    return [float(x) for x in np.percentile(arr, [q * 100 for q in qs], method="lower")]


def _mask_figures(results: Sequence[SchemaResult], ids: set[str] | None = None) -> dict[str, float]:
    import numpy as np

    parts = [np.frombuffer(r.mask_us, dtype=np.float64) for r in results
             if len(r.mask_us) and (ids is None or r.id in ids)]
    arr = np.concatenate(parts) if parts else np.zeros(0)
    if arr.size == 0:
        return {"n": 0}
    p50, p90, p99 = _percentiles(arr, (0.5, 0.9, 0.99))  # type: ignore[arg-type]
    return {"n": int(arr.size), "avg": float(arr.mean()), "p50": p50, "p90": p90, "p99": p99,
            "max": float(arr.max()), "over_1ms": int((arr > 1000).sum()), "over_10ms": int((arr > 10_000).sum())}


def _compile_figures(results: Sequence[SchemaResult], ids: set[str] | None = None) -> dict[str, float]:
    values = [r.compile_us for r in results if r.compile_us is not None and (ids is None or r.id in ids)]
    if not values:
        return {"n": 0}
    p50, p90, p99 = _percentiles(values, (0.5, 0.9, 0.99))
    return {"n": len(values), "avg": sum(values) / len(values), "p50": p50, "p90": p90, "p99": p99,
            "max": max(values)}


def _engine_summary(results: Sequence[SchemaResult], common: set[str] | None) -> dict[str, Any]:
    kinds = {k: 0 for k in KINDS}
    for r in results:
        kinds[r.kind] += 1
    compiled = sum(r.compile_us is not None for r in results)
    slowest = sorted(results, key=lambda r: -r.wall_s)[:5]
    return {
        "schemas": len(results),
        "passing": kinds["pass"],
        "compiling": compiled,
        "failures_by_kind": {k: v for k, v in kinds.items() if k != "pass"},
        "validation_errors": sum(r.validation_errors for r in results),
        "invalidation_errors": sum(r.invalidation_errors for r in results),
        "mask_us": _mask_figures(results),
        "compile_us": _compile_figures(results),
        "mask_us_common": _mask_figures(results, common) if common is not None else None,
        "compile_us_common": _compile_figures(results, common) if common is not None else None,
        "wall_s": sum(r.wall_s for r in results),
        "slowest_schemas": [{"id": r.id, "wall_s": round(r.wall_s, 3), "result": r.reason} for r in slowest],
    }


def summarize(out: dict[str, list[SchemaResult]], *, tokenizer_path: str, sample: int | None,
              seed: int, splits: Sequence[str] | None) -> dict[str, Any]:
    """The figures of a run as one JSON-ready dict (no per-mask times)."""
    ours, llg = out["ours"], out["llg"]
    common = None
    if llg:
        common = {a.id for a, b in zip(ours, llg) if a.compile_us is not None and b.compile_us is not None}
    per_split: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(ours):
        row = per_split.setdefault(r.split, {"schemas": 0, "ours_pass": 0, "ours_compile_err": 0,
                                             "ours_validation_err": 0, "ours_invalidation_err": 0,
                                             "llg_pass": 0, "llg_compile_err": 0, "tests": 0})
        row["schemas"] += 1
        row["tests"] += r.tests
        row["ours_pass"] += r.passed
        row["ours_compile_err"] += r.kind == "compile"
        row["ours_validation_err"] += r.validation_errors
        row["ours_invalidation_err"] += r.invalidation_errors
        if llg:
            row["llg_pass"] += llg[i].passed
            row["llg_compile_err"] += llg[i].kind == "compile"
    reasons: dict[str, int] = defaultdict(int)
    for r in ours:
        if not r.passed:
            reasons[_reason_class(r.reason)] += 1
    return {
        "tokenizer": tokenizer_path,
        "sample": sample,
        "seed": seed,
        "splits": list(splits) if splits else "all",
        "ours": _engine_summary(ours, common),
        "llg": _engine_summary(llg, common) if llg else None,
        "common_compiled_schemas": len(common) if common is not None else None,
        "per_split": {s: per_split[s] for s in SPLITS if s in per_split},
        "top_failure_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:25]),
        "schemas": [
            {"id": r.id, "split": r.split, "ours": r.reason, "ours_compile_us": r.compile_us,
             "ours_masks": len(r.mask_us), **({"llg": llg[i].reason, "llg_compile_us": llg[i].compile_us}
                                               if llg else {})}
            for i, r in enumerate(ours)
        ],
    }


def _reason_class(reason: str) -> str:
    """A failure reason without its test/token numbers, for grouping."""
    reason = re.sub(r"test \d+", "test k", reason)
    reason = re.sub(r"token \d+/\d+", "token i/n", reason)
    reason = re.sub(r"token \d+", "token i", reason)
    return re.sub(r"\(at [^)]*\)", "", reason).strip()


def print_report(s: dict[str, Any]) -> None:
    o, lg = s["ours"], s["llg"]
    what = f"sample of {s['sample']} (seed {s['seed']})" if s["sample"] else "all schemas"
    print(f"MaskBench: {o['schemas']} schemas ({what}; splits: "
          f"{s['splits'] if isinstance(s['splits'], str) else ', '.join(s['splits'])}); tokenizer {s['tokenizer']}")
    cols = ["tokensieve"] + (["llguidance"] if lg else [])
    engines = [o] + ([lg] if lg else [])
    print(f"{'':<26}" + "".join(f"{c:>14}" for c in cols))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<26}" + "".join(f"{v:>14}" for v in values))

    n = o["schemas"]
    row("schemas passing", [f"{e['passing']} {e['passing'] / n:.1%}" if n else "0" for e in engines])
    row("schemas compiling", [f"{e['compiling']}" for e in engines])
    for kind in KINDS[1:]:
        if any(e["failures_by_kind"].get(kind) for e in engines):
            row(f"  failing: {kind}", [str(e["failures_by_kind"].get(kind, 0)) for e in engines])
    row("validation errors", [str(e["validation_errors"]) for e in engines])
    row("invalidation errors", [str(e["invalidation_errors"]) for e in engines])
    for key in ("avg", "p50", "p90", "p99", "max"):
        row(f"mask µs {key}", [_fmt(e["mask_us"].get(key)) for e in engines])
    row("masks", [str(e["mask_us"].get("n", 0)) for e in engines])
    row("masks over 1 ms", [str(e["mask_us"].get("over_1ms", 0)) for e in engines])
    for key in ("p50", "p99", "max"):
        row(f"compile µs {key}", [_fmt(e["compile_us"].get(key)) for e in engines])
    row("engine wall s", [f"{e['wall_s']:.1f}" for e in engines])
    if lg:
        print(f"on the {s['common_compiled_schemas']} schemas both compile:")
        for key in ("avg", "p50", "p99", "max"):
            row(f"  mask µs {key}", [_fmt(e["mask_us_common"].get(key)) for e in engines])
        row("  compile µs p50", [_fmt(e["compile_us_common"].get("p50")) for e in engines])
    print()
    head = f"{'split':<24}{'schemas':>8}{'tests':>7}{'pass':>7}{'compile err':>12}{'valid err':>10}{'inval err':>10}"
    if lg:
        head += f"{'llg pass':>10}{'llg cmp err':>12}"
    print(head)
    print("-" * len(head))
    for split, r in s["per_split"].items():
        line = (f"{split:<24}{r['schemas']:>8}{r['tests']:>7}{r['ours_pass']:>7}{r['ours_compile_err']:>12}"
                f"{r['ours_validation_err']:>10}{r['ours_invalidation_err']:>10}")
        if lg:
            line += f"{r['llg_pass']:>10}{r['llg_compile_err']:>12}"
        print(line)
    if s["top_failure_reasons"]:
        print("\ntop failure reasons (tokensieve):")
        for reason, count in list(s["top_failure_reasons"].items())[:12]:
            print(f"{count:>6}  {reason}")
    print("\nslowest schemas (tokensieve, wall s): " + ", ".join(
        f"{x['id']} {x['wall_s']:.2f}" for x in o["slowest_schemas"]))


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def write_plot(out: dict[str, list[SchemaResult]], path: Path) -> bool:
    """A PNG with the mask-µs histogram and CDF of each engine; False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'tokensieve[bench]' (or pip install matplotlib); "
              "skipping the plot", file=sys.stderr)
        return False
    import numpy as np

    fig, (ax_hist, ax_cdf) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = {"ours": "tokensieve", "llg": "llguidance"}
    all_values = [np.frombuffer(r.mask_us, dtype=np.float64) for rs in out.values() for r in rs if len(r.mask_us)]
    if not all_values:
        plt.close(fig)
        return False
    hi = max(float(np.concatenate(all_values).max()), 10.0)
    bins = np.logspace(0, math.log10(hi) + 0.05, 80)
    for key, results in out.items():
        parts = [np.frombuffer(r.mask_us, dtype=np.float64) for r in results if len(r.mask_us)]
        if not parts:
            continue
        arr = np.maximum(np.concatenate(parts), 1.0)
        label = f"{labels[key]} (n={arr.size:,}, p50 {np.median(arr):.0f} µs, p99 {np.percentile(arr, 99):.0f} µs)"
        ax_hist.hist(arr, bins=bins, histtype="step", linewidth=1.5, label=label)
        ordered = np.sort(arr)
        ax_cdf.plot(ordered, np.arange(1, ordered.size + 1) / ordered.size, label=labels[key])
    ax_hist.set(xscale="log", yscale="log", xlabel="µs per mask", ylabel="masks", title="MaskBench: mask time")
    ax_cdf.set(xscale="log", xlabel="µs per mask", ylabel="share of masks", title="CDF", ylim=(0, 1.0))
    ax_cdf.grid(True, which="both", alpha=0.3)
    ax_hist.legend(fontsize=8)
    ax_cdf.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- the command -----------------------------------------------------------------------------


def add_maskbench_bench(sub: Any) -> None:
    """Register `tokensieve bench maskbench`."""
    p = sub.add_parser("maskbench", help="MaskBench: JSON Schema correctness and mask µs, llguidance side by side",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, help="the maskbench/ folder of JSON Lines (default: ../shared/data/"
                   "jsonschemabench/maskbench)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--split", action="append", metavar="SPLIT", help="run only this split (repeatable)")
    p.add_argument("--sample", type=int, metavar="N", help="a deterministic sample of N schemas across the splits")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--vs", choices=["llguidance", "none"], default="none",
                   help="also run llguidance on the same token ids")
    p.add_argument("--schema-timeout", type=float, default=120.0, metavar="S",
                   help="wall seconds one engine may spend on one schema (default 120)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the figures and per-schema results here")
    p.add_argument("--plot", type=Path, metavar="PATH", help="write a PNG of the mask-µs histogram and CDF")
    p.add_argument("--ratchet", type=Path, default=RATCHET_DEFAULT, metavar="PATH",
                   help="the ratchet file (default: tests/data/maskbench_expected.json)")
    p.add_argument("--ratchet-update", action="store_true",
                   help="rewrite the ratchet from this run (needs a run over all schemas, or --force)")
    p.add_argument("--force", action="store_true",
                   help="with --ratchet-update on a sample or split: update only the schemas run")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--property-order", choices=["schema", "any"], default="schema",
                   help='Grammar.json_schema(property_order=...): keys in schema order (default) or "any" order')
    p.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    from .basic import _default_tokenizer
    from tokensieve._tokenizer.tokenizer import Tokenizer

    data_dir = args.data or find_maskbench_dir()
    if data_dir is None:
        raise SystemExit("MaskBench data not found: pass --data PATH (the jsonschemabench/maskbench folder) "
                         "or set TOKENSIEVE_SHARED")
    partial = bool(args.sample or args.split)
    if args.ratchet_update and partial and not args.force:
        raise SystemExit("--ratchet-update rewrites the expected result of every schema, so it needs a run "
                         "over all schemas (no --sample/--split); add --force to update only the schemas run")
    try:
        entries = load_entries(data_dir, args.split)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(str(err)) from None
    if args.sample:
        entries = pick_sample(entries, args.sample, seed=args.seed)
    tok_path = args.tokenizer or _default_tokenizer()
    tokenizer = Tokenizer.from_file(tok_path)
    llg_engine = None
    if args.vs == "llguidance":
        try:
            raw = Path(tok_path).read_bytes()
            text = gzip.decompress(raw).decode() if str(tok_path).endswith(".gz") else raw.decode()
            llg_engine = LlgEngine(text)
        except ImportError:
            print("llguidance is not installed: `pip install llguidance` for side-by-side figures", file=sys.stderr)
    out = run_maskbench(entries, tokenizer, llg_engine=llg_engine, schema_timeout_s=args.schema_timeout,
                        progress=not args.quiet, property_order=args.property_order)
    summary = summarize(out, tokenizer_path=str(tok_path), sample=args.sample, seed=args.seed, splits=args.split)
    print_report(summary)
    if args.ratchet.exists():
        expected = load_ratchet(args.ratchet)
        regressions, improvements = compare_with_ratchet(out["ours"], expected)
        covered = sum(r.id in expected for r in out["ours"])
        print(f"\nratchet {args.ratchet.name}: {covered} of these schemas listed; {len(regressions)} regressed, "
              f"{len(improvements)} improved")
        for r in regressions[:20]:
            print(f"  REGRESSED {r.id}: {r.reason}")
        for r in improvements[:20]:
            print(f"  improved  {r.id} (was: {expected[r.id]})")
        if improvements and not args.ratchet_update:
            print("  run with --ratchet-update (a full run) to record the improvements")
        summary["ratchet"] = {"regressed": [r.id for r in regressions], "improved": [r.id for r in improvements]}
    if args.ratchet_update:
        expected = load_ratchet(args.ratchet) if (partial and args.ratchet.exists()) else {}
        expected.update({r.id: r.reason for r in out["ours"]})
        write_ratchet(args.ratchet, expected)
        print(f"wrote {args.ratchet} ({len(expected)} schemas, "
              f"{sum(v == 'pass' for v in expected.values())} passing)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"wrote {args.json}")
    if args.plot and write_plot(out, args.plot):
        print(f"wrote {args.plot}")
    return 0
