"""llguidance's extensions, compared with llguidance step by step (issue 15).

Schemas carrying `x-guidance` options and Lark grammars using llguidance's extensions must give
the masks llguidance gives (forcing off) at every step, on texts both accept and on texts both
refuse (up to the token where both refuse). Each text is labelled by hand, from the option's
meaning, and the label is checked too: that is the independent oracle, so a case where both
engines agree on a wrong answer still fails.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tokensieve import Grammar, GrammarError, Matcher

import llguidance  # in the test extra: a missing oracle fails the suite rather than skipping
import llguidance.numpy as llg_numpy


@pytest.fixture(scope="module")
def llama3_pair(shared_dir):
    from conftest import load_shared_tokenizer

    path = shared_dir / "tokenizers" / "llama3" / "tokenizer.json.gz"
    ours = load_shared_tokenizer("llama3")
    theirs = llguidance.LLTokenizer(gzip.decompress(path.read_bytes()).decode(), slices=[])
    return ours, theirs


def _json_string_quirks(tok) -> set[int]:
    """Tokens where the two JSON string lexemes are documented to differ (docs/lark.md)."""
    return {t for t in range(tok.vocab_size) if any(q in tok.token_bytes(t) for q in (b"\x7f", b"\\/", b"\\u"))}


def compare(pair, grammar: Grammar, llg_lark: str, accept, refuse, *, ignore=frozenset()) -> None:
    """Masks equal at every step; `accept` texts end accepted, `refuse` texts hit a token both refuse."""
    ours_tok, llg_tok = pair
    llg_grammar = llguidance.LLMatcher.grammar_from_lark('%llguidance {"no_forcing": true}\n' + llg_lark)
    words = (ours_tok.vocab_size + 31) // 32
    for sample, expected in [(s, True) for s in accept] + [(s, False) for s in refuse]:
        m, lm = Matcher(ours_tok, grammar), llguidance.LLMatcher(llg_tok, llg_grammar)
        assert not lm.is_error(), lm.get_error()
        theirs = llg_numpy.allocate_token_bitmask(1, llg_tok.vocab_size)
        prefix = b""
        accepted = True
        for t in ours_tok.encode(sample) + [None]:
            ours = m.compute_bitmask()
            llg_numpy.fill_next_token_bitmask(lm, theirs, 0)
            diff = np.flatnonzero(np.unpackbits((ours ^ theirs[0][:words]).view(np.uint8), bitorder="little"))
            diff = [int(d) for d in diff if int(d) not in ignore]
            assert not diff, (
                f"{sample!r}: after {prefix!r} the masks differ on {[ours_tok.token_bytes(d) for d in diff[:8]]}"
            )
            if t is None:
                break
            if not (ours[t // 32] >> (t % 32)) & 1:  # refused by both (the masks are equal)
                accepted = False
                break
            assert m.consume_token(t) and lm.consume_token(t), prefix
            prefix += ours_tok.token_bytes(t)
        if accepted:
            accepted = m.is_accepting()
            assert accepted == lm.is_accepting(), sample
        assert accepted == expected, f"{sample!r} should be {'accepted' if expected else 'refused'}"


# x-guidance options
# =============================================================================================

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}}}

X_GUIDANCE = {
    "separators_with_space": (
        {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False},
        ['{"a": 1, "b": [1, 2, 3]}', '{"b": []}', "{}"],
        ['{"a":1}', '{"a": 1,"b": []}', '{"a": 1, "b": [1,2]}', '{ "a": 1}', '{"a":  1}'],
    ),
    "separators_as_regexes": (
        {"item_separator": ", ?", "key_separator": " *: *", "whitespace_flexible": False},
        ['{"a":1,"b":[1, 2,3]}', '{"a" :  1, "b":[]}'],
        ['{"a":1,  "b":[]}', '{"a":1 ,"b":[]}', '{ "a":1}'],
    ),
    "compact": (
        {"whitespace_flexible": False},
        ['{"a":1,"b":[1,2]}'],
        ['{"a": 1}', '{"a":1, "b":[]}', '[1]'],
    ),
    "whitespace_pattern": (
        {"whitespace_pattern": r"[ ]{1,2}"},
        ['{"a": 1,  "b": [ 1 ]}', '{"a":1}', '{  }', '{  "b": [] }'],
        ['{"a":\n1}', '{"a":   1}', '{"a":\t1}', '{"b": [    ]}', '{   }', '{   "a": 1}'],
    ),
    "flexible_with_separators": (
        {"item_separator": ";", "whitespace_flexible": True},
        ['{"a": 1 ;\n "b": [1;2]}'],
        ['{"a": 1, "b": []}', '{"b": [1,2]}'],
    ),
    # A separator that itself holds a space, with flexible whitespace around it.
    "spaced_separator_flexible": (
        {"item_separator": ", ", "key_separator": ": "},
        ['{"a": 1, "b": [1, 2]}', '{"a" :  1 ,  "b": [ 1, \n 2 ]}'],
        ['{"a":1}', '{"a": 1,"b": []}', '{"b": [1 ,2]}', '{"b": [1,\n2]}'],
    ),
    "lenient_and_coerce_one_of": (
        {"lenient": True, "coerce_one_of": True},
        ['{"a": 1}'],
        ['{"a": "x"}'],
    ),
}


def _with(options: dict) -> dict:
    return {"x-guidance": options, **OBJ}


@pytest.mark.parametrize("name", list(X_GUIDANCE))
def test_x_guidance_in_lark_json_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    options, accept, refuse = X_GUIDANCE[name]
    text = f"start: %json {json.dumps(_with(options))}\n"
    compare(llama3_pair, Grammar.lark(text), text, accept, refuse, ignore=_json_string_quirks(llama3_pair[0]))


@pytest.mark.parametrize("name", list(X_GUIDANCE))
def test_x_guidance_in_json_schema_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    """`Grammar.json_schema` honours the options as llguidance's JSON grammar does (compared with
    llguidance's `%json`, where forcing can be turned off; its whitespace rule is the same)."""
    options, accept, refuse = X_GUIDANCE[name]
    schema = _with(options)
    compare(
        llama3_pair, Grammar.json_schema(schema), f"start: %json {json.dumps(schema)}\n", accept, refuse,
        ignore=_json_string_quirks(llama3_pair[0]),
    )


