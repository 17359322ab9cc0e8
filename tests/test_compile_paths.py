"""The front-ends' faster paths against slow, obvious references (issue 16 item 4, issue 13 item 1).

- Special-token texts in a structural tag's literals: the regex split against a scan that tries
  every special text at every position (leftmost, then longest).
- JSON Schema content ids: two values share an exact one exactly when their JSON texts are equal
  with the types of their scalars (1, 1.0 and true differ), at any depth, and cycles have none;
  two schemas share a schema id (a large schema's memo key) exactly when their texts are equal
  once what no translation reads is left out (a reference that writes the text so).
- The collector paused while a front-end translates: back on afterwards (also after an error,
  and with nested translations), and left off when the caller had turned it off.
- JSON Schema value lists: the values common to two lists, by set keys, against comparing
  every pair with `_json_equal`.
"""

from __future__ import annotations

import gc
import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tokensieve import Grammar, GrammarError
from tokensieve._grammar.json_schema import compiler as schema_compiler
from tokensieve._grammar.structural_tag import _first_piece_uncached, _special_pattern, _Specials, _split_specials

SPECIALS = {"<|a|>": 1, "<|ab|>": 2, "<|a": 3, "|>": 4, "<": 5, "xyz": 6}


def _scan_pieces(text: str, table: dict[str, int]) -> list[tuple[str, int | None]]:
    """The reference: at each position, the longest special text starting there, else one character."""
    out: list[tuple[str, int | None]] = []
    plain = ""
    i = 0
    while i < len(text):
        found = max((t for t in table if text.startswith(t, i)), key=len, default=None)
        if found is None:
            plain += text[i]
            i += 1
            continue
        if plain:
            out.append((plain, None))
            plain = ""
        out.append((found, table[found]))
        i += len(found)
    if plain or not out:
        out.append((plain, None))
    return out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="<|>abxyz ", max_size=30))
def test_special_texts_split_as_the_scan_does(text: str) -> None:
    specials = _Specials(SPECIALS, _special_pattern(SPECIALS))
    expected = _scan_pieces(text, SPECIALS)
    assert _split_specials(text, specials) == expected
    assert _first_piece_uncached(text, specials) == expected[0]


def _compiler(by_marshal: bool = True) -> Any:
    """A compiler of `{}`, its content ids from `marshal` forms (a small schema's) or, with
    `by_marshal=False`, from the interning walk (a large schema's)."""
    lexeme = schema_compiler._plain_lexeme
    compiler = schema_compiler._Compiler(
        {}, lenient=False, additional_properties_default=True,
        key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
    )
    assert compiler.content_by_marshal
    compiler.content_by_marshal = by_marshal
    return compiler


