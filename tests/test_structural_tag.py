"""Structural tags and tool calls, against XGrammar 0.2.8 as the oracle.

- The tool-call tags `tool_call_structural_tag` builds equal XGrammar's own built-ins
  (`get_model_structural_tag`) for every family both have, tool choice, reasoning mode and
  parallel setting.
- Acceptance: for every family (XGrammar compiles any structural tag, built-in or not),
  strings sampled from a structural tag (valid outputs, then truncated, with text
  inserted, parts dropped or names swapped) are accepted by tokensieve exactly when XGrammar's
  matcher accepts them. Hypothesis draws the samples.
- Masks: along valid outputs, the masks agree with the slow reference recognizer.
- Errors name the bad node by JSON pointer.

Two documented differences are kept out of the samples (and pinned by their own tests): free
text before a closing string ends at the first occurrence of that string, where XGrammar may
also read on; free text beside a JSON value under one begin takes the value's text
(`docs/tool_calling.md`).
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string

from cfg_check import allowed_ids, check_against_reference
from conftest import load_shared_tokenizer
from full_walk import expect_walked_masks_along
from tokensieve import Grammar, GrammarError, Matcher, Tokenizer
from tokensieve._grammar.structural_tag import structural_tag_to_ir
from tokensieve._grammar.tool_calls import MODEL_FAMILIES, tool_call_structural_tag

XGRAMMAR_FAMILIES = ("llama", "qwen_3", "qwen_3_coder", "deepseek_v3_1", "harmony", "kimi")
CHOICES: tuple[Any, ...] = (
    "auto", "required", "none", None,
    {"type": "function", "function": {"name": "add"}},
    {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}},
)
REASONING = ("enabled", "disabled", "auto")

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "ping"}},
]


@pytest.fixture(scope="module")
def llama3():
    return load_shared_tokenizer("llama3")


def _normalized(node: Any) -> Any:
    """XGrammar's dump with its defaults removed, so absent and default fields compare equal."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("any_order", "max_whitespace_cnt", "max_tokens", "max_chars", "at_least_one", "stop_after_first") and value in (False, None):
                continue
            if key == "excludes" and not value:
                continue
            if key == "style" and value == "json":
                continue
            out[key] = _normalized(value)
        return out
    if isinstance(node, list):
        return [_normalized(x) for x in node]
    return node


@pytest.mark.parametrize("model", XGRAMMAR_FAMILIES)
def test_tool_call_tags_equal_xgrammars_builtins(model: str) -> None:
    compared = 0
    for choice in CHOICES:
        for reasoning in (*REASONING, True, False):
            for parallel in (True, False):
                for tools in (TOOLS, []):
                    try:
                        want = _normalized(xgr.get_model_structural_tag(
                            model, tools=tools, tool_choice=choice, reasoning=reasoning, parallel_tool_calls=parallel,
                        ).model_dump(by_alias=True))
                    except ValueError:
                        with pytest.raises(GrammarError):
                            tool_call_structural_tag(model=model, tools=tools, tool_choice=choice, reasoning=reasoning, parallel_tool_calls=parallel)
                        continue
                    got = tool_call_structural_tag(model=model, tools=tools, tool_choice=choice, reasoning=reasoning, parallel_tool_calls=parallel)
                    assert _normalized(got) == want, (choice, reasoning, parallel, len(tools))
                    compared += 1
    assert compared >= 80


# -- sampling strings from a structural tag -----------------------------------------------------

# Free-text pieces: letters that spell no marker, and the markers that matter (triggers,
# excludes, tag openers). Closing strings after free text are never inserted (the documented
# difference); `_closers` collects them per tag.
_LETTERS = ["a", "b", "x", " ", "\n", "1", '"', "{", "}", ":", "<", ">", "/", "|", "=", ","]