def test_x_guidance_options_override_keyword_arguments(llama3_pair, wasm_variant):
    """Options in the schema win; those it leaves out keep the caller's keyword arguments."""
    tok = llama3_pair[0]
    schema = _with({"item_separator": "; "})
    g = Grammar.json_schema(schema, item_separator="|", key_separator="=", whitespace="compact")
    for text, ok in [('{"a"=1; "b"=[1; 2]}', True), ('{"a"=1|"b"=[]}', False), ('{"a":1; "b"=[]}', False)]:
        m = Matcher(tok, g)
        assert (m.consume_tokens(tok.encode(text)) and m.is_accepting()) == ok, text


@pytest.mark.parametrize(
    "options, message, pointer",
    [
        ({"separator": ","}, "unknown x-guidance option 'separator'", "/x-guidance/separator"),
        ({"whitespace_flexible": "yes"}, "must be a boolean", "/x-guidance/whitespace_flexible"),
        ({"item_separator": 1}, "must be a string", "/x-guidance/item_separator"),
        ({"lenient": 0}, "must be a boolean", "/x-guidance/lenient"),
        ({"json_allowed_escapes": "n"}, "json_allowed_escapes is not supported", "/x-guidance/json_allowed_escapes"),
        (
            {"json_allow_general_unicode_escapes": True},
            "json_allow_general_unicode_escapes is not supported",
            "/x-guidance/json_allow_general_unicode_escapes",
        ),
        ([], "must be an object", "/x-guidance"),
    ],
)
def test_bad_x_guidance_is_refused_with_its_pointer(options, message, pointer):
    with pytest.raises(GrammarError, match=message) as err:
        Grammar.json_schema({"x-guidance": options, "type": "integer"})
    assert err.value.json_pointer == pointer
    with pytest.raises(GrammarError, match=message) as err:
        Grammar.lark(f"start: %json {json.dumps({'x-guidance': options, 'type': 'integer'})}")
    assert err.value.json_pointer == pointer
    assert (err.value.line, err.value.column) == (1, 8)


