"""A core a server can trust: mass frees, stale handles, threads, traps, deadlines, leaks, exit.

Masks are checked against the regex oracle (`oracle.RegexOracle`), never against the matcher's
own earlier output.
"""

from __future__ import annotations

import gc
import os
from typing import Any, Callable

import numpy as np
import pytest

from conftest import load_shared_tokenizer
from oracle import RegexOracle
from tokensieve import CoreOptions, CorePool, Grammar, Matcher, TokensieveError


@pytest.fixture(scope="module")
def llama3() -> Any:
    return load_shared_tokenizer("llama3")


def assert_mask_matches_oracle(tokenizer: Any, matcher: Matcher, pattern: str, prefix: bytes = b"") -> None:
    assert_row_matches_oracle(tokenizer, matcher.compute_bitmask(), pattern, prefix)


def assert_row_matches_oracle(tokenizer: Any, row: Any, pattern: str, prefix: bytes = b"") -> None:
    oracle = RegexOracle(pattern)
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
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

    from tokensieve._tools.maskbench import load_entries

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
    cases = _maskbench_cycles(shared_dir, 60)

    pool = CorePool(CoreOptions(instances=1))

    def one_pass():
        for schema, text in cases:
            grammar = matcher = None
            try:
                grammar = Grammar.json_schema(schema)
                matcher = Matcher(llama3, grammar, pool=pool)
                for token in llama3.encode(text)[:20]:
                    matcher.compute_bitmask()
                    matcher.consume_token(token)
            except TokensieveError:
                pass
            grammar = matcher = None
        gc.collect()

    # Two passes first: the instance's pattern cache keeps a pattern on its second sight
    # (bounded, docs/lexer.md); after that every pass must come back to the same memory.
    one_pass()
    one_pass()
    core = pool.first()
    live_kib = core.live_kib()
    linear = core.memory_size_bytes()
    for _ in range(5):
        one_pass()
    assert core.live_kib() <= live_kib
    assert core.memory_size_bytes() == linear


# -- threads -----------------------------------------------------------------------------------


def test_matchers_created_from_many_threads_get_their_own_core_matchers():
    """Creation once read the new handle from a shared out-pointer in a second, separately
    locked call: two threads could get the same core matcher."""
    import threading

    from tokensieve import Tokenizer

    tok = Tokenizer.default()
    grammar = Grammar.regex("[0-9]{2,6}")
    made: list[Matcher] = []
    lock = threading.Lock()

    def worker():
        local = [Matcher(tok, grammar) for _ in range(50)]
        with lock:
            made.extend(local)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({(id(m._core), m._handle) for m in made}) == len(made)
    digits = tok.encode("12")
    for index, m in enumerate(made):
        if index % 2:
            assert m.consume_tokens(digits)
    for index, m in enumerate(made):
        assert m.token_count == (len(digits) if index % 2 else 0)


def _script_run(tok, grammar, seed, steps=25):
    """A deterministic mix of masks, consumes, forks, rollbacks and drops; returns a digest of
    every mask it saw."""
    import hashlib
    import random

    rng = random.Random(seed)
    digest = hashlib.sha256()
    live = [Matcher(tok, grammar)]
    for _ in range(steps):
        m = rng.choice(live)
        mask = m.compute_bitmask()
        digest.update(mask.tobytes())
        allowed = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: tok.vocab_size])
        action = rng.random()
        if action < 0.6 and len(allowed):
            assert m.consume_token(int(allowed[rng.randrange(len(allowed))]))
        elif action < 0.75:
            live.append(m.fork())
        elif action < 0.85 and m.token_count:
            m.rollback(1)
        elif len(live) > 1:
            live.remove(m)
    return digest.hexdigest()


def test_threads_hammering_matchers_see_the_single_threaded_masks():
    from concurrent.futures import ThreadPoolExecutor

    from tokensieve import Tokenizer

    tok = Tokenizer.default()
    grammar = Grammar.json_schema({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string", "maxLength": 5}}}})
    seeds = list(range(8))
    alone = [_script_run(tok, grammar, seed) for seed in seeds]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda seed: _script_run(tok, grammar, seed), seeds))
    assert together == alone


