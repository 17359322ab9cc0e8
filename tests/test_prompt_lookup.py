"""Prompt lookup: the indexes against brute-force references, grammar-aware drafts against the
matcher's own token-by-token answers, the core's draft masks and text steps against separate
computations, and `generate` with drafts against an independent plain decoding loop."""

from __future__ import annotations

import json
import re
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import load_shared_tokenizer
from oracle import RegexOracle
from tokensieve import ArgumentError, Grammar, Matcher, PromptLookup, Sampling, Tokenizer, TokensieveError, generate
from tokensieve._decoding.prompt_lookup import _TextIndex, _TokenIndex


@pytest.fixture(scope="module")
def llama3() -> Any:
    return load_shared_tokenizer("llama3")


# -- the token-id index ------------------------------------------------------------------------


def reference_lookup(ids: list[int], tail: list[int], n_min: int, n_max: int, count: int) -> list[int]:
    """Longest n-gram ending `tail`, its latest occurrence in `ids` ending before the last
    position, the ids after it: by scanning."""
    for n in range(min(n_max, len(tail)), n_min - 1, -1):
        gram = tail[-n:]
        for end in range(len(ids) - 2, n - 2, -1):
            if ids[end - n + 1 : end + 1] == gram:
                return ids[end + 1 : end + 1 + count]
    return []


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 5), max_size=60),
    st.lists(st.integers(0, 5), max_size=4),
    st.integers(0, 30),
    st.integers(1, 2),
    st.integers(2, 4),
)
def test_token_lookup_matches_a_scan_and_survives_rollback(ids, draft, rollback, n_min, n_max):
    index = _TokenIndex(n_min, n_max)
    index.extend(ids)
    rollback = min(rollback, len(ids))
    index.rollback(rollback)
    kept = ids[: len(ids) - rollback]
    assert index.ids == kept
    fresh = _TokenIndex(n_min, n_max)
    fresh.extend(kept)
    assert index.ends == fresh.ends
    tail = kept + draft
    assert index.lookup(tail, 5) == reference_lookup(kept, tail, n_min, n_max, 5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"b ", b"ab", b" ", b"\xc3\xa9", b".", b"b"]), max_size=40), st.integers(0, 40))
def test_text_index_after_rollback_equals_a_fresh_one(pieces, rollback):
    index = _TextIndex(1, 3)
    for piece in pieces:
        index.append(piece)
    rollback = min(rollback, len(pieces))
    index.rollback(rollback)
    fresh = _TextIndex(1, 3)
    for piece in pieces[: len(pieces) - rollback]:
        fresh.append(piece)
    assert bytes(index.text) == bytes(fresh.text)
    assert index.words == fresh.words
    assert index.ends == fresh.ends
    assert index.run_start == fresh.run_start


def test_prompt_lookup_refuses_bad_arguments(llama3):
    with pytest.raises(ValueError, match="mode"):
        PromptLookup(llama3, mode="words")
    with pytest.raises(ValueError, match="min_ngram_size"):
        PromptLookup(llama3, max_ngram_size=2, min_ngram_size=3)
    with pytest.raises(ValueError, match="num_pred_tokens"):
        PromptLookup(llama3, num_pred_tokens=0)
    lookup = PromptLookup(llama3)
    with pytest.raises(TokensieveError, match="token id"):
        lookup.extend([llama3.vocab_size])
    with pytest.raises(TokensieveError, match="rollback"):
        lookup.rollback(1)


def test_plain_lookup_is_the_seeds_continuation(llama3):
    lookup = PromptLookup(llama3, mode="tokens", num_pred_tokens=4)
    ids = llama3.encode("the cat sat on the mat. the cat")
    lookup.extend(ids)
    after = llama3.encode("the cat sat on the mat. the cat")
    position = 2  # "the cat" → " sat on the mat"
    assert lookup.propose() == after[position : position + 4]


# -- grammar-aware drafts ----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string", "enum": ["Paris", "Berlin", "Lisbon"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "city", "tags"],
    "additionalProperties": False,
}
INSTANCE = {"name": "Ada Lovelace", "age": 36, "city": "Paris", "tags": ["math", "engines"]}


