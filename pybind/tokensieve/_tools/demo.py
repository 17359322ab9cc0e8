"""The demo's grammars, toy model and inspection, shared by `tokensieve demo` and the web page.

The web page (`web-demo/`) runs this module inside Pyodide in a Web Worker and calls
`handle(method, json_args)`; `tokensieve demo` calls the same functions under wasmtime. So the
figures the page shows (allowed-token counts, forced bytes, masks, µs per mask) are exactly
what a Python user of the package gets: the core is the same module either way.

The toy model has no context: its logits are a fixed *unigram prior* over the GPT-2
vocabulary, `-log(rank)`, where the rank of a merged token is its BPE merge order (GPT-2's ids
above 255 are in merge order, so low ids are frequent pieces such as " the") and the 256
single-byte tokens rank as if rare. Or, with `model="random"`, fresh i.i.d. logits at every
step, which makes every allowed token equally likely. Either way it is a stand-in that shows
the grammar doing the work, not a language model.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import math
import random
import re
import time
from typing import Any, Sequence

from .._errors import GrammarError, TokensieveError
from .._grammar.grammar import Grammar
from .._decoding.matcher import Matcher, mask_token_ids
from .._tokenizer.tokenizer import Tokenizer

__all__ = [
    "EXAMPLES", "compile_grammar", "error_place", "sample", "inspect", "masks_along", "bench", "bench_cases", "handle",
]

_DAY_MONTH = (
    r"(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8])"
)
#: Valid calendar dates (no 29 February, so no leap-year arithmetic), 24-hour times.
MEETING_REGEX = (
    r"(Alice|Bob|Carol) (meets|calls|visits) (Dave|Erin|Frank) on "
    rf"202[5-9]-({_DAY_MONTH}) at ([01][0-9]|2[0-3]):(00|15|30|45)\."
)

EVENT_SCHEMA: dict[str, Any] = {
    "title": "Event extracted from an e-mail",
    "type": "object",
    "properties": {
        "title": {"type": "string", "pattern": "^[A-Z][a-z]{2,12}( [a-z]{2,12}){0,4}$"},
        "date": {"type": "string", "pattern": f"^202[5-9]-({_DAY_MONTH})$"},
        "start": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "duration_minutes": {"type": "integer", "minimum": 15, "maximum": 480},
        "attendees": {
            "type": "array",
            "items": {"type": "string", "enum": ["Alice", "Bob", "Carol", "Dave"]},
            "minItems": 1,
            "maxItems": 4,
            "uniqueItems": True,
        },
        "online": {"type": "boolean"},
    },
    "required": ["title", "date", "start", "duration_minutes", "attendees", "online"],
    "additionalProperties": False,
}

_ARITH_LARK = r"""// Arithmetic over integers: precedence is in the rules.
start: sum
sum: product (("+" | "-") product)*
product: atom (("*" | "/") atom)*
atom: NUMBER | "(" sum ")"
NUMBER: /-?(0|[1-9][0-9]{0,3})/
%ignore " "
"""

_ANSWER_GBNF = r"""# A yes/no answer with a short reason and a confidence.
root   ::= answer ", because " reason ". Confidence: " pct "%"
answer ::= "Yes" | "No"
reason ::= word (" " word){2,8}
word   ::= [a-z]{2,10}
pct    ::= [1-9] [0-9]? | "100"
"""

#: The page's examples (and `tokensieve demo --example KEY`): key, name, kind, grammar text, an
#: input that the grammar accepts.
EXAMPLES: list[dict[str, str]] = [
    {
        "key": "event",
        "name": "Event extraction (JSON Schema)",
        "kind": "json_schema",
        "text": json.dumps(EVENT_SCHEMA, indent=2),
        "input": '{"title": "Quarterly review", "date": "2026-02-28", "start": "09:30", '
        '"duration_minutes": 90, "attendees": ["Alice", "Dave"], "online": true}',
    },
    {
        "key": "meeting",
        "name": "Meeting sentence (regex: real dates and times)",
        "kind": "regex",
        "text": MEETING_REGEX,
        "input": "Carol meets Erin on 2026-11-30 at 14:45.",
    },
    {
        "key": "arithmetic",
        "name": "Arithmetic (Lark)",
        "kind": "lark",
        "text": _ARITH_LARK,
        "input": "12 * (3 + 4) - -5 / 2",
    },
    {
        "key": "answer",
        "name": "Yes/no with a reason (GBNF)",
        "kind": "gbnf",
        "text": _ANSWER_GBNF,
        "input": "Yes, because the sky is blue. Confidence: 87%",
    },
]

#: Between JSON tokens: at most one space (readable samples from the toy model; a pretty-printed
#: input with newlines is refused where its first newline is).
JSON_WHITESPACE = r" ?"

KINDS = ("json_schema", "regex", "lark", "gbnf")

_tokenizer: Tokenizer | None = None


def tokenizer() -> Tokenizer:
    """The bundled GPT-2 tokenizer (loaded once)."""
    global _tokenizer
    if _tokenizer is None:
        _tokenizer = Tokenizer.default()
    return _tokenizer


def error_place(err: Exception, text: str) -> dict[str, Any]:
    """Where in `text` a grammar error is: `{"message", "line", "column", "pointer"}` (1-based;
    None when unknown)."""
    line = getattr(err, "line", None)
    column = getattr(err, "column", None)
    position = getattr(err, "position", None)
    pointer = getattr(err, "json_pointer", None)
    if isinstance(err, json.JSONDecodeError):
        line, column = err.lineno, err.colno
    elif line is None and pointer is not None:
        position = json_pointer_offset(text, pointer)
    if line is None and position is not None and 0 <= position <= len(text):
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
    return {
        "message": str(err),
        "line": line,
        "column": column,
        "pointer": getattr(err, "json_pointer", None),
    }


class _Found(Exception):
    def __init__(self, offset: int) -> None:
        self.offset = offset


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def json_pointer_offset(text: str, pointer: str) -> int | None:
    """The character offset in the JSON `text` of the value `pointer` names (RFC 6901), or of
    its nearest existing ancestor; None when `text` is not JSON.

    Lets a JSON Schema error that names a place by pointer also name a line and column.
    """
    decoder = json.JSONDecoder()
    targets = [pointer]
    while "/" in targets[-1]:
        targets.append(targets[-1].rsplit("/", 1)[0])

    def skip(i: int) -> int:
        match = _JSON_SPACE.match(text, i)
        assert match is not None
        return match.end()

    def walk(i: int, path: str, target: str) -> int:
        i = skip(i)
        if path == target:
            raise _Found(i)
        opener = text[i]
        if opener not in "{[":
            return int(decoder.raw_decode(text, i)[1])
        closer = "}" if opener == "{" else "]"
        i = skip(i + 1)
        index = 0
        while text[i] != closer:
            if opener == "{":
                key, i = json.decoder.scanstring(text, i + 1)
                i = skip(i) + 1  # the colon
                child = path + "/" + key.replace("~", "~0").replace("/", "~1")
            else:
                child = f"{path}/{index}"
            i = skip(walk(i, child, target))
            index += 1
            if text[i] == ",":
                i = skip(i + 1)
        return i + 1

    for target in targets:
        try:
            walk(0, "", target)
        except _Found as found:
            return found.offset
        except (ValueError, IndexError):
            return None
    return None


def compile_grammar(kind: str, text: str) -> Grammar:
    """Translate and compile `text` as a grammar of `kind` (one of `KINDS`).

    Raises:
        GrammarError: with line and column where known (JSON syntax errors included).
        json.JSONDecodeError: the schema is not JSON.
        ValueError: unknown kind.
    """
    if kind == "json_schema":
        schema = json.loads(text)
        grammar = Grammar.json_schema(schema, whitespace=JSON_WHITESPACE)
    elif kind == "regex":
        grammar = Grammar.regex(text)
    elif kind == "lark":
        grammar = Grammar.lark(text)
    elif kind == "gbnf":
        grammar = Grammar.gbnf(text)
    else:
        raise ValueError(f"grammar kind must be one of {', '.join(KINDS)}, not {kind!r}")
    Matcher(tokenizer(), grammar)  # compiles in the core: pattern errors surface here
    return grammar


class ToyModel:
    """Logits with no context: a unigram prior (`"unigram"`) or i.i.d. noise (`"random"`).

    Sampling works on the mask without listing the allowed tokens (a JSON string allows tens of
    thousands): i.i.d. noise logits make every allowed token equally likely, so `"random"` picks
    the k-th set bit for a uniform k; `"unigram"` draws from the whole prior (cumulative
    weights, bisection) until the draw is allowed — exactly the prior restricted to the mask —
    and lists the allowed tokens only when 64 draws in a row miss.
    """

    DRAWS_MAX = 64

    def __init__(self, tok: Tokenizer, kind: str, seed: int) -> None:
        if kind not in ("unigram", "random"):
            raise ValueError(f'model must be "unigram" or "random", not {kind!r}')
        self.kind = kind
        self.rng = random.Random(seed)
        self.vocab_size = tok.vocab_size
        if kind == "unigram":
            # Merged tokens by merge order; single bytes as if rank 20000.
            self.prior = [-math.log(20000.0 if t < 256 else t - 255.0) for t in range(tok.vocab_size)]
            self._cumulative: dict[float, list[float]] = {}

    def pick(self, mask: Any, temperature: float) -> int | None:
        """Sample an allowed token of `mask` (int32 words), or None when none is allowed."""
        if self.kind == "random":
            counts = [(int(word) & 0xFFFFFFFF).bit_count() for word in mask]
            total = sum(counts)
            return _kth_set_bit(mask, counts, self.rng.randrange(total)) if total else None
        if temperature > 0.0:
            cumulative = self._cumulative_for(temperature)
            for _ in range(self.DRAWS_MAX):
                token = bisect.bisect_right(cumulative, self.rng.random() * cumulative[-1])
                token = min(token, self.vocab_size - 1)
                if (int(mask[token >> 5]) >> (token & 31)) & 1:
                    return token
        allowed = mask_token_ids(mask, self.vocab_size)
        if not allowed:
            return None
        if temperature <= 0.0:
            return max(allowed, key=lambda t: (self.prior[t], -t))
        top = max(self.prior[t] for t in allowed)
        weights = [math.exp((self.prior[t] - top) / temperature) for t in allowed]
        return self.rng.choices(allowed, weights=weights)[0]

    def _cumulative_for(self, temperature: float) -> list[float]:
        cumulative = self._cumulative.get(temperature)
        if cumulative is None:
            top = max(self.prior)
            weights = (math.exp((p - top) / temperature) for p in self.prior)
            cumulative = self._cumulative[temperature] = list(itertools.accumulate(weights))
        return cumulative


def _kth_set_bit(mask: Any, counts: Sequence[int], k: int) -> int:
    """The token of the k-th (0-based) set bit of `mask`, given each word's popcount."""
    for index, count in enumerate(counts):
        if k < count:
            bits = int(mask[index]) & 0xFFFFFFFF
            for _ in range(k):
                bits &= bits - 1
            return index * 32 + ((bits & -bits).bit_length() - 1)
        k -= count
    raise ValueError("k is not below the mask's popcount")


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0, "p50": 0.0, "avg": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": ordered[len(ordered) // 2],
        "avg": sum(ordered) / len(ordered),
        "max": ordered[-1],
    }