def _batch_script_run(tok, grammar, seed, pool, steps=30, count=18, filled=None):
    """A deterministic decoding loop over a batch in `pool`: fill every row (`fill_bitmasks`),
    then each request consumes an allowed token, rolls back, or is replaced by a fork or a new
    matcher; returns a digest of every row it saw."""
    import hashlib
    import random

    from tokensieve import fill_bitmasks

    rng = random.Random(seed)
    digest = hashlib.sha256()
    live = [Matcher(tok, grammar, pool=pool) for _ in range(count)]
    bitmask = np.zeros((count, live[0].mask_words), dtype=np.int32)
    for _ in range(steps):
        fill_bitmasks(live, bitmask)
        if filled is not None:
            filled.release()
        digest.update(bitmask.tobytes())
        for i, m in enumerate(live):
            allowed = np.flatnonzero(np.unpackbits(bitmask[i].view(np.uint8), bitorder="little")[: tok.vocab_size])
            allowed = allowed[~np.isin(allowed, list(tok.eos_token_ids))]  # a finished row allows EOS again
            action = rng.random()
            if action < 0.75 and len(allowed):
                assert m.consume_token(int(allowed[rng.randrange(len(allowed))]))
            elif action < 0.85 and m.token_count:
                m.rollback(1)
            elif action < 0.93:
                live[i] = m.fork()
            else:
                live[i] = Matcher(tok, grammar, pool=pool)
    return digest.hexdigest()


