"""The `tokensieve` command: `tokensieve demo`, `tokensieve bench …` and `tokensieve fuzz`."""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from typing import Sequence

DEMO_PATTERN = (
    r"(Alice|Bob|Carol) (met|called|thanked) (Dave|Erin|Frank) on "
    r"20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]) at [0-9]{2}:[0-9]{2}\. "
    r"Code: [A-Z]{3}-[0-9]{4}, email: [a-z]{3,8}@example\.(com|org)\."
)


def _demo(args: argparse.Namespace) -> int:
    from . import Grammar, Matcher, Tokenizer
    from ._matcher import mask_token_ids

    tokenizer = Tokenizer.from_file(args.tokenizer) if args.tokenizer else Tokenizer.default()
    grammar = Grammar.regex(args.regex)
    rng = random.Random(args.seed)
    for sample in range(args.samples):
        matcher = Matcher(tokenizer, grammar)
        out = b""
        forced_total = 0
        mask_us: list[float] = []
        for _ in range(args.max_tokens):
            forced = matcher.compute_ff_bytes()
            if forced:
                ids = tokenizer.encode(forced)
                if matcher.consume_tokens(ids):
                    out += forced
                    forced_total += len(forced)
                    continue
            t0 = time.perf_counter()
            mask = matcher.compute_bitmask()
            mask_us.append((time.perf_counter() - t0) * 1e6)
            allowed = set(mask_token_ids(mask, tokenizer.vocab_size))
            if not allowed:
                break
            # A stand-in for a model: prefer ending when allowed, else a random allowed token.
            eos = [t for t in tokenizer.eos_token_ids if t in allowed]
            token = eos[0] if eos and rng.random() < 0.5 else rng.choice(sorted(allowed))
            if token in tokenizer.eos_token_ids:
                matcher.consume_token(token)
                break
            assert matcher.consume_token(token)
            out += tokenizer.token_bytes(token)
        text = out.decode("utf-8", "replace")
        ok = re.fullmatch(args.regex, text) is not None
        print(f"[{sample + 1}] {text}")
        mask_us.sort()
        p50 = mask_us[len(mask_us) // 2] if mask_us else 0.0
        print(
            f"    matches the regex: {ok}; {len(out)} bytes, {forced_total / max(len(out), 1):.0%} forced; "
            f"{len(mask_us)} masks, {p50:.0f} µs per mask (p50) over {tokenizer.vocab_size} tokens"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tokensieve` command."""
    parser = argparse.ArgumentParser(prog="tokensieve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="sample text constrained by a regex (offline, bundled GPT-2 tokenizer)")
    demo.add_argument("--regex", default=DEMO_PATTERN, help="the pattern the text must match")
    demo.add_argument("--tokenizer", help="a tokenizer.json (default: the bundled GPT-2 tokenizer)")
    demo.add_argument("--samples", type=int, default=3)
    demo.add_argument("--max-tokens", type=int, default=200)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=_demo)

    bench = sub.add_parser("bench", help="benchmarks, side by side with llguidance when installed")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    from ._bench import add_cfg_bench, add_regex_bench
    from ._bench_ff import add_ff_bench
    from ._bench_hostile import add_hostile_bench
    from ._bench_leak import add_leak_bench
    from ._bench_pld import add_pld_bench
    from ._bench_serving import add_serving_benches
    from ._maskbench import add_maskbench_bench

    add_regex_bench(bench_sub)
    add_cfg_bench(bench_sub)
    add_ff_bench(bench_sub)
    add_maskbench_bench(bench_sub)
    add_pld_bench(bench_sub)
    add_hostile_bench(bench_sub)
    add_leak_bench(bench_sub)
    add_serving_benches(bench_sub)

    from ._fuzz import add_fuzz_command

    add_fuzz_command(sub)

    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
