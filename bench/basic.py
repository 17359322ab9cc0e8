"""`tokensieve bench regex`: mask speed on real tokenizers, beside llguidance in the same run,
and the step path at a cached position (`--step-only` for that alone).

Machines are noisy, so every figure is printed next to llguidance's figure for the same work in
the same process, and the ratio is what to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from tokensieve._tools.maskbench import find_shared

# (name, pattern, a text the pattern matches: its canonical tokens are replayed)
REGEX_CASES: list[tuple[str, str, str]] = [
    ("string_body", r'[^"]*"', "The quick brown fox jumps over the lazy dog, then naps for a while "
     "under the old oak tree near the river bank, dreaming of rabbits and warm summer days.\""),
    ("digits", r"[0-9]{1,3}", "123"),
    ("integer", r"-?(0|[1-9][0-9]*)", "-1234567890"),
    ("json_string", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
     '"Hello, world! Caf\\u00e9 costs \\"3 euros\\" \\n and more text here"'),
    ("date_time", r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", "2024-05-06T07:08:09.123+02:00"),
    ("email", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}", "john.doe@example.com"),
    ("sentence", r"[A-Z][a-z ,']{0,200}[.!?]", "Hello there, it's a fine day for a walk in the park, isn't it?"),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "123e4567-e89b-12d3-a456-426614174000"),
]


JSON_LARK = r"""
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" "}" | "{" pair ("," pair)* "}"
pair: STRING ":" value
array: "[" "]" | "[" value ("," value)* "]"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n\r]+/
"""

C_LARK = r"""
start: stmt+
stmt: decl | assign | if_stmt | while_stmt | call ";" | "return" expr ";"
decl: TYPE NAME ("=" expr)? ";"
assign: NAME "=" expr ";"
if_stmt: "if" "(" expr ")" block ("else" block)?
while_stmt: "while" "(" expr ")" block
block: "{" stmt* "}"
call: NAME "(" (expr ("," expr)*)? ")"
expr: atom (OP atom)*
atom: NAME | NUMBER | STRING | call | "(" expr ")"
TYPE: "int" | "float" | "char" | "void"
NAME: /[a-zA-Z_][a-zA-Z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?/
STRING: /"[^"\n]*"/
OP: "+" | "-" | "*" | "/" | "<" | "<=" | "==" | "!=" | ">" | ">=" | "&&" | "||"
COMMENT: /\/\/[^\n]*/
%ignore /[ \t\n]+/
%ignore COMMENT
"""

# Lexemes that meet inside tokens: " world" ends a word, is a space and starts the next word.
WORDS_LARK = 'start: (WORD " ")*\nWORD: /[a-z]+/\n'
PROSE_LARK = 'start: sentence+\nsentence: WORD (SEP WORD)* "." " "?\nSEP: /, | /\nWORD: /[A-Za-z]+/\n'

CFG_CASES: list[tuple[str, str, str]] = [
    ("json", JSON_LARK, '{"name": "Alice Smith", "age": 31, "tags": ["admin", "user", "beta tester"], '
     '"address": {"street": "12 Long Road", "city": "Springfield", "zip": "12345"}, "scores": [1.5, 2.25, -3e5, 0], '
     '"active": true, "note": null, "bio": "Loves hiking, reading about the history of science and cooking '
     'elaborate dinners for friends."}'),
    ("words", WORDS_LARK, "the quick brown fox jumps over the lazy dog and then runs into the woods where "
     "nobody has seen it since the early days of spring when the river was still frozen "),
    ("prose", PROSE_LARK, "Hello there, my old friend. The weather is fine today, and the garden is full of "
     "flowers. We should walk to the lake before it gets dark, then cook dinner together. "),
    ("c_like", C_LARK, 'int total = 0;\nint i = 0;\nwhile (i < 100) {\n    if (i == 42) { print("found it"); }\n'
     '    else { total = total + compute(i, 2.5); }\n    i = i + 1;\n}\nreturn total;'),
]


def _load_llguidance(tokenizer_path: Path) -> tuple[Any, Any, Any, Any] | None:
    """(llguidance, llguidance.numpy, tokenizer, tokenizer without slicer), or None if missing."""
    try:
        import llguidance
        import llguidance.numpy as llg_np
    except ImportError:
        print("llguidance is not installed: `pip install llguidance` for side-by-side figures")
        return None
    import gzip

    raw = tokenizer_path.read_bytes()
    text = gzip.decompress(raw).decode() if tokenizer_path.suffix == ".gz" else raw.decode()
    return llguidance, llg_np, llguidance.LLTokenizer(text), llguidance.LLTokenizer(text, slices=[])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "avg": statistics.fmean(values),
        "p50": _percentile(values, 0.5),
        "p99": _percentile(values, 0.99),
        "max": max(values),
        "n": len(values),
    }


def _consume_untimed(m: Any, token: int) -> bool:
    """Consume in its own call (`consume_tokens`): `consume_token` would leave a token the
    mask allowed pending for the next fill, and the timed mask would hold the consume's work,
    which llguidance's masks do not."""
    return m.consume_tokens((token,))


