"""`tokensieve bench batch` and `tokensieve bench hf`: what serving costs, beside the peers.

- **batch**: a decoding step of a batch of requests (MaskBench schemas, Llama-3, each request
  at its own position in a valid instance): every request consumes its next token, then the
  batch's masks are filled. tokensieve's `fill_bitmasks` (parallel over core instances) and its
  serial loop, beside llguidance's `fill_next_token_bitmask_par` and its serial loop, in the
  same run, for 1, 8, 64 and 256 requests. A library's modes take turns at every step (each on
  its own matchers), so other work on the machine weighs on them alike.
- **hf**: the time a logits processor adds to `transformers`' `model.generate` per step, with a
  tiny randomly initialised Llama (CPU) and the Llama-3 tokenizer, batch 2: tokensieve's
  `tokensieve.hf.LogitsProcessor`, llguidance's processor written the way its docs show, and
  XGrammar's `xgrammar.contrib.hf.LogitsProcessor` (when installed), against no processor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

BATCH_SIZES = (1, 8, 64, 256)


def _requests(tokenizer: Any, data_dir: Path, count: int, llg_tokenizer: Any) -> list[dict[str, Any]]:
    """Schemas whose valid instance both engines accept, with its tokens."""
    from tokensieve import Grammar, TokensieveError
    from .maskbench import load_entries

    out: list[dict[str, Any]] = []
    for entry in load_entries(data_dir):
        record = entry.record()
        test = next((t for t in record["tests"] if t["valid"]), None)
        if test is None:
            continue
        text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
        tokens = tokenizer.encode(text)
        if len(tokens) < 12:
            continue
        try:
            grammar = Grammar.json_schema(record["schema"], whitespace="compact")
        except (TokensieveError, ValueError, TypeError, RecursionError):
            continue
        llg_grammar = None
        if llg_tokenizer is not None:
            import llguidance

            try:
                llg_grammar = llguidance.LLMatcher.grammar_from_json_schema(record["schema"], defaults={"whitespace_flexible": False})
                if llguidance.LLMatcher(llg_tokenizer, llg_grammar, log_level=0).is_error():
                    continue
            except Exception:  # noqa: BLE001 - llguidance refuses the schema
                continue
        out.append({"grammar": grammar, "llg_grammar": llg_grammar, "tokens": tokens})
        if len(out) >= count:
            break
    return out


def run_batch(args: argparse.Namespace) -> int:
    if args.ceiling:
        from .ceiling import format_ceiling, run_ceiling

        report = run_ceiling(args)
        print(json.dumps(report, indent=2) if args.json else format_ceiling(report))
        return 0
    import numpy as np

    from tokensieve import Matcher, Tokenizer, configure, fill_bitmasks
    from tokensieve._core import default_pool

    from .basic import find_shared
    from .maskbench import find_maskbench_dir

    shared = find_shared()
    if shared is None:
        raise SystemExit("../shared not found: set TOKENSIEVE_SHARED")
    if args.instances is not None:
        configure(instances=args.instances)
    tokenizer_path = shared / "tokenizers" / "llama3" / "tokenizer.json.gz"
    tokenizer = Tokenizer.from_file(tokenizer_path)
    llg_tokenizer = None
    llg_np = None
    if args.vs == "llguidance":
        import gzip

        import llguidance
        import llguidance.numpy as llg_np

        llg_tokenizer = llguidance.LLTokenizer(gzip.open(tokenizer_path).read().decode())
    requests = _requests(tokenizer, find_maskbench_dir(), max(BATCH_SIZES), llg_tokenizer)
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        batch = [requests[i % len(requests)] for i in range(size)]
        # Warm-up builds what every grammar builds lazily (lexer states, slices, walk cache
        # entries) in every instance, so no measured run pays for it: every position is walked
        # twice in each instance (a walk cache entry is built on a state's second walk; with one
        # warm walk, whichever mode came first paid for building the entries the others used).
        instances = len(default_pool()._slots)
        warm_requests = [r for r in batch for _ in range(2 * instances)]
        warm = [Matcher(tokenizer, r["grammar"]) for r in warm_requests]
        _warm(warm_requests, warm, lambda m, t: (m.compute_bitmask(), m.consume_token(t)), args.steps)
        for index in range(size):
            placed = [m._core for m in warm[2 * instances * index : 2 * instances * (index + 1)]]
            if len(set(placed)) != instances or any(placed.count(core) != 2 for core in placed):
                raise SystemExit("the warm-up did not walk every request twice in every core instance")
        bitmask = np.zeros((size, warm[0].mask_words), dtype=np.int32)
        serial_mask = np.zeros_like(bitmask)
        consume = _consume_ours
        modes: dict[str, tuple[list[Any], Any, Any]] = {}
        for round_index in range(args.rounds):
            ours = [Matcher(tokenizer, r["grammar"]) for r in batch]
            modes[f"tokensieve_batch_us/{round_index}"] = (ours, consume, lambda ms=ours: fill_bitmasks(ms, bitmask))
            ours = [Matcher(tokenizer, r["grammar"]) for r in batch]
            modes[f"tokensieve_serial_us/{round_index}"] = (
                ours, consume, lambda ms=ours: [m.fill_bitmask(serial_mask, i) for i, m in enumerate(ms)]
            )
        if llg_tokenizer is not None:
            import llguidance

            executor = llguidance.LLExecutor()
            llg_mask = llg_np.allocate_token_bitmask(size, llg_tokenizer.vocab_size)
            for _ in range(2):
                warm_llg = [llguidance.LLMatcher(llg_tokenizer, r["llg_grammar"], log_level=0) for r in batch]
                _warm(batch, warm_llg, lambda m, t: (llg_np.fill_next_token_bitmask(m, llg_mask, 0), m.consume_token(t)), args.steps)
            for round_index in range(args.rounds):
                theirs = [llguidance.LLMatcher(llg_tokenizer, r["llg_grammar"], log_level=0) for r in batch]
                pairs = [(m, i) for i, m in enumerate(theirs)]
                modes[f"llguidance_batch_us/{round_index}"] = (
                    theirs, consume, lambda p=pairs: llg_np.fill_next_token_bitmask_par(executor, p, llg_mask)
                )
                theirs = [llguidance.LLMatcher(llg_tokenizer, r["llg_grammar"], log_level=0) for r in batch]
                modes[f"llguidance_serial_us/{round_index}"] = (
                    theirs, consume, lambda ms=theirs: [llg_np.fill_next_token_bitmask(m, llg_mask, i) for i, m in enumerate(ms)]
                )
        # Each library's modes take turns with each other, one library after the other:
        # llguidance's thread pool keeps spinning for a while after a parallel fill and slowed
        # whatever ran next (most of all a fill on threads of ours).
        times: dict[str, list[float]] = {}
        for library in ("tokensieve", "llguidance"):
            ones = {name: mode for name, mode in modes.items() if name.startswith(library)}
            if ones:
                times.update(_interleaved(batch, ones, args.steps))
        cores = default_pool().cores()
        row: dict[str, Any] = {
            "requests": size,
            "instances": len(cores),
            # Each instance holds its own trie copy and every grammar it runs (with its caches).
            "instance_linear_memory_mb": [round(core.memory_size_bytes() / 2**20, 1) for core in cores],
            "instance_live_mb": [round(core.live_kib() / 1024, 1) for core in cores],
        }
        for key in ("tokensieve_batch_us", "tokensieve_serial_us", "llguidance_batch_us", "llguidance_serial_us"):
            samples = [t for name, values in times.items() if name.split("/")[0] == key for t in values]
            if samples:
                row[key] = statistics.median(samples)
        serial = [t for name, values in times.items() if name.startswith("tokensieve_serial") for t in values]
        ours = [t for name, values in times.items() if name.startswith("tokensieve_batch") for t in values]
        row["speedup_per_step_median"] = statistics.median(a / b for a, b in zip(serial, ours))
        if not (bitmask == serial_mask).all():
            raise SystemExit("fill_bitmasks and the serial loop wrote different masks")
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"cores": _cores(), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_batch(report))
    return 0


def _consume_ours(matcher: Any, token: int) -> None:
    matcher.consume_token(token)


def _warm(batch: list[dict[str, Any]], matchers: list[Any], step: Any, steps: int) -> None:
    for index in range(steps):
        for request, matcher in zip(batch, matchers):
            tokens = request["tokens"]
            if index < len(tokens) - 1:
                step(matcher, tokens[index])


def _interleaved(batch: list[dict[str, Any]], modes: dict[str, tuple[list[Any], Any, Any]], steps: int) -> dict[str, list[float]]:
    """µs of each mode's decoding step: every request consumes its next token, then the batch's
    masks are filled. Both are timed: a tokensieve consume that the last mask allows is applied
    in the next fill's call (`Matcher.consume_token`), so timing the fill alone would charge
    tokensieve's consumes to its fill and leave llguidance's out. The modes take turns within a
    step, so a machine that gets busier or quieter (other jobs) affects them alike and their
    ratios stay comparable; the turn order rotates from step to step, so no mode always follows
    the same one."""
    times: dict[str, list[float]] = {name: [] for name in modes}
    order = list(modes.items())
    for step in range(steps):
        turn = step % len(order)
        for name, (matchers, consume, fill) in order[turn:] + order[:turn]:
            start = time.perf_counter()
            for request, matcher in zip(batch, matchers):
                tokens = request["tokens"]
                if step < len(tokens) - 1:
                    consume(matcher, tokens[step])
            fill()
            times[name].append((time.perf_counter() - start) * 1e6)
    return times


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def format_batch(report: dict[str, Any]) -> str:
    instances = sorted({row["instances"] for row in report["rows"]})
    lines = [
        f"Batch decoding step (every request consumes its token, then the batch's masks are filled), MaskBench "
        f"schemas, Llama-3, {report['cores']} CPUs, {'/'.join(map(str, instances))} core instances (median µs per "
        "step; each library's modes interleaved step by step)",
        "",
        "Per instance, after the largest batch: "
        f"{report['rows'][-1]['instance_live_mb']} MB live, {report['rows'][-1]['instance_linear_memory_mb']} MB of linear memory "
        "(its own Llama-3 trie and slices, every grammar it runs with their caches, the matchers).",
        "",
        "| requests | tokensieve fill_bitmasks | tokensieve serial | llguidance par | llguidance serial | ours / llg par "
        "| speedup over serial | its median per step |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        ours, serial = row["tokensieve_batch_us"], row["tokensieve_serial_us"]
        llg = row.get("llguidance_batch_us")
        lines.append(
            f"| {row['requests']} | {ours:.0f} | {serial:.0f} | {llg if llg is None else f'{llg:.0f}'} | "
            f"{row.get('llguidance_serial_us', float('nan')):.0f} | {'' if llg is None else f'{ours / llg:.2f}x'} | {serial / ours:.2f}x "
            f"| {row['speedup_per_step_median']:.2f}x |"
        )
    return "\n".join(lines)


# -- transformers generate ---------------------------------------------------------------------


def run_hf(args: argparse.Namespace) -> int:
    import gzip
    import tempfile

    import torch
    import transformers

    from tokensieve import Grammar, Tokenizer
    from .basic import find_shared
    from tokensieve.hf import LogitsProcessor

    shared = find_shared()
    if shared is None:
        raise SystemExit("../shared not found: set TOKENSIEVE_SHARED")
    folder = Path(tempfile.mkdtemp())
    (folder / "tokenizer.json").write_bytes(gzip.open(shared / "tokenizers" / "llama3" / "tokenizer.json.gz").read())
    hf_tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), eos_token="<|end_of_text|>")
    tokenizer = Tokenizer.from_hf(hf_tokenizer)
    torch.set_num_threads(1)  # the model is tiny; a thread pool only adds noise
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(hf_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=hf_tokenizer.eos_token_id, pad_token_id=hf_tokenizer.eos_token_id,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "tags"]}
    prompt = torch.tensor([hf_tokenizer.encode("Answer:", add_special_tokens=False)] * 2)
    steps = args.steps

    def generate(processors: list[Any]) -> float:
        start = time.perf_counter()
        out = model.generate(
            prompt, attention_mask=torch.ones_like(prompt), logits_processor=processors, max_new_tokens=steps,
            min_new_tokens=steps, do_sample=False, pad_token_id=hf_tokenizer.eos_token_id,
        )
        assert out.shape[1] - prompt.shape[1] == steps
        return (time.perf_counter() - start) / steps * 1e3

    engines: dict[str, Any] = {
        "tokensieve": lambda: [LogitsProcessor(tokenizer, Grammar.json_schema(schema))],
    }
    try:
        import llguidance  # noqa: F401

        engines["llguidance"] = lambda: [_LlgProcessor(hf_tokenizer, schema)]
    except ImportError:
        pass
    try:
        import xgrammar
        import xgrammar.contrib.hf as xgr_hf

        info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=config.vocab_size)
        compiled = xgrammar.GrammarCompiler(info).compile_json_schema(json.dumps(schema))
        engines["xgrammar"] = lambda: [xgr_hf.LogitsProcessor(compiled)]
    except ImportError:
        pass
    results: dict[str, list[float]] = {"none": [], **{name: [] for name in engines}}
    own: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.rounds):
        results["none"].append(generate([]))
        for name, make in engines.items():
            timed = _TimedProcessor(make()[0])
            results[name].append(generate([timed]))
            own[name].append(timed.median_ms())
    base = statistics.median(results["none"])
    # The totals swing by ~1 ms between runs on a shared VM; the processor's own call, timed
    # inside generate (median over the steps after the first), is the steadier comparison.
    lines = [f"model.generate, tiny Llama (CPU), Llama-3 tokenizer, batch 2, {steps} steps: ms per step", "",
             "| processor | ms per step | added ms per step | the processor's own call, ms per step |", "|---|---:|---:|---:|"]
    report = {}
    for name, values in results.items():
        median = statistics.median(values)
        report[name] = {"ms_per_step": median, "added_ms": median - base}
        mine = ""
        if name in own:
            report[name]["own_ms"] = statistics.median(own[name])
            mine = f"{report[name]['own_ms']:.2f}"
        lines.append(f"| {name} | {median:.2f} | {median - base:+.2f} | {mine} |")
    print(json.dumps(report, indent=2) if args.json else "\n".join(lines))
    return 0


class _TimedProcessor:
    """A logits processor wrapped to time its own calls."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.seconds: list[float] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        start = time.perf_counter()
        out = self.processor(input_ids, scores)
        self.seconds.append(time.perf_counter() - start)
        return out

    def median_ms(self) -> float:
        """The median call after the first (which makes the matchers) in ms."""
        return statistics.median(self.seconds[1:] or self.seconds) * 1e3


