"""Members of `anyOf` options merged with their siblings' (`_Compiler.merge_properties`) by the
shortcuts MaskBench service-schema's 238 task objects take, against `jsonschema`:

- a member pinned by a plain `^text$` pattern beside a list of strings (an `anyOf` of one-value
  enums, an `enum`) is the enum of the listed strings equal to the text (`pinned_enum`);
- a member typed `object` on one side and a plain object on the other is that object with the
  type (`_typed_object`);
- `{"type": ..., <keys that are no keyword>}` is the plain type's symbol (`_Compiler.inert`),
  and `{"enum": [one string], <keys that are no keyword>}` its lexeme (`compile`), as is an
  enum of several strings there, after the memo.

Every instance (keys in the siblings' order, which both merge orders keep here) is accepted
exactly when `jsonschema` finds it valid. So a pin that kept every listed name, or none, a text
read as a regex, a type dropped from the typed member, or a keyword taken for a key that
asserts nothing (beside a type or beside a one-name enum), fails.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from json_text import accepts, compact, ordered

from tokensieve import Grammar

NAMES: dict[str, Any] = {
    "anyOf": [
        {"description": "one", "ignoreCase": "value", "enum": ["A@1"]},
        {"enum": ["B@2"], "doNotSuggest": False},
        {"const": "C-3"},
        {"enum": ["D:4", "A@1"]},
        {"enum": ["A.1"]},
    ]
}
REST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": NAMES,
        "inputs": {"type": "object", "description": "task inputs"},
        "name": {"type": "string", "ignoreCase": "key"},
        "retries": {"type": "integer", "x-note": "how often", "minimum": 1},
    },
    "additionalProperties": False,
}
OPTIONS: list[dict[str, Any]] = [
    {
        "properties": {
            "task": {"description": "A", "ignoreCase": "value", "pattern": "^A@1$"},
            "inputs": {"properties": {"x": {"type": "string", "aliases": ["X"]}}, "additionalProperties": False, "required": ["x"]},
        },
        "required": ["task"],
    },
    {
        "properties": {
            "task": {"type": "string", "pattern": "^B@2$"},
            "inputs": {"properties": {"y": {"type": "integer"}}, "additionalProperties": False},
        },
        "required": ["task"],
    },
    # Not listed beside: no value.
    {"properties": {"task": {"pattern": "^Z@9$"}}, "required": ["task"]},
    {"properties": {"task": {"pattern": "^C-3$"}, "inputs": {"properties": {"z": {"enum": [1, 2]}}}}, "required": ["task"]},
    # Not plain (a class; an escape): the translation's own check.
    {"properties": {"task": {"pattern": "^D:[0-9]$"}, "inputs": {"maxProperties": 0}}, "required": ["task"]},
    {"properties": {"task": {"pattern": "^A\\.1$"}}, "required": ["task"]},
]
ORDER = list(REST["properties"])

VALUES: dict[str, list[Any]] = {
    "task": ["A@1", "B@2", "C-3", "D:4", "Z@9", "A@11", "A.1", "AX1", 5],
    "inputs": [{}, {"x": "s"}, {"y": 1}, {"z": 1}, {"z": 3}, {"x": 1}, "str"],
    "name": ["n", 1],
    "retries": [2, 0],
}


def instances() -> list[dict[str, Any]]:
    out = []
    keys = sorted(VALUES)
    for chosen in itertools.product(*([None, *VALUES[k]] for k in keys)):
        out.append({k: v for k, v in zip(keys, chosen) if v is not None})
    return out


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_pinned_and_typed_members_agree_with_jsonschema(key: str) -> None:
    schema = {**REST, key: OPTIONS}
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wrong = []
    verdicts = {True: 0, False: 0}
    for value in instances():
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        text = compact(ordered(value, ORDER))
        if accepts(grammar, text) != valid:
            wrong.append(f"{text}: {'refused' if valid else 'accepted'} ({'valid' if valid else 'invalid'})")
    assert not wrong, f"{len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] > 20 and verdicts[False] > 100, verdicts


# An enum of one string beside keys that assert nothing takes `compile`'s direct path (the
# pinned members above become such enums); beside a keyword, the general one, which checks it.
ONE_NAME: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inert": {"enum": ["ab"], "ignoreCase": "all", "x-note": "n", "description": "d"},
        "too_short": {"enum": ["ab"], "minLength": 3},
        "not_it": {"enum": ["ab"], "not": {"const": "ab"}},
        "pattern": {"enum": ["ab"], "pattern": "^a"},
        "typed": {"enum": ["ab"], "type": "integer"},
    },
    "additionalProperties": False,
}


def _verdicts_against_jsonschema(schema: dict[str, Any], values: list[Any]) -> dict[bool, int]:
    """Each value under each property of `schema` judged by the grammar and by `jsonschema`
    (they must agree); how many were valid and invalid."""
    grammar = Grammar.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wrong = []
    verdicts = {True: 0, False: 0}
    for key in schema["properties"]:
        for value in values:
            instance = {key: value}
            valid = validator.is_valid(instance)
            verdicts[valid] += 1
            if accepts(grammar, compact(instance)) != valid:
                wrong.append(f"{compact(instance)}: {'refused' if valid else 'accepted'}")
    assert not wrong, wrong
    return verdicts


def test_one_name_enums_agree_with_jsonschema() -> None:
    verdicts = _verdicts_against_jsonschema(ONE_NAME, ["ab", "abc", "a", 1, None])
    assert verdicts[True] >= 2 and verdicts[False] > 10, verdicts


# An enum of several strings beside keys that assert nothing takes `compile`'s direct path too
# (after its memo: the same list twice is one entry); beside a keyword, or with a value that is
# no string, the general one. Texts a regex would read otherwise (`.`, `|`), JSON escapes and
# repeats among the values.
MANY_NAMES = ["a.b", "c|d", 'q"t', "back\\slash", "ünï", "a.b", "tab\t"]
SEVERAL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inert": {"enum": MANY_NAMES, "ignoreCase": "all", "aliases": ["x"], "description": "d"},
        "again": {"enum": list(MANY_NAMES), "ignoreCase": "all"},
        "bare": {"enum": ["a.b", "c|d"]},
        "too_short": {"enum": MANY_NAMES, "minLength": 4},
        "pattern": {"enum": MANY_NAMES, "pattern": "^[a-c]"},
        "not_one": {"enum": MANY_NAMES, "not": {"const": "c|d"}},
        "mixed": {"enum": ["a.b", 1, "c|d"], "ignoreCase": "all"},
    },
    "additionalProperties": False,
}


def test_enums_of_several_strings_agree_with_jsonschema() -> None:
    values = [*MANY_NAMES, "axb", "c", "d", "cxd", "ab", "unu", 1, None, "a.bc"]
    verdicts = _verdicts_against_jsonschema(SEVERAL, values)
    assert verdicts[True] > 20 and verdicts[False] > 50, verdicts
