"""`%json {schema}` inside the Lark-like syntax.

The schema is compiled by the JSON Schema front-end and merged into the Lark grammar; inside it
only JSON whitespace may appear between lexemes (spelled out in its rules), never the Lark
grammar's `%ignore`, which still applies on both sides of it. Checked on whole texts, token by
token against the reference recognizer, and against llguidance's `%json`.
"""

from __future__ import annotations


import numpy as np
import pytest

from cfg_check import check_against_reference
from tokensieve import Grammar, GrammarError, Matcher
from tokensieve._grammar.lark import lark_to_ir

WEATHER = (
    '{"type": "object", "properties": {"name": {"const": "get_weather"}, "city": {"type": "string"},'
    ' "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["name", "city"],'
    ' "additionalProperties": false}'
)

# Lark whitespace and comments around the call; JSON whitespace only inside it.
CALL = rf'''
start: "call" args ";" WORD
args: %json {WEATHER}
WORD: /[a-z]+/
%ignore /[ \t]+|#[^\n]*\n/
'''

# No %ignore at all: JSON whitespace still works inside the JSON, nowhere else.
PLAIN = r'''
start: TEXT | fun_call
TEXT: /[^{](.|\n)*/
fun_call: %json {"type": "object", "properties": {"name": {"const": "get_weather"},
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
  "required": ["name", "parameters"]}
'''

ACCEPT_REJECT = {
    "call": (
        CALL,
        [
            'call{"name":"get_weather","city":"Paris"};ok',
            'call {"name":"get_weather","city":"Paris"} ;ok',
            'call # comment\n {"name":"get_weather","city":"Paris"} # done\n; ok',
            'call{ "name" : "get_weather" ,\n\t"city":"Paris", "days": 14 };ok',
        ],
        [
            'call{"name":"get_weather", # no comments in JSON\n"city":"Paris"};ok',
            'call{"name":"get_weather","city":"Paris","days":15};ok',
            'call{"name":"get_weather","city":"Paris","extra":1};ok',
            'call{"city":"Paris","name":"get_weather"};ok',  # properties in order
            'call{"name":"get_weather"};ok',  # city is required
        ],
    ),
    "plain": (
        PLAIN,
        [
            '{"name":"get_weather","parameters":{"city":"Seattle"}}',
            '{\n  "name": "get_weather",\n  "parameters": { "city": "Seattle" }\n}',
            "There is no function I can call",
        ],
        [
            '{"name":"get_weather"}',  # not the schema, and TEXT cannot start with {
            '{"name":"get_weather","parameters":{"city":"Seattle"}} ',  # nothing after the JSON
            '{"name":"get_weather","parameters":{}}',
        ],
    ),
}


def full_match(tok, grammar: Grammar, text: str) -> bool:
    m = Matcher(tok, grammar)
    return m.consume_tokens(tok.encode(text)) and m.is_accepting()