def _replay(
    make: Callable[[], Any], fill: Callable[[Any], None], consume: Callable[[Any, int], Any],
    tokens: list[int], rounds: int,
) -> list[float]:
    """µs per mask along the token sequence, over `rounds` fresh matchers (one warm-up round)."""
    times: list[float] = []
    for r in range(rounds + 1):
        m = make()
        for t in tokens:
            t0 = time.perf_counter()
            fill(m)
            dt = (time.perf_counter() - t0) * 1e6
            if r:
                times.append(dt)
            consume(m, t)
    return times


def _first_masks(make: Callable[[], Any], fill: Callable[[Any], None], rounds: int) -> list[float]:
    """µs for the first mask of fresh matchers (no mask cache can help), after one warm-up."""
    times = []
    for r in range(rounds + 1):
        m = make()
        t0 = time.perf_counter()
        fill(m)
        if r:
            times.append((time.perf_counter() - t0) * 1e6)
    return times


def run_step_bench(tok: Any, llg: tuple[Any, Any, Any, Any] | None, *, rounds: int = 15, calls: int = 20_000) -> dict[str, Any]:
    """The step path at a cached position (issue 13): µs per `fill_bitmask` and per
    `consume_and_fill_bitmask` from Python, beside llguidance's `fill_next_token_bitmask` and
    `consume_token` + `fill_next_token_bitmask` on the same grammar, rounds interleaved.

    The grammar is `a*` and the token is "a": consuming it comes back to the same position, so
    every mask after the first is the matcher's cached one and what is measured is the path
    from Python into the core and back (the call, the copy into the caller's array, the locks
    and checks), not mask computation. llguidance has no such cache; its mask for `a*` is one
    short walk of its token trie.
    """
    import numpy as np

    from tokensieve import Grammar, Matcher

    grammar = Grammar.regex("a*")
    a = tok.encode("a")
    if len(a) != 1:
        raise SystemExit(f"this tokenizer has no single token for 'a' ({a}); the cached step needs one")
    token = a[0]
    filler, stepper, looper = Matcher(tok, grammar), Matcher(tok, grammar), Matcher(tok, grammar)
    buf = np.zeros((1, filler.mask_words), dtype=np.int32)
    filler.fill_bitmask(buf)
    stepper.consume_and_fill_bitmask(token, buf)
    looper.fill_bitmask(buf)

    def ours_fill(n: int) -> None:
        fill = filler.fill_bitmask
        for _ in range(n):
            fill(buf)

    def ours_step(n: int) -> None:
        step = stepper.consume_and_fill_bitmask
        for _ in range(n):
            step(token, buf)

    def ours_loop(n: int) -> None:
        # The usual loop: the consume is left pending and applied by the fill's call.
        consume, fill = looper.consume_token, looper.fill_bitmask
        for _ in range(n):
            consume(token)
            fill(buf)

    def reset_looper() -> None:
        looper.reset()
        looper.fill_bitmask(buf)

    modes: dict[str, tuple[Callable[[int], None], Callable[[], None]]] = {
        "fill_bitmask": (ours_fill, lambda: None),
        "consume_and_fill_bitmask": (ours_step, stepper.reset),
        "consume_token+fill_bitmask": (ours_loop, reset_looper),
    }
    agree = None
    if llg is not None:
        llguidance, llg_np, llg_tok, _ = llg
        llg_grammar = llguidance.LLMatcher.grammar_from_regex("a*")
        llg_filler, llg_stepper = llguidance.LLMatcher(llg_tok, llg_grammar), llguidance.LLMatcher(llg_tok, llg_grammar)
        lbuf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)
        llg_np.fill_next_token_bitmask(llg_filler, lbuf, 0)
        agree = lbuf.shape == buf.shape and bool(np.array_equal(lbuf, buf))

        def llg_fill(n: int) -> None:
            fill = llg_np.fill_next_token_bitmask
            for _ in range(n):
                fill(llg_filler, lbuf, 0)

        def llg_step(n: int) -> None:
            fill, consume = llg_np.fill_next_token_bitmask, llg_stepper.consume_token
            for _ in range(n):
                consume(token)
                fill(llg_stepper, lbuf, 0)

        modes["llg_fill_next_token_bitmask"] = (llg_fill, lambda: None)
        modes["llg_consume_token+fill"] = (llg_step, llg_stepper.reset)
    # Best of `rounds`, modes interleaved so a busy moment hits every mode alike. CPU time is
    # what the process spent (not inflated by other processes on a busy machine); wall beside.
    cpu: dict[str, list[float]] = {name: [] for name in modes}
    wall: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, (run, between) in modes.items():
            between()
            c0, w0 = time.process_time(), time.perf_counter()
            run(calls)
            cpu[name].append((time.process_time() - c0) / calls * 1e6)
            wall[name].append((time.perf_counter() - w0) / calls * 1e6)
    results: dict[str, Any] = {name: {"cpu_us": min(cpu[name]), "wall_us": min(wall[name])} for name in modes}
    results["masks_agree_with_llguidance"] = agree
    results["calls"], results["rounds"] = calls, rounds
    return results


