"""Leak check: compile / match / drop MaskBench schemas for many cycles in one
process and watch linear memory, the core's live bytes and the process's RSS.

A server compiles a grammar per request and drops it when the request ends, for weeks. Every
cycle here does what one request does: the JSON Schema front-end builds the IR, the core
compiles it, a matcher fills masks and consumes the canonical tokens of a valid instance (a
fork takes a few steps of its own), then everything is dropped. Schemas rotate over a
deterministic MaskBench sample, failing ones included (error paths must not leak either).

All of it runs in one core instance (the default pool is configured with `instances=1`), so
its figures are the whole story:

- **linear MB**: the instance's linear memory. It never shrinks; it grows only when the
  core's allocator cannot serve a request from freed memory.
- **live KiB**: what the core's allocator has handed out and not got back (`ts_debug_live_kib`),
  less what the instance's pattern cache holds (`ts_debug_pattern_cache_kib`).
- **cache KiB**: the pattern cache (`docs/lexer.md`). It is bounded and empties itself when
  full, so over a rotating set larger than it holds it rises and falls from pass to pass;
  counted apart, it cannot hide a leak or pass for one.
- **RSS MB**: the process's resident set (Python objects, wasmtime's code and tables, the
  touched part of linear memory).

Warm-up is the first pass over the rotating set (the tokenizer's trie, each schema's Python
caches, the high-water mark of the allocator's free lists); after it the three figures must
stay flat. "Flat" is judged from the end of warm-up to the end of the run.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

TOKENS_PER_CYCLE = 32
FORK_STEPS = 4


@dataclass
class LeakSample:
    """The figures after `cycle` cycles."""

    cycle: int
    seconds: float
    linear_mb: float
    live_kib: int
    rss_mb: float
    cache_kib: int = 0


@dataclass
class LeakRun:
    """A leak run's samples and counts."""

    samples: list[LeakSample] = field(default_factory=list)
    warmup_cycles: int = 0
    compiled: int = 0
    grammar_errors: int = 0
    limit_errors: int = 0

    def at_warmup(self) -> LeakSample:
        """The first sample at or after the end of warm-up."""
        for s in self.samples:
            if s.cycle >= self.warmup_cycles:
                return s
        return self.samples[-1]

    def growth(self) -> dict[str, float]:
        """Relative growth of each figure from the end of warm-up to the end (0.05 = 5%)."""
        a, b = self.at_warmup(), self.samples[-1]
        return {
            "linear": (b.linear_mb - a.linear_mb) / a.linear_mb,
            "live": (b.live_kib - a.live_kib) / max(a.live_kib, 1),
            "rss": (b.rss_mb - a.rss_mb) / a.rss_mb,
        }


def rss_mb() -> float:
    """The process's resident set size in MB (Linux /proc; else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


@dataclass
class _Prepared:
    schema: Any
    tokens: list[int]


def _prepare(entry: Any, tokenizer: Any) -> _Prepared:
    from .maskbench import instance_text

    record = entry.record()
    tokens: list[int] = []
    for test in record.get("tests", []):
        if test.get("valid"):
            tokens = tokenizer.encode(instance_text(test["data"]))[:TOKENS_PER_CYCLE]
            break
    return _Prepared(record["schema"], tokens)


def run_cycle(prepared: _Prepared, tokenizer: Any, bitmask: Any, run: LeakRun) -> None:
    """One request: compile, match a valid instance's first tokens (and a fork's), drop."""
    from tokensieve._errors import GrammarError, LimitError
    from tokensieve._grammar.grammar import Grammar
    from tokensieve._decoding.matcher import Matcher

    try:
        grammar = Grammar.json_schema(prepared.schema)
        matcher = Matcher(tokenizer, grammar)
        run.compiled += 1
        fork = None
        for i, token in enumerate(prepared.tokens):
            matcher.fill_bitmask(bitmask)
            if not matcher.consume_token(token):
                break
            if i == 1:
                fork = matcher.fork()
        if fork is not None:
            for token in prepared.tokens[2 : 2 + FORK_STEPS]:
                fork.fill_bitmask(bitmask)
                if not fork.consume_token(token):
                    break
            fork.rollback(fork.token_count // 2)
    except GrammarError:
        run.grammar_errors += 1
    except LimitError:
        run.limit_errors += 1


def run_leak(
    tokenizer: Any,
    entries: Sequence[Any],
    cycles: int,
    *,
    report_every: int = 500,
    warmup_cycles: int | None = None,
    on_sample: Callable[[LeakSample], None] | None = None,
) -> LeakRun:
    """Run `cycles` compile / match / drop cycles over `entries` (rotating) in the default
    pool's first instance and sample the memory figures every `report_every` cycles.

    The caller configures the default pool (one instance, so everything runs where it is
    measured). Warm-up defaults to two passes over `entries`: the instance's pattern cache
    keeps a pattern text on its second sight (`docs/lexer.md`), so it fills during the second.
    """
    import numpy as np

    from tokensieve._core import default_pool

    core = default_pool().first()
    bitmask = np.zeros((1, (tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    run = LeakRun(warmup_cycles=2 * len(entries) if warmup_cycles is None else warmup_cycles)
    prepared: dict[int, _Prepared] = {}
    start = time.perf_counter()

    def sample(cycle: int) -> None:
        live, cache = core.live_kib(), core.pattern_cache_kib()
        s = LeakSample(cycle, time.perf_counter() - start, core.memory_size_bytes() / 1e6, live - cache, rss_mb(), cache)
        run.samples.append(s)
        if on_sample:
            on_sample(s)

    sample(0)
    for cycle in range(cycles):
        index = cycle % len(entries)
        if index not in prepared:
            prepared[index] = _prepare(entries[index], tokenizer)
        run_cycle(prepared[index], tokenizer, bitmask, run)
        done = cycle + 1
        if done % report_every == 0 or done == cycles or done == run.warmup_cycles:
            # Queued frees are drained by the next call into the instance; make one so the
            # figures show what is really live.
            gc.collect()
            core.live_kib()
            core.memory_size_bytes()
            sample(done)
    if core.poisoned:
        raise RuntimeError("the measured core instance was retired during the run; the figures mix two instances")
    return run


def pick_leak_entries(count: int, *, seed: int = 0, data_dir: Path | None = None) -> list[Any]:
    """A deterministic sample of `count` MaskBench schemas spread over every split."""
    from .maskbench import find_maskbench_dir, load_entries, pick_sample

    data_dir = data_dir or find_maskbench_dir()
    if data_dir is None:
        raise SystemExit("MaskBench data not found: pass --data PATH (the jsonschemabench/maskbench folder) "
                         "or set TOKENSIEVE_SHARED")
    return pick_sample(load_entries(data_dir), count, seed=seed)
