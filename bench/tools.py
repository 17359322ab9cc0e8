"""`tokensieve bench tools`: tool-call grammars, beside XGrammar in the same run.

- compile: the grammar for N tools (realistic parameter schemas, generated deterministically:
  strings, integers with bounds, numbers, booleans, enums, arrays, nested objects), cold and
  then again for the same tools (tokensieve's and XGrammar's compile caches);
- steps: µs per mask along one model output (reasoning, free text, one tool call), split into
  the free-text steps and the steps inside the call's arguments; the arguments are also
  replayed under the same tool's schema alone, which is what an argument step should cost.
- requests that bring their own tools (a new grammar each): compile and every mask of one
  output on the grammar's first matcher, what a server pays per request when tools vary.

Machines are noisy: compare the ratios printed beside each pair, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any, Callable

from .basic import _consume_untimed, _default_tokenizer, _summary

_NOUNS = ["weather", "stock", "flight", "hotel", "order", "invoice", "user", "ticket", "repo", "file",
          "email", "event", "recipe", "song", "route", "device", "account", "payment", "report", "task"]
_VERBS = ["get", "search", "create", "update", "delete", "list", "book", "cancel", "send", "compute"]


def make_tools(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """`count` OpenAI-style function tools with varied, realistic parameter schemas."""
    rng = random.Random(seed)
    tools = []
    for i in range(count):
        name = f"{_VERBS[i % len(_VERBS)]}_{_NOUNS[(i // len(_VERBS)) % len(_NOUNS)]}_{i}"
        properties: dict[str, Any] = {}
        for j in range(rng.randint(2, 8)):
            kind = rng.choice(["string", "string", "integer", "number", "boolean", "enum", "array", "object", "date"])
            key = f"{rng.choice(_NOUNS)}_{rng.choice(['id', 'name', 'count', 'limit', 'kind', 'when', 'tags', 'info'])}_{j}"
            if kind == "string":
                prop: dict[str, Any] = {"type": "string", "description": f"The {key.replace('_', ' ')}."}
                if rng.random() < 0.3:
                    prop["maxLength"] = rng.choice([16, 64, 256])
            elif kind == "integer":
                prop = {"type": "integer", "minimum": 0, "maximum": rng.choice([10, 100, 10_000])}
            elif kind == "number":
                prop = {"type": "number"}
            elif kind == "boolean":
                prop = {"type": "boolean"}
            elif kind == "enum":
                prop = {"type": "string", "enum": rng.sample(["low", "medium", "high", "urgent", "none", "auto", "c", "f"], 3)}
            elif kind == "array":
                prop = {"type": "array", "items": {"type": "string"}, "maxItems": rng.choice([5, 10, 20])}
            elif kind == "date":
                prop = {"type": "string", "format": "date"}
            else:
                prop = {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                        "required": ["street"]}
            properties[key] = prop
        required = [k for k in properties if rng.random() < 0.5] or [next(iter(properties))]
        tools.append({"type": "function", "function": {
            "name": name, "description": f"{name.replace('_', ' ').capitalize()}.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        }})
    return tools


def _arguments_for(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """An instance of one of `make_tools`' parameter schemas (every property given)."""
    out: dict[str, Any] = {}
    for key, prop in schema["properties"].items():
        if "enum" in prop:
            out[key] = prop["enum"][0]
        elif prop.get("format") == "date":
            out[key] = "2026-11-25"
        elif prop["type"] == "string":
            out[key] = "Springfield, near the old river bridge"[: prop.get("maxLength", 64)]
        elif prop["type"] == "integer":
            out[key] = rng.randint(0, prop["maximum"])
        elif prop["type"] == "number":
            out[key] = 3.25
        elif prop["type"] == "boolean":
            out[key] = True
        elif prop["type"] == "array":
            out[key] = ["red", "green", "blue"]
        else:
            out[key] = {"street": "12 Long Road", "zip": "12345"}
    return out


_REASONING = ("The user wants to know about this, so I should look it up with the right tool and the "
              "right arguments. I will call the tool once and then answer with what it returns.")
_PREAMBLE = "Sure, let me check that for you. "


