"""A consume that the last mask allows is applied in the next call into the core (the next
fill, in the same call; in `fill_bitmasks`, on the thread that fills the instance).

Every mask is checked against the regex oracle (`oracle.RegexOracle`: Python's `re` decides
whether a byte string can still be completed), never against the matcher's own earlier
output; the tests also check that the deferred path was the one taken, so they cannot pass by
the old path alone.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from cfg_check import mask_ids
from oracle import RegexOracle
from tokensieve import CoreOptions, CorePool, CoreTrap, Grammar, LimitError, Limits, Matcher, Tokenizer, fill_bitmasks

PATTERNS = (
    r'\{"id": [0-9]{1,4}, "tags": \["[a-z]+"(, "[a-z]+")*\]\}',
    r"(yes|no|maybe)( and (yes|no))*\.",
    r"[a-z]{2,6}( [a-z]{2,6}){0,4}!",
)
TEXTS = (
    b'{"id": 271, "tags": ["alpha", "beta", "gamma"]}',
    b"maybe and yes and no.",
    b"hello small world!",
)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.default()


@pytest.fixture(scope="module")
def texts(tok: Tokenizer) -> list[bytes]:
    return [tok.token_bytes(t) for t in range(tok.vocab_size)]


_known: dict[tuple[int, bytes], set[int]] = {}


def oracle_ids(tok: Tokenizer, texts: list[bytes], oracle: RegexOracle, prefix: bytes) -> set[int]:
    """The ids the oracle allows after `prefix` (EOS when `prefix` is a whole match)."""
    key = (id(oracle), prefix)
    if key not in _known:
        want = {t for t, b in enumerate(texts) if b and not tok.is_special(t) and oracle.completable(prefix + b)}
        if oracle.full_match(prefix):
            want |= set(tok.eos_token_ids)
        _known[key] = want
    return _known[key]


def test_a_decoding_loop_defers_its_consumes_and_keeps_the_oracle_masks(tok, texts):
    for pattern, text in zip(PATTERNS, TEXTS):
        oracle = RegexOracle(pattern)
        m = Matcher(tok, Grammar.regex(pattern))
        row = np.zeros((1, m.mask_words), dtype=np.int32)
        prefix = b""
        for token in tok.encode(text):
            m.fill_bitmask(row, 0)
            assert mask_ids(row[0], tok.vocab_size) == oracle_ids(tok, texts, oracle, prefix)
            assert m.consume_token(token)
            assert m._pending == token  # the deferred path, not a call
            prefix += texts[token]
        assert m.is_accepting() == oracle.full_match(prefix)
        assert m._pending == -1 and m.token_count == len(tok.encode(text))


def test_a_token_the_mask_refuses_is_refused_and_changes_nothing(tok, texts):
    pattern = PATTERNS[1]
    oracle = RegexOracle(pattern)
    m = Matcher(tok, Grammar.regex(pattern))
    first = tok.encode("maybe")[0]
    m.compute_bitmask()
    assert m.consume_token(first)
    prefix = texts[first]
    m.compute_bitmask()
    refused = next(t for t in range(tok.vocab_size) if texts[t] and not oracle.completable(prefix + texts[t]))
    assert not m.consume_token(refused)
    assert m.consumed_tokens == [first]
    assert mask_ids(m.compute_bitmask(), tok.vocab_size) == oracle_ids(tok, texts, oracle, prefix)


def test_every_other_call_sees_the_pending_token(tok, texts):
    """Random scripts mixing fills and deferred consumes with every other kind of call; after
    each call the mask (a fresh fill) is the oracle's at the tokens the matcher reports."""
    rng = random.Random(7)
    for pattern, text in zip(PATTERNS, TEXTS):
        oracle = RegexOracle(pattern)
        tokens = tok.encode(text)
        for _ in range(3):
            m = Matcher(tok, Grammar.regex(pattern))
            spare: list[Matcher] = []
            at = 0
            while at < len(tokens):
                m.compute_bitmask()
                assert m.consume_token(tokens[at])
                at += 1
                assert m._pending == tokens[at - 1]
                action = rng.choice(["fill", "rollback", "fork", "accepting", "stopped", "count", "ff", "validate", "more"])
                if action == "rollback":
                    m.rollback(1)
                    at -= 1
                    m.compute_bitmask()
                    assert m.consume_token(tokens[at])
                    at += 1
                elif action == "fork":
                    spare.append(m.fork())
                    assert spare[-1].consumed_tokens == tokens[:at]
                elif action == "accepting":
                    assert m.is_accepting() == oracle.full_match(b"".join(texts[t] for t in tokens[:at]))
                elif action == "stopped":
                    m.is_stopped()
                elif action == "count":
                    assert m.token_count == at
                elif action == "ff":
                    m.compute_ff_bytes()
                elif action == "validate":
                    assert m.validate_tokens(tokens[at:]) == len(tokens) - at
                elif action == "more" and at < len(tokens):
                    assert m.consume_tokens(tokens[at : at + 2])
                    at = min(at + 2, len(tokens))
                assert m.consumed_tokens == tokens[:at]
                prefix = b"".join(texts[t] for t in tokens[:at])
                assert mask_ids(m.compute_bitmask(), tok.vocab_size) == oracle_ids(tok, texts, oracle, prefix)
            for copy in spare:
                prefix = b"".join(texts[t] for t in copy.consumed_tokens)
                assert mask_ids(copy.compute_bitmask(), tok.vocab_size) == oracle_ids(tok, texts, oracle, prefix)


