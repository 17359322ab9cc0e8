"""The JSON Schema front-end: a JSON Schema → `GrammarIR` whose matches are JSON texts valid
under the schema (compact, or with whitespace between lexemes).

The design follows llguidance's (`docs/json_schema.md` there), so schemas behave the same:

- **Lexemes.** Every scalar is ONE lexeme: a string is `"` + body + `"` (body from `pattern`,
  `format` or `minLength`/`maxLength`), a number or integer one regex (with its bounds built in),
  `true|false` one regex, `null` a literal; object keys are literal lexemes (`"name"`), and the
  punctuation `{ } [ ] , :` are literals. Whitespace is the IR's skip regex, so it may appear
  between any two lexemes but never before the first or after the last (`allow_initial_skip`
  is off).
- **Objects.** Properties come in `properties` order, then `required` keys not listed there,
  then any other keys (`patternProperties` and `additionalProperties`; a missing
  `additionalProperties` counts as `additional_properties_default`). Each optional property
  may be absent; a state (member, properties so far) places the commas and, with
  `minProperties`/`maxProperties`, counts (up to `OBJECT_STATE_COUNT_MAX` states). Other keys
  are key lexemes with intersection/difference parts: one per set of matching patterns
  (`pattern & ~other patterns & ~listed names`; all subsets up to `PATTERN_SUBSETS_MAX`
  patterns, so overlapping patterns are exact; beyond that a key matching several is
  refused), and `string & ~patterns & ~names` for additional keys. `propertyNames` is
  intersected into every key lexeme and checked on listed names. Duplicate keys are not
  detected. With `property_order="any"` the listed properties come in any order, each at
  most once, other keys among them: a state per subset of properties written
  (`object_body_any_order`, exact up to `ANY_ORDER_TRACKED_MAX` properties).
- **Arrays.** `prefixItems` (or a draft-4 `items` list), then `items` (or `additionalItems`)
  for the rest, with `minItems`/`maxItems`: fixed counts use doubling rules (`x^2k → x^k x^k`)
  and optional counts a binary split (`upto_k`), so the grammar stays O(log n) for large
  bounds. Repetition is left-recursive.
- **Combinators.** `anyOf` → alternatives. `oneOf` → alternatives too: as they are when the
  options are provably disjoint (types, listed values; for objects, a required discriminator
  property or a required key the other option forbids),
  otherwise "option i and not any other" for each i (`compile_one_of_exactly`: the negations
  are clauses), exact when every option's negation is expressible and the expansion stays under
  `ONE_OF_EXACT_ALTERNATIVES_MAX`; beyond that **treated as `anyOf`** with a warning. `allOf`, and `$ref` with
  sibling keywords, are *merged* into one schema (types intersected, properties merged with the
  other side's `patternProperties`/`additionalProperties` for keys it does not list — also when
  it lists none —, prefix items likewise with its `items`, `required` united, the tighter
  bound kept, `enum` intersected); an `anyOf` next to other keywords is distributed into its
  options. Two different `pattern`s (or a `pattern` with `minLength`/`maxLength`) use the IR's
  intersection lexemes (`Lexeme.and_patterns`).
- **`$ref`.** Local references (`#`, `#/json/pointer` with `~0 ~1` and percent escapes,
  `#anchor` via `$anchor` or a draft-6 `$id: "#name"`, or the root `$id` followed by a fragment).
  Documents with nested `$id`s, `$ref`s by URI or dynamic references are first rewritten into
  such references by `refs.resolve_references` (base URIs per resource; `$dynamicRef` and
  `$recursiveRef` where their target does not depend on the path of evaluation).
  A plain `$ref` (nothing but annotations beside it) becomes one nonterminal per target,
  compiled once from a worklist, so recursive schemas work and the Python stack stays bounded.
- **Strings.** A `pattern` is ECMA-262 with *search* semantics: unless a top-level alternative
  starts with `^` (ends with `$`) it is wrapped in "any JSON string characters". The pattern
  describes the *decoded* string while the lexeme matches *JSON-escaped* text, so the pattern
  is translated character set by character set (`_EcmaPattern`) into every spelling the
  grammar allows (`STRING_CHAR`): printable ASCII only raw (`"` and `\\` as `\\"` `\\\\`;
  `\\u0041` and `\\/` are never accepted, in any string, so negations stay exact), control
  characters as their short escape (`\\n`) or `\\u00XX`, other BMP characters raw or as
  `\\uXXXX` (any hex case), astral characters raw or as one surrogate-pair escape, counted as
  one character by `minLength`/`maxLength`. Lone or mis-ordered surrogate escapes are refused.
  `\\d \\w` are ASCII, `\\s` is ECMA's set.
  Lookaround, backreferences, `\\b`, `\\p{..}` and anchors inside groups are `GrammarError`s
  (lenient: the pattern is dropped with a warning).
- **Formats** `date-time date time duration email hostname ipv4 ipv6 uuid uri uri-reference uri-template`
  are regexes here; other formats accept any string and add a warning.
- **Integers** with `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (draft-4 boolean
  and draft-6 numeric forms) are exact decimal digit-range regexes (`int_range_regex`).
  **Numbers** with bounds are exact: for integer bounds the integer part is a digit range and
  the fraction is free, zero or non-zero as the bound needs; non-integer bounds constrain the
  fraction digit by digit where the integer part meets them (`decimal_range_regex`); a bounded
  number is written without an exponent.
  Unbounded numbers follow JSON's grammar. `-0` is not accepted.
- **enum/const** values are emitted structurally (objects and arrays as punctuation and
  literals, so whitespace may appear inside them), scalars as literal text of their compact
  JSON; strings with non-ASCII or escaped characters accept both raw and `\\u` forms; an
  integer-valued number also matches with a zero fraction (`1.0`). Each value is checked
  against every other keyword beside it (`_json_instance.py`), so an enum is exact whatever
  else the schema says (`not`, `oneOf`, `uniqueItems`, ...).
- **`not`, `if`/`then`/`else`, `dependentRequired`, `dependentSchemas`, `dependencies`** are
  kept as clauses and expanded into alternatives of plain schemas (`_json_schema_logic.py`):
  `not` is pushed inwards keyword by keyword (`not {required: [a]}` → an object without `a`,
  `not {pattern: p}` → a string lexeme with `p` in its `not_patterns`, ...);
  `if I then T else E` → `(I and T) | (not I and E)`; a dependency on `k` → `k absent | k
  present and ...`. A negated `patternProperties`, `propertyNames`, `additionalProperties`
  (or `items` after `prefixItems`) becomes a *witness*: a member (item) that must occur, from a
  key region (past the prefix) with a value breaking the schema, tracked as a set of witnesses
  met in the object (array) states (`object_body_witness`, `array_witness`). The negation of
  `uniqueItems` has no grammar: an error. `if`/`then`/`else`
  are ignored under a draft-04/06 `$schema`, where they are not keywords.
- **Arrays** also take `contains`/`minContains`/`maxContains` (a state of items and matches,
  read left-recursively; several merged `contains` with counts, `_contains`, and item
  witnesses beside them are counted together, up to `CONTAINS_COUNTED_MAX`) and `uniqueItems`: exact when the items range over a finite domain
  (enum, boolean, null) whose sets of at most `maxItems` values number at most
  `UNIQUE_STATE_COUNT_MAX`, or when `maxItems` <= 1; exact and checked by the core when the
  items are open scalars (`distinct_array`: plain strings, numbers, integers); **otherwise not
  enforced** (a warning).
- **`multipleOf`** is a regex intersected with the number lexeme (`multiple_of_regexes`): for
  an integer multiple up to `RESIDUE_MODULUS_MAX`, the core's residue run `(?%c,0,d)` after a
  leading digit d (exact for any such c, docs/lexer.md); otherwise a divisibility automaton
  over the digits, minimized and turned into a regex (`multiple_of_regex`), or, when that one
  is too large, the automaton of the last digits beside the residue run `(?%.c',0)` of the
  factor coprime to 10, or one automaton per prime power; such numbers are written without
  exponent. What none of these can have is ignored with a warning.
- `true` / `{}` = any JSON value; `false` = nothing (an error at the top; an optional
  property or anyOf option that is `false` is dropped).

Options: `whitespace` "flexible" (skip `[ \\t\\n\\r]+`), "compact" (no skip) or a regex;
`lenient` turns unsupported keywords, patterns, negations and conflicting merges into warnings
(the result then accepts a *superset* of the valid instances); `additional_properties_default`; `key_separator` and
`item_separator` (literal texts). Warnings are in `ir.options["warnings"]` (a list of str).

Errors are `GrammarError` with `json_pointer` set to the offending place, e.g.
`/properties/a/not`. Limits: nesting deeper than `NESTING_DEPTH_MAX` schema levels, more than
`GRAMMAR_SYMBOL_COUNT_MAX` grammar symbols, or `REPEAT_COUNT_MAX` in a string length.

Every keyword's treatment (exact, approximate and in which direction, or error) is listed in
`docs/json_schema.md`.

TODO (not yet supported, in rough order of MaskBench frequency):
- `unevaluated*` exactly beside `anyOf`s of more than `UNEVALUATED_ANY_OF_MAX` options (a subset
  with a warning; under `not` a superset).
- Exponents in bounded numbers (but for one bound at zero: the sign decides); `-0`.
- `format` intersected with lengths.
- Remote `$ref`s (other documents than the meta-schemas of drafts 2020-12, 07, 06 and 04, `metaschema.py`).
"""

from __future__ import annotations

import functools
import itertools
import json
import marshal
import math
import operator
import re
import urllib.parse

try:  # Python's own regex parser (`_open_pattern_string`); sre_parse before 3.11
    from re import _constants as _re_constants, _parser as _re_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _re_constants  # type: ignore[no-redef]
    import sre_parse as _re_parser  # type: ignore[no-redef]
from fractions import Fraction
from typing import Any, Callable, Container, Iterable, Iterator, NamedTuple, Sequence

from ..._errors import ArgumentError, GrammarError, TokensieveError
from ..ir import GrammarIR, Lexeme, Rule, Sym, productive_nonterminals
from ..shape import check_tree_shaped_exactly, find_non_json_data
from .instance import InstanceChecker, Undecidable, exact_number, json_type
from .instance import json_equal as _json_equal, value_key as _value_key, value_keys as _value_keys
from .logic import _KEYWORDS as _ASSERTING  # every keyword of drafts 4 to 2020-12 that asserts
from .logic import Unexpressible, clause_alternatives, negate, presence_clauses, value_schema
from . import presence
from .metaschema import embed_meta_schema
from .refs import DYNAMIC_UNION, resolve_references
from .numbers import (
    _FRACTION_ZERO, _alt, _bounded_multiples, _is_integral, _is_number, _number_spelling_regex, decimal_range_regex, int_range_regex,
    multiple_of_regex, multiple_of_regexes, not_multiple_of_regex, number_range_regex,
)
from .strings import (
    FORMAT_REGEXES, _ANCHORED_PLAIN, REPEAT_COUNT_MAX, STRING_CHAR, _json_string_lexeme, _json_string_regex, _json_strings_lexeme, _key_regex,
    pattern_parts, pattern_to_json_regex, string_regex,
)
from .x_guidance import split_x_guidance


__all__ = [
    "json_schema_to_ir",
    "int_range_regex",
    "number_range_regex",
    "string_regex",
    "pattern_to_json_regex",
    "FORMAT_REGEXES",
    "NESTING_DEPTH_MAX",
    "GRAMMAR_SYMBOL_COUNT_MAX",
    "REPEAT_COUNT_MAX",
]

NESTING_DEPTH_MAX = 128  # schema levels (JSON pointer segments) below the root
GRAMMAR_SYMBOL_COUNT_MAX = 500_000  # symbols over all rules (each rule counts 1 + its length)
MERGE_WORK_MAX = 2_000_000  # what merges may copy and compare in one schema (`spend_merge_work`)
ANY_OF_PRODUCT_MAX = 256  # options when merging two anyOf lists (allOf of anyOfs)
WHITESPACE_FLEXIBLE = r"[ \t\n\r]+"

# Keywords that only annotate: ignored silently.
ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary",
        "title", "description", "default", "examples", "example", "readOnly", "writeOnly",
        "deprecated", "contentMediaType", "contentEncoding", "contentSchema", "discriminator",
        "nullable", "xml", "externalDocs", "$dynamicAnchor", "$recursiveAnchor",
        "_dynamic_union",  # refs.DYNAMIC_UNION: marks an anyOf, warned about in check_keywords
    }
)
# Keywords this front-end does not implement: GrammarError, or a warning when lenient.
UNSUPPORTED = frozenset(
    {
        "$dynamicRef", "$recursiveRef",
    }
)
# Keywords kept as clauses (`_clauses`) and expanded into alternatives (`_json_schema_logic`).
CLAUSE_KEYWORDS = ("not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas")
_CLAUSE_KEYWORD_SET = frozenset(CLAUSE_KEYWORDS)  # `clauses` does nothing to a schema without any
COMPILE_DEPTH_MAX = 100  # nested schema compilations (Python frames: about 8 per level)
CLAUSE_ALTERNATIVE_COUNT_MAX = 4096  # alternatives made from clauses, over one whole schema
ONE_OF_EXACT_ALTERNATIVES_MAX = 16  # clause alternatives an overlapping oneOf may expand into (else: as anyOf)
ONE_OF_NEGATED_PATTERNS_MAX = 3  # patterns/formats an exact oneOf option may exclude (else: as anyOf)
ONE_OF_EXACT_SCHEMA_MAX = 1024  # ... and all of one schema's together (outside CLAUSE_ALTERNATIVE_COUNT_MAX)
ONE_OF_PAIRS_MAX = 100_000  # pairs of oneOf options checked for overlap (past it: not shown disjoint)
OBJECT_STATE_COUNT_MAX = 20_000  # (property, count) states of one object with min/maxProperties
PRESENCE_STATE_COUNT_MAX = 4096  # (property, comma, terms left) states of one object with `_presence` (else expanded)
PRESENCE_FRONT_KEYS_MAX = 6  # members an object with `_presence` may also take first, in any order (else expanded)
PRESENCE_LOOSE_KEYS_MAX = 2  # keys a constraint names that only an open object's extras spell (else expanded)
ANY_ORDER_TRACKED_MAX = 4  # property_order="any" tracks every property of objects this small (exact)
ANY_ORDER_REQUIRED_MAX = 6  # ... else only the required ones, up to this many (2^n states either way)
ARRAY_STATE_COUNT_MAX = 20_000  # (item count, match count) states of one array with contains
CONTAINS_COUNTED_MAX = 4  # contains with counts merged on one array (2^n item classes; more: the first counted)
UNIQUE_STATE_COUNT_MAX = 512  # sets of item values (of at most maxItems) for an exact uniqueItems
DISTINCT_ITEMS_BOUNDED_MAX = 256  # maxItems of a uniqueItems array the core checks (a list nonterminal per count)
UNEVALUATED_ANY_OF_MAX = 4  # anyOf options beside unevaluated* expanded into all 2^n - 1 passing sets
PATTERN_SUBSETS_MAX = 4  # patternProperties up to this many are exact for overlapping patterns
PATTERN_PROPERTIES_MAX = 1_000  # patternProperties of one object (MaskBench's most: 22)
_WITNESS_KEYS = "the key region of a negated object keyword"  # key_constraint's `what` for witnesses
WITNESS_COUNT_MAX = 4  # negated patternProperties/propertyNames/additionalProperties met by one object (2^n states)
TYPES = ("null", "boolean", "number", "integer", "string", "array", "object")
ALL_TYPES = ("null", "boolean", "number", "string", "array", "object")  # integer ⊂ number

# One character of a JSON string, as it appears in the JSON text.
NUMBER_REGEX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
NUMBER_REGEX_NO_EXPONENT = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
NON_INTEGER_REGEX = r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"  # without exponent (a subset)
INTEGER_REGEX = r"-?(?:0|[1-9][0-9]*)"
# A number as an item that must differ from the others (`distinct_array`): zero without an
# exponent (`0e5` is 0 whatever follows, so its text in progress could repeat a 0 with no way
# out; every other number in progress can still become infinitely many values).
DISTINCT_NUMBER_REGEX = r"-?(?:0(?:\.0+)?|(?:0\.0*[1-9][0-9]*|[1-9][0-9]*(?:\.[0-9]+)?)(?:[eE][+-]?[0-9]+)?)"
# Numbers with an exponent by the sign of their value, for a bound at zero (the only bound an
# exponent can be checked against with a regex: its sign is the mantissa's). -0 is not written.
_EXPONENT = r"[eE][+-]?[0-9]+"
_MANTISSA_NONZERO = r"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)"
_MANTISSA_ZERO = r"0(?:\.0+)?"
_EXPONENT_BY_SIGN = {  # (bound is the lower one, bound is exclusive) -> the numbers with an exponent
    (True, False): f"(?:{_MANTISSA_NONZERO}|{_MANTISSA_ZERO}){_EXPONENT}",
    (True, True): f"{_MANTISSA_NONZERO}{_EXPONENT}",
    (False, False): f"(?:-{_MANTISSA_NONZERO}|{_MANTISSA_ZERO}){_EXPONENT}",
    (False, True): f"-{_MANTISSA_NONZERO}{_EXPONENT}",
}
# The lexeme (name, kind, value) of a schema that is one scalar type and nothing else
# (`compile` takes it directly; "string" is `_Compiler.string`).
_PLAIN_TYPES = {
    "string": None,
    "integer": ("integer", "regex", INTEGER_REGEX),
    "number": ("number", "regex", NUMBER_REGEX),
    "boolean": ("boolean", "regex", "true|false"),
    "null": ("null", "literal", "null"),
}


# =============================================================================================
# Public entry point
# =============================================================================================


_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples"})
_CHECKED_KEYWORDS = UNSUPPORTED | {"$dynamicRef", "$recursiveRef", "_conflicts"}  # what `check_keywords` acts on
_TYPE_AND_ANNOTATIONS = ANNOTATIONS | {"type"}  # the keys of a schema `compile` takes directly
_ASSERTING_BESIDE_TYPE = _ASSERTING - {"type"}  # (`compile`: none beside a plain type, or the general path)
_ENUM_AND_ANNOTATIONS = ANNOTATIONS | {"enum"}  # the keys of an enum `compile` takes directly
_ASSERTING_BESIDE_ENUM = _ASSERTING - {"enum"}
_REF_AND_ANNOTATIONS = ANNOTATIONS | {"$ref"}  # those of a schema `compile` takes as its reference


def _reject_lone_surrogates(schema: Any, forms: list[bytes] | None = None) -> bool:
    """Refuse a string holding a lone surrogate (JSON's `"\\ud800"`) wherever it could reach a
    pattern or literal, naming it by JSON pointer: it has no UTF-8 form. Annotations may.

    Returns whether the references need `resolve_references` (a nested `$id`, a `$ref` not
    starting with `#`, a dynamic reference): the same walk finds out, at no extra pass.
    `forms`, when given, receives the schema's `marshal` form if one was made of it whole
    (for `_Compiler`, which would make it again: 1.2 ms on MaskBench kb_1161's 960 kB).

    Most schemas are settled by their marshal form (`_settled_at_once`) at C speed; those
    whose form has no lone surrogate but a candidate reference (`required: ["id", "name"]`
    looks like one) by a walk of their objects and arrays alone (`_rewrite_walk`); the others,
    by a walk that builds no pointers: it gathers the strings and encodes them at once, and
    only when that fails walks again with pointers (`_lone_surrogate_walk`) to name the place."""
    settled = _settled_at_once(schema, forms)
    if settled is not None:
        return False if settled else _rewrite_walk(schema)
    strings: list[str] = []
    stack: list[Any] = [schema]
    steps = 0
    rewrite = False
    root = True
    while stack:
        value = stack.pop()
        steps += 1
        if steps > _WALK_STEPS_MAX:
            return True  # the translation has its own size limits
        kind = type(value)
        if kind is str:
            strings.append(value)
        elif kind is dict:
            steps += len(value)  # the keys, which the walk with pointers visits as nodes
            if not rewrite and not _REWRITE_KEYS.isdisjoint(value):
                rewrite = _needs_rewrite(value, root=root)
            for key, item in value.items():
                if type(key) is str:
                    strings.append(key)
                else:
                    stack.append(key)
                if key not in _ANNOTATIONS:
                    stack.append(item)
        elif kind is list:
            stack.extend(value)
        elif isinstance(value, (str, dict, list)):  # subclasses: the walk with pointers
            return _lone_surrogate_walk(schema)
        root = False
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        _lone_surrogate_walk(schema)  # raises with the pointer
    return rewrite


# The keys `_needs_rewrite` reads (a schema object without any needs no rewrite).
_REWRITE_KEYS = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "$id", "id"})
# What `_settled_at_once` looks for in a schema's `marshal` form (version 2: a str is `u`, its
# UTF-8 length in 4 bytes and its UTF-8 bytes, lone surrogates as `\xed\xa0-\xbf..`; a dict is
# `{`, key value key value ..., `0`): a lone surrogate, or a key `_needs_rewrite` reads with a
# string value not starting with `#` (`$ref`, `$id`, `id`; also the first of two strings in a
# list, such as `required: ["id", "name"]`, which the walk then clears) or, for `$dynamicRef`
# and `$recursiveRef`, with any value. Two searches: the lone surrogates' (`_lone_surrogate_in`)
# and one regex of the keys, whose alternatives start after the `u` of a string (a search per
# key costs a scan of the form each, ~0.3 ms on MaskBench kb_1161's 960 kB; one for the
# dynamic keys anywhere, as before, cost as much again).
_LONE_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")
_REWRITE_CANDIDATE = re.compile(
    rb"u(?:\x04\0\0\0\$refu(.{4})(?!#)|\x03\0\0\0\$idu(.{4})(?!#)|\x02\0\0\0idu(.{4})(?!#)"
    rb"|\x0b\0\0\0\$dynamicRef|\x0d\0\0\0\$recursiveRef)",
    re.DOTALL,
)
# `_lone_surrogate_in` looks at this many 0xED bytes (lengths and Hangul have them) one by one
# before it leaves the rest to the regex.
_LONE_SURROGATE_FINDS_MAX = 16
# The walks' budget: past it they stop and ask for the rewrite (the translation has its own
# size limits).
_WALK_STEPS_MAX = 2_000_000
# Bytes; the walk takes at most 1.5 steps per byte (a dict entry with a None key and value: 3
# steps, 2 bytes), so it would not run out of its steps on a form this long. (At 600,000 with
# a budget of 1,000,000 steps, Kubernetes kb_1161's 960 kB form, mostly descriptions, went to
# the walk: 26,000 steps, 6-10 ms.)
_SETTLED_SIZE_MAX = 1_300_000


def _settled_at_once(schema: Any, forms: list[bytes] | None = None) -> bool | None:
    """Whether `_reject_lone_surrogates` has nothing to refuse and no rewrite to ask for, as
    the schema's `marshal` form (made at C speed) shows: True when there is no lone surrogate
    in it and no reference that `_needs_rewrite` takes (the root's own `$id`/`id` left out, as
    there); False when there is no lone surrogate but a candidate reference (the rewrite is
    then for `_rewrite_walk` to tell). The form holds every string and object the walk visits
    (and annotations too), so what it clears the walk would clear; anything else (a type
    marshal refuses such as a subclass, a cycle, a lone surrogate even in an annotation, a
    form longer than the walk's budget) is left to the walk: None. The form of the schema
    whole (no root `$id`/`id` left out) goes to `forms` when given, or, for a root with ids,
    the form without them when it is longer than `_CONTENT_MARSHAL_SIZE_MAX` (the whole one
    is then too long for content ids as well, which is all `_Compiler` reads of it)."""
    if type(schema) is not dict:
        return None
    whole = forms
    if "$id" in schema or "id" in schema:
        whole = None
        root_ids = {key: schema[key] for key in ("$id", "id") if key in schema}
        if any(type(value) is not str or _LONE_SURROGATE_UTF8.search(value.encode("utf-8", "surrogatepass"))
               for value in root_ids.values()):
            return None
        schema = {key: value for key, value in schema.items() if key not in root_ids}
    data = _marshal_form(schema)
    if data is None:
        # Refused: a subclass, nesting past marshal's depth, or a cycle, which
        # `check_tree_shaped` (`Grammar.json_schema`) cannot see when it runs through the root.
        check_tree_shaped_exactly(schema)
    elif forms is not None and (whole is not None or len(data) > _CONTENT_MARSHAL_SIZE_MAX):
        # Without the root's ids, a form too long for content ids says all the compiler reads
        # of the whole one (which is longer still): service-schema's 577 kB were made twice.
        forms.append(data)
    if data is None or len(data) > _SETTLED_SIZE_MAX or _lone_surrogate_in(data):
        return None
    # Each match tried in turn, the next search from the byte after its start (not its end),
    # so that a match cleared never hides one that overlaps it.
    match = _REWRITE_CANDIDATE.search(data)
    while match is not None:
        if _rewrite_candidate(match):
            return False
        match = _REWRITE_CANDIDATE.search(data, match.start() + 1)
    return True


def _rewrite_candidate(match: re.Match[bytes]) -> bool:
    """Whether a match of `_REWRITE_CANDIDATE` in a `marshal` form may be a key with its
    value. A key's value is followed by the next key or the end of its dict (`0`), and a key
    is never a list or a dict (they are unhashable): so a string `$ref`, `$id` or `id`
    followed by a string and then by a list or a dict (`[`, `{`) is no such pair but, say, the
    last value of a list before a key whose value is a list (MaskBench service-schema: an
    `enum` ending with `"id"` before the key `aliases`, which sent its 577 kB form to
    `_rewrite_walk`, ~2 ms). The dynamic references, whatever follows, are candidates."""
    length = match.group(1) or match.group(2) or match.group(3)
    if length is None:
        return True
    after = match.end() + int.from_bytes(length, "little")
    return match.string[after : after + 1] not in (b"[", b"{")


def _lone_surrogate_in(data: bytes) -> bool:
    """Whether UTF-8 bytes (with `surrogatepass`) hold a lone surrogate's form, 0xED then
    0xA0-0xBF (or a length field that looks like one: the caller then walks). The 0xED bytes
    are found by `bytes.find` (memchr) and their next byte read, where the regex scanned every
    byte (0.22 ms on kb_1161's 960 kB form, which has a few)."""
    at = data.find(b"\xed")
    for _ in range(_LONE_SURROGATE_FINDS_MAX):
        if at < 0:
            return False
        if 0xA0 <= (data[at + 1] if at + 1 < len(data) else 0) <= 0xBF:
            return True
        at = data.find(b"\xed", at + 1)
    return _LONE_SURROGATE_UTF8.search(data, at) is not None


def _rewrite_walk(schema: dict[str, Any]) -> bool:
    """`_reject_lone_surrogates`'s answer for a schema whose marshal form has no lone
    surrogate (`_settled_at_once` False): whether some object it visits needs the rewrite,
    found by a walk of the objects and arrays alone (the strings need no encoding, nor their
    gathering: service-schema 6.5 -> 2.6 ms; the 1,229 MaskBench schemas that take it 87 -> 36
    ms in all). The form succeeded, so there are no subclasses; its length bounds the steps
    below the walk's budget."""
    stack: list[Any] = [schema]
    root = True
    while stack:
        value = stack.pop()
        if type(value) is dict:
            if not _REWRITE_KEYS.isdisjoint(value) and _needs_rewrite(value, root=root):
                return True
            for key, item in value.items():
                kind = type(item)
                if (kind is dict or kind is list) and key not in _ANNOTATIONS:
                    stack.append(item)
        else:
            for item in value:
                kind = type(item)
                if kind is dict or kind is list:
                    stack.append(item)
        root = False
    return False


def _marshal_form(schema: Any) -> bytes | None:
    """`marshal.dumps(schema, 2)` (no references: the bytes are a function of the value alone),
    or None when marshal refuses it (a subclass, a cycle, nested too deep)."""
    try:
        return marshal.dumps(schema, 2)
    except ValueError:
        return None


def _needs_rewrite(node: dict[str, Any], *, root: bool = False) -> bool:
    """Whether a schema object needs `resolve_references`: a `$ref` not starting with `#`, a
    dynamic reference, or (below the root, whose `$id` is the first base) an `$id` (draft 4:
    `id`)."""
    ref = node.get("$ref")
    if (isinstance(ref, str) and not ref.startswith("#")) or "$dynamicRef" in node or "$recursiveRef" in node:
        return True
    if root:
        return False
    ident, old_id = node.get("$id"), node.get("id")
    return (isinstance(ident, str) and not ident.startswith("#")) or (isinstance(old_id, str) and not old_id.startswith("#"))


def _lone_surrogate_walk(schema: Any) -> bool:
    """`_reject_lone_surrogates` with a JSON pointer for every node (the slow path)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    steps = 0
    rewrite = False
    while stack:
        value, pointer = stack.pop()
        steps += 1
        if steps > _WALK_STEPS_MAX:
            return True  # the translation has its own size limits
        if isinstance(value, dict) and not rewrite:
            rewrite = _needs_rewrite(value, root=not pointer)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                where = (pointer or "/").encode("utf-8", "backslashreplace").decode("utf-8")
                raise GrammarError(
                    f"{where}: the string holds a lone surrogate U+{ord(value[err.start]):04X} "
                    f"(at character {err.start}), which is not a Unicode character: write a whole "
                    "surrogate pair or remove it",
                    json_pointer=pointer,
                ) from None
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
                stack.append((key, child))
                if key not in _ANNOTATIONS:
                    stack.append((item, child))
        elif isinstance(value, list):
            stack.extend((item, f"{pointer}/{i}") for i, item in enumerate(value))
    return rewrite


def json_schema_to_ir(
    schema: dict[str, Any] | bool | str,
    *,
    whitespace: str = "flexible",
    lenient: bool = False,
    additional_properties_default: bool = True,
    key_separator: str = ":",
    item_separator: str = ",",
    property_order: str = "schema",
) -> GrammarIR:
    """Translate a JSON Schema into a grammar whose matches are the JSON texts it accepts.

    Args:
        schema: the schema, as a parsed value (dict or bool) or as JSON text.
        whitespace: `"flexible"` (`[ \\t\\n\\r]+` may appear between lexemes), `"compact"`
            (none), or any other string: a regex used as the skip pattern.
        lenient: unsupported keywords, untranslatable patterns and conflicting merges become
            warnings (the grammar then accepts a superset) instead of errors.
        additional_properties_default: whether an object without `additionalProperties`
            accepts properties it does not list (JSON Schema says yes).
        key_separator: the literal text between a key and its value.
        item_separator: the literal text between array items and between properties.
        property_order: `"schema"` (listed properties in `properties` order, then the other
            keys) or `"any"` (the declared properties in any order, each at most once, other
            keys anywhere among them; exact up to `ANY_ORDER_TRACKED_MAX` properties, see
            `docs/json_schema.md` beyond).

    Returns:
        The IR; `ir.options["warnings"]` lists what was ignored or approximated.

    Raises:
        GrammarError: the schema is malformed, unsatisfiable at the top, uses an unsupported
            keyword (unless `lenient`), or is too large; `json_pointer` names the place.

    Cost: linear in the schema size for most schemas; `allOf` of several `anyOf`s multiplies.
    """
    for name, separator in (("key_separator", key_separator), ("item_separator", item_separator)):
        if not isinstance(separator, str):
            raise ArgumentError(f"{name} must be a str, not {type(separator).__name__}")
    parsed = isinstance(schema, str)
    if parsed:
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as err:
            raise GrammarError(
                f"the schema is not valid JSON: {err}", position=err.pos, line=err.lineno, column=err.colno
            ) from None
        except (ValueError, RecursionError) as err:  # nesting deeper than the parser's stack
            raise GrammarError(f"the schema is not valid JSON: {err}", position=0, line=1, column=1) from None
    if not isinstance(schema, (dict, bool)):
        raise GrammarError(
            f"a JSON Schema must be an object or a boolean, not {type(schema).__name__}", json_pointer=""
        )
    try:
        return _translate(
            schema,
            whitespace=whitespace,
            lenient=lenient,
            additional_properties_default=additional_properties_default,
            key_separator=key_separator,
            item_separator=item_separator,
            property_order=property_order,
        )
    except TokensieveError:
        raise
    except (AttributeError, TypeError, ValueError):
        # Python values that JSON text cannot hold (a key that is not a string, an integer
        # too long for Python to write) reach code written for JSON data: name one and its
        # place. Looked for only here, so a schema that compiles pays nothing for it.
        found = None if parsed else find_non_json_data(schema)
        if found is not None:
            raise GrammarError(f"{found[1]} (at {found[0] or '/'})", json_pointer=found[0]) from None
        raise


def _translate(
    schema: dict[str, Any] | bool,
    *,
    whitespace: str,
    lenient: bool,
    additional_properties_default: bool,
    key_separator: str,
    item_separator: str,
    property_order: str,
) -> GrammarIR:
    """`json_schema_to_ir` for a parsed schema."""
    schema, x_guidance = split_x_guidance(schema)
    key_lexeme = _plain_lexeme(repr(key_separator), "literal", key_separator)
    item_lexeme = _plain_lexeme(repr(item_separator), "literal", item_separator)
    if x_guidance is not None:  # llguidance's options in the schema; its separators are regexes
        whitespace = x_guidance.whitespace(whitespace)
        lenient = lenient if x_guidance.lenient is None else x_guidance.lenient
        if x_guidance.key_separator is not None:
            key_lexeme = Lexeme(f"/{x_guidance.key_separator}/", "regex", x_guidance.key_separator)
        if x_guidance.item_separator is not None:
            item_lexeme = Lexeme(f"/{x_guidance.item_separator}/", "regex", x_guidance.item_separator)
    forms: list[bytes] = []  # the schema's marshal form, if the check made it
    if _reject_lone_surrogates(schema, forms):  # true for a $ref by URI, such as the meta-schema's
        forms.clear()  # (of the schema before the rewrite)
        schema = embed_meta_schema(schema)
        dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
        draft4 = isinstance(dialect, str) and any(f"draft-0{n}/" in dialect for n in (3, 4))
        schema = resolve_references(schema, draft4=draft4)
    if whitespace == "flexible":
        skip: str | None = WHITESPACE_FLEXIBLE
    elif whitespace == "compact":
        skip = None
    elif isinstance(whitespace, str) and whitespace:
        skip = whitespace
    else:
        raise GrammarError(f'whitespace must be "flexible", "compact" or a regex, not {whitespace!r}')
    if property_order not in ("schema", "any"):
        raise GrammarError(f'property_order must be "schema" or "any", not {property_order!r}')
    compiler = _Compiler(
        schema,
        lenient=lenient,
        additional_properties_default=additional_properties_default,
        key_separator=key_lexeme,
        item_separator=item_lexeme,
        property_order=property_order,
        coerce_one_of=x_guidance is not None and bool(x_guidance.coerce_one_of),
        root_form=forms[0] if forms else None,
    )
    try:
        ir = compiler.run()
    except RecursionError:
        # What the depth limits (`NESTING_DEPTH_MAX`, `COMPILE_DEPTH_MAX`, enum/const values)
        # do not catch first: an error, not Python's.
        raise GrammarError("the schema nests too deeply to translate (Python's recursion limit)", json_pointer="") from None
    finally:
        compiler.release()
    ir.skip = skip
    ir.skip_once = True  # a bounded whitespace pattern bounds each gap (llguidance #240)
    ir.allow_initial_skip = False
    ir.options["warnings"] = compiler.warnings
    return ir


# Schema algebra: JSON pointers, normalization, merging (allOf)
# =============================================================================================


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _has_constraints(schema: dict[str, Any]) -> bool:
    return not ANNOTATIONS.issuperset(schema)


def _type_allows(types: Sequence[str], value: Any) -> bool:
    t = json_type(value)
    return t in types or (t == "integer" and "number" in types)


def _common_values(va: list[Any], vb: list[Any]) -> list[Any]:
    """The values of `va` that `_json_equal` one of `vb`, in order: by set keys when `vb` is
    all finite scalars (`_value_keys`), pair by pair otherwise (two enums of 500 names were
    250,000 comparisons)."""
    keys = _value_keys(vb)
    if keys is None:
        return [v for v in va if any(_json_equal(v, w) for w in vb)]
    return [v for v in va if _value_key(v) in keys]  # None (a container, inf) equals no scalar


def _intersect_types(a: Sequence[str], b: Sequence[str]) -> list[str]:
    out = []
    for t in a:
        if t in b:
            out.append(t)
        elif t == "integer" and "number" in b:
            out.append("integer")
        elif t == "number" and "integer" in b:
            out.append("integer")
    return list(dict.fromkeys(out))


def _types_of(d: dict[str, Any]) -> set[str]:
    if "enum" in d:
        return {json_type(v) for v in d["enum"]}
    return set(d.get("type", TYPES))


def _literals(schema: Any) -> list[Any] | None:
    """The values a (raw) schema allows, when it lists them with `const`/`enum` (itself or in
    an `allOf` part, as merging writes `_and(a, b)`; then a superset of them)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return schema["enum"]  # type: ignore[no-any-return]
    for part in schema.get("allOf", ()) if isinstance(schema.get("allOf"), list) else ():
        values = _literals(part)
        if values is not None:
            return values
    return None