def _output(tools: list[dict[str, Any]], index: int) -> tuple[str, str, str, str]:
    """(free part, call opening, arguments JSON, closing) of a Qwen3-style output calling tool `index`."""
    function = tools[index]["function"]
    arguments = json.dumps(_arguments_for(function["parameters"], random.Random(index)))
    free = f"<think>\n{_REASONING}\n</think>\n\n{_PREAMBLE}"
    opening = f'<tool_call>\n{{"name": "{function["name"]}", "arguments": '
    return free, opening, arguments, "}\n</tool_call>"


_WARM_UP_ROUNDS = 4


def _time_steps(make: Callable[[], Any], fill: Callable[[Any], None], consume: Callable[[Any, int], Any],
                tokens: list[int], rounds: int, cold: list[float] | None = None) -> list[list[float]]:
    """µs per mask at each position of `tokens` (one list per position), after warm-up rounds:
    the steady state of a server that has seen the grammar before (tokensieve's walk cache
    fills on a state's second visit in each core instance, one per CPU). The first round's
    times go to `cold`."""
    per: list[list[float]] = [[] for _ in tokens]
    for r in range(rounds + _WARM_UP_ROUNDS):
        m = make()
        for i, t in enumerate(tokens):
            t0 = time.perf_counter()
            fill(m)
            dt = (time.perf_counter() - t0) * 1e6
            if r >= _WARM_UP_ROUNDS:
                per[i].append(dt)
            elif r == 0 and cold is not None:
                cold.append(dt)
            if consume(m, t) is False:
                raise RuntimeError(f"token {i} refused")
    return per


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def run_tools_bench(tokenizer_path: Path, *, tool_count: int, rounds: int, model: str, vs_xgrammar: bool) -> dict[str, Any]:
    import numpy as np

    from tokensieve import Grammar, Matcher, Tokenizer, clear_grammar_cache, tool_call_structural_tag

    tok = Tokenizer.from_file(tokenizer_path)
    tools = make_tools(tool_count)
    spec = tool_call_structural_tag(model=model, tools=tools, tool_choice="auto", reasoning="auto")
    results: dict[str, Any] = {"tokenizer": str(tokenizer_path), "tools": tool_count, "model": model}

    # Per-tokenizer work a server does once, not per request: the special-token table and the
    # token trie in every core instance (matchers spread over the instances).
    from tokensieve._grammar.grammar import _special_token_map

    t0 = time.perf_counter()
    _special_token_map(tok)
    warm = [Matcher(tok, Grammar.regex("x")) for _ in range(8)]
    results["tokenizer_setup_ms"] = (time.perf_counter() - t0) * 1e3
    del warm
    # A process that has compiled some other tools before (imports done, pure helpers cached):
    # "cold" below means tools this process has not seen, not a new process.
    Grammar.tool_calls(model=model, tools=make_tools(4, seed=99), tool_choice="auto", reasoning="auto", tokenizer=tok)
    clear_grammar_cache()
    t0 = time.perf_counter()
    grammar = Grammar.tool_calls(model=model, tools=tools, tool_choice="auto", reasoning="auto", tokenizer=tok)
    results["ours_compile_ms"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    again = Grammar.tool_calls(model=model, tools=tools, tool_choice="auto", reasoning="auto", tokenizer=tok)
    results["ours_cached_ms"] = (time.perf_counter() - t0) * 1e3
    assert again is grammar
    t0 = time.perf_counter()
    Matcher(tok, grammar).fill_bitmask(np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32))
    results["ours_first_mask_ms"] = (time.perf_counter() - t0) * 1e3

    index = tool_count // 2
    parts = [tok.encode(part) for part in _output(tools, index)]
    # Token boundaries as a model would produce them: each part encoded on its own, so the
    # arguments' tokens are the same ones the schema-alone replay uses.
    tokens = [t for part in parts for t in part]
    free = slice(0, len(parts[0]))
    args = slice(len(parts[0]) + len(parts[1]), len(parts[0]) + len(parts[1]) + len(parts[2]))
    words = (tok.vocab_size + 31) // 32
    buf = np.zeros((1, words), dtype=np.int32)
    cold: list[float] = []
    per = _time_steps(lambda: Matcher(tok, grammar), lambda m: m.fill_bitmask(buf), _consume_untimed, tokens, rounds, cold)
    results["cold_steps"] = _summary(cold)
    results["free_steps"] = _summary([_median(p) for p in per[free]])
    results["args_steps"] = _summary([_median(p) for p in per[args]])
    alone = Grammar.json_schema(tools[index]["function"]["parameters"])
    per_alone = _time_steps(lambda: Matcher(tok, alone), lambda m: m.fill_bitmask(buf), _consume_untimed,
                            parts[2], rounds)
    results["schema_alone_steps"] = _summary([_median(p) for p in per_alone])

    results["new_tools"] = _new_tools_requests(tok.encode, model, lambda spec: Grammar.structural_tag(spec, tokenizer=tok),
                                               lambda g: Matcher(tok, g), lambda m: m.fill_bitmask(buf), _consume_untimed)

    if vs_xgrammar:
        results.update(_xgrammar_figures(tokenizer_path, spec, tokens, free, args, rounds, model))
    _print(results)
    return results


