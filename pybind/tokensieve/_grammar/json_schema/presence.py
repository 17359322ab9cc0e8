"""Presence formulas: what a clause says about which keys an object has and which *class*
of value each takes, as a small boolean algebra the object's member states can follow.

A clause such as `if {properties: {kind: {const: "a"}}} then {required: [x]}`, a
`dependentRequired`, or a `not` of `required` constrains an object only through *key
statuses*: a key is absent, or present with a value in some set. Where those sets are
described by `const`/`enum`/`type` (and their `not`/`allOf`/`anyOf`), the clause is a
formula over finitely many statuses per key, and `compile_object` can follow it in its member
states (`_Compiler.object_body_presence`) instead of expanding the clause into one whole
object per alternative.

Representations:

- A *value set* is `(kinds, toggled)`: a value belongs when its kind (`null`, `boolean`,
  `string`, `number`, `array`, `object`) is in `kinds`, except the listed values in `toggled`
  (value keys, `value_key`), whose membership is the opposite. So `{const: "a"}` is `({},
  {"a"})`, `not const "a"` is `(all, {"a"})`; complement, intersection and union are exact.
  Only strings, booleans and null are listed values, and numbers are one kind: splitting a
  number's value by `integer` or by excluded values writes it without exponent
  (`docs/json_schema.md`), which would change the language.
- A *key set* is `(absent_ok, value set)`: the statuses a key may take.
- A *term* is a dict key → key set (a key it does not name may take any status); a
  *formula* is `(terms, others)`: an object satisfies it when some term holds, and a value
  that is not an object satisfies it exactly when `others` is true (every keyword read here
  but `type: object` holds of non-objects).

The compiler stores a formula's terms in `_presence` as JSON (`term_json`) so that memo keys
and merges treat it as any other keyword.
"""

from __future__ import annotations

from typing import Any, Callable

KINDS = frozenset({"null", "boolean", "string", "number", "array", "object"})
PRESENCE_TERMS_MAX = 64  # terms of one formula on the way (a product of negations; beyond: expanded as before)
_DEPTH_MAX = 16

ValueSet = tuple[frozenset[str], frozenset[Any]]
KeySet = tuple[bool, ValueSet]
Term = dict[str, KeySet]
Formula = tuple[list[Term], bool]

ALL: ValueSet = (KINDS, frozenset())
NONE: ValueSet = (frozenset(), frozenset())
PRESENT: KeySet = (False, ALL)
ANY_STATUS: KeySet = (True, ALL)


class NotPresence(Exception):
    """The schema says more than key statuses (or past the bounds): not a presence formula."""


def value_key(value: Any) -> Any:
    """A hashable key of a listed value that two values share exactly when they are equal
    as JSON; raises `NotPresence` for values this algebra does not list (numbers, arrays,
    objects)."""
    if value is None:
        return ("null",)
    if value is True or value is False:
        return ("boolean", value)
    if type(value) is str:
        return ("string", value)
    raise NotPresence


def key_value(key: Any) -> Any:
    return None if key[0] == "null" else key[1]


def _member(vs: ValueSet, key: Any) -> bool:
    return (key[0] in vs[0]) != (key in vs[1])


def _normal(kinds: frozenset[str], toggled: frozenset[Any]) -> ValueSet:
    """The same set with kinds whose every value is toggled moved out of `kinds` (null,
    both booleans), so that equal sets compare equal more often."""
    if "null" in kinds and ("null",) in toggled:
        kinds, toggled = kinds - {"null"}, toggled - {("null",)}
    if "boolean" in kinds and ("boolean", True) in toggled and ("boolean", False) in toggled:
        kinds, toggled = kinds - {"boolean"}, toggled - {("boolean", True), ("boolean", False)}
    return kinds, toggled


def _combine(a: ValueSet, b: ValueSet, kinds: frozenset[str], op: Callable[[bool, bool], bool]) -> ValueSet:
    toggled = frozenset(v for v in a[1] | b[1] if op(_member(a, v), _member(b, v)) != (v[0] in kinds))
    return _normal(kinds, toggled)


def v_and(a: ValueSet, b: ValueSet) -> ValueSet:
    return _combine(a, b, a[0] & b[0], lambda x, y: x and y)


def v_or(a: ValueSet, b: ValueSet) -> ValueSet:
    return _combine(a, b, a[0] | b[0], lambda x, y: x or y)


def v_not(a: ValueSet) -> ValueSet:
    return _normal(KINDS - a[0], a[1])