@pytest.mark.parametrize("mode", ["tokens", "text"])
def test_drafts_are_allowed_and_leave_the_matcher_as_it_was(llama3, mode):
    grammar = Grammar.json_schema(SCHEMA, whitespace="compact")
    document = json.dumps(dict(reversed(list(INSTANCE.items()))), indent=2)
    prompt = llama3.encode(f"Source:\n{document}\nJSON:")
    target = llama3.encode(json.dumps(INSTANCE, separators=(",", ":")))
    matcher = Matcher(llama3, grammar)
    lookup = PromptLookup(llama3, mode=mode)
    lookup.extend(prompt)
    proposed_any = False
    for token in target:
        before = matcher.compute_bitmask().copy()
        count = matcher.token_count
        draft = lookup.propose(matcher)
        proposed_any = proposed_any or bool(draft)
        assert matcher.token_count == count
        assert (matcher.compute_bitmask() == before).all()
        probe = matcher.fork()
        for t in draft:  # the matcher's own token-by-token answer is the oracle here
            assert probe.consume_token(t), (llama3.decode(draft), t)
        assert matcher.consume_token(token)
        lookup.extend([token])
    assert proposed_any


def test_text_drafts_cut_where_the_grammar_refuses(llama3):
    grammar = Grammar.regex(r"id-[0-9]+;")
    lookup = PromptLookup(llama3, mode="text")
    lookup.extend(llama3.encode("ref id-4711x and more\n"))
    matcher = Matcher(llama3, grammar)
    prefix = llama3.encode("id-")
    assert matcher.consume_tokens(prefix)
    lookup.extend(prefix)
    draft = lookup.propose(matcher)
    assert llama3.decode(draft) == b"4711"


def test_text_drafts_skip_the_words_the_output_skipped(llama3):
    schema = {
        "type": "object",
        "properties": {k: {"type": "string"} for k in ("first", "second", "third")},
        "required": ["first", "second", "third"],
        "additionalProperties": False,
    }
    grammar = Grammar.json_schema(schema, whitespace="compact")
    document = "The first is alpha beta.\nThe second is gamma delta.\nThe third is epsilon zeta.\n"
    target = llama3.encode('{"first":"alpha beta","second":"gamma delta","third":"epsilon zeta"}')
    calls = 0
    for greedy_oracle_rounds in range(1):
        matcher = Matcher(llama3, grammar)
        lookup = PromptLookup(llama3, mode="text")
        lookup.extend(llama3.encode(document))
        done = 0
        while done < len(target):
            draft = lookup.propose(matcher)
            accepted = 0
            while accepted < len(draft) and done + accepted < len(target) and draft[accepted] == target[done + accepted]:
                accepted += 1
            step = target[done : done + accepted + 1]
            assert matcher.consume_tokens(step)
            lookup.extend(step)
            done += len(step)
            calls += 1
    # The first value costs a rejected draft ("is alpha beta"); after it the drafter skips "is".
    assert calls <= 6, calls


# -- the core's draft masks and text steps ------------------------------------------------------


@pytest.mark.parametrize("variant", ["release", "safe"])
def test_draft_masks_equal_masks_after_consuming_each_prefix(llama3, variant, monkeypatch):
    monkeypatch.setenv("TOKENSIEVE_WASM_VARIANT", variant)
    grammar = Grammar.json_schema(SCHEMA, whitespace="compact")
    text = json.dumps(INSTANCE, separators=(",", ":"))
    tokens = llama3.encode(text) + list(llama3.eos_token_ids[:1])
    matcher = Matcher(llama3, grammar)
    assert matcher.consume_tokens(tokens[:3])
    draft = tokens[3:] + [tokens[5]]  # the last token is refused (the output ended)
    valid, masks = matcher.fill_draft_masks(draft)
    assert valid == len(draft) - 1
    probe = matcher.fork()
    for row in range(valid + 1):
        assert (masks[row] == probe.compute_bitmask()).all(), row
        if row < valid:
            assert probe.consume_token(draft[row])
    assert matcher.token_count == 3
    with pytest.raises(TokensieveError, match="token id"):
        matcher.fill_draft_masks([llama3.vocab_size + 5])


@pytest.mark.parametrize(
    "pattern, text",
    [
        (r"abc(de|df)ghi[0-9]+", b"abcdfgXX"),
        (r"abc(de|df)ghi[0-9]+", b"abcd"),
        (r"abc(de|df)ghi[0-9]+", b"abcde"),
        (r"(héllo|hé!)-world", "hé".encode()),
        (r"(héllo|hé!)-world", "héllo".encode()),
        (r"[a-z]{2,4}=(on|off)", b"abcd="),
        (r"[a-z]{2,4}=(on|off)", b"abcdef"),
    ],
)
def test_validate_text_against_partial_matching(llama3, pattern, text):
    oracle = RegexOracle(pattern)
    matcher = Matcher(llama3, Grammar.regex(pattern))
    valid, forced = matcher.validate_text(text)
    expected_valid = max(i for i in range(len(text) + 1) if oracle.completable(text[:i]))
    assert valid == expected_valid
    prefix = text[:valid]
    expected_forced = b""
    while True:  # a byte is forced when it is the only one that keeps the text completable
        if oracle.full_match(prefix + expected_forced):
            break
        options = [b for b in range(256) if oracle.completable(prefix + expected_forced + bytes([b]))]
        if len(options) != 1:
            break
        expected_forced += bytes(options)
    assert forced == expected_forced


