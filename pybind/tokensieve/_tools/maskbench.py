"""MaskBench conformance: does every schema accept its valid instances and refuse its invalid ones.

MaskBench (Geng et al., arXiv:2501.10868; data in `../shared/data/jsonschemabench`) is 11,305
real-world JSON Schemas, each with valid and invalid instances. For every schema the run:

1. compiles it (`Grammar.json_schema` plus the first `Matcher`, timed as "compile µs"); an
   unsupported schema is a compile error, the schema fails;
2. for every test instance: serializes it compactly (`json.dumps(data, separators=(",", ":"),
   ensure_ascii=False)`), tokenizes it (Llama-3 by default), and for each token computes the mask
   (timed as "mask µs"), checks the token's bit, and consumes it;
3. scores the instance: a valid one must be accepted to the end with the matcher accepting
   (else a *validation error*); an invalid one must be rejected at some token or not be
   accepting at the end (else an *invalidation error*).

A schema *passes* when it compiles and every instance behaves. A `LimitError`, `CoreTrap`, a mask
that disagrees with `consume_token`, or a schema running past the timeout is a failure of that
schema with its reason recorded, never a crash of the run.

The ratchet (`tests/data/maskbench_expected.json`) records each schema's expected result:
`"pass"` or a short failure reason. `tests/test_maskbench_ratchet.py` fails when a schema listed
as `"pass"` stops passing. The benchmark (`bench/maskbench.py`, run as `tokensieve bench
maskbench` from a checkout) times the same run beside llguidance and rewrites the ratchet.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import sys
import time
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

# In the README's order (the table of counts), so reports list splits the same way.
SPLITS: tuple[str, ...] = (
    "Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K",
    "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore", "MCPspec", "Handwritten",
    "Synthesized", "JME", "BFCL_simple", "BFCL_multiple", "BFCL_parallel", "BFCL_parallel_multiple",
    "BFCL_java", "BFCL_javascript", "BFCL_sql",
)
SCHEMA_COUNT_TOTAL = 11_305
REASON_CHARS_MAX = 120

# Failure kinds, in the order the report lists them.
KINDS: tuple[str, ...] = (
    "pass", "compile", "validation", "invalidation", "mismatch", "limit", "trap", "timeout", "internal",
)


@dataclass(frozen=True)
class Entry:
    """One MaskBench schema, not yet parsed (`line` is its JSON Lines record)."""

    id: str
    split: str
    line: str

    def record(self) -> dict[str, Any]:
        return json.loads(self.line)  # type: ignore[no-any-return]


@dataclass
class SchemaResult:
    """One engine's outcome on one schema."""

    id: str
    split: str
    kind: str = "pass"  # one of KINDS
    reason: str = "pass"  # "pass" or a short, deterministic failure reason (the ratchet value)
    compile_us: float | None = None
    tests: int = 0
    validation_errors: int = 0
    invalidation_errors: int = 0
    wall_s: float = 0.0
    mask_us: array = field(default_factory=lambda: array("d"))

    @property
    def passed(self) -> bool:
        return self.kind == "pass"

    def fail(self, kind: str, reason: str) -> None:
        """Record the first failure (later ones only add to the error counts)."""
        if self.kind == "pass":
            self.kind = kind
            self.reason = _short(f"{kind}: {reason}")

    def rejected(self, k: int, valid: bool, i: int, n: int) -> None:
        """Test `k` was refused at token `i` of `n`: an error only for a valid instance."""
        if valid:
            self.validation_errors += 1
            self.fail("validation", f"test {k} rejected at token {i}/{n}")

    def ended(self, k: int, valid: bool, accepting: bool) -> None:
        """Test `k` was consumed to the end; the matcher is `accepting` there or not."""
        if valid and not accepting:
            self.validation_errors += 1
            self.fail("validation", f"test {k} not accepting at the end")
        elif not valid and accepting:
            self.invalidation_errors += 1
            self.fail("invalidation", f"test {k} accepted")


