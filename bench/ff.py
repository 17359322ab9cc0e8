"""`tokensieve bench ff`: how many tokens fast-forwarding forces on MaskBench, and how canonical.

Each valid MaskBench instance is serialized compactly (`","`, `":"`), tokenized with the
tokenizer (Llama-3 by default) and replayed against its schema's grammar (`lenient`, so
unsupported keywords widen the grammar instead of skipping the schema). The grammar has flexible
whitespace by default, as in the seed's measurement: forcing then stops wherever whitespace may
come, typically right after a key's closing quote, which the canonical tokenization merges with
the `:` that follows. `--whitespace compact` forces through `":"` instead.
At each position the matcher's fast-forward tokens are compared with the instance's next
canonical tokens:

- equal: a canonical forced sequence; its tokens count as forced and are consumed at once;
- different: a non-canonical forced sequence (the model would have been shown token boundaries
  it never writes); the replay then follows the canonical tokens past the forced bytes.

This is done once per look-back (0 = no healing). The figures to compare are the share of
tokens that were forced and the number of non-canonical sequences, plus µs per
`compute_ff_tokens` call (perf_counter around the call, all calls and calls with forced tokens).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from .basic import _percentile, find_shared

LOOKBACKS_DEFAULT = (0, 1, 2, 4)


def _instances(root: Path) -> Iterator[tuple[str, Any, Any]]:
    """(schema id, schema, instance data) for every valid MaskBench test, in file order."""
    for path in sorted(root.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                for test in record.get("tests") or []:
                    if test.get("valid"):
                        yield record["id"], record["schema"], test["data"]


class _Tally:
    """Counts for one look-back."""

    def __init__(self) -> None:
        self.tokens = 0
        self.forced_tokens = 0
        self.sequences = 0
        self.noncanonical = 0
        self.call_us: list[float] = []
        self.forcing_call_us: list[float] = []
        self.examples: list[dict[str, Any]] = []

    def add(self, other: _Tally) -> None:
        self.tokens += other.tokens
        self.forced_tokens += other.forced_tokens
        self.sequences += other.sequences
        self.noncanonical += other.noncanonical
        self.call_us += other.call_us
        self.forcing_call_us += other.forcing_call_us
        self.examples += other.examples[: max(0, 5 - len(self.examples))]


def _replay(matcher: Any, tokenizer: Any, tokens: list[int], lookback: int) -> _Tally | None:
    """One replay of `tokens` with fast-forwarding; None when the grammar refuses the instance."""
    tally = _Tally()
    tally.tokens = len(tokens)
    perf = time.perf_counter
    index = 0
    while index < len(tokens):
        t0 = perf()
        ff = matcher.compute_ff_tokens(lookback=lookback, context_tokens=tokens[max(0, index - 1) : index])
        dt = (perf() - t0) * 1e6
        tally.call_us.append(dt)
        if ff:
            tally.forcing_call_us.append(dt)
            tally.sequences += 1
            if tokens[index : index + len(ff)] == ff:
                if not matcher.consume_tokens(ff):
                    return None
                tally.forced_tokens += len(ff)
                index += len(ff)
                continue
            tally.noncanonical += 1
            if len(tally.examples) < 5:
                tally.examples.append({
                    "forced": [tokenizer.token_bytes(t).decode("utf-8", "replace") for t in ff],
                    "canonical": [tokenizer.token_bytes(t).decode("utf-8", "replace") for t in tokens[index : index + len(ff) + 1]],
                })
            # Follow the canonical tokens past the bytes that were forced (one count per sequence).
            covered, forced_size = 0, len(tokenizer.decode(ff))
            while index < len(tokens) and covered < forced_size:
                if not matcher.consume_token(tokens[index]):
                    return None
                covered += len(tokenizer.token_bytes(tokens[index]))
                index += 1
            continue
        if not matcher.consume_token(tokens[index]):
            return None
        index += 1
    return tally


def run_ff_bench(
    tokenizer_path: Path, data_dir: Path, *, sample: int | None, seed: int, lookbacks: tuple[int, ...], lenient: bool = True,
    whitespace: str = "flexible", quiet: bool = False,
) -> dict[str, Any]:
    """Replay MaskBench valid instances with fast-forwarding at each look-back; return figures."""
    from tokensieve import Grammar, Matcher, Tokenizer
    from tokensieve._errors import GrammarError, TokensieveError

    tokenizer = Tokenizer.from_file(tokenizer_path)
    instances = list(_instances(data_dir))
    if sample is not None and sample < len(instances):
        instances = random.Random(seed).sample(instances, sample)
        instances.sort(key=lambda item: item[0])
    tallies = {lookback: _Tally() for lookback in lookbacks}
    grammars: dict[str, Any] = {}
    skipped_schemas: set[str] = set()
    rejected = replayed = 0
    start = time.perf_counter()
    for number, (schema_id, schema, data) in enumerate(instances, 1):
        if not quiet and (number % 25 == 0 or number == len(instances)):
            print(
                f"\r{number}/{len(instances)} instances, {replayed} replayed, {rejected} rejected, "
                f"{len(skipped_schemas)} schemas skipped, {time.perf_counter() - start:.0f} s",
                end="", file=sys.stderr, flush=True,
            )
        if schema_id in skipped_schemas:
            continue
        grammar = grammars.get(schema_id)
        if grammar is None:
            try:
                grammar = grammars[schema_id] = Grammar.json_schema(schema, whitespace=whitespace, lenient=lenient)
            except (GrammarError, RecursionError, ValueError):
                skipped_schemas.add(schema_id)
                continue
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        tokens = tokenizer.encode(text)
        results: dict[int, _Tally] = {}
        try:
            matcher = Matcher(tokenizer, grammar)
            for lookback in lookbacks:
                matcher.reset()
                tally = _replay(matcher, tokenizer, tokens, lookback)
                if tally is None:
                    break
                results[lookback] = tally
        except TokensieveError:
            results = {}
        if len(results) != len(lookbacks):
            rejected += 1
            continue
        replayed += 1
        for lookback, tally in results.items():
            tallies[lookback].add(tally)
    if not quiet:
        print(file=sys.stderr)
    report: dict[str, Any] = {
        "tokenizer": str(tokenizer_path),
        "instances": len(instances),
        "replayed": replayed,
        "rejected": rejected,
        "schemas_skipped": len(skipped_schemas),
        "seconds": time.perf_counter() - start,
        "whitespace": whitespace,
        "lookbacks": {},
    }
    for lookback, tally in tallies.items():
        report["lookbacks"][lookback] = {
            "tokens": tally.tokens,
            "forced_tokens": tally.forced_tokens,
            "forced_share": tally.forced_tokens / max(tally.tokens, 1),
            "sequences": tally.sequences,
            "noncanonical": tally.noncanonical,
            "noncanonical_share": tally.noncanonical / max(tally.sequences, 1),
            "us_p50": _percentile(tally.call_us, 0.5) if tally.call_us else 0.0,
            "us_p99": _percentile(tally.call_us, 0.99) if tally.call_us else 0.0,
            "us_forcing_p50": _percentile(tally.forcing_call_us, 0.5) if tally.forcing_call_us else 0.0,
            "calls": len(tally.call_us),
            "examples": tally.examples,
        }
    return report


def _print(report: dict[str, Any]) -> None:
    print(
        f"tokenizer: {report['tokenizer']}; {report['replayed']} of {report['instances']} valid instances "
        f"replayed ({report['rejected']} refused by the grammar, {report['schemas_skipped']} schemas not "
        f"compiled), {report['whitespace']} whitespace, {report['seconds']:.0f} s"
    )
    head = (f"{'lookback':>8} | {'tokens':>8} {'forced':>7} {'share':>6} | {'ff seqs':>7} {'non-canon':>9} "
            f"{'share':>6} | {'µs p50':>6} {'p99':>6} {'p50 forcing':>11}")
    print(head)
    print("-" * len(head))
    for lookback, row in report["lookbacks"].items():
        print(
            f"{lookback:>8} | {row['tokens']:>8} {row['forced_tokens']:>7} {row['forced_share']:>6.1%} | "
            f"{row['sequences']:>7} {row['noncanonical']:>9} {row['noncanonical_share']:>6.1%} | "
            f"{row['us_p50']:>6.1f} {row['us_p99']:>6.1f} {row['us_forcing_p50']:>11.1f}"
        )
    print("share = forced tokens / all tokens; non-canon = forced sequences that differ from the instance's "
          "canonical tokens; µs per compute_ff_tokens (all calls, and calls that returned tokens).")
    for lookback, row in report["lookbacks"].items():
        for example in row["examples"][:2]:
            print(f"  lookback {lookback}: forced {example['forced']} vs canonical {example['canonical']}")


def add_ff_bench(sub: Any) -> None:
    """Register `tokensieve bench ff`."""
    p = sub.add_parser("ff", help="fast-forward tokens on MaskBench: forced share, canonicity, µs per call")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--data", type=Path, help="the maskbench folder; default ../shared/data/jsonschemabench/maskbench")
    p.add_argument("--sample", type=int, help="replay this many randomly chosen valid instances")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lookback", type=int, nargs="+", default=list(LOOKBACKS_DEFAULT))
    p.add_argument("--strict", action="store_true", help="skip schemas with unsupported keywords (default: lenient)")
    p.add_argument("--whitespace", choices=("flexible", "compact"), default="flexible",
                   help="the grammar's whitespace (instances are always compact); flexible is the seed's setup")
    p.add_argument("--json", type=Path, help="also write the figures here")

    def run(args: argparse.Namespace) -> int:
        shared = find_shared()
        if (args.tokenizer is None or args.data is None) and shared is None:
            raise SystemExit("../shared not found: pass --tokenizer PATH and --data PATH")
        tokenizer_path = args.tokenizer or shared / "tokenizers" / "llama3" / "tokenizer.json.gz"  # type: ignore[operator]
        data_dir = args.data or shared / "data" / "jsonschemabench" / "maskbench"  # type: ignore[operator]
        report = run_ff_bench(
            tokenizer_path, data_dir, sample=args.sample, seed=args.seed, lookbacks=tuple(args.lookback),
            lenient=not args.strict, whitespace=args.whitespace,
        )
        _print(report)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return 0

    p.set_defaults(run=run)