def test_batches_on_threads_keep_their_masks_while_instances_are_retired():
    """Decoding loops on threads, each filling its batch with `fill_bitmasks`, while another
    thread retires instances of the same pool over and over (traps, and calls past the
    deadline): every row each loop sees is the row it sees alone in a quiet pool. Randomized
    threads found three places where a retirement between a check and a call reached a
    bystander as CoreTrap (the tests above pin each one)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tokensieve import CoreTrap, LimitError, Tokenizer

    tok = Tokenizer.default()
    grammar = Grammar.json_schema({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string", "maxLength": 5}}}})
    seeds = list(range(4))
    alone = [_batch_script_run(tok, grammar, seed, CorePool(CoreOptions(instances=2))) for seed in seeds]

    pool = CorePool(CoreOptions(instances=2, deadline_s=0.2))
    done = threading.Event()
    retired = {"traps": 0, "deadlines": 0}

    filled = threading.Semaphore(0)

    def retire() -> None:
        # An instance is retired every 20 ms at most, and only after the loops filled four
        # batches since the last one (so they progress on a loaded machine too): by a trap,
        # or every fourth time by a call that runs past the deadline.
        victim = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
        while not done.wait(0.02):
            if not all(filled.acquire(timeout=0.5) for _ in range(4)):
                continue
            if retired["traps"] % 4 == 3:
                try:
                    victim._run(lambda core, handle: core.debug_spin(10_000_000))
                except LimitError:
                    retired["deadlines"] += 1
                victim = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
            cores = pool.cores()
            if cores:
                try:
                    cores[retired["traps"] % len(cores)].debug_trap()
                except CoreTrap:
                    retired["traps"] += 1

    disruptor = threading.Thread(target=retire)
    disruptor.start()
    try:
        with ThreadPoolExecutor(max_workers=len(seeds)) as threads:
            for _ in range(10):  # until enough retirements happened during the loops
                together = list(threads.map(lambda seed: _batch_script_run(tok, grammar, seed, pool, filled=filled), seeds))
                assert together == alone
                if retired["traps"] >= 5 and retired["deadlines"] >= 1:
                    break
    finally:
        done.set()
        disruptor.join()
    # A slot's dead instance is replaced when the slot is next needed: the last retirements may
    # have come after the loops' last call (seen once on a loaded machine: 36 replaced of 37).
    pool.instances()
    assert retired["traps"] >= 5 and retired["deadlines"] >= 1 and pool.replaced >= retired["traps"] + retired["deadlines"]


def test_one_matcher_shared_by_threads_stays_consistent():
    import threading

    from tokensieve import Tokenizer

    tok = Tokenizer.default()
    m = Matcher(tok, Grammar.regex("a*"))
    a = tok.encode("a")[0]
    errors: list[BaseException] = []

    def worker():
        try:
            for _ in range(200):
                assert m.consume_token(a)
                m.compute_bitmask()
                m.rollback(1)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert m.token_count == 0 and m.consumed_tokens == []


# -- failure scope -----------------------------------------------------------------------------


def test_a_trap_and_a_deadline_spare_the_bystanders(llama3):
    """A hostile call retires its instance; matchers of other requests on the same instance move
    to a healthy one (replaying their tokens) and keep computing the oracle's masks."""
    from tokensieve import CoreTrap, LimitError

    pool = CorePool(CoreOptions(instances=2, deadline_s=0.5))
    bystanders = []
    for pattern, text in (("[a-z]+( [a-z]+)*", b"hello wor"), ("日本語|日本", "日本".encode())):
        for _ in range(2):  # one on each instance
            m = Matcher(llama3, Grammar.regex(pattern), pool=pool)
            assert m.consume_tokens(llama3.encode(text))
            bystanders.append((m, pattern, text))
    cores = {m._core for m, _, _ in bystanders}
    assert len(cores) == 2

    victim = Matcher(llama3, Grammar.regex("[0-9]+"), pool=pool)
    with pytest.raises(CoreTrap):
        victim._core.debug_trap()
    for m, pattern, text in bystanders:
        assert_mask_matches_oracle(llama3, m, pattern, text)

    # A hostile grammar under the default limits ends in a LimitError that names its limit,
    # and leaves its instance (and the bystanders on it) alone.
    from tokensieve import Limits

    hostile = Matcher(llama3, Grammar.regex("(a|b)*a(a|b){12}", limits=Limits(dfa_state_count_max=50)), pool=pool)
    with pytest.raises(LimitError) as info:
        for token in llama3.encode("ab" * 5 + "ba" * 5 + "aabb" * 10):
            hostile.compute_bitmask()
            assert hostile.consume_token(token)
    assert info.value.limit == "lexer_states"
    assert not hostile._core.poisoned
    for m, pattern, text in bystanders:
        assert_mask_matches_oracle(llama3, m, pattern, text)

    # A call that runs past its wall-clock deadline is interrupted and retires its instance.
    retired = hostile._core
    with pytest.raises(LimitError) as info:
        hostile._run(lambda core, handle: core.debug_spin(100_000))
    assert info.value.limit == "deadline"
    assert retired.poisoned
    with pytest.raises(LimitError, match="failed earlier"):
        hostile.compute_bitmask()
    for m, pattern, text in bystanders:
        assert_mask_matches_oracle(llama3, m, pattern, text)
        assert not m._core.poisoned and m._core.options.deadline_s == 0.5
    hostile.reset()
    assert hostile.consume_token(llama3.encode("ab")[0])


def test_a_long_history_moves_in_calls_of_bounded_size(monkeypatch):
    """A bystander's move replays its whole history; in one call, a long output (thousands of
    tokens on a fresh instance) could pass one call's deadline and fail the bystander for
    another request's trap (seen in a thread stress run under load). The replay is cut into
    calls of at most 64 tokens, and the mask after it is the oracle's."""
    from tokensieve import CoreTrap, Tokenizer
    from tokensieve._core.binding import Core

    tok = Tokenizer.default()
    pattern, text = "[0-9]+(,[0-9]+)*", ",".join(map(str, range(300))).encode()
    m = Matcher(tok, Grammar.regex(pattern), pool=CorePool(CoreOptions(instances=1)))
    ids = tok.encode(text)
    assert m.consume_tokens(ids) and len(ids) > 500
    with pytest.raises(CoreTrap):
        m._core.debug_trap()
    calls: list[int] = []
    consume_tokens = Core.matcher_consume_tokens

    def counted(self: Any, handle: int, tokens: Any) -> int:
        calls.append(len(tokens))
        return consume_tokens(self, handle, tokens)

    monkeypatch.setattr(Core, "matcher_consume_tokens", counted)
    assert_mask_matches_oracle(tok, m, pattern, text)  # the first call after the trap moves it
    assert sum(calls) == len(ids) and max(calls) <= 64