_NEW_TOOLS_REQUESTS = 6
_NEW_TOOLS_COUNT = 16


def _new_tools_requests(encode: Callable[[str], list[int]], model: str, compile_spec: Callable[[dict[str, Any]], Any], make: Callable[[Any], Any],
                        fill: Callable[[Any], None], consume: Callable[[Any, int], Any]) -> dict[str, float]:
    """A server whose requests bring their own tools: per request, a grammar for
    `_NEW_TOOLS_COUNT` tools it has not seen and one output calling a tool with string
    arguments (reasoning, text, the call), every step timed on the grammar's first matcher.
    Medians over the requests after the first (which may pay once-per-process work)."""
    from tokensieve import tool_call_structural_tag

    compiles, totals, largest = [], [], []
    for k in range(_NEW_TOOLS_REQUESTS + 1):
        tools = make_tools(_NEW_TOOLS_COUNT, seed=1000 + k)
        spec = tool_call_structural_tag(model=model, tools=tools, tool_choice="auto", reasoning="auto")
        t0 = time.perf_counter()
        grammar = compile_spec(spec)
        compile_ms = (time.perf_counter() - t0) * 1e3
        index = next(i for i, tool in enumerate(tools)
                     if any(p.get("type") == "string" and "enum" not in p and "format" not in p
                            for p in tool["function"]["parameters"]["properties"].values()))
        tokens = [t for part in _output(tools, index) for t in encode(part)]
        m = make(grammar)
        steps = []
        for t in tokens:
            t0 = time.perf_counter()
            fill(m)
            steps.append((time.perf_counter() - t0) * 1e6)
            if consume(m, t) is False:
                raise RuntimeError("a token of the output was refused")
        if k > 0:
            compiles.append(compile_ms)
            totals.append(sum(steps) / 1e3)
            largest.append(max(steps))
    return {"compile_ms": _median(compiles), "masks_ms": _median(totals), "largest_step_us": _median(largest)}


def _xgrammar_figures(tokenizer_path: Path, spec: dict[str, Any], tokens: list[int], free: slice,
                      args: slice, rounds: int, model: str) -> dict[str, Any]:
    try:
        import xgrammar
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        print("xgrammar (and transformers) not installed: `pip install xgrammar==0.2.8` for side-by-side figures")
        return {}
    import gzip
    import tempfile

    raw = tokenizer_path.read_bytes()
    with tempfile.NamedTemporaryFile(suffix=".json") as plain:
        plain.write(gzip.decompress(raw) if tokenizer_path.suffix == ".gz" else raw)
        plain.flush()
        hf = PreTrainedTokenizerFast(tokenizer_file=plain.name)
    info = xgrammar.TokenizerInfo.from_huggingface(hf)
    text = json.dumps(spec)
    compiler = xgrammar.GrammarCompiler(info, cache_enabled=True)
    t0 = time.perf_counter()
    compiled = compiler.compile_structural_tag(text)
    out: dict[str, Any] = {"xgr_compile_ms": (time.perf_counter() - t0) * 1e3}
    t0 = time.perf_counter()
    compiler.compile_structural_tag(text)
    out["xgr_cached_ms"] = (time.perf_counter() - t0) * 1e3
    bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    cold: list[float] = []
    per = _time_steps(lambda: xgrammar.GrammarMatcher(compiled), lambda m: m.fill_next_token_bitmask(bitmask),
                      lambda m, t: m.accept_token(t), tokens, rounds, cold)
    out["xgr_cold_steps"] = _summary(cold)
    out["xgr_free_steps"] = _summary([_median(p) for p in per[free]])
    out["xgr_args_steps"] = _summary([_median(p) for p in per[args]])
    out["xgr_new_tools"] = _new_tools_requests(
        lambda text: hf.encode(text, add_special_tokens=False), model, lambda s: compiler.compile_structural_tag(json.dumps(s)),
        xgrammar.GrammarMatcher, lambda m: m.fill_next_token_bitmask(bitmask), lambda m, t: m.accept_token(t))
    return out


