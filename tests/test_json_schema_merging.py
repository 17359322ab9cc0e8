"""allOf merges that no single object or number schema says: object schemas whose
patternProperties differ beside an additionalProperties that asserts something (MaskBench's
allOfPProp and pp schemas, hazelcast-config, jreleaser), and two non-integer multipleOf.

Oracles: the `jsonschema` package for objects; exact decimal arithmetic (`fractions`) for
multiples (`jsonschema` divides floats, so 0.3 / 0.1 is not an integer there).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from json_text import accepts, agrees_with_jsonschema, compact

from tokensieve import Grammar


OBJECT_SCHEMAS = [
    # A key matching only the first side's pattern must also meet the second side's
    # additionalProperties, and the other way round.
    {"allOf": [
        {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        {"patternProperties": {"b$": {"minimum": 5}}, "additionalProperties": {"maxLength": 2}},
    ]},
    {"allOf": [
        {"patternProperties": {"^a": {"type": "integer"}}},
        {"additionalProperties": False, "properties": {"ab": {}, "x": {}}},
    ]},
    {"allOf": [
        {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
        {"patternProperties": {"b": {"type": "integer", "maximum": 6}}, "additionalProperties": {"type": "integer"}},
        {"patternProperties": {"^x": {}}, "additionalProperties": {"minimum": 2}},
    ]},
    # Listed names meet the other side's patterns and additionalProperties too.
    {"allOf": [
        {"properties": {"ab": {"type": "integer"}}, "patternProperties": {"^b": {"type": "string"}}, "additionalProperties": False},
        {"patternProperties": {"b": {}}, "additionalProperties": {"type": "integer"}},
    ]},
]
KEYS = ["a", "ab", "b", "ba", "bb", "x", "xb", "c", "ac"]
VALUES = [1, 3, 7, "s", "sss", True]


def _objects(seed: int, count: int) -> list[dict[str, object]]:
    rnd = random.Random(seed)
    return [{k: rnd.choice(VALUES) for k in rnd.sample(KEYS, rnd.randint(0, 3))} for _ in range(count)]


@pytest.mark.parametrize("index", range(len(OBJECT_SCHEMAS)))
def test_merged_pattern_properties_agree_with_jsonschema(index: int) -> None:
    import jsonschema

    schema = {"type": "object", **OBJECT_SCHEMAS[index]}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    # Listed properties first, in the schema's order (`property_order="schema"`).
    listed = [k for part in schema["allOf"] for k in part.get("properties", {})]
    agrees_with_jsonschema(grammar, jsonschema.Draft202012Validator(schema), _objects(index, 400), listed)


@pytest.mark.parametrize("a,b", [(0.5, 0.3), (0.1, 0.25), (4, 6), (0.2, 3), (1.5, 0.04)])
def test_two_multiple_of_merge_to_their_common_multiples(a: float, b: float) -> None:
    grammar = Grammar.json_schema({"allOf": [{"type": "number", "multipleOf": a}, {"multipleOf": b}]}, whitespace="compact")
    fa, fb = Fraction(repr(a)), Fraction(repr(b))
    seen = set()
    for n in range(-40, 241):
        x = Fraction(n, 20)  # 0.05 steps
        text = str(float(x)) if x.denominator != 1 else str(int(x))
        expected = (x / fa).denominator == 1 and (x / fb).denominator == 1
        seen.add(expected)
        assert accepts(grammar, text) == expected, (a, b, text)
    assert seen == {True, False}


def test_enum_values_are_checked_against_merged_sides() -> None:
    # The front-end keeps the enum values valid under the rest of the schema (its instance
    # checker): {"a1": "s"} breaks the first side's pattern; "bb" matches only the second
    # side's pattern, so {"bb": 9} must also meet the first side's additionalProperties (a
    # string); "c" matches no pattern, so {"c": 1} breaks the first side's too.
    import jsonschema

    sides = OBJECT_SCHEMAS[0]["allOf"]
    values = [{"a1": 3}, {"a1": "s"}, {"bb": 9}, {"bb": "s"}, {"c": "s"}, {"c": 1}, {"ab": 6}, {"ab": 3}]
    schema = {"type": "object", "allOf": sides, "enum": values}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = [validator.is_valid(v) for v in values]
    assert set(verdicts) == {True, False}
    for value, expected in zip(values, verdicts):
        assert accepts(grammar, compact(value)) == expected, value
