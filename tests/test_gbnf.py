"""The GBNF front-end (`tokensieve._grammar.gbnf`): IR shape, lexeme merging, errors, and the language.

Three layers:

- IR-level tests pin how GBNF constructs become lexemes and rules (merged runs, inlined regular
  rules, left-recursive repetition, optional helpers for runs that can be empty).
- Error tests check the message, line and column for malformed grammars.
- Semantic tests run every grammar of the corpus (`data/grammars/gbnf_cases.json`) through the
  reference IR recognizer (`reference_cfg.py`, greedy lexing as in docs/grammar_ir.md), and
  compare it with `CharLevelMatcher` below: a plain Earley recognizer over *characters* built
  straight from the GBNF syntax tree, with no lexemes at all. Agreement on the corpus strings,
  on mutations of them and on seeded random grammars shows that merging characters into
  lexemes did not change the language.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
import string
import tracemalloc
from pathlib import Path
from typing import Iterator

import pytest
import regex
from reference_cfg import ReferenceRecognizer, _to_python_pattern

from tokensieve._errors import GrammarError
from tokensieve._grammar.gbnf.syntax import (
    CharSet,
    Choice,
    GbnfGrammar,
    Literal,
    Node,
    Repeat,
    RuleRef,
    Concat,
    SpecialToken,
    parse_gbnf,
)
from tokensieve._grammar import automata
from tokensieve._grammar.automata import _Budget, _Pool, _can_extend, _pair_search, _share_text
from tokensieve._grammar.charset import Ranges, intersects
from tokensieve._grammar.gbnf import gbnf_to_ir
from tokensieve._grammar.ir import GrammarIR

GRAMMARS_DIR = Path(__file__).resolve().parent / "data" / "grammars"
CASES: list[dict] = json.loads((GRAMMARS_DIR / "gbnf_cases.json").read_text(encoding="utf-8"))
MUTATED_TEXT_LEN_MAX = 70  # corpus strings up to this length also get mutated


# =================================================================================================
# A character-level reference: Earley over the GBNF syntax tree, one character per step
# =================================================================================================

CharSymbol = tuple[str, object]  # ("n", nonterminal) | ("c", ranges)


class CharLevelMatcher:
    """Full-match recognizer for a GBNF grammar read literally: terminals are characters.

    Repetitions expand into plain rules (`x{m,n}` into every count), so it is only meant for
    small grammars. Earley with Aycock–Horspool nullable handling.
    """

    def __init__(self, grammar: GbnfGrammar) -> None:
        self.rules: list[tuple[int, tuple[CharSymbol, ...]]] = []
        self.names: dict[str, int] = {}
        self.count = 0
        for name in grammar.rules:
            self.names[name] = self._new()
        for name, rule in grammar.rules.items():
            self._choice(self.names[name], rule.body)
        self.start = self.names["root"]
        self.by_lhs: dict[int, list[int]] = {}
        for index, (lhs, _) in enumerate(self.rules):
            self.by_lhs.setdefault(lhs, []).append(index)
        self.nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.rules:
                if lhs not in self.nullable and all(k == "n" and v in self.nullable for k, v in rhs):
                    self.nullable.add(lhs)
                    changed = True

    def _new(self) -> int:
        self.count += 1
        return self.count - 1

    def _choice(self, lhs: int, choice: Choice) -> None:
        for alternative in choice.alternatives:
            self.rules.append((lhs, tuple(self._symbol(i) for i in alternative.items)))

    def _symbol(self, node: Node) -> CharSymbol:
        if isinstance(node, CharSet):
            return ("c", node.ranges)
        if isinstance(node, RuleRef):
            return ("n", self.names[node.name])
        if isinstance(node, SpecialToken):
            return ("c", ())  # a special token is never text
        nt = self._new()
        if isinstance(node, Literal):
            self.rules.append((nt, tuple(("c", ((c, c),)) for c in node.codes)))
        elif isinstance(node, Concat):
            self.rules.append((nt, tuple(self._symbol(i) for i in node.items)))
        elif isinstance(node, Choice):
            self._choice(nt, node)
        else:
            assert isinstance(node, Repeat)
            inner = self._symbol(node.item)
            if node.max_count is None:
                star = self._new()
                self.rules += [(star, ()), (star, (("n", star), inner))]
                self.rules.append((nt, (inner,) * node.min_count + (("n", star),)))
            else:
                self.rules += [(nt, (inner,) * k) for k in range(node.min_count, node.max_count + 1)]
        return ("n", nt)

    def full_match(self, text: str) -> bool:
        sets: list[set[tuple[int, int, int]]] = [set() for _ in range(len(text) + 1)]
        sets[0] = {(r, 0, 0) for r in self.by_lhs.get(self.start, [])}
        for i in range(len(text) + 1):
            work = list(sets[i])
            while work:
                r, d, origin = work.pop()
                lhs, rhs = self.rules[r]
                new: list[tuple[int, int, int]] = []
                if d < len(rhs):
                    kind, value = rhs[d]
                    if kind == "n":
                        new = [(r2, 0, i) for r2 in self.by_lhs.get(value, [])]  # type: ignore[call-overload]
                        if value in self.nullable:
                            new.append((r, d + 1, origin))
                    elif i < len(text) and _in_ranges(value, ord(text[i])):  # type: ignore[arg-type]
                        sets[i + 1].add((r, d + 1, origin))
                else:
                    new = [
                        (r2, d2 + 1, o2)
                        for (r2, d2, o2) in sets[origin]
                        if d2 < len(self.rules[r2][1]) and self.rules[r2][1][d2] == ("n", lhs)
                    ]
                for item in new:
                    if item not in sets[i]:
                        sets[i].add(item)
                        work.append(item)
            if i < len(text) and not sets[i + 1]:
                return False
        return any(
            self.rules[r][0] == self.start and d == len(self.rules[r][1]) and o == 0
            for r, d, o in sets[len(text)]
        )


def _in_ranges(ranges: tuple[tuple[int, int], ...], c: int) -> bool:
    i = bisect.bisect_right(ranges, (c, 0x110000)) - 1
    return i >= 0 and ranges[i][0] <= c <= ranges[i][1]


# =================================================================================================
# Helpers
# =================================================================================================


def lexeme_values(ir: GrammarIR) -> list[tuple[str, str]]:
    return [(lexeme.kind, lexeme.value) for lexeme in ir.lexemes]


def rules_text(ir: GrammarIR) -> list[str]:
    """Rules as `lhs -> sym sym`, lexemes written by value, for readable assertions."""
    out = []
    for rule in ir.rules:
        rhs = [repr(ir.lexemes[s.index].value) if s.terminal else ir.nonterminals[s.index] for s in rule.rhs]
        out.append(f"{ir.nonterminals[rule.lhs]} -> {' '.join(rhs)}".rstrip())
    return out


def matcher(text: str) -> ReferenceRecognizer:
    return ReferenceRecognizer(gbnf_to_ir(text))


def case_grammar(case: dict) -> str:
    return (GRAMMARS_DIR / case["file"]).read_text(encoding="utf-8")


def mutations(text: str) -> Iterator[str]:
    """Single-character deletions and duplications: near misses of a valid text."""
    for i in range(len(text)):
        yield text[:i] + text[i + 1 :]
        yield text[:i] + text[i] + text[i:]


# =================================================================================================
# IR shape
# =================================================================================================


def test_literal_rule_becomes_one_literal_lexeme() -> None:
    ir = gbnf_to_ir('root ::= "hello"')
    assert lexeme_values(ir) == [("literal", "hello")]
    assert rules_text(ir) == ["root -> 'hello'"]
    assert ir.nonterminals[ir.start] == "root"


def test_regular_grammar_becomes_a_single_regex_lexeme() -> None:
    ir = gbnf_to_ir(case_grammar({"file": "gbnf/chess.gbnf"}))
    assert len(ir.lexemes) == 1 and ir.lexemes[0].kind == "regex"
    assert rules_text(ir) == [f"root -> {ir.lexemes[0].value!r}"]


def test_run_of_literals_and_classes_between_references_is_one_lexeme() -> None:
    ir = gbnf_to_ir('root ::= [0-9]+ "." [0-9]* ";" root?')
    assert ("regex", r"[0-9]+\.[0-9]*\;") in lexeme_values(ir)


def test_class_then_literal_in_one_run_stays_one_lexeme() -> None:
    ir = gbnf_to_ir('root ::= [a-z]* "x" ("," root)?')
    assert ("regex", "[a-z]*x") in lexeme_values(ir)
    assert matcher('root ::= [a-z]* "x" ("," root)?').full_match("abx,x,xxx")


def test_lexeme_that_would_swallow_what_follows_is_split_to_characters() -> None:
    # `[a-z]+` as a lexeme followed by a reference that starts with "x" would eat the x.
    grammar = 'root ::= [a-z]+ tail\ntail ::= "x" | "(" root ")"'
    ir = gbnf_to_ir(grammar)
    assert ("regex", "[a-z]+") not in lexeme_values(ir)
    assert ("regex", "[a-z]") in lexeme_values(ir)
    recognizer = ReferenceRecognizer(ir)
    assert recognizer.full_match("abx") and recognizer.full_match("a(xx)")
    assert not recognizer.full_match("ab")


def test_lookahead_is_judged_by_utf8_lead_byte() -> None:
    # After "x" comes "é" (C3 A9). The rival "xë" (… C3 AB) cannot take "é", but the core looks
    # one *byte* ahead and C3 would extend it, so "xë" must not stay one lexeme.
    ir = gbnf_to_ir('root ::= "x" tail | "xë" tail\ntail ::= "é" | "(" root ")"')
    assert ("literal", "xë") not in lexeme_values(ir)
    assert ReferenceRecognizer(ir).full_match("x(xëé)")
    # With a follower of another lead byte the two lexemes stay whole.
    ir = gbnf_to_ir('root ::= "x" tail | "xë" tail\ntail ::= "a" | "(" root ")"')
    assert {("literal", "x"), ("literal", "xë")} <= set(lexeme_values(ir))


def test_keywords_and_identifiers_stay_whole_lexemes_in_the_c_grammar() -> None:
    values = lexeme_values(gbnf_to_ir(case_grammar({"file": "gbnf/c.gbnf"})))
    assert ("regex", "[A-Z\\_a-z][0-9A-Z\\_a-z]*") in values
    assert {("literal", "while"), ("literal", "return")} <= set(values)


def test_regular_rule_is_inlined_into_the_run_that_uses_it() -> None:
    ir = gbnf_to_ir('root ::= "(" item ")" root?\nitem ::= [a-z]+ ("," [a-z]+)*')
    assert ("regex", r"\([a-z]+(?:\,[a-z]+)*\)") in lexeme_values(ir)
    assert "item" not in ir.nonterminals


def test_recursive_rules_stay_nonterminals() -> None:
    ir = gbnf_to_ir(case_grammar({"file": "gbnf/json.gbnf"}))
    assert {"root", "value", "object", "array", "member"} <= set(ir.nonterminals)
    assert "string" not in ir.nonterminals  # regular: inlined as one lexeme
    assert any(kind == "regex" and value.startswith('\\"') for kind, value in lexeme_values(ir))


def test_nonterminal_repetition_is_left_recursive() -> None:
    ir = gbnf_to_ir('root ::= x*\nx ::= "a" x? "b"')
    star = next(ir.nonterminals[r.rhs[0].index] for r in ir.rules if ir.nonterminals[r.lhs] == "root")
    assert f"{star} -> {star} x" in rules_text(ir)
    assert f"{star} ->" in rules_text(ir)


def test_no_lexeme_matches_the_empty_text() -> None:
    ir = gbnf_to_ir('root ::= "a" [0-9]* x [ ]? | ""\nx ::= "(" root ")" | ""')
    for kind, value in lexeme_values(ir):
        if kind == "regex":
            assert regex.fullmatch(_to_python_pattern(value), "") is None, value
        else:
            assert value
    recognizer = ReferenceRecognizer(ir)
    assert all(recognizer.full_match(t) for t in ["", "a", "a12", "a() ", "a1(a)"])


def test_bounded_repetition_of_a_nonterminal() -> None:
    recognizer = matcher('root ::= x{2,4}\nx ::= "(" root? ")"')
    assert [recognizer.full_match("()" * n) for n in range(6)] == [False, False, True, True, True, False]


def test_special_token_becomes_a_special_lexeme() -> None:
    ir = gbnf_to_ir('root ::= <[128009]> "a"')
    assert ir.lexemes[0].kind == "special" and ir.lexemes[0].token_ids == (128009,)
    assert ("literal", "a") in lexeme_values(ir)


def test_dot_matches_any_character_including_newline() -> None:
    recognizer = matcher('root ::= "<" . ">"')
    assert all(recognizer.full_match(f"<{c}>") for c in ["a", "\n", "é", "😀", "\x00"])
    assert not recognizer.full_match("<>") and not recognizer.full_match("<ab>")


def test_escapes_in_literals_and_classes() -> None:
    ir = gbnf_to_ir(r'root ::= "\x41\u00e9\U0001F600\t\"\\\[\]" [\n\r\]]')
    assert lexeme_values(ir) == [("regex", r"Aé😀\x09\"\\\[\][\x0A\x0D\]]")]
    recognizer = ReferenceRecognizer(ir)
    assert recognizer.full_match('Aé😀\t"\\[]\n') and recognizer.full_match('Aé😀\t"\\[]]')


def test_negated_classes_ranges_and_a_literal_dash() -> None:
    recognizer = matcher(r'root ::= [^a-c\n] [x-] [-y] [a-cq]')
    assert recognizer.full_match("d--a") and recognizer.full_match("zxyq")
    assert not recognizer.full_match("a--a") and not recognizer.full_match("\n--a")
    assert not recognizer.full_match("dz-a")


def test_rule_continues_over_lines_until_the_next_rule_head() -> None:
    grammar = """
    # comment before
    root ::= "a"   # trailing comment
             "b"
           | "c"
             item
    item ::=
        "d"
    """
    recognizer = matcher(grammar)
    assert recognizer.full_match("ab") and recognizer.full_match("cd")
    assert not recognizer.full_match("a")


def test_rule_names_with_dashes_digits_and_underscores() -> None:
    recognizer = matcher('root ::= my-rule_2 r2\nmy-rule_2 ::= "x"\nr2 ::= "y"')
    assert recognizer.full_match("xy")


def test_empty_alternatives_and_empty_groups_match_the_empty_text() -> None:
    recognizer = matcher('root ::= "a" ws "b" ()\nws ::= | " " | "\\n"')
    assert recognizer.full_match("ab") and recognizer.full_match("a b") and recognizer.full_match("a\nb")
    assert not recognizer.full_match("a  b")


def test_quantifiers_apply_to_the_whole_literal_and_stack() -> None:
    recognizer = matcher('root ::= "ab"+ "c"?? "d"{2}')
    assert recognizer.full_match("ababdd") and recognizer.full_match("abcdd")
    assert not recognizer.full_match("abbdd") and not recognizer.full_match("abd")


def test_deep_nesting_and_long_repetition_counts_are_handled() -> None:
    deep = "root ::= " + "(" * 199 + '"a"' + ")" * 199 + " tail\ntail ::= \"b\" root?"
    assert matcher(deep).full_match("abab")
    recognizer = matcher('root ::= "x" [a-c]{3,10000} "y"')
    assert recognizer.full_match("xabcy") and not recognizer.full_match("xaby")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_ir_compiles_in_the_core(case: dict) -> None:
    from tokensieve._grammar.grammar import Grammar

    Grammar.from_ir(gbnf_to_ir(case_grammar(case)), source=case_grammar(case), kind="gbnf")


# =================================================================================================
# Errors: message, line and column
# =================================================================================================

ERROR_CASES = [
    ("root ::= foo", 1, 10, "rule 'foo' is not defined"),
    ('start ::= "a"', 1, 1, "no 'root' rule"),
    ('root ::= "abc', 1, 10, "unterminated string literal"),
    ("root ::= [a-z", 1, 10, "unterminated character class"),
    ('root ::= "\\q"', 1, 11, "bad escape"),
    ('root ::= "\\x4"', 1, 11, "exactly 2 hex digits"),
    ('root ::= "\\uD800"', 1, 11, "not a Unicode scalar value"),
    ('root ::= "a"{3,1}', 1, 13, "minimum is above the maximum"),
    ('root ::= "a"{x}', 1, 14, "expected a number"),
    ('root ::= "a"{2,3', 1, 17, "expected '}'"),
    ('root ::= "a"{20000}', 1, 14, "above 10000"),
    ('root ::= * "a"', 1, 10, "nothing to repeat"),
    ('root ::= "a" | ?', 1, 16, "nothing to repeat"),
    ('root ::= ("a" | "b"', 1, 10, "unclosed '('"),
    ('root ::= "a" )', 1, 14, "unmatched ')'"),
    ('root ::= "a"\nroot ::= "b"', 2, 1, "defined twice"),
    ('root "a"', 1, 6, "expected '::='"),
    ('::= "a"', 1, 1, "no rule name"),
    ("root ::= [z-a]", 1, 11, "reversed range"),
    ("root ::= []", 1, 10, "matches no character"),
    ("root ::= <think>", 1, 10, "write the token id"),
    ('root ::= "a" @', 1, 14, "unexpected character '@'"),
    ('root ::= a\n\na ::= "x" |\n  b', 4, 3, "rule 'b' is not defined"),
    ('root ::= ("a"\n  x ::= "b")', 2, 3, "inside parentheses"),
    ("root ::= " + "(" * 201 + '"a"' + ")" * 201, 1, 210, "nested deeper than 200"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), ERROR_CASES, ids=[c[3] for c in ERROR_CASES])
def test_malformed_grammar_reports_line_and_column(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(GrammarError) as info:
        gbnf_to_ir(text)
    err = info.value
    assert fragment in str(err)
    assert (err.line, err.column) == (line, column), str(err)
    assert err.position is not None and text.count("\n", 0, err.position) + 1 == line
    assert f"line {line}, column {column}" in str(err)


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        gbnf_to_ir(b'root ::= "a"')  # type: ignore[arg-type]


# =================================================================================================
# Semantics on the corpus
# =================================================================================================


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_accepts_and_rejects(case: dict) -> None:
    recognizer = ReferenceRecognizer(gbnf_to_ir(case_grammar(case)))
    for text in case["accept"]:
        assert recognizer.full_match(text), f"{case['name']}: should accept {text!r}"
        for cut in range(len(text)):
            assert recognizer.completable(text[:cut]), f"{case['name']}: prefix {text[:cut]!r} of {text!r}"
    for text in case["reject"]:
        assert not recognizer.full_match(text), f"{case['name']}: should reject {text!r}"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_matches_the_character_level_reading(case: dict) -> None:
    grammar = case_grammar(case)
    lexemes = ReferenceRecognizer(gbnf_to_ir(grammar))
    characters = CharLevelMatcher(parse_gbnf(grammar))
    texts = set(case["accept"]) | set(case["reject"])
    for text in case["accept"]:
        texts.update(text[:cut] for cut in range(len(text)))
        if len(text) <= MUTATED_TEXT_LEN_MAX:
            texts.update(mutations(text))
    for text in sorted(texts):
        assert lexemes.full_match(text) == characters.full_match(text), f"{case['name']}: {text!r}"


# ---- seeded random grammars -------------------------------------------------------------------

RANDOM_ATOMS = ['"a"', '"b"', '"ab"', '"ba"', "[ab]", "[a-c]", "[^a]", '"c"', '"aa"', ".", '""']


def random_expression(rng: random.Random, names: list[str], depth: int) -> str:
    alternatives = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        items = []
        for _ in range(rng.randint(0 if rng.random() < 0.1 else 1, 3)):
            r = rng.random()
            if r < 0.35:
                item = rng.choice(names)
            elif r < 0.5 and depth < 2:
                item = "(" + random_expression(rng, names, depth + 1) + ")"
            else:
                item = rng.choice(RANDOM_ATOMS)
            item += rng.choice(["", "", "", "", "*", "+", "?", "{0,2}", "{1,2}"])
            items.append(item)
        alternatives.append(" ".join(items))
    return " | ".join(alternatives)


def random_grammar(seed: int) -> str:
    rng = random.Random(seed)
    names = ["root"] + [f"r{i}" for i in range(rng.randint(0, 3))]
    return "\n".join(f"{name} ::= {random_expression(rng, names, 0)}" for name in names)


@pytest.mark.parametrize("seed", range(60))
def test_random_grammar_matches_the_character_level_reading(seed: int) -> None:
    grammar = random_grammar(seed)
    lexemes = ReferenceRecognizer(gbnf_to_ir(grammar))
    characters = CharLevelMatcher(parse_gbnf(grammar))
    for length in range(5):
        for chars in itertools.product("abc", repeat=length):
            text = "".join(chars)
            assert lexemes.full_match(text) == characters.full_match(text), f"{grammar}\n{text!r}"


# ---- finite lexemes: word lists ---------------------------------------------------------------


def random_finite_term(pool: _Pool, rng: random.Random, depth: int = 0) -> int:
    """A term with a finite language over a small alphabet: words, character sets, sequences,
    alternations and bounded repetitions of them."""
    r = rng.random()
    if depth >= 2 or r < 0.35:
        word = "".join(rng.choice("abc") for _ in range(rng.randint(1, 4)))
        return pool.literal(map(ord, word)) if len(word) > 1 else pool.chars(((ord(word), ord(word)),))
    if r < 0.45:
        lo = rng.choice("abc")
        return pool.chars(((ord(lo), ord(rng.choice([c for c in "abc" if c >= lo]))),))
    parts = [random_finite_term(pool, rng, depth + 1) for _ in range(rng.randint(1, 3))]
    if r < 0.65:
        return pool.seq(parts, flatten=False)
    if r < 0.9:
        return pool.alt(parts)
    low = rng.randint(0, 1)
    return pool.rep(parts[0], low, low + rng.randint(0, 2))


@pytest.mark.parametrize("seed", range(20))
def test_finite_lexeme_checks_agree_with_the_derivative_search(seed: int) -> None:
    # The refinement answers "can L run into L'?" and "do L and L' share a text?" from the
    # texts when both languages are finite; the derivative search (exact within its state
    # budget, far from reached here) is the reference.
    rng = random.Random(seed)
    pool = _Pool()
    terms = [random_finite_term(pool, rng) for _ in range(12)]
    follows = [((ord("a"), ord("a")),), ((ord("b"), ord("c")),), ((ord("a"), ord("c")),), ((ord("x"), ord("z")),)]
    budget = _Budget(1 << 40)
    for a in terms:
        for b in terms:
            assert pool.texts(a, budget) is not None and pool.texts(b, budget) is not None
            shared = _pair_search(pool, a, b, lambda x, y: pool.nullable[x] and pool.nullable[y], budget)
            assert _share_text(pool, a, b, budget) == shared, (pool.pattern(a), pool.pattern(b))
            for follow in follows:
                extends = _pair_search(
                    pool, a, b, lambda x, y: pool.nullable[x] and intersects(pool.first[y], follow), budget
                )
                assert _can_extend(pool, a, follow, b, budget) == extends, (pool.pattern(a), follow, pool.pattern(b))


def test_texts_of_long_repetitions_are_not_built() -> None:
    # A literal repeated {3,9999} times (tokensieve fuzz --kind gbnf --seed 1515, input 947) is
    # finite, but its texts run to 40,000 characters, 9,997 of them: building them took 1.3 s.
    # Too long for the texts, it is left to the derivative search, at a small cost.
    pool = _Pool()
    word = pool.literal(map(ord, "xA-😀"))
    budget = _Budget(1 << 40)
    tracemalloc.start()
    try:
        assert pool.texts(pool.rep(word, 3, 9999), budget) is None
        assert pool.texts(pool.seq([pool.rep(word, 3, 9999), word], flatten=False), budget) is None
        assert pool.texts(pool.rep(pool.alt([word, pool.literal(map(ord, "ab"))]), 0, 30), budget) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # what was built (the 1.3 s built ~400 MB of texts)
    assert budget.spent < 50_000  # and the refinement's budget was charged for it
    assert pool.texts(pool.rep(word, 2, 3), budget) == {"xA-😀" * 2, "xA-😀" * 3}


def random_word_set(pool: _Pool, rng: random.Random) -> tuple[int, list[str]]:
    """A term matching a few words, all of one length or not, and its words."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"[: rng.randint(1, 36)]
    lengths = [rng.randint(1, 3)] if rng.random() < 0.7 else [1, 2, 3]
    words = sorted({
        "".join(rng.choice(alphabet) for _ in range(rng.choice(lengths))) for _ in range(rng.randint(1, 40))
    })
    if all(len(w) == 1 for w in words):
        return pool.chars(tuple((ord(w), ord(w)) for w in words)), words
    terms = [pool.literal(map(ord, w)) if len(w) > 1 else pool.chars(((ord(w), ord(w)),)) for w in words]
    return pool.alt(terms), words


