"""The boundary and the error paths: bad input gets a clear error and leaves things usable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import tokensieve
from tokensieve import CoreTrap, Grammar, GrammarError, LimitError, Limits, Matcher, Tokenizer, TokensieveError
from tokensieve._core.binding import _EXPORTS

REPO = Path(__file__).resolve().parent.parent


def allowed_ids(m: Matcher, vocab_size: int) -> set[int]:
    bits = np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


def test_abi_md_lists_every_export_in_abi_zig_order():
    source = (REPO / "core" / "src" / "abi.zig").read_text()
    in_source = re.findall(r"^export fn (ts_\w+)\(", source, re.M)
    doc = (REPO / "wasm" / "ABI.md").read_text()
    in_doc = []
    for line in doc.splitlines():
        if line.startswith("| `ts_"):
            in_doc += re.findall(r"`(ts_\w+)\(", line.split("|")[1])
    assert in_doc == in_source
    module_exports = {
        e.name for e in __import__("wasmtime").Module.from_file(
            __import__("wasmtime").Engine(), str(REPO / "pybind" / "tokensieve" / "_wasm" / "tokensieve.wasm")
        ).exports
    }
    assert set(in_source) == module_exports - {"memory", "__stack_pointer"}
    assert set(_EXPORTS) == set(in_source)
    assert set(tokensieve.__all__) >= {"Grammar", "Matcher", "Tokenizer", "GrammarError"}


@pytest.mark.parametrize(
    ("pattern", "position", "message"),
    [
        ("ab(c", 2, "unclosed group"),
        ("a)", 1, "unmatched"),
        ("x(?=y)", 1, "lookahead"),
        ("日本(", 2, "unclosed group"),  # character offsets, not bytes
        ("[z-a]", 1, "out of order"),
        ("a{5,2}", 1, "n < m"),
        ("\\p{L}+", 0, "Unicode property"),
        ("a\\1", 1, "backreference"),
        ("a{1,100000}", 1, "above 10000"),
        ("(" * 300 + ")" * 300, 99, "nested too deeply"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None,
)
def test_bad_patterns_name_the_place(pattern, position, message, wasm_variant):
    with pytest.raises(GrammarError, match=message) as info:
        Grammar.regex(pattern)
    assert info.value.position == position
    assert info.value.line == 1 and info.value.column == position + 1


def test_bad_token_ids_raise_and_leave_the_matcher_usable(wasm_variant):
    tok = Tokenizer.default()
    m = Matcher(tok, Grammar.regex("[0-9]+"))
    for bad in (tok.vocab_size, 2**31, -1):
        with pytest.raises(TokensieveError, match="not in|not a valid"):
            m.consume_token(bad)
    with pytest.raises(TokensieveError, match="not in 0..|vocabulary size"):
        m.validate_tokens([5, tok.vocab_size + 7])
    with pytest.raises(TypeError):
        m.consume_token("7")  # type: ignore[arg-type]
    assert m.consume_token(tok.encode("42")[0])
    assert m.token_count == 1


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        # Each raised an AttributeError, a TypeError or a MemoryError before, or (a str
        # choice, a million instances) was taken without a word.
        (lambda: Grammar.choice("yes"), tokensieve.ArgumentError, "takes a list of strings, not str"),
        (lambda: Grammar.choice(None), tokensieve.ArgumentError, "not NoneType"),
        (lambda: Grammar.regex("a", limits=5), tokensieve.ArgumentError, "limits must be a tokensieve.Limits"),
        (lambda: Grammar.json_schema({}, key_separator=5), tokensieve.ArgumentError, "key_separator must be a str"),
        (lambda: Matcher(Tokenizer.default(), Grammar.regex("a"), vocab_size=10**12), tokensieve.TokenizerError, "the most ids"),
        (lambda: tokensieve.CoreOptions(instances=10**6), tokensieve.ArgumentError, "from 1 to 256"),
        (lambda: tokensieve.CoreOptions(instances=True), tokensieve.ArgumentError, "from 1 to 256"),
    ],
)
def test_bad_arguments_get_a_clear_error(call, error, words):
    with pytest.raises(error, match=re.escape(words)):
        call()
    assert Grammar.choice(["yes"]) is not None  # (and a good call after it works)


def test_special_and_padding_ids_are_never_allowed(shared_dir, wasm_variant):
    tok = Tokenizer.from_file(shared_dir / "tokenizers" / "llama3" / "tokenizer.json.gz")
    m = Matcher(tok, Grammar.regex(r"<\|eot_id\|>|x*"), vocab_size=tok.vocab_size + 64)
    assert m.vocab_size == tok.vocab_size + 64
    allowed = allowed_ids(m, m.vocab_size)
    eot = 128009
    assert tok.is_special(eot) and eot not in tok.eos_token_ids
    assert eot not in allowed
    assert not any(t >= tok.vocab_size for t in allowed)
    assert set(tok.eos_token_ids) <= allowed  # x* may be empty
    assert tok.encode("<|eot_id|>")[0] in allowed  # the same text as plain tokens
    assert not m.consume_token(eot)
    assert not m.consume_token(tok.vocab_size + 3)  # padding: refused, not an error
    assert m.mask_words == (tok.vocab_size + 64 + 31) // 32


def test_eos_only_when_the_grammar_can_end(wasm_variant):
    tok = Tokenizer.default()
    eos = tok.eos_token_ids[0]
    m = Matcher(tok, Grammar.regex("ab?"))
    assert eos not in allowed_ids(m, tok.vocab_size)
    assert not m.consume_token(eos)
    assert m.consume_token(tok.encode("a")[0])
    assert eos in allowed_ids(m, tok.vocab_size)
    assert m.consume_token(eos)
    assert m.is_stopped() and m.is_accepting()
    assert allowed_ids(m, tok.vocab_size) == {eos}
    assert not m.consume_token(tok.encode("b")[0])


def test_limits_end_in_a_clear_error_not_a_hang(wasm_variant):
    tok = Tokenizer.default()
    # Needs 2**12 DFA states to track the last 12 letters; allow only 50.
    grammar = Grammar.regex("(a|b)*a(a|b){12}", limits=Limits(dfa_state_count_max=50))
    m = Matcher(tok, grammar)
    text = tok.encode("ab" * 5 + "ba" * 5 + "aabb" * 10)
    with pytest.raises(LimitError, match=r"Limits\.dfa_state_count_max") as info:
        for t in text:
            m.consume_token(t)
            m.compute_bitmask()
    assert info.value.limit == "lexer_states"
    assert m.is_stopped()
    with pytest.raises(LimitError):
        m.compute_bitmask()
    m.reset()
    assert m.consume_token(tok.encode("a")[0])
    with pytest.raises(ValueError):
        Limits(step_fuel_max=0)


def test_a_limit_while_creating_a_matcher_leaves_the_core_sound(wasm_variant):
    # A matcher whose first row hits a lexer limit once freed memory twice, and every grammar
    # compiled after it in the process misbehaved (MaskBench's last splits failed in long runs).
    from oracle import RegexOracle

    tok = Tokenizer.default()
    for _ in range(3):
        # The first row proves the string lexeme alive (a witness walk of 10,000 characters):
        # between 150,000 and 250,000 fuel units (2.6 million when the search decided), about
        # four times what this grammar allows.
        heavy = Grammar.json_schema(
            {"type": "string", "pattern": "^([a-z][0-9])+$", "minLength": 10000},
            limits=Limits(compile_fuel_max=50_000),
        )
        with pytest.raises(LimitError, match="creating a matcher") as info:
            Matcher(tok, heavy)
        assert info.value.limit == "compile_fuel"
    pattern = r'\{"id": [0-9]{1,4}, "tag": "[a-z]+"\}'
    oracle = RegexOracle(pattern)
    texts = [tok.token_bytes(t) for t in range(tok.vocab_size)]
    m = Matcher(tok, Grammar.regex(pattern))
    consumed = b""
    for token in tok.encode('{"id": 12, "tag": "ab"}'):
        want = {t for t, b in enumerate(texts) if b and not tok.is_special(t) and oracle.completable(consumed + b)}
        assert allowed_ids(m, tok.vocab_size) - set(tok.eos_token_ids) == want
        assert m.consume_token(token)
        consumed += texts[token]
    assert m.is_accepting()


def test_a_trap_poisons_only_its_core_and_bystanders_move_on(wasm_variant):
    tok = Tokenizer.default()
    grammar = Grammar.regex("[a-z]+")
    m = Matcher(tok, grammar)
    assert m.consume_token(tok.encode("hello")[0])
    core = m._core
    with pytest.raises(CoreTrap):
        core.debug_trap()
    assert core.poisoned
    # The bystander moves to a healthy instance, replays "hello", and answers as before.
    assert m.consume_token(tok.encode(" world")[0]) is False
    assert m._core is not core and not m._core.poisoned
    assert len(allowed_ids(m, tok.vocab_size)) > 1000
    fresh = Matcher(tok, grammar)
    assert fresh._core is not core
    assert fresh.consume_token(tok.encode("hello")[0])


def test_freed_handles_are_refused_not_trapped(wasm_variant):
    tok = Tokenizer.default()
    m = Matcher(tok, Grammar.regex("x"))
    core, handle = m._core, m._handle
    core.matcher_free(handle)
    with pytest.raises(TokensieveError, match="invalid or freed matcher handle"):
        core.matcher_is_accepting(handle)
    with pytest.raises(TokensieveError, match="invalid or freed"):
        core.matcher_free(12345)
    m._finalizer.detach()  # keep the finalizer from freeing twice; it would only get a status


def test_a_grammar_keeps_its_binary_ir_not_the_ir_objects(wasm_variant):
    """`Grammar` keeps the bytes every instance compiles, not the `GrammarIR` it was made from
    (tens of thousands of objects for a large schema); a second instance compiles those
    bytes into the same grammar, and a bad pattern is still named by its lexeme."""
    import gc
    import weakref

    from tokensieve._core.pool import CoreOptions, CorePool
    from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym, encode_ir
    from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}}, "required": ["a"]}
    ir = json_schema_to_ir(schema)
    expected = encode_ir(ir)
    made_from = weakref.ref(ir)
    grammar = Grammar.from_ir(ir, kind="json_schema")
    del ir
    gc.collect()
    assert made_from() is None
    assert grammar.encoded_ir == expected
    # Two instances: each matcher's instance compiles the grammar from its bytes.
    tok = Tokenizer.default()
    pool = CorePool(CoreOptions(instances=2))
    matchers = [Matcher(tok, grammar, pool=pool) for _ in range(2)]
    assert len({id(m._core) for m in matchers}) == 2
    for m in matchers:
        assert m.consume_tokens(tok.encode('{"a":12,"b":"yz"}')) and m.is_accepting()
    with pytest.raises(GrammarError, match="bad pattern in named"):
        bad = GrammarIR()
        start = bad.add_nonterminal("start")
        bad.add_rule(start, [Sym.t(bad.add_lexeme(Lexeme("named", "regex", "a(b")))])
        Grammar.from_ir(bad)


def test_queued_frees_go_in_one_batch_that_skips_stale_handles(wasm_variant):
    """Finalizers queue handles; the next call frees them with one `ts_handles_free`, which
    frees exactly the live ones: afterwards the core refuses each handle, and the memory the
    objects took is allocated no more (the module's own count, before they were made)."""
    from tokensieve._core.pool import CoreOptions, CorePool

    pool = CorePool(CoreOptions(instances=1))
    core = pool.first()
    tok = Tokenizer.default()
    tokenizer = tok.core_handle(core)
    # What stays allocated on purpose: the pattern cache (off here) and the scratch buffer
    # (grown here, by a compile of the largest IR below).
    core.debug_pattern_cache(False)
    core.grammar_free(core.grammar_new(Grammar.regex("[a-z]+").encoded_ir, Limits().core_values()))
    before = core.live_kib()
    grammars = [core.grammar_new(Grammar.regex(p).encoded_ir, Limits().core_values()) for p in ("[a-z]+", "x|y")]
    matchers = [core.matcher_new(tokenizer, g) for g in grammars for _ in range(2)]
    assert core.live_kib() > before
    for handle in matchers:
        core.free_later("matcher", handle)
    core.free_later("matcher", 987654)  # stale: skipped
    for handle in grammars:
        core.free_later("grammar", handle)
    calls = []
    batch = core._f["ts_handles_free"]
    core._f["ts_handles_free"] = lambda ptr, count: calls.append(count) or batch(ptr, count)
    assert core.live_kib() == before  # live_kib drains the queue first
    assert calls == [len(matchers) + 1 + len(grammars)]
    for handle in matchers:
        with pytest.raises(TokensieveError, match="invalid or freed matcher handle"):
            core.matcher_is_accepting(handle)
    for handle in grammars:
        with pytest.raises(TokensieveError, match="invalid or freed grammar handle"):
            core.grammar_free(handle)
    # Straight through the export: unknown kinds and stale handles count for nothing.
    g = core.grammar_new(Grammar.regex("z").encoded_ir, Limits().core_values())
    assert batch(core._put_ids([7, g, 1, 987654, 1, g, 1, g]), 4) == 1
    assert core.live_kib() == before


def test_the_step_path_copies_each_matchers_own_mask(wasm_variant):
    """The step path copies a mask from the matcher's own buffer in the core (out_ptr 0,
    `ts_matcher_mask_ptr`) into the caller's row. Two matchers of one instance, filled in turn
    into rows of one array and into a row they do not own, must each get their own mask (the
    regex oracle: tokens made only of digits, or only of lowercase letters); a refused token
    leaves the row as it was; a freed matcher's buffer is forgotten."""
    from tokensieve._core import CoreOptions, CorePool

    tok = Tokenizer.default()
    pool = CorePool(CoreOptions(instances=1))
    digits, letters = Matcher(tok, Grammar.regex("[0-9]+"), pool=pool), Matcher(tok, Grammar.regex("[a-z]+"), pool=pool)
    assert digits._core is letters._core
    core = digits._core

    def oracle(accept: Callable[[int], bool], eos: bool) -> set[int]:
        ids = {t for t in range(tok.n_tokens) if not tok.is_special(t) and tok.token_bytes(t) and all(map(accept, tok.token_bytes(t)))}
        return ids | set(tok.eos_token_ids) if eos else ids

    def row_ids(row: np.ndarray) -> set[int]:
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: tok.vocab_size]
        return set(np.flatnonzero(bits).tolist())

    is_digit, is_lower = (lambda b: 48 <= b <= 57), (lambda b: 97 <= b <= 122)
    masks = np.zeros((2, digits.mask_words), dtype=np.int32)
    for _ in range(3):
        digits.fill_bitmask(masks, 0)
        letters.fill_bitmask(masks, 1)
        assert row_ids(masks[0]) == oracle(is_digit, eos=False)
        assert row_ids(masks[1]) == oracle(is_lower, eos=False)
    letters.fill_bitmask(masks, 0)  # another matcher into the same row
    assert row_ids(masks[0]) == oracle(is_lower, eos=False)
    assert digits.consume_and_fill_bitmask(tok.encode("7")[0], masks, 1)
    assert row_ids(masks[1]) == oracle(is_digit, eos=True)
    before = masks.copy()
    assert not digits.consume_and_fill_bitmask(tok.encode("x")[0], masks, 1)
    assert np.array_equal(masks, before)
    handle = letters._handle
    assert handle in core._mask_sources
    del letters
    import gc

    gc.collect()
    core.live_kib()  # drains the queued frees
    assert handle not in core._mask_sources
    assert row_ids(digits.compute_bitmask()) == oracle(is_digit, eos=True)


