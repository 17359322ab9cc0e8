"""Slices (precomputed masks of text tokens, `core/src/slicer.zig`) against the regex oracle.

The slicer answers whole groups of tokens at once from a lexer state's expressions, so a wrong
slice shows up as many tokens of one kind or of one length being wrong. Here every step of each
sample is checked on real tokenizers, against `tests/oracle.py`, on a candidate set chosen to
catch that: all allowed tokens that are sampled (no false positives), up to 40 tokens of every
byte length (the bounded slices end at 8, 16 and 32 bytes), tokens with non-ASCII bytes,
quotes and backslashes, identifier-like tokens, and a random sample (no false negatives).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import numpy as np
import pytest
import regex as regex_module

from full_walk import expect_walked_masks_along, masks_fast_and_walked
from oracle import RegexOracle
from tokensieve import Grammar, Matcher
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym

TOKENIZERS = ("llama3", "gpt2")
JSON_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
ECMA_SPACE = r"[\t-\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
ECMA_S = r'[^\t-\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"]'

# (name, pattern, samples): bounded text crossing the slice bounds, non-ASCII text, and classes
# that leave out some text characters (no slice may apply there).
CASES = [
    ("bounded_40", r'"[^"\\\x00-\x1f]{0,40}"',
     ['"The quick brown fox jumps over the dog."', '"Ünïcödé: café, naïve, 東京, 😀 ok"', '""']),
    ("bounded_min_max", r'[^"]{5,12}"', ['hello world"', 'héllo"']),
    ("json_escaped_20", rf'"{JSON_CHAR}{{0,20}}"', ['"a \\"quoted\\" word"', '"tab\\there é"']),
    ("unbounded_text", r'[^"]*"', ['Grüße aus Köln, 你好世界 and more text here"']),
    ("nullable_bounded", r'[^"]{0,25}', ["short", "exactly twenty-five chars"]),
    ("ascii_only", r'[ -~]{0,30}', ["plain ascii, nothing else"]),
    ("latin1_only", r'[\x20-\xff]{0,30}', ["café au lait"]),
    ("without_cjk", r'[^"\u4e00-\u9fff]*"', ['no han characters here, ok"']),
    ("without_e_acute", r'[^"é]*"', ['cafe without accents"']),
    ("newline_free", r'[^\n]{0,35}\n', ['a "quoted" \\ line\n']),
    # The word family ([0-9A-Za-z_]): identifier-like patterns, and classes that miss a word
    # character (no slice there).
    ("word_pattern", r'"[\-0-9A-Z_a-z]{1,255}"', ['"snake_case-and-kebab-42"', '"x"']),
    ("identifier", r'[A-Za-z_][A-Za-z0-9_]*', ["_private_value9", "CamelCaseName"]),
    ("lowercase_digits", r'[a-z0-9]+', ["lowercase0and9digits"]),
    ("word_bounded", r'\w{0,12}', ["word_12_char"]),
    # Word counts: the lead-space family (text with no space but a leading one) while a word is
    # left, after a space too; the last word refuses a space. ECMA-262's `\s` (the JSON Schema
    # front-end's) also holds U+00A0 and other non-ASCII spaces, which the family leaves out.
    ("word_count", r'(?:[^ "]+ +){0,6}[^ "]+"', ['one two  three four five six seven"', 'a b\u00a0c"']),
    ("word_count_ecma", rf'(?:{ECMA_S}+{ECMA_SPACE}+){{0,4}}{ECMA_S}+"', ['Grüße\u00a0aus Köln, 你好 ok"', 'one two three"']),
]


_GROUPS: dict[int, tuple[dict[int, list[int]], list[int], list[int]]] = {}


def _token_groups(tok) -> tuple[dict[int, list[int]], list[int], list[int]]:
    """Text tokens by byte length, those with non-ASCII bytes, quotes or backslashes, and
    identifier-like ones; computed once per tokenizer."""
    if id(tok) in _GROUPS:
        return _GROUPS[id(tok)]
    by_length: dict[int, list[int]] = defaultdict(list)
    odd: list[int] = []
    words: list[int] = []
    for t in range(tok.vocab_size):
        if tok.is_special(t):
            continue
        data = tok.token_bytes(t)
        by_length[len(data)].append(t)
        if any(b >= 0x80 or b in b'"\\' for b in data):
            odd.append(t)
        elif data.replace(b"_", b"a").isalnum():
            words.append(t)
    _GROUPS[id(tok)] = (by_length, odd, words)
    return _GROUPS[id(tok)]


def _candidates(tok, allowed: set[int], rng: random.Random) -> list[int]:
    by_length, odd, words = _token_groups(tok)
    chosen: set[int] = set()
    for ids in by_length.values():
        chosen.update(rng.sample(ids, min(40, len(ids))))
    chosen.update(rng.sample(odd, min(600, len(odd))))
    chosen.update(rng.sample(words, min(600, len(words))))
    chosen.update(rng.sample(range(tok.vocab_size), 1500))
    chosen.update(rng.sample(sorted(allowed), min(1500, len(allowed))))
    return sorted(chosen)


def _allowed(m: Matcher, vocab_size: int) -> set[int]:
    bits = np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


def _check_step(m: Matcher, tok, completable, prefix: bytes, rng: random.Random, what: str) -> None:
    got = _allowed(m, tok.vocab_size) - set(tok.eos_token_ids)
    wrong = []
    for t in _candidates(tok, got, rng):
        data = tok.token_bytes(t)
        want = bool(data) and not tok.is_special(t) and completable(prefix + data)
        if want != (t in got):
            wrong.append((t, data, "missing" if want else "extra"))
    assert not wrong, f"{what} after {prefix!r}: {wrong[:8]}"


@pytest.mark.parametrize("tokenizer_name", TOKENIZERS)
@pytest.mark.parametrize(("name", "pattern", "samples"), CASES, ids=[c[0] for c in CASES])
def test_slices_follow_the_oracle_at_every_step(name, pattern, samples, tokenizer_name):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer(tokenizer_name)
    oracle = RegexOracle(pattern)
    grammar = Grammar.regex(pattern)
    rng = random.Random(f"{name}:{tokenizer_name}")
    for text in samples:
        m = Matcher(tok, grammar)
        prefix = b""
        for t in tok.encode(text):
            _check_step(m, tok, oracle.completable, prefix, rng, name)
            assert m.consume_token(t), prefix
            prefix += tok.token_bytes(t)
        _check_step(m, tok, oracle.completable, prefix, rng, name)


def _key_grammar(names: list[str]) -> Grammar:
    """A JSON key that is none of `names` (how `additionalProperties` keys are compiled)."""
    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    nots = tuple('"' + n + '"' for n in names)
    key = Lexeme("key", "regex", rf'"{JSON_CHAR}*"', not_patterns=nots)
    ir.add_rule(start, [Sym.t(ir.add_lexeme(key))])
    return Grammar.from_ir(ir)


@pytest.mark.parametrize("tokenizer_name", TOKENIZERS)
def test_keys_other_than_listed_names_follow_the_oracle(tokenizer_name):
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer(tokenizer_name)
    names = ["name", "id", "type"] + [f"property{i}" for i in range(120)]
    listed = {('"' + n + '"').encode() for n in names}
    oracle = RegexOracle(rf'"{JSON_CHAR}*"')

    def completable(data: bytes) -> bool:
        # Every unclosed key has infinitely many completions; a closed one must not be listed.
        return oracle.completable(data) and data not in listed

    grammar = _key_grammar(names)
    rng = random.Random(f"keys:{tokenizer_name}")
    for text in ['"property1x"', '"named"', '"typé ok"', '"ids"']:
        m = Matcher(tok, grammar)
        prefix = b""
        for t in tok.encode(text):
            _check_step(m, tok, completable, prefix, rng, "keys")
            assert m.consume_token(t), prefix
            prefix += tok.token_bytes(t)
        _check_step(m, tok, completable, prefix, rng, "keys")
    m = Matcher(tok, grammar)
    assert m.consume_tokens(tok.encode('"property7')) and not m.consume_tokens(tok.encode('"'))


def _key_regions_grammar(listed: list[str], allowed: list[str], patterns: list[str], cells: list[tuple[int, ...]]) -> Grammar:
    """JSON object keys as the JSON Schema front-end splits them, each followed by `:`: the
    `allowed` names (the others of `listed` already written), one region per cell (the keys
    matching exactly the patterns of the cell, other than the listed names), and "any other
    key": no listed name, no pattern. At a key's start the state holds them all, and only
    together can they allow every text token."""
    ir = GrammarIR()
    start = ir.add_nonterminal("start")
    colon = Sym.t(ir.add_lexeme(Lexeme(":", "literal", ":")))
    names = tuple('"' + n + '"' for n in listed)
    for n in allowed:
        ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme(n, "literal", '"' + n + '"'))), colon])
    keys = [f'"{p}"' for p in patterns]
    for cell in cells:
        ands = [keys[i] for i in cell]
        nots = [keys[i] for i in range(len(keys)) if i not in cell]
        region = Lexeme(f"key:{cell}", "regex", ands[0], and_patterns=tuple(ands[1:]), not_patterns=(*nots, *names))
        ir.add_rule(start, [Sym.t(ir.add_lexeme(region)), colon])
    other = Lexeme("key:other", "regex", rf'"{JSON_CHAR}*"', not_patterns=(*keys, *names))
    ir.add_rule(start, [Sym.t(ir.add_lexeme(other)), colon])
    return Grammar.from_ir(ir)


def _key_so_far(data: bytes) -> str:
    """The key's text so far (from its opening quote), a character begun (a UTF-8 lead byte,
    an escape) written as `é`, so that it counts as one more character."""
    from oracle import split_incomplete

    text, tail = split_incomplete(data) or ("", b"")
    run = regex_module.search(r"(\\+)(u[0-9a-fA-F]{0,3})?$", text)
    begun = run is not None and len(run.group(1)) % 2 == 1  # the last backslash is unpaired
    if begun:
        text = text[: run.end(1) - 1]
    return text + ("é" if tail or begun else "")


_C = JSON_CHAR
# (patterns, cells with a region, a key prefix no completion of which any region takes)
_REGION_LAYOUTS = {
    # One pattern: every key is covered; the text slice applies at the key's start.
    "one_pattern": ([f"x-{_C}*"], [(0,)], None),
    # The region holds x- keys of at most three characters, "any other key" none: x- keys of
    # four or more characters are refused, no slice may apply.
    "one_pattern_bounded": ([f"x-{_C}*", f"x-{_C}{{0,3}}"], [(0, 1)], regex_module.compile(f'"x-{_C}{{4}}')),
    # Two patterns that overlap (a prefix and a search): three cells, all held.
    "two_patterns": ([f"x-{_C}*", f"{_C}*y{_C}*"], [(0,), (1,), (0, 1)], None),
    # The same without the cell of keys under both: x- keys with a `y` are refused.
    "two_patterns_cell_missing": ([f"x-{_C}*", f"{_C}*y{_C}*"], [(0,), (1,)], regex_module.compile(r'"x-[^"]*y')),
    # Two disjoint prefixes: the cell of both is empty, the two others held.
    "two_prefixes": ([f"x-{_C}*", f"x_{_C}*"], [(0,), (1,)], None),
}


@pytest.mark.parametrize("tokenizer_name", TOKENIZERS)
@pytest.mark.parametrize("layout", list(_REGION_LAYOUTS))
def test_key_regions_together_follow_the_oracle(tokenizer_name, layout):
    """Where the regions cover every key the text slice applies at the key's start
    (`exclusionHeld` in core/src/slicer.zig); where they leave keys out it must not."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer(tokenizer_name)
    patterns, cells, doomed = _REGION_LAYOUTS[layout]
    listed = ["name", "x-id", "version"] + [f"property{i}" for i in range(60)]
    written = {"name", "property3", "property40"}
    allowed = [n for n in listed if n not in written]
    key = RegexOracle(rf'"{JSON_CHAR}*":')
    closed_written = {('"' + n + '"').encode() for n in written}

    def completable(data: bytes) -> bool:
        # One key of the union of the regions: any key but the names written already and
        # those no region takes.
        if not key.completable(data) or any(data.startswith(n) for n in closed_written):
            return False
        return doomed is None or not doomed.match(_key_so_far(data))

    grammar = _key_regions_grammar(listed, allowed, patterns, cells)
    rng = random.Random(f"regions:{tokenizer_name}:{layout}")
    for text in ['"x-abc":', '"x-":', '"xyz é":', '"property7":', '"names":', '"x-idle":', '"x_y":', '"x-ay":']:
        m = Matcher(tok, grammar)
        prefix = b""
        for t in tok.encode(text):
            _check_step(m, tok, completable, prefix, rng, "key regions")
            if not m.consume_token(t):
                assert not completable(prefix + tok.token_bytes(t)), prefix
                break
            prefix += tok.token_bytes(t)
        else:
            _check_step(m, tok, completable, prefix, rng, "key regions")


