"""Tests of the reference CFG recognizer (tests/reference_cfg.py) against hand-derived answers.

The reference is the oracle for the core's grammar engine, so it is checked here on its own:
small grammars whose answers can be worked out by hand from docs/grammar_ir.md, including
texts that must be rejected, the longest-match and lazy rules, nullable rules, and limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import pytest

from reference_cfg import ReferenceLimitError, ReferenceRecognizer
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym


@dataclass(frozen=True)
class R:
    """A regex lexeme in a rule body (plain strings are literals or nonterminal names)."""

    pattern: str
    lazy: bool = False


@dataclass(frozen=True)
class Special:
    """A special-token lexeme in a rule body."""

    name: str


Part = Union[str, R, Special]


def build(
    rules: dict[str, list[list[Part]]], *, skip: str | None = None, allow_initial_skip: bool = False
) -> ReferenceRecognizer:
    """A recognizer for `rules`; the first key is the start; names of keys are nonterminals."""
    ir = GrammarIR(skip=skip, allow_initial_skip=allow_initial_skip)
    index = {name: ir.add_nonterminal(name) for name in rules}
    for name, alternatives in rules.items():
        for alternative in alternatives:
            rhs = []
            for part in alternative:
                if isinstance(part, R):
                    lexeme = Lexeme(f"/{part.pattern}/", "regex", part.pattern, lazy=part.lazy)
                    rhs.append(Sym.t(ir.add_lexeme(lexeme)))
                elif isinstance(part, Special):
                    rhs.append(Sym.t(ir.add_lexeme(Lexeme(part.name, "special", token_ids=(7,)))))
                elif part in index:
                    rhs.append(Sym.n(index[part]))
                else:
                    rhs.append(Sym.t(ir.add_lexeme(Lexeme(repr(part), "literal", part))))
            ir.add_rule(index[name], rhs)
    return ReferenceRecognizer(ir)


def check(rec: ReferenceRecognizer, full: list[str], prefix_only: list[str], dead: list[str]) -> None:
    """`full` match; `prefix_only` are completable but not matches; `dead` are neither."""
    for text in full:
        assert rec.full_match(text), f"should match: {text!r}"
        assert rec.completable(text), f"should be completable: {text!r}"
    for text in prefix_only:
        assert not rec.full_match(text), f"should not match: {text!r}"
        assert rec.completable(text), f"should be completable: {text!r}"
    for text in dead:
        assert not rec.full_match(text), f"should not match: {text!r}"
        assert not rec.completable(text), f"should not be completable: {text!r}"


NUM = R("[0-9]+")
ARITHMETIC: dict[str, list[list[Part]]] = {
    "expr": [["expr", "+", "term"], ["term"]],
    "term": [["term", "*", "factor"], ["factor"]],
    "factor": [[NUM], ["(", "expr", ")"]],
}


def test_arithmetic_with_precedence_levels() -> None:
    rec = build(ARITHMETIC)
    check(
        rec,
        full=["1", "12", "1+2*3", "(1+2)*3", "12*(3+45)", "((7))", "1*2*3+4+5*6"],
        prefix_only=["", "1+", "(1+2", "((", "12*(", "(1+2)*"],
        dead=["1)", "+", "1+*", "a", "()", "1++2", "1 + 2", "(1+2))", "1+2)"],
    )
    assert rec.valid_prefix_len(["1", "+", "2", ")", "3"]) == 3
    assert rec.valid_prefix_len(["(", "1", "+2", ")*3"]) == 4
    assert rec.valid_prefix_len([")"]) == 0


LISTS: dict[str, list[list[Part]]] = {
    "list": [["[", "items", "]"], ["[", "]"]],
    "items": [["items", ",", "elem"], ["elem"]],
    "elem": [["list"], [R("[a-z]+")]],
}


def test_nested_lists_with_whitespace_skip_between_lexemes_only() -> None:
    rec = build(LISTS, skip=r"[ \t\n]+")
    check(
        rec,
        full=["[]", "[a]", "[ a ]", "[a, [b,c] ,[]]", "[\n\tab ,\n[ [ ] ]\n]"],
        prefix_only=["[", "[a ", "[a,", "[ [", "[a, [b"],
        # "a b": the skip splits two names, but "," or "]" must follow a name.
        dead=[" [a]", "[a] ", "[a]  ", "[a b]", "[a b", "[a,]", "[,", "]", " "],
    )


def test_nested_lists_with_initial_skip_allow_leading_and_trailing_skip() -> None:
    rec = build(LISTS, skip=r"[ \t\n]+", allow_initial_skip=True)
    check(
        rec,
        full=[" [a]", "[a] ", " \n[ a , [] ]\t", "[a]"],
        prefix_only=["", " ", "  [", "[a "],
        dead=["[a b]", "[a] [", "[a]x"],
    )


JSON: dict[str, list[list[Part]]] = {
    "value": [["object"], ["array"], ["STRING"], ["NUMBER"], ["true"], ["false"], ["null"]],
    "object": [["{", "}"], ["{", "members", "}"]],
    "members": [["members", ",", "pair"], ["pair"]],
    "pair": [["STRING", ":", "value"]],
    "array": [["[", "]"], ["[", "elements", "]"]],
    "elements": [["elements", ",", "value"], ["value"]],
    "STRING": [[R(r'"([^"\\]|\\.)*"')]],
    "NUMBER": [[R(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")]],
}


def test_json_like_grammar_accepts_values_and_rejects_malformed_ones() -> None:
    rec = build(JSON, skip=r"\s+", allow_initial_skip=True)
    check(
        rec,
        full=[
            '{"a": [1, 2.5, -3e10, true, null], "b": {"c": "x\\"y"}}',
            " [ ] ",
            '"s"',
            "0",
            "-0.5E+3",
            "[[],{}]",
            'false',
        ],
        prefix_only=["", "tru", "nul", '{"a":', '"abc', '"a\\', "-", "1.", "1e", "[1,", '{"a" ', "[ "],
        # "01": "0" cannot grow into "01", so "1" starts a second value where none may follow.
        dead=['{"a" 1}', "[1,]", "01", "[01]", "trux", "truefalse", '{"a":}', "{,}", "[1 2]", "-a", "1.e"]
        + ["{1:2}"],
    )
    assert rec.valid_prefix_len(["[", "1,", "2", "]", "]"]) == 4
    assert rec.valid_prefix_len(['{"k"', ": ", "nu", "ll", "}"]) == 5


def test_nullable_left_recursion() -> None:
    rec = build({"s": [["a"]], "a": [[], ["a", "x"]]})
    check(rec, full=["", "x", "xxx"], prefix_only=[], dead=["y", "xy", "xxyx"])
    rec = build({"s": [["a", "y", "a"]], "a": [[], ["a", "x"]]})
    check(rec, full=["y", "xxyx", "yxx"], prefix_only=["", "xx"], dead=["yy", "xyxy", "xxz"])


def test_nullable_nonterminal_used_twice_in_one_set() -> None:
    # The naive Earley recognizer rejects "x": the second `a` is predicted after `a → ε` has
    # already completed in the same set, so `s → a a • "x"` is never added.
    rec = build({"s": [["a", "a", "x"]], "a": [[]]})
    check(rec, full=["x"], prefix_only=[""], dead=["xx"])
    rec = build({"s": [["a", "b", "z"]], "a": [[], ["q"]], "b": [["a", "a"]]})
    check(rec, full=["z", "qz", "qqz", "qqqz"], prefix_only=["", "q", "qqq"], dead=["qqqqz", "zq"])


def test_right_recursion() -> None:
    rec = build({"s": [["a", "s"], ["b"]]})
    check(rec, full=["b", "ab", "aaab"], prefix_only=["", "a", "aaa"], dead=["ba", "abb", "c"])
    rec = build({"items": [["item", ",", "items"], ["item"]], "item": [[NUM]]})
    check(rec, full=["1", "1,22,333"], prefix_only=["1,", "1,2,"], dead=[",", "1,,2", "1,2,,"])


def comment_grammar(lazy: bool) -> ReferenceRecognizer:
    # comment: "/*" /(.|\n)*\*/ /  — the body's lexeme runs to the stop string "*/".
    part: list[list[Part]] = [["/*", R(r"(.|\n)*\*/", lazy=lazy)], [R("[a-z]+")]]
    return build({"s": [["s", "part"], ["part"]], "part": part})


def test_lazy_lexeme_ends_at_the_first_stop_string() -> None:
    rec = comment_grammar(lazy=True)
    check(
        rec,
        full=["/* a */", "/**/", "/* a */b", "/* a\n b */", "x/* a */y/* b */", "/* * / */"],
        prefix_only=["/", "/*", "/*/", "/* a *", "/* a */b/"],
        # The body ended at the first "*/", so "b*/" is a name followed by a stray "*".
        dead=["/* a */b*/", "*/", "/* a */*/"],
    )


def test_greedy_version_of_the_comment_runs_to_the_last_stop_string() -> None:
    rec = comment_grammar(lazy=False)
    # Greedy: " a */b" can still grow, so the body takes it and must end in "*/" at EOS.
    check(rec, full=["/* a */", "/* a */b*/", "/**/"], prefix_only=["/* a */b"], dead=["*/"])


def test_adjacent_lexemes_that_extend_each_other_never_split() -> None:
    rec = build({"s": [["A", "B"]], "A": [[R("a+")]], "B": [[R("a+")]]})
    for text in ["a", "aa", "aaa", "aaaa"]:
        assert not rec.full_match(text), text
    assert not rec.completable("ab")
    # Documented limit: the boundary after the current lexeme is judged at the lexeme level.
    assert rec.completable("a")


def test_longest_match_without_backtracking() -> None:
    rec = build({"s": [[R("[a-z]+"), R("[0-9]+")]]})
    check(rec, full=["abc123", "a1"], prefix_only=["abc"], dead=["1", "abc123x", "abc1a"])
    # "ab" grows into the literal "ab" (longest match), so the `"a" "b"` reading is never tried.
    rec = build({"s": [["a", "b"], ["ab", "c"]]})
    check(rec, full=["abc"], prefix_only=["a", "ab"], dead=["abb", "ac"])
    # A literal cannot grow past itself: "aab" is "a" then "ab".
    rec = build({"s": [["a", "ab"]]})
    check(rec, full=["aab"], prefix_only=["aa"], dead=["ab", "aaab"])


def test_lexeme_matching_both_skip_and_a_real_lexeme_keeps_both_readings() -> None:
    rec = build({"s": [["X", "NL", "X"]], "X": [[NUM]], "NL": [["\n"]]}, skip=r"[ \n]+")
    check(rec, full=["1\n2"], prefix_only=["1\n"], dead=["1 2", "1\n\n2", "1 \n 2", "1\n 2"])
    # Longest match: once the skip has taken a space it also takes the newline, so NL is
    # never scanned and "2" comes where NL is expected.


def test_skip_lexemes_may_follow_each_other() -> None:
    rec = build({"s": [[NUM, "+", NUM]]}, skip=r"[ ]+|#[a-z]*#")
    check(rec, full=["1 #c# +2", "1#a##b#+ 2"], prefix_only=["1 #c", "1 #c# "], dead=["1 #c# 2", "#c#1+2"])


def test_special_lexemes_never_match_text_but_may_follow_it() -> None:
    rec = build({"s": [[R("[a-z]+"), Special("<|eot|>")]]})
    check(rec, full=[], prefix_only=["", "abc"], dead=["abc1", "<|eot|>"])
    rec = build({"s": [["a", Special("<|eot|>"), "b"]]})
    check(rec, full=[], prefix_only=["a"], dead=["ab"])


def test_unproductive_alternatives_do_not_take_part_in_lexing() -> None:
    # `u` derives nothing, so "ab" is not a lexeme the parser can accept and "a" "b" wins.
    rec = build({"s": [["a", "b"], ["ab", "u"]], "u": [["u", "x"]]})
    check(rec, full=["ab"], prefix_only=["a"], dead=["abx"])
    rec = build({"s": [["s", "x"]]})
    check(rec, full=[], prefix_only=[], dead=["", "x"])


def test_brace_escapes_are_rewritten_for_the_regex_module() -> None:
    rec = build({"s": [[R(r"\u{41}+\x{2603}")]]})
    check(rec, full=["AA\u2603"], prefix_only=["A"], dead=["B"])


def test_prefix_answers_do_not_depend_on_the_order_of_queries() -> None:
    text = '{"a": [1, {"b": null}], "c": "d"}x'
    warm = build(JSON, skip=r"\s+")
    forward = [warm.completable(text[:i]) for i in range(len(text) + 1)]
    backward = [build(JSON, skip=r"\s+").completable(text[:i]) for i in range(len(text) + 1)]
    assert forward == backward == [True] * len(text) + [False]
    assert warm.valid_prefix_len(list(text)) == len(text) - 1


def test_missing_symbols_are_refused() -> None:
    ir = GrammarIR(nonterminals=["s"], start=0)
    ir.add_rule(0, [Sym.t(3)])
    with pytest.raises(ValueError, match="missing symbol"):
        ReferenceRecognizer(ir)


def test_large_chart_sets_raise_instead_of_hanging() -> None:
    ir = GrammarIR()
    s = ir.add_nonterminal("s")
    x = ir.add_lexeme(Lexeme("x", "literal", "x"))
    ir.add_rule(s, [Sym.n(s), Sym.n(s)])
    ir.add_rule(s, [Sym.t(x)])
    rec = ReferenceRecognizer(ir, item_count_max=20)
    assert rec.full_match("xx")
    with pytest.raises(ReferenceLimitError):
        rec.full_match("x" * 30)
