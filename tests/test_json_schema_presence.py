"""Clauses that only say which keys an object has (`dependentRequired`, `dependencies` with
name lists, `anyOf` of `required`, `not` of `required`), compiled as `_presence` constraints
that the object follows in its member states instead of one whole object per alternative.

Every case compares acceptance, through a real `Matcher`, with the `jsonschema` package on
every subset of a few keys (in the schema's property order, values valid and invalid for
their property) and on non-objects; each case sees valid and invalid instances. The cases
cover the forms that stay constraints and those that fall back to expanding them (count
bounds, extras that could spell a named key, an `enum` beside, `unevaluatedProperties`,
property_order="any").
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from json_text import accepts, compact

from tokensieve import Grammar
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

KEYS = ["a", "b", "c", "d", "e"]
PROPERTIES = {k: {"type": "integer"} for k in KEYS}


def instances(keys: list[str], extra: bool = True) -> list[Any]:
    """Every subset of `keys` in their order, with integer values (and one a string, which
    the property refuses), plus a key the schema does not list, and non-objects."""
    out: list[Any] = [None, 1, "a", [], [1]]
    for n in range(len(keys) + 1):
        for subset in itertools.combinations(keys, n):
            out.append({k: 1 for k in subset})
            if subset:
                out.append({**{k: 1 for k in subset[:-1]}, subset[-1]: "x"})
            if extra:
                out.append({**{k: 1 for k in subset}, "z": 1})
    return out


def oracle(schema: Any) -> Any:
    """jsonschema's validator for the schema's `$schema` (2020-12 by default)."""
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def agrees(schema: Any, values: list[Any], **options: Any) -> None:
    grammar = Grammar.json_schema(schema, **options)
    validator = oracle(schema)
    verdicts = set()
    wrong = []
    for value in values:
        expected = validator.is_valid(value)
        verdicts.add(expected)
        if accepts(grammar, compact(value)) != expected:
            wrong.append(f"{compact(value)}: jsonschema says {'valid' if expected else 'invalid'}")
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts == {True, False}


OBJECT = {"type": "object", "properties": PROPERTIES}

CASES: dict[str, Any] = {
    "dependent_required_forward_and_back": {
        **OBJECT, "dependentRequired": {"a": ["c"], "d": ["b"], "e": ["a", "b"]},
    },
    "dependencies_lists_and_a_schema": {  # a draft-07 keyword
        "$schema": "http://json-schema.org/draft-07/schema#", **OBJECT, "dependencies": {"b": ["a"], "c": ["d", "e"], "e": {"required": ["a"]}},
    },
    "any_of_required_beside_dependencies": {
        **OBJECT, "required": ["c"], "anyOf": [{"required": ["a", "b"]}, {"required": ["e"]}],
        "dependentRequired": {"b": ["d"]},
    },
    "two_any_of_required_in_all_of": {
        **OBJECT, "allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
                            {"anyOf": [{"required": ["c"]}, {"required": ["d"]}, {"required": ["e"]}]}],
    },
    "not_required": {**OBJECT, "not": {"required": ["b", "d"]}},
    "not_required_beside_other_types": {"type": ["object", "string", "integer"], "properties": PROPERTIES,
                                        "not": {"required": ["a"]}},
    "dependencies_beside_other_types": {"type": ["object", "string"], "properties": PROPERTIES,
                                        "dependentRequired": {"a": ["b"]}},
    "untyped_any_of_required": {"properties": PROPERTIES, "anyOf": [{"required": ["a"]}, {"required": ["c"]}]},
    "absent_and_required_in_one_option": {
        **OBJECT, "anyOf": [{"required": ["a"], "properties": {"b": False}}, {"required": ["b", "c"]}],
    },
    "required_key_not_listed_closed": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "additionalProperties": False, "anyOf": [{"required": ["a"]}, {"required": ["q"]}],
    },
    "required_beside_an_absent_option": {
        **OBJECT, "required": ["a"], "anyOf": [{"properties": {"a": False}}, {"required": ["b"]}],
    },
    "beside_if_then_on_values": {
        **OBJECT, "dependentRequired": {"a": ["b"]},
        "if": {"properties": {"c": {"const": 1}}, "required": ["c"]}, "then": {"required": ["e"]},
    },
    "nested_in_a_property": {
        "type": "object",
        "properties": {"o": {**OBJECT, "dependentRequired": {"a": ["b"], "c": ["a"]}}, "p": {"type": "integer"}},
    },
    "if_required_then_required": {
        **OBJECT, "if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"not": {"required": ["c"]}},
    },
    "if_required_then_required_beside_other_types": {
        "type": ["object", "string"], "properties": PROPERTIES, "if": {"required": ["a"]}, "then": {"required": ["b", "c"]},
    },
    "one_of_required": {**OBJECT, "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c", "d"]}]},
    "one_of_required_beside_other_types": {
        "type": ["object", "integer"], "properties": PROPERTIES, "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
    },
    "one_of_one_untyped_option_beside_other_types": {
        "type": ["object", "integer"], "properties": PROPERTIES,
        "oneOf": [{"type": "object", "properties": {"a": False}}, {"required": ["b"]}],
    },
    "one_of_with_an_option_always_true": {**OBJECT, "oneOf": [{}, {"required": ["a"]}]},
    "one_of_absent_and_required": {
        **OBJECT, "oneOf": [{"properties": {"a": False}, "required": ["b"]}, {"required": ["a", "c"]}],
    },
    # Falling back to expansion:
    "with_min_and_max_properties": {**OBJECT, "minProperties": 2, "maxProperties": 3, "dependentRequired": {"a": ["b"]}},
    "named_key_the_extras_could_spell": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "dependentRequired": {"a": ["z"]},
    },
    "pattern_properties_beside": {
        **OBJECT, "patternProperties": {"^z": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"required": ["z"]}],
    },
    "enum_beside": {
        **OBJECT, "enum": [{"a": 1}, {"a": 1, "b": 1}, {"b": 1}, {"c": 1, "a": 1}], "dependentRequired": {"a": ["b"]},
    },
    "unevaluated_properties_beside": {
        "type": "object", "properties": {"a": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}],
        "unevaluatedProperties": False,
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_presence_agrees_with_jsonschema(name: str) -> None:
    schema = CASES[name]
    keys = list(schema.get("properties", {}))
    if name == "nested_in_a_property":
        values = [{"o": v} for v in instances(KEYS)] + [{"p": 1}, {"o": {"a": 1}, "p": 1}, 1]
        agrees(schema, values)
        return
    agrees(schema, instances(keys or KEYS))


@pytest.mark.parametrize("name", ["dependent_required_forward_and_back", "any_of_required_beside_dependencies",
                                  "not_required_beside_other_types"])
def test_presence_any_order_agrees_with_jsonschema(name: str) -> None:
    """property_order="any" expands the clauses as before: every order of the keys."""
    schema = CASES[name]
    values = []
    for value in instances(KEYS, extra=False):
        values.append(value)
        if isinstance(value, dict) and len(value) > 1:
            values.append(dict(reversed(list(value.items()))))
    agrees(schema, values, property_order="any")


def test_many_dependencies_make_one_object() -> None:
    """Twenty-two dependencies on one object, on two keys (as real schemas write them:
    MaskBench o37789): 2^22 alternatives expanded (past the clause limit), a few states as
    constraints, which are met for good once their keys are passed."""
    keys = [f"k{i:02}" for i in range(24)]
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in keys},
        "dependentRequired": {
            **{keys[i]: [keys[0]] for i in range(1, 12)},
            **{keys[i]: [keys[23]] for i in range(12, 23)},
        },
    }
    ir = json_schema_to_ir(schema)
    assert len(ir.rules) < 200, len(ir.rules)
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    verdicts = set()
    for mask in range(0, 1 << 24, 40_961):
        value = {k: 1 for i, k in enumerate(keys) if mask >> i & 1}
        expected = validator.is_valid(value)
        verdicts.add(expected)
        assert accepts(grammar, compact(value)) == expected, value
    assert verdicts == {True, False}


def test_one_of_required_coerced_stays_any_of() -> None:
    """x-guidance `coerce_one_of` asks for llguidance's `anyOf` meaning: an object with both
    keys passes, which exactly one of the options refuses."""
    schema = {**OBJECT, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    coerced = Grammar.json_schema({**schema, "x-guidance": {"coerce_one_of": True}})
    exact = Grammar.json_schema(schema)
    assert accepts(coerced, '{"a":1,"b":1}') and not accepts(exact, '{"a":1,"b":1}')
    assert accepts(coerced, '{"a":1}') and accepts(exact, '{"b":1}') and not accepts(coerced, "{}")