class _Sampler:
    """Writes a string a structural tag describes, choosing with `choose(n) -> 0..n-1`, then
    perhaps damages it; strings are lists of pieces so damage works on whole markers."""

    def __init__(self, fmt: dict[str, Any], choose: Callable[[int], int]) -> None:
        self.choose = choose
        self.closers: set[str] = set()
        self.markers: list[str] = []
        self._collect(fmt)

    def _collect(self, node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            if kind == "tag":
                ends = node["end"] if isinstance(node["end"], list) else [node["end"]]
                self.closers.update(e for e in ends if e)
                if node["begin"]:
                    self.markers.append(node["begin"])
            for key in ("triggers", "excludes"):
                self.markers.extend(node.get(key) or [])
            if kind == "tags_with_separator" and node.get("separator"):
                self.markers.append(node["separator"])
            for value in node.values():
                self._collect(value)
        elif isinstance(node, list):
            for value in node:
                self._collect(value)

    def pick(self, items: list[Any]) -> Any:
        return items[self.choose(len(items))]

    def text(self) -> list[str]:
        pieces = [m for m in self.markers if m not in self.closers and not any(c in m for c in self.closers)]
        out = []
        for _ in range(self.choose(5)):
            out.append(self.pick(_LETTERS) if not pieces or self.choose(4) else self.pick(pieces))
        return out

    def write(self, node: dict[str, Any]) -> list[str]:
        kind = node["type"]
        if kind == "const_string":
            return [node["value"]]
        if kind == "any_text":
            return self.text()
        if kind == "regex":
            assert node["pattern"] == r"\d+"
            return [str(self.choose(120))]
        if kind == "json_schema":
            if node.get("style", "json") == "qwen_xml":
                return self.qwen_xml(node["json_schema"])
            return [self.json_value(node["json_schema"])]
        if kind == "sequence":
            return [p for e in node["elements"] for p in self.write(e)]
        if kind == "or":
            return self.write(self.pick(node["elements"]))
        if kind == "optional":
            return self.write(node["content"]) if self.choose(2) else []
        if kind in ("star", "plus", "repeat"):
            low = {"star": 0, "plus": 1}.get(kind, node.get("min", 0))
            high = node.get("max", 3) if kind == "repeat" else low + 2
            return [p for _ in range(low + self.choose(high - low + 1)) for p in self.write(node["content"])]
        if kind == "tag":
            end = node["end"] if isinstance(node["end"], str) else self.pick(node["end"])
            return [node["begin"], *self.write(node["content"]), end]
        if kind == "triggered_tags":
            out = self.text()
            for _ in range(self.choose(3) + (1 if node.get("at_least_one") else 0)):
                out += self.write(self.pick(node["tags"]))
                if not node.get("stop_after_first") or self.choose(4) == 0:
                    out += self.text()
            return out
        if kind == "tags_with_separator":
            out: list[str] = []
            for i in range(self.choose(3) + (1 if node.get("at_least_one") else 0)):
                if i:
                    out.append(node["separator"])
                out += self.write(self.pick(node["tags"]))
            return out
        raise AssertionError(kind)

    def json_value(self, schema: Any) -> str:
        if schema is True or not schema.get("properties"):
            return self.pick(['{}', '{"q": [1, "x", null]}', '"text"', '3', '{"a" : {"b": true}}', '[', '{"a": }'])
        parts = []
        for name, sub in schema["properties"].items():
            if name not in schema.get("required", []) and self.choose(2):
                continue
            if "enum" in sub:
                value = self.pick(['"c"', '"f"', '"k"'])
            elif sub.get("type") == "string":
                value = self.pick(['"Paris"', '"a\\"b"', '""'])
            else:
                value = self.pick(["1", "-20", "0"])
            if self.choose(10) == 0:  # the wrong type
                value = "true"
            parts.append(f'"{name}"' + self.pick([": ", ":", " : "]) + value)
        if self.choose(10) == 0:
            parts.append('"extra": 1')
        if self.choose(12) == 0 and len(parts) > 1:
            parts.reverse()
        space = self.pick(["", " ", "\n  "])
        return "{" + space + ("," + space).join(parts) + space.replace("  ", "") + "}"

    def qwen_xml(self, schema: Any) -> list[str]:
        if schema is True:
            return [self.pick(["", "\n"]), *self.pick([[], ["<parameter=q>", "any text", "</parameter>"], ["<parameter=q>1</parameter>", "\n", "<parameter=r_2>[1]</parameter>"]])]
        out = []
        for name, sub in schema.get("properties", {}).items():
            if name not in schema.get("required", []) and self.choose(2):
                continue
            if "enum" in sub:
                value = self.pick([*sub["enum"], f'"{sub["enum"][0]}"', " c\n"])
            elif sub.get("type") == "string":
                value = self.pick(["Paris", "New York", "a<b", "\n"])
            else:
                value = self.pick(["1", " 42 ", "-3", "x"])
            out += [f"<parameter={name}>", self.pick(["", "\n"]), value, self.pick(["", "\n"]), "</parameter>", self.pick(["\n", ""])]
        return out

    def damage(self, pieces: list[str]) -> list[str]:
        what = self.choose(6)
        if what == 0 or not pieces:
            return pieces
        i = self.choose(len(pieces))
        if what == 1:  # truncated inside a piece
            return pieces[:i] + [pieces[i][: self.choose(len(pieces[i]) + 1)]]
        if what == 2:  # a piece dropped
            return pieces[:i] + pieces[i + 1:]
        if what == 3:  # text inserted
            return pieces[:i] + self.text() + pieces[i:]
        if what == 4:  # another tool's name
            return [p.replace("add", "get_weather") if self.choose(2) else p.replace("get_weather", "ping") for p in pieces]
        return pieces + self.text()


_compiled: dict[str, tuple[Grammar, Any, Matcher]] = {}


def _engines(spec: dict[str, Any], tok: Any) -> tuple[Matcher, Any]:
    key = json.dumps(spec)  # as written: both engines see the properties in the spec's own order
    if key not in _compiled:
        grammar = Grammar.structural_tag(spec, tokenizer=tok)
        _compiled[key] = (grammar, xgr.Grammar.from_structural_tag(key), Matcher(tok, grammar))
    _, theirs, fresh = _compiled[key]
    return fresh.fork(), theirs


def _accepts(m: Matcher, tok: Any, text: str) -> bool:
    return m.consume_tokens(tok.encode(text)) and m.is_accepting()


def test_tools_listing_properties_in_another_order_keep_their_own_order(llama3) -> None:
    """Argument schemas are compiled once per JSON text; two tools whose schemas differ only in
    the order of their properties must not share one (a sorted-keys key made them share)."""
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {key: {"type": "integer"} for key in keys}}}}
        for name, keys in (("f", "xy"), ("g", "yx"))
    ]
    spec = tool_call_structural_tag(model="qwen_3", tools=tools, tool_choice="required", reasoning="disabled")
    theirs = xgr.Grammar.from_structural_tag(json.dumps(spec))
    ours = Grammar.structural_tag(spec, tokenizer=llama3)
    for name in ("f", "g"):
        for arguments in ('{"x": 1, "y": 2}', '{"y": 2, "x": 1}'):
            text = f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'
            assert _accepts(Matcher(llama3, ours), llama3, text) == _is_grammar_accept_string(theirs, text), text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_acceptance_matches_xgrammar(llama3, data) -> None:
    model = data.draw(st.sampled_from(sorted(MODEL_FAMILIES)), label="model")
    choice = data.draw(st.sampled_from(CHOICES[:3] + CHOICES[4:5]), label="tool_choice")
    reasoning = data.draw(st.sampled_from(REASONING), label="reasoning")
    parallel = data.draw(st.booleans(), label="parallel")
    spec = tool_call_structural_tag(model=model, tools=TOOLS, tool_choice=choice, reasoning=reasoning, parallel_tool_calls=parallel)
    sampler = _Sampler(spec["format"], lambda n: data.draw(st.integers(0, n - 1)) if n > 1 else 0)
    text = "".join(sampler.damage(sampler.write(spec["format"])))
    ours, theirs = _engines(spec, llama3)
    want = _is_grammar_accept_string(theirs, text)
    assert _accepts(ours, llama3, text) == want, f"{model} {choice} {reasoning} parallel={parallel}: {text!r} (XGrammar: {want})"