def _typed_text(value: Any) -> str:
    """JSON text with each scalar's Python type: equal exactly when content ids must be."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _typed_text(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_typed_text(v) for v in value) + "]"
    return f"{type(value).__name__}:{json.dumps(value)}"


_scalars = st.sampled_from([0, 1, 1.0, 2.5, True, False, None, "", "a", "1"])
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=12,
)


def _exact_id(compiler: Any, value: Any) -> Any:
    """A small schema's content id (its marshal form, exact), else the walk's exact id."""
    if compiler.content_by_marshal or not isinstance(value, (dict, list)):
        return compiler.content_id(value)
    return compiler.exact_content_id(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(_values, min_size=2, max_size=6), st.booleans())
def test_content_ids_are_equal_exactly_for_equal_json(values: list[Any], by_marshal: bool) -> None:
    compiler = _compiler(by_marshal)
    ids = [_exact_id(compiler, v) for v in values]
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            assert (ids[i] == ids[j]) == (_typed_text(a) == _typed_text(b))


@pytest.mark.parametrize("by_marshal", [True, False])
def test_content_ids_past_the_recursion_depth_and_of_cycles(by_marshal: bool) -> None:
    deep: Any = 1
    twin: Any = 1
    for _ in range(3 * schema_compiler._CONTENT_ID_DEPTH_MAX):
        deep, twin = [deep], [twin]
    compiler = _compiler(by_marshal)
    assert compiler.content_id(deep) is not None
    assert compiler.content_id(deep) == compiler.content_id(twin) != compiler.content_id([twin])
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["not"] = cyclic  # (through a keyword the translation reads: a schema walk meets it)
    assert compiler.content_id(cyclic) is None
    assert compiler.content_id([{"b": cyclic}]) is None
    if not by_marshal:  # (a set has a marshal form: its id then stands for that set only)
        assert compiler.content_id({"enum": {1, 2}}) is None
    assert compiler.content_id({"enum": {1, 2}}) != compiler.content_id({"enum": [1, 2]})
    deep_schema: Any = {"type": "string"}
    deep_twin: Any = {"type": "string", "description": "d"}
    for _ in range(3 * schema_compiler._CONTENT_ID_DEPTH_MAX):
        deep_schema, deep_twin = {"not": deep_schema}, {"not": deep_twin}
    assert compiler.content_id(deep_schema) is not None  # (exact past the depth: no sharing there)
    assert compiler.content_id(deep_schema) != compiler.content_id({"not": deep_schema})


# The schema ids' reference: the keywords `_schema_values` draws, by how the walk reads them.
_ANNOTATION_KEYS = {"title", "description", "$comment", "examples", "example", "default"}
_KEYWORD_KINDS = {
    "not": "schema", "items": "schema or list", "anyOf": "list", "properties": "map", "enum": "data", "type": "data",
    "$ref": "data", "definitions": "map",
}


def _schema_text(value: Any) -> str:
    """The typed text of a schema as the translation reads it: annotations left out, and objects
    and arrays under unknown keywords written `unread`; internal keys (`_...`) are data."""
    if not isinstance(value, dict):
        return _typed_text(value)
    members = []
    for key, child in value.items():
        if key in _ANNOTATION_KEYS:
            continue
        kind = _KEYWORD_KINDS.get(key, "data" if key[:1] in "_$" else "unread")
        if not isinstance(child, (dict, list)):
            text = _typed_text(child)
        elif isinstance(child, dict) and kind in ("schema", "schema or list"):
            text = "schema " + _schema_text(child)
        elif isinstance(child, dict) and kind == "map":
            text = "map {" + ",".join(json.dumps(k) + ":" + _each_text(v) for k, v in child.items()) + "}"
        elif isinstance(child, list) and kind in ("list", "schema or list"):
            text = "list [" + ",".join(_each_text(v) for v in child) + "]"
        elif kind == "unread":
            text = "unread"
        else:
            text = _typed_text(child)
        members.append(json.dumps(key) + ":" + text)
    return "{" + ",".join(members) + "}"


def _each_text(value: Any) -> str:
    return "schema " + _schema_text(value) if isinstance(value, dict) else _typed_text(value)


_schema_keys = st.sampled_from([*_KEYWORD_KINDS, "description", "default", "x-a", "_p"])
_schema_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_schema_keys, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_schema_keys, _schema_values, max_size=4), min_size=2, max_size=6))
@example([{"properties": {"description": 1}}, {"properties": {}}])  # a member named like an annotation
@example([{"enum": [{"description": 1}]}, {"enum": [{"description": 2}]}])  # data, read exactly
@example([{"x-a": {"not": 1}, "description": "a"}, {"x-a": [2]}])  # read by nothing
# One keyword with a string (an id of its own): beside annotations, others, nested, as data.
@example([{"$ref": "a"}, {"$ref": "a", "description": "d"}, {"type": "a"}, {"$ref": "a", "x-a": "b"}, {"$ref": 1}])
@example([{"not": {"$ref": "a"}}, {"not": {"type": "a"}}, {"not": {"$ref": "a", "default": 2}}, {"not": "a"}])
@example([{"properties": {"a": {"type": "a"}}}, {"properties": {"a": {"_p": "a"}}}, {"anyOf": [{"type": "a"}, "a"]}])
@example([{"enum": [{"type": "a"}]}, {"enum": [{"type": "a", "description": "d"}]}, {"items": [{"$ref": "1"}]}])
def test_schema_ids_are_equal_exactly_for_schemas_read_alike(schemas: list[dict[str, Any]]) -> None:
    compiler = _compiler(by_marshal=False)
    ids = [compiler.content_id(s) for s in schemas]
    for i, a in enumerate(schemas):
        for j, b in enumerate(schemas):
            assert (ids[i] == ids[j]) == (_schema_text(a) == _schema_text(b)), (a, b)


def _large_compiler(root: dict[str, Any]) -> Any:
    lexeme = schema_compiler._plain_lexeme
    return schema_compiler._Compiler(
        root, lenient=False, additional_properties_default=True,
        key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
    )


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(_schema_keys, _schema_values, min_size=1, max_size=4),
    st.lists(st.dictionaries(_schema_keys, _schema_values, max_size=4), max_size=4),
    st.booleans(),
)
@example({"not": {"type": "a"}, "x-a": "b"}, [{"definitions": {"a": {"type": "a"}}, "not": {"type": "a"}}], True)
@example({"definitions": {}}, [{"definitions": {"a": {"type": "a", "default": 1}}}, {"definitions": {}}], False)
def test_a_large_roots_id_is_equal_exactly_for_schemas_read_alike(
    root: dict[str, Any], others: list[dict[str, Any]], twin_first: bool
) -> None:
    # A large root (walked ids) with definitions: a schema read alike has the root's id, any
    # other another one (the same reference as the schema ids'). Its copy (equal but for an
    # annotation) comes among the others, first or last, nested or not. (A root whose id was
    # made only when a schema with definitions is met, docs/json_schema.md's fourth pass,
    # passed it, and failed it without that trigger.)
    pad = "x" * (schema_compiler._CONTENT_MARSHAL_SIZE_MAX + 1)
    root = {"definitions": {"a": {"type": "a"}}, **root, "description": pad}
    compiler = _large_compiler(root)
    assert not compiler.content_by_marshal
    twin = json.loads(json.dumps(root))
    twin["description"] = "another"
    schemas = [twin, *others, {"not": twin}] if twin_first else [*others, {"not": twin}, twin]
    root_id = compiler.content_id(root)
    ids = [compiler.content_id(s) for s in schemas]
    assert compiler.content_id(root) == root_id
    for schema, cid in zip(schemas, ids):
        assert (cid == root_id) == (_schema_text(schema) == _schema_text(root)), schema
        for other, other_id in zip(schemas, ids):
            assert (cid == other_id) == (_schema_text(schema) == _schema_text(other)), (schema, other)


def test_content_ids_come_from_marshal_forms_up_to_a_size() -> None:
    lexeme = schema_compiler._plain_lexeme
    small = {"type": "object", "description": "x" * 1000}
    large = {"type": "object", "description": "x" * (schema_compiler._CONTENT_MARSHAL_SIZE_MAX + 1)}
    kinds = []
    for root in (small, large):
        compiler = schema_compiler._Compiler(
            root, lenient=False, additional_properties_default=True,
            key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
        )
        kinds.append(compiler.content_by_marshal)
    assert kinds == [True, False]


@pytest.mark.parametrize("extra", [-200, -20, -1, 0, 1, 20, 200])
def test_a_root_with_ids_decides_marshal_ids_by_its_whole_form(extra: int) -> None:
    # The lone-surrogate check hands the compiler its form of a root with `$id` only when that
    # form, made without the ids, is too long already; at every length around the limit the
    # compiler must decide (and key the root) by the whole form's, as when it makes it itself.
    import marshal

    lexeme = schema_compiler._plain_lexeme
    limit = schema_compiler._CONTENT_MARSHAL_SIZE_MAX
    for ids in ({"$id": "https://example.com/s.json"}, {"id": "https://example.com/s.json"}, {}):
        base = {**ids, "type": "object", "description": ""}
        pad = limit - len(marshal.dumps(base, 2)) + extra
        root = {**ids, "type": "object", "description": "x" * max(pad, 0)}
        forms: list[bytes] = []
        assert not schema_compiler._reject_lone_surrogates(root, forms)
        compiler = schema_compiler._Compiler(
            root, lenient=False, additional_properties_default=True,
            key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
            root_form=forms[0] if forms else None,
        )
        whole = marshal.dumps(root, 2)
        assert compiler.content_by_marshal == (len(whole) <= limit), (ids, extra)
        if compiler.content_by_marshal:
            assert compiler.content_id(root) == whole


def test_warnings_taken_back_can_come_again() -> None:
    # `warn` keeps its texts in a set beside the list: a dropped attempt takes them out of both.
    compiler = _compiler()
    compiler.warn("first", "/a")
    kept = len(compiler.warnings)
    compiler.warn("second", "/b")
    compiler.warn("first", "/a")  # a repeat: listed once
    assert compiler.warnings == ["/a: first", "/b: second"]
    compiler.drop_warnings(kept)
    assert compiler.warnings == ["/a: first"]
    compiler.warn("second", "/b")
    assert compiler.warnings == ["/a: first", "/b: second"]


def test_the_symbol_count_counts_every_rule() -> None:
    # What the size limit reads: each rule's symbols and one, also for the rules `any` writes out.
    compiler = _compiler()
    compiler.root = {"type": "object", "properties": {"a": {"type": "array"}}}
    ir = compiler.run()
    assert compiler.any_value is not None
    assert compiler.symbol_count == sum(len(rule.rhs) + 1 for rule in ir.rules)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}}},  # skipped (no reference, no bounded repetition)
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "maxItems": 5}}},
    {"anyOf": [{"type": "integer"}, {"type": "object", "patternProperties": {"^x": {"enum": [1, "a"]}}}]},
    {"type": "array", "uniqueItems": True, "items": {"enum": ["a", "b", "c"]}, "contains": {"const": "a"}},
    {"$defs": {"t": {"type": "object", "properties": {"next": {"$ref": "#/$defs/t"}}}}, "$ref": "#/$defs/t"},
    {"type": "object", "properties": {"a": {}, "b": {"type": "string"}}, "required": ["a"], "minProperties": 2},
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"if": {"required": ["a"]}, "then": {"required": ["b"]}}]},
])
def test_the_prune_is_skipped_only_where_every_nonterminal_is_productive(schema: Any) -> None:
    from tokensieve._grammar.ir import productive_nonterminals

    compiler = _compiler()
    compiler.root = schema
    ir = compiler.run()
    skipped = compiler.productive_made == len(ir.nonterminals)
    if skipped:
        assert all(productive_nonterminals(ir))
    if schema == {"type": "object", "properties": {"a": {"type": "string"}}}:
        assert skipped  # the case the skip is for: without it, nothing here is checked


def test_a_recursion_without_a_way_out_is_still_refused() -> None:
    schema = {"$defs": {"t": {"type": "object", "properties": {"next": {"$ref": "#/$defs/t"}}, "required": ["next"]}},
              "$ref": "#/$defs/t"}
    with pytest.raises(GrammarError, match="no finite value"):
        Grammar.json_schema(schema)


def test_a_pickled_lexeme_leaves_its_hash_behind() -> None:
    # A str's hash is per process: the hash a lexeme keeps must not travel with it.
    import pickle

    from tokensieve._grammar.ir import Lexeme

    lexeme = Lexeme("'x'", "literal", "x", not_patterns=("y",))
    hash(lexeme)
    assert "_hash" in lexeme.__dict__
    copy = pickle.loads(pickle.dumps(lexeme))
    assert "_hash" not in copy.__dict__
    assert copy == lexeme and hash(copy) == hash(lexeme) and {lexeme: 1}[copy] == 1


def test_the_collector_runs_again_after_a_translation() -> None:
    assert gc.isenabled()
    Grammar.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert gc.isenabled()
    try:
        Grammar.json_schema({"type": "no such type"})
    except GrammarError:
        pass
    assert gc.isenabled()
    # Nested: a tool-call grammar translates a structural tag and JSON schemas inside it.
    Grammar.tool_calls(model="qwen_3", tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}])
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    try:
        Grammar.json_schema({"type": "array", "items": {"type": "string"}})
        assert not gc.isenabled()
        Grammar.json_schema({"type": "array", "items": {"type": "integer"}})
        assert not gc.isenabled()
    finally:
        gc.enable()


# (The interrupts also land in finalizers, which Python reports and ignores.)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_translation_interrupted_anywhere_does_not_leave_the_collector_off() -> None:
    """Ctrl-C raises KeyboardInterrupt after any call returns, also inside the pause's
    `__enter__` (after it turned the collector off, before the `with` block began, so
    `__exit__` never ran) or inside `__exit__`: a depth count then stayed above zero and the
    collector off for the rest of the process. Interrupted at random points (a timer whose
    handler raises), the collector is on after the next translation that completes."""
    import random
    import signal

    class Stop(Exception):
        pass

    def stop(*args: object) -> None:
        raise Stop()

    # A small schema: its translation is short, so the pause's own lines take a good share of it.
    schema = {"type": "array", "items": {"type": "integer"}}
    Grammar.json_schema(dict(schema, title="warm"))  # (the instances made before any interrupt)
    previous = signal.signal(signal.SIGALRM, stop)
    rng = random.Random(5)
    interrupted = 0
    try:
        for _ in range(4000):
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-6, 1e-4))
                try:
                    Grammar.json_schema(dict(schema, title=str(rng.random())))  # (new each time: no cache)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except Stop:
                interrupted += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert interrupted > 500, interrupted  # (else this test would not test it)
    Grammar.json_schema({"type": "string", "title": str(rng.random())})
    assert gc.isenabled()


@settings(max_examples=300, deadline=None)
@example((4, [(0, [(False, 1)]), (1, [(False, 2)]), (2, [(False, 3)]), (3, [(True, 0)])]))  # a chain met backwards
@example((2, [(0, [(False, 1)]), (1, [(False, 0)])]))  # a cycle with no way out
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.lists(st.tuples(st.booleans(), st.integers(0, n - 1)), max_size=3)), max_size=12),
)))
def test_productive_nonterminals_is_the_least_fixpoint(grammar: tuple[int, list[tuple[int, list[tuple[bool, int]]]]]) -> None:
    # Against a plain fixpoint of passes (every order of rules: the two-pass shortcut must fall
    # back to the worklist when references come before their rules).
    from tokensieve._grammar.ir import GrammarIR, Sym, productive_nonterminals

    n, rules = grammar
    ir = GrammarIR()
    for i in range(n):
        ir.add_nonterminal(f"n{i}")
    for lhs, rhs in rules:
        ir.add_rule(lhs, [Sym.t(0) if terminal else Sym.n(index) for terminal, index in rhs])
    expected: set[int] = set()
    changed = True
    while changed:
        changed = False
        for rule in ir.rules:
            if rule.lhs not in expected and all(s.terminal or s.index in expected for s in rule.rhs):
                expected.add(rule.lhs)
                changed = True
    assert productive_nonterminals(ir) == [i in expected for i in range(n)]


_listed = st.lists(
    st.one_of(
        st.sampled_from([0, 1, 1.0, 0.0, -0.0, True, False, None, "", "a", "1", float("inf"), float("nan"), 2.5]),
        st.lists(st.sampled_from([1, 1.0, True, "a"]), max_size=2),
        st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from([1, 1.0, None]), max_size=2),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_listed, _listed)
def test_common_values_are_the_pairwise_json_equal_ones(va: list[Any], vb: list[Any]) -> None:
    expected = [v for v in va if any(schema_compiler._json_equal(v, w) for w in vb)]
    assert schema_compiler._common_values(va, vb) == expected


# oneOf options on a discriminator `a` (sometimes not required, not listed, or beside another type),
# and the instances that tell them apart.
_DISCRIMINATOR_VALUES = [1, 1.0, 2, True, "x", None]
_option = st.builds(
    lambda values, extra, required_b, types: {
        "type": types,
        "properties": {"a": {"enum": values}, "b": {"type": "integer"}} if values else {"b": {"type": "integer"}},
        "required": ["a", *(["b"] if required_b else [])] if extra != "a optional" else ["b"],
        **({"additionalProperties": False} if extra == "closed" else {}),
    },
    st.lists(st.sampled_from(_DISCRIMINATOR_VALUES), max_size=3),
    st.sampled_from(["", "", "", "closed", "a optional"]),
    st.booleans(),
    st.sampled_from(["object", "object", "object", ["object", "string"]]),
)
_DISCRIMINATOR_POOL: list[Any] = [
    "x", *({"a": v} for v in _DISCRIMINATOR_VALUES), *({"a": v, "b": 3} for v in _DISCRIMINATOR_VALUES), {"b": 3}, {},
]


@settings(max_examples=400, deadline=None)
@given(st.lists(_option, min_size=3, max_size=5))
@example([{"type": "object", "properties": {"a": {"enum": v}}, "required": ["a"]} for v in ([1, 7], [2], [1.0])])
@example([{"type": "object", "properties": {"a": {"enum": v}}, "required": ["a"]} for v in ([1], [True], [2])])
@example([{"type": ["object", "string"], "properties": {"a": {"enum": v}}, "required": ["a"]} for v in ([1], [True], [2])])
@example([{"type": "object", "properties": {"a": {"enum": v}}, "required": r} for v, r in (([1], ["a"]), ([2], []), ([3], []))])
def test_one_of_options_found_disjoint_share_no_valid_value(options: list[dict[str, Any]]) -> None:
    """`one_of_disjoint` (its pass over a discriminator, `_discriminated`, and its pair by pair
    check) says disjoint only where `jsonschema` finds no instance valid under two options."""
    _check_one_of_disjoint(options, _DISCRIMINATOR_POOL)

def _check_one_of_disjoint(options: list[Any], pool: list[Any]) -> bool:
    """`one_of_disjoint`'s answer for `options`, checked against `jsonschema`: never disjoint
    where an instance of `pool` is valid under two options."""
    lexeme = schema_compiler._plain_lexeme
    compiler = schema_compiler._Compiler(
        {"oneOf": options}, lenient=False, additional_properties_default=True,
        key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
    )
    disjoint = compiler.one_of_disjoint(options, "/oneOf")
    validators = [jsonschema.Draft202012Validator(o) for o in options]
    shared = [v for v in pool if sum(x.is_valid(v) for x in validators) > 1]
    assert not (disjoint and shared), f"found disjoint, but valid under two options: {shared}"
    return disjoint


# oneOf options whose own anyOf/oneOf options decide their disjointness (MaskBench vega's
# `{"oneOf": [{"oneOf": [{"enum": [...]}, {"$ref": "#/refs/signal"}]}, {closed object}]}`), and
# instances that tell such options apart.
_NESTED_LEAVES = [
    {"type": "string"}, {"type": "number"}, {"type": "null"}, {"type": "integer"}, {"enum": ["all", "each"]},
    {"enum": ["each", 1]}, {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
    {"type": "object", "properties": {"r": {"type": "number"}, "c": {"type": "number"}}, "additionalProperties": False},
    {"type": "object", "properties": {"r": {"type": "number"}}}, {"type": "object", "required": ["r"]},
    {"type": "array"}, {},
]
_nested_option = st.recursive(
    st.sampled_from(_NESTED_LEAVES),
    lambda inner: st.builds(
        lambda keyword, options, typed: {**({"type": typed} if typed else {}), keyword: options},
        st.sampled_from(["oneOf", "anyOf"]), st.lists(inner, min_size=1, max_size=3),
        st.sampled_from([None, None, "object", ["string", "object"]]),
    ),
    max_leaves=6,
)
_NESTED_POOL: list[Any] = [
    "all", "x", 1, 2.5, None, True, [], [1], {}, {"s": "a"}, {"s": 1}, {"r": 1}, {"r": "a"}, {"c": 2}, {"r": 1, "c": 2},
    {"s": "a", "r": 1}, {"s": "a", "c": 1}, {"t": 1},
]


@settings(max_examples=600, deadline=None)
@given(st.lists(_nested_option, min_size=2, max_size=3))
@example([{"oneOf": [{"enum": ["all", "each"]}, _NESTED_LEAVES[6]]}, _NESTED_LEAVES[7]])
@example([{"oneOf": [{"type": "number"}, _NESTED_LEAVES[6]]}, {"type": "null"}, _NESTED_LEAVES[7]])
@example([{"anyOf": [{"type": "number"}, _NESTED_LEAVES[8]]}, _NESTED_LEAVES[7]])
def test_one_of_options_found_disjoint_through_their_options_share_no_valid_value(options: list[Any]) -> None:
    """`one_of_disjoint` looking into the options' own `anyOf`/`oneOf` (`pair_disjoint`) says
    disjoint only where `jsonschema` finds no instance valid under two options; and it does see
    vega's shape (a nested oneOf of strings and a keyed object, beside a closed object)."""
    disjoint = _check_one_of_disjoint(options, _NESTED_POOL)
    if options == [{"oneOf": [{"enum": ["all", "each"]}, _NESTED_LEAVES[6]]}, _NESTED_LEAVES[7]]:
        assert disjoint


