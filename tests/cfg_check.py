"""Shared check: a grammar's masks in the core against the reference recognizer."""

from __future__ import annotations

import random

import numpy as np

from checked_masks import check_once
from reference_cfg import ReferenceRecognizer
from tokensieve import Grammar, Matcher
from tokensieve._grammar.ir import GrammarIR

SAMPLE_SIZE = 600
# Allowed tokens checked per step (all of them when fewer): big masks would make the slow
# reference dominate the suite.
ALLOWED_SAMPLE_SIZE = 1500


def allowed_ids(m: Matcher, vocab_size: int) -> set[int]:
    return mask_ids(m.compute_bitmask(), vocab_size)


def mask_ids(mask: np.ndarray, vocab_size: int) -> set[int]:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


def token_texts(tok) -> dict[int, str]:
    out = {}
    for t in range(tok.vocab_size):
        if tok.is_special(t):
            continue
        try:
            text = tok.token_bytes(t).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text:
            out[t] = text
    return out


_TEXTS: dict[int, dict[int, str]] = {}
_VALID_PREFIX_LEN: dict[tuple, int] = {}


def check_against_reference(tok, grammar: Grammar, ir: GrammarIR, accept, reject, *, seed: str, steps_max: int = 5) -> None:
    """Replay `accept` texts checking masks at a few steps; `reject` texts fail where the reference says.

    The reference checks each step once per tokenizer; the other module build compares its mask
    with the checked one byte for byte (checked_masks.py).
    """
    texts = _TEXTS.setdefault(id(tok), token_texts(tok))
    ref = ReferenceRecognizer(ir)
    rng = random.Random(seed)
    eos = set(tok.eos_token_ids)
    for text in accept:
        assert ref.full_match(text), text
        m = Matcher(tok, grammar)
        tokens = tok.encode(text)
        prefix_bytes = b""
        steps = sorted({0, len(tokens)} | set(rng.sample(range(len(tokens) + 1), min(steps_max, len(tokens) + 1))))
        for i in range(len(tokens) + 1):
            try:
                prefix = prefix_bytes.decode("utf-8")
            except UnicodeDecodeError:
                prefix = None  # inside a character: the reference works on characters
            if i in steps and prefix is not None:
                mask = m.compute_bitmask()
                got = mask_ids(mask, tok.vocab_size)
                key = ("cfg", grammar.kind, grammar.source, seed, id(tok), text, i)

                def verify(got=got, prefix=prefix, key=key) -> None:
                    assert (got & eos == eos) == ref.full_match(prefix), f"EOS after {prefix!r}"
                    step_rng = random.Random(repr(key))
                    allowed_texts = sorted(t for t in got if t in texts)
                    if len(allowed_texts) > ALLOWED_SAMPLE_SIZE:
                        allowed_texts = step_rng.sample(allowed_texts, ALLOWED_SAMPLE_SIZE)
                    candidates = set(allowed_texts) | set(step_rng.sample(sorted(texts), SAMPLE_SIZE))
                    wrong = [(t, texts[t]) for t in sorted(candidates) if (t in got) != ref.completable(prefix + texts[t])]
                    assert not wrong[:10], f"after {prefix!r}: mask disagrees with the reference on {wrong[:10]}"

                check_once(key, mask, verify)
            if i < len(tokens):
                assert m.consume_token(tokens[i]), f"{tok.token_bytes(tokens[i])!r} refused after {prefix_bytes!r}"
                prefix_bytes += tok.token_bytes(tokens[i])
        assert m.is_accepting()
        assert m.consume_token(tok.eos_token_ids[0])
    for text in reject:
        tokens = tok.encode(text)
        reject_key = ("cfg-reject", grammar.kind, grammar.source, seed, id(tok), text)
        if reject_key not in _VALID_PREFIX_LEN:  # the reference's answer, computed once per tokenizer
            _VALID_PREFIX_LEN[reject_key] = _valid_prefix_len(ref, [tok.token_bytes(t) for t in tokens])
        want = _VALID_PREFIX_LEN[reject_key]
        m = Matcher(tok, grammar)
        assert m.validate_tokens(tokens) == want, text
        if want == len(tokens):
            assert not m.consume_tokens(tokens) or not m.is_accepting() or ref.full_match(text)


def _valid_prefix_len(ref: ReferenceRecognizer, chunks: list[bytes]) -> int:
    """Tokens from the start after which the text is still completable; a prefix that ends
    inside a character is judged at the next character boundary (the reference reads chars)."""
    data = b""
    last_ok = 0
    for i, chunk in enumerate(chunks):
        data += chunk
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not ref.completable(text):
            return last_ok
        last_ok = i + 1
    return len(chunks)