_LEAF_STRINGS = ["ab", "<c>", "ok!"]
_LEAF_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n"]}
_TAG_SHAPES = [("<t>", "</t>"), ("[", "]"), ("<u ", ["/>", ">"])]


def _formats() -> st.SearchStrategy[dict[str, Any]]:
    """Structural-tag formats built from the types, kept where both engines mean the same:
    free text only as a whole tag's content (outside a tag tokensieve ends it at the first
    occurrence of what follows: the documented difference), literals that are no prefix of
    one another, no regex (a lexeme next to a lexeme that can continue it is read longest-match
    by tokensieve's lexer and character by character by XGrammar's)."""
    leaves = st.one_of(
        st.sampled_from(_LEAF_STRINGS).map(lambda v: {"type": "const_string", "value": v}),
        st.just({"type": "json_schema", "json_schema": _LEAF_SCHEMA}),
    )

    def tag(content: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.tuples(st.sampled_from(_TAG_SHAPES), st.one_of(content, st.just({"type": "any_text"}))).map(
            lambda pair: {"type": "tag", "begin": pair[0][0], "content": pair[1], "end": pair[0][1]})

    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        lists = st.lists(children, min_size=1, max_size=3)
        return st.one_of(
            lists.map(lambda e: {"type": "sequence", "elements": e}),
            st.lists(children, min_size=2, max_size=3).map(lambda e: {"type": "or", "elements": e}),
            children.map(lambda c: {"type": "optional", "content": c}),
            children.map(lambda c: {"type": "star", "content": c}),
            children.map(lambda c: {"type": "plus", "content": c}),
            st.tuples(children, st.integers(0, 2), st.integers(0, 2)).map(
                lambda t: {"type": "repeat", "content": t[0], "min": t[1], "max": t[1] + t[2]}),
            tag(children),
            st.tuples(st.lists(tag(children), min_size=1, max_size=2), st.booleans()).map(lambda t: {
                "type": "tags_with_separator", "separator": ",", "tags": t[0], "at_least_one": t[1]}),
        )

    body = st.recursive(leaves, extend, max_leaves=6)
    # Tags sharing a begin whose contents overlap (the shape of the bug pinned above): literals
    # containing an end string, free text, stars and sequences of them; no JSON beside free
    # text under one begin (a documented difference).
    literals = st.sampled_from(_LEAF_STRINGS + ["<c>/>", "]x"]).map(lambda v: {"type": "const_string", "value": v})
    frees = st.sampled_from([{"type": "any_text"}, {"type": "any_text", "excludes": ["c>"]}])
    literal_parts = st.recursive(literals, lambda c: st.one_of(
        c.map(lambda x: {"type": "optional", "content": x}), c.map(lambda x: {"type": "star", "content": x}),
        st.lists(c, min_size=2, max_size=2).map(lambda e: {"type": "sequence", "elements": e})), max_leaves=3)
    # Free text only where a literal follows it (two free texts in a row are refused).
    overlapping = st.one_of(frees, literal_parts, st.tuples(frees, literals).map(lambda t: {"type": "sequence", "elements": list(t)}))
    shared = st.tuples(st.sampled_from(_TAG_SHAPES), st.lists(overlapping, min_size=2, max_size=3)).map(lambda t: {
        "type": "or", "elements": [{"type": "tag", "begin": t[0][0], "content": c, "end": t[0][1]} for c in t[1]]})
    body = st.one_of(body, shared, st.lists(st.one_of(body, shared), min_size=2, max_size=2).map(
        lambda e: {"type": "sequence", "elements": e}))
    # Free text between triggered tags must be followed by a literal or the end: at the top.
    triggered = st.tuples(st.lists(body, min_size=1, max_size=2), st.booleans(), st.booleans()).map(lambda t: {
        "type": "triggered_tags", "triggers": ["<f"], "at_least_one": t[1], "stop_after_first": t[2],
        "tags": [{"type": "tag", "begin": f"<f{i}>", "content": c, "end": "</f>"} for i, c in enumerate(t[0])]})
    return st.one_of(body, triggered).filter(lambda fmt: not _json_beside_free_text(fmt))


def _json_beside_free_text(fmt: Any) -> bool:
    """Do two tags with one begin hold a JSON value and free text? (The documented difference:
    the JSON value's lexemes are read longest match beside the free text's characters.)"""
    tags: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "tag":
                tags.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(fmt)
    kinds = [(tag["begin"], "json_schema" in json.dumps(tag["content"]), "any_text" in json.dumps(tag["content"])) for tag in tags]
    return any(a[0] == b[0] and a[1] and b[2] for a in kinds for b in kinds)


# Derandomized: the same 150 formats every run, so CI does not turn red at random on a case a
# random draw finds once (the one found so far is pinned above, with its class).
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fmt=_formats(), data=st.data())
def test_generated_tags_match_xgrammar(llama3, fmt, data) -> None:
    """Hypothesis writes the structural tag too: the two engines accept the same strings."""
    spec = {"type": "structural_tag", "format": fmt}
    ours, theirs = _engines(spec, llama3)
    sampler = _Sampler(fmt, lambda n: data.draw(st.integers(0, n - 1)) if n > 1 else 0)
    for _ in range(3):
        text = "".join(sampler.damage(sampler.write(fmt)))
        assert _accepts(ours.fork(), llama3, text) == _is_grammar_accept_string(theirs, text), f"{json.dumps(fmt)}: {text!r}"