def expected_texts(texts: set[str]) -> set[str] | None:
    """What `_Pool.texts` keeps: at most 20,000 texts of 400,000 characters in all."""
    return None if len(texts) > 20_000 or sum(map(len, texts)) > 400_000 else texts


@pytest.mark.parametrize("seed", range(12))
def test_texts_of_sequences_and_repetitions_are_counted_as_building_them_would(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `texts` counts the products of sets of texts of one length instead of building them when
    # they are too many (`[0-9]{0,15}` built 11,111 texts to give up, `"u" hex hex hex hex`
    # 10,648). The oracle: every concatenation, enumerated by itertools; and the budget charged
    # as when they are built (`_uniform_length` patched to find no set of one length).
    rng = random.Random(seed)
    for _ in range(8):
        state = rng.getstate()
        spent, got = [], []
        for counting in (True, False):
            rng.setstate(state)
            if not counting:
                monkeypatch.setattr(automata, "_uniform_length", lambda texts: None)
            pool = _Pool()
            if rng.random() < 0.5:
                part, words = random_word_set(pool, rng)
                low = rng.randint(0, 3)
                high = low + rng.randint(0, 4)
                if sum(len(words) ** k for k in range(low, high + 1)) > 200_000:
                    high = low  # keep the oracle's enumeration small
                term = pool.rep(part, low, high)
                word_lists = [words]
                every = {"".join(p) for k in range(low, high + 1) for p in itertools.product(words, repeat=k)}
            else:
                parts = [random_word_set(pool, rng) for _ in range(rng.randint(1, 5))]
                sizes = [len(words) for _, words in parts]
                while len(parts) > 1 and math.prod(sizes) > 200_000:
                    parts.pop()
                    sizes.pop()
                term = pool.seq([t for t, _ in parts], flatten=False)
                word_lists = [words for _, words in parts]
                every = {"".join(p) for p in itertools.product(*[words for _, words in parts])}
            budget = _Budget(1 << 40)
            got.append(pool.texts(term, budget))
            spent.append(budget.spent)
            # Texts of mixed lengths repeat in a product, which `texts` counts before removing
            # them: it may give up on fewer distinct texts than the limits. Of one length, exactly.
            assert got[-1] is None or got[-1] == every
            if all(len({len(w) for w in words}) == 1 for words in word_lists):
                assert got[-1] == expected_texts(every)
        monkeypatch.undo()
        assert got[0] == got[1] and spent[0] == spent[1]


def check_against_regex(ir: GrammarIR, pattern: str, texts: list[str], characters: str, rng: random.Random) -> None:
    """The IR (by the reference recognizer) and `regex` agree on each text of the language
    and on a near miss of each: a character replaced by one of `characters` or dropped."""
    oracle = regex.compile(pattern)
    assert all(oracle.fullmatch(t) for t in texts)
    misses = []
    for text in texts:
        cut = rng.randrange(len(text) + 1)
        misses.append(text[:cut] + rng.choice(["", *characters]) + text[cut + 1 :])
    recognizer = ReferenceRecognizer(ir)
    for text in texts + misses:
        assert recognizer.full_match(text) == bool(oracle.fullmatch(text)), text


def test_a_word_list_in_a_loop_stays_one_lexeme() -> None:
    # 3,000 words, each followed by a space, then "end": the derivative search for "can the
    # list run into itself?" met a pair per prefix of a word, ran out of states, answered yes,
    # and splitting the list a word at a time ran the analysis out of its budget (LimitError).
    rng = random.Random(5)
    words = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 9))) for _ in range(3_000)})
    ir = gbnf_to_ir("root ::= (" + " | ".join(f'"{w}"' for w in words) + ') " " root | "end"\n')
    assert len(ir.lexemes) == 2  # the list with its space, and "end"
    texts = ["".join(w + " " for w in rng.choices(words, k=rng.randint(0, 4))) + "end" for _ in range(150)]
    check_against_regex(ir, "(?:(?:" + "|".join(words) + ") )*end", texts, "a ze", rng)