def _print(r: dict[str, Any]) -> None:
    has_xgr = "xgr_compile_ms" in r
    print(f"{r['tools']} tools, {r['model']} format, tokenizer {r['tokenizer']}")
    head = f"{'measure':<34} {'tokensieve':>11}" + (f" {'XGrammar':>10} {'ratio':>7}" if has_xgr else "")
    print(head)
    print("-" * len(head))

    def line(name: str, ours: float, theirs: float | None) -> None:
        text = f"{name:<34} {ours:>11.2f}"
        if theirs is not None:
            text += f" {theirs:>10.2f} {ours / theirs:>7.2f}"
        print(text)

    line("compile, cold (ms)", r["ours_compile_ms"], r.get("xgr_compile_ms"))
    line("compile, same tools again (ms)", r["ours_cached_ms"], r.get("xgr_cached_ms"))
    print(f"{'first mask of a matcher (ms)':<34} {r['ours_first_mask_ms']:>11.2f}")
    print(f"{'tokenizer setup, once (ms)':<34} {r['tokenizer_setup_ms']:>11.2f}")
    for key, name in (("free_steps", "free-text step"), ("args_steps", "argument step")):
        for stat in ("p50", "avg", "max"):
            theirs = r[f"xgr_{key}"][stat] if has_xgr else None
            line(f"{name} {stat} (µs)", r[key][stat], theirs)
    for stat in ("p50", "avg", "max"):
        print(f"{'schema alone step ' + stat + ' (µs)':<34} {r['schema_alone_steps'][stat]:>11.2f}")
    for stat in ("p50", "avg", "max"):
        line(f"first request, any step {stat} (µs)", r["cold_steps"][stat], r["xgr_cold_steps"][stat] if has_xgr else None)
    new, xgr_new = r["new_tools"], r.get("xgr_new_tools")
    print(f"requests bringing {_NEW_TOOLS_COUNT} new tools each (median of {_NEW_TOOLS_REQUESTS}):")
    line("  compile (ms)", new["compile_ms"], xgr_new["compile_ms"] if xgr_new else None)
    line("  masks of its output (ms)", new["masks_ms"], xgr_new["masks_ms"] if xgr_new else None)
    line("  its largest step (µs)", new["largest_step_us"], xgr_new["largest_step_us"] if xgr_new else None)
    print(f"ratio = tokensieve / XGrammar (lower is better for us). Steps: after {_WARM_UP_ROUNDS} warm-up requests, "
          "median over rounds per position, then p50/avg/max over positions; 'first request' = the first matcher's "
          "steps on a freshly compiled grammar.")


def add_tools_bench(sub: Any) -> None:
    p = sub.add_parser("tools", help="tool-call grammars: compile (cold, cached) and mask µs in free text and arguments, beside XGrammar")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--tools", type=int, default=128)
    p.add_argument("--model", default="qwen_3", help="tool-call format (tokensieve.MODEL_FAMILIES)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--vs", choices=["xgrammar", "none"], default="xgrammar")
    p.add_argument("--json", type=Path, help="also write the figures here")

    def run(args: argparse.Namespace) -> int:
        results = run_tools_bench(args.tokenizer or _default_tokenizer(), tool_count=args.tools, rounds=args.rounds,
                                  model=args.model, vs_xgrammar=args.vs == "xgrammar")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0

    p.set_defaults(run=run)