HAND_WRITTEN = [
    # tag with several ends, or, repeat, plus, regex and grammar content
    {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": ["</a>", "</A>"]},
        {"type": "or", "elements": [{"type": "const_string", "value": "x"}, {"type": "regex", "pattern": "[0-9]{2,3}"}]},
        {"type": "repeat", "min": 1, "max": 3, "content": {"type": "const_string", "value": "ab"}},
        {"type": "plus", "content": {"type": "grammar", "grammar": 'root ::= "z" [0-9]?'}},
    ]},
    # triggered tags with two triggers, excludes, at_least_one
    {"type": "triggered_tags", "triggers": ["<f", "<g"], "excludes": ["STOP"], "at_least_one": True, "tags": [
        {"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}}, "end": "</f>"},
        {"type": "tag", "begin": "<g=1>", "content": {"type": "const_string", "value": "ok"}, "end": "</g>"},
    ]},
    # star of a tag, optional, a dispatch
    {"type": "sequence", "elements": [
        {"type": "star", "content": {"type": "tag", "begin": "[", "content": {"type": "regex", "pattern": "[a-z]+"}, "end": "]"}},
        {"type": "optional", "content": {"type": "const_string", "value": "!"}},
    ]},
]
HAND_TEXTS = [
    "<a>hi</a>x ab z", "<a>hi</A>12abab z1z", "<a></a>123ababab z", "<a>x</a>xabababab z", "<a>x</a>x z",
    "hello <f>[1, 2]</f>", "<g=1>ok</g> tail", "STOP <f>[]</f>", "<f>[1,2,3]</f>", "no call", "<f>[1]</f><g=1>ok</g>",
    "[ab][c]!", "[]", "!", "", "[a]!!", "[A]",
]


@pytest.mark.parametrize("index", range(len(HAND_WRITTEN)))
def test_hand_written_tags_match_xgrammar(llama3, index: int) -> None:
    spec = {"type": "structural_tag", "format": HAND_WRITTEN[index]}
    ours, theirs = _engines(spec, llama3)
    for text in HAND_TEXTS:
        assert _accepts(ours.fork(), llama3, text) == _is_grammar_accept_string(theirs, text), text


# Found by `tokensieve fuzz --seed 1128` (tag inputs 3721, 4266): free text with nothing banned
# (an `any_text` without excludes or end, beside a sibling whose literal shares its first
# character) made the spelled form without its start state, a KeyError instead of a grammar.
FREE_TEXT_WITH_NOTHING_BANNED = [
    {"type": "or", "elements": [
        {"type": "any_text", "excludes": []},
        {"type": "star", "content": {"type": "tag", "begin": "</think>", "content": {"type": "const_string", "value": "]"},
                                     "end": "0\U0001F642b0"}},
        {"type": "const_string", "value": "</t>"},
        {"type": "const_string", "value": "<|endoftext|>"},
    ]},
    {"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "plus", "content": {"type": "const_string", "value": "</think>"}},
        {"type": "repeat", "content": {"type": "const_string", "value": "<f"}, "min": 0, "max": -1},
        {"type": "any_text"},
    ]}},
]
NOTHING_BANNED_TEXTS = [
    "", "abc", "</think>", "</think>abc", "</think></think><f<fxyz", "</think>]0\U0001F642b0", "</t>",
    "<|endoftext|>", "x</think>]0\U0001F642b0y", "</think>]0\U0001F642b0</think>]0\U0001F642b0",
]


