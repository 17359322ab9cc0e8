"""`uniqueItems` over open scalar items (strings, numbers, integers), which the core checks
(distinct lists, `docs/json_schema.md`): the JSON values of generated arrays, written in the
several spellings the grammar allows (escapes, `1.0`, `10e-1`), are accepted exactly when
jsonschema finds the array valid; and at every position of such texts a token is allowed
exactly when some completion of the text after it is valid for jsonschema (a brute-force
search over short completions), with tokens that close an item in the middle."""

from __future__ import annotations

import functools
import itertools
import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from json_text import BYTES, accepts
from tokensieve import Grammar, LimitError, Matcher, Tokenizer
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

SCHEMAS: dict[str, dict[str, Any]] = {
    "strings": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "numbers": {"type": "array", "items": {"type": "number"}, "uniqueItems": True},
    "integers": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    "mixed": {"type": "array", "items": {"type": ["string", "number"]}, "uniqueItems": True},
    "bounded": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                "minItems": 2, "maxItems": 4},
    "nested": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                         "uniqueItems": True}},
               "required": ["tags"], "additionalProperties": False},
    # Items by a chain of `$ref`s to a shared definition (compiled after the array).
    "by_ref": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "uniqueItems": True,
               "$defs": {"tag": {"$ref": "#/$defs/text"}, "text": {"type": "string", "minLength": 1}}},
    # Patterns ending in an unbounded run of a class: open too (MaskBench webhook's ids).
    "digits": {"type": "array", "items": {"$ref": "#/$defs/id"}, "uniqueItems": True,
               "$defs": {"id": {"type": "string", "pattern": "^\\d+$"}}},
    "slugs": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}, "uniqueItems": True},
    "search": {"type": "array", "items": {"type": "string", "pattern": "[0-9]"}, "uniqueItems": True},
}
# Their items are written as the pattern's characters (no escapes: a pattern's string is
# spelled plainly, docs/json_schema.md), drawn from these, a few of which the pattern refuses.
_PATTERN_CHARS = {"digits": "1209a", "slugs": "ab1_-", "search": "a1b"}


def _grammar(schema: dict[str, Any]) -> Grammar:
    return _cached_grammar(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _cached_grammar(text: str) -> Grammar:
    return Grammar.json_schema(json.loads(text))


def _valid(schema: dict[str, Any], text: str) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))


# ---- spellings the grammar allows (docs/json_schema.md, Strings) -----------------------------

def _spell_char(c: str, escape: bool, upper: bool) -> str:
    code = ord(c)
    if c == '"':
        return '\\"'
    if c == "\\":
        return "\\\\"
    if code < 0x20:
        short = {8: "b", 9: "t", 10: "n", 12: "f", 13: "r"}.get(code)
        return f"\\{short}" if short and not escape else f"\\u{code:04x}"
    if code < 0x7F or not escape:
        return c
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        text = f"\\u{high:04x}\\u{low:04x}"
    else:
        text = f"\\u{code:04x}"
    return text.upper().replace("\\U", "\\u") if upper else text


def _spell_number(value: int, scale: int, form: int) -> str:
    """value * 10^-scale in one of several spellings of the same decimal (zero without an
    exponent: the one spelling such arrays leave out, tested below)."""
    if value == 0 and form in (1, 3):
        return "-0.0" if form == 3 else "0"
    sign = "-" if value < 0 else ""
    digits = str(abs(value))
    if form == 0 or scale == 0 and form == 1:
        if scale == 0:
            return sign + digits
        digits = digits.rjust(scale + 1, "0")
        return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
    if form == 1:
        return f"{sign}{digits}e-{scale}"
    if form == 2:  # trailing zeros in the fraction
        return _spell_number(value * 100, scale + 2, 0)
    return f"{sign}{digits}0E-{scale + 1}"  # form 3: one more digit, the exponent adjusted


_CHARS = st.sampled_from(["a", "b", "é", "\n", '"', "\\", "😀", "ß"])
_STRING_VALUES = st.text(_CHARS, max_size=3)
_NUMBER_VALUES = st.tuples(st.integers(-30, 30), st.integers(0, 2))


@st.composite
def _item(draw: Any, kind: str) -> tuple[Any, str]:
    """A value and one spelling of it."""
    if kind in _PATTERN_CHARS:
        value = draw(st.text(st.sampled_from(_PATTERN_CHARS[kind]), max_size=3))
        return value, json.dumps(value)
    if kind in ("strings", "bounded", "nested", "by_ref") or (kind == "mixed" and draw(st.booleans())):
        value = draw(_STRING_VALUES)
        escape, upper = draw(st.booleans()), draw(st.booleans())
        return value, '"' + "".join(_spell_char(c, escape and draw(st.booleans()), upper) for c in value) + '"'
    if kind == "integers":
        value = draw(st.integers(-30, 30))
        return value, str(value)
    value, scale = draw(_NUMBER_VALUES)
    return value, _spell_number(value, scale, draw(st.integers(0, 3)))


