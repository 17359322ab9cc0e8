"""Masks walk from clamped lexer states (docs/lexer.md, "Clamped states"): counters that no token
can reach lose their upper bound, and a JSON string's length bound is dropped where no token can
reach it. The masks must be exactly those of the walk from the real state.

References: the same matcher with clamping off (`Core.debug_clamp(False)`: the plain walk from the
real state), and for regexes the `regex` module's partial matching (tests/oracle.py) over every
token. Small tokenizers (tokens of at most 8 bytes) put the clamp's boundary — counters near
L / min(r), length budgets near L + the pattern's completion — within a few steps of the drive;
Llama-3 (L = 128) runs the shapes MaskBench and the hostile corpus have.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import load_shared_tokenizer
from full_walk import masks_fast_and_walked
from oracle import RegexOracle
from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym
from tokensieve._grammar.json_schema.strings import STRING_CHAR


@pytest.fixture(scope="module")
def llama3() -> Tokenizer:
    return load_shared_tokenizer("llama3")


def drive(m: Matcher, tok: Tokenizer, steps: int, seed: int, check) -> int:
    """Consume up to `steps` tokens picked at random among the allowed text tokens (EOS never;
    a token with a `"`, which may end a JSON string, one time in 30), calling
    `check(clamped, real, consumed_bytes)` before each; returns the steps taken."""
    rng = random.Random(seed)
    text = b""
    for step in range(steps):
        clamped, real = masks_fast_and_walked(m, tok.vocab_size, keep_slices=True)
        check(clamped, real, text)
        allowed = [t for t in np.flatnonzero(clamped).tolist() if t not in tok.eos_token_ids]
        going_on = [t for t in allowed if b'"' not in tok.token_bytes(t)]
        if going_on and rng.random() > 1 / 30:
            allowed = going_on
        if not allowed:
            return step
        t = rng.choice(allowed)
        assert m.consume_token(t)
        text += tok.token_bytes(t)
    return steps


def assert_same(clamped: np.ndarray, real: np.ndarray, tok: Tokenizer, where: bytes) -> None:
    diff = np.flatnonzero(clamped != real).tolist()
    assert not diff, f"after {where!r}: clamped and real masks differ on {[(t, tok.token_bytes(t), int(clamped[t])) for t in diff[:8]]}"


def small_tokenizer(extra: list[bytes]) -> Tokenizer:
    """Every string of 1-2 bytes over a few characters, a few longer tokens (up to 8 bytes), EOS."""
    alphabet = [b"a", b"b", b" "]
    tokens = list(dict.fromkeys(alphabet + [x + y for x in alphabet for y in alphabet] + extra))
    tokens.append(b"<eos>")
    return Tokenizer.from_token_bytes(tokens, eos_token_ids=[len(tokens) - 1], special_token_ids=[len(tokens) - 1])


REGEX_TOKENS = [b"aaaa", b"abab", b"a a ", b"ab ab ab", b"aaaaaaaa", b"b b b b ", "é".encode(), "é a".encode(), b"\xc3"]

REGEX_PATTERNS = [
    r"(?:[ab]{1,3} ){0,40}[ab]+",
    r"(?:ab|ba){2,50}",
    r"a{0,30}b{5,60}",
    r"(?:[^ ]{1,4} {1,2}){0,25}[^ ]{1,4}",
    r"(?:ab{0,12} ?){0,60}",
    r"(?:(?:ab){1,3} ){3,30}",
    r"[ab ]{0,9}(?:a b){2,12}",
]


@pytest.mark.parametrize("pattern", REGEX_PATTERNS)
def test_regex_counters_clamped_masks_match_oracle(pattern, wasm_variant):
    tok = small_tokenizer(REGEX_TOKENS)
    oracle = RegexOracle(pattern)
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size)]
    eos = tok.eos_token_ids[0]

    def check(clamped, real, prefix):
        assert_same(clamped, real, tok, prefix)
        want = [t != eos and oracle.completable(prefix + texts[t]) for t in range(tok.vocab_size)]
        want[eos] = oracle.full_match(prefix)
        wrong = [t for t in range(tok.vocab_size) if bool(clamped[t]) != want[t]]
        assert not wrong, f"after {prefix!r}: {[(texts[t], int(clamped[t])) for t in wrong[:8]]}"

    grammar = Grammar.regex(pattern)
    steps = sum(drive(Matcher(tok, grammar), tok, 70, seed, check) for seed in range(3))
    assert steps > 30


JSON_TOKENS = [
    b'"', b"\\", b"u", b"n", b"0", b"d", b"8", b"3", b"e", b"D", b"E", b"\\n", b"\\u00e9", b"\\ud83d", b"\\ude00",
    b'\\"', b"\\\\", "é".encode(), "😀".encode(), b"\xc3", b"\xa9", b"\xf0\x9f", b"\x98\x80", b"ab ab", b"a b", b"aaaaaaaa",
    b'a"', b'b "', b"\x01", b"\t", b"b b b b ", b"\\n\\n\\n\\n", "é é ".encode(),
]

JSON_PATTERNS = [
    r"^(?:\S+\s+){0,30}\S+$",
    r"^[a-zé😀\n ]*$",
    "a",
    r"^(?:ab|é|\\){0,20}$",
    r"^$|(^(?:\S+\s+){0,99}\S+$)",
]


@pytest.mark.parametrize("pattern", JSON_PATTERNS)
def test_json_string_pattern_and_length_clamped_masks_match_real(pattern, wasm_variant):
    tok = small_tokenizer(JSON_TOKENS)
    rng = random.Random(pattern)
    lengths = [(0, 0), (0, 1), (1, 5), (0, 9), (3, 12), (0, 16), (1, 20), (0, 25), (2, 40), (0, 200), (5, None)]
    steps = 0
    for k, (min_length, max_length) in enumerate(lengths):
        schema = {"type": "string", "pattern": pattern, "minLength": min_length}
        if max_length is not None:
            schema["maxLength"] = max_length
        grammar = Grammar.json_schema(schema)
        for seed in range(2):
            steps += drive(Matcher(tok, grammar), tok, 45, rng.randrange(1 << 30),
                           lambda clamped, real, prefix: assert_same(clamped, real, tok, prefix))
    assert steps > 300  # the drives get deep into the strings


@pytest.mark.parametrize("unit", ["a ", "é ", "\\n", "ab\\u00e9 "])
def test_json_string_every_budget_value_clamped_masks_match_real(unit, wasm_variant):
    """A deterministic drive through every budget value: the text grows by short tokens until
    the string is full, so the masks at m = L + mm(P·v) - 1, where the real state must refuse
    an 8-byte token that the pattern alone would allow, are all checked."""
    tok = small_tokenizer(JSON_TOKENS)
    pattern = r"^(?:\S+\s+){0,30}\S+$" if unit.endswith(" ") else r"^(?:[a-z\n]|\\|é)+$"
    for max_length in (14, 19, 24):
        m = Matcher(tok, Grammar.json_schema({"type": "string", "pattern": pattern, "maxLength": max_length}))
        text = '"'
        ids = tok.encode('"')
        while len(json.loads(text + (unit * 2).strip() + '"')) <= max_length:
            text += unit
        ids = tok.encode(text)  # greedy longest match over the small vocabulary
        for i, t in enumerate(ids):
            clamped, real = masks_fast_and_walked(m, tok.vocab_size, keep_slices=True)
            assert_same(clamped, real, tok, b"".join(tok.token_bytes(x) for x in ids[:i]))
            assert m.consume_token(t), (text, i)


def test_json_string_lexeme_says_string_length_only_for_pattern_and_length():
    """The promise `Lexeme.string_length` makes holds only for one pattern (or format) and the
    length bound, or for the bound alone (the lexeme is then the bound): not with excluded
    values, and not without a bound."""
    from tokensieve._grammar.json_schema.compiler import json_schema_to_ir  # noqa: PLC0415
    from tokensieve._grammar.json_schema.strings import string_regex  # noqa: PLC0415

    def lexemes(schema):
        return [lx for lx in json_schema_to_ir(schema).lexemes if lx.and_patterns or lx.string_length]

    (lx,) = lexemes({"type": "string", "pattern": "^a+$", "maxLength": 9})
    assert lx.string_length and len(lx.and_patterns) == 1
    (lx,) = lexemes({"type": "string", "format": "date", "minLength": 2})
    assert lx.string_length
    assert not any(lx.string_length for lx in lexemes({"type": "string", "pattern": "^a+$"}))
    assert not any(lx.string_length for lx in lexemes({"type": "string", "pattern": "^a+$", "maxLength": 9, "not": {"const": "aa"}}))
    (lx,) = lexemes({"type": "string", "maxLength": 9})
    assert lx.string_length and not lx.and_patterns and lx.value == string_regex(0, 9)


def ir_with_lexeme(lexeme: Lexeme) -> GrammarIR:
    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    ir.add_rule(start, [Sym.t(ir.add_lexeme(lexeme))])
    return ir


def test_intersections_without_the_promise_stay_exact():
    """An intersection written by a user (regex/Lark/GBNF) is never dropped, even when it looks
    like a JSON string and its length bound: here the pattern allows a raw control byte, which a
    JSON string character does not, so the bound still refuses it. The same lexeme marked
    `string_length` (a false promise) loses that refusal: the check has teeth."""
    tok = small_tokenizer(JSON_TOKENS)
    control = tok.encode("\x01")[0]
    pattern, bound = '"[ab\\x01 ]{0,40}"', f'"{STRING_CHAR}{{0,20}}"'
    lark = Grammar.lark(f"start: S\nS: /{pattern}/ & /{bound}/\n")
    honest = Grammar.from_ir(ir_with_lexeme(Lexeme("S", "regex", pattern, and_patterns=(bound,))))
    false_promise = Grammar.from_ir(ir_with_lexeme(Lexeme("S", "regex", pattern, and_patterns=(bound,), string_length=True)))
    for grammar in (lark, honest):
        m = Matcher(tok, grammar)
        assert m.consume_token(tok.encode('"')[0])
        clamped, real = masks_fast_and_walked(m, tok.vocab_size, keep_slices=True)
        assert_same(clamped, real, tok, b'"')
        assert not clamped[control] and clamped[tok.encode("a")[0]]
    m = Matcher(tok, false_promise)
    assert m.consume_token(tok.encode('"')[0])
    clamped, real = masks_fast_and_walked(m, tok.vocab_size, keep_slices=True)
    assert clamped[control] and not real[control]


LLAMA_PATTERNS = [
    r"(?:[a-z]{1,12} ){0,300}[a-z]+",
    r"(?:[^\s]{1,40}\s{1,3}){0,999}\S{1,40}",
]


@pytest.mark.parametrize("pattern", LLAMA_PATTERNS)
def test_llama3_regex_counters_clamped_masks_match_real_and_oracle(llama3, pattern):
    oracle = RegexOracle(pattern)
    rng = random.Random(7)
    texts = [None if llama3.is_special(t) else llama3.token_bytes(t) for t in range(llama3.vocab_size)]

    def check(clamped, real, prefix):
        assert_same(clamped, real, llama3, prefix)
        sample = set(np.flatnonzero(clamped).tolist()) | set(rng.sample(range(llama3.vocab_size), 1500))
        wrong = [t for t in sample if texts[t] is not None and bool(clamped[t]) != oracle.completable(prefix + texts[t])]
        assert not wrong, f"after {prefix!r}: {[(texts[t], int(clamped[t])) for t in wrong[:8]]}"

    drive(Matcher(llama3, Grammar.regex(pattern)), llama3, 12, 1, check)


def test_llama3_json_strings_near_the_length_boundary(llama3):
    """Budgets around L + the pattern's completion (L = 128 bytes for Llama-3): the clamp holds
    while the budget is large and gives way to the real state for the last ~L characters."""
    cases = json.loads((Path(__file__).parent / "data" / "hostile" / "cases.json").read_text())
    (words,) = [c for c in cases if c["name"] == "bounded_words_and_max_length"]
    text = words["drive"]["text"]
    for schema, length in [
        ({"type": "string", "pattern": r"^(?:\S+\s+){0,99}\S+$", "minLength": 1}, 150),
        ({"type": "string", "pattern": r"^(?:[^\s]{1,40}\s{1,3}){0,999}\S{1,40}$"}, 190),
        (words["grammar"], None),
    ]:
        if length is not None:
            schema = {**schema, "maxLength": length}
        m = Matcher(llama3, Grammar.json_schema(schema))
        limit = length or 400
        ids = llama3.encode(json.dumps(text[1 : limit - 2].rstrip()))
        for i, t in enumerate(ids[:60]):
            clamped, real = masks_fast_and_walked(m, llama3.vocab_size, keep_slices=True)
            assert_same(clamped, real, llama3, b"".join(llama3.token_bytes(x) for x in ids[:i]))
            assert m.consume_token(t)


def test_llama3_long_tokens_apart_from_a_shorter_clamp(llama3):
    """Where the state clamped for 32 bytes clamps more than the one for the longest token
    (a bound ~40-160 characters away, a word count over 16), the mask walks from the former
    and takes the tokens over 32 bytes (Llama-3: runs of 33-128 spaces, of 48-96 dashes) from
    a walk of their own trie from the latter (`slicer.LongTokens`). Compared with the real
    state's walk at every step, on each side of the point where a long token stops fitting:
    48 dashes under the bound, 64 spaces (a separator) under the word count."""
    (dashes,) = llama3.encode("-" * 48)
    (spaces,) = llama3.encode(" " * 64)
    cases = [
        ({"type": "string", "pattern": r"^[-a-z ]*$", "maxLength": 110}, "ab" * 20 + "-" * 48 + "ab" * 10, dashes),
        ({"type": "string", "maxLength": 120}, "ab" * 55, dashes),
        ({"type": "string", "pattern": r"^(?:\S+\s+){0,24}\S+$", "minLength": 1, "maxLength": 150}, "ab " * 24 + "ab", spaces),
        ({"type": "string", "pattern": r"^(?:\S+\s+){0,20}\S+$"}, "ab " * 20 + "ab", spaces),
    ]
    for schema, text, long in cases:
        m = Matcher(llama3, Grammar.json_schema(schema))
        ids = llama3.encode(json.dumps(text)[:-1])
        seen = set()
        for i, t in enumerate(ids):
            clamped, real = masks_fast_and_walked(m, llama3.vocab_size, keep_slices=True)
            assert_same(clamped, real, llama3, b"".join(llama3.token_bytes(x) for x in ids[:i]))
            seen.add(bool(real[long]))
            assert m.consume_token(t)
        assert seen == {True, False}, schema