@pytest.mark.parametrize("index", range(len(FREE_TEXT_WITH_NOTHING_BANNED)))
def test_free_text_with_nothing_banned_matches_xgrammar(llama3, index: int) -> None:
    ours, theirs = _engines({"type": "structural_tag", "format": FREE_TEXT_WITH_NOTHING_BANNED[index]}, llama3)
    verdicts = set()
    for text in NOTHING_BANNED_TEXTS:
        expected = _is_grammar_accept_string(theirs, text)
        assert _accepts(ours.fork(), llama3, text) == expected, text
        verdicts.add(expected)
    assert index == 0 or verdicts == {True, False}


FREE_TEXT_BOUNDARIES = [
    ([{"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": "</think>"}, {"type": "const_string", "value": "x"}],
     ["a</think>x", "a</think>b</think>x", "a</think>xb</think>x"]),
    ([{"type": "tag", "begin": "<a>", "content": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "-"}]}, "end": "</a>"}],
     ["<a>x-</a>", "<a>x-y-</a>", "<a>x</a>-</a>"]),
    ([{"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": ["</a>", "</b>"]}, {"type": "const_string", "value": "!"}],
     ["x</b>!", "x</a>y</b>!", "x</a>!"]),
]


@pytest.mark.parametrize(("elements", "texts"), FREE_TEXT_BOUNDARIES)
def test_free_text_in_a_tag_ends_at_its_first_end(llama3, elements, texts) -> None:
    ours, theirs = _engines({"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}, llama3)
    for text in texts:
        assert _accepts(ours.fork(), llama3, text) == _is_grammar_accept_string(theirs, text), text


def test_free_text_outside_a_tag_ends_at_what_follows(llama3) -> None:
    """The intended difference: outside any tag, free text ends at the first occurrence of
    the literal after it; XGrammar also lets it run on (`a!b!` is text `a!b` then `!`)."""
    spec = {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "!"}]}}
    ours, theirs = _engines(spec, llama3)
    assert _accepts(ours.fork(), llama3, "a!") and _is_grammar_accept_string(theirs, "a!")
    assert not _accepts(ours.fork(), llama3, "a!b!")
    assert _is_grammar_accept_string(theirs, "a!b!")


@pytest.mark.parametrize("model", sorted(MODEL_FAMILIES))
def test_masks_agree_with_the_reference(llama3, model: str) -> None:
    spec = tool_call_structural_tag(model=model, tools=TOOLS[:2], tool_choice="auto", reasoning="auto")
    rng = random.Random(model)
    sampler = _Sampler(spec["format"], lambda n: rng.randrange(n))
    accept = []
    theirs = xgr.Grammar.from_structural_tag(json.dumps(spec))
    while len(accept) < 3:
        text = "".join(sampler.write(spec["format"]))
        if _is_grammar_accept_string(theirs, text):
            accept.append(text)
    ir = structural_tag_to_ir(spec, tokenizer=llama3)
    check_against_reference(llama3, Grammar.structural_tag(spec, tokenizer=llama3), ir, accept, [], seed=model, steps_max=4)


@pytest.mark.parametrize("model", sorted(MODEL_FAMILIES))
def test_masks_equal_full_walks_at_every_step(llama3, model: str) -> None:
    """Free text takes open slices and the arguments the families' slices and clamped states
    (`docs/trie.md`); at every step of sampled outputs each mask must be the one the whole
    trie's walk from the real state gives (`full_walk.py`)."""
    spec = tool_call_structural_tag(model=model, tools=TOOLS[:2], tool_choice="auto", reasoning="auto")
    grammar = Grammar.structural_tag(spec, tokenizer=llama3)
    theirs = xgr.Grammar.from_structural_tag(json.dumps(spec))
    rng = random.Random(f"walks:{model}")
    sampler = _Sampler(spec["format"], lambda n: rng.randrange(n))
    texts: list[str] = []
    while len(texts) < 2:
        text = "".join(sampler.write(spec["format"]))
        if _is_grammar_accept_string(theirs, text):
            texts.append(text)

    for text in texts:
        expect_walked_masks_along(Matcher(llama3, grammar), llama3, llama3.encode(text))


@pytest.mark.parametrize(("spec", "pointer"), [
    ({"type": "structural_tag", "format": {"type": "nope"}}, "/format"),
    ({"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "const_string"}]}}, "/format/elements/0"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "end": "</a>"}}, "/format"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [
        {"type": "tag", "begin": "<b>", "content": {"type": "any_text"}, "end": "</b>"}]}}, "/format/tags/0"),
    ({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "object"}, "style": "minimax_xml"}}, "/format/style"),
    ({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}},
     "/format/json_schema/properties/a"),
    ({"type": "structural_tag", "format": {"type": "regex", "pattern": "(a"}}, "/format"),
])
def test_errors_name_the_node(spec: dict[str, Any], pointer: str) -> None:
    with pytest.raises(GrammarError) as caught:
        Grammar.structural_tag(spec)
    assert (caught.value.json_pointer or "").startswith(pointer), (caught.value.json_pointer, str(caught.value))


