"""Fast-forward tokens with canonical healing, `tokenize_partial`, and the generation helper."""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import load_shared_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, Matcher
from tokensieve._decoding.fastforward import compute_ff_tokens, tokenize_partial
from tokensieve._core.handles import token_has_extension
from tokensieve._decoding.generate import Sampling, _sample, _sample_lists, generate


@pytest.fixture(scope="module")
def llama3():
    return load_shared_tokenizer("llama3")


def _pieces(tokenizer, ids):
    return [tokenizer.token_bytes(t) for t in ids]


# --- tokenize_partial: the seed's examples ----------------------------------------------------


def test_tokenize_partial_keeps_order_back_because_orderId_is_one_token(llama3):
    tokens, leftover = llama3.tokenize_partial(b"order")
    assert tokens == []
    assert leftover == b"order"


def test_tokenize_partial_leaves_the_quote_of_a_key_after_brace_quote(llama3):
    recent = llama3.encode(b'{"')
    tokens, leftover = llama3.tokenize_partial(b'name_of_the_person"', recent)
    assert _pieces(llama3, tokens) == [b"name", b"_of", b"_the", b"_person"]
    assert leftover == b'"'
    assert llama3.decode(tokens) == b"name_of_the_person"


def test_tokenize_partial_empty_input_and_no_lookback(llama3):
    assert tokenize_partial(llama3, b"") == ([], b"")
    tokens, leftover = tokenize_partial(llama3, b"order", lookback=0)
    assert _pieces(llama3, tokens) == [b"order"] and leftover == b""


_ALPHABET = 'abcdeghilmnorstuyIN_0123456789 {}[]":,.-\n'
_TEXT = st.text(alphabet=_ALPHABET, max_size=24)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=_TEXT, text=_TEXT)
def test_tokenize_partial_tokens_and_leftover_give_back_the_input(llama3, head, text):
    recent = llama3.encode(head)
    data = text.encode()
    tokens, leftover = tokenize_partial(llama3, data, recent)
    assert llama3.decode(tokens) + leftover == data
    # The leftover ends with a suffix that some longer token could extend.
    if leftover:
        assert any(token_has_extension(llama3, leftover[i:]) for i in range(len(leftover)))
    # The tokens are a prefix of the tokens of the input itself.
    full = llama3.encode(head + text)
    if full[: len(recent)] == recent:
        assert full[len(recent) : len(recent) + len(tokens)] == tokens


def _prefix_violations(tokenizer, make_text, rng, trials):
    """How often tokenize_partial's tokens are not a prefix of the tokens of an extension."""
    checked = violations = 0
    examples = []
    for _ in range(trials):
        head, text = make_text(rng), make_text(rng)
        recent = tokenizer.encode(head)
        tokens, _ = tokenize_partial(tokenizer, text.encode(), recent)
        for _ in range(3):
            continuation = make_text(rng)
            full = tokenizer.encode(head + text + continuation)
            if full[: len(recent)] != recent:
                continue  # the head itself re-tokenizes: no fixed boundary to compare at
            checked += 1
            if full[len(recent) : len(recent) + len(tokens)] != tokens:
                violations += 1
                examples.append((head, text, continuation))
    return checked, violations, examples


def test_tokenize_partial_is_a_prefix_of_json_extensions(llama3):
    words = ["name", "order", "orderId", "person", "_of", "age", "city", "id", "a", "x1", "true", "null", "12", "3.5", ""]

    def json_text(rng):
        parts = []
        for _ in range(rng.randint(1, 4)):
            parts.append(rng.choice(['{"', ',"', '":', '":"', '"', "[", "]", "}", ":", ",", " "]))
            parts.append(rng.choice(words))
        cut = rng.randint(0, len("".join(parts)))
        return "".join(parts)[:cut]

    checked, violations, examples = _prefix_violations(llama3, json_text, random.Random(5), 1500)
    assert checked > 2000
    assert violations == 0, examples[:5]


