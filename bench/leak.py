"""`tokensieve bench leak`: the leak check of `tokensieve._tools.leak` as a command, with its report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tokensieve._tools.leak import LeakSample, pick_leak_entries, run_leak


def add_leak_bench(sub: Any) -> None:
    """Register `tokensieve bench leak`."""
    p = sub.add_parser("leak", help="compile / match / drop MaskBench schemas for many cycles: linear memory and RSS",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--cycles", type=int, default=20_000, help="compile / match / drop cycles (default 20,000)")
    p.add_argument("--schemas", type=int, default=300, help="MaskBench schemas in the rotating set (default 300)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--every", type=int, default=500, help="print the figures every N cycles (default 500)")
    p.add_argument("--warmup", type=int, help="warm-up cycles (default: one pass over the schemas)")
    p.add_argument("--data", type=Path, help="the maskbench/ folder (default ../shared/data/jsonschemabench/maskbench)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the samples here")
    p.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    from .basic import _default_tokenizer
    from tokensieve._core import configure
    from tokensieve._tokenizer.tokenizer import Tokenizer

    if args.cycles < 1 or args.schemas < 1 or args.every < 1:
        raise SystemExit("--cycles, --schemas and --every must be positive")
    configure(instances=1)
    tokenizer = Tokenizer.from_file(args.tokenizer or _default_tokenizer())
    entries = pick_leak_entries(args.schemas, seed=args.seed, data_dir=args.data)
    print(f"{args.cycles} cycles over {len(entries)} MaskBench schemas (seed {args.seed}), one core instance")
    print("live KiB: the core's allocations outside its pattern cache (cache KiB: the bounded cache)")
    print(f"{'cycle':>7} {'s':>7} {'linear MB':>10} {'live KiB':>10} {'cache KiB':>10} {'RSS MB':>8}")

    def show(s: LeakSample) -> None:
        print(f"{s.cycle:>7} {s.seconds:>7.1f} {s.linear_mb:>10.1f} {s.live_kib:>10} {s.cache_kib:>10} {s.rss_mb:>8.1f}",
              flush=True)

    run = run_leak(tokenizer, entries, args.cycles, report_every=args.every, warmup_cycles=args.warmup,
                   on_sample=show)
    first, warm, last = run.samples[0], run.at_warmup(), run.samples[-1]
    growth = run.growth()
    print(f"\ncompiled {run.compiled}, grammar errors {run.grammar_errors}, limit errors {run.limit_errors}")
    for name, unit, a, b, c in (
        ("linear memory", "MB", first.linear_mb, warm.linear_mb, last.linear_mb),
        ("live", "KiB", first.live_kib, warm.live_kib, last.live_kib),
        ("RSS", "MB", first.rss_mb, warm.rss_mb, last.rss_mb),
    ):
        print(f"{name:>14}: start {a:,.1f} {unit}, after warm-up (cycle {warm.cycle}) {b:,.1f} {unit}, "
              f"end (cycle {last.cycle}) {c:,.1f} {unit}")
    verdict = all(abs(g) <= 0.05 for g in growth.values())
    print("growth after warm-up: " + ", ".join(f"{k} {v:+.1%}" for k, v in growth.items())
          + ("  (flat: within 5%)" if verdict else "  (NOT flat)"))
    if args.json:
        args.json.write_text(json.dumps({
            "cycles": args.cycles, "schemas": len(entries), "seed": args.seed, "warmup_cycles": run.warmup_cycles,
            "compiled": run.compiled, "grammar_errors": run.grammar_errors, "limit_errors": run.limit_errors,
            "samples": [s.__dict__ for s in run.samples], "growth": growth,
        }, indent=1))
        print(f"wrote {args.json}")
    return 0 if verdict else 1
