"""`tokensieve bench alternations`: 10,000 literals in four forms, beside llguidance.

A "one of these names" grammar is legitimate and common (a function name, a product, a city);
it is also where a derivative-based lexer can blow up: an alternation of 10,000 literals is
10,000 members to derive, and a grammar of 10,000 literal lexemes is a lexer state of 10,000
pairs and an Earley row of 10,000 items. The same deterministic words are compiled as

- a regex alternation, `Grammar.regex("(w1|w2|…)")`;
- `Grammar.choice([w1, w2, …])`;
- a Lark rule, `start: "w1" | "w2" | …`;
- a JSON Schema `{"enum": [w1, w2, …]}`;

and the command prints, per form: compile ms, the first mask (building the matcher's first row
included), the later masks while one word is consumed token by token (avg and max), and memory:
the core instance's linear memory growth while the grammar was live, and the bytes still
allocated after it was dropped. Linear memory never shrinks (wasm), so "returned" means that a
second compile and drop of the same grammar does not grow it again: the command compiles and
drops each form `--cycles` times and prints the growth after the first cycle.

llguidance runs the same words and token ids; its memory is the process's resident-set growth
(RSS, not comparable to linear memory byte for byte, but the same order).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokensieve._tools.hostile import identifier_words

from .basic import _consume_untimed

FORMS = ("regex", "choice", "lark", "json_enum")

# The clock of every figure: wall time by default; `--clock cpu` (this process's CPU time)
# keeps the figures meaningful on a shared, loaded machine.
_now = time.perf_counter

def _regex_escape(word: str) -> str:
    return "".join("\\" + c if c in "\\^$.|?*+()[]{}/" else c for c in word)


def _lark_string(word: str) -> str:
    return json.dumps(word)


def form_source(form: str, words: list[str]) -> Any:
    """The grammar of `words` in `form`, as its front-end takes it."""
    if form == "regex":
        return "(" + "|".join(_regex_escape(w) for w in words) + ")"
    if form == "choice":
        return list(words)
    if form == "lark":
        return "start: " + " | ".join(_lark_string(w) for w in words) + "\n"
    if form == "json_enum":
        return {"enum": list(words)}
    raise ValueError(f"unknown form {form!r}; one of {', '.join(FORMS)}")


def form_text(form: str, word: str) -> str:
    """The output that picks `word` in `form` (a JSON enum value is a JSON string)."""
    return json.dumps(word) if form == "json_enum" else word


def build_grammar(form: str, words: list[str], limits: Any = None, *, source: Any = None) -> Any:
    """The `Grammar` of `words` in `form` (`source`: `form_source(form, words)`, made ahead so
    that timing the call times the library only)."""
    from tokensieve._grammar.grammar import Grammar

    source = form_source(form, words) if source is None else source
    if form == "regex":
        return Grammar.regex(source, limits=limits)
    if form == "choice":
        return Grammar.choice(source, limits=limits)
    if form == "lark":
        return Grammar.lark(source, limits=limits)
    return Grammar.json_schema(source, limits=limits)


def llg_source(form: str, words: list[str]) -> tuple[str, str]:
    """llguidance's (grammar kind, text) for `words` in `form`."""
    source = form_source(form, words)
    if form in ("regex", "lark"):
        return form, source
    return ("choice" if form == "choice" else "json_schema"), json.dumps(source)