def sample(
    grammar: Grammar,
    *,
    model: str = "unigram",
    seed: int = 0,
    temperature: float = 1.0,
    max_tokens: int = 120,
) -> dict[str, Any]:
    """Generate constrained text with the toy model, fast-forwarding forced tokens.

    Returns:
        `segments` (runs of `{"text", "forced"}`), `tokens` (ids, EOS included), `text`,
        `model_calls`, `forced_tokens` (= model calls saved), `stop` ("eos", "max_tokens",
        "no_allowed_token"), `mask_us` (p50, avg, max over the masks computed).
    """
    tok = tokenizer()
    toy = ToyModel(tok, model, seed)
    matcher = Matcher(tok, grammar)
    eos = tok.eos_token_ids
    tokens: list[int] = []
    segments: list[dict[str, Any]] = []
    mask_us: list[float] = []
    model_calls = forced_count = 0
    stop = "max_tokens"

    def emit(ids: list[int], forced: bool) -> None:
        tokens.extend(ids)
        text = tok.decode([t for t in ids if t not in eos]).decode("utf-8", "replace")
        if segments and segments[-1]["forced"] == forced:
            segments[-1]["text"] += text
            segments[-1]["ids"] += ids
        else:
            segments.append({"text": text, "forced": forced, "ids": list(ids)})

    while len(tokens) < max_tokens:
        if matcher.is_stopped():
            if eos and matcher.consume_token(eos[0]):
                emit([eos[0]], True)
                forced_count += 1
            stop = "eos"
            break
        forced = matcher.compute_ff_tokens(context_tokens=tokens[-5:])[: max_tokens - len(tokens)]
        if forced:
            if not matcher.consume_tokens(forced):
                raise TokensieveError(f"internal: the grammar refused its forced tokens {forced!r}")
            emit(forced, True)
            forced_count += len(forced)
            continue
        start = time.perf_counter()
        mask = matcher.compute_bitmask()
        mask_us.append((time.perf_counter() - start) * 1e6)
        token = toy.pick(mask, temperature)
        if token is None:
            stop = "no_allowed_token"
            break
        model_calls += 1
        if not matcher.consume_token(token):
            raise TokensieveError(f"internal: the grammar refused token {token} its own mask allowed")
        emit([token], False)
        if token in eos:
            stop = "eos"
            break
    text = tok.decode([t for t in tokens if t not in eos]).decode("utf-8", "replace")
    return {
        "segments": segments,
        "tokens": tokens,
        "text": text,
        "model": model,
        "model_calls": model_calls,
        "forced_tokens": forced_count,
        "stop": stop,
        "mask_us": _percentiles(mask_us),
    }