# -- slices inside JSON strings whose length bound is within a token's reach -----------------
#
# Where a JSON string's `maxLength` is within reach (fewer than L + mm(P) characters left, so
# the clamp keeps the intersection `P·v ∩ C{0,m}"`), the slice depth is min(d(P·v), m − mm(P·v))
# (`DepthCache.lengthDepth`). The reference is the same matcher walking the whole trie from the
# same position and the real state (`full_walk.py`).


def _small_tokenizer():
    """Tokens of at most 8 bytes, many of them words with a leading space (the lead-space
    family's), so the slice bound (8 here: the longest token) meets the length boundary within
    a few steps."""
    from tokensieve import Tokenizer

    alphabet = [b"a", b"b", b" ", b"\xc3\xa9", b"\xc2\xa0"]
    tokens = alphabet + [x + y for x in alphabet for y in alphabet]
    tokens += [b" ab", b" abab", b" aaaaaaa", b"bbbbbbbb", b"ab ab", b" \xc3\xa9\xc3\xa9", b"a\xc2\xa0b", b'a"', b'"', b"\\n", b"\\u00e9"]
    tokens = list(dict.fromkeys(tokens)) + [b"<eos>"]
    return Tokenizer.from_token_bytes(tokens, eos_token_ids=[len(tokens) - 1], special_token_ids=[len(tokens) - 1])


