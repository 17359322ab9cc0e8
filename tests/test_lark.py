"""The Lark-like front-end (`tokensieve._grammar.lark.lark_to_ir`): IR shape, errors, and meaning.

- IR-level tests parse small grammars and inspect lexemes, rules and options.
- Error tests feed malformed grammars and check the `GrammarError` place and advice.
- Semantic tests run the corpus `tests/data/grammars/cases.json` (format in
  `tests/data/README.md`) through the reference recognizer `tests/reference_cfg.py` and through
  the core (both builds, one byte per token), and check that llguidance, which defines this
  syntax, agrees on every case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reference_cfg import ReferenceRecognizer
from tokensieve._errors import GrammarError
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym
from tokensieve._grammar.lark import COMMON_TERMINALS, NESTING_DEPTH_MAX, lark_to_ir

GRAMMARS = Path(__file__).parent / "data" / "grammars"
CASES: list[dict[str, Any]] = json.loads((GRAMMARS / "cases.json").read_text(encoding="utf-8"))


# ---- helpers ------------------------------------------------------------------------------------


def rules_of(ir: GrammarIR) -> set[tuple[str, tuple[str, ...]]]:
    """Rules as readable (lhs, rhs) pairs: lexemes by name, nonterminals by name."""

    def name(sym: Sym) -> str:
        return ir.lexemes[sym.index].name if sym.terminal else ir.nonterminals[sym.index]

    return {(ir.nonterminals[r.lhs], tuple(name(s) for s in r.rhs)) for r in ir.rules}


def lexeme(ir: GrammarIR, name: str) -> Lexeme:
    matches = [lx for lx in ir.lexemes if lx.name == name]
    assert len(matches) == 1, (name, ir.lexemes)
    return matches[0]


def grammar_text(case: dict[str, Any]) -> str:
    return (GRAMMARS / case["file"]).read_text(encoding="utf-8")


def matches(grammar: str, text: str, **kwargs: Any) -> bool:
    return ReferenceRecognizer(lark_to_ir(grammar, **kwargs)).full_match(text)


# ---- IR shape -----------------------------------------------------------------------------------


def test_literals_and_regexes_become_lexemes_and_start_is_zero() -> None:
    ir = lark_to_ir('greeting: "hi"\nstart: greeting /[a-z]+/ "!"')
    assert ir.start == 0 and ir.nonterminals[0] == "start"
    assert lexeme(ir, '"hi"') == Lexeme('"hi"', "literal", "hi")
    assert lexeme(ir, "/[a-z]+/") == Lexeme("/[a-z]+/", "regex", "[a-z]+")
    assert rules_of(ir) == {("start", ("greeting", "/[a-z]+/", '"!"')), ("greeting", ('"hi"',))}
    assert ir.skip is None and not ir.allow_initial_skip and ir.options == {}


def test_terminals_inline_into_one_regex_with_minimal_groups() -> None:
    ir = lark_to_ir(
        'start: NUMBER WORD\nNUMBER: "-"? INT ("." INT)?\nINT: DIGIT+\nDIGIT: "0".."9"\n'
        'WORD: A "z" | "q"\nA: "x" | "y"'
    )
    assert lexeme(ir, "NUMBER").value == r"-?[0-9]+(?:\.[0-9]+)?"
    assert lexeme(ir, "WORD").value == "(?:x|y)z|q"
    assert [lx.name for lx in ir.lexemes] == ["NUMBER", "WORD"]  # INT, DIGIT, A unused


def test_literal_terminal_is_a_literal_lexeme_shared_with_the_same_string() -> None:
    ir = lark_to_ir('start: "+" PLUS EMPTY\nPLUS: "+"\nEMPTY: ""')
    assert ir.lexemes == [Lexeme('"+"', "literal", "+")]
    assert rules_of(ir) == {("start", ('"+"', '"+"'))}


def test_star_and_plus_are_left_recursive() -> None:
    ir = lark_to_ir('start: "a"* "b"+')
    assert rules_of(ir) == {
        ("start", ("start/star", "start/plus")),
        ("start/star", ("start/star", '"a"')),
        ("start/star", ()),
        ("start/plus", ("start/plus", '"b"')),
        ("start/plus", ('"b"',)),
    }


def test_optional_forms_are_the_same_helper() -> None:
    ir = lark_to_ir('start: ["a"] "a"? ("x" "y")?')
    assert rules_of(ir) == {
        ("start", ("start/opt", "start/opt", "start/opt2")),
        ("start/opt", ('"a"',)),
        ("start/opt", ()),
        ("start/opt2", ("start/seq",)),
        ("start/opt2", ()),
        ("start/seq", ('"x"', '"y"')),
    }


def test_bounded_repeat_is_copies_then_a_logarithmic_optional_tail() -> None:
    ir = lark_to_ir('start: "a"{2,4} "b"~3 "c"{2,}')
    assert rules_of(ir) == {
        ("start", ('"a"', '"a"', "start/upto2", '"b"', '"b"', '"b"', '"c"', "start/plus")),
        ("start/upto2", ("start/opt",)),  # 0..1 more
        ("start/upto2", ("start/pow2",)),  # or exactly 2 more
        ("start/opt", ()),
        ("start/opt", ('"a"',)),
        ("start/pow2", ('"a"', '"a"')),
        ("start/plus", ("start/plus", '"c"')),
        ("start/plus", ('"c"',)),
    }


@pytest.mark.parametrize("low", [0, 1, 3, 6])
def test_bounded_repeat_counts_exactly(low: int) -> None:
    for high in range(low, low + 18):
        recognizer = ReferenceRecognizer(lark_to_ir(f'start: "a"{{{low},{high}}} "b"'))
        counts = [k for k in range(0, high + 3) if recognizer.full_match("a" * k + "b")]
        assert counts == list(range(low, high + 1)), (low, high)


def test_large_counts_stay_small() -> None:
    ir = lark_to_ir('start: "a"{10000} "b"{0,10000} "c"{9999,10000}')
    assert len(ir.rules) < 120  # O(log n) per repetition
    start_rhs = [r.rhs for r in ir.rules if r.lhs == 0]
    assert len(start_rhs) == 1 and len(start_rhs[0]) <= 30
    assert matches('start: "a"{37} "b"{0,300}', "a" * 37 + "b" * 299)
    assert not matches('start: "a"{37} "b"{0,3}', "a" * 36 + "bb")
    assert not matches('start: "a"{37} "b"{0,3}', "a" * 37 + "bbbb")


def test_zero_count_and_empty_group_are_epsilon() -> None:
    ir = lark_to_ir('start: "a"{0} () "b" |')
    assert rules_of(ir) == {("start", ('"b"',)), ("start", ())}


def test_multiline_alternatives_comments_prefixes_aliases_priorities() -> None:
    text = """
    // comment
    ?start: a       # another comment
          | b -> alias_b
          | "c"
    !a.2: "a"
    b: "b"
     | "bb"
    my-rule: "x"
    """
    ir = lark_to_ir(text)
    assert rules_of(ir) == {
        ("start", ("a",)), ("start", ("b",)), ("start", ('"c"',)),
        ("a", ('"a"',)), ("b", ('"b" | "bb"',)),  # string alternatives are one lexeme
    }  # fmt: skip


def test_newlines_inside_brackets_are_ignored() -> None:
    ir = lark_to_ir('start: ( "a"\n  | "b"\n) [\n "c"\n]')
    assert matches('start: ( "a"\n  | "b"\n) [\n "c"\n]', "bc")
    assert len(ir.nonterminals) == 3


def test_unproductive_and_unreachable_rules_are_removed() -> None:
    ir = lark_to_ir('start: "a" | loop\nloop: loop "x"\nunused: "u"')
    assert ir.nonterminals == ["start"]
    assert rules_of(ir) == {("start", ('"a"',))}
    assert [lx.name for lx in ir.lexemes] == ['"a"']


def test_ignore_directives_form_one_skip_regex() -> None:
    ir = lark_to_ir('%ignore WS\n%ignore "#" /[^\\n]*/\n%ignore /\\/\\/.*/\nWS: /[ \\t]+/\nstart: "a"')
    assert ir.skip == r"[ \t]+|#[^\n]*|//.*"


def test_ignore_repeats_unless_ignore_once() -> None:
    grammar = '%ignore " "\nstart: "a" "b"'
    assert matches(grammar, "a   b")
    once = '%llguidance {"ignore_once": true}\n' + grammar
    assert matches(once, "a b") and not matches(once, "a  b")
    from tokensieve import Grammar, Matcher, Tokenizer

    tok = Tokenizer.default()
    for text, repeat_ok, once_ok in [("a b", True, True), ("a  b", True, False), ("a   b", True, False)]:
        for source, want in [(grammar, repeat_ok), (once, once_ok)]:
            m = Matcher(tok, Grammar.lark(source))
            ok = all(m.consume_token(t) for t in tok.encode(text)) and m.is_accepting()
            assert ok == want, (source, text)


def test_common_imports() -> None:
    ir = lark_to_ir(
        "%import common (INT, WS)\n%import common.CNAME -> ID\n%import common.INT\n"
        "%ignore WS\nstart: ID INT"
    )
    assert lexeme(ir, "ID").value == COMMON_TERMINALS["CNAME"]
    assert lexeme(ir, "INT").value == "[0-9]+"
    assert ir.skip == COMMON_TERMINALS["WS"]


@pytest.mark.parametrize(
    ("name", "accept", "reject"),
    [
        ("INT", ["0", "123"], ["", "-1", "1.0"]),
        ("SIGNED_INT", ["+1", "-20", "3"], ["+", "1-"]),
        ("DECIMAL", ["1.", "1.5", ".5"], ["1", "."]),
        ("FLOAT", ["1e5", "1.5E-3", ".5", "2."], ["1", "e5", "1.e"]),
        ("NUMBER", ["1", "1.5", "1e3"], ["-1", "1e"]),
        ("SIGNED_NUMBER", ["-1", "+1.5e3", "7"], ["--1"]),
        ("ESCAPED_STRING", ['""', '"a\\"b"', '"\\\\"'], ['"a', '"\\"', '"a\nb"']),
        ("CNAME", ["_x1", "abc"], ["1x", ""]),
        ("WORD", ["Hello"], ["a1"]),
        ("HEXDIGIT", ["a", "F", "9"], ["g"]),
        ("WS", [" \t\r\n\f"], [""]),
        ("WS_INLINE", [" \t"], ["\n"]),
        ("NEWLINE", ["\n", "\r\n\n"], ["\r"]),
        ("C_COMMENT", ["/**/", "/* a * b **/", "/*\n*/"], ["/* */ */", "/*/"]),
        ("CPP_COMMENT", ["// x", "//"], ["// x\n"]),
        ("SH_COMMENT", ["# x"], ["#\n"]),
        ("SQL_COMMENT", ["-- x"], ["-"]),
    ],
)
def test_common_terminal_languages(name: str, accept: list[str], reject: list[str]) -> None:
    grammar = f"%import common.{name}\nstart: {name}"
    recognizer = ReferenceRecognizer(lark_to_ir(grammar))
    for text in accept:
        assert recognizer.full_match(text), (name, text)
    for text in reject:
        assert not recognizer.full_match(text), (name, text)


def test_llguidance_options() -> None:
    ir = lark_to_ir(
        '%llguidance {"allow_initial_skip": true}\n'
        '%llguidance {"no_forcing": true, "ignore_once": false, "allow_invalid_utf8": false}\n'
        'start: "a"'
    )
    assert ir.allow_initial_skip
    assert ir.options == {
        "allow_initial_skip": True, "no_forcing": True, "ignore_once": False, "allow_invalid_utf8": False,
    }  # fmt: skip


def test_special_tokens() -> None:
    special = {"<|eot_id|>": 128009, "<|python_tag|>": 128010, "<think>": 7}
    ir = lark_to_ir("start: <|python_tag|> <[1,5,7-9]> <[300]> <think> <|eot_id|>", special_tokens=special)
    assert [(lx.name, lx.kind, lx.token_ids) for lx in ir.lexemes] == [
        ("<|python_tag|>", "special", (128010,)),
        ("<[1,5,7-9]>", "special", (1, 5, 7, 8, 9)),
        ("<[300]>", "special", (300,)),
        ("<think>", "special", (7,)),
        ("<|eot_id|>", "special", (128009,)),
    ]
    # A map keyed by bare names works too.
    ir = lark_to_ir("start: <|eot_id|>", special_tokens={"eot_id": 5})
    assert ir.lexemes[0].token_ids == (5,)


def test_lazy_stop_suffix_and_max_tokens_attributes() -> None:
    ir = lark_to_ir(
        'start: a b c d e\n'
        'a[lazy]: /.*/ "END"\n'
        'b[stop="\\n", max_tokens=10, temperature=0.7, capture]: /[^\\n]*/\n'
        'c[suffix=STOP, capture="x", stop_capture="y"]: TEXT\n'
        'd[stop=""]: /[0-9]+/\n'
        'e[max_tokens=3]: "x" | "y" TEXT\n'
        'TEXT: /[a-z]+/\nSTOP: "</" /[a-z]+/ ">"'
    )
    assert lexeme(ir, "a") == Lexeme("a", "regex", ".*END", lazy=True)
    assert lexeme(ir, "b") == Lexeme("b", "regex", "[^\\n]*\\x0A", lazy=True, max_tokens=10)
    assert lexeme(ir, "c") == Lexeme("c", "regex", "[a-z]+</[a-z]+>", lazy=True)
    assert lexeme(ir, "d") == Lexeme("d", "regex", "[0-9]+", lazy=False)
    assert lexeme(ir, "e") == Lexeme("e", "regex", "x|y[a-z]+", max_tokens=3)


def test_max_tokens_needs_a_terminal_only_body() -> None:
    # As in llguidance: the budget belongs to one lexeme, which the lexer can end at a token
    # boundary; a rule over other rules has no such point.
    with pytest.raises(GrammarError, match=r"rule e: max_tokens= needs a body made only of") as info:
        lark_to_ir('start: e\ne[max_tokens=3]: "x" e | "y"')
    assert (info.value.line, info.value.column) == (2, 2)
    with pytest.raises(GrammarError, match="must be a positive integer"):
        lark_to_ir('start: e\ne[max_tokens=0]: "x"')


def test_case_insensitive_strings_and_regex_flags() -> None:
    ir = lark_to_ir(
        'start: "Ab-1"i /[a-c_]x/i /(?i)q(?-i:r)/ /a.b/s /(?s:.)./ X\nX: "Y"i "z"'
    )
    values = [lx.value for lx in ir.lexemes]
    assert values == [
        "[aA][bB]-1",
        "[a-c_A-C][xX]",
        "[qQ](?:r)",
        r"a[\s\S]b",
        r"(?:[\s\S]).",
        "[yY]z",
    ]
    assert matches('start: "select"i', "SeLeCt")
    assert matches("start: /[^a]/i", "b") and not matches("start: /[^a]/i", "A")
    assert matches("start: /(?s:.)./", "\nx") and not matches("start: /(?s:.)./", "x\n")


def test_regex_slash_escape_and_anchors() -> None:
    ir = lark_to_ir(r"start: /^a\/b$/ /[\/]+/ Q" + "\nQ: /^x$/ \"y\"")
    assert [lx.value for lx in ir.lexemes] == ["a/b", "[/]+", "xy"]


def test_string_escapes() -> None:
    ir = lark_to_ir(r'start: "\x41\u00e9\n\t\"\\\/" "\ud83d\ude00" "\U0001F600"')
    assert [lx.value for lx in ir.lexemes] == ['A\u00e9\n\t"\\/', "\U0001f600"]


def test_override_replaces_an_earlier_definition() -> None:
    ir = lark_to_ir('%import common.WS\n%override WS: " "\nstart: "a"\n%override start: "b"\n%ignore WS')
    assert rules_of(ir) == {("start", ('"b"',))}
    assert ir.skip == " "


@pytest.mark.parametrize(
    "body",
    [
        "[" * NESTING_DEPTH_MAX + '"a"' + "]" * NESTING_DEPTH_MAX,
        '"a" (' * NESTING_DEPTH_MAX + '"c"' + ")+" * NESTING_DEPTH_MAX,
        '("a" | "b" ' * NESTING_DEPTH_MAX + '"c"' + ")+" * NESTING_DEPTH_MAX,
    ],
    ids=["optional", "sequence_plus", "alternation_plus"],
)
def test_nesting_limit_is_reachable_in_rules_and_terminals(body: str) -> None:
    assert len(lark_to_ir(f"start: {body}").rules) > NESTING_DEPTH_MAX
    assert len(lark_to_ir(f"start: A\nA: {body}").lexemes) == 1


def test_nesting_past_the_limit_is_an_error() -> None:
    depth = NESTING_DEPTH_MAX + 1
    with pytest.raises(GrammarError, match="nested more than") as info:
        lark_to_ir("start: " + "(" * depth + '"a"' + ")" * depth)
    assert info.value.column == 8 + NESTING_DEPTH_MAX


def test_rejects_non_str() -> None:
    with pytest.raises(TypeError, match="str"):
        lark_to_ir(b"start: 'a'")  # type: ignore[arg-type]


def test_ir_symbols_are_in_range() -> None:
    for case in CASES:
        ir = lark_to_ir(grammar_text(case))
        for rule in ir.rules:
            assert 0 <= rule.lhs < len(ir.nonterminals)
            for sym in rule.rhs:
                assert isinstance(sym, Sym)
                assert 0 <= sym.index < (len(ir.lexemes) if sym.terminal else len(ir.nonterminals))


# ---- errors -------------------------------------------------------------------------------------

ERRORS = [
    # (name, grammar, line, column, words the message must contain)
    ("empty", "// nothing here\n", 1, 1, "empty"),
    ("no_start", 'begin: "a"', 1, 1, "no `start` rule"),
    ("undefined_rule", 'start: "a"\n  | expr', 2, 5, "rule 'expr' is not defined"),
    ("undefined_terminal", "start: NUMBER", 1, 8, "%import common.NUMBER"),
    ("undefined_terminal_custom", "start: FOO", 1, 8, "FOO is not defined"),
    ("duplicate", 'start: "a"\nx: "b"\nx: "c"', 3, 1, "defined twice (first at line 2, column 1)"),
    ("unterminated_regex", "start: /abc\n", 1, 8, "unterminated regex"),
    ("unterminated_regex_eof", 'start: "a" /[0-9]+', 1, 12, "unterminated regex"),
    ("unterminated_string", 'start: "abc\nx: "b"', 1, 8, "unterminated string"),
    ("unknown_escape", 'start: "a\\qb"', 1, 10, "unknown escape"),
    ("terminal_cycle", 'start: A\nA: "a" B\nB: "b" A?', 3, 8, "terminal A is recursive (A -> B -> A)"),
    ("terminal_self", 'start: A\nA: "(" A ")"', 2, 8, "recursive"),
    ("terminal_uses_rule", 'start: A\nA: "a" b\nb: "b"', 2, 8, "refers to rule 'b'"),
    ("special_in_terminal", "start: A\nA: <[1]>", 2, 4, "special tokens"),
    ("special_without_map", "start: <|eot_id|>", 1, 8, "special_tokens="),
    ("json_schema_error", 'start: "x" j\nj: %json {"type": "objekt"}', 2, 4, "in this %json schema"),
    ("regex_directive_field", 'start: "x" j\nj: %regex {"substring": "a b"}', 2, 4, "unknown %regex field"),
    ("llguidance_key", '%llguidance {"fast": true}\nstart: "a"', 1, 1, "unknown %llguidance option 'fast'"),
    ("llguidance_type", '%llguidance {"no_forcing": 1}\nstart: "a"', 1, 1, "true or false"),
    ("llguidance_json", '%llguidance {"no_forcing": tru}\nstart: "a"', 1, 28, "JSON object"),
    ("unknown_directive", '%extend x: "a"\nstart: "a"', 1, 1, "unknown directive %extend"),
    ("import_other", "%import .other.X\nstart: X", 1, 9, "only `%import common.NAME`"),
    ("import_python", "%import python.NAME\nstart: NAME", 1, 9, "only `%import common.NAME`"),
    ("import_unknown", "%import common.FOO\nstart: FOO", 1, 16, "common has no terminal 'FOO'"),
    ("unclosed_group", 'start: ("a" | "b"\nx: "c"', 2, 2, "close the '(' at line 1, column 8"),
    ("regex_unbalanced", "start: /a)/", 1, 8, "unbalanced ')'"),
    ("regex_unclosed_class", "start: /[a-/", 1, 8, "unclosed character class"),
    ("regex_flag", "start: /a/x", 1, 11, "flag 'x' is not supported"),
    ("two_quantifiers", 'start: "a"+*', 1, 12, "two repetition operators"),
    ("backwards_count", 'start: "a"{3,1}', 1, 11, "min <= max"),
    ("count_too_big", 'start: "a"{2,20000}', 1, 14, "above 10000"),
    ("lazy_with_rule", 'start: a\na[lazy]: b "x"\nb: "b"', 2, 2, "a body made only of"),
    ("unknown_attribute", 'start[speed=3]: "a"', 1, 7, "unknown attribute 'speed'"),
    ("mixed_case", 'start: Foo\nFoo: "a"', 1, 8, "mixes cases"),
    ("grammar_ref", "start: @sub", 1, 8, "grammar references"),
    ("start_unproductive", 'start: start "a"', 1, 1, "cannot match any text"),
    ("two_definitions_one_line", 'start: "x" b: "y"', 1, 13, "start the next definition on a new line"),
    ("negated_token_set", "start: <[^1,2]>", 1, 8, "not supported yet"),
    ("bad_token_list", "start: <[1-]>", 1, 8, "bad token id list"),
    ("unknown_special", "start: <|nope|>", 1, 8, "unknown special token <|nope|>"),
    ("template", "_sep{x}: x\nstart: \"a\"", 1, 5, "templates"),
    ("override_missing", '%override start: "a"', 1, 11, "no earlier definition"),
    ("declare", "%declare FOO\nstart: FOO", 1, 1, "%declare is not supported"),
    ("backwards_range", 'start: "z".."a"', 1, 8, "backwards"),
    ("attribute_on_terminal", 'start: A\nA[lazy]: "a"', 2, 2, "attributes like [lazy] go on rules"),
    ("ignore_nothing", '%ignore\nstart: "a"', 1, 8, "%ignore needs"),
    ("stray_character", 'start: "a" $', 1, 12, "unexpected character '$'"),
    ("continuation_without_bar", 'start: "a" |\n  "b"', 2, 3, "must start with |"),
]


@pytest.mark.parametrize(("name", "grammar", "line", "column", "words"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_place(name: str, grammar: str, line: int, column: int, words: str) -> None:
    with pytest.raises(GrammarError) as info:
        lark_to_ir(grammar, special_tokens={"<|eot_id|>": 1} if name == "unknown_special" else None)
    err = info.value
    message = str(err)
    assert words in message
    assert (err.line, err.column) == (line, column), message
    assert message.startswith(f"line {line}, column {column}: ")
    assert err.position is not None
    lines = grammar.split("\n")
    assert err.position == sum(len(text) + 1 for text in lines[: line - 1]) + column - 1


def test_error_message_shows_the_line_with_a_caret() -> None:
    with pytest.raises(GrammarError) as info:
        lark_to_ir('start: "a"\n\tpair: KEY ":" value\n')
    shown = str(info.value).split("\n")
    assert shown[1] == '    \tpair: KEY ":" value'
    assert shown[2] == "    \t      ^"


# ---- meaning: the corpus under the reference recognizer, and llguidance ---------------------------

CORPUS = [
    pytest.param(case, text, expected, id=f"{case['name']}-{'accept' if expected else 'reject'}-{i}")
    for case in CASES
    for expected, key in ((True, "accept"), (False, "reject"))
    for i, text in enumerate(case[key])
]


@pytest.fixture(scope="module")
def recognizers() -> dict[str, ReferenceRecognizer]:
    return {c["name"]: ReferenceRecognizer(lark_to_ir(grammar_text(c))) for c in CASES}


def test_corpus_format() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert set(case) == {"name", "file", "accept", "reject"}
        assert (GRAMMARS / case["file"]).is_file()
        assert case["accept"] and case["reject"]
    for required in ("json", "arithmetic", "c_like", "nested_lists", "sentences"):
        assert required in names


@pytest.mark.parametrize(("case", "text", "expected"), CORPUS)
def test_corpus(
    recognizers: dict[str, ReferenceRecognizer], case: dict[str, Any], text: str, expected: bool
) -> None:
    recognizer = recognizers[case["name"]]
    assert recognizer.full_match(text) is expected
    if expected:  # every prefix of a match can still be completed
        for end in range(len(text)):
            assert recognizer.completable(text[:end]), text[:end]


class _ByteTokenizer:
    """One token per byte, plus EOS: llguidance then judges text, not tokenization."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, data: bytes) -> list[int]:
        return list(data)