def _types_meeting(ta: Iterable[str], tb: Container[str]) -> set[str]:
    """The types of `ta` that meet one of `tb`: equal, or integer and number (integers are
    numbers)."""
    return {t for t in ta if t in tb or t == "integer" and "number" in tb or t == "number" and "integer" in tb}


def _disjoint(a: dict[str, Any], b: dict[str, Any], ta: set[str], tb: set[str]) -> bool:
    """Whether no value is valid under both flattened schemas (of types `ta`, `tb`), by types or
    listed values. Sufficient, not complete (`_Compiler.keys_disjoint` looks at objects)."""
    if not _types_meeting(ta, tb):
        return True
    if "enum" in a and "enum" in b and not _common_values(a["enum"], b["enum"]):
        return True
    return False


def _one_of_expansion(counts: list[int], cap: int) -> int:
    """The alternatives of an exact `oneOf` (`compile_one_of_exactly`): the sum over the options
    of the product of the other options' negation counts, or more than `cap` (without the
    product of thousands of counts: a `oneOf` of 2,000 strings took 0.7 s in big integers)."""
    zeros = counts.count(0)
    if zeros > 1:
        return 0
    largest = max(counts, default=1) or 1
    product = 1
    for count in counts:
        product *= count or 1
        if product > cap * largest:
            return cap + 1  # every term is at least product / largest
    if zeros:
        return product  # only the option whose negation is empty has a term
    return sum(product // count for count in counts)


def _pairs_to_check(live: Sequence[tuple[dict[str, Any], set[str], str]]) -> Iterator[tuple[int, int]]:
    """The pairs (i < j, in order) of flattened options `one_of_disjoint` must check, leaving
    out the pairs `_disjoint` finds disjoint from their listed values alone: two options that
    list only finite scalars (`_value_keys`) and share none. Found by one pass over the values
    instead of a check per pair: a `oneOf` of 40,000 `const`s was 800 million checks, minutes
    of Python outside every core limit."""
    owners: dict[Any, list[int]] = {}
    listed: list[set[Any] | None] = []  # each option's value keys; None unless it lists finite scalars only
    for index, (flat, _, _) in enumerate(live):
        values = flat.get("enum")
        keys = _value_keys(values) if type(values) is list else None
        listed.append(keys)
        for value_key in keys or ():
            owners.setdefault(value_key, []).append(index)
    unlisted = [index for index, keys in enumerate(listed) if keys is None]
    for i, keys in enumerate(listed):
        if keys is None:
            yield from ((i, j) for j in range(i + 1, len(live)))
            continue
        # The listed options that share a value with option i, and every unlisted one, after i.
        later = {j for j in unlisted if j > i}
        for value_key in keys:
            later.update(j for j in owners[value_key] if j > i)
        yield from ((i, j) for j in sorted(later))


def _implied_option(rest: dict[str, Any], option: Any) -> bool:
    """Whether every value valid under the flattened schema `rest` is valid under the anyOf
    option `option` (as written): `true`, or an option that asserts at most `required` names
    `rest` requires (a non-object passes `required`) and `type`s that cover those of `rest`.
    Sufficient, not complete."""
    if option is True:
        return True
    if type(option) is not dict or not _IMPLIED_OPTION_KEYS.issuperset(option):
        return False
    names = option.get("required", [])
    if type(names) is not list or any(type(n) is not str for n in names):
        return False
    if names and not set(names).issubset(rest.get("required", ())):
        return False
    if "type" in option:
        covering = option["type"] if type(option["type"]) is list else [option["type"]]
        have = rest.get("type")
        if (
            type(have) is not list or not all(type(t) is str and t in TYPES for t in covering)  # (else its error stands)
            or not all(t in covering or t == "integer" and "number" in covering for t in have)
        ):
            return False
    return True


def _listed_keys(d: dict[str, Any]) -> tuple[str, ...]:
    """The keys a flattened schema lists in `properties` that can be present (not `false`)."""
    listed = d.get("properties")
    return tuple(k for k, v in listed.items() if v is not False) if type(listed) is dict else ()


def _discriminated(live: list[tuple[dict[str, Any], set[str]]]) -> bool:
    """Whether flattened `oneOf` options (with their types) allow objects only and all require
    one key whose listed values (`_literals`: finite scalars) no two options share: then
    `_Compiler.keys_disjoint` finds every pair disjoint by that key, and this finds it in one
    pass instead of one per pair (MaskBench vega: 39 transforms on `type`, 741 pairs). False
    when this is not seen (the pairs are then checked one by one); also where a pair's check
    would read something unusual (a `required` not all strings, `properties` not an object, an
    `enum`), so that only pairs that check without error are skipped."""
    candidates: list[str] | None = None
    for d, types in live:
        required, properties = d.get("required"), d.get("properties")
        if (
            not types <= _OBJECT_ONLY or "enum" in d or type(required) is not list or type(properties) is not dict
            or any(type(k) is not str for k in required)
        ):
            return False
        candidates = [k for k in required if k in properties] if candidates is None else [k for k in candidates if k in required]
        if not candidates:
            return False
    for key in dict.fromkeys(candidates or ()):
        seen: set[Any] = set()
        count = 0
        for d, _ in live:
            values = _literals(d["properties"].get(key))
            keys = None if values is None else _value_keys(values)
            if keys is None:
                break
            seen |= keys
            count += len(keys)
            if len(seen) < count:
                break  # two options share a value
        else:
            return True
    return False


_OBJECT_ONLY = frozenset({"object"})


def _required_without_value(d: dict[str, Any], cache: dict[int, tuple[Any, Any]]) -> str | None:
    """A required property of a merged schema that allows objects only, whose value no JSON
    value can take by the values its schema lists: the `enum`/`const` of its parts (itself and
    its `allOf` parts, as merging writes `_and(a, b)`) have none in common once the values its
    parts exclude (a `not` of a plain value list, as `negate` writes an `if` that failed) are
    taken out, or it is `false`. Then the schema accepts nothing, and compiling it (expanding
    its remaining clauses first) would find that out only at the end of every expansion
    (MaskBench Github_hard o32934: 2,938 of 3,085 objects compiled were such dead ends of five
    `if`/`then` clauses on one discriminator). None when no such property is seen; only a
    sufficient check. `cache` keeps each schema's values by identity (merged schemas share
    their parts: `_and` nests what came before)."""
    if d.get("type") != ["object"] or "_conflicts" in d:
        return None
    properties, required = d.get("properties"), d.get("required")
    if type(properties) is not dict or type(required) is not list:
        return None
    for key in required:
        if type(key) is str and key in properties:
            values = _listed_values(properties[key], 0, cache)
            if values is not None and not values:
                return key
    return None


_LISTED_VALUES_DEPTH_MAX = 16


def _listed_values(schema: Any, depth: int, cache: dict[int, tuple[Any, Any]]) -> set[Any] | None:
    """The values a raw schema lets through by its value lists alone, as `_value_keys` (a
    superset of the values it accepts: other keywords are not asked); None when it lists none
    (any value) or lists a value this check does not compare (an array, an object, NaN).
    Callers must not change the set."""
    allowed, excluded = _listed_parts(schema, depth, cache)
    return allowed if allowed is None or not excluded else allowed - excluded


def _listed_parts(schema: Any, depth: int, cache: dict[int, tuple[Any, Any]]) -> tuple[set[Any] | None, set[Any]]:
    """(values listed, values excluded) of a raw schema: the intersection of its and its
    `allOf` parts' `enum`/`const` (None: no list), and the union of the plain value lists their
    clauses negate. Apart because merging nests them apart: `_and(_and(enum, const X), not
    const Y)` excludes Y from the values of a sibling part (MaskBench saucectl: nine `if`
    clauses on `kind`, each failed one a `not` beside the enum, 264 dead objects found only
    at the end of their expansion)."""
    if schema is False:
        return set(), set()
    if type(schema) is not dict or depth > _LISTED_VALUES_DEPTH_MAX:
        return None, set()
    known = cache.get(id(schema))
    if known is None:
        known = cache[id(schema)] = (schema, _listed_parts_of(schema, depth, cache))  # the schema kept: its id stays its own
    return known[1]  # type: ignore[no-any-return]


def _listed_parts_of(schema: dict[str, Any], depth: int, cache: dict[int, tuple[Any, Any]]) -> tuple[set[Any] | None, set[Any]]:
    values: set[Any] | None = None
    excluded: set[Any] = set()
    if "const" in schema:
        values = _value_keys([schema["const"]])
        if values is None:
            return None, excluded
    enum = schema.get("enum")
    if type(enum) is list:
        keys = _value_keys(enum)
        if keys is None:
            return None, excluded
        values = keys if values is None else values & keys
    parts = schema.get("allOf")
    for part in parts if type(parts) is list else ():
        inner, inner_excluded = _listed_parts(part, depth + 1, cache)
        if inner is not None:
            values = inner if values is None else values & inner
        if inner_excluded:
            excluded = excluded | inner_excluded
    clauses = schema.get("_clauses")
    for clause in clauses if type(clauses) is list else ():
        negated = clause.get("not") if type(clause) is dict else None
        if type(negated) is dict and _VALUE_LIST_KEYS.issuperset(negated):
            listed = _listed_values(negated, depth + 1, cache)
            if listed:
                excluded = excluded | listed
    return values, excluded


# The keys of a schema that only lists values (with annotations): `not` of it excludes them.
_VALUE_LIST_KEYS = ANNOTATIONS | {"enum", "const"}


def _trivial_schema(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and not _has_constraints(schema))


def _common_multiple(a: Any, b: Any) -> int | float | None:
    """The least positive number whose multiples are the common multiples of `a` and `b` (two
    `multipleOf`), read as the decimals they are written as: lcm of the numerators over gcd of
    the denominators (0.5 and 0.3: 1.5). None when either is not a positive number or the
    result is not a float exactly."""
    if not (_is_number(a) and _is_number(b) and a > 0 and b > 0):
        return None
    fa, fb = exact_number(a), exact_number(b)
    common = Fraction(math.lcm(fa.numerator, fb.numerator), math.gcd(fa.denominator, fb.denominator))
    if common.denominator == 1:
        return int(common)
    as_float = float(common)
    return as_float if exact_number(as_float) == common else None


def _pattern_sides(d: dict[str, Any]) -> list[list[Any]]:
    """The `[patterns, additionalProperties]` of each merged side of an object schema whose
    additionalProperties asserts something (`merge`): the side's additionalProperties holds
    for a key its listed names and patterns leave out. A schema not merged that way is one
    side."""
    if "_pattern_sides" in d:
        return list(d["_pattern_sides"])
    extra = d.get("additionalProperties", True)
    return [] if _trivial_schema(extra) else [[sorted(d.get("patternProperties", {})), extra]]


def _side_extras(d: dict[str, Any], matched: Sequence[str]) -> list[Any]:
    """For a key outside the listed names that matches the patterns `matched` (some), the
    additionalProperties of the merged sides none of whose patterns it matches."""
    return [extra for patterns, extra in d.get("_pattern_sides", ()) if not any(p in matched for p in patterns)]


def _says_nothing_of_others(d: dict[str, Any]) -> bool:
    """Whether an object schema leaves the properties it does not list alone (`member_schema`
    of them is `true` or `{}`, which `_and` drops)."""
    extra = d.get("additionalProperties", True)
    return not d.get("patternProperties") and (extra is True or extra == {})


_VALUE_LIST_NEST_MAX = 8
_MERGE_DROPPED = ANNOTATIONS - {"_dynamic_union"}  # what `merge` leaves out of its result


def _value_list_parts(schema: Any, depth: int, found: list[list[Any]], excluded: list[list[Any]]) -> bool:
    """Whether a raw schema only lists values: `enum`/`const`, annotations, `allOf` parts that
    only list values, and clauses `not` of a plain value list (what `_and` and `negate` make
    of enums and failed `if`s). Appends each part's positive list to `found`, in merge order,
    and each negated list to `excluded`."""
    if type(schema) is not dict or depth > _VALUE_LIST_NEST_MAX or "_dynamic_union" in schema:
        return False
    for key, value in schema.items():
        if key == "const":
            found.append([value])
        elif key == "enum":
            if type(value) is not list:
                return False
            found.append(value)
        elif key == "allOf":
            if type(value) is not list or not all(_value_list_parts(p, depth + 1, found, excluded) for p in value):
                return False
        elif key == "_clauses":
            for clause in value if type(value) is list else (None,):
                negated = clause.get("not") if type(clause) is dict else None
                if type(negated) is not dict or not set(clause) <= {"not", "_at"}:
                    return False
                # Exactly one plain list negated (`not` of a schema listing nothing excludes every
                # value; of two lists, their intersection).
                inner: list[list[Any]] = []
                if "allOf" in negated or "_clauses" in negated or not _value_list_parts(negated, depth + 1, inner, excluded):
                    return False
                if len(inner) != 1:
                    return False
                excluded.append(inner[0])
        elif key not in ANNOTATIONS and (key[:1] in "_$" or key in _ASSERTING):
            return False  # (a key that is no keyword asserts nothing: `errorMessage`, `x-...`)
    return True


def _value_list_and(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """`a` AND `b` as one `enum` when both only list values (`_value_list_parts`): the values
    every list holds and no negated list holds, each as the first list spells it (`1.0` or `1`:
    merging keeps the first side's), sorted. Equal value sets then make equal schemas however
    their clauses nested them, and the objects holding them are translated once (MaskBench
    ui5.yaml: `if`/`else` chains on specVersion, kind and type, 1,478 objects). None when a
    side is anything else or holds a value the keys do not compare (an array, NaN)."""
    found: list[list[Any]] = []
    excluded: list[list[Any]] = []
    if not _value_list_parts(a, 0, found, excluded) or not _value_list_parts(b, 0, found, excluded) or not found:
        return None
    keys: set[Any] | None = None
    for values in found:
        these = _value_keys(values)
        if these is None:
            return None
        keys = these if keys is None else keys & these
    for values in excluded:
        these = _value_keys(values)
        if these is None:
            return None
        keys = keys - these  # type: ignore[operator]
    kept: dict[Any, Any] = {}
    for value in found[0]:
        key = _value_key(value)
        if key in keys and key not in kept:  # type: ignore[operator]
            kept[key] = value
    # In one order whatever the lists' (an enum's order is only that of its alternatives).
    return {"enum": [kept[key] for key in sorted(kept, key=_sort_key)]}


def _sort_key(key: tuple[str, Any]) -> tuple[str, str]:
    return key[0], repr(key[1])


def _same_json(a: Any, b: Any) -> bool:
    """`a == b` as JSON: Python's also has `1 == true` and `0 == false` (so `{"const": 1}` and
    `{"const": true}` were one schema to `_and`, and their merge kept the first)."""
    return a is b or (a == b and _no_bool_mixup(a, b, 0))


def _no_bool_mixup(a: Any, b: Any, depth: int) -> bool:
    """For `a == b`: no place where one is a boolean and the other a number."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b)
    if depth > _CONTENT_ID_DEPTH_MAX:
        return False  # not known to be the same: the caller merges them as two
    if type(a) is dict:
        return all(_no_bool_mixup(v, b[k], depth + 1) for k, v in a.items())
    if type(a) is list:
        return all(_no_bool_mixup(x, y, depth + 1) for x, y in zip(a, b))
    return True


def _and(a: Any, b: Any) -> Any:
    """The schema both a and b must hold (without flattening)."""
    if a is True or a == {}:
        return b
    if b is True or b == {} or _same_json(a, b):
        return a
    if a is False or b is False:
        return False
    if type(a) is dict and type(b) is dict and ("enum" in a or "const" in a or "allOf" in a):
        listed = _value_list_and(a, b)
        if listed is not None:
            return listed
    if type(a) is dict and _TYPE_AND_ANNOTATIONS.issuperset(a) and not (type(b) is dict and _TYPE_AND_ANNOTATIONS.issuperset(b)):
        # A side that says no more than its types makes the same merge on either side: one
        # order, so that the two orders of a clause alternative share the part (MaskBench
        # service-schema: 238 `inputs` objects, each beside `{"type": "object"}`, compiled twice).
        return {"allOf": [b, a]}
    return {"allOf": [a, b]}


def _asserts_nothing(key: str) -> bool:
    """Whether a schema key asserts nothing: an annotation, or a key that is no keyword
    (`ignoreCase`, `x-...`; internal `_...` and `$...` keys do assert)."""
    return key in ANNOTATIONS or (key[:1] not in "_$" and key not in _ASSERTING)


def _string_list(schema: dict[str, Any], depth: int = 0) -> list[str] | None:
    """The strings a raw schema lists, when it is only that: an `enum` of strings, or an
    `anyOf` whose options are each such an `enum` or a string `const` (what `enum_union`
    joins), beside keys that assert nothing. None otherwise."""
    if "anyOf" in schema:
        options = schema["anyOf"]
        if depth or "enum" in schema or "const" in schema or type(options) is not list or not options:
            return None
        values: list[str] = []
        for option in options:
            listed = _string_list(option, 1) if type(option) is dict else None
            if listed is None:
                return None
            values += listed
    elif "enum" in schema:
        values = schema["enum"]
        if type(values) is not list or "const" in schema:
            return None
    elif "const" in schema:
        values = [schema["const"]]
    else:
        return None
    if not all(type(v) is str for v in values):
        return None
    for key in schema:
        if key not in _ENUM_UNION_KEYS and key != "anyOf" and not _asserts_nothing(key):
            return None
    return values


def _pinned_text(pin: dict[str, Any]) -> str | None:
    """The one string a raw schema `pin` passes among strings: its `pattern` `^text$` of
    characters with no ECMA meaning (`_ANCHORED_PLAIN`), beside at most `type: string` and
    keys that assert nothing. None when it is anything else."""
    pattern = pin["pattern"]
    if type(pattern) is not str or not _ANCHORED_PLAIN.fullmatch(pattern):
        return None
    for key, value in pin.items():
        if key == "type":
            if value != "string" and value != ["string"]:
                return None
        elif key != "pattern" and not _asserts_nothing(key):
            return None
    return pattern[1:-1]


_TYPED_OBJECT_KEYS = {"properties": dict, "required": list, "additionalProperties": (bool, dict)}


def _typed_object(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """`a` AND `b` as one schema where one side says only `type: object` (beside
    annotations) and the other has no `type` and `properties`, and beside them only `required`,
    `additionalProperties` and keys that assert nothing: the other side with the type
    added, what flattening `_and`'s `allOf` of the two makes (their merge), without the
    `allOf`, its memo keys and two merges. MaskBench service-schema: 238 `inputs` objects,
    each beside the task's `{"type": "object"}`. None otherwise."""
    if _TYPE_AND_ANNOTATIONS.issuperset(a):
        typing, other = a, b
    elif _TYPE_AND_ANNOTATIONS.issuperset(b):
        typing, other = b, a
    else:
        return None
    kind = typing.get("type")
    if (kind != "object" and kind != ["object"]) or "type" in other or "properties" not in other:
        return None
    out = {}
    for key, value in other.items():
        kinds = _TYPED_OBJECT_KEYS.get(key)
        if kinds is not None:
            if not isinstance(value, kinds):
                return None
        elif not _asserts_nothing(key):
            return None
        if key not in _MERGE_DROPPED:
            out[key] = value
    out["type"] = ["object"]
    return out


_CONTAINS_KEYS = ("contains", "minContains", "maxContains", "_contains")


def _contains_entries(d: dict[str, Any]) -> list[dict[str, Any]]:
    """`d`'s `contains` with its counts, and its `_contains`, as `_contains` entries
    ({"schema", "min", "max"}: between min and max items valid under schema, max None for no
    bound)."""
    out = list(d.get("_contains", []))
    if "contains" in d:
        out.append({"schema": d["contains"], "min": d.get("minContains", 1), "max": d.get("maxContains")})
    return out


def _counted_contains(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether merging a and b, which both have a `contains` or `_contains`, meets two of which
    one has counts (else two plain ones: item witnesses)."""
    if _contains_entries(a) == _contains_entries(b):
        return False  # the same contains and counts: nothing to merge
    return any(k in x for x in (a, b) for k in ("minContains", "maxContains", "_contains"))


def _merged_contains(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """`_contains` entries with those of one schema combined (the tighter bounds), as the keys
    of a flattened schema: `contains` with its counts when one is left, else `_contains`."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        same = next((e for e in out if e["schema"] == entry["schema"]), None)
        if same is None:
            out.append(dict(entry))
            continue
        same["min"] = max(same["min"], entry["min"])
        if entry["max"] is not None:
            same["max"] = entry["max"] if same["max"] is None else min(same["max"], entry["max"])
    if len(out) > 1:
        return {"_contains": out}
    (only,) = out
    keys: dict[str, Any] = {"contains": only["schema"], "minContains": only["min"]}
    if only["max"] is not None:
        keys["maxContains"] = only["max"]
    return keys


def _without_contains(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in _CONTAINS_KEYS}


def _matched_items(d: dict[str, Any]) -> list[Any]:
    """The schemas of `d`'s contains (counted or not, and plain ones merged into item
    witnesses): the items they match count as evaluated."""
    return [e["schema"] for e in _contains_entries(d)] + [w["value"] for w in d.get("_item_witness", []) if w.get("contains")]


def _unevaluated_parts(d: dict[str, Any], pointer: str) -> list[tuple[Any, str]]:
    """The subschemas `unevaluated_cases` splits `d` by, each with its JSON pointer."""
    out: list[tuple[Any, str]] = []
    for key in ("anyOf", "oneOf"):
        out += [(option, f"{pointer}/{key}/{i}") for i, option in enumerate(d.get(key, []))]
    for clause in d.get("_clauses", []):
        at = clause.get("_at", pointer)
        if "not" in clause:
            out.append((clause["not"], at))
        elif "if" in clause:
            out += [(clause[k], f"{at}/{k}") for k in ("if", "then", "else") if k in clause]
        elif "dependentSchemas" in clause:
            out += [(schema, at) for schema in clause["dependentSchemas"].values()]
    return out


def _evaluated_only(flat: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a passing subschema adds to a case of `unevaluated_cases` beside its selector: the
    keys and items it evaluates (its assertions hold by the selector), or all of it when its
    own applicators still have to be split."""
    if flat is None or any(k in flat for k in ("anyOf", "oneOf", "_clauses")):
        return flat
    out: dict[str, Any] = {}
    if "properties" in flat:
        out["properties"] = {k: True for k in flat["properties"]}
    if "patternProperties" in flat:
        out["patternProperties"] = {p: True for p in flat["patternProperties"]}
    for key in ("additionalProperties", "items"):
        if key in flat:
            out[key] = True
    if "prefixItems" in flat:
        out["prefixItems"] = [True] * len(flat["prefixItems"])
    matched = _matched_items(flat)
    if matched:
        out["_contains"] = [{"schema": m, "min": 0, "max": None} for m in matched]
    return out


class _Case(NamedTuple):
    """One case of `unevaluated_cases`: where `selector` (clauses) holds, the schema holds
    exactly where `resolved` does (None: nowhere); `pointer` names it in errors."""

    resolved: dict[str, Any] | None
    selector: list[dict[str, Any]]
    pointer: str


def _passes(schema: Any, at: str) -> dict[str, Any]:
    """A clause that holds where `schema` does (compiled at its own pointer `at`)."""
    return {"anyOf": [schema], "_at": at}


# The keys of an option `enum_union` takes (with annotations and non-keywords).
_ENUM_UNION_KEYS = frozenset({"enum", "const"})

# Keywords whose two different values cannot be merged here (others merge or are annotations).
_KEYWORDS = UNSUPPORTED | {"const", "additionalItems", "contentSchema", "unevaluatedProperties", "unevaluatedItems"}
# unevaluated* → what evaluates every other key/item once all branches are merged in.
_UNEVALUATED = (
    ("unevaluatedProperties", "_unevaluatedProperties", "additionalProperties"),
    ("unevaluatedItems", "_unevaluatedItems", "items"),
)

# Keywords that evaluate object keys or array items (annotations for unevaluated*).
_EVALUATING = ("properties", "patternProperties", "additionalProperties", "prefixItems", "items", "contains")
_MAX_OF = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains")
_MIN_OF = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains")


# =============================================================================================
# The compiler
# =============================================================================================


_OPEN_STRING = re.compile(re.escape('"' + STRING_CHAR) + r'(?:\*|\+|\{[0-9]+,\})"')


def _open_scalar_lexeme(lexeme: Lexeme) -> bool:
    """An item lexeme whose text in progress has infinitely many completions of distinct
    values (`distinct_array`): a string with at most a minimum length, or one whose pattern
    ends in an unbounded run of a class (`_open_pattern_string`), a number or an integer
    without bounds."""
    if lexeme.kind != "regex" or lexeme.and_patterns or lexeme.not_patterns or lexeme.lazy or lexeme.max_tokens:
        return False
    value = lexeme.value
    return (
        value in (NUMBER_REGEX, INTEGER_REGEX) or _OPEN_STRING.fullmatch(value) is not None
        or _open_pattern_string(value)
    )


@functools.lru_cache(maxsize=1024)
def _open_pattern_string(value: str) -> bool:
    """Is `value`, a string lexeme's regex, `"P C+"` (or `C*`, `C{n,}`): any P, then an
    unbounded run of one character or class C that holds neither the quote nor the backslash,
    at the top level of the regex? Every text in progress of such a string, wherever it stands
    in P or in the run, can still be finished in infinitely many ways (finish P, then any
    number of C), so it is open as a plain string is (patterns `^[0-9]+$`, `^[a-z][a-z0-9_]*$`,
    and a search pattern such as `[0-9]`, whose run is of any string character; not
    `^[0-9]+x$`, whose `"12x` has one completion). Read with Python's regex parser, which
    reads the front-end's regexes as the core does in what matters here (the top-level
    sequence, repeats, classes); a regex it cannot read, or a class it cannot list (`\\d`,
    `\\w`), is not open."""
    if not (value.startswith('"') and value.endswith('"')):
        return False
    try:
        parsed = list(_re_parser.parse(value))
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    quote = (_re_constants.LITERAL, ord('"'))
    if len(parsed) < 3 or parsed[0] != quote or parsed[-1] != quote:
        return False
    op, argument = parsed[-2]
    if op not in _RE_REPEATS or argument[1] != _re_constants.MAXREPEAT:
        return False
    if _STRING_RUN_AT_END.search(value):
        return True  # the run is of any JSON string character: a search pattern's tail
    body = list(argument[2])
    if len(body) != 1:
        return False
    kind, item = body[0]
    if kind == _re_constants.LITERAL:
        return item not in _QUOTE_AND_BACKSLASH
    if kind != _re_constants.IN:
        return False
    negated, codes = False, []
    for op, av in item:
        if op == _re_constants.NEGATE:
            negated = True
        elif op == _re_constants.LITERAL:
            codes.append((av, av))
        elif op == _re_constants.RANGE:
            codes.append(av)
        else:
            return False  # a category (\\d, \\s, …): not listed here
    held = [any(lo <= code <= hi for lo, hi in codes) != negated for code in _QUOTE_AND_BACKSLASH]
    return bool(codes or negated) and not any(held)


_RE_REPEATS = tuple(
    getattr(_re_constants, name) for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_re_constants, name)
)
_QUOTE_AND_BACKSLASH = (ord('"'), ord("\\"))
# The unbounded run of any string character (escapes too) that ends a search pattern's string
# (`[0-9]` is `"C*[0-9]C*"`), just before the closing quote.
_STRING_RUN_AT_END = re.compile(re.escape(STRING_CHAR) + r'(?:\*|\+|\{[0-9]+,\})"\Z')


@functools.lru_cache(maxsize=1024)
def _plain_lexeme(name: str, kind: str, value: str) -> Lexeme:
    """A lexeme without extras, shared: most are the same few (punctuation, string, number,
    boolean, null) in schema after schema, and a new frozen dataclass costs a few µs."""
    return Lexeme(name, kind, value)  # type: ignore[arg-type]


class _Memo(NamedTuple):
    """One memoised translation and what it needs from its context (`_Compiler.memoised`)."""

    value: Any  # the result (a Sym, None, or a flattened schema)
    pointer: str  # where it was first computed
    warnings: tuple[tuple[str, str], ...]  # (message, pointer) of every warn() while computing it
    depth_extra: int  # the deepest pointer checked, in segments beyond `pointer`'s
    compile_depth_extra: int  # the deepest nested compilation, beyond the one it started in
    clause_alternatives: int  # alternatives it took from CLAUSE_ALTERNATIVE_COUNT_MAX


_SCALARS = (str, int, float, bool, type(None))
_SCALAR_SET = frozenset(_SCALARS)
_new_tuple = tuple.__new__
_THIRD = operator.itemgetter(2)
_NO_ID = object()  # (`schema_ids` has no entry: its ids may be None, for values that are not plain JSON)
# The keys `flatten_dict` acts on beyond `normalize` (a schema without them flattens to its
# normalized copy).
_FLATTEN_KEYS = frozenset(
    {"$ref", "allOf", "unevaluatedProperties", "unevaluatedItems", "_unevaluatedProperties", "_unevaluatedItems"}
)
_IMPLIED_OPTION_KEYS = ANNOTATIONS | {"required", "type"}  # what `_implied_option` reads
_OPTIONS_DISJOINT_DEPTH_MAX = 2  # levels of nested anyOf/oneOf options `pair_disjoint` looks into
_CONTENT_ID_DEPTH_MAX = 48  # levels `content_id_nested` recurses before `content_id_deep` takes over
# What `schema_id_nested` reads of a schema: the annotations no translation reads (left out of
# its id, so sub-schemas that differ only in them share their translation), and the keywords
# whose values are schemas, lists of schemas or maps from names to schemas (walked as schemas
# in turn). Every other value (`enum`, `const`, unknown and internal keys) is data, whose id
# is its exact content (`content_id_nested`).
_UNREAD = ("unread",)  # `schema_id_nested`'s part for a value no translation reads
_UNREAD_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "example", "default"})
# By keyword, how `schema_id_nested` reads its value: an object as a schema (1) or as a map
# from names to schemas (2), an array as a list of schemas (4; the clauses of a merged schema,
# whose `not`/`if`/`then`/`else` are schemas, too); other values of keywords and of internal
# keys are data. Objects and arrays under other keys (`x-...`, unknown names) are read by no
# translation (`merge` drops them), so the id has `_UNREAD` in their place.
_SCHEMA_ID_MODES = {
    **dict.fromkeys(_ASSERTING, 0),  # (other keywords: data)
    **dict.fromkeys(
        ("not", "if", "then", "else", "additionalItems", "additionalProperties", "propertyNames", "contains",
         "unevaluatedItems", "unevaluatedProperties"),
        1,
    ),
    "items": 1 | 4,  # a schema, or a list of them (drafts before 2020-12)
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems", "_clauses"), 4),
    **dict.fromkeys(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"), 2),
}
_OBJECT_ID_MODES = {name: mode & 3 for name, mode in _SCHEMA_ID_MODES.items()}  # 0 data, 1 schema, 2 map
_ARRAY_ID_MODES = {name: mode & 4 for name, mode in _SCHEMA_ID_MODES.items()}  # 0 data, 4 list


# A schema whose `marshal` form (`_marshal_form`) is at most this long (bytes) gets its content
# ids from the forms of its values: made at C speed, but again for each value asked about (a
# subtree's bytes inside its parent's), so their cost grows with the schema's size times its
# depth; the interning walk (`content_id_nested`), linear but in Python, takes the larger
# schemas. Within one translation the ids are all of one kind, so equal values get equal ids
# either way. The form tells apart what the walk's ids tell apart (types, key order), and
# -0.0 from 0.0 too (fewer reuses, each still sound).
_CONTENT_MARSHAL_SIZE_MAX = 1 << 16


# `_Compiler.any`'s nonterminals, and the symbol count of its rules (`rules`: each rule's
# length and one).
_ANY_NAMES = ("any", "any:object", "any:members", "any:array", "any:items")
_ANY_SYMBOL_COUNT = 42  # 14 rules of 31 symbols


class _TooDeep(Exception):
    """`content_id_nested` went past `_CONTENT_ID_DEPTH_MAX` (or met a cycle)."""
_NOT_EXACT = object()  # compile_one_of_exactly: no exact translation
_DRAFT_BEFORE_7 = re.compile(r"draft-0[346]/")  # a `$schema` of drafts 3, 4 and 6
# The keywords `normalize` checks are arrays, and objects, in the order it reports them (a
# schema with none of them skips the loop).
_ARRAY_KEYWORDS = ("required", "enum", "anyOf", "oneOf", "allOf", "prefixItems")
_OBJECT_KEYWORDS = ("properties", "patternProperties", "dependencies", "dependentRequired", "dependentSchemas")
_ARRAY_KEYWORD_SET = frozenset(_ARRAY_KEYWORDS)
_OBJECT_KEYWORD_SET = frozenset(_OBJECT_KEYWORDS)


_NO_ALTERNATIVE = object()  # option_cell: the merge failed, no alternative (as the expansion's `continue`)


class _CellsDeclined(Exception):
    """`compile_cells` cannot stand for the expansion here (see there)."""


_CELL_ORDERS_MAX = 64  # property orders one cell of `compile_cells` keeps (else: expanded as before)


def _checked_before_object(d: dict[str, Any]) -> bool:
    """Does `compile_flat_checked` still have something to check in `d` before its object
    (an `enum`, a pending `unevaluated*`, an excluded object or array value)? Then
    `compile_cells` and `option_cell` leave `d` to the expansion."""
    return "enum" in d or "_unevaluatedProperties" in d or "_unevaluatedItems" in d or any(
        isinstance(v, (list, dict)) for v in d.get("_not_enum", ())
    )


# What two merged schemas may share for `_quiet_merge`: `merge` neither warns nor raises on them.
_QUIET_SHARED = ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}


def _quiet_merge(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether `merge(a, b)` can neither warn, raise nor note a conflict (`_conflicts`), nor
    leave the result other than an object schema where `a` is one: the keys both have are
    types, listed members, required names and `additionalProperties`, neither side has
    `patternProperties` (whose names the merge would match against the other's members) or
    a `contains`, and `b` allows objects."""
    return (
        _QUIET_SHARED.issuperset(a.keys() & b.keys()) and "_conflicts" not in b and "object" in b.get("type", ("object",))
        and not a.get("patternProperties") and not b.get("patternProperties")
        and "_contains" not in a and "_contains" not in b and "contains" not in a and "contains" not in b
    )


def _nests_deeper(value: Any, limit: int = NESTING_DEPTH_MAX) -> bool:
    """Whether a JSON value holds containers more than `limit` deep, found without recursion:
    a `const` 900 lists deep overflowed Python's stack comparing it (`json_equal`) before
    `value_syms` could refuse it."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node if type(node) is list else node.values() if type(node) is dict else ()
        stack.extend((child, depth + 1) for child in children if type(child) is list or type(child) is dict)
    return False


def _inert_beside(key: str) -> bool:
    """Whether a key beside an object's members asserts nothing and `merge` drops or keeps
    it without a look: an annotation (not the internal `_dynamic_union`) or a key that is no
    keyword (`firstProperty`, `doNotSuggest`: azure's)."""
    return key in _MERGE_DROPPED or (key[:1] not in "_$" and key not in _ASSERTING)


def _closed_members(rest: dict[str, Any]) -> bool:
    """Whether `rest` (an anyOf's siblings, flattened) is a closed object of listed members:
    `type: object`, `properties`, `additionalProperties: false`, `required` names it lists,
    and beside them only keys that assert nothing (`_inert_beside`). Its options may then
    narrow its members one by one (`_Compiler.narrowed_cell`)."""
    properties, required = rest.get("properties"), rest.get("required", [])
    return (
        rest.get("type") == ["object"] and rest.get("additionalProperties") is False
        and type(properties) is dict and type(required) is list
        and all(type(k) is str and k in properties for k in required)
        and all(k in _CLOSED_MEMBERS_KEYS or _inert_beside(k) for k in rest)
    )


_CLOSED_MEMBERS_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_NARROWING_KEYS = frozenset({"properties", "required"})


def _narrows(listed: dict[str, Any], flat: dict[str, Any]) -> bool:
    """Whether the (flattened) option `flat` only narrows members of a closed object whose
    `properties` are `listed` (`_closed_members`): `properties` on names `listed` has,
    `required` names it has, and beside them only keys that assert nothing."""
    properties, required = flat.get("properties", {}), flat.get("required", [])
    return (
        type(properties) is dict and type(required) is list and listed.keys() >= properties.keys()
        and all(type(k) is str and k in listed for k in required)
        and all(k in _NARROWING_KEYS or _inert_beside(k) for k in flat)
    )


def _only_negated(flat: dict[str, Any], key: str, sub: Any) -> bool:
    """Whether `flat` is `negate`'s "an object with member `key`, whose value fails `sub`":
    an object schema requiring `key` and listing it alone, as one `not` of `sub`."""
    if not (
        flat.keys() <= {"type", "required", "properties"} and flat.get("type") == ["object"]
        and flat.get("required") == [key] and list(flat.get("properties", ())) == [key]
    ):
        return False
    value = flat["properties"][key]
    clauses = value.get("_clauses") if type(value) is dict else None
    return (
        value.keys() == {"_clauses"} and type(clauses) is list and len(clauses) == 1
        and type(clauses[0]) is dict and clauses[0].keys() <= {"not", "_at"} and _same_json(clauses[0].get("not"), sub)
    )


def _keys_after(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    """The property order of a merge: `first`'s keys, then `then`'s others (a C-level filter:
    `compile_cells` folds each order of a cell with each alternative's keys)."""
    return first + tuple(itertools.filterfalse(first.__contains__, then))


# `_Compiler`'s first lexemes by (key separator, item separator): (lexemes, the IR's index of
# them, `plain_symbols`, the six symbols); a few pairs per process (x-guidance may set others).
_PUNCTUATION: dict[tuple[Lexeme, Lexeme], tuple[list[Lexeme], dict[Lexeme, int], dict[Any, Sym], tuple[Sym, ...]]] = {}
_PUNCTUATION_KEPT_MAX = 64


class _Compiler:
    """Schema → IR. One instance per call; see the module docstring for the translation."""

    def __init__(
        self,
        root: dict[str, Any] | bool,
        *,
        lenient: bool,
        additional_properties_default: bool,
        key_separator: Lexeme,
        item_separator: Lexeme,
        property_order: str = "schema",
        coerce_one_of: bool = False,
        root_form: bytes | None = None,
    ) -> None:
        """`root_form`: `root`'s `marshal` form if the caller has it (else made here), or a
        shorter one that is longer than `_CONTENT_MARSHAL_SIZE_MAX` (`_settled_at_once`)."""
        self.root = root
        self.any_order = property_order == "any"
        self.lenient = lenient
        self.additional_default = additional_properties_default
        self.ir = GrammarIR()
        self.warnings: list[str] = []
        self.warning_texts: set[str] = set()  # the same texts, for `warn`'s test (a reuse can replay thousands)
        self.symbol_count = 0
        self.merge_work = 0  # what merges have copied and compared (`spend_merge_work`)
        # Nonterminals made with a rule whose nonterminals were made before them (`nonterminal`
        # with alternatives: their symbols exist already), or with a rule of lexemes (`any`,
        # a `*` repetition, the start): when that is all of them, `prune` has nothing to do.
        # The others (references, presence and any-order states, ...) make it run.
        self.productive_made = 0
        self.ref_nonterminals: dict[str, int] = {}
        self.pending: list[tuple[int, str]] = []
        self.ref_nonterminal_targets: dict[int, str] = {}  # a `$ref`'s nonterminal -> its target's pointer
        self.anchors: dict[str, str] | None = None
        # `$ref` string → its target's pointer, and pointer → node, once found (the root is
        # not mutated; failures are not kept, so that they raise where they stand).
        self.ref_targets: dict[str, str] = {}
        self.lookups: dict[str, Any] = {}
        self.memo: dict[Any, int] = {}
        self.any_value: int | None = None
        self.plain_symbols: dict[tuple[str, str, str], Sym] = {}  # `lexeme` without extras
        self.key_symbols: dict[str, Sym] = {}  # `key_symbol`
        self.string_symbol: Sym | None = None
        self.checker = InstanceChecker(
            lambda ref, pointer: self.lookup(self.ref_pointer(ref, pointer)), pattern_parts, FORMAT_REGEXES
        )
        self.clause_alternative_count = 0
        self.clause_alternative_budget = CLAUSE_ALTERNATIVE_COUNT_MAX  # lowered while trying an exact oneOf
        self.coerce_one_of = coerce_one_of
        self.one_of_exact_spent = 0  # clause alternatives spent on exact oneOfs (ONE_OF_EXACT_SCHEMA_MAX)
        # (why, pointer) of each contradiction met inside what compiled to nothing so far; a
        # schema that compiles to something drops those met inside it (`compile_flat`).
        self.empty_reasons: list[tuple[str, str]] = []
        self.compiling: dict[Any, int | None] = {}  # compile memo keys in progress -> their nonterminal once reused
        self.compile_depth = 0
        # Memoised translation (`memoised`): content ids of JSON values, and results by
        # (function, content id). What a result depends on besides the content is replayed
        # (warnings) or checked (depth limits, the clause budget) on every reuse.
        self.content_ids: dict[int, Any] = {}  # id(container) → exact content id
        self.schema_ids: dict[int, Any] = {}  # id(schema) → `content_id` (None: not plain JSON)
        self.schema_list_ids: dict[int, Any] = {}  # id(list or map of schemas) → its id
        # What the three tables above hold ids of, kept alive so that their ids stay theirs (a
        # list: a pair per entry was ~7,000 tuples to make and free on MaskBench service-schema).
        self.id_kept: list[Any] = []
        self.content_keys: dict[tuple[Any, ...], int] = {}
        self.content_by_marshal = False
        if type(root) is dict:
            form = root_form if root_form is not None else _marshal_form(root)
            if form is not None and len(form) <= _CONTENT_MARSHAL_SIZE_MAX:
                self.content_by_marshal = True
                self.schema_ids[id(root)] = form
                self.id_kept.append(root)
        self.results: dict[tuple[str, int], _Memo] = {}
        # object_body's states shared between objects: (member, next suffix id) or (bounds and
        # extras) → suffix id; (suffix id, count) → alternatives, and → sequence.
        self.object_suffixes: dict[tuple[Any, ...], int] = {}
        self.object_alternatives: dict[tuple[int, int], list[tuple[Sym, ...]] | None] = {}
        self.object_sequences: dict[tuple[int, int], Sequence[Sym] | None] = {}
        # object_body_open's tails by suffix id, and its optional members by (key, value).
        self.open_tails: dict[int, tuple[Sym, ...]] = {}
        self.open_optional: dict[tuple[Sym, Sym], Sym] = {}
        self.enum_unions: dict[int, tuple[list[Any], tuple[dict[str, Any], str] | None]] = {}  # enum_union
        self.disjoint_options: dict[tuple[int, Any], tuple[list[Any], bool]] = {}  # one_of_disjoint
        self.one_of_inexact: dict[int, list[Any]] = {}  # compile_one_of_exactly
        self.implied_candidates: dict[int, tuple[list[Any], list[Any]]] = {}  # compile_options: id(anyOf) → (it, options)
        self.presence_declined: dict[int, list[Any]] = {}  # anyOf/oneOf lists put back by presence_expanded
        self.presence_formulas: dict[int, Any] = {}  # presence.formula's cache, by schema identity
        self.listed_values: dict[int, tuple[Any, Any]] = {}  # _required_without_value
        self.string_lists: dict[int, tuple[Any, Any]] = {}  # pinned_enum
        self.inert_keys: set[str] = set()  # inert
        # The keys a plain type (`plain_symbol`) or a one-value enum (`compile`) may have beside
        # it: annotations and the inert keys found so far (one set test per schema, where most
        # are of names met before: service-schema's task inputs, ~2,300).
        self.plain_type_keys: set[str] = set(_TYPE_AND_ANNOTATIONS)
        self.plain_enum_keys: set[str] = set(_ENUM_AND_ANNOTATIONS)
        # The IR's rules by left-hand side (`rules_of`), for the rules up to `rules_indexed`
        # of the list `rules_listed`.
        self.rules_by_lhs: dict[int, list[tuple[Sym, ...]]] = {}
        self.rules_indexed = 0
        self.rules_listed: list[Any] | None = None
        self.warning_log: list[tuple[str, str]] = []  # every warn() call, duplicates included
        self.depth_high = 0  # the deepest pointer (segments) checked so far in the current memo frame
        self.compile_depth_high = 0
        dialect = root.get("$schema", "") if isinstance(root, dict) else ""
        self.draft_before_7 = isinstance(dialect, str) and _DRAFT_BEFORE_7.search(dialect) is not None
        # The punctuation lexemes every translation starts with, copied from the first
        # translation's with these separators (`_PUNCTUATION`): six lexemes added one by one
        # were half of this constructor's time.
        ir = self.ir
        punctuation = _PUNCTUATION.get((key_separator, item_separator))
        if punctuation is None:
            self.colon = Sym.t(ir.add_lexeme(key_separator))
            self.comma = Sym.t(ir.add_lexeme(item_separator))
            self.lbrace = self.lexeme("'{'", "literal", "{")
            self.rbrace = self.lexeme("'}'", "literal", "}")
            self.lbracket = self.lexeme("'['", "literal", "[")
            self.rbracket = self.lexeme("']'", "literal", "]")
            if len(_PUNCTUATION) < _PUNCTUATION_KEPT_MAX:
                _PUNCTUATION[(key_separator, item_separator)] = (
                    list(ir.lexemes), dict(ir._lexeme_index), dict(self.plain_symbols),
                    (self.colon, self.comma, self.lbrace, self.rbrace, self.lbracket, self.rbracket),
                )
        else:
            lexemes, index, plain, symbols = punctuation
            ir.lexemes, ir._lexeme_index, self.plain_symbols = list(lexemes), dict(index), dict(plain)
            self.colon, self.comma, self.lbrace, self.rbrace, self.lbracket, self.rbracket = symbols
        ir.options["separator_lexemes"] = (self.colon.index, self.comma.index)  # for merge_ir

    # ---- output helpers ----------------------------------------------------------------------

    def warn(self, message: str, pointer: str) -> None:
        self.warning_log.append((message, pointer))
        text = f"{pointer or '/'}: {message}"
        if text not in self.warning_texts:
            self.warning_texts.add(text)
            self.warnings.append(text)

    def drop_warnings(self, start: int) -> None:
        """Take back the warnings from `start` on (an attempt that is not kept)."""
        self.warning_texts.difference_update(self.warnings[start:])
        del self.warnings[start:]

    def contradiction(self, why: str, pointer: str) -> None:
        """Note that the schema at `pointer` accepts nothing, and why (the error names the first
        such place if the whole schema ends up accepting nothing); returns None for callers."""
        self.empty_reasons.append((why, pointer))

    def fail(self, message: str, pointer: str) -> GrammarError:
        return GrammarError(f"{message} (at {pointer or '/'})", json_pointer=pointer)

    def unsupported(self, message: str, pointer: str) -> None:
        """Raise for an unsupported construct, or warn when lenient."""
        if not self.lenient:
            raise self.fail(f"{message}; pass lenient=True to ignore it", pointer)
        self.warn(f"{message}; ignored (lenient)", pointer)

    def rule(self, lhs: int, rhs: Sequence[Sym]) -> None:
        self.symbol_count += len(rhs) + 1
        if self.symbol_count > GRAMMAR_SYMBOL_COUNT_MAX:
            raise self.too_large()
        self.ir.add_rule(lhs, rhs)

    def too_large(self) -> GrammarError:
        return GrammarError(
            f"the schema's grammar is larger than {GRAMMAR_SYMBOL_COUNT_MAX} symbols; simplify the schema "
            "(large maxItems/enum lists or allOf of several anyOf multiply its size)",
            json_pointer="",
        )

    def lexeme(self, name: str, kind: str, value: str, **extra: Any) -> Sym:
        if extra:
            return Sym.t(self.ir.add_lexeme(Lexeme(name, kind, value, **extra)))  # type: ignore[arg-type]
        # A plain lexeme's symbol, kept by its three fields: the same few (punctuation, number,
        # boolean, null) come back all through a schema.
        key = (name, kind, value)
        sym = self.plain_symbols.get(key)
        if sym is None:
            sym = self.plain_symbols[key] = Sym.t(self.ir.add_lexeme(_plain_lexeme(name, kind, value)))
        return sym

    def key_symbol(self, key: str) -> Sym:
        """The lexeme of property name `key` (the JSON string), kept per name: a name recurs
        in object after object (MaskBench kb_1161: 3,006 members, 1,412 names), and adding
        its lexeme again hashes the whole `Lexeme` in Python."""
        sym = self.key_symbols.get(key)
        if sym is None:
            sym = self.key_symbols[key] = Sym.t(self.ir.add_lexeme(_json_string_lexeme(key)))
        return sym

    def nonterminal(self, name: str, alternatives: Sequence[Sequence[Sym]]) -> int:
        """A new nonterminal with `alternatives` as its rules (`add_nonterminal` and `rules`,
        written out: a median schema makes ~17, and the three calls were most of the cost)."""
        self.symbol_count += sum(map(len, alternatives)) + len(alternatives)
        if self.symbol_count > GRAMMAR_SYMBOL_COUNT_MAX:
            raise self.too_large()
        ir = self.ir
        nt = len(ir.nonterminals)
        ir.nonterminals.append(name)
        if alternatives:
            self.productive_made += 1  # (its symbols were made before it: see `prune`)
        if len(alternatives) == 1:  # (most nonterminals: without the comprehension's frame)
            ir.rules.append(_new_tuple(Rule, (nt, tuple(alternatives[0]))))
        elif len(alternatives) == 2:  # (optional members, `O → ε | , key: value`: as directly)
            ir.rules += (_new_tuple(Rule, (nt, tuple(alternatives[0]))), _new_tuple(Rule, (nt, tuple(alternatives[1]))))
        else:
            ir.rules += [_new_tuple(Rule, (nt, tuple(rhs))) for rhs in alternatives]
        return nt

    def rules(self, lhs: int, alternatives: Sequence[Sequence[Sym]]) -> None:
        """`rule(lhs, rhs)` for each alternative, in C-level passes (a large schema makes
        ~10,000 rules): `GrammarIR.add_rules`, written out."""
        self.symbol_count += sum(map(len, alternatives)) + len(alternatives)
        if self.symbol_count > GRAMMAR_SYMBOL_COUNT_MAX:
            raise self.too_large()
        self.ir.rules += [_new_tuple(Rule, (lhs, tuple(rhs))) for rhs in alternatives]

    def choice(self, name: str, alternatives: Sequence[Sequence[Sym] | None]) -> Sym | None:
        """One symbol deriving any of the (satisfiable) alternatives, or None if there is none."""
        if len(alternatives) == 1:  # the commonest case, without the copies below
            alt = alternatives[0]
            if alt is None:
                return None
            if len(alt) == 1:
                return alt[0]
            return Sym.n(self.nonterminal(name, [alt]))
        alts = [list(a) for a in alternatives if a is not None]
        alts = list({tuple(a): a for a in alts}.values())
        if not alts:
            return None
        if len(alts) == 1 and len(alts[0]) == 1:
            return alts[0][0]
        return Sym.n(self.nonterminal(name, alts))

    def inline(self, name: str, alternatives: list[list[Sym]], cache: dict[int, list[Sym]], key: int) -> list[Sym]:
        """A sequence standing for `alternatives`: the one alternative itself, else a nonterminal."""
        if len(alternatives) == 1:
            return alternatives[0]
        if key not in cache:
            cache[key] = [Sym.n(self.nonterminal(name, alternatives))]
        return cache[key]

    # ---- driver ------------------------------------------------------------------------------

    def run(self) -> GrammarIR:
        start = self.ir.add_nonterminal("start")
        self.productive_made += 1  # its one rule, below, is the root's symbol
        top = self.compile(self.root, "")
        if top is None:
            if self.empty_reasons:
                why, where = self.empty_reasons[0]
                raise GrammarError(
                    f"the schema accepts no value at all: {why} (at {where or '/'})", json_pointer=where
                )
            raise GrammarError("the schema accepts no value at all (it is `false` or unsatisfiable)", json_pointer="")
        self.rule(start, [top])
        while self.pending:
            nt, pointer = self.pending.pop()
            sym = self.compile(self.lookup(pointer), pointer)
            if sym is not None:
                self.rule(nt, [sym])
        self.prune(start)
        self.ir.start = start
        return self.ir

    def prune(self, start: int) -> None:
        """Drop rules that use nonterminals deriving nothing (e.g. unsatisfiable recursion).

        Linear (a worklist): a fixpoint of passes was quadratic in a chain of 2,000 `$ref`s (2.7 s).
        Skipped when every nonterminal is one `productive_made` counts: each was made with
        rules whose nonterminals were made before it, all of them productive by induction on
        that order (a median schema's case: the passes were 3% of its translation)."""
        if self.productive_made == len(self.ir.nonterminals):
            return
        productive = productive_nonterminals(self.ir)
        if not productive[start]:
            raise GrammarError("the schema accepts no finite value (unsatisfiable recursion)", json_pointer="")
        if not all(productive):
            # By a set of the dead symbols, tested against each right-hand side in C (a
            # generator over the symbols of each of kb_1161's 7,764 rules took 2.2 ms, this 0.8).
            dead = {Sym.n(i) for i, alive in enumerate(productive) if not alive}
            self.ir.rules = [r for r in self.ir.rules if dead.isdisjoint(r.rhs)]

    # ---- references --------------------------------------------------------------------------

    def ref_pointer(self, ref: Any, pointer: str) -> str:
        """The canonical JSON pointer (into the root) of a local `$ref` (kept per string:
        Kubernetes kb_1161 has 1,531 `$ref`s)."""
        target = self.ref_targets.get(ref) if type(ref) is str else None
        if target is not None:
            return target
        target = self.find_ref_pointer(ref, pointer)
        self.ref_targets[ref] = target
        return target

    def find_ref_pointer(self, ref: Any, pointer: str) -> str:
        if not isinstance(ref, str):
            raise self.fail("$ref must be a string", pointer + "/$ref")
        fragment: str | None = None
        if ref.startswith("#"):
            fragment = ref[1:]
        elif isinstance(self.root, dict):
            root_id = self.root.get("$id", self.root.get("id"))
            if isinstance(root_id, str) and root_id and ref.split("#", 1)[0] == root_id.split("#", 1)[0]:
                fragment = ref.split("#", 1)[1] if "#" in ref else ""
        if fragment is None:
            raise self.fail(f"$ref {ref!r} is not local (only '#...' references are supported)", pointer + "/$ref")
        fragment = urllib.parse.unquote(fragment)
        if fragment and not fragment.startswith("/"):
            anchors = self.find_anchors()
            if fragment not in anchors:
                raise self.fail(f"$ref {ref!r}: no $anchor {fragment!r} in the schema", pointer + "/$ref")
            return anchors[fragment]
        self.lookup(fragment, ref_at=pointer)  # check it exists
        return fragment

    def find_anchors(self) -> dict[str, str]:
        if self.anchors is None:
            self.anchors = {}
            stack: list[tuple[Any, str]] = [(self.root, "")]
            while stack:
                node, pointer = stack.pop()
                if isinstance(node, dict):
                    for key in ("$anchor", "$id", "id"):
                        value = node.get(key)
                        if not isinstance(value, str):
                            continue
                        if key == "$anchor" and value:
                            self.anchors.setdefault(value, pointer)
                        elif value.startswith("#") and len(value) > 1:  # draft-6 `$id: "#name"`
                            self.anchors.setdefault(value[1:], pointer)
                    stack += [(v, f"{pointer}/{_escape_pointer(k)}") for k, v in node.items()]
                elif isinstance(node, list):
                    stack += [(v, f"{pointer}/{i}") for i, v in enumerate(node)]
        return self.anchors

    def lookup(self, pointer: str, ref_at: str | None = None) -> Any:
        node: Any = self.lookups.get(pointer, self.lookups)
        if node is not self.lookups:
            return node
        node = self.root
        if pointer == "":
            return node
        for raw in pointer[1:].split("/"):
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                where = pointer if ref_at is None else ref_at
                raise self.fail(f"$ref target #{pointer} does not exist", where + "/$ref")
        self.lookups[pointer] = node
        return node

    def ref_symbol(self, ref: Any, pointer: str) -> Sym:
        target = self.ref_pointer(ref, pointer)
        nt = self.ref_nonterminal(target)
        return Sym.n(nt)

    def ref_nonterminal(self, target: str) -> int:
        nt = self.ref_nonterminals.get(target)
        if nt is None:
            nt = self.ref_nonterminals[target] = self.ir.add_nonterminal(f"#{target}")
            self.pending.append((nt, target))
            self.ref_nonterminal_targets[nt] = target
        return nt

    def ref_target_symbol(self, sym: Sym) -> Sym:
        """`sym`, or, for the nonterminal of a plain `$ref` whose target `run` has not compiled
        yet (it has no rule), the target compiled now (chains followed; its nonterminal gets
        its rule later as usual): what a caller that looks into the symbol's rules needs."""
        seen: set[int] = set()
        while not sym.terminal and sym.index not in seen and not self.rules_of(sym.index):
            seen.add(sym.index)
            target = self.ref_nonterminal_targets.get(sym.index)
            if target is None:
                break
            resolved = self.compile(self.lookup(target), target)
            if resolved is None:
                break
            sym = resolved
        return sym

    # ---- normalization and merging ----------------------------------------------------------

    def normalize(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        """A copy with draft-4 forms rewritten: boolean exclusive bounds, `items` lists."""
        d = dict(schema)
        if "exclusiveMinimum" in d or "exclusiveMaximum" in d:
            for excl, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                value = d.get(excl)
                if isinstance(value, bool):
                    del d[excl]
                    if value and bound in d:
                        d[excl] = d.pop(bound)
        items = d.get("items")
        if isinstance(items, list):
            d["prefixItems"] = items
            if "additionalItems" in d:
                d["items"] = d.pop("additionalItems")
            else:
                del d["items"]
        else:
            d.pop("additionalItems", None)
        if not _ARRAY_KEYWORD_SET.isdisjoint(d):
            for key in _ARRAY_KEYWORDS:
                if key in d and not isinstance(d[key], list):
                    raise self.fail(f"{key} must be an array", f"{pointer}/{key}")
        if "enum" in d and not _SCALAR_SET.issuperset(map(type, d["enum"])) and any(map(_nests_deeper, d["enum"])):
            raise self.fail(f"an enum/const value nests deeper than {NESTING_DEPTH_MAX}", f"{pointer}/enum")
        if "const" in d:
            const = d.pop("const")
            if _nests_deeper(const):
                raise self.fail(f"an enum/const value nests deeper than {NESTING_DEPTH_MAX}", f"{pointer}/const")
            d["enum"] = [v for v in d.get("enum", [const]) if _json_equal(v, const)]
        if "type" in d:
            types = d["type"] if isinstance(d["type"], list) else [d["type"]]
            for t in types:
                if t not in TYPES:
                    raise self.fail(f"unknown type {t!r} (expected one of {', '.join(TYPES)})", f"{pointer}/type")
            d["type"] = list(types)
        if not _OBJECT_KEYWORD_SET.isdisjoint(d):
            for key in _OBJECT_KEYWORDS:
                if key in d and not isinstance(d[key], dict):
                    raise self.fail(f"{key} must be an object", f"{pointer}/{key}")
        if not _CLAUSE_KEYWORD_SET.isdisjoint(d):
            clauses = self.clauses(d, pointer)
            if clauses:
                d["_clauses"] = clauses
        return d

    def clauses(self, d: dict[str, Any], pointer: str) -> list[dict[str, Any]]:
        """Pop the clause keywords (`CLAUSE_KEYWORDS`) of a schema being normalized, one clause
        per assertion; each carries its JSON pointer as `_at`."""
        out: list[dict[str, Any]] = []
        if "not" in d:
            out.append({"not": d.pop("not"), "_at": f"{pointer}/not"})
        branches: dict[str, Any] = {k: d.pop(k) for k in ("then", "else") if k in d}
        if "if" in d and self.draft_before_7:
            d.pop("if")
            self.warn("if/then/else are not keywords before draft 7 ($schema); ignored", pointer)
        if "if" in d:
            condition = d.pop("if")
            if branches:
                out.append({"if": condition, **branches, "_at": pointer})
        for key, kind in (("dependencies", None), ("dependentRequired", "dependentRequired"), ("dependentSchemas", "dependentSchemas")):
            for name, need in d.pop(key, {}).items():
                where = f"{pointer}/{key}/{_escape_pointer(name)}"
                this = kind or ("dependentRequired" if isinstance(need, list) else "dependentSchemas")
                if this == "dependentRequired":
                    if not isinstance(need, list) or not all(isinstance(n, str) for n in need):
                        raise self.fail(f"{key} of {name!r} must list property names", where)
                    if need:
                        out.append({"dependentRequired": {name: need}, "_at": where})
                elif need is not True and need != {}:
                    out.append({"dependentSchemas": {name: need}, "_at": where})
        return out

    def flatten(self, schema: Any, pointer: str, expanding: frozenset[str] = frozenset()) -> dict[str, Any] | None:
        """The schema with its top-level `$ref` and `allOf` merged in; None if unsatisfiable.

        Memoised like `compile`; the result is shared, so callers must not mutate it. It
        depends on the pointer only through the `_at` of its clauses, so a result with
        clauses is reused only at the same pointer.
        """
        if schema is True:
            return {}
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise self.fail(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer)
        depth = pointer.count("/")  # `check_depth`, inline (as in `compile`)
        if depth > self.depth_high:
            self.depth_high = depth
        if depth > NESTING_DEPTH_MAX:
            self.check_depth(pointer)  # raises
        cid = self.schema_ids.get(id(schema), _NO_ID)
        if cid is _NO_ID:
            cid = self.content_id(schema)
        key = key_here = None
        memo = None
        if cid is not None:
            # (`reuse` called only for a key the table holds: most lookups miss)
            results = self.results
            key = ("flatten", (cid, expanding))
            if key in results:
                memo = self.reuse(key, pointer)
            if memo is None:
                key_here = ("flatten", (cid, expanding, pointer))
                if key_here in results:
                    memo = self.reuse(key_here, pointer)
        if memo is not None:
            return memo.value  # type: ignore[no-any-return]
        frame = self.enter(pointer)
        try:
            result = self.flatten_dict(schema, pointer, expanding)
        finally:
            frame = self.leave(frame)
        if result is not None and "_clauses" in result and key is not None:
            key = key_here
        self.remember(key, pointer, frame, result)
        return result

    def flatten_dict(self, schema: dict[str, Any], pointer: str, expanding: frozenset[str]) -> dict[str, Any] | None:
        d = self.normalize(schema, pointer)
        parts: list[dict[str, Any] | None] = []
        if "$ref" in d:
            target = self.ref_pointer(d.pop("$ref"), pointer)
            if target in expanding or len(expanding) > NESTING_DEPTH_MAX:
                raise self.fail("a $ref with sibling keywords (or inside allOf) leads back to itself", pointer)
            parts.append(self.flatten(self.lookup(target), target, expanding | {target}))
        for i, sub in enumerate(d.pop("allOf", [])):
            parts.append(self.flatten(sub, f"{pointer}/allOf/{i}", expanding))
        pending = [
            p for p in parts if p is not None and ("_unevaluatedProperties" in p or "_unevaluatedItems" in p)
        ]
        others = [x for x in [d, *parts] if x is not None and all(x is not p for p in pending)]
        if pending and (len(pending) > 1 or any(k in x for x in others for k in _EVALUATING)):
            self.warn(
                "unevaluatedProperties/unevaluatedItems inside allOf/$ref next to anyOf/oneOf/not/if: the "
                "siblings' properties and items count as evaluated (a superset)",
                pointer,
            )
        result = d
        if parts:
            # Properties follow the schema's text, as llguidance's do: merging keeps the first
            # side's properties first, so the sides go in the order of their keywords (an
            # object whose `$ref` comes before its `properties` lists the $ref's first).
            keys = list(schema)
            sides = [(keys.index("properties") if "properties" in schema else -1, [d])]
            if "$ref" in schema:
                sides.append((keys.index("$ref"), parts[:1]))
            if "allOf" in schema:
                sides.append((keys.index("allOf"), parts[1:] if "$ref" in schema else parts))
            ordered = [side for _, group in sorted(sides, key=lambda s: s[0]) for side in group]
            result, parts = ordered[0], ordered[1:]
            if result is None:
                return None
        for part in parts:
            merged = None if part is None else self.merge(result, part, pointer)
            if merged is None:
                return None
            result = merged
        if "unevaluatedProperties" in result or "unevaluatedItems" in result:
            result = dict(result)
            for keyword, hidden, _ in _UNEVALUATED:
                if keyword in result:
                    result[hidden] = result.pop(keyword)
        if "_unevaluatedProperties" in result or "_unevaluatedItems" in result:
            return self.resolve_unevaluated(result, pointer)
        return result

    def warn_unevaluated(self, d: dict[str, Any], pointer: str) -> None:
        """Say where a pending unevaluated* is approximate: beside `anyOf` of more than
        `UNEVALUATED_ANY_OF_MAX` options each alternative carries the keys and items of one
        option only."""
        if "anyOf" in d and len(d["anyOf"]) > UNEVALUATED_ANY_OF_MAX:
            self.warn(
                "unevaluatedProperties/unevaluatedItems with anyOf: a value valid under several options counts "
                "only one option's properties and items as evaluated (a subset)",
                pointer,
            )

    def resolve_unevaluated(self, d: dict[str, Any], pointer: str) -> dict[str, Any]:
        """Turn a pending `unevaluatedProperties`/`unevaluatedItems` into `additionalProperties`
        /`items` once no branch (anyOf, oneOf, not, if, dependencies) can still add evaluated
        keys or items: with every applicator merged into one schema, the unevaluated keys are
        exactly those its `properties`/`patternProperties` do not name, unless it has its own
        `additionalProperties` (which then evaluates all of them); likewise for items."""
        if not any(u[1] in d for u in _UNEVALUATED) or any(k in d for k in ("anyOf", "oneOf", "_clauses")):
            return d
        d = dict(d)
        for keyword, hidden, target in _UNEVALUATED:
            if hidden not in d:
                continue
            value = d.pop(hidden)
            if target in d:
                continue  # every key (item) is evaluated by it
            if target == "items":
                # `contains` evaluates the items it matches (whatever their count).
                matched = _matched_items(d)
                if matched:
                    value = {"anyOf": [*matched, value]}
            d[target] = value
        return d

    def unevaluated_cases(
        self, d: dict[str, Any], pointer: str, *, negated: bool = True, top: bool = True
    ) -> tuple[list[_Case], list[list[dict[str, Any]]]]:
        """The flattened `d`, which has a pending `unevaluatedProperties`/`unevaluatedItems`
        beside `anyOf`/`oneOf`/clauses, split by which of those subschemas pass.

        Each case is (R, selector, pointer): the selector (clauses: `{"anyOf": [S]}` for a
        subschema S that passes, `{"not": S}` for one that fails) picks out the values whose
        passing subschemas are the case's, and among them `d` holds exactly where the resolved
        schema R holds (R: `d` merged with the passing subschemas, the unevaluated keys and
        items turned into `additionalProperties`/`items` over what those evaluate; None when
        nothing holds). JSON Schema drops the annotations of failing subschemas, so they only
        select. The uncovered selectors (each a conjunction of clauses) are the values for
        which no case applies, all outside `d`: no `anyOf` option passes, none or two `oneOf`
        options pass, a `not` fails. So `d` is the union of (selector AND R), and its negation
        the union of (selector AND NOT R) and the uncovered selectors, linear in the cases.

        Exact for clauses (`not`, `if`/`then`/`else`, dependencies), `oneOf`, and `anyOf` of up
        to `UNEVALUATED_ANY_OF_MAX` options (a case per set of passing options, the others
        failing). `anyOf` of more options gets one case per passing option, the others not
        asked about: the cases overlap and each counts that option's keys only, so the
        negation built from them accepts more (a **superset**; a warning). For the schema
        itself (`negated` False: `compile_unevaluated_cases`) the union of the cases, and
        there the `anyOf` cases need not say that the other options fail (a case that counts
        fewer passing options asks more of the unevaluated keys: it only repeats values of the
        larger case); beside more options it is a **subset** (a warning).
        """
        if top and negated:
            # Each part compiled once where it stands, so that an error in it names its place
            # (in the cases below the parts are merged, compiled where the case is). Only its
            # errors count: its warnings and contradictions speak of the part, not the negation
            # (a reuse of the part replays its warnings where it is used).
            saved = (len(self.warnings), len(self.warning_log), len(self.empty_reasons))
            self.compile_flat({k: v for k, v in d.items() if k not in ("anyOf", "oneOf", "_clauses")}, pointer)
            for part, where in _unevaluated_parts(d, pointer):
                self.compile(part, where)
            self.drop_warnings(saved[0])
            del self.warning_log[saved[1] :], self.empty_reasons[saved[2] :]
        branches: list[tuple[dict[str, Any] | None, list[dict[str, Any]], str]] = []
        uncovered: list[list[dict[str, Any]]] = []
        if "_clauses" in d:
            clause, *others = d["_clauses"]
            rest = {k: v for k, v in d.items() if k != "_clauses"}
            if others:
                rest["_clauses"] = others
            at = clause.get("_at", pointer)
            if "not" in clause:
                branches.append((rest, [clause], at))
                uncovered.append([_passes(clause["not"], f"{at}")])
            elif "if" in clause:
                passed = _evaluated_only(self.flatten(clause["if"], f"{at}/if"))
                then = self.flatten(clause.get("then", True), f"{at}/then")
                otherwise = self.flatten(clause.get("else", True), f"{at}/else")
                both = None if passed is None or then is None else self.merge(rest, passed, at)
                sides = [(both, then, [_passes(clause["if"], f"{at}/if")], f"{at}/then")]
                sides.append((rest, otherwise, [{"not": clause["if"], "_at": f"{at}/if"}], f"{at}/else"))
                for base, side, selector, where in sides:
                    if base is None or side is None:
                        branches.append((None, selector, where))
                        continue
                    # For the schema itself in schema order, the side's properties first too (as
                    # compile_alternatives does): real instances use either order.
                    orders = [self.merge(base, side, at)]
                    if not negated and not self.any_order and side.get("properties") and base.get("properties"):
                        orders.append(self.merge(side, base, at))
                    branches += [(merged, selector, where) for merged in orders]
            else:
                # A dependency: the key absent (nothing asked), or present with what it needs.
                ((key, need),) = (clause.get("dependentRequired") or clause["dependentSchemas"]).items()
                needed = {"required": [key, *need]} if "dependentRequired" in clause else {"allOf": [{"required": [key]}, need]}
                flat = self.flatten(needed, at)
                branches.append((self.merge(rest, {"properties": {key: False}}, at), [_passes({"properties": {key: False}}, at)], at))
                branches.append((None if flat is None else self.merge(rest, flat, at), [_passes({"required": [key]}, at)], at))
        else:
            key = "anyOf" if "anyOf" in d else "oneOf"
            options = d[key]
            rest = {k: v for k, v in d.items() if k != key}
            n = len(options)
            at = [f"{pointer}/{key}/{i}" for i in range(n)]
            exact = key == "oneOf" or n <= UNEVALUATED_ANY_OF_MAX
            if key == "anyOf" and exact:
                sets = [[i for i in range(n) if mask >> i & 1] for mask in range(1, 1 << n)]
            else:
                sets = [[i] for i in range(n)]
            if not exact and negated:
                self.warn(
                    f"not of unevaluatedProperties/unevaluatedItems beside anyOf of more than {UNEVALUATED_ANY_OF_MAX} "
                    "options: a value valid under several options counts only one option's properties and items as "
                    "evaluated, so the negation accepts more (a superset)",
                    pointer,
                )
            elif not exact:
                self.warn_unevaluated({"anyOf": options}, pointer)
            for chosen in sets:
                merged: dict[str, Any] | None = rest
                for i in chosen:
                    flat = _evaluated_only(self.flatten(options[i], at[i]))
                    merged = None if flat is None or merged is None else self.merge(merged, flat, at[i])
                selector = [_passes(options[i], at[i]) for i in chosen]
                if exact and (negated or key == "oneOf"):
                    selector += [{"not": options[j], "_at": at[j]} for j in range(n) if j not in chosen]
                branches.append((merged, selector, at[chosen[0]]))
            uncovered.append([{"not": o, "_at": at[j]} for j, o in enumerate(options)])
            if key == "oneOf":
                uncovered += [[_passes(options[i], at[i]), _passes(options[j], at[j])] for i in range(n) for j in range(i + 1, n)]
        cases: list[_Case] = []
        for schema, selector, where in branches:
            if schema is not None and any(k in schema for k in ("anyOf", "oneOf", "_clauses")):
                # An anyOf/oneOf left from `d` stands at its pointer; one a passing subschema
                # brought stands at the case's (clauses carry their own).
                own = all(schema.get(k) is d.get(k) for k in ("anyOf", "oneOf") if k in schema)
                inner, left = self.unevaluated_cases(schema, pointer if own else where, negated=negated, top=False)
                cases += [_Case(r, selector + s, w) for r, s, w in inner]
                uncovered += [selector + u for u in left]
            else:
                cases.append(_Case(None if schema is None else self.resolve_unevaluated(schema, where), selector, where))
        return cases, uncovered

    def merge(self, a: dict[str, Any], b: dict[str, Any], pointer: str) -> dict[str, Any] | None:
        """The intersection of two flattened schemas (see the module docstring)."""
        if ("contains" in a or "_contains" in a) and ("contains" in b or "_contains" in b) and _counted_contains(a, b):
            # Each array counts its items valid under each `contains` (`_contains` entries).
            out = self.merge(_without_contains(a), _without_contains(b), pointer)
            if out is not None:
                out.update(_merged_contains(_contains_entries(a) + _contains_entries(b)))
            return out
        self.spend_merge_work(len(a) + len(b), pointer)
        # Annotations dropped: they assert nothing, and merged schemas that differ only in them
        # (the `definitions` a `then` carries) would be translated once each.
        out = {k: v for k, v in a.items() if k not in _MERGE_DROPPED}
        # A key matching x's pattern but not y's must meet x's pattern schema AND y's
        # additionalProperties, which no single patternProperties says: the merged object
        # keeps each side's patterns with its additionalProperties (`_pattern_sides`), and a
        # side's additionalProperties also holds for keys that match only other sides' patterns.
        sided = any(
            x.get("patternProperties") and not _trivial_schema(y.get("additionalProperties", True))
            and set(x["patternProperties"]) != set(y.get("patternProperties", {}))
            for x, y in ((a, b), (b, a))
        )
        for key, vb in b.items():
            if key not in out:
                if key not in _MERGE_DROPPED:
                    out[key] = vb
                continue
            va = out[key]
            if key in ANNOTATIONS or key not in ("properties", "anyOf", "oneOf") and _same_json(va, vb):
                continue
            if key == "type":
                out[key] = _intersect_types(va, vb)
            elif key == "properties":
                out[key] = self.merge_properties(a, b, pointer)
            elif key == "required":
                self.spend_merge_work(len(va) + len(vb), pointer)
                out[key] = list(dict.fromkeys(list(va) + list(vb)))
            elif key in _MAX_OF or key in _MIN_OF:
                for value in (va, vb):
                    if not _is_number(value):
                        raise self.fail(f"{key} must be a number, not {value!r}", f"{pointer}/{key}")
                out[key] = max(va, vb) if key in _MAX_OF else min(va, vb)
            elif key in ("additionalProperties", "items", "_unevaluatedProperties", "_unevaluatedItems"):
                out[key] = _and(va, vb)
            elif key == "prefixItems":
                n = max(len(va), len(vb))
                rest_a, rest_b = a.get("items", True), b.get("items", True)
                out[key] = [
                    _and(va[i] if i < len(va) else rest_a, vb[i] if i < len(vb) else rest_b) for i in range(n)
                ]
            elif key == "enum":
                out[key] = _common_values(va, vb)
            elif key in ("anyOf", "oneOf"):
                if len(va) * len(vb) > ANY_OF_PRODUCT_MAX:
                    raise self.fail(
                        f"merging two {key} lists of {len(va)} and {len(vb)} options makes more than "
                        f"{ANY_OF_PRODUCT_MAX}; simplify the allOf",
                        pointer,
                    )
                out[key] = [_and(x, y) for x in va for y in vb]
            elif key == "pattern":
                out["_patterns"] = list(dict.fromkeys(out.get("_patterns", []) + [vb] + b.get("_patterns", [])))
            elif key == "format":
                self.warn(f"two formats {va!r} and {vb!r} merged; keeping {va!r}", pointer)
            elif key == "multipleOf":
                common = _common_multiple(va, vb)
                if common is None:
                    out["_conflicts"] = [*out.get("_conflicts", []), key]
                else:
                    out[key] = common
            elif key == "contains":
                # Two "some item is valid under ..." (one match at least each): two item witnesses
                # (the counted forms are `_contains`, above), marked as evaluating their items.
                del out[key]
                out["_item_witness"] = [
                    *out.get("_item_witness", []),
                    {"from": 0, "value": va, "contains": True},
                    {"from": 0, "value": vb, "contains": True},
                ]
            elif key in ("_clauses", "_not_enum", "_not_bodies", "_conflicts", "_not_multiple_of", "_witness", "_item_witness",
                         "_pattern_sides", "_presence"):
                # The other side's entries that are not already there as JSON (`in` alone took
                # `true` for `1`: two failed `if`s on `t` being 1 and true excluded 1 only).
                self.spend_merge_work(len(va) * len(vb), pointer)  # (each entry looked for in the other list)
                out[key] = list(va) + [v for v in vb if v not in va or not any(_same_json(v, w) for w in va)]
            elif key == "_patterns":
                out[key] = list(dict.fromkeys(list(va) + list(vb)))
            elif key == "_non_integer" or key == "uniqueItems":
                out[key] = bool(va or vb)
            elif key == "patternProperties":
                self.spend_merge_work(len(va) + len(vb), pointer)
                out[key] = {**va, **{p: _and(va[p], s) if p in va else s for p, s in vb.items()}}
            elif key == "propertyNames":
                out[key] = _and(va, vb)
            elif key in _KEYWORDS:
                out["_conflicts"] = [*out.get("_conflicts", []), key]
            # other keys are not keywords (`x-...`, `@type`): keep a's value
        # A side's `additionalProperties` (`items`) speaks of the other side's listed
        # properties (prefix items) too (its `patternProperties` apply to them in the merged
        # object as they stand).
        for x, y in ((a, b), (b, a)) if ("properties" in a) != ("properties" in b) or ("prefixItems" in a) != ("prefixItems" in b) else ():
            if "properties" in x and "properties" not in y and not _trivial_schema(y.get("additionalProperties", True)):
                out["properties"] = self.merge_properties(a, b, pointer)
            if "prefixItems" in x and "prefixItems" not in y and not _trivial_schema(y.get("items", True)):
                out["prefixItems"] = [_and(p, y["items"]) for p in x["prefixItems"]]
        if sided:
            sides = _pattern_sides(a) + [side for side in _pattern_sides(b) if side not in _pattern_sides(a)]
            out["_pattern_sides"] = sides
        return out

    def spend_merge_work(self, units: int, pointer: str) -> None:
        """Count what a merge copies and compares: folding an `allOf` merges each part into
        all the parts before it, so the work grows with the square of the parts (an `allOf`
        of 16,000 parts with one property each took 10 s, of 16,000 `if`/`then` parts 82 s)."""
        self.merge_work += units
        if self.merge_work > MERGE_WORK_MAX:
            raise self.fail(
                f"merging this schema's allOf parts (and $refs with siblings, expanded clauses) needs more than "
                f"{MERGE_WORK_MAX:,} steps; simplify the schema (fewer allOf parts, or the properties listed once)",
                pointer,
            )

    def merge_properties(self, a: dict[str, Any], b: dict[str, Any], pointer: str) -> dict[str, Any]:
        """Each listed property of either side AND what the other side says of it. A side with
        no patternProperties and no additionalProperties says nothing of the other's names:
        those members are taken as they are (clause alternatives are small objects merged into
        large ones, hundreds of times: saucectl, 26,000 member lookups)."""
        pa, pb = a.get("properties", {}), b.get("properties", {})
        self.spend_merge_work(len(pa) + len(pb), pointer)
        out = {}
        silent_a, silent_b = _says_nothing_of_others(a), _says_nothing_of_others(b)
        for key, va in pa.items():
            if key in pb:
                out[key] = self.merge_member(va, pb[key])
            else:
                out[key] = va if silent_b else _and(va, self.member_schema(b, key))
        for key, vb in pb.items():
            if key not in pa:
                out[key] = vb if silent_a else _and(self.member_schema(a, key), vb)
        return out

    def merge_member(self, va: Any, vb: Any) -> Any:
        """A member both sides of a merge list: `va` AND `vb` as one schema where a shortcut
        sees the pair (a pin beside a list of strings, `pinned_enum`; a typed object beside a
        plain one, `_typed_object`), else `_and`'s."""
        if type(va) is dict and type(vb) is dict:
            direct = (
                self.pinned_enum(va, vb) if "pattern" in vb else self.pinned_enum(vb, va) if "pattern" in va else None
            ) or _typed_object(va, vb)
            if direct is not None:
                return direct
        return _and(va, vb)

    def inert(self, keys: set[str]) -> bool:
        """Whether keys that are no annotation assert nothing (`_asserts_nothing`): keys that
        are no keyword, such as azure's `ignoreCase` and `aliases` beside most of MaskBench
        service-schema's 1,500 task inputs, `{"type": "string", "ignoreCase": "key"}`. The
        names found so are kept (`inert_keys`), so that a name met again costs a set test."""
        if self.inert_keys.issuperset(keys):
            return True
        if not _ASSERTING.isdisjoint(keys) or not all(k[:1] not in "_$" for k in keys):
            return False  # (`compile` tests the keywords first, without the call)
        self.inert_keys.update(keys)
        self.plain_type_keys.update(keys)
        self.plain_enum_keys.update(keys)
        return True

    def pinned_enum(self, listing: dict[str, Any], pin: dict[str, Any]) -> dict[str, Any] | None:
        """`listing` AND `pin` as one `enum`, where `listing` only lists strings
        (`_string_list`, kept per schema by identity) and `pin` passes one string
        (`_pinned_text`): the listed strings equal to it. What the translation of the two
        makes (the checker's literal lookup among the listed values), without the anyOf's
        merge, expansion and check: each of MaskBench service-schema's 238 task objects pins
        `task` to its name beside the same anyOf of 238 one-name enums (~50 µs a member).
        None when either side is anything else."""
        text = _pinned_text(pin)
        if text is None:
            return None
        known = self.string_lists.get(id(listing))
        if known is None:
            known = self.string_lists[id(listing)] = (listing, _string_list(listing))  # kept alive: its id stays its own
        values = known[1]
        return None if values is None else {"enum": [text] * values.count(text)}

    def member_schema(self, d: dict[str, Any], key: str) -> Any:
        """What the object schema `d` requires of the value of property `key`: its `properties`
        entry, else the `patternProperties` it matches, else `additionalProperties`."""
        if key in d.get("properties", {}):
            return d["properties"][key]
        patterns = d.get("patternProperties", {})
        matched = [p for p in patterns if self.key_matches(p, key, "")]
        if matched:
            matching = [patterns[p] for p in matched] + _side_extras(d, matched)
            return matching[0] if len(matching) == 1 else {"allOf": matching}
        return d.get("additionalProperties", True)

    def key_matches(self, pattern: str, key: str, pointer: str) -> bool:
        """Whether a property name matches a `patternProperties` pattern (search semantics)."""
        try:
            return self.checker.pattern_matches(pattern, key)
        except Undecidable as err:
            raise self.fail(f"patternProperties: {err}", f"{pointer}/patternProperties") from None

    # ---- memoisation -------------------------------------------------------------------------

    def release(self) -> None:
        """Drop the memo tables now and break the compiler's reference cycle (its checker's
        resolver refers back to it): otherwise the compiler, its tables and its IR would wait
        for the cyclic garbage collector, and make its full collections slower (MaskBench
        compile times had 50-100 ms collections in their tail)."""
        self.content_ids.clear()
        self.schema_ids.clear()
        self.schema_list_ids.clear()
        self.id_kept.clear()
        self.content_keys.clear()
        self.results.clear()
        self.enum_unions.clear()
        self.disjoint_options.clear()
        self.one_of_inexact.clear()
        self.implied_candidates.clear()
        self.presence_declined.clear()
        self.presence_formulas.clear()
        self.listed_values.clear()
        self.string_lists.clear()
        self.object_suffixes.clear()
        self.object_alternatives.clear()
        self.object_sequences.clear()
        self.open_tails.clear()
        self.open_optional.clear()
        self.warning_log.clear()
        self.warning_texts.clear()
        self.checker = None  # type: ignore[assignment]

    def content_id(self, value: Any) -> Any:
        """A hashable id of a schema (or clause) that two share only when they are equal as JSON
        texts with keys in the same order (so `1`, `1.0` and `true` differ, and so do
        `{"a":1,"b":2}` and `{"b":2,"a":1}`, whose property orders make different grammars),
        but for the annotations no translation reads. A container's id is its `marshal` form
        in a schema whose form is short (`content_by_marshal`: exact, annotations included),
        else an int from the interning walk (`schema_id_nested`, annotations left out; exact
        past its depth), whose cost is linear in the new parts; either is kept by identity
        (the container kept alive here). None when the value is not plain JSON (a cycle; for
        the walk, a set too): such values are not memoised.

        The compiler never mutates a container after it is first passed to `memoised`, which
        is what makes the identity cache sound.
        """
        kind = type(value)
        if kind is not dict and kind is not list:
            if kind is str or value is None:
                return value
            return (kind, value) if kind in _SCALARS else None
        known = self.schema_ids.get(id(value), _NO_ID)
        if known is not _NO_ID:
            return known
        if self.content_by_marshal:
            cid = _marshal_form(value)  # None: not plain JSON
        elif kind is dict:
            try:
                cid = self.schema_id_nested(value, 0)
            except (_TooDeep, RecursionError):
                cid = self.exact_content_id(value)
        else:
            cid = self.exact_content_id(value)
        self.schema_ids[id(value)] = cid
        self.id_kept.append(value)
        return cid

    def exact_content_id(self, value: dict[str, Any] | list[Any]) -> Any:
        """The id of a container's exact content (annotations included): `content_id_nested`,
        else `content_id_deep` past its depth."""
        known = self.content_ids.get(id(value))
        if known is not None:
            return known
        try:
            return self.content_id_nested(value, 0)
        except (_TooDeep, RecursionError):
            return self.content_id_deep(value)

    def schema_id_nested(self, schema: dict[str, Any], depth: int) -> Any:
        """`content_id` of a schema not interned yet, read as a schema: its annotations that
        no translation reads (`_UNREAD_ANNOTATIONS`) left out, its sub-schemas by their own
        such ids, its data by exact content. The key is tagged ("s", ...), so it never equals
        an exact content's key (their ids are told apart although both count in
        `content_keys`). Raises _TooDeep past `_CONTENT_ID_DEPTH_MAX` levels."""
        if depth >= _CONTENT_ID_DEPTH_MAX:
            raise _TooDeep
        parts: list[Any] = []  # each name read and its part, in turn
        for name, child in schema.items():
            if name in _UNREAD_ANNOTATIONS:
                continue
            kind = type(child)
            if kind is str or child is None:
                parts += (name, child)
            elif kind is dict or kind is list:
                mode = (_OBJECT_ID_MODES if kind is dict else _ARRAY_ID_MODES).get(name)
                if mode is None and name[:1] not in "_$":
                    parts += (name, _UNREAD)  # no translation reads it (a `$ref` into it reads it as a schema)
                    continue
                if not mode:
                    inner = self.content_ids.get(id(child))
                    if inner is None:
                        inner = self.content_id_nested(child, depth + 1)
                elif mode == 1:
                    inner = self.schema_ids.get(id(child), _NO_ID)
                    if inner is _NO_ID:
                        inner = self.schema_id_nested(child, depth + 1)
                else:
                    inner = self.schema_list_ids.get(id(child))
                    if inner is None:
                        inner = self.schemas_id_nested(child, depth + 1)
                if inner is None:
                    return None
                parts += (name, inner)
            elif kind in _SCALARS:
                parts += (name, (kind, child))
            else:
                return None
        if len(parts) == 2 and type(parts[1]) is str:
            # One keyword with a string (`$ref`, `type`; MaskBench kb_1161: 2,745 of its 4,159
            # schemas): the pair itself, neither interned nor kept by identity, which cost more
            # than the walk. A pair of strings equals no other id (an int, a scalar's
            # (type, value), `_UNREAD`), and equals another pair exactly for the same content.
            return (parts[0], parts[1])
        keys = self.content_keys
        # One flat tuple of the names and their parts in turn (pairs: the length splits it
        # again), not three: fewer tuples to make and, at `release`, to free (one key per node).
        cid = keys.setdefault(("s", *parts), len(keys))
        self.schema_ids[id(schema)] = cid
        self.id_kept.append(schema)
        return cid

    def schemas_id_nested(self, node: dict[str, Any] | list[Any], depth: int) -> Any:
        """The id of a list of schemas, or of a map from names to schemas (`schema_id_nested`
        for the schemas among its values, exact content for the rest), tagged ("m", ...)."""
        if depth >= _CONTENT_ID_DEPTH_MAX:
            raise _TooDeep
        schema_ids, content_ids = self.schema_ids, self.content_ids
        parts: list[Any] = []
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is str or child is None:
                parts.append(child)
            elif kind is dict or kind is list:
                # A dict among them is a schema; a list, data (`required` names, an enum's).
                if kind is dict:
                    inner = schema_ids.get(id(child), _NO_ID)
                    if inner is _NO_ID:
                        inner = self.schema_id_nested(child, depth + 1)
                else:
                    inner = content_ids.get(id(child))
                    if inner is None:
                        inner = self.content_id_nested(child, depth + 1)
                if inner is None:
                    return None
                parts.append(inner)
            elif kind in _SCALARS:
                parts.append((kind, child))
            else:
                return None
        keys = self.content_keys
        # Flat, as `schema_id_nested`'s: the names' count (-1 for a list) splits it again.
        cid = keys.setdefault(("m", len(node), *node, *parts) if type(node) is dict else ("m", -1, *parts), len(keys))
        self.schema_list_ids[id(node)] = cid
        self.id_kept.append(node)
        return cid

    def content_id_nested(self, node: dict[str, Any] | list[Any], depth: int) -> Any:
        """`content_id` of a container not interned yet, by recursion: twice as fast as the
        explicit stack of `content_id_deep`, which takes over past `_CONTENT_ID_DEPTH_MAX`
        levels (a cycle gets there too; what was interned on the way stays valid)."""
        ids = self.content_ids
        parts: list[Any] = []
        append = parts.append
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is str or child is None:
                append(child)
            elif kind is dict or kind is list:
                known = ids.get(id(child))
                if known is not None:
                    append(known)
                elif depth >= _CONTENT_ID_DEPTH_MAX:
                    raise _TooDeep
                else:
                    inner = self.content_id_nested(child, depth + 1)
                    if inner is None:
                        return None
                    append(inner)
            elif kind in _SCALARS:
                append((kind, child))
            else:
                return None
        key = (tuple(node), tuple(parts)) if type(node) is dict else (None, tuple(parts))
        keys = self.content_keys
        cid = keys.setdefault(key, len(keys))
        ids[id(node)] = cid
        self.id_kept.append(node)
        return cid

    def content_id_deep(self, value: dict[str, Any] | list[Any]) -> Any:
        """`content_id` of a container, with an explicit stack (any depth; finds cycles)."""
        ids, keys = self.content_ids, self.content_keys
        visiting: set[int] = set()
        stack: list[Any] = [value]
        while stack:
            node = stack[-1]
            if id(node) in ids:
                stack.pop()
                continue
            children = node.values() if type(node) is dict else node
            if id(node) not in visiting:
                visiting.add(id(node))
                for child in children:
                    if type(child) is dict or type(child) is list:
                        if id(child) in visiting:
                            return None  # a cycle: not JSON
                        if id(child) not in ids:
                            stack.append(child)
                    elif type(child) not in _SCALARS:
                        return None
                continue
            stack.pop()
            parts = tuple([
                c if (t := type(c)) is str or c is None else ids[id(c)] if t is dict or t is list else (t, c)
                for c in children
            ])
            key = (tuple(node), parts) if type(node) is dict else (None, parts)
            ids[id(node)] = keys.setdefault(key, len(keys))
            self.id_kept.append(node)
        return ids[id(value)]

    def reuse(self, key: tuple[str, Any] | None, pointer: str) -> _Memo | None:
        """The memoised result for `key` if it may stand here, after replaying its effects.

        A result depends on the content, on the pointer only through names, warnings and error
        messages, and on the compiler's state only through three limits. So a reuse replays
        the warnings (pointers under the first place moved to this one) and is allowed only
        when the limits hold here too: pointer depth, nested compilations and the clause
        budget, each grown by what the first computation used. Otherwise the caller computes
        again, which raises exactly where the translation without memoisation would. Errors
        are never memoised (they end the translation).
        """
        memo = None if key is None else self.results.get(key)
        if memo is None:
            return None
        depth = pointer.count("/")
        if (
            depth + memo.depth_extra > NESTING_DEPTH_MAX
            or self.compile_depth + memo.compile_depth_extra > COMPILE_DEPTH_MAX
            or self.clause_alternative_count + memo.clause_alternatives > self.clause_alternative_budget
        ):
            return None
        self.clause_alternative_count += memo.clause_alternatives
        self.depth_high = max(self.depth_high, depth + memo.depth_extra)
        self.compile_depth_high = max(self.compile_depth_high, self.compile_depth + memo.compile_depth_extra)
        old = memo.pointer
        for message, where in memo.warnings:
            if where == old or where.startswith(old + "/"):
                where = pointer + where[len(old) :]
            self.warn(message, where)
        return memo

    def enter(self, pointer: str) -> tuple[int, ...]:
        """Start measuring what a computation to be memoised uses (pass the result to `leave`)."""
        frame = (
            self.depth_high, self.compile_depth_high, len(self.warning_log), self.clause_alternative_count,
            pointer.count("/"), self.compile_depth,
        )
        self.depth_high, self.compile_depth_high = frame[4], frame[5]
        return frame

    def leave(self, frame: tuple[int, ...]) -> tuple[int, ...]:
        """End a measurement (also when the computation raised): (deepest pointer, deepest
        nested compilation) reached inside, and the outer maxima restored to include them."""
        inner = (self.depth_high, self.compile_depth_high)
        self.depth_high = max(frame[0], inner[0])
        self.compile_depth_high = max(frame[1], inner[1])
        return frame + inner

    def remember(self, key: tuple[str, Any] | None, pointer: str, frame: tuple[int, ...], result: Any) -> None:
        if key is not None:
            _, _, warnings_start, clauses_start, depth, compile_depth, depth_high, compile_depth_high = frame
            self.results[key] = _new_tuple(_Memo, (  # not _Memo(...): its __new__ is Python code
                result,
                pointer,
                tuple(self.warning_log[warnings_start:]),
                depth_high - depth,
                compile_depth_high - compile_depth,
                self.clause_alternative_count - clauses_start,
            ))

    def memo_key(self, kind: str, value: Any) -> tuple[str, Any] | None:
        cid = self.content_id(value)
        return None if cid is None else (kind, cid)

    # ---- checks ------------------------------------------------------------------------------

    def check_depth(self, pointer: str) -> None:
        depth = pointer.count("/")
        if depth > self.depth_high:
            self.depth_high = depth
        if depth > NESTING_DEPTH_MAX:
            raise GrammarError(
                f"the schema nests deeper than {NESTING_DEPTH_MAX} levels (or a $ref with siblings recurses) "
                f"at {pointer[:200]}...",
                json_pointer=pointer,
            )

    def check_compile_depth(self, depth: int, pointer: str) -> None:
        """Count `depth` nested compilations (clauses and $refs with siblings expand in place,
        so the pointer alone does not bound the recursion) against `COMPILE_DEPTH_MAX`."""
        if depth > self.compile_depth_high:
            self.compile_depth_high = depth
        if depth > COMPILE_DEPTH_MAX:
            raise GrammarError(
                f"the schema nests deeper than {COMPILE_DEPTH_MAX} levels once not/if/$ref with siblings are "
                f"expanded (at {pointer[:200]})",
                json_pointer=pointer,
            )

    def check_keywords(self, d: dict[str, Any], pointer: str) -> None:
        if DYNAMIC_UNION in d:
            where = d[DYNAMIC_UNION]
            self.warn(
                f"{where.rsplit('/', 1)[-1]} resolves to a different resource on different paths of evaluation; "
                "the value may be valid under any of them (a superset; under not, a subset)",
                where,
            )
        if _CHECKED_KEYWORDS.isdisjoint(d):
            return  # (the commonest case, without the loop)
        for key in d:
            if key in ("$dynamicRef", "$recursiveRef"):
                self.unsupported(
                    f"{key} {d[key]!r} has no target that is the same on every path of evaluation (several "
                    "resources define its dynamic anchor) or no target at all",
                    f"{pointer}/{key}",
                )
            elif key in UNSUPPORTED:
                self.unsupported(f"the keyword {key!r} is not supported", f"{pointer}/{key}")
        for key in dict.fromkeys(d.get("_conflicts", [])):
            self.unsupported(f"allOf/$ref merges two different values of {key!r}", pointer)

    # ---- what `_json_schema_logic` needs (its Context protocol) ------------------------------

    def body_regex(self, pattern: Any, pointer: str) -> str:
        if not isinstance(pattern, str):
            raise self.fail("pattern must be a string", pointer)
        try:
            return pattern_to_json_regex(pattern)
        except GrammarError as err:
            raise Unexpressible(str(err), pointer) from None

    def format_regex(self, name: Any) -> str | None:
        return FORMAT_REGEXES.get(name) if isinstance(name, str) else None

    def one_of_disjoint(self, options: list[Any], pointer: str, types: Sequence[str] | None = None) -> bool:
        """Whether no JSON value of `types` (default: any) is valid under two of the options
        (a sufficient check). Memoised by the list's identity (and `types`): the same
        `oneOf` meets many siblings (MaskBench vega: 173 checks of 109 lists)."""
        key = (id(options), None if types is None else tuple(types))
        known = self.disjoint_options.get(key)
        if known is not None:
            return known[1]
        flats = [(self.flatten(o, f"{pointer}/{i}"), f"{pointer}/{i}") for i, o in enumerate(options)]
        live = [(f, self.value_types(f, at), at) for f, at in flats if f is not None]
        # `_discriminated`: what every pair's `keys_disjoint` finds, at once.
        result = (len(live) > 2 and _discriminated([(f, t) for f, t, _ in live])) or self.pairs_disjoint(live, types)
        self.disjoint_options[key] = (options, result)  # the list kept alive: its id stays its own
        return result

    def pairs_disjoint(self, live: list[tuple[dict[str, Any], set[str], str]], types: Sequence[str] | None) -> bool:
        """`pair_disjoint` of every pair of the flattened options, the pairs `_pairs_to_check`
        leaves; False (not shown) past `ONE_OF_PAIRS_MAX` of them: checking pairs is quadratic
        in the options (a `oneOf` of 2,000 objects, each requiring its own key beside
        `additionalProperties: false`, took 10 s), and MaskBench's largest `oneOf` has 41."""
        for count, (i, j) in enumerate(_pairs_to_check(live)):
            if count == ONE_OF_PAIRS_MAX or not self.pair_disjoint(live[i], live[j], types):
                return False
        return True

    def pair_disjoint(
        self, a: tuple[dict[str, Any], set[str], str], b: tuple[dict[str, Any], set[str], str],
        types: Sequence[str] | None, depth: int = 0,
    ) -> bool:
        """Whether no value of `types` is valid under both flattened schemas `a` and `b` (each
        with its types and pointer): by types, listed values or keys (`_disjoint`,
        `keys_disjoint`), else, for a side with `anyOf`/`oneOf` options, when each of its
        options is disjoint from the other side (a value valid under the side is valid under
        one of its options), up to `_OPTIONS_DISJOINT_DEPTH_MAX` levels of options."""
        (fa, ta, _), (fb, tb, _) = a, b
        if _disjoint(fa, fb, ta, tb) or self.keys_disjoint(fa, fb, ta, tb, types):
            return True
        if depth >= _OPTIONS_DISJOINT_DEPTH_MAX:
            return False
        for side, other in ((a, b), (b, a)):
            flat, _, at = side
            for keyword in ("anyOf", "oneOf"):
                options = flat.get(keyword)
                if type(options) is list:
                    # (the pointers `value_types` flattened them at)
                    inner = [(self.flatten(o, f"{at}/{keyword}/{i}"), f"{at}/{keyword}/{i}") for i, o in enumerate(options)]
                    return all(
                        f is None or self.pair_disjoint((f, self.value_types(f, where, 1), where), other, types, depth + 1)
                        for f, where in inner
                    )
        return False

    def value_types(self, d: dict[str, Any], pointer: str, depth: int = 0) -> set[str]:
        """The types a flattened schema allows: its `type` or listed values, else the union
        over its `anyOf`/`oneOf` options (a few levels down), else all."""
        if "type" in d or "enum" in d or depth >= 3:
            return _types_of(d)
        for key in ("anyOf", "oneOf"):
            if key in d:
                union: set[str] = set()
                for i, option in enumerate(d[key]):
                    flat = self.flatten(option, f"{pointer}/{key}/{i}")
                    if flat is not None:
                        union |= self.value_types(flat, f"{pointer}/{key}/{i}", depth + 1)
                return union
        return _types_of(d)

    def keys_disjoint(
        self, a: dict[str, Any], b: dict[str, Any], ta: set[str], tb: set[str], types: Sequence[str] | None
    ) -> bool:
        """Whether objects are the only values both flattened schemas (and `types`) allow, and
        they differ on a key both require (a discriminator: disjoint listed values) or one
        requires a key the other forbids (`additionalProperties: false` or a `false`
        property), the common shape of `oneOf` options such as `{"required": ["http"],
        "additionalProperties": false, ...}`. (Other types pass `required` and `properties`,
        so the objects alone decide nothing while another type is shared.)"""
        common = _types_meeting(ta, tb)
        if types is not None:
            common = _types_meeting(common, types)
        if common - {"object"}:
            return False
        for key in set(a.get("required", [])) & set(b.get("required", [])):
            va, vb = _literals(a.get("properties", {}).get(key)), _literals(b.get("properties", {}).get(key))
            if va is not None and vb is not None and not _common_values(va, vb):
                return True
        for x, y in ((a, b), (b, a)):
            for key in x.get("required", []):
                if isinstance(key, str) and self.member_schema(y, key) is False:
                    return True
        return False

    # ---- schemas -----------------------------------------------------------------------------

    def plain_symbol(self, schema: dict[str, Any], kind: str) -> Sym | None:
        """The symbol of a schema of one plain `type` beside annotations and keys that assert
        nothing (`{"type": "string"}`, the commonest schema), directly: the lexeme the general
        path (flatten, compile_flat, compile_type) gives, without its ~30 calls, with what that
        path records for the limits. None for any other schema (`compile`'s general path)."""
        if (
            kind in _PLAIN_TYPES and self.compile_depth < COMPILE_DEPTH_MAX
            and (
                self.plain_type_keys.issuperset(schema)
                or (_ASSERTING_BESIDE_TYPE.isdisjoint(schema) and self.inert(schema.keys() - _TYPE_AND_ANNOTATIONS))
            )
        ):
            if self.compile_depth + 1 > self.compile_depth_high:
                self.compile_depth_high = self.compile_depth + 1
            return (self.string_symbol or self.string()) if kind == "string" else self.lexeme(*_PLAIN_TYPES[kind])
        return None

    def compile(self, schema: Any, pointer: str) -> Sym | None:
        """A symbol deriving exactly the JSON texts of `schema`; None when it accepts nothing."""
        depth = pointer.count("/")  # `check_depth`, inline
        if depth > self.depth_high:
            self.depth_high = depth
        if depth > NESTING_DEPTH_MAX:
            self.check_depth(pointer)  # raises
        if schema is True:
            return Sym.n(self.any())
        strings = None
        if type(schema) is dict:
            # The commonest schema, `{"type": "string"}` with annotations at most, directly.
            kind = schema.get("type")
            if type(kind) is str and kind in _PLAIN_TYPES:
                sym = self.plain_symbol(schema, kind)
                if sym is not None:
                    return sym
            # An `enum` of one string alone (beside annotations and keys that assert nothing),
            # as directly: the lexeme `compile_enum` makes of it, kept per text (MaskBench
            # service-schema: the 238 pinned task names). Longer lists of strings keep the
            # memo (their lexeme is made anew each time) and take the direct way after it.
            if (
                kind is None and "enum" in schema and type(values := schema["enum"]) is list
                and self.compile_depth < COMPILE_DEPTH_MAX
                and (
                    self.plain_enum_keys.issuperset(schema)
                    or (_ASSERTING_BESIDE_ENUM.isdisjoint(schema) and self.inert(schema.keys() - _ENUM_AND_ANNOTATIONS))
                )
            ):
                if len(values) == 1 and type(values[0]) is str:
                    if self.compile_depth + 1 > self.compile_depth_high:
                        self.compile_depth_high = self.compile_depth + 1
                    return Sym.t(self.ir.add_lexeme(_json_string_lexeme(values[0])))
                if len(values) >= 2 and all(type(v) is str for v in values):
                    strings = values  # (below, after the memo)
        if isinstance(schema, dict) and "$ref" in schema and _REF_AND_ANNOTATIONS.issuperset(schema):
            return self.ref_symbol(schema["$ref"], pointer)
        if not isinstance(schema, dict):
            d = self.flatten(schema, pointer)
            return None if d is None else self.compile_flat(d, pointer)
        # Memoised inline (no wrapper frames: the Python stack bounds the nesting, see
        # COMPILE_DEPTH_MAX), and so are `memo_key`, `enter` and `leave` (with the calls below
        # them, a sixth of a median schema's Python calls).
        cid = self.schema_ids.get(id(schema), _NO_ID)
        if cid is _NO_ID:
            cid = self.content_id(schema)
        key = None if cid is None else ("compile", cid)
        if key is not None:
            if key in self.results:
                memo = self.reuse(key, pointer)
                if memo is not None:
                    return memo.value  # type: ignore[no-any-return]
            compiling = self.compiling
            if key in compiling:
                # The same content again inside itself (merged recursive $refs, level after
                # level, come back to the same allOf): a nonterminal for it, given its rule below.
                if compiling[key] is None:
                    compiling[key] = self.ir.add_nonterminal(f"{pointer or '/'}:again")
                return Sym.n(compiling[key])  # type: ignore[arg-type]
            compiling[key] = None
        frame = (  # `enter(pointer)`
            self.depth_high, self.compile_depth_high, len(self.warning_log), self.clause_alternative_count,
            depth, self.compile_depth,
        )
        self.depth_high, self.compile_depth_high = depth, self.compile_depth
        remembered = len(self.results)
        try:
            if strings is not None:
                # An enum of strings beside keys that assert nothing (MaskBench service-schema:
                # 239 of its task inputs): what `compile_flat` and `compile_enum` make of it,
                # one lexeme for the strings, without the normalized copy and the calls
                # (the memo stays: equal lists recur, and their lexeme is made anew each time).
                if self.compile_depth + 1 > self.compile_depth_high:
                    self.compile_depth_high = self.compile_depth + 1
                result = Sym.t(self.ir.add_lexeme(_json_strings_lexeme(strings)))
            else:
                # Nothing to merge in (no $ref, allOf or unevaluated*): `flatten` would give
                # `normalize(schema)`, and its own memo entry would only repeat this one.
                d = self.normalize(schema, pointer) if _FLATTEN_KEYS.isdisjoint(schema) else self.flatten(schema, pointer)
                # Not compile_flat: memoising by `schema` already covers this content.
                result = None if d is None else self.compile_flat(d, pointer, memoise=False)
        except BaseException:
            if key is not None and self.compiling.get(key) is not None:
                # Results made inside refer to its nonterminal, which gets no rule now.
                for inner in list(self.results)[remembered:]:
                    del self.results[inner]
            raise
        finally:
            # `leave(frame)`, inline
            inner = (self.depth_high, self.compile_depth_high)
            if frame[0] > inner[0]:
                self.depth_high = frame[0]
            if frame[1] > inner[1]:
                self.compile_depth_high = frame[1]
            frame += inner
            again = None if key is None else self.compiling.pop(key)
        if again is not None and result is not None:
            self.rule(again, [result])
            result = Sym.n(again)
        if key is not None:
            self.remember(key, pointer, frame, result)
        return result

    def compile_flat(self, d: dict[str, Any], pointer: str, *, memoise: bool = True) -> Sym | None:
        if ANNOTATIONS.issuperset(d):  # `not _has_constraints(d)`, inline
            return Sym.n(self.any())
        if "enum" in d and not d["enum"] and "_conflicts" not in d and self.compile_depth < COMPILE_DEPTH_MAX:
            return None  # what compile_enum gives, without its cost (merged anyOf options often get here)
        if memoise:
            key = self.memo_key("compile_flat", d)
            memo = self.reuse(key, pointer) if key in self.results else None
            if memo is not None:
                return memo.value  # type: ignore[no-any-return]
            frame = self.enter(pointer)
        else:
            # Inside `compile`, whose own memo frame (begun at this pointer and depth) measures.
            key = None
        reasons = len(self.empty_reasons)
        # Clauses and $refs with siblings expand in place, so the pointer alone does not bound
        # the recursion (a schema can reach itself through them).
        depth = self.compile_depth = self.compile_depth + 1
        try:
            if depth > self.compile_depth_high:  # `check_compile_depth`, inline (the high mark is
                self.compile_depth_high = depth  # never past the limit, which raises)
                if depth > COMPILE_DEPTH_MAX:
                    self.check_compile_depth(depth, pointer)  # raises
            result = self.compile_flat_checked(d, pointer)
        finally:
            self.compile_depth -= 1
            if memoise:
                frame = self.leave(frame)
        if result is not None:
            del self.empty_reasons[reasons:]  # parts of it that compiled to nothing do not matter
        if memoise:
            self.remember(key, pointer, frame, result)
        return result

    def compile_flat_checked(self, d: dict[str, Any], pointer: str) -> Sym | None:
        if "_presence" in d and ("enum" in d or "_unevaluatedProperties" in d or "_unevaluatedItems" in d):
            d = self.presence_expanded(d)  # the enum checker and the evaluated keys read clauses
        if "_unevaluatedProperties" in d or "_unevaluatedItems" in d:
            d = self.resolve_unevaluated(d, pointer)
            if "_unevaluatedProperties" in d or "_unevaluatedItems" in d:
                if any("not" in c or "if" in c for c in d.get("_clauses", [])) or (
                    "oneOf" in d and not self.one_of_disjoint(d["oneOf"], f"{pointer}/oneOf", d.get("type"))
                ):
                    return self.compile_unevaluated_cases(d, pointer)
                self.warn_unevaluated(d, pointer)
        if "enum" in d:
            return self.compile_enum(d, pointer)
        if DYNAMIC_UNION in d or not _CHECKED_KEYWORDS.isdisjoint(d):  # (the commonest case without the call)
            self.check_keywords(d, pointer)
        structured = [v for v in d["_not_enum"] if isinstance(v, (list, dict))] if "_not_enum" in d else None
        if structured:
            # An object or array value excluded: the negation of a schema pinning it down.
            d = dict(d, _not_enum=[v for v in d["_not_enum"] if not isinstance(v, (list, dict))])
            d["_clauses"] = [{"not": value_schema(v), "_at": pointer} for v in structured] + d.get("_clauses", [])
        if "_clauses" in d:
            return self.compile_clauses(d, pointer)
        for key in ("anyOf", "oneOf"):
            if key in d:
                return self.compile_options(d, key, pointer)
        types = d.get("type", ALL_TYPES)
        if "number" in types:
            types = [t for t in types if t != "integer"]
        if len(types) == 1:
            return self.compile_type(types[0], d, pointer)  # what `choice` makes of its one alternative
        alternatives = [[sym] if (sym := self.compile_type(t, d, pointer)) else None for t in types]
        return self.choice(f"{pointer or '/'}:types", alternatives)

    def compile_unevaluated_cases(self, d: dict[str, Any], pointer: str) -> Sym | None:
        """A pending `unevaluated*` beside `not`/`if` or an overlapping `oneOf`, exactly: the
        union of its cases (`unevaluated_cases`: where a case's selector holds, its resolved
        schema), so that a failing `if`, a `not`, or the other `oneOf` options evaluate
        nothing."""
        cases, _ = self.unevaluated_cases(d, pointer, negated=False)
        alternatives = []
        for resolved, selector, where in cases:
            if resolved is not None:
                sym = self.compile_flat(dict(resolved, _clauses=selector) if selector else resolved, where)
                alternatives.append([sym] if sym is not None else None)
        return self.choice(f"{pointer or '/'}:unevaluated", alternatives)

    def compile_options(self, d: dict[str, Any], key: str, pointer: str) -> Sym | None:
        rest = {k: v for k, v in d.items() if k != key}
        one_of = key == "oneOf"
        if not one_of and "_unevaluatedProperties" not in d and "_unevaluatedItems" not in d and DYNAMIC_UNION not in d:
            # An option every value of `rest` meets (vega's data: `anyOf: [{required: [name]},
            # {oneOf: [...]}]` beside `required: [name]`): `rest` AND the anyOf is `rest`. The
            # options that could be one are found once per list (service-schema meets its anyOf
            # of 238 options in every cell).
            known = self.implied_candidates.get(id(d[key]))
            if known is None:
                candidates = [o for o in d[key] if o is True or type(o) is dict and _IMPLIED_OPTION_KEYS.issuperset(o)]
                known = self.implied_candidates[id(d[key])] = (d[key], candidates)  # the list kept alive: its id stays its own
            if known[1] and any(_implied_option(rest, option) for option in known[1]):
                return self.compile_implied(rest, d[key], key, pointer)
        # A presence constraint first (not for a oneOf read as anyOf under coerce_one_of, nor
        # for options `presence_expanded` put back).
        if (len(d[key]) >= 2 or not one_of) and not (one_of and self.coerce_one_of) and id(d[key]) not in self.presence_declined:
            result = self.compile_presence(
                self.presence_constraint(rest, d[key], {"kind": key, "options": d[key]}, one_of=one_of), pointer,
                f"no value is valid under {'exactly one' if one_of else 'any'} of the {key} options (with the keywords beside it)",
                f"{pointer}/{key}",
            )
            if result is not _NOT_EXACT:
                return result  # type: ignore[return-value]
        if one_of and not self.one_of_disjoint(d[key], f"{pointer}/oneOf", d.get("type")):
            exact = self.compile_one_of_exactly(d, pointer)
            if exact is not _NOT_EXACT:
                return exact  # type: ignore[return-value]
            self.warn("oneOf is treated as anyOf (an instance valid under several options is accepted)", pointer)
        unevaluated = "_unevaluatedProperties" in d or "_unevaluatedItems" in d
        if len(d[key]) >= 2 and _has_constraints(rest) and not unevaluated:
            union = self.enum_union(d[key], f"{pointer}/{key}/0")
            if union is not None:
                return self.compile_alternatives(rest, [union], f"{pointer or '/'}:{key}", cells=True)
        options = [(option, f"{pointer}/{key}/{i}") for i, option in enumerate(d[key])]
        if key == "anyOf" and unevaluated and 1 < len(options) <= UNEVALUATED_ANY_OF_MAX:
            # Every option that passes adds its evaluated keys: one alternative per non-empty
            # set of options, all of them passing (a larger passing set only evaluates more).
            n = len(options)
            options = [
                ({"allOf": [options[i][0] for i in range(n) if mask >> i & 1]}, options[(mask & -mask).bit_length() - 1][1])
                for mask in range(1, 1 << n)
            ]
        return self.compile_alternatives(rest, options, f"{pointer or '/'}:{key}", cells=True)

    def compile_implied(self, rest: dict[str, Any], options: list[Any], key: str, pointer: str) -> Sym | None:
        """`rest` beside an anyOf one of whose options it implies: `rest`, in the key orders the
        anyOf's options allowed. Merged with `rest`, an option's listed keys came first or after
        those of `rest` (and so for the options of its own anyOf/oneOf): each such list of keys
        is kept as an option that only lists them (`{"properties": {k: true, ...}}`), so the
        merges give the orders they gave, of the values of `rest`, without what the options
        asserted (vega's `data`: an exact oneOf over the whole object, 4 ms)."""
        if self.any_order:
            return self.compile_flat(rest, pointer)
        heads: dict[tuple[str, ...], None] = {}
        for i, option in enumerate(options):
            if _implied_option(rest, option):
                continue
            where = f"{pointer}/{key}/{i}"
            flat = self.flatten(option, where)
            if flat is None:
                continue
            own = _listed_keys(flat)
            if own:
                heads[own] = None
            for keyword in ("anyOf", "oneOf"):
                if type(flat.get(keyword)) is list:
                    # Its own options merged first with it (and it with `rest`): their keys, then its.
                    for j, nested in enumerate(flat[keyword]):
                        part = self.flatten(nested, f"{where}/{keyword}/{j}")
                        inner = _listed_keys(part) if part is not None else ()
                        if inner:
                            heads[_keys_after(inner, own)] = None
        if not heads:
            return self.compile_flat(rest, pointer)
        # Each merged both ways, as `compile_alternatives` merges options (no clause is
        # expanded, so no clause budget is spent); the first lists nothing: `rest` as it is,
        # its extra keys in any order.
        at = f"{pointer}/{key}"
        heads_listed = [({"properties": dict.fromkeys(head, True)}, at) for head in heads]
        return self.compile_alternatives(rest, [({}, at), *heads_listed], f"{pointer or '/'}:{key}")

    def compile_one_of_exactly(self, d: dict[str, Any], pointer: str) -> Sym | None | object:
        """`oneOf` whose options may overlap, as the alternatives "option i and not any other"
        (each negation a clause); `_NOT_EXACT` when a negation has no grammar, the expansion
        would pass `ONE_OF_EXACT_ALTERNATIVES_MAX` alternatives, an option would exclude more
        than `ONE_OF_NEGATED_PATTERNS_MAX` patterns, or its translation fails (the caller then
        treats it as `anyOf`, a superset). A failed attempt leaves no warning and no
        clause budget used; its rules stay in the IR, unreachable."""
        options = d["oneOf"]
        at = f"{pointer}/oneOf"
        if self.coerce_one_of or "_unevaluatedProperties" in d or "_unevaluatedItems" in d or id(options) in self.one_of_inexact:
            return _NOT_EXACT
        try:
            negations = [negate(option, f"{at}/{j}", self) for j, option in enumerate(options)]
        except (Unexpressible, GrammarError):
            return _NOT_EXACT
        expansion = _one_of_expansion([len(n) for n in negations], ONE_OF_EXACT_ALTERNATIVES_MAX)
        # A string excluding many patterns is one lexeme whose lazy DFA is the product of their
        # automata: seven search patterns cost a first mask 66 ms (MaskBench o12278).
        bodies = [sum(len(a.get("_not_bodies", ())) for a in n if isinstance(a, dict)) for n in negations]
        bodies_total = sum(bodies)
        if expansion > ONE_OF_EXACT_ALTERNATIVES_MAX or any(bodies_total - b > ONE_OF_NEGATED_PATTERNS_MAX for b in bodies):
            # Whatever the place: the negations are the options' (MaskBench vega: 8 of its 41
            # attempts are at lists of four options found too large before, negated again).
            self.one_of_inexact[id(options)] = options  # the list kept alive: its id stays its own
            return _NOT_EXACT
        if self.one_of_exact_spent + expansion > ONE_OF_EXACT_SCHEMA_MAX:
            return _NOT_EXACT
        exclusive = [
            ({"allOf": [option, *({"not": other} for j, other in enumerate(options) if j != i)]}, f"{at}/{i}")
            for i, option in enumerate(options)
        ]
        rest = {k: v for k, v in d.items() if k != "oneOf"}
        saved = (len(self.warnings), len(self.warning_log), self.clause_alternative_count, self.clause_alternative_budget)
        reasons = len(self.empty_reasons)
        # The nested negations expand too: a budget of a few times the top level's keeps a
        # recursive option from spending much before it fails. What the attempt spends counts
        # against ONE_OF_EXACT_SCHEMA_MAX, not the schema's clause budget, so that exactness
        # never costs a schema its other clauses.
        self.clause_alternative_budget = min(
            self.clause_alternative_budget, self.clause_alternative_count + 4 * ONE_OF_EXACT_ALTERNATIVES_MAX
        )
        try:
            result = self.compile_alternatives(rest, exclusive, f"{pointer or '/'}:oneOf")
        except GrammarError:
            self.drop_warnings(saved[0])
            del self.warning_log[saved[1] :]
            del self.empty_reasons[reasons:]
            return _NOT_EXACT
        finally:
            self.one_of_exact_spent += max(0, self.clause_alternative_count - saved[2])
            self.clause_alternative_count = saved[2]
            self.clause_alternative_budget = saved[3]
        # What made single options empty is the construction's doing, not the schema's.
        del self.empty_reasons[reasons:]
        if result is None:
            self.contradiction("no value is valid under exactly one of the oneOf options (with the keywords beside it)", at)
        return result

    def compile_alternatives(
        self, rest: dict[str, Any], options: list[tuple[Any, str]], name: str, *, cells: bool = False
    ) -> Sym | None:
        """`rest` AND any one of the options (schemas, each with its JSON pointer). With
        `cells` (`anyOf`/`oneOf` options), an option whose merge is plain is merged once and
        compiled once, one body per order (`option_cell`)."""
        # Property order: both the sibling `properties` first and the option's first are
        # accepted when they differ (real instances use either; the grammar just gets both).
        alternatives: list[list[Sym] | None] = []
        # A closed object whose options narrow its members: their symbols, once for all options.
        # (`additionalProperties: false` first: most siblings of an anyOf are not closed.)
        closed = cells and rest.get("additionalProperties") is False and not self.any_order and _closed_members(rest)
        shared: dict[str, Sym] | None = {} if closed else None
        for option, where in options:
            if _has_constraints(rest):
                flat = self.flatten(option, where)
                if cells and flat is not None and not self.any_order:
                    if shared is not None and _narrows(rest["properties"], flat):
                        cell = self.narrowed_cell(rest, flat, where, shared)
                    else:
                        cell = self.option_cell(rest, flat, where)
                    if cell is not _NOT_EXACT:
                        if cell is not _NO_ALTERNATIVE:
                            alternatives.append(cell)  # type: ignore[arg-type]
                        continue
                # Under property_order="any" both orders are the same language: one is enough.
                orders = [] if flat is None else [(rest, flat)] if self.any_order else [(rest, flat), (flat, rest)]
                seen_orders: list[list[str]] = []
                for left, right in orders:
                    merged = self.merge(left, right, where)
                    if merged is None:
                        continue
                    # A key whose schema is `false` makes no member: where it stands does not change
                    # the grammar (MaskBench tmlanguage: dependencies forbidding keys made 1,043
                    # objects that differed only there).
                    key_order = [k for k, v in merged.get("properties", {}).items() if v is not False]
                    if key_order in seen_orders:
                        continue
                    seen_orders.append(key_order)
                    if self.required_unmet(merged, where):
                        # Nothing to expand: the alternative is empty however its clauses go.
                        alternatives.append(None)
                        continue
                    sym = self.compile_flat(merged, where)
                    alternatives.append([sym] if sym is not None else None)
                continue
            sym = self.compile(option, where)
            alternatives.append([sym] if sym is not None else None)
        return self.choice(name, alternatives)

    def required_unmet(self, merged: dict[str, Any], where: str) -> bool:
        """Whether a merge (objects only) leaves a required property no value
        (`_required_without_value`); the contradiction is noted."""
        empty = _required_without_value(merged, self.listed_values)
        if empty is None:
            return False
        self.contradiction(f"the required property {empty!r} accepts no value", where)
        return True

    def option_cell(self, rest: dict[str, Any], flat: dict[str, Any], where: str) -> list[Sym] | None | object:
        """`rest` AND the (flattened) anyOf/oneOf option `flat` as `compile_alternatives`
        makes it, from one merge (the rest first) and one compile: the expansion merged the
        two in both orders and compiled each order that differed as an object of its own,
        the same members; here the merge carries both key orders (`_orders`) and
        `compile_object` makes one body per order over the members it compiled once. The
        same language, fewer merges, memo keys and member lists (MaskBench service-schema:
        238 task objects of 10 members, each merged and compiled twice).

        As `compile_alternatives`' entry: `[sym]`, None (empty), `_NO_ALTERNATIVE` (no
        merge), or `_NOT_EXACT` where the merge still has something read before its object
        or merged again (`_clauses`, an `anyOf`/`oneOf`, an `enum`, a pending
        `unevaluated*`, an excluded object or array value), a `_presence` constraint or a
        witness (their objects are built otherwise): the caller then expands both orders as
        before."""
        merged = self.merge(rest, flat, where)
        if merged is None:
            return _NO_ALTERNATIVE
        if (
            "_clauses" in merged or "anyOf" in merged or "oneOf" in merged or "_presence" in merged
            or "_witness" in merged or _checked_before_object(merged)
        ):
            return _NOT_EXACT
        if self.required_unmet(merged, where):
            return None
        properties = merged.get("properties", {})
        keys, flat_keys = tuple(rest.get("properties", ())), tuple(flat.get("properties", ()))
        # The expansion's two orders, as it told them apart (keys whose schema is `false` make no member).
        orders = [
            [k for k in order if properties.get(k, False) is not False]
            for order in (_keys_after(keys, flat_keys), _keys_after(flat_keys, keys))
        ]
        if orders[0] != orders[1]:
            # The required keys not listed follow in each merge's `required` order (the
            # expansion compiled the second merge only when the listed keys' order differed).
            required, flat_required = rest.get("required", []), flat.get("required", [])
            if all(type(k) is str for k in (*required, *flat_required)):  # else compile_object names the error
                orders = [
                    order + [k for k in _keys_after(tuple(first), tuple(then)) if k not in properties]
                    for order, (first, then) in zip(orders, ((required, flat_required), (flat_required, required)))
                ]
            merged = dict(merged, _orders=orders)
        sym = self.compile_flat(merged, where)
        return [sym] if sym is not None else None

    def narrowed_cell(
        self, rest: dict[str, Any], flat: dict[str, Any], where: str, shared: dict[str, Sym]
    ) -> list[Sym] | None:
        """`rest` AND the option `flat` as `option_cell` makes it, where `rest` is a closed
        object of listed members (`_closed_members`) and `flat` only narrows some of them
        (`_narrows`), without the merge: the members `flat` lists merged one by one
        (`merge_member`, as `merge_properties` merges them), the others `rest`'s own, whose
        symbols the first option compiles (at its own pointer, as the merge's object did)
        and the others take from `shared` (where that compile warned, spent clause
        alternatives or gave nothing, each option compiles it again: a memo hit that replays
        those here). So the members, their order and the bodies are the merged object's;
        what goes is the merge of the whole object, its memo key (so an equal merge met
        elsewhere is compiled again: the same language), and per option the shared members'
        compiles. MaskBench service-schema: 238 task options of 10 members, each naming
        its `task` and its `inputs`.

        As `option_cell`'s answer: `[sym]`, or None (empty)."""
        listed = rest["properties"]
        narrowed = {key: self.merge_member(listed[key], value) for key, value in flat.get("properties", {}).items()}
        properties = {**listed, **narrowed}  # (in `rest`'s order, as `merge_properties` makes it)
        required = list(dict.fromkeys([*rest.get("required", ()), *flat.get("required", ())]))
        if self.required_unmet({"type": ["object"], "properties": properties, "required": required}, where):
            return None
        # The expansion's two orders, as `option_cell` tells them apart (every required key is listed).
        keys = tuple(listed)
        if False in properties.values():  # (a member that is `false` stays out of both orders)
            orders = [[k for k in order if properties[k] is not False] for order in (keys, _keys_after(tuple(narrowed), keys))]
        else:
            orders = [list(keys), list(_keys_after(tuple(narrowed), keys))]
        # What `compile_flat` and `compile_object` do for the merge (a closed object: no bounds,
        # no other keys, every member's value compiled by `compile`).
        depth = self.compile_depth = self.compile_depth + 1
        reasons = len(self.empty_reasons)
        try:
            if depth > self.compile_depth_high:
                self.compile_depth_high = depth
                if depth > COMPILE_DEPTH_MAX:
                    self.check_compile_depth(depth, where)  # raises
            needed = set(required)
            members: list[tuple[Sym, Sym, bool]] = []
            member_keys: list[str] = []
            key_symbols = self.key_symbols
            sym: Sym | None
            for key, schema in properties.items():
                sym = None if key in narrowed else shared.get(key)
                if sym is None:
                    at = f"{where}/properties/{key.replace('~', '~0').replace('/', '~1')}"
                    warned, spent = len(self.warning_log), self.clause_alternative_count
                    sym = self.compile(schema, at)
                    if sym is None:
                        if key in needed:
                            return self.contradiction(f"the required property {key!r} accepts no value", at)
                        continue
                    if key not in narrowed and len(self.warning_log) == warned and self.clause_alternative_count == spent:
                        shared[key] = sym
                members.append((key_symbols.get(key) or self.key_symbol(key), sym, key in needed))
                member_keys.append(key)
            if orders[0] != orders[1]:
                sym = self.object_bodies(members, member_keys, orders, None, 0, None, where)
            else:
                sym = self.object_body(members, None, 0, None, where)
        finally:
            self.compile_depth -= 1
        if sym is None:
            return None
        del self.empty_reasons[reasons:]  # (as `compile_flat`: parts that compiled to nothing do not matter)
        return [sym]

    def enum_union(self, options: list[Any], pointer: str) -> tuple[dict[str, Any], str] | None:
        """anyOf/oneOf options that are all plain value lists (`enum`/`const` beside annotations
        and non-keywords, which assert nothing) as one option listing every value, at `pointer`
        (the first option's): `rest` AND (`enum` A OR `enum` B) is `rest` AND `enum` A+B, one
        merge and one check of the values where every option cost a merge, a memo entry and a
        compile (MaskBench service-schema: 238 task names, each a `pattern` beside the same
        anyOf of 238 one-name enums, 56,000 merges). None when an option is anything else.

        Memoised by the list's identity (the same anyOf meets many siblings)."""
        known = self.enum_unions.get(id(options))
        if known is not None:
            return known[1]
        values: list[Any] = []
        result: tuple[dict[str, Any], str] | None = ({"enum": values}, pointer)
        for option in options:
            enum = option.get("enum") if type(option) is dict else None
            if (
                type(option) is not dict or ("enum" not in option and "const" not in option)
                or (enum is not None and type(enum) is not list)  # the option's own compile names the error
                or any(
                    k not in _ENUM_UNION_KEYS and k not in ANNOTATIONS and (k[:1] in "_$" or k in _ASSERTING)
                    for k in option
                )
            ):
                result = None
                break
            # What `normalize` makes of the two (these options need no other step of `flatten`).
            if "const" not in option:
                values.extend(enum)  # type: ignore[arg-type]
            elif enum is None:
                values.append(option["const"])
            else:
                values.extend(v for v in enum if _json_equal(v, option["const"]))
        self.enum_unions[id(options)] = (options, result)  # the list kept alive: its id stays its own
        return result

    def compile_clauses(self, d: dict[str, Any], pointer: str) -> Sym | None:
        """Expand the first clause (`not`, `if`, a dependency) into alternatives merged with
        the rest of the schema; the other clauses are expanded inside each alternative."""
        clause, *others = d["_clauses"]
        rest = {k: v for k, v in d.items() if k != "_clauses"}
        if others:
            rest["_clauses"] = others
        at = clause.get("_at", pointer)
        try:
            alternatives = self.clause_alternatives(clause)
        except Unexpressible as err:
            self.unsupported(f"{err} cannot be expressed as a grammar", at if err.pointer is None else err.pointer)
            return self.compile_flat(rest, pointer)
        if "_expand" not in clause:
            kind = "not" if "not" in clause else "if/then/else" if "if" in clause else "dependency"
            result = self.compile_presence(
                self.presence_constraint(rest, alternatives, {"clause": dict(clause, _expand=True)}), pointer,
                f"no value is valid under this {kind} and the keywords beside it", at,
            )
            if result is not _NOT_EXACT:
                return result  # type: ignore[return-value]
            result = self.compile_cells(d, clause, alternatives, pointer)
            if result is not _NOT_EXACT:
                return result  # type: ignore[return-value]
        self.clause_alternative_count += len(alternatives)
        if self.clause_alternative_count > self.clause_alternative_budget:
            raise self.fail(
                f"not/if/dependencies expand into more than {CLAUSE_ALTERNATIVE_COUNT_MAX} alternatives; "
                "simplify the schema",
                at,
            )
        if not alternatives:
            return None
        reasons = len(self.empty_reasons)
        result = self.compile_alternatives(rest, [(a, at) for a in alternatives], f"{at or '/'}:clause")
        if result is None and "not" in clause:
            # What made the negation's alternatives empty is the construction's doing: name the `not`.
            del self.empty_reasons[reasons:]
            self.contradiction("no value is valid under this not and the keywords beside it", at)
        return result

    def clause_alternatives(self, clause: dict[str, Any]) -> list[Any]:
        """`logic.clause_alternatives`, memoised like `flatten` by the clause's content (its
        `_at`, the only pointer its expansion reads, included): a clause expansion meets the
        same clause once per cell that carries it (MaskBench jfrog-pipelines: 518 steps over 49
        clauses), and the negations it made anew each time were new dicts, so their `flatten`
        walked them for content ids again. The list is shared: callers must not mutate it.

        Raises:
            Unexpressible: as `logic.clause_alternatives` (never memoised).
        """
        key = self.memo_key("alternatives", clause)
        pointer = clause.get("_at", "")
        memo = self.reuse(key, pointer) if key in self.results else None
        if memo is not None:
            return memo.value  # type: ignore[no-any-return]
        frame = self.enter(pointer)
        try:
            result = clause_alternatives(clause, self)
        finally:
            frame = self.leave(frame)
        self.remember(key, pointer, frame, result)
        return result

    def compile_cells(self, d: dict[str, Any], clause: dict[str, Any], alternatives: list[Any], pointer: str) -> Sym | None | object:
        """The expansion of `d`'s clauses (the first one's `alternatives` given) in one
        property order: each alternative merged after the rest only, its nested clauses
        expanded in the same pass, one object per *cell* (a choice of one alternative per
        clause met) instead of one per cell and order. `_NOT_EXACT` where this cannot stand
        for the expansion (below); the caller then expands as before.

        The expansion (`compile_alternatives`) merged every alternative in both orders, the
        rest first and the alternative first, so a cell came in every order those choices
        make (its members the same): ui5.yaml's `if` chains on a discriminator compiled 371
        objects for ~40 cells. Here each cell carries the set of those orders, folded over
        the key lists of its alternatives (`_CELL_ORDERS_MAX` at most), and its object
        takes every one of them: the keys some order writes before their place in the cell's
        own order may come first, in any order, each once (a `_presence` entry with no term
        and those `fronts`: `object_body_presence`'s front phase), or, where the object
        cannot follow that (an `anyOf`/`oneOf` still to merge, the limits of
        `object_body_presence`), one object per order (the entry's `orders`, expanded by
        `presence_expanded`). So the language takes every text the expansion took, and more
        orders of the same members only, each a valid instance.

        Not taken (`_NOT_EXACT`): under property_order="any"; where a merged alternative
        still has to pass `compile_flat_checked`'s other steps before its clauses (an
        `enum`, a pending `unevaluated*`, an excluded object or array value); where an
        alternative brings nested clauses while others wait (the two orders then expand
        the clauses in two sequences, whose orders are not folded here); past
        `_CELL_ORDERS_MAX` orders of one cell. What the attempt warned is then taken back."""
        if self.any_order:
            return _NOT_EXACT
        saved = (len(self.warnings), len(self.warning_log), self.clause_alternative_count, len(self.empty_reasons))
        leaves: list[tuple[dict[str, Any], str, set[tuple[str, ...]]]] = []
        start = (d, pointer, {tuple(d.get("properties", ()))}, clause, alternatives, self.compile_depth)
        flats: dict[tuple[int, str], tuple[Any, dict[str, Any] | None]] = {}
        try:
            stack: list[Any] = [start]
            while stack:
                cur, where, orders, first, given, depth = stack.pop()
                # The levels the expansion's nested compile_flat calls counted (a clause can
                # reach itself through a $ref): the same limit, the same error.
                self.check_compile_depth(depth, where)
                node = self.cell_node(cur, where, orders, first, given, flats)
                for merged, at, merged_orders in reversed(node):
                    if "_clauses" in merged:
                        stack.append((merged, at, merged_orders, None, None, depth + 1))
                    else:
                        leaves.append((merged, at, merged_orders))
        except _CellsDeclined:
            self.drop_warnings(saved[0])
            del self.warning_log[saved[1]:]
            self.clause_alternative_count = saved[2]
            del self.empty_reasons[saved[3]:]
            return _NOT_EXACT
        reasons = len(self.empty_reasons)
        choices = []
        for merged, at, merged_orders in leaves:
            sym = self.compile_cell(merged, at, merged_orders)
            choices.append([sym] if sym is not None else None)
        at = clause.get("_at", pointer)
        result = self.choice(f"{at or '/'}:clause", choices)
        if result is None and "not" in clause:
            del self.empty_reasons[reasons:]
            self.contradiction("no value is valid under this not and the keywords beside it", at)
        return result

    def cell_node(
        self, cur: dict[str, Any], pointer: str, orders: set[tuple[str, ...]], clause: dict[str, Any] | None,
        alternatives: list[Any] | None, flats: dict[tuple[int, str], tuple[Any, dict[str, Any] | None]],
    ) -> list[tuple[dict[str, Any], str, set[tuple[str, ...]]]]:
        """One step of `compile_cells`: `cur`'s first clause expanded as `compile_clauses`
        expands it (a presence constraint, else its alternatives each merged after the rest),
        as (schema, its pointer, its orders) for each live alternative. `clause` and
        `alternatives` are given for the first step (whose presence attempt was made).

        `flats` keeps the flattened alternatives of this expansion by (identity, pointer): a
        clause is met once per cell that carries it, and its memoised alternatives flattened
        again were memo hits whose replay (warnings, limits) the first one already made at
        the same pointer and nesting (MaskBench jfrog-pipelines: 938 of 1,038)."""
        if _checked_before_object(cur):
            raise _CellsDeclined
        first, *others = cur["_clauses"]
        rest = {k: v for k, v in cur.items() if k != "_clauses"}
        if others:
            rest["_clauses"] = others
        at = first.get("_at", pointer)
        if alternatives is None:
            if "_expand" in first:
                raise _CellsDeclined
            try:
                alternatives = self.clause_alternatives(first)
            except Unexpressible as err:
                self.unsupported(f"{err} cannot be expressed as a grammar", at if err.pointer is None else err.pointer)
                return [(rest, pointer, orders)]
            constrained = self.presence_constraint(rest, alternatives, {"clause": dict(first, _expand=True)})
            if constrained is not None:
                return [(constrained, pointer, orders)]
            decided = self.failed_if(rest, first, alternatives)
        else:
            decided = None
        self.clause_alternative_count += len(alternatives)
        if self.clause_alternative_count > self.clause_alternative_budget:
            raise self.fail(
                f"not/if/dependencies expand into more than {CLAUSE_ALTERNATIVE_COUNT_MAX} alternatives; "
                "simplify the schema",
                at,
            )
        out = []
        for index, alternative in enumerate(alternatives):
            known = flats.get((id(alternative), at))
            if known is None:
                known = flats[id(alternative), at] = (alternative, self.flatten(alternative, at))  # kept alive: its id stays its own
            flat = known[1]
            if flat is None:
                continue
            if others and "_clauses" in flat:
                raise _CellsDeclined
            if decided is not None and index == 0 and _quiet_merge(rest, flat):
                # `if` and `then`: the `if` fails on every instance of `rest` (`failed_if`), so
                # the merge is dead, by `decided` (its note the one the merge would leave).
                self.contradiction(f"the required property {decided!r} accepts no value", at)
                continue
            if decided is not None and index == 1 and _only_negated(flat, decided, first["if"]["properties"][decided]):
                # The `if` negated: what `rest` holds already, so the merge is `rest` (the same
                # language; its member `decided` without the redundant exclusion).
                merged = {k: v for k, v in rest.items() if k not in _MERGE_DROPPED}
                merged["required"] = list(dict.fromkeys(merged["required"]))
            else:
                merged = self.merge(rest, flat, at)
            if merged is None or self.required_unmet(merged, at):
                continue
            keys = tuple(flat.get("properties", ()))
            both = {_keys_after(o, keys) for o in orders} | {_keys_after(keys, o) for o in orders}
            if len(both) > _CELL_ORDERS_MAX:
                raise _CellsDeclined
            out.append((merged, at, both))
        return out

    def failed_if(self, rest: dict[str, Any], clause: dict[str, Any], alternatives: list[Any]) -> str | None:
        """The property by which every instance of `rest` fails the `if` of `clause` (an
        if/then with no `else`), or None when there is none to be seen: the `if` asks only that
        property `p` take one of the values it lists, and `rest` is an object schema that
        requires `p` and whose member `p` lists values, none of them those. Then the clause's
        alternatives (`if` and `then`; the `if` negated) are a dead one and one that only
        repeats what `rest` holds, and `cell_node` skips both merges.

        An `if`/`then` chain on a discriminator (MaskBench jfrog-pipelines: `Step`, 28 clauses
        `if type is X then ...`) expands as a cell per `then` chosen, each going on through the
        clauses after it: 406 cell nodes of two merges each, the one merge the `then` of
        another type (dead), the other adding `type is not Y` to a member `type` that grew one
        `allOf` level per clause (so each cell's object then flattened 27 levels of it)."""
        if len(alternatives) != 2 or clause.get("else", True) not in (True, {}) or rest.get("type") != ["object"]:
            return None
        condition = clause.get("if")
        members = condition.get("properties") if type(condition) is dict else None
        if type(members) is not dict or len(members) != 1 or not ANNOTATIONS.issuperset(condition.keys() - {"properties"}):
            return None
        ((key, sub),) = members.items()
        required, listed = rest.get("required"), rest.get("properties")
        if (
            type(sub) is not dict or not _VALUE_LIST_KEYS.issuperset(sub) or "_conflicts" in rest
            or type(required) is not list or key not in required or type(listed) is not dict or key not in listed
        ):
            return None
        values = _listed_values(sub, 0, self.listed_values)
        have = _listed_values(listed[key], 0, self.listed_values)
        if values is None or not have or not have.isdisjoint(values):
            return None
        return key  # type: ignore[no-any-return]

    def compile_cell(self, d: dict[str, Any], pointer: str, orders: set[tuple[str, ...]]) -> Sym | None:
        """A cell of `compile_cells` (clauses all expanded) in every order of `orders`: the
        keys an order writes before their place in `d`'s own order as fronts, or one object
        per order (see `compile_cells`)."""
        properties = d.get("properties", {})
        own = [k for k, v in properties.items() if v is not False]
        seen = {tuple(k for k in o if properties.get(k, False) is not False) for o in orders}
        fronts: set[str] = set()
        for order in seen:
            # The shortest head after which the order is the cell's own; all of it when none
            # is (more fronts only allow more orders of the same members, each as valid).
            k = 0
            while k < len(order) and list(order[k:]) != [x for x in own if x not in order[:k]]:
                k += 1
            fronts.update(order[:k])
        if not fronts:
            return self.compile_flat(d, pointer)
        entry = {"terms": [[]], "fronts": sorted(fronts), "orders": sorted(list(o) for o in seen)}
        if "anyOf" in d or "oneOf" in d:
            # Each option merges with the cell in both orders, as with each of the expansion's orders.
            return self.compile_flat(dict(d, _clauses=presence_clauses([entry])), pointer)
        return self.compile_flat(dict(d, _presence=[*d.get("_presence", ()), entry]), pointer)

    def presence_constraint(
        self, rest: dict[str, Any], alternatives: Sequence[Any], source: dict[str, Any], *, one_of: bool = False
    ) -> dict[str, Any] | None:
        """`rest` AND any one of `alternatives`, when the alternatives only say which keys an
        object has and which class of value each takes (`presence.formula`: `required`,
        `false` properties, properties whose schema is `const`/`enum`/`type`, combined by
        `allOf`/`anyOf`/`oneOf`/`not`/`if`): `rest` with them as one more `_presence`
        constraint, which `compile_object` follows in its member states. Expanded instead,
        each alternative made a whole object, and so did each of its combinations with the
        other clauses (MaskBench Github_hard o37789: five `dependencies` and two `anyOf`s of
        `required` on one 20-member object compiled into 480 objects; o90971: three `if`s
        on which of three keys is non-null, 239). None when an alternative says more, under
        property_order="any", or beside `unevaluated*` (which reads what the passing
        alternatives evaluate); with `one_of`, exactly one alternative must hold.

        The constraint also keeps the keys the alternatives would have brought to the front of
        the object (`presence.fronts`), so that the orders an expansion accepts stay
        accepted, and then also where it came from (`source`: `{"clause": ...}` with
        `_expand`, or `{"kind": "anyOf"/"oneOf", "options": [...]}`) so that where the object
        cannot follow it, `presence_expanded` expands exactly what would have been expanded
        (its terms as `anyOf` options put the keys in another order)."""
        if self.any_order or "_unevaluatedProperties" in rest or "_unevaluatedItems" in rest or not alternatives:
            return None
        try:
            options = [presence.formula(a, ANNOTATIONS, 0, self.presence_formulas) for a in alternatives]
            terms, others = presence.exactly_one(options) if one_of else functools.reduce(presence.f_or, options)
        except presence.NotPresence:
            return None
        fronts = presence.fronts(list(alternatives))
        if rest.get("additionalProperties", self.additional_default) is not False or rest.get("patternProperties"):
            # Keys only the extras could spell are followed among them (`presence_extras`);
            # many such keys are whole objects in the alternatives, which compile better as
            # they are (MaskBench o17591: a oneOf of four objects on a discriminator).
            listed = {*rest.get("properties", ()), *rest.get("required", ())}
            named = {k for term in terms for k in term}.union(fronts)
            if len(named.difference(listed)) > PRESENCE_LOOSE_KEYS_MAX:
                return None
        out = dict(rest)
        if not others:
            if not terms:
                return None  # objects only, and none valid: expanded, for the contradiction's place
            types = _intersect_types(rest.get("type", ALL_TYPES), ["object"])
            if not types:
                return None
            out["type"] = types
        if {} not in terms:
            entry = {"terms": [presence.term_json(t) for t in terms], "fronts": fronts}
            if fronts:
                entry.update(source)
            out["_presence"] = [*rest.get("_presence", ()), entry]
        return out

    def compile_presence(self, constrained: dict[str, Any] | None, pointer: str, why: str, where: str) -> Sym | None | object:
        """`constrained` (from `presence_constraint`) compiled, `_NOT_EXACT` when there is
        none. When it accepts nothing, the contradiction is named as `why` at `where` (the
        clause or options that made it), not by the parts of the construction."""
        if constrained is None:
            return _NOT_EXACT
        reasons = len(self.empty_reasons)
        result = self.compile_flat(constrained, pointer)
        if result is None:
            del self.empty_reasons[reasons:]
            self.contradiction(why, where)
        return result

    def presence_expanded(self, d: dict[str, Any]) -> dict[str, Any]:
        """`d` with its `_presence` constraints as the clauses they stand for, to be expanded
        into alternatives (where an object cannot follow them in its states)."""
        out = {k: v for k, v in d.items() if k != "_presence"}
        entries = []
        for entry in d["_presence"]:
            kind = entry.get("kind")
            if kind is not None and kind not in out:
                # The anyOf/oneOf as it was, not taken back as a constraint (compile_options).
                out[kind] = entry["options"]
                self.presence_declined[id(entry["options"])] = entry["options"]
            else:
                entries.append(entry)
        out["_clauses"] = [*presence_clauses(entries), *d.get("_clauses", ())]
        if not out["_clauses"]:
            del out["_clauses"]
        return out

    def compile_enum(self, d: dict[str, Any], pointer: str) -> Sym | None:
        """The listed values that every other keyword accepts (checked value by value)."""
        if "_conflicts" in d:
            self.check_keywords(d, pointer)
        rest = {k: v for k, v in d.items() if k != "enum"}
        if all(k == "type" or k in ANNOTATIONS or (k[:1] not in "_$" and k not in _ASSERTING) for k in rest):
            # The commonest enum (`type` and annotations, or keys that are no keyword, beside
            # it): the checker would check the type alone, at ~1 µs a value (a 128-tool grammar
            # has hundreds of enums; service-schema 271 beside azure's `ignoreCase`).
            types = rest.get("type")
            types = TYPES if types is None else types if isinstance(types, list) else [types]
            values = [v for v in d["enum"] if _type_allows(types, v)]
        else:
            try:
                values = self.checker.valid_values(d["enum"], rest, pointer)
            except Undecidable as err:
                self.unsupported(f"enum/const values cannot be checked against the keywords beside them ({err})", pointer)
                types = d.get("type", TYPES)
                values = [v for v in d["enum"] if _type_allows(types, v)]
        # The strings are one lexeme (the core factors it into their trie); a lexeme per string
        # cost 10,000 lexemes for a 10,000-name enum.
        strings = [v for v in values if isinstance(v, str)]
        if len(strings) >= 2:
            union = [Sym.t(self.ir.add_lexeme(_json_strings_lexeme(strings)))]
            others = [self.value_syms(v, f"{pointer}/enum") for v in values if not isinstance(v, str)]
            return self.choice(f"{pointer or '/'}:enum", [union, *others])
        alternatives = [self.value_syms(v, f"{pointer}/enum") for v in values]
        return self.choice(f"{pointer or '/'}:enum", alternatives)

    def compile_type(self, t: str, d: dict[str, Any], pointer: str) -> Sym | None:
        excluded = d.get("_not_enum", [])
        if t == "null":
            return None if None in excluded else self.lexeme("null", "literal", "null")
        if t == "boolean":
            left = [b for b in (True, False) if not any(v is b for v in excluded)]
            if len(left) == 2:
                return self.lexeme("boolean", "regex", "true|false")
            return self.value_syms(left[0], pointer)[0] if left else None
        if t == "string":
            return self.compile_string(d, pointer)
        if t in ("integer", "number"):
            return self.compile_number(t, d, pointer)
        if t == "array":
            return self.compile_array(d, pointer)
        return self.compile_object(d, pointer)

    # ---- scalars -----------------------------------------------------------------------------

    def int_keyword(self, d: dict[str, Any], key: str, default: int | None, pointer: str) -> int | None:
        value = d.get(key, default)
        if value is None or value == default:
            return value
        if not _is_number(value) or value < 0 or not _is_integral(value):
            raise self.fail(f"{key} must be a non-negative integer, not {value!r}", f"{pointer}/{key}")
        return int(value)

    def count_bounds(self, d: dict[str, Any], low_key: str, high_key: str, pointer: str) -> tuple[int, int | None] | None:
        """(least, most) of a pair of count keywords (`minItems`/`maxItems`, ...); an absent one
        is its default (0, None) without `int_keyword`'s call. None, noted as a contradiction,
        when they cross."""
        low = (self.int_keyword(d, low_key, 0, pointer) or 0) if low_key in d else 0
        high = self.int_keyword(d, high_key, None, pointer) if high_key in d else None
        if high is not None and low > high:
            return self.contradiction(f"{low_key} {low} exceeds {high_key} {high}", pointer)
        return low, high

    def compile_string(self, d: dict[str, Any], pointer: str) -> Sym | None:
        bounds = self.count_bounds(d, "minLength", "maxLength", pointer)
        if bounds is None:
            return None
        min_length, max_length = bounds
        patterns = list(dict.fromkeys(([d["pattern"]] if "pattern" in d else []) + d.get("_patterns", [])))
        bodies: list[str] = []
        lookahead_nots: list[str] = []
        for i, pattern in enumerate(patterns):
            if not isinstance(pattern, str):
                raise self.fail("pattern must be a string", f"{pointer}/pattern")
            try:
                musts, excluded = pattern_parts(pattern)
            except GrammarError as err:
                self.unsupported(str(err), f"{pointer}/pattern")
                continue
            bodies += ['"' + body + '"' for body in musts]
            lookahead_nots += ['"' + body + '"' for body in excluded]
        fmt = d.get("format")
        if fmt is not None and fmt not in FORMAT_REGEXES:
            self.warn(f"unknown format {fmt!r}: any string is accepted", f"{pointer}/format")
        elif fmt is not None:
            bodies.append('"' + FORMAT_REGEXES[fmt] + '"')  # beside patterns: intersected with them
        try:
            length = string_regex(min_length, max_length)
        except GrammarError as err:
            raise self.fail(str(err), f"{pointer}/minLength") from None
        # Excluded values (`not` of enum/const/pattern/format): the lexeme's not_patterns.
        nots = [_json_string_regex(v) for v in d.get("_not_enum", []) if isinstance(v, str)]
        nots += ['"' + body + '"' for body in d.get("_not_bodies", [])] + lookahead_nots
        if not bodies and not nots:
            if min_length == 0 and max_length is None:
                return self.string()
            upper = "" if max_length is None else max_length
            # The bound alone: the lexeme says so too (`Lexeme.string_length`), and masks near
            # its end take the text tokens by their characters (docs/trie.md).
            return self.lexeme(f"string{{{min_length},{upper}}}", "regex", length, string_length=True)
        # One pattern (or format) and the length: the lexeme may say so (`Lexeme.string_length`),
        # since both spell only JSON strings, and masks then drop a bound no token can reach.
        string_length = len(bodies) == 1 and not nots and (min_length > 0 or max_length is not None)
        if not bodies or min_length > 0 or max_length is not None:
            bodies.append(length)  # intersected with the pattern/format (Lexeme.and_patterns)
        name = f"string:{pointer or '/'}"
        return self.lexeme(
            name, "regex", bodies[0], and_patterns=tuple(bodies[1:]), not_patterns=tuple(dict.fromkeys(nots)),
            string_length=string_length,
        )

    def compile_number(self, t: str, d: dict[str, Any], pointer: str) -> Sym | None:
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if key in d and not _is_number(d[key]):
                raise self.fail(f"{key} must be a number, not {d[key]!r}", f"{pointer}/{key}")
        lo, lo_open = d.get("minimum"), False
        if "exclusiveMinimum" in d and (lo is None or d["exclusiveMinimum"] >= lo):
            lo, lo_open = d["exclusiveMinimum"], True
        hi, hi_open = d.get("maximum"), False
        if "exclusiveMaximum" in d and (hi is None or d["exclusiveMaximum"] <= hi):
            hi, hi_open = d["exclusiveMaximum"], True
        # Intersected (multipleOf, non-integer, not multipleOf of an integer) and excluded (not
        # enum/const, other not multipleOf) regexes. An exponent could spell an excluded value in
        # unboundedly many ways and breaks digit-wise divisibility, so such numbers are written
        # without one (a subset).
        ands: list[str] = []
        nots = [_number_spelling_regex(v) for v in d.get("_not_enum", []) if _is_number(v)]
        multiple = d.get("multipleOf")
        # Every multiple of m is one of an excluded e when m/e is an integer, and only then
        # (m·n with m/e not an integer escapes e for n = 1): no number is left. Said here, by
        # arithmetic; the core would have to search the product of their residues to see it.
        for excluded in d.get("_not_multiple_of", []) if _is_number(multiple) and multiple > 0 else []:
            if _is_number(excluded) and excluded > 0 and (exact_number(multiple) / exact_number(excluded)).denominator == 1:
                return self.contradiction(f"every multiple of {multiple} is a multiple of {excluded}, which is excluded", pointer)
        if multiple is not None and not (t == "integer" and multiple == 1):
            regexes = multiple_of_regexes(multiple)
            if regexes is None:
                # Too large a divisor for a residue term: between two bounds its multiples are
                # few, and then they are the values, listed.
                listed = _bounded_multiples(multiple, lo, lo_open, hi, hi_open)
                if listed == []:
                    return self.contradiction(f"no multiple of {multiple} lies within the bounds", pointer)
                if listed is None:
                    self.warn(f"multipleOf {multiple} is ignored (its divisibility automaton is too large)", f"{pointer}/multipleOf")
                else:
                    ands.append(_alt([_number_spelling_regex(v) for v in listed]))
            else:
                ands.extend(regexes)
        for excluded in d.get("_not_multiple_of", []):
            rx = not_multiple_of_regex(excluded)
            if rx is not None:
                ands.append(rx)  # a plain term of the residues left, rather than a complement
                continue
            rx = multiple_of_regex(excluded)
            if rx is None:
                listed = _bounded_multiples(excluded, lo, lo_open, hi, hi_open) if _is_number(excluded) else None
                if listed is None:
                    self.unsupported(f"not multipleOf {excluded}: its divisibility automaton is too large", pointer)
                else:
                    nots.extend(_number_spelling_regex(v) for v in listed)
            else:
                nots.append(rx)
        if d.get("_non_integer"):
            if t == "integer":
                return None
            ands.append(NON_INTEGER_REGEX)
        if t == "integer":
            lo_i = None if lo is None else (math.floor(lo) + 1 if lo_open else math.ceil(lo))
            hi_i = None if hi is None else (math.ceil(hi) - 1 if hi_open else math.floor(hi))
            name = "integer" if lo_i is None and hi_i is None else f"integer[{lo_i},{hi_i}]"
            base = INTEGER_REGEX if lo_i is None and hi_i is None else int_range_regex(lo_i, hi_i)
        elif lo is None and hi is None:
            name = "number"
            base = NUMBER_REGEX_NO_EXPONENT if ands or nots else NUMBER_REGEX
        else:
            integral = all(b is None or _is_integral(b) for b in (lo, hi))
            decimal = False if integral else decimal_range_regex(lo, lo_open, hi, hi_open)
            if decimal is not False:  # non-integer bounds, digit by digit (None: an empty interval)
                base = decimal
                name = f"number{'(' if lo_open else '['}{lo},{hi}{')' if hi_open else ']'}"
            else:
                if not integral:  # a bound with more than DECIMAL_BOUND_DIGITS_MAX fraction digits
                    if lo is not None and not float(lo).is_integer():
                        self.warn(f"the lower bound {lo} is rounded down to an integer", pointer)
                        lo, lo_open = math.floor(lo), False
                    if hi is not None and not float(hi).is_integer():
                        self.warn(f"the upper bound {hi} is rounded up to an integer", pointer)
                        hi, hi_open = math.ceil(hi), False
                lo_i = None if lo is None else int(lo)
                hi_i = None if hi is None else int(hi)
                base = number_range_regex(lo_i, lo_open, hi_i, hi_open)
                name = f"number{'(' if lo_open else '['}{lo_i},{hi_i}{')' if hi_open else ']'}"
                if base is not None and not ands and not nots and (lo_i, hi_i).count(None) == 1 and 0 in (lo_i, hi_i):
                    # One bound, at zero: numbers with an exponent too, by their sign.
                    base = f"{base}|{_EXPONENT_BY_SIGN[(lo_i == 0, lo_open if lo_i == 0 else hi_open)]}"
        if base is None:
            bounds = ", ".join(f"{k} {d[k]}" for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum") if k in d)
            return self.contradiction(f"no {'integer' if t == 'integer' else 'number'} meets the bounds ({bounds})", pointer)
        if ands or nots:
            name += f":{pointer or '/'}"
        return self.lexeme(name, "regex", base, and_patterns=tuple(dict.fromkeys(ands)), not_patterns=tuple(dict.fromkeys(nots)))

    # ---- values ------------------------------------------------------------------------------

    def value_syms(self, value: Any, pointer: str, depth: int = 0) -> list[Sym]:
        """The symbols of one constant JSON value (enum/const), built structurally."""
        if depth > NESTING_DEPTH_MAX:
            raise self.fail(f"an enum/const value nests deeper than {NESTING_DEPTH_MAX}", pointer)
        if isinstance(value, str):
            return [Sym.t(self.ir.add_lexeme(_json_string_lexeme(value)))]
        if isinstance(value, list):
            out = [self.lbracket]
            for i, item in enumerate(value):
                out += ([self.comma] if i else []) + self.value_syms(item, pointer, depth + 1)
            return out + [self.rbracket]
        if isinstance(value, dict) and self.any_order and len(value) > 1:
            members = []
            for key, item in value.items():
                syms = self.value_syms(item, pointer, depth + 1)
                sym = self.choice(f"{pointer or '/'}:value", [syms])
                members.append((self.key_symbol(key), sym, True))
            body = self.object_body_any_order(members, None, 0, None, pointer)
            assert body is not None  # every member is a value: satisfiable
            return [body]
        if isinstance(value, dict):
            out = [self.lbrace]
            for i, (key, item) in enumerate(value.items()):
                out += [self.comma] if i else []
                out += [self.key_symbol(key), self.colon]
                out += self.value_syms(item, pointer, depth + 1)
            return out + [self.rbrace]
        if value is None or isinstance(value, bool):
            text = json.dumps(value)
            return [self.lexeme(text, "literal", text)]
        if _is_number(value):
            if _is_integral(value) and abs(value) < 10**16:
                text = str(int(value))
                return [self.lexeme(text, "regex", text + _FRACTION_ZERO)]
            text = json.dumps(value)
            return [self.lexeme(text, "literal", text)]
        raise self.fail(f"an enum/const value that is not JSON: {value!r}", pointer)

    def string(self) -> Sym:
        if self.string_symbol is None:
            self.string_symbol = self.lexeme("string", "regex", string_regex(0, None))
        return self.string_symbol

    def any(self) -> int:
        """The nonterminal of any JSON value (built once)."""
        if self.any_value is not None:
            return self.any_value
        nonterminals = self.ir.nonterminals
        value = self.any_value = len(nonterminals)
        obj, members, arr, items = value + 1, value + 2, value + 3, value + 4
        nonterminals += _ANY_NAMES
        self.productive_made += len(_ANY_NAMES)  # (`any` has rules of lexemes, the others rules of those and `any`)
        string = self.string()
        number = self.lexeme("number", "regex", NUMBER_REGEX)
        boolean = self.lexeme("boolean", "regex", "true|false")
        null = self.lexeme("null", "literal", "null")
        v, o, m, a, i = Sym.n(value), Sym.n(obj), Sym.n(members), Sym.n(arr), Sym.n(items)
        lbrace, rbrace, lbracket, rbracket, colon, comma = (
            self.lbrace, self.rbrace, self.lbracket, self.rbracket, self.colon, self.comma
        )
        # The 14 rules as `rules` would add them, written out (five `rules` calls were half
        # of this method's time, and it runs for nearly every schema).
        self.symbol_count += _ANY_SYMBOL_COUNT
        if self.symbol_count > GRAMMAR_SYMBOL_COUNT_MAX:
            raise self.too_large()
        self.ir.rules += [_new_tuple(Rule, rule) for rule in (
            (value, (string,)), (value, (number,)), (value, (boolean,)), (value, (null,)), (value, (o,)), (value, (a,)),
            (obj, (lbrace, rbrace)), (obj, (lbrace, m, rbrace)),
            (members, (string, colon, v)), (members, (m, comma, string, colon, v)),
            (arr, (lbracket, rbracket)), (arr, (lbracket, i, rbracket)),
            (items, (v,)), (items, (i, comma, v)),
        )]
        return value

    # ---- objects -----------------------------------------------------------------------------

    def compile_object(self, d: dict[str, Any], pointer: str) -> Sym | None:
        """Listed properties in `properties` order, then `required` names not listed, then any
        other keys (pattern and additional properties), counted when min/maxProperties ask."""
        properties: dict[str, Any] = d.get("properties", {})
        required = d.get("required", [])
        for key in required:
            if not isinstance(key, str):
                raise self.fail(f"required lists a non-string {key!r}", f"{pointer}/required")
        patterns: dict[str, Any] = d.get("patternProperties", {})
        names = d.get("propertyNames", True)
        bounds = self.count_bounds(d, "minProperties", "maxProperties", pointer)
        if bounds is None:
            return None
        low, high = bounds
        key_parts = ((), ()) if names is True else self.key_constraint(names, pointer)
        witnesses = (
            self.kept_witnesses(d["_witness"], "patternProperties/propertyNames/additionalProperties on one object", pointer)
            if "_witness" in d else []
        )
        # (key lexeme, value symbol, required)
        members: list[tuple[Sym, Sym, bool]] = []
        variants: list[list[tuple[Sym, int]]] = []  # per member: (value symbol, witnesses it meets)
        member_keys: list[str] = []
        member_schemas: list[tuple[Any, str]] = []  # what `object_body_presence` splits by value class
        taken = list(properties) + [k for k in required if k not in properties]
        any_name = _trivial_schema(names)
        needed = set(required) if len(required) > 8 else required
        key_symbols = self.key_symbols

        def value_schema_of(key: str, listed: bool) -> tuple[Any, bool]:
            """The schema of key's value (its `properties` entry when listed, and the
            `patternProperties` it matches, else `additionalProperties`), and whether a
            pattern matched."""
            matching = [s for p, s in patterns.items() if self.key_matches(p, key, pointer)] if patterns else []
            parts = [properties[key], *matching] if listed else matching or [d.get("additionalProperties", self.additional_default)]
            return (parts[0] if len(parts) == 1 else {"allOf": parts}), bool(matching)

        # A listed member whose value `compile` takes directly (a plain type beside annotations
        # and inert keys, `plain_symbol`, or a `$ref` beside annotations: 870 and 1,264 of the
        # 2,890 members MaskBench kb_1161's objects compile; one-string enums are left to
        # `compile`) gets its symbol here, without the call or its pointer (`where` serves only the general path,
        # the contradictions, the witnesses and `object_body_presence`, which get none of
        # these). What `compile` records for the limits is recorded the same way: the member's
        # pointer depth is this object's plus two (`/properties/name`, the name escaped).
        direct = not patterns and any_name and not witnesses and "_presence" not in d
        member_depth = pointer.count("/") + 2
        if member_depth > NESTING_DEPTH_MAX:
            direct = False  # (`compile` raises there)
        ref_targets, ref_nonterminals = self.ref_targets, self.ref_nonterminals
        for key in taken:
            listed = key in properties
            if direct and listed:
                schema = properties[key]
                sym = None
                if type(schema) is dict:
                    kind = schema.get("type")
                    if type(kind) is str:
                        if kind in _PLAIN_TYPES:
                            sym = self.plain_symbol(schema, kind)
                    elif "$ref" in schema and _REF_AND_ANNOTATIONS.issuperset(schema):
                        # (`ref_symbol`, but the member's pointer, which a reference met the
                        # first time is resolved with and its errors name, made only then; the
                        # caches' hits without the calls)
                        ref = schema["$ref"]
                        target = ref_targets.get(ref) if type(ref) is str else None
                        if target is None:
                            target = self.ref_pointer(ref, f"{pointer}/properties/{key.replace('~', '~0').replace('/', '~1')}")
                        nt = ref_nonterminals.get(target)
                        sym = Sym.n(self.ref_nonterminal(target) if nt is None else nt)
                if sym is not None:
                    if member_depth > self.depth_high:
                        self.depth_high = member_depth
                    members.append((key_symbols.get(key) or self.key_symbol(key), sym, key in needed))
                    member_keys.append(key)
                    continue
            where = f"{pointer}/properties/{key.replace('~', '~0').replace('/', '~1')}" if listed else f"{pointer}/required"
            # (value_schema_of's answer for a listed key when there are no patterns, without the call)
            schema = properties[key] if listed and not patterns else value_schema_of(key, listed)[0]
            allowed = any_name or self.name_allowed(key, names, pointer)
            sym = self.compile(schema, where) if allowed else None
            if sym is None:
                if key in needed:
                    why = "accepts no value" if allowed else "is not allowed by propertyNames"
                    return self.contradiction(f"the required property {key!r} {why}", where)
                continue
            members.append((key_symbols.get(key) or self.key_symbol(key), sym, key in needed))
            member_keys.append(key)
            member_schemas.append((schema, where))
            if witnesses:
                variants.append([(sym, 0), *self.witness_values(key, schema, witnesses, where)])
        regions = [] if key_parts is None else self.key_regions(d, taken, key_parts, pointer)
        possible = self.possible_key_count(d, members, regions, names, pointer)
        if possible is not None and possible < low:
            return self.contradiction(f"minProperties {low} but only {possible} property names are possible", pointer)
        pair = self.pair_nonterminal(regions, pointer) if regions else None
        if "_presence" in d:
            # Keys a constraint names must stand where the members do: one the extras could
            # also spell would be in the text where the states do not see it.
            named = set().union(*(presence.keys_named(terms) for terms in d["_presence"]))
            body: Any = _NOT_EXACT
            if not (witnesses or self.any_order or low or high is not None):
                loose: list[tuple[str, Sym, Sym, Any, str]] = []
                if regions and not named.issubset(taken):
                    # Named keys only the extras can spell: their own pairs among the extras.
                    missing = sorted(named.difference(taken))
                    for key in missing:
                        schema, matched = value_schema_of(key, False)
                        where = f"{pointer}/patternProperties" if matched else f"{pointer}/additionalProperties"
                        sym = self.compile(schema, where) if any_name or self.name_allowed(key, names, pointer) else None
                        if sym is not None:
                            loose.append((key, self.key_symbol(key), sym, schema, where))
                    others = self.key_regions(d, [*taken, *missing], key_parts, pointer)
                    pair = self.pair_nonterminal(others, pointer) if others else None
                body = self.object_body_presence(members, member_keys, member_schemas, d["_presence"], pair, pointer, loose)
            if body is _NOT_EXACT:
                return self.compile_flat(dict(self.presence_expanded(d), type=["object"]), pointer)
            return body  # type: ignore[return-value]
        if witnesses:
            pairs = [] if pair is None else [(Sym.n(pair), 0), *self.witness_pairs(d, taken, key_parts, witnesses, pointer)]
            if self.any_order and (len(members) > 1 or (members and pairs)):
                witness = (variants, pairs, len(witnesses))
                return self.object_body_any_order(members, pair, low, high, pointer, witness)
            return self.object_body_witness(members, variants, pairs, len(witnesses), low, high, pointer)
        if self.any_order and (len(members) > 1 or (members and pair is not None)):
            return self.object_body_any_order(members, pair, low, high, pointer)
        if "_orders" in d:
            # An anyOf/oneOf option's merge in the expansion's key orders (`option_cell`).
            return self.object_bodies(members, member_keys, d["_orders"], pair, low, high, pointer)
        return self.object_body(members, pair, low, high, pointer)

    def object_bodies(
        self, members: list[tuple[Sym, Sym, bool]], member_keys: list[str], orders: list[list[str]],
        pair: int | None, low: int, high: int | None, pointer: str,
    ) -> Sym | None:
        """One body per key order over the same members (`member_keys` their names; a member
        an order does not name stays last, in its place), any of them: an anyOf/oneOf
        option's merge in the expansion's two orders (`option_cell`, `narrowed_cell`)."""
        bodies = []
        for order in orders:
            if order == member_keys:  # (the members in this order already: `narrowed_cell`'s first)
                body = self.object_body(members, pair, low, high, pointer)
                bodies.append([body] if body is not None else None)
                continue
            rank = dict(zip(order, itertools.count()))  # (C-level passes: 238 objects of 11 members, two orders each)
            ranks = list(map(rank.get, member_keys, itertools.count(len(order))))  # (unnamed: last, in place)
            ranked = sorted(range(len(members)), key=ranks.__getitem__)
            body = self.object_body([members[i] for i in ranked], pair, low, high, pointer)
            bodies.append([body] if body is not None else None)
        return self.choice(f"{pointer or '/'}:orders", bodies)

    def pair_nonterminal(self, regions: list[tuple[Sym, Sym]], pointer: str) -> int:
        """The `key: value` pairs of an object's key regions: one nonterminal per set of
        regions in the whole schema (their key lexemes are shared whatever their names), so
        objects alike in their other keys also share their extras and the states after their
        last members."""
        pair = self.memo.get(("pair", *regions))
        if pair is None:
            pair = self.memo[("pair", *regions)] = self.nonterminal(
                f"{pointer or '/'}:pair", [[k, self.colon, v] for k, v in regions]
            )
        return pair

    def witness_values(self, key: str, schema: Any, witnesses: list[dict[str, Any]], where: str) -> list[tuple[Sym, int]]:
        """The value symbols of listed property `key` that meet witnesses: one per non-empty
        set of the witnesses whose key region holds `key` (its value then meets all of theirs)."""
        holding = []
        for bit, witness in enumerate(witnesses):
            try:
                if self.checker.valid(key, witness["keys"], where):
                    holding.append(bit)
            except Undecidable as err:
                self.unsupported(f"a negated object keyword cannot be checked on {key!r} ({err})", where)
        out = []
        for mask in range(1, 1 << len(holding)):
            bits = [b for i, b in enumerate(holding) if mask >> i & 1]
            sym = self.compile({"allOf": [schema, *(witnesses[b]["value"] for b in bits)]}, where)
            if sym is not None:
                out.append((sym, sum(1 << b for b in bits)))
        return out

    def witness_pairs(
        self,
        d: dict[str, Any],
        taken: list[str],
        key_parts: tuple[tuple[str, ...], tuple[str, ...]],
        witnesses: list[dict[str, Any]],
        pointer: str,
    ) -> list[tuple[Sym, int]]:
        """The `key: value` pairs beyond the listed properties that meet witnesses: for each
        non-empty set of witnesses, the object's key regions intersected with their key regions,
        the values with their values."""
        out = []
        for mask in range(1, 1 << len(witnesses)):
            bits = [b for b in range(len(witnesses)) if mask >> b & 1]
            ands, nots = list(key_parts[0]), list(key_parts[1])
            for b in bits:
                parts = self.key_constraint(witnesses[b]["keys"], pointer, _WITNESS_KEYS)
                if parts is None:
                    break
                ands += parts[0]
                nots += parts[1]
            else:
                values = [witnesses[b]["value"] for b in bits]
                regions = self.key_regions(d, taken, (tuple(ands), tuple(nots)), pointer, values)
                if regions:
                    pair = self.nonterminal(f"{pointer or '/'}:pair{mask}", [[k, self.colon, v] for k, v in regions])
                    out.append((Sym.n(pair), mask))
        return out

    def possible_key_count(
        self, d: dict[str, Any], members: list[tuple[Sym, Sym, bool]], regions: list[Any], names: Any, pointer: str
    ) -> int | None:
        """How many distinct keys an object can have, when that is finite (no other keys, or
        `propertyNames` listing its names); None otherwise."""
        if not regions:
            return len(members)
        flat = None if _trivial_schema(names) else self.flatten(names, f"{pointer}/propertyNames")
        if flat is None or "enum" not in flat:
            return None
        listed = {k for k in d.get("properties", {})} | set(d.get("required", []))
        return len(listed | {v for v in flat["enum"] if isinstance(v, str) and self.name_allowed(v, names, pointer)})

    def name_allowed(self, key: str, names: Any, pointer: str) -> bool:
        """Whether a property name satisfies `propertyNames`."""
        if _trivial_schema(names):
            return True
        try:
            return self.checker.valid(key, names, f"{pointer}/propertyNames")
        except Undecidable as err:
            self.unsupported(f"propertyNames cannot be checked on {key!r} ({err})", f"{pointer}/propertyNames")
            return True

    def key_constraint(
        self, names: Any, pointer: str, what: str = "propertyNames"
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """`propertyNames` (or another schema of keys) as (and, not) regexes on key lexemes;
        None when no key is allowed."""
        if _trivial_schema(names):
            return (), ()
        where = f"{pointer}/propertyNames" if what == "propertyNames" else pointer
        flat = self.flatten(names, where)
        flat = None if flat is None else self.merge(flat, {"type": ["string"]}, where)
        if flat is None:
            return None
        if "enum" in flat:
            values = [v for v in flat["enum"] if isinstance(v, str) and self.name_allowed(v, flat, pointer)]
            if not values:
                return None
            return (_alt([_json_string_regex(v) for v in values]),), ()
        sym = self.compile_flat(flat, where)
        if sym is None:
            return None
        if not sym.terminal:
            if what == _WITNESS_KEYS:
                # The witness member's key is then any key (its value still breaks the schema).
                self.warn(f"{what}: the keys are not one string lexeme, so any key may be the witness's (a superset)", where)
            else:
                self.unsupported(f"{what} must describe a single string lexeme here", where)
            return (), ()
        lexeme = self.ir.lexemes[sym.index]
        return (_key_regex(lexeme), *lexeme.and_patterns), lexeme.not_patterns

    def key_regions(
        self,
        d: dict[str, Any],
        taken: list[str],
        key_parts: tuple[tuple[str, ...], tuple[str, ...]],
        pointer: str,
        values: Sequence[Any] = (),
    ) -> list[tuple[Sym, Sym]]:
        """(key lexeme, value symbol) for the keys beyond the listed ones: one region per set
        of `patternProperties` patterns a key matches (all subsets when there are at most
        `PATTERN_SUBSETS_MAX` patterns, else one pattern each, keys matching several refused),
        and one for `additionalProperties` (keys matching no pattern). Listed names are
        excluded from every region; `values` (witnesses' schemas) constrain every value."""
        key_ands, key_nots = key_parts
        if not d.get("patternProperties"):
            extra = d.get("additionalProperties", self.additional_default)
            if extra is False:
                return []  # a closed object: no other key (its taken names need no regexes)
            if not (values or key_ands or key_nots):
                # The commonest open object (MaskBench kb_1161: 516 of 526): one region, the
                # keys not listed, what the steps below give without their pieces and subsets.
                value = self.compile(extra, f"{pointer}/additionalProperties")
                if value is None:
                    return []
                key = self.string()
                if taken:
                    lexeme = Lexeme(f"key:{pointer or '/'}/additionalProperties", "regex", self.ir.lexemes[key.index].value,
                                    not_patterns=tuple([_json_string_regex(k) for k in taken]))
                    key = Sym.t(self.ir.add_shared_lexeme(lexeme))
                return [(key, value)]
        name_nots = [_json_string_regex(k) for k in taken]
        # (pointer, the regexes a key matching the pattern matches, those it does not, value
        # schema): one regex for a plain pattern; more for a pattern with lookaheads.
        found: list[tuple[str, tuple[str, ...], tuple[str, ...], Any, str]] = []
        lookahead: int | None = None  # the one pattern with lookaheads, if any
        for pattern, schema in d.get("patternProperties", {}).items():
            where = f"{pointer}/patternProperties/{_escape_pointer(pattern)}"
            try:
                musts, excluded = pattern_parts(pattern)
            except GrammarError as err:
                self.unsupported(str(err), where)
                continue
            if len(musts) > 1 or excluded:  # lookaheads
                if lookahead is not None:
                    self.unsupported(f"pattern {pattern!r}: lookaheads in a second pattern (one pattern with lookaheads "
                                     f"per patternProperties is supported)", where)
                    continue
                lookahead = len(found)
            found.append((where, tuple(f'"{m}"' for m in musts), tuple(f'"{n}"' for n in excluded), schema, pattern))
        if len(found) > PATTERN_PROPERTIES_MAX:
            # Each key region excludes the other patterns' keys: their count squared in
            # patterns (2,000 of them: 4 million, seconds of Python before the core's fuel).
            raise self.fail(
                f"patternProperties lists {len(found):,} patterns; at most {PATTERN_PROPERTIES_MAX:,} are supported "
                "(each pattern's keys exclude every other's)",
                f"{pointer}/patternProperties",
            )
        if len(found) <= PATTERN_SUBSETS_MAX:
            subsets = [[i for i in range(len(found)) if mask >> i & 1] for mask in range(1, 1 << len(found))]
        else:
            subsets = [[i] for i in range(len(found))]
            self.warn(
                f"more than {PATTERN_SUBSETS_MAX} patternProperties: a key matching several patterns is refused",
                f"{pointer}/patternProperties",
            )

        def outside(subset: Sequence[int]) -> list[tuple[list[str], list[str]]]:
            """The keys matching none of the patterns outside `subset`, as disjoint pieces
            (regexes matched, regexes not matched): a plain pattern is one exclusion; the
            complement of the pattern with lookaheads (M₁ ∩ … ∩ ¬N₁ ∩ …) is the union of
            ¬M₁, M₁ ∩ ¬M₂, …, M ∩ N₁, M ∩ ¬N₁ ∩ N₂, …"""
            plain = [found[i][1][0] for i in range(len(found)) if i not in subset and i != lookahead]
            if lookahead is None or lookahead in subset:
                return [([], plain)]
            musts, excluded = found[lookahead][1], found[lookahead][2]
            pieces = [(list(musts[:k]), plain + [musts[k]]) for k in range(len(musts))]
            pieces += [(list(musts) + [excluded[j]], plain + list(excluded[:j])) for j in range(len(excluded))]
            return pieces

        regions: list[tuple[Sym, Sym]] = []
        for subset in subsets:
            schemas = [found[i][3] for i in subset] + list(values) + _side_extras(d, [found[i][4] for i in subset])
            value = self.compile(schemas[0] if len(schemas) == 1 else {"allOf": schemas}, found[subset[0]][0])
            if value is None:
                continue
            ands = [m for i in subset for m in found[i][1]]
            inner_nots = [n for i in subset for n in found[i][2]]
            for piece_ands, piece_nots in outside(subset):
                lexeme = Lexeme(
                    f"key:{found[subset[0]][0]}" + (f"+{len(subset) - 1}" if len(subset) > 1 else ""),
                    "regex",
                    ands[0],
                    and_patterns=tuple(ands[1:] + piece_ands) + key_ands,
                    not_patterns=tuple(inner_nots + piece_nots + name_nots) + key_nots,
                )
                regions.append((Sym.t(self.ir.add_shared_lexeme(lexeme)), value))  # shared: see compile_object's pair
        extra = d.get("additionalProperties", self.additional_default)
        if values and extra is not False:
            extra = {"allOf": [extra, *values]}
        value = None if extra is False else self.compile(extra, f"{pointer}/additionalProperties")
        if value is not None:
            base = self.ir.lexemes[self.string().index]
            for piece_ands, piece_nots in outside(()):
                nots = piece_nots + name_nots
                if not nots and not piece_ands and not key_ands and not key_nots:
                    key = self.string()
                else:
                    name = f"key:{pointer or '/'}/additionalProperties"
                    lexeme = Lexeme(name, "regex", base.value, and_patterns=tuple(piece_ands) + key_ands,
                                    not_patterns=tuple(nots) + key_nots)
                    key = Sym.t(self.ir.add_shared_lexeme(lexeme))
                regions.append((key, value))
        return regions

    def object_body(self, members: list[tuple[Sym, Sym, bool]], pair: int | None, low: int, high: int | None, pointer: str) -> Sym | None:
        """`{ members, extras }` with the member and extra count in [low, high].

        State (i, c): members i.. remain and c properties came before (so a comma leads when
        c > 0). Without count bounds c is 0 or 1; with them c counts up to `high`, or up to
        `low` when there is no `high` (past `low` the count no longer matters). Extras (`pair`)
        come last, as a left-recursive repetition bounded by what the count leaves.
        """
        n = len(members)
        required_count = sum(map(_THIRD, members))  # (C-level: members are (key, value, required))
        if high is not None and required_count > high:
            return None
        if low <= required_count:
            low = 0
        if high is not None and pair is None and high >= n:
            high = None
        if low == 0 and high is None:
            return self.object_body_open(members, pair, pointer)
        top = max(low, 1) if high is None else high
        name = pointer or "/"
        low_states = min(top, n) + 1  # the states (i, c <= i) built below: i + 1 for i < top, top + 1 after
        if low_states * (low_states + 1) // 2 + (n - low_states + 1) * (top + 1) > OBJECT_STATE_COUNT_MAX:
            raise self.fail(
                f"minProperties/maxProperties over {n} properties need more than {OBJECT_STATE_COUNT_MAX} grammar states; "
                "loosen the bounds",
                pointer,
            )
        unit = None if pair is None else (self.comma, Sym.n(pair))

        # State (i, c) depends on members i.. and the bounds and extras only, so it is shared
        # with every object of this schema that has the same: `suffix[i]` numbers that (members
        # from i, bounds, extras), and the states' alternatives and sequences are kept by
        # (suffix, c) for the whole translation. The expansions of if/then/else and of anyOf
        # merged with its siblings compile one object per alternative, alike but for a few
        # members (MaskBench ui5.yaml: 1,478 objects).
        suffix_ids, table, seqs = self.object_suffixes, self.object_alternatives, self.object_sequences
        suffix = [0] * (n + 1)
        suffix[n] = suffix_ids.setdefault((low, high, top, unit), len(suffix_ids))
        for i in range(n - 1, -1, -1):
            suffix[i] = suffix_ids.setdefault((members[i], suffix[i + 1]), len(suffix_ids))
        # Only c <= i is reachable at state (i, c) (c counts members before i): a bound of
        # 10,000 over a few members made 10,000 tails of 10,000 repeats (MaskBench tokenlist).
        # Nor is c below the required members before i (`floor[i]`, at most `top`): after a
        # required first member, the states with nothing written before (c = 0) were half of
        # an object's, built but never reached (MaskBench service-schema: 238 such objects of
        # 10 members). A state another object reaches is built by that object's loop: its
        # floor is its own, and every state a reachable one leads to is reachable.
        floor = [0] * (n + 1)
        for i in range(n):
            floor[i + 1] = min(top, floor[i] + 1) if members[i][2] else floor[i]
        for c in range(floor[n], min(top, n) + 1):
            if (suffix[n], c) not in table:
                extras = self.object_extras(name, unit, c, low, high)
                table[(suffix[n], c)] = None if extras is None else [tuple(alt) for alt in extras]

        state_sequence = self.state_sequence
        comma, colon = self.comma, self.colon
        # What stands for the state after member i (`state_sequence`) is looked up inline,
        # its label formatted only when it is new: objects share most of their states
        # (~4,500 states in MaskBench o48661, each met several times), and the lookups are
        # most of an object's work.
        for i in range(n - 1, -1, -1):
            here, following = suffix[i], suffix[i + 1]
            first = later = None
            for c in range(floor[i], min(top, i) + 1):
                state = (here, c)
                if state in table:
                    continue
                if first is None:
                    # Tuples, as the sequences in `table` are: the IR's rules take them as they
                    # are (no copy per rule, and nothing for `release` to free but the lists).
                    key_sym, value_sym, is_required = members[i]
                    first = (key_sym, colon, value_sym)  # the member when none came before (c = 0)
                    later = (comma, key_sym, colon, value_sym)
                alts = []
                after = c + 1 if high is not None or c < top else top
                if after <= top:
                    rest = seqs.get((following, after), seqs)
                    if rest is seqs:
                        rest = state_sequence(table, seqs, (following, after), f"{name}:after{i + 1}.{after}")
                    if rest is not None:
                        alts.append((later if c > 0 else first) + rest)
                if not is_required:
                    skip = seqs.get((following, c), seqs)
                    if skip is seqs:
                        skip = state_sequence(table, seqs, (following, c), f"{name}:after{i + 1}.{c}")
                    if skip is not None:
                        alts.append(skip)
                table[state] = alts or None
        top_alts = table[(suffix[0], 0)]
        if top_alts is None:
            return None
        return self.choice(f"{name}:object", [[self.lbrace, *alt, self.rbrace] for alt in top_alts])

    def object_body_open(self, members: list[tuple[Sym, Sym, bool]], pair: int | None, pointer: str) -> Sym | None:
        """`{ members, extras }` without count bounds, in about two rules per member where
        `object_body`'s states (i, c) took four.

        After a first property every later one has its comma, so the body from member i on
        (`T[i]`) is the flat sequence `X[i] … X[n-1] E`: X[j] is `, key: value` for a
        required member and, for an optional one, a nullable nonterminal `O[j] → ε | , key:
        value` made once per (key, value) in the schema; E is the extras `(, pair)*`. Before
        it the object holds nothing but `{`, so the body is `m[j] T[j+1]` for the member j
        written first, any of the optional members before the first required one r and r
        itself (or, with no required member, none: the extras or nothing). `T[i] → X[i]
        T[i+1]` for i <= r, one rule each and shared by every object with the same members
        from i on; `T[r+1]` is the flat rest. The same language as the states: (i, 1) is
        `X[i] (i+1, 1)`, and (0, 0) unrolls to the first member written.
        """
        n = len(members)
        name = pointer or "/"
        comma, colon = self.comma, self.colon
        tails, optional = self.open_tails, self.open_optional
        # The first required member, in C-level passes (the flags are bools: `compile_object`).
        required = list(map(_THIRD, members))
        r = required.index(True) if True in required else n
        unit = None if pair is None else (comma, Sym.n(pair))
        # Tail ids: a member and the id of what follows it, or the extras; equal ids are equal
        # tails (by the members' symbols, compared as tuples, not by hashes).
        suffixes = self.object_suffixes
        new_id = suffixes.setdefault
        ids = [0] * (n + 1)
        ids[n] = new_id(("open", unit), len(suffixes))
        for i in range(n - 1, r, -1):
            ids[i] = new_id((members[i], ids[i + 1]), len(suffixes))
        tail = tails.get(ids[r + 1] if r < n else ids[n])
        if tail is None:
            # The flat rest after the first required member (or the extras alone).
            seq: list[Sym] = []
            for i in range(r + 1, n):
                key_sym, value_sym, is_required = members[i]
                if is_required:
                    seq += (comma, key_sym, colon, value_sym)
                else:
                    seq.append(optional.get((key_sym, value_sym)) or self.optional_member(key_sym, value_sym, f"{name}:opt{i}"))
            if unit is not None:
                seq += self.repeat(f"{name}:extras", unit, 0, None)
            tail = tuple(seq) if len(seq) <= 1 else (Sym.n(self.nonterminal(f"{name}:rest{r + 1}", [seq])),)
            tails[ids[r + 1] if r < n else ids[n]] = tail
        # T[i] for i = r down to 1: what follows a first member i - 1.
        follow: list[tuple[Sym, ...]] = [()] * (n + 1)
        if r < n:
            follow[r + 1] = tail
        else:
            follow[n] = tail
        for i in range(min(r, n - 1), 0, -1):
            ids[i] = new_id((members[i], ids[i + 1]), len(suffixes))
            seq_i = tails.get(ids[i])
            if seq_i is None:
                key_sym, value_sym, is_required = members[i]
                if is_required:
                    head: tuple[Sym, ...] = (comma, key_sym, colon, value_sym)
                else:
                    head = (optional.get((key_sym, value_sym)) or self.optional_member(key_sym, value_sym, f"{name}:opt{i}"),)
                seq_i = tails[ids[i]] = (Sym.n(self.nonterminal(f"{name}:after{i}", [head + follow[i + 1]])),)
            follow[i] = seq_i
        # The alternatives differ in their first key (or are `{}` and the extras alone), so
        # they are the nonterminal's rules as they are (`choice` would compare them).
        lbrace, rbrace = self.lbrace, self.rbrace
        if r == 0 < n:  # a required first member (MaskBench service-schema's 476 task bodies), without the comprehension
            alts = [(lbrace, members[0][0], colon, members[0][1], *follow[1], rbrace)]
        else:
            alts = [(lbrace, members[j][0], colon, members[j][1], *follow[j + 1], rbrace) for j in range(min(r + 1, n))]
        if r == n:
            alts.append((lbrace, rbrace))
            if unit is not None:
                alts.append((lbrace, unit[1], *tail, rbrace))
        return Sym.n(self.nonterminal(f"{name}:object", alts))

    def optional_member(self, key_sym: Sym, value_sym: Sym, label: str) -> Sym:
        """`O → ε | , key: value`, an optional member after a first property
        (`object_body_open`), made once per (key, value) in the schema."""
        sym = self.open_optional[(key_sym, value_sym)] = Sym.n(
            self.nonterminal(label, [(), (self.comma, key_sym, self.colon, value_sym)])
        )
        return sym

    def object_extras(self, name: str, unit: tuple[Sym, Sym] | None, c: int, low: int, high: int | None) -> list[list[Sym]] | None:
        """The alternatives of an object's extras (`unit`: a comma and an extra pair; None: no
        extras) after its members, c properties having come before, with the member and extra
        count in [low, high]: a left-recursive repetition bounded by what the count leaves."""
        low_left = max(low - c, 0)
        high_left = None if high is None else high - c
        if unit is None:
            return [[]] if low_left == 0 else None
        if c > 0:
            return [self.repeat(f"{name}:extras", unit, low_left, high_left)]
        alts: list[list[Sym]] = [[]] if low_left == 0 else []
        if high_left is None or high_left >= 1:
            more_high = None if high_left is None else high_left - 1
            alts.append([unit[1], *self.repeat(f"{name}:extras", unit, max(low_left - 1, 0), more_high)])
        return alts or None

    def state_sequence(self, table: dict[Any, Any], seqs: dict[Any, Sequence[Sym] | None], state: Any,
                       label: str) -> Sequence[Sym] | None:
        """What stands for `state` of an object's member states (`object_body`,
        `object_body_presence`) in a rule: None when `table` says it accepts nothing, its one
        alternative, or a nonterminal (named `label`) of its alternatives (as a tuple), made
        once (`seqs`)."""
        if state in seqs:
            return seqs[state]
        alts = table[state]
        if alts is None or len(alts) == 1:
            out = None if alts is None else alts[0]
        else:
            out = (Sym.n(self.nonterminal(label, alts)),)
        seqs[state] = out
        return out

    def object_body_presence(
        self, members: list[tuple[Sym, Sym, bool]], keys: list[str], schemas: list[tuple[Any, str]],
        constraints: list[Any], pair: int | None, pointer: str, loose: Sequence[tuple[str, Sym, Sym, Any, str]] = (),
    ) -> Sym | None | object:
        """`{ members, extras }` where every `_presence` constraint holds: some term of each
        has every key it names in a status it allows (absent, or present with a value in a
        set; `presence.py`), no count bounds.

        A member's value is split into the *classes* the constraints' value sets on its key
        tell apart (`presence.atoms`: `if {properties: {kind: {const: "a"}}}` splits `kind`
        into "a" and the rest), each its own value symbol, so that writing it says which class
        it took; a key no value set names has one class. The state is what the constraints
        still ask of the members left (P): per constraint, its terms the members written and
        skipped so far leave possible, each cut down to the keys it still names; a constraint
        with a term that names nothing more is met for good and leaves P, and P is a set, so
        constraints asking the same merge (eleven `dependencies` on one later key are one
        "that key is required" once their own keys are written). Writing a member in class j
        drops the terms that do not allow j for it, skipping it those that want it present; a
        constraint left without terms is a dead state.

        Order: the members the constraints' alternatives list in `properties` (their
        *fronts*, `presence.fronts`) may also come first, in any order, each at most once,
        and the rest follow in schema order: an expansion accepted each alternative merged
        with its siblings in both orders (`compile_alternatives`), which puts such keys
        first. So the states are (front, W, c, P) while front members are written (W the set
        written; c whether a property came before, so a comma leads), then (i, c, P, W) over
        the members in order, skipping those in W. Only the states reachable from the first
        are built, at most `PRESENCE_STATE_COUNT_MAX` (else `_NOT_EXACT`: the caller expands
        the constraints as clauses).

        Keys a term names that are not members are absent, unless the extras can spell them
        (`loose`: key, key symbol, value symbol, value schema and its pointer; `pair` then
        spells every other extra key): such a key is then an extra pair of its own, anywhere
        among the extras (states ("e", c, P), which loop on the other pairs), and the object
        closes once P holds with the loose keys not written absent."""
        n = len(members)
        if loose:
            members = [*members, *((key_sym, value_sym, False) for _, key_sym, value_sym, _, _ in loose)]
            keys = [*keys, *(key for key, *_ in loose)]
            schemas = [*schemas, *((schema, where) for *_, schema, where in loose)]
        index = {k: i for i, k in enumerate(keys)}
        parsed = [presence.terms_from_json(entry["terms"]) for entry in constraints]
        front_keys = sorted({k for entry in constraints for k in entry.get("fronts", ()) if k in index}, key=index.__getitem__)
        if len(front_keys) > PRESENCE_FRONT_KEYS_MAX:
            return _NOT_EXACT
        value_sets: dict[str, list[Any]] = {}
        for terms in parsed:
            for term in terms:
                for key, (_, vs) in term.items():
                    if key in index and vs != presence.ALL and vs not in value_sets.setdefault(key, []):
                        value_sets[key].append(vs)
        classes = {key: presence.atoms(sets) for key, sets in value_sets.items()}
        # Per member: the value symbol of each class (None: no value of the class is valid).
        values: list[list[Sym | None]] = []
        for i, key in enumerate(keys):
            parts = classes.get(key)
            if parts is None or len(parts) == 1:
                values.append([members[i][1]])
                continue
            schema, where = schemas[i]
            values.append([self.compile({"allOf": [schema, presence.value_schema(part)]}, where) for part in parts])

        Term = frozenset[tuple[str, frozenset[int]]]
        Need = frozenset[Term]

        def allowed(key: str, ks: Any) -> frozenset[int]:
            absent_ok, vs = ks
            parts = classes.get(key, [presence.ALL])
            out = {j for j, part in enumerate(parts) if presence.subset(part, vs)}
            if absent_ok:
                out.add(-1)
            return frozenset(out)

        first: set[Need] = set()
        for terms in parsed:
            alive: set[Term] = set()
            for term in terms:
                entries = []
                for key, ks in term.items():
                    statuses = allowed(key, ks)
                    if key not in index:
                        if -1 not in statuses:
                            break  # a key that is never written must be present: the term fails
                        continue
                    if len(statuses) < len(values[index[key]]) + 1:
                        entries.append((key, statuses))
                else:
                    alive.add(frozenset(entries))
            if not alive:
                return None  # no term can hold: no object is valid
            if frozenset() not in alive:
                first.add(frozenset(alive))

        def step(needs: frozenset[Need], key: str, status: int) -> frozenset[Need] | None:
            out = set()
            for need in needs:
                terms = set()
                for term in need:
                    hit = next((entry for entry in term if entry[0] == key), None)
                    if hit is None:
                        terms.add(term)
                    elif status in hit[1]:
                        left = term - {hit}
                        if not left:
                            break  # met for good
                        terms.add(left)
                else:
                    if not terms:
                        return None
                    out.add(frozenset(terms))
            return frozenset(out)

        # States: ("f", W, c, P) in the front phase, (i, c, P, W) after it (W cut down to the
        # members not passed yet). Moves: (symbols or None for an empty move, next state).
        State = tuple[Any, ...]
        Move = tuple[int, int, State]  # (member, class group index into `groups`, next); member -1: no symbols
        moves: dict[State, list[Move]] = {}
        groups: list[list[int]] = []
        group_ids: dict[tuple[int, ...], int] = {}

        def writes(i: int, needs: frozenset[Need]) -> dict[frozenset[Need], int]:
            by_next: dict[frozenset[Need], list[int]] = {}
            for j, sym in enumerate(values[i]):
                if sym is not None:
                    after = step(needs, keys[i], j)
                    if after is not None:
                        by_next.setdefault(after, []).append(j)
            out = {}
            for after, js in by_next.items():
                g = group_ids.get(tuple(js))
                if g is None:
                    g = group_ids[tuple(js)] = len(groups)
                    groups.append(js)
                out[after] = g
            return out

        def base_state(i: int, c: int, needs: frozenset[Need], written: frozenset[str]) -> State:
            return (i, c, needs, frozenset(k for k in written if i <= index[k] < n))

        start: State = ("f", frozenset(), 0, frozenset(first)) if front_keys else (0, 0, frozenset(first), frozenset())
        order: list[State] = []
        todo = [start]
        seen = {start}
        while todo:
            state = todo.pop()
            order.append(state)
            out: list[Move] = []
            if state[0] == "f":
                _, written, c, needs = state
                for key in front_keys:
                    if key not in written:
                        i = index[key]
                        for after, g in writes(i, needs).items():
                            out.append((i, g, ("f", written | {key}, 1, after)))
                out.append((-1, 0, base_state(0, c, needs, written)))
            elif state[0] == "e":
                _, c, needs = state
                if needs:
                    for i in range(n, len(keys)):
                        for after, g in writes(i, needs).items():
                            out.append((i, g, ("e", 1, after)))
                    if pair is not None:
                        out.append((-2, 0, ("e", 1, needs)))
            else:
                i, c, needs, written = state
                if i == n and loose:
                    out.append((-1, 0, ("e", c, needs)))
                elif i < n:
                    key = keys[i]
                    if key in written:
                        out.append((-1, 0, base_state(i + 1, c, needs, written)))
                    else:
                        for after, g in writes(i, needs).items():
                            out.append((i, g, base_state(i + 1, 1, after, written)))
                        if not members[i][2]:
                            after = step(needs, key, -1)
                            if after is not None:
                                out.append((-1, 0, base_state(i + 1, c, after, written)))
            moves[state] = out
            for move in out:
                if move[2] not in seen:
                    seen.add(move[2])
                    todo.append(move[2])
                    if len(seen) > PRESENCE_STATE_COUNT_MAX:
                        return _NOT_EXACT

        name = pointer or "/"
        unit = None if pair is None else (self.comma, Sym.n(pair))
        table: dict[State, list[list[Sym]] | None] = {}
        seqs: dict[State, Sequence[Sym] | None] = {}
        grouped: dict[tuple[int, int], Sym] = {}

        def value_of(i: int, g: int) -> Sym:
            group, syms = groups[g], values[i]
            if len(syms) == 1 or all(j in group for j, s in enumerate(syms) if s is not None):
                return members[i][1]  # every class: the value as it is
            if len(group) == 1:
                return syms[group[0]]  # type: ignore[return-value]
            known = grouped.get((i, g))
            if known is None:
                label = f"{name}:presence.{keys[i]}"
                known = grouped[(i, g)] = Sym.n(self.nonterminal(label, [[syms[j]] for j in group]))  # type: ignore[list-item]
            return known

        def rank(state: State) -> tuple[int, int]:
            # Build the later states first: the extras, then members in order after the front
            # phase, and in the front phase the larger sets first.
            return (-1, 0) if state[0] == "e" else (0, -state[0]) if state[0] != "f" else (1, -len(state[1]))

        comma, colon = self.comma, self.colon
        if loose:
            self.presence_extras(table, seqs, moves, [s for s in order if s[0] == "e"], members, n, value_of, pair, name)
        for state in sorted(order, key=rank):
            if state[0] == "e":
                continue
            if state[0] != "f" and state[0] == n and not loose:
                table[state] = None if state[2] else self.object_extras(name, unit, state[1], 0, None)
                continue
            c = state[2] if state[0] == "f" else state[1]
            alts = []
            for i, g, after in moves[state]:
                rest = self.state_sequence(table, seqs, after, f"{name}:presence")
                if rest is None:
                    continue
                if i < 0:
                    alts.append(rest)
                else:
                    value = value_of(i, g)
                    alts.append([comma, members[i][0], colon, value, *rest] if c else [members[i][0], colon, value, *rest])
            table[state] = alts or None
        top = table[start]
        if top is None:
            return None
        return self.choice(f"{name}:object", [[self.lbrace, *alt, self.rbrace] for alt in top])

    def presence_extras(self, table: dict[Any, Any], seqs: dict[Any, Any], moves: dict[Any, Any], states: list[Any],
                        members: list[tuple[Sym, Sym, bool]], n: int, value_of: Callable[[int, int], Sym],
                        pair: int | None, name: str) -> None:
        """The extras of `object_body_presence` with loose keys (members n.. of `members`):
        for each state ("e", c, P) its symbols in `seqs` (None where the object can never
        close). Once P is empty, the extras as `object_extras` makes them, a pair being any
        other key (`pair`) or a loose key; before, a nonterminal per state that may close once
        P holds with the loose keys left absent, loops on the other pairs (move -2), and moves
        on with a loose key's class."""
        comma, colon = self.comma, self.colon

        def closes(needs: Any) -> bool:
            # Every key left is absent: some term of each constraint allows that for all its keys.
            return all(any(all(-1 in statuses for _, statuses in term) for term in need) for need in needs)

        live = {s for s in states if not s[2] or closes(s[2])}
        changed = True
        while changed:
            changed = False
            for state in states:
                if state not in live and any(after in live for _, _, after in moves[state]):
                    live.add(state)
                    changed = True
        ids: dict[Any, int] = {}
        for state in states:
            if state not in live:
                seqs[state] = None
            elif not state[2]:
                whole: list[list[Sym]] = [] if pair is None else [[Sym.n(pair)]]
                whole += [[key_sym, colon, value_sym] for key_sym, value_sym, _ in members[n:]]
                unit_pair = self.choice(f"{name}:extra", whole)
                unit = None if unit_pair is None else (comma, unit_pair)
                table[state] = self.object_extras(name, unit, state[1], 0, None)
                self.state_sequence(table, seqs, state, f"{name}:presence.extras")
            else:
                ids[state] = self.ir.add_nonterminal(f"{name}:presence.extras")
                seqs[state] = [Sym.n(ids[state])]
        for state, nt in ids.items():
            lead = [comma] if state[1] else []
            if closes(state[2]):
                self.rule(nt, [])
            for i, g, after in moves[state]:
                rest = seqs.get(after)
                if rest is None:
                    continue
                if i == -2:
                    self.rule(nt, [*lead, Sym.n(pair), *rest])  # type: ignore[arg-type]
                else:
                    self.rule(nt, [*lead, members[i][0], colon, value_of(i, g), *rest])

    def object_body_witness(
        self,
        members: list[tuple[Sym, Sym, bool]],
        variants: list[list[tuple[Sym, int]]],
        pairs: list[tuple[Sym, int]],
        witness_count: int,
        low: int,
        high: int | None,
        pointer: str,
    ) -> Sym | None:
        """`object_body` for an object that must also hold witness members (`_witness`, from
        negated `patternProperties`/`propertyNames`/`additionalProperties`): the state (i, c)
        grows a set f of the witnesses met so far, and the object may close only with all
        of them. Each member and extra pair comes in variants, one per set of witnesses its key
        and value meet (`variants`, `pairs`; bits 0 is the plain one); variants overlap, which
        only makes the grammar ambiguous.
        """
        n = len(members)
        full = (1 << witness_count) - 1
        required_count = sum(1 for m in members if m[2])
        if high is not None and required_count > high:
            return None
        if low <= required_count:
            low = 0
        top = max(low, 1) if high is None else high
        name = pointer or "/"
        if (n + 1) * (top + 1) * (full + 1) > OBJECT_STATE_COUNT_MAX:
            raise self.fail(
                f"minProperties/maxProperties over {n} properties with negated object keywords need more than "
                f"{OBJECT_STATE_COUNT_MAX} grammar states; loosen the bounds",
                pointer,
            )
        tail = self.witness_tail(f"{name}:extras", pairs, full, low, high, top, lambda c: c > 0)
        nts: dict[tuple[int, int, int], int] = {}
        table: dict[tuple[int, int, int], list[list[Sym]] | None] = {}

        def seq(i: int, c: int, f: int) -> list[Sym] | None:
            if i == n:
                return tail(c, f)
            alts = table[(i, c, f)]
            if alts is None:
                return None
            if len(alts) == 1:
                return alts[0]
            if (i, c, f) not in nts:
                nts[(i, c, f)] = self.nonterminal(f"{name}:after{i}.{c}.{f}", alts)
            return [Sym.n(nts[(i, c, f)])]

        for i in range(n - 1, -1, -1):
            key_sym, _, is_required = members[i]
            for c in range(top + 1):
                after = min(c + 1, top) if high is None else c + 1
                for f in range(full + 1):
                    alts = []
                    for value_sym, bits in variants[i] if after <= top else []:
                        if bits and not bits & ~f:
                            continue  # meets only witnesses met already: the plain variant does
                        rest = seq(i + 1, after, f | bits)
                        if rest is not None:
                            alts.append([*([self.comma] if c > 0 else []), key_sym, self.colon, value_sym, *rest])
                    skip = None if is_required else seq(i + 1, c, f)
                    if skip is not None:
                        alts.append(skip)
                    table[(i, c, f)] = alts or None
        body = seq(0, 0, 0)
        if body is None:
            return None
        return self.choice(f"{name}:object", [[self.lbrace, *body, self.rbrace]])

    def witness_tail(
        self,
        name: str,
        units: list[tuple[Sym, int]],
        full: int,
        low: int,
        high: int | None,
        top: int,
        lead: Callable[[int], bool],
    ) -> Callable[[int, int], list[Sym] | None]:
        """The repetition closing an object (extra pairs) or an array (items past the prefix)
        that must still meet witnesses: `tail(c, f)` is a symbol sequence, or None, deriving
        units (a comma before each when `lead(count so far)`) so that the count c ends in
        [low, high] and the set f of witnesses met ends full. `units` are (symbol, witnesses
        it meets), bits 0 the plain unit; c is capped at `top` when `high` is None.

        Counts below the cap are states (right recursion, bounded by `top`); at the cap the
        plain units are a left-recursive repetition before each witness unit, so an unbounded
        tail stays left-recursive.
        """
        plain = next((u for u, bits in units if bits == 0), None)
        memo: dict[tuple[int, int], list[Sym] | None] = {}

        def alternatives(c: int, f: int) -> list[list[Sym]] | None:
            low_left = max(low - c, 0)
            high_left = None if high is None else high - c
            if f == full:
                if plain is None:
                    return [[]] if low_left == 0 else None
                if lead(c):
                    return [self.repeat(name, (self.comma, plain), low_left, high_left)]
                alts: list[list[Sym]] = [[]] if low_left == 0 else []
                if high_left is None or high_left >= 1:
                    more = None if high_left is None else high_left - 1
                    alts.append([plain, *self.repeat(name, (self.comma, plain), max(low_left - 1, 0), more)])
                return alts or None
            if high_left is not None and high_left <= 0:
                return None
            if high is None and c >= top:
                star = [] if plain is None else self.repeat(name, (self.comma, plain), 0, None)
                head = [*star, self.comma]
            else:
                head = [self.comma] if lead(c) else []
            alts = [[*head, unit, *rest] for unit, key in steps(c, f) if (rest := memo[key]) is not None]
            return alts or None

        def steps(c: int, f: int) -> list[tuple[Sym, tuple[int, int]]]:
            """(unit, the state after it) for each unit `alternatives(c, f)` may write next:
            none once f is full or the count at its bound; at the cap, only units that meet a
            witness not met yet."""
            if f == full or (high is not None and high - c <= 0):
                return []
            if high is None and c >= top:
                return [(unit, (c, f | bits)) for unit, bits in units if bits & ~f]
            after = min(c + 1, top) if high is None else c + 1
            return [(unit, (after, f | bits)) for unit, bits in units if bits == 0 or bits & ~f]

        def tail(c: int, f: int) -> list[Sym] | None:
            # Depth first on an explicit stack, each state after the tails it asks for, as the
            # recursion did: a count bound of 1,000 (`minProperties`) made 2,000 Python frames.
            # Every tail asked for has a larger count or, at the cap, more witnesses: no cycle.
            stack = [(c, f)]
            while stack:
                key = stack[-1]
                if key in memo:
                    stack.pop()
                    continue
                missing = [k for _, k in steps(*key) if k not in memo]
                if missing:
                    stack += reversed(missing)
                    continue
                stack.pop()
                alts = alternatives(*key)
                memo[key] = None if alts is None else self.inline(f"{name}@{key[0]}.{key[1]}", alts, {}, 0)
            return memo[(c, f)]

        return tail

    def object_body_any_order(
        self,
        members: list[tuple[Sym, Sym, bool]],
        pair: int | None,
        low: int,
        high: int | None,
        pointer: str,
        witness: tuple[list[list[tuple[Sym, int]]], list[tuple[Sym, int]], int] | None = None,
    ) -> Sym | None:
        """`{ ... }` with the members in any order, each at most once, the required ones present,
        other keys (`pair`) anywhere among them, and the count in [low, high].

        State (S, c): S is the set of *tracked* members written so far (a bit mask), c the
        properties so far, counted as in `object_body` (a comma leads when c > 0). The members
        are tracked when there are at most `ANY_ORDER_TRACKED_MAX` (exact). Beyond that only
        the required ones are tracked, and the optional members may come anywhere, *also more
        than once* (a superset; a warning). With more than `ANY_ORDER_REQUIRED_MAX` required
        members, the object falls back to schema order (a subset; a warning): a permutation
        language needs exponentially many CFG rules. The bounds are set by compile time on
        MaskBench: tracking up to 8, then 6 properties made the median schema compile 1.2-1.8×
        slower than schema order, 4 (and 6 required) 1.1×.

        `witness` (value variants per member, pair variants, witness count; see
        `object_body_witness`) adds the set f of witnesses met to the state, (S, c, f).
        """
        n = len(members)
        required_count = sum(map(_THIRD, members))  # (C-level: members are (key, value, required))
        if high is not None and required_count > high:
            return None
        if required_count > ANY_ORDER_REQUIRED_MAX:
            self.warn(
                f'property_order="any": more than {ANY_ORDER_REQUIRED_MAX} required properties, so they keep '
                "schema order (other orders are refused)",
                pointer,
            )
            if witness is not None:
                return self.object_body_witness(members, witness[0], witness[1], witness[2], low, high, pointer)
            return self.object_body(members, pair, low, high, pointer)
        tracked = list(range(n)) if n <= ANY_ORDER_TRACKED_MAX else [i for i in range(n) if members[i][2]]
        loose = [i for i in range(n) if i not in tracked]
        if loose:
            self.warn(
                f'property_order="any": more than {ANY_ORDER_TRACKED_MAX} properties, so the '
                f"{len(loose)} optional ones may also repeat (a superset)",
                pointer,
            )
        if low <= required_count:
            low = 0
        if high is not None and pair is None and not loose and high >= n:
            high = None
        top = max(low, 1) if high is None else high
        need = 0
        for bit, i in enumerate(tracked):
            if members[i][2]:
                need |= 1 << bit
        t = len(tracked)
        full = 0 if witness is None else (1 << witness[2]) - 1
        if (1 << t) * (top + 1) * (full + 1) > OBJECT_STATE_COUNT_MAX:
            raise self.fail(
                f'property_order="any" with minProperties/maxProperties over {t} properties needs more than '
                f"{OBJECT_STATE_COUNT_MAX} grammar states; loosen the bounds",
                pointer,
            )
        values = [[(m[1], 0)] for m in members] if witness is None else witness[0]
        pairs = ([] if pair is None else [(Sym.n(pair), 0)]) if witness is None else witness[1]
        # Units that keep S: loose members and extra keys, one symbol per set of witnesses met.
        loop_alts: dict[int, list[list[Sym]]] = {}
        for i in loose:
            for value_sym, bits in values[i]:
                loop_alts.setdefault(bits, []).append([members[i][0], self.colon, value_sym])
        for pair_sym, bits in pairs:
            loop_alts.setdefault(bits, []).append([pair_sym])
        loops = []
        for bits, alts in loop_alts.items():
            loop = self.choice(f"{pointer or '/'}:loose" + (f"{bits}" if bits else ""), alts)
            if loop is not None:
                loops.append((loop, bits))

        def step(c: int) -> int | None:
            if high is None:
                return min(c + 1, top)
            return c + 1 if c + 1 <= high else None

        def moves(s: int, c: int, f: int) -> list[tuple[list[Sym], tuple[int, int, int]]]:
            """(symbols, next state) of each unit that may come in state (s, c, f)."""
            after = step(c)
            if after is None:
                return []
            out = []
            for b in range(t):
                if not s >> b & 1:
                    key_sym = members[tracked[b]][0]
                    for value_sym, bits in values[tracked[b]]:
                        if not bits or bits & ~f:
                            out.append(([key_sym, self.colon, value_sym], (s | 1 << b, after, f | bits)))
            for loop, bits in loops:
                if not bits or bits & ~f:
                    out.append(([loop], (s, after, f | bits)))
            return out

        # Reachable states, then the productive ones (transitions grow S, c or f, except the
        # capped self-loops, so (|S|, c, |f|) descending is a topological order).
        states: set[tuple[int, int, int]] = {(0, 0, 0)}
        stack = [(0, 0, 0)]
        while stack:
            for _, nxt in moves(*stack.pop()):
                if nxt not in states:
                    states.add(nxt)
                    stack.append(nxt)
        order = sorted(states, key=lambda st: (bin(st[0]).count("1"), st[1], bin(st[2]).count("1"), st), reverse=True)
        productive: set[tuple[int, int, int]] = set()
        for st in order:
            s, c, f = st
            if (s & need == need and c >= low and f == full) or any(
                nxt in productive and nxt != st for _, nxt in moves(s, c, f)
            ):
                productive.add(st)
        if (0, 0, 0) not in productive:
            return None
        name = pointer or "/"
        nts = {
            st: self.ir.add_nonterminal(f"{name}:any{st[0]}.{st[1]}" + (f".{st[2]}" if full else ""))
            for st in order
            if st in productive
        }
        for (s, c, f), nt in nts.items():
            lead = [self.comma] if c > 0 else []
            if s & need == need and c >= low and f == full:
                self.rule(nt, [])
            for unit, nxt in moves(s, c, f):
                if nxt in nts:
                    self.rule(nt, [*lead, *unit, Sym.n(nts[nxt])])
        return Sym.n(self.nonterminal(f"{name}:object", [[self.lbrace, Sym.n(nts[(0, 0, 0)]), self.rbrace]]))

    # ---- arrays ------------------------------------------------------------------------------

    def compile_array(self, d: dict[str, Any], pointer: str) -> Sym | None:
        bounds = self.count_bounds(d, "minItems", "maxItems", pointer)
        if bounds is None:
            return None
        min_items, max_items = bounds
        if "_item_witness" in d:
            return self.array_witness(d, min_items, max_items, pointer)
        if d.get("_duplicate") is True:
            if d.get("uniqueItems") is True:
                return self.contradiction("an array cannot have all items different and two equal items", pointer)
            duplicate = self.duplicate_array(d, min_items, max_items, pointer)
            if duplicate is not NotImplemented:
                return duplicate
            self.warn(
                "not uniqueItems (two equal items) is approximated by 'at least two items' (an array whose items "
                "all differ is accepted)",
                f"{pointer}/uniqueItems",
            )
            min_items = max(min_items, 2)
            if max_items is not None and min_items > max_items:
                return None
        if d.get("uniqueItems") is True and (max_items is None or max_items > 1):  # 0 or 1 items: unique
            unique = self.unique_array(d, min_items, max_items, pointer)
            if unique is not NotImplemented:
                return unique
            unique = self.distinct_array(d, min_items, max_items, pointer)
            if unique is not NotImplemented:
                return unique
            self.warn("uniqueItems is not enforced (an array with equal items is accepted)", f"{pointer}/uniqueItems")
        counts = self.contains_counts(d, pointer)
        if counts:
            return self.contains_array(d, min_items, max_items, counts, pointer)
        prefix = d.get("prefixItems", [])
        prefix_syms = [self.compile(s, f"{pointer}/prefixItems/{i}") for i, s in enumerate(prefix)]
        items = d.get("items", True)
        rest = None if items is False else self.compile(items, f"{pointer}/items")
        name = pointer or "/"
        k = len(prefix)
        # tail: the alternatives after k items, for the items beyond the prefix.
        if (max_items is not None and k >= max_items) or rest is None:
            tail: list[list[Sym]] | None = [[]] if k >= min_items else None
        else:
            lo = max(0, min_items - k)
            hi = None if max_items is None else max_items - k
            if k > 0:
                tail = [self.repeat(f"{name}:items", (self.comma, rest), lo, hi)]
            else:
                more = self.repeat(f"{name}:items", (self.comma, rest), max(lo, 1) - 1, None if hi is None else hi - 1)
                tail = ([[]] if lo == 0 else []) + [[rest, *more]]
        cache: dict[int, list[Sym]] = {}
        alts = tail
        for i in range(k - 1, -1, -1):
            stop: list[list[Sym]] = [[]] if i >= min_items else []
            if max_items is not None and i >= max_items:
                alts = stop or None
                continue
            sym = prefix_syms[i]
            go = []
            if sym is not None and alts is not None:
                go = [[*([self.comma] if i else []), sym, *self.inline(f"{name}:from{i + 1}", alts, cache, i + 1)]]
            alts = (stop + go) or None
        if alts is None:
            return None
        return self.choice(f"{name}:array", [[self.lbracket, *alt, self.rbracket] for alt in alts])

    def kept_witnesses(self, witnesses: list[Any], what: str, pointer: str) -> list[Any]:
        """The first `WITNESS_COUNT_MAX` witnesses (2^n states each); the others are dropped
        with a warning, a superset."""
        if len(witnesses) <= WITNESS_COUNT_MAX:
            return witnesses
        self.warn(
            f"more than {WITNESS_COUNT_MAX} negated {what}: the first {WITNESS_COUNT_MAX} are required, "
            "the others not (a superset)",
            pointer,
        )
        return witnesses[:WITNESS_COUNT_MAX]

    def array_witness(self, d: dict[str, Any], min_items: int, max_items: int | None, pointer: str) -> Sym | None:
        """An array that must hold witness items (`_item_witness`, from `not` of `items` after
        `prefixItems`): for each witness, an item at index `from` or later valid under its
        value. The prefix is padded with `items` up to the last `from`, so that every item past
        it may meet every witness; each position then comes in variants, one per set of the
        witnesses it may meet, and a set f of the witnesses met so far is carried to the end
        (`witness_tail` past the prefix)."""
        witnesses = d["_item_witness"]
        if self.contains_counts(d, pointer, warn=False) and not (
            "contains" in d and "_contains" not in d and d.get("minContains", 1) == 1 and d.get("maxContains") is None
        ):
            # Counted contains beside: each witness is a count too (at least one item valid
            # under its value, from its index on), counted with them (`contains_array`).
            found = [{"schema": w["value"], "min": 1, "max": None, "from": w["from"]} for w in witnesses]
            rest = {k: v for k, v in d.items() if k not in _CONTAINS_KEYS and k != "_item_witness"}
            return self.compile_array(dict(rest, _contains=_contains_entries(d) + found), pointer)
        if "contains" in d and d.get("minContains", 1) == 1:
            # Some item valid under `contains`: one more witness, from index 0.
            witnesses = witnesses + [{"from": 0, "value": d["contains"]}]
        witnesses = self.kept_witnesses(witnesses, "items after prefixItems (and contains) on one array", pointer)
        if d.get("uniqueItems") is True and (max_items is None or max_items > 1):
            self.warn("uniqueItems is not enforced (an array with equal items is accepted)", f"{pointer}/uniqueItems")
        full = (1 << len(witnesses)) - 1
        items = d.get("items", True)
        prefix = list(d.get("prefixItems", []))
        k = max([len(prefix), *(w["from"] for w in witnesses)])
        prefix += [items] * (k - len(prefix))
        name = pointer or "/"

        def variants(schema: Any, index: int | None, where: str) -> list[tuple[Sym, int]]:
            out: list[tuple[Sym, int]] = []
            able = [b for b, w in enumerate(witnesses) if index is None or index >= w["from"]]
            for mask in range(1 << len(able)):
                bits = [b for i, b in enumerate(able) if mask >> i & 1]
                parts = [schema, *(witnesses[b]["value"] for b in bits)]
                sym = self.compile(parts[0] if len(parts) == 1 else {"allOf": parts}, where)
                if sym is not None:
                    out.append((sym, sum(1 << b for b in bits)))
            return out

        units = [] if items is False else variants(items, None, f"{pointer}/items")
        if max_items is not None and k >= max_items:
            units = []
        lo = max(0, min_items - k)
        hi = None if max_items is None else max_items - k
        top = max(lo, 1) if hi is None else hi
        if (k + 1) * (top + 1) * (full + 1) > ARRAY_STATE_COUNT_MAX:
            raise self.fail(f"minItems/maxItems with negated items need more than {ARRAY_STATE_COUNT_MAX} grammar states", pointer)
        tail = self.witness_tail(f"{name}:items", units, full, lo, hi, top, lambda c: k + c > 0)
        cache: dict[int, list[Sym]] = {}
        steps = [variants(s, i, f"{pointer}/prefixItems/{i}") for i, s in enumerate(prefix)]

        @functools.cache
        def after(i: int, f: int) -> list[list[Sym]] | None:
            """The alternatives for the items from position i on, with witnesses f met."""
            if i == k:
                rest = tail(0, f)
                return None if rest is None else [rest]
            stop: list[list[Sym]] = [[]] if i >= min_items and f == full else []
            if max_items is not None and i >= max_items:
                return stop or None
            go = []
            for sym, bits in steps[i]:
                if bits and not bits & ~f:
                    continue
                alts = after(i + 1, f | bits)
                if alts is not None:
                    go.append([*([self.comma] if i else []), sym, *self.inline(f"{name}:from{i + 1}.{f | bits}", alts, cache, (i + 1) * (full + 1) + (f | bits))])
            return (stop + go) or None

        alts = after(0, 0)
        if alts is None:
            return None
        return self.choice(f"{name}:array", [[self.lbracket, *alt, self.rbracket] for alt in alts])

    def item_sets(self, d: dict[str, Any], cap: int | None, pointer: str) -> Any:
        """For an array whose items range over a finite domain (enum, boolean, null): the
        values' symbols and the sets of at most `cap` of them as bit masks, larger sets first
        (a state refers to the states of larger sets). NotImplemented when the domain is not
        finite, the sets number more than `UNIQUE_STATE_COUNT_MAX`, or `prefixItems`/`contains`
        are present."""
        if d.get("prefixItems") or "contains" in d or "_contains" in d:
            return NotImplemented
        where = f"{pointer}/items"
        flat = self.flatten(d.get("items", True), where)
        if flat is None:
            return [], [0]
        rest = {k: v for k, v in flat.items() if k != "enum"}
        if "enum" in flat:
            candidates = flat["enum"]
        elif flat.get("type") == ["boolean"]:
            candidates = [True, False]
        elif flat.get("type") == ["null"]:
            candidates = [None]
        else:
            return NotImplemented
        domain: list[Any] = []
        seen: set[Any] = set()  # the scalars' `_value_key`s: 865 names were 374,000 comparisons
        top = 0  # the largest set size
        try:
            for value in candidates:
                if not self.checker.valid(value, rest, where):
                    continue
                key = _value_key(value)
                if key is None:
                    if any(_json_equal(value, v) for v in domain):
                        continue
                elif key in seen:
                    continue
                else:
                    seen.add(key)
                domain.append(value)
                top = len(domain) if cap is None else min(cap, len(domain))
                if sum(math.comb(len(domain), k) for k in range(top + 1)) > UNIQUE_STATE_COUNT_MAX:
                    # Too many already (the rest could only add sets, or be undecidable).
                    return NotImplemented
        except Undecidable:
            return NotImplemented
        subsets = [sum(1 << i for i in c) for k in range(top, -1, -1) for c in itertools.combinations(range(len(domain)), k)]
        return [self.value_syms(v, where) for v in domain], subsets

    def duplicate_array(self, d: dict[str, Any], min_items: int, max_items: int | None, pointer: str) -> Any:
        """`_duplicate` (not `uniqueItems`: two items equal) over a finite item domain, exactly:
        one state per set of the values read while all differ, then, once a value repeats, any
        items up to the bounds. NotImplemented as `item_sets` says."""
        if max_items is not None and max_items < 2:
            return None
        # While all differ the array holds at most len(domain) items, and a repeat needs one more.
        found = self.item_sets(d, None if max_items is None else max_items - 1, pointer)
        if found is NotImplemented:
            return NotImplemented
        syms, subsets = found
        if not syms:
            return None
        item = self.compile(d.get("items", True), f"{pointer}/items")
        assert item is not None  # its domain is not empty
        name = pointer or "/"

        def repeated(count: int) -> list[Sym]:
            """The rest of the array once `count` items are read and one has repeated."""
            lo = max(0, min_items - count)
            hi = None if max_items is None else max_items - count
            return [] if hi == 0 else self.repeat(f"{name}:after{count}", (self.comma, item), lo, hi)

        memo: dict[int, int | None] = {}
        for used in subsets:
            count = bin(used).count("1")
            alts: list[list[Sym]] = []
            for i, value in enumerate(syms):
                lead = [*([self.comma] if used else []), *value]
                if used >> i & 1:
                    alts.append([*lead, *repeated(count + 1)])
                elif (after := memo.get(used | 1 << i)) is not None:
                    alts.append([*lead, Sym.n(after)])
            memo[used] = self.nonterminal(f"{name}:dup{used:x}", alts) if alts else None
        start = memo[0]
        return None if start is None else self.choice(f"{name}:array", [[self.lbracket, Sym.n(start), self.rbracket]])

    def unique_array(self, d: dict[str, Any], min_items: int, max_items: int | None, pointer: str) -> Any:
        """`uniqueItems` over a finite item domain (enum, boolean, null), exactly: one state per
        set of values used so far. NotImplemented as `item_sets` says (the caller then warns)."""
        found = self.item_sets(d, max_items, pointer)
        if found is NotImplemented:
            return NotImplemented
        syms, subsets = found
        name = pointer or "/"
        memo: dict[int, int | None] = {}
        for used in subsets:
            count = bin(used).count("1")
            alts: list[list[Sym]] = [[]] if count >= min_items else []
            for i, value in enumerate(syms):
                after = memo.get(used | 1 << i)
                if not used >> i & 1 and after is not None:
                    alts.append([*([self.comma] if used else []), *value, Sym.n(after)])
            memo[used] = self.nonterminal(f"{name}:unique{used:x}", alts) if alts else None
        start = memo[0]
        return None if start is None else self.choice(f"{name}:array", [[self.lbracket, Sym.n(start), self.rbracket]])

    def distinct_array(self, d: dict[str, Any], min_items: int, max_items: int | None, pointer: str) -> Any:
        """`uniqueItems` over *open* scalar items, checked by the core: the items form a
        distinct list of the IR (`GrammarIR.distinct`), whose every item the core compares, as
        a JSON value, with the earlier ones where it completes. Exact because every item
        lexeme is open: plain strings (at most a `minLength`), numbers and integers without
        bounds, whose text in progress can always be finished in infinitely many ways, so
        that only a finished item can repeat one, and the core sees each item finish on its
        last byte (`docs/grammar_ir.md`). NotImplemented (the caller warns) for other items,
        `prefixItems`/`contains`, or `maxItems` over `DISTINCT_ITEMS_BOUNDED_MAX`.

        Each list nonterminal ends with the item and starts where the array does: `L1 → X`,
        `Lk → L(k-1) "," X` up to the bounds, and `L+ → L(lo-1) "," X | L+ "," X` when the
        count is unbounded."""
        if d.get("prefixItems") or "contains" in d or "_contains" in d:
            return NotImplemented
        if max_items is not None and max_items > DISTINCT_ITEMS_BOUNDED_MAX:
            return NotImplemented
        item = self.compile(d.get("items", True), f"{pointer}/items")
        # Items by `$ref` (a definition shared by arrays): the target's own symbol.
        alternatives = None if item is None else self.open_scalars(self.ref_target_symbol(item))
        if alternatives is None:
            return NotImplemented
        name = pointer or "/"
        x = Sym.n(self.nonterminal(f"{name}:item", [[a] for a in alternatives]))

        def longer(prev: int | None, label: str) -> int:
            """A distinct list: `prev` (or nothing) and one more item."""
            nt = self.nonterminal(f"{name}:{label}", [[x] if prev is None else [Sym.n(prev), self.comma, x]])
            self.ir.distinct.add(nt)
            return nt

        alts: list[list[Sym]] = [[]] if min_items == 0 else []
        prev: int | None = None
        if max_items is None:
            for k in range(1, max(min_items, 1)):
                prev = longer(prev, f"distinct{k}")
            more = longer(prev, "distinct+")
            self.rule(more, [Sym.n(more), self.comma, x])
            alts.append([Sym.n(more)])
        else:
            for k in range(1, max_items + 1):
                prev = longer(prev, f"distinct{k}")
                if k >= min_items:
                    alts.append([Sym.n(prev)])
        return self.choice(f"{name}:array", [[self.lbracket, *alt, self.rbracket] for alt in alts])

    def rules_of(self, nonterminal: int) -> list[tuple[Sym, ...]]:
        """The right-hand sides of `nonterminal`'s rules so far. An index by left-hand side,
        extended with the rules added since the last call (rebuilt if the list was replaced):
        a schema with 77 `uniqueItems` arrays scanned its 20,000 rules for each (6 ms of 28)."""
        rules = self.ir.rules
        if rules is not self.rules_listed:
            self.rules_by_lhs, self.rules_indexed, self.rules_listed = {}, 0, rules
        index = self.rules_by_lhs
        for lhs, rhs in itertools.islice(rules, self.rules_indexed, None):
            index.setdefault(lhs, []).append(rhs)
        self.rules_indexed = len(rules)
        return index.get(nonterminal, [])

    def open_scalars(self, sym: Sym) -> list[Sym] | None:
        """The item lexemes of `sym` when it derives one lexeme, each an open scalar
        (`distinct_array`), else None. A number's is replaced by `DISTINCT_NUMBER_REGEX`."""
        if sym.terminal:
            alternatives = [sym]
        else:
            rules = self.rules_of(sym.index)
            if not rules or any(len(rhs) != 1 or not rhs[0].terminal for rhs in rules):
                return None
            alternatives = [rhs[0] for rhs in rules]
        if not all(_open_scalar_lexeme(self.ir.lexemes[a.index]) for a in alternatives):
            return None
        return [
            self.lexeme("number", "regex", DISTINCT_NUMBER_REGEX) if self.ir.lexemes[a.index].value == NUMBER_REGEX else a
            for a in alternatives
        ]

    def contains_counts(self, d: dict[str, Any], pointer: str, *, warn: bool = True) -> list[tuple[Any, int, int | None, int]]:
        """The array's `contains` and the merged `_contains` as (schema, least, most, from)
        bounds on counts of items (at index `from` or later: item witnesses counted beside
        them); those that bound nothing are left out. More than `CONTAINS_COUNTED_MAX` keep
        the first ones (a superset, a warning)."""
        entries = _contains_entries(d)
        counts: list[tuple[Any, int, int | None, int]] = []
        for entry in entries:
            least = self.int_keyword({"minContains": entry["min"]}, "minContains", 1, pointer) or 0
            most = self.int_keyword({"maxContains": entry["max"]}, "maxContains", None, pointer)
            if least or most is not None:
                counts.append((entry["schema"], least, most, entry.get("from", 0)))
        if len(counts) > CONTAINS_COUNTED_MAX and warn:
            self.warn(
                f"more than {CONTAINS_COUNTED_MAX} contains (with minContains/maxContains) on one array: the first "
                f"{CONTAINS_COUNTED_MAX} are counted, the others not required (a superset)",
                f"{pointer}/contains",
            )
            counts = counts[:CONTAINS_COUNTED_MAX]
        return counts

    def contains_array(
        self, d: dict[str, Any], min_items: int, max_items: int | None, counts: list[tuple[Any, int, int | None, int]], pointer: str
    ) -> Sym | None:
        """Arrays with between `least` and `most` items valid under each `contains` of `counts`.

        Items are read left-recursively with a state (items so far, matches of each contains
        so far), each clamped where it stops mattering (items counted exactly through
        `prefixItems`; a count without `maxContains` saturates at its `minContains`). An item
        comes in classes, one per set of the contains it is counted for: `S AND` those `AND
        NOT` each other contains that has a `maxContains` (one without needs no negation:
        an item it matches may go uncounted, ambiguous but exact); S is the item's own schema
        (`prefixItems` entry or `items`). A class that counts a saturated contains is left
        out (the class without it accepts as much).
        """
        items = d.get("items", True)
        prefix = list(d.get("prefixItems", []))
        # Items counted from an index on: the prefix padded with `items` up to it.
        prefix += [items] * (max([len(prefix), *(c[3] for c in counts)]) - len(prefix))
        where = f"{pointer}/contains"
        if any(most is not None and least > most for _, least, most, _ in counts):
            return None
        n = len(counts)
        bounded = [most is not None for _, _, most, _ in counts]
        tops = [least if most is None else most for _, least, most, _ in counts]
        t_top = max(min_items, 1, len(prefix)) if max_items is None else max_items
        if (t_top + 1) * math.prod(top + 1 for top in tops) > ARRAY_STATE_COUNT_MAX:
            raise self.fail(f"minItems/maxItems with contains need more than {ARRAY_STATE_COUNT_MAX} grammar states", where)

        @functools.cache
        def classes(position: int) -> list[tuple[Sym, int]]:
            schema = prefix[position] if position < len(prefix) else items
            out: list[tuple[Sym, int]] = []
            for mask in range((1 << n) - 1, -1, -1):
                if any(mask >> i & 1 and position < counts[i][3] for i in range(n)):
                    continue  # not counted before its index
                parts = [schema]
                for i, (contains, _, _, _) in enumerate(counts):
                    if mask >> i & 1:
                        parts.append(contains)
                    elif bounded[i]:
                        parts.append({"not": contains})
                sym = self.compile(parts[0] if len(parts) == 1 else {"allOf": parts}, where)
                if sym is not None:
                    out.append((sym, mask))
            return out

        name = pointer or "/"
        states: dict[tuple[int, tuple[int, ...]], int] = {}

        def state(t: int, c: tuple[int, ...]) -> int:
            if (t, c) not in states:
                states[(t, c)] = self.ir.add_nonterminal(f"{name}:contains{t}.{'.'.join(map(str, c))}")
            return states[(t, c)]

        def steps(t: int, c: tuple[int, ...]) -> list[tuple[Sym, int, tuple[int, ...]]]:
            out: list[tuple[Sym, int, tuple[int, ...]]] = []
            if max_items is not None and t + 1 > max_items:
                return out
            t2 = min(t + 1, t_top) if max_items is None else t + 1
            for item, mask in classes(min(t, len(prefix))):
                c2 = list(c)
                for i in range(n):
                    if mask >> i & 1:
                        if not bounded[i] and c[i] >= tops[i]:
                            break  # saturated: the class without i accepts as much
                        c2[i] += 1
                        if bounded[i] and c2[i] > tops[i]:
                            break
                else:
                    out.append((item, t2, tuple(c2)))
            return out

        start = tuple(0 for _ in counts)
        todo = [(0, start)]
        seen = {(0, start)}
        while todo:
            t, c = todo.pop()
            for item, t2, c2 in steps(t, c):
                lhs = state(t2, c2)
                self.rule(lhs, [item] if t == 0 else [Sym.n(state(t, c)), self.comma, item])
                if (t2, c2) not in seen:
                    seen.add((t2, c2))
                    todo.append((t2, c2))
        enough = [least for _, least, _, _ in counts]
        alts: list[list[Sym]] = [[self.lbracket, self.rbracket]] if min_items == 0 and not any(enough) else []
        for (t, c), nt in states.items():
            if t >= min_items and all(ci >= e for ci, e in zip(c, enough)):
                alts.append([self.lbracket, Sym.n(nt), self.rbracket])
        return self.choice(f"{name}:array", alts)

    def repeat(self, name: str, unit: tuple[Sym, ...], lo: int, hi: int | None) -> list[Sym]:
        """A sequence deriving unit^c for lo <= c <= hi (hi None = unbounded)."""
        out = list(unit) * lo if lo <= 4 else self.power(name, unit, lo)  # (`power`'s small case inline)
        if hi is None:
            key = ("star", unit)
            if key not in self.memo:
                star = self.memo[key] = self.ir.add_nonterminal(f"{name}*")
                self.rules(star, [[], [Sym.n(star), *unit]])
                self.productive_made += 1  # (an empty rule)
            return out + [Sym.n(self.memo[key])]
        return out + self.up_to(name, unit, hi - lo)

    def power(self, name: str, unit: tuple[Sym, ...], count: int) -> list[Sym]:
        """unit^count, by doubling rules when count is large: unit^count -> unit^(count/2)
        unit^(count/2) [unit], the halves built first, without recursion (a count of 1e308
        is 1,023 halvings)."""
        if count <= 4:
            return list(unit) * count
        memo = self.memo
        halvings = []
        while count > 4 and ("pow", unit, count) not in memo:
            halvings.append(count)
            count //= 2
        for count in reversed(halvings):
            half = list(unit) * (count // 2) if count // 2 <= 4 else [Sym.n(memo[("pow", unit, count // 2)])]
            rhs = half + half + (list(unit) if count % 2 else [])
            memo[("pow", unit, count)] = self.nonterminal(f"{name}^{count}", [rhs])
        return [Sym.n(memo[("pow", unit, count)])]

    def up_to(self, name: str, unit: tuple[Sym, ...], count: int) -> list[Sym]:
        """unit^c for 0 <= c <= count, unambiguously, in O(log count) rules:
        unit^{0,n} -> unit^{0,h-1} | unit^h unit^{0,n-h}, h the largest power of two <= n. On an
        explicit stack (each entry: its count, nonterminal, then the first part of its second
        rule), in the order a recursion would build them."""
        memo = self.memo
        result: list[Sym] = []
        stack: list[list[Any]] = [[count, None, None]]
        while stack:
            entry = stack[-1]
            n, nt, first = entry
            if nt is None:
                key = ("upto", unit, n)
                if n == 0 or key in memo:
                    result = [Sym.n(memo[key])] if n else []
                    stack.pop()
                    continue
                nt = entry[1] = memo[key] = self.ir.add_nonterminal(f"{name}{{0,{n}}}")
                if n == 1:
                    self.rule(nt, [])
                    self.rule(nt, list(unit))
                    result = [Sym.n(nt)]
                    stack.pop()
                    continue
                stack.append([(1 << (n.bit_length() - 1)) - 1, None, None])  # unit^{0,h-1}
            elif first is None:
                self.rule(nt, result)
                high = 1 << (n.bit_length() - 1)  # largest power of two <= n
                entry[2] = self.power(name, unit, high)
                stack.append([n - high, None, None])  # unit^{0,n-h}
            else:
                self.rule(nt, first + result)
                result = [Sym.n(nt)]
                stack.pop()
        return result
