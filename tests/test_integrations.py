"""Batch fills, torch helpers, the request-level shape, and transformers' generate.

Oracles: each matcher's own single fill computed separately (a different core path) for batch
fills; a plain Python unpacking of bits for the torch helpers; `jsonschema` for generated text;
the tokenizer's own canonical encoding for forced tokens.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from conftest import load_shared_tokenizer
from tokensieve import CoreOptions, CorePool, Grammar, LimitError, Limits, Matcher, fill_bitmasks
from tokensieve.integrations import RequestMatcher


@pytest.fixture(scope="module")
def llama3():
    return load_shared_tokenizer("llama3")


SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 12}, "b": {"type": "array", "items": {"type": "integer"}}}}


def test_batch_fill_equals_single_fills_over_several_instances(llama3):
    pool = CorePool(CoreOptions(instances=2))
    grammar = Grammar.json_schema(SCHEMA)
    prefixes = ['{"a":"', '{"a":"xy', '{"b":[1', "", '{"b":[', '{"a":"q","b":[4,5']
    matchers = []
    for index in range(24):
        m = Matcher(llama3, grammar, pool=pool)
        assert m.consume_tokens(llama3.encode(prefixes[index % len(prefixes)]))
        matchers.append(m)
    assert len({id(m._core) for m in matchers}) == 2
    rows = list(reversed(range(30)))[: len(matchers)]
    bitmask = np.zeros((30, matchers[0].mask_words), dtype=np.int32)
    fill_bitmasks(matchers, bitmask, rows)
    for m, row in zip(matchers, rows):
        assert (bitmask[row] == m.compute_bitmask()).all()
    assert not bitmask[:6].any()  # rows nobody asked for stay untouched
    with pytest.raises(ValueError, match="outside"):
        fill_bitmasks(matchers[:1], bitmask, [30])
    with pytest.raises(ValueError, match="rows"):
        fill_bitmasks(matchers, bitmask, [0])



def test_a_matcher_listed_twice_in_a_batch_consumes_its_pending_token_once():
    """A batch may list one matcher in two rows. Its lock is reentrant, so the batch took it
    twice and its call consumed the matcher's pending token twice: the core was one token
    ahead of `consumed_tokens` (a rollback then left it in the wrong place). Both rows now get
    its mask, the token is consumed once, and the states agree with a matcher fed the same
    tokens on its own."""
    from tokensieve import Tokenizer

    tok = Tokenizer.default()
    grammar = Grammar.regex("[a-z]{0,12}x")  # how many letters came decides the next mask
    batch = [Matcher(tok, grammar) for _ in range(20)]
    alone = Matcher(tok, grammar)
    bitmask = np.zeros((21, alone.mask_words), dtype=np.int32)
    fill_bitmasks(batch + [batch[0]], bitmask)
    for token in tok.encode("hello"):
        for m in batch + [alone]:
            assert m.consume_token(token)  # the last one pending: consumed by the next fill
    fill_bitmasks(batch + [batch[0]], bitmask)
    expected = alone.compute_bitmask()
    assert (bitmask[0] == expected).all() and (bitmask[20] == expected).all()
    seven = tok.encode("abcdefg")  # 5 + 7 letters still fit; 10 + 7 would not
    assert batch[0].validate_tokens(seven) == alone.validate_tokens(seven) == len(seven)
    batch[0].rollback(1)
    alone.rollback(1)
    assert (batch[0].compute_bitmask() == alone.compute_bitmask()).all()

def test_a_grammar_is_compiled_once_where_its_matcher_goes():
    """Grammars compiled one after another, each with a live matcher, on a 2-instance pool:
    each grammar is compiled in one instance only, the one its matcher went to, and the
    matchers still split evenly. (Placing by count alone, the grammar compiled in the first
    instance, every other grammar was compiled again in the second.)"""
    from tokensieve import Tokenizer, configure

    tok = Tokenizer.from_token_bytes([bytes([b]) for b in range(97, 123)] + [b"<eos>"], eos_token_ids=[26])
    configure(instances=2)
    matchers: list[Matcher] = []
    try:
        warm = Grammar.regex("[a-z]*")
        matchers += [Matcher(tok, warm), Matcher(tok, warm)]  # both instances live
        grammars = []
        for index in range(16):
            grammar = Grammar.regex(f"[a-z]{{{index + 1}}}")
            matchers.append(Matcher(tok, grammar))
            grammars.append(grammar)
        cores = list({m._core for m in matchers})
        assert len(cores) == 2
        counts = [sum(m._core is core for m in matchers) for core in cores]
        assert abs(counts[0] - counts[1]) <= 1, counts
        for grammar, matcher in zip(grammars, matchers[2:]):
            assert [grammar.built_in(core) for core in cores].count(True) == 1
            assert grammar.built_in(matcher._core)
    finally:
        del matchers
        configure()


def test_batch_fill_raises_the_failing_matchers_error_and_fills_the_rest(llama3):
    pool = CorePool(CoreOptions(instances=1))
    good = Matcher(llama3, Grammar.regex("[a-z]+"), pool=pool)
    bad = Matcher(llama3, Grammar.regex("(a|b)*a(a|b){12}", limits=Limits(dfa_state_count_max=20)), pool=pool)
    bitmask = np.zeros((2, good.mask_words), dtype=np.int32)
    for token in llama3.encode("abab" * 4)[:2]:
        bad.consume_token(token)
    with pytest.raises(LimitError) as info:
        for _ in range(6):
            assert bad.consume_token(llama3.encode("ab")[0])
            fill_bitmasks([good, bad], bitmask)
    assert info.value.limit == "lexer_states"
    assert (bitmask[0] == good.compute_bitmask()).all()


def _batch_of(llama3, pool, count):
    grammar = Grammar.json_schema(SCHEMA)
    prefixes = ['{"a":"', '{"a":"xy', '{"b":[1', "", '{"b":[', '{"a":"q","b":[4,5']
    matchers = []
    for index in range(count):
        m = Matcher(llama3, grammar, pool=pool)
        assert m.consume_tokens(llama3.encode(prefixes[index % len(prefixes)]))
        matchers.append(m)
    return matchers


@pytest.mark.parametrize("spin_reads", [400_000, 1], ids=["caller-waits-in-its-instance", "caller-gives-up-and-blocks"])
def test_batch_fill_on_threads_equals_single_fills(llama3, monkeypatch, spin_reads):
    from tokensieve._decoding import batch as _batch

    monkeypatch.setattr(_batch, "_SPIN_READS", spin_reads)
    monkeypatch.setattr(_batch, "_PARALLEL_WORK_MIN_US", 0.0)  # threads whatever the work
    monkeypatch.setattr(_batch, "_GAIN_MIN", 0.0)  # and whatever they gained on a busy machine
    monkeypatch.setattr(_batch, "_gain", _batch._Gain())  # nor what earlier tests' batches gained
    monkeypatch.setattr(_batch, "_cpu_count", lambda: 2)
    pool = CorePool(CoreOptions(instances=3))
    matchers = _batch_of(llama3, pool, 40)
    assert len({id(m._core) for m in matchers}) == 3
    rows = np.arange(40)[::-1] + 2  # numpy ints, not in matcher order
    bitmask = np.zeros((42, matchers[0].mask_words), dtype=np.int32)
    for _ in range(2):  # the second fill uses the instances' measured costs
        fill_bitmasks(matchers + matchers[:1], bitmask, list(rows) + [rows[0]])  # one matcher twice
    assert _batch._workers.started, "no helper thread filled a group"
    for m, row in zip(matchers, rows):
        assert (bitmask[row] == m.compute_bitmask()).all()
    assert not bitmask[:2].any()
    torch = pytest.importorskip("torch")
    tensor = torch.zeros((42, matchers[0].mask_words), dtype=torch.int32)
    fill_bitmasks(matchers, tensor, rows)
    assert (tensor.numpy() == bitmask).all()


def test_batch_caller_waits_inside_the_module_until_its_helpers_bump_the_word(llama3):
    """`Core.spin_until`, how a batch fill's caller waits for its helper threads: it returns
    once another thread has raised the word to the target (not before), and gives up after
    its reads when nobody does."""
    import threading

    matcher = Matcher(llama3, Grammar.regex("[a-z]+"), pool=CorePool(CoreOptions(instances=1)))
    core = matcher._core
    word = core.spin_word()
    if word is None:
        pytest.skip("linear memory may move on this host: the caller waits on locks instead")
    word[0] = 0

    def bump_twice() -> None:
        time.sleep(0.01)
        word[0] += 1
        time.sleep(0.01)
        word[0] += 1

    helper = threading.Thread(target=bump_twice)
    with core.lock:
        started = time.perf_counter()
        helper.start()
        # ~1.5 reads a ns here: 2e8 reads is over 0.1 s, short of the 1 s call deadline.
        reached = core.spin_until(2, 200_000_000, 1_000)
        waited = time.perf_counter() - started
        helper.join()
        assert reached and word[0] == 2
        assert waited >= 0.019  # it saw the second bump, not the first
        assert not core.spin_until(3, 100_000, 0)  # nobody bumps it a third time
    assert not core.poisoned
    assert (matcher.compute_bitmask() != 0).any()  # the instance is still usable


def _oracle_mask(llama3, pattern: str, prefix: bytes) -> np.ndarray:
    """The mask the regex oracle allows after `prefix` (text tokens only; EOS where it may end)."""
    from oracle import RegexOracle

    oracle = RegexOracle(pattern)
    mask = np.zeros((llama3.vocab_size + 31) // 32, dtype=np.uint32)
    for token in range(llama3.vocab_size):
        data = llama3.token_bytes(token)
        if llama3.is_special(token) or not data or not oracle.completable_uncached(prefix + data):
            continue
        mask[token >> 5] |= np.uint32(1 << (token & 31))
    if oracle.full_match(prefix):
        for token in llama3.eos_token_ids:
            mask[token >> 5] |= np.uint32(1 << (token & 31))
    return mask.view(np.int32)


def test_batch_fill_follows_its_batch_from_step_to_step(llama3, monkeypatch):
    """A batch filled again as it was reuses its plan (`batch._Plan`); rows, the array or the
    matchers changing between steps make a new one. Oracle: a twin of every matcher, fed the
    same tokens, filling its own mask (`compute_bitmask`, one matcher per call)."""
    import gc
    import weakref

    from tokensieve._decoding import batch as _batch

    monkeypatch.setattr(_batch, "_PARALLEL_WORK_MIN_US", 0.0)
    monkeypatch.setattr(_batch, "_GAIN_MIN", 0.0)
    monkeypatch.setattr(_batch, "_gain", _batch._Gain())
    monkeypatch.setattr(_batch, "_cpu_count", lambda: 2)
    pool = CorePool(CoreOptions(instances=2))
    grammar = Grammar.json_schema(SCHEMA)
    texts = ['{"a":"hello there","b":[1,22,333]}', '{"b":[4,5,6],"a":"x"}', '{"a":"","b":[]}']
    streams = [llama3.encode(texts[i % len(texts)]) for i in range(20)]
    matchers = [Matcher(llama3, grammar, pool=pool) for _ in streams]
    twins = [Matcher(llama3, grammar) for _ in streams]
    assert len({m._core for m in matchers}) == 2
    words = matchers[0].mask_words
    bitmask = np.zeros((24, words), dtype=np.int32)
    rows = list(range(20))
    plans = []
    for step in range(8):
        if step == 3:
            rows = rows[::-1]  # the rows move: a new plan
        if step == 4:
            bitmask = np.zeros((24, words), dtype=np.int32)  # another array: a new plan
        if step == 6:  # a request leaves, another comes
            matchers[5] = Matcher(llama3, grammar, pool=pool)
            twins[5] = Matcher(llama3, grammar)
            streams[5] = [-1] * step + streams[5]  # from its first token on
        for index, (m, twin) in enumerate(zip(matchers, twins)):
            tokens = streams[index]
            if step < len(tokens) and tokens[step] >= 0:
                assert m.consume_token(tokens[step]) and twin.consume_token(tokens[step]), (step, index)
        bitmask[:] = -1
        fill_bitmasks(matchers, bitmask, rows)
        for row, twin in zip(rows, twins):
            assert (bitmask[row] == twin.compute_bitmask()).all(), f"step {step} row {row}"
        assert (bitmask[20:] == -1).all()
        plans.append(_batch._plans.get(matchers[0]))
    assert None not in plans
    assert [plans[i] is plans[i - 1] for i in range(1, 8)] == [True, True, False, False, True, False, True]
    # The plan holds no matcher: they are freed once the caller drops them.
    alive = weakref.ref(matchers[0])
    del matchers, plans
    gc.collect()
    assert alive() is None


def test_batch_fill_on_threads_a_failing_matcher_or_instance_fails_alone(llama3, monkeypatch):
    """Issue 9's failure scope through the batch path (one call per instance, on threads): a
    matcher over its limit raises its own LimitError and leaves its row untouched, a trap in
    one instance's batch call retires that instance only, and every other row is the regex
    oracle's mask, before and after."""
    from tokensieve import CoreTrap
    from tokensieve._decoding import batch as _batch

    monkeypatch.setattr(_batch, "_PARALLEL_WORK_MIN_US", 0.0)
    monkeypatch.setattr(_batch, "_GAIN_MIN", 0.0)
    monkeypatch.setattr(_batch, "_gain", _batch._Gain())  # earlier tests' batches may have backed off
    monkeypatch.setattr(_batch, "_cpu_count", lambda: 2)
    import threading

    helper_calls = []
    compute = _batch._compute

    def counted(core, call, batch):
        if threading.current_thread() is not threading.main_thread():
            helper_calls.append(core)
        else:
            time.sleep(0.02)  # the helper claims its call before the caller would take it over
        compute(core, call, batch)

    monkeypatch.setattr(_batch, "_compute", counted)
    pool = CorePool(CoreOptions(instances=2))
    cases = [("[a-z]+( [a-z]+)*", b"hello wor"), ("日本語|日本", "日本".encode())]
    expected = {pattern: _oracle_mask(llama3, pattern, text) for pattern, text in cases}
    good, patterns = [], []
    for index in range(20):
        pattern, text = cases[index // 2 % 2]  # both patterns on both instances
        m = Matcher(llama3, Grammar.regex(pattern), pool=pool)
        assert m.consume_tokens(llama3.encode(text.decode()))
        good.append(m)
        patterns.append(pattern)
    hostile = Matcher(llama3, Grammar.regex("(a|b)*a(a|b){12}", limits=Limits(dfa_state_count_max=50)), pool=pool)
    assert len({m._core for m in good}) == 2 and set(patterns) == {p for p, _ in cases}
    matchers = good[:7] + [hostile] + good[7:]
    hostile_row = 7
    bitmask = np.zeros((len(matchers), good[0].mask_words), dtype=np.int32)

    def check_good_rows() -> None:
        for row, m in enumerate(matchers):
            if m is not hostile:
                assert (bitmask[row] == expected[patterns[good.index(m)]]).all(), f"row {row}"
                assert (bitmask[row] == m.compute_bitmask()).all(), f"row {row}"  # its own fill

    with pytest.raises(LimitError) as info:
        for token in llama3.encode("ab" * 5 + "ba" * 5 + "aabb" * 10):
            bitmask[:] = -1
            fill_bitmasks(matchers, bitmask)
            check_good_rows()
            assert hostile.consume_token(token)
    assert info.value.limit == "lexer_states"
    assert (bitmask[hostile_row] == -1).all()  # the failing matcher's row is untouched
    check_good_rows()
    assert helper_calls, "no helper thread made a call"
    assert not any(m._core.poisoned for m in matchers)

    # A trap inside the batch call of the other instance: that instance is retired, its
    # matchers move to its replacement (replaying their tokens) and are filled on their own;
    # the failed matcher still raises its own error, once every other row is filled.
    victim = next(m._core for m in good if m._core is not hostile._core)
    moved = [m for m in good if m._core is victim]
    trap = victim._f["ts_debug_trap"]
    monkeypatch.setattr(victim, "_fill_many", lambda *args: trap())
    bitmask[:] = -1
    with pytest.raises(LimitError) as info:
        fill_bitmasks(matchers, bitmask)
    assert info.value.limit == "lexer_states"
    assert victim.poisoned and not hostile._core.poisoned
    check_good_rows()
    assert all(not m._core.poisoned and m._core is not victim for m in moved)
    with pytest.raises(CoreTrap):
        victim.matcher_token_count(moved[0]._handle)


def test_batch_fill_fills_a_matcher_busy_in_another_thread_afterwards(llama3):
    import threading

    pool = CorePool(CoreOptions(instances=2))
    matchers = _batch_of(llama3, pool, 18)  # the batch path (fewer than 16 fill one by one)
    bitmask = np.zeros((18, matchers[0].mask_words), dtype=np.int32)
    busy = matchers[3]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with busy._lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    timer = threading.Timer(0.2, release.set)
    timer.start()
    started = time.perf_counter()
    fill_bitmasks(matchers, bitmask)  # waits for the busy matcher only, after the others
    assert time.perf_counter() - started >= 0.15
    holder.join()
    for row, m in enumerate(matchers):
        assert (bitmask[row] == m.compute_bitmask()).all()


def test_batch_fill_refuses_bad_batches_before_filling_anything(llama3):
    pool = CorePool(CoreOptions(instances=2))
    for count in (4, 18):  # one by one, and the batch path (which locks as it checks)
        matchers = _batch_of(llama3, pool, count)
        bitmask = np.zeros((count, matchers[0].mask_words), dtype=np.int32)
        _refuses_bad_batches(llama3, pool, matchers, bitmask)


def _refuses_bad_batches(llama3, pool, matchers, bitmask):
    count = len(matchers)
    with pytest.raises(ValueError, match="outside"):
        fill_bitmasks(matchers, bitmask, list(range(count - 1)) + [count])
    with pytest.raises(ValueError, match="words per row|2-D"):
        fill_bitmasks(matchers, np.zeros((count, 7), dtype=np.int32))
    with pytest.raises(ValueError, match="int32"):
        fill_bitmasks(matchers, bitmask.astype(np.int64))
    with pytest.raises(ValueError, match="width"):
        wide = Matcher(llama3, Grammar.regex("a"), vocab_size=llama3.vocab_size + 64, pool=pool)
        fill_bitmasks(matchers[:-1] + [wide], bitmask)
    with pytest.raises(TypeError, match=f"item {count - 1} is a str"):  # was an AttributeError
        fill_bitmasks(matchers[:-1] + ["m"], bitmask)
    assert not bitmask.any()
    assert all(not m._lock._is_owned() for m in matchers)


def test_a_second_matcher_at_a_width_costs_no_trie(llama3, monkeypatch):
    grammar = Grammar.regex("[0-9]+")
    width = llama3.vocab_size + 1000
    pool = CorePool(CoreOptions(instances=2))  # its own instances: other tests' matchers do not count
    warm = [Matcher(llama3, grammar, vocab_size=width, pool=pool) for _ in range(2)]  # a trie in each
    assert len({w._core for w in warm}) == 2
    builds = []
    original = type(llama3)._build_in
    monkeypatch.setattr(type(llama3), "_build_in", lambda self, core: builds.append(self) or original(self, core))
    for _ in range(20):
        m = Matcher(llama3, grammar, vocab_size=width, pool=pool)
    assert builds == []  # a trie build per matcher was 0.1-0.2 s
    Matcher(llama3, grammar, vocab_size=width + 32, pool=pool)  # a new width is a new trie: the probe counts it
    assert builds
    assert m.vocab_size == width and m.mask_words == (width + 31) // 32
    assert not m.consume_token(width - 1)  # ids past the vocabulary are never allowed
    assert llama3.with_vocab_size(width) is llama3.with_vocab_size(width)


def test_matcher_refuses_a_transformers_tokenizer_with_a_hint(shared_dir, tmp_path):
    import gzip

    from transformers import PreTrainedTokenizerFast

    (tmp_path / "tokenizer.json").write_bytes(gzip.open(shared_dir / "tokenizers" / "gpt2" / "tokenizer.json.gz").read())
    hf = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    with pytest.raises(TypeError, match="Tokenizer.from_hf"):
        Matcher(hf, Grammar.regex("a"))


# -- torch -------------------------------------------------------------------------------------


def _python_bits(bitmask_row, width):
    return [bool((int(bitmask_row[t // 32]) >> (t % 32)) & 1) if t < 32 * len(bitmask_row) else False for t in range(width)]


def test_apply_token_bitmask_masks_exactly_the_disallowed_tokens():
    import torch

    from tokensieve.torch import allocate_token_bitmask, apply_token_bitmask_inplace, unpack_token_bitmask

    rng = np.random.default_rng(0)
    bitmask = allocate_token_bitmask(3, 70)
    assert tuple(bitmask.shape) == (3, 3) and (bitmask == -1).all()
    bitmask.copy_(torch.from_numpy(rng.integers(-(2**31), 2**31, size=(3, 3), dtype=np.int64).astype(np.int32)))
    for width in (70, 100):  # logits wider than the mask's 96 bits: the rest is disallowed
        logits = torch.zeros(3, width)
        apply_token_bitmask_inplace(logits, bitmask)
        for row in range(3):
            expected = _python_bits(bitmask[row].tolist(), width)
            assert (torch.isfinite(logits[row]).tolist()) == expected
        assert unpack_token_bitmask(bitmask, width).tolist() == [_python_bits(bitmask[r].tolist(), width) for r in range(3)]
    logits = torch.zeros(4, 70)
    apply_token_bitmask_inplace(logits, bitmask[:2], indices=[3, 1])
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[2]).all()
    assert torch.isfinite(logits[3]).tolist() == _python_bits(bitmask[0].tolist(), 70)
    # An allowed logit keeps its value, a refused one is -inf, in every float dtype.
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        values = torch.from_numpy(rng.normal(size=(3, 100))).to(dtype)
        logits = values.clone()
        apply_token_bitmask_inplace(logits, bitmask)
        for row in range(3):
            for token, allowed in enumerate(_python_bits(bitmask[row].tolist(), 100)):
                assert logits[row, token].item() == (values[row, token].item() if allowed else float("-inf")), (dtype, row, token)


def test_apply_token_bitmask_refuses_what_it_cannot_mask():
    """Integer logits (no -inf), a numpy array, and indices past the logits' rows: a torch
    RuntimeError, an AttributeError and an IndexError from inside before."""
    import torch

    from tokensieve.torch import apply_token_bitmask_inplace

    bitmask = torch.zeros((2, 4), dtype=torch.int32)
    with pytest.raises(ValueError, match="floating-point torch tensor, not a torch.int64 tensor"):
        apply_token_bitmask_inplace(torch.zeros(2, 100, dtype=torch.int64), bitmask)
    with pytest.raises(ValueError, match="not ndarray"):
        apply_token_bitmask_inplace(np.zeros((2, 100)), bitmask)  # type: ignore[arg-type]
    logits = torch.zeros(4, 100)
    with pytest.raises(ValueError, match=r"rows of the logits, 0\.\.3"):
        apply_token_bitmask_inplace(logits, bitmask, indices=[0, 9])
    assert torch.isfinite(logits).all()  # nothing was masked


# -- the request-level shape -------------------------------------------------------------------


def test_request_matcher_counts_eos_and_ignores_what_follows(llama3):
    request = RequestMatcher(Matcher(llama3, Grammar.regex("ab")))
    eos = llama3.eos_token_ids[0]
    ab = llama3.encode("ab")
    assert request.validate_tokens(ab + [eos, 5, 6]) == ab + [eos]
    assert request.accept_tokens(ab + [eos, 5])
    assert request.is_terminated()
    assert request.accept_tokens([7]) and request.validate_tokens([7]) == []
    request.rollback(1)
    assert not request.is_terminated()
    twin = request.fork()
    assert twin.accept_tokens([eos]) and twin.is_terminated() and not request.is_terminated()
    assert not request.accept_tokens(llama3.encode("x"))
    request.reset()
    assert request.validate_tokens(ab) == ab


# -- transformers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_llama(llama3):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=llama3.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        pad_token_id=llama3.eos_token_ids[0], eos_token_id=llama3.eos_token_ids[0],
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_logits_processor_keeps_every_row_of_generate_in_its_schema(llama3, tiny_llama):
    import jsonschema
    import torch

    from tokensieve.hf import LogitsProcessor

    schemas = [
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["name", "n"], "additionalProperties": False},
        {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 1, "maxItems": 3},
    ]
    processor = LogitsProcessor(llama3, [Grammar.json_schema(s, whitespace="compact") for s in schemas])
    prompt = torch.tensor([llama3.encode("Answer:")] * 2)
    for do_sample in (False, True):
        processor.reset()
        torch.manual_seed(1)
        out = tiny_llama.generate(
            prompt, attention_mask=torch.ones_like(prompt), logits_processor=[processor], max_new_tokens=60,
            do_sample=do_sample, pad_token_id=llama3.eos_token_ids[0],
        )
        for row, schema in enumerate(schemas):
            tokens = out[row, prompt.shape[1] :].tolist()
            assert llama3.eos_token_ids[0] in tokens, tokens
            text = llama3.decode(tokens[: tokens.index(llama3.eos_token_ids[0])]).decode()
            jsonschema.validate(json.loads(text), schema)


def test_logits_processor_keeps_every_beam_in_its_schema(llama3, tiny_llama, monkeypatch):
    """Beam search reorders and duplicates the rows at every step: the processor once took each
    row for the row of the last step, consumed a token of another beam's text and raised "the
    model produced token …, which the grammar refuses". Every returned sequence must now be
    valid, with one grammar per prompt for its beams."""
    import jsonschema
    import torch

    from tokensieve.hf import LogitsProcessor

    schemas = [
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["name", "n"], "additionalProperties": False},
        {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 1, "maxItems": 3},
    ]
    grammars = [Grammar.json_schema(s, whitespace="compact") for s in schemas]
    eos = llama3.eos_token_ids[0]
    prompt = torch.tensor([llama3.encode("Answer:")] * 2)
    followed: list[int] = []
    follow = LogitsProcessor._follow
    monkeypatch.setattr(LogitsProcessor, "_follow", lambda self, ids: followed.append(1) or follow(self, ids))
    for beams, returned in ((3, 1), (3, 3), (4, 2)):
        processor = LogitsProcessor(llama3, grammars)
        out = tiny_llama.generate(
            prompt, attention_mask=torch.ones_like(prompt), logits_processor=[processor], max_new_tokens=60,
            num_beams=beams, num_return_sequences=returned, do_sample=False, pad_token_id=eos,
        )
        assert out.shape[0] == 2 * returned
        for row in range(out.shape[0]):
            tokens = out[row, prompt.shape[1] :].tolist()
            assert eos in tokens, tokens
            text = llama3.decode(tokens[: tokens.index(eos)]).decode()
            jsonschema.validate(json.loads(text), schemas[row // returned])
    assert followed  # the rows were reordered (else this test would not test it)


def test_logits_processor_under_assisted_decoding_is_plain_greedy(llama3, tiny_llama, monkeypatch):
    """Assisted decoding (`prompt_lookup_num_tokens`) calls the processor on draft tokens, which
    the grammar may refuse, then cuts the rows back to the accepted ones: the processor raised
    on the first refused draft. Greedy assisted decoding is lossless, so with the processor its
    output must be plain greedy decoding's, a valid instance."""
    import jsonschema
    import torch

    from tokensieve.hf import LogitsProcessor

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 4}, "n": {"type": "integer", "minimum": 0, "maximum": 999}},
        "required": ["name", "tags", "n"], "additionalProperties": False,
    }
    grammar = Grammar.json_schema(schema, whitespace="compact")
    eos = llama3.eos_token_ids[0]
    prompt = torch.tensor([llama3.encode('Example: {"name":"blue sky","tags":["red","green"],"n":12} and {"name":"x","tags":[],"n":1}. Now:')])
    rolled: list[int] = []
    rollback = Matcher.rollback
    monkeypatch.setattr(Matcher, "rollback", lambda self, count: rolled.append(count) or rollback(self, count))
    outputs = []
    for options in ({}, {"prompt_lookup_num_tokens": 4}, {"prompt_lookup_num_tokens": 10}):
        out = tiny_llama.generate(
            prompt, attention_mask=torch.ones_like(prompt), logits_processor=[LogitsProcessor(llama3, grammar)],
            max_new_tokens=60, do_sample=False, pad_token_id=eos, **options,
        )
        tokens = out[0, prompt.shape[1] :].tolist()
        assert eos in tokens, tokens
        outputs.append(tokens[: tokens.index(eos) + 1])
        jsonschema.validate(json.loads(llama3.decode(outputs[-1][:-1]).decode()), schema)
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    assert rolled  # drafts were cut back (else this test would not test it)


def test_logits_processor_follows_rows_that_move_fork_and_shrink(llama3):
    """Each row's mask is the regex oracle's after the row's text, when the rows are reordered,
    duplicated, cut back and advanced by several tokens at once; a row holding a token its
    grammar refuses (the oracle: its text cannot be completed) gets every logit masked; a row
    past its EOS is left as it is."""
    from oracle import RegexOracle

    import torch

    from tokensieve.hf import LogitsProcessor

    pattern = "(ab|cd)+x?"
    grammar = Grammar.regex(pattern)
    oracle = RegexOracle(pattern)
    masks: dict[bytes, list[bool]] = {}
    width = llama3.vocab_size + 40
    eos = llama3.eos_token_ids[0]
    ab, cd, x = (llama3.encode(t)[0] for t in ("ab", "cd", "x"))
    prompt = llama3.encode("Q")
    steps = [
        [[], [], []],
        [[ab], [cd], [ab]],
        [[cd, ab], [ab, cd], [cd, ab]],  # rows 0 and 2 from row 1 (a fork), row 1 from row 0 or 2
        [[cd, ab, ab], [cd, ab, cd], [ab, cd, x]],  # rows 0 and 1 from row 0, row 2 from row 1
        [[cd, ab], [cd, ab], [ab, cd]],  # cut back a token
        [[cd, ab, cd, ab], [cd, ab, x, ab], [ab, cd, cd, eos]],  # two more: a refused token, an EOS
        [[cd, ab, cd, ab, x], [cd, ab, x, ab, ab], [ab, cd, cd, eos, eos]],  # one more each (padding)
        [[cd, ab, cd, ab, x, eos], [cd, ab, x, ab, ab, cd], [ab, cd, cd, eos, eos, eos]],
    ]
    processor = LogitsProcessor(llama3, grammar, canonical_forced=False)
    for rows in steps:
        before = torch.randn(3, width)
        scores = processor(torch.tensor([prompt + row for row in rows]), before.clone())
        for r, row in enumerate(rows):
            kept = row[: row.index(eos) + 1] if eos in row else row  # what follows an EOS is padding
            if eos in kept:
                assert torch.equal(scores[r], before[r]), (rows, r)
                continue
            text = llama3.decode(kept)
            if not oracle.completable(text):
                assert not torch.isfinite(scores[r]).any(), (rows, r)
                continue
            if text not in masks:
                masks[text] = _python_bits(_oracle_mask(llama3, pattern, text).tolist(), width)  # (padding ids: never)
            assert torch.isfinite(scores[r]).tolist() == masks[text], (rows, r)


def test_logits_processor_allows_only_the_canonical_token_for_forced_bytes(llama3):
    import torch

    from tokensieve.hf import LogitsProcessor

    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": False}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    prompt = llama3.encode("x")
    opening = llama3.encode('{"')
    canonical = llama3.encode('{"name":"A"}')
    assert canonical[: len(opening)] == opening
    for forced_only in (True, False):
        processor = LogitsProcessor(llama3, grammar, canonical_forced=forced_only)
        processor(torch.tensor([prompt]), torch.zeros(1, llama3.vocab_size))
        scores = None
        for k in range(len(opening)):
            scores = processor(torch.tensor([prompt + opening[: k + 1]]), torch.zeros(1, llama3.vocab_size))
        allowed = torch.isfinite(scores[0]).nonzero().flatten().tolist()
        if forced_only:
            assert allowed == [canonical[len(opening)]]
        else:
            assert canonical[len(opening)] in allowed and len(allowed) > 1  # `n`, `na`, … too


@pytest.mark.parametrize("extra", [40, -56])
def test_logits_processor_masks_exactly_the_matchers_mask_sparse_and_dense(llama3, extra):
    """The processor keeps a sparse mask's few allowed logits, refuses the few refused ones of
    a mask that allows nearly all, and masks a dense one from its unpacked bits; each must
    leave finite exactly the tokens the matcher's mask allows (read bit by bit here): after `{`
    (sparse), inside a string (the complement) and in a run of letters (dense). Logits wider
    than the vocabulary, as models pad them, or narrower (Llama-3.2 Vision leaves out its
    tokenizer's `<|image|>`; here the last 56 reserved ids): the mask of the tokenizer's own
    width, cut or padded, is the oracle."""
    import torch

    from tokensieve.hf import LogitsProcessor

    json_grammar = Grammar.json_schema({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})
    letters = Grammar.regex("[A-Za-z ]{0,60}")
    width = llama3.vocab_size + extra
    prompt = llama3.encode("x")
    for grammar, text, allowed_eighths in ((json_grammar, "{", (0, 1)), (json_grammar, '{"s":"ab', (7, 8)),
                                           (letters, "Ab cd", (1, 7))):
        tokens = llama3.encode(text)
        processor = LogitsProcessor(llama3, grammar, canonical_forced=False)
        for n in range(len(tokens) + 1):
            scores = processor(torch.tensor([prompt + tokens[:n]]), torch.randn(1, width))
        oracle = Matcher(llama3, grammar)
        assert oracle.consume_tokens(tokens)
        own = _python_bits(oracle.compute_bitmask().tolist(), llama3.vocab_size)
        expected = (own + [False] * max(extra, 0))[:width]
        assert torch.isfinite(scores[0]).tolist() == expected, text
        low, high = allowed_eighths
        assert 0 < sum(expected) and low * width <= sum(expected) * 8 < high * width, (text, sum(expected))


def test_logits_processor_builds_the_tokenizer_before_generate_starts(monkeypatch):
    """Its trie in every core instance and its encoder (healing's) are built when the processor
    is made, not in generate's first step (a fresh Llama-3 tokenizer: ~0.95 s there before)."""
    import torch

    from tokensieve import Tokenizer
    from tokensieve._tokenizer import encoders
    from tokensieve.hf import LogitsProcessor

    from conftest import shared_path

    fresh = Tokenizer.from_file(shared_path() / "tokenizers" / "llama3" / "tokenizer.json.gz")  # nothing built yet
    built: list[str] = []
    build_in, load = Tokenizer._build_in, encoders._HfEncoder.__init__
    monkeypatch.setattr(Tokenizer, "_build_in", lambda self, core: built.append("trie") or build_in(self, core))
    monkeypatch.setattr(encoders._HfEncoder, "__init__", lambda self, *a: built.append("encoder") or load(self, *a))
    grammar = Grammar.json_schema({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    processor = LogitsProcessor(fresh, grammar)
    assert built.count("encoder") == 1 and built.count("trie") >= 1
    built.clear()
    prompt = fresh.encode("x")
    text = fresh.encode('{"na')  # the grammar forces `me"`: healing encodes
    for n in range(len(text) + 1):
        processor(torch.tensor([prompt + text[:n]] * 2), torch.randn(2, fresh.vocab_size))
    assert built == []


def test_logits_processor_masks_each_step_of_a_long_output_exactly(llama3):
    """One processor over many steps, where masks recur (array items, whitespace) and their
    listed ids are kept by the mask: every step leaves finite exactly what the matcher allows
    (read bit by bit), on both rows of a batch that differ."""
    import torch

    from tokensieve.hf import LogitsProcessor

    grammar = Grammar.json_schema({"type": "array", "items": {"enum": ["ab", "cd", 12]}})
    texts = ['["ab", "cd", 12, "ab", "cd", 12, "ab"]', '[12,   12, "cd",\n "ab", 12]']
    rows = [llama3.encode(text) for text in texts]
    steps = min(map(len, rows))
    width = llama3.vocab_size + 40
    processor = LogitsProcessor(llama3, grammar, canonical_forced=False)
    oracles = [Matcher(llama3, grammar, vocab_size=width) for _ in rows]
    prompt = llama3.encode("x")
    for n in range(steps + 1):
        ids = torch.tensor([prompt + row[:n] for row in rows])
        scores = processor(ids, torch.randn(2, width))
        for r, (row, oracle) in enumerate(zip(rows, oracles)):
            if n:
                assert oracle.consume_token(row[n - 1])
            expected = _python_bits(oracle.compute_bitmask().tolist(), width)
            assert torch.isfinite(scores[r]).tolist() == expected, (r, n)
    assert len(processor._sparse_indexes) < 2 * (steps + 1)  # masks recurred


def test_sparse_ids_are_kept_by_the_whole_mask(llama3):
    """Two masks with their set bits in the same words but not the same bits are two entries."""
    import torch

    from tokensieve.hf import LogitsProcessor

    processor = LogitsProcessor(llama3, Grammar.regex("a"), canonical_forced=False)
    width = 200
    for bits in ([3, 40, 41], [3, 40, 42], [3, 40, 41], [33, 70]):
        words = np.zeros(7, dtype=np.int32)
        for bit in bits:
            words[bit // 32] |= np.int32(1 << (bit % 32)) if bit % 32 < 31 else np.int32(-(1 << 31))
        index = processor._sparse_index(np, words, width, torch.device("cpu"))
        assert index.tolist() == bits
