"""`anyOf`/`oneOf` options that only narrow members of a closed object beside them
(`_Compiler.narrowed_cell`), against `jsonschema`: the shared members compiled once for all the
options, each option's own members merged one by one, its two bodies (the siblings' key order
and the option's). MaskBench service-schema's 238 task options are built so: a `task` pinned to
one name, typed `inputs`, eight members every task shares.

The schema below has a member every option pins (`kind`), one each types (`args`), shared
members of every kind of compile (a plain type, a keyword beside it, a `$ref`, one that warns
and so is compiled per option, one that is `false`), an option that requires a shared member it
does not narrow, one that narrows a shared member to `false`, one whose pin is not listed, one that
requires the `false` member, and one that narrows only its pin after the others. Two checks:

- every instance of a product of values (keys absent or present, pins right and wrong, `args`
  of each option's shape and of none), keys in the siblings' order (both bodies take it), is
  accepted exactly when `jsonschema` finds it valid;
- every permutation of the keys of smaller instances is accepted exactly when the instance is
  valid and its keys stand in one of the two orders of an option it passes (as
  `test_json_schema_option_orders`: the siblings' keys, or the option's first).

So a shared member compiled with another option's `required` flag, or taken from another
option's narrowing, a narrowed member compiled as the siblings' (or the option's) alone, a
dropped option or a lost order fails. A hypothesis test runs random closed objects and
options narrowing them the same way (keys in the siblings' order).
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from json_text import accepts, compact

from tokensieve import Grammar
from tokensieve._grammar.json_schema import compiler

REST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"anyOf": [{"enum": ["A@1"]}, {"enum": ["B@2"]}, {"enum": ["C@3"]}, {"enum": ["E@5"]}, {"enum": ["F@6"]}]},
        "label": {"type": "string", "ignoreCase": "key"},
        "size": {"type": "integer", "minimum": 1},
        "flag": {"$ref": "#/$defs/flag"},
        "args": {"type": "object", "description": "the option's own"},
        "note": {"type": "string", "format": "x-unknown"},  # warns: compiled again per option
        "gone": False,
    },
    "additionalProperties": False,
    "firstProperty": ["kind"],
    "$defs": {"flag": {"type": "boolean"}},
}
OPTIONS: list[dict[str, Any]] = [
    {
        "properties": {
            "kind": {"pattern": "^A@1$", "ignoreCase": "value"},
            "args": {"properties": {"x": {"type": "string"}}, "additionalProperties": False, "required": ["x"]},
        },
        "required": ["kind"],
        "doNotSuggest": False,
    },
    # Requires a shared member it does not narrow.
    {"properties": {"kind": {"pattern": "^B@2$"}, "args": {"properties": {"y": {"type": "integer"}}}}, "required": ["kind", "label"]},
    # Its keys in another order; a shared member narrowed to `false`.
    {"properties": {"args": {"properties": {}, "additionalProperties": False}, "kind": {"pattern": "^C@3$"}, "size": False}, "required": ["kind"]},
    # A pin the list does not hold: no value.
    {"properties": {"kind": {"pattern": "^D@4$"}}, "required": ["kind"]},
    # Requires the member that is `false`: no value.
    {"properties": {"kind": {"pattern": "^E@5$"}}, "required": ["kind", "gone"]},
    # Narrows `kind` alone, after options that narrowed the others: its `args` is the siblings'.
    {"properties": {"kind": {"pattern": "^F@6$"}}, "required": ["kind"]},
]
KEYS = list(REST["properties"])
# Per option: the siblings' order, and the option's keys first (a merge lists its first side's
# keys, then the other side's new ones; `false` members make none).
ORDERS = [
    [KEYS, ["kind", "args", "label", "size", "flag", "note", "gone"]],
    [KEYS, ["kind", "args", "label", "size", "flag", "note", "gone"]],
    [KEYS, ["args", "kind", "label", "flag", "note", "gone"]],
    [KEYS, KEYS],
    [KEYS, KEYS],
    [KEYS, KEYS],
]

VALUES: dict[str, list[Any]] = {
    "kind": ["A@1", "B@2", "C@3", "D@4", "E@5", "F@6", "A@11", 1],
    "label": ["l", 2],
    "size": [3, 0],
    "flag": [True, "t"],
    "args": [{}, {"x": "s"}, {"y": 1}, {"x": 1}],
    "note": ["n"],
    "gone": [0],
}


def product(values: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every instance with each key absent or one of its values, keys in `KEYS` order."""
    keys = [k for k in KEYS if k in values]
    return [
        {k: v for k, v in zip(keys, chosen) if v is not _ABSENT}
        for chosen in itertools.product(*([_ABSENT, *values[k]] for k in keys))
    ]


_ABSENT = object()


def schemas() -> list[tuple[str, dict[str, Any]]]:
    return [(key, {**REST, key: OPTIONS}) for key in ("anyOf", "oneOf")]