# anyOf options that the schema beside them may imply (`_implied_option`), and instances over
# their keys and types.
_IMPLIED_KEYS = ["a", "b", "c"]
_implied_rest = st.builds(
    lambda types, required: {**({"type": types} if types else {}), **({"required": required} if required else {})},
    st.sampled_from([None, "object", ["object", "string"], ["integer", "null"], "number"]),
    st.lists(st.sampled_from(_IMPLIED_KEYS), unique=True, max_size=3),
)
_implied_opt = st.one_of(
    st.just(True), st.just(False), st.just({}), st.just({"title": "t"}),
    st.builds(
        lambda types, required: {**({"type": types} if types else {}), **({"required": required} if required is not None else {})},
        st.sampled_from([None, "object", ["object", "string"], "integer", "number", ["number", "null"]]),
        st.one_of(st.none(), st.lists(st.sampled_from(_IMPLIED_KEYS), unique=True, max_size=3)),
    ),
    st.sampled_from([{"required": ["a"], "minProperties": 1}, {"properties": {"a": {"type": "string"}}}]),
)
_IMPLIED_POOL: list[Any] = [
    None, True, 0, 2, 1.5, "s", [], *({k: 1 for k in ks} for n in range(4) for ks in itertools.combinations(_IMPLIED_KEYS, n)),
]