def test_tokenize_partial_is_almost_always_a_prefix_of_random_extensions(llama3):
    # BPE is not local: `:NI` keeps `:` (no token extends `:NI`), but `:NIl` is `:N` `Il`.
    # Healing by look-back accepts this; on random text it happens in about 1% of cases.
    tokens, leftover = tokenize_partial(llama3, b":NI")
    assert _pieces(llama3, tokens) == [b":"] and leftover == b"NI"
    assert _pieces(llama3, llama3.encode(":NIl")) == [b":N", b"Il"]

    def random_text(rng):
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 24)))

    checked, violations, _ = _prefix_violations(llama3, random_text, random.Random(1), 1000)
    assert checked > 1500
    assert violations / checked < 0.02


# --- compute_ff_tokens on grammars ------------------------------------------------------------


def test_ff_tokens_heal_a_key_prefix_shared_by_two_keys(llama3):
    g = Grammar.regex(r'\{"(orderId|orderName)":[0-9]+\}')
    m = Matcher(llama3, g)
    assert m.compute_ff_bytes() == b'{"order'
    assert _pieces(llama3, m.compute_ff_tokens()) == [b'{"']
    assert _pieces(llama3, m.compute_ff_tokens(lookback=0)) == [b'{"', b"order"]
    assert m.token_count == 0  # no state change


def test_ff_tokens_stop_before_a_quote_that_merges_with_the_value(llama3):
    g = Grammar.lark(r'''
start: "{\"name_of_the_person\":" STRING "}"
STRING: /"[a-z ]*"/
''')
    m = Matcher(llama3, g)
    ff = m.compute_ff_tokens()
    assert _pieces(llama3, ff) == [b'{"', b"name", b"_of", b"_the", b"_person"]
    # Without healing the forced `":"` is one token; an empty value is written `":""` by the
    # tokenizer, so forcing `":"` would be non-canonical for it.
    unhealed = m.compute_ff_tokens(lookback=0)
    assert llama3.decode(unhealed) == b'{"name_of_the_person":"'
    for value in (b'""', b'"bob"'):
        canonical = llama3.encode(b'{"name_of_the_person":' + value + b"}")
        assert canonical[: len(ff)] == ff
    assert llama3.encode(b'{"name_of_the_person":""}')[: len(unhealed)] != unhealed


def test_ff_tokens_keep_everything_when_nothing_can_extend(llama3):
    g = Grammar.lark(r'''
start: "{\"age\":" NUMBER "}"
NUMBER: /[0-9]+/
''')
    m = Matcher(llama3, g)
    ff = m.compute_ff_tokens()
    assert llama3.decode(ff) == b'{"age":'
    assert llama3.encode(b'{"age":42}')[: len(ff)] == ff


def test_consume_ff_tokens_appends_them_and_follows_the_grammar(llama3):
    g = Grammar.lark(r'''
start: "{\"name\":" STRING ",\"city\":" STRING "}"
STRING: /"[a-z]+"/
''')
    m = Matcher(llama3, g)
    first = m.consume_ff_tokens()
    assert llama3.decode(first) == b'{"name'
    assert m.token_count == len(first)
    # The model writes `":"bob",` (canonical tokens of the rest, up to the next forced part).
    rest = llama3.encode(b'{"name":"bob","city":"rome"}')
    assert rest[: len(first)] == first
    position = len(first)
    while llama3.decode(rest[:position]) != b'{"name":"bob","':
        assert m.consume_token(rest[position])
        position += 1
    second = m.compute_ff_tokens(context_tokens=rest[:position])
    assert llama3.decode(second) == b"city"
    assert rest[position : position + len(second)] == second
    assert m.consume_ff_tokens(context_tokens=rest[:position]) == second


def test_ff_tokens_empty_when_there_is_a_choice(llama3):
    m = Matcher(llama3, Grammar.regex(r"[ab]c"))
    assert m.compute_ff_tokens() == []
    assert m.consume_ff_tokens() == []
    assert m.token_count == 0


def test_ff_tokens_use_the_last_token_as_context(llama3):
    # After the token " " a forced "hello" would merge into " hello": with the space as
    # context the encoding does not start with it, so "hello" is encoded alone.
    g = Grammar.regex(r" hello=[0-9]")
    m = Matcher(llama3, g)
    space = llama3.encode(" ")
    assert m.consume_tokens(space)
    ff = m.compute_ff_tokens(lookback=0, context_tokens=space)
    assert llama3.decode(ff) == b"hello="