def _token_text(tok: Tokenizer, token: int) -> str:
    if token in tok.eos_token_ids:
        return "<EOS>"
    return tok.token_bytes(token).decode("utf-8", "backslashreplace")


def inspect(grammar: Grammar, text: str, *, sample_size: int = 12) -> dict[str, Any]:
    """Step through `text`'s tokens: at each position the mask, its size, a sample of allowed
    tokens, the forced bytes and the µs the mask took; then whether the token is accepted.

    Returns:
        `positions`: one row per token boundary (`offset` in characters, `token`, `token_text`,
        `accepted` — None after the last token —, `allowed`, `sample`, `forced`, `mask_us`,
        `accepting`), and `complete` (the whole text is accepted and may end there).
    """
    tok = tokenizer()
    matcher = Matcher(tok, grammar)
    ids = tok.encode(text)
    rows: list[dict[str, Any]] = []
    offset = 0
    prior_rank = lambda t: (t < 256, t)  # noqa: E731 - frequent merged pieces first
    for index in range(len(ids) + 1):
        start = time.perf_counter()
        mask = matcher.compute_bitmask()
        us = (time.perf_counter() - start) * 1e6
        allowed = mask_token_ids(mask, tok.vocab_size)
        shown = sorted(allowed, key=prior_rank)[:sample_size]
        row: dict[str, Any] = {
            "offset": offset,
            "allowed": len(allowed),
            "sample": [_token_text(tok, t) for t in shown],
            "forced": matcher.compute_ff_bytes().decode("utf-8", "backslashreplace"),
            "mask_us": us,
            "accepting": matcher.is_accepting(),
            "token": None,
            "token_text": None,
            "accepted": None,
        }
        rows.append(row)
        if index == len(ids):
            break
        token = ids[index]
        row["token"] = token
        row["token_text"] = _token_text(tok, token)
        row["accepted"] = matcher.consume_token(token)
        if not row["accepted"]:
            break
        offset += len(tok.token_bytes(token).decode("utf-8", "replace"))
    complete = len(rows) == len(ids) + 1 and rows[-1]["accepting"]
    return {"positions": rows, "tokens": ids, "complete": complete}