def test_retired_instances_are_freed_while_their_tokenizer_and_grammar_live(llama3):
    """A tokenizer's and a grammar's handles in an instance held the instance (a finalizer's
    bound method): every retired instance stayed alive, linear memory and Llama-3 trie, as long
    as the tokenizer, so a server whose requests trapped or ran past the deadline grew by
    ~13 MB per retirement (100 traps: 144 -> 1,467 MB RSS; now 140 -> 150)."""
    import weakref

    from tokensieve import CoreTrap

    pool = CorePool(CoreOptions(instances=1))
    pattern, text = "[a-z]+( [a-z]+)*", b"hello wor"
    m = Matcher(llama3, Grammar.regex(pattern), pool=pool)
    assert m.consume_tokens(llama3.encode(text))
    retired = []
    for _ in range(3):
        retired.append(weakref.ref(m._core))
        with pytest.raises(CoreTrap):
            m._core.debug_trap()
        m.compute_bitmask()  # moves to a fresh instance
    gc.collect()
    assert [ref() for ref in retired] == [None, None, None]
    assert_mask_matches_oracle(llama3, m, pattern, text)


def _in_forked_child(check: Callable[[], None], timeout_s: float = 60) -> None:
    """Fork; run `check()` in the child; fail here with the child's error, or if it hangs."""
    import signal
    import time

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        report = "ok"
        try:
            signal.alarm(int(timeout_s))
            check()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            report = f"{type(err).__name__}: {err}"
        os.write(write, report.encode()[:4000])
        os._exit(0)
    os.close(write)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung")
            time.sleep(0.05)
        report = os.read(read, 4000).decode()
    finally:
        os.close(read)
    assert status == 0 and report == "ok", (status, report)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_keeps_its_deadlines_and_gets_past_calls_in_flight():
    """The child of `os.fork` has only the forking thread. Before, it had no epoch ticker (no
    call there ever reached its deadline), and an instance or matcher that another thread was
    using at the fork stayed locked forever (the child hung on its next use). Now the tickers
    start again; the instance that was mid-call is retired (its other matchers move and
    compute the oracle's masks); the matcher that was mid-call fails with a clear error."""
    import threading
    import time

    from tokensieve import CoreTrap, LimitError, Tokenizer

    tok = Tokenizer.default()
    pool = CorePool(CoreOptions(instances=2, deadline_s=0.3))
    pattern, text = "[a-z]+( [a-z]+)*", b"hello wor"
    bystander = Matcher(tok, Grammar.regex(pattern), pool=pool)
    assert bystander.consume_tokens(tok.encode(text))
    busy = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
    while busy._core is not bystander._core:
        busy = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
    spinning = threading.Event()

    def spin() -> None:
        def call(core: Any, handle: int) -> int:
            spinning.set()
            return core.debug_spin(50_000_000)

        with pytest.raises(LimitError):  # the parent's deadline ends it
            busy._run(call)

    thread = threading.Thread(target=spin)
    thread.start()
    assert spinning.wait(10)
    time.sleep(0.05)  # inside the call
    def child() -> None:
        assert bystander._core.poisoned, "the instance that was mid-call is not retired"
        assert_mask_matches_oracle(tok, bystander, pattern, text)
        assert not bystander._core.poisoned
        with pytest.raises(CoreTrap, match="in use by another thread when the process forked"):
            busy.compute_bitmask()
        busy.reset()
        assert busy.consume_tokens(tok.encode("12"))
        started = time.monotonic()
        with pytest.raises(LimitError) as info:
            bystander._run(lambda core, handle: core.debug_spin(50_000_000))
        assert info.value.limit == "deadline" and time.monotonic() - started < 5

    try:
        _in_forked_child(child)
    finally:
        thread.join()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_builds_again_what_another_thread_was_building(monkeypatch):
    """A thread building a tokenizer's trie, and one translating a JSON Schema (the collector
    paused), when the process forks: in the child the tokenizer's lock was held forever (its
    first matcher hung) and the collector stayed paused. Both are renewed there."""
    import threading

    import tokensieve._grammar.json_schema.compiler as compiler
    from tokensieve import Tokenizer

    tok = Tokenizer.default()
    pool = CorePool(CoreOptions(instances=1))
    building, translating, release = threading.Event(), threading.Event(), threading.Event()
    build_in = Tokenizer._build_in
    translate = compiler.json_schema_to_ir

    def slow_build(self: Any, core: Any) -> int:
        building.set()
        release.wait(10)
        return build_in(self, core)

    def slow_translate(*args: Any, **kwargs: Any) -> Any:
        translating.set()
        release.wait(10)
        return translate(*args, **kwargs)

    monkeypatch.setattr(Tokenizer, "_build_in", slow_build)
    monkeypatch.setattr(compiler, "json_schema_to_ir", slow_translate)
    threads = [
        threading.Thread(target=lambda: Matcher(tok, Grammar.regex("[a-z]+"), pool=pool)),
        threading.Thread(target=lambda: Grammar.json_schema({"type": "integer"})),
    ]
    for thread in threads:
        thread.start()
    assert building.wait(10) and translating.wait(10)
    assert not gc.isenabled()

    def child() -> None:
        monkeypatch.undo()
        assert gc.isenabled(), "the collector stays paused"
        m = Matcher(tok, Grammar.regex("[a-z]+"), pool=pool)
        assert_mask_matches_oracle(tok, m, "[a-z]+")

    try:
        _in_forked_child(child)
    finally:
        release.set()
        for thread in threads:
            thread.join()
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_decides_patterns_another_thread_was_matching():
    """The JSON Schema front-end keeps its pattern matchers across translations
    (`instance._CORE_MATCHERS`). One that another thread was using when the process forked
    fails in the child until reset, so the child's translations refused the schema; the child
    now makes its own (a stress run of threads translating beside forks found it)."""
    import threading

    from tokensieve import Tokenizer
    from tokensieve._grammar.json_schema import instance

    body = "a*" * 10
    schema = {"type": "object", "properties": {"a" * 40 + "!": {"type": "string"}},
              "patternProperties": {f"^{body}$": {"type": "integer"}}, "additionalProperties": False}
    Grammar.json_schema(schema, whitespace="compact")  # makes the body's matcher
    matcher = instance._CORE_MATCHERS[body]
    using, release = threading.Event(), threading.Event()

    def use() -> None:
        with matcher._lock:
            using.set()
            release.wait(10)

    thread = threading.Thread(target=use)
    thread.start()
    assert using.wait(10)

    def child() -> None:
        schema["properties"]["b"] = {}  # not the cached grammar
        grammar = Grammar.json_schema(schema, whitespace="compact")
        tok = Tokenizer.default()
        m = Matcher(tok, grammar)
        assert m.consume_tokens(tok.encode('{"%s!":"s","b":1}' % ("a" * 40))) and m.is_accepting()

    try:
        _in_forked_child(child)
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize("when", ["before its matcher is made", "before the replay"])
def test_a_bystander_whose_replacement_is_retired_in_turn_moves_again(llama3, when, monkeypatch):
    """Another thread's failure can retire the fresh instance a bystander is moving to (found by
    threads trapping instances at random while others filled batches: the bystander raised
    CoreTrap). Its move goes on to the next replacement and its masks stay the oracle's."""
    from tokensieve import CoreTrap

    pool = CorePool(CoreOptions(instances=1))
    pattern, text = "[a-z]+( [a-z]+)*", b"hello wor"
    bystander = Matcher(llama3, Grammar.regex(pattern), pool=pool)
    assert bystander.consume_tokens(llama3.encode(text))
    with pytest.raises(CoreTrap):
        Matcher(llama3, Grammar.regex("[0-9]+"), pool=pool)._core.debug_trap()

    retired = []
    replacement = pool.replacement

    def retire(core):
        retired.append(core)
        with pytest.raises(CoreTrap):
            core.debug_trap()  # as another request's failing call would

    def replaced_then_retired(dead):
        core = replacement(dead)
        if not retired:
            if when == "before its matcher is made":
                retire(core)
            else:
                made = core.matcher_new
                monkeypatch.setattr(core, "matcher_new", lambda *args: (made(*args), retire(core))[0])
        return core

    monkeypatch.setattr(pool, "replacement", replaced_then_retired)
    assert_mask_matches_oracle(llama3, bystander, pattern, text)
    assert len(retired) == 1 and retired[0].poisoned
    assert bystander._core is not retired[0] and not bystander._core.poisoned
    assert pool.replaced == 2