def test_forced_special_tokens_come_out_as_ids(llama3):
    g = Grammar.lark(
        r'start: <|start_header_id|> "assistant" <|end_header_id|> ":" /[a-z]+/',
        tokenizer=llama3,
    )
    m = Matcher(llama3, g)
    ff = m.compute_ff_tokens()
    start_header = llama3.encode("<|start_header_id|>")  # plain text: not the id
    assert len(start_header) > 1
    special_ids = [t for t in ff if llama3.is_special(t)]
    assert len(special_ids) == 2
    assert ff[0] == special_ids[0]
    assert llama3.token_bytes(special_ids[0]) == b"<|start_header_id|>"
    assert llama3.token_bytes(special_ids[1]) == b"<|end_header_id|>"
    assert m.token_count == 0
    assert m.consume_ff_tokens() == ff
    assert m.token_count == len(ff)


def test_lookback_must_not_be_negative(llama3):
    m = Matcher(llama3, Grammar.regex("abc"))
    with pytest.raises(ValueError, match="lookback"):
        compute_ff_tokens(m, lookback=-1)


@pytest.mark.parametrize("lookback", [2, 4])
def test_ff_tokens_are_canonical_along_json_instances(llama3, lookback):
    g = Grammar.lark(r'''
start: "{\"orderId\":" STRING ",\"orderName\":" STRING ",\"total_amount\":" NUMBER ",\"items\":[" STRING ("," STRING)* "]}"
STRING: /"[a-zA-Z0-9 ]*"/
NUMBER: /[0-9]+/
''')
    rng = random.Random(7)
    for _ in range(10):
        words = ["".join(rng.choice("abcxyz 019") for _ in range(rng.randint(0, 6))) for _ in range(4)]
        text = json.dumps(
            {"orderId": words[0], "orderName": words[1], "total_amount": rng.randint(0, 999), "items": words[2:]},
            separators=(",", ":"),
        )
        tokens = llama3.encode(text)
        m = Matcher(llama3, g)
        index = 0
        while index < len(tokens):
            ff = m.compute_ff_tokens(lookback=lookback, context_tokens=tokens[max(0, index - 1) : index])
            if ff:
                assert tokens[index : index + len(ff)] == ff, (text, index)
                assert m.consume_tokens(ff)
                index += len(ff)
            else:
                assert m.consume_token(tokens[index])
                index += 1
        assert m.is_accepting()


# --- the generation helper --------------------------------------------------------------------


class ScriptedModel:
    """A tiny deterministic model: it wants to write `target` and favours longer tokens."""

    def __init__(self, tokenizer, prompt_length, target: bytes):
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.target = target
        self.calls = 0
        self.width = tokenizer.vocab_size

    def __call__(self, sequence):
        self.calls += 1
        written = self.tokenizer.decode(sequence[self.prompt_length :])
        assert self.target.startswith(written)
        rest = self.target[len(written) :]
        logits = [-1000.0] * self.width
        if not rest:
            for eos in self.tokenizer.eos_token_ids:
                logits[eos] = 100.0
            return logits
        for token in self.tokenizer.encode(rest)[:1]:
            logits[token] = 50.0
        return logits


_PERSON_LARK = r'''
start: "{\"name\":" STRING ",\"age\":" NUMBER ",\"city\":" STRING "}"
STRING: /"[a-zA-Z ]*"/
NUMBER: /[0-9]+/
'''