def _listed(values: Any) -> ValueSet:
    if type(values) is not list:
        raise NotPresence
    return _normal(frozenset(), frozenset(value_key(v) for v in values))


def _types(value: Any) -> ValueSet:
    names = [value] if type(value) is str else value
    if type(names) is not list or not all(type(t) is str for t in names):
        raise NotPresence
    kinds = set()
    for name in names:
        if name == "integer":
            raise NotPresence  # integer vs other numbers: see the module's docstring
        if name not in KINDS:
            raise NotPresence
        kinds.add(name)
    return frozenset(kinds), frozenset()


def value_set(schema: Any, ignored: frozenset[str], depth: int = 0) -> ValueSet:
    """The values a property's schema accepts, when it says no more than `const`, `enum`,
    `type` (not `integer`) and their `not`, `allOf`, `anyOf` (`ignored`: annotations)."""
    if schema is True:
        return ALL
    if schema is False:
        return NONE
    if type(schema) is not dict or depth > _DEPTH_MAX:
        raise NotPresence
    out = ALL
    for key, value in schema.items():
        if key in ignored or key == "_at":
            continue
        if key == "const":
            part = _listed([value])
        elif key == "enum":
            part = _listed(value)
        elif key == "_not_enum":
            part = v_not(_listed(value))
        elif key == "type":
            part = _types(value)
        elif key == "not":
            part = v_not(value_set(value, ignored, depth + 1))
        elif key == "allOf" and type(value) is list:
            part = ALL
            for sub in value:
                part = v_and(part, value_set(sub, ignored, depth + 1))
        elif key == "anyOf" and type(value) is list:
            part = NONE
            for sub in value:
                part = v_or(part, value_set(sub, ignored, depth + 1))
        elif key == "_clauses" and type(value) is list:
            part = ALL
            for clause in value:
                part = v_and(part, _value_clause(clause, ignored, depth + 1))
        else:
            raise NotPresence
        out = v_and(out, part)
    return out


def _value_clause(clause: Any, ignored: frozenset[str], depth: int) -> ValueSet:
    if type(clause) is not dict:
        raise NotPresence
    if "not" in clause and set(clause) <= {"not", "_at"}:
        return v_not(value_set(clause["not"], ignored, depth))
    if "if" in clause and set(clause) <= {"if", "then", "else", "_at"}:
        cond = value_set(clause["if"], ignored, depth)
        then = value_set(clause.get("then", True), ignored, depth)
        otherwise = value_set(clause.get("else", True), ignored, depth)
        return v_or(v_and(cond, then), v_and(v_not(cond), otherwise))
    raise NotPresence


def _k_and(a: KeySet, b: KeySet) -> KeySet:
    return a[0] and b[0], v_and(a[1], b[1])


def _k_not(a: KeySet) -> KeySet:
    return not a[0], v_not(a[1])


def _k_empty(a: KeySet) -> bool:
    return not a[0] and not a[1][0] and not a[1][1]


def _term_and(a: Term, b: Term) -> Term | None:
    out = dict(a)
    for key, ks in b.items():
        if key in out:
            ks = _k_and(out[key], ks)
            if _k_empty(ks):
                return None
        out[key] = ks
    return {k: v for k, v in out.items() if v != ANY_STATUS}


def _bounded(terms: list[Term]) -> list[Term]:
    seen: list[Term] = []
    for term in terms:
        if term not in seen:
            seen.append(term)
    if len(seen) > PRESENCE_TERMS_MAX:
        raise NotPresence
    return seen


def f_and(a: Formula, b: Formula) -> Formula:
    if len(a[0]) * len(b[0]) > PRESENCE_TERMS_MAX * 4:
        raise NotPresence
    terms = [t for x in a[0] for y in b[0] if (t := _term_and(x, y)) is not None]
    return _bounded(terms), a[1] and b[1]


def f_or(a: Formula, b: Formula) -> Formula:
    if {} in a[0] or {} in b[0]:
        return [{}], a[1] or b[1]
    return _bounded([*a[0], *b[0]]), a[1] or b[1]


def f_not(a: Formula) -> Formula:
    out: Formula = ([{}], not a[1])
    for term in a[0]:
        # Not this term: some key it names takes another status.
        negated = [{key: ks} for key, ks in ((k, _k_not(v)) for k, v in term.items()) if not _k_empty(ks)]
        out = f_and(out, (negated, True))
    return out[0], not a[1]


TRUE: Formula = ([{}], True)
FALSE: Formula = ([], False)


