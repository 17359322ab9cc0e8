"""The draft 2020-12 meta-schema, for schemas that reference it (`"$ref":
"https://json-schema.org/draft/2020-12/schema"`: "a value that is itself a JSON Schema").

Written here from the specification's keyword list (JSON Schema Core and Validation, 2020-12)
as one self-contained resource, so that a reference to it needs no network: the meta-schema's
vocabulary documents are folded into one object, and its `$dynamicRef: "#meta"` (which always
lands on this root when this document is the entry point) is a plain `$ref: "#"`.

Two differences from the published meta-schema, both accepting more: `format` is an annotation
there too, so no format is asserted here; and `uniqueItems` on `required`, `enum` and the
string lists is left out (the front-end cannot enforce it on strings and would warn).
"""

from __future__ import annotations

import copy
from typing import Any

META_SCHEMA_URIS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft/2020-12/schema",
    }
)
EMBEDDED_KEY = "tokensieve:meta-schema:2020-12"  # the `$defs` entry that holds it when embedded

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


def _references_meta_schema(schema: Any) -> bool:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.split("#", 1)[0] in META_SCHEMA_URIS:
                return True
            stack.extend(v for k, v in node.items() if k not in ("enum", "const", "examples", "default"))
        elif isinstance(node, list):
            stack.extend(node)
    return False


def embed_meta_schema(schema: Any) -> Any:
    """`schema`, with the meta-schema added as a nested resource (under `$defs`) when it
    references it by URI, so that the references resolve within the document."""
    if not isinstance(schema, dict) or not _references_meta_schema(schema):
        return schema
    defs = dict(schema.get("$defs", {})) if isinstance(schema.get("$defs", {}), dict) else {}
    defs[EMBEDDED_KEY] = copy.deepcopy(META_SCHEMA_2020_12)
    return {**schema, "$defs": defs}
