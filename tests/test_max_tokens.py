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

from checked_masks import check_once
from reference_cfg import ReferenceRecognizer
from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._grammar.ir import GrammarIR
from tokensieve._grammar.lark import lark_to_ir

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


# The oracle's answers (allowed tokens, EOS allowed) per grammar and prefix, computed once for
# both module builds.
_ANSWERS: dict[tuple[str, tuple[str, ...]], tuple[frozenset[int], bool]] = {}


def oracle_answer(name: str, ref: ReferenceRecognizer, prefix: list[str]) -> tuple[frozenset[int], bool]:
    key = (name, tuple(prefix))
    if key not in _ANSWERS:
        want = frozenset(t for t, text in enumerate(VOCAB) if ref.token_prefix_ok(prefix + [text])[0])
        _ANSWERS[key] = (want, ref.token_prefix_ok(prefix)[1])
    return _ANSWERS[key]


def walk(m: Matcher, name: str, ref: ReferenceRecognizer, prefix: list[str], depth: int, stats: dict[str, int]) -> None:
    """Compare masks, consume and forced bytes at `prefix`, then recurse into allowed tokens."""
    got = allowed_ids(m)
    want, full = oracle_answer(name, ref, prefix)
    assert (EOS in got) == full, f"EOS after {prefix}"
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
            walk(m, name, ref, prefix + [VOCAB[t]], depth + 1, stats)
            m.rollback(1)


def build(name: str) -> tuple[GrammarIR, Grammar]:
    ir = lark_to_ir(GRAMMARS[name])
    return ir, Grammar.from_ir(ir)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_masks_equal_the_token_budget_oracle(name, wasm_variant):
    ir, grammar = build(name)
    ref = ReferenceRecognizer(ir)
    stats = {"prefixes": 0, "refused": 0}
    walk(Matcher(TOY, grammar), name, ref, [], 0, stats)
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


def test_a_budget_past_32_bits_compiles_and_binds_nowhere(wasm_variant):
    """`max_tokens=4294967296` (found by the fuzzer: the IR encoder raised struct.error) is a
    budget no output can spend: the masks are the reference's for the same IR."""
    lark = 'start: foo "x"\nfoo[max_tokens=4294967296]: /[a-c]+/'
    ir = lark_to_ir(lark)
    stats = {"prefixes": 0, "refused": 0}
    walk(Matcher(TOY, Grammar.lark(lark)), "huge", ReferenceRecognizer(ir), [], 0, stats)
    assert stats["prefixes"] > 30 and stats["refused"] > 0, stats
    tag = {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 1 << 40}}
    m = Matcher(TOY, Grammar.structural_tag(tag))
    assert m.consume_tokens([0, 5, 7]) and m.is_accepting()


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


REAL_CASES = {
    "free_text": ('start: intro "\\n" /[0-9]+/\nintro[max_tokens=4]: /[A-Za-z ,.]+/', ["Hello there, this\n123", "Hi\n7"]),
    "lazy_note": ('start: "<note>" body "</note>"\nbody[max_tokens=4, lazy]: /[a-z .]*/ "."', ["<note>a b c.</note>"]),
}


@pytest.mark.parametrize("name", list(REAL_CASES))
def test_llama3_masks_follow_the_oracle_token_by_token(name, wasm_variant):
    """Each step of the samples on Llama-3: every allowed text token and a random sample of the
    others agree with the oracle; after the budget is spent only what follows the lexeme fits."""
    import random

    from cfg_check import token_texts
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    texts = token_texts(tok)
    text, samples = REAL_CASES[name]
    ir = lark_to_ir(text)
    ref = ReferenceRecognizer(ir)
    eos = tok.eos_token_ids[0]
    for n, sample in enumerate(samples):
        m = Matcher(tok, Grammar.from_ir(ir))
        prefix: list[str] = []
        for i, t in enumerate(tok.encode(sample) + [None]):
            mask = m.compute_bitmask()
            got = set(np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: tok.vocab_size]).tolist())
            key = ("max_tokens", name, n, i)

            def verify(got=got, prefix=list(prefix), key=key) -> None:
                rng = random.Random(repr(key))
                assert (eos in got) == ref.token_prefix_ok(prefix)[1], prefix
                allowed = sorted(i for i in got if i in texts)
                candidates = set(rng.sample(allowed, min(300, len(allowed)))) | set(rng.sample(sorted(texts), 300))
                wrong = [texts[i] for i in sorted(candidates) if (i in got) != ref.token_prefix_ok(prefix + [texts[i]])[0]]
                assert not wrong, f"after {prefix}: {wrong[:8]}"

            check_once(key, mask, verify)
            if t is None:
                break
            assert m.consume_token(t), (prefix, texts[t])
            prefix.append(texts[t])
        assert m.is_accepting()


def test_a_spent_budget_leaves_only_the_next_lexeme(wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.lark('start: intro "\\n" /[0-9]+/\nintro[max_tokens=4]: /[A-Za-z ,.]+/'))
    assert m.consume_tokens(tok.encode("Hello there, this"))
    assert m.token_count == 4
    bits = np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[: tok.vocab_size]
    allowed = [tok.token_bytes(int(i)) for i in np.flatnonzero(bits)]
    assert allowed and all(b.startswith(b"\n") for b in allowed), allowed[:10]
    assert m.compute_ff_bytes() == b"\n"
    m.rollback(1)
    assert m.consume_tokens(tok.encode(" is"))  # three tokens in: one more word fits