def test_a_matcher_whose_instance_is_retired_as_it_is_created_goes_to_another(llama3, monkeypatch):
    """The instance the pool chose for a new matcher can be retired by another thread's failure
    before the matcher is made there: the new request must not fail for it."""
    from tokensieve import CoreTrap

    pool = CorePool(CoreOptions(instances=1))
    pattern, text = "[a-z]+( [a-z]+)*", b"hello wor"
    grammar = Grammar.regex(pattern)
    Matcher(llama3, grammar, pool=pool)  # the instance exists, with the tokenizer and grammar
    place = pool.place
    retired = []

    def placed_then_retired(prefer: Any = None) -> Any:
        core = place(prefer)
        if not retired:
            retired.append(core)
            with pytest.raises(CoreTrap):
                core.debug_trap()  # as another request's failing call would
        return core

    monkeypatch.setattr(pool, "place", placed_then_retired)
    m = Matcher(llama3, grammar, pool=pool)
    assert retired[0].poisoned and m._core is not retired[0]
    assert m.consume_tokens(llama3.encode(text))
    assert_mask_matches_oracle(llama3, m, pattern, text)

def test_a_batch_whose_instance_is_retired_as_its_call_is_prepared_fills_every_row(llama3, monkeypatch):
    """An instance can be retired after the batch fill checked it and before it prepared that
    instance's call (found as for the test above: `fill_bitmasks` raised CoreTrap). Another
    thread's trapping call cannot come in between any more (the fill holds the instance's lock
    from the check on), but a retirement from outside (`retire`) still can. That instance's
    matchers move and are filled on their own; every row is the oracle's."""
    from tokensieve import fill_bitmasks

    pool = CorePool(CoreOptions(instances=2))
    pattern, text = "[a-z]+( [a-z]+)*", b"hello wor"
    matchers = [Matcher(llama3, Grammar.regex(pattern), pool=pool) for _ in range(20)]
    for m in matchers:
        assert m.consume_tokens(llama3.encode(text))
    doomed = matchers[0]._core
    assert len({m._core for m in matchers}) == 2
    begin = doomed.batch_begin

    def retired_first(*args: Any, **kwargs: Any) -> Any:
        doomed.runtime.retire("retired from outside while the batch prepared its call")
        return begin(*args, **kwargs)

    monkeypatch.setattr(doomed, "batch_begin", retired_first)
    bitmask = np.zeros((len(matchers), matchers[0].mask_words), dtype=np.int32)
    fill_bitmasks(matchers, bitmask)
    assert doomed.poisoned and not any(m._core.poisoned for m in matchers)
    assert (bitmask == bitmask[0]).all()  # one pattern and prefix: one mask, checked once
    assert_row_matches_oracle(llama3, bitmask[0], pattern, text)