@settings(max_examples=400, deadline=None)
@given(_implied_rest, _implied_opt)
@example({"type": "object", "required": ["a"]}, {"required": ["a"]})
@example({"type": ["integer", "null"]}, {"type": ["number", "null"]})
def test_an_implied_any_of_option_holds_on_every_value_of_the_rest(rest: dict[str, Any], option: Any) -> None:
    """`_implied_option` says an option holds on every value of the schema beside the anyOf only
    where `jsonschema` finds no pool instance valid under that schema and not under the option."""
    lexeme = schema_compiler._plain_lexeme
    compiler = schema_compiler._Compiler(
        rest, lenient=False, additional_properties_default=True,
        key_separator=lexeme("':'", "literal", ":"), item_separator=lexeme("','", "literal", ","),
    )
    flat = compiler.flatten(rest, "")
    implied = flat is not None and schema_compiler._implied_option(flat, option)
    beside, under = jsonschema.Draft202012Validator(rest), jsonschema.Draft202012Validator(option)
    outside = [v for v in _IMPLIED_POOL if beside.is_valid(v) and not under.is_valid(v)]
    assert not (implied and outside), f"found implied, but valid beside and not under the option: {outside}"
    if rest == {"type": "object", "required": ["a"]} and option == {"required": ["a"]}:
        assert implied