def formula(schema: Any, ignored: frozenset[str], depth: int = 0, cache: dict[int, Any] | None = None) -> Formula:
    """The presence formula of a raw or flattened object schema (see the module docstring).
    `cache` keeps the formulas (or None: not one) of the schemas seen, by identity (the
    compiler never changes a schema it was given; the caller keeps them alive).

    Raises:
        NotPresence: the schema says anything else (a `$ref`, `additionalProperties`, a
            property value this algebra cannot split, ...).
    """
    if cache is not None and type(schema) is dict:
        known = cache.get(id(schema))
        if known is None:
            try:
                found: Formula | None = _formula(schema, ignored, depth, cache)
            except NotPresence:
                found = None
            known = cache[id(schema)] = (schema, found)
        if known[1] is None:
            raise NotPresence
        return known[1]  # type: ignore[no-any-return]
    return _formula(schema, ignored, depth, cache)


def _formula(schema: Any, ignored: frozenset[str], depth: int, cache: dict[int, Any] | None) -> Formula:
    if schema is True:
        return TRUE
    if schema is False:
        return FALSE
    if type(schema) is not dict or depth > _DEPTH_MAX:
        raise NotPresence
    out = TRUE
    for key, value in schema.items():
        if key in ignored or key in ("_at", "_expand", "then", "else"):
            continue
        if key == "required":
            if type(value) is not list or not all(type(k) is str for k in value):
                raise NotPresence
            part: Formula = ([{k: PRESENT for k in value}], True)
        elif key == "properties":
            if type(value) is not dict:
                raise NotPresence
            term = {k: (True, value_set(v, ignored, depth + 1)) for k, v in value.items()}
            part = ([{k: v for k, v in term.items() if v != ANY_STATUS}], True)
        elif key == "type":
            if value == "object" or value == ["object"]:
                part = ([{}], False)
            elif type(value) is list and KINDS <= set(value):
                part = TRUE
            else:
                raise NotPresence
        elif key == "allOf" and type(value) is list:
            part = TRUE
            for sub in value:
                part = f_and(part, formula(sub, ignored, depth + 1, cache))
        elif key == "anyOf" and type(value) is list:
            part = FALSE
            for sub in value:
                part = f_or(part, formula(sub, ignored, depth + 1, cache))
        elif key == "oneOf" and type(value) is list:
            part = exactly_one([formula(sub, ignored, depth + 1, cache) for sub in value])
        elif key == "not":
            part = f_not(formula(value, ignored, depth + 1, cache))
        elif key == "if":
            part = if_then_else(
                formula(value, ignored, depth + 1, cache),
                formula(schema.get("then", True), ignored, depth + 1, cache),
                formula(schema.get("else", True), ignored, depth + 1, cache),
            )
        elif key == "_clauses" and type(value) is list:
            part = TRUE
            for clause in value:
                part = f_and(part, formula(clause, ignored, depth + 1, cache))
        elif key in ("dependentRequired", "dependencies") and type(value) is dict:
            part = TRUE
            for name, names in value.items():
                if type(names) is list:
                    then = formula({"required": names}, ignored, depth + 1)
                else:
                    then = formula(names, ignored, depth + 1, cache)
                part = f_and(part, f_or(([{name: (True, NONE)}], True), f_and(([{name: PRESENT}], True), then)))
        elif key == "dependentSchemas" and type(value) is dict:
            part = TRUE
            for name, sub in value.items():
                then = formula(sub, ignored, depth + 1, cache)
                part = f_and(part, f_or(([{name: (True, NONE)}], True), f_and(([{name: PRESENT}], True), then)))
        elif key == "_presence" and type(value) is list:
            part = TRUE
            for entry in value:
                part = f_and(part, (terms_from_json(entry["terms"]), True))
        else:
            raise NotPresence
        out = f_and(out, part)
    return out


def if_then_else(cond: Formula, then: Formula, otherwise: Formula) -> Formula:
    return f_or(f_and(cond, then), f_and(f_not(cond), otherwise))


def exactly_one(options: list[Formula]) -> Formula:
    if len(options) > 8:
        raise NotPresence
    out = FALSE
    for i, option in enumerate(options):
        part = option
        for j, other in enumerate(options):
            if j != i:
                part = f_and(part, f_not(other))
        out = f_or(out, part)
    return out


# The terms as JSON, in `_presence`: per term a list of [key, absent_ok, kinds, listed values
# toggled], sorted, so that equal terms are equal JSON.
def term_json(term: Term) -> list[Any]:
    out = []
    for key in sorted(term):
        absent_ok, (kinds, toggled) = term[key]
        out.append([key, absent_ok, sorted(kinds), [key_value(v) for v in sorted(toggled, key=repr)]])
    return out