def test_x_guidance_below_the_top_is_ignored_as_llguidance_does(llama3_pair, wasm_variant):
    tok = llama3_pair[0]
    g = Grammar.json_schema({"type": "array", "items": {"x-guidance": {"item_separator": ";"}, "type": "integer"}})
    m = Matcher(tok, g)
    assert m.consume_tokens(tok.encode("[1, 2]")) and m.is_accepting()


# `&` and `~` in terminals
# =============================================================================================

BOOLEAN_TERMINALS = {
    # No blank line inside the text (llguidance's own example).
    "no_double_newline": (
        'start: "<" LINES ">"\nLINES: /[a-zA-Z \\n]*/ & ~/(?s:.*)\\n\\n(?s:.*)/\n',
        ["<ab cd\nef\ngh>", "<>", "<x\n>"],
        ["<ab\n\ncd>", "<a\n\n>", "<a1>"],
    ),
    # An identifier that is not a keyword: a lexeme alongside the keywords.
    "identifier_not_keyword": (
        'start: stmt+\nstmt: "if" NAME ";" | NAME "=" NAME ";"\n'
        'NAME: /[a-z]+/ & ~KEYWORD\nKEYWORD: "if" | "else" | "while"\n%ignore " "\n',
        ["if x; y = z;", "iff = elsewhere; ifx = y;"],
        ["if if;", "x = while;", "else = y;"],
    ),
    # Two positive parts and a negated one: lowercase words of 3 to 5 letters, not ending in "ed".
    "and_of_three": (
        'start: WORD ("," WORD)*\nWORD: /[a-z]+/ & /.{3,5}/ & ~/.*ed/\n',
        ["abc,hello,seat", "words"],
        ["ab,abc", "toolong", "played", "abc,wanted"],
    ),
    # The & binds tighter than |, and ~ applies to the one atom after it.
    "and_with_any_text": (
        'start: "[" TEXT "]"\nTEXT: /[^\\]]*/ & ~/(?s:.*)TODO(?s:.*)/\n',
        ["[all done]", "[TOD O]", "[]"],
        ["[a TODO here]", "[TODO]"],
    ),
}


@pytest.mark.parametrize("name", list(BOOLEAN_TERMINALS))
def test_and_not_terminals_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    text, accept, refuse = BOOLEAN_TERMINALS[name]
    compare(llama3_pair, Grammar.lark(text), text, accept, refuse)


@pytest.mark.parametrize(
    "text, message, column",
    [
        ('start: /[a-z]+/ & ~/abc/', "& and ~ are supported only in terminal definitions", 8),
        ('start: "<" ~/x+/ ">"', "~ in rule start: & and ~ are supported only in terminal definitions", 12),
        ('start: A\nA: ~/a/+', "supported only at the top of a terminal definition", 4),
        ('start: A\nA: "x" (/a/ & /b/)', "supported only at the top of a terminal definition", 9),
        ('start: A\nA: B "x"\nB: /a/ & /b/', "terminal B uses & or ~", 4),
        ('start: A\nA: /a/ &\n', "& needs an expression on both sides", 9),
        ('start: "x"\n%ignore /a+/ & ~/aa/', "supported only at the top", 9),
    ],
)
def test_and_not_where_the_core_cannot_express_them_are_refused(text, message, column):
    with pytest.raises(GrammarError, match=message) as err:
        Grammar.lark(text)
    assert err.value.column == column


# %regex substring forms
# =============================================================================================

QUOTE = "The quick brown fox, it said, jumps over the lazy dog. Then it naps_a_lot!"