def test_corpus_agrees_with_llguidance() -> None:
    llguidance = pytest.importorskip("llguidance")
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))
    disagreements = []
    for case in CASES:
        grammar = llguidance.grammar_from("lark", grammar_text(case))
        assert llguidance.LLMatcher.validate_grammar(grammar) == "", case["name"]
        for expected, key in ((True, "accept"), (False, "reject")):
            for text in case[key]:
                matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
                matcher.consume_tokens(list(text.encode("utf-8")))
                if (not matcher.is_error() and matcher.is_accepting()) is not expected:
                    disagreements.append((case["name"], key, text))
    assert disagreements == []


def test_corpus_through_the_core(wasm_variant: str) -> None:
    """`Grammar.lark` compiles every corpus grammar, and the matcher decides every text alike."""
    from tokensieve import Grammar, Matcher, Tokenizer

    tokenizer = Tokenizer.from_token_bytes([bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256])
    disagreements = []
    for case in CASES:
        grammar = Grammar.lark(grammar_text(case))
        for expected, key in ((True, "accept"), (False, "reject")):
            for text in case[key]:
                matcher = Matcher(tokenizer, grammar)
                accepted = matcher.consume_tokens(list(text.encode("utf-8"))) and matcher.is_accepting()
                if accepted is not expected:
                    disagreements.append((case["name"], key, text))
    assert disagreements == []


