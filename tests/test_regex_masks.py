"""Regex masks over real tokenizers, checked against an independent oracle (tests/oracle.py).

For every case in `tests/data/regex_cases.json` and every tokenizer, the accepted samples are
tokenized canonically and replayed: at each step the core's mask must equal the set of tokens t
for which (text so far + bytes(t)) can still be completed to a full match, as the `regex`
module's partial matching decides it. Rejected samples must be refused exactly where the oracle
says the text stops being completable. Every configuration runs under both module builds.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from checked_masks import check_once
from oracle import RegexOracle, regex_oracle
from tokensieve import Grammar, Matcher

CASES = json.loads((Path(__file__).parent / "data" / "regex_cases.json").read_text())
CASE_IDS = [c["name"] for c in CASES]

# Tokens checked exhaustively against the oracle per step on these; a sample elsewhere.
FULL_CHECK_TOKENIZERS = {"gpt2"}
SAMPLE_SIZE = 4000


def mask_to_set(mask: np.ndarray, vocab_size: int) -> set[int]:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


_TOKEN_BYTES: dict[int, list[bytes | None]] = {}


def text_token_bytes(tok) -> list[bytes | None]:
    """Each token's bytes, None for special and empty tokens; built once per tokenizer."""
    if id(tok) not in _TOKEN_BYTES:
        _TOKEN_BYTES[id(tok)] = [
            None if tok.is_special(t) or not tok.token_bytes(t) else tok.token_bytes(t) for t in range(tok.vocab_size)
        ]
    return _TOKEN_BYTES[id(tok)]


def expected_allowed(oracle: RegexOracle, tok, prefix: bytes, candidates) -> set[int]:
    texts = text_token_bytes(tok)
    completable = oracle.completable_uncached
    return {t for t in candidates if texts[t] is not None and completable(prefix + texts[t])}


def check_mask(m: Matcher, oracle: RegexOracle, tok, prefix: bytes, full: bool, key: tuple) -> set[int]:
    """The mask after `prefix`, checked against the oracle (once per `key`: see checked_masks.py)."""
    mask = m.compute_bitmask()
    got = mask_to_set(mask, tok.vocab_size)
    eos = set(tok.eos_token_ids)

    def verify() -> None:
        assert (got & eos == eos) == oracle.full_match(prefix), f"EOS after {prefix!r}"
        assert (got & eos) in (set(), eos)
        got_text = got - eos
        if full:
            candidates = range(tok.vocab_size)
        else:
            # Every allowed token (no false positives) plus a random sample (no false negatives).
            rng = random.Random(repr(key))
            candidates = sorted(got_text | set(rng.sample(range(tok.vocab_size), SAMPLE_SIZE)))
        want = expected_allowed(oracle, tok, prefix, candidates)
        got_in = got_text & set(candidates)
        missing = sorted(want - got_in)[:10]
        extra = sorted(got_in - want)[:10]
        assert not missing and not extra, (
            f"after {prefix!r}: missing {[(t, tok.token_bytes(t)) for t in missing]}, "
            f"extra {[(t, tok.token_bytes(t)) for t in extra]}"
        )

    check_once(key, mask, verify)
    return got


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_masks_follow_oracle_through_accepted_samples(case, tokenizer_name, tokenizer, wasm_variant):
    rng = random.Random(case["name"])
    oracle = regex_oracle(case["pattern"])
    grammar = Grammar.regex(case["pattern"])
    full = tokenizer_name in FULL_CHECK_TOKENIZERS
    for n, text in enumerate(case["accept"]):
        m = Matcher(tokenizer, grammar)
        tokens = tokenizer.encode(text)
        prefix = b""
        # Check the start, the end, and up to 4 positions in between.
        steps = sorted({0, len(tokens)} | set(rng.sample(range(len(tokens) + 1), min(4, len(tokens) + 1))))
        for i, t in enumerate(tokens):
            if i in steps:
                key = ("regex_masks", case["name"], tokenizer_name, n, i)
                allowed = check_mask(m, oracle, tokenizer, prefix, full and i == 0, key)
                assert t in allowed, f"canonical token {t} {tokenizer.token_bytes(t)!r} refused after {prefix!r}"
            assert m.consume_token(t), f"token {tokenizer.token_bytes(t)!r} refused after {prefix!r}"
            prefix += tokenizer.token_bytes(t)
        assert prefix == text.encode()
        check_mask(m, oracle, tokenizer, prefix, full, ("regex_masks", case["name"], tokenizer_name, n, "end"))
        assert m.is_accepting()
        eos = tokenizer.eos_token_ids[0]
        assert m.consume_token(eos)
        assert m.is_stopped()
        assert m.token_count == len(tokens) + 1


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_rejected_samples_fail_where_the_oracle_says(case, tokenizer, wasm_variant):
    oracle = regex_oracle(case["pattern"])
    grammar = Grammar.regex(case["pattern"])
    for text in case["reject"] + case["accept"]:
        tokens = tokenizer.encode(text)
        expected = len(tokens)
        prefix = b""
        for i, t in enumerate(tokens):
            prefix += tokenizer.token_bytes(t)
            if not oracle.completable(prefix):
                expected = i
                break
        m = Matcher(tokenizer, grammar)
        assert m.validate_tokens(tokens) == expected, text
        assert m.token_count == 0
        assert m.consume_tokens(tokens) == (expected == len(tokens))
        assert m.token_count == (len(tokens) if expected == len(tokens) else 0)
        if expected == len(tokens):
            assert m.is_accepting() == oracle.full_match(text.encode())