SUBSTRINGS = {
    "words": (
        f'start: "<q>" %regex {json.dumps({"substring_words": QUOTE})} "</q>"\n',
        ["<q>quick brown fox</q>", "<q>jumps over the lazy dog. Then</q>", "<q></q>", f"<q>{QUOTE}</q>",
         "<q>, it said,</q>", "<q>naps_a_lot!</q>"],
        ["<q>quick brown fix</q>", "<q>uick brown</q>", "<q>brown  fox</q>", "<q>naps</q>", "<q>fox it</q>"],
    ),
    "chars": (
        'start: "[" WORD "]"\nWORD: %regex {"substring_chars": "héllo wörld"}\n',
        ["[llo w]", "[h]", "[]", "[héllo wörld]", "[örl]"],
        ["[hello]", "[ll w]", "[dlrow]", "[wörld!]"],
    ),
    "chunks": (
        'start: ITEM ("," ITEM)*\nITEM: %regex {"substring_chunks": ["abc", "de", "fg", "abc"]}\n',
        ["abc,de,abcde,defg,fgabc,abcdefgabc", ",abc"],
        ["ab", "cde", "abcfg", "fgab"],
    ),
}


@pytest.mark.parametrize("name", list(SUBSTRINGS))
def test_substring_regexes_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    text, accept, refuse = SUBSTRINGS[name]
    compare(llama3_pair, Grammar.lark(text), text, accept, refuse)


def test_substring_words_splits_as_llguidance_does():
    from tokensieve._grammar.lark.substring import split_words

    assert split_words("foo bar. baz") == ["foo", " ", "bar", ".", " ", "baz"]
    assert split_words("a..b  c_d9 é!\n") == ["a", "..", "b", "  ", "c_d9", " ", "é", "!", "\n"]
    assert split_words("") == []


@pytest.mark.parametrize(
    "spec, message",
    [
        ('{"substring_words": "a", "substring_chars": "b"}', "exactly one of"),
        ('{"substring": ["a"]}', "unknown %regex field 'substring'"),
        ('{"substring_chunks": "abc"}', "must be a list of strings"),
        ('{"substring_words": 3}', "must be a string"),
        ('{"substring_chars": "' + "x" * 2001 + '"}', "2001 chunks, above 2000"),
        ("[1]", "takes a JSON object"),
        ("{nope}", "needs a JSON object after it"),
    ],
)
def test_bad_regex_objects_are_refused(spec, message):
    with pytest.raises(GrammarError, match=message) as err:
        Grammar.lark(f"start: %regex {spec}")
    assert (err.value.line, err.value.column) == (1, 8 if "JSON object after" not in message else 16)


# Parametric rules
# =============================================================================================