def terms_from_json(terms: list[Any]) -> list[Term]:
    out = []
    for term in terms:
        out.append({
            key: (absent_ok, (frozenset(kinds), frozenset(value_key(v) for v in toggled)))
            for key, absent_ok, kinds, toggled in term
        })
    return out


def keys_named(entry: dict[str, Any]) -> set[str]:
    """The keys the terms of a `_presence` entry name."""
    return {part[0] for term in entry["terms"] for part in term}


def fronts(alternatives: list[Any]) -> list[str]:
    """The keys the alternatives' `properties` would bring to the front of the object had
    they been expanded (`compile_alternatives` accepts an alternative merged with its
    siblings in both orders, siblings first and alternative first, and nested clauses do the
    same again inside): every key such a `properties` lists, at any depth, whose schema is
    not `false`, sorted."""
    out: set[str] = set()

    def walk(schema: Any, depth: int) -> None:
        if type(schema) is not dict or depth > _DEPTH_MAX:
            return
        for key, value in schema.items():
            if key == "properties" and type(value) is dict:
                out.update(k for k, v in value.items() if v is not False)
            elif key in ("allOf", "anyOf", "oneOf", "_clauses") and type(value) is list:
                for part in value:
                    walk(part, depth + 1)
            elif key in ("not", "if", "then", "else"):
                walk(value, depth + 1)
            elif key == "dependentSchemas" and type(value) is dict:
                for part in value.values():
                    walk(part, depth + 1)

    for alternative in alternatives:
        walk(alternative, 0)
    return sorted(out)


def value_schema(vs: ValueSet) -> Any:
    """A schema accepting exactly the values of a value set."""
    kinds, toggled = vs
    inside = [key_value(v) for v in sorted(toggled, key=repr) if v[0] in kinds]
    outside = [key_value(v) for v in sorted(toggled, key=repr) if v[0] not in kinds]
    parts: list[Any] = []
    if kinds:
        positive: dict[str, Any] = {} if kinds == KINDS else {"type": sorted(kinds)}
        if inside:
            positive["not"] = {"enum": inside}
        parts.append(positive)
    if outside:
        parts.append({"enum": outside})
    if not parts:
        return False
    return parts[0] if len(parts) == 1 else {"anyOf": parts}


def term_schema(term: Term) -> dict[str, Any]:
    """A schema whose objects are those satisfying the term (non-objects pass)."""
    out: dict[str, Any] = {}
    required = [k for k, (absent_ok, _) in term.items() if not absent_ok]
    if required:
        out["required"] = required
    properties = {k: value_schema(vs) for k, (_, vs) in term.items() if vs != ALL}
    if properties:
        out["properties"] = properties
    return out


def atoms(sets: list[ValueSet]) -> list[ValueSet]:
    """The partition of all values that `sets` induce: each part a value set that lies
    wholly inside or wholly outside each of `sets`, the empty parts left out."""
    listed = frozenset(v for s in sets for v in s[1])
    groups: dict[tuple[bool, ...], tuple[set[str], set[Any]]] = {}
    for kind in sorted(KINDS):
        sig = tuple(kind in s[0] for s in sets)
        groups.setdefault(sig, (set(), set()))[0].add(kind)
    for v in sorted(listed, key=repr):
        sig = tuple(_member(s, v) for s in sets)
        groups.setdefault(sig, (set(), set()))[1].add(v)
    out = []
    for kinds, values in groups.values():
        k = frozenset(kinds)
        toggled = frozenset({v for v in listed if v[0] in k and v not in values} | {v for v in values if v[0] not in k})
        vs = _normal(k, toggled)
        if vs != NONE and _nonempty(vs):
            out.append(vs)
    return out


def _nonempty(vs: ValueSet) -> bool:
    kinds, toggled = vs
    if any(v[0] not in kinds for v in toggled):
        return True
    for kind in kinds:
        if kind == "null" and ("null",) in toggled:
            continue
        if kind == "boolean" and ("boolean", True) in toggled and ("boolean", False) in toggled:
            continue
        return True
    return False


def subset(a: ValueSet, b: ValueSet) -> bool:
    return not _nonempty(v_and(a, v_not(b)))


__all__ = [
    "NotPresence", "formula", "f_or", "exactly_one", "term_json", "terms_from_json", "keys_named",
    "term_schema", "value_schema", "atoms", "subset", "fronts", "PRESENCE_TERMS_MAX", "ALL",
]
