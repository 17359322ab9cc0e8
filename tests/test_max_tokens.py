"""Token budgets (`max_tokens`) in the core, against an independent oracle.

The oracle is `ReferenceRecognizer.token_prefix_ok` (tests/reference_cfg.py): it reads the
text token by token and applies the budgets where one token ends and the next begins, on
characters, with no knowledge of the core's lexer states, rows or positions. Over a toy
vocabulary every token sequence up to a few tokens is enumerated (depth first, with rollback
between siblings), and at every prefix the core's mask must equal the oracle's answer for every
token and for EOS; consume must agree with the mask; forced bytes must be a prefix of every
allowed token's continuation.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from reference_cfg import ReferenceRecognizer
from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._ir import GrammarIR
from tokensieve._lark import lark_to_ir

VOCAB = ["a", "b", "c", "ab", "bc", "abc", "ca", "x", "ax", "cx", "xa", "1", "a1", " ", "a ", "x "]
EOS = len(VOCAB)
TOY = Tokenizer.from_token_bytes([t.encode() for t in VOCAB] + [b"<eos>"], eos_token_ids=[EOS])

GRAMMARS = {
    # After two tokens the word ends at the token boundary, so "x" (which [a-z]+ would take)
    # starts the next lexeme.
    "force_end": 'start: foo "x"\nfoo[max_tokens=2]: /[a-c]+/',
    # A lexeme that does not match when its budget runs out: the token before must finish it.
    "must_finish": 'start: foo "1"?\nfoo[max_tokens=2]: /[a-c]+x/',
    # Two readings of one text: the capped one is dropped, the other goes on.
    "dropped_reading": 'start: foo | bar\nfoo[max_tokens=1]: /[a-c]+/\nbar: /[a-c]+1/',
    # Budgets restart with each occurrence; whitespace between them is skipped.
    "repeated_with_skip": 'start: pair+\npair: word "1"\nword[max_tokens=1]: /[a-c]+/\n%ignore " "',
    # A lazy capped lexeme, and a nullable one that becomes optional.
    "lazy_and_nullable": 'start: "x" opt tail\nopt[max_tokens=1]: /[a-c]*/\ntail[lazy, max_tokens=2]: /[a-c1]*/ "x"',
}

DEPTH_MAX = 4


def allowed_ids(m: Matcher) -> set[int]:
    bits = np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[: TOY.vocab_size]
    return set(np.flatnonzero(bits).tolist())


def walk(m: Matcher, ref: ReferenceRecognizer, prefix: list[str], depth: int, stats: dict[str, int]) -> None:
    """Compare masks, consume and forced bytes at `prefix`, then recurse into allowed tokens."""
    got = allowed_ids(m)
    _, full = ref.token_prefix_ok(prefix)
    assert (EOS in got) == full, f"EOS after {prefix}"
    want = {t for t, text in enumerate(VOCAB) if ref.token_prefix_ok(prefix + [text])[0]}
    assert got - {EOS} == want, f"after {prefix}: core only {sorted(VOCAB[t] for t in got - want - {EOS})}, oracle only {sorted(VOCAB[t] for t in want - got)}"
    forced = m.compute_ff_bytes()
    if forced:
        assert not full, f"forced bytes {forced!r} where EOS may come, after {prefix}"
        for t in want:
            b = VOCAB[t].encode()
            assert b.startswith(forced) or forced.startswith(b), f"{VOCAB[t]!r} allowed against forced {forced!r} after {prefix}"
    stats["prefixes"] += 1
    stats["refused"] += len(VOCAB) - len(want)
    if depth == DEPTH_MAX:
        return
    for t in range(len(VOCAB)):
        ok = m.consume_token(t)
        assert ok == (t in want), f"consume {VOCAB[t]!r} after {prefix} gave {ok}"
        if ok:
            walk(m, ref, prefix + [VOCAB[t]], depth + 1, stats)
            m.rollback(1)


def build(name: str) -> tuple[GrammarIR, Grammar]:
    ir = lark_to_ir(GRAMMARS[name])
    return ir, Grammar.from_ir(ir)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_masks_equal_the_token_budget_oracle(name, wasm_variant):
    ir, grammar = build(name)
    ref = ReferenceRecognizer(ir)
    stats = {"prefixes": 0, "refused": 0}
    walk(Matcher(TOY, grammar), ref, [], 0, stats)
    assert stats["prefixes"] > 30 and stats["refused"] > 0, stats


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_budgets_bind_in_every_case(name):
    """Within the enumerated depth the budget changes some answer, so the oracle test above
    would fail on a core that ignores budgets."""
    ir, _ = build(name)
    free = dataclasses.replace(ir, lexemes=[dataclasses.replace(lx, max_tokens=0) for lx in ir.lexemes])
    capped, uncapped = ReferenceRecognizer(ir), ReferenceRecognizer(free)
    frontier: list[list[str]] = [[]]
    for _ in range(DEPTH_MAX):
        frontier = [p + [t] for p in frontier for t in VOCAB if uncapped.token_prefix_ok(p + [t])[0]]
        if any(capped.token_prefix_ok(p) != uncapped.token_prefix_ok(p) for p in frontier):
            return
    pytest.fail(f"{name}: the budget never changes an answer within {DEPTH_MAX} tokens")


def test_rollback_and_fork_restore_the_budget(wasm_variant):
    """Rolling back into a capped lexeme gives its budget back; a fork keeps counting alone."""
    _, grammar = build("force_end")
    m = Matcher(TOY, grammar)
    ab, c, x = VOCAB.index("ab"), VOCAB.index("c"), VOCAB.index("x")
    assert m.consume_tokens([ab, c])  # "abc": two tokens, the budget is spent
    assert not m.consume_token(c)  # a third token of the word is refused
    fork = m.fork()
    m.rollback(1)
    assert m.consume_token(c) and m.rollback(1) is None
    assert allowed_ids(m) >= {c, x}
    assert allowed_ids(fork) == {x}  # the word ended at the boundary: only "x" can follow
    assert fork.consume_token(x) and fork.is_accepting()
