"""The meta-schemas of drafts 2020-12, 07, 06 and 04, for schemas that reference them
(`"$ref": "https://json-schema.org/draft/2020-12/schema"`: "a value that is itself a JSON
Schema"; swagger-2.0 takes `minimum` and `uniqueItems` from
`http://json-schema.org/draft-04/schema#/properties/...`).

Written here from the specification's keyword list (JSON Schema Core and Validation, 2020-12)
as one self-contained resource, so that a reference to it needs no network: the meta-schema's
vocabulary documents are folded into one object, and its `$dynamicRef: "#meta"` (which always
lands on this root when this document is the entry point) is a plain `$ref: "#"`.

Two differences from the published meta-schema, both accepting more: `format` is an annotation
there too, so no format is asserted here; and `uniqueItems` on `required`, `enum` and the
string lists is left out (the front-end cannot enforce it on strings and would warn).

The older drafts' meta-schemas are written likewise from their specifications' keyword lists
(JSON Schema Validation, drafts 04, 06 and 07), with their `definitions` under the names the
published documents give them (`positiveInteger`, `nonNegativeInteger`, `stringArray`, ...),
so that references into them by JSON pointer land where they do in the published ones. The
same two differences hold: no `format` asserted (`pattern`'s `regex`, `$id`'s
`uri-reference`) and no `uniqueItems` on string lists (`required`, `enum`, `type`).
"""

from __future__ import annotations

import copy
from typing import Any

from .refs import is_data, is_name_map

_KEY_2020_12 = "tokensieve:meta-schema:2020-12"  # the `$defs` entry that holds it when embedded

_SCHEMA: dict[str, Any] = {"$ref": "#"}
_NON_NEGATIVE: dict[str, Any] = {"type": "integer", "minimum": 0}
_SCHEMA_ARRAY: dict[str, Any] = {"type": "array", "minItems": 1, "items": _SCHEMA}
_SCHEMA_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _SCHEMA}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_SIMPLE_TYPES: dict[str, Any] = {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]}
_ANCHOR: dict[str, Any] = {"type": "string", "pattern": "^[A-Za-z_][-A-Za-z0-9._]*$"}

META_SCHEMA_2020_12: dict[str, Any] = {
    "$id": "https://json-schema.org/draft/2020-12/schema",
    "type": ["object", "boolean"],
    "properties": {
        # Core
        "$id": {"type": "string", "pattern": "^[^#]*#?$"},
        "$schema": {"type": "string"},
        "$ref": {"type": "string"},
        "$anchor": _ANCHOR,
        "$dynamicRef": {"type": "string"},
        "$dynamicAnchor": _ANCHOR,
        "$vocabulary": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "$comment": {"type": "string"},
        "$defs": _SCHEMA_MAP,
        # Applicator
        "prefixItems": _SCHEMA_ARRAY,
        "items": _SCHEMA,
        "contains": _SCHEMA,
        "additionalProperties": _SCHEMA,
        "properties": _SCHEMA_MAP,
        "patternProperties": _SCHEMA_MAP,
        "dependentSchemas": _SCHEMA_MAP,
        "propertyNames": _SCHEMA,
        "if": _SCHEMA,
        "then": _SCHEMA,
        "else": _SCHEMA,
        "allOf": _SCHEMA_ARRAY,
        "anyOf": _SCHEMA_ARRAY,
        "oneOf": _SCHEMA_ARRAY,
        "not": _SCHEMA,
        # Unevaluated
        "unevaluatedItems": _SCHEMA,
        "unevaluatedProperties": _SCHEMA,
        # Validation
        "type": {"anyOf": [_SIMPLE_TYPES, {"type": "array", "items": _SIMPLE_TYPES, "minItems": 1}]},
        "const": True,
        "enum": {"type": "array", "items": True},
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "maximum": {"type": "number"},
        "exclusiveMaximum": {"type": "number"},
        "minimum": {"type": "number"},
        "exclusiveMinimum": {"type": "number"},
        "maxLength": _NON_NEGATIVE,
        "minLength": _NON_NEGATIVE,
        "pattern": {"type": "string"},
        "maxItems": _NON_NEGATIVE,
        "minItems": _NON_NEGATIVE,
        "uniqueItems": {"type": "boolean"},
        "maxContains": _NON_NEGATIVE,
        "minContains": _NON_NEGATIVE,
        "maxProperties": _NON_NEGATIVE,
        "minProperties": _NON_NEGATIVE,
        "required": _STRINGS,
        "dependentRequired": {"type": "object", "additionalProperties": _STRINGS},
        # Meta-data, format annotation, content
        "title": {"type": "string"},
        "description": {"type": "string"},
        "default": True,
        "deprecated": {"type": "boolean"},
        "readOnly": {"type": "boolean"},
        "writeOnly": {"type": "boolean"},
        "examples": {"type": "array", "items": True},
        "format": {"type": "string"},
        "contentEncoding": {"type": "string"},
        "contentMediaType": {"type": "string"},
        "contentSchema": _SCHEMA,
    },
}


# -- drafts 04, 06 and 07 ------------------------------------------------------------------

_OLD_SCHEMA: dict[str, Any] = {"$ref": "#"}
_OLD_SCHEMA_ARRAY: dict[str, Any] = {"type": "array", "minItems": 1, "items": _OLD_SCHEMA}
_OLD_SCHEMA_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _OLD_SCHEMA, "default": {}}