def test_a_word_list_beside_an_infinite_alternative_stays_one_lexeme() -> None:
    # `item ::= words | [0-9]+`: the alternation is not finite, the derivative search over it
    # ran out of its states, and splitting it a word at a time ran the analysis out of its
    # budget (LimitError). It is now split into the list and the number first.
    rng = random.Random(6)
    words = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(3_000)})
    ir = gbnf_to_ir('root ::= item ("," item)*\nitem ::= (' + " | ".join(f'"{w}"' for w in words) + ") | [0-9]+\n")
    assert len(ir.lexemes) <= 4  # the list, the number, the comma
    item = "(?:" + "|".join(words) + "|[0-9]+)"
    texts = [
        ",".join(rng.choice(words) if rng.random() < 0.7 else str(rng.randrange(10**6)) for _ in range(rng.randint(1, 4)))
        for _ in range(150)
    ]
    check_against_regex(ir, f"{item}(?:,{item})*", texts, "a,7z", rng)


# ---- generated grammars, sampled texts ---------------------------------------------------------


def sample_texts(characters: CharLevelMatcher, rng: random.Random, count: int) -> list[str]:
    """Texts of the character-level grammar, by random derivations: each rule's shortest
    derivation is known, and past a depth or a length only shortest choices are made."""
    rules = characters.rules
    shortest: dict[int, float] = {}
    unusable = float("inf")

    def cost(rhs: tuple[CharSymbol, ...]) -> float:
        return sum(
            (1 if value else unusable) if kind == "c" else shortest.get(value, unusable)  # type: ignore[misc]
            for kind, value in rhs
        )

    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            if cost(rhs) < shortest.get(lhs, unusable):
                shortest[lhs] = cost(rhs)
                changed = True
    if characters.start not in shortest:
        return []
    texts = []
    for _ in range(count):
        out: list[str] = []
        stack: list[tuple[CharSymbol, int]] = [(("n", characters.start), 0)]
        while stack:
            (kind, value), depth = stack.pop()
            if kind == "c":
                lo, hi = rng.choice(value)  # type: ignore[arg-type]
                out.append(chr(rng.randint(lo, min(hi, lo + 40))))
                continue
            options = [r for r in characters.by_lhs[value] if cost(rules[r][1]) < unusable]  # type: ignore[index]
            if depth > 8 or len(out) > 12:
                best = min(cost(rules[r][1]) for r in options)
                options = [r for r in options if cost(rules[r][1]) == best]
            rhs = rules[rng.choice(options)][1]
            stack.extend((symbol, depth + 1) for symbol in reversed(rhs))
        texts.append("".join(out))
    return texts