@pytest.mark.parametrize("pattern", [r"^(?:\S+\s+){0,30}\S+$", r"^$|(^(?:\S+\s+){0,6}\S+$)", r"^[a-zé ]*$", r"^(?:a|b\s)+$", r"^.*;;;$"])
def test_length_bounded_strings_sliced_masks_match_full_walks(pattern, wasm_variant):
    tok = _small_tokenizer()
    rng = random.Random(pattern)
    steps = 0
    for min_length, max_length in [(0, 6), (1, 9), (0, 12), (1, 17), (2, 14), (5, 30), (0, 25), (1, 40)]:
        grammar = Grammar.json_schema({"type": "string", "pattern": pattern, "minLength": min_length, "maxLength": max_length})
        for _ in range(3):
            m = Matcher(tok, grammar)
            assert m.consume_token(tok.encode('"')[0])
            text = b'"'
            for _ in range(40):
                sliced, walked = masks_fast_and_walked(m, tok.vocab_size)
                diff = np.flatnonzero(sliced != walked).tolist()
                assert not diff, f"maxLength {max_length} after {text!r}: {[(tok.token_bytes(t), int(sliced[t])) for t in diff[:8]]}"
                steps += 1
                allowed = [t for t in np.flatnonzero(sliced).tolist() if t not in tok.eos_token_ids]
                going_on = [t for t in allowed if b'"' not in tok.token_bytes(t)]
                if not going_on:
                    break
                t = rng.choice(going_on)
                assert m.consume_token(t)
                text += tok.token_bytes(t)
    assert steps > 150


