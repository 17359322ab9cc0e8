"""Tests of the JSON Schema front-end (`tokensieve._grammar.json_schema.compiler`).

The cases (patterns, formats, schemas with valid and invalid instances, error pointers) are data
in tests/data/json_schema/ (formats in tests/data/README.md), which the Pyodide test also runs.

- Pieces against brute force: integer and number range regexes, string lengths, the
  ECMA-pattern translation (against Python's `re.search` on the decoded string).
- Schemas through the slow reference recognizer (`tests/reference_cfg.py`): compact JSON of
  valid instances must be full matches, invalid ones not.
- Errors carry JSON pointers; limits are enforced; `lenient` turns errors into warnings.
- A fixed sample of MaskBench schemas (../shared/data/jsonschemabench): most compile, and
  their valid instances match (the known failures are instances whose property order differs
  from the schema's, which this front-end fixes by design, as llguidance does).
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import random
import re
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from json_text import accepts
from reference_cfg import ReferenceRecognizer
from tokensieve import Grammar
from tokensieve._errors import GrammarError
from tokensieve._grammar.json_schema.compiler import (
    FORMAT_REGEXES,
    GRAMMAR_SYMBOL_COUNT_MAX,
    int_range_regex,
    json_schema_to_ir,
    number_range_regex,
    pattern_to_json_regex,
    string_regex,
)


CORPUS = Path(__file__).parent / "data" / "json_schema"


def corpus(name: str) -> list[dict[str, Any]]:
    """The cases of one file of tests/data/json_schema/ (formats in tests/data/README.md)."""
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def recognizer(schema: Any, **options: Any) -> ReferenceRecognizer:
    return ReferenceRecognizer(json_schema_to_ir(schema, **options))


# ---- integer and number ranges ----------------------------------------------------------------

INT_BOUNDS = [None, -1000, -101, -100, -99, -10, -9, -1, 0, 1, 7, 9, 10, 19, 20, 99, 100, 101, 250, 999, 1000]


@pytest.mark.parametrize("lo", INT_BOUNDS)
def test_int_range_regex_matches_brute_force(lo: int | None) -> None:
    for hi in INT_BOUNDS:
        rx = int_range_regex(lo, hi)
        if lo is not None and hi is not None and lo > hi:
            assert rx is None
            continue
        assert rx is not None
        compiled = re.compile(rx)
        for n in range(-1300, 1300):
            expected = (lo is None or n >= lo) and (hi is None or n <= hi)
            assert bool(compiled.fullmatch(str(n))) == expected, (lo, hi, n, rx)
        for text in ("01", "-0", "00", "-01", "+1", "1.0", ""):
            assert not compiled.fullmatch(text), (lo, hi, text)


def test_int_range_regex_large_bounds() -> None:
    lo, hi = -(2**63), 2**63 - 1
    compiled = re.compile(int_range_regex(lo, hi) or "")
    for n in (lo, lo + 1, -1, 0, hi - 1, hi, 12345678901234567):
        assert compiled.fullmatch(str(n))
    for n in (lo - 1, hi + 1, 10**19, -(10**19)):
        assert not compiled.fullmatch(str(n))


def _nesting(pattern: str) -> int:
    depth = deepest = 0
    escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def _near(value: int, rng: random.Random) -> list[int]:
    """Integers at and around `value`, and ones that differ from it in one digit."""
    out = [value - 1, value, value + 1]
    text = str(abs(value))
    for _ in range(6):
        i = rng.randrange(len(text))
        for digit in "09" + str(rng.randrange(10)):
            changed = int(text[:i] + digit + text[i + 1 :]) * (-1 if value < 0 else 1)
            out.append(changed)
    return out


def test_int_range_regex_wide_bounds_nest_shallowly_and_are_exact() -> None:
    """Bounds of 65 to 400 digits (double's largest value has 309) are ranged block by block
    (the core refuses patterns nested over 100 deep); membership is checked against integer
    comparison at, around and one digit away from each bound, and for random integers."""
    rng = random.Random(7)
    double_max = int(Decimal(repr(1.7976931348623157e308)))
    # Heads (first block: 11 digits at 101 digits) two apart: the one between is the middle alternative.
    cases = [(0, double_max), (-double_max, double_max), (10**64, 10**65 - 1), (10**64 + 1, 10**300),
             (10**100 + 3, (10**10 + 2) * 10**90 + 5)]
    for _ in range(40):
        a = rng.randrange(10 ** rng.randrange(60, 400))
        b = a + rng.choice([0, 1, 10 ** rng.randrange(1, 300), rng.randrange(10 ** rng.randrange(1, 400))])
        if rng.random() < 0.3:  # equal heads, zeros and nines in the tails
            b = int(str(a)[: len(str(a)) // 2] + "9" * (len(str(a)) - len(str(a)) // 2))
        cases.append((min(a, b), max(a, b)) if rng.random() < 0.8 else (-max(a, b), min(a, b)))
    for lo, hi in cases:
        rx = int_range_regex(lo, hi)
        assert rx is not None and _nesting(rx) <= 60, (lo, hi, _nesting(rx or ""))
        compiled = re.compile(rx)
        probes = _near(lo, rng) + _near(hi, rng) + [rng.randint(lo, hi) for _ in range(20)]
        probes += [rng.randrange(-(10**401), 10**401) for _ in range(20)]
        for n in probes:
            assert bool(compiled.fullmatch(str(n))) == (lo <= n <= hi), (lo, hi, n)


def test_double_range_bounds_compile_and_match_like_jsonschema() -> None:
    """`minimum`/`maximum` of ±1.7976931348623157e308 (.NET's and Java's double bounds) used
    to be refused ("groups nested too deeply"); now decided like `jsonschema` on numbers near
    the bounds and inside."""
    import jsonschema

    from tokensieve import Matcher, Tokenizer

    schema = {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 1.7976931348623157e308}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    tok = Tokenizer.default()
    top = str(int(Decimal(repr(1.7976931348623157e308))))
    texts = ["0", "-1.5", "12345.678", top, "-" + top, top + ".0", top[:-1] + "9", "1" + top, top + ".5"]
    verdicts = set()
    for text in texts:
        expected = jsonschema.Draft202012Validator(schema).is_valid(Decimal(text))
        matcher = Matcher(tok, grammar)
        got = matcher.consume_tokens(tok.encode(text)) and matcher.is_accepting()
        assert got == expected, text
        verdicts.add(expected)
    assert verdicts == {True, False}


def _decimal_strings() -> list[str]:
    out = []
    for n in range(-25, 26):
        out.append(str(n))
        for frac in ("0", "00", "5", "05", "50", "001", "999"):
            out.append(f"{n}.{frac}")
    out += ["-0.5", "-0.0", "-0.001", "0.5"]
    return out


@pytest.mark.parametrize("lo_open", [False, True])
@pytest.mark.parametrize("hi_open", [False, True])
def test_number_range_regex_matches_brute_force(lo_open: bool, hi_open: bool) -> None:
    bounds = [None, -20, -3, -1, 0, 1, 3, 10, 20]
    texts = _decimal_strings()
    for lo in bounds:
        for hi in bounds:
            rx = number_range_regex(lo, lo_open, hi, hi_open)
            compiled = re.compile(rx) if rx else None
            for text in texts:
                x = Fraction(text)
                expected = (lo is None or (x > lo if lo_open else x >= lo)) and (
                    hi is None or (x < hi if hi_open else x <= hi)
                )
                if text.startswith("-0") and x == 0:
                    expected = False  # -0 and -0.0 are never produced
                got = bool(compiled and compiled.fullmatch(text))
                assert got == expected, (lo, lo_open, hi, hi_open, text, rx)


# ---- strings and patterns ---------------------------------------------------------------------


@pytest.mark.parametrize("low,high", [(0, None), (1, None), (2, 4), (3, 3), (0, 0), (5, 20000)])
def test_string_regex_counts_characters_not_escapes(low: int, high: int | None) -> None:
    compiled = regex.compile(string_regex(low, high))
    for value in ["", "a", "ab", "a\"c", "\\\\", "é\n", "abcd", "abcde", "\u2028x\ty", "x" * 30]:
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
            expected = low <= len(value) and (high is None or len(value) <= high)
            assert bool(compiled.fullmatch(text)) == expected, (low, high, text)
    assert not compiled.fullmatch('"a')
    assert not compiled.fullmatch('"\x01"')


def test_string_regex_refuses_huge_min_length() -> None:
    with pytest.raises(GrammarError):
        string_regex(20000, None)


PATTERN_CASES = [(case["pattern"], case["values"]) for case in corpus("patterns.json")]


@pytest.mark.parametrize("pattern,values", PATTERN_CASES)
def test_pattern_translation_agrees_with_search_on_the_decoded_string(pattern: str, values: list[str]) -> None:
    compiled = regex.compile(pattern_to_json_regex(pattern))
    python_pattern = pattern.replace("\\/", "/")
    for value in values:
        expected = re.search(python_pattern, value) is not None
        for ascii_only in (True, False):
            body = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
            assert bool(compiled.fullmatch(body)) == expected, (pattern, value, body)


@pytest.mark.parametrize(
    "pattern", ["(?=a)b", "a\\bc", "(a)\\1", "\\p{L}", "a(^b)", "a$b", "[a", "(a", "a{20000}", "*a", "(a$)+b", "/^a$/"]
)
def test_unsupported_patterns_raise(pattern: str) -> None:
    with pytest.raises(GrammarError):
        pattern_to_json_regex(pattern)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.text(alphabet="aZ09 !#%&',-/:;<=>@_`~", max_size=8), other=st.sampled_from(["", "x", " ", "@", "\\", '"', "é", "\n"]))
def test_anchored_plain_patterns_agree_with_search(text: str, other: str) -> None:
    """`^text$` of letters, digits, spaces and plain punctuation (a shortcut translates them
    without the parser): against Python's search on the text itself, the text with a character
    before, after or in place of one of its own, and with its last character dropped."""
    pattern = f"^{text}$"
    compiled = regex.compile(pattern_to_json_regex(pattern))
    python = re.compile(pattern[:-1] + r"\Z")  # (ECMA's `$` is the end; Python's also before a final newline)
    values = {text, other + text, text + other, text[:-1], *(text[:i] + other + text[i + 1 :] for i in range(len(text)))}
    for value in values:
        expected = python.search(value) is not None
        for ascii_only in (True, False):
            body = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
            assert bool(compiled.fullmatch(body)) == expected, (pattern, value, body)


_ANCHOR_TEXTS = ["".join(chars) for n in range(6) for chars in itertools.product("ab/", repeat=n)]


def _anchored_patterns(depth: int) -> Any:
    leaf = st.sampled_from(["a", "b", "/", "^", "$", "a?", "[ab]"])
    if depth == 0:
        return st.lists(leaf, min_size=1, max_size=3).map("".join)
    inner = _anchored_patterns(depth - 1)
    group = st.tuples(st.lists(inner, min_size=1, max_size=3), st.sampled_from(["", "*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}"]))
    piece = st.one_of(leaf, group.map(lambda g: "(" + "|".join(g[0]) + ")" + g[1]))
    return st.lists(piece, min_size=1, max_size=4).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(pattern=_anchored_patterns(2))
def test_anchors_inside_groups_agree_with_search(pattern: str) -> None:
    """Patterns with `^`/`$` inside alternations and repeated groups, against Python's
    search on every text of up to five characters over the pattern's alphabet. A pattern
    may be refused only when none of the texts matches (`^` after text, text after `$`)."""
    python = re.compile(pattern.replace("\\/", "/"))
    expected = [python.search(text) is not None for text in _ANCHOR_TEXTS]
    try:
        compiled = regex.compile(pattern_to_json_regex(pattern))
    except GrammarError:
        assert not any(expected), pattern
        return
    got = [compiled.fullmatch(json.dumps(text)[1:-1]) is not None for text in _ANCHOR_TEXTS]
    assert got == expected, (pattern, [t for t, a, b in zip(_ANCHOR_TEXTS, got, expected) if a != b][:5])


_LOOKAHEAD_TEXTS = ["".join(chars) for n in range(5) for chars in itertools.product("abc", repeat=n)]


def _lookahead_patterns(depth: int) -> Any:
    leaf = st.sampled_from(["a", "b", "c", ".", "[ab]", "a*", ".*", "b?"])
    if depth == 0:
        return st.lists(leaf, min_size=1, max_size=3).map("".join)
    inner = _lookahead_patterns(depth - 1)
    look = st.tuples(st.sampled_from(["(?=", "(?!"]), inner, st.sampled_from(["", "$"])).map(lambda t: "".join(t) + ")")
    group = st.tuples(st.lists(inner, min_size=1, max_size=2), st.sampled_from(["", "?"])).map(lambda g: "(" + "|".join(g[0]) + ")" + g[1])
    return st.lists(st.one_of(leaf, look, group, st.sampled_from(["^", "$"])), min_size=1, max_size=4).map("".join)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(pattern=_lookahead_patterns(2))
def test_lookaheads_inside_patterns_agree_with_search(pattern: str) -> None:
    """Patterns with lookaheads anywhere outside repetition (said with the core's `(?~X)`),
    through a real matcher, against Python's search on every text of up to four characters.
    Refusals are allowed (nested lookaheads, more than two, anchors beside one); the test
    checks that most of these patterns are not refused."""
    from json_text import accepts

    if "(?" not in pattern:
        return
    try:
        grammar = Grammar.json_schema({"type": "string", "pattern": pattern})
    except GrammarError:
        _LOOKAHEAD_REFUSED.append(pattern)
        return
    python = re.compile(pattern)
    for text in _LOOKAHEAD_TEXTS:
        assert accepts(grammar, json.dumps(text)) == (python.search(text) is not None), (pattern, text)
    _LOOKAHEAD_EXACT.append(pattern)


_LOOKAHEAD_REFUSED: list[str] = []
_LOOKAHEAD_EXACT: list[str] = []


def test_lookaheads_inside_patterns_are_mostly_translated() -> None:
    if not _LOOKAHEAD_EXACT and not _LOOKAHEAD_REFUSED:
        test_lookaheads_inside_patterns_agree_with_search()
    assert len(_LOOKAHEAD_EXACT) >= 80, (len(_LOOKAHEAD_EXACT), _LOOKAHEAD_REFUSED[:5])


FORMAT_CASES = [(case["format"], case["good"], case["bad"]) for case in corpus("formats.json")]


@pytest.mark.parametrize("fmt,good,bad", FORMAT_CASES)
def test_formats(fmt: str, good: list[str], bad: list[str]) -> None:
    # The examples (from the RFCs) are the oracle, for the regex under Python's engine and for
    # the grammar under the core's.
    from tokensieve import Matcher, Tokenizer

    compiled = regex.compile(FORMAT_REGEXES[fmt])
    for text in good:
        assert compiled.fullmatch(text), (fmt, text)
    for text in bad:
        assert not compiled.fullmatch(text), (fmt, text)
    tok = Tokenizer.from_token_bytes([bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256], special_token_ids=[256])
    grammar = Grammar.json_schema({"type": "string", "format": fmt})
    for text in good + bad:
        matcher = Matcher(tok, grammar)
        accepted = matcher.consume_tokens(list(json.dumps(text, ensure_ascii=False).encode())) and matcher.is_accepting()
        assert accepted == (text in good), (fmt, text)


# Pieces of IRIs: delimiters, percent escapes (one malformed), ASCII that IRIs take or refuse,
# ucschar (é, ☃, 例), iprivate (U+E000, only in a query), and code points neither allows
# (U+FDD0, U+FFFE). Basic plane only and no brackets: the oracle, rfc3987-syntax 1.1, refuses
# every IPv6 literal with "::" and ucschar beyond U+FFFF, both of which RFC 3987 allows (the
# RFC's own examples in formats.json cover them).
_IRI_PIECES = ["http", "a", "Z9", ":", "//", "/", "?", "#", "@", ".", "-", "~", "%41", "%e9", "%g1", "!", "$", "'",
               "=", ";", ",", " ", "<", "\"", "{", "é", "☃", "例", "\ue000", "\ufdd0", "\ufffe", "80", "x+y"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_IRI_PIECES), max_size=9), st.sampled_from(["iri", "iri-reference"]))
def test_iri_formats_agree_with_rfc3987_syntax(pieces: list[str], fmt: str) -> None:
    import rfc3987_syntax

    text = "".join(pieces)
    expected = rfc3987_syntax.is_valid_syntax(fmt.replace("-", "_"), text)
    assert bool(regex.fullmatch(FORMAT_REGEXES[fmt], text)) == expected, (fmt, text)
    assert accepts(_format_grammar(fmt), json.dumps(text, ensure_ascii=False)) == expected, (fmt, text)


@functools.lru_cache(maxsize=None)
def _format_grammar(fmt: str) -> Grammar:
    return Grammar.json_schema({"type": "string", "format": fmt})


def test_date_format_knows_the_calendar() -> None:
    # Oracle: Python's calendar. Every day of a leap and a common year, of century years
    # (1900 is not leap, 2000 is), and impossible days around each month's end.
    import datetime

    compiled = regex.compile(FORMAT_REGEXES["date"])
    for year in (1900, 2000, 2023, 2024, 2100, 2400, 1):
        for month in range(1, 13):
            for day in range(1, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    datetime.date(year, month, day)
                    want = True
                except ValueError:
                    want = False
                assert bool(compiled.fullmatch(text)) == want, text


def test_a_listed_key_with_an_unsatisfiable_schema_may_not_appear() -> None:
    # `mode` is listed, but no value is both an object and one of the strings; it is not an
    # additional property either, so no object with `mode` is valid.
    # (The reference recognizer ignores the key lexeme's exclusions: the core decides.)
    from tokensieve import Matcher, Tokenizer

    schema = {"type": "object", "properties": {"mode": {"enum": ["all", "ssl"], "type": "object"}, "b": {"type": "integer"}}}
    tok = Tokenizer.default()
    grammar = Grammar.json_schema(schema)

    def accepts(text: str) -> bool:
        m = Matcher(tok, grammar)
        return m.consume_tokens(tok.encode(text)) and m.is_accepting()

    assert accepts('{"b":1}') and accepts('{"c":"x"}') and accepts('{"b":1,"modes":2}')
    assert not accepts('{"mode":"all"}') and not accepts('{"mode":"x"}') and not accepts('{"b":1,"mode":{}}')


# ---- whole schemas through the reference recognizer -------------------------------------------

SCHEMA_CASES = [(case["name"], case["schema"], case["valid"], case["invalid"]) for case in corpus("instances.json")]


@pytest.mark.parametrize("name,schema,valid,invalid", SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_schema_matches_valid_and_rejects_invalid(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    rec = recognizer(schema)
    for instance in valid:
        assert rec.full_match(compact(instance)), (name, compact(instance))
    for instance in invalid:
        assert not rec.full_match(compact(instance)), (name, compact(instance))


def test_non_ascii_enum_and_keys_match_escaped_and_raw() -> None:
    rec = recognizer({"type": "object", "properties": {"ключ": {"enum": ["é", "a\nb"]}}, "required": ["ключ"]})
    for instance in ({"ключ": "é"}, {"ключ": "a\nb"}):
        assert rec.full_match(json.dumps(instance, separators=(",", ":")))
        assert rec.full_match(json.dumps(instance, separators=(",", ":"), ensure_ascii=False))


def test_flexible_whitespace_between_lexemes_only() -> None:
    rec = recognizer({"type": "object", "properties": {"a": {"type": "array"}}})
    assert rec.full_match('{ "a" :\n[ 1 ,\t2 ] }')
    assert not rec.full_match(' {"a":[]}')
    assert not rec.full_match('{"a":[]} ')
    compact_rec = recognizer({"type": "object", "properties": {"a": {"type": "array"}}}, whitespace="compact")
    assert compact_rec.full_match('{"a":[1]}')
    assert not compact_rec.full_match('{ "a":[1]}')
    custom = recognizer({"type": "array"}, whitespace=" ")
    assert custom.full_match("[1, 2]") and not custom.full_match("[1,\n2]")


def test_separators_options() -> None:
    rec = recognizer({"type": "object", "properties": {"a": {"type": "array"}}}, whitespace="compact", key_separator=": ", item_separator=", ")
    assert rec.full_match('{"a": [1, 2]}')
    assert not rec.full_match('{"a":[1,2]}')


def test_additional_properties_default_false() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert recognizer(schema).full_match('{"a":1,"b":2}')
    assert not recognizer(schema, additional_properties_default=False).full_match('{"a":1,"b":2}')


def test_schema_as_json_text() -> None:
    assert recognizer('{"type": "integer"}').full_match("12")


# ---- errors, warnings, limits -----------------------------------------------------------------


ERROR_CASES = [(case["schema"], case["pointer"]) for case in corpus("errors.json")]


@pytest.mark.parametrize("schema,pointer", ERROR_CASES)
def test_errors_name_the_json_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == pointer, str(info.value)


CONTRADICTIONS = [(case["schema"], case["pointer"], case["names"]) for case in corpus("contradictions.json")]


@pytest.mark.parametrize("schema,pointer,names", CONTRADICTIONS)
def test_contradictions_are_errors_naming_the_conflict(schema: Any, pointer: str, names: str) -> None:
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == pointer and names in str(info.value), str(info.value)


def test_lenient_ignores_unsupported_keywords_with_warnings() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "not": {"pattern": "(?<=a)b"}},
            "p": {"type": "array", "not": {"prefixItems": [{}], "items": {"type": "integer"}}, "contains": {"type": "string"}, "minContains": 2},
        },
    }
    with pytest.raises(GrammarError):
        json_schema_to_ir(schema)
    ir = json_schema_to_ir(schema, lenient=True)
    warnings = ir.options["warnings"]
    assert any("/a/not/pattern" in w for w in warnings) and not any("/properties/p" in w for w in warnings)
    rec = ReferenceRecognizer(ir)
    assert rec.full_match('{"a":"ab","p":[1,"x","y"],"x-y":3}')  # a superset: the not pattern dropped
    assert not rec.full_match('{"a":"ab","p":[1,"x"]}')  # p exact: the negated items counted with contains


def test_annotations_are_silent_and_oneof_warns() -> None:
    ir = json_schema_to_ir(
        {"$schema": "x", "title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c", "type": "integer"}
    )
    assert ir.options["warnings"] == []
    ir = json_schema_to_ir({"oneOf": [{"type": "string", "pattern": p} for p in "abcde"]})
    assert any("oneOf is treated as anyOf" in w for w in ir.options["warnings"])


def test_unsatisfiable_recursion_is_an_error() -> None:
    with pytest.raises(GrammarError):
        json_schema_to_ir({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})


def test_cyclic_ref_with_siblings_is_an_error() -> None:
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"$defs": {"a": {"$ref": "#/$defs/a", "minimum": 1}}, "$ref": "#/$defs/a", "type": "integer"})
    assert "itself" in str(info.value)


def test_nesting_deeper_than_the_limit_is_an_error() -> None:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir(schema)
    assert "deeper" in str(info.value)


def _nested_value(depth: int, kind: str) -> Any:
    value: Any = [] if kind == "list" else {}
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


@pytest.mark.parametrize(("schema", "where"), [
    ({"const": _nested_value(900, "list")}, "/const"),  # overflowed Python's stack comparing it
    ({"enum": [1, _nested_value(5000, "dict")]}, "/enum"),
    ({"type": "object", "properties": {"x": {"const": _nested_value(3000, "list")}}}, "/properties/x/const"),
    ({"enum": [_nested_value(129, "list")]}, "/enum"),
])
def test_a_value_nested_too_deep_is_an_error_naming_its_place(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(GrammarError, match="nests deeper than 128") as info:
        json_schema_to_ir(schema)
    assert info.value.json_pointer == where


def test_a_value_at_the_depth_limit_is_translated() -> None:
    value = _nested_value(128, "list")
    assert json.loads(json.dumps(value)) == value
    grammar = Grammar.json_schema({"const": value}, whitespace="compact")
    assert accepts(grammar, json.dumps(value, separators=(",", ":")))
    assert not accepts(grammar, json.dumps(_nested_value(127, "list"), separators=(",", ":")))


def test_python_s_recursion_limit_met_in_translation_is_a_grammar_error() -> None:
    # The depth limits come first on any real schema; a caller's low recursion limit does not.
    import inspect
    import sys

    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(60):
        schema = {"type": "array", "items": schema}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 150)
    try:
        with pytest.raises(GrammarError, match="recursion limit"):
            json_schema_to_ir(schema)
    finally:
        sys.setrecursionlimit(limit)


def test_grammar_size_limit() -> None:
    # Distinct enums: equal sub-schemas are translated once and shared, so they would not grow
    # the grammar (see the next test).
    props = {f"p{i}": {"enum": list(range(i, i + 200))} for i in range(GRAMMAR_SYMBOL_COUNT_MAX // 100)}
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"type": "object", "properties": props})
    assert "larger than" in str(info.value)


def test_equal_subschemas_are_translated_once_and_shared() -> None:
    props = {f"p{i}": {"enum": list(range(200))} for i in range(GRAMMAR_SYMBOL_COUNT_MAX // 100)}
    ir = json_schema_to_ir({"type": "object", "properties": props, "additionalProperties": False})
    enum_rules = [r for r in ir.rules if len(r.rhs) == 1 and r.rhs[0].terminal and ir.lexemes[r.rhs[0].index].value.startswith("199")]
    assert len(enum_rules) == 1


def test_a_shared_subschema_repeats_its_warnings_at_each_place() -> None:
    ir = json_schema_to_ir({"properties": {"a": {"type": "string", "format": "foo"}, "b": {"type": "string", "format": "foo"}}})
    assert [w.split(":")[0] for w in ir.options["warnings"]] == ["/properties/a/format", "/properties/b/format"]


def test_a_shared_subschema_still_counts_toward_the_clause_budget() -> None:
    # 5 dependencies expand into 2 + 4 + 8 + 16 + 32 = 62 alternatives (each level doubles the
    # last; a forbidden key's place in the merged properties makes no second order); 67 copies
    # pass CLAUSE_ALTERNATIVE_COUNT_MAX (as they did before sub-schemas were shared). The
    # minProperties keeps them expanded (an object follows presence constraints in its states
    # only without count bounds).
    one = {"type": "object", "minProperties": 1, "dependentRequired": {f"k{i}": [f"r{i}"] for i in range(5)}}
    json_schema_to_ir({"type": "object", "properties": {f"p{j}": one for j in range(66)}})
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"type": "object", "properties": {f"p{j}": one for j in range(67)}})
    assert "4096 alternatives" in str(info.value)


def test_a_shared_subschema_still_counts_toward_the_nesting_limit() -> None:
    def nest(schema: Any, levels: int) -> Any:
        for _ in range(levels):
            schema = {"type": "array", "items": schema}
        return schema

    chain = nest({"type": "string"}, 40)
    json_schema_to_ir({"type": "object", "properties": {"a": chain, "b": nest(chain, 55)}})
    with pytest.raises(GrammarError) as info:
        json_schema_to_ir({"type": "object", "properties": {"a": chain, "b": nest(chain, 60)}})
    assert "deeper" in str(info.value)


def test_huge_item_counts_stay_small() -> None:
    ir = json_schema_to_ir({"type": "array", "items": {"type": "null"}, "minItems": 100_000, "maxItems": 1_000_000})
    assert len(ir.rules) < 200


# ---- through the core -------------------------------------------------------------------------


def test_grammar_json_schema_compiles_in_the_core() -> None:
    grammar = Grammar.json_schema(
        {"type": "object", "properties": {"d": {"type": "string", "format": "date-time"}, "s": {"type": "string", "pattern": "^[^/]+$"}, "n": {"type": "integer", "minimum": -5, "maximum": 500}}}
    )
    assert grammar.kind == "json_schema"
    with pytest.raises(GrammarError):
        Grammar.json_schema({"type": "object", "not": {}})


# ---- MaskBench sample ---------------------------------------------------------------------------

SAMPLE_SIZE = 100
SAMPLE_SEED = 20250
INSTANCE_LENGTH_MAX = 600  # characters of compact JSON checked by the slow reference


def _maskbench_rows() -> list[dict[str, Any]]:
    env = os.environ.get("TOKENSIEVE_SHARED")
    shared = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"
    folder = shared / "data" / "jsonschemabench" / "maskbench"
    files = sorted(folder.glob("*.jsonl.gz"))
    if not files:
        pytest.fail(f"MaskBench data missing: expected {folder}/*.jsonl.gz (set TOKENSIEVE_SHARED)")
    rows = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            rows += [json.loads(line) for line in handle]
    return rows


def test_maskbench_sample_compiles_and_matches_valid_instances() -> None:
    sample = random.Random(SAMPLE_SEED).sample(_maskbench_rows(), SAMPLE_SIZE)
    compiled = checked = matched = 0
    unsupported: list[str] = []
    mismatches: list[str] = []
    compile_seconds = 0.0
    for row in sample:
        start = time.perf_counter()
        try:
            ir = json_schema_to_ir(row["schema"])
        except GrammarError as err:
            unsupported.append(f"{row['id']}: {err}")
            continue
        compile_seconds += time.perf_counter() - start
        compiled += 1
        rec = ReferenceRecognizer(ir)
        for test in row["tests"]:
            text = compact(test["data"])
            if not test["valid"] or len(text) > INSTANCE_LENGTH_MAX:
                continue
            checked += 1
            if rec.full_match(text):
                matched += 1
            else:
                mismatches.append(f"{row['id']}: {text[:120]}")
    print(f"\nMaskBench sample: {compiled}/{SAMPLE_SIZE} compiled, {1000 * compile_seconds / max(compiled, 1):.2f} ms each;"
          f" {matched}/{checked} valid instances matched")
    assert compiled >= 0.7 * SAMPLE_SIZE, "\n".join(unsupported)
    assert checked >= 50
    # Known misses: instances whose property order differs from the schema's `properties`.
    assert matched >= 0.9 * checked, "\n".join(mismatches)


@pytest.mark.parametrize("whitespace", [r"[ ]{1,2}", r"[ \n]{0,3}", r" ?"])
def test_bounded_whitespace_pattern_bounds_each_gap(whitespace: str) -> None:
    # llguidance issue #240: a bounded whitespace pattern must bound the text between two
    # lexemes, not each of several skips in a row. Oracle: Python's `re` on the gaps.
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]}
    from tokensieve import Matcher, Tokenizer

    rec = recognizer(schema, whitespace=whitespace)
    tok = Tokenizer.default()
    grammar = Grammar.json_schema(schema, whitespace=whitespace)
    gap = re.compile(whitespace)
    rng = random.Random(whitespace)
    pieces = ["{", '"a"', ":", "[", "1", ",", "22", "]", "}"]
    for _ in range(150):
        gaps = [rng.choice(["", " ", "  ", "   ", "\n", " \n ", "\n\n\n\n"]) for _ in pieces[:-1]]
        text = "".join(p + g for p, g in zip(pieces, gaps)) + pieces[-1]
        want = all(g == "" or gap.fullmatch(g) for g in gaps)
        assert rec.full_match(text) == want, (whitespace, text)
        m = Matcher(tok, grammar)
        assert (m.consume_tokens(tok.encode(text)) and m.is_accepting()) == want, (whitespace, text)


def test_source_is_the_schema_as_json_text() -> None:
    # Made when first read (Grammar.source), from the schema as given.
    schema = {"type": "object", "properties": {"é": {"type": "string"}}, "description": "d"}
    assert Grammar.json_schema(schema).source == json.dumps(schema)
    text = '{"type":"integer"}'
    assert Grammar.json_schema(text).source == text
    assert repr(Grammar.json_schema({"type": "null"})) == "Grammar.json_schema('{\"type\": \"null\"}')"


def test_checking_many_values_agrees_with_jsonschema_and_the_general_check() -> None:
    # InstanceChecker.valid_values checks strings by their keywords alone (compile_enum's path).
    import jsonschema

    from tokensieve._grammar.json_schema.compiler import _Compiler, _plain_lexeme

    checker = _Compiler(
        {}, lenient=False, additional_properties_default=True,
        key_separator=_plain_lexeme("':'", "literal", ":"), item_separator=_plain_lexeme("','", "literal", ","),
    ).checker
    values = ["", "a", "ab", "abc", "2020-01-01", "2020-13-01", "x\ny", 'q"', "é", "b1", "1b", 1, None, True, 2.5, [1], {"a": 1}]
    public = [
        {"pattern": "^a"}, {"minLength": 2, "maxLength": 3}, {"format": "date"}, {"type": "integer"},
        {"type": ["string", "null"], "pattern": "^.$"}, {"format": "date", "minLength": 10, "pattern": "1$"}, {"foo": 1},
    ]
    for schema in public:
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        assert checker.valid_values(values, schema) == [v for v in values if validator.is_valid(v)], schema
    internal = [{"pattern": "b", "_patterns": ["^a"]}, {"_not_bodies": ["a.*", "b.*"], "minLength": 1}]
    for schema in internal:
        assert checker.valid_values(values, schema) == [v for v in values if checker.valid(v, schema)], schema



def test_wide_classes_compiled_as_negations_keep_every_character() -> None:
    # InstanceChecker compiles a body regex whose classes cover most of Unicode as negations
    # of their complements (`_cheap_classes`: Python's `re` fills a wide class's table one code
    # point at a time). Each rewritten class must match exactly the code points the original
    # does (surrogates included), and the checks beside enums must still agree with jsonschema.
    import jsonschema

    from tokensieve._grammar.json_schema.compiler import _Compiler, _plain_lexeme
    from tokensieve._grammar.json_schema.instance import _cheap_classes
    from tokensieve._grammar.json_schema.strings import pattern_to_json_regex

    # (pattern, a text before the class): every code point after the prefix, each way
    cases = [("^.*$", ""), ("^(date|utc):.*$", "date:"), ("^[^a-z]+$", ""), ("^\\S+$", ""), ("^[\u0100-\uffff]*$", "")]
    # the BMP whole (the surrogates, U+2028/9, every class edge), astral code points sampled
    everything = [chr(c) for c in [*range(0x10000), *range(0x10000, 0x110000, 97), 0x10FFFE, 0x10FFFF]]
    for pattern, prefix in cases:
        body = pattern_to_json_regex(pattern)
        cheap = _cheap_classes(body)
        assert cheap != body and "[^" in cheap, pattern  # the rewrite happens
        old, new = re.compile(body), re.compile(cheap)
        assert old.groups == new.groups
        differ = [c for c in everything if bool(old.fullmatch(prefix + c)) != bool(new.fullmatch(prefix + c))]
        assert differ == [], (pattern, differ[:5])
    raw = "x\\\\[a-z\u0100-\uffff]"  # a wide class after an escaped backslash, surrogates inside
    assert _cheap_classes(raw) != raw
    assert [c for c in everything if bool(re.fullmatch(raw, "x\\" + c)) != bool(re.fullmatch(_cheap_classes(raw), "x\\" + c))] == []

    checker = _Compiler(
        {}, lenient=False, additional_properties_default=True,
        key_separator=_plain_lexeme("':'", "literal", ":"), item_separator=_plain_lexeme("','", "literal", ","),
    ).checker
    values = ["date:x", "utc:", "date:\U0001f600é", 'date:"\\', "date:\x00\t", "dat:x", "ABC", "AbC", "A\U0001f600",
              "é\u0100", "\uffff", "a b", "ab", ""]
    for pattern in ("^(date|utc):.*$", "^[^a-z]+$", "^\\S+$", "^[\u0100-\uffff]*$"):
        validator = jsonschema.Draft202012Validator({"pattern": pattern})
        assert checker.valid_values(values, {"pattern": pattern}) == [v for v in values if validator.is_valid(v)], pattern


# -- the property order of merged schemas, beside llguidance --------------------------------

_MERGED_PARTS = {
    "$ref": ("#/$defs/w", "w"),
    "allOf": ([{"properties": {"x": {"type": "integer"}}}, {"properties": {"z": {"type": "integer"}}}], "xz"),
    "properties": ({"y": {"type": "integer"}}, "y"),
}


@pytest.mark.parametrize(
    "keywords", [order for n in (2, 3) for order in itertools.permutations(_MERGED_PARTS, n)], ids="-".join
)
def test_merged_properties_come_in_the_order_of_their_keywords_as_in_llguidance(keywords):
    """An object merging `$ref` and `allOf` parts (with its own `properties` or not) lists
    each part's properties where its keyword stands. Every permutation of the instance's keys
    is valid (jsonschema); exactly the one in keyword order is accepted, and llguidance, run
    on the same Llama-3 tokens, accepts the same ones."""
    import jsonschema
    import llguidance

    from conftest import load_llguidance_tokenizer, load_shared_tokenizer
    from tokensieve import Matcher

    tok = load_shared_tokenizer("llama3")
    theirs = load_llguidance_tokenizer("llama3")
    schema: dict[str, Any] = {"$defs": {"w": {"properties": {"w": {"type": "integer"}}}}}
    for keyword in keywords:
        schema[keyword] = _MERGED_PARTS[keyword][0]
    expected = "".join(_MERGED_PARTS[keyword][1] for keyword in keywords)
    grammar = Grammar.json_schema(schema, whitespace="compact")
    llg_grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
    accepted = []
    for names in itertools.permutations(expected):
        instance = {name: i for i, name in enumerate(names)}
        jsonschema.Draft202012Validator(schema).validate(instance)
        ids = tok.encode(json.dumps(instance, separators=(",", ":")))
        m = Matcher(tok, grammar)
        ours = m.consume_tokens(ids) and m.is_accepting()
        lm = llguidance.LLMatcher(theirs, llg_grammar, log_level=0)
        assert not lm.is_error(), lm.get_error()
        llg = all(lm.consume_token(t) for t in ids) and lm.is_accepting()
        assert ours == llg, (names, ours, llg)
        if ours:
            accepted.append("".join(names))
    assert accepted == [expected]



def test_witness_tail_with_a_large_count_bound_compiles_and_matches_jsonschema() -> None:
    """An object that must meet a witness (`not additionalProperties`: some value is not an
    integer) under `minProperties: 1200`: the counted tail recursed two Python frames a count
    (RecursionError; found by `tokensieve fuzz --seed 1129`, tag input 2104). Now built on an
    explicit stack; decided like `jsonschema` at the bound."""
    import jsonschema

    from tokensieve import Matcher, Tokenizer

    schema = {"type": "object", "minProperties": 1200, "not": {"additionalProperties": {"type": "integer"}}}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    tok = Tokenizer.default()
    verdicts = set()
    for count, last in ((1200, '"s"'), (1200, "1"), (1199, '"s"')):
        text = "{" + ",".join(f'"k{i}":1' for i in range(count - 1)) + f',"k{count}":{last}' + "}"
        matcher = Matcher(tok, grammar)
        expected = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert (matcher.consume_tokens(tok.encode(text)) and matcher.is_accepting()) == expected, (count, last)
        verdicts.add(expected)
    assert verdicts == {True, False}