def masks_along(grammar: Grammar, tokens: Sequence[int]) -> list[str]:
    """The mask before each token and after the last (stopping after a refused token), each
    as base64 of its little-endian int32 words: what tests compare across hosts."""
    matcher = Matcher(tokenizer(), grammar)
    out = [base64.b64encode(matcher.compute_bitmask().tobytes()).decode()]
    for token in tokens:
        if not matcher.consume_token(token):
            break
        out.append(base64.b64encode(matcher.compute_bitmask().tobytes()).decode())
    return out


def bench(grammar: Grammar, text: str, *, rounds: int = 5) -> dict[str, Any]:
    """Mask µs along the tokens of `text` (a valid instance), `rounds` times: p50, avg, max.

    Each round creates a matcher and, at every position, times `compute_bitmask` (what a
    Python user calls), then consumes the token.
    """
    tok = tokenizer()
    ids = tok.encode(text)
    times: list[float] = []
    compile_ms: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        matcher = Matcher(tok, grammar)
        compile_ms.append((time.perf_counter() - start) * 1e3)
        for token in ids:
            start = time.perf_counter()
            matcher.compute_bitmask()
            times.append((time.perf_counter() - start) * 1e6)
            if not matcher.consume_token(token):
                raise TokensieveError(f"bench: the grammar refuses the instance at token {token}")
    return {"mask_us": _percentiles(times), "matcher_new_ms": _percentiles(compile_ms), "tokens": len(ids)}