def test_tool_calls_reject_bad_requests() -> None:
    with pytest.raises(GrammarError, match="unknown tool-call format"):
        tool_call_structural_tag(model="gpt-2", tools=TOOLS)
    with pytest.raises(GrammarError, match="not in tools"):
        tool_call_structural_tag(model="qwen_3", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(GrammarError, match="at least one tool"):
        tool_call_structural_tag(model="qwen_3", tools=[], tool_choice="required")
    with pytest.raises(GrammarError, match="tools\\[0\\]"):
        tool_call_structural_tag(model="qwen_3", tools=[{"type": "function", "function": {}}])


def test_tokens_across_the_end_of_thinking(llama3) -> None:
    """Several tokens committed at once across `</think>` (one of them, `>\\n\\n`, ends the
    thinking and starts what follows) are accepted exactly when XGrammar accepts the text,
    and a rollback across the boundary restores the same masks."""
    spec = tool_call_structural_tag(model="qwen_3", tools=TOOLS[:2], tool_choice="auto", reasoning="enabled")
    ours, theirs = _engines(spec, llama3)
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    texts = [
        f"I will add them.</think>\n\n{call}", "I will add them.</think>\n\nDone.", "I will add them.</think>x",
        f"I will add them.</think>\n\n{call[:-3]}", "no end of thinking", f"I will add them.</think>\n\n<think>{call}",
    ]
    for text in texts:
        tokens = llama3.encode(text)
        assert any(llama3.token_bytes(t).startswith(b">") and len(llama3.token_bytes(t)) > 1 for t in tokens) or "</think>" not in text
        want = _is_grammar_accept_string(theirs, text)
        at_once = ours.fork()
        assert (at_once.consume_tokens(tokens) and at_once.is_accepting()) == want, text
        one_by_one = ours.fork()
        accepted = all(one_by_one.consume_token(t) for t in tokens) and one_by_one.is_accepting()
        assert accepted == want, text
        # A draft crossing the boundary is valid up to where XGrammar stops accepting prefixes.
        valid = next((i for i in range(len(tokens) + 1) if i == len(tokens) or not _prefix_ok(theirs, llama3, tokens[: i + 1])), len(tokens))
        assert ours.fork().validate_tokens(tokens) == valid, text
    m = ours.fork()
    tokens = llama3.encode(f"I will add them.</think>\n\n{call}")
    boundary = next(i for i, t in enumerate(tokens) if b">" in llama3.token_bytes(t))
    m.consume_tokens(tokens[: boundary - 1])
    before = allowed_ids(m, llama3.vocab_size)
    m.consume_tokens(tokens[boundary - 1: boundary + 3])
    m.rollback(4)
    assert allowed_ids(m, llama3.vocab_size) == before


def _prefix_ok(theirs: Any, tok: Any, tokens: list[int]) -> bool:
    """Can the text of `tokens` still be completed, by XGrammar?"""
    return _is_grammar_accept_string(theirs, tok.decode(tokens).decode("utf-8", "replace"), require_termination=False)


def test_markers_that_are_special_tokens_match_only_those_tokens() -> None:
    """With a tokenizer where `</think>` and `<tool_call>` are special tokens, the grammar
    takes those tokens where the markers go, and refuses the same text spelled in bytes."""
    byte_tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    end_think, call_open, call_close, eos = 256, 257, 258, 259
    tok = Tokenizer.from_token_bytes(
        byte_tokens + [b"</think>", b"<tool_call>", b"</tool_call>", b"<eos>"],
        special_token_ids=[end_think, call_open, call_close], eos_token_ids=[eos],
    )
    grammar = Grammar.tool_calls(model="qwen_3", tools=TOOLS[:2], tool_choice="auto", reasoning="enabled", tokenizer=tok)
    m = Matcher(tok, grammar)
    assert m.consume_tokens(list(b"Thinking"))
    allowed = allowed_ids(m, tok.vocab_size)
    assert end_think in allowed and eos not in allowed and call_open not in allowed
    spelled = m.fork()
    assert spelled.consume_tokens(list(b"</think")) and not spelled.consume_token(ord(">"))
    assert m.consume_token(end_think)
    assert allowed_ids(m, tok.vocab_size) == {ord("\n")}
    assert m.consume_tokens(list(b"\n\nSure. "))
    allowed = allowed_ids(m, tok.vocab_size)
    assert call_open in allowed and eos in allowed and end_think not in allowed
    assert m.consume_token(call_open)
    assert m.consume_tokens(list(b'\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n'))
    assert allowed_ids(m, tok.vocab_size) == {call_close}
    assert m.consume_token(call_close) and m.is_accepting()


def test_serving_requests_compile_structural_tags(llama3) -> None:
    """What vLLM and SGLang hand their backend (JSON text, current and legacy forms) compiles
    through the same front-end, and accepts what XGrammar accepts."""
    from tokensieve.integrations import grammar_for

    spec = tool_call_structural_tag(model="hermes", tools=TOOLS[:2], tool_choice="auto", reasoning="disabled")
    legacy = {"type": "structural_tag", "triggers": ["<tool_call>"], "structures": [
        {"begin": '<tool_call>\n{"name": "add", "arguments": ', "schema": TOOLS[1]["function"]["parameters"], "end": "}\n</tool_call>"},
    ]}
    texts = ['Sure.<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
             'Sure.<tool_call>\n{"name": "sub", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
             'Sure.<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>', "Just text."]
    for request in (spec, legacy):
        text_form = json.dumps(request)
        grammar = grammar_for("structural_tag", text_form, tokenizer=llama3)
        assert grammar_for("structural_tag", text_form, tokenizer=llama3) is grammar
        if "structures" in request:  # XGrammar takes the legacy form as items and triggers
            items = [xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"]) for s in request["structures"]]
            theirs = xgr.Grammar.from_structural_tag(items, request["triggers"])
        else:
            theirs = xgr.Grammar.from_structural_tag(text_form)
        for text in texts:
            assert _accepts(Matcher(llama3, grammar), llama3, text) == _is_grammar_accept_string(theirs, text), text


def _nested(depth: int, wrap: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "const_string", "value": "a"}
    for _ in range(depth):
        node = wrap(node)
    return node


_OR_XY = {"type": "or", "elements": [{"type": "const_string", "value": "x"}, {"type": "const_string", "value": "y"}]}


@pytest.mark.parametrize(("fmt", "error"), [
    (_nested(3, lambda c: {"type": "repeat", "min": 0, "max": 256, "content": c}), "pieces"),
    (_nested(2, lambda c: {"type": "repeat", "min": 200, "max": 200, "content": c if c["type"] != "const_string" else _OR_XY}), "pieces"),
    # Python 3.11 and 3.12 run out of recursion reading it, 3.13 (a deeper C stack) reaches the
    # nesting limit: either way a clear error.
    (_nested(3000, lambda c: {"type": "sequence", "elements": [c]}), "nests too deeply|nest deeper than 300"),
    (_nested(400, lambda c: {"type": "optional", "content": c}), "nest deeper"),
    ({"type": "sequence", "elements": [_OR_XY] * 60}, None),  # 2^60 ways, a linear grammar
    ({"type": "repeat", "min": 256, "max": 256, "content": _OR_XY}, None),
])
def test_hostile_tags_end_in_a_grammar_or_a_clear_error(llama3, fmt: dict[str, Any], error: str | None) -> None:
    """Nested repeat counts multiply, sequences of `or`s multiply alternatives, nesting is
    recursion: each is bounded (a GrammarError naming the problem) or compiled linearly."""
    spec = {"type": "structural_tag", "format": fmt}
    if error is not None:
        with pytest.raises(GrammarError, match=error):
            Grammar.structural_tag(spec)
        return
    assert len(structural_tag_to_ir(spec).rules) < 10_000  # linear in the size of the tag
    grammar = Grammar.structural_tag(spec)
    text = "xy" * 128 if fmt["type"] == "repeat" else "xy" * 30
    assert _accepts(Matcher(llama3, grammar), llama3, text)
    assert not _accepts(Matcher(llama3, grammar), llama3, text + "x")


def test_or_of_tags_sharing_a_begin_keeps_the_literal_branch(llama3) -> None:
    """Found by test_generated_tags_match_xgrammar: the free text of one tag (a lazy lexeme)
    and the literal `<c>` of the other shared a lexer row, the text ran on past `<c>` and the
    literal's branch was lost."""
    literal = {"type": "tag", "begin": "<u ", "content": {"type": "optional", "content": {"type": "const_string", "value": "<c>"}},
               "end": ["/>", ">"]}
    free = {"type": "tag", "begin": "<u ", "content": {"type": "any_text"}, "end": ["/>", ">"]}
    spec = {"type": "structural_tag", "format": {"type": "or", "elements": [literal, free]}}
    ours, theirs = _engines(spec, llama3)
    assert _is_grammar_accept_string(theirs, "<u <c>/>")
    assert _accepts(ours, llama3, "<u <c>/>")


# Contents of two tags with one begin, whose readings overlap: literals containing an end
# string, free text (with and without excludes), a star of a literal, text then a literal.
_SHARED_CONTENTS = {
    "literal": {"type": "optional", "content": {"type": "const_string", "value": "<c>"}},
    "literal past an end": {"type": "const_string", "value": "<c>/>x"},
    "free": {"type": "any_text"},
    "free excluding": {"type": "any_text", "excludes": ["c>"]},
    "star": {"type": "star", "content": {"type": "const_string", "value": "<c>"}},
    "text then literal": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "!"}]},
}
_SHARED_ENDS = [(["/>", ">"], ["/>", ">"]), ("/>", ">"), (">", "/>"), (["c>", "/>"], "/>")]
_SHARED_TEXTS = [
    "<u <c>/>", "<u <c>>", "<u />", "<u >", "<u ab>", "<u ab/>", "<u <c/>", "<u <c>x>", "<u <c>/>x/>", "<u <c>/>x>",
    "<u a>b/>", "<u a/>b>", "<u <c><c>>", "<u <c><c>/>", "<u x!/>", "<u x!>", "<u >!>", "<u c>/>", "<u <c>c>", "<u ", "<u <c",
]


