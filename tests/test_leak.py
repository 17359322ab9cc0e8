"""No leaks: compile / match / drop cycles of MaskBench schemas keep memory flat (issue 9, item 5).

A shortened `tokensieve bench leak` (which runs 20,000 cycles; figures in docs/runtime.md):
1,500 cycles over a rotating set of 150 MaskBench schemas in one core instance. After warm-up
(two passes over the set: the instance's pattern cache keeps a pattern on its second sight,
docs/lexer.md) the core's live bytes outside that cache must come back to the same figure after each
pass and the linear memory must not grow at all; the process's RSS may move by a few MB
(Python's allocator and wasmtime's code cache), at most 5%.

The oracle is the allocator's own count checked against the instance's size, not the code
under test's idea of what should be freed: a handle lifetime bug (a grammar, matcher or fork
never freed) shows up as live bytes growing pass after pass.
"""

from __future__ import annotations

import pytest
from conftest import load_shared_tokenizer, shared_path

from tokensieve import configure
from tokensieve._tools.leak import pick_leak_entries, run_leak

SCHEMAS = 150
CYCLES = 1_500


@pytest.fixture
def one_instance():
    configure(instances=1)
    yield
    configure()


def test_compile_match_drop_cycles_keep_linear_memory_and_rss_flat(one_instance) -> None:
    entries = pick_leak_entries(SCHEMAS, seed=1, data_dir=shared_path() / "data" / "jsonschemabench" / "maskbench")
    run = run_leak(load_shared_tokenizer("llama3"), entries, CYCLES, report_every=SCHEMAS)
    assert run.compiled > CYCLES // 2, "most cycles should compile (the sample is MaskBench)"
    warm, last = run.at_warmup(), run.samples[-1]
    # Every pass over the set after warm-up ends with the same live bytes: nothing is kept.
    after = [s for s in run.samples if s.cycle >= run.warmup_cycles]
    lives = [s.live_kib for s in after]
    assert max(lives) - min(lives) <= 64, f"live KiB drift after warm-up: {lives}"
    # The pattern cache, counted apart from the live bytes, holds something and keeps its
    # 2 MiB bound (docs/lexer.md).
    caches = [s.cache_kib for s in run.samples]
    assert 0 < max(caches) <= 2048, f"pattern cache KiB: {caches}"
    assert last.linear_mb == warm.linear_mb, (
        f"linear memory grew after warm-up: {warm.linear_mb:.1f} MB at cycle {warm.cycle}, "
        f"{last.linear_mb:.1f} MB at cycle {last.cycle}")
    assert last.rss_mb <= warm.rss_mb * 1.05, (
        f"RSS grew after warm-up: {warm.rss_mb:.1f} MB at cycle {warm.cycle}, {last.rss_mb:.1f} MB at cycle {last.cycle}")
