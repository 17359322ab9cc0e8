"""Masks of grammars whose lexemes meet inside tokens, at every step of long outputs, against
the `regex` module's partial matching over the whole vocabulary.

In `start: (WORD " ")*` a token such as " world" ends a word, is a space lexeme and starts the
next word: nearly every token crosses lexeme ends. The walk cache (docs/trie.md) records a
state's first walk, replays it afterwards, and takes a large frontier subtree (the space's:
every " word" token) through a nested entry of its own, recorded on the replay after. Each
grammar here describes a regular language, so the oracle is the equivalent regex
(tests/oracle.py). Each output is driven by tokens picked at random among those the mask
allows (so states recur and odd tokens are taken too); the masks of the first steps and of
the last ones, where nested entries replay, are checked in full; the test also checks that
nested entries did replay. Runs under both module builds, on Llama-3 and GPT-2.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from checked_masks import check_once
from conftest import load_shared_tokenizer
from oracle import RegexOracle
from tokensieve import Grammar, Matcher, Tokenizer

# Lark grammar and the regex of its language.
CASES = {
    "words": ('start: (WORD " ")*\nWORD: /[a-z]+/', r"(?:[a-z]+ )*"),
    "words and numbers": (
        'start: (item " ")*\nitem: WORD | NUM\nWORD: /[a-z]+/\nNUM: /[0-9]+/',
        r"(?:(?:[a-z]+|[0-9]+) )*",
    ),
    "sentences": (
        'start: sentence+\nsentence: WORD (SEP WORD)* "." " "?\nSEP: /, | /\nWORD: /[A-Za-z]+/',
        r"(?:[A-Za-z]+(?:(?:, | )[A-Za-z]+)*\. ?)+",
    ),
}
STEPS = 40
CHECKED_FIRST = 1
CHECKED_LAST = 2


@pytest.fixture(scope="module", params=("llama3", "gpt2"))
def tok(request: pytest.FixtureRequest) -> Tokenizer:
    return load_shared_tokenizer(str(request.param))


def text_tokens(tok: Tokenizer) -> list[bytes | None]:
    return [None if tok.is_special(t) or not tok.token_bytes(t) else tok.token_bytes(t) for t in range(tok.vocab_size)]


_TEXTS: dict[int, list[bytes | None]] = {}


@pytest.mark.parametrize("case", list(CASES))
def test_masks_across_lexeme_ends_follow_the_oracle(case: str, tok: Tokenizer, wasm_variant: str) -> None:
    lark, pattern = CASES[case]
    oracle = RegexOracle(pattern)
    texts = _TEXTS.setdefault(id(tok), text_tokens(tok))
    eos = set(tok.eos_token_ids)
    rng = random.Random(case)
    m = Matcher(tok, Grammar.lark(lark))
    prefix = b""
    for step in range(STEPS):
        mask = m.compute_bitmask()
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: tok.vocab_size]
        got = set(np.flatnonzero(bits).tolist())
        if step < CHECKED_FIRST or step >= STEPS - CHECKED_LAST:

            def verify(got: set[int] = got, prefix: bytes = prefix) -> None:
                assert (got & eos == eos) == oracle.full_match(prefix), f"EOS after {prefix!r}"
                want = {t for t, data in enumerate(texts) if data is not None and oracle.completable_uncached(prefix + data)}
                missing, extra = sorted(want - (got - eos))[:10], sorted((got - eos) - want)[:10]
                assert not missing and not extra, (
                    f"after {prefix!r}: missing {[tok.token_bytes(t) for t in missing]}, "
                    f"extra {[tok.token_bytes(t) for t in extra]}"
                )

            check_once(("cfg_free_text", case, tok.vocab_size, step), mask, verify)
        # A token that keeps the output going, one with a space or a digit half the time.
        allowed = [t for t in sorted(got - eos) if texts[t] is not None]
        spaced = [t for t in allowed if any(c in texts[t] for c in b" 0123456789")]
        token = rng.choice(spaced if spaced and rng.random() < 0.5 else allowed)
        assert m.consume_token(token), f"{tok.token_bytes(token)!r} refused after {prefix!r}"
        prefix += tok.token_bytes(token)
    core = m._core
    assert core.debug_walk_replays(m._handle, nested=True) > 0, "no nested walk-cache entry replayed"
