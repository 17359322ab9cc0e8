"""JSON Schema keywords beyond llguidance (`not`, `if`, dependencies, `patternProperties`,
`propertyNames`, `min/maxProperties`, `contains`, `uniqueItems`, `multipleOf`, enum checks,
anchors in patterns) against an independent oracle: the `jsonschema` package.

Every case runs a pool of small compact JSON instances through a real `Matcher` (byte-level
tokens, so `and`/`not` lexemes are honoured as the core implements them) and compares
acceptance with `jsonschema`'s verdict. Each case must see both valid and invalid instances,
so no case can pass vacuously. Object instances have their keys put in the schema's
property order first (fixed key order is a documented departure, tested elsewhere), and
numbers are written without exponents (the keywords here write numbers without one).
The cases are data: tests/data/json_schema/keywords.json and negation_errors.json.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from json_text import accepts, compact, ordered

from tokensieve import Grammar, Matcher
from tokensieve._errors import GrammarError
from tokensieve._grammar.json_schema import compiler
from tokensieve._grammar.json_schema.compiler import ONE_OF_EXACT_ALTERNATIVES_MAX, _one_of_expansion, json_schema_to_ir, multiple_of_regex

def oracle(schema: Any) -> Any:
    """jsonschema's validator for the schema's `$schema` (2020-12 by default), formats asserted."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


SCALARS: list[Any] = [None, True, False, 0, 1, -1, 2, 3, 5, 6, 7, 12, 1.5, 2.5, -0.5, 0.25, "", "a", "b", "ab", "abc", "ba", "a1"]
KEYS = ["a", "b", "c", "ab", "ba", "x1", "aa"]
SMALL_VALUES: list[Any] = [None, True, 1, 2, 7, 1.5, "", "a", "xy", [], [1]]


def pool() -> list[Any]:
    out: list[Any] = list(SCALARS)
    out += [[], [1], [1, 1], [1, 2], [2, 1], [1, 2, 3], [3, 3, 3], ["a"], ["a", "a"], ["a", 1], [True, False],
            [True, True], [False], [2, 5, 7], [5, 6, 7, 8], [1, "a", 2], [[1], [1]], [{"a": 1}], [1.5, 2],
            [1, 2, 3, "a"], [1, "a", 1.5]]
    for n in range(0, 3):
        for keys in itertools.combinations(KEYS, n):
            for values in itertools.product(SMALL_VALUES[:6] if n == 2 else SMALL_VALUES, repeat=n):
                out.append(dict(zip(keys, values)))
    out += [{"a": 1, "b": 2, "c": 3}, {"a": "x", "b": "y", "ab": 1}, {"x1": 1, "aa": 2, "ba": 3}]
    return out


POOL = pool()

CORPUS = Path(__file__).parent / "data" / "json_schema"
# (name, schema, property order for object instances)
CASES = [(case["name"], case["schema"], case["key_order"]) for case in json.loads((CORPUS / "keywords.json").read_text(encoding="utf-8"))]
NEGATION_ERROR_CASES = [(case["schema"], case["pointer"]) for case in json.loads((CORPUS / "negation_errors.json").read_text(encoding="utf-8"))]


@pytest.mark.parametrize("name,schema,order", CASES, ids=[c[0] for c in CASES])
def test_keyword_agrees_with_jsonschema(name: str, schema: Any, order: list[str]) -> None:
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    verdicts = {True: 0, False: 0}
    wrong = []
    for instance in POOL:
        value = ordered(instance, order)
        expected = validator.is_valid(value)
        verdicts[expected] += 1
        if accepts(grammar, compact(value)) != expected:
            wrong.append(f"{compact(value)}: jsonschema says {'valid' if expected else 'invalid'}")
    assert not wrong, f"{name}: {len(wrong)} disagreements, e.g.\n" + "\n".join(wrong[:10])
    assert verdicts[True] and verdicts[False], f"{name}: the pool must hold valid and invalid instances ({verdicts})"