def bench_cases(
    cases: Sequence[dict[str, Any]], *, tokenizer_path: str | None = None, raw: bool = False
) -> dict[str, Any]:
    """Compile each case's grammar and time `compute_bitmask` at every token of its inputs.

    The same function runs under wasmtime and in the browser (`tokensieve bench web`), so both
    hosts do exactly the same work: per case, `compile_ms` is the grammar's front-end plus its
    first matcher (the trie is built beforehand and not counted), then for every input the mask
    before each token is computed (timed) and the token consumed.

    Args:
        cases: `{"kind", "text", "inputs": [str, …]}` (kinds as `compile_grammar` takes).
        tokenizer_path: a tokenizer file (default: the bundled GPT-2 tokenizer).
        raw: also return every time (`mask_us_all`, `compile_ms_all`), in order.

    Returns:
        `mask_us` and `compile_ms` summaries (p50, avg, max, count), `per_case` (compile ms,
        mask µs list length, error), `failed` (cases that did not compile or refused an input).
    """
    tok = _tokenizers.get(tokenizer_path or "")
    if tok is None:
        tok = _tokenizers[tokenizer_path or ""] = Tokenizer.from_file(tokenizer_path) if tokenizer_path else tokenizer()
    Matcher(tok, Grammar.regex("x"))  # builds the trie in the core before anything is timed
    mask_us: list[float] = []
    compile_ms: list[float] = []
    per_case: list[dict[str, Any]] = []
    for case in cases:
        row: dict[str, Any] = {"error": None, "masks": 0}
        per_case.append(row)
        try:
            start = time.perf_counter()
            grammar = _translate(case["kind"], case["text"])
            first = Matcher(tok, grammar)
            row["compile_ms"] = (time.perf_counter() - start) * 1e3
        except (TokensieveError, ValueError, RecursionError) as err:
            row["error"] = f"compile: {str(err)[:100]}"
            continue
        compile_ms.append(row["compile_ms"])
        for text in case["inputs"]:
            matcher = first.fork()
            for token in tok.encode(text):
                start = time.perf_counter()
                matcher.compute_bitmask()
                mask_us.append((time.perf_counter() - start) * 1e6)
                row["masks"] += 1
                if not matcher.consume_token(token):
                    row["error"] = "an input was refused"
                    break
    result = {
        "mask_us": _percentiles(mask_us),
        "compile_ms": _percentiles(compile_ms),
        "per_case": per_case,
        "failed": sum(1 for row in per_case if row["error"]),
        "vocab_size": tok.vocab_size,
    }
    if raw:
        result.update(mask_us_all=mask_us, compile_ms_all=compile_ms)
    return result


_tokenizers: dict[str, Tokenizer] = {}


def _translate(kind: str, text: str) -> Grammar:
    if kind == "json_schema":
        return Grammar.json_schema(json.loads(text))
    return compile_grammar(kind, text)


# -- the page's entry point ---------------------------------------------------------------------

_grammars: dict[tuple[str, str], Grammar] = {}


def _grammar(args: dict[str, Any]) -> Grammar:
    key = (str(args["kind"]), str(args["text"]))
    grammar = _grammars.get(key)
    if grammar is None:
        grammar = compile_grammar(*key)
        _grammars.clear()  # the page works on one grammar at a time
        _grammars[key] = grammar
    return grammar


def handle(method: str, args_json: str) -> str:
    """Run one request of the page: `method` with JSON arguments; returns JSON.

    The answer is `{"ok": true, "result": …}` or, for a bad grammar,
    `{"ok": false, "error": {"message", "line", "column", "pointer"}}`.
    """
    args = json.loads(args_json)
    try:
        if method == "examples":
            result: Any = {"examples": EXAMPLES, "vocab_size": tokenizer().vocab_size}
        elif method == "compile":
            start = time.perf_counter()
            _grammars.clear()
            _grammar(args)
            result = {"compile_ms": (time.perf_counter() - start) * 1e3}
        elif method == "inspect":
            result = inspect(_grammar(args), str(args["input"]))
        elif method == "sample":
            result = sample(
                _grammar(args),
                model=str(args.get("model", "unigram")),
                seed=int(args.get("seed", 0)),
                temperature=float(args.get("temperature", 1.0)),
                max_tokens=int(args.get("max_tokens", 120)),
            )
        elif method == "masks":
            result = masks_along(_grammar(args), [int(t) for t in args["tokens"]])
        elif method == "bench_cases":
            result = bench_cases(
                args["cases"], tokenizer_path=args.get("tokenizer_path"), raw=bool(args.get("raw"))
            )
        elif method == "bench":
            result = bench(_grammar(args), str(args["input"]), rounds=int(args.get("rounds", 5)))
        else:
            raise ValueError(f"unknown method {method!r}")
    except (GrammarError, json.JSONDecodeError) as err:
        return json.dumps({"ok": False, "error": error_place(err, str(args.get("text", "")))})
    return json.dumps({"ok": True, "result": result})