def _print_step(r: dict[str, Any]) -> None:
    print(f"step path at a cached position (regex a*, token 'a'; best of {r['rounds']} rounds of {r['calls']} calls; "
          "CPU µs, wall µs in brackets):")
    line = "  tokensieve:"
    for name in ("fill_bitmask", "consume_and_fill_bitmask", "consume_token+fill_bitmask"):
        line += f" {name} {r[name]['cpu_us']:.2f} ({r[name]['wall_us']:.2f});"
    print(line.rstrip(";"))
    if "llg_fill_next_token_bitmask" in r:
        f, c = r["llg_fill_next_token_bitmask"], r["llg_consume_token+fill"]
        print(f"  llguidance: fill_next_token_bitmask {f['cpu_us']:.2f} ({f['wall_us']:.2f}); "
              f"consume_token + fill {c['cpu_us']:.2f} ({c['wall_us']:.2f}); masks "
              f"{'agree' if r['masks_agree_with_llguidance'] else 'DIFFER'}")
        print(f"  ours / llguidance: fill {r['fill_bitmask']['cpu_us'] / f['cpu_us']:.2f}, "
              f"consume and fill {r['consume_and_fill_bitmask']['cpu_us'] / c['cpu_us']:.2f}, "
              f"consume_token + fill {r['consume_token+fill_bitmask']['cpu_us'] / c['cpu_us']:.2f}")