# A tmlanguage-like object (MaskBench JsonSchemaStore---tmlanguage): dependencies among its keys,
# each expanded as "the key absent | the key and its dependants present".
_DEPENDENT_KEYS = ["begin", "end", "while", "contentName", "beginCaptures", "whileCaptures", "endCaptures", "last"]
_DEPENDENT = {
    "type": "object",
    "properties": {"comment": {"type": "string"}, **{k: {"type": "string"} for k in _DEPENDENT_KEYS}},
    "dependencies": {
        "begin": {"anyOf": [{"required": ["end"]}, {"required": ["while"]}]},
        "end": ["begin"],
        "while": ["begin"],
        "contentName": {"anyOf": [{"required": ["begin", "end"]}, {"required": ["begin", "while"]}]},
        "beginCaptures": {"anyOf": [{"required": ["begin", "end"]}, {"required": ["begin", "while"]}]},
        "whileCaptures": ["begin", "while"],
        "endCaptures": ["begin", "end"],
        "last": ["end"],
    },
}


def test_dependencies_accept_exactly_the_valid_key_sets() -> None:
    """Every subset of the dependent keys (with and without a free key), in schema order and
    reversed, against `jsonschema`; and the alternatives that differ only in where a forbidden
    key (`false`) stands are translated once (before: 1,043 objects for tmlanguage's 8)."""
    from reference_cfg import ReferenceRecognizer

    ir = schema_compiler.json_schema_to_ir(_DEPENDENT)
    objects = sum(1 for name in ir.nonterminals if name.endswith(":object"))
    assert objects <= 100, objects
    rec = ReferenceRecognizer(ir)
    validator = jsonschema.Draft7Validator(_DEPENDENT)
    accepted = 0
    for mask in range(1 << len(_DEPENDENT_KEYS)):
        keys = [k for i, k in enumerate(_DEPENDENT_KEYS) if mask >> i & 1]
        for free in (False, True):
            instance = {**({"comment": "c"} if free else {}), **{k: "v" for k in keys}}
            valid = validator.is_valid(instance)
            accepted += valid
            assert rec.full_match(json.dumps(instance, separators=(",", ":"))) == valid, instance
    assert accepted > 20  # the oracle does accept a fair share