class _LlgProcessor:
    """llguidance as a transformers logits processor, the way its documentation writes one."""

    def __init__(self, hf_tokenizer: Any, schema: dict[str, Any]) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.llg_torch = llguidance.torch
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        self.matchers: list[Any] = []
        self.executor = llguidance.LLExecutor()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        batch = input_ids.shape[0]
        if not self.matchers:
            self.matchers = [self.llg.LLMatcher(self.tokenizer, self.grammar) for _ in range(batch)]
            self.bitmask = self.llg_torch.allocate_token_bitmask(batch, self.tokenizer.vocab_size)
        else:
            for matcher, token in zip(self.matchers, input_ids[:, -1].tolist()):
                matcher.consume_token(token)
        self.llg_torch.fill_next_token_bitmask_par(self.executor, [(m, i) for i, m in enumerate(self.matchers)], self.bitmask)
        self.llg_torch.apply_token_bitmask_inplace(scores, self.bitmask)
        return scores


def add_serving_benches(sub: Any) -> None:
    p = sub.add_parser("batch", help="batch mask fill per step, parallel over core instances, beside llguidance")
    p.add_argument("--vs", choices=["llguidance", "none"], default="llguidance")
    p.add_argument("--sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=2, help="matcher sets per mode, their steps interleaved")
    p.add_argument("--instances", type=int, default=None, help="core instances (default: CoreOptions' default)")
    p.add_argument("--ceiling", action="store_true",
                   help="measure what the CPUs give instead: the batch's serial loops in two processes at once (bench/ceiling.py)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_batch)
    p = sub.add_parser("hf", help="time a logits processor adds to transformers' generate, beside llguidance and XGrammar")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_hf)
