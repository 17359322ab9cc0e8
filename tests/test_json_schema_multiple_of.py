"""`multipleOf` with an integer multiple, exact for any multiple up to `RESIDUE_MODULUS_MAX`
through the core's residue term `(?%C,R,S)` (docs/grammar_ir.md), against Python arithmetic.

The oracle is `Decimal(text) % c == 0` with the bounds checked on the same `Decimal`, over texts
generated to cross every edge: signs, leading zeros (not JSON), zero and non-zero fractions,
exponents (a number under `multipleOf` is written without one: a documented subset, so the
oracle refuses them too), the multiples next to each bound and their neighbours, and numbers of
30 to 45 digits. A core-level test compares the term itself with a residue computed by hand.
"""

from __future__ import annotations

import functools
import random
import re
from decimal import Decimal, localcontext
from typing import Any

import pytest

from json_text import BYTES, accepts

from tokensieve import Grammar, Matcher
from tokensieve._errors import GrammarError
from tokensieve._grammar.json_schema import numbers
from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

# JSON's number grammar (RFC 8259), written out here rather than taken from the compiler.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

MULTIPLES = [2, 3, 7, 9, 11, 12, 13, 16, 33, 77, 101, 256, 429, 561, 997, 1000, 9973, 10_000]


def _texts(c: int, rng: random.Random, bounds: tuple[int, ...] = ()) -> list[str]:
    """Candidate texts for multiples of c: near multiples, signs, fractions, exponents, leading
    zeros, long numbers, and the multiples around each bound."""
    centers = [0, c, 2 * c, 7 * c, 12345 * c] + [b for b in bounds]
    ints: set[int] = set()
    for center in centers:
        k = center // c
        for m in (k - 1, k, k + 1):
            for delta in (-1, 0, 1):
                ints.update({m * c + delta, -(m * c + delta)})
    ints.update(rng.randrange(-10**6, 10**6) for _ in range(40))
    ints.update(rng.randrange(-10**6, 10**6) // c * c for _ in range(40))
    for digits in (30, 38, 45):  # large numbers, half of them multiples
        n = rng.randrange(10 ** (digits - 1), 10**digits)
        ints.update({n, n - n % c, -(n - n % c), n - n % c + 1})
    texts = {str(n) for n in ints}
    for n in list(ints)[:60]:
        s = str(n)
        texts.update({s + ".0", s + ".000", s + ".5", s + ".01", s + ".10", s + "."})
        texts.update({s + "e0", s + "E+1", s + ".0e1", s + "e-1"})
        digits = s.lstrip("-")
        sign = s[: len(s) - len(digits)]
        texts.update({sign + "0" + digits, sign + "00" + digits})  # leading zeros
    texts.update({"-0", "0", "0.0", "-0.0", "00", "-", "", ".0", "1.0.0", "+3", "3e1", "3.0E+1", " 3"})
    return sorted(texts)


def _remainder(text: str, step: Decimal | int) -> Decimal:
    """Decimal(text) % step, exactly (the default context keeps 28 digits; these reach 45)."""
    with localcontext(prec=200):
        return Decimal(text) % step


def _expected(text: str, c: int, integer: bool, lo: int | None = None, hi: int | None = None,
              lo_open: bool = False, hi_open: bool = False) -> bool:
    if not _JSON_NUMBER.fullmatch(text) or "e" in text.lower():
        return False  # not JSON, or an exponent (written without one: a subset)
    if integer and "." in text:
        return False
    x = Decimal(text)
    if _remainder(text, c) != 0:
        return False
    if (lo is not None or hi is not None) and text.startswith("-") and x == 0:
        return False  # a bounded number never spells -0 (docs/json_schema.md)
    if lo is not None and (x < lo or (lo_open and x == lo)):
        return False
    return not (hi is not None and (x > hi or (hi_open and x == hi)))


def _check(schema: dict[str, Any], texts: list[str], expected: Any) -> None:
    grammar = Grammar.json_schema(schema)
    assert not json_schema_to_ir(schema).options["warnings"], schema
    outcomes = set()
    for text in texts:
        want = expected(text)
        outcomes.add(want)
        assert accepts(grammar, text) == want, (schema, text)
    assert outcomes == {True, False}


@pytest.mark.parametrize("c", MULTIPLES)
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_integer_multiple_is_exact(c: int, kind: str) -> None:
    rng = random.Random(c * 2 + (kind == "number"))
    _check({"type": kind, "multipleOf": c}, _texts(c, rng), lambda t: _expected(t, c, kind == "integer"))


@pytest.mark.parametrize("c,lo,hi,lo_open,hi_open", [
    (16, -64, 320, False, False),  # minecraft-dimension-type: -65 is not a multiple of 16
    (11, 0, None, True, False),
    (13, None, 1000, False, True),
    (33, -1000, -33, False, True),
    (77, 77, 77, False, False),
    (997, -10**6, 10**6, False, False),
])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_integer_multiple_with_bounds_is_exact(c: int, lo: int | None, hi: int | None, lo_open: bool, hi_open: bool, kind: str) -> None:
    schema: dict[str, Any] = {"type": kind, "multipleOf": c}
    if lo is not None:
        schema["exclusiveMinimum" if lo_open else "minimum"] = lo
    if hi is not None:
        schema["exclusiveMaximum" if hi_open else "maximum"] = hi
    bounds = tuple(b for b in (lo, hi) if b is not None)
    texts = _texts(c, random.Random(c), bounds)
    _check(schema, texts, lambda t: _expected(t, c, kind == "integer", lo, hi, lo_open, hi_open))


@pytest.mark.parametrize("c", [11, 16, 33, 9973])
def test_not_multiple_of_an_integer_is_exact(c: int) -> None:
    texts = _texts(c, random.Random(-c))

    def expected(text: str) -> bool:
        if not _JSON_NUMBER.fullmatch(text) or "e" in text.lower():
            return False
        return _remainder(text, c) != 0

    _check({"type": "number", "not": {"multipleOf": c}}, texts, expected)


@pytest.mark.parametrize("c,excluded", [(33, [8]), (7, [4, 6]), (3, [8]), (429, [8, 6, 7])])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_multiple_beside_excluded_multiples_is_exact(c: int, excluded: list[int], kind: str) -> None:
    """`not multipleOf e` is a plain residue term (`(?%!e,0)`) intersected with the lexeme, not
    a complement, so emptiness of the states beside a `multipleOf` is found by a short walk."""
    schema = {"type": kind, "allOf": [{"multipleOf": c}] + [{"not": {"multipleOf": e}} for e in excluded]}

    def expected(text: str) -> bool:
        return _expected(text, c, kind == "integer") and all(_remainder(text, e) != 0 for e in excluded)

    _check(schema, _texts(c, random.Random(c + 1)), expected)


@pytest.mark.parametrize("c,excluded", [(12, 6), (44, 11), (2.5, 0.5), (33, 3)])
def test_multiple_of_an_excluded_multiple_is_a_contradiction(c: float, excluded: float) -> None:
    with pytest.raises(GrammarError, match="accepts no value"):
        Grammar.json_schema({"type": "number", "multipleOf": c, "not": {"multipleOf": excluded}})
    # In an option beside another, the number side is just dropped.
    grammar = Grammar.json_schema({"anyOf": [{"type": "number", "multipleOf": c, "not": {"multipleOf": excluded}}, {"type": "null"}]})
    assert accepts(grammar, "null") and not accepts(grammar, "0") and not accepts(grammar, str(c))


def test_multiples_merged_by_all_of_are_exact() -> None:
    # 33 and 77 merge to 231 (their lcm); each alone used to be too large a regex.
    schema = {"allOf": [{"type": "integer", "multipleOf": 33}, {"multipleOf": 77}]}
    _check(schema, _texts(231, random.Random(231)), lambda t: _expected(t, 231, True))


def test_multiple_above_the_residue_bound_keeps_the_warning() -> None:
    c = numbers.RESIDUE_MODULUS_MAX + 1  # 10001 = 73 · 137: no automaton either
    ir = json_schema_to_ir({"type": "integer", "multipleOf": c})
    assert any("multipleOf 10001 is ignored" in w for w in ir.options["warnings"])


@pytest.mark.parametrize("c,lo,hi,lo_open,hi_open", [
    (10_001, -50_003, 40_004, False, False),   # above the residue bound: the multiples listed
    (41_200, -41_200, 82_400, True, False),    # allany11's lcm; an open bound at a multiple
    (123_457, 0, 123_457 * 256, False, True),  # 256 multiples, the most listed
])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_large_multiple_between_bounds_is_exact(c: int, lo: int, hi: int, lo_open: bool, hi_open: bool, kind: str) -> None:
    schema: dict[str, Any] = {"type": kind, "multipleOf": c,
                              "exclusiveMinimum" if lo_open else "minimum": lo,
                              "exclusiveMaximum" if hi_open else "maximum": hi}
    texts = _texts(c, random.Random(c), (lo, hi))
    _check(schema, texts, lambda t: _expected(t, c, kind == "integer", lo, hi, lo_open, hi_open))


def test_large_multiple_with_none_between_the_bounds_is_a_contradiction() -> None:
    with pytest.raises(GrammarError, match="no multiple of 41200 lies within the bounds"):
        Grammar.json_schema({"type": "number", "multipleOf": 41_200, "exclusiveMinimum": -300, "exclusiveMaximum": 0})
    # Beside another branch, only that branch is dropped.
    schema = {"anyOf": [{"type": "number", "multipleOf": 41_200, "exclusiveMinimum": -300, "exclusiveMaximum": 0},
                        {"type": "integer", "multipleOf": 7}]}
    _check(schema, _texts(7, random.Random(3)), lambda t: _expected(t, 7, True))


def test_not_large_multiple_between_bounds_is_exact() -> None:
    c, lo, hi = 10_007, -30_021, 30_021
    schema = {"type": "integer", "not": {"multipleOf": c}, "minimum": lo, "maximum": hi}

    def expected(text: str) -> bool:
        if not _JSON_NUMBER.fullmatch(text) or "e" in text.lower() or "." in text:
            return False
        x = Decimal(text)
        return lo <= x <= hi and _remainder(text, c) != 0 and not (text.startswith("-") and x == 0)

    _check(schema, _texts(c, random.Random(c), (lo, hi)), expected)


@pytest.mark.parametrize("multiple", [0.01, 2.5, 0.25, 1.5, 0.1, 2.4, 9.5, 6.75, 13.5, 2.125, 6.5, 1.4, 0.0077])
def test_non_integer_multiples_stay_exact(multiple: float) -> None:
    step = Decimal(repr(multiple))
    texts = _texts(1, random.Random(7))
    texts += [str(step * k) for k in range(-30, 30)] + [str(step * k + Decimal("0.001")) for k in range(-5, 5)]

    def expected(text: str) -> bool:
        if not _JSON_NUMBER.fullmatch(text) or "e" in text.lower():
            return False
        return _remainder(text, step) == 0

    _check({"type": "number", "multipleOf": multiple}, texts, expected)


# ---- the core's term, by itself ------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _regex_grammar(pattern: str) -> Grammar:
    return Grammar.regex(pattern)


def _matches(pattern: str, text: str) -> bool:
    matcher = Matcher(BYTES, _regex_grammar(pattern))
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


@pytest.mark.parametrize("modulus,target,start", [
    (2, 0, 0), (7, 3, 0), (7, 0, 5), (16, 0, 9), (33, 32, 1), (1000, 0, 0), (65_537, 1, 2),
    (999_983, 0, 0), (1_000_000, 999_999, 123_456), (1, 0, 0),
])
def test_residue_term_against_a_residue_computed_by_hand(modulus: int, target: int, start: int) -> None:
    pattern = f"x(?%{modulus},{target},{start})y"
    rng = random.Random(modulus)
    words = [""] + [str(d) for d in range(10)] + ["00", "0000000"]
    words += ["".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 45))) for _ in range(150)]
    # Words that do reach the target: the residue after w, then digits to finish it.
    for w in words[:40]:
        residue = (start * 10 ** len(w) + int(w or "0")) % modulus
        width = len(str(modulus))
        need = (target - residue * 10**width) % modulus
        words.append(w + str(need).zfill(width))
    outcomes = set()
    for w in words:
        want = (start * 10 ** len(w) + int(w or "0")) % modulus == target
        outcomes.add(want)
        assert _matches(pattern, f"x{w}y") == want, (pattern, w)
    for w in ("1a", "-1", "1.0", " 1", "1 "):
        assert not _matches(pattern, f"x{w}y")
    assert outcomes == ({True} if modulus == 1 else {True, False})


@pytest.mark.parametrize("pattern", ["(?%0,0)", "(?%7,7)", "(?%7,0,7)", "(?%7)", "(?%1000001,0)", "(?%7,0,1,2)", "(?%7,a)", "(?%7,0"])
def test_residue_term_syntax_errors(pattern: str) -> None:
    with pytest.raises(GrammarError):
        Grammar.regex(pattern)
