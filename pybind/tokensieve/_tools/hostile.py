"""The hostile corpus: grammars and inputs built to make the core slow or large, driven the way a
server would and classified.

Each case of `tests/data/hostile/cases.json` (format in `tests/data/README.md`) is compiled and
driven (a text's canonical tokens, or a seeded random walk over the tokens its masks allow),
timing every call into the core. `run_ours` returns what happened (`Outcome`): `ok`,
`refused@i`, `limit:<name>`, `grammar_error`, `trap` or `error`, the compile time, the worst
step and the instance's linear memory. `tests/test_hostile.py` checks the bounds;
`bench/hostile.py` (`tokensieve bench hostile`) prints the same beside llguidance.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

@dataclass
class Outcome:
    """One engine's figures on one case."""

    result: str = "ok"
    compile_ms: float | None = None
    worst_ms: float = 0.0
    worst_what: str = ""
    steps: int = 0
    memory_mb: float | None = None
    fuel_max: int = 0
    tokens: list[int] = field(default_factory=list)

    def step(self, what: str, seconds: float) -> None:
        ms = seconds * 1e3
        if ms > self.worst_ms:
            self.worst_ms, self.worst_what = ms, what


# -- the corpus -------------------------------------------------------------------------------


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The hostile cases of `path` (a JSON list, format in tests/data/README.md)."""
    cases = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(cases, list) or not all(isinstance(c, dict) and "name" in c for c in cases):
        raise ValueError(f"{path}: expected a JSON list of cases with a 'name'")
    for c in cases:
        c["_dir"] = str(path.parent)
    return cases


def choice_words(count: int, seed: int) -> list[str]:
    """`count` distinct pseudo-words, the same on every machine."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < count:
        words["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 11)))] = None
    return list(words)


_VERBS = ("get", "set", "is", "has", "load", "save", "update", "delete", "create", "find", "parse", "build",
          "compute", "render", "handle", "fetch", "init", "reset", "validate", "convert", "read", "write",
          "open", "close", "start", "stop", "send", "recv", "encode", "decode", "map", "filter", "sort",
          "merge", "split", "join", "apply", "emit", "sync", "flush")
_NOUNS = ("user", "account", "order", "item", "config", "session", "token", "file", "path", "name", "value",
          "index", "count", "buffer", "stream", "request", "response", "cache", "node", "tree", "graph",
          "edge", "vertex", "matrix", "vector", "record", "entry", "field", "table", "query", "result",
          "error", "event", "message", "channel", "socket", "thread", "task", "job", "queue", "schema",
          "grammar", "lexer", "parser", "model", "layer", "tensor", "weight", "device", "kernel")
_TAILS = ("", "", "", "s", "_by_id", "_list", "_count", "_async", "_v2", "_internal", "_all", "_default",
          "_if_needed", "_from_json", "_to_string", "_unchecked", "_impl", "_at", "_for_user", "_batch")


def identifier_words(count: int, seed: int = 0) -> list[str]:
    """`count` distinct identifiers, the same on every machine: names a model is asked to pick
    from (function, field and product names). Mixed styles (snake_case, camelCase, PascalCase,
    short codes), lengths from 2 to about 45 bytes, and heavily shared prefixes (`get_user…`),
    which is what makes a trie of them small and a flat alternation of them large."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < count:
        kind = rng.random()
        if kind < 0.05:  # short codes: "x7", "qa", "ab12"
            letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 3)))
            word = letters + (str(rng.randint(0, 99)) if rng.random() < 0.6 else "")
        else:
            parts = [rng.choice(_VERBS), rng.choice(_NOUNS)]
            if rng.random() < 0.35:
                parts.append(rng.choice(_NOUNS))
            tail = rng.choice(_TAILS)
            style = rng.random()
            camel_tail = "".join(p.capitalize() for p in tail.split("_")) if tail != "s" else tail
            if style < 0.5:
                word = "_".join(parts) + tail
            elif style < 0.8:
                word = parts[0] + "".join(p.capitalize() for p in parts[1:]) + camel_tail
            else:
                word = "".join(p.capitalize() for p in parts) + camel_tail
            if rng.random() < 0.1:
                word += str(rng.randint(1, 9))
        if len(word) >= 2:
            words[word] = None
    return list(words)


def grammar_source(case: dict[str, Any]) -> Any:
    """The grammar of a case as its front-end takes it (text, schema or list of options)."""
    if "file" in case:
        return (Path(case["_dir"]) / case["file"]).read_text(encoding="utf-8")
    if "grammar_repeat" in case:
        spec = case["grammar_repeat"]
        if len(spec) == 2:
            return spec[0] * spec[1]
        return spec[0] * spec[1] + spec[2] + spec[3] * spec[4]
    if "grammar_template" in case:
        spec = case["grammar_template"]
        count = spec["count"]
        items = spec["separator"].join(spec["item"].replace("{i}", str(i)).replace("{next}", str(i + 1)) for i in range(count))
        text = spec["text"].replace("{items}", items).replace("{count}", str(count))
        return json.loads(text) if case["kind"] in ("json_schema", "choice") else text
    if "grammar_nested" in case:
        schema: dict[str, Any] = {"type": "integer"}
        for _ in range(case["grammar_nested"]["depth"]):
            schema = {"type": "array", "items": schema}
        return schema
    if "choice_words" in case:
        return choice_words(case["choice_words"]["count"], case["choice_words"]["seed"])
    return case["grammar"]


def drive_text(case: dict[str, Any]) -> str | None:
    """The text whose tokens a case replays, or None for other drives."""
    d = case["drive"]
    if "text" in d:
        return str(d["text"])
    if "text_repeat" in d:
        unit, count = d["text_repeat"]
        return d.get("prefix", "") + unit * count + d.get("suffix", "")
    if "choice_word" in d:
        return str(grammar_source(case)[d["choice_word"]])
    return None


def build_grammar(case: dict[str, Any]) -> Any:
    """A tokensieve `Grammar` for the case (default limits)."""
    from tokensieve._grammar.grammar import Grammar

    source, kind = grammar_source(case), case["kind"]
    if kind == "regex":
        return Grammar.regex(source)
    if kind == "lark":
        return Grammar.lark(source)
    if kind == "gbnf":
        return Grammar.gbnf(source)
    if kind == "json_schema":
        return Grammar.json_schema(source)
    if kind == "choice":
        return Grammar.choice(source)
    raise ValueError(f"case {case['name']}: unknown kind {kind!r}")


# -- the engines ------------------------------------------------------------------------------


def _classify(err: BaseException) -> str:
    from tokensieve._errors import CoreTrap, GrammarError, LimitError

    if isinstance(err, LimitError):
        return f"limit:{err.limit or '?'}"
    if isinstance(err, GrammarError):
        return "grammar_error"
    if isinstance(err, CoreTrap):
        return "trap"
    return f"error:{type(err).__name__}"


def run_ours(case: dict[str, Any], tokenizer: Any, *, steps_max: int | None = None) -> Outcome:
    """Compile and drive a case in a fresh core instance (at most `steps_max` tokens)."""
    import numpy as np

    from tokensieve._core import configure, default_pool
    from tokensieve._errors import TokensieveError
    from tokensieve._decoding.matcher import Matcher, mask_token_ids

    out = Outcome()
    configure(instances=1)  # a fresh default pool: its one instance holds only this case
    pool = default_pool()
    _warm_tokenizer(tokenizer)
    t0 = time.perf_counter()
    try:
        grammar = build_grammar(case)
        m = Matcher(tokenizer, grammar)
    except TokensieveError as err:
        out.result = _classify(err)
        return out
    finally:
        out.compile_ms = (time.perf_counter() - t0) * 1e3
    buf = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    d = case["drive"]
    try:
        if "heal_bytes" in d:
            data = b"a" * int(d["heal_bytes"])
            t0 = time.perf_counter()
            try:
                m.heal_position(data, 0)
            finally:
                out.step("heal", time.perf_counter() - t0)
            return out
        text = drive_text(case)
        planned = tokenizer.encode(text) if text is not None else None
        rng = random.Random(d.get("seed", 0))
        count = len(planned) if planned is not None else int(d["random"])
        count = min(count, steps_max) if steps_max is not None else count
        for i in range(count):
            _timed(out, "ff", m.compute_ff_bytes)
            out.fuel_max = max(out.fuel_max, m.last_fuel())
            _timed(out, "mask", lambda: m.fill_bitmask(buf))
            out.fuel_max = max(out.fuel_max, m.last_fuel())
            if planned is not None:
                token = planned[i]
            else:
                allowed = [t for t in mask_token_ids(buf[0], tokenizer.vocab_size) if t not in tokenizer.eos_token_ids]
                if not allowed:
                    break
                token = rng.choice(allowed)
            accepted = _timed(out, "consume", lambda: m.consume_token(token))
            out.fuel_max = max(out.fuel_max, m.last_fuel())
            out.steps += 1
            if not accepted:
                out.result = f"refused@{i}"
                break
            out.tokens.append(token)
    except TokensieveError as err:
        out.result = _classify(err)
    finally:
        out.memory_mb = max(c.memory_size_bytes() for c in pool.cores()) / 2**20
    return out


def _warm_tokenizer(tokenizer: Any) -> None:
    """Load the tokenizer into the default pool's instance, so compile times leave it out."""
    from tokensieve._grammar.grammar import Grammar
    from tokensieve._decoding.matcher import Matcher

    Matcher(tokenizer, Grammar.regex("a"))


def _timed(out: Outcome, what: str, call: Any) -> Any:
    """`call()`, its time counted as a step even when it raises (a limit ends the slowest call)."""
    t0 = time.perf_counter()
    try:
        return call()
    finally:
        out.step(what, time.perf_counter() - t0)
