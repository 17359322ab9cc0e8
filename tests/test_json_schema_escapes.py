"""JSON string escapes: an escaped character is the character it denotes for `minLength`,
`maxLength`, `pattern`, `enum`, `const` and property names; lone and mis-ordered surrogate
escapes are refused. The oracle is `jsonschema` on the decoded value (`json.loads`).

Texts are built by spelling each character of a string in one of the ways JSON allows
(raw, short escape, `\\uXXXX` in either case, surrogate pairs). The grammar accepts a
documented subset of spellings (`STRING_CHAR`: printable ASCII only raw, no `\\/`), so the
check is: a text in that subset is accepted exactly when `jsonschema` accepts its decoded
value, and a text outside it is refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._grammar.json_schema.strings import STRING_CHAR

BYTES = Tokenizer.from_token_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256], special_token_ids=[256]
)
ALLOWED = re.compile(f'"{STRING_CHAR}*"')
CHARS = ["a", "b", "Z", "/", '"', "\\", "\n", "\t", "\x01", "\x7f", "é", "中", "\ufffd", "😀", "𝄞"]
SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "/": "\\/"}


def accepts(grammar: Grammar, text: str) -> bool:
    matcher = Matcher(BYTES, grammar)
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


def spellings(ch: str) -> list[str]:
    """Every way JSON spells `ch` (hex in both cases)."""
    out = [] if ch in '"\\' or ord(ch) < 0x20 else [ch]
    if ch in SHORT:
        out.append(SHORT[ch])
    code = ord(ch)
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        out += [f"\\u{high:04x}\\u{low:04x}", f"\\u{high:04X}\\u{low:04X}"]
    else:
        out += [f"\\u{code:04x}", f"\\u{code:04X}"]
    return list(dict.fromkeys(out))


SPELLED = st.lists(st.sampled_from(CHARS).flatmap(lambda c: st.sampled_from(spellings(c))), max_size=5)

STRING_SCHEMAS: list[tuple[str, Any]] = [
    ("free", {"type": "string"}),
    ("max_length_2", {"type": "string", "maxLength": 2}),
    ("length_1_to_3", {"type": "string", "minLength": 1, "maxLength": 3}),
    ("pattern_dot", {"type": "string", "pattern": "^.{2}$"}),
    ("pattern_class", {"type": "string", "pattern": "^[a-z/é😀]*$"}),
    ("pattern_astral_range", {"type": "string", "pattern": "^[\U0001d11e-\U0001f600]+$"}),
    ("pattern_negated", {"type": "string", "pattern": "^[^a\\n]+$"}),
    ("not_pattern", {"type": "string", "not": {"pattern": "^a"}}),
    ("enum", {"enum": ["a/", "é😀", "\n", 'a"b']}),
    ("not_const", {"type": "string", "not": {"const": "é"}}),
    ("pattern_and_length", {"type": "string", "pattern": "😀", "maxLength": 2}),
]


@pytest.mark.parametrize("name,schema", STRING_SCHEMAS, ids=[c[0] for c in STRING_SCHEMAS])
def test_escaped_strings_agree_with_jsonschema(name: str, schema: Any) -> None:
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    seen = {True: 0, False: 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(SPELLED)
    def check(parts: list[str]) -> None:
        text = '"' + "".join(parts) + '"'
        # Python's `$` (jsonschema's) also matches before a final newline; ECMA-262's does not.
        assume(not ("$" in json.dumps(schema) and json.loads(text).endswith("\n")))
        want = bool(ALLOWED.fullmatch(text)) and validator.is_valid(json.loads(text))
        seen[want] += 1
        assert accepts(grammar, text) == want, f"{text}: expected {'accept' if want else 'refuse'}"

    check()
    assert seen[True] and seen[False], seen


@pytest.mark.parametrize(
    "text",
    ['"\\ud800"', '"\\udc00"', '"\\ude00\\ud83d"', '"a\\ud83d"', '"\\ud83db"', '"\\ud83d\\u0041"', '"\\uDBFF"'],
)
def test_lone_and_misordered_surrogates_are_refused(text: str) -> None:
    for schema in ({"type": "string"}, {"type": "string", "pattern": "^.*$"}, {"type": "string", "maxLength": 3}):
        assert not accepts(Grammar.json_schema(schema), text), (schema, text)


def test_a_surrogate_pair_is_one_character() -> None:
    grammar = Grammar.json_schema({"type": "string", "minLength": 1, "maxLength": 1})
    assert accepts(grammar, '"\\ud83d\\ude00"') and accepts(grammar, '"\\uD834\\uDD1E"')
    assert not accepts(grammar, '"\\ud83d\\ude00a"')


def test_escaped_property_names_are_the_names_they_denote() -> None:
    schema = {
        "type": "object",
        "properties": {"é": {"type": "integer"}, "😀": {"type": "string"}},
        "additionalProperties": {"type": "boolean"},
    }
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in [
        '{"\\u00e9":1}', '{"\\u00E9":true}', '{"é":1}', '{"\\ud83d\\ude00":"x"}', '{"\\ud83d\\ude00":true}',
        '{"\\u00e9":1,"\\ud83d\\ude00":"x"}', '{"x":true}', '{"x":1}',
    ]:
        assert accepts(grammar, text) == validator.is_valid(json.loads(text)), text
    assert not accepts(grammar, '{"\\u0078":true}')  # printable ASCII escaped: outside the spelled subset
