"""Objects in schema order (`object_body`, `object_body_open`) against the `jsonschema` package.

Hypothesis draws objects over a few keys (listed properties in some order, required ones,
listed or not, closed, open or typed extras, a pattern, sometimes `minProperties`/
`maxProperties`), two of them alike in one array so that objects share their tails and
optional members (`object_body_open` makes those once per schema). Texts are every set of up
to four keys of a small universe, in schema order and reversed, with two value assignments:
a text is accepted exactly when `jsonschema` finds its value valid and its keys stand in the
order the grammar fixes (the listed members in order, then the other keys; a documented
departure). Texts with a comma too many (leading, trailing, doubled) are refused.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, GrammarError
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

from json_text import accepts

UNIVERSE = ["a", "b", "c", "d", "e", "r", "x1", "z"]  # r: required, not listed; x1: a pattern's; z: extra
VALUE_SCHEMAS: list[Any] = [
    {},
    {"type": "integer"},
    {"type": "string"},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
]
VALUES: list[Any] = [1, "s", None, {"a": 1}, {}]


@st.composite
def object_schemas(draw: Any) -> dict[str, Any]:
    listed = draw(st.lists(st.sampled_from(UNIVERSE[:5]), unique=True, max_size=5))
    schema: dict[str, Any] = {"type": "object", "properties": {k: draw(st.sampled_from(VALUE_SCHEMAS)) for k in listed}}
    required = [k for k in listed if draw(st.booleans())]
    if draw(st.integers(0, 3)) == 0:
        required.append("r")
    if required:
        schema["required"] = required
    extras = draw(st.sampled_from(["open", "closed", "typed", "pattern"]))
    if extras == "closed":
        schema["additionalProperties"] = False
    elif extras == "typed":
        schema["additionalProperties"] = {"type": "integer"}
    elif extras == "pattern":
        schema["patternProperties"] = {"^x": {"type": "string"}}
        schema["additionalProperties"] = False
    bounds = draw(st.integers(0, 5))
    if bounds == 0:
        schema["minProperties"] = draw(st.integers(0, 2))
    elif bounds == 1:
        schema["maxProperties"] = draw(st.integers(1, 4))
    return schema


def alike(schema: dict[str, Any], draw: Any) -> dict[str, Any]:
    """`schema` with its first listed property dropped or made required: the same members
    from the second on, so the two objects share what follows it."""
    other = json.loads(json.dumps(schema))
    listed = list(other["properties"])
    if listed and draw(st.booleans()):
        del other["properties"][listed[0]]
        other["required"] = [k for k in other.get("required", []) if k != listed[0]]
    elif listed:
        other["required"] = list(dict.fromkeys([*other.get("required", []), listed[0]]))
    return other


def in_schema_order(keys: list[str], taken: list[str]) -> bool:
    """Whether the listed (and required) members among `keys` stand in `taken` order, before
    every other key: the order the grammar fixes."""
    members = [k for k in keys if k in taken]
    return members == sorted(members, key=taken.index) and keys[: len(members)] == members


def texts(schema: dict[str, Any], seed: int) -> list[tuple[str, bool]]:
    """(text, verdict) pairs: accepted exactly when `jsonschema` finds the value valid and its
    keys stand in schema order."""
    rng = random.Random(seed)
    taken = list(schema["properties"]) + [k for k in schema.get("required", []) if k not in schema["properties"]]
    validator = jsonschema.Draft202012Validator(schema)
    out: list[tuple[str, bool]] = []
    for size in range(5):
        for keys in itertools.combinations(UNIVERSE, size):
            ordered = sorted(keys, key=lambda k: taken.index(k) if k in taken else len(taken) + UNIVERSE.index(k))
            orders = [ordered] if size < 2 else [ordered, ordered[::-1]]
            for order in orders:
                in_order = in_schema_order(order, taken)
                for values in ([1] * size, [rng.choice(VALUES) for _ in range(size)]):
                    value = dict(zip(order, values))
                    valid = validator.is_valid(value)
                    body = ",".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in value.items())
                    out.append(("{" + body + "}", valid and in_order))
                    if valid and in_order and body:
                        out.append(("{," + body + "}", False))
                        out.append(("{" + body + ",}", False))
                        if "," in body:
                            out.append(("{" + body.replace(",", ",,", 1) + "}", False))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(object_schemas(), st.data())
def test_objects_in_schema_order_agree_with_jsonschema(first: dict[str, Any], data: Any) -> None:
    second = alike(first, data.draw)
    root = {"type": "array", "prefixItems": [first, second], "items": False, "minItems": 2}
    cases = [texts(first, 1), texts(second, 2)]
    # The other position holds a valid object of its own schema (in order, so accepted).
    fillers = [next((t for t, v in case if v), None) for case in cases]
    assume(None not in fillers)  # (an object no text here satisfies: `required: ["r"]`, closed)
    ir = json_schema_to_ir(root)
    assert ir.options["warnings"] == []
    grammar = Grammar.json_schema(root)
    verdicts: set[bool] = set()
    wrong = []
    for position, case in enumerate(cases):
        filler = fillers[1 - position]
        for text, want in case:
            array = f"[{text},{filler}]" if position == 0 else f"[{filler},{text}]"
            verdicts.add(want)
            if accepts(grammar, array) != want:
                wrong.append(f"{array}: expected {'accept' if want else 'refuse'}")
    assert not wrong, f"{len(wrong)} disagreements under {json.dumps(root)}, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts == {True, False}


def test_an_object_of_optional_members_takes_each_subset_in_order() -> None:
    """Five optional members and open extras: all 32 subsets in order are accepted, and with
    extras after them; any two members swapped, or an extra before a member, are refused."""
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"}}
    grammar = Grammar.json_schema(schema)
    for size in range(6):
        for keys in itertools.combinations("abcde", size):
            pairs = [f'"{k}":1' for k in keys]
            assert accepts(grammar, "{" + ",".join(pairs) + "}")
            assert accepts(grammar, "{" + ",".join([*pairs, '"z":"s"', '"y":[]']) + "}")
            if size >= 2:
                assert not accepts(grammar, "{" + ",".join([pairs[1], pairs[0], *pairs[2:]]) + "}")
                assert not accepts(grammar, "{" + ",".join(['"z":1', *pairs]) + "}")
                assert not accepts(grammar, "{" + ",".join([*pairs, pairs[0]]) + "}")


# Members whose values `compile_object` takes itself (a plain type or a `$ref` beside
# annotations) among members it compiles the general way, in objects of every extras kind.
DIRECT_DEFS: dict[str, Any] = {
    "int": {"type": "integer"},
    "obj": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    "str": {"$ref": "#/$defs/text"},
    "text": {"type": "string", "description": "a $ref to a $ref"},
}
DIRECT_VALUES: list[Any] = [
    {"$ref": "#/$defs/int", "description": "an integer"},
    {"$ref": "#/$defs/obj"},
    {"$ref": "#/$defs/str", "title": "a string", "examples": ["s"]},
    {"type": "string", "description": "plain"},
    {"type": "null"},
    {"type": "integer", "_format": "int32", "x-kind": "n"},  # keys that assert nothing
    {"type": "integer", "maximum": 5},  # not taken directly: a keyword beside the type
    {"$ref": "#/$defs/int", "maximum": 5},  # not directly either
]


@pytest.mark.parametrize("seed", range(12))
def test_members_taken_directly_agree_with_jsonschema(seed: int) -> None:
    rng = random.Random(seed)
    listed = rng.sample(UNIVERSE[:5], rng.randint(1, 5))
    schema: dict[str, Any] = {
        "$defs": DIRECT_DEFS,
        "type": "object",
        "properties": {k: rng.choice(DIRECT_VALUES) for k in listed},
    }
    # One required member at most, one whose value 1 is valid: the texts that give every key
    # 1 then meet it.
    required = [
        k for k in listed
        if jsonschema.Draft202012Validator({"$defs": DIRECT_DEFS, **schema["properties"][k]}).is_valid(1)
    ]
    if seed % 2 and required:
        schema["required"] = [rng.choice(required)]
    extras = seed % 3
    if extras == 1:
        schema["additionalProperties"] = False
    elif extras == 2:
        schema["additionalProperties"] = {"type": "integer"}
    grammar = Grammar.json_schema(schema)
    cases = texts(schema, seed)
    wrong = [text for text, want in cases if accepts(grammar, text) != want]
    assert not wrong, f"{len(wrong)} disagreements under {json.dumps(schema)}, e.g. {wrong[:5]}"
    assert {want for _, want in cases} == {True, False}


def test_a_member_reference_that_does_not_resolve_is_named_by_its_pointer() -> None:
    schema = {"type": "object", "properties": {"ok": {"$ref": "#/$defs/a"}, "a/b~": {"$ref": "#/$defs/gone"}},
              "$defs": {"a": {"type": "integer"}}}
    with pytest.raises(GrammarError) as err:
        json_schema_to_ir(schema)
    assert err.value.json_pointer == "/properties/a~1b~0/$ref"


@pytest.mark.parametrize("member", [{"type": "string"}, {"$ref": "#/$defs/s"}])
def test_members_taken_directly_count_toward_the_depth_of_a_reused_object(member: dict[str, Any]) -> None:
    """An object of three levels, its innermost member taken directly, first at a shallow
    place and then again `m` object levels down (its compile reused there when the limit
    allows): its innermost member lies 8 + 2m segments below the root, so 128 levels hold at
    m = 60 and m = 61 is refused, as a translation that compiled it afresh would. (Closed
    objects: open ones compile their extras' value one level down, which would hide a
    member's depth left unrecorded.)"""
    inner: dict[str, Any] = member
    for _ in range(3):
        inner = {"type": "object", "properties": {"k": inner}, "additionalProperties": False}

    def schema(m: int) -> dict[str, Any]:
        deep = inner
        for _ in range(m):
            deep = {"type": "object", "properties": {"w": deep}, "additionalProperties": False}
        return {"$defs": {"s": {"type": "string"}}, "type": "object", "properties": {"a": inner, "b": deep},
                "additionalProperties": False}

    assert json_schema_to_ir(schema(60)).rules
    with pytest.raises(GrammarError, match="nests deeper than 128"):
        json_schema_to_ir(schema(61))