@pytest.mark.parametrize("seed", range(40))
def test_generated_grammar_matches_the_character_level_reading_on_sampled_texts(seed: int) -> None:
    # Grammars of `tokensieve fuzz --kind gbnf` (clean, small counts): the refinement runs
    # several rounds on them. Texts sampled from the grammar, and near misses of them, are
    # judged by the lexeme grammar (greedy lexing, as the core does) and by the grammar read
    # a character at a time.
    from tokensieve._tools.fuzz import gen_gbnf_raw

    rng = random.Random(f"refine:{seed}")
    rng._tokensieve_clean = True  # type: ignore[attr-defined]
    rng._tokensieve_big = False  # type: ignore[attr-defined]
    grammar = gen_gbnf_raw(rng)
    try:
        ir = gbnf_to_ir(grammar)
    except GrammarError:
        pytest.skip("not a grammar (an undefined rule)")
    characters = CharLevelMatcher(parse_gbnf(grammar))
    lexemes = ReferenceRecognizer(ir)
    texts = sample_texts(characters, rng, 15)
    for text in texts:
        assert characters.full_match(text), (grammar, text)
    near = set()
    for text in texts:
        misses = list(mutations(text))
        near.update(rng.sample(misses, min(len(misses), 4)))
    for text in sorted(set(texts) | near):
        assert lexemes.full_match(text) == characters.full_match(text), f"{grammar}\n{text!r}"