@pytest.mark.parametrize("corrupt", ["rule_length", "pattern_length", "truncated"])
def test_malformed_ir_is_an_error_not_a_trap(corrupt, wasm_variant):
    """The IR reader checks every length against what is left before reading: a length near
    2^32 once wrapped the reader's position in wasm32 and read past linear memory (a trap that
    retired the instance). Each corruption is a TokensieveError and the instance stays healthy."""
    import struct

    from tokensieve._core import default_pool
    from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym, encode_ir

    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme("word", "regex", "[a-z]+")))])
    words = bytearray(encode_ir(ir))
    header = 6 * 4
    if corrupt == "rule_length":  # the last rule: lhs, length, symbols
        struct.pack_into("<I", words, len(words) - 2 * 4, 0xFFFFFFFF)
    elif corrupt == "pattern_length":  # the first lexeme: kind, flags, byte length, text
        struct.pack_into("<I", words, header + 2 * 4, 0xFFFFFFFC)
    else:
        del words[len(words) - 4:]
    core = default_pool().first()
    with pytest.raises(TokensieveError) as caught:
        core.grammar_new(bytes(words), Limits().core_values())
    assert not isinstance(caught.value, CoreTrap) and not core.poisoned
    assert "IR" in str(caught.value)
    assert Matcher(Tokenizer.default(), Grammar.regex("[a-z]+")).consume_token(Tokenizer.default().encode("abc")[0])


