"""Lexemes with intersection and difference (`Lexeme.and_patterns` / `not_patterns`).

The oracle is brute force: over a small alphabet, every string up to a length bound is tested
with Python's `re` against each part, and a prefix is completable when some string of the set
extends it. Tokens are single characters (`Tokenizer.from_token_bytes`), so masks compare
directly.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym

ALPHABET = "abc\""
LENGTH_MAX = 7


def language(base: str, ands: tuple[str, ...], nots: tuple[str, ...]) -> set[str]:
    out = set()
    for n in range(1, LENGTH_MAX + 1):
        for chars in itertools.product(ALPHABET, repeat=n):
            s = "".join(chars)
            if re.fullmatch(base, s) and all(re.fullmatch(a, s) for a in ands) and not any(re.fullmatch(x, s) for x in nots):
                out.add(s)
    return out


CASES = [
    # A JSON-ish key that is not one of the listed names.
    ('"[abc]{0,4}"', (), ('"a"', '"ab"')),
    # A pattern (search semantics) together with a length bound.
    ('"[abc]{0,4}"', ('".*bc.*"',), ()),
    # Everything but a few words, bounded so the brute force stays small.
    ("[abc]{1,3}", (), ("a+", "b+", "c+")),
    # An empty intersection: no token may be allowed at all.
    ("[ab]{2}", ("c+",), ()),
]


@pytest.mark.parametrize(("base", "ands", "nots"), CASES)
def test_boolean_lexeme_masks_match_brute_force(base, ands, nots, wasm_variant):
    words = language(base, ands, nots)
    tok = Tokenizer.from_token_bytes([c.encode() for c in ALPHABET] + [b"<eos>"], eos_token_ids=[len(ALPHABET)], special_token_ids=[len(ALPHABET)])
    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme("L", "regex", base, and_patterns=ands, not_patterns=nots)))])
    grammar = Grammar.from_ir(ir)
    prefixes = {w[:i] for w in words for i in range(len(w) + 1)} | {""}
    for prefix in sorted(prefixes, key=len)[:200]:
        m = Matcher(tok, grammar)
        if prefix and not m.consume_tokens([ALPHABET.index(c) for c in prefix]):
            raise AssertionError(f"{prefix!r} refused")
        bits = np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[: tok.vocab_size]
        for i, c in enumerate(ALPHABET):
            want = any(w.startswith(prefix + c) for w in words)
            assert bool(bits[i]) == want, (prefix, c)
        assert bool(bits[len(ALPHABET)]) == (prefix in words), prefix
    if not words:
        m = Matcher(tok, grammar)
        assert not np.unpackbits(m.compute_bitmask().view(np.uint8)).any()
