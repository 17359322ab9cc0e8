"""`anyOf`/`oneOf` options merged with their siblings from one merge (`_Compiler.option_cell`):
the expansion merged each option in both orders (the siblings first, and the option first)
and compiled each order as an object of its own; the option's merge now carries both key
orders and one compile makes a body per order over the same members.

The oracle is `jsonschema` for validity (the siblings AND one option), and for order the rule
the expansion followed, written out by hand per schema below: a merge lists its first side's
keys, then the other side's new ones. Every permutation of every instance is run, and the
language must be exactly the expansion's: a text is accepted when, and only when, some
option makes the instance valid and the text's keys stand in one of that option's two orders
(extras, keys the order does not name, after them).
So a dropped option, a dropped `required`, a lost order or an order of another option fails.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from json_text import accepts, compact

from tokensieve import Grammar

# Every key is listed beside the options (so `additionalProperties: false` closes the object
# without making an option's keys extras), in the order b, a, c, d; each option lists its keys
# in another order, and constrains them beyond presence (else the options would be a presence
# constraint, `compile_presence`, not merged objects).
REST: dict[str, Any] = {
    "type": "object",
    "properties": {"b": {"type": ["integer", "string"]}, "a": {"enum": ["x", "y", "z"]}, "c": {}, "d": {}},
    "additionalProperties": False,
}
OPTIONS: list[dict[str, Any]] = [
    {"properties": {"a": {"const": "x"}, "c": {"type": "string", "minLength": 1}}, "required": ["a", "c"]},
    {"properties": {"d": {"type": "integer", "minimum": 0}, "a": {"const": "y"}}, "required": ["a", "d"]},
    {"properties": {"c": {"type": "integer", "minimum": 5}, "a": {"const": "z"}}, "required": ["a", "b"]},
]
# Per option: the siblings first, and the option first.
ORDERS = [
    [["b", "a", "c", "d"], ["a", "c", "b", "d"]],
    [["b", "a", "c", "d"], ["d", "a", "b", "c"]],
    [["b", "a", "c", "d"], ["c", "a", "b", "d"]],
]

VALUES = {"a": ["x", "y", "z", 1], "b": [1, "s", None], "c": ["s", "", 2, 7], "d": [0, -1]}

# Required keys not listed in `properties` follow the listed ones in each merge's `required`
# order (siblings' first, or the option's first); other keys are extras, after them.
OPEN_REST: dict[str, Any] = {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["e"]}
OPEN_OPTIONS: list[dict[str, Any]] = [
    {"properties": {"c": {"type": "integer", "minimum": 5}, "a": {"const": "x"}}, "required": ["a", "f"]},
    {"properties": {"a": {"const": "y"}, "c": {"type": "string", "minLength": 1}}, "required": ["c"]},
]
OPEN_ORDERS = [
    [["a", "c", "e", "f"], ["c", "a", "f", "e"]],
    [["a", "c", "e"], ["a", "c", "e"]],
]

# name: (schema, its options, their orders, the values each key takes in the instances)
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[list[list[str]]], dict[str, list[Any]]]] = {
    "any_of": ({**REST, "anyOf": OPTIONS}, OPTIONS, ORDERS, VALUES),
    # Disjoint on `a`: read as it is, no exclusive expansion.
    "one_of": ({**REST, "oneOf": OPTIONS}, OPTIONS, ORDERS, VALUES),
    # Count bounds beside: the bodies count their members.
    "any_of_max_properties": ({**REST, "anyOf": OPTIONS, "maxProperties": 3}, OPTIONS, ORDERS, VALUES),
    "any_of_required_not_listed": (
        {**OPEN_REST, "anyOf": OPEN_OPTIONS}, OPEN_OPTIONS, OPEN_ORDERS, {"a": ["x", "y"], "c": [7, "s", 1], "e": [0], "f": [0]},
    ),
}


def instances(values: dict[str, list[Any]]) -> list[dict[str, Any]]:
    out = []
    for n in range(1, len(values) + 1):
        for keys in itertools.combinations(sorted(values), n):
            for chosen in itertools.product(*(values[k] for k in keys)):
                out.append(dict(zip(keys, chosen)))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_option_orders_are_exactly_the_expansions(name: str) -> None:
    schema, options, orders, values = CASES[name]
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    option_validators = [jsonschema.Draft202012Validator({"allOf": [rest, option]}) for option in options]
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in instances(values):
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        passing = [i for i, v in enumerate(option_validators) if v.is_valid(value)]
        assert bool(passing) == valid, value  # the options are disjoint on `a`: oneOf is anyOf here
        for keys in itertools.permutations(value):
            text = compact({k: value[k] for k in keys})
            # The keys of the order first, in its order; extras (keys it does not name) after.
            expected = valid and any(
                list(keys[: len(listed)]) == listed
                for i in passing for order in orders[i] for listed in [[k for k in order if k in value]]
            )
            if accepts(grammar, text) != expected:
                wrong.append(f"{text}: {'refused' if expected else 'accepted'} ({'valid' if valid else 'invalid'})")
    assert not wrong, f"{name}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 3 and verdicts[False] > 10, verdicts


# An anyOf whose first option the siblings imply (`_Compiler.compile_implied`): it holds on
# every value, so the values are the siblings' alone; the orders are those the merges with
# each option gave (the option's listed keys, or those of one of its own options followed by
# its, first or after the siblings' keys), written out by hand, for every valid value.
IMPLIED: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "anyOf": [
        {"required": ["a"]},
        {"oneOf": [
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            {"properties": {"c": {"type": "integer"}, "a": {"minimum": 5}}, "required": ["c"]},
        ]},
    ],
}
IMPLIED_ORDERS = [["a"], ["a", "b"], ["b", "a"], ["a", "c"], ["c", "a"]]


def test_an_any_of_the_siblings_imply_keeps_its_options_orders_for_every_valid_value() -> None:
    grammar = Grammar.json_schema(IMPLIED)
    validator = jsonschema.Draft202012Validator(IMPLIED)
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in instances({"a": [1, 7, "s"], "b": [1, "x"], "c": [2, "y"], "d": [0]}):
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        for keys in itertools.permutations(value):
            text = compact({k: value[k] for k in keys})
            expected = valid and any(
                list(keys[: len(listed)]) == listed for order in IMPLIED_ORDERS for listed in [[k for k in order if k in value]]
            )
            if accepts(grammar, text) != expected:
                wrong.append(f"{text}: {'refused' if expected else 'accepted'} ({'valid' if valid else 'invalid'})")
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 10 and verdicts[False] > 10, verdicts
