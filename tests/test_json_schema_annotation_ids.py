"""Sub-schemas that differ only in annotations share one translation (`schema_id_nested`),
checked against the `jsonschema` package.

A large schema (its `marshal` form over `_CONTENT_MARSHAL_SIZE_MAX`, here by a long `$comment`)
gets its memo keys from a walk that reads values as schemas and leaves out the annotations no
translation reads (title, description, `$comment`, examples, example, default, and the objects
and arrays under unknown keywords such as `x-...`). The walk must leave out only those: a
property *named* `description` is a member, `enum`/`const` values are data, where
`{"description": "a"}` and `{"description": "b"}` differ, and a schema under an unknown keyword
is still read where a `$ref` points at it.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema

from tokensieve import Grammar
from tokensieve._grammar.json_schema.compiler import _CONTENT_MARSHAL_SIZE_MAX, json_schema_to_ir

from json_text import accepts, compact, ordered

PADDING = {"$comment": "x" * (_CONTENT_MARSHAL_SIZE_MAX + 1)}  # a form too long for marshal ids


def member(description: str, title: str, data: str, number: int) -> dict[str, Any]:
    """An object schema; the first two arguments only annotate it, the last two are data."""
    return {
        "type": "object",
        "description": description,
        "properties": {
            "description": {"type": "integer", "title": title, "examples": [number]},
            "k": {"enum": [{"description": data}, number], "$comment": title},
            "d": {"const": {"default": number}, "default": {"default": number}},
        },
        "additionalProperties": False,
        "examples": [{"description": number}],
        "x-note": {"by": [description]},  # an unknown keyword: read by nothing
    }


def root(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        **PADDING,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "x-defs": {"one": {"type": "object", "properties": {"k": {"const": 1}}, "x-note": {"by": "one"}}},
    }


SCHEMA = root({
    "p": member("first", "A", "a", 1),
    "q": member("second", "B", "b", 2),  # other data: must not share p's translation
    "r": member("third", "C", "a", 1),  # p up to annotations: shares it
    "s": {"type": "object", "properties": {"description": {"type": "string"}}, "additionalProperties": False},
    "u": {"$ref": "#/x-defs/one"},  # a schema under an unknown keyword, read through a $ref
    "v": {"type": "object", "properties": {"k": {"const": 2}}, "x-note": {"by": "one"}},
    "t": {  # p without its member named description: must not share p's translation
        **member("first", "A", "a", 1),
        "properties": {k: v for k, v in member("first", "A", "a", 1)["properties"].items() if k != "description"},
    },
})
VALUES: list[Any] = [
    {}, {"description": 1}, {"description": "s"}, {"description": 1.5}, {"k": {"description": "a"}},
    {"k": {"description": "b"}}, {"k": 1}, {"k": 2}, {"d": {"default": 1}}, {"d": {"default": 2}},
    {"d": {}}, {"e": 1}, {"description": 2, "k": 2, "d": {"default": 2}}, 1, "s",
]


def test_sub_schemas_differing_only_in_annotations_accept_as_jsonschema() -> None:
    grammar = Grammar.json_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    outcomes = set()
    for name, value in itertools.product("pqrstuv", VALUES):
        # Listed members in schema order, then the others (a documented departure).
        instance = {name: ordered(value, list(SCHEMA["properties"][name].get("properties", ["k"])))}
        expected = validator.is_valid(instance)
        outcomes.add(expected)
        assert accepts(grammar, compact(instance)) == expected, instance
    assert outcomes == {True, False}


def test_sub_schemas_differing_only_in_annotations_share_their_rules() -> None:
    """`r` adds no rule beside `p` whatever its annotations: the same as an exact copy of `p`."""
    annotated = json_schema_to_ir(root({"p": member("first", "A", "a", 1), "r": member("third", "C", "a", 1)}))
    copied = json_schema_to_ir(root({"p": member("first", "A", "a", 1), "r": member("first", "A", "a", 1)}))
    other = json_schema_to_ir(root({"p": member("first", "A", "a", 1), "r": member("first", "A", "b", 1)}))
    assert len(annotated.rules) == len(copied.rules) < len(other.rules)