def _short(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= REASON_CHARS_MAX else line[: REASON_CHARS_MAX - 1] + "…"


# -- data ------------------------------------------------------------------------------------

_ID_SPLIT = re.compile(r'^\{"id":"((?:[^"\\]|\\.)*)","split":"((?:[^"\\]|\\.)*)"')


def find_maskbench_dir() -> Path | None:
    """`../shared/data/jsonschemabench/maskbench` (or under `$TOKENSIEVE_SHARED`), if present."""
    shared = find_shared()
    if shared is None:
        return None
    path = shared / "data" / "jsonschemabench" / "maskbench"
    return path if path.is_dir() else None


def load_entries(data_dir: Path, splits: Sequence[str] | None = None) -> list[Entry]:
    """The schemas of `splits` (default: all), in README split order then file order.

    Records are kept as text and parsed only when run, so sampling a few costs little.

    Raises:
        FileNotFoundError: a split's `<split>.jsonl.gz` is missing from `data_dir`.
        ValueError: an unknown split name.
    """
    names = list(splits) if splits else [s for s in SPLITS if (data_dir / f"{s}.jsonl.gz").exists()]
    unknown = [s for s in names if s not in SPLITS]
    if unknown:
        raise ValueError(f"unknown split(s) {unknown}; pass --split with one of: {', '.join(SPLITS)}")
    entries: list[Entry] = []
    for split in names:
        path = data_dir / f"{split}.jsonl.gz"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing; pass --data with the maskbench/ folder")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                m = _ID_SPLIT.match(line)
                if m:
                    entry_id, entry_split = json.loads(f'"{m[1]}"'), json.loads(f'"{m[2]}"')
                else:
                    rec = json.loads(line)
                    entry_id, entry_split = rec["id"], rec["split"]
                entries.append(Entry(entry_id, entry_split, line))
    return entries


def pick_sample(entries: Sequence[Entry], n: int, *, seed: int = 0) -> list[Entry]:
    """A deterministic sample of `n` schemas spread over the splits in proportion to their size.

    Every split gets at least one schema when `n` allows it; within a split the choice is a
    seeded random one, returned in the data's order. The same (data, n, seed) gives the same
    sample on every machine.
    """
    if n >= len(entries):
        return list(entries)
    by_split: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_split[e.split].append(e)
    total = len(entries)
    floor_min = 1 if n >= len(by_split) else 0
    exact = {s: n * len(v) / total for s, v in by_split.items()}
    quota = {s: min(len(by_split[s]), max(floor_min, int(q))) for s, q in exact.items()}
    # Largest remainder first (ties by name) to reach n; then trim the largest quotas if the
    # one-per-split minimum overshot.
    by_remainder = sorted(by_split, key=lambda s: (-(exact[s] - int(exact[s])), s))
    while sum(quota.values()) < n:
        grew = False
        for s in by_remainder:
            if sum(quota.values()) >= n:
                break
            if quota[s] < len(by_split[s]):
                quota[s] += 1
                grew = True
        if not grew:
            break
    while sum(quota.values()) > n:
        largest = max(by_split, key=lambda s: (quota[s], s))
        quota[largest] -= 1
    chosen: set[str] = set()
    for s, v in by_split.items():
        rng = random.Random(f"maskbench:{seed}:{s}")
        chosen.update(e.id for e in rng.sample(v, quota[s]))
    return [e for e in entries if e.id in chosen]


def instance_text(data: Any) -> str:
    """A test instance as MaskBench's token counts assume: compact JSON, non-ASCII kept."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)



def find_shared() -> Path | None:
    """The `shared/` fixtures folder: `$TOKENSIEVE_SHARED`, or `../shared` beside the repo."""
    env = os.environ.get("TOKENSIEVE_SHARED")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [p.parent / "shared" for p in here.parents] + [Path.cwd().parent / "shared"]
    for c in candidates:
        if (c / "tokenizers").is_dir():
            return c
    return None

# -- engines ---------------------------------------------------------------------------------


class OursEngine:
    """tokensieve on one tokenizer: compile, then replay token ids with a mask before each."""

    name = "tokensieve"

    def __init__(self, tokenizer: Any, *, property_order: str = "schema") -> None:
        import numpy as np

        from .._core import default_pool
        from .._decoding.matcher import Matcher
        from .._grammar.grammar import Grammar

        self.tokenizer = tokenizer
        self.property_order = property_order
        self.buf = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
        # Once per process and tokenizer, as llguidance builds its tokenizer in its engine's
        # __init__: the front-end's imports, and the tokenizer's trie in every core instance
        # (matchers alive at once spread over the instances). Without this the first schemas'
        # "compile µs" held ~50 ms of imports and ~110 ms of trie building per instance.
        warm = Grammar.json_schema({"type": "object", "properties": {"a": {"type": "string", "format": "date"}}})
        alive = [Matcher(tokenizer, warm) for _ in range(default_pool().options.instance_count())]
        del alive

    def run(self, entry: Entry, record: dict[str, Any], tests: list[tuple[bool, list[int]]],
            deadline_s: float) -> SchemaResult:
        from .._errors import CoreTrap, GrammarError, LimitError
        from .._grammar.grammar import Grammar
        from .._decoding.matcher import Matcher

        res = SchemaResult(entry.id, entry.split, tests=len(tests))
        start = time.perf_counter()
        try:
            t0 = time.perf_counter()
            grammar = Grammar.json_schema(record["schema"], property_order=self.property_order)
            first = Matcher(self.tokenizer, grammar)
            res.compile_us = (time.perf_counter() - t0) * 1e6
        except GrammarError as err:
            res.fail("compile", str(err).split("\n")[0])
        except LimitError as err:
            res.fail("limit", f"compiling: {err}")
        except CoreTrap as err:
            res.fail("trap", f"compiling: {err}")
        except RecursionError:
            res.fail("internal", "compiling: RecursionError")
        except Exception as err:  # a bug in the front-end must not end the whole run
            res.fail("internal", f"compiling: {type(err).__name__}: {err}")
        if not res.passed:
            res.wall_s = time.perf_counter() - start
            return res
        buf, times = self.buf, res.mask_us
        fill = Matcher.fill_bitmask
        # `consume_tokens`, not `consume_token`: a single token the mask allows would be left
        # pending and consumed by the next fill's call (`Matcher.consume_token`), and the
        # mask µs would then hold the consume's work, which llguidance's do not; and the
        # core's verdict on the token is what the mismatch check compares with the mask.
        consume = Matcher.consume_tokens
        for k, (valid, ids) in enumerate(tests):
            try:
                m = first.fork()
                accepted = True
                for i, t in enumerate(ids):
                    t0 = time.perf_counter()
                    fill(m, buf)
                    times.append((time.perf_counter() - t0) * 1e6)
                    allowed = (int(buf[0, t >> 5]) >> (t & 31)) & 1
                    consumed = consume(m, (t,))
                    if bool(allowed) != consumed:
                        res.fail("mismatch", f"test {k} token {i}: mask allows={bool(allowed)}, consume={consumed}")
                        accepted = False
                        break
                    if not consumed:
                        accepted = False
                        res.rejected(k, valid, i, len(ids))
                        break
                    if time.perf_counter() - start > deadline_s:
                        raise TimeoutError
                if accepted:
                    res.ended(k, valid, m.is_accepting())
            except TimeoutError:
                res.fail("timeout", f"over {deadline_s:g} s at test {k}")
                break
            except LimitError as err:
                res.fail("limit", f"test {k}: {err}")
            except CoreTrap as err:
                res.fail("trap", f"test {k}: {err}")
                break  # the core is poisoned: the grammar is gone with it
            except Exception as err:
                res.fail("internal", f"test {k}: {type(err).__name__}: {err}")
        res.wall_s = time.perf_counter() - start
        return res


# -- the run ---------------------------------------------------------------------------------


class Progress:
    """One `\\r`-updated line on stderr: counts, pass rate, elapsed and ETA (a line every 30 s
    when stderr is not a terminal)."""

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.start = time.perf_counter()
        self.last = 0.0

    def update(self, done: int, passed: dict[str, int], current: str) -> None:
        """`passed`: schemas passed so far by each engine (its key), tokensieve's first."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < self.total and now - self.last < (0.25 if self.tty else 30.0):
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        counts = " ".join(f"{key} {count}" for key, count in passed.items())
        line = (f"[{done}/{self.total}] pass {counts} | {_clock(elapsed)} elapsed, "
                f"ETA {_clock(eta)} | {current[:40]}")
        if self.tty:
            sys.stderr.write("\r" + line.ljust(110)[:110])
            if done >= self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def run_maskbench(
    entries: Sequence[Entry],
    tokenizer: Any,
    *,
    others: Sequence[Any] = (),
    schema_timeout_s: float = 120.0,
    progress: bool = True,
    property_order: str = "schema",
    passes: bool = False,
) -> dict[str, list[SchemaResult]]:
    """Run every schema of `entries` through tokensieve and each engine of `others`.

    Args:
        entries: the schemas (see `load_entries`, `pick_sample`).
        tokenizer: a `tokensieve.Tokenizer`; its ids are fed to every engine.
        others: engines with `OursEngine.run`'s signature and a `key` (the benchmark's
            llguidance and XGrammar), run on the same token ids after tokensieve.
        schema_timeout_s: wall time one engine may spend on one schema (checked between tokens).
        progress: draw the progress line on stderr.
        property_order: passed to `Grammar.json_schema` (`"schema"` or `"any"`).
        passes: each engine runs every schema in a pass of its own, one engine after the
            other (as a server runs one engine), instead of the engines taking turns schema by
            schema (which lets a drift in the machine's load hit them alike, but makes each
            engine start every schema with the other's code and data in the CPU's caches).

    Returns:
        {"ours": [...], key: [...] for each other engine}: results in `entries` order.
    """
    engines = [("ours", OursEngine(tokenizer, property_order=property_order))] + [(e.key, e) for e in others]
    out: dict[str, list[SchemaResult]] = {key: [] for key, _ in engines}
    passed = {key: 0 for key, _ in engines}

    def schemas() -> Iterator[tuple[Entry, dict[str, Any], list[tuple[bool, list[int]]]]]:
        for entry in entries:
            record = entry.record()
            yield entry, record, [(bool(t["valid"]), tokenizer.encode(instance_text(t["data"])))
                                  for t in record.get("tests", [])]

    rounds = [engines[i : i + 1] for i in range(len(engines))] if passes else [engines]
    bar = Progress(len(entries) * len(rounds), enabled=progress)
    done = 0
    for round_engines in rounds:
        for entry, record, tests in schemas():
            for key, engine in round_engines:
                result = engine.run(entry, record, tests, schema_timeout_s)
                out[key].append(result)
                passed[key] += result.passed
            done += 1
            bar.update(done, passed, entry.id)
    return out


# -- the ratchet -----------------------------------------------------------------------------


def load_ratchet(path: Path) -> dict[str, str]:
    """The expected result of each schema: `"pass"` or a short failure reason."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of id -> 'pass' | reason")
    return {str(k): str(v) for k, v in data.items()}


def write_ratchet(path: Path, expected: dict[str, str]) -> None:
    """Write the ratchet sorted by id, one schema per line (small diffs)."""
    lines = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(expected[k], ensure_ascii=False)}"
             for k in sorted(expected)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def compare_with_ratchet(results: Sequence[SchemaResult], expected: dict[str, str]
                         ) -> tuple[list[SchemaResult], list[SchemaResult]]:
    """(regressions, improvements): schemas expected to pass that fail now, and the reverse.

    Schemas missing from `expected` and changed failure reasons are neither.
    """
    regressions = [r for r in results if expected.get(r.id) == "pass" and not r.passed]
    improvements = [r for r in results if r.id in expected and expected[r.id] != "pass" and r.passed]
    return regressions, improvements