def test_generate_appends_forced_tokens_without_model_calls(llama3):
    target = b'{"name":"Ada Lovelace","age":36,"city":"London"}'
    prompt = llama3.encode("Describe a person as JSON: ")
    g = Grammar.lark(_PERSON_LARK)
    model = ScriptedModel(llama3, len(prompt), target)
    result = generate(model, llama3, g, prompt, max_new_tokens=64)
    assert result.text.encode() == target
    stats = result.stats
    assert stats["stop_reason"] == "eos"
    assert stats["model_calls"] == model.calls
    assert stats["model_calls"] + stats["forced_tokens"] == len(result.tokens)
    assert stats["forced_tokens"] >= 4 and stats["model_calls_saved"] == stats["forced_tokens"]
    # The forced tokens are the canonical ones: the whole output is the canonical tokenization.
    assert result.tokens[:-1] == llama3.encode(target)
    assert result.tokens[-1] in llama3.eos_token_ids

    plain_model = ScriptedModel(llama3, len(prompt), target)
    plain = generate(plain_model, llama3, g, prompt, max_new_tokens=64, fast_forward=False)
    assert plain.text == result.text
    assert plain.stats["model_calls"] == len(plain.tokens) > stats["model_calls"]
    assert plain.stats["forced_tokens"] == 0


def test_generate_respects_max_new_tokens(llama3):
    g = Grammar.lark(_PERSON_LARK)
    model = ScriptedModel(llama3, 0, b'{"name":"Ada","age":36,"city":"London"}')
    result = generate(model, llama3, g, [], max_new_tokens=3)
    assert len(result.tokens) == 3
    assert result.stats["stop_reason"] == "max_new_tokens"


@pytest.mark.parametrize("sampling", [Sampling(temperature=0.8, seed=1), Sampling(temperature=1.5, top_p=0.9, seed=2)])
def test_generate_with_sampling_always_follows_the_grammar(llama3, sampling):
    pattern = r"(yes|no|maybe), because [a-z]{3,12}\."
    g = Grammar.regex(pattern)
    rng = random.Random(sampling.seed)
    noise = [rng.uniform(-3, 3) for _ in range(llama3.vocab_size)]

    def model(sequence):
        return noise

    result = generate(model, llama3, g, [], max_new_tokens=40, sampling=sampling)
    assert re.fullmatch(pattern, result.text), result.text
    assert result.stats["stop_reason"] == "eos"
    assert result.stats["forced_tokens"] >= 1  # ", because" is forced after the first word
    again = generate(model, llama3, g, [], max_new_tokens=40, sampling=sampling)
    assert again.tokens == result.tokens  # seeded: deterministic


def test_sampling_with_and_without_numpy_agree(llama3):
    m = Matcher(llama3, Grammar.regex(r"(cat|dog|bird)s?"))
    mask = m.compute_bitmask()
    rng = random.Random(3)
    logits = [rng.uniform(-5, 5) for _ in range(llama3.vocab_size)]
    greedy = Sampling()
    a = _sample(logits, mask, llama3.vocab_size, greedy, random.Random(0).random())
    b = _sample_lists(logits, list(mask), llama3.vocab_size, greedy, random.Random(0).random())
    assert a == b and m.validate_tokens([a]) == 1
    hot = Sampling(temperature=1.0, top_p=0.95)
    for seed in range(5):
        a = _sample(logits, mask, llama3.vocab_size, hot, random.Random(seed).random())
        b = _sample_lists(logits, list(mask), llama3.vocab_size, hot, random.Random(seed).random())
        assert a == b and m.validate_tokens([a]) == 1


def test_sampling_options_are_checked():
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        Sampling(top_p=0)


def test_a_long_forced_run_comes_in_bounded_chunks():
    """A 5,000-character `const` in a JSON grammar of many byte classes: every forced-bytes
    call returns a chunk (never a limit: probing every class of every byte is charged, and a
    call stops while fuel remains), and the chunks add up to the JSON text (json.dumps)."""
    import string

    tok = load_shared_tokenizer("llama3")
    rng = random.Random(0)
    value = "".join(rng.choice(string.ascii_letters + string.digits + " ,.;:!?-_/()[]{}") for _ in range(5000))
    schema = {"type": "object", "properties": {"a": {"const": value}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    matcher = Matcher(tok, Grammar.json_schema(schema, whitespace="compact"))
    assert matcher.consume_tokens(tok.encode("{"))
    forced, calls = b"", 0
    while chunk := matcher.compute_ff_bytes():
        assert len(chunk) <= 1024
        forced += chunk
        calls += 1
        assert matcher.consume_tokens(tok.encode(chunk.decode()))
    assert forced.decode() == '"a":' + json.dumps(value) + ',"b":'
    assert calls >= 5
