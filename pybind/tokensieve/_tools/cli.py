"""The `tokensieve` command: `tokensieve demo`, `tokensieve bench …` and `tokensieve fuzz`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence


def _check(kind: str, text: str, output: str) -> str:
    """An independent verdict on a sample: Python's `re`, `json` and `jsonschema` (if installed)."""
    if kind == "regex":
        return "matches the regex (re.fullmatch)" if re.fullmatch(text, output) else "DOES NOT match the regex"
    if kind == "json_schema":
        try:
            value = json.loads(output)
        except ValueError as err:
            return f"NOT JSON: {err}"
        try:
            import jsonschema
        except ImportError:
            return "parses as JSON (install jsonschema to validate it too)"
        try:
            jsonschema.validate(value, json.loads(text))
        except jsonschema.ValidationError as err:
            return f"INVALID under the schema: {err.message}"
        return "valid JSON under the schema (jsonschema)"
    return "accepted by the grammar"


def _demo(args: argparse.Namespace) -> int:
    from .. import Tokenizer
    from . import demo as demo

    if args.tokenizer:
        demo._tokenizer = Tokenizer.from_file(args.tokenizer)
    examples = {example["key"]: example for example in demo.EXAMPLES}
    if args.regex:
        runs = [("your regex", "regex", args.regex)]
    elif args.schema:
        with open(args.schema, encoding="utf-8") as file:
            runs = [(args.schema, "json_schema", file.read())]
    else:
        keys = args.example or ["meeting", "event"]
        unknown = [key for key in keys if key not in examples]
        if unknown:
            print(f"unknown example {unknown[0]!r}; choose from {', '.join(examples)}", file=sys.stderr)
            return 2
        runs = [(examples[key]["name"], examples[key]["kind"], examples[key]["text"]) for key in keys]
    tok = demo.tokenizer()
    for name, kind, text in runs:
        grammar = demo.compile_grammar(kind, text)
        print(f"== {name} — {args.model} logits (a toy model with no context), [forced] by the grammar")
        for index in range(args.samples):
            result = demo.sample(
                grammar, model=args.model, seed=args.seed + index, temperature=args.temperature, max_tokens=args.max_tokens
            )
            shown = "".join(f"[{s['text']}]" if s["forced"] and s["text"] else s["text"] for s in result["segments"])
            print(f"[{index + 1}] {shown}")
            total = result["model_calls"] + result["forced_tokens"]
            print(
                f"    {_check(kind, text, result['text'])}; {total} tokens, {result['model_calls']} model calls "
                f"({result['forced_tokens']} saved by forcing); {result['mask_us']['p50']:.0f} µs per mask (p50) "
                f"over {tok.vocab_size} tokens; stopped by {result['stop']}"
            )
    return 0


def _bench_commands() -> Callable[[Any], None] | None:
    """The benchmarks' `add_commands`: they live in the checkout's `bench/` folder (beside
    `pybind/`), not in the installed package."""
    try:
        from bench import add_commands  # `python -m bench`, or a checkout on sys.path
    except ImportError:
        root = Path(__file__).resolve().parents[3]
        if not (root / "bench" / "__init__.py").is_file():
            return None
        sys.path.insert(0, str(root))
        from bench import add_commands
    return add_commands  # type: ignore[no-any-return]


def _no_benchmarks(args: argparse.Namespace) -> int:
    print("the benchmarks live in tokensieve's source checkout (bench/); run them from there", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tokensieve` command."""
    parser = argparse.ArgumentParser(prog="tokensieve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="sample constrained text from a toy model (offline, bundled GPT-2 tokenizer)"
    )
    demo.add_argument(
        "--example", action="append", help="meeting, event, arithmetic or answer (repeatable; default: meeting and event)"
    )
    demo.add_argument("--regex", help="your own pattern the text must match")
    demo.add_argument("--schema", help="your own JSON Schema file")
    demo.add_argument("--model", choices=("unigram", "random"), default="unigram", help="the toy model's logits")
    demo.add_argument("--temperature", type=float, default=1.0)
    demo.add_argument("--tokenizer", help="a tokenizer.json (default: the bundled GPT-2 tokenizer)")
    demo.add_argument("--samples", type=int, default=3)
    demo.add_argument("--max-tokens", type=int, default=200)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=_demo)

    from .web import add_web_command

    add_web_command(sub)

    bench = sub.add_parser("bench", help="benchmarks, side by side with llguidance (from a source checkout)")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    commands = _bench_commands()
    if commands is None:
        bench.set_defaults(run=_no_benchmarks)
        bench_sub.required = False
    else:
        commands(bench_sub)

    from .fuzz import add_fuzz_command

    add_fuzz_command(sub)

    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