# -- exit --------------------------------------------------------------------------------------

_EXIT_SCRIPT = """
import sys, threading, gc
{before}
from tokensieve import Tokenizer, Grammar, Matcher, CoreTrap
{after}
tok = Tokenizer.default()
g = Grammar.regex("[a-z]+")
live = [Matcher(tok, g) for _ in range(3)]
live[0].consume_token(tok.encode("abc")[0])
forks = [live[0].fork() for _ in range(5)]
dropped = Matcher(tok, g); del dropped; gc.collect()
def work():
    m = Matcher(tok, g); m.compute_bitmask(); globals().setdefault("kept", []).append(m)
threads = [threading.Thread(target=work) for _ in range(3)]
[t.start() for t in threads]; [t.join() for t in threads]
try:
    live[1]._core.debug_trap()
except CoreTrap:
    pass
live[2].compute_bitmask()  # moves to a fresh instance
print("ok")
"""


@pytest.mark.parametrize(
    "before, after",
    [
        ("import torch", ""),
        ("", "import torch"),
        ("import transformers", ""),
        ("import xgrammar", ""),
        ("", "import xgrammar, torch"),
    ],
)
def test_processes_with_torch_transformers_or_xgrammar_exit_cleanly(before, after, tmp_path):
    """Importing torch registers weakref.finalize's exit hook before ours, so our finalizers
    once ran after the stores were closed: a segmentation fault at every exit."""
    import subprocess
    import sys

    script = tmp_path / "exit.py"
    script.write_text(_EXIT_SCRIPT.format(before=before, after=after))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
    assert "Exception ignored" not in result.stderr, result.stderr[-2000:]