def test_llama3_word_counts_near_the_length_bound_sliced_masks_match_full_walks():
    """MaskBench's shape (Github_ultra---o21135, o21142): word counts under `maxLength` 100-300,
    driven to the bound; the lead-space slice serves most of these masks."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    text = "Highly skilled team with over 100 years of combined experience in cloud hosting, support and migration services for the public sector"
    for pattern, max_length in [(r"^(?:\S+\s+){0,9}\S+$", 100), (r"^$|(^(?:\S+\s+){0,19}\S+$)", 130), (r"^(?:\S+\s+){0,29}\S+$", 300)]:
        m = Matcher(tok, Grammar.json_schema({"type": "string", "pattern": pattern, "maxLength": max_length}))
        words = text.split()
        kept = " ".join(words[: int(pattern.split("{0,")[1].split("}")[0]) + 1])[: max_length - 1].rstrip()
        expect_walked_masks_along(m, tok, tok.encode(json.dumps(kept)))


@pytest.mark.parametrize(("schema", "text"), [
    # MaskBench Github_hard---o79409's trace_id: an unanchored pattern (its body ends in `C*`)
    # under `minLength`, every step inside it a new state that walked the whole trie.
    ({"type": "string", "minLength": 35, "pattern": r"\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}"}, "1-60f6f7e7-0123456789abcdef01234567"),
    ({"type": "string", "minLength": 12, "maxLength": 20, "pattern": "^ab"}, "abcdefghijklmnopq"),
    # One branch goes on with any characters, the other does not: no slice.
    ({"type": "string", "minLength": 8, "pattern": "^(?:b.*|bc{1,8})$"}, "bccccccccx"),
    # The body ends with `x`: no slice while characters are required.
    ({"type": "string", "minLength": 10, "pattern": "x$"}, "aaaaaaaaaaaax"),
])
def test_llama3_min_length_beside_open_patterns_sliced_masks_match_full_walks(schema, text):
    """Characters still required (`minLength`) beside a pattern whose every body goes on with
    any characters: the slice's strings keep the state alive, and a completion is padded up to
    the minimum (`DepthCache.endsOpen`)."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    expect_walked_masks_along(Matcher(tok, Grammar.json_schema(schema)), tok, tok.encode(json.dumps(text)))