PARAMETRIC = {
    "permutation": (
        'start    :  perm::0x0\n'
        'perm::_  :  ""                       %if is_ones([0:3])\n'
        '         |  "a" perm::set_bit(0)     %if bit_clear(0)\n'
        '         |  "b" perm::set_bit(1)     %if bit_clear(1)\n'
        '         |  "c" perm::set_bit(2)     %if bit_clear(2)\n',
        ["abc", "cab", "bca"],
        ["ab", "aab", "abcc", ""],
    ),
    "each_at_least_once": (
        'start    :  perm::0x0\n'
        'perm::_  :  ""                       %if is_ones([0:3])\n'
        '         |  "a" perm::set_bit(0)\n'
        '         |  "b" perm::set_bit(1)\n'
        '         |  "c" perm::set_bit(2)\n',
        ["abc", "aabbcc", "cbaab"],
        ["aabb", "c", "abd"],
    ),
    "bounded_length": (
        'start  : aa::0\naa::_  : "b" aa::incr(_)    %if lt(_, 20)\n       | bb::_\n'
        'bb::_  : "a" bb::incr(_)    %if lt(_, 20)\n       | ""\n',
        ["bbbaaa", "", "b" * 20, "b" * 10 + "a" * 10],
        ["b" * 21, "abab", "b" * 10 + "a" * 11],
    ),
    "counted": (
        'start  : lst::0x0\n'
        'lst::_ : "a" lst::incr([0:3])  %if lt([0:3], 5)\n'
        '       | "b" lst::incr([3:6])  %if lt([3:6], 5)\n'
        '       | "c" lst::incr([6:9])  %if lt([6:9], 6)\n'
        '       | ""\n',
        ["abcabc", "aaaaabbbbbcccccc", ""],
        ["aaaaaa", "cccccccb", "abd"],
    ),
    "pick_one_to_three": (
        'start    :  perm::0x0\n'
        'perm::_  :  ""                       %if bit_count_ge(_, 1)\n'
        '         |  "a" perm::set_bit(0)     %if and(bit_clear(0), bit_count_lt(_, 3))\n'
        '         |  "b" perm::set_bit(1)     %if and(bit_clear(1), bit_count_lt(_, 3))\n'
        '         |  "c" perm::set_bit(2)     %if and(bit_clear(2), bit_count_lt(_, 3))\n'
        '         |  "d" perm::set_bit(3)     %if and(bit_clear(3), bit_count_lt(_, 3))\n'
        '         |  "e" perm::set_bit(4)     %if and(bit_clear(4), bit_count_lt(_, 3))\n',
        ["a", "eca", "db"],
        ["", "abcd", "aa", "bdb"],
    ),
    # A unique list of names inside other rules, with %ignore between the items. (Without the
    # last %if, `items::0x7` has no alternative: tokensieve drops it and refuses the `,` before
    # it, llguidance allows the `,` and finds the dead end later — docs/lark.md.)
    "unique_list": (
        'start: "[" items::0 "]"\n'
        'items::_: "red" rest::set_bit(0) %if bit_clear(0)\n'
        '    | "green" rest::set_bit(1) %if bit_clear(1)\n'
        '    | "blue" rest::set_bit(2) %if bit_clear(2)\n'
        'rest::_: "" | "," items::_ %if not(is_ones([0:3]))\n'
        '%ignore " "\n',
        ["[red]", "[red, green]", "[blue,red , green]"],
        ["[]", "[red, red]", "[green,blue,green]"],
    ),
}


@pytest.mark.parametrize("name", list(PARAMETRIC))
def test_parametric_rules_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    text, accept, refuse = PARAMETRIC[name]
    compare(llama3_pair, Grammar.lark(text), text, accept, refuse)


@pytest.mark.parametrize(
    "text, message",
    [
        ('start: p::0\np::_: "a" p::set_bit(70)', "bit 70 is beyond 63"),
        ('start: p::0\np::_: "a" p::frob(1)', "unknown parameter function 'frob'"),
        ('start: p::0\np::_: "a" %if nope(1)', "unknown condition 'nope'"),
        ('start: a\na: "x" %if true', "%if is allowed only in parametric rules"),
        ('start: p\np::_: "a"', "rule p is parametric"),
        ('start: a::0\na: "x"', "rule a is not parametric"),
        ('start: p::0\np::1: "a"', "defined as p::_"),
        ('start: P::0\nP: "a"', "only rules"),
        (
            'start: p::0\np::_: ""' + "".join(f'\n | "{c}" p::set_bit({i})' for i, c in enumerate("abcdefghijklm")),
            "more than 4096 instances",
        ),
    ],
)
def test_bad_parametric_rules_are_refused(text, message):
    with pytest.raises(GrammarError, match=message):
        Grammar.lark(text)



# %lark nested grammars
# =============================================================================================