_EXIT_IN_A_CALL_SCRIPT = """
import threading
import numpy as np
from tokensieve import Tokenizer, Grammar, Matcher, fill_bitmasks
tok = Tokenizer.default()
grammar = Grammar.json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
batch = [Matcher(tok, grammar) for _ in range(32)]
bitmask = np.zeros((32, batch[0].mask_words), dtype=np.int32)
inside = threading.Event()
def spin(core, handle):
    inside.set()
    return core.debug_spin(ROUNDS)
def serve():  # a server's worker thread: batch fills and long calls until the process ends
    while True:
        fill_bitmasks(batch, bitmask)
        batch[0]._run(spin)
threading.Thread(target=serve, daemon=True).start()
inside.wait(60)
print("ok")
"""


@pytest.mark.parametrize("rounds", [20_000, 200_000])
def test_a_process_exits_cleanly_while_a_daemon_thread_is_inside_a_call(rounds, tmp_path):
    """The exit hook closed every store, also the one a daemon thread was calling into with
    the GIL released: every such process died with a segmentation fault (status 139). The
    stores are now left to the operating system."""
    import subprocess
    import sys

    script = tmp_path / "exit_in_a_call.py"
    script.write_text(_EXIT_IN_A_CALL_SCRIPT.replace("ROUNDS", str(rounds)))
    for _ in range(3):
        result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
        assert result.stdout.strip() == "ok"
        assert "Exception ignored" not in result.stderr, result.stderr[-2000:]


_ADDRESS_SPACE_SCRIPT = """
import json, logging, resource
import numpy as np
from tokensieve import Tokenizer, Grammar, Matcher, fill_bitmasks
from tokensieve._core.pool import default_pool

warnings = []
class Keep(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("tokensieve").addHandler(Keep())
tok = Tokenizer.default()
pages = int(open("/proc/self/statm").read().split()[0])
limit = pages * resource.getpagesize() + (2 << 30)  # room for what a matcher uses, not for 4 GiB
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
grammar = Grammar.regex(PATTERN)
prefixes = PREFIXES
matchers = []
for index in range(32):
    matcher = Matcher(tok, grammar)
    assert matcher.consume_tokens(tok.encode(prefixes[index % len(prefixes)]))
    matchers.append(matcher)
single = [m.compute_bitmask().tolist() for m in matchers[:len(prefixes)]]
bitmask = np.zeros((len(matchers), matchers[0].mask_words), dtype=np.int32)
fill_bitmasks(matchers, bitmask)
pool = default_pool()
print(json.dumps({
    "single": single,
    "batch": bitmask.tolist(),
    "fixed": [core.runtime._fixed for core in pool.instances()],
    "warnings": warnings,
}))
"""


