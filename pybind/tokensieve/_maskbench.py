"""`tokensieve bench maskbench`: MaskBench correctness and mask speed, beside llguidance.

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
that disagrees with `consume_token`, or a schema running past `--schema-timeout` is a failure of
that schema with its reason recorded, never a crash of the run.

With `--vs llguidance` the same token ids go through llguidance in the same process, so every
figure has its llguidance counterpart measured on the same machine at the same time.

The ratchet (`tests/data/maskbench_expected.json`) records each schema's expected result:
`"pass"` or a short failure reason. `tests/test_maskbench_ratchet.py` fails when a schema listed
as `"pass"` stops passing; `--ratchet-update` rewrites the file from a full run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
import sys
import time
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

# In the README's order (the table of counts), so reports list splits the same way.
SPLITS: tuple[str, ...] = (
    "Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K",
    "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore", "MCPspec", "Handwritten",
    "Synthesized", "JME", "BFCL_simple", "BFCL_multiple", "BFCL_parallel", "BFCL_parallel_multiple",
    "BFCL_java", "BFCL_javascript", "BFCL_sql",
)
SCHEMA_COUNT_TOTAL = 11_305
REASON_CHARS_MAX = 120
RATCHET_DEFAULT = Path(__file__).resolve().parents[2] / "tests" / "data" / "maskbench_expected.json"

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
    from ._bench import find_shared

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


# -- engines ---------------------------------------------------------------------------------


class OursEngine:
    """tokensieve on one tokenizer: compile, then replay token ids with a mask before each."""

    name = "tokensieve"

    def __init__(self, tokenizer: Any) -> None:
        import numpy as np

        self.tokenizer = tokenizer
        self.buf = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)

    def run(self, entry: Entry, record: dict[str, Any], tests: list[tuple[bool, list[int]]],
            deadline_s: float) -> SchemaResult:
        from ._errors import CoreTrap, GrammarError, LimitError
        from ._grammar import Grammar
        from ._matcher import Matcher

        res = SchemaResult(entry.id, entry.split, tests=len(tests))
        start = time.perf_counter()
        try:
            t0 = time.perf_counter()
            grammar = Grammar.json_schema(record["schema"])
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
        for k, (valid, ids) in enumerate(tests):
            try:
                m = first.fork()
                accepted = True
                for i, t in enumerate(ids):
                    t0 = time.perf_counter()
                    fill(m, buf)
                    times.append((time.perf_counter() - t0) * 1e6)
                    allowed = (int(buf[0, t >> 5]) >> (t & 31)) & 1
                    consumed = m.consume_token(t)
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


class LlgEngine:
    """llguidance on the same tokenizer and the same token ids."""

    name = "llguidance"

    def __init__(self, tokenizer_json: str) -> None:
        import llguidance
        import llguidance.numpy as llg_np

        self.llg = llguidance
        self.llg_np = llg_np
        self.tokenizer = llguidance.LLTokenizer(tokenizer_json)
        self.buf = llg_np.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    def run(self, entry: Entry, record: dict[str, Any], tests: list[tuple[bool, list[int]]],
            deadline_s: float) -> SchemaResult:
        llg, fill_into = self.llg, self.llg_np.fill_next_token_bitmask
        res = SchemaResult(entry.id, entry.split, tests=len(tests))
        start = time.perf_counter()
        try:
            t0 = time.perf_counter()
            grammar = llg.LLMatcher.grammar_from_json_schema(record["schema"])
            first = llg.LLMatcher(self.tokenizer, grammar, log_level=0)
            compile_us = (time.perf_counter() - t0) * 1e6
        except Exception as err:  # llguidance raises only for API misuse, e.g. a non-dict schema
            res.fail("compile", f"{type(err).__name__}: {err}")
            return res
        if first.is_error():
            res.fail("compile", first.get_error())
            res.wall_s = time.perf_counter() - start
            return res
        res.compile_us = compile_us
        buf, times = self.buf, res.mask_us
        for k, (valid, ids) in enumerate(tests):
            m = first.deep_copy()
            accepted = True
            timed_out = False
            for i, t in enumerate(ids):
                t0 = time.perf_counter()
                fill_into(m, buf, 0)
                times.append((time.perf_counter() - t0) * 1e6)
                if m.is_error():
                    res.fail("limit", f"test {k} token {i}: {m.get_error()}")
                    accepted = False
                    break
                allowed = (int(buf[0, t >> 5]) >> (t & 31)) & 1
                if not allowed or not m.consume_token(t):
                    accepted = False
                    res.rejected(k, valid, i, len(ids))
                    break
                if time.perf_counter() - start > deadline_s:
                    timed_out = True
                    break
            if timed_out:
                res.fail("timeout", f"over {deadline_s:g} s at test {k}")
                break
            if accepted:
                res.ended(k, valid, m.is_accepting())
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

    def update(self, done: int, passed: int, passed_llg: int | None, current: str) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < self.total and now - self.last < (0.25 if self.tty else 30.0):
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        llg = f" llg {passed_llg}" if passed_llg is not None else ""
        line = (f"[{done}/{self.total}] pass {passed}{llg} | {_clock(elapsed)} elapsed, "
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
    llg_engine: LlgEngine | None = None,
    schema_timeout_s: float = 120.0,
    progress: bool = True,
) -> dict[str, list[SchemaResult]]:
    """Run every schema of `entries` through tokensieve (and llguidance when given).

    Args:
        entries: the schemas (see `load_entries`, `pick_sample`).
        tokenizer: a `tokensieve.Tokenizer`; its ids are fed to both engines.
        llg_engine: llguidance on the same tokenizer, or None.
        schema_timeout_s: wall time one engine may spend on one schema (checked between tokens).
        progress: draw the progress line on stderr.

    Returns:
        {"ours": [...], "llg": [...]} results in `entries` order ("llg" empty without llguidance).
    """
    ours = OursEngine(tokenizer)
    out: dict[str, list[SchemaResult]] = {"ours": [], "llg": []}
    bar = Progress(len(entries), enabled=progress)
    passed = passed_llg = 0
    for n, entry in enumerate(entries, 1):
        record = entry.record()
        tests = [(bool(t["valid"]), tokenizer.encode(instance_text(t["data"]))) for t in record.get("tests", [])]
        r = ours.run(entry, record, tests, schema_timeout_s)
        out["ours"].append(r)
        passed += r.passed
        if llg_engine is not None:
            rl = llg_engine.run(entry, record, tests, schema_timeout_s)
            out["llg"].append(rl)
            passed_llg += rl.passed
        bar.update(n, passed, passed_llg if llg_engine is not None else None, entry.id)
    return out


# -- figures ---------------------------------------------------------------------------------


def _percentiles(values: Iterable[float], qs: Sequence[float]) -> list[float]:
    import numpy as np

    arr = np.asarray(values if isinstance(values, (array, list)) else list(values), dtype=np.float64)
    if arr.size == 0:
        return [math.nan] * len(qs)
    return [float(x) for x in np.percentile(arr, [q * 100 for q in qs], method="lower")]


def _mask_figures(results: Sequence[SchemaResult], ids: set[str] | None = None) -> dict[str, float]:
    import numpy as np

    parts = [np.frombuffer(r.mask_us, dtype=np.float64) for r in results
             if len(r.mask_us) and (ids is None or r.id in ids)]
    arr = np.concatenate(parts) if parts else np.zeros(0)
    if arr.size == 0:
        return {"n": 0}
    p50, p90, p99 = _percentiles(arr, (0.5, 0.9, 0.99))  # type: ignore[arg-type]
    return {"n": int(arr.size), "avg": float(arr.mean()), "p50": p50, "p90": p90, "p99": p99,
            "max": float(arr.max()), "over_1ms": int((arr > 1000).sum()), "over_10ms": int((arr > 10_000).sum())}


def _compile_figures(results: Sequence[SchemaResult], ids: set[str] | None = None) -> dict[str, float]:
    values = [r.compile_us for r in results if r.compile_us is not None and (ids is None or r.id in ids)]
    if not values:
        return {"n": 0}
    p50, p90, p99 = _percentiles(values, (0.5, 0.9, 0.99))
    return {"n": len(values), "avg": sum(values) / len(values), "p50": p50, "p90": p90, "p99": p99,
            "max": max(values)}


def _engine_summary(results: Sequence[SchemaResult], common: set[str] | None) -> dict[str, Any]:
    kinds = {k: 0 for k in KINDS}
    for r in results:
        kinds[r.kind] += 1
    compiled = sum(r.compile_us is not None for r in results)
    slowest = sorted(results, key=lambda r: -r.wall_s)[:5]
    return {
        "schemas": len(results),
        "passing": kinds["pass"],
        "compiling": compiled,
        "failures_by_kind": {k: v for k, v in kinds.items() if k != "pass"},
        "validation_errors": sum(r.validation_errors for r in results),
        "invalidation_errors": sum(r.invalidation_errors for r in results),
        "mask_us": _mask_figures(results),
        "compile_us": _compile_figures(results),
        "mask_us_common": _mask_figures(results, common) if common is not None else None,
        "compile_us_common": _compile_figures(results, common) if common is not None else None,
        "wall_s": sum(r.wall_s for r in results),
        "slowest_schemas": [{"id": r.id, "wall_s": round(r.wall_s, 3), "result": r.reason} for r in slowest],
    }


def summarize(out: dict[str, list[SchemaResult]], *, tokenizer_path: str, sample: int | None,
              seed: int, splits: Sequence[str] | None) -> dict[str, Any]:
    """The figures of a run as one JSON-ready dict (no per-mask times)."""
    ours, llg = out["ours"], out["llg"]
    common = None
    if llg:
        common = {a.id for a, b in zip(ours, llg) if a.compile_us is not None and b.compile_us is not None}
    per_split: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(ours):
        row = per_split.setdefault(r.split, {"schemas": 0, "ours_pass": 0, "ours_compile_err": 0,
                                             "ours_validation_err": 0, "ours_invalidation_err": 0,
                                             "llg_pass": 0, "llg_compile_err": 0, "tests": 0})
        row["schemas"] += 1
        row["tests"] += r.tests
        row["ours_pass"] += r.passed
        row["ours_compile_err"] += r.kind == "compile"
        row["ours_validation_err"] += r.validation_errors
        row["ours_invalidation_err"] += r.invalidation_errors
        if llg:
            row["llg_pass"] += llg[i].passed
            row["llg_compile_err"] += llg[i].kind == "compile"
    reasons: dict[str, int] = defaultdict(int)
    for r in ours:
        if not r.passed:
            reasons[_reason_class(r.reason)] += 1
    return {
        "tokenizer": tokenizer_path,
        "sample": sample,
        "seed": seed,
        "splits": list(splits) if splits else "all",
        "ours": _engine_summary(ours, common),
        "llg": _engine_summary(llg, common) if llg else None,
        "common_compiled_schemas": len(common) if common is not None else None,
        "per_split": {s: per_split[s] for s in SPLITS if s in per_split},
        "top_failure_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:25]),
        "schemas": [
            {"id": r.id, "split": r.split, "ours": r.reason, "ours_compile_us": r.compile_us,
             "ours_masks": len(r.mask_us), **({"llg": llg[i].reason, "llg_compile_us": llg[i].compile_us}
                                               if llg else {})}
            for i, r in enumerate(ours)
        ],
    }


def _reason_class(reason: str) -> str:
    """A failure reason without its test/token numbers, for grouping."""
    reason = re.sub(r"test \d+", "test k", reason)
    reason = re.sub(r"token \d+/\d+", "token i/n", reason)
    reason = re.sub(r"token \d+", "token i", reason)
    return re.sub(r"\(at [^)]*\)", "", reason).strip()


def print_report(s: dict[str, Any]) -> None:
    o, lg = s["ours"], s["llg"]
    what = f"sample of {s['sample']} (seed {s['seed']})" if s["sample"] else "all schemas"
    print(f"MaskBench: {o['schemas']} schemas ({what}; splits: "
          f"{s['splits'] if isinstance(s['splits'], str) else ', '.join(s['splits'])}); tokenizer {s['tokenizer']}")
    cols = ["tokensieve"] + (["llguidance"] if lg else [])
    engines = [o] + ([lg] if lg else [])
    print(f"{'':<26}" + "".join(f"{c:>14}" for c in cols))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<26}" + "".join(f"{v:>14}" for v in values))

    n = o["schemas"]
    row("schemas passing", [f"{e['passing']} {e['passing'] / n:.1%}" if n else "0" for e in engines])
    row("schemas compiling", [f"{e['compiling']}" for e in engines])
    for kind in KINDS[1:]:
        if any(e["failures_by_kind"].get(kind) for e in engines):
            row(f"  failing: {kind}", [str(e["failures_by_kind"].get(kind, 0)) for e in engines])
    row("validation errors", [str(e["validation_errors"]) for e in engines])
    row("invalidation errors", [str(e["invalidation_errors"]) for e in engines])
    for key in ("avg", "p50", "p90", "p99", "max"):
        row(f"mask µs {key}", [_fmt(e["mask_us"].get(key)) for e in engines])
    row("masks", [str(e["mask_us"].get("n", 0)) for e in engines])
    row("masks over 1 ms", [str(e["mask_us"].get("over_1ms", 0)) for e in engines])
    for key in ("p50", "p99", "max"):
        row(f"compile µs {key}", [_fmt(e["compile_us"].get(key)) for e in engines])
    row("engine wall s", [f"{e['wall_s']:.1f}" for e in engines])
    if lg:
        print(f"on the {s['common_compiled_schemas']} schemas both compile:")
        for key in ("avg", "p50", "p99", "max"):
            row(f"  mask µs {key}", [_fmt(e["mask_us_common"].get(key)) for e in engines])
        row("  compile µs p50", [_fmt(e["compile_us_common"].get("p50")) for e in engines])
    print()
    head = f"{'split':<24}{'schemas':>8}{'tests':>7}{'pass':>7}{'compile err':>12}{'valid err':>10}{'inval err':>10}"
    if lg:
        head += f"{'llg pass':>10}{'llg cmp err':>12}"
    print(head)
    print("-" * len(head))
    for split, r in s["per_split"].items():
        line = (f"{split:<24}{r['schemas']:>8}{r['tests']:>7}{r['ours_pass']:>7}{r['ours_compile_err']:>12}"
                f"{r['ours_validation_err']:>10}{r['ours_invalidation_err']:>10}")
        if lg:
            line += f"{r['llg_pass']:>10}{r['llg_compile_err']:>12}"
        print(line)
    if s["top_failure_reasons"]:
        print("\ntop failure reasons (tokensieve):")
        for reason, count in list(s["top_failure_reasons"].items())[:12]:
            print(f"{count:>6}  {reason}")
    print("\nslowest schemas (tokensieve, wall s): " + ", ".join(
        f"{x['id']} {x['wall_s']:.2f}" for x in o["slowest_schemas"]))


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def write_plot(out: dict[str, list[SchemaResult]], path: Path) -> bool:
    """A PNG with the mask-µs histogram and CDF of each engine; False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'tokensieve[bench]' (or pip install matplotlib); "
              "skipping the plot", file=sys.stderr)
        return False
    import numpy as np

    fig, (ax_hist, ax_cdf) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = {"ours": "tokensieve", "llg": "llguidance"}
    all_values = [np.frombuffer(r.mask_us, dtype=np.float64) for rs in out.values() for r in rs if len(r.mask_us)]
    if not all_values:
        plt.close(fig)
        return False
    hi = max(float(np.concatenate(all_values).max()), 10.0)
    bins = np.logspace(0, math.log10(hi) + 0.05, 80)
    for key, results in out.items():
        parts = [np.frombuffer(r.mask_us, dtype=np.float64) for r in results if len(r.mask_us)]
        if not parts:
            continue
        arr = np.maximum(np.concatenate(parts), 1.0)
        label = f"{labels[key]} (n={arr.size:,}, p50 {np.median(arr):.0f} µs, p99 {np.percentile(arr, 99):.0f} µs)"
        ax_hist.hist(arr, bins=bins, histtype="step", linewidth=1.5, label=label)
        ordered = np.sort(arr)
        ax_cdf.plot(ordered, np.arange(1, ordered.size + 1) / ordered.size, label=labels[key])
    ax_hist.set(xscale="log", yscale="log", xlabel="µs per mask", ylabel="masks", title="MaskBench: mask time")
    ax_cdf.set(xscale="log", xlabel="µs per mask", ylabel="share of masks", title="CDF", ylim=(0, 1.0))
    ax_cdf.grid(True, which="both", alpha=0.3)
    ax_hist.legend(fontsize=8)
    ax_cdf.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


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


