"""Validate one concrete JSON value against a (flattened) JSON Schema, in Python.

The JSON Schema front-end uses this where a schema pins its values down to a finite list: an
`enum` or `const` beside other keywords (`{"enum": [...], "not": {...}}`, or `allOf` of an
`enum` and anything). Each listed value is checked against every other keyword, so the grammar
holds exactly the valid ones, whatever the keywords are (`not`, `if`, `uniqueItems`,
`oneOf`, ... all work here, even where the grammar itself could not express them).

Semantics are those of the grammar front-end, not a general validator's:

- `pattern` uses the front-end's own ECMA translation (`pattern_parts`) matched on the
  JSON-escaped text, so a value passes here exactly when the grammar's string lexeme would
  take it; `format` uses `FORMAT_REGEXES` and is an assertion (unknown formats pass).
- `$ref` with siblings applies both (2019-09 semantics), as the front-end's merge does.
- Internal keys the front-end adds while merging and negating (`_patterns`, `_clauses`,
  `_not_enum`, `_not_bodies`, `_non_integer`, `_not_multiple_of`, and the witnesses
  `_witness`, `_item_witness` of `logic.py`, `_contains` of the compiler's merge) are understood.

What it cannot decide (a pattern its translation refuses, `unevaluated*`, `$dynamicRef`, a
`$ref` nesting past `DEPTH_MAX`) raises `Undecidable`; callers then fall back to the grammar.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import sys
from fractions import Fraction
from itertools import compress
from typing import Any, Callable, Sequence, Union

from ..._core.fork import after_fork
from ..charset import CODE_POINT_MAX, char_regex
from .numbers import _is_number
from .strings import _quantifier_bounds

__all__ = ["Undecidable", "InstanceChecker", "json_equal", "json_type", "value_key", "value_keys"]

DEPTH_MAX = 200  # nested schema applications (recursive $ref) per check


class Undecidable(Exception):
    """The checker cannot decide this value against this schema (message says why)."""


def json_type(value: Any) -> str:
    """The JSON Schema type of a value; integer-valued floats are `integer`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values (1 == 1.0, but true != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def value_key(value: Any) -> Any:
    """A JSON scalar as a set member, equal to another's exactly when `json_equal` says so (1
    and 1.0 are one member, `true` and 1 two); None for an array, an object or a non-finite
    number."""
    kind = type(value)
    if kind is str:
        return ("s", value)
    if kind is bool or value is None:
        return ("b", value)
    if kind is int or (kind is float and math.isfinite(value)):
        return ("n", value)  # 1 == 1.0 and hash(1) == hash(1.0): one member
    return None


def value_keys(values: list[Any]) -> set[Any] | None:
    """The `value_key`s of JSON scalars; None when one is not a scalar or not finite."""
    keys: set[Any] = set()
    for value in values:
        key = value_key(value)
        if key is None:
            return None
        keys.add(key)
    return keys


def exact_number(value: Any) -> Fraction:
    """A JSON number as the decimal it is written as (a float by its shortest repr: 0.1 is 1/10)."""
    return Fraction(str(value)) if isinstance(value, float) else Fraction(value)


_UNDECIDABLE_KEYWORDS = (
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
)

# The keywords `_valid` reads for a string besides `type` and the string keywords (`valid_values`).
_STR_TYPE = frozenset({str})
_NOT_STRING_ONLY = frozenset({
    *_UNDECIDABLE_KEYWORDS, "$ref", "enum", "const", "_not_enum", "allOf", "anyOf", "oneOf", "not", "if", "_clauses",
})


class InstanceChecker:
    """Checks values against schemas of one root document.

    Args:
        resolve: `$ref` string and the JSON pointer where it stands → the target schema.
        pattern_parts: an ECMA `pattern` → the regexes over a string's JSON-escaped body that the
            grammar uses, those a match matches and those it does not (`strings.pattern_parts`;
            raises on patterns it refuses).
        format_regexes: format name → regex over the JSON-escaped body.
    """

    def __init__(
        self,
        resolve: Callable[[str, str], Any],
        pattern_parts: Callable[[str], tuple[Sequence[str], Sequence[str]]],
        format_regexes: dict[str, str],
    ) -> None:
        self.resolve = resolve
        self.pattern_parts = pattern_parts
        self.format_regexes = format_regexes
        self.compiled: dict[str, re.Pattern[str] | _LiteralBody | _CoreRegex | _BoundedRegex] = {}
        self.parts: dict[str, tuple[Sequence[str], Sequence[str]]] = {}
        self.escaped: dict[str, str] = {}  # a string → its JSON-escaped body (`body_matches`)
        # id of a schema → (the schema, kept alive so its id stays its own; its `_string_check`)
        self.string_checks: dict[int, tuple[Any, Callable[[str], bool]]] = {}
        self.string_parts_of: dict[int, tuple[Any, Any]] = {}  # likewise, its `_string_parts`
        self.bodies_indexes: dict[int, tuple[list[str], dict[str, str]]] = {}  # likewise, `_bodies_index`
        # id of an `enum` or `_not_enum` list → (the list, its `value_keys`): `_listed`
        self.listed_keys: dict[int, tuple[list[Any], set[Any] | None]] = {}

    def valid(self, value: Any, schema: Any, pointer: str = "") -> bool:
        """Whether `value` is valid under `schema`.

        Raises:
            Undecidable: the schema uses something this checker cannot evaluate, or a keyword
                of the wrong type (`_malformed`).
        """
        try:
            return self._valid(value, schema, pointer, 0)
        except (AttributeError, TypeError) as err:
            raise _malformed(err) from None

    def valid_values(self, values: list[Any], schema: Any, pointer: str = "") -> list[Any]:
        """The values valid under `schema`, in order: `valid` on each, with a string checked by
        its type and string keywords alone (`_string_check`) when the schema has no keyword that
        could apply to it otherwise.

        Raises:
            Undecidable: as `valid`.
        """
        try:
            return self._valid_values(values, schema, pointer)
        except (AttributeError, TypeError) as err:
            raise _malformed(err) from None

    def _valid_values(self, values: list[Any], schema: Any, pointer: str) -> list[Any]:
        if type(schema) is not dict or not _NOT_STRING_ONLY.isdisjoint(schema):
            return [v for v in values if self._valid(v, schema, pointer, 0)]
        types = schema.get("type")
        strings = types is None or "string" in (types if isinstance(types, list) else [types])
        # The strings at once, at C speed (`_strings_passing`); when that meets a regex it
        # cannot have, one value at a time, so that the value that raises first raises, as
        # `valid` on each in order would.
        if strings and _STR_TYPE.issuperset(map(type, values)):  # the commonest case, at C speed
            texts = values
        else:
            texts = [v for v in values if type(v) is str] if strings else []
        passing: set[str] = set()
        if texts:
            try:
                passing = self._strings_passing(schema, texts)
            except Undecidable:
                return self._valid_values_in_order(values, schema, pointer, strings)
        if len(texts) == len(values):  # the commonest case
            return list(filter(passing.__contains__, values))
        valid = self._valid
        return [v for v in values if (v in passing if type(v) is str else valid(v, schema, pointer, 0))]

    def _valid_values_in_order(
        self, values: list[Any], schema: dict[str, Any], pointer: str, strings: bool
    ) -> list[Any]:
        """`valid_values` one value at a time (what the string filter falls back to)."""
        out = []
        string = None
        for v in values:
            if type(v) is not str:
                if self._valid(v, schema, pointer, 0):
                    out.append(v)
            elif strings:
                if string is None:
                    string = self._string_check(schema)
                if string(v):
                    out.append(v)
        return out

    def _strings_passing(self, schema: dict[str, Any], texts: list[str]) -> set[str]:
        """Those of `texts` that pass the string keywords of `schema` (`_string_check`), each
        regex run over what the ones before it left, at C speed: an enum of 238 names beside
        each of 238 patterns (MaskBench service-schema) spent 1.3 µs a check calling it.

        Raises:
            Undecidable: a regex that cannot be had is reached by some text.
        """
        low, high, musts, nots = self._string_parts(schema)
        if musts and type(musts[0]) is _LiteralBody:
            # A literal passes one text at most (escaping is one-to-one): looked up among the
            # bodies of `texts`, indexed once per list (service-schema's 238 task names meet
            # 238 literal patterns, 50 µs a pass over them). The filters are an intersection,
            # so taking this one first leaves the same texts before each later one.
            text = self._bodies_index(texts).get(musts[0].text)
            texts = [] if text is None else [text]
            musts = musts[1:]
        texts = list(dict.fromkeys(texts))
        if low > 0 or high < math.inf:
            texts = [text for text in texts if low <= len(text) <= high]
        if not musts and not nots:
            return set(texts)
        bodies = list(map(self.escaped.get, texts))
        if None in bodies:
            bodies = [self._escaped(text) for text in texts]
        for regex, wanted in [(regex, True) for regex in musts] + [(regex, False) for regex in nots]:
            if not texts:
                break
            if type(regex) is str:
                raise Undecidable(regex)
            found = map(regex.text.__eq__, bodies) if type(regex) is _LiteralBody else map(regex.fullmatch, bodies)
            keep = list(found) if wanted else list(map(operator.not_, found))  # a match is truthy
            texts, bodies = list(compress(texts, keep)), list(compress(bodies, keep))
        return set(texts)

    def _bodies_index(self, texts: list[str]) -> dict[str, str]:
        """The JSON-escaped body of each of `texts` → the text, kept per list (by identity)."""
        known = self.bodies_indexes.get(id(texts))
        if known is None:
            known = self.bodies_indexes[id(texts)] = (texts, {self._escaped(text): text for text in texts})
        return known[1]

    # ---- helpers -----------------------------------------------------------------------------

    def _regex(self, body: str) -> re.Pattern[str] | _LiteralBody | _CoreRegex | _BoundedRegex:
        compiled = self.compiled.get(body)
        if compiled is None:
            text = _literal_text(body)
            if text is not None:
                compiled = self.compiled[body] = _LiteralBody(text)
                return compiled
            points = _choice_points(body)
            if points is None:
                compiled = self.compiled[body] = _CoreRegex(body)
                return compiled
            try:
                compiled = re.compile(_cheap_classes(body))
            except re.error as err:
                raise Undecidable(f"a regex Python cannot run: {err}") from None
            if points > 1:
                compiled = _BoundedRegex(compiled, body, points)
            self.compiled[body] = compiled
        return compiled

    def body_matches(self, body: str, text: str) -> bool:
        """Whether the JSON-escaped body of the string `text` matches a body regex."""
        return self._regex(body).fullmatch(self._escaped(text)) is not None

    def _escaped(self, text: str) -> str:
        """The JSON-escaped body of `text`, kept: the same enum values meet pattern after
        pattern (`valid_values`)."""
        escaped = self.escaped.get(text)
        if escaped is None:
            escaped = self.escaped[text] = json.dumps(text, ensure_ascii=False)[1:-1]
        return escaped

    def pattern_matches(self, pattern: str, text: str) -> bool:
        musts, nots = self._pattern_parts(pattern)
        return all(self.body_matches(m, text) for m in musts) and not any(self.body_matches(n, text) for n in nots)

    def _pattern_parts(self, pattern: str) -> tuple[Sequence[str], Sequence[str]]:
        """The body regexes a string that `pattern` finds matches, and those it does not
        (`pattern_parts`), kept."""
        parts = self.parts.get(pattern)
        if parts is None:
            try:
                parts = self.parts[pattern] = self.pattern_parts(pattern)
            except Exception as err:  # the front-end's GrammarError: a pattern it refuses
                raise Undecidable(str(err)) from None
        return parts

    # ---- the check ---------------------------------------------------------------------------

    def _valid(self, value: Any, schema: Any, pointer: str, depth: int) -> bool:
        if depth > DEPTH_MAX:
            raise Undecidable(f"schemas nest deeper than {DEPTH_MAX} while checking a value")
        if schema is True:
            return True
        if schema is False:
            return False
        if not isinstance(schema, dict):
            raise Undecidable(f"a schema that is not an object: {schema!r}")
        for key in _UNDECIDABLE_KEYWORDS:
            if key in schema:
                raise Undecidable(f"the keyword {key!r}")
        d = depth + 1
        if "$ref" in schema:
            if not self._valid(value, self.resolve(schema["$ref"], pointer), pointer, d):
                return False
        t = json_type(value)
        types = schema.get("type")
        if types is not None:
            types = types if isinstance(types, list) else [types]
            if not (t in types or (t == "integer" and "number" in types)):
                return False
        if "enum" in schema and not self._listed(value, schema["enum"]):
            return False
        if "const" in schema and not json_equal(value, schema["const"]):
            return False
        if "_not_enum" in schema and self._listed(value, schema["_not_enum"]):
            return False
        if t in ("integer", "number") and not self._number(value, schema):
            return False
        if t == "string" and not self._string(value, schema):
            return False
        if t == "array" and not self._array(value, schema, pointer, d):
            return False
        if t == "object" and not self._object(value, schema, pointer, d):
            return False
        for sub in schema.get("allOf", ()):
            if not self._valid(value, sub, pointer, d):
                return False
        if "anyOf" in schema and not any(self._valid(value, sub, pointer, d) for sub in schema["anyOf"]):
            return False
        if "oneOf" in schema and sum(self._valid(value, sub, pointer, d) for sub in schema["oneOf"]) != 1:
            return False
        if "not" in schema and self._valid(value, schema["not"], pointer, d):
            return False
        if "if" in schema:
            branch = "then" if self._valid(value, schema["if"], pointer, d) else "else"
            if not self._valid(value, schema.get(branch, True), pointer, d):
                return False
        for clause in schema.get("_clauses", ()):
            if not self._valid(value, clause, pointer, d):
                return False
        return True

    def _listed(self, value: Any, values: Any) -> bool:
        """Whether `value` is `json_equal` to one of `values`: a set lookup when they are all
        finite scalars (their keys made once per list), else pair by pair. An enum checked
        against another's values was |A| x |B| comparisons (MaskBench o9918: a oneOf of two
        enums of ~200 names: 12,420 comparisons, two thirds of its 6.3 ms first compile)."""
        if type(values) is not list:
            return any(json_equal(value, v) for v in values)
        known = self.listed_keys.get(id(values))
        if known is None:
            known = self.listed_keys[id(values)] = (values, value_keys(values))  # the list kept: its id stays its own
        keys = known[1]
        if keys is None:
            return any(json_equal(value, v) for v in values)
        return value_key(value) in keys  # None (a container, inf) equals no finite scalar

    def _number(self, value: Any, schema: dict[str, Any]) -> bool:
        x = exact_number(value)
        lo, hi = schema.get("minimum"), schema.get("maximum")
        ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if ex_lo is True:
            ex_lo, lo = lo, None
        if ex_hi is True:
            ex_hi, hi = hi, None
        if _is_number(lo) and x < exact_number(lo) or _is_number(hi) and x > exact_number(hi):
            return False
        if _is_number(ex_lo) and x <= exact_number(ex_lo) or _is_number(ex_hi) and x >= exact_number(ex_hi):
            return False
        multiple = schema.get("multipleOf")
        if _is_number(multiple) and multiple is not None and multiple > 0 and x % exact_number(multiple) != 0:
            return False
        if schema.get("_non_integer") and x.denominator == 1:
            return False
        if any(x % exact_number(m) == 0 for m in schema.get("_not_multiple_of", ())):
            return False
        return True

    def _string(self, value: str, schema: dict[str, Any]) -> bool:
        return self._string_check(schema)(value)

    def _string_check(self, schema: dict[str, Any]) -> Callable[[str], bool]:
        """The string keywords of `schema` (length bounds, `pattern`s, `format`, excluded
        bodies) as one check of a string, made once per schema: an enum of 238 names beside
        each of 238 patterns is 56,000 checks (MaskBench service-schema).

        A regex that cannot be had (a pattern the translation refuses, a body Python cannot
        compile) raises `Undecidable` when a value reaches it, in keyword order, as a check
        reading the keywords one by one would; ill-typed bounds raise when the check is made.
        """
        known = self.string_checks.get(id(schema))
        if known is not None:
            return known[1]
        low, high, musts, nots = self._string_parts(schema)
        escaped = self._escaped

        def check(value: str) -> bool:
            if not low <= len(value) <= high:
                return False
            body = escaped(value)
            for regex in musts:
                if type(regex) is str:
                    raise Undecidable(regex)
                if regex.fullmatch(body) is None:
                    return False
            for regex in nots:
                if type(regex) is str:
                    raise Undecidable(regex)
                if regex.fullmatch(body) is not None:
                    return False
            return True

        self.string_checks[id(schema)] = (schema, check)
        return check

    def _string_parts(self, schema: dict[str, Any]) -> tuple[float, float, list[_BodyCheck], list[_BodyCheck]]:
        """(length bounds, regexes a string's body must match, regexes it must not) of
        `schema`'s string keywords, each regex found once; a regex that cannot be had is the
        message of its Undecidable in its place. Kept per schema (by identity)."""
        known = self.string_parts_of.get(id(schema))
        if known is not None:
            return known[1]
        low, high = _size_bound(schema, "minLength", 0), _size_bound(schema, "maxLength", math.inf)
        patterns = ([schema["pattern"]] if "pattern" in schema else []) + list(schema.get("_patterns", ()))
        musts: list[_BodyCheck] = []
        nots = [self._regex_or_reason(str, body) for body in schema.get("_not_bodies", ())]
        for pattern in patterns:
            try:
                pattern_musts, pattern_nots = self._pattern_parts(pattern)
            except Undecidable as err:
                musts.append(str(err))
                continue
            musts += [self._regex_or_reason(str, body) for body in pattern_musts]
            nots += [self._regex_or_reason(str, body) for body in pattern_nots]
        fmt = schema.get("format")
        if fmt in self.format_regexes:
            musts.append(self._regex_or_reason(str, self.format_regexes[fmt]))
        parts = (low, high, musts, nots)
        self.string_parts_of[id(schema)] = (schema, parts)
        return parts

    def _regex_or_reason(self, body_of: Callable[[str], str], text: str) -> re.Pattern[str] | _LiteralBody | _CoreRegex | _BoundedRegex | str:
        """`_regex(body_of(text))`, or why it cannot be had (the message of its Undecidable)."""
        try:
            return self._regex(body_of(text))
        except Undecidable as err:
            return str(err)

    def _array(self, value: list[Any], schema: dict[str, Any], pointer: str, d: int) -> bool:
        if len(value) < _size_bound(schema, "minItems", 0) or len(value) > _size_bound(schema, "maxItems", math.inf):
            return False
        items = schema.get("items", True)
        prefix = schema.get("prefixItems", [])
        rest: Any = items
        if isinstance(items, list):  # draft 4-7: `items` list, then `additionalItems`
            prefix, rest = items, schema.get("additionalItems", True)
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else rest
            if not self._valid(item, sub, pointer, d):
                return False
        if schema.get("uniqueItems") is True or schema.get("_duplicate") is True:
            repeated = any(json_equal(value[i], value[j]) for i in range(len(value)) for j in range(i))
            if repeated != (schema.get("_duplicate") is True):
                return False
        for witness in schema.get("_item_witness", ()):
            tail = value[witness["from"]:]
            if not any(self._valid(item, witness["value"], pointer, d) for item in tail):
                return False
        if "contains" in schema:
            count = sum(self._valid(item, schema["contains"], pointer, d) for item in value)
            if count < _size_bound(schema, "minContains", 1) or count > _size_bound(schema, "maxContains", math.inf):
                return False
        for entry in schema.get("_contains", ()):  # merged `contains` with counts (compiler.py)
            count = sum(self._valid(item, entry["schema"], pointer, d) for item in value[entry.get("from", 0):])
            if count < entry["min"] or (entry["max"] is not None and count > entry["max"]):
                return False
        return True

    def _object(self, value: dict[str, Any], schema: dict[str, Any], pointer: str, d: int) -> bool:
        if len(value) < _size_bound(schema, "minProperties", 0) or len(value) > _size_bound(schema, "maxProperties", math.inf):
            return False
        if any(k not in value for k in schema.get("required", ())):
            return False
        properties = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        sides = schema.get("_pattern_sides", ())
        names = schema.get("propertyNames", True)
        for key, item in value.items():
            if names is not True and not self._valid(key, names, pointer, d):
                return False
            listed = key in properties
            if listed and not self._valid(item, properties[key], pointer, d):
                return False
            matched = []
            for pattern, sub in patterns.items():
                if self.pattern_matches(pattern, key):
                    matched.append(pattern)
                    if not self._valid(item, sub, pointer, d):
                        return False
            if not listed and not matched and not self._valid(item, extra, pointer, d):
                return False
            if not listed and matched:
                # An object merged from sides with their own additionalProperties (compiler.py,
                # `merge`): a side's holds where none of its patterns matches.
                for side_patterns, side_extra in sides:
                    if not any(p in matched for p in side_patterns) and not self._valid(item, side_extra, pointer, d):
                        return False
        for witness in schema.get("_witness", ()):
            if not any(
                self._valid(key, witness["keys"], pointer, d) and self._valid(item, witness["value"], pointer, d)
                for key, item in value.items()
            ):
                return False
        dependencies = [
            *schema.get("dependencies", {}).items(),
            *schema.get("dependentRequired", {}).items(),
            *schema.get("dependentSchemas", {}).items(),
        ]
        for key, need in dependencies:
            if key not in value:
                continue
            if isinstance(need, list):
                if any(k not in value for k in need):
                    return False
            elif not self._valid(value, need, pointer, d):
                return False
        return True


def _malformed(err: Exception) -> Undecidable:
    """The checker met a keyword of the wrong type (`"dependentSchemas": []` under a `not`,
    checked against an enum value before the translation reached it: `tokensieve fuzz --kind
    json --seed 1602`): what Python said, as the reason the value cannot be checked; the
    translation names the keyword's place where it compiles it."""
    return Undecidable(f"a keyword of the wrong type ({type(err).__name__}: {err})")


def _size_bound(schema: dict[str, Any], key: str, default: float) -> float:
    """A length or count keyword's value; an ill-typed one (`"maxLength": "3"`) cannot be
    checked (the front-end refuses it with its JSON pointer)."""
    if key not in schema:
        return default
    value = schema[key]
    if not _is_number(value):
        raise Undecidable(f"{key} is not a number: {value!r}")
    return value  # type: ignore[no-any-return]


# A body regex as the checks hold it: compiled, a literal, or why it cannot be had.
_BodyCheck = Union["re.Pattern[str]", "_LiteralBody", str]

# Python's `re` metacharacters: a body regex without them (but for `\` before punctuation)
# matches one text.
_RE_SPECIAL = frozenset(".^$*+?{}[]|()")


class _CoreRegex:
    """A body regex on which Python's backtracking `re` can take time exponential in the text
    or in a count (`_choice_points` None), matched by the core instead: its lexer follows
    derivatives, linear in the text, and every call is bounded by its fuel and deadline.
    `tokensieve fuzz --kind json --seed 1515` found a `patternProperties` pattern
    `(…|[ж]*|c{,36}x*|x?|…){9999}…` that `re` ran on the key `a` for minutes. The pattern is
    compiled once, as `Grammar.regex` (the body is in the core's syntax already: it is what
    the string lexeme holds) followed by a NUL, under a matcher of a byte vocabulary whose
    state never changes: a text matches when `validate_text` follows its UTF-8 bytes and the
    NUL, one call a text. What the core refuses or gives up on (a limit) is `Undecidable`."""

    __slots__ = ("body",)

    def __init__(self, body: str) -> None:
        self.body = body

    def fullmatch(self, text: str) -> bool | None:
        from ..._errors import TokensieveError

        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return None  # a lone surrogate: no text the grammar writes
        try:
            return True if _core_matcher(self.body).validate_text(data + b"\0")[0] == len(data) + 1 else None
        except TokensieveError as err:
            raise Undecidable(f"the regex {self.body[:60]!r}...: {err}") from None


def _core_matcher(body: str) -> Any:
    """`_CoreRegex`'s matcher of `body` followed by a NUL (which no JSON-escaped text holds
    and no body matches: a text matches when the core follows it and the NUL), over a byte
    vocabulary, kept in `_CORE_MATCHERS`. Its state never changes."""
    pool = _core_pool()  # (first: a new pool drops the matchers of the old)
    matcher = _CORE_MATCHERS.get(body)
    if matcher is None:
        from ..._decoding.matcher import Matcher
        from ..grammar import Grammar

        matcher = Matcher(_byte_vocabulary(), Grammar.regex(f"(?:{body})\\x00"), pool=pool)
        if len(_CORE_MATCHERS) >= _CORE_MATCHERS_MAX:
            _CORE_MATCHERS.clear()
        _CORE_MATCHERS[body] = matcher
    return matcher


# `_CoreRegex`'s matchers by body, kept across translations (a body recurs from schema to
# schema: a `.` in a pattern is the same loop over JSON characters in every one), at most
# this many (then all are dropped).
_CORE_MATCHERS: dict[str, Any] = {}
_CORE_MATCHERS_MAX = 256
# In the child of a fork, a matcher another thread was using fails until reset: the child
# makes its own (a fork beside threads translating schemas failed on one).
after_fork(_CORE_MATCHERS.clear)


def _byte_vocabulary() -> Any:
    """A tokenizer of the 256 bytes, token i the byte i (`_CoreRegex`'s), made once."""
    global _BYTES_TOKENIZER
    if _BYTES_TOKENIZER is None:
        from ..._tokenizer.tokenizer import Tokenizer

        _BYTES_TOKENIZER = Tokenizer.from_token_bytes([bytes((i,)) for i in range(256)])
    return _BYTES_TOKENIZER


_BYTES_TOKENIZER: Any = None


def _core_pool() -> Any:
    """The pool of `_CoreRegex`'s matchers: an instance of their own under wasmtime, made with
    the default pool's options (its deadline, memory cap, fuel, build) and made again, the
    matchers of the old one dropped, when the default pool is (`tokensieve.configure`). In
    the default pool they counted among the serving matchers, which it places by count
    (`bench batch` found its requests no longer spread evenly), held the serving instances'
    locks while a schema was translated, and a pattern the core failed on retired an instance
    serving requests. It costs ~0.4 MB and ~2 ms to make. Pyodide has one instance: theirs."""
    global _CORE_POOL, _CORE_POOL_BESIDE
    from ..._core.pool import default_pool

    serving = default_pool()
    if serving is not _CORE_POOL_BESIDE:
        from dataclasses import replace

        from ..._core.pool import CorePool, _on_pyodide

        _CORE_MATCHERS.clear()
        _CORE_POOL = serving if _on_pyodide() else CorePool(replace(serving.options, instances=1))
        _CORE_POOL_BESIDE = serving
    return _CORE_POOL


_CORE_POOL: Any = None
_CORE_POOL_BESIDE: Any = None  # the default pool `_CORE_POOL` was made beside


def _choice_points(body: str) -> int | None:
    """How many places Python's backtracking `re` may backtrack into in a body regex
    (repetitions of variable length and alternatives past a group's first), or None when it
    repeats a group that holds such a place (`(a+)+`, `(x?){9999}`, `(?:[0-9]*,)*`, `(a|a)*`):
    there `re` can take time exponential in the text or the count (`^(a|a)*$` on a key of 30
    a's and a `!`: 25 s, twice that with each more), and the core decides every text
    (`_CoreRegex`). A fixed count (`{4}`) inside or an optional group (`(…)?`) outside is no
    such repetition. Escapes and classes are skipped; a body this cannot read is None too (the
    core then decides, or refuses it).

    Otherwise a text of n characters costs `re` at most about C(n + k, k) steps for k places
    (the ways to share the text among them and what is left): `^a*a*a*a*a*a*a*a*a*a*$` (k =
    10) on a key of 36 a's and a `!` took 21 s, `(a|a)(a|a)…` is 2^k (`_re_text_max`)."""
    holds = [False]  # per open group: whether it holds a repetition of variable length or `|`
    points = 0
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i += 1
            while i < n and body[i] != "]":
                i += 2 if body[i] == "\\" else 1
            if i >= n:
                return None
            i += 1
        elif c == "(":
            holds.append(False)
            i += 3 if body.startswith("(?:", i) else 1
        elif c == ")":
            if len(holds) < 2:
                return None
            inner = holds.pop()
            low, high, i = _quantifier_at(body, i + 1)
            if inner and (high is None or high > 1):
                return None
            holds[-1] = holds[-1] or inner or low != high
            points += low != high
        else:
            low, high, after = _quantifier_at(body, i)
            if after > i:  # a quantifier on the atom before it
                holds[-1] = holds[-1] or low != high
                points += low != high
                i = after
            else:
                if c == "|":
                    holds[-1] = True
                    points += 1
                i += 1
    return points if len(holds) == 1 else None  # a group left open: unreadable


# The steps a text may cost Python's `re` (`_choice_points`): ~1 ms at ~5 ns a step.
_RE_STEPS_MAX = 200_000


@functools.lru_cache(maxsize=64)
def _re_text_max(points: int) -> int:
    """The longest text a body with `points` choice points is given to `re` (C(n + k, k) ≤
    `_RE_STEPS_MAX`); longer ones go to the core. Every text for k ≤ 1 (linear)."""
    if points <= 1:
        return sys.maxsize
    n = 0
    while math.comb(n + 1 + points, points) <= _RE_STEPS_MAX:
        n += 1
    return n


class _BoundedRegex:
    """A body regex that Python's `re` runs in time polynomial in the text (`_choice_points`
    ≥ 2, not None): `re` for texts up to `_re_text_max` characters, the core
    (`_CoreRegex`) for longer ones, so that no text costs `re` more than ~1 ms."""

    __slots__ = ("pattern", "text_max", "core")

    def __init__(self, pattern: re.Pattern[str], body: str, points: int) -> None:
        self.pattern = pattern
        self.text_max = _re_text_max(points)
        self.core = _CoreRegex(body)

    def fullmatch(self, text: str) -> Any:
        if len(text) <= self.text_max:
            return self.pattern.fullmatch(text)
        return self.core.fullmatch(text)


_QUANTIFIER = re.compile(r"(\*|\+|\?|\{\d+(?:,\d*)?\})\??")


def _quantifier_at(body: str, i: int) -> tuple[int, int | None, int]:
    """The repetition counts of a quantifier at `i` (`strings._quantifier_bounds`; a lazy `?`
    after it changes nothing) and the offset after it; (1, 1, i) when none is there."""
    match = _QUANTIFIER.match(body, i)
    if match is None:
        return 1, 1, i
    return (*_quantifier_bounds(match.group(1)), match.end())


class _LiteralBody:
    """A body regex that matches exactly one text, compared rather than compiled: Python's
    `re` takes ~100 µs to compile a pattern, and `^PowerShell@1$` beside 238 task names is
    238 of them (MaskBench service-schema). Answers `fullmatch` as a compiled one would, but
    for the match object (True)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def fullmatch(self, body: str) -> bool | None:
        return True if body == self.text else None


def _literal_text(body: str) -> str | None:
    """The one text a body regex matches when it is a literal under Python's `re` (plain
    characters, a backslash before ASCII punctuation), else None."""
    if "\\" not in body and _RE_SPECIAL.isdisjoint(body):
        return body
    out = []
    chars = iter(body)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            if not (nxt and nxt.isascii() and not nxt.isalnum() and nxt.isprintable()):
                return None  # a class (`\d`), an escape (`\n`), a trailing backslash
            out.append(nxt)
        elif c in _RE_SPECIAL:
            return None
        else:
            out.append(c)
    return "".join(out)


CLASS_SPAN_CHEAP = 4096  # BMP code points above U+00FF a class covers before it is written as a negation

_INLINE_FLAGS = re.compile(r"\(\?[aiLmsux-]")


def _cheap_classes(body: str) -> str:
    """`body` with each class that covers more than `CLASS_SPAN_CHEAP` BMP code points above
    U+00FF written as the negation of its complement (when that covers fewer): the same
    characters, but Python's `re` fills a class's table one code point at a time, and the
    front-end's class for `.` in a string body (~60,000 of them) cost 3.5 ms a regex
    (MaskBench vega: two, 8 ms of a 95 ms first compile). `body` unchanged when a class is not in the forms `class_regex` writes
    (plain characters, a backslash before ASCII punctuation, `\\xHH`, ranges), is negated, or
    the regex sets flags."""
    if "[" not in body or _INLINE_FLAGS.search(body):
        return body
    out: list[str] = []
    done = i = 0
    n = len(body)
    try:
        while i < n:
            c = body[i]
            if c == "\\":
                i += 2
                continue
            if c != "[":
                i += 1
                continue
            ranges, end = _class_ranges(body, i)
            if ranges is None:
                return body
            if _bmp_span(ranges) > CLASS_SPAN_CHEAP:
                rest = _complement(ranges)
                if rest and _bmp_span(rest) < _bmp_span(ranges):
                    out += (body[done:i], "[^", *(_class_part(lo, hi) for lo, hi in rest), "]")
                    done = end
            i = end
    except (IndexError, ValueError):
        return body
    out.append(body[done:])
    return "".join(out)


def _class_ranges(body: str, start: int) -> tuple[list[tuple[int, int]] | None, int]:
    """The ranges of the class at `body[start]` (`[`) and the index after it; None when it is
    negated or holds anything but the forms `class_regex` writes."""
    j = start + 1
    if body[j] in "^]":
        return None, j
    ranges: list[tuple[int, int]] = []
    while body[j] != "]":
        lo, j = _class_atom(body, j)
        if lo is None:
            return None, j
        hi = lo
        if body[j] == "-" and body[j + 1] != "]":
            hi, j = _class_atom(body, j + 1)
            if hi is None or hi < lo:
                return None, j
        ranges.append((lo, hi))
    return ranges, j + 1


def _class_atom(body: str, j: int) -> tuple[int | None, int]:
    c = body[j]
    if c == "\\":
        d = body[j + 1]
        if d == "x":
            digits = body[j + 2 : j + 4]
            if len(digits) != 2 or any(h not in "0123456789abcdefABCDEF" for h in digits):
                return None, j
            return int(digits, 16), j + 4
        if d.isascii() and not d.isalnum():
            return ord(d), j + 2
        return None, j
    if c in "[-":
        return None, j
    return ord(c), j + 1


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every code point not in `ranges`, surrogates included (Python's `re` matches them;
    `charset.complement` drops them)."""
    out: list[tuple[int, int]] = []
    next_lo = 0
    for lo, hi in sorted(ranges):
        if lo > next_lo:
            out.append((next_lo, lo - 1))
        next_lo = max(next_lo, hi + 1)
    if next_lo <= CODE_POINT_MAX:
        out.append((next_lo, CODE_POINT_MAX))
    return out


def _bmp_span(ranges: list[tuple[int, int]]) -> int:
    """The code points U+0100-U+FFFF in `ranges` (what `re` walks one by one)."""
    return sum(max(0, min(hi, 0xFFFF) - max(lo, 0x100) + 1) for lo, hi in ranges)


def _class_part(lo: int, hi: int) -> str:
    return char_regex(lo) if lo == hi else f"{char_regex(lo)}-{char_regex(hi)}"
