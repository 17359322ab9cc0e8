"""Large alternations (issue 9, item 4): a list of 10,000 names as a regex alternation,
`Grammar.choice`, a Lark rule, a JSON Schema `enum`, and an IR of 10,000 literal lexemes (what
the core merges into one lexeme itself).

Masks are checked against an oracle kept here: the set of every byte prefix of every allowed
output. A token is allowed exactly when the output so far plus its bytes is such a prefix, and
EOS exactly when the output so far is a whole word. Memory is checked in a fresh core instance:
a grammar of 10,000 words must take at most 20 MB of linear memory, give back every byte it
allocated when dropped, and a second compile/drop must not grow linear memory again.
Timings are not asserted here (`tokensieve bench alternations` prints them).
"""

from __future__ import annotations

import gc
import json
from typing import Any, Iterator

import pytest
from conftest import load_shared_tokenizer

from tokensieve import Grammar, LimitError, Limits, Matcher
from tokensieve._tools.hostile import identifier_words
from tokensieve._core import CoreOptions, CorePool
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym
from tokensieve._decoding.matcher import mask_token_ids

WORD_COUNT = 10_000
MEMORY_MAX_BYTES = 20 * 2**20
# What a dropped grammar may leave allocated: nothing but allocator rounding.
LEFT_AFTER_DROP_KIB = 64

# Words that need escaping in a regex, a Lark string or JSON, prefixes of other words, and
# multi-byte characters (a token may end inside one).
SPECIAL_WORDS = [
    "get", "get_", "ge", "a.b", "x|y", "(paren)", "star*", "plus+", "q?", "[br]", "{c}", "^caret$",
    "dash-ed", "slash/ed", "naïve", "日本語", "日本", "emoji😀", 'quote"d', "back\\slash", "tab\tbed",
]  # fmt: skip
# JSON allows other spellings (`\u00e9`, `\"`) of these: the oracle below knows only one.
JSON_PLAIN = [w for w in SPECIAL_WORDS if all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in w)]

FORMS = ("regex", "choice", "lark", "gbnf", "json_enum", "ir_literals")


def _regex_escape(word: str) -> str:
    return "".join("\\" + c if c in "\\^$.|?*+()[]{}/-" else (f"\\x{ord(c):02x}" if ord(c) < 0x20 else c) for c in word)


def words_for(form: str) -> list[str]:
    base = identifier_words(WORD_COUNT)
    return base + (JSON_PLAIN if form == "json_enum" else SPECIAL_WORDS)


def build(form: str, words: list[str], limits: Limits | None = None) -> Grammar:
    if form == "regex":
        return Grammar.regex("(" + "|".join(_regex_escape(w) for w in words) + ")", limits=limits)
    if form == "choice":
        return Grammar.choice(words, limits=limits)
    if form == "lark":
        return Grammar.lark("start: " + " | ".join(json.dumps(w) for w in words) + "\n", limits=limits)
    if form == "gbnf":  # was a LimitError (gbnf_analysis) after 0.7 s: one lexeme per word
        quoted = ('"' + w.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"' for w in words)
        return Grammar.gbnf("root ::= " + " | ".join(quoted) + "\n", limits=limits)
    if form == "json_enum":
        return Grammar.json_schema({"enum": words}, whitespace="compact", limits=limits)
    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    for w in words:
        ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme(repr(w), "literal", w)))])
    return Grammar.from_ir(ir, source="10,000 literal lexemes", kind="ir", limits=limits)


def output(form: str, word: str) -> bytes:
    return (json.dumps(word) if form == "json_enum" else word).encode("utf-8")


class Oracle:
    """Allowed tokens after an output, from the set of the outputs' byte prefixes."""

    def __init__(self, tokenizer: Any, outputs: list[bytes]) -> None:
        self.tokenizer = tokenizer
        self.whole = set(outputs)
        self.prefixes = {o[:i] for o in outputs for i in range(1, len(o) + 1)}
        self.text_tokens = [
            (t, tokenizer.token_bytes(t)) for t in range(tokenizer.vocab_size) if not tokenizer.is_special(t)
        ]

    def allowed(self, done: bytes) -> set[int]:
        prefixes = self.prefixes
        out = {t for t, data in self.text_tokens if data and done + data in prefixes}
        if done in self.whole:
            out |= set(self.tokenizer.eos_token_ids)
        return out


