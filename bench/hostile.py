"""`tokensieve bench hostile`: hostile grammars and a MaskBench sample, beside llguidance.

Every call into the core is bounded under the default `Limits` (docs/limits.md); this command
shows how well. For each case of the hostile corpus (`tests/data/hostile/cases.json`, format in
`tests/data/README.md`) and for a sample of MaskBench (every 50th schema by default) it prints:

- **compile ms**: the grammar from its text (front-end and core) and the first matcher;
- **worst step ms**: the slowest single mask, consume or forced-bytes call of the drive;
- **peak memory MB**: tokensieve: the linear memory of the core instance the case ran in (a
  fresh one per case, so this is its peak; it includes the tokenizer's trie and slices,
  about 8 MB for Llama-3); llguidance: how much the process's peak RSS grew during the case
  (0 when it stayed under an earlier peak: a coarse figure);
- **outcome**: `ok`, `refused@i` (token i was not allowed: the text leaves the grammar),
  `limit:<name>` (a `LimitError` naming its limit), `grammar_error`, `trap`, `error`.

Both engines see the same token ids: a case drives tokensieve first (a text's canonical tokens,
or a seeded random walk over the tokens its masks allow) and replays those ids in llguidance.
Machines are noisy; compare the two columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

CASES_DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "hostile" / "cases.json"
STEP_TARGET_MS = 10.0

from tokensieve._tools.hostile import Outcome, _classify, _warm_tokenizer, grammar_source, load_cases, run_ours


def llg_grammar(llg: Any, case: dict[str, Any]) -> str:
    source, kind = grammar_source(case), case["kind"]
    if kind == "json_schema":
        return str(llg.grammar_from("json_schema", json.dumps(source)))
    if kind == "choice":
        return str(llg.grammar_from("choice", json.dumps(source)))
    return str(llg.grammar_from({"regex": "regex", "lark": "lark", "gbnf": "gbnf"}[kind], source))


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_llg(case: dict[str, Any], llg: Any, llg_np: Any, llg_tok: Any, tokens: Sequence[int]) -> Outcome:
    """llguidance on the same case and token ids."""
    out = Outcome()
    rss0 = _maxrss_mb()
    try:
        t0 = time.perf_counter()
        m = llg.LLMatcher(llg_tok, llg_grammar(llg, case), log_level=0)
        out.compile_ms = (time.perf_counter() - t0) * 1e3
    except Exception as err:  # llguidance raises for what it cannot parse
        out.result = f"grammar_error ({type(err).__name__})"
        return out
    if m.is_error():
        out.result = "grammar_error"
        out.memory_mb = _maxrss_mb() - rss0
        return out
    if "heal_bytes" in case["drive"]:
        out.result = "n/a"
        return out
    buf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)
    for i, token in enumerate(tokens):
        t0 = time.perf_counter()
        m.compute_ff_bytes()
        out.step("ff", time.perf_counter() - t0)
        t0 = time.perf_counter()
        llg_np.fill_next_token_bitmask(m, buf, 0)
        out.step("mask", time.perf_counter() - t0)
        if m.is_error():
            out.result = "limit:" + m.get_error()[:40]
            break
        t0 = time.perf_counter()
        accepted = m.consume_token(token)
        out.step("consume", time.perf_counter() - t0)
        out.steps += 1
        if not accepted:
            out.result = "limit:" + m.get_error()[:40] if m.is_error() else f"refused@{i}"
            break
    out.memory_mb = _maxrss_mb() - rss0
    return out


def _in_child(run: Callable[[], Outcome]) -> Outcome:
    """`run()` in a forked child, its outcome sent back through a pipe: llguidance crashes the
    process on some grammars (a 5,000-rule chain overflows its stack), which must end one case,
    not the benchmark. A child killed by a signal is the outcome `crash (signal N)`."""
    if not hasattr(os, "fork"):
        return run()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only llguidance runs here
        try:
            data = pickle.dumps(run())
        except BaseException as err:  # noqa: BLE001 - reported as the case's outcome
            data = pickle.dumps(Outcome(result=f"error ({type(err).__name__})"))
        with os.fdopen(write, "wb") as pipe:
            pipe.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data:
        return Outcome(result=f"crash (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else "crash")
    out: Outcome = pickle.loads(data)
    return out


def run_maskbench_sample(every: int, tokenizer: Any, llg_parts: tuple[Any, Any, Any] | None) -> dict[str, Any]:
    """Compile time, worst step and memory over every `every`-th MaskBench schema."""
    import numpy as np

    from tokensieve._core import default_pool
    from tokensieve._errors import TokensieveError
    from tokensieve._grammar.grammar import Grammar
    from tokensieve._tools.maskbench import find_maskbench_dir, instance_text, load_entries
    from tokensieve._decoding.matcher import Matcher

    from tokensieve._core import configure

    configure(instances=1)
    _warm_tokenizer(tokenizer)
    data_dir = find_maskbench_dir()
    if data_dir is None:
        print("MaskBench data not found (../shared/data/jsonschemabench/maskbench): skipping it", file=sys.stderr)
        return {}
    entries = load_entries(data_dir)[::every]
    figures: dict[str, Any] = {"schemas": len(entries), "ours": _Tally(), "llg": _Tally()}
    buf = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    for entry in entries:
        record = entry.record()
        tests = [tokenizer.encode(instance_text(t["data"])) for t in record.get("tests", [])]
        tally = figures["ours"]
        try:
            t0 = time.perf_counter()
            first = Matcher(tokenizer, Grammar.json_schema(record["schema"]))
            tally.compile(entry.id, time.perf_counter() - t0)
            for ids in tests:
                m = first.fork()
                for t in ids:
                    for what, call in (("ff", m.compute_ff_bytes), ("mask", lambda: m.fill_bitmask(buf))):
                        t0 = time.perf_counter()
                        call()
                        tally.step(entry.id, what, time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    ok = m.consume_token(t)
                    tally.step(entry.id, "consume", time.perf_counter() - t0)
                    if not ok:
                        break
        except TokensieveError as err:
            tally.failures[_classify(err)] = tally.failures.get(_classify(err), 0) + 1
        if llg_parts is not None:
            _llg_schema(llg_parts, entry.id, record["schema"], tests, figures["llg"])
    figures["ours"].memory_mb = max(c.memory_size_bytes() for c in default_pool().cores()) / 2**20
    return figures


@dataclass
class _Tally:
    compile_s: list[float] = field(default_factory=list)
    steps: int = 0
    over_target: int = 0
    worst_s: float = 0.0
    worst_at: str = ""
    failures: dict[str, int] = field(default_factory=dict)
    memory_mb: float | None = None

    def compile(self, where: str, seconds: float) -> None:
        self.compile_s.append(seconds)

    def step(self, where: str, what: str, seconds: float) -> None:
        self.steps += 1
        self.over_target += seconds * 1e3 > STEP_TARGET_MS
        if seconds > self.worst_s:
            self.worst_s, self.worst_at = seconds, f"{what} in {where}"


def _llg_schema(parts: tuple[Any, Any, Any], where: str, schema: Any, tests: list[list[int]], tally: _Tally) -> None:
    llg, llg_np, llg_tok = parts
    try:
        t0 = time.perf_counter()
        first = llg.LLMatcher(llg_tok, llg.LLMatcher.grammar_from_json_schema(schema), log_level=0)
        seconds = time.perf_counter() - t0
    except Exception:
        tally.failures["compile"] = tally.failures.get("compile", 0) + 1
        return
    if first.is_error():
        tally.failures["compile"] = tally.failures.get("compile", 0) + 1
        return
    tally.compile(where, seconds)
    buf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)
    for ids in tests:
        m = first.deep_copy()
        for t in ids:
            for what, call in (("ff", m.compute_ff_bytes), ("mask", lambda: llg_np.fill_next_token_bitmask(m, buf, 0))):
                t0 = time.perf_counter()
                call()
                tally.step(where, what, time.perf_counter() - t0)
            t0 = time.perf_counter()
            ok = m.consume_token(t)
            tally.step(where, "consume", time.perf_counter() - t0)
            if not ok or m.is_error():
                break


# -- the report -------------------------------------------------------------------------------


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.2f}"


def print_hostile(rows: list[tuple[dict[str, Any], Outcome, Outcome | None]]) -> None:
    llg = any(r[2] is not None for r in rows)
    head = f"{'case':<34}{'compile ms':>12}{'worst step ms':>15}{'memory MB':>11}  {'outcome':<24}"
    if llg:
        head += f"{'llg compile':>12}{'llg worst':>11}{'llg RSS Δ':>10}  llg outcome"
    print(head)
    print("-" * len(head))
    for case, ours, theirs in rows:
        line = (f"{case['name'][:33]:<34}{_ms(ours.compile_ms):>12}"
                f"{_ms(ours.worst_ms) + ' ' + ours.worst_what[:1]:>15}{_ms(ours.memory_mb):>11}  {ours.result[:23]:<24}")
        if theirs is not None:
            line += (f"{_ms(theirs.compile_ms):>12}{_ms(theirs.worst_ms) + ' ' + theirs.worst_what[:1]:>11}"
                     f"{_ms(theirs.memory_mb):>10}  {theirs.result[:40]}")
        print(line)
    print("(worst step: m mask, c consume, f forced bytes, h healing; steps over "
          f"{STEP_TARGET_MS:g} ms: {sum(o.worst_ms > STEP_TARGET_MS for _, o, _ in rows)} of {len(rows)} cases)")


def print_maskbench(figures: dict[str, Any], every: int) -> None:
    if not figures:
        return
    print(f"\nMaskBench, every {every}th schema ({figures['schemas']} schemas): all steps, same token ids")
    cols = [("tokensieve", figures["ours"])] + ([("llguidance", figures["llg"])] if figures["llg"].steps else [])
    print(f"{'':<28}" + "".join(f"{n:>16}" for n, _ in cols))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<28}" + "".join(f"{v:>16}" for v in values))

    row("schemas compiled", [str(len(t.compile_s)) for _, t in cols])
    row("compile ms p50", [_ms(sorted(t.compile_s)[len(t.compile_s) // 2] * 1e3) if t.compile_s else "-" for _, t in cols])
    row("compile ms max", [_ms(max(t.compile_s) * 1e3) if t.compile_s else "-" for _, t in cols])
    row("steps", [str(t.steps) for _, t in cols])
    row(f"steps over {STEP_TARGET_MS:g} ms", [str(t.over_target) for _, t in cols])
    row("worst step ms", [_ms(t.worst_s * 1e3) for _, t in cols])
    row("peak memory MB", [_ms(t.memory_mb) for _, t in cols])
    for name, t in cols:
        print(f"  {name} worst step: {t.worst_at}")
        if t.failures:
            print(f"  {name} failures: {dict(sorted(t.failures.items()))}")


def add_hostile_bench(sub: Any) -> None:
    """Register `tokensieve bench hostile`."""
    p = sub.add_parser("hostile", help="hostile grammars plus a MaskBench sample: compile, worst step, memory, "
                       "beside llguidance", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--cases", type=Path, default=CASES_DEFAULT, help="the hostile corpus (JSON)")
    p.add_argument("--case", action="append", metavar="NAME", help="run only this case (repeatable)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--every", type=int, default=50, metavar="N",
                   help="MaskBench: every N-th schema (default 50; 0 skips MaskBench)")
    p.add_argument("--vs", choices=["llguidance", "none"], default="llguidance")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    p.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    from .basic import _default_tokenizer, _load_llguidance
    from tokensieve._tokenizer.tokenizer import Tokenizer

    if not args.cases.exists():
        raise SystemExit(f"{args.cases} not found: pass --cases with the hostile corpus (tests/data/hostile/cases.json)")
    cases = load_cases(args.cases)
    if args.case:
        unknown = set(args.case) - {c["name"] for c in cases}
        if unknown:
            raise SystemExit(f"unknown case(s) {sorted(unknown)}; the corpus has: {', '.join(c['name'] for c in cases)}")
        cases = [c for c in cases if c["name"] in args.case]
    tok_path = args.tokenizer or _default_tokenizer()
    tokenizer = Tokenizer.from_file(tok_path)
    loaded = _load_llguidance(Path(tok_path)) if args.vs == "llguidance" else None
    llg_parts = (loaded[0], loaded[1], loaded[2]) if loaded else None
    rows: list[tuple[dict[str, Any], Outcome, Outcome | None]] = []
    for case in cases:
        print(f"  {case['name']} …", file=sys.stderr, flush=True)
        ours = run_ours(case, tokenizer)
        theirs = _in_child(lambda: run_llg(case, *llg_parts, ours.tokens)) if llg_parts else None
        rows.append((case, ours, theirs))
    print(f"Hostile corpus ({args.cases.name}, {len(rows)} cases), tokenizer {Path(tok_path).parent.name}, default limits")
    print_hostile(rows)
    figures = run_maskbench_sample(args.every, tokenizer, llg_parts) if args.every > 0 else {}
    print_maskbench(figures, args.every)
    from tokensieve._core import configure

    configure()  # back to the default pool options
    if args.json:
        doc = {
            "hostile": [{"name": c["name"], "ours": _outcome_json(o), "llg": _outcome_json(t) if t else None}
                        for c, o, t in rows],
            "maskbench": {k: (v.__dict__ if isinstance(v, _Tally) else v) for k, v in figures.items()},
        }
        args.json.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _outcome_json(o: Outcome) -> dict[str, Any]:
    d = dict(o.__dict__)
    d.pop("tokens")
    return d