# -- the command -----------------------------------------------------------------------------


def add_maskbench_bench(sub: Any) -> None:
    """Register `tokensieve bench maskbench`."""
    p = sub.add_parser("maskbench", help="MaskBench: JSON Schema correctness and mask µs, llguidance side by side",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, help="the maskbench/ folder of JSON Lines (default: ../shared/data/"
                   "jsonschemabench/maskbench)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json(.gz); default ../shared/tokenizers/llama3")
    p.add_argument("--split", action="append", metavar="SPLIT", help="run only this split (repeatable)")
    p.add_argument("--sample", type=int, metavar="N", help="a deterministic sample of N schemas across the splits")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--vs", choices=["llguidance", "none"], default="none",
                   help="also run llguidance on the same token ids")
    p.add_argument("--schema-timeout", type=float, default=120.0, metavar="S",
                   help="wall seconds one engine may spend on one schema (default 120)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the figures and per-schema results here")
    p.add_argument("--plot", type=Path, metavar="PATH", help="write a PNG of the mask-µs histogram and CDF")
    p.add_argument("--ratchet", type=Path, default=RATCHET_DEFAULT, metavar="PATH",
                   help="the ratchet file (default: tests/data/maskbench_expected.json)")
    p.add_argument("--ratchet-update", action="store_true",
                   help="rewrite the ratchet from this run (needs a run over all schemas, or --force)")
    p.add_argument("--force", action="store_true",
                   help="with --ratchet-update on a sample or split: update only the schemas run")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    from ._bench import _default_tokenizer
    from ._tokenizer import Tokenizer

    data_dir = args.data or find_maskbench_dir()
    if data_dir is None:
        raise SystemExit("MaskBench data not found: pass --data PATH (the jsonschemabench/maskbench folder) "
                         "or set TOKENSIEVE_SHARED")
    partial = bool(args.sample or args.split)
    if args.ratchet_update and partial and not args.force:
        raise SystemExit("--ratchet-update rewrites the expected result of every schema, so it needs a run "
                         "over all schemas (no --sample/--split); add --force to update only the schemas run")
    try:
        entries = load_entries(data_dir, args.split)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(str(err)) from None
    if args.sample:
        entries = pick_sample(entries, args.sample, seed=args.seed)
    tok_path = args.tokenizer or _default_tokenizer()
    tokenizer = Tokenizer.from_file(tok_path)
    llg_engine = None
    if args.vs == "llguidance":
        try:
            raw = Path(tok_path).read_bytes()
            text = gzip.decompress(raw).decode() if str(tok_path).endswith(".gz") else raw.decode()
            llg_engine = LlgEngine(text)
        except ImportError:
            print("llguidance is not installed: `pip install llguidance` for side-by-side figures", file=sys.stderr)
    out = run_maskbench(entries, tokenizer, llg_engine=llg_engine, schema_timeout_s=args.schema_timeout,
                        progress=not args.quiet)
    summary = summarize(out, tokenizer_path=str(tok_path), sample=args.sample, seed=args.seed, splits=args.split)
    print_report(summary)
    if args.ratchet.exists():
        expected = load_ratchet(args.ratchet)
        regressions, improvements = compare_with_ratchet(out["ours"], expected)
        covered = sum(r.id in expected for r in out["ours"])
        print(f"\nratchet {args.ratchet.name}: {covered} of these schemas listed; {len(regressions)} regressed, "
              f"{len(improvements)} improved")
        for r in regressions[:20]:
            print(f"  REGRESSED {r.id}: {r.reason}")
        for r in improvements[:20]:
            print(f"  improved  {r.id} (was: {expected[r.id]})")
        if improvements and not args.ratchet_update:
            print("  run with --ratchet-update (a full run) to record the improvements")
        summary["ratchet"] = {"regressed": [r.id for r in regressions], "improved": [r.id for r in improvements]}
    if args.ratchet_update:
        expected = load_ratchet(args.ratchet) if (partial and args.ratchet.exists()) else {}
        expected.update({r.id: r.reason for r in out["ours"]})
        write_ratchet(args.ratchet, expected)
        print(f"wrote {args.ratchet} ({len(expected)} schemas, "
              f"{sum(v == 'pass' for v in expected.values())} passing)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"wrote {args.json}")
    if args.plot and write_plot(out, args.plot):
        print(f"wrote {args.plot}")
    return 0