def test_eos_variants_share_the_trie_and_mask_like_a_tokenizer_built_alone(monkeypatch):
    """A tokenizer with other EOS ids (`with_eos_token_ids`: vLLM's and SGLang's stop tokens)
    shares its base's trie in each instance (`ts_tokenizer_with_eos`, counted at the binding)
    instead of building one (~10 MB and 0.1 s each on a 128k vocabulary), and its masks equal
    those of a tokenizer of the same tables and EOS ids built alone, step by step, a text
    token among the stop ids."""
    from tokensieve._core.binding import Core
    from tokensieve._core.pool import CoreOptions, CorePool

    calls: list[str] = []
    for name in ("tokenizer_new", "tokenizer_with_eos"):
        original = getattr(Core, name)
        monkeypatch.setattr(Core, name, lambda self, *a, _f=original, _n=name: calls.append(_n) or _f(self, *a))
    pool = CorePool(CoreOptions(instances=1))
    base = Tokenizer.default().with_vocab_size(Tokenizer.default().vocab_size + 5)  # built by no other test
    newline = base.encode("\n")[0]
    eos = tuple(sorted({newline, *base.eos_token_ids}))
    variant = base.with_eos_token_ids(eos)
    alone = Tokenizer(base._token_bytes, base._kinds, vocab_size=base.vocab_size, eos_token_ids=eos, source=None)
    base.prepare(pool)
    (core,) = pool.cores()
    live_kib = core.live_kib()
    grammar = Grammar.json_schema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    shared, built = Matcher(variant, grammar, pool=pool), Matcher(alone, grammar, pool=pool)
    assert calls == ["tokenizer_new", "tokenizer_with_eos", "tokenizer_new"]
    for text in ['{"n"', ":", "12", "}"]:
        assert allowed_ids(shared, variant.vocab_size) == allowed_ids(built, alone.vocab_size)
        for token in variant.encode(text):
            assert shared.consume_token(token) and built.consume_token(token)
    assert allowed_ids(shared, variant.vocab_size) == set(eos)
    del shared
    # The variant's part of the instance is its EOS ids; the one built alone holds a trie.
    assert Matcher(variant, grammar, pool=pool) and len(calls) == 3
    assert core.live_kib() - live_kib > 1024 and calls.count("tokenizer_with_eos") == 1


