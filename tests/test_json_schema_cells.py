"""Clause expansions in one property order (`_Compiler.compile_cells`): each alternative of an
`if`/`then`/`else` (or `not`, a dependency) is merged after the rest of the object only, and
the object of each cell takes the orders the expansion took (it merged every alternative in
both orders: the rest first, and the alternative first) through a front phase, or, where the
object cannot follow one (an `anyOf` still to merge, count bounds), one object per order.

The oracle is `jsonschema` for validity, and for order the rule the expansion followed,
written out by hand per schema below: a merge lists its first side's keys, then the other
side's new ones; an `if` alternative is `allOf: [if, then]`, its `else` alternatives
`allOf: [not if, else]` (the keys the `if` tests first). Every permutation of every instance
is run: one accepted must be valid (no dropped constraint), and every valid instance must be
accepted in each order the expansion accepted (no dropped alternative or order).
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from json_text import accepts, compact

from tokensieve import Grammar

# The discriminator `a` comes after `b` in `properties`, so the alternative-first orders put it
# (and what its `then` lists) before `b`.
BASE: dict[str, Any] = {
    "type": "object",
    "properties": {"b": {"type": "integer"}, "a": {"enum": ["x", "y", "z"]}},
    "required": ["a"],
    "if": {"properties": {"a": {"const": "x"}}},
    "then": {"properties": {"c": {"type": "string"}}, "required": ["c"]},
    "else": {
        "if": {"properties": {"a": {"const": "y"}}},
        "then": {"properties": {"d": {"type": "boolean"}}, "required": ["d"]},
        "else": {"properties": {"c": {"type": "integer"}}},
    },
}
# The orders the expansion accepted, per value of `a`: the rest first, or the alternative first
# (its `if` keys, then its `then`/`else` keys), at each of the two levels.
ORDERS = {
    "x": [["b", "a", "c", "d"], ["a", "c", "b", "d"]],
    "y": [["b", "a", "d", "c"], ["a", "d", "b", "c"], ["a", "b", "d", "c"]],
    "z": [["b", "a", "c", "d"], ["a", "c", "b", "d"], ["a", "b", "c", "d"]],
}

SCHEMAS = {
    "if_else_chain": BASE,
    # The cells still merge an anyOf: one object per order.
    "beside_any_of": {**BASE, "anyOf": [{"required": ["b"]}, {"required": ["d"]}]},
    # Count bounds: the object cannot follow a front phase, one object per order.
    "beside_max_properties": {**BASE, "maxProperties": 3},
}

VALUES = {"a": ["x", "y", "z", 1], "b": [1, "s"], "c": ["s", 2], "d": [True, 3]}


def instances() -> list[dict[str, Any]]:
    out = []
    for n in range(1, 4):
        for keys in itertools.combinations("abcd", n):
            for values in itertools.product(*(VALUES[k] for k in keys)):
                out.append(dict(zip(keys, values)))
    return out


def in_order(value: dict[str, Any], order: list[str]) -> dict[str, Any]:
    return {k: value[k] for k in order if k in value}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_cells_agree_with_jsonschema_in_every_order(name: str) -> None:
    schema = SCHEMAS[name]
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in instances():
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        for keys in itertools.permutations(value):
            text = compact({k: value[k] for k in keys})
            if accepts(grammar, text) and not valid:
                wrong.append(f"{text}: accepted, jsonschema says invalid")
        if valid:
            for order in ORDERS[value["a"]]:
                text = compact(in_order(value, order))
                if not accepts(grammar, text):
                    wrong.append(f"{text}: refused in an order the expansion accepted")
    assert not wrong, f"{name}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 10 and verdicts[False] > 10, verdicts
