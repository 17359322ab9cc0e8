"""Tokenizers, grammars and matchers cross processes: pickle (multiprocessing, Ray) and
`copy.deepcopy` once failed on all three ("cannot pickle 'weakref.ReferenceType' object").

Masks computed in a spawned process are checked against the regex oracle (`oracle.RegexOracle`)
and JSON Schema grammars against `jsonschema`, never against the parent's own masks.
"""

from __future__ import annotations

import copy
import gzip
import json
import multiprocessing
import pickle
from typing import Any

import jsonschema
import numpy as np
import pytest
import tokenizers

from conftest import load_shared_tokenizer, shared_path
from oracle import RegexOracle
from tokensieve import Grammar, Matcher, Tokenizer, TokensieveError

PATTERN = "[a-z]+( [0-9]{2,4})*"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer", "minimum": 0}},
    "required": ["name", "n"],
    "additionalProperties": False,
}


def _allowed(row: Any, vocab_size: int) -> set[int]:
    bits = np.unpackbits(np.asarray(row, dtype=np.int32).view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


def _oracle_allowed(tok: Tokenizer, pattern: str, prefix: bytes) -> set[int]:
    oracle = RegexOracle(pattern)
    return {
        t for t in range(tok.vocab_size)
        if not tok.is_special(t) and tok.token_bytes(t) and oracle.completable(prefix + tok.token_bytes(t))
    }


def _in_child(payload: bytes) -> dict[str, Any]:
    """Run in a spawned process: unpickle, then report masks and what the grammars accept."""
    tok, regex, matcher, schema_grammar, texts = pickle.loads(payload)
    fresh = Matcher(tok, regex)
    out: dict[str, Any] = {
        "fresh": fresh.compute_bitmask().tolist(),
        "matcher_tokens": matcher.consumed_tokens,
        "matcher": matcher.compute_bitmask().tolist(),
        "encoded": [tok.encode(text) for text in texts],
        "accepts": {},
    }
    for text in texts:
        checker = Matcher(tok, schema_grammar)
        out["accepts"][text] = checker.consume_tokens(tok.encode(text)) and checker.is_accepting()
    return out


def test_tokenizer_grammar_and_matcher_cross_a_spawned_process() -> None:
    tok = Tokenizer.default()
    regex = Grammar.regex(PATTERN)
    matcher = Matcher(tok, regex)
    prefix = "abc 12"
    assert matcher.consume_tokens(tok.encode(prefix))
    schema_grammar = Grammar.json_schema(SCHEMA, whitespace="compact")
    texts = ['{"name":"ab","n":3}', '{"name":"abcdefghij","n":3}', '{"n":3,"name":"ab"}', '{"name":"ab","n":-1}', '{"name":"x"}']
    payload = pickle.dumps((tok, regex, matcher, schema_grammar, texts))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out = pool.apply(_in_child, (payload,))
    assert _allowed(out["fresh"], tok.vocab_size) - set(tok.eos_token_ids) == _oracle_allowed(tok, PATTERN, b"")
    assert out["matcher_tokens"] == tok.encode(prefix)
    assert _allowed(out["matcher"], tok.vocab_size) - set(tok.eos_token_ids) == _oracle_allowed(tok, PATTERN, prefix.encode())
    assert out["encoded"] == [tok.encode(text) for text in texts]
    for text in texts:
        try:
            jsonschema.validate(json.loads(text), SCHEMA)
            valid = True
        except jsonschema.ValidationError:
            valid = False
        # The schema's order of properties is the grammar's (docs/json_schema.md).
        expected = valid and text.index('"name"') < text.index('"n"')
        assert out["accepts"][text] == expected, text


@pytest.mark.parametrize("name", ["llama3", "gemma"])
def test_a_pickled_tokenizer_has_the_same_vocabulary_and_encoding(name: str) -> None:
    tok = load_shared_tokenizer(name)
    copied = pickle.loads(pickle.dumps(tok))
    assert (copied.vocab_size, copied.n_tokens, copied.eos_token_ids) == (tok.vocab_size, tok.n_tokens, tok.eos_token_ids)
    assert all(copied.token_bytes(t) == tok.token_bytes(t) and copied.is_special(t) == tok.is_special(t)
               for t in range(tok.n_tokens))
    texts = ["Hello, world!", '{"a": [1, 2.5e-3, "ü"]}', "  indented\n\tline", "日本語のテキスト"]
    assert [copied.encode(t) for t in texts] == [tok.encode(t) for t in texts]
    # And as the tokenizers library encodes them from the same tokenizer.json (the oracle).
    hf = tokenizers.Tokenizer.from_str(gzip.decompress((shared_path() / "tokenizers" / name / "tokenizer.json.gz").read_bytes()).decode())
    assert [copied.encode(t) for t in texts] == [hf.encode(t, add_special_tokens=False).ids for t in texts]
    # A width and EOS variant pickled with its tokenizer still shares its trie (one per instance).
    wide = tok.with_vocab_size(tok.vocab_size + 64)
    stops = wide.with_eos_token_ids([tok.eos_token_ids[0], 5])
    wide2, stops2 = pickle.loads(pickle.dumps((wide, stops)))
    assert stops2._trie_owner is wide2 and stops2.eos_token_ids == stops.eos_token_ids
    assert wide2.vocab_size == tok.vocab_size + 64


def test_a_deep_copied_matcher_moves_on_its_own() -> None:
    tok = Tokenizer.default()
    matcher = Matcher(tok, Grammar.regex(PATTERN), vocab_size=tok.vocab_size + 100)
    assert matcher.consume_tokens(tok.encode("abc"))
    twin = copy.deepcopy(matcher)
    assert twin.vocab_size == tok.vocab_size + 100 and twin.consumed_tokens == matcher.consumed_tokens
    assert twin.consume_tokens(tok.encode(" 1234"))
    assert matcher.consumed_tokens == tok.encode("abc")
    eos = set(tok.eos_token_ids)
    assert _allowed(matcher.compute_bitmask(), tok.vocab_size) - eos == _oracle_allowed(tok, PATTERN, b"abc")
    assert _allowed(twin.compute_bitmask(), tok.vocab_size) - eos == _oracle_allowed(tok, PATTERN, b"abc 1234")


def test_a_damaged_pickled_grammar_is_refused_clearly() -> None:
    function, arguments = Grammar.regex("a+").__reduce__()
    for damaged in (b"garbage!", arguments[2][:-8], b""):
        with pytest.raises(TokensieveError, match="malformed grammar IR"):
            function(*arguments[:2], damaged, *arguments[3:])
    with pytest.raises(TokensieveError, match="not a pickled tokensieve Grammar"):
        function(*arguments[:2], "text, not bytes", *arguments[3:])