# A saucectl-like chain (MaskBench JsonSchemaStore---saucectl.schema): `if` on a discriminator
# without `required`, two of them on one value (with a second condition), so a failed `if` is a
# `not const` nested apart from the `const` a passed one left beside the enum.
_KINDS = ["a", "b", "c", "d", "e"]
_DISCRIMINATED = {
    "type": "object",
    "properties": {"kind": {"enum": _KINDS}, "v": {"enum": [1, 2]}, **{k: {"type": "integer"} for k in _KINDS}},
    "required": ["kind"],
    "additionalProperties": False,
    "allOf": [
        {"if": {"properties": {"kind": {"const": k}, **({"v": {"const": v}} if v else {})}}, "then": {"required": [k]}}
        for k, v in [("a", 1), ("a", 2), ("b", 0), ("c", 0), ("d", 0), ("e", 0)]
    ],
}


def test_a_discriminator_chain_drops_dead_alternatives_early() -> None:
    """Every kind (and none, and one outside the enum) with every payload key and `v`, against
    `jsonschema`; and the alternatives whose discriminator the `if`s have left no value are
    dropped before they expand (before: 71 of 141 objects compiled were dead)."""
    from reference_cfg import ReferenceRecognizer

    compiled: list[bool] = []
    original = schema_compiler._Compiler.compile_object

    def counting(self: Any, d: dict[str, Any], pointer: str) -> Any:
        result = original(self, d, pointer)
        compiled.append(result is not None)
        return result

    schema_compiler._Compiler.compile_object = counting  # type: ignore[method-assign]
    try:
        ir = schema_compiler.json_schema_to_ir(_DISCRIMINATED)
    finally:
        schema_compiler._Compiler.compile_object = original  # type: ignore[method-assign]
    assert compiled.count(False) == 0, (compiled.count(False), len(compiled))
    rec = ReferenceRecognizer(ir)
    validator = jsonschema.Draft202012Validator(_DISCRIMINATED)
    accepted = 0
    for kind in [*_KINDS, "z", None]:
        for payload in [None, *_KINDS]:
            for v in (None, 1, 2):
                instance = {**({"kind": kind} if kind else {}), **({"v": v} if v else {}), **({payload: 1} if payload else {})}
                valid = validator.is_valid(instance)
                accepted += valid
                assert rec.full_match(json.dumps(instance, separators=(",", ":"))) == valid, instance
    assert accepted == 3 * len(_KINDS)  # each kind with its own payload key, whatever `v`


