"""Patterns that Python's backtracking `re` would run for minutes, in the JSON Schema front-end.

The front-end checks concrete strings against patterns while it translates (listed property
names against `patternProperties`, enum values against `pattern`). A body regex that repeats a
group holding a repetition of variable length or an alternation (`_choice_points` None) is
matched by the core
(`_CoreRegex`: derivatives, bounded by fuel and deadline) instead of `re`; one with several
places to backtrack into in a row (`a*a*a*…`, `(a|a)(a|a)…`: `_choice_points`) is matched by
`re` on texts short enough for it to finish in ~1 ms and by the core beyond (`_BoundedRegex`).
The screen is checked on a table; the core's answers against `re` itself, on texts short
enough for `re` to finish; the fuzzer's schema and smaller ones are in the hostile corpus
(`tests/test_hostile.py`, `pattern_properties_*`, `enum_pattern_alternation_chain`), where the
old front-end ran for minutes.
"""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest
from json_text import accepts

from tokensieve import Grammar
from tokensieve._grammar.json_schema.instance import (
    InstanceChecker, _BoundedRegex, _choice_points, _CoreRegex, _re_text_max,
)


@pytest.mark.parametrize(("body", "risky"), [
    ("(a+)+", True),
    ("(x?){9999}", True),
    ("(?:[0-9]*,)*", True),
    ("(?:a{2,}){3}", True),
    ("(?:(?:a|b)+c)*", True),
    ("(?:x-(?:[a-z]{2,3})*)", True),
    ("(?:a|b)*", True),  # an alternation under a repetition (`(a|a)*`: 25 s on 30 a's)
    ("(a|a){2,}", True),
    ("a|b", False),  # an alternation alone
    ("(?:a|b)c?", False),
    ("(?:[0-9]{4})*", False),  # a fixed count inside
    ("(a+)?", False),  # an optional group outside
    ("a*b*", False),
    ("[(]*", False),  # a parenthesis in a class
    (r"\(a*\)*", False),  # escaped parentheses
    ("(a*", True),  # unreadable: the core decides (or refuses)
])
def test_the_risk_screen(body: str, risky: bool) -> None:
    assert (_choice_points(body) is None) is risky


@pytest.mark.parametrize(("body", "points"), [
    ("[a-z]+", 1),
    ("a*b*", 2),
    ("^(foo|bar|baz)$", 2),
    ("a{2,5}b{3}", 1),  # a fixed count is no choice
    (r"a\*b*", 1),  # an escaped star is a character
    ("[*+|]x", 0),  # nor are a class's
    ("(?:ab)?c*", 2),
    ("(a+)+", None),  # a risk: the core decides every text
])
def test_the_choice_points(body: str, points: int | None) -> None:
    assert _choice_points(body) == points


def test_re_gets_texts_whose_ways_to_backtrack_are_few() -> None:
    assert _re_text_max(1) > 10**9  # one place: linear
    for points in range(2, 12):
        n = _re_text_max(points)
        assert math.comb(n + points, points) <= 200_000 < math.comb(n + 1 + points, points)


def random_chain(rng: random.Random) -> str:
    """A regex over `ab` with two or three places to backtrack into, none repeated."""
    parts = [rng.choice(["a", "b", "[ab]", "(?:a|ab)"]) + rng.choice(["*", "+", "?", "{0,3}", ""]) for _ in range(4)]
    return "".join(parts)


@pytest.mark.parametrize("seed", range(6))
def test_texts_past_re_s_share_go_to_the_core_and_agree_with_re(seed: int) -> None:
    rng = random.Random(seed)
    bodies = [b for b in (random_chain(rng) for _ in range(200)) if _choice_points(b) in (2, 3)][:6]
    assert bodies
    for body in bodies:
        bounded = _BoundedRegex(re.compile(body), body, _choice_points(body))
        for _ in range(12):
            n = bounded.text_max + rng.randint(1, 40)
            text = "".join(rng.choice("ab") for _ in range(n)) if rng.random() < 0.5 else "a" * n + rng.choice(["", "b", "ba"])
            assert bool(bounded.fullmatch(text)) == bool(re.fullmatch(body, text)), (body, text)


def test_a_key_past_re_s_share_is_decided_by_the_core() -> None:
    # Twelve repetitions in a row: `re` on the 40 a's and the `!` runs for hours (ten on 36
    # characters took 21 s); the key it does not match keeps its own schema.
    schema = {
        "type": "object",
        "properties": {"a" * 40 + "!": {"type": "string"}, "a" * 40: {}},
        "patternProperties": {"^" + "a*" * 12 + "$": {"type": "integer"}},
        "required": ["a" * 40 + "!", "a" * 40],
        "additionalProperties": False,
    }
    grammar = Grammar.json_schema(schema, whitespace="compact")
    assert accepts(grammar, '{"%s!":"s","%s":1}' % ("a" * 40, "a" * 40))
    assert not accepts(grammar, '{"%s!":"s","%s":"s"}' % ("a" * 40, "a" * 40))
    assert not accepts(grammar, '{"%s!":1,"%s":1}' % ("a" * 40, "a" * 40))