@pytest.mark.parametrize("seed", range(10))
def test_next_characters_are_what_follows_each_prefix_of_the_texts(seed: int) -> None:
    # The reference: every proper prefix of every text, and the character after it there.
    rng = random.Random(seed)
    pool = _Pool()
    budget = _Budget(1 << 40)
    for _ in range(20):
        term = random_finite_term(pool, rng)
        texts = pool.texts(term, budget)
        assert texts is not None
        expected: dict[str, set[int]] = {}
        for text in texts:
            for k in range(len(text)):
                expected.setdefault(text[:k], set()).add(ord(text[k]))
        assert pool.next_characters(term, budget) == expected, pool.pattern(term)


def random_term(pool: _Pool, rng: random.Random, depth: int = 0) -> int:
    """A term over a small alphabet, finite or not (unbounded repetitions)."""
    if depth >= 3 or rng.random() < 0.3:
        lo = rng.choice("abc")
        return pool.chars(((ord(lo), ord(rng.choice([c for c in "abc" if c >= lo]))),))
    parts = [random_term(pool, rng, depth + 1) for _ in range(rng.randint(1, 3))]
    r = rng.random()
    if r < 0.4:
        return pool.seq(parts, flatten=False)
    if r < 0.7:
        return pool.alt(parts)
    low = rng.randint(0, 2)
    return pool.rep(parts[0], low, rng.choice([None, low + rng.randint(0, 3)]))


