"""The trie-backed extension questions fast-forward healing asks, against brute force."""

from __future__ import annotations

import bisect
import random
from functools import cache

import pytest

from oracle import regex_oracle
from tokensieve import Grammar, Matcher
from tokensieve._core.handles import token_has_extension


def test_has_extension_matches_a_vocabulary_scan(shared_dir):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)]
    rng = random.Random(7)
    probes = [b"order", b"name", b"_of", b" the", b"\"", b"{\"", b"zzqx", b"\xe6\x97", b"123"]
    probes += [t[: rng.randint(1, len(t))] for t in rng.sample([t for t in texts if t], 150)]
    for probe in probes:
        want = any(len(t) > len(probe) and t.startswith(probe) for t in texts)
        assert token_has_extension(tok, probe) == want, probe


EXTENSION_CASES = [(b"", b"or"), (b"or", b"d"), (b"", b"{\""), (b"{\"name\": \"", b"ab"), (b"{\"na", b"me"), (b"x", b"y"), (b"", b"orbit")]
HEAL_CASES = [b"{\"name\": \"", b"{\"name\": \"ab", b"or", b"orbit", b"ordinals", b"{\"na", b"{"]
PATTERNS = [r'\{"name": "[a-z ]{1,20}", "age": [0-9]+\}', r"(order|ordinal|orbit)s?!"]


@cache
def _llama3_texts() -> dict[int, bytes]:
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    return {t: tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)}


@cache
def _extension_answers(pattern: str) -> list[bool]:
    """Brute force over llama3's vocabulary, once per pattern for both module builds."""
    oracle = regex_oracle(pattern)
    texts = _llama3_texts()
    return [
        oracle.completable(prefix)
        and any(len(b) > len(suffix) and b.startswith(suffix) and oracle.completable(prefix + b) for b in texts.values())
        for prefix, suffix in EXTENSION_CASES
    ]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_extension_allowed_matches_brute_force(pattern, wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.regex(pattern))
    for (prefix, suffix), want in zip(EXTENSION_CASES, _extension_answers(pattern), strict=True):
        assert m.extension_allowed(prefix, suffix) == want, (prefix, suffix)
    assert m.token_count == 0


def _first_extensible(texts, data, start, allowed):
    """Brute force: the earliest i >= start with a token strictly extending data[i:] that `allowed` accepts."""
    ordered = texts if isinstance(texts, SortedTexts) else SortedTexts(texts)
    for i in range(start, len(data)):
        suffix = data[i:]
        if any(len(b) > len(suffix) and allowed(data[:i] + b) for b in ordered.starting_with(suffix)):
            return i
    return len(data)


class SortedTexts:
    """Token byte strings in sorted order: those starting with `p` are one run of the list."""

    def __init__(self, texts) -> None:
        self.items = sorted(texts)

    def starting_with(self, prefix: bytes):
        for b in self.items[bisect.bisect_left(self.items, prefix):]:
            if not b.startswith(prefix):
                return
            yield b


def test_token_heal_position_matches_a_vocabulary_scan(shared_dir):
    from conftest import load_shared_tokenizer
    from tokensieve._core.handles import token_heal_position

    tok = load_shared_tokenizer("llama3")
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)]
    for data, start in [(b"name_of_the_person\"", 0), (b"name_of_the_person\"", 14), (b"order", 0), (b"zzqxzzqx", 0),
                        (b"\xe6\x97\xa5\xe6", 1), (b"abc", 3)]:
        assert token_heal_position(tok, data, start) == _first_extensible(texts, data, start, lambda _: True), data
    with pytest.raises(ValueError):
        token_heal_position(tok, b"abc", 4)


@cache
def _heal_answers(pattern: str) -> list[tuple[bytes, int, int]]:
    """Brute force (data, start, position) over llama3's vocabulary, once per pattern."""
    oracle = regex_oracle(pattern)
    texts = SortedTexts(_llama3_texts().values())
    return [
        (data, start, _first_extensible(texts, data, start, oracle.completable))
        for data in HEAL_CASES
        for start in range(len(data) + 1)
    ]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_heal_position_matches_brute_force(pattern, wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.regex(pattern))
    for data, start, want in _heal_answers(pattern):
        assert m.heal_position(data, start) == want, (data, start)
    assert m.token_count == 0


LONG_RUNS = [b"q" * 300_000 + b"name_of", b"the quick brown fox " * 20_000 + b"\"na"]
LONG_RUN_PATTERN = r'[a-z_ "]*'


@cache
def _long_run_answers() -> list[tuple[int, int]]:
    """Brute force (token heal position, matcher heal position) per long run, once."""
    texts = SortedTexts(_llama3_texts().values())
    longest = max(len(b) for b in texts.items)
    oracle = regex_oracle(LONG_RUN_PATTERN)
    answers = []
    for data in LONG_RUNS:
        tail = len(data) - longest - 1
        want_tok = tail + _first_extensible(texts, data[tail:], 0, lambda _: True)
        want = tail + _first_extensible(texts, data[tail:], 0, lambda b, data=data, tail=tail: oracle.completable(data[:tail] + b))
        answers.append((want_tok, want))
    return answers


def test_healing_long_forced_runs_is_linear_and_inputs_over_1_mib_are_refused(wasm_variant):
    # heal_position over 10 MB of forced bytes was one 5 s call: every offset was looked up in
    # the trie. No token is longer than the vocabulary's longest, so an offset further back
    # than that has no extension; the oracle scans only the offsets that can have one.
    from conftest import load_shared_tokenizer
    from tokensieve import LimitError
    from tokensieve._core.handles import token_heal_position

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.regex(LONG_RUN_PATTERN))
    for data, (want_tok, want) in zip(LONG_RUNS, _long_run_answers(), strict=True):
        assert token_heal_position(tok, data, 0) == want_tok
        assert m.heal_position(data, 0) == want
    for call in (lambda: m.heal_position(b"a" * (1 << 20 | 1)), lambda: token_heal_position(tok, b"a" * (1 << 20 | 1))):
        with pytest.raises(LimitError, match="input") as info:
            call()
        assert info.value.limit == "input_size"
    assert m.heal_position(b"ab", 0) == 0 and not m.is_stopped()  # the matcher is not failed