@pytest.mark.parametrize("ends", _SHARED_ENDS, ids=str)
@pytest.mark.parametrize("pair", [(a, b) for i, a in enumerate(_SHARED_CONTENTS) for b in list(_SHARED_CONTENTS)[i:]], ids=str)
def test_or_of_tags_sharing_a_begin_matches_xgrammar(llama3, pair, ends) -> None:
    """The class of the bug above: every pair of overlapping contents under one begin, with
    the same and with different ends, against XGrammar on texts that need either branch."""
    elements = [{"type": "tag", "begin": "<u ", "content": _SHARED_CONTENTS[name], "end": end} for name, end in zip(pair, ends)]
    spec = {"type": "structural_tag", "format": {"type": "or", "elements": elements}}
    ours, theirs = _engines(spec, llama3)
    for text in _SHARED_TEXTS:
        assert _accepts(ours.fork(), llama3, text) == _is_grammar_accept_string(theirs, text), text


@pytest.mark.parametrize("wrap", ["or", "optional then", "star then", "separated"])
def test_free_text_beside_a_sibling_in_other_merges_matches_xgrammar(llama3, wrap) -> None:
    """The same overlap where optional, star and tags_with_separator put alternatives side
    by side, not only `or`."""
    free = {"type": "tag", "begin": "<u ", "content": {"type": "any_text"}, "end": "/>"}
    literal = {"type": "tag", "begin": "<u ", "content": {"type": "const_string", "value": "<c>"}, "end": ">"}
    fmt = {
        "or": {"type": "or", "elements": [free, literal]},
        "optional then": {"type": "sequence", "elements": [{"type": "optional", "content": free}, literal]},
        "star then": {"type": "sequence", "elements": [{"type": "star", "content": free}, literal]},
        "separated": {"type": "tags_with_separator", "separator": ",", "tags": [free, literal], "at_least_one": True},
    }[wrap]
    spec = {"type": "structural_tag", "format": fmt}
    ours, theirs = _engines(spec, llama3)
    texts = ["<u <c>>", "<u a/>", "<u <c>/>", "<u a/><u <c>>", "<u <c>/><u <c>>", "<u a/>,<u <c>>", "<u <c>>,<u a/>",
             "<u <c>>,<u <c>>", "<u <c>>x", "<u a>/>", "<u <c>/>,<u b/>"]
    for text in texts:
        assert _accepts(ours.fork(), llama3, text) == _is_grammar_accept_string(theirs, text), text