def test_compute_ff_tokens_uses_the_consumed_tokens_as_context(llama3):
    """After `{"` the grammar forces `_id":`; Llama-3 writes `_` `id` after `{"`, not `_id`."""
    schema = {"type": "object", "properties": {"_id": {"type": "integer"}}, "required": ["_id"], "additionalProperties": False}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    full = llama3.encode('{"_id":5}')
    matcher = Matcher(llama3, grammar)
    opening = llama3.encode('{"')
    assert full[: len(opening)] == opening
    assert matcher.consume_tokens(opening)
    forced = matcher.compute_ff_tokens()
    assert forced == full[len(opening) : len(opening) + len(forced)]
    assert forced


# -- lossless verification ---------------------------------------------------------------------


def _plain_reference(model, tokenizer, grammar, prompt, max_new, sampling):
    """Plain constrained decoding, written out independently of `generate`: forced tokens
    (healed, with the consumed tokens as context) without the model, EOS when only EOS may
    follow, else the masked logits sampled with position p's draw `Random(f"{seed}:{p}")`."""
    import numpy as np

    matcher = Matcher(tokenizer, grammar)
    sequence = list(prompt)
    new: list[int] = []
    eos = tokenizer.eos_token_ids
    while len(new) < max_new:
        if matcher.is_stopped():
            matcher.consume_token(eos[0])
            new.append(eos[0])
            break
        forced = matcher.compute_ff_tokens(context_tokens=sequence[-5:])[: max_new - len(new)]
        if forced:
            assert matcher.consume_tokens(forced)
            new += forced
            sequence += forced
            continue
        logits = np.asarray(model(sequence), dtype=np.float64)
        bits = np.unpackbits(matcher.compute_bitmask().view(np.uint8), bitorder="little")[: len(logits)]
        allowed = np.flatnonzero(bits)
        if sampling.temperature == 0:
            token = int(allowed[np.argmax(logits[allowed])])
        else:
            scores = (logits[allowed] - logits[allowed].max()) / sampling.temperature
            probs = np.exp(scores) / np.exp(scores).sum()
            order = np.argsort(-probs, kind="stable")
            cumulative = np.cumsum(probs[order])
            kept = int(np.searchsorted(cumulative, sampling.top_p - 1e-12) + 1)
            kept_probs = probs[order][:kept]
            point = random.Random(f"{sampling.seed}:{len(new)}").random() * kept_probs.sum()
            pick = int(np.searchsorted(np.cumsum(kept_probs), point, side="right"))
            token = int(allowed[order[min(pick, kept - 1)]])
        assert matcher.consume_token(token)
        new.append(token)
        sequence.append(token)
        if token in eos:
            break
    return new


class CopyingModel:
    """A deterministic scripted model that mostly copies: it favours the target's next token,
    with noise keyed by the prefix, so drafts are accepted often and rejected sometimes."""

    def __init__(self, tokenizer, target: list[int], prompt_len: int, strength: float):
        self.vocab = tokenizer.vocab_size
        self.target = target
        self.prompt_len = prompt_len
        self.strength = strength
        self.calls = 0

    def row(self, prefix):
        import numpy as np

        rng = np.random.default_rng(hash(tuple(prefix[-8:])) & 0xFFFFFFFF)
        logits = rng.standard_normal(self.vocab)
        done = len(prefix) - self.prompt_len
        if 0 <= done < len(self.target) and self.target[: done] == list(prefix[self.prompt_len :]):
            logits[self.target[done]] += self.strength
        return logits

    def __call__(self, tokens, num_logits=None):
        self.calls += 1
        if num_logits is None:
            return self.row(tokens)
        return [self.row(tokens[: len(tokens) - num_logits + 1 + i]) for i in range(num_logits)]


def _extraction_case(tokenizer):
    grammar = Grammar.json_schema(SCHEMA, whitespace="compact")
    document = json.dumps(dict(reversed(list(INSTANCE.items()))), indent=2)
    prompt = tokenizer.encode(f"Source:\n{document}\nJSON:")
    target = tokenizer.encode(json.dumps(INSTANCE, separators=(",", ":"))) + list(tokenizer.eos_token_ids[:1])
    return grammar, prompt, target


