"""The trie-backed extension questions fast-forward healing asks, against brute force."""

from __future__ import annotations

import random

import pytest

from oracle import RegexOracle
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


@pytest.mark.parametrize("pattern", [r'\{"name": "[a-z ]{1,20}", "age": [0-9]+\}', r"(order|ordinal|orbit)s?!"])
def test_extension_allowed_matches_brute_force(pattern, wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    oracle = RegexOracle(pattern)
    texts = {t: tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)}
    m = Matcher(tok, Grammar.regex(pattern))
    cases = [(b"", b"or"), (b"or", b"d"), (b"", b"{\""), (b"{\"name\": \"", b"ab"), (b"{\"na", b"me"), (b"x", b"y"), (b"", b"orbit")]
    for prefix, suffix in cases:
        want = oracle.completable(prefix) and any(
            len(b) > len(suffix) and b.startswith(suffix) and oracle.completable(prefix + b) for b in texts.values()
        )
        assert m.extension_allowed(prefix, suffix) == want, (prefix, suffix)
    assert m.token_count == 0


def _first_extensible(texts, data, start, allowed):
    """Brute force: the earliest i >= start with a token strictly extending data[i:] that `allowed` accepts."""
    for i in range(start, len(data)):
        suffix = data[i:]
        if any(len(b) > len(suffix) and b.startswith(suffix) and allowed(data[:i] + b) for b in texts):
            return i
    return len(data)


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


@pytest.mark.parametrize("pattern", [r'\{"name": "[a-z ]{1,20}", "age": [0-9]+\}', r"(order|ordinal|orbit)s?!"])
def test_heal_position_matches_brute_force(pattern, wasm_variant):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    oracle = RegexOracle(pattern)
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)]
    m = Matcher(tok, Grammar.regex(pattern))
    cases = [b"{\"name\": \"", b"{\"name\": \"ab", b"or", b"orbit", b"ordinals", b"{\"na", b"{"]
    for data in cases:
        for start in range(len(data) + 1):
            want = _first_extensible(texts, data, start, oracle.completable)
            assert m.heal_position(data, start) == want, (data, start)
    assert m.token_count == 0


def test_healing_long_forced_runs_is_linear_and_inputs_over_1_mib_are_refused(wasm_variant):
    # heal_position over 10 MB of forced bytes was one 5 s call: every offset was looked up in
    # the trie. No token is longer than the vocabulary's longest, so an offset further back
    # than that has no extension; the oracle scans only the offsets that can have one.
    from conftest import load_shared_tokenizer
    from tokensieve import LimitError
    from tokensieve._core.handles import token_heal_position

    tok = load_shared_tokenizer("llama3")
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size) if not tok.is_special(t)]
    longest = max(len(b) for b in texts)
    oracle = RegexOracle(r'[a-z_ "]*')
    m = Matcher(tok, Grammar.regex(r'[a-z_ "]*'))
    for data in [b"q" * 300_000 + b"name_of", b"the quick brown fox " * 20_000 + b"\"na"]:
        tail = len(data) - longest - 1
        want_tok = tail + _first_extensible(texts, data[tail:], 0, lambda _: True)
        assert token_heal_position(tok, data, 0) == want_tok
        want = tail + _first_extensible(texts, data[tail:], 0, lambda b: oracle.completable(data[:tail] + b))
        assert m.heal_position(data, 0) == want
    for call in (lambda: m.heal_position(b"a" * (1 << 20 | 1)), lambda: token_heal_position(tok, b"a" * (1 << 20 | 1))):
        with pytest.raises(LimitError, match="input") as info:
            call()
        assert info.value.limit == "input_size"
    assert m.heal_position(b"ab", 0) == 0 and not m.is_stopped()  # the matcher is not failed