def run_regex_bench(tokenizer_path: Path, *, rounds: int, vs_llguidance: bool, step_only: bool = False) -> dict[str, Any]:
    """Measure; returns the figures (also printed as a table)."""
    import numpy as np

    from tokensieve import CoreOptions, Grammar, Matcher, Tokenizer
    from tokensieve._core.pool import new_core

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(tokenizer_path)
    load_s = time.perf_counter() - t0
    fresh = new_core(CoreOptions())
    t0 = time.perf_counter()
    tok.core_handle(fresh)
    trie_s = time.perf_counter() - t0
    nodes = fresh.tokenizer_node_count(tok.core_handle(fresh))

    m0 = Matcher(tok, Grammar.regex("x"))
    n_calls = 200_000
    t0 = time.perf_counter()
    f = m0._core.runtime.func("ts_matcher_is_accepting")  # the bare call, for its cost
    h = m0._handle
    for _ in range(n_calls):
        f(h)
    call_us = (time.perf_counter() - t0) / n_calls * 1e6

    llg = _load_llguidance(tokenizer_path) if vs_llguidance else None

    results: dict[str, Any] = {
        "tokenizer": str(tokenizer_path), "vocab_size": tok.vocab_size, "trie_nodes": nodes,
        "tokenizer_load_s": load_s, "trie_build_s": trie_s, "wasm_call_us": call_us, "cases": {},
        "step": run_step_bench(tok, llg),
    }
    if step_only:
        _print(results)
        return results
    words = (tok.vocab_size + 31) // 32
    buf = np.zeros((1, words), dtype=np.int32)
    for name, pattern, sample in REGEX_CASES:
        grammar = Grammar.regex(pattern)
        tokens = tok.encode(sample)
        row: dict[str, Any] = {"pattern": pattern, "tokens": len(tokens)}
        row["ours_steps"] = _summary(_replay(
            lambda: Matcher(tok, grammar), lambda m: m.fill_bitmask(buf), _consume_untimed,
            tokens, rounds,
        ))
        row["ours_first"] = _summary(_first_masks(lambda: Matcher(tok, grammar), lambda m: m.fill_bitmask(buf), 20))
        if llg is not None:
            llguidance, llg_np, llg_tok, llg_tok_noslice = llg
            g = llguidance.LLMatcher.grammar_from_regex(pattern)
            lbuf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)

            def fill(m: Any) -> None:
                llg_np.fill_next_token_bitmask(m, lbuf, 0)

            row["llg_steps"] = _summary(_replay(
                lambda: llguidance.LLMatcher(llg_tok, g), fill, lambda m, t: m.consume_token(t), tokens, rounds,
            ))
            row["llg_first"] = _summary(_first_masks(lambda: llguidance.LLMatcher(llg_tok, g), fill, 20))
            row["llg_noslice_first"] = _summary(
                _first_masks(lambda: llguidance.LLMatcher(llg_tok_noslice, g), fill, 20)
            )
        results["cases"][name] = row
    _print(results)
    return results


def _print(r: dict[str, Any]) -> None:
    print(f"tokenizer: {r['tokenizer']} ({r['vocab_size']} ids, {r['trie_nodes']} trie nodes)")
    print(f"load tokenizer.json: {r['tokenizer_load_s'] * 1e3:.0f} ms; build trie in the core: "
          f"{r['trie_build_s'] * 1e3:.0f} ms; one WASM call from Python: {r['wasm_call_us']:.2f} µs")
    _print_step(r["step"])
    if not r["cases"]:
        return
    has_llg = any("llg_steps" in c for c in r["cases"].values())
    head = f"{'case':<12} {'tok':>4} | {'ours p50':>9} {'p99':>8} {'first':>8}"
    if has_llg:
        head += f" | {'llg p50':>8} {'p99':>8} {'first':>8} {'noslice':>8} | {'p50 x':>6} {'first x':>7}"
    print(head)
    print("-" * len(head))
    for name, c in r["cases"].items():
        o, of = c["ours_steps"], c["ours_first"]
        line = f"{name:<12} {c['tokens']:>4} | {o['p50']:>9.1f} {o['p99']:>8.1f} {of['p50']:>8.1f}"
        if "llg_steps" in c:
            lg, lf, ln = c["llg_steps"], c["llg_first"], c["llg_noslice_first"]
            line += (f" | {lg['p50']:>8.1f} {lg['p99']:>8.1f} {lf['p50']:>8.1f} {ln['p50']:>8.1f}"
                     f" | {o['p50'] / lg['p50']:>6.2f} {of['p50'] / ln['p50']:>7.2f}")
        print(line)
    print("µs per mask. 'first' = first mask of a fresh matcher (no mask cache can help); 'noslice' = "
          "llguidance without its slicer; 'x' columns = ours / llguidance (lower is better for us).")


