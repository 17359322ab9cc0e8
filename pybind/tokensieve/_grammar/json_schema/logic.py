"""Boolean keywords of JSON Schema as alternatives of plain schemas: `not`, `if`/`then`/`else`,
`dependentRequired`, `dependentSchemas` (and draft-7 `dependencies`).

A grammar cannot intersect or complement context-free languages, but JSON Schema keywords are
assertions that each constrain one JSON type, so most negations stay *positive*:

    not {type: T}              → type ∉ T
    not {required: [a, b]}     → an object without a   | an object without b
    not {minLength: 3}         → a string with maxLength 2
    not {pattern: p}           → a string whose text the lexeme's `not_patterns` exclude
    not {enum: [..]}           → `_not_enum` (scalars: excluded from lexemes; objects and arrays:
                                 the negation of a schema that pins the value down)
    not {properties: {k: S}}   → an object with k whose value is `not S`
    not {items: S}             → an array that contains `not S` (after prefixItems of length k:
                                 an array with an item past k that is `not S`, `_item_witness`)
    not {additionalProperties: S}, not {patternProperties: {r: S}}, not {propertyNames: P}
                               → an object with a *witness* member (`_witness`): a key outside
                                 the listed names and patterns / matching r / not P, whose
                                 value is `not S` (anything for P)
    not {uniqueItems: true}    → an array with two equal items (`_duplicate`: exact over a finite
                                 item domain, else "two items or more", a superset with a warning)
    not {contains: S}          → an array whose items are all `not S` (with minContains m /
                                 maxContains M: fewer than m matches, or more than M)
    not {anyOf: [A, B]}        → not A and not B (clauses, expanded again)
    not {oneOf: [A, B]}        → (not A and not B) | (A and B)
    not {not: S}               → S
    not (A and B and ...)      → not A | not B | ...   (a schema is the conjunction of its keywords)

The front-end keeps these keywords as *clauses* (`_clauses` in a flattened schema: `allOf`
merges concatenate them) and expands one clause at a time into `anyOf` alternatives merged with
the rest of the schema, so each alternative is a plain schema again and the usual object, array
and scalar translations apply. The alternatives of one clause may overlap (an instance valid
under two of them has two parses); recognition is unaffected.

What stays out of reach raises `Unexpressible` (the caller turns it into a `GrammarError`
naming the JSON pointer, or a warning when lenient): a pattern the regex translation refuses,
and keywords whose meaning waits for the merge (a pending `unevaluatedProperties`/`Items`).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from ..._errors import GrammarError
from .numbers import _is_integral, _is_number
from .presence import term_schema, terms_from_json

__all__ = ["Unexpressible", "negate", "clause_alternatives", "value_schema", "presence_clauses", "ALL_TYPES"]

ALL_TYPES = ("null", "boolean", "number", "string", "array", "object")  # integer ⊂ number

# Keywords that only annotate (must agree with the front-end's list).
_IGNORED = frozenset(
    {
        "$schema", "$id", "id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary",
        "title", "description", "default", "examples", "example", "readOnly", "writeOnly",
        "deprecated", "contentMediaType", "contentEncoding", "contentSchema", "discriminator",
        "nullable", "xml", "externalDocs", "_at", "_conflicts",
    }
)


class Unexpressible(Exception):
    """A negation (or clause) the grammar cannot express.

    Attributes:
        pointer: the JSON pointer of the keyword, or None when the caller knows better.
    """

    def __init__(self, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer


class Context(Protocol):
    """What negation needs from the front-end."""

    def flatten(self, schema: Any, pointer: str) -> dict[str, Any] | None: ...

    def body_regex(self, pattern: str, pointer: str) -> str: ...

    def format_regex(self, name: str) -> str | None: ...

    def one_of_disjoint(self, options: list[Any], pointer: str, types: Sequence[str] | None = None) -> bool: ...

    def unevaluated_cases(self, d: dict[str, Any], pointer: str) -> tuple[list[Any], list[list[dict[str, Any]]]]: ...


def _trivial(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and all(k in _IGNORED for k in schema))


def value_schema(value: Any) -> Any:
    """A schema whose only valid instance is `value` (objects and arrays spelled out by
    keywords, so that its negation is expressible)."""
    if isinstance(value, list):
        return {
            "type": "array",
            "minItems": len(value),
            "prefixItems": [value_schema(v) for v in value],
            "items": False,
        }
    if isinstance(value, dict):
        return {
            "type": "object",
            "required": list(value),
            "maxProperties": len(value),
            "properties": {k: value_schema(v) for k, v in value.items()},
        }
    return {"enum": [value]}


def clause_alternatives(clause: dict[str, Any], ctx: Context) -> list[Any]:
    """The alternatives (schemas, any of which may hold) equivalent to one clause.

    Raises:
        Unexpressible: a negation inside the clause cannot be written as a grammar.
    """
    at = clause.get("_at", "")
    if "not" in clause:
        return negate(clause["not"], f"{at}", ctx)
    if "anyOf" in clause:
        return list(clause["anyOf"])
    if "if" in clause:
        then, otherwise = clause.get("then", True), clause.get("else", True)
        return [{"allOf": [clause["if"], then]}, *[{"allOf": [alt, otherwise]} for alt in negate(clause["if"], f"{at}/if", ctx)]]
    if "dependentRequired" in clause:
        ((key, names),) = clause["dependentRequired"].items()
        return [{"properties": {key: False}}, {"required": [key, *names]}]
    if "dependentSchemas" in clause:
        ((key, schema),) = clause["dependentSchemas"].items()
        return [{"properties": {key: False}}, {"allOf": [{"required": [key]}, schema]}]
    raise Unexpressible(f"an unknown clause {sorted(clause)}")


def _complement_types(types: list[str]) -> list[Any]:
    alts: list[Any] = []
    others = [t for t in ALL_TYPES if t not in types and not (t == "number" and "number" in types)]
    if "integer" in types and "number" not in types:
        others = [t for t in others if t != "number"]
        alts.append({"type": ["number"], "_non_integer": True})
    if others:
        alts.insert(0, {"type": others})
    return alts


def _negate_multiple(multiple: Any, at: str) -> list[Any]:
    if multiple == 1:
        return [{"type": ["number"], "_non_integer": True}]
    return [{"type": ["number"], "_not_multiple_of": [multiple]}]


_COUNT_KEYWORDS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"}
)
_NUMBER_KEYWORDS = frozenset({"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf"})


def _checked_value(key: str, value: Any, at: str) -> Any:
    """`value` of keyword `key`, refused with its JSON pointer when it has the wrong type (the
    negations below do arithmetic on it)."""
    number = _is_number(value)
    if key in _COUNT_KEYWORDS and not (number and value >= 0 and _is_integral(value)):
        pointer = f"{at}/{key}"
        raise GrammarError(f"{key} must be a non-negative integer, not {value!r} (at {pointer})", json_pointer=pointer)
    if key in _NUMBER_KEYWORDS and not number:
        pointer = f"{at}/{key}"
        raise GrammarError(f"{key} must be a number, not {value!r} (at {pointer})", json_pointer=pointer)
    return int(value) if key in _COUNT_KEYWORDS else value


# `negate`'s keywords that each negate alone, in the order their alternatives are written:
# (keyword, its value checked -> the alternatives, given the pointer and the context). A table
# rather than a closure per keyword: a negation met only a few of them, and made and called
# every closure (MaskBench vega: 281 negations, a sixth of their work).
_KEYWORD_NEGATIONS: tuple[tuple[str, Callable[[Any, str, Context], list[Any]]], ...] = (
    ("type", lambda t, at, ctx: _complement_types(t)),
    ("enum", lambda e, at, ctx: [{"_not_enum": e}]),
    ("required", lambda r, at, ctx: [{"type": ["object"], "properties": {k: False}} for k in r]),
    ("pattern", lambda p, at, ctx: [{"type": ["string"], "_not_bodies": [ctx.body_regex(p, f"{at}/pattern")]}]),
    ("_patterns", lambda ps, at, ctx: [{"type": ["string"], "_not_bodies": [ctx.body_regex(p, f"{at}/pattern")]} for p in ps]),
    ("format", lambda f, at, ctx: [] if ctx.format_regex(f) is None else [{"type": ["string"], "_not_bodies": [ctx.format_regex(f)]}]),
    ("minLength", lambda n, at, ctx: [{"type": ["string"], "maxLength": n - 1}] if n > 0 else []),
    ("maxLength", lambda n, at, ctx: [{"type": ["string"], "minLength": n + 1}]),
    ("minimum", lambda m, at, ctx: [{"type": ["number"], "exclusiveMaximum": m}]),
    ("exclusiveMinimum", lambda m, at, ctx: [{"type": ["number"], "maximum": m}]),
    ("maximum", lambda m, at, ctx: [{"type": ["number"], "exclusiveMinimum": m}]),
    ("exclusiveMaximum", lambda m, at, ctx: [{"type": ["number"], "minimum": m}]),
    ("multipleOf", lambda m, at, ctx: _negate_multiple(m, at)),
    ("minItems", lambda n, at, ctx: [{"type": ["array"], "maxItems": n - 1}] if n > 0 else []),
    ("maxItems", lambda n, at, ctx: [{"type": ["array"], "minItems": n + 1}]),
    ("minProperties", lambda n, at, ctx: [{"type": ["object"], "maxProperties": n - 1}] if n > 0 else []),
    ("maxProperties", lambda n, at, ctx: [{"type": ["object"], "minProperties": n + 1}]),
    ("uniqueItems", lambda u, at, ctx: [{"type": ["array"], "_duplicate": True}] if u is True else []),
    ("_duplicate", lambda u, at, ctx: [{"type": ["array"], "uniqueItems": True}] if u is True else []),
    ("anyOf", lambda options, at, ctx: [{"allOf": [{"not": o} for o in options]}]),
)

# Every keyword `negate` handles (the table's, and those it negates itself); another keyword
# makes the negation unexpressible.
_NEGATED_KEYS = _IGNORED | {key for key, _ in _KEYWORD_NEGATIONS} | {
    "oneOf", "properties", "additionalProperties", "patternProperties", "propertyNames", "prefixItems", "items",
    "contains", "minContains", "maxContains", "_contains", "_clauses", "_presence",
}


def negate(schema: Any, at: str, ctx: Context) -> list[Any]:
    """Schemas whose union holds exactly the JSON values NOT valid under `schema`.

    Raises:
        Unexpressible: some keyword's negation cannot be written as a grammar.
    """
    d = ctx.flatten(schema, at)
    if d is None:
        return [True]
    if ("_unevaluatedProperties" in d or "_unevaluatedItems" in d) and any(k in d for k in ("anyOf", "oneOf", "_clauses")):
        # The schema split by which of its subschemas pass (the unevaluated keys depend on
        # it): in each case the negation of that case's resolved schema; no case: not valid.
        cases, uncovered = ctx.unevaluated_cases(d, at)
        out: list[Any] = [{"_clauses": clauses} for clauses in uncovered]
        for resolved, selector, where in cases:
            clauses = selector + ([] if resolved is None else [{"not": resolved, "_at": where}])
            out.append({"_clauses": clauses} if clauses else {})
        return out
    alts: list[Any] = []
    for key, make in _KEYWORD_NEGATIONS:  # in this order: the alternatives' order is the grammar's
        if key in d:
            alts.extend(make(_checked_value(key, d[key], at), at, ctx))
    if "oneOf" in d:
        # Valid under no option, or under two of them (none when they are disjoint).
        options = d["oneOf"]
        alts.append({"allOf": [{"not": o} for o in options]})
        if not ctx.one_of_disjoint(options, f"{at}/oneOf", d.get("type")):
            alts.extend({"allOf": [a, b]} for i, a in enumerate(options) for b in options[i + 1 :])
    # Object keywords that speak of every key of a region: their negation is a *witness*, a
    # member whose key lies in the region and whose value breaks the keyword's schema.
    patterns = d.get("patternProperties", {})
    extra = d.get("additionalProperties", True)
    if not _trivial(extra):
        outside = {
            "type": ["string"],
            "_not_enum": list(d.get("properties", {})),
            "_not_bodies": [ctx.body_regex(p, f"{at}/patternProperties") for p in patterns],
        }
        alts.append(_witness(outside, True if extra is False else _negated(extra, f"{at}/additionalProperties")))
    for pattern, sub in patterns.items():
        if not _trivial(sub):
            where = f"{at}/patternProperties/{_escape(pattern)}"
            alts.append(_witness({"type": ["string"], "pattern": pattern}, _negated(sub, where)))
    names = d.get("propertyNames", True)
    if not _trivial(names):
        regions = [r for keys in negate(names, f"{at}/propertyNames", ctx) for r in _any_of_parts(keys, ctx)]
        alts.extend(_witness(keys, True) for keys in regions if _may_be_string(keys, ctx))
    for key, sub in d.get("properties", {}).items():
        if not _trivial(sub):
            alts.append({"type": ["object"], "required": [key], "properties": {key: _negated(sub, f"{at}/properties/{_escape(key)}")}})
    prefix = d.get("prefixItems", [])
    for i, sub in enumerate(prefix):
        if not _trivial(sub):
            alts.append({"type": ["array"], "minItems": i + 1, "prefixItems": [True] * i + [{"not": sub}]})
    if d.get("items", True) is False and prefix:
        alts.append({"type": ["array"], "minItems": len(prefix) + 1})
    elif not _trivial(d.get("items", True)):
        if prefix:
            # Some item past the prefix breaks `items`.
            alts.append({"type": ["array"], "_item_witness": [{"from": len(prefix), "value": _negated(d["items"], f"{at}/items")}]})
        else:
            alts.append({"type": ["array"], "contains": {"not": d["items"]}})
    counted = [(e["schema"], e["min"], e["max"]) for e in d.get("_contains", [])]
    if "contains" in d:
        counted.append((d["contains"], d.get("minContains", 1), d.get("maxContains")))
    for contains, least, most in counted:
        least = _checked_value("minContains", least, at)
        # Fewer matches than minContains, or more than maxContains.
        if least == 1 and most is None:
            alts.append({"type": ["array"], "items": {"not": contains}})
        elif least > 0:
            alts.append({"type": ["array"], "contains": contains, "minContains": 0, "maxContains": int(least) - 1})
        if most is not None:
            most = _checked_value("maxContains", most, at)
            alts.append({"type": ["array"], "contains": contains, "minContains": int(most) + 1})
    for clause in [*presence_clauses(d.get("_presence", ())), *d.get("_clauses", [])]:
        alts.extend(_negate_clause(clause, ctx))
    for key in d:
        if key not in _NEGATED_KEYS and not key.startswith("x-") and key in _KEYWORDS:
            key = key.removeprefix("_") if key.startswith("_unevaluated") else key
            raise Unexpressible(f"the negation of {key!r}", f"{at}/{key}")
    return alts


def presence_clauses(constraints: Sequence[Any]) -> list[dict[str, Any]]:
    """The compiler's `_presence` constraints as the clauses they stand for, marked `_expand`
    so the compiler expands them as clauses rather than taking them back as constraints
    (`_Compiler.presence_constraint`): the clause each came from (so that the expansion is
    the one it would have been), else an `anyOf` of one schema per term
    (`presence.term_schema`). An entry of `_Compiler.compile_cells` (no term to meet, the
    property orders of a cell) is an `anyOf` of one option per order listing its keys, which
    merged first puts them in that order (and merged after, in the schema's own)."""
    out = []
    for entry in constraints:
        if "clause" in entry:
            out.append(entry["clause"])
            continue
        if "orders" in entry:
            out.append({"anyOf": [{"properties": dict.fromkeys(order, True)} for order in entry["orders"]], "_expand": True})
            continue
        # No term: no object is valid (non-objects are: a constraint only ever names objects).
        options = [term_schema(term) for term in terms_from_json(entry["terms"])]
        out.append({"anyOf": options or [{"type": ["null", "boolean", "string", "number", "array"]}], "_expand": True})
    return out


def _witness(keys: Any, value: Any) -> dict[str, Any]:
    """An object with a member whose key is valid under `keys` (a schema for strings) and whose
    value is valid under `value` (the compiler's `_witness`: see `compile_object`)."""
    return {"type": ["object"], "_witness": [{"keys": keys, "value": value}]}


def _negated(schema: Any, at: str) -> dict[str, Any]:
    """`{"not": schema}` as a flattened clause that names `schema`'s own JSON pointer `at` in
    errors, wherever the witness holding it is compiled."""
    return {"_clauses": [{"not": schema, "_at": at}]}


def _escape(key: str) -> str:
    """`key` as one JSON pointer segment."""
    return key.replace("~", "~0").replace("/", "~1")


def _any_of_parts(schema: Any, ctx: Context) -> list[Any]:
    """`schema` as a union of schemas: its `anyOf` options each with the rest (one level), so
    that each key region of a witness can be one lexeme."""
    flat = ctx.flatten(schema, "")
    if flat is None or "anyOf" not in flat:
        return [schema]
    rest = {k: v for k, v in flat.items() if k != "anyOf"}
    return [{"allOf": [rest, option]} for option in flat["anyOf"]]


def _may_be_string(schema: Any, ctx: Context) -> bool:
    """Whether a schema from `negate` may hold a string (a key): the others are dropped early."""
    flat = ctx.flatten(schema, "")
    if flat is None:
        return False
    if "enum" in flat:
        return any(isinstance(v, str) for v in flat["enum"])
    return "string" in flat.get("type", ALL_TYPES)


def _negate_clause(clause: dict[str, Any], ctx: Context) -> list[Any]:
    if "not" in clause:
        return [clause["not"]]
    if "anyOf" in clause:
        return [{"_clauses": [{"not": option, "_at": clause.get("_at", "")} for option in clause["anyOf"]]}]
    if "if" in clause:
        then, otherwise = clause.get("then", True), clause.get("else", True)
        return [{"allOf": [clause["if"], {"not": then}]}, {"allOf": [{"not": clause["if"]}, {"not": otherwise}]}]
    if "dependentRequired" in clause:
        ((key, names),) = clause["dependentRequired"].items()
        return [{"type": ["object"], "required": [key], "properties": {n: False}} for n in names]
    if "dependentSchemas" in clause:
        ((key, schema),) = clause["dependentSchemas"].items()
        return [{"type": ["object"], "required": [key], "not": schema}]
    raise Unexpressible(f"an unknown clause {sorted(clause)}")


# Every keyword of drafts 4 to 2020-12 that asserts something; a keyword of this list that
# `negate` does not handle makes the negation unexpressible (other keys are not keywords).
_KEYWORDS = frozenset(
    {
        "type", "enum", "const", "required", "pattern", "format", "minLength", "maxLength",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
        "maxItems", "minProperties", "maxProperties", "uniqueItems", "anyOf", "oneOf", "allOf",
        "not", "if", "then", "else", "properties", "additionalProperties", "patternProperties",
        "propertyNames", "prefixItems", "items", "additionalItems", "contains", "minContains",
        "maxContains", "dependencies", "dependentRequired", "dependentSchemas",
        "unevaluatedProperties", "unevaluatedItems", "$ref", "$dynamicRef", "$recursiveRef",
        "_not_enum", "_not_bodies", "_non_integer", "_not_multiple_of", "_unevaluatedProperties",
        "_unevaluatedItems", "_witness", "_item_witness", "_duplicate", "_contains", "_pattern_sides",
        "_presence",
    }
)
