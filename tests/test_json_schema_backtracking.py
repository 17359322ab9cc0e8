"""Patterns that Python's backtracking `re` would run for minutes, in the JSON Schema front-end.

The front-end checks concrete strings against patterns while it translates (listed property
names against `patternProperties`, enum values against `pattern`). A body regex that repeats a
group holding a repetition of variable length or an alternation (`_backtracking_risk`) is
matched by the core
(`_CoreRegex`: derivatives, bounded by fuel and deadline) instead of `re`. The screen is checked
on a table; the core's answers against `re` itself, on texts short enough for `re` to finish;
the fuzzer's schema and a smaller one are in the hostile corpus (`tests/test_hostile.py`,
`pattern_properties_backtracking*`), where the old front-end ran for minutes.
"""

from __future__ import annotations

import itertools
import random
import re

import pytest
from json_text import accepts

from tokensieve import Grammar
from tokensieve._grammar.json_schema.instance import InstanceChecker, _backtracking_risk, _CoreRegex


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
    assert _backtracking_risk(body) is risky


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
    bodies = [b for b in (random_body(rng) for _ in range(60)) if _backtracking_risk(b)][:8]
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