@pytest.mark.parametrize("pair", [("literal", "free"), ("star", "text then literal"), ("free", "text then literal")], ids=str)
def test_masks_of_spelled_tags_agree_with_the_reference(llama3, pair) -> None:
    """Where free text is spelled one character per lexeme, the masks along outputs XGrammar
    accepts agree with the slow reference recognizer."""
    elements = [{"type": "tag", "begin": "<u ", "content": _SHARED_CONTENTS[name], "end": ["/>", ">"]} for name in pair]
    spec = {"type": "structural_tag", "format": {"type": "or", "elements": elements}}
    _, theirs = _engines(spec, llama3)
    accept = [text for text in _SHARED_TEXTS if _is_grammar_accept_string(theirs, text)]
    assert len(accept) >= 3
    ir = structural_tag_to_ir(spec, tokenizer=llama3)
    assert any(lexeme.name.endswith("character") for lexeme in ir.lexemes)  # the spelled form is what is checked
    check_against_reference(llama3, Grammar.structural_tag(spec, tokenizer=llama3), ir, accept, [], seed=str(pair), steps_max=4)


@pytest.mark.parametrize("model", sorted(MODEL_FAMILIES))
def test_tool_call_formats_keep_their_lazy_free_text(llama3, model: str) -> None:
    """No tool-call format has free text beside a sibling it could lose: none is spelled one
    character per lexeme (each character would be a parser step)."""
    for choice in CHOICES:
        for reasoning in REASONING:
            for parallel in (True, False):
                spec = tool_call_structural_tag(model=model, tools=TOOLS, tool_choice=choice, reasoning=reasoning, parallel_tool_calls=parallel)
                ir = structural_tag_to_ir(spec, tokenizer=llama3)
                assert not any(lexeme.name.endswith("character") for lexeme in ir.lexemes), (choice, reasoning, parallel)


@pytest.mark.xfail(strict=True, reason="known gap (docs/tool_calling.md): free text inside a star's loop is not seen by "
                   "the check for a sibling beside it, so the sibling's branch is lost as before")
def test_literal_tag_beside_a_star_of_free_text_tags(llama3) -> None:
    free = {"type": "tag", "begin": "<u ", "content": {"type": "any_text"}, "end": "/>"}
    literal = {"type": "tag", "begin": "<u ", "content": {"type": "const_string", "value": "<c>"}, "end": ">"}
    spec = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "optional", "content": literal}, {"type": "star", "content": free}]}}
    ours, theirs = _engines(spec, llama3)
    assert _is_grammar_accept_string(theirs, "<u <c>>")
    assert _accepts(ours, llama3, "<u <c>>")


@pytest.mark.xfail(strict=True, reason="documented difference (docs/tool_calling.md): free text beside a JSON value "
                   "under one begin; the JSON lexemes are not spelled character by character")
def test_or_of_free_text_and_json_under_one_begin(llama3) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}}}
    elements = [{"type": "tag", "begin": "<u ", "content": content, "end": ">"}
                for content in ({"type": "any_text"}, {"type": "json_schema", "json_schema": schema})]
    spec = {"type": "structural_tag", "format": {"type": "or", "elements": elements}}
    ours, theirs = _engines(spec, llama3)
    text = '<u {"s": ">"}>'
    assert _is_grammar_accept_string(theirs, text)
    assert _accepts(ours, llama3, text)
