"""Lookaheads in JSON Schema `pattern`s where intersections say them exactly: right after a
leading `^` (`^(?!@@)[\\w@]+$`, JsonSchemaStore's i18n schemas) and tempered loops over the
whole string (`^((?!mode).)*$`).

The oracle is Python's `re.search` on the decoded string (ECMA and Python agree on these
patterns once `$` means the end of the input, as in ECMA), for the translation's regexes under
the `regex` module and for whole grammars under the core.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import zlib

import pytest
import regex

from json_text import accepts, agrees_with_jsonschema, compact

from tokensieve import Grammar, GrammarError
from tokensieve._grammar.json_schema.strings import pattern_lookahead_parts

PATTERNS = [
    "^(?!@@)[@a-zA-Z0-9_-]+$",
    "^(?!interactive|name|style).+$",
    "^((?!mode)(?!Mode).)*$",
    "^(?:(?!ab|b-)[^=])*$",
    "^(?=[^=]+$)(?!\\s+$)(.|\\n)+$",
    "^(?![i|I][o|O][b|B])",
    "^((?!(c|C)(l|L)(y|Y)).)*$",
    "^(?!org\\.b\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$",
    "^(?![ \\t\\n]*\\(d(.*)\\))[\\s\\S]*",
    "^(?=.*[0-9])(?=.*[a-z])[a-z0-9]{3,}$",
]
PIECES = list("@ab_-=. \n\t()0719mdeMCLYioIOBrgz$") + ["org.b.", "mode", "Mode", "Cly", "ioB", "name", "style", "(d)", "b-"]


def _ecma_search(pattern: str, value: str) -> bool:
    """ECMA search semantics with Python's engine: `$` (outside classes, unescaped) is the end
    of the input, not also the place before a final newline."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = "\\Z"
        out.append(c)
        i += 1
    return re.search("".join(out), value) is not None


def _values(seed: int, count: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 7))) for _ in range(count)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_lookahead_parts_agree_with_search_on_the_decoded_string(pattern: str) -> None:
    musts, nots = pattern_lookahead_parts(pattern)
    agree = [0, 0]
    for value in _values(zlib.crc32(pattern.encode()) & 0xFFFF, 2500):  # str hash() changes per process
        expected = _ecma_search(pattern, value)
        agree[expected] += 1
        for ascii_only in (True, False):
            body = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
            got = all(regex.fullmatch(m, body) for m in musts) and not any(regex.fullmatch(n, body) for n in nots)
            assert got == expected, (pattern, value, body)
    assert min(agree) > 0, f"the values should include matches and non-matches: {agree}"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_string_schemas_with_lookaheads_accept_what_search_finds(pattern: str) -> None:
    grammar = Grammar.json_schema({"type": "string", "pattern": pattern})
    outcomes = set()
    for value in _values(7, 150):
        expected = _ecma_search(pattern, value)
        outcomes.add(expected)
        assert accepts(grammar, compact(value)) == expected, (pattern, value)
    assert outcomes == {True, False}


@pytest.mark.parametrize(
    "pattern",
    [
        "^((?!a*).)*$",  # a tempered lookahead that matches the empty string
        "^((?!a)bc)*$",  # a tempered loop over two characters
        "^((?=a).)*$",  # a positive tempered lookahead
        "^(?<!a)b",  # lookbehind
        "^(?!a(?!b))c",  # a lookahead inside a lookahead
    ],
)
def test_other_lookarounds_are_refused(pattern: str) -> None:
    with pytest.raises(GrammarError):
        pattern_lookahead_parts(pattern)
    with pytest.raises(GrammarError, match="pattern"):
        Grammar.json_schema({"type": "string", "pattern": pattern})


@pytest.mark.parametrize(
    "pattern",
    [
        "a(?!b)",  # not at the start
        "^a(?!b)c",  # after text
        "^(?!a)b|c",  # the lookahead binds to one alternative only
    ],
)
def test_lookaheads_elsewhere_are_complements_in_the_core(pattern: str) -> None:
    """Not intersections of the whole string (`pattern_lookahead_parts` refuses them) but
    complements of what follows the lookahead (`strings._translate`), against ECMA search
    (`_ecma_search`)."""
    with pytest.raises(GrammarError):
        pattern_lookahead_parts(pattern)
    grammar = Grammar.json_schema({"type": "string", "pattern": pattern})
    verdicts = set()
    for n in range(5):
        for chars in itertools.product("abc", repeat=n):
            text = "".join(chars)
            expected = _ecma_search(pattern, text)
            verdicts.add(expected)
            assert accepts(grammar, json.dumps(text)) == expected, (pattern, text)
    assert verdicts == {True, False}