_scalars = st.sampled_from([0, 1, 1.0, True, False, None, "a", "b", "1", 2.5])
_negated_lists = st.one_of(
    st.lists(_scalars, max_size=3).map(lambda v: {"enum": v}),
    _scalars.map(lambda v: {"const": v}),
    st.just({"description": "lists nothing: its negation excludes every value"}),
    st.just({"enum": [[1], "a"]}),  # an array: not compared by value keys
    st.tuples(_scalars, st.lists(_scalars, max_size=3)).map(lambda t: {"const": t[0], "enum": t[1], "title": "two lists"}),
)
_value_lists = st.recursive(
    st.one_of(
        st.lists(_scalars, max_size=4).map(lambda v: {"enum": v}),
        _scalars.map(lambda v: {"const": v, "description": "x"}),
    ),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda parts: {"allOf": parts}),
        st.tuples(inner, _negated_lists).map(lambda t: {**t[0], "_clauses": [{"not": t[1], "_at": "/x"}]}),
    ),
    max_leaves=6,
)


def _holds(schema: dict[str, Any], value: Any) -> bool:
    """The reference: does `value` meet a value-list schema, keyword by keyword."""
    equal = schema_compiler._json_equal
    if set(schema) <= {"description"}:
        return True  # lists nothing: holds for every value
    if "const" in schema and not equal(schema["const"], value):
        return False
    if "enum" in schema and not any(equal(v, value) for v in schema["enum"]):
        return False
    if not all(_holds(part, value) for part in schema.get("allOf", [])):
        return False
    return not any(_holds(clause["not"], value) for clause in schema.get("_clauses", []))


@settings(max_examples=300, deadline=None)
@given(_value_lists, _value_lists)
def test_and_of_value_lists_is_one_enum_of_the_common_values(a: dict[str, Any], b: dict[str, Any]) -> None:
    merged = schema_compiler._and(a, b)
    universe = [0, 1, 1.0, True, False, None, "a", "b", "1", 2.5, "z"]
    for value in universe:
        assert _holds(merged, value) == (_holds(a, value) and _holds(b, value)), (merged, value)
    text = json.dumps([a, b])
    if a != b and not any(mark in text for mark in ("[1]", "lists nothing", "two lists")):
        assert set(merged) == {"enum"}, merged  # one plain list, whatever the nesting was


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"allOf": [{"const": 1}, {"const": True}]}, {"const": "a"}]},
        {"allOf": [{"enum": [1, "a"]}, {"enum": [True, "a"]}]},
        {"allOf": [{"enum": [0, "a"]}, {"enum": [False, "a"]}]},
        {"type": "object", "properties": {"k": {"const": 1}}, "allOf": [{"properties": {"k": {"const": True}}}]},
    ],
)
def test_merged_value_lists_tell_booleans_from_numbers(schema: dict[str, Any]) -> None:
    """1 and true are different JSON values (Python's `==` says otherwise): against `jsonschema`."""
    from reference_cfg import ReferenceRecognizer

    rec = ReferenceRecognizer(schema_compiler.json_schema_to_ir(schema))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [1, True, 0, False, "a", {"k": 1}, {"k": True}, {}]:
        assert rec.full_match(json.dumps(value, separators=(",", ":"))) == validator.is_valid(value), value