@pytest.mark.parametrize("name", list(ACCEPT_REJECT))
def test_accepted_and_rejected_texts(name, wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    text, accept, reject = ACCEPT_REJECT[name]
    grammar = Grammar.lark(text)
    for sample in accept:
        assert full_match(tok, grammar, sample), sample
    for sample in reject:
        assert not full_match(tok, grammar, sample), sample


@pytest.mark.parametrize("name", list(ACCEPT_REJECT))
@pytest.mark.parametrize("tok_name", ["gpt2", "llama3"])
def test_masks_follow_the_reference_token_by_token(name, tok_name, wasm_variant):
    from conftest import load_shared_tokenizer

    text, accept, reject = ACCEPT_REJECT[name]
    ir = lark_to_ir(text)
    assert ir.no_skip, "the JSON rules must keep the Lark skip out"
    check_against_reference(load_shared_tokenizer(tok_name), Grammar.from_ir(ir), ir, accept, reject, seed=name + tok_name)


def test_the_lark_skip_stays_out_of_the_json(wasm_variant):
    """After `{` the Lark comment syntax is refused; after the closing `}` it is allowed."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.lark(CALL))
    assert m.consume_tokens(tok.encode('call{"name":"get_weather",'))
    assert m.validate_tokens(tok.encode("#")) == 0
    assert m.consume_tokens(tok.encode('"city":"Rome"}'))
    assert m.validate_tokens(tok.encode("# after\n;x")) == len(tok.encode("# after\n;x"))


def test_each_embedded_schema_gets_its_own_names():
    ir = lark_to_ir('start: a b\na: %json {"type": "integer"}\nb: %json {"type": "string"}')
    json_names = [n for n in ir.nonterminals if n.startswith("json@")]
    assert any(n.startswith("json@2:4/") for n in json_names)
    assert any(n.startswith("json@3:4/") for n in json_names)
    assert all(ir.nonterminals.index(n) in ir.no_skip for n in json_names)


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('start: x\nx: %json {"type": "objekt"}', 2, 4, "in this %json schema: .*objekt"),
        ('start: "a"\n  | %json {"type": "integer", "minimum": "x"}', 2, 5, "minimum"),
        ('start: %json {"type": ', 1, 23, "needs a JSON object"),
        ('start: A\nA: %json {}', 2, 4, "cannot be used in terminal A"),
        ('start: x\nx[max_tokens=3]: %json {}', 2, 2, "max_tokens= needs a body"),
    ],
)
def test_bad_embedded_schemas_name_line_and_column(text, line, column, message):
    with pytest.raises(GrammarError, match=message) as info:
        lark_to_ir(text)
    assert (info.value.line, info.value.column) == (line, column)


def test_the_schema_error_keeps_its_json_pointer():
    with pytest.raises(GrammarError) as info:
        lark_to_ir('start: %json {"properties": {"a": {"type": "nope"}}}')
    assert info.value.json_pointer == "/properties/a/type"


# llguidance compiles %json with its own JSON Schema front-end. Differences inside string
# bodies belong to the JSON Schema front-ends, not to %json, and are left out of the comparison:
# tokensieve also accepts "\/", any "\uXXXX" escape and a raw DEL (0x7F) in strings. Where the Lark grammar has an
# %ignore, llguidance refuses it right before the JSON (tokensieve allows it on both sides), so
# the grammars with %ignore start with the JSON.
LLG_CASES = {
    "call": (
        f'start: "call " fun "\\n"\nfun: %json {WEATHER}',
        ['call {"name":"get_weather","city":"Paris"}\n', 'call { "name": "get_weather", "city": "Oslo",\n  "days": 3 }\n'],
    ),
    "text_or_call": (PLAIN, ['{"name":"get_weather", "parameters": {"city":"Seattle"}}', "There is no function I can call"]),
    "json_then_lark_with_ignore": (
        'start: args ";" WORD\nargs: %json {"type": "array", "items": {"type": "number"}, "maxItems": 3}\n'
        'WORD: /[a-z]+/\n%ignore /[ \\t]+|#[^\\n]*\\n/',
        ["[1, 2.5,3] ; ok", "[ ]# note\n;x"],
    ),
}


@pytest.mark.parametrize("name", list(LLG_CASES))
def test_masks_equal_llguidance_json(name, wasm_variant, shared_dir):
    import llguidance
    import llguidance.numpy as llg_numpy

    from conftest import load_llguidance_tokenizer, load_shared_tokenizer

    ours = load_shared_tokenizer("llama3")
    llg_tok = load_llguidance_tokenizer("llama3")
    text, samples = LLG_CASES[name]
    grammar = Grammar.lark(text)
    llg_grammar = llguidance.LLMatcher.grammar_from_lark('%llguidance {"no_forcing": true}\n' + text)
    words = (ours.vocab_size + 31) // 32
    string_quirks = {
        t for t in range(ours.vocab_size) if any(q in ours.token_bytes(t) for q in (b"\x7f", b"\\/", b"\\u"))
    }
    for sample in samples:
        m, lm = Matcher(ours, grammar), llguidance.LLMatcher(llg_tok, llg_grammar)
        assert not lm.is_error(), lm.get_error()
        theirs = llg_numpy.allocate_token_bitmask(1, llg_tok.vocab_size)
        prefix = b""
        tokens = ours.encode(sample)
        for t in tokens + [None]:
            llg_numpy.fill_next_token_bitmask(lm, theirs, 0)
            diff = np.flatnonzero(np.unpackbits((m.compute_bitmask() ^ theirs[0][:words]).view(np.uint8), bitorder="little"))
            diff = [int(d) for d in diff if int(d) not in string_quirks]
            assert not diff, f"after {prefix!r}: masks differ on {[ours.token_bytes(d) for d in diff[:8]]}"
            if t is None:
                break
            assert m.consume_token(t) and lm.consume_token(t), prefix
            prefix += ours.token_bytes(t)
        assert m.is_accepting() and lm.is_accepting()