OBJECT_SCHEMAS = [
    {"patternProperties": {"^(?!@@)[a-z@]+$": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
    {"patternProperties": {"^(?!@@)[a-z@]+$": {"type": "integer"}}, "additionalProperties": False},
    {
        "patternProperties": {"^(?!ab|b@)(?=.*a)[a-z@]*$": {"type": "integer"}, "^b": {"type": "integer", "minimum": 5}},
        "additionalProperties": {"type": "string"},
    },
    {"properties": {"a": {"type": "string"}}, "patternProperties": {"^((?!@@).)*$": {"type": "integer"}}},
    # allOf merging asks which pattern a listed name matches (the instance checker's parts).
    {"allOf": [
        {"patternProperties": {"^(?!@@)[a-z@]+$": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        {"properties": {"ab": {"minimum": 5}, "@@a": {"minLength": 2}}},
    ]},
]
KEYS = ["a", "ab", "b", "ba", "b@", "bab", "@@", "@@a", "a@@", "x", "@", "ca", "bb"]


def _objects(seed: int, count: int) -> list[dict[str, object]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        keys = rnd.sample(KEYS, rnd.randint(0, 3))
        out.append({k: rnd.choice([1, 7, "s"]) for k in keys})
    return out


@pytest.mark.parametrize("index", range(len(OBJECT_SCHEMAS)))
def test_pattern_properties_with_lookaheads_agree_with_jsonschema(index: int) -> None:
    import jsonschema

    schema = {"type": "object", **OBJECT_SCHEMAS[index]}
    grammar = Grammar.json_schema(schema, whitespace="compact")
    listed = [k for part in [schema, *schema.get("allOf", [])] for k in part.get("properties", {})]
    agrees_with_jsonschema(grammar, jsonschema.Draft202012Validator(schema), _objects(index, 300), listed)


def test_two_pattern_properties_with_lookaheads_are_refused_naming_the_second() -> None:
    schema = {"type": "object", "patternProperties": {"^(?!a)b": {}, "^(?!c)d": {"type": "integer"}}}
    with pytest.raises(GrammarError, match="one pattern with lookaheads") as info:
        Grammar.json_schema(schema)
    assert "/patternProperties/^(?!c)d" in str(info.value)


@pytest.mark.parametrize("pattern", ["^((?!(c|C)(l|L)(y|Y)(d|D)(e|E)).)*$", "^((?!c).)*$"])
def test_tempered_loop_beside_max_length_masks_within_step_fuel(pattern: str) -> None:
    """MaskBench JsonSchemaStore---webhook's username: a tempered loop beside `maxLength` is
    the pattern ∩ the length bound ∩ ¬(the excluded text), a lexer state per character. Every
    mask over Llama-3 (a walk of the whole vocabulary from each state) used to run out of step
    fuel: each state past the excluded text was shown empty by the exact search. Each text is
    fed token by token with a mask before each token; the mask allows the token exactly when
    the text's prefix can still be completed, and the end verdict is `re`'s (and the length)."""
    from conftest import load_shared_tokenizer

    import numpy as np

    from tokensieve import Matcher

    tok = load_shared_tokenizer("llama3")
    grammar = Grammar.json_schema({"type": "string", "pattern": pattern, "maxLength": 80})
    buf = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    texts = ["Test Bot", "hello there clyd wo", "my friend Clyde", "cLYDE", "c" * 80, "ab" * 40 + "a",
             "x\u00e9y", "x\ny", "Hello, world! A test message of some length, but not too long."]
    verdicts = set()
    for text in texts:
        expected = _ecma_search(pattern, text) and len(text) <= 80
        verdicts.add(expected)
        m = Matcher(tok, grammar)
        ids = tok.encode(json.dumps(text, ensure_ascii=False))
        for t in ids:
            m.fill_bitmask(buf)  # raises LimitError when a mask runs out of step fuel
            allowed = bool((int(buf[0, t >> 5]) >> (t & 31)) & 1)
            assert allowed == m.consume_tokens((t,)), (pattern, text)
            if not allowed:
                break
        else:
            assert m.is_accepting() == expected, (pattern, text)
            continue
        assert not expected, (pattern, text)
    assert verdicts == {True, False}