def test_a_batch_fill_consumes_the_pending_tokens_on_every_instance(tok, texts):
    pool = CorePool(CoreOptions(instances=2))
    oracles = [RegexOracle(p) for p in PATTERNS]
    matchers = [Matcher(tok, Grammar.regex(PATTERNS[i % 3]), pool=pool) for i in range(24)]
    assert len({m._core for m in matchers}) == 2
    scripts = [tok.encode(TEXTS[i % 3]) for i in range(24)]
    bitmask = np.zeros((24, matchers[0].mask_words), dtype=np.int32)
    for step in range(max(map(len, scripts))):
        fill_bitmasks(matchers, bitmask)
        for i, m in enumerate(matchers):
            prefix = b"".join(texts[t] for t in m.consumed_tokens)
            assert mask_ids(bitmask[i], tok.vocab_size) == oracle_ids(tok, texts, oracles[i % 3], prefix), (i, step)
            assert m._pending == -1
            if step < len(scripts[i]):
                assert m.consume_token(scripts[i][step])
                assert m._pending == scripts[i][step]


def test_a_pending_token_that_hits_a_limit_fails_its_batch_row_alone(tok, texts):
    """The hostile matcher runs into its lexer-state limit inside the batch call that applies
    its deferred consume: `fill_bitmasks` raises that limit after filling every other row."""
    pool = CorePool(CoreOptions(instances=2))
    pattern = PATTERNS[2]
    oracle = RegexOracle(pattern)
    good = [Matcher(tok, Grammar.regex(pattern), pool=pool) for _ in range(20)]
    hostile = Matcher(tok, Grammar.regex("(a|b)*a(a|b){12}", limits=Limits(dfa_state_count_max=50)), pool=pool)
    batch = good[:10] + [hostile] + good[10:]
    bitmask = np.zeros((len(batch), hostile.mask_words), dtype=np.int32)
    hostile_tokens = tok.encode("ab" * 5 + "ba" * 5 + "aabb" * 10)
    good_tokens = tok.encode(TEXTS[2])
    for step, token in enumerate(hostile_tokens):
        try:
            fill_bitmasks(batch, bitmask)
        except LimitError as err:
            assert err.limit == "lexer_states"
            break
        if step < len(good_tokens):
            for m in good:
                assert m.consume_token(good_tokens[step])
        before, last = hostile.consumed_tokens, token
        assert hostile.consume_token(token)
        assert hostile._pending == token
    else:
        pytest.fail("the hostile matcher never reached its limit")
    # Whether the limit hit consuming the token or filling after it, the matcher's tokens are
    # the core's.
    assert hostile.consumed_tokens in (before, before + [last])
    assert hostile.token_count == len(hostile.consumed_tokens)
    prefix = b"".join(texts[t] for t in good_tokens[:step])
    want = oracle_ids(tok, texts, oracle, prefix)
    for i, m in enumerate(batch):
        if m is not hostile:
            assert mask_ids(bitmask[i], tok.vocab_size) == want
    hostile.rollback(1)  # the matcher goes on from before the last consumed token
    hostile.reset()
    assert hostile.consume_token(tok.encode("ab")[0])


def test_a_pending_token_moves_with_its_matcher_to_a_new_instance(tok, texts):
    pool = CorePool(CoreOptions(instances=2))
    pattern = PATTERNS[0]
    oracle = RegexOracle(pattern)
    tokens = tok.encode(TEXTS[0])
    m = Matcher(tok, Grammar.regex(pattern), pool=pool)
    for token in tokens[:5]:
        m.compute_bitmask()
        assert m.consume_token(token)
    assert m._pending == tokens[4]
    neighbour = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
    while neighbour._core is not m._core:
        neighbour = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool)
    with pytest.raises(CoreTrap):
        neighbour._core.debug_trap()
    prefix = b"".join(texts[t] for t in tokens[:5])
    assert mask_ids(m.compute_bitmask(), tok.vocab_size) == oracle_ids(tok, texts, oracle, prefix)
    assert m.token_count == 5


def test_without_a_fill_a_consume_is_a_call_as_before(tok: Any):
    m = Matcher(tok, Grammar.regex(PATTERNS[1]))
    assert m.consume_token(tok.encode("maybe")[0])
    assert m._pending == -1
    assert not m.consume_token(tok.encode("!")[0])


def test_eos_after_eos_is_refused_after_a_fill(tok):
    """After a consumed EOS the mask still allows EOS (a finished row stays a valid mask), and
    consuming it again is refused: EOS is never left pending (found by `tokensieve fuzz`)."""
    m = Matcher(tok, Grammar.regex("ab"))
    for token in tok.encode("ab"):
        m.compute_bitmask()
        assert m.consume_token(token)
    eos = tok.eos_token_ids[0]
    m.compute_bitmask()
    assert m.consume_token(eos)
    assert eos in mask_ids(m.compute_bitmask(), tok.vocab_size + 1)
    assert not m.consume_token(eos)
    assert m.consumed_tokens == tok.encode("ab") + [eos]