@pytest.mark.parametrize("tokenizer_name", ["llama3", "gemma", "mistral"])
@pytest.mark.parametrize(("schema", "text", "ascii"), [
    ({"type": "string", "maxLength": 10}, "94043-1234", False),
    # Characters of several bytes count once, and tokens may end inside one (byte-level BPE).
    ({"type": "string", "maxLength": 12}, "東京 tea é€x🙂", False),
    # Escapes and quotes are outside the text family: the walk beside the mask takes them.
    ({"type": "string", "minLength": 7, "maxLength": 9}, 'a"b\u00e9cdef', True),
    ({"type": "string", "maxLength": 31}, "Springfield, near the old bridg", False),
    ({"type": "string", "maxLength": 3}, "ab", False),
    # Beside a pattern side of single characters `X{a,b}"` (X ⊆ C, b ≥ k): the text tokens
    # that side's own walk allows, of at most k characters.
    ({"type": "string", "maxLength": 6, "pattern": "^[a-z]*$"}, "abcde", False),
    ({"type": "string", "pattern": "^[a-z]{0,6}$"}, "abcde", False),
    ({"type": "string", "maxLength": 24, "pattern": "^[^<>]*$"}, "héllo wörld 東京 🙂 ok", False),
    ({"type": "string", "minLength": 5, "maxLength": 20, "pattern": "^.*$"}, "line one, line two", False),
    # MaskBench Snowplow's `version`: `\d*.*"` once `1.0.0` is read, a head inside the loop.
    ({"type": "string", "maxLength": 32, "pattern": r"^(\d+\.\d+\.\d+.*)$"}, "1.0.0-beta+exp.sha.5114f85 abc", False),
    # A loop of two characters is no single character: at 8 of 9, `a` has no room for its `b`.
    ({"type": "string", "maxLength": 9, "pattern": "^(?:ab)*$"}, "abababab", False),
    # An unanchored pattern's body once matched, `C* " | C* [0-9a-fA-F] C* "` (MaskBench
    # Github_easy---o10013's `userId`): a loop holding the other member, these masks. Anchored
    # alternations keep the quote outside (`(?:a*|b*) "`, `(?:[ab]*|abc…) "`, where after `ab` a
    # `c` needs 14 characters of the 10 left): the slices as before.
    ({"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-fA-F]+"}, "012345abcdef", False),
    ({"type": "string", "maxLength": 10, "pattern": "^(?:a*|b*)$"}, "bbbbbbbbb", False),
    ({"type": "string", "maxLength": 12, "pattern": "^(?:[ab]*|abcdefghijklmnop)$"}, "ababab", False),
    # Heads that are not inside the loop, or not nullable: not these masks.
    ({"type": "string", "maxLength": 20, "pattern": r"^\d+\.\d+[a-z]*$"}, "12.34abcdefgh", False),
    ({"type": "string", "maxLength": 16, "pattern": r"^[a-z]*[0-9]{2}[a-z ]*$"}, "ab12cd ef gh", False),
    # Two string lexemes in the state: not these masks either.
    ({"anyOf": [{"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 8, "pattern": "^x"}]}, "xab", False),
    # `"X"` with X a whole body (`$|é*0e9*z` unanchored: any string), not a bound: found by
    # `tokensieve fuzz --kind json --seed 2703` when any lexeme of that shape was taken for one.
    ({"type": "string", "pattern": "$|\u00e9*0e9*z"}, "Github issue", False),
])
def test_strings_near_their_bound_masks_match_full_walks(schema, text, ascii, tokenizer_name):
    """A JSON string with at most 31 characters left and nothing else in the lexer state allows
    exactly the text tokens of at most that many characters (`slicer.ShortTexts`) that its
    pattern side of single characters allows, if it has one, and the tokens outside the text
    family through a walk; every step to the bound against the whole trie's walk."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer(tokenizer_name)
    expect_walked_masks_along(Matcher(tok, Grammar.json_schema(schema)), tok, tok.encode(json.dumps(text, ensure_ascii=ascii)))


def test_length_bound_with_characters_still_required_gives_no_slice(wasm_variant):
    """`minLength` not reached yet: the slice depth of `P·v ∩ C{a,m}"` needs a ≤ 1. Here P's
    short branch `.{0,8}` is alive on every text token of 8 bytes, but only `x{30}` reaches 10
    characters, so `bbbbbbbb` must be refused (the depth rule with a > 0 would slice it in)."""
    tok = _small_tokenizer()
    m = Matcher(tok, Grammar.json_schema({"type": "string", "pattern": "^(?:.{0,8}|x{30})$", "minLength": 10, "maxLength": 40}))
    assert m.consume_token(tok.encode('"')[0])
    sliced, walked = masks_fast_and_walked(m, tok.vocab_size)
    assert (sliced == walked).all()
    assert not sliced[tok.encode("bbbbbbbb")[0]]


# -- tool calls: JSON arguments beside lazy free text --------------------------------------------
#
# A tool-call grammar has lazy lexemes (its free text ends at a trigger), which may end inside a
# token while the lexer stays alive: a state holding one gets no slice and no clamped state. A
# state without one (inside the call's JSON arguments) is walked as in a grammar without lazy
# lexemes. The reference is the same matcher walking the whole trie from the real state
# (`full_walk.py`) at every step, free text included.

_NOTE_TOOLS = [{"type": "function", "function": {"name": "write_note", "parameters": {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 24},
        "body": {"type": "string"},
        "tag": {"type": "string", "pattern": "^[a-z_]{1,12}$"},
        "words": {"type": "string", "pattern": r"^(?:\S+\s+){0,3}\S+$", "maxLength": 40},
    },
    "required": ["title", "body"]}}}]


@pytest.mark.parametrize("tokenizer_name", ["llama3", "gemma"])
@pytest.mark.parametrize("arguments", [
    {"title": "Groceries for the weekend", "body": "Milk, eggs, \"fresh\" bread \\ and 東京 tea <b>bold</b>", "tag": "home_list"},
    {"title": "A title that runs to the b", "body": "", "words": "one two three four"},
])
def test_tool_call_masks_equal_full_walks(arguments, tokenizer_name):
    from conftest import load_shared_tokenizer
    from tokensieve import tool_call_structural_tag

    tok = load_shared_tokenizer(tokenizer_name)
    spec = tool_call_structural_tag(model="qwen_3", tools=_NOTE_TOOLS, tool_choice="auto", reasoning="auto")
    grammar = Grammar.structural_tag(spec, tokenizer=tok)
    arguments = dict(arguments, title=arguments["title"][:24])
    text = (
        "<think>\nThe user wants a note: <b> tags and </thin are fine here.\n</think>\n\n"
        "Sure, writing it <now>.<tool_call>\n"
        f'{{"name": "write_note", "arguments": {json.dumps(arguments, ensure_ascii=False)}}}\n</tool_call>'
    )
    expect_walked_masks_along(Matcher(tok, grammar), tok, tok.encode(text))


def test_tool_call_masks_equal_full_walks_on_grammars_that_follow_another():
    """A server whose requests bring their own tools compiles a grammar per request. The free
    text around the calls is the same in each, and a new grammar takes its open slices'
    answers from the searches of earlier ones (`slicer.OpenAnswers`, kept per tokenizer):
    each grammar here, other tools and the same text, must still mask as the whole trie's
    walk does, at every step."""
    from conftest import load_shared_tokenizer
    from tokensieve import tool_call_structural_tag

    tok = load_shared_tokenizer("llama3")
    for name in ("write_note", "save_memo", "add_todo_item"):
        tools = [{"type": "function", "function": dict(_NOTE_TOOLS[0]["function"], name=name)}]
        spec = tool_call_structural_tag(model="qwen_3", tools=tools, tool_choice="auto", reasoning="auto")
        text = (
            "<think>\nA note, then. </thin is not the end.\n</think>\n\n"
            f'Writing it.<tool_call>\n{{"name": "{name}", "arguments": {{"title": "Plan", "body": "a <b> c"}}}}\n</tool_call>'
        )
        expect_walked_masks_along(Matcher(tok, Grammar.structural_tag(spec, tokenizer=tok)), tok, tok.encode(text))


def test_lazy_lexemes_get_no_slice():
    """A lazy lexeme ends at its shortest match, even inside a token the lexer would go on
    with: `!important` after some text ends `text` at its `!`, and `important` is not `?`. The
    text slice would allow it (every text string keeps `(?s:.)*!` alive), so a state holding
    a lazy lexeme must be walked."""
    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    grammar = Grammar.lark('start: text "?"\ntext[lazy]: /(?s:.)*!/\n')
    ids = tok.encode("Some words first!?")
    (bang,) = tok.encode("!important")
    masks = expect_walked_masks_along(Matcher(tok, grammar), tok, ids)
    # Nowhere in the text: its `!` ends it, and `important` is not `?`.
    assert not any(mask[bang] for mask in masks)