@st.composite
def _array(draw: Any, kind: str) -> str:
    pool = draw(st.lists(_item(kind), min_size=1, max_size=4))
    # Items drawn again from a small pool, so repeats (in other spellings) are common.
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=5))
    items = [pool[i][1] if draw(st.booleans()) else draw(_item(kind))[1] for i in picks]
    sep = draw(st.sampled_from([",", ", ", " ,"]))
    text = "[" + sep.join(items) + "]"
    return '{"tags": ' + text + "}" if kind == "nested" else text


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_acceptance_agrees_with_jsonschema(kind: str, data: Any) -> None:
    schema = SCHEMAS[kind]
    text = data.draw(_array(kind))
    assert accepts(_grammar(schema), text) == _valid(schema, text), text


def test_equal_values_in_other_spellings_are_repeats() -> None:
    cases = {
        "strings": [('["é", "\\u00e9"]', False), ('["é", "\\u00E9"]', False), ('["\\n", "\\u000a"]', False),
                    ('["😀", "\\ud83d\\ude00"]', False), ('["a", "b", "a"]', False), ('["ab", "a"]', True)],
        "numbers": [("[1, 1.0]", False), ("[1, 1e0]", False), ("[1, 10e-1]", False), ("[0, -0]", False),
                    ("[0.5, 5e-1]", False), ("[1, 1.5, 15E-1]", False), ("[1, 12, 0.1]", True)],
        "integers": [("[0, -0]", False), ("[1, 2, 1]", False), ("[10, 1, 100]", True)],
        "mixed": [('["1", 1]', True), ('[1, "1", 1.0]', False)],
    }
    for kind, texts in cases.items():
        for text, expected in texts:
            assert _valid(SCHEMAS[kind], text) == expected, text  # the oracle agrees with the table
            assert accepts(_grammar(SCHEMAS[kind]), text) == expected, text


# ---- masks: a token is allowed exactly when some valid completion follows it ----------------

# Tokens of the test vocabulary: every byte, and pieces that close an item in their middle.
_PIECES = [b'","', b'"]', b'a"', b'a",', b'1,', b'1]', b'0,', b' "', b'"a"', b',"a"', b'"a","a"', b"1,1",
           b".0,", b"e0]", b"0]", b'b"]', b', 1', b'1.0]', b'",1', b'"a"]']
VOCAB = Tokenizer.from_token_bytes([bytes([i]) for i in range(256)] + _PIECES + [b"<eos>"],
                                   eos_token_ids=[256 + len(_PIECES)], special_token_ids=[256 + len(_PIECES)])
# The tokens checked at each position (the others are bytes no instance here continues with).
_CHECKED = [ord(c) for c in '"ab10,] .e-9z'] + list(range(256, 256 + len(_PIECES)))
_COMPLETION_ALPHABET = ['"', "z", "9", ".", "5", ","]
_COMPLETIONS = [""] + ["".join(p) + "]" for n in range(4) for p in itertools.product(_COMPLETION_ALPHABET, repeat=n)]


_ZERO_WITH_EXPONENT = re.compile(r'(?<![0-9."a-z])-?0(?:\.0+)?[eE]')


@functools.lru_cache(maxsize=None)
def _completable(kind: str, prefix: str) -> bool:
    """The text itself, or some completion of at most three characters and `]`, is valid (enough for these
    arrays: any item in progress can be finished in more ways than the few items used)."""
    schema = SCHEMAS[kind]
    for tail in _COMPLETIONS:
        if kind == "integers" and "." in tail:
            continue  # `1.0` is no integer to the grammar (a departure of its own)
        if _ZERO_WITH_EXPONENT.search(prefix + tail):
            continue  # the spelling these arrays leave out (test above)
        try:
            value = json.loads(prefix + tail)
        except ValueError:
            continue
        if jsonschema.Draft202012Validator(schema).is_valid(value):
            return True
    return False