def test_an_enum_value_against_a_chain_of_alternations() -> None:
    # 2^40 ways for `re` on the value that fails at its last character.
    schema = {"type": "string", "pattern": "^" + "(a|a)" * 40 + "b$", "enum": ["a" * 40 + "c", "a" * 40 + "b"]}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    assert accepts(grammar, '"%sb"' % ("a" * 40))
    assert not accepts(grammar, '"%sc"' % ("a" * 40))


def random_body(rng: random.Random, depth: int = 0) -> str:
    """A small regex over `ab` with nested groups and quantifiers (Python `re` syntax, which
    the core's agrees with here)."""
    parts = []
    for _ in range(rng.randint(1, 3)):
        if depth < 2 and rng.random() < 0.5:
            inner = "|".join(random_body(rng, depth + 1) for _ in range(rng.randint(1, 2)))
            part = f"(?:{inner})"
        else:
            part = rng.choice(["a", "b", "[ab]", "ab"])
        parts.append(part + rng.choice(["", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}"]))
    return "".join(parts)


@pytest.mark.parametrize("seed", range(12))
def test_the_core_agrees_with_re_where_re_finishes(seed: int) -> None:
    rng = random.Random(seed)
    bodies = [b for b in (random_body(rng) for _ in range(60)) if _choice_points(b) is None][:8]
    assert bodies
    texts = ["".join(t) for n in range(7) for t in itertools.product("ab", repeat=n)]
    for body in bodies:
        core = _CoreRegex(body)
        for text in texts:
            assert bool(core.fullmatch(text)) == bool(re.fullmatch(body, text)), (body, text)


def test_a_risky_pattern_property_is_decided_by_the_core() -> None:
    checker = InstanceChecker(lambda ref, pointer: None, lambda pattern: ((pattern,), ()), {})
    assert type(checker._regex("(?:x*y?|z){40}0")) is _CoreRegex
    assert type(checker._regex("[a-z]+")) is not _CoreRegex
    # The listed key the pattern finds takes its schema, one it does not find keeps its own
    # (`re` took minutes on the 30 x's before the 0).
    schema = {
        "type": "object",
        "properties": {"x" * 30: {}, "x" * 30 + "0": {}},
        "patternProperties": {"^(?:x*y?|z){40}0$": {"type": "integer"}},
        "required": ["x" * 30, "x" * 30 + "0"],
        "additionalProperties": False,
    }
    grammar = Grammar.json_schema(schema, whitespace="compact")
    assert accepts(grammar, '{"%s":"s","%s0":1}' % ("x" * 30, "x" * 30))
    assert not accepts(grammar, '{"%s":"s","%s0":"s"}' % ("x" * 30, "x" * 30))


def test_the_core_s_patterns_live_outside_the_default_pool() -> None:
    # The default pool places matchers by count: the front-end's own matchers there skewed
    # where serving matchers went (bench batch found its requests unevenly spread), and a
    # pattern the core failed on could retire an instance serving requests.
    from tokensieve._core import default_pool

    def counts() -> int:
        return sum(core.matcher_count for core in default_pool().cores())

    before = counts()
    schema = {"type": "object", "patternProperties": {"^(?:a|b|ab)*q$": {"type": "integer"}},
              "properties": {"abq": {}, "ab" * 20 + "!": {}}}
    Grammar.json_schema(schema)
    assert _core_matcher_bodies() and counts() == before


def test_the_core_s_patterns_follow_the_configured_options() -> None:
    # A deadline or memory cap set with `configure` bounds these instances too.
    import tokensieve
    from tokensieve._core.pool import _default_options
    from tokensieve._grammar.json_schema import instance

    before = _default_options
    schema = {"type": "object", "patternProperties": {"^(?:c|d|cd)*q$": {}}, "properties": {"cdq": {}}}
    try:
        tokensieve.configure(deadline_s=0.75, memory_limit_bytes=512 << 20)
        Grammar.json_schema(schema)
        options = instance._CORE_POOL.options
        assert (options.deadline_s, options.memory_limit_bytes, options.instances) == (0.75, 512 << 20, 1)
        assert all(matcher._pool is instance._CORE_POOL for matcher in instance._CORE_MATCHERS.values())
    finally:
        tokensieve.configure(before)


def _core_matcher_bodies() -> list[str]:
    from tokensieve._grammar.json_schema import instance

    return [body for body in instance._CORE_MATCHERS if "ab" in body]