def test_an_address_space_limit_runs_the_core_on_a_moving_memory(tmp_path):
    """Under `ulimit -v` a core instance's 4 GiB reservation does not fit: every instance
    failed to start ("mmap failed to reserve ..., this is a bug"). It now runs on a memory
    that reserves only what it uses; its masks, alone and in a batch over two instances,
    are the oracle's."""
    import json
    import subprocess
    import sys

    from tokensieve import Tokenizer

    pattern = "[a-z]+( [0-9]{2,4})*"
    prefixes = ["", "abc", "abc 12", "abc 1234 5"]
    script = tmp_path / "address_space.py"
    script.write_text(_ADDRESS_SPACE_SCRIPT.replace("PATTERN", repr(pattern)).replace("PREFIXES", repr(prefixes)))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert len(out["fixed"]) >= 2 and not any(out["fixed"]), out["fixed"]
    assert len(out["warnings"]) == 1 and "ulimit -v" in out["warnings"][0], out["warnings"]
    tok = Tokenizer.default()
    for index, row in enumerate(out["single"]):
        assert_row_matches_oracle(tok, np.array(row, dtype=np.int32), pattern, prefixes[index].encode())
    for index, row in enumerate(out["batch"]):
        assert row == out["single"][index % len(prefixes)], f"batch row {index}"


_INTERRUPT_SCRIPT = """
import random, signal, sys, time
import numpy as np
from tokensieve import Tokenizer, Grammar, Matcher, fill_bitmasks, TokensieveError
from tokensieve._core.pool import default_pool

class Stop(Exception):
    pass

def stop(*args):
    raise Stop()

signal.signal(signal.SIGALRM, stop)
tok = Tokenizer.default()
grammar = Grammar.json_schema({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "string"}}, "required": ["a", "b"]})
ids = tok.encode('{"a": [' + ", ".join(str(i) for i in range(300)) + '], "b": "' + "x" * 200 + '"}')
rng = random.Random(SEED)
matchers = [Matcher(tok, grammar) for _ in range(40)]
bitmask = np.zeros((len(matchers), matchers[0].mask_words), dtype=np.int32)
interrupts = 0
end = time.time() + SECONDS
while time.time() < end:
    try:
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 3e-4))
        try:
            op = rng.random()
            if op < 0.5:
                fill_bitmasks(matchers, bitmask)
                for m in matchers:
                    done = len(m.consumed_tokens)
                    if done < len(ids):
                        m.consume_token(ids[done])
            elif op < 0.6:
                m = rng.choice(matchers); twin = m.fork(); del twin
            elif op < 0.8:
                m = rng.choice(matchers); m.rollback(min(len(m.consumed_tokens), rng.randrange(5)))
            else:
                m = rng.choice(matchers); m.compute_ff_tokens(); m.compute_bitmask()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Stop:
        interrupts += 1
    except TokensieveError as error:
        assert "interrupted" in str(error), error
locked = [core for core in default_pool().cores() if core.lock.locked()]
failed = wrong = 0
for m in matchers:
    try:
        m.compute_bitmask()
    except TokensieveError as error:
        assert "interrupted" in str(error), error
        failed += 1
        m.reset()
    done = m.consumed_tokens
    assert done == ids[: len(done)]
    fresh = Matcher(tok, grammar)
    assert fresh.consume_tokens(done)
    wrong += not (m.compute_bitmask() == fresh.compute_bitmask()).all()
print(interrupts, len(locked), failed, wrong)
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_interrupts_at_any_point_never_leave_an_instance_locked_or_a_mask_wrong(seed, tmp_path):
    """Ctrl-C raises KeyboardInterrupt in the main thread after any call returns, so also
    between a lock's acquire() and the try that releases it, or between the core consuming a
    token and the matcher recording it. Interrupted thousands of times at random points (a
    timer whose handler raises) during batch fills, consumes, forks and rollbacks: an instance
    stayed locked for good (the next call waited forever) and matchers computed masks for
    another position than their tokens. Now no instance stays locked, and every matcher either
    has the mask a fresh matcher fed its tokens has, or says it was interrupted and is right
    again after reset(). Each run is a process of its own, so a hang fails by its timeout."""
    import subprocess
    import sys

    script = tmp_path / "interrupts.py"
    script.write_text(_INTERRUPT_SCRIPT.replace("SEED", str(seed)).replace("SECONDS", "6"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    interrupts, locked, failed, wrong = map(int, result.stdout.split())
    assert interrupts > 1000, interrupts  # the timer did interrupt (else this test would not test it)
    assert locked == 0 and wrong == 0, (locked, wrong, failed)