@pytest.mark.parametrize("pair", [(1, True), (True, 1), (0, False), (1.0, True)])
def test_failed_ifs_on_a_number_and_a_boolean_exclude_both(pair: tuple[Any, Any]) -> None:
    """Two `if`s on one member, one on a number and one on the boolean Python's `==` takes for
    it: where both fail, the member excludes both values (merging the two exclusions kept one
    of them: `{"t": true}` passed without the `then` of `t = true`). Every instance in every
    order against `jsonschema`: accepted ones are valid, and each valid one is accepted in
    some order."""
    from reference_cfg import ReferenceRecognizer

    first, second = pair
    schema = {
        "type": "object",
        "properties": {"t": {}},
        "required": ["t"],
        "allOf": [
            {"if": {"properties": {"t": {"const": first}}}, "then": {"required": ["p"]}},
            {"if": {"properties": {"t": {"const": second}}}, "then": {"required": ["q"]}},
        ],
    }
    rec = ReferenceRecognizer(schema_compiler.json_schema_to_ir(schema))
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = []
    for t in [1, True, 0, False, 2, "a"]:
        for extra in ([], ["p"], ["q"], ["p", "q"]):
            value = {"t": t, **dict.fromkeys(extra, 1)}
            valid = validator.is_valid(value)
            texts = [json.dumps({k: value[k] for k in keys}, separators=(",", ":")) for keys in itertools.permutations(value)]
            accepted = [text for text in texts if rec.full_match(text)]
            assert valid or not accepted, accepted
            assert not valid or accepted, value
            verdicts.append(valid)
    assert verdicts.count(False) >= 2 and verdicts.count(True) >= 10, verdicts


# A jfrog-pipelines-like chain (MaskBench JsonSchemaStore---jfrog-pipelines: 28 `if type is X
# then <X's object>` on steps): the discriminator required, each `then` a closed object.
_STEP_KINDS = [f"k{i}" for i in range(10)]
_STEPS = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "type": {"type": "string", "enum": _STEP_KINDS}},
    "required": ["type"],
    "allOf": [
        {
            "if": {"properties": {"type": {"enum": [k]}}},
            "then": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "type": {"type": "string"}, f"p{k}": {"type": "integer"}},
                "required": ["type", f"p{k}"],
                "additionalProperties": False,
            },
        }
        for k in _STEP_KINDS
    ],
}


def test_an_if_chain_on_a_required_discriminator_merges_only_live_alternatives() -> None:
    """Each kind (and one outside the enum, and none) with each payload key, in every order,
    against `jsonschema`, and accepted in both orders of `name` and `type` where valid; and once
    a cell has chosen a `then`, the `if`s after it (which fail on its discriminator) merge
    nothing: their `if` and `then` is dead, their negation what the cell holds
    (`_Compiler.failed_if`; before: 2 merges per clause after the chosen one, 110 here, now 20)."""
    import sys

    from reference_cfg import ReferenceRecognizer

    merges = 0
    original = schema_compiler._Compiler.merge

    def counting(self: Any, a: dict[str, Any], b: dict[str, Any], pointer: str) -> Any:
        nonlocal merges
        merges += sys._getframe(1).f_code.co_name == "cell_node"  # the expansion's (not flatten's)
        return original(self, a, b, pointer)

    schema_compiler._Compiler.merge = counting  # type: ignore[method-assign]
    try:
        ir = schema_compiler.json_schema_to_ir(_STEPS)
    finally:
        schema_compiler._Compiler.merge = original  # type: ignore[method-assign]
    assert merges <= 2 * len(_STEP_KINDS), merges
    rec = ReferenceRecognizer(ir)
    validator = jsonschema.Draft202012Validator(_STEPS)
    accepted = 0
    for kind in [*_STEP_KINDS[:3], _STEP_KINDS[-1], "z", None]:
        for payload in [None, *(f"p{k}" for k in _STEP_KINDS[:3]), f"p{_STEP_KINDS[-1]}"]:
            instance = {"name": "n", **({"type": kind} if kind else {}), **({payload: 1} if payload else {})}
            valid = validator.is_valid(instance)
            accepted += valid
            for keys in itertools.permutations(instance):
                text = json.dumps({k: instance[k] for k in keys}, separators=(",", ":"))
                adjacent = kind is None or abs(keys.index("name") - keys.index("type")) == 1
                if adjacent and (payload is None or keys[-1] == payload):
                    assert rec.full_match(text) == valid, text  # an order the expansion takes
                else:
                    assert valid or not rec.full_match(text), text
    assert accepted == 4  # each kind listed with its own payload key


@given(st.lists(st.text(max_size=6), min_size=2, max_size=6))
@example(["a", 'q"t', "b\\c", "ü", "\n"])
def test_a_string_lists_lexeme_names_its_first_values_as_json(texts: list[str]) -> None:
    """`_json_strings_lexeme`'s name shows its first three values as `json.dumps` spells them
    (a plain text quoted directly, without the call); equal lists get equal names."""
    from tokensieve._grammar.json_schema.strings import _json_strings_lexeme

    unique = list(dict.fromkeys(texts))
    shown = ", ".join(json.dumps(t, ensure_ascii=False) for t in unique[:3])
    assert _json_strings_lexeme(texts).name == f"one of {len(unique)} strings ({shown}, …)"