@pytest.mark.parametrize("seed", range(10))
def test_pair_search_answers_and_charges_the_same_from_remembered_moves(seed: int) -> None:
    # A pair of derivatives explored once keeps the pairs it steps to. The reference is the
    # search without them: the same pool with its moves forgotten (its derivatives still in
    # the table, so the units must be equal: the budget means the same), and a fresh pool
    # (the same answer).
    rng = random.Random(seed)
    pool = _Pool()
    terms = [random_term(pool, rng) for _ in range(8)]
    follows = [((97, 97),), ((98, 99),), ((97, 99),), ((120, 122),)]

    def ask(p: _Pool, a: int, b: int, share: bool, follow: Ranges) -> tuple[bool, int]:
        budget = _Budget(1 << 40)
        p.budget = budget
        answer = _share_text(p, a, b, budget) if share else _can_extend(p, a, follow, b, budget)
        return answer, budget.spent

    for _ in range(60):
        i, j, share, follow = rng.randrange(8), rng.randrange(8), rng.random() < 0.4, rng.choice(follows)
        ask(pool, terms[i], terms[j], share, follow)  # explores, or steps by remembered moves
        remembered = ask(pool, terms[i], terms[j], share, follow)
        moves, pool._pair_moves = pool._pair_moves, {}
        forgotten = ask(pool, terms[i], terms[j], share, follow)
        pool._pair_moves = moves
        assert remembered == forgotten, (pool.pattern(terms[i]), pool.pattern(terms[j]), share, follow)
        fresh, again = _Pool(), random.Random(seed)
        fresh_terms = [random_term(fresh, again) for _ in range(8)]
        assert fresh.pattern(fresh_terms[i]) == pool.pattern(terms[i])
        assert ask(fresh, fresh_terms[i], fresh_terms[j], share, follow)[0] == remembered[0]