NESTED = {
    # The nested %ignore may follow every nested lexeme (the last one too), never precede the first.
    "own_ignore": (
        'start: "<" inner ">" NUM\ninner: %lark {\n  start: item ("," item)*\n'
        '  item: /[a-z]+/ | "{" start "}"\n  %ignore /[ \\t]+/\n}\nNUM: /[0-9]+/\n',
        ["<a,b>1", "<a , b>1", "<a,{b, c}>1", "<ab,{b,{c ,d}}>42", "<a,b >1", "<{ a}>1"],
        ["< a>1", "<a,b> 1", "<a  ,b>1 ", "<{a}}>1", "<a\n,b>1"],
    ),
    # Without %ignore inside: no whitespace at all there.
    "no_ignore": (
        'start: "call" args ";"\nargs: %lark {\nstart: "(" NAME ("," NAME)* ")"\nNAME: /[a-z]+/\n}\n',
        ["call(a,b);", "call(x);"],
        ["call (a);", "call(a, b);", "call(a) ;"],
    ),
    # Where the nested grammar cannot go on, its %ignore cannot follow its last lexeme.
    "closed_end": (
        'start: "<" inner ">"\ninner: %lark {\nstart: "a" "b"\n%ignore " "\n}\n',
        ["<a b>", "<ab>", "<a   b>"],
        ["<a b >", "< ab>", "<ab >"],
    ),
    # %json inside %lark: no nested skip right before the JSON, JSON whitespace inside it.
    "json_inside": (
        'start: "<" inner ">"\ninner: %lark {\nstart: "f" args ";"\nargs: %json {"type": "array", "items": {"type": "integer"}}\n'
        '%ignore " "\n}\n',
        ["<f[1, 2] ;>", "<f[ 3 ];>"],
        ["<f [1];>", "<f[1]; >"],
    ),
}


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_lark_masks_equal_llguidance(name, llama3_pair, wasm_variant):
    text, accept, refuse = NESTED[name]
    compare(llama3_pair, Grammar.lark(text), text, accept, refuse)


def test_nested_lark_under_an_outer_ignore_is_refused():
    with pytest.raises(GrammarError, match="%lark in a grammar with %ignore is not supported") as err:
        Grammar.lark('start: "a" b\nb: %lark {\nstart: "x"\n}\n%ignore " "\n')
    assert (err.value.line, err.value.column) == (2, 4)


@pytest.mark.parametrize(
    "text, message",
    [
        ('start: a\na: %lark {\nstart: "x"\n', "has no closing }"),
        ('start: a\na: %lark "x"', "needs a grammar in braces"),
        ('start: a\na: %lark {\nb: "x"\n}', "has no `start` rule"),
        ('start: A\nA: %lark {\nstart: "x"\n}', "%lark cannot be used in terminal A"),
        ('start: a\na: %lark {\nstart: "x"\n%llguidance {"no_forcing": true}\n}', "inside %lark are not supported"),
        ('start: a\na: %lark {\nstart: "x" b\nb: %lark {\nstart: "y"\n}\n}', "%lark inside %lark is not supported"),
    ],
)
def test_bad_nested_grammars_are_refused(text, message):
    with pytest.raises(GrammarError, match=message):
        Grammar.lark(text)


# The slow reference recognizer, on another tokenizer
# =============================================================================================

# Not the `&`/`~` cases: the reference decides whether a prefix of an intersection or a
# difference can be completed only approximately (it would say "alled" can become a word of
# /[a-z]+/ & /.{3,5}/ & ~/.*ed/); llguidance and the labels check those.
_LARK_CASES = {
    **{f"substring/{k}": v for k, v in SUBSTRINGS.items()},
    **{f"nested/{k}": v for k, v in NESTED.items()},
    **{f"parametric/{k}": v for k, v in PARAMETRIC.items()},
    **{
        f"x_guidance/{k}": (f"start: %json {json.dumps(_with(options))}\n", accept, refuse)
        for k, (options, accept, refuse) in X_GUIDANCE.items()
    },
}


@pytest.mark.parametrize("name", list(_LARK_CASES))
def test_masks_follow_the_reference_recognizer(name, wasm_variant):
    """The IR the front-end builds, run by the core, against the reference Earley recognizer
    over the same IR (GPT-2 tokens): catches a core/IR disagreement the llguidance comparison
    could hide behind a shared mistake in the front-end's reading, and the labels keep the IR honest."""
    from cfg_check import check_against_reference
    from conftest import load_shared_tokenizer
    from tokensieve._grammar.lark import lark_to_ir

    text, accept, refuse = _LARK_CASES[name]
    ir = lark_to_ir(text)
    check_against_reference(load_shared_tokenizer("gpt2"), Grammar.from_ir(ir), ir, accept, refuse, seed=name)
