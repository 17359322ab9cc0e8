"""Schemas given as Python objects that are not trees: shared nodes and cycles.

A dict or list placed in several places (code that reuses a sub-schema, YAML anchors) is walked
once per place by a tree walk: 24 levels of two-way sharing ran the process out of memory
before `_grammar/shape.py`, and a schema holding itself never finished compiling. The oracles
here are the values themselves: a deep copy (a tree with the same content) for what sharing
must not change, and an independent count of the places for the limit.
"""

from __future__ import annotations

import marshal
import random

import jsonschema
import pytest

from tokensieve import Grammar, GrammarError
from tokensieve._grammar import shape
from tokensieve._grammar.shape import EXPANDED_CONTAINER_COUNT_MAX

from json_text import accepts, compact


def _doubling(depth: int) -> dict:
    """`depth` levels, each an object whose two properties are the same object below it."""
    node: dict = {"type": "string"}
    for _ in range(depth):
        node = {"type": "object", "properties": {"a": node, "b": node}, "required": ["a"]}
    return node


def _places(value) -> int:
    """Objects and arrays counted once per place, by plain recursion (the oracle)."""
    if isinstance(value, dict):
        return 1 + sum(_places(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_places(v) for v in value)
    return 0


def test_a_cycle_through_the_root_is_refused_at_its_place():
    schema: dict = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    with pytest.raises(GrammarError) as caught:
        Grammar.json_schema(schema)
    assert caught.value.json_pointer == "/properties/self"
    assert "cycle" in str(caught.value) and "$ref" in str(caught.value)


def test_a_cycle_below_the_root_is_refused_at_its_place():
    inner: dict = {"type": "array", "items": None}
    inner["items"] = {"anyOf": [{"type": "null"}, inner]}
    with pytest.raises(GrammarError) as caught:
        Grammar.json_schema({"type": "object", "properties": {"list": inner}})
    assert caught.value.json_pointer == "/properties/list/items/anyOf/1"


def test_a_cycle_in_a_structural_tag_is_refused():
    spec: dict = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "object"}}}
    spec["format"]["json_schema"]["properties"] = {"x": spec["format"]["json_schema"]}
    with pytest.raises(GrammarError):
        Grammar.structural_tag(spec)


@pytest.mark.parametrize("depth", [17, 40, 200])
def test_sharing_that_expands_past_the_limit_is_refused(depth):
    # 24 levels ran out of memory before; 200 levels would be 2^200 places.
    assert _places(_doubling(10)) * 2 ** (17 - 10) > EXPANDED_CONTAINER_COUNT_MAX  # the oracle's count at 17
    with pytest.raises(GrammarError) as caught:
        Grammar.json_schema(_doubling(depth))
    pointer = caught.value.json_pointer
    assert pointer is not None and pointer.startswith("/properties/a")
    assert f"{EXPANDED_CONTAINER_COUNT_MAX:,}" in str(caught.value)


def test_yaml_style_nested_aliases_are_refused():
    # The billion laughs: nine levels of lists of nine references to the level below.
    node: list = ["lol"] * 9
    for _ in range(8):
        node = [node] * 9
    with pytest.raises(GrammarError):
        Grammar.json_schema({"enum": [node]})
    with pytest.raises(GrammarError):
        Grammar.structural_tag({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"enum": [node]}}})


def test_sharing_within_the_limit_compiles_to_the_language_of_its_tree():
    shared = _doubling(8)
    tree = _as_tree(shared)
    assert _shares(shared) and not _shares(tree)
    validator = jsonschema.Draft202012Validator(tree)
    grammar = Grammar.json_schema(shared, whitespace="compact")
    values = []
    for leaf in ("x", 3):
        value: object = leaf
        for level in range(8):
            value = {"a": value, "b": value} if level % 2 else {"a": value}
        values.append(value)
    values.append({"b": values[0]["a"]})  # `a` is required
    verdicts = set()
    for value in values:
        valid = validator.is_valid(value)
        verdicts.add(valid)
        assert accepts(grammar, compact(value)) == valid
    assert verdicts == {True, False}