@pytest.fixture(scope="module")
def llama3() -> Any:
    return load_shared_tokenizer("llama3")


def _drive_words(words: list[str]) -> list[str]:
    """Words to decode: short ones, ones that are prefixes of others, multi-byte ones, and a
    spread of the generated identifiers."""
    picked = [w for w in ("ge", "get", "get_", "日本", "emoji😀", "a.b", "tab\tbed") if w in words]
    return picked + words[:: len(words) // 6][:6]


@pytest.mark.parametrize("form", FORMS)
def test_masks_match_the_word_prefixes(form: str, llama3: Any) -> None:
    words = words_for(form)
    oracle = Oracle(llama3, [output(form, w) for w in words])
    grammar = build(form, words)
    for word in _drive_words(words):
        matcher = Matcher(llama3, grammar)
        done = b""
        for token in [*llama3.encode(output(form, word).decode("utf-8")), None]:
            got = set(mask_token_ids(matcher.compute_bitmask(), llama3.vocab_size))
            expected = oracle.allowed(done)
            assert got == expected, (
                f"{form}, word {word!r} after {done!r}: unexpected {sorted(got - expected)[:5]}, "
                f"missing {sorted(expected - got)[:5]}"
            )
            if token is None:
                break
            assert matcher.consume_token(token)
            done += llama3.token_bytes(token)
        assert done == output(form, word)
        assert matcher.is_accepting()


def test_words_that_are_not_listed_are_refused(llama3: Any) -> None:
    words = words_for("choice")
    listed = set(words)
    for form in ("regex", "choice", "lark", "ir_literals"):
        grammar = build(form, words)
        for text in ("get_user_by_id_and_more", "getx", "日", "emoji"):
            assert text not in listed
            matcher = Matcher(llama3, grammar)
            ok = all(matcher.consume_token(t) for t in llama3.encode(text))
            assert not (ok and matcher.is_accepting()), (form, text)


def _cycle(form: str, words: list[str], tokenizer: Any, pool: CorePool) -> Iterator[int]:
    """Compile, mask along one word, drop; yields the live KiB while the grammar is alive."""
    grammar = build(form, words)
    matcher = Matcher(tokenizer, grammar, pool=pool)
    word = words[len(words) // 3]
    matcher.compute_bitmask()
    for token in tokenizer.encode(output(form, word).decode("utf-8")):
        assert matcher.consume_token(token)
        matcher.compute_bitmask()
    yield pool.first().live_kib()
    del grammar, matcher
    gc.collect()


@pytest.mark.parametrize("form", FORMS)
def test_memory_is_bounded_and_returned(form: str, llama3: Any) -> None:
    words = words_for(form)
    pool = CorePool(CoreOptions(instances=1))
    core = pool.first()
    # The grammar's own memory: the instance's pattern cache (bounded on its own, docs/lexer.md)
    # would keep the patterns a second compile meets, in memory the first one freed.
    core.debug_pattern_cache(False)
    # The tokenizer and its lazily built tables first: what follows is the grammar's own.
    warm = Matcher(llama3, Grammar.regex("[a-z]+"), pool=pool)
    warm.compute_bitmask()
    del warm
    gc.collect()
    live0 = core.live_kib()
    linear0 = core.memory_size_bytes()
    for _ in _cycle(form, words, llama3, pool):
        pass
    grown = core.memory_size_bytes() - linear0
    assert grown <= MEMORY_MAX_BYTES, f"{form}: 10,000 words grew linear memory by {grown / 2**20:.1f} MB"
    left = core.live_kib() - live0
    assert left <= LEFT_AFTER_DROP_KIB, f"{form}: {left} KiB still allocated after the grammar was dropped"
    linear1 = core.memory_size_bytes()
    for _ in range(2):
        for _ in _cycle(form, words, llama3, pool):
            pass
    assert core.memory_size_bytes() == linear1, f"{form}: compiling it again grew linear memory"
    assert core.live_kib() - live0 <= LEFT_AFTER_DROP_KIB


def test_a_tight_compile_budget_is_a_limit_error_not_a_hang(llama3: Any) -> None:
    words = words_for("regex")
    for form in ("regex", "ir_literals"):
        with pytest.raises(LimitError) as caught:
            build(form, words, limits=Limits(compile_fuel_max=10_000))
        assert caught.value.limit == "compile_fuel"
