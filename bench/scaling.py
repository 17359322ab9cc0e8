"""`tokensieve bench scaling`: how compile time grows with a grammar's size, shape by shape.

Every call is bounded by its input (docs/limits.md), but that is only a promise to a server
when the bound is close to linear: work that grows with the square of a schema's `allOf` parts
or of a chain's links ran for minutes at sizes one request can carry. The seventeenth session
found six such paths with this probe (docs/limits.md, the hostile corpus); its shapes are
those families and their neighbours.

Each shape is built at two sizes, n and 8n, and compiled (front-end, core, first matcher and
its first mask) in a fresh process under a time limit; the command prints both times and the
growth exponent log(t₈ₙ / tₙ) / log 8 (1: linear, 2: quadratic). A size may end in a named
limit or a grammar error; that is fine when it comes fast. Flagged: a large size over
`--flag-s` seconds whose exponent is over 1.5, one that ran into the time limit, and a trap at
either size.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

_FLAG_EXPONENT = 1.5


def _words(n: int) -> list[str]:
    r = random.Random(0)
    return [f"w{i}x{r.randrange(10**6)}" for i in range(n)]


def _tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


# name -> (front-end, source of size n)
SHAPES: dict[str, tuple[str, Callable[[int], Any]]] = {
    "lark_nullable_chain_top_down": ("lark", lambda n: "\n".join(
        ['start: a0 "x"'] + [f'a{i}: a{i + 1} | "x" "x"' for i in range(n)] + [f"a{n}: "])),
    "lark_right_recursion_cycle": ("lark", lambda n: "\n".join(
        ["start: a0"] + [f'a{i}: "x" a{(i + 1) % n} | "y"' for i in range(n)])),
    "lark_literal_alternatives": ("lark", lambda n: "start: " + " | ".join(f'"{w}"' for w in _words(n))),
    "lark_regex_terminals": ("lark", lambda n: "\n".join(
        ["start: " + " ".join(f"T{i}" for i in range(n))] + [f"T{i}: /{w}[a-z]*/" for i, w in enumerate(_words(n))])),
    "gbnf_nullable_chain_top_down": ("gbnf", lambda n: 'root ::= a0 "x"\n' + "\n".join(
        f'a{i} ::= a{i + 1} | "x" "x"' for i in range(n)) + f'\na{n} ::= ""'),
    "gbnf_optional_run": ("gbnf", lambda n: "root ::= " + " ".join(f'"{w}"?' for w in _words(n))),
    "gbnf_rule_alternatives": ("gbnf", lambda n: "root ::= " + " | ".join(f"r{i}" for i in range(n)) + "\n" + "\n".join(
        f'r{i} ::= "{w}" [0-9]*' for i, w in enumerate(_words(n)))),
    "regex_optional_run": ("regex", lambda n: "a?" * n),
    "regex_alternatives": ("regex", lambda n: "|".join(_words(n))),
    "choice": ("choice", _words),
    "json_enum": ("json_schema", lambda n: {"enum": _words(n)}),
    "json_properties": ("json_schema", lambda n: {"type": "object", "properties": {w: {"type": "integer"} for w in _words(n)}}),
    "json_one_of_consts": ("json_schema", lambda n: {"oneOf": [{"const": w} for w in _words(n)]}),
    "json_one_of_closed_objects": ("json_schema", lambda n: {"oneOf": [
        {"type": "object", "properties": {w: {"type": "integer"}}, "required": [w], "additionalProperties": False} for w in _words(n)]}),
    "json_any_of_objects": ("json_schema", lambda n: {"anyOf": [
        {"type": "object", "properties": {w: {"const": i}}, "required": [w]} for i, w in enumerate(_words(n))]}),
    "json_all_of_properties": ("json_schema", lambda n: {"allOf": [{"properties": {w: {"type": "integer"}}} for w in _words(n)]}),
    "json_all_of_if_then": ("json_schema", lambda n: {"allOf": [
        {"if": {"properties": {"k": {"const": w}}}, "then": {"required": [w]}} for w in _words(n)]}),
    "json_pattern_properties": ("json_schema", lambda n: {"type": "object", "patternProperties": {
        f"^{w}[0-9]*$": {"type": "integer"} for w in _words(n)}}),
    "json_ref_chain": ("json_schema", lambda n: {"$ref": "#/$defs/d0", "$defs": {
        **{f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "null"}]} for i in range(n)}, f"d{n}": {"type": "integer"}}}),
    "json_not_enum": ("json_schema", lambda n: {"type": "string", "not": {"enum": _words(n)}}),
    "json_prefix_items_objects": ("json_schema", lambda n: {"type": "array", "items": False, "prefixItems": [
        {"type": "object", "properties": {w: {"type": "string"}}, "required": [w]} for w in _words(n)]}),
    "json_property_names_enum": ("json_schema", lambda n: {"type": "object", "propertyNames": {"enum": _words(n)},
                                                           "additionalProperties": {"type": "integer"}}),
    "json_enum_common_prefix": ("json_schema", lambda n: {"enum": ["p" * 200 + w for w in _words(n)]}),
    "json_contains_counted": ("json_schema", lambda n: {"type": "array", "contains": {"const": 1}, "minContains": n,
                                                        "maxContains": n + 5}),
    "json_string_length_pattern": ("json_schema", lambda n: {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$",
                                                             "minLength": n, "maxLength": 2 * n}),
    "structural_tag_json_tags": ("structural_tag", lambda n: {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<"], "tags": [
            {"type": "tag", "begin": f"<{w}>", "content": {"type": "json_schema", "json_schema": {"type": "object"}}, "end": f"</{w}>"}
            for w in _words(n)]}}),
    "lark_json_terminals": ("lark", lambda n: "start: " + " ".join(f"item{i}" for i in range(n)) + "\n" + "\n".join(
        f'item{i}: %json {{"type": "integer", "minimum": {i}}}' for i in range(n))),
    "lark_terminal_priorities": ("lark", lambda n: "start: " + " | ".join(f"T{i}" for i in range(n)) + "\n" + "\n".join(
        f"T{i}.{i % 5}: /{w}[a-z]*/" for i, w in enumerate(_words(n)))),
    "tool_calls_hermes": ("tool_calls", lambda n: [_tool(w) for w in _words(n)]),
}


def compile_once(name: str, n: int) -> dict[str, Any]:
    """Compile shape `name` at size `n` in this process: seconds and the outcome."""
    from tokensieve import Grammar, Matcher, TokensieveError, Tokenizer, configure

    from .basic import _default_tokenizer

    configure(instances=1)  # every matcher in the instance the warm-up made
    tokenizer = Tokenizer.from_file(_default_tokenizer())
    kind, build = SHAPES[name]
    make: dict[str, Callable[[Any], Any]] = {
        "lark": Grammar.lark, "gbnf": Grammar.gbnf, "regex": Grammar.regex, "choice": Grammar.choice,
        "json_schema": Grammar.json_schema, "structural_tag": Grammar.structural_tag,
        "tool_calls": lambda tools: Grammar.tool_calls(model="hermes", tools=tools),
    }
    # The front-end's imports and first-use tables and the core instance, outside the time.
    Matcher(tokenizer, make[kind](build(2))).compute_bitmask()
    source = build(n)
    started = time.perf_counter()
    try:
        Matcher(tokenizer, make[kind](source)).compute_bitmask()
        outcome = "ok"
    except TokensieveError as err:
        outcome = f"{type(err).__name__}: {str(err).splitlines()[0][:60]}"
    return {"seconds": time.perf_counter() - started, "outcome": outcome}


def _measure(name: str, n: int, timeout_s: float) -> dict[str, Any]:
    """`compile_once` in a fresh process (a shape's caches and memory stay out of the next)."""
    code = f"import json; from bench.scaling import compile_once; print(json.dumps(compile_once({name!r}, {n})))"
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "outcome": f"over {timeout_s:g} s"}
    if done.returncode != 0:
        return {"seconds": None, "outcome": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1][:60] if done.stderr.strip() else ''}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_scaling(args: argparse.Namespace) -> int:
    names = args.shape or list(SHAPES)
    unknown = set(names) - set(SHAPES)
    if unknown:
        raise SystemExit(f"unknown shape(s) {sorted(unknown)}; the shapes: {', '.join(SHAPES)}")
    small, large = args.size, 8 * args.size
    rows = []
    print(f"{'shape':<32}{f'n = {small:,} s':>14}{f'n = {large:,} s':>16}{'exponent':>10}  outcome at {large:,}")
    for name in names:
        a = _measure(name, small, args.timeout)
        b = _measure(name, large, args.timeout)
        exponent = None
        if a["seconds"] and b["seconds"]:
            exponent = math.log(max(b["seconds"], 1e-6) / max(a["seconds"], 1e-6)) / math.log(8)
        flagged = (
            b["seconds"] is None or any(r["outcome"].startswith("CoreTrap") for r in (a, b))
            or (b["seconds"] > args.flag_s and exponent is not None and exponent > _FLAG_EXPONENT)
        )
        rows.append({"shape": name, "small": a, "large": b, "exponent": exponent, "flagged": flagged})
        shown = "-" if exponent is None else f"{exponent:.2f}"
        seconds = ["-" if r["seconds"] is None else f"{r['seconds']:.3f}" for r in (a, b)]
        print(f"{name:<32}{seconds[0]:>14}{seconds[1]:>16}{shown:>10}  {b['outcome'][:70]}{'  << FLAGGED' if flagged else ''}",
              flush=True)
    print(f"flagged: {sum(r['flagged'] for r in rows)} of {len(rows)} shapes (over {args.flag_s:g} s at {large:,} with an "
          f"exponent over {_FLAG_EXPONENT}, over the {args.timeout:g} s limit, or a trap)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


def add_scaling_bench(sub: Any) -> None:
    """Register `tokensieve bench scaling`."""
    p = sub.add_parser("scaling", help="compile time at n and 8n per grammar shape: growth exponents, super-linear paths flagged")
    p.add_argument("--size", type=int, default=2_000, help="the small size n (the large one is 8n)")
    p.add_argument("--shape", action="append", metavar="NAME", help="run only this shape (repeatable)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds one compile may take")
    p.add_argument("--flag-s", type=float, default=1.0, help="a large size under this many seconds is never flagged")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.set_defaults(run=run_scaling)