def _as_tree(value):
    if isinstance(value, dict):
        return {k: _as_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_tree(v) for v in value]
    return value


def _random_value(rng: random.Random, pool: list | None, depth: int):
    """A JSON-like value; with a `pool`, a container already made is sometimes placed again
    (the caller clears the pool before reading reference counts)."""
    if pool and rng.random() < 0.15:
        return rng.choice(pool)
    kind = rng.random() if depth < 5 else 0.9
    if kind < 0.35:
        value: dict = {}
        for i in range(rng.randrange(4)):
            value[rng.choice(["type", "items", f"k{i}", "é" * rng.randrange(1, 300), "\u06c0x"])] = _random_value(rng, pool, depth + 1)
        if pool is not None:
            pool.append(value)
        return value
    if kind < 0.6:
        value = [_random_value(rng, pool, depth + 1) for _ in range(rng.randrange(4))]
        if pool is not None:
            pool.append(value)
        return value
    return rng.choice([None, True, 1.5, 2**40, -7, "x" * rng.randrange(300), "\u00fb\u00db", b"\xfb".decode("latin-1") * 251])


def _shares(value) -> bool:
    """Whether some container is reached twice (the oracle: a plain walk by identity)."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)) and child:
                if id(child) in seen:
                    return True
                seen.add(id(child))
                stack.append(child)
    return False


def test_the_marshal_form_check_misses_no_shared_node():
    """`_may_share` may send a tree to the walk, never let a shared node through."""
    rng = random.Random(1901)
    shared_count = 0
    for _ in range(3000):
        pool: list = [] if rng.random() < 0.5 else [[]]
        value = {"root": _random_value(rng, pool, 0)}
        pool.clear()
        if _shares(value):
            shared_count += 1
            assert shape._may_share(marshal.dumps(value, 4)), value
    assert shared_count > 150  # the generator made enough shared values to mean something


def test_trees_rarely_take_the_walk():
    """Payload bytes that look like a flagged container (lengths of 219 or 251, text, floats)
    are told apart by what follows them."""
    rng = random.Random(1902)
    walked = 0
    for _ in range(2000):
        value = {"root": _random_value(rng, None, 0)}
        if shape._may_share(marshal.dumps(value, 4)):
            walked += 1
    assert walked < 100


@pytest.mark.parametrize(
    ("schema", "pointer", "words"),
    [
        ({"type": "object", "properties": {1: {"type": "string"}}}, "/properties", "write '1'"),
        ({"type": "object", "properties": {"a": {"const": {None: 1}}}}, "/properties/a/const", "the key None"),
        ({1: 2, "type": "string"}, "", "the key 1"),
        ({"type": "object", "patternProperties": {(1, 2): {}}}, "/patternProperties", "the key (1, 2)"),
        ({"enum": ["a", 10**5000]}, "/enum/1", "4,300 digits"),
        ({"type": "integer", "maximum": -(10**5000)}, "/maximum", "4,300 digits"),
    ],
)
def test_python_values_json_cannot_hold_are_named_at_their_place(schema, pointer, words):
    # Before: AttributeError, TypeError or ValueError from deep inside the translation.
    with pytest.raises(GrammarError) as caught:
        Grammar.json_schema(schema)
    assert caught.value.json_pointer == pointer
    assert words in str(caught.value) and f"(at {pointer or '/'})" in str(caught.value)


def test_a_python_error_with_json_data_is_not_disguised(monkeypatch):
    """Only a value JSON cannot hold turns a Python error into a GrammarError: a bug stays a bug."""
    from tokensieve._grammar.json_schema import compiler

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(compiler, "_translate", broken)
    with pytest.raises(TypeError, match="a bug"):
        Grammar.json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