def test_prepare_builds_the_trie_in_every_instance_before_the_first_matcher(monkeypatch):
    """`Tokenizer.prepare(pool)` builds the tokenizer in each of the pool's instances (counted
    at the core call that builds it), so matchers placed on any of them afterwards build
    nothing; the instances it made are the pool's own."""
    from tokensieve._core.binding import Core
    from tokensieve._core.pool import CoreOptions, CorePool

    built: list[int] = []
    original = Core.tokenizer_new

    def counted(self, *args, **kwargs):
        built.append(id(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Core, "tokenizer_new", counted)
    pool = CorePool(CoreOptions(instances=2))
    tok = Tokenizer.default().with_vocab_size(Tokenizer.default().vocab_size + 3)  # a tokenizer no test built
    assert tok.prepare(pool) is tok
    cores = pool.cores()
    assert len(cores) == 2 and sorted(built) == sorted(id(core) for core in cores)
    grammar = Grammar.regex("[ab]+")
    matchers = [Matcher(tok, grammar, pool=pool) for _ in range(4)]
    assert {id(m._core) for m in matchers} == {id(core) for core in cores}  # both instances used
    assert len(built) == 2
    a = tok.encode("a")[0]
    for m in matchers:
        assert a in allowed_ids(m, tok.vocab_size)


def test_plain_lexeme_records_match_the_field_by_field_record():
    """`_lexeme_words` writes a lexeme without flags (no and/not patterns, not lazy, no
    dot_all/ignore_case/max_tokens, not special) from a header made once per kind; its record
    must be the general `_lexeme_record`'s and the ABI's layout (kind, flags 0, byte length,
    UTF-8, zero padding to a word), written out here by hand. The lexemes are those of
    schemas' grammars (which take the short path) and a few of every kind and length mod 4;
    lexemes with a flag take the general path and must still give its record."""
    import struct

    from tokensieve._grammar.ir import Lexeme, _lexeme_record, _lexeme_words
    from tokensieve._grammar.json_schema.compiler import json_schema_to_ir

    def by_hand(kind: int, text: str) -> bytes:
        data = text.encode("utf-8")
        return struct.pack("<3I", kind, 0, len(data)) + data + b"\0" * (-len(data) % 4)

    schema = {"type": "object", "properties": {"naïve": {"type": "integer"}, "b": {"enum": ["x", 1, None]},
                                               "c": {"type": "array", "items": {"type": "boolean"}}}}
    lexemes = list(json_schema_to_ir(schema).lexemes)
    lexemes += [Lexeme(f"l{n}", kind, "é" * n) for kind in ("regex", "literal") for n in range(6)]
    plain = [lexeme for lexeme in lexemes if not (lexeme.and_patterns or lexeme.not_patterns)]
    assert len(plain) >= 15
    for index, lexeme in enumerate(plain):
        fresh = Lexeme(*[getattr(lexeme, f) for f in ("name", "kind", "value")])  # no record kept yet
        expected = by_hand({"regex": 0, "literal": 1}[fresh.kind], fresh.value)
        assert _lexeme_words(fresh, index) == _lexeme_record(fresh, index) == expected
        assert fresh.__dict__["_ir_words"] == expected
    flagged = [Lexeme("a", "regex", "a+", lazy=True), Lexeme("b", "regex", "b", not_patterns=("bb",)),
               Lexeme("c", "regex", "c", ignore_case=True), Lexeme("d", "regex", "d", max_tokens=3),
               Lexeme("e", "special", token_ids=(1, 2))]
    for index, lexeme in enumerate(flagged):
        record = _lexeme_words(lexeme, index)
        assert record == _lexeme_record(lexeme, index)
        assert struct.unpack_from("<I", record, 4)[0] != 0 or lexeme.kind == "special"


def test_literal_lexemes_made_at_once_are_the_constructors_lexemes():
    """`literal_lexeme(text)` (a property name's lexeme, with its hash and IR record made with
    it) must be `Lexeme(text, "literal", text)`: equal, hashing alike, the same record as the
    ABI lays it out (written out by hand), and, like a lexeme the constructor made, nothing the
    collector has to trace in its fields. A text with no UTF-8 form gets no record, and
    encoding it names the lexeme as for any other."""
    import gc
    import struct

    from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym, encode_ir, literal_lexeme

    def by_hand(text: str) -> bytes:
        data = text.encode("utf-8")
        return struct.pack("<3I", 1, 0, len(data)) + data + b"\0" * (-len(data) % 4)

    texts = ['""', '"a"', '"ab"', '"abc"', '"apiVersion"', '"x-kubernetes-list"', "é", "中文", "😀x", "a\0b", ""]
    for text in texts:
        made, expected = literal_lexeme(text), Lexeme(text, "literal", text)
        assert made == expected and hash(made) == hash(expected) and {expected: 1}[made] == 1, text
        assert made.__dict__["_ir_words"] == by_hand(text), text
        assert not gc.is_tracked(made.__dict__), text
        ir = GrammarIR()
        ir.start = ir.add_nonterminal("start")
        ir.add_rule(ir.start, [Sym.t(ir.add_lexeme(made))])
        twin = GrammarIR()
        twin.start = twin.add_nonterminal("start")
        twin.add_rule(twin.start, [Sym.t(twin.add_lexeme(expected))])
        assert encode_ir(ir) == encode_ir(twin), text
    lone = literal_lexeme('"\ud800"')
    assert lone == Lexeme('"\ud800"', "literal", '"\ud800"') and "_ir_words" not in lone.__dict__
    ir = GrammarIR()
    ir.start = ir.add_nonterminal("start")
    ir.add_rule(ir.start, [Sym.t(ir.add_lexeme(literal_lexeme('"a"'))), Sym.t(ir.add_lexeme(lone))])
    with pytest.raises(GrammarError, match="lone surrogate") as err:
        encode_ir(ir)
    assert err.value.lexeme == 1


def test_property_name_regexes_match_their_json_text():
    """A name's not-pattern (`_json_string_regex`, which spells letter-and-digit names
    directly) matches the name's JSON text and nothing near it, read by the core as a regex;
    a plain ASCII name's is that text with a backslash before each character but letters and
    digits, written out here (the key lexemes that exclude it are shared by their patterns'
    text, so a spelling the core reads alike still changes the IR)."""
    import json

    from tokensieve._grammar.json_schema.strings import _json_string_regex

    tok = Tokenizer.from_token_bytes([bytes([i]) for i in range(256)] + [b"<eos>"], eos_token_ids=[256],
                                     special_token_ids=[256])

    def accepts(grammar: Grammar, text: str) -> bool:
        matcher = Matcher(tok, grammar)
        return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()

    for name in ["a", "Z9", "apiVersion", "x1y2", "a-b", "$ref", "a.b", "a b", "é", "q\"r", "back\\slash", "٣"]:
        grammar = Grammar.regex(_json_string_regex(name))
        spelled = json.dumps(name, ensure_ascii=False)
        assert accepts(grammar, spelled), name
        if name.isascii() and '"' not in name and "\\" not in name:
            assert _json_string_regex(name) == "".join(c if c.isalnum() else "\\" + c for c in spelled), name
        for near in (spelled[1:], spelled[:-1], spelled[:-1] + 'x"', '"x' + spelled[1:], spelled.replace("a", "A")):
            if near != spelled:
                assert not accepts(grammar, near), (name, near)


def test_shared_symbols_are_the_symbols_they_stand_for():
    """`Sym.t(i)` / `Sym.n(i)` are `Sym(terminal, i)` for any index (the shared table makes a
    block of them when one is missing): each block's edges, indices past the shared range and
    negative ones; the same instance comes back within the range, and nothing past it is kept."""
    from tokensieve._grammar.ir import _SHARED_INDEX_MAX, _TERMINALS, Sym

    indices = [0, 1, 255, 256, 257, 4095, 4096, 12345, _SHARED_INDEX_MAX - 1, _SHARED_INDEX_MAX, 10**6, -1]
    for make, terminal in ((Sym.t, True), (Sym.n, False)):
        for index in indices:
            sym = make(index)
            assert type(sym) is Sym and tuple(sym) == (terminal, index) and sym == Sym(terminal, index)
            assert sym.terminal is terminal and sym.index == index
            if 0 <= index < _SHARED_INDEX_MAX:
                assert make(index) is sym
    assert all(0 <= index < _SHARED_INDEX_MAX for index in _TERMINALS)
    assert all(type(sym) is Sym and sym == (True, index) for index, sym in _TERMINALS.items())