@pytest.fixture
def narrowed_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pointers `narrowed_cell` was called at (so the tests see the path they test taken)."""
    calls: list[str] = []
    original = compiler._Compiler.narrowed_cell

    def spy(self: Any, rest: Any, flat: Any, where: str, shared: Any) -> Any:
        calls.append(where)
        return original(self, rest, flat, where, shared)

    monkeypatch.setattr(compiler._Compiler, "narrowed_cell", spy)
    return calls


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_narrowed_options_agree_with_jsonschema(key: str, narrowed_calls: list[str]) -> None:
    schema = {**REST, key: OPTIONS}
    grammar = Grammar.json_schema(schema)
    assert narrowed_calls == [f"/{key}/{i}" for i in range(len(OPTIONS))]
    validator = jsonschema.Draft202012Validator(schema)
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in product(VALUES):
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        text = compact(value)
        if accepts(grammar, text) != valid:
            wrong.append(f"{text}: {'refused' if valid else 'accepted'} ({'valid' if valid else 'invalid'})")
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 50 and verdicts[False] > 1000, verdicts


# Fewer values, every permutation of their keys: valid ones, and some invalid by one value.
ORDER_VALUES: dict[str, list[Any]] = {
    "kind": ["A@1", "B@2", "C@3", "F@6", "A@11"], "label": ["l"], "size": [3], "flag": [True], "args": [{}, {"x": "s"}],
}


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_narrowed_options_take_both_key_orders_and_no_other(key: str, narrowed_calls: list[str]) -> None:
    schema = {**REST, key: OPTIONS}
    grammar = Grammar.json_schema(schema)
    assert len(narrowed_calls) == len(OPTIONS)
    validator = jsonschema.Draft202012Validator(schema)
    option_validators = [jsonschema.Draft202012Validator({**REST, "allOf": [option]}) for option in OPTIONS]
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in product(ORDER_VALUES):
        if not 2 <= len(value) <= 4 or "kind" not in value:
            continue
        valid = validator.is_valid(value)
        passing = [i for i, v in enumerate(option_validators) if v.is_valid(value)]
        assert bool(passing) == valid, value  # (the pins tell the options apart: oneOf is anyOf here)
        for keys in itertools.permutations(value):
            verdicts[valid] += 1
            text = compact({k: value[k] for k in keys})
            expected = valid and any(
                list(keys) == [k for k in order if k in value] for i in passing for order in ORDERS[i]
            )
            if accepts(grammar, text) != expected:
                wrong.append(f"{text}: {'refused' if expected else 'accepted'} ({'valid' if valid else 'invalid'})")
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 100 and verdicts[False] > 100, verdicts


def test_a_shared_member_that_warns_warns_at_every_option() -> None:
    """Its compile is not shared (the memo replays the warning at each option's pointer), as
    the expansion warned once per option's object."""
    from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

    warnings = json_schema_to_ir({**REST, "anyOf": OPTIONS}).options["warnings"]
    live = [0, 1, 2, 5]  # (D's pin and E's required member leave their objects nothing to compile)
    assert [w for w in warnings if "x-unknown" in w] == [
        f"/anyOf/{i}/properties/note/format: unknown format 'x-unknown': any string is accepted" for i in live
    ]


# Random closed objects and options narrowing their members: each instance (keys in the
# siblings' order, which every option's first body takes) accepted exactly when `jsonschema`
# finds it valid.
_MEMBERS: list[Any] = [
    {"type": "string"}, {"type": "integer", "minimum": 0}, {"enum": ["a", "b", 1]}, {"type": "object"},
    {"anyOf": [{"enum": ["x"]}, {"enum": ["y"]}]}, {}, True, False, {"$ref": "#/$defs/n"}, {"type": "string", "x-note": "n"},
]
_NARROWINGS: list[Any] = [
    {"pattern": "^x$"}, {"const": "a"}, {"type": "integer"}, {"minimum": 5}, {"maxLength": 1}, {"enum": [1, "y"]},
    {"properties": {"z": {"type": "integer"}}, "additionalProperties": False}, {"properties": {"z": {}}, "required": ["z"]},
    False, {"description": "nothing"},
]
_INSTANCE_VALUES: list[Any] = ["x", "a", "y", "zz", 1, 7, -1, None, {}, {"z": 1}, {"z": "s"}, [1]]
_KEY_NAMES = ["a", "b", "c", "d"]


@st.composite
def _closed_object_with_narrowing_options(draw: Any) -> dict[str, Any]:
    keys = draw(st.permutations(_KEY_NAMES))[: draw(st.integers(2, 4))]
    properties = {k: draw(st.sampled_from(_MEMBERS)) for k in keys}
    options = []
    for _ in range(draw(st.integers(1, 3))):
        narrowed = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
        option: dict[str, Any] = {"properties": {k: draw(st.sampled_from(_NARROWINGS)) for k in narrowed}}
        required = draw(st.lists(st.sampled_from(keys), unique=True, max_size=2))
        if required:
            option["required"] = required
        options.append(option)
    schema: dict[str, Any] = {
        "type": "object", "properties": properties, "additionalProperties": False, "anyOf": options,
        "$defs": {"n": {"type": ["integer", "null"]}},
    }
    required = draw(st.lists(st.sampled_from(keys), unique=True, max_size=1))
    if required:
        schema["required"] = required
    return schema


@settings(max_examples=60, deadline=None)
@given(_closed_object_with_narrowing_options(), st.lists(st.dictionaries(st.sampled_from(_KEY_NAMES), st.sampled_from(_INSTANCE_VALUES)), min_size=20, max_size=20))
def test_random_narrowing_options_agree_with_jsonschema(schema: dict[str, Any], values: list[dict[str, Any]]) -> None:
    from tokensieve._errors import GrammarError

    validator = jsonschema.Draft202012Validator(schema)
    order = list(schema["properties"])
    instances = [{k: v[k] for k in order if k in v} for v in values if set(v) <= set(order)]
    instances += [{k: v[k] for k in v if k in order} for v in values]  # (their keys listed ones only)
    try:
        grammar = Grammar.json_schema(schema)
    except GrammarError as err:
        assert "accepts no value" in str(err), err
        assert not any(validator.is_valid(value) for value in instances)
        return
    for value in instances:
        value = {k: value[k] for k in order if k in value}
        assert accepts(grammar, compact(value)) == validator.is_valid(value), (schema, value)