def _old_meta_schema(draft: int) -> dict[str, Any]:
    """The meta-schema of draft `draft` (4, 6 or 7): its keywords and the `definitions` that
    references into it name."""
    count = "positiveInteger" if draft == 4 else "nonNegativeInteger"
    count_or_0 = {"$ref": f"#/definitions/{count}Default0"}
    counted = {"$ref": f"#/definitions/{count}"}
    strings = {"$ref": "#/definitions/stringArray"}
    schema_or_bool: dict[str, Any] = {"anyOf": [{"type": "boolean"}, _OLD_SCHEMA]} if draft == 4 else _OLD_SCHEMA
    properties: dict[str, Any] = {
        ("id" if draft == 4 else "$id"): {"type": "string"},
        "$schema": {"type": "string"},
        **({} if draft == 4 else {"$ref": {"type": "string"}}),
        **({"$comment": {"type": "string"}} if draft == 7 else {}),
        "title": {"type": "string"},
        "description": {"type": "string"},
        "default": True if draft > 4 else {},
        **({"readOnly": {"type": "boolean", "default": False}} if draft == 7 else {}),
        **({"examples": {"type": "array", "items": True}} if draft > 4 else {}),
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "maximum": {"type": "number"},
        "exclusiveMaximum": {"type": "boolean", "default": False} if draft == 4 else {"type": "number"},
        "minimum": {"type": "number"},
        "exclusiveMinimum": {"type": "boolean", "default": False} if draft == 4 else {"type": "number"},
        "maxLength": counted,
        "minLength": count_or_0,
        "pattern": {"type": "string"},
        "additionalItems": schema_or_bool,
        "items": {"anyOf": [_OLD_SCHEMA, {"$ref": "#/definitions/schemaArray"}], "default": True if draft > 4 else {}},
        "maxItems": counted,
        "minItems": count_or_0,
        "uniqueItems": {"type": "boolean", "default": False},
        **({"contains": _OLD_SCHEMA} if draft > 4 else {}),
        "maxProperties": counted,
        "minProperties": count_or_0,
        "required": strings,
        "additionalProperties": schema_or_bool,
        "definitions": _OLD_SCHEMA_MAP,
        "properties": _OLD_SCHEMA_MAP,
        "patternProperties": _OLD_SCHEMA_MAP,
        "dependencies": {"type": "object", "additionalProperties": {"anyOf": [_OLD_SCHEMA, strings]}},
        **({"propertyNames": _OLD_SCHEMA} if draft > 4 else {}),
        **({"const": True} if draft > 4 else {}),
        "enum": {"type": "array", "minItems": 1} if draft == 4 else {"type": "array", "items": True},
        "type": {
            "anyOf": [
                {"$ref": "#/definitions/simpleTypes"},
                {"type": "array", "items": {"$ref": "#/definitions/simpleTypes"}, "minItems": 1},
            ]
        },
        "format": {"type": "string"},
        **(
            {"contentMediaType": {"type": "string"}, "contentEncoding": {"type": "string"},
             "if": _OLD_SCHEMA, "then": _OLD_SCHEMA, "else": _OLD_SCHEMA}
            if draft == 7 else {}
        ),
        "allOf": {"$ref": "#/definitions/schemaArray"},
        "anyOf": {"$ref": "#/definitions/schemaArray"},
        "oneOf": {"$ref": "#/definitions/schemaArray"},
        "not": _OLD_SCHEMA,
    }
    definitions: dict[str, Any] = {
        "schemaArray": _OLD_SCHEMA_ARRAY,
        count: {"type": "integer", "minimum": 0},
        f"{count}Default0": {"allOf": [counted, {"default": 0}]},
        "simpleTypes": {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]},
        "stringArray": {"type": "array", "items": {"type": "string"}, **({"minItems": 1} if draft == 4 else {"default": []})},
    }
    out: dict[str, Any] = {
        "$id": f"http://json-schema.org/draft-0{draft}/schema",
        "definitions": definitions,
        "type": "object" if draft == 4 else ["object", "boolean"],
        "properties": properties,
        "default": {} if draft == 4 else True,
    }
    if draft == 4:
        out["dependencies"] = {"exclusiveMaximum": ["maximum"], "exclusiveMinimum": ["minimum"]}
    return out


# Each meta-schema by the URIs that name it (http and https, with or without an empty
# fragment), and the `$defs` key it is embedded under.
_META_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {}
for _uri, _key, _meta in (
    ("json-schema.org/draft/2020-12/schema", _KEY_2020_12, META_SCHEMA_2020_12),
    *((f"json-schema.org/draft-0{d}/schema", f"tokensieve:meta-schema:draft-0{d}", _old_meta_schema(d)) for d in (4, 6, 7)),
):
    for _scheme in ("http://", "https://"):
        _META_SCHEMAS[_scheme + _uri] = (_key, _meta)


def _referenced_meta_schemas(schema: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """The meta-schemas `schema` references by URI, by the URI each reference uses."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    stack: list[tuple[Any, bool]] = [(schema, False)]
    while stack:
        node, names = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if not names and isinstance(ref, str) and ref.split("#", 1)[0] in _META_SCHEMAS:
                found[ref.split("#", 1)[0]] = _META_SCHEMAS[ref.split("#", 1)[0]]
            stack.extend((v, is_name_map(k, names)) for k, v in node.items() if not is_data(k, names))
        elif isinstance(node, list):
            stack.extend((v, False) for v in node)
    return found


def embed_meta_schema(schema: Any) -> Any:
    """`schema`, with each meta-schema it references by URI added as a nested resource
    (under `$defs`, its `$id` the URI the references use), so that the references resolve
    within the document."""
    if not isinstance(schema, dict):
        return schema
    found = _referenced_meta_schemas(schema)
    if not found:
        return schema
    defs = dict(schema.get("$defs", {})) if isinstance(schema.get("$defs", {}), dict) else {}
    for uri, (key, meta) in found.items():
        embedded = copy.deepcopy(meta)
        embedded["$id"] = uri
        defs[f"{key}:{uri.split(':', 1)[0]}"] = embedded
    return {**schema, "$defs": defs}
