"""Draft 2020-12 keywords: boolean schemas in every position, `unevaluatedProperties` and
`unevaluatedItems` with the applicators they interact with, `$id`/`$anchor`/`$ref`
resolution and `$dynamicRef` — against `jsonschema`'s Draft202012Validator (Draft201909Validator
for `$recursiveRef`) on a pool of small instances and on hypothesis-generated ones.

Grammars use `property_order="any"`, so instances need not list keys in schema order; the
approximations are tested in their documented direction.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, GrammarError, Matcher, Tokenizer
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

BYTES = Tokenizer.from_token_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256], special_token_ids=[256]
)
KEYS = ["a", "b", "c"]
LEAVES: list[Any] = [None, True, 1, 2, "x", ""]


def accepts(grammar: Grammar, value: Any) -> bool:
    matcher = Matcher(BYTES, grammar)
    text = json.dumps(value, separators=(",", ":"))
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


def validator(schema: Any) -> Any:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def superset_of_valid(schema: Any, values: list[Any], **options: Any) -> tuple[Grammar, Any]:
    """The grammar of an approximation stated as a superset, checked in that direction on
    `values` (every value jsonschema finds valid is accepted); the grammar and the validator."""
    grammar = Grammar.json_schema(schema, **options)
    check = validator(schema)
    for value in values:
        if check.is_valid(value):
            assert accepts(grammar, value), value
    return grammar, check


def pool() -> list[Any]:
    out: list[Any] = list(LEAVES) + [[], [1], ["x"], [1, 2], [1, "x"], ["x", 1], [1, 2, 3], [[1]], [{"a": 1}]]
    for n in range(0, 4):
        for keys in itertools.combinations(KEYS, n):
            for values in itertools.product([1, "x", None, {"a": 1}] if n < 3 else [1, "x"], repeat=n):
                out.append(dict(zip(keys, values)))
    out += [{"a": {"a": 1, "b": 2}}, {"a": {"b": 1}}, {"a": [1, [2]]}, {"d": 1}, {"a": 1, "d": 1}]
    return out


POOL = pool()
VALUES = st.recursive(
    st.sampled_from(LEAVES),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS + ["d"]), inner, max_size=3),
    max_leaves=6,
)

EXACT: list[tuple[str, Any]] = [
    # boolean schemas
    ("items_false", {"type": "array", "items": False}),
    ("prefix_items_booleans", {"prefixItems": [True, False]}),
    ("property_false", {"properties": {"a": False}}),
    ("contains_false", {"contains": False}),
    ("any_of_false", {"anyOf": [False, {"type": "integer"}]}),
    ("all_of_true", {"allOf": [True, {"type": "integer"}]}),
    ("ref_to_booleans", {"$defs": {"f": False, "t": True}, "properties": {"a": {"$ref": "#/$defs/f"}, "b": {"$ref": "#/$defs/t"}}}),
    ("if_true", {"if": True, "then": {"type": "integer"}, "else": {"type": "string"}}),
    ("if_false", {"if": False, "then": {"type": "integer"}, "else": {"type": "string"}}),
    ("then_false", {"if": {"type": "integer"}, "then": False}),
    ("property_names_false", {"propertyNames": False}),
    ("pattern_properties_false", {"patternProperties": {"^a": False}}),
    ("dependent_schema_false", {"dependentSchemas": {"a": False}}),
    ("additional_items_false_in_not", {"not": {"type": "array", "prefixItems": [True], "items": False}}),
    # unevaluatedProperties / unevaluatedItems
    # references: pointers with escapes, anchors, $id base URIs, dynamic references
    (
        "ref_pointer_escapes",
        {"$defs": {"a/b": {"type": "integer"}, "t~x": {"type": "string"}, "p%q": {"type": "null"}},
         "properties": {"a": {"$ref": "#/$defs/a~1b"}, "b": {"$ref": "#/$defs/t~0x"}, "c": {"$ref": "#/$defs/p%25q"}}},
    ),
    ("ref_nested_defs", {"$defs": {"o": {"$defs": {"i": {"type": "integer"}}}}, "properties": {"a": {"$ref": "#/$defs/o/$defs/i"}}}),
    ("ref_arbitrary_location", {"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}}),
    ("ref_anchor", {"$defs": {"x": {"$anchor": "num", "type": "integer"}}, "properties": {"a": {"$ref": "#num"}}}),
    ("id_relative", {"$id": "https://ex.com/root.json", "$defs": {"x": {"$id": "x.json", "type": "integer"}}, "properties": {"a": {"$ref": "x.json"}}}),
    (
        "id_changes_the_base_of_pointers",
        {"$id": "https://ex.com/root.json",
         "$defs": {"x": {"$id": "x.json", "$defs": {"y": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/y"}}}},
         "properties": {"a": {"$ref": "x.json"}}},
    ),
    (
        "anchor_per_resource",
        {"$id": "https://ex.com/root.json",
         "$defs": {"x": {"$id": "x.json", "$defs": {"y": {"$anchor": "s", "type": "string"}}}, "z": {"$anchor": "s", "type": "integer"}},
         "properties": {"a": {"$ref": "x.json#s"}, "b": {"$ref": "#s"}}},
    ),
    ("id_urn", {"$id": "urn:example:root", "$defs": {"x": {"type": "integer"}}, "properties": {"a": {"$ref": "urn:example:root#/$defs/x"}}}),
    # Properties named like data keywords (`enum`, `default`) hold schemas: their ids count.
    ("id_property_names", {"$id": "https://ex.com/root.json",
                           "properties": {"enum": {"$id": "e.json", "type": "integer"}, "default": {"$id": "d.json", "type": "string"},
                                          "a": {"$ref": "e.json"}, "b": {"$ref": "https://ex.com/d.json"}}}),
    (
        "dynamic_ref_to_the_root",
        {"$id": "https://ex.com/strict", "$dynamicAnchor": "node", "$ref": "tree", "unevaluatedProperties": False,
         "$defs": {"tree": {"$id": "tree", "$dynamicAnchor": "node", "type": "object",
                            "properties": {"b": {"type": "integer"}, "a": {"$dynamicRef": "#node"}}}}},
    ),
    ("dynamic_ref_single_anchor", {"$id": "https://ex.com/r", "properties": {"a": {"$dynamicRef": "#x"}}, "$defs": {"x": {"$dynamicAnchor": "x", "type": "integer"}}}),
    ("dynamic_ref_without_bookend", {"$id": "https://ex.com/r", "properties": {"a": {"$dynamicRef": "#x"}}, "$defs": {"x": {"$anchor": "x", "type": "integer"}}}),
    (
        "recursive_ref_2019",
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "$id": "https://ex.com/strict", "$recursiveAnchor": True,
         "$ref": "tree", "unevaluatedProperties": False,
         "$defs": {"tree": {"$id": "tree", "$recursiveAnchor": True, "type": "object",
                            "properties": {"b": {"type": "integer"}, "a": {"$recursiveRef": "#"}}}}},
    ),
    ("unevaluated_properties_false", {"properties": {"a": True}, "unevaluatedProperties": False}),
    ("unevaluated_properties_schema", {"properties": {"a": True}, "unevaluatedProperties": {"type": "integer"}}),
    ("unevaluated_with_pattern", {"patternProperties": {"^b": {"type": "string"}}, "unevaluatedProperties": {"type": "integer"}}),
    ("unevaluated_with_additional", {"properties": {"a": True}, "additionalProperties": {"type": "string"}, "unevaluatedProperties": False}),
    ("unevaluated_all_of", {"allOf": [{"properties": {"a": True}}], "properties": {"b": True}, "unevaluatedProperties": False}),
    ("unevaluated_inside_all_of", {"allOf": [{"properties": {"a": True}, "unevaluatedProperties": False}], "properties": {"b": True}}),
    ("unevaluated_ref", {"$defs": {"x": {"properties": {"a": {"type": "integer"}}}}, "$ref": "#/$defs/x", "unevaluatedProperties": False}),
    (
        "unevaluated_any_of",
        {"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": True}, "required": ["b"]}], "unevaluatedProperties": False},
    ),
    (
        "unevaluated_disjoint_one_of",
        {"type": "object", "oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]}, {"properties": {"a": {"const": "x"}, "b": True}, "required": ["a"]}], "unevaluatedProperties": False},
    ),
    ("unevaluated_if_then", {"if": {"required": ["a"]}, "then": {"properties": {"b": True}}, "properties": {"a": True}, "unevaluatedProperties": False}),
    # a failing if, a not, the other oneOf options evaluate nothing (by cases: unevaluated_cases)
    (
        "unevaluated_if_then_else",
        {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"properties": {"b": True}},
         "else": {"properties": {"c": True}}, "unevaluatedProperties": False},
    ),
    ("unevaluated_not", {"properties": {"b": True}, "not": {"properties": {"a": {"type": "string"}}, "required": ["a"]}, "unevaluatedProperties": False}),
    (
        "unevaluated_overlapping_one_of",
        {"oneOf": [{"properties": {"a": True}, "required": ["a"]}, {"properties": {"b": True}}], "unevaluatedProperties": {"type": "integer"}},
    ),
    ("unevaluated_if_any_of", {"if": {"required": ["a"]}, "then": {"anyOf": [{"properties": {"a": True}}, {"properties": {"b": True}, "required": ["b"]}]}, "unevaluatedProperties": False}),
    ("unevaluated_items_if_else", {"if": {"prefixItems": [{"type": "integer"}]}, "then": {"prefixItems": [True, True]}, "else": {"prefixItems": [True]}, "unevaluatedItems": False}),
    ("unevaluated_items_overlapping_one_of", {"oneOf": [{"prefixItems": [{"type": "integer"}]}, {"prefixItems": [True, True]}], "unevaluatedItems": False}),
    ("unevaluated_dependent", {"dependentSchemas": {"a": {"properties": {"b": True}}}, "properties": {"a": True}, "unevaluatedProperties": False}),
    ("unevaluated_nested", {"properties": {"a": {"properties": {"a": True}, "unevaluatedProperties": False}}, "unevaluatedProperties": False}),
    ("unevaluated_items_false", {"prefixItems": [True], "unevaluatedItems": False}),
    ("unevaluated_items_schema", {"prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "string"}}),
    ("unevaluated_items_with_items", {"prefixItems": [True], "items": {"type": "integer"}, "unevaluatedItems": False}),
    ("unevaluated_items_all_of", {"allOf": [{"prefixItems": [True]}], "unevaluatedItems": False}),
    ("unevaluated_items_any_of", {"anyOf": [{"prefixItems": [{"type": "integer"}]}, {"prefixItems": [True, True]}], "unevaluatedItems": False}),
]


@pytest.mark.parametrize("name,schema", EXACT, ids=[c[0] for c in EXACT])
def test_exact_keywords_agree_with_jsonschema(name: str, schema: Any) -> None:
    grammar = Grammar.json_schema(schema, property_order="any")
    check = validator(schema)
    verdicts = {True: 0, False: 0}
    wrong = []
    for value in POOL:
        want = check.is_valid(value)
        verdicts[want] += 1
        if accepts(grammar, value) != want:
            wrong.append(f"{json.dumps(value)}: jsonschema says {'valid' if want else 'invalid'}")
    assert not wrong, f"{name}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] and verdicts[False], verdicts


@pytest.mark.parametrize("schema", [True, {"not": False}, {"not": {"not": True}}, {"allOf": [True, {}]}])
def test_schemas_accepting_everything(schema: Any) -> None:
    grammar = Grammar.json_schema(schema)
    assert all(accepts(grammar, value) for value in POOL)
    for text in ("{", "tru", "[1,]", '{"a"}'):
        matcher = Matcher(BYTES, grammar)
        assert not (matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()), text


@pytest.mark.parametrize("name", [c[0] for c in EXACT if c[0].startswith("unevaluated")])
def test_unevaluated_hypothesis(name: str) -> None:
    schema = dict(EXACT)[name]
    grammar = Grammar.json_schema(schema, property_order="any")
    check = validator(schema)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(VALUES)
    def run(value: Any) -> None:
        assert accepts(grammar, value) == check.is_valid(value), json.dumps(value)

    run()


def test_unevaluated_with_many_any_of_options_is_a_subset_with_a_warning() -> None:
    options = [{"properties": {k: True}, "required": [k]} for k in ("a", "b", "c", "d", "e")]
    schema = {"anyOf": options, "unevaluatedProperties": False}
    ir = json_schema_to_ir(schema)
    assert any("(a subset)" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema, property_order="any")
    check = validator(schema)
    for value in POOL:
        if accepts(grammar, value):
            assert check.is_valid(value), value
    assert check.is_valid({"a": 1, "b": 1}) and not accepts(grammar, {"a": 1, "b": 1})  # the documented subset


# A generic list whose items are whatever the resource that reached it says: integers through
# t1, strings through t2 (the outermost resource of the dynamic scope with the anchor wins).
_GENERIC_LIST = {
    "$id": "https://ex.com/r",
    "properties": {"x": {"$ref": "t1"}, "y": {"$ref": "t2"}, "z": {"$ref": "list"}},
    "$defs": {
        "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"},
                 "$defs": {"item": {"$dynamicAnchor": "item", "not": True}}},
        "t1": {"$id": "t1", "$ref": "list", "$defs": {"item": {"$dynamicAnchor": "item", "type": "integer"}}},
        "t2": {"$id": "t2", "$ref": "list", "$defs": {"item": {"$dynamicAnchor": "item", "type": "string"}}},
    },
}

DYNAMIC_SCOPE_CASES = [
    ("generic_list", _GENERIC_LIST),
    (
        # Nesting enters a resource too: t1's list of lists, whose inner lists go through t2.
        "scope_by_nesting_and_reference",
        {"$id": "https://ex.com/r",
         "properties": {"a": {"$id": "inner", "properties": {"l": {"$ref": "list"}},
                              "$defs": {"item": {"$dynamicAnchor": "item", "type": "boolean"}}},
                        "b": {"$ref": "list"}},
         "$defs": {"list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"},
                            "$defs": {"item": {"$dynamicAnchor": "item", "type": "integer"}}}}},
    ),
    (
        # Recursion: a tree whose nodes are what the outermost extension says, at every depth.
        "recursive_tree_extended_twice",
        {"$id": "https://ex.com/r",
         "properties": {"loose": {"$ref": "tree"}, "strict": {"$ref": "strict"}},
         "$defs": {
             "tree": {"$id": "tree", "$dynamicAnchor": "node", "type": "object",
                      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}},
             "strict": {"$id": "strict", "$dynamicAnchor": "node", "$ref": "tree", "required": ["v"]},
         }},
    ),
    (
        # 2019-09: the outermost of the unbroken run of resources with $recursiveAnchor.
        "recursive_ref_extended",
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "$id": "https://ex.com/r",
         "properties": {"loose": {"$ref": "tree"}, "strict": {"$ref": "strict"}, "wrapped": {"$ref": "wrap"}},
         "$defs": {
             "tree": {"$id": "tree", "$recursiveAnchor": True, "type": "object",
                      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$recursiveRef": "#"}}}},
             "strict": {"$id": "strict", "$recursiveAnchor": True, "$ref": "tree", "required": ["v"]},
             # No anchor here: the run from tree back to strict is broken, so the kids are trees.
             "wrap": {"$id": "wrap", "properties": {"loose": {"$ref": "tree"}, "strict": {"$ref": "strict"}}},
         }},
    ),
]
DYNAMIC_VALUES = POOL + [
    {"wrapped": {"loose": {"kids": [{}]}, "strict": {"v": 1, "kids": [{"v": 1}, {"kids": []}]}}},
    {"wrapped": {"strict": {"v": 1, "kids": [{"kids": [{}]}]}}},
    {"wrapped": {"loose": {"kids": [{}]}, "strict": {"v": 1, "kids": [{"v": 2}]}}},
    {"x": [1, 2], "y": ["a"]}, {"x": ["a"]}, {"y": [1]}, {"x": [None]}, {"z": []}, {"z": [1]}, {"x": [], "y": [], "z": []},
    {"a": {"l": [True, False]}}, {"a": {"l": [1]}}, {"b": [1, 2]}, {"b": [True]}, {"a": True},
    {"loose": {"kids": [{"v": 1}, {}]}}, {"strict": {"v": 1, "kids": [{"v": 2, "kids": [{}]}]}},
    {"strict": {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}}, {"strict": {"kids": []}}, {"loose": {"v": "x"}},
]


@pytest.mark.parametrize("name, schema", DYNAMIC_SCOPE_CASES, ids=[c[0] for c in DYNAMIC_SCOPE_CASES])
def test_dynamic_ref_depending_on_the_path_is_exact(name: str, schema: Any) -> None:
    assert not json_schema_to_ir(schema).options["warnings"]
    grammar = Grammar.json_schema(schema)
    check = validator(schema)
    outcomes = {(check.is_valid(v), accepts(grammar, v)) for v in DYNAMIC_VALUES}
    assert outcomes <= {(True, True), (False, False)}, [v for v in DYNAMIC_VALUES if check.is_valid(v) != accepts(grammar, v)]
    assert (True, True) in outcomes and (False, False) in outcomes


def test_dynamic_ref_past_the_copy_limit_is_a_superset_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokensieve._grammar.json_schema import refs

    monkeypatch.setattr(refs, "DYNAMIC_COPIES_MAX", 2)
    warnings = json_schema_to_ir(_GENERIC_LIST).options["warnings"]
    assert any(w.startswith("/$defs/list/items/$dynamicRef:") and "a superset" in w for w in warnings), warnings
    grammar, check = superset_of_valid(_GENERIC_LIST, DYNAMIC_VALUES)
    assert accepts(grammar, {"x": ["a"]}) and not check.is_valid({"x": ["a"]})  # the stated superset


def test_unevaluated_inside_all_of_beside_siblings_is_a_superset_with_a_warning() -> None:
    schema = {
        "allOf": [{"anyOf": [{"properties": {"a": True}, "required": ["a"]}, {"required": ["c"]}], "unevaluatedProperties": False}],
        "properties": {"b": True},
    }
    ir = json_schema_to_ir(schema)
    assert any("inside allOf" in w and "(a superset)" in w for w in ir.options["warnings"])
    grammar, check = superset_of_valid(schema, POOL, property_order="any")
    assert not check.is_valid({"a": 1, "b": 1}) and accepts(grammar, {"a": 1, "b": 1})  # the documented superset
    assert not accepts(grammar, {"a": 1, "d": 1})


# The draft 2020-12 meta-schema, referenced by URI: jsonschema's copy of the published
# meta-schema (format not asserted) is the oracle, on the keyword corpus's schemas (valid) and
# malformed ones, each written with its keys in the meta-schema's property order (the default
# property order of the grammar).
META_INVALID: list[Any] = [
    {"type": "strnig"}, {"minLength": -1}, {"required": "a"}, {"properties": {"a": 3}}, {"allOf": []}, 3, "x",
    {"$anchor": "1a"}, {"type": []}, {"multipleOf": 0}, {"items": [{}]}, {"$id": "a#b"}, {"not": {"minItems": 1.5}},
]


def _meta_ordered(value: Any, order: list[str] | None = None) -> Any:
    if order is None:
        from tokensieve._grammar.json_schema.metaschema import META_SCHEMA_2020_12

        order = list(META_SCHEMA_2020_12["properties"])
    if isinstance(value, dict):
        return {k: _meta_ordered(value[k], order) for k in sorted(value, key=lambda k: order.index(k) if k in order else len(order))}
    if isinstance(value, list):
        return [_meta_ordered(v, order) for v in value]
    return value


@pytest.mark.parametrize("uri", ["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#"])
def test_the_meta_schema_is_shipped(uri: str) -> None:
    from pathlib import Path

    corpus = Path(__file__).parent / "data" / "json_schema" / "keywords.json"
    valid = [case["schema"] for case in json.loads(corpus.read_text(encoding="utf-8"))] + [True, False, {}]
    oracle = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    for schema in ({"$ref": uri}, {"type": "object", "properties": {"s": {"$ref": uri}}, "required": ["s"]}):
        assert json_schema_to_ir(schema).options["warnings"] == []
        grammar = Grammar.json_schema(schema)
        for value in valid + META_INVALID:
            value = _meta_ordered(value)
            instance = value if "properties" not in schema else {"s": value}
            assert accepts(grammar, instance) == oracle.is_valid(value), (schema, value)
    assert all(oracle.is_valid(v) for v in valid) and not any(oracle.is_valid(v) for v in META_INVALID)


# The drafts 04, 06 and 07 meta-schemas, referenced whole and by JSON pointer into them (as
# swagger-2.0 does): jsonschema's copies of the published ones are the oracle. Values whose
# verdict hangs on what is documented as left out (formats, uniqueItems of string lists) are
# not in the pool.
OLD_META_VALUES: list[Any] = [
    {"type": "string"}, {"type": ["string", "null"]}, {"type": "strnig"}, {"type": []}, {"minLength": -1}, {"minLength": 2},
    {"maxItems": 1.5}, {"required": "a"}, {"required": ["a"]}, {"required": []}, {"properties": {"a": 3}},
    {"properties": {"a": {"type": "integer"}}}, {"allOf": []}, {"anyOf": [{}]}, {"items": [{}]}, {"items": {}},
    {"minimum": 1, "exclusiveMinimum": True}, {"exclusiveMinimum": True}, {"exclusiveMinimum": 1}, {"multipleOf": 0},
    {"multipleOf": 2.5}, {"enum": []}, {"enum": [1, "a"]}, {"const": 3}, {"contains": {"type": "string"}},
    {"if": {}, "then": 3}, {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}, {"dependencies": {"a": 3}},
    {"additionalProperties": False}, {"additionalItems": 3}, {"propertyNames": {"maxLength": 3}},
    {"not": {"minItems": -1}}, {"$comment": 3}, {"readOnly": "yes"}, True, False, 3, "x", {}, [],
]


@pytest.mark.parametrize("draft", [4, 6, 7])
def test_older_meta_schemas_are_shipped(draft: int) -> None:
    from tokensieve._grammar.json_schema.metaschema import _old_meta_schema

    validator = {4: jsonschema.Draft4Validator, 6: jsonschema.Draft6Validator, 7: jsonschema.Draft7Validator}[draft]
    oracle = validator(validator.META_SCHEMA)
    order = list(_old_meta_schema(draft)["properties"])
    uri = f"http://json-schema.org/draft-0{draft}/schema#"
    verdicts = set()
    for schema in ({"$ref": uri}, {"type": "object", "properties": {"s": {"$ref": uri}}, "required": ["s"]}):
        assert json_schema_to_ir(schema).options["warnings"] == []
        grammar = Grammar.json_schema(schema)
        for value in OLD_META_VALUES:
            value = _meta_ordered(value, order)
            instance = value if "properties" not in schema else {"s": value}
            expected = oracle.is_valid(value)
            verdicts.add(expected)
            assert accepts(grammar, instance) == expected, (draft, value)
    assert verdicts == {True, False}


def test_references_into_the_draft_04_meta_schema_resolve_as_published() -> None:
    """swagger-2.0's references by pointer into the draft-04 meta-schema, against jsonschema
    resolving the same references in its copy of the published document."""
    base = "http://json-schema.org/draft-04/schema#"
    names = ["/definitions/positiveInteger", "/definitions/positiveIntegerDefault0", "/definitions/stringArray",
             "/properties/multipleOf", "/properties/minimum", "/properties/exclusiveMaximum", "/properties/type",
             "/properties/pattern", "/properties/title", "/properties/enum"]
    schema = {"type": "object", "properties": {name.rsplit("/", 1)[-1]: {"$ref": base + name} for name in names}}
    oracle = jsonschema.Draft4Validator(schema)
    grammar = Grammar.json_schema(schema)
    verdicts = set()
    for name in names:
        key = name.rsplit("/", 1)[-1]
        for value in [0, 3, -1, 2.5, "x", True, None, ["a"], [], ["string", "null"], "strnig", {}]:
            expected = oracle.is_valid({key: value})
            verdicts.add(expected)
            assert accepts(grammar, {key: value}) == expected, (name, value)
    assert verdicts == {True, False}


# ---- not of a schema with a pending unevaluated* beside anyOf/oneOf/if/not/dependencies -------
# The negated schema is split by which of its subschemas pass (a failing subschema evaluates
# nothing); in each case its negation is the negation of that case's resolved schema. Exact
# except beside anyOf of more than UNEVALUATED_ANY_OF_MAX options (a superset, below).

ANY_AB = [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": True}, "required": ["b"]}]
NEGATED_UNEVALUATED: list[tuple[str, Any]] = [
    ("any_of", {"not": {"anyOf": ANY_AB, "unevaluatedProperties": False}}),
    ("any_of_optional", {"not": {"anyOf": [{"properties": {"a": True}, "required": ["a"]}, {"properties": {"b": True}}], "unevaluatedProperties": False}}),
    ("any_of_beside_object", {"type": "object", "not": {"anyOf": ANY_AB, "unevaluatedProperties": {"type": "string"}}}),
    ("one_of_overlapping", {"not": {"oneOf": [{"properties": {"a": True}, "required": ["a"]}, {"properties": {"b": True}}], "unevaluatedProperties": False}}),
    ("one_of_schema", {"not": {"oneOf": ANY_AB, "unevaluatedProperties": {"type": "string"}}}),
    ("if_then", {"not": {"if": {"required": ["a"]}, "then": {"properties": {"b": True}}, "properties": {"a": True}, "unevaluatedProperties": False}}),
    (
        "if_then_else",
        {"not": {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"properties": {"b": True}},
                 "else": {"properties": {"c": True}}, "unevaluatedProperties": False}},
    ),
    ("if_then_any_of", {"not": {"if": {"required": ["a"]}, "then": {"anyOf": [{"properties": {"a": True}, "required": ["a"]}, {"properties": {"b": True}}]},
                                "else": {"properties": {"c": True}}, "unevaluatedProperties": False}}),
    ("any_of_and_if", {"not": {"anyOf": ANY_AB, "if": {"required": ["c"]}, "then": {"properties": {"c": {"type": "integer"}}}, "unevaluatedProperties": False}}),
    ("not", {"not": {"properties": {"a": True}, "not": {"required": ["b"]}, "unevaluatedProperties": False}}),
    ("dependent_schemas", {"not": {"properties": {"a": True}, "dependentSchemas": {"a": {"properties": {"b": True}}}, "unevaluatedProperties": False}}),
    ("dependent_required", {"not": {"properties": {"a": True, "b": True}, "dependentRequired": {"a": ["b"]}, "anyOf": [{"required": ["a"]}, {"properties": {"c": True}}], "unevaluatedProperties": False}}),
    ("all_of_any_of", {"not": {"allOf": [{"anyOf": [{"properties": {"a": True}}, {"properties": {"b": True}}]}], "unevaluatedProperties": False}}),
    ("ref_any_of", {"$defs": {"x": {"anyOf": ANY_AB}}, "not": {"$ref": "#/$defs/x", "unevaluatedProperties": False}}),
    ("nested", {"properties": {"a": {"not": {"anyOf": [{"properties": {"a": True}}, {"required": ["b"]}], "unevaluatedProperties": {"type": "integer"}}}}}),
    ("not_not", {"not": {"not": {"anyOf": ANY_AB, "unevaluatedProperties": False}}}),
    ("items_any_of", {"not": {"anyOf": [{"prefixItems": [True]}, {"prefixItems": [True, True]}], "unevaluatedItems": False}}),
    ("items_any_of_schema", {"not": {"anyOf": [{"prefixItems": [{"type": "integer"}]}, {"prefixItems": [True, {"type": "string"}]}], "unevaluatedItems": {"type": "string"}}}),
    ("items_if", {"not": {"prefixItems": [True], "if": {"prefixItems": [True, {"type": "integer"}]}, "then": {"prefixItems": [True, True]}, "unevaluatedItems": False}}),
    ("items_one_of", {"not": {"oneOf": [{"prefixItems": [{"type": "integer"}]}, {"prefixItems": [True, True]}], "unevaluatedItems": False}}),
]
ARRAYS = [list(v) for n in range(5) for v in itertools.product([1, "x", None], repeat=n)]
ARRAY_VALUES = st.lists(st.sampled_from([*LEAVES, [1], {"a": 1}]), max_size=6)


def agrees(schema: Any, pool: list[Any], strategy: Any) -> None:
    """The grammar accepts exactly what jsonschema validates, on `pool` and on generated values
    (and the pool holds both)."""
    grammar = Grammar.json_schema(schema, property_order="any")
    check = validator(schema)
    wrong = [v for v in pool if accepts(grammar, v) != check.is_valid(v)]
    assert not wrong, f"{len(wrong)} disagreements with jsonschema, e.g. {wrong[:5]}"
    assert any(check.is_valid(v) for v in pool) and not all(check.is_valid(v) for v in pool)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(strategy)
    def run(value: Any) -> None:
        assert accepts(grammar, value) == check.is_valid(value), json.dumps(value)

    run()


@pytest.mark.parametrize("name,schema", NEGATED_UNEVALUATED, ids=[c[0] for c in NEGATED_UNEVALUATED])
def test_not_of_pending_unevaluated_is_exact(name: str, schema: Any) -> None:
    assert json_schema_to_ir(schema).options["warnings"] == []
    agrees(schema, POOL + ARRAYS, VALUES if "items" not in name else ARRAY_VALUES | VALUES)


def test_not_of_unevaluated_beside_many_any_of_options_is_a_superset_with_a_warning() -> None:
    options = [{"properties": {k: True}} for k in ("a", "b", "c", "d")] + [{"required": ["a", "b"]}]
    schema = {"not": {"anyOf": options, "unevaluatedProperties": False}}
    warnings = json_schema_to_ir(schema).options["warnings"]
    assert any(w.startswith("/not:") and "anyOf of more than 4" in w and "(a superset)" in w for w in warnings), warnings
    grammar, check = superset_of_valid(schema, POOL, property_order="any")
    # {"a": 1} passes options 0 (evaluating a) and 1, ..., so the negated schema holds; the case
    # of option 1 alone counts only b as evaluated: the documented superset.
    assert not check.is_valid({"a": 1}) and accepts(grammar, {"a": 1})
    assert not accepts(grammar, {}) and not accepts(grammar, 1)  # every case holds: rejected


@pytest.mark.parametrize(
    "schema,pointer",
    [
        # The negated schema holds for every object: nothing is left (the `not` is named, not a
        # part of the construction).
        (
            {"type": "object", "properties": {"a": {"not": {"if": {"required": ["x"]}, "then": {"properties": {"x": True}},
                                                            "else": True, "unevaluatedProperties": True}}}, "required": ["a"]},
            "/properties/a/not",
        ),
        ({"not": {"anyOf": [True, {"type": "integer"}], "unevaluatedProperties": True}}, "/not"),
        # An error inside an option names the option.
        ({"not": {"anyOf": [{"properties": {"a": {"pattern": "(?<=a)b"}}}, {"required": ["b"]}], "unevaluatedProperties": False}},
         "/not/anyOf/0/properties/a/pattern"),
        ({"not": {"if": {"properties": {"a": {"pattern": "(?<=a)b"}}}, "then": {"required": ["b"]}, "unevaluatedProperties": False}},
         "/not/if/properties/a/pattern"),
    ],
)
def test_not_of_pending_unevaluated_errors_name_the_place(schema: Any, pointer: str) -> None:
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == pointer, str(info.value)


# ---- contains with minContains/maxContains merged by allOf --------------------------------
# Counted exactly: a state (items, matches of each contains), an item in one class per set of
# the contains it is counted for (NOT each other one that has a maxContains).

INT, STR = {"type": "integer"}, {"type": "string"}
COUNTED_CONTAINS: list[tuple[str, Any]] = [
    ("min_and_max", {"allOf": [{"contains": INT, "minContains": 2}, {"contains": STR, "maxContains": 1}]}),
    ("overlapping", {"allOf": [{"contains": INT, "maxContains": 1}, {"contains": {"enum": [1, "x"]}, "minContains": 1, "maxContains": 2}]}),
    ("nested_sets", {"allOf": [{"contains": INT, "minContains": 2, "maxContains": 3}, {"contains": {"const": 1}, "maxContains": 1}]}),
    ("zero_minimum", {"allOf": [{"contains": INT, "minContains": 0, "maxContains": 1}, {"contains": STR, "minContains": 0, "maxContains": 1}], "maxItems": 3}),
    ("three", {"allOf": [{"contains": INT, "minContains": 2}, {"contains": STR}, {"contains": {"type": "null"}, "maxContains": 0}]}),
    ("with_plain_contains", {"allOf": [{"contains": INT, "maxContains": 2}, {"contains": STR}, {"contains": {"const": 1}}]}),
    ("prefix_items", {"prefixItems": [STR], "allOf": [{"contains": INT, "minContains": 1}, {"contains": STR, "minContains": 2}]}),
    ("same_class", {"allOf": [{"contains": INT, "maxContains": 1}, {"contains": INT, "minContains": 1}]}),
    # one schema twice: the tighter bounds, a missing minContains counting as 1
    ("same_schema_default_minimum", {"allOf": [{"contains": STR, "minContains": 0, "maxContains": 0}, {"contains": STR}]}),
    ("same_schema_and_another", {"allOf": [{"contains": STR, "maxContains": 2}, {"contains": STR, "minContains": 2}, {"contains": INT, "maxContains": 1}]}),
    ("ref", {"$defs": {"two": {"contains": INT, "minContains": 2}}, "$ref": "#/$defs/two", "contains": STR, "maxContains": 1}),
    # an item witness (not of items after prefixItems) beside counted contains: counted too
    ("witness_beside_min_contains", {"type": "array", "contains": INT, "minContains": 2, "not": {"prefixItems": [True], "items": INT}}),
    ("witness_beside_max_contains", {"type": "array", "contains": INT, "maxContains": 1, "not": {"prefixItems": [True, True, True], "items": STR}}),
    ("witness_beside_merged", {"allOf": [{"contains": INT, "maxContains": 2}, {"contains": STR}], "not": {"prefixItems": [True], "items": INT}}),
    ("negated", {"not": {"allOf": [{"contains": INT, "minContains": 2}, {"contains": STR, "maxContains": 1}]}}),
    ("negated_array", {"type": "array", "not": {"allOf": [{"contains": INT, "maxContains": 1}, {"contains": {"enum": [1, "x"]}, "minContains": 2}]}}),
    # contains evaluates the items it matches: beside unevaluatedItems, exact
    ("unevaluated_items", {"contains": INT, "minContains": 2, "unevaluatedItems": False}),
    ("unevaluated_items_prefix", {"prefixItems": [True], "contains": INT, "unevaluatedItems": STR}),
    ("unevaluated_items_two_plain", {"allOf": [{"contains": INT}, {"contains": STR}], "unevaluatedItems": False}),
    ("unevaluated_items_counted", {"allOf": [{"contains": INT, "maxContains": 1}, {"contains": STR}], "unevaluatedItems": {"type": "null"}}),
]


@pytest.mark.parametrize("name,schema", COUNTED_CONTAINS, ids=[c[0] for c in COUNTED_CONTAINS])
def test_counted_contains_merged_are_exact(name: str, schema: Any) -> None:
    assert json_schema_to_ir(schema).options["warnings"] == []
    agrees(schema, ARRAYS + POOL, ARRAY_VALUES)


def test_more_counted_contains_than_the_limit_is_a_superset_with_a_warning() -> None:
    parts = [{"contains": {"const": v}, "maxContains": 1} for v in (1, 2, "x", "", None)]
    schema = {"allOf": parts}
    warnings = json_schema_to_ir(schema).options["warnings"]
    assert any(w.startswith("/contains:") and "(a superset)" in w for w in warnings), warnings
    grammar, check = superset_of_valid(schema, ARRAYS)
    every = [1, 2, "x", "", None]
    assert accepts(grammar, every) and check.is_valid(every)
    assert not accepts(grammar, [*every, 1]) and not accepts(grammar, [*every, ""])  # the first four: counted
    assert not check.is_valid([*every, None]) and accepts(grammar, [*every, None])  # the fifth: not


def test_counted_contains_past_the_state_limit_is_an_error_naming_it() -> None:
    schema = {"allOf": [{"contains": {"const": v}, "minContains": 30} for v in (1, 2, 3)]}
    with pytest.raises(GrammarError, match="grammar states") as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == "/contains"


# ---- allOf merges: one side's additionalProperties/patternProperties (items) apply to the other
# side's listed properties (prefix items); merged recursive $refs recur ----------------------


def _chain(depth: int) -> Any:
    return {} if depth == 0 else {"a": _chain(depth - 1)}


CHAINS = [_chain(n) for n in range(7)] + [{"a": 1}, {"a": {"a": 1}}, {"b": {}}]
MERGES: list[tuple[str, Any]] = [
    ("items_then_prefix", {"allOf": [{"items": INT}, {"prefixItems": [True]}]}),
    ("prefix_then_items", {"allOf": [{"prefixItems": [True, STR]}, {"items": INT}]}),
    ("additional_then_properties", {"allOf": [{"additionalProperties": INT}, {"properties": {"a": True}}]}),
    # a chain of "a"s (t) whose length is even (e/o): the merged refs come back every 2 levels
    (
        "recursive_refs",
        {"$defs": {"t": {"type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}, "additionalProperties": False},
                   "e": {"additionalProperties": {"$ref": "#/$defs/o"}}, "o": {"additionalProperties": {"$ref": "#/$defs/e"}, "minProperties": 1}},
         "allOf": [{"$ref": "#/$defs/t"}, {"$ref": "#/$defs/e"}]},
    ),
]


@pytest.mark.parametrize("name,schema", MERGES, ids=[c[0] for c in MERGES])
def test_merges_apply_each_side_to_the_other(name: str, schema: Any) -> None:
    agrees(schema, POOL + ARRAYS + CHAINS, VALUES)