def test_one_of_is_exact_without_warning_where_negations_exist() -> None:
    ir = json_schema_to_ir({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    assert ir.options["warnings"] == []
    ir = json_schema_to_ir({"oneOf": [{"type": "string"}, {"minLength": 2}]})  # overlapping
    assert ir.options["warnings"] == []


def test_one_of_with_negated_object_keywords_is_exact() -> None:
    # additionalProperties and propertyNames negate into witness members: no fallback to anyOf.
    for name in ("one_of_closed_object_exact", "one_of_property_names_exact"):
        schema = next(s for n, s, _ in CASES if n == name)
        assert json_schema_to_ir(schema).options["warnings"] == [], name


# Options whose exact form would cost too much (an option excluding more than
# ONE_OF_NEGATED_PATTERNS_MAX patterns): oneOf falls back to anyOf, a superset, with a warning.
ONE_OF_FALLBACKS = [
    {"oneOf": [{"type": "string", "pattern": p} for p in ("a", "b", "c", "1", "x")]},
]


@pytest.mark.parametrize("schema", ONE_OF_FALLBACKS)
def test_one_of_without_negations_is_any_of_a_superset(schema: Any) -> None:
    ir = json_schema_to_ir(schema)
    assert any("oneOf is treated as anyOf" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    any_of = oracle({"anyOf": schema["oneOf"]})
    both = 0
    for value in POOL:
        assert accepts(grammar, compact(value)) == any_of.is_valid(value), compact(value)
        if any_of.is_valid(value) and not validator.is_valid(value):
            both += 1  # valid under both options: accepted, the stated approximation
    assert both, "the pool must hold a value valid under both options"


def test_one_of_expansion_counts_as_the_product_formula_says() -> None:
    """`_one_of_expansion` (a running product, stopped past the cap) against the formula it
    replaces: the sum over the options of the product of the others' counts."""
    rng = random.Random(5)
    cap = ONE_OF_EXACT_ALTERNATIVES_MAX
    for _ in range(3_000):
        counts = [rng.choice([0, 1, 1, 1, 2, 3, 5, 17]) for _ in range(rng.randint(0, 9))]
        direct = sum(math.prod(c for j, c in enumerate(counts) if j != i) for i in range(len(counts)))
        got = _one_of_expansion(counts, cap)
        assert got == direct if direct <= cap else got > cap, (counts, direct, got)


# oneOf options that list values: which values are in exactly one option, overlapping lists and
# options of other kinds beside them (the overlap of listed options is found in one pass over
# the values, `_pairs_to_check`).
ONE_OF_LISTED = [
    {"oneOf": [{"const": v} for v in ("a", "b", "ab", 1, 2, None)]},
    {"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "ab"]}, {"const": 1}]},  # "b" in two options
    {"oneOf": [{"enum": [1, 2]}, {"enum": [2.0, 7]}, {"const": "a"}]},  # 2 and 2.0 are one value
    {"oneOf": [{"const": "a"}, {"type": "integer"}, {"enum": [1, "b"]}, {"type": "string", "maxLength": 1}]},
    {"oneOf": [{"enum": ["a", "ab", 1]}, {"enum": [[1], "xy"]}, {"const": 7}]},  # an array: not a scalar list
]


@pytest.mark.parametrize("schema", ONE_OF_LISTED, ids=range(len(ONE_OF_LISTED)))
def test_one_of_of_listed_values_agrees_with_jsonschema(schema: Any) -> None:
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    verdicts = {True: 0, False: 0}
    for value in POOL:
        expected = validator.is_valid(value)
        verdicts[expected] += 1
        assert accepts(grammar, compact(value)) == expected, compact(value)
    assert verdicts[True] and verdicts[False], verdicts


def test_one_of_past_the_pair_limit_is_any_of_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ONE_OF_PAIRS_MAX pairs the options are not shown disjoint: closed objects that each
    require their own key are disjoint, and within the limit compile without a warning."""
    schema = {"oneOf": [{"type": "object", "properties": {k: {"type": "integer"}}, "required": [k], "additionalProperties": False}
                        for k in ("a", "b", "c", "ab")]}
    assert not json_schema_to_ir(schema).options.get("warnings")
    monkeypatch.setattr(compiler, "ONE_OF_PAIRS_MAX", 5)  # 4 options: 6 pairs
    ir = json_schema_to_ir(schema)
    assert any("oneOf is treated as anyOf" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    assert all(accepts(grammar, compact(v)) == validator.is_valid(v) for v in POOL)  # disjoint: anyOf is exact


def test_all_of_of_many_parts_merges_within_the_work_limit_and_is_refused_past_it() -> None:
    """An allOf's parts are merged one into the others (`spend_merge_work`): 300 parts are
    well inside the limit and exact; 5,000 parts with a property each are refused, naming it."""
    keys = [f"p{i}" for i in range(300)]
    schema = {"type": "object", "allOf": [{"properties": {k: {"type": "integer"}}} for k in keys] + [{"required": ["p7"]}]}
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    for value in ({"p7": 1}, {"p7": 1, "p299": 2}, {"p7": "x"}, {"p1": 1}, {"p7": 1, "p8": [1]}):
        assert accepts(grammar, compact(ordered(value, keys))) == validator.is_valid(value), value
    with pytest.raises(GrammarError, match="MERGE|merging this schema's allOf parts"):
        json_schema_to_ir({"allOf": [{"properties": {f"p{i}": {"type": "integer"}}} for i in range(5_000)]})


def test_coerce_one_of_keeps_llguidance_meaning() -> None:
    schema = {"oneOf": [{"type": "string"}, {"minLength": 2}]}
    coerced = Grammar.json_schema({**schema, "x-guidance": {"coerce_one_of": True}})
    exact = Grammar.json_schema(schema)
    assert accepts(coerced, '"abc"') and not accepts(exact, '"abc"')  # a string of length >= 2 is both
    assert accepts(coerced, '"a"') and accepts(exact, '"a"')


def test_unique_items_beyond_small_domains_warns_and_accepts_duplicates() -> None:
    # Strings with a maxLength are neither a finite domain nor open items the core checks
    # (test_json_schema_unique_items.py): a superset.
    schema = {"type": "array", "items": {"type": "string", "maxLength": 5}, "uniqueItems": True}
    ir = json_schema_to_ir(schema)
    assert any("uniqueItems is not enforced" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema)
    assert accepts(grammar, '["a","b"]') and accepts(grammar, '["a","a"]')  # the documented superset


def test_not_unique_items_beyond_small_domains_is_a_superset_with_a_warning() -> None:
    # Two equal items among integers is not a context-free language: "two items or more" instead.
    schema = {"type": "array", "items": {"type": "integer"}, "not": {"uniqueItems": True}}
    ir = json_schema_to_ir(schema)
    assert any("not uniqueItems" in w and "/not/uniqueItems" in w for w in ir.options["warnings"])
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    superset = oracle({"type": "array", "items": {"type": "integer"}, "minItems": 2})
    for value in POOL:
        assert accepts(grammar, compact(value)) == superset.is_valid(value), compact(value)
    assert accepts(grammar, "[1,2]") and not validator.is_valid([1, 2])  # the stated approximation
    assert not json_schema_to_ir({"type": "array", "items": {"enum": [1, 2]}, "not": {"uniqueItems": True}}).options["warnings"]


@pytest.mark.parametrize("schema,values", [
    ({"type": "object", "allOf": [{"not": {"patternProperties": {p: {"type": "integer"}}}} for p in "abcde"]},
     [dict(zip(keys, ["s"] * len(keys))) for n in range(6) for keys in itertools.combinations("abcdex", n)]),
    ({"type": "array", "prefixItems": [True], "allOf": [{"not": {"prefixItems": [True], "items": {"not": {"const": c}}}} for c in range(5)]},
     [list(a) for n in range(7) for a in itertools.product(range(5), repeat=n) if n < 6 or a[0] == 0]),
    ({"type": "object", "not": {"propertyNames": {"not": {"oneOf": [{"pattern": "a"}, {"pattern": "b"}]}}}},
     [{k: 1 for k in keys} for n in range(4) for keys in itertools.combinations(["a", "b", "ab", "c", "ba", "x"], n)]),
])
def test_witnesses_beyond_the_limit_are_dropped_a_superset_with_a_warning(schema: Any, values: list[Any]) -> None:
    # Five witnesses, WITNESS_COUNT_MAX = 4: the fifth is not required; a witness whose keys are
    # not one lexeme may have any key.
    assert any("a superset" in w for w in json_schema_to_ir(schema).options["warnings"])
    grammar, validator = Grammar.json_schema(schema), oracle(schema)
    extra = 0
    for value in values:
        valid, accepted = validator.is_valid(value), accepts(grammar, compact(value))
        assert accepted or not valid, compact(value)  # every valid value accepted
        extra += accepted and not valid
    assert extra, "the stated superset must show"


def test_if_then_else_is_ignored_before_draft_7() -> None:
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "if": {"type": "integer"}, "then": {"minimum": 5}}
    grammar = Grammar.json_schema(schema)
    assert accepts(grammar, "1")
    assert any("draft 7" in w for w in json_schema_to_ir(schema).options["warnings"])


@pytest.mark.parametrize("schema,pointer", NEGATION_ERROR_CASES)
def test_unexpressible_negations_name_their_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == pointer, str(info.value)
    assert "lenient=True" in str(info.value)
    ir = json_schema_to_ir(schema, lenient=True)
    assert ir.options["warnings"]


def test_too_many_properties_to_count_is_an_error() -> None:
    props = {f"p{i}": {} for i in range(300)}
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"type": "object", "properties": props, "minProperties": 100, "maxProperties": 200})
    assert "minProperties/maxProperties" in str(info.value)


def test_clause_expansion_is_bounded() -> None:
    deps = {f"p{i}": [f"q{i}"] for i in range(14)}
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"type": "object", "dependentRequired": deps})
    assert "alternatives" in str(info.value)


def test_self_reaching_clauses_hit_the_depth_limit() -> None:
    schema = {"$defs": {"a": {"not": {"$ref": "#/$defs/b"}}, "b": {"allOf": [{"$ref": "#/$defs/a"}], "type": "object"}}, "$ref": "#/$defs/a", "type": "object"}
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert "deeper" in str(info.value)


# ---- multipleOf regexes against exact arithmetic ------------------------------------------------

MULTIPLES = [0.01, 0.5, 1, 2, 3, 5, 7, 10, 2.5, 0.25, 1.5, 12, 100]


@functools.lru_cache(maxsize=None)
def _regex_grammar(pattern: str) -> Grammar:
    return Grammar.regex(pattern)


@pytest.mark.parametrize("multiple", MULTIPLES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(whole=st.integers(-5000, 5000), fraction=st.text("0123456789", max_size=4))
def test_multiple_of_regex_matches_arithmetic(multiple: float, whole: int, fraction: str) -> None:
    """The regex, in the core's syntax (an integer multiple is its residue term), run by the
    core; the oracle is exact decimal arithmetic."""
    from fractions import Fraction

    text = str(whole) + (f".{fraction}" if fraction else "")
    if text.startswith("-0") and Fraction(text) == 0:
        return
    rx = multiple_of_regex(multiple)
    assert rx is not None
    expected = Fraction(text) % Fraction(str(multiple)) == 0
    assert accepts(_regex_grammar(rx), text) == expected, (multiple, text)


@pytest.mark.parametrize("multiple", [0.29, 1.01, 0.00037, 3.3, 0.77, 4.9, 23.2])
def test_multiple_of_refused_unbuilt_has_too_many_states(multiple: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """A multiple whose factor coprime to 10 is above MULTIPLE_STATE_COUNT_MAX is refused before
    its automaton is built; built (the bound lifted), its minimized automaton is over the bound."""
    from tokensieve._grammar.json_schema import numbers

    assert numbers.multiple_of_regex.__wrapped__(multiple) is None
    counts = []
    minimize = numbers._minimize

    def counting(*args: Any) -> Any:
        out = minimize(*args)
        counts.append(len({q for pair in out[0] for q in pair}))
        return out

    monkeypatch.setattr(numbers, "_minimize", counting)
    monkeypatch.setattr(numbers, "MULTIPLE_STATE_COUNT_MAX", 10**9)
    monkeypatch.setattr(numbers, "MULTIPLE_REGEX_SIZE_MAX", 0)  # no state elimination: the count is what is asked
    numbers.multiple_of_regex.__wrapped__(multiple)
    assert counts and counts[0] > 24


@pytest.mark.parametrize("multiple", [1.4, 2.4, 4.2, 8.4, 9.5, 6.75, 13.5, 2.125, 0.33])
def test_multiple_of_past_one_automaton_is_exact_in_two_regexes(multiple: float) -> None:
    """A non-integer multiple whose one automaton is over the bounds (2.4: 24 remainders) is
    exact as the automaton of its last digits (8·10^-1) and the residue of its digits, point
    left out (3: `(?%.3,0)`); the oracle is exact decimal arithmetic."""
    from fractions import Fraction

    from tokensieve._grammar.json_schema import numbers

    assert numbers.multiple_of_regex(multiple) is None
    assert len(numbers.multiple_of_regexes(multiple) or ()) >= 2
    grammar = Grammar.json_schema({"type": "number", "multipleOf": multiple})
    step = Fraction(repr(multiple)) if isinstance(multiple, float) else Fraction(multiple)
    seen = set()
    for k in range(-250, 1000):
        x = Fraction(k, 10)
        text = str(int(x)) if x.denominator == 1 else str(float(x))
        expected = (x / step).denominator == 1
        seen.add(expected)
        assert accepts(grammar, text) == expected, (multiple, text)
    assert seen == {True, False}


# ---- hypothesis: random small instances against a few schemas -------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-20, 20) | st.sampled_from(["", "a", "b", "ab", "ba", "1"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)

HYPOTHESIS_CASES = [name for name, _, _ in CASES if name in {
    "not_required", "not_properties", "if_then_else", "dependencies_schema_and_list", "pattern_properties_overlapping",
    "min_max_properties", "contains_bounds", "unique_items_enum", "one_of_overlapping_objects", "one_of_three_arrays",
    "not_property_names_with_required", "not_additional_properties_beside_closed_object", "not_pattern_properties",
    "not_pattern_properties_closed_counted", "two_witnesses_one_member", "witnesses_nested_in_all_of_any_of",
    "one_of_closed_object_exact", "not_items_after_prefix", "not_items_after_prefix_twice",
}]


@pytest.mark.parametrize("name", HYPOTHESIS_CASES)
def test_random_instances_agree_with_jsonschema(name: str) -> None:
    schema, order = next((s, o) for n, s, o in CASES if n == name)
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)

    @settings(max_examples=150, deadline=None)
    @given(JSON_VALUES)
    def check(value: Any) -> None:
        value = ordered(value, order)
        assert accepts(grammar, compact(value)) == validator.is_valid(value), compact(value)

    check()


# Non-integer bounds are exact, digit by digit: numerals with up to 4 fraction digits against
# bounds with up to 3, jsonschema (float comparison, exact at these sizes) as the oracle.
DECIMALS = st.decimals(min_value=-30, max_value=30, places=3, allow_nan=False, allow_infinity=False)
NUMERALS = st.builds(
    lambda whole, fraction, negative: ("-" if negative and (whole or fraction.strip("0")) else "") + str(whole) + (f".{fraction}" if fraction else ""),
    st.integers(0, 31), st.text("0123456789", max_size=4), st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), DECIMALS), st.one_of(st.none(), DECIMALS), st.booleans(), st.booleans(), st.lists(NUMERALS, min_size=20, max_size=20))
def test_decimal_bounds_agree_with_jsonschema(lo: Any, hi: Any, lo_open: bool, hi_open: bool, numerals: list[str]) -> None:
    schema: dict[str, Any] = {"type": "number"}
    if lo is not None:
        schema["exclusiveMinimum" if lo_open else "minimum"] = float(lo)
    if hi is not None:
        schema["exclusiveMaximum" if hi_open else "maximum"] = float(hi)
    validator = oracle(schema)
    try:
        grammar = Grammar.json_schema(schema)
    except GrammarError:
        assert not any(validator.is_valid(json.loads(n)) for n in numerals)  # an empty interval
        return
    assert not json_schema_to_ir(schema).options["warnings"]
    for numeral in numerals:
        assert accepts(grammar, numeral) == validator.is_valid(json.loads(numeral)), (schema, numeral)


# A bound at zero alone lets numbers with an exponent through, by their sign (the documented
# subset elsewhere: numbers bounded otherwise are written without one; -0 is never written).
EXPONENT_NUMERALS = [
    m + e
    for m in ["0", "0.0", "1", "2.5", "0.001", "10", "-1", "-0.5", "-20.25", "-0", "-0.0"]
    for e in ["", "e0", "e5", "E-3", "e+2", "E+0"]
]


@pytest.mark.parametrize("keyword", ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"])
def test_a_bound_at_zero_allows_exponents_by_sign(keyword: str) -> None:
    schema = {"type": "number", keyword: 0}
    validator = oracle(schema)
    grammar = Grammar.json_schema(schema)
    verdicts = set()
    for numeral in EXPONENT_NUMERALS:
        expected = validator.is_valid(json.loads(numeral)) and not (numeral.startswith("-") and Decimal(numeral) == 0)
        verdicts.add(expected)
        assert accepts(grammar, numeral) == expected, (schema, numeral)
    assert verdicts == {True, False}
    # Beside another bound, no exponent (an interval's exponents are not a regular language).
    assert not accepts(Grammar.json_schema({**schema, "maximum" if "inimum" in keyword else "minimum": 5 if "inimum" in keyword else -5}), "1e-3")


# ---- hypothesis: negated object keywords (witnesses) in random object contexts --------------------

KEY_SCHEMAS: list[Any] = [{}, {"type": "integer"}, {"type": "string"}, {"type": ["integer", "null"]}, {"minimum": 2}, False]
NEGATED = st.one_of(
    st.builds(lambda n: {"propertyNames": {"maxLength": n}}, st.integers(0, 2)),
    st.builds(lambda p: {"propertyNames": {"pattern": p}}, st.sampled_from(["^a", "b", "1$"])),
    st.builds(lambda names: {"propertyNames": {"enum": names}}, st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.builds(
        lambda pats: {"patternProperties": pats},
        st.dictionaries(st.sampled_from(["^a", "b$", "x"]), st.sampled_from(KEY_SCHEMAS[1:5]), min_size=1, max_size=2),
    ),
    st.builds(
        lambda props, extra, pats: {"properties": {k: {} for k in props}, "additionalProperties": extra,
                                    **({"patternProperties": {p: {} for p in pats}} if pats else {})},
        st.lists(st.sampled_from(KEYS), max_size=2), st.sampled_from(KEY_SCHEMAS[1:]), st.lists(st.sampled_from(["^a", "x"]), max_size=1),
    ),
)
CONTEXTS = st.builds(
    lambda props, required, extra, low, high: {
        "type": "object",
        "properties": props,
        "required": required,
        **({} if extra is None else {"additionalProperties": extra}),
        **({} if low is None else {"minProperties": low}),
        **({} if high is None else {"maxProperties": high}),
    },
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(KEY_SCHEMAS[:5]), max_size=3),
    st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
    st.sampled_from([None, False, {"type": "integer"}]),
    st.sampled_from([None, 1, 2]),
    st.sampled_from([None, 1, 2, 3]),
)
OBJECTS = [v for v in POOL if isinstance(v, dict)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONTEXTS, st.lists(NEGATED, min_size=1, max_size=2), st.sampled_from(["allOf", "anyOf", "not_not"]))
def test_witnesses_in_random_contexts_agree_with_jsonschema(context: Any, negated: list[Any], wrap: str) -> None:
    parts = [{"not": n} for n in negated]
    if wrap == "not_not":
        schema = {**context, "not": {"not": {"allOf": parts}}}
    else:
        schema = {**context, wrap: parts}
    validator = oracle(schema)
    order = list(context["properties"]) + [k for k in context["required"] if k not in context["properties"]]
    values = [ordered(v, order) for v in OBJECTS]
    try:
        grammar = Grammar.json_schema(schema)
    except GrammarError as err:
        assert "accepts no value" in str(err) or "no value" in str(err) or "exceeds" in str(err) or "only" in str(err), err
        assert not any(validator.is_valid(v) for v in values), (schema, err)
        return
    assert not json_schema_to_ir(schema).options["warnings"], schema
    for value in values:
        assert accepts(grammar, compact(value)) == validator.is_valid(value), (schema, compact(value))


ITEM_SCHEMAS: list[Any] = [{}, {"type": "integer"}, {"type": "string"}, {"minimum": 2}, {"type": ["integer", "null"]}, False]
ARRAY_CONTEXTS = st.builds(
    lambda prefix, items, low, high: {
        "type": "array",
        "prefixItems": prefix,
        **({} if items is None else {"items": items}),
        **({} if low is None else {"minItems": low}),
        **({} if high is None else {"maxItems": high}),
    },
    st.lists(st.sampled_from(ITEM_SCHEMAS[:5]), max_size=2),
    st.sampled_from([None, *ITEM_SCHEMAS[1:]]),
    st.sampled_from([None, 1, 3]),
    st.sampled_from([None, 2, 4]),
)
NEGATED_ITEMS = st.builds(
    lambda k, items: {"prefixItems": [{}] * k, "items": items}, st.integers(1, 3), st.sampled_from(ITEM_SCHEMAS[1:])
)
ARRAYS = st.lists(st.sampled_from([0, 1, 2, 5, -1, 1.5, "", "a", None, True]), max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ARRAY_CONTEXTS, st.lists(NEGATED_ITEMS, min_size=1, max_size=2), st.lists(ARRAYS, min_size=25, max_size=25))
def test_item_witnesses_in_random_contexts_agree_with_jsonschema(context: Any, negated: list[Any], arrays: list[Any]) -> None:
    schema = {**context, "allOf": [{"not": n} for n in negated]}
    validator = oracle(schema)
    try:
        grammar = Grammar.json_schema(schema)
    except GrammarError as err:
        assert not any(validator.is_valid(v) for v in arrays), (schema, err)
        return
    assert not json_schema_to_ir(schema).options["warnings"], schema
    for value in arrays:
        assert accepts(grammar, compact(value)) == validator.is_valid(value), (schema, compact(value))


# Values that json_equal tells apart or not: 1 == 1.0, but true != 1, "1" != 1, [1] != 1. (Not
# -0.0: a listed zero is spelled 0, 0.0, ..., never with a minus sign.)
LISTED = [None, True, False, 0, 0.0, 1, 1.0, 2, 2.5, "", "1", "a", "b", [1], [1.0], [True], {"a": 1}, {"a": True}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LISTED), min_size=1, max_size=8), st.lists(st.sampled_from(LISTED), min_size=1, max_size=8),
       st.sampled_from(["oneOf", "anyOf", "not"]))
def test_enums_checked_against_enums_agree_with_jsonschema(first: list[Any], second: list[Any], how: str) -> None:
    """An enum checked value by value against another schema's enum (the instance checker's
    lists, looked up by key when all are finite scalars): jsonschema's verdict on every listed
    value and the pool's scalars."""
    if how == "not":
        schema: Any = {"enum": first, "not": {"enum": second}}
    else:
        schema = {how: [{"enum": first}, {"enum": second, "type": ["number", "string", "boolean", "null", "array", "object"]}]}
    validator = oracle(schema)
    try:
        grammar = Grammar.json_schema(schema)
    except GrammarError:
        assert not any(validator.is_valid(v) for v in first + second), schema
        return
    for value in first + second + SCALARS:
        assert accepts(grammar, compact(value)) == validator.is_valid(value), (schema, compact(value))


def test_integers_past_double_range_in_values_and_bounds_compile() -> None:
    """Integers of 400 digits (and 1e308) in an enum, a const, bounds and counts (`float(value)`
    overflowed, and a count's doubling rules recursed once per bit: an OverflowError or a
    RecursionError instead of a grammar); jsonschema decides every text, and a string length
    of that size is refused with its place."""
    big = 10**400
    cases = [
        {"enum": [big, 1, "x"], "not": {"const": 1}},
        {"enum": [big, 2.5, 10], "multipleOf": 5},
        {"const": big},
        {"type": "integer", "minimum": -big, "maximum": big},
        {"type": "number", "minimum": -big, "exclusiveMaximum": big},
        {"oneOf": [{"enum": [big, 3]}, {"enum": [big + 1, 3]}]},
        {"maxItems": big, "items": {"type": "integer"}},
        {"not": {"minProperties": 1e308}},
        {"minProperties": 1e308},
        {"minItems": big},
    ]
    texts = [str(big), str(big + 1), str(-big), str(big * 10), "1", "3", "10", "2.5", '"x"', "0", "[]", "[1,2]", '["a"]',
             "{}", '{"a":1}']
    for schema in cases:
        grammar = Grammar.json_schema(schema)
        validator = oracle(schema)
        verdicts = {validator.is_valid(json.loads(text)) for text in texts}
        assert verdicts == {True, False}, schema
        for text in texts:
            assert accepts(grammar, text) == validator.is_valid(json.loads(text)), (schema, text)
    with pytest.raises(GrammarError) as info:
        Grammar.json_schema({"type": "string", "minLength": big})
    assert info.value.json_pointer == "/minLength"


@pytest.mark.parametrize("schema,texts", [
    ({"type": "string", "pattern": "^2024", "format": "date"}, ["2024-01-02", "2024-13-01", "2023-01-02", "2024-02-30", "2024x"]),
    ({"type": "string", "pattern": "^10\\.", "format": "ipv4"}, ["10.0.0.1", "10.0.0.256", "11.0.0.1", "10.1", "10.255.255.255"]),
    ({"type": "string", "pattern": "^[0-9a-f-]+$", "format": "uuid"},
     ["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000", "123e4567e89b12d3a456426614174000"]),
    ({"type": "string", "pattern": "^https://", "format": "iri", "maxLength": 30},
     ["https://ex.com/é", "https://ex.com/a b", "http://ex.com/é", "https://ex.com/" + "é" * 20, "https://"]),
])
def test_a_format_beside_a_pattern_is_asserted_too(schema: Any, texts: list[str]) -> None:
    """Both hold (the format was ignored beside a pattern, a warning): jsonschema, formats
    asserted, decides each text; both verdicts occur."""
    grammar = Grammar.json_schema(schema)
    assert not json_schema_to_ir(schema).options["warnings"]
    validator = oracle(schema)
    verdicts = set()
    for text in texts:
        expected = validator.is_valid(text)
        verdicts.add(expected)
        assert accepts(grammar, json.dumps(text, ensure_ascii=False)) == expected, (schema, text)
    assert verdicts == {True, False}


@pytest.mark.parametrize("pattern", ["[ab]@", "@example\\.com$", "x", "[ab]@[cd]", ".+@.+\\..+"])
def test_email_beside_a_search_pattern_masks_within_step_fuel(pattern: str) -> None:
    """`email` beside a search pattern (it was left out with a warning: "[ab]@" and the
    mailbox regex ran out of step fuel within a 13-character address). Fed token by token over
    Llama-3 with a mask before each token, every mask within step fuel, the verdicts are the
    pattern's (`re.search`) and the mailbox's; the texts avoid what jsonschema's `email`
    check (an "@") and the mailbox regex disagree on."""
    import re

    import numpy as np

    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    schema = {"type": "string", "pattern": pattern, "format": "email"}
    assert not json_schema_to_ir(schema).options["warnings"]
    grammar = Grammar.json_schema(schema)
    validator = oracle(schema)
    buf = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    texts = ["xa@example.com", "b@a", "user.name+tag@sub.example.co.uk", "x@[127.0.0.1]", "nobody", "a.b-c@x-y.z",
             "xb@cd.example.com", "x@example.com"]
    verdicts = set()
    for text in texts:
        expected = validator.is_valid(text)
        assert expected == (re.search(pattern, text) is not None and "@" in text)
        verdicts.add(expected)
        m = Matcher(tok, grammar)
        for t in tok.encode(json.dumps(text)):
            m.fill_bitmask(buf)  # raises LimitError when a mask runs out of step fuel
            allowed = bool((int(buf[0, t >> 5]) >> (t & 31)) & 1)
            assert allowed == m.consume_tokens((t,)), (pattern, text)
            if not allowed:
                assert not expected, (pattern, text)
                break
        else:
            assert m.is_accepting() == expected, (pattern, text)
    assert verdicts == {True, False}