@pytest.mark.parametrize(
    "sampling",
    [Sampling(), Sampling(temperature=1.0, seed=7), Sampling(temperature=0.8, top_p=0.9, seed=11)],
    ids=["greedy", "sampling", "top_p"],
)
@pytest.mark.parametrize("mode", ["tokens", "text"])
@pytest.mark.parametrize("strength", [3.0, 8.0])
def test_prompt_lookup_output_equals_plain_decoding(llama3, sampling, mode, strength):
    grammar, prompt, target = _extraction_case(llama3)
    plain_model = CopyingModel(llama3, target, len(prompt), strength)
    expected = _plain_reference(plain_model, llama3, grammar, prompt, 60, sampling)
    model = CopyingModel(llama3, target, len(prompt), strength)
    result = generate(model, llama3, grammar, prompt, max_new_tokens=60, sampling=sampling, prompt_lookup=PromptLookup(llama3, mode=mode))
    assert result.tokens == expected
    assert model.calls == result.stats["model_calls"]
    text = llama3.decode([t for t in result.tokens if t not in llama3.eos_token_ids])
    if result.tokens[-1] in llama3.eos_token_ids:
        import jsonschema

        jsonschema.validate(json.loads(text), SCHEMA)
    if strength == 8.0 and sampling.temperature == 0:
        assert result.tokens == target
        assert result.stats["model_calls"] < plain_model.calls * (0.5 if mode == "text" else 0.8)
        assert result.stats["accepted_draft_tokens"] > 0


def test_prompt_lookup_must_start_empty(llama3):
    grammar, prompt, target = _extraction_case(llama3)
    lookup = PromptLookup(llama3)
    lookup.extend(prompt)
    with pytest.raises(ValueError, match="empty context"):
        generate(CopyingModel(llama3, target, len(prompt), 1.0), llama3, grammar, prompt, max_new_tokens=5, prompt_lookup=lookup)


def test_transformers_model_with_kv_cache_gives_the_plain_output(llama3):
    import torch  # the test extra installs torch and transformers: a missing one is a failure
    import transformers

    from tokensieve.hf import CausalLM

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=llama3.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    )
    model = transformers.LlamaForCausalLM(config).to(torch.float64).eval()
    grammar, prompt, target = _extraction_case(llama3)

    def no_cache(tokens, num_logits=None):
        # The whole sequence each call (no cache); the 128k-wide head only on the rows asked for.
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([list(tokens)]), logits_to_keep=num_logits or 1).logits[0].numpy()
        return logits[-1] if num_logits is None else logits[-num_logits:]

    for sampling in (Sampling(), Sampling(temperature=1.0, seed=3)):
        expected = _plain_reference(no_cache, llama3, grammar, prompt, 40, sampling)
        lm = CausalLM(model)
        result = generate(lm, llama3, grammar, prompt, max_new_tokens=40, sampling=sampling, prompt_lookup=True)
        assert result.tokens == expected
        assert lm.forward_calls == result.stats["model_calls"]
        # a rejected draft was cut back out of the cache: a fresh call agrees with no cache
        check = llama3.encode("x") + result.tokens[:3]
        assert abs(lm(prompt + check) - no_cache(prompt + check)).max() < 1e-6


@pytest.mark.parametrize(
    ("call", "words"),
    [
        # 10**9 made a billion n-gram tables (the process ran out of memory); a draft of 100,000
        # tokens asked for 1.6 GB of masks; bytes(10**9) is a gigabyte of zeros; the others raised
        # ValueError or TypeError from inside.
        (lambda tok: PromptLookup(tok, max_ngram_size=10**9), "at most 64"),
        (lambda tok: PromptLookup(tok, num_pred_tokens=10**9), "at most 4,096"),
        (lambda tok: PromptLookup(None), "needs a tokensieve.Tokenizer"),
        (lambda tok: PromptLookup(tok).extend("abc"), "takes token ids, not str"),
        (lambda tok: PromptLookup(tok).extend([1, "2"]), "int token ids"),
        (lambda tok: Matcher(tok, Grammar.regex("[a-z]+")).fill_draft_masks([5] * 100_000), "longer than 4,096"),
        (lambda tok: Matcher(tok, Grammar.regex("[a-z]+")).heal_position(10**9), "data must be bytes, not int"),
        (lambda tok: Matcher(tok, Grammar.regex("[a-z]+")).validate_text("abc"), "encode the text first"),
        (lambda tok: Matcher(tok, Grammar.regex("[a-z]+")).extension_allowed(b"a", "b"), "suffix must be bytes"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(call, words):
    with pytest.raises(ArgumentError, match=re.escape(words)):
        call(Tokenizer.default())