@pytest.mark.parametrize("kind", ["strings", "numbers", "integers", "mixed", "digits", "search"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_masks_agree_with_completions_valid_for_jsonschema(kind: str, data: Any) -> None:
    # Items without escapes: the completion search does not finish an escape.
    pool = data.draw(st.lists(st.sampled_from(['"a"', '"ab"', '"b"', '"1"', '"12"', "1", "1.0", "10", "0", "1e0", "-1"]),
                              min_size=1, max_size=5))
    if kind == "digits":
        items = [p for p in pool if p.startswith('"') and p[1:-1].isdigit()]
    elif kind == "search":
        items = [p for p in pool if p.startswith('"') and any(c.isdigit() for c in p)]
    else:
        items = [p for p in pool if (p.startswith('"') == (kind == "strings")) or kind == "mixed"]
    if kind == "integers":
        items = [p for p in items if "." not in p and "e" not in p]
    text = "[" + ",".join(items) + "]"
    matcher = Matcher(VOCAB, _grammar(SCHEMAS[kind]))
    checked = [t for t in _CHECKED if kind != "integers" or not set(VOCAB.token_bytes(t)) & set(b".e")]
    outcomes = set()
    for i in range(len(text)):  # not past the end: whitespace after the value is a departure of its own
        mask = matcher.compute_bitmask()
        for token in checked:
            allowed = bool(mask[token // 32] >> (token % 32) & 1)
            expected = _completable(kind, text[:i] + VOCAB.token_bytes(token).decode())
            outcomes.add(expected)
            assert allowed == expected, (text[:i], VOCAB.token_bytes(token))
        if not matcher.consume_token(ord(text[i])):
            break  # an item repeats here (the mask said so just above)
    assert outcomes == {True, False}


def test_zero_is_written_without_an_exponent_in_such_arrays() -> None:
    # `0e5` is 0 whatever digits follow, so a text in progress could repeat a 0 with no way
    # out: the grammar leaves that spelling out (a subset, docs/json_schema.md).
    grammar = _grammar(SCHEMAS["numbers"])
    assert accepts(grammar, "[0.0, 1e5]") and accepts(grammar, "[-0.000, 1]")
    assert not accepts(grammar, "[0e5]") and not accepts(grammar, "[0.0E1]")


def test_a_string_repeat_is_refused_on_its_closing_quote() -> None:
    matcher = Matcher(BYTES, _grammar(SCHEMAS["strings"]))
    assert matcher.consume_tokens(list(b'["ab", "ab'))
    assert not matcher.consume_token(ord('"'))
    assert matcher.consume_tokens(list(b'c"]')) and matcher.is_accepting()


def test_a_number_repeat_is_refused_on_the_byte_after_it() -> None:
    matcher = Matcher(BYTES, _grammar(SCHEMAS["numbers"]))
    assert matcher.consume_tokens(list(b"[1.5, 15e-1"))  # 15e-12 would differ
    for byte in b",] ":
        assert not matcher.validate_tokens([byte])
    assert matcher.consume_tokens(list(b"2]")) and matcher.is_accepting()


def test_forks_and_rollbacks_keep_the_earlier_items() -> None:
    matcher = Matcher(BYTES, _grammar(SCHEMAS["strings"]))
    assert matcher.consume_tokens(list(b'["x", "y", '))
    fork = matcher.fork()
    assert not fork.consume_tokens(list(b'"x"'))
    assert fork.consume_tokens(list(b'"z"]')) and fork.is_accepting()
    assert matcher.consume_tokens(list(b'"q"'))
    matcher.rollback(3)
    assert not matcher.consume_tokens(list(b'"y"'))
    assert matcher.consume_tokens(list(b'"w"]')) and matcher.is_accepting()


def test_items_over_the_checked_text_stop_on_a_limit() -> None:
    matcher = Matcher(BYTES, _grammar(SCHEMAS["strings"]))
    assert matcher.consume_tokens(list(b"["))
    with pytest.raises(LimitError) as err:
        for i in range(1000):
            matcher.consume_tokens(list(f'"{i:04d}{"x" * 90}",'.encode()))
    assert err.value.limit == "distinct_items"


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": True},
    # `"12x` can only be finished one way (a pattern ending in a literal).
    {"type": "array", "items": {"type": "string", "pattern": "^[0-9]+x$"}, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer", "maximum": 9}, "uniqueItems": True},
    {"type": "array", "items": {"type": ["string", "boolean"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "object"}, "uniqueItems": True},
])
def test_items_that_are_not_open_keep_the_warning(schema: dict[str, Any]) -> None:
    assert any("uniqueItems is not enforced" in w for w in json_schema_to_ir(schema).options["warnings"])


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_open_items_are_enforced_without_a_warning(kind: str) -> None:
    ir = json_schema_to_ir(SCHEMAS[kind])
    assert ir.distinct and not any("uniqueItems" in w for w in ir.options["warnings"])


def test_a_schema_inside_a_lark_grammar_keeps_its_distinct_lists() -> None:
    grammar = Grammar.lark('start: "tags=" %json {"type": "array", "items": {"type": "string"}, "uniqueItems": true}')
    assert accepts(grammar, 'tags=["a", "b"]') and accepts(grammar, 'tags=[ "x" , "y" ]')
    assert not accepts(grammar, 'tags=["a","a"]') and not accepts(grammar, 'tags=["é", "\\u00e9"]')