def test_skip_before_first_and_after_last_lexeme_needs_allow_initial_skip() -> None:
    grammar = '%ignore " "\nstart: "a" "b"'
    assert matches(grammar, "a  b")
    assert not matches(grammar, " ab") and not matches(grammar, "ab ")
    relaxed = '%llguidance {"allow_initial_skip": true}\n' + grammar
    assert matches(relaxed, " ab") and matches(relaxed, "a b ")


def test_terminal_alternation_inside_concatenation_keeps_its_meaning() -> None:
    grammar = 'start: W\nW: A "z"\nA: "x" | "y"'
    assert matches(grammar, "yz") and matches(grammar, "xz")
    assert not matches(grammar, "x") and not matches(grammar, "z")


def test_terminal_has_no_skip_inside_but_rule_does() -> None:
    grammar = '%ignore " "\nstart: word | PAIR\nword: "a" "b" "c"\nPAIR: "x" "y"'
    assert matches(grammar, "a b c") and matches(grammar, "xy")
    assert not matches(grammar, "x y")


def test_keywords_versus_identifiers_use_longest_match() -> None:
    grammar = '%ignore " "\nstart: "if" NAME | NAME\nNAME: /[a-z]+/'
    assert matches(grammar, "if x") and matches(grammar, "ifx") and matches(grammar, "if")
    assert not matches(grammar, "ifx y")
