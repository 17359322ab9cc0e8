"""`tokensieve bench pld`: prompt lookup on grounded JSON extraction, with an oracle model.

The task: the prompt is a source document holding an instance's values, the output is the
instance as compact JSON under its schema's grammar (compact whitespace). Instances are
MaskBench valid instances (objects with at least 3 keys and 40 bytes), one per schema, every
`--every`-th schema. The document comes in three layouts:

- a: the instance pretty-printed (indent 2), every object's keys in reverse order;
- b: one `dotted.path: value` line per leaf;
- c: one sentence `The dotted.path is value.` per leaf.

The model is an oracle: at every position it picks the target's next token (the canonical
tokenization of the target text), so the figures measure the drafter, not a model. Each
strategy runs the same decoding loop as `tokensieve.generate` (fast-forward where enabled, one
model call per draft, every position decided as plain decoding would):

| strategy | forced tokens | draft |
|---|---|---|
| plain | no | none |
| forced | taken without a model call | none |
| pld | no | token-id lookup (the seed's), no grammar |
| pld+forced | taken without a model call | token-id lookup, no grammar |
| aware-tokens | as above, and appended to drafts | token-id lookup cut by the grammar, extended by forced tokens, looked up again |
| aware-text | as above | text lookup (`PromptLookup(mode="text")`), grammar-aware |

Reported per layout and strategy: tokens per model call (weighted by tokens: all tokens over
all calls, EOS included), mean draft length per call, acceptance rate (accepted draft tokens
over drafted), lookup µs per step (the index alone), draft µs (the whole grammar-aware
proposal) and mask µs per verified position (`Matcher.fill_draft_masks`). A separate run times
the lookup at a 32k-token context beside a plain Python backward scan (the seed's function).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

STRATEGIES: tuple[str, ...] = ("plain", "forced", "pld", "pld+forced", "aware-tokens", "aware-text")
LAYOUTS: tuple[str, ...] = ("a", "b", "c")
KEYS_MIN = 3
BYTES_MIN = 40


# -- documents ---------------------------------------------------------------------------------


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(v) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out.extend(_leaves(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, list) and value:
        out = []
        for i, v in enumerate(value):
            out.extend(_leaves(v, f"{path}.{i}" if path else str(i)))
        return out
    return [(path, value)]


def _scalar_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def document(instance: Any, layout: str) -> str:
    """The source document of `instance` in `layout` (see the module doc)."""
    if layout == "a":
        return json.dumps(_reversed_keys(instance), indent=2, ensure_ascii=False)
    if layout == "b":
        return "\n".join(f"{path}: {_scalar_text(v)}" for path, v in _leaves(instance))
    if layout == "c":
        return "\n".join(f"The {path} is {_scalar_text(v)}." for path, v in _leaves(instance))
    raise ValueError(f"unknown layout {layout!r}; use one of {LAYOUTS}")


def prompt_text(instance: Any, layout: str) -> str:
    return f"Source document:\n{document(instance, layout)}\n\nExtract the record as compact JSON.\n"


# -- cases -------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    schema: Any
    instance: Any
    target: bytes
    grammar: Any = None
    target_tokens: list[int] = field(default_factory=list)


def load_cases(data_dir: Path, tokenizer: Any, *, every: int, limit: int | None) -> list[Case]:
    """One valid object instance per `every`-th MaskBench schema whose compact grammar accepts it."""
    from tokensieve import Grammar, Matcher, TokensieveError
    from .maskbench import load_entries

    cases: list[Case] = []
    for index, entry in enumerate(load_entries(data_dir)):
        if index % every:
            continue
        record = entry.record()
        for test in record.get("tests", []):
            data = test.get("data")
            if not test.get("valid") or not isinstance(data, dict) or len(data) < KEYS_MIN:
                continue
            target = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
            if len(target) < BYTES_MIN:
                continue
            try:
                grammar = Grammar.json_schema(record["schema"], whitespace="compact")
                tokens = tokenizer.encode(target)
                matcher = Matcher(tokenizer, grammar)
                if not matcher.consume_tokens(tokens) or not matcher.is_accepting():
                    break
            except (TokensieveError, ValueError, TypeError):
                break
            cases.append(Case(entry.id, record["schema"], data, target, grammar, tokens))
            break
        if limit is not None and len(cases) >= limit:
            break
    return cases


# -- one run -----------------------------------------------------------------------------------


@dataclass
class Tally:
    """Counters of one strategy over many runs."""

    tokens: int = 0
    calls: int = 0
    drafted: int = 0
    accepted: int = 0
    draft_calls: int = 0
    diverged: int = 0
    lookup_us: list[float] = field(default_factory=list)
    draft_us: list[float] = field(default_factory=list)
    mask_us_per_position: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        def mean(xs: list[float]) -> float:
            return sum(xs) / len(xs) if xs else 0.0

        return {
            "tokens_per_call": self.tokens / self.calls if self.calls else 0.0,
            "tokens": self.tokens,
            "calls": self.calls,
            "draft_len": self.drafted / self.draft_calls if self.draft_calls else 0.0,
            "acceptance": self.accepted / self.drafted if self.drafted else 0.0,
            "lookup_us": mean(self.lookup_us),
            "draft_us": mean(self.draft_us),
            "mask_us_per_position": mean(self.mask_us_per_position),
            "diverged": self.diverged,
        }


def run_case(case: Case, layout: str, strategy: str, tokenizer: Any, tally: Tally) -> None:
    """Decode `case` under `strategy` with the oracle model, adding to `tally`."""
    from tokensieve import Matcher, PromptLookup
    from tokensieve._tokenizer.partial import encode_in_context
    from tokensieve._decoding.generate import _Run

    prompt = tokenizer.encode(prompt_text(case.instance, layout))
    matcher = Matcher(tokenizer, case.grammar)
    fast_forward = strategy != "plain" and strategy != "pld"
    lookup = None
    if strategy in ("pld", "pld+forced", "aware-tokens"):
        lookup = PromptLookup(tokenizer, mode="tokens")
    elif strategy == "aware-text":
        lookup = PromptLookup(tokenizer, mode="text")
    target = case.target
    target_tokens = case.target_tokens
    eos = tokenizer.eos_token_ids[0]

    def timed_lookup() -> None:
        assert lookup is not None
        start = time.perf_counter()
        lookup.lookup_only()
        tally.lookup_us.append((time.perf_counter() - start) * 1e6)

    def propose(m: Any, ff: bool) -> list[int]:
        if lookup is None:
            return []
        timed_lookup()
        start = time.perf_counter()
        draft = lookup.lookup() if strategy in ("pld", "pld+forced") else lookup.propose(m, fast_forward=ff)
        tally.draft_us.append((time.perf_counter() - start) * 1e6)
        if draft:
            tally.draft_calls += 1
            tally.drafted += len(draft)
            start = time.perf_counter()
            m.fill_draft_masks(draft)
            tally.mask_us_per_position.append((time.perf_counter() - start) * 1e6 / (len(draft) + 1))
        return draft

    run = _Run(matcher, list(prompt), len(target_tokens) + 8, lookup, propose)

    def oracle(_logits: Any, _mask: Any) -> int | None:
        new = run.new
        if new == target_tokens[: len(new)]:
            return target_tokens[len(new)] if len(new) < len(target_tokens) else eos
        written = tokenizer.decode(new)
        if not target.startswith(written):
            return None
        rest = target[len(written) :]
        return encode_in_context(tokenizer, rest, new[-1:])[0] if rest else eos

    run.decode(lambda tokens, count: [None] * count, oracle, fast_forward=fast_forward, lookback=4)
    tally.tokens += len(run.new)
    tally.calls += run.stats["model_calls"]
    tally.accepted += run.stats["accepted_draft_tokens"]
    if tokenizer.decode([t for t in run.new if t != eos]) != target:
        tally.diverged += 1


# -- lookup at a long context ------------------------------------------------------------------


def _scan_backward(ids: Sequence[int], max_ngram: int, count: int) -> list[int]:
    """The seed's lookup in plain Python: scan the context for the last n-gram, n from `max_ngram`
    down to 1; the first (leftmost) occurrence with a continuation wins."""
    length = len(ids)
    for n in range(max_ngram, 0, -1):
        ngram = list(ids[-n:])
        for start in range(0, length - n):
            if list(ids[start : start + n]) == ngram and start + n < length - n:
                return list(ids[start + n : start + n + count])
    return []


def long_context_lookup(tokenizer: Any, cases: Sequence[Case], context_tokens: int, steps: int) -> dict[str, float]:
    """µs per lookup with `context_tokens` of context: the indexed lookups and the seed's scan."""
    from tokensieve import PromptLookup

    corpus: list[int] = []
    for case in cases:
        corpus.extend(tokenizer.encode(prompt_text(case.instance, "a")))
        corpus.extend(case.target_tokens)
        if len(corpus) >= context_tokens + steps:
            break
    while len(corpus) < context_tokens + steps:
        corpus.extend(corpus[: context_tokens + steps - len(corpus)])
    out: dict[str, float] = {}
    for mode in ("tokens", "text"):
        lookup = PromptLookup(tokenizer, mode=mode)
        lookup.extend(corpus[:context_tokens])
        total = 0.0
        for step in range(steps):
            lookup.extend([corpus[context_tokens + step]])
            start = time.perf_counter()
            lookup.lookup_only()
            total += time.perf_counter() - start
        out[f"{mode}_us"] = total / steps * 1e6
    scan_steps = max(1, steps // 20)
    start = time.perf_counter()
    for step in range(scan_steps):
        _scan_backward(corpus[: context_tokens + step], 3, 10)
    out["python_scan_us"] = (time.perf_counter() - start) / scan_steps * 1e6
    return out


# -- the command -------------------------------------------------------------------------------


def run_bench(args: argparse.Namespace) -> int:
    from tokensieve import Tokenizer
    from .basic import find_shared
    from .maskbench import find_maskbench_dir

    shared = find_shared()
    tokenizer_path = args.tokenizer or (shared / "tokenizers" / "llama3" / "tokenizer.json.gz" if shared else None)
    data_dir = args.data or find_maskbench_dir()
    if tokenizer_path is None or data_dir is None:
        raise SystemExit("../shared not found: pass --tokenizer PATH and --data PATH")
    tokenizer = Tokenizer.from_file(tokenizer_path)
    start = time.perf_counter()
    cases = load_cases(Path(data_dir), tokenizer, every=args.every, limit=args.limit)
    print(f"{len(cases)} instances (every {args.every}th schema), loaded in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    strategies = args.strategy or list(STRATEGIES)
    layouts = args.layout or list(LAYOUTS)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for layout in layouts:
        results[layout] = {}
        for strategy in strategies:
            tally = Tally()
            for case in cases:
                run_case(case, layout, strategy, tokenizer, tally)
            results[layout][strategy] = tally.row()
            print(f"layout {layout} {strategy}: {tally.row()['tokens_per_call']:.2f} tokens/call", file=sys.stderr)
    long_context = long_context_lookup(tokenizer, cases, args.context_tokens, args.lookup_steps) if cases else {}
    report = {"instances": len(cases), "every": args.every, "results": results, "long_context": long_context, "context_tokens": args.context_tokens}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    if args.plot:
        plot(report, Path(args.plot))
    return 0


def format_report(report: dict[str, Any]) -> str:
    lines = [f"Prompt lookup on grounded extraction: {report['instances']} MaskBench instances, oracle model", ""]
    for layout, rows in report["results"].items():
        lines.append(f"layout {layout}")
        lines.append("| strategy | tokens/call | draft len | acceptance | lookup µs | draft µs | mask µs/position | diverged |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for strategy, row in rows.items():
            lines.append(
                f"| {strategy} | {row['tokens_per_call']:.2f} | {row['draft_len']:.1f} | {row['acceptance']:.2f} | "
                f"{row['lookup_us']:.1f} | {row['draft_us']:.0f} | {row['mask_us_per_position']:.1f} | {row['diverged']} |"
            )
        lines.append("")
    lc = report.get("long_context")
    if lc:
        lines.append(
            f"lookup at a {report['context_tokens']}-token context: token ids {lc['tokens_us']:.1f} µs, "
            f"text {lc['text_us']:.1f} µs, plain Python backward scan {lc['python_scan_us']:.0f} µs per step"
        )
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(report["results"])
    strategies = list(next(iter(report["results"].values())))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(strategies)
    for i, strategy in enumerate(strategies):
        values = [report["results"][layout][strategy]["tokens_per_call"] for layout in layouts]
        ax.bar([x + i * width for x in range(len(layouts))], values, width, label=strategy)
    ax.set_xticks([x + width * (len(strategies) - 1) / 2 for x in range(len(layouts))])
    ax.set_xticklabels([f"layout {layout}" for layout in layouts])
    ax.set_ylabel("tokens per model call")
    ax.set_title(f"Prompt lookup, {report['instances']} MaskBench instances (oracle model, Llama-3)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def add_pld_bench(sub: Any) -> None:
    p = sub.add_parser("pld", help="prompt lookup on grounded JSON extraction (oracle model)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--data", type=Path, help="the maskbench folder; default ../shared/data/jsonschemabench/maskbench")
    p.add_argument("--every", type=int, default=25, help="take every N-th schema (default 25)")
    p.add_argument("--limit", type=int, help="at most this many instances")
    p.add_argument("--layout", action="append", choices=LAYOUTS, help="only these layouts (repeatable)")
    p.add_argument("--strategy", action="append", choices=STRATEGIES, help="only these strategies (repeatable)")
    p.add_argument("--context-tokens", type=int, default=32768, help="context length of the lookup timing")
    p.add_argument("--lookup-steps", type=int, default=2000)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plot", help="write a PNG bar chart to this path")
    p.set_defaults(run=run_bench)