def test_rollback_restores_earlier_masks(tokenizer, wasm_variant):
    grammar = Grammar.regex(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z")
    text = "2024-05-06T07:08:09Z"
    tokens = tokenizer.encode(text)
    m = Matcher(tokenizer, grammar)
    masks = [m.compute_bitmask()]
    for t in tokens:
        assert m.consume_token(t)
        masks.append(m.compute_bitmask())
    for back in range(len(tokens), 0, -1):
        m.rollback(1)
        assert np.array_equal(m.compute_bitmask(), masks[back - 1])
    assert m.token_count == 0
    assert m.consume_tokens(tokens)
    m.consume_token(tokenizer.eos_token_ids[0])
    m.rollback(2)  # EOS and the last token
    assert np.array_equal(m.compute_bitmask(), masks[-2])
    with pytest.raises(Exception, match="roll back"):
        m.rollback(len(tokens) + 5)


def test_fork_and_reset_are_independent(tokenizer, wasm_variant):
    grammar = Grammar.regex("(cat|dog) (runs|sleeps)")
    m = Matcher(tokenizer, grammar)
    start = m.compute_bitmask()
    assert m.consume_tokens(tokenizer.encode("cat"))
    f = m.fork()
    assert f.consume_tokens(tokenizer.encode(" sleeps"))
    assert f.is_accepting() and not m.is_accepting()
    assert m.token_count == len(tokenizer.encode("cat"))
    m.reset()
    assert np.array_equal(m.compute_bitmask(), start)
    assert f.is_accepting()


def test_forced_bytes_follow_the_pattern(tokenizer, wasm_variant):
    m = Matcher(tokenizer, Grammar.regex(r"The answer is: (yes|no)\."))
    assert m.compute_ff_bytes() == b"The answer is: "
    assert m.consume_tokens(tokenizer.encode("The answer is: y"))
    assert m.compute_ff_bytes() == b"es."
    m2 = Matcher(tokenizer, Grammar.regex(r"[0-9]+"))
    assert m2.compute_ff_bytes() == b""
    m3 = Matcher(tokenizer, Grammar.regex("日本"))
    assert m3.compute_ff_bytes() == "日本".encode()


def test_fill_bitmask_writes_one_row_of_a_batch(tokenizer, wasm_variant):
    m = Matcher(tokenizer, Grammar.regex("[0-9]{1,3}"))
    words = (tokenizer.vocab_size + 31) // 32
    batch = np.full((3, words), -1, dtype=np.int32)
    m.fill_bitmask(batch, row=1)
    assert np.array_equal(batch[1], m.compute_bitmask())
    assert (batch[0] == -1).all() and (batch[2] == -1).all()
    with pytest.raises(ValueError, match="words"):
        m.fill_bitmask(np.zeros((1, words + 1), dtype=np.int32))
    with pytest.raises(ValueError, match="int32"):
        m.fill_bitmask(np.zeros((1, words), dtype=np.int64))
    assert m.consume_and_fill_bitmask(tokenizer.encode("7")[0], batch, row=2)
    assert np.array_equal(batch[2], m.compute_bitmask())


def test_fill_bitmask_follows_the_buffer_and_row_it_is_given(tokenizer, wasm_variant):
    # Fills of the same (array, row) reuse its validated view; any other target must be
    # validated and written afresh.
    m = Matcher(tokenizer, Grammar.regex("[0-9]{1,3}"))
    words = (tokenizer.vocab_size + 31) // 32
    first = np.full((2, words), -1, dtype=np.int32)
    second = np.full((2, words), -1, dtype=np.int32)
    want = m.compute_bitmask()
    m.fill_bitmask(first, row=0)
    m.fill_bitmask(first, row=0)
    m.fill_bitmask(first, row=1)
    m.fill_bitmask(second, row=1)
    assert np.array_equal(first[0], want) and np.array_equal(first[1], want)
    assert (second[0] == -1).all() and np.array_equal(second[1], want)
    assert m.consume_token(tokenizer.encode("7")[0])
    m.fill_bitmask(second, row=1)
    assert np.array_equal(second[1], m.compute_bitmask()) and not np.array_equal(second[1], want)
    with pytest.raises(ValueError, match="int32"):
        m.fill_bitmask(np.zeros((1, words), dtype=np.int64))


def test_a_new_matcher_reuses_another_matchers_checks_of_an_array_and_keeps_its_own_bounds(tokenizer, wasm_variant):
    # The last array any matcher checked is not checked again for a new matcher (a server's
    # batch array): its rows still are, and another vocabulary width still is refused.
    words = (tokenizer.vocab_size + 31) // 32
    batch = np.full((3, words), -1, dtype=np.int32)
    Matcher(tokenizer, Grammar.regex("[0-9]{1,3}")).fill_bitmask(batch, 0)
    fresh = Matcher(tokenizer, Grammar.regex("[a-c]+"))
    fresh.fill_bitmask(batch, 2)
    assert mask_to_set(batch[2], tokenizer.vocab_size) == oracle_set(tokenizer, "[a-c]+", b"")
    assert (batch[1] == -1).all()
    for bad in (3, -1):
        with pytest.raises(ValueError, match="row"):
            Matcher(tokenizer, Grammar.regex("[a-c]+")).fill_bitmask(batch, bad)
    other = Matcher(tokenizer, Grammar.regex("[a-c]+"), vocab_size=words * 32 + 32)
    with pytest.raises(ValueError, match="words"):
        other.fill_bitmask(batch, 0)


_ORACLE_SETS: dict[tuple[int, str, bytes], set[int]] = {}


def oracle_set(tok, pattern: str, prefix: bytes) -> set[int]:
    """Every token the regex oracle allows after `prefix` (EOS when it fully matches), over
    the whole vocabulary; once per tokenizer, pattern and prefix."""
    key = (id(tok), pattern, prefix)
    if key not in _ORACLE_SETS:
        oracle = regex_oracle(pattern)
        ids = expected_allowed(oracle, tok, prefix, range(tok.vocab_size))
        _ORACLE_SETS[key] = ids | set(tok.eos_token_ids) if oracle.full_match(prefix) else ids
    return _ORACLE_SETS[key]


def test_fill_bitmask_moves_between_rows_of_one_array(tokenizer, wasm_variant):
    # Another row of the last array is a bounds check and a slice of its whole view; rows
    # outside it, negative rows, bools and the rows of an array that is not contiguous as a
    # whole still go through every check. Every row written is checked against the oracle.
    m = Matcher(tokenizer, Grammar.regex("[0-9]{1,3}"))
    words = (tokenizer.vocab_size + 31) // 32
    size = tokenizer.vocab_size
    want, after = oracle_set(tokenizer, "[0-9]{1,3}", b""), oracle_set(tokenizer, "[0-9]{1,3}", b"7")
    batch = np.full((4, words), -1, dtype=np.int32)
    for row in (2, 0, 3, 2):
        m.fill_bitmask(batch, row)
    assert all(mask_to_set(batch[row], size) == want for row in (0, 2, 3)) and (batch[1] == -1).all()
    for bad in (4, -1, True):
        with pytest.raises(ValueError, match="row"):
            m.fill_bitmask(batch, bad)
    with pytest.raises(ValueError, match="row"):
        m.consume_and_fill_bitmask(tokenizer.encode("7")[0], batch, 9)
    assert m.consume_and_fill_bitmask(tokenizer.encode("7")[0], batch, np.int64(1))
    assert mask_to_set(batch[1], size) == after != want
    strided = np.full((6, words), -1, dtype=np.int32)
    every_other = strided[::2]  # rows contiguous, the whole not
    for row in (1, 2, 0):
        m.fill_bitmask(every_other, row)
    assert all(mask_to_set(strided[i], size) == after for i in (0, 2, 4))
    assert all((strided[i] == -1).all() for i in (1, 3, 5))
    single = np.zeros(words, dtype=np.int32)
    m.fill_bitmask(single)
    assert mask_to_set(single, size) == after
    with pytest.raises(ValueError, match="only row 0"):
        m.fill_bitmask(single, 1)
    import torch  # in the test extra

    tensor = torch.full((3, words), -1, dtype=torch.int32)
    for row in (2, 0, 2):
        m.fill_bitmask(tensor, row)
    assert mask_to_set(tensor[0].numpy(), size) == after and mask_to_set(tensor[2].numpy(), size) == after
    assert (tensor[1] == -1).all()
