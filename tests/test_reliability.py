"""A core a server can trust: mass frees, stale handles, threads, traps, deadlines, leaks, exit.

Masks are checked against the regex oracle (`oracle.RegexOracle`), never against the matcher's
own earlier output.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from conftest import load_shared_tokenizer
from oracle import RegexOracle
from tokensieve import Grammar, Matcher, TokensieveError


@pytest.fixture(scope="module")
def llama3() -> Any:
    return load_shared_tokenizer("llama3")


def assert_mask_matches_oracle(tokenizer: Any, matcher: Matcher, pattern: str, prefix: bytes = b"") -> None:
    oracle = RegexOracle(pattern)
    bits = np.unpackbits(matcher.compute_bitmask().view(np.uint8), bitorder="little")
    wrong = [
        t
        for t in range(tokenizer.vocab_size)
        if not tokenizer.is_special(t) and bool(bits[t]) != oracle.completable(prefix + tokenizer.token_bytes(t))
    ]
    assert not wrong, f"{len(wrong)} tokens disagree with the oracle, e.g. {[tokenizer.token_bytes(t) for t in wrong[:5]]}"


@pytest.mark.parametrize("variant", ["release", "safe"])
def test_ten_thousand_dropped_forks_leave_new_grammars_correct(llama3, variant, monkeypatch):
    """Freeing thousands of matchers at once once wrote past the core's handle free list and
    corrupted its allocator: the next grammar computed a wrong mask or trapped."""
    monkeypatch.setenv("TOKENSIEVE_WASM_VARIANT", variant)
    first = Matcher(llama3, Grammar.regex("日本語"))
    assert_mask_matches_oracle(llama3, first, "日本語")
    source = Matcher(llama3, Grammar.regex("[a-z]*"))
    forks = [source.fork() for _ in range(10_000)]
    del forks
    gc.collect()
    assert_mask_matches_oracle(llama3, Matcher(llama3, Grammar.regex("日本語")), "日本語")
    assert_mask_matches_oracle(llama3, first, "日本語")


def test_fork_storm_after_a_refused_rollback(llama3):
    matcher = Matcher(llama3, Grammar.regex("[a-z]*"))
    with pytest.raises(TokensieveError, match="roll back"):
        matcher.rollback(5)
    for _ in range(10_000):
        fork = matcher.fork()
        del fork
    assert matcher.consume_tokens(llama3.encode("abc"))
    assert_mask_matches_oracle(llama3, matcher, "[a-z]*", b"abc")
    assert_mask_matches_oracle(llama3, Matcher(llama3, Grammar.regex("日本語")), "日本語")


def _maskbench_cycles(shared_dir, count):
    import json

    from tokensieve._maskbench import load_entries

    entries = []
    for split in ("Github_easy", "Github_medium", "Glaiveai2K", "Kubernetes"):
        entries += load_entries(shared_dir / "data" / "jsonschemabench" / "maskbench", [split])[:count]
    cases = []
    for entry in entries:
        record = entry.record()
        valid = next((t for t in record["tests"] if t["valid"]), None)
        text = json.dumps(valid["data"], separators=(",", ":")) if valid else ""
        cases.append((record["schema"], text))
    return cases


def test_compile_match_drop_cycles_return_their_memory(llama3, shared_dir):
    """Linear memory never shrinks; what matters is that freed memory serves later grammars of
    other sizes. The old allocator kept every freed block in its own size class and grew
    steadily over such cycles while the live bytes stayed flat."""
    from tokensieve._abi import default_core

    cases = _maskbench_cycles(shared_dir, 60)

    def one_pass():
        for schema, text in cases:
            grammar = matcher = None
            try:
                grammar = Grammar.json_schema(schema)
                matcher = Matcher(llama3, grammar)
                for token in llama3.encode(text)[:20]:
                    matcher.compute_bitmask()
                    matcher.consume_token(token)
            except TokensieveError:
                pass
            grammar = matcher = None
        gc.collect()

    core = default_core()
    one_pass()
    live_kib = core.f["ts_debug_live_kib"]()
    linear = core.runtime.memory_size_bytes()
    for _ in range(5):
        one_pass()
    assert core.f["ts_debug_live_kib"]() <= live_kib
    assert core.runtime.memory_size_bytes() == linear
