"""Differential check against llguidance: the same Lark grammar, the same tokens, the same masks.

llguidance is an independent implementation of the same semantics (lexer/parser split, longest
match with one byte of look-ahead). With `%llguidance {"no_forcing": true}` its masks are plain
masks, so at every step of the sample inputs the two masks must be equal, bit for bit, over the
Llama-3 vocabulary. The grammars avoid the documented differences (a skip right before EOS;
where a token budget starts counting, and a capped lexeme that does not match when its budget
runs out).
"""

from __future__ import annotations


import numpy as np
import pytest

from tokensieve import Grammar, Matcher

import llguidance  # in the test extra: a missing oracle fails the suite rather than skipping
import llguidance.numpy as llg_numpy

GRAMMARS = {
    "json": (
        r'''
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" "}" | "{" pair ("," pair)* "}"
pair: STRING ":" value
array: "[" "]" | "[" value ("," value)* "]"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n\r]+/
''',
        ['{"name": "Alice", "tags": ["a", "b c"], "n": -1.5e3, "ok": true, "x": null}', '[1, [2, [3, {}]]]'],
    ),
    "arithmetic": (
        r'''
start: expr
expr: expr "+" term | expr "-" term | term
term: term "*" factor | term "/" factor | factor
factor: NUMBER | "(" expr ")" | "-" factor
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore " "
''',
        ["(1 + 2) * 3 - 4 / (5 - -6)", "12*(3.5+7)"],
    ),
    # Slices: several string lexemes alive in one lexer state (bounded, word-pattern,
    # unbounded), non-ASCII text, bounds running out, identifiers.
    "slices": (
        r'''
start: "{" pair ("," pair)* "}"
pair: KEY ":" value | ID ":" WORDY
value: SHORT | WORDY | TEXT | NUMBER
KEY: /"[a-z_]{1,12}"/
ID: /'[a-z]+'/
SHORT: /"[^"\\\x00-\x1f]{0,10}"/
WORDY: /"[\-0-9A-Z_a-z]{1,24}"/
TEXT: /"[^"\\\x00-\x1f]*"/
NUMBER: /-?[0-9]+/
%ignore /[ \t\n]+/
''',
        [
            '{"name": "Zoë Ünïcode, 東京 and a fairly long tail of words", "id_x": "abc-DEF_12", "n": 42}',
            '{"s": "short", "w": "kebab-case-and_snake_case-identifiers_0", "t": "😀 emoji text"}',
            "{'ident': \"Some_Word-42_and_more_9\", 'x': \"y\"}",
        ],
    ),
    "c_like": (
        r'''
start: stmt+
stmt: decl | assign | if_stmt | while_stmt | call ";"
decl: TYPE NAME ("=" expr)? ";"
assign: NAME "=" expr ";"
if_stmt: "if" "(" expr ")" block ("else" block)?
while_stmt: "while" "(" expr ")" block
block: "{" stmt* "}"
call: NAME "(" (expr ("," expr)*)? ")"
expr: atom (OP atom)*
atom: NAME | NUMBER | call | "(" expr ")"
TYPE: "int" | "float" | "char"
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
OP: "+" | "-" | "*" | "<" | "==" | ">"
%ignore /[ \n]+/
''',
        ["int x = 1; while (x < 10) { x = x + 1; print(x); }", "if (a == b) { f(1, 2); } else { g(); }"],
    ),
    # Token budgets. The samples spend whole budgets (the intro's four tokens end at "\n", the
    # value's three at ";"), and every capped lexeme starts in the token where the lexeme before
    # it ended, where both count from the same token (docs/lark.md has where they differ).
    "max_tokens_free_text": (
        r'''
start: intro "\n" NUMBER
intro[max_tokens=4]: /[A-Za-z ,.]+/
NUMBER: /[0-9]+/
''',
        ["Hello there, this\n123", "Hi\n42"],
    ),
    "max_tokens_repeated": (
        r'''
start: item+
item: KEY "=" value ";"
value[max_tokens=3]: /[a-z0-9][a-z0-9 ]*/
KEY: /[a-z]+/
%ignore " "
''',
        ["alpha=some long;beta=x;", "a=bcd e;k=the quick brown;"],
    ),
    "max_tokens_lazy": (
        r'''
start: "<note>" body "</note>"
body[max_tokens=5, lazy]: /(.|\n)*/ "."
''',
        ["<note>a b c.</note>", "<note>Hi.</note>"],
    ),
}


@pytest.fixture(scope="module")
def llama3_pair(shared_dir):
    from conftest import load_llguidance_tokenizer, load_shared_tokenizer

    ours = load_shared_tokenizer("llama3")
    theirs = load_llguidance_tokenizer("llama3")
    return ours, theirs


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_masks_equal_llguidance_masks(name, llama3_pair, wasm_variant):
    ours_tok, llg_tok = llama3_pair
    text, samples = GRAMMARS[name]
    grammar = Grammar.lark(text)
    llg_grammar = llguidance.LLMatcher.grammar_from_lark('%llguidance {"no_forcing": true}\n' + text)
    words = (ours_tok.vocab_size + 31) // 32
    for sample in samples:
        tokens = ours_tok.encode(sample)
        m = Matcher(ours_tok, grammar)
        lm = llguidance.LLMatcher(llg_tok, llg_grammar)
        assert not lm.is_error(), lm.get_error()
        theirs = llg_numpy.allocate_token_bitmask(1, llg_tok.vocab_size)
        prefix = b""
        for i, t in enumerate(tokens + [None]):
            ours = m.compute_bitmask()
            llg_numpy.fill_next_token_bitmask(lm, theirs, 0)
            diff = np.flatnonzero(np.unpackbits((ours ^ theirs[0][:words]).view(np.uint8), bitorder="little"))
            assert diff.size == 0, (
                f"{name}: after {prefix!r} the masks differ on "
                f"{[(int(d), ours_tok.token_bytes(int(d))) for d in diff[:8]]}"
            )
            if t is None:
                break
            assert m.consume_token(t) and lm.consume_token(t), prefix
            prefix += ours_tok.token_bytes(t)
        assert m.is_accepting() and lm.is_accepting()
