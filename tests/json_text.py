"""Helpers for JSON Schema tests that run texts through a real `Matcher`: a byte-level
tokenizer (every byte a token, so the core's lexemes are honoured as it implements them),
acceptance of a whole text, compact JSON, and objects with keys in a schema's order (the fixed
property order is a documented departure, tested elsewhere)."""

from __future__ import annotations

import json
from typing import Any

from tokensieve import Grammar, Matcher, Tokenizer

BYTES = Tokenizer.from_token_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256], special_token_ids=[256]
)


def accepts(grammar: Grammar, text: str) -> bool:
    matcher = Matcher(BYTES, grammar)
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def ordered(value: Any, order: list[str]) -> Any:
    """`value` with every object's keys in `order` first (others after, as they were)."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: order.index(k) if k in order else len(order))
        return {k: ordered(value[k], order) for k in keys}
    if isinstance(value, list):
        return [ordered(v, order) for v in value]
    return value


def agrees_with_jsonschema(grammar: Grammar, validator: Any, values: Any, order: list[str]) -> None:
    """Each value, keys in `order` first, is accepted exactly when `validator` (a jsonschema
    validator) finds it valid; both verdicts occur, so the check cannot pass vacuously."""
    outcomes = set()
    for value in values:
        value = ordered(value, order)
        expected = validator.is_valid(value)
        outcomes.add(expected)
        assert accepts(grammar, compact(value)) == expected, value
    assert outcomes == {True, False}