@dataclass
class Figures:
    """What one engine did with one form."""

    result: str = "ok"
    compile_ms: float = 0.0
    compile_best_ms: float = 0.0  # ours: the fastest of the compile/drop cycles
    first_mask_ms: float = 0.0
    masks_ms: list[float] = field(default_factory=list)
    grown_mb: float = 0.0  # linear memory (ours) or RSS (llguidance) growth, first cycle
    live_after_drop_mb: float = 0.0  # ours: bytes the core still holds after the drop, over before
    regrown_mb: float = 0.0  # ours: linear memory growth over the later cycles
    error: str = ""

    def mask_avg(self) -> float:
        return statistics.fmean(self.masks_ms) if self.masks_ms else 0.0

    def mask_max(self) -> float:
        return max(self.masks_ms) if self.masks_ms else 0.0


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(form: str, words: list[str], tokenizer: Any, token_ids: list[int], cycles: int) -> Figures:
    """Compile, mask along `token_ids`, drop; `cycles` times; figures of the first cycle."""
    import numpy as np

    from tokensieve._core import default_pool
    from tokensieve._errors import TokensieveError
    from tokensieve._decoding.matcher import Matcher

    core = default_pool().first()
    out = Figures()
    buf = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    gc.collect()
    source = form_source(form, words)
    mem0 = core.memory_size_bytes()
    live0 = core.live_kib()
    after_first = mem0
    for cycle in range(cycles):
        stage = "compile"
        t0 = t1 = t2 = _now()
        masks: list[float] = []
        grammar = m = None
        try:
            grammar = build_grammar(form, words, source=source)
            t1 = t2 = _now()
            stage = "first mask"
            m = Matcher(tokenizer, grammar)
            m.fill_bitmask(buf)
            t2 = _now()
            stage = "mask"
            for token in token_ids:
                if not _consume_untimed(m, token):
                    out.result = "refused"
                    break
                t = _now()
                m.fill_bitmask(buf)
                masks.append((_now() - t) * 1e3)
        except TokensieveError as err:
            failed = _now()
            if stage == "compile":
                t1 = t2 = failed
            elif stage == "first mask":
                t2 = failed
            out.result = f"{stage}: {type(err).__name__} ({getattr(err, 'limit', None) or ''})"
            out.error = str(err)
        compiled_ms = (t1 - t0) * 1e3
        out.compile_best_ms = compiled_ms if cycle == 0 else min(out.compile_best_ms, compiled_ms)
        if cycle == 0:
            out.compile_ms = compiled_ms
            out.first_mask_ms = (t2 - t1) * 1e3
            out.masks_ms = masks
            out.grown_mb = (core.memory_size_bytes() - mem0) / 2**20
        del grammar, m
        gc.collect()
        if cycle == 0:
            out.live_after_drop_mb = (core.live_kib() - live0) / 1024
            after_first = core.memory_size_bytes()
    out.regrown_mb = (core.memory_size_bytes() - after_first) / 2**20
    return out


def run_llg(parts: tuple[Any, Any, Any], form: str, words: list[str], token_ids: list[int]) -> Figures:
    llg, llg_np, llg_tok = parts
    out = Figures()
    gc.collect()
    kind, text = llg_source(form, words)
    rss0 = _rss_mb()
    t0 = _now()
    try:  # llguidance's grammar_from (its front-end) is timed like ours
        m = llg.LLMatcher(llg_tok, str(llg.grammar_from(kind, text)), log_level=0)
    except Exception as err:  # llguidance raises for what it cannot parse
        out.result = f"grammar error ({type(err).__name__})"
        out.error = str(err)
        return out
    t1 = _now()
    if m.is_error():
        out.result = "error"
        out.error = m.get_error()
        return out
    buf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)
    llg_np.fill_next_token_bitmask(m, buf, 0)
    t2 = _now()
    for token in token_ids:
        if not m.consume_token(token):
            out.result = "refused"
            out.error = m.get_error() if m.is_error() else ""
            break
        t = _now()
        llg_np.fill_next_token_bitmask(m, buf, 0)
        out.masks_ms.append((_now() - t) * 1e3)
    out.compile_ms = out.compile_best_ms = (t1 - t0) * 1e3
    out.first_mask_ms = (t2 - t1) * 1e3
    out.grown_mb = _rss_mb() - rss0
    return out


