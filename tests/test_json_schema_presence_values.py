"""Presence constraints over (key, value class) terms: clauses whose parts test a property's
value by `const`/`enum`/`type` (`if {properties: {kind: {const: "a"}}} then {required: [x]}`,
"if this key is non-null then those are null"), followed in the object's member states with
each member's value split into the classes the conditions tell apart
(`json_schema/presence.py`, `docs/json_schema.md`).

The oracle is the `jsonschema` package. Objects have three or four keys whose values come from
a small list (`additionalProperties: false`), so the language is finite: acceptance is compared
on every object (every subset of keys in order, every value) and on non-objects, for fixed
cases and for hypothesis-generated clauses; and for the fixed cases every mask along every
valid text is compared with the bytes a search over all valid texts finds next.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from json_text import BYTES, accepts, compact

from tokensieve import Grammar, GrammarError, Matcher
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

VALUES: list[Any] = [None, True, False, "x", "y", 1]
NON_OBJECTS: list[Any] = [None, True, "x", 1, [], [1]]


def objects(keys: list[str], values: list[Any] = VALUES) -> list[dict[str, Any]]:
    """Every object over `keys` (in their order) with values from `values`."""
    out = []
    for choice in itertools.product([...] + values, repeat=len(keys)):
        out.append({k: v for k, v in zip(keys, choice) if v is not ...})
    return out


def oracle(schema: Any) -> Any:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def closed(keys: list[str], **clauses: Any) -> dict[str, Any]:
    return {
        "type": "object", "properties": {k: {"enum": VALUES} for k in keys}, "additionalProperties": False, **clauses,
    }


def disagreements(schema: Any, keys: list[str]) -> tuple[list[str], set[bool]]:
    validator = oracle(schema)
    try:
        grammar: Grammar | None = Grammar.json_schema(schema)
    except GrammarError as err:
        assert "accepts no value" in str(err), err
        grammar = None  # then jsonschema must refuse everything
    wrong, verdicts = [], set()
    for value in [*objects(keys), *NON_OBJECTS]:
        expected = validator.is_valid(value)
        verdicts.add(expected)
        if (grammar is not None and accepts(grammar, compact(value))) != expected:
            wrong.append(f"{compact(value)}: jsonschema says {'valid' if expected else 'invalid'}")
    return wrong, verdicts


AUTH = ["basic", "bearer", "file"]  # MaskBench Github_hard o90971: at most one of three is non-null
CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "if_not_null_then_others_null": (AUTH, closed(AUTH, allOf=[
        {"if": {"not": {"properties": {a: {"const": None}}}},
         "then": {"properties": {b: {"const": None} for b in AUTH if b != a}}}
        for a in AUTH
    ])),
    "if_const_then_required": (["action", "target", "z"], closed(
        ["action", "target", "z"], **{"if": {"properties": {"action": {"const": "x"}}}, "then": {"required": ["target"]}},
    )),
    "if_enum_then_else_values": (["k", "a", "b"], closed(["k", "a", "b"], **{
        "if": {"properties": {"k": {"enum": ["x", None]}}, "required": ["k"]},
        "then": {"properties": {"a": {"type": "string"}}, "required": ["a"]},
        "else": {"properties": {"b": {"type": ["boolean", "null"]}, "a": False}},
    })),
    "if_type_then_not_required": (["k", "a", "b"], closed(["k", "a", "b"], **{
        "if": {"properties": {"k": {"type": "string"}}}, "then": {"not": {"required": ["a", "b"]}},
    })),
    "one_of_by_discriminator": (["k", "a", "b"], closed(["k", "a", "b"], oneOf=[
        {"properties": {"k": {"const": "x"}, "a": {"type": "string"}}, "required": ["k"]},
        {"properties": {"k": {"const": "y"}, "b": {"not": {"type": "null"}}}, "required": ["k", "b"]},
        {"properties": {"k": {"type": "boolean"}}},
    ])),
    "any_of_values_and_dependencies": (["a", "b", "c"], closed(["a", "b", "c"], **{
        "anyOf": [{"properties": {"a": {"const": True}}}, {"properties": {"b": {"enum": [False, "y"]}}, "required": ["b"]}],
        "dependentRequired": {"c": ["a"]},
    })),
    "numbers_stay_expanded": (["a", "b"], closed(["a", "b"], **{  # a listed number: not split (exponents)
        "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]},
    })),
    "beside_other_types": (["a", "b"], {
        "type": ["object", "string"], "properties": {"a": {"enum": VALUES}, "b": {"enum": VALUES}},
        "additionalProperties": False, "if": {"properties": {"a": {"const": "x"}}}, "then": {"required": ["b"]},
    }),
    "not_values_objects_only": (["a", "b"], {
        "properties": {"a": {"enum": VALUES}, "b": {"enum": VALUES}}, "additionalProperties": False,
        "not": {"properties": {"a": {"type": "string"}, "b": {"const": None}}},
    }),
}


@pytest.mark.parametrize("name", list(CASES))
def test_value_classes_agree_with_jsonschema(name: str) -> None:
    keys, schema = CASES[name]
    wrong, verdicts = disagreements(schema, keys)
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts == {True, False}


LOOSE = {  # `z` is named by the clauses but listed nowhere: the extras spell it, anywhere among them
    "type": "object", "properties": {"a": {"enum": VALUES}, "b": {"enum": VALUES}},
    "additionalProperties": {"enum": VALUES[:4]},
    "allOf": [
        {"if": {"properties": {"a": {"const": "x"}}}, "then": {"required": ["z"], "properties": {"z": {"type": "boolean"}}}},
        {"if": {"not": {"properties": {"z": {"const": None}}}}, "then": {"properties": {"b": {"const": None}}}},
    ],
}


@pytest.mark.parametrize("keys", [["a", "b", "q", "z"], ["a", "b", "z", "q"], ["z", "a", "b", "q"]])
def test_loose_keys_agree_with_jsonschema(keys: list[str]) -> None:
    wrong, verdicts = disagreements(LOOSE, keys)
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts == {True, False}


def test_if_on_values_is_one_object() -> None:
    """o90971's three `if`s on which key is non-null, over a 12-member object: expanded, one
    object per combination of their alternatives and property orders (~240 objects there);
    as constraints, one object whose three split members carry the state (and may come
    first in any order)."""
    keys = [*AUTH, *(f"m{i}" for i in range(9))]
    _, schema = CASES["if_not_null_then_others_null"]
    schema = dict(schema, properties={k: {"enum": VALUES} for k in keys})
    ir = json_schema_to_ir(schema)
    assert len(ir.rules) < 250, len(ir.rules)


# Masks: a finite language, so the bytes allowed after each prefix of a valid text are those
# some valid text continues with (and the end, where the prefix is itself valid).
EOS = 256


def _allowed(matcher: Matcher) -> set[int]:
    bits = np.unpackbits(matcher.compute_bitmask().view(np.uint8), bitorder="little")[: EOS + 1]
    return set(np.flatnonzero(bits).tolist())


FRONTS = {"if_not_null_then_others_null": AUTH, "if_enum_then_else_values": ["k", "a", "b"], "one_of_by_discriminator": ["k", "a", "b"]}


@pytest.mark.parametrize("name", list(FRONTS))
def test_value_class_masks_match_a_search(name: str) -> None:
    keys, schema = CASES[name]
    # No number among the values: `1` has other spellings (`1.0`, `1e0`) no list here holds.
    schema = dict(schema, properties={k: {"enum": VALUES[:5]} for k in keys})
    validator = oracle(schema)
    texts = set()
    for value in objects(keys, VALUES[:5]):
        if validator.is_valid(value):
            # Keys the clauses list in `properties` may also come first, in any order (an
            # expansion accepted each alternative's properties first); the rest in order.
            movable = [k for k in value if k in FRONTS[name]]
            for n in range(len(movable) + 1):
                for first in itertools.permutations(movable, n):
                    moved = {k: value[k] for k in first} | {k: v for k, v in value.items() if k not in first}
                    texts.add(compact(moved).encode())
    nexts: dict[bytes, set[int]] = {}
    for text in texts:
        for i in range(len(text)):
            nexts.setdefault(text[:i], set()).add(text[i])
        nexts.setdefault(text, set()).add(EOS)
    grammar = Grammar.json_schema(schema, whitespace="compact")
    for prefix, expected in nexts.items():
        matcher = Matcher(BYTES, grammar)
        assert matcher.consume_tokens(list(prefix))
        assert _allowed(matcher) == expected, prefix


# Hypothesis: random clauses over three keys.
KEYS3 = ["a", "b", "c"]
_scalar = st.sampled_from(VALUES[:5])
_value_cond = st.recursive(
    st.one_of(
        _scalar.map(lambda v: {"const": v}),
        st.lists(_scalar, min_size=1, max_size=3).map(lambda vs: {"enum": vs}),
        st.lists(st.sampled_from(["null", "boolean", "string", "number"]), min_size=1, max_size=2, unique=True)
        .map(lambda ts: {"type": ts}),
    ),
    lambda inner: inner.map(lambda c: {"not": c}),
    max_leaves=2,
)
_keys = st.lists(st.sampled_from(KEYS3), min_size=1, max_size=2, unique=True)
_object_cond = st.recursive(
    st.one_of(
        st.dictionaries(st.sampled_from(KEYS3), _value_cond, min_size=1, max_size=2).map(lambda p: {"properties": p}),
        _keys.map(lambda ks: {"required": ks}),
        _keys.map(lambda ks: {"properties": {k: False for k in ks}}),
        st.tuples(st.sampled_from(KEYS3), _keys).map(lambda t: {"dependentRequired": {t[0]: t[1]}}),
    ),
    lambda inner: st.one_of(
        inner.map(lambda c: {"not": c}),
        st.lists(inner, min_size=2, max_size=3).map(lambda cs: {"anyOf": cs}),
        st.lists(inner, min_size=2, max_size=3).map(lambda cs: {"oneOf": cs}),
        st.lists(inner, min_size=2, max_size=2).map(lambda cs: {"allOf": cs}),
        st.tuples(inner, inner, inner).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]}),
        st.tuples(inner, inner).map(lambda t: {"if": t[0], "then": t[1]}),
    ),
    max_leaves=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_object_cond, st.booleans(), st.booleans())
def test_random_value_clauses_agree_with_jsonschema(clause: dict[str, Any], typed: bool, loose: bool) -> None:
    schema = closed(KEYS3, allOf=[clause])
    if not typed:
        del schema["type"]
    if loose:  # `c` only through the extras
        schema["properties"] = {k: {"enum": VALUES} for k in KEYS3[:2]}
        schema["additionalProperties"] = {"enum": VALUES}
    wrong, _ = disagreements(schema, KEYS3)
    assert not wrong, f"{schema}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
