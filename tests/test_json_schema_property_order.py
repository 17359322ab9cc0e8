"""`property_order="any"`: declared properties in any order, each at most once, against the
`jsonschema` package as the oracle.

Instances are written as raw texts from (key, value) lists, so keys come in every order and
may repeat. A text without repeated keys must be accepted exactly when `jsonschema` accepts
its parsed value; a text repeating a *declared* property must be refused (each at most once);
repeated extra keys are not checked (duplicate extra keys are a documented departure).
Beyond `ANY_ORDER_TRACKED_MAX` properties the documented approximations are tested in their
stated direction.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, Matcher, Tokenizer
from tokensieve._errors import GrammarError
from tokensieve._grammar.json_schema.compiler import ANY_ORDER_REQUIRED_MAX, ANY_ORDER_TRACKED_MAX, json_schema_to_ir

BYTES = Tokenizer.from_token_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256], special_token_ids=[256]
)
KEYS = ["a", "b", "c", "d", "x", "y1"]
VALUES: list[Any] = [None, True, 1, 2.5, "", "s", [], {"a": 1}]


def accepts(grammar: Grammar, text: str) -> bool:
    matcher = Matcher(BYTES, grammar)
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


def object_text(pairs: list[tuple[str, Any]]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in pairs) + "}"


CASES: list[tuple[str, dict[str, Any]]] = [
    ("optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}}}),
    (
        "required_closed",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
            "required": ["c", "a"],
            "additionalProperties": False,
        },
    ),
    (
        "additional_schema",
        {
            "type": "object",
            "properties": {"a": {}, "b": {"type": "boolean"}},
            "required": ["b"],
            "additionalProperties": {"type": ["string", "null"]},
        },
    ),
    (
        "pattern_properties",
        {
            "type": "object",
            "properties": {"a": {"type": "number"}, "y1": {"type": "string"}},
            "patternProperties": {"^[xy]": {"type": "string"}, "1$": {"maxLength": 0}},
            "additionalProperties": False,
        },
    ),
    (
        "min_max_properties",
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "required": ["b"],
            "minProperties": 2,
            "maxProperties": 3,
        },
    ),
    ("required_not_listed", {"type": "object", "properties": {"a": {}}, "required": ["a", "d"], "additionalProperties": {"type": "integer"}}),
    (
        "any_of_merged",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "anyOf": [{"properties": {"b": {"const": 1}}, "required": ["b"]}, {"required": ["c"]}],
        },
    ),
    (
        "nested",
        {
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"]}, "b": {}},
            "required": ["a"],
        },
    ),
    (
        "not_pattern_properties",
        {
            "type": "object",
            "properties": {"a": {}, "b": {"type": ["integer", "string"]}, "c": {}},
            "required": ["c"],
            "maxProperties": 3,
            "not": {"patternProperties": {"^[ab]": {"type": "integer"}}},
        },
    ),
    (
        "not_property_names_and_additional_properties",
        {
            "type": "object",
            "properties": {"a": {}, "x": {"type": "string"}},
            "required": ["a"],
            "allOf": [
                {"not": {"propertyNames": {"maxLength": 1}}},
                {"not": {"properties": {"a": {}, "x": {}}, "additionalProperties": {"type": ["integer", "null"]}}},
            ],
        },
    ),
]


def all_texts() -> list[tuple[str, list[tuple[str, Any]]]]:
    """Every order of up to 3 keys with a few values, plus repeated keys."""
    out = []
    for n in range(0, 4):
        for keys in itertools.permutations(KEYS, n):
            for values in itertools.product(VALUES if n <= 1 else [None, True, 1, "s"][: 6 - n], repeat=n):
                pairs = list(zip(keys, values))
                out.append((object_text(pairs), pairs))
    for k in KEYS:
        for extra in (["a"], ["b", "a"], ["c"]):
            pairs = [(k, 1), *[(e, 1) for e in extra], (k, 1)]
            out.append((object_text(pairs), pairs))
    return out


TEXTS = all_texts()


def expected(schema: Any, pairs: list[tuple[str, Any]]) -> bool | None:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        declared = set(schema.get("properties", {})) | set(schema.get("required", []))
        repeated = {k for k in keys if keys.count(k) > 1}
        return False if repeated & declared else None
    return jsonschema.Draft202012Validator(schema).is_valid(dict(pairs))


@pytest.mark.parametrize("name,schema", CASES, ids=[c[0] for c in CASES])
def test_any_order_agrees_with_jsonschema(name: str, schema: dict[str, Any]) -> None:
    ir = json_schema_to_ir(schema, property_order="any")
    assert ir.options["warnings"] == []
    grammar = Grammar.json_schema(schema, property_order="any")
    verdicts = {True: 0, False: 0}
    wrong = []
    for text, pairs in TEXTS:
        want = expected(schema, pairs)
        if want is None:
            continue
        verdicts[want] += 1
        if accepts(grammar, text) != want:
            wrong.append(f"{text}: expected {'accept' if want else 'refuse'}")
    assert not wrong, f"{name}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] and verdicts[False], verdicts


PAIRS = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=6)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_any_order_hypothesis(name: str) -> None:
    schema = dict(CASES)[name]
    grammar = Grammar.json_schema(schema, property_order="any")

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(PAIRS)
    def check(pairs: list[tuple[str, Any]]) -> None:
        want = expected(schema, pairs)
        if want is not None:
            assert accepts(grammar, object_text(pairs)) == want, object_text(pairs)

    check()


def test_schema_order_stays_the_default() -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    assert accepts(Grammar.json_schema(schema), '{"a":1,"b":2}')
    assert not accepts(Grammar.json_schema(schema), '{"b":2,"a":1}')
    assert accepts(Grammar.json_schema(schema, property_order="any"), '{"b":2,"a":1}')
    with pytest.raises(GrammarError):
        json_schema_to_ir(schema, property_order="sorted")


MANY = [f"p{i}" for i in range(max(ANY_ORDER_TRACKED_MAX, ANY_ORDER_REQUIRED_MAX) + 1)]


def test_beyond_the_limit_optional_members_may_repeat() -> None:
    """More properties than tracked: a superset (every valid order accepted, some optional
    properties may repeat), with a warning; required ones are still enforced."""
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in MANY},
        "required": MANY[:2],
        "additionalProperties": False,
    }
    ir = json_schema_to_ir(schema, property_order="any")
    assert any("may also repeat" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema, property_order="any")
    validator = jsonschema.Draft202012Validator(schema)
    for order in (MANY[::-1], MANY[1::2] + MANY[0::2], [MANY[1], MANY[0]], [MANY[-1], MANY[0], MANY[1]]):
        pairs = [(k, 1) for k in order]
        assert validator.is_valid(dict(pairs))
        assert accepts(grammar, object_text(pairs)), order
    assert not accepts(grammar, object_text([(MANY[0], 1), (MANY[-1], 1)]))  # p1 missing
    assert not accepts(grammar, object_text([(MANY[1], 1), (MANY[0], "x")]))
    assert not accepts(grammar, object_text([(MANY[1], 1), (MANY[0], 1), (MANY[0], 1)]))  # tracked: once
    assert accepts(grammar, object_text([(MANY[1], 1), (MANY[0], 1), (MANY[-1], 1), (MANY[-1], 1)]))  # the superset


def test_beyond_the_limit_required_members_keep_schema_order() -> None:
    """More required properties than tracked: schema order (a subset), with a warning."""
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in MANY}, "required": MANY}
    ir = json_schema_to_ir(schema, property_order="any")
    assert any("keep schema order" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema, property_order="any")
    assert accepts(grammar, object_text([(k, 1) for k in MANY]))
    assert not accepts(grammar, object_text([(k, 1) for k in MANY[::-1]]))  # valid, refused: the subset
    assert not accepts(grammar, object_text([(k, 1) for k in MANY[1:]]))


def test_enum_and_const_objects_take_any_order() -> None:
    schema = {"enum": [{"a": 1, "b": [1, {"c": None, "d": "x"}]}, {"a": 2}]}
    grammar = Grammar.json_schema(schema, property_order="any")
    validator = jsonschema.Draft202012Validator(schema)
    texts = [
        '{"a":1,"b":[1,{"c":null,"d":"x"}]}', '{"b":[1,{"d":"x","c":null}],"a":1}', '{"a":2}',
        '{"b":[1,{"d":"x","c":null}]}', '{"a":1,"b":[1,{"d":"x"}]}', '{"a":1,"b":[1,{"d":"x","c":null}],"a":1}',
        '{"a":1,"a":1,"b":[1,{"c":null,"d":"x"}]}', '{"a":3}',
    ]
    for text in texts:
        want = validator.is_valid(json.loads(text)) and text.count('"a"') == 1
        assert accepts(grammar, text) == want, text
    assert not accepts(Grammar.json_schema({"const": {"a": 1, "b": 2}}), '{"b":2,"a":1}')  # default: schema order