def _print_table(count: int, tokenizer_name: str, rows: list[tuple[str, Figures, Figures | None]], clock: str) -> None:
    print(f"Large alternations: {count:,} identifiers, tokenizer {tokenizer_name} "
          f"(ms of {clock} time; MB: linear memory growth for tokensieve, RSS growth for llguidance)")
    head = (f"{'form':<10} {'engine':<11} {'compile':>8} {'best':>7} {'1st mask':>9} {'mask avg':>9} {'mask max':>9} "
            f"{'MB':>7} {'kept MB':>8} {'regrow':>7}  result")
    print(head)
    print("-" * len(head))
    for form, ours, theirs in rows:
        for name, f in (("tokensieve", ours), ("llguidance", theirs)):
            if f is None:
                continue
            kept = f"{f.live_after_drop_mb:8.2f}" if name == "tokensieve" else f"{'':>8}"
            regrow = f"{f.regrown_mb:7.2f}" if name == "tokensieve" else f"{'':>7}"
            print(f"{form:<10} {name:<11} {f.compile_ms:8.1f} {f.compile_best_ms:7.1f} {f.first_mask_ms:9.2f} {f.mask_avg():9.3f} "
                  f"{f.mask_max():9.3f} {f.grown_mb:7.1f} {kept} {regrow}  {f.result}")
    for form, ours, theirs in rows:
        for name, f in (("tokensieve", ours), ("llguidance", theirs)):
            if f is not None and f.error:
                print(f"{form} {name}: {f.error.splitlines()[0][:300] if f.error.strip() else ''}")
    print("compile: the first compile (Python front-end and core); best: the fastest of the cycles; "
          "1st mask: creating the matcher and its first mask")
    print("kept MB: bytes the core still holds after the grammar and matcher are dropped; "
          "regrow: linear memory growth over the later compile/drop cycles (0 = the memory is reused)")


def add_alternations_bench(sub: Any) -> None:
    p = sub.add_parser("alternations", help="10,000 literals as regex, choice, Lark and JSON enum, beside llguidance",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--count", type=int, default=10_000, help="how many words (default 10,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cycles", type=int, default=3, help="compile/mask/drop cycles per form (memory reuse)")
    p.add_argument("--form", action="append", choices=FORMS, help="only these forms (repeatable)")
    p.add_argument("--vs", choices=["llguidance", "none"], default="llguidance")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall time, or this process's CPU time (steadier on a loaded machine)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    global _now
    _now = time.process_time if args.clock == "cpu" else time.perf_counter
    from .basic import _default_tokenizer, _load_llguidance
    from tokensieve._grammar.grammar import Grammar
    from tokensieve._decoding.matcher import Matcher
    from tokensieve._tokenizer.tokenizer import Tokenizer

    tok_path = args.tokenizer or _default_tokenizer()
    tokenizer = Tokenizer.from_file(tok_path)
    # Load the tokenizer and build its lazily made tables (the slices' masks, about 7 MB for
    # Llama-3) first: the figures below are the grammars' own.
    import numpy as np

    warm = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    for pattern in ("[a-z]+", "(get|set)_[a-z]+"):
        Matcher(tokenizer, Grammar.regex(pattern)).fill_bitmask(warm)
    # Each front-end's modules are imported by its first grammar (the Lark package alone takes
    # 30-70 ms): a process pays that once, so a small grammar of each form goes first.
    for form in FORMS:
        build_grammar(form, ["warm", "up"])
    loaded = _load_llguidance(Path(tok_path)) if args.vs == "llguidance" else None
    llg_parts = (loaded[0], loaded[1], loaded[2]) if loaded else None
    words = identifier_words(args.count, args.seed)
    picked = words[len(words) * 3 // 7]
    rows: list[tuple[str, Figures, Figures | None]] = []
    for form in args.form or FORMS:
        print(f"  {form} …", file=sys.stderr, flush=True)
        ids = tokenizer.encode(form_text(form, picked))
        ours = run_ours(form, words, tokenizer, ids, args.cycles)
        theirs = run_llg(llg_parts, form, words, ids) if llg_parts else None
        rows.append((form, ours, theirs))
    _print_table(len(words), Path(tok_path).parent.name, rows, args.clock)
    if args.json:
        doc = {form: {"tokensieve": o.__dict__, "llguidance": t.__dict__ if t else None} for form, o, t in rows}
        args.json.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