def run_cfg_bench(tokenizer_path: Path, *, rounds: int, vs_llguidance: bool) -> dict[str, Any]:
    """Mask µs along sample texts for the Lark grammars of `CFG_CASES`, llguidance beside."""
    import numpy as np

    from tokensieve import Grammar, Matcher, Tokenizer

    tok = Tokenizer.from_file(tokenizer_path)
    words = (tok.vocab_size + 31) // 32
    buf = np.zeros((1, words), dtype=np.int32)
    llg = _load_llguidance(tokenizer_path) if vs_llguidance else None
    results: dict[str, Any] = {"tokenizer": str(tokenizer_path), "cases": {}}
    for name, lark, sample in CFG_CASES:
        grammar = Grammar.lark(lark)
        tokens = tok.encode(sample)
        row: dict[str, Any] = {"tokens": len(tokens)}
        t0 = time.perf_counter()
        Grammar.lark(lark)
        row["ours_compile_us"] = (time.perf_counter() - t0) * 1e6
        row["ours"] = _summary(_replay(
            lambda: Matcher(tok, grammar), lambda m: m.fill_bitmask(buf), _consume_untimed, tokens, rounds,
        ))
        if llg is not None:
            llguidance, llg_np, llg_tok, llg_tok_noslice = llg
            g = llguidance.LLMatcher.grammar_from_lark(lark)
            lbuf = llg_np.allocate_token_bitmask(1, llg_tok.vocab_size)
            for key, lt in (("llg", llg_tok), ("llg_noslice", llg_tok_noslice)):
                row[key] = _summary(_replay(
                    lambda lt=lt: llguidance.LLMatcher(lt, g), lambda m: llg_np.fill_next_token_bitmask(m, lbuf, 0),
                    lambda m, t: m.consume_token(t), tokens, rounds,
                ))
        results["cases"][name] = row
    print(f"tokenizer: {tokenizer_path} ({tok.vocab_size} ids); µs per mask along a sample text")
    head = f"{'grammar':<8} {'tok':>4} | {'ours avg':>8} {'p50':>6} {'p99':>7}"
    if llg is not None:
        head += f" | {'llg avg':>7} {'p50':>6} {'p99':>7} | {'noslice avg':>11} {'p50':>6} {'p99':>7} | {'avg x':>6} {'x noslice':>9}"
    print(head)
    print("-" * len(head))
    for name, c in results["cases"].items():
        o = c["ours"]
        line = f"{name:<8} {c['tokens']:>4} | {o['avg']:>8.1f} {o['p50']:>6.1f} {o['p99']:>7.1f}"
        if "llg" in c:
            lg, ln = c["llg"], c["llg_noslice"]
            line += (f" | {lg['avg']:>7.1f} {lg['p50']:>6.1f} {lg['p99']:>7.1f} | {ln['avg']:>11.1f} {ln['p50']:>6.1f} "
                     f"{ln['p99']:>7.1f} | {o['avg'] / lg['avg']:>6.2f} {o['avg'] / ln['avg']:>9.2f}")
        print(line)
    print("'x' = ours / llguidance average (lower is better for us); 'noslice' = llguidance without its slicer.")
    return results


def add_cfg_bench(sub: Any) -> None:
    p = sub.add_parser("cfg", help="per-mask µs for Lark grammars: JSON, words, prose, C-like (Llama-3 by default)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--vs", choices=["llguidance", "none"], default="llguidance")
    p.add_argument("--json", type=Path, help="also write the figures here")

    def run(args: argparse.Namespace) -> int:
        path = args.tokenizer or _default_tokenizer()
        results = run_cfg_bench(path, rounds=args.rounds, vs_llguidance=args.vs == "llguidance")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0

    p.set_defaults(run=run)


def _default_tokenizer() -> Path:
    shared = find_shared()
    if shared is None:
        raise SystemExit("no tokenizer given and ../shared not found: pass --tokenizer PATH")
    return shared / "tokenizers" / "llama3" / "tokenizer.json.gz"


def add_regex_bench(sub: Any) -> None:
    p = sub.add_parser("regex", help="per-mask µs for a handful of regexes (Llama-3 by default)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--rounds", type=int, default=5, help="replays of each sample")
    p.add_argument("--vs", choices=["llguidance", "none"], default="llguidance")
    p.add_argument("--step-only", action="store_true",
                   help="only the step path at a cached position (fill_bitmask, consume_and_fill_bitmask)")
    p.add_argument("--json", type=Path, help="also write the figures here")

    def run(args: argparse.Namespace) -> int:
        path = args.tokenizer or _default_tokenizer()
        results = run_regex_bench(
            path, rounds=args.rounds, vs_llguidance=args.vs == "llguidance", step_only=args.step_only
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0

    p.set_defaults(run=run)
