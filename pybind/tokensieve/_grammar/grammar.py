"""Grammar descriptions and their compiled form in the core."""

from __future__ import annotations

import functools
import gc
import json
import pickle
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from .._errors import ArgumentError, GrammarError
from .._core import default_pool
from .._core.fork import after_fork, renew_lock_after_fork
from .._core.handles import CoreHandles
from .ir import encode_ir
from .shape import check_tree_shaped

if TYPE_CHECKING:
    from .._core import Core
    from .ir import GrammarIR


@dataclass(frozen=True)
class Limits:
    """Work and size limits of a compiled grammar; going over one is a `LimitError` whose
    `.limit` names it (see docs/limits.md for what each bounds and its measured cost).

    The defaults bound every call into the core (a mask, a consume, forced bytes, a healing
    question) to under 10 ms of work in wasmtime; compiling gets a larger budget.

    Attributes:
        step_fuel_max: derivative, emptiness and lexer-table work one call may do, in fuel
            units charged by the size of the terms built (15–20 ns each). Limit `step_fuel`.
        dfa_state_count_max: lexer DFA states the grammar may build (each costs a table row of
            4 bytes per byte class plus its expression list, and 64 bytes once a mask's walk
            starts from it). Limit `lexer_states`.
        expression_count_max: expression terms the grammar may hold (about 40 bytes each).
            Limit `expressions`.
        parser_row_items_max: Earley items in one parser row. Limit `parser_row_items`.
        parser_step_items_max: parser work one call may do: Earley items built plus items
            examined by completions and scans (about 6 ns each). Limit `parser_step_items`.
        token_history_max: tokens a matcher of the grammar may hold (rollback depth).
            Limit `token_history`.
        compile_fuel_max: the fuel of compiling the grammar and of a matcher's first row.
            Limit `compile_fuel`.
    """

    step_fuel_max: int = 300_000
    dfa_state_count_max: int = 100_000
    expression_count_max: int = 2_000_000
    parser_row_items_max: int = 20_000
    parser_step_items_max: int = 150_000
    token_history_max: int = 1_000_000
    compile_fuel_max: int = 8_000_000

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 0xFFFFFFFF:
                raise ValueError(f"Limits.{field.name} must be an int in 1..2**32-1, not {value!r}")

    def core_values(self) -> list[int]:
        """The values in the order the core takes them (made once per `Limits`: every grammar
        compile asks)."""
        values = self.__dict__.get("_core_values")
        if values is None:
            from .._core.binding import LIMIT_FIELDS

            values = self.__dict__["_core_values"] = [getattr(self, attribute) for _, attribute in LIMIT_FIELDS]
        return list(values)


# The limits of a grammar built without any: one shared (frozen) instance, not a new one per
# grammar (`__post_init__` checks every field, a few µs per compile).
_DEFAULT_LIMITS = Limits()

_F = TypeVar("_F", bound=Callable[..., Any])


class _CollectorPause:
    """Python's cyclic garbage collector paused while a front-end translates a grammar.

    A translation allocates tens of thousands of containers, most of which live until it ends
    (memo tables, the IR, sub-grammars): the collector's generation-0 passes ran 15 times in
    a 128-tool compile and traced them over and over without freeing any (~10% of its CPU).
    Reference counting still frees everything as usual; the one collection the translation's
    allocations call for runs when it ends, inside it.

    Each translation turns the collector off if it was on, and back on when it ends, by a flag
    of its own inside its `try` (`__call__`): an exception a signal handler raises (Ctrl-C)
    can come after any call returns, also between the collector going off and the `try`, and
    no state outside the call may depend on the rest of it running. (A process-wide depth
    count did: interrupted in its `__enter__`, it stayed above zero and the collector off for
    the rest of the process.) Nested and concurrent translations find the collector off and
    leave it to the one that turned it off, so one that outlives it finishes with the
    collector on; a collector the caller turned off stays off.
    """

    def __init__(self) -> None:
        # Translations between turning the collector off and on again (best effort: an
        # interrupt between the count and the call can leave it one off); read after a fork.
        self._running = 0

    def __call__(self, function: _F) -> _F:
        @functools.wraps(function)
        def paused(*args: Any, **kwargs: Any) -> Any:
            was = False
            try:
                was = gc.isenabled()
                if was:
                    self._running += 1  # (no call between the two: nothing can come between)
                    gc.disable()
                return function(*args, **kwargs)
            finally:
                if was:
                    self._running -= 1
                    gc.enable()
                    self._collect()

        return paused  # type: ignore[return-value]

    @staticmethod
    def _collect() -> None:
        # The collection the translation's allocations call for, now rather than in whatever
        # allocates next (the caller's next call would pay for it): a young generation over its
        # threshold, with the middle one when that is over its own.
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if counts[0] > thresholds[0]:
            gc.collect(1 if counts[1] >= thresholds[1] else 0)

    def after_fork_in_child(self) -> None:
        """A translation another thread was running when the process forked never ends in the
        child: resume the collector it had paused."""
        if self._running:
            self._running = 0
            gc.enable()


_collector_paused = _CollectorPause()
after_fork(_collector_paused.after_fork_in_child)


class Grammar:
    """A grammar the output must follow. Build one with a constructor such as `Grammar.regex`.

    A grammar is compiled once per core instance and shared by every `Matcher` built from it,
    together with its lazily built lexer DFA: reuse one `Grammar` object for many requests.
    """

    kind: str
    limits: Limits

    def __init__(self, kind: str, source: str, ir: GrammarIR, limits: Limits | None = None) -> None:
        # The IR's binary form, what each instance compiles (`encode_ir`). The IR itself is not
        # kept: a large schema's is tens of thousands of objects (MaskBench kb_1161: 29,500,
        # NamedTuples the collector never stops tracing), which the collection at the end of
        # the translation traced (~1.1 ms) and every later full collection would trace again.
        # Whether a lexeme matches special tokens (`<|name|>`): forced ones then come out of
        # `compute_ff_tokens` as their ids (`_decoding/fastforward.py`).
        self._set(kind, source, encode_ir(ir), any(lexeme.kind == "special" for lexeme in ir.lexemes), limits)

    def _set(self, kind: str, source: str, encoded_ir: bytes, has_special_lexemes: bool, limits: Limits | None) -> None:
        """Every field, from the IR's binary form (`__init__`, and `_restored_grammar` for a
        pickled grammar)."""
        self.kind = kind
        self._source: str | None = source
        self._source_data: Any = None  # a schema given as data, until `source` is first read
        if limits is not None and not isinstance(limits, Limits):
            raise ArgumentError(f"limits must be a tokensieve.Limits, not {type(limits).__name__}")
        self.limits = limits or _DEFAULT_LIMITS
        self._encoded_ir = encoded_ir
        self.has_special_lexemes = has_special_lexemes
        self._handles = CoreHandles("grammar")

    @property
    def encoded_ir(self) -> bytes:
        """The grammar in the binary form every core instance compiles (`ts_grammar_new_ir`,
        layout in wasm/ABI.md): what another WASM host passes to the module."""
        return self._encoded_ir

    @property
    def source(self) -> str:
        """The grammar's text as given; a JSON Schema given as data: its JSON text, made when
        first read (nothing else needs it, and a large schema's text costs as much as a tenth
        of its translation), so from the schema as it is then."""
        if self._source is None:
            self._source = json.dumps(self._source_data)
            self._source_data = None
        return self._source

    @classmethod
    def regex(
        cls, pattern: str, *, dot_all: bool = False, ignore_case: bool = False, limits: Limits | None = None
    ) -> Grammar:
        """A grammar whose whole output must match the regular expression `pattern`.

        The syntax is the common core of ECMA-262 and Rust regexes (see `docs/lexer.md`, "Syntax"):
        literals, escapes, `.`, classes, groups, alternation, `? * + {m} {m,} {m,n}`, and `^`/`$`
        at the ends (the match is always anchored at both ends).

        Args:
            pattern: the regular expression.
            dot_all: `.` also matches a newline.
            ignore_case: ASCII letters match both cases.
            limits: work and size limits (defaults: `Limits()`).

        Raises:
            GrammarError: the pattern is malformed or uses an unsupported construct; its
                `position` and `column` give the offset (in characters) into `pattern`.
        """
        if not isinstance(pattern, str):
            raise ArgumentError(f"Grammar.regex takes a str pattern, not {type(pattern).__name__}")
        _reject_lone_surrogates(pattern, "pattern")
        from .ir import GrammarIR, Lexeme, Sym

        ir = GrammarIR()
        start = ir.add_nonterminal("start")
        lexeme = Lexeme("regex", "regex", pattern, dot_all=dot_all, ignore_case=ignore_case)
        ir.add_rule(start, [Sym.t(ir.add_lexeme(lexeme))])
        return cls.from_ir(ir, source=pattern, kind="regex", limits=limits)

    def __repr__(self) -> str:
        return f"Grammar.{self.kind}({self.source!r})"

    @classmethod
    def from_ir(cls, ir: GrammarIR, *, source: str = "", kind: str = "ir", limits: Limits | None = None) -> Grammar:
        """A grammar from the IR the front-ends produce (see docs/grammar_ir.md).

        Raises:
            GrammarError: a lexeme's pattern is malformed (the message names the lexeme).
        """
        try:
            grammar = cls(kind, source, ir, limits)
            # Compiled where the next matcher goes (`CorePool.place` prefers it on a tie), so
            # that its first matcher finds it built. A pattern the core refuses is refused
            # here, in every instance alike: a later instance compiles the same bytes.
            grammar.core_handle(default_pool().least_loaded())
        except GrammarError as err:
            if kind == "regex":
                raise _with_char_position(err, source, source.encode("utf-8")) from None
            raise _name_lexeme(err, ir) from None
        return grammar

    @classmethod
    @_collector_paused
    def lark(cls, text: str, *, tokenizer: Any = None, limits: Limits | None = None) -> Grammar:
        """A grammar in the Lark-like syntax llguidance users write (see docs/lark.md).

        Args:
            text: the grammar; `start` is the start rule.
            tokenizer: needed only to resolve special tokens named like `<|eot_id|>`.
            limits: work and size limits.

        Raises:
            GrammarError: with `line` and `column` of the problem.
        """
        from .lark import lark_to_ir

        _reject_lone_surrogates(text, "Lark grammar")
        ir = lark_to_ir(text, special_tokens=_special_token_map(tokenizer))
        return cls.from_ir(ir, source=text, kind="lark", limits=limits)

    @classmethod
    @_collector_paused
    def json_schema(
        cls,
        schema: dict[str, Any] | bool | str,
        *,
        whitespace: str = "flexible",
        lenient: bool = False,
        additional_properties_default: bool = True,
        key_separator: str = ":",
        item_separator: str = ",",
        limits: Limits | None = None,
        property_order: str = "schema",
    ) -> Grammar:
        """A grammar whose matches are the JSON texts valid under a JSON Schema.

        A top-level `"x-guidance"` object in the schema (llguidance's options) overrides the
        keyword arguments it names; its separators are regexes (docs/lark.md, "x-guidance").

        Args:
            schema: the schema, parsed (dict or bool) or as JSON text.
            whitespace: `"flexible"` (whitespace between lexemes), `"compact"`, or a skip regex.
            lenient: ignore unsupported keywords with a warning instead of an error.
            additional_properties_default: how a missing `additionalProperties` counts.
            key_separator: the text between a key and its value.
            item_separator: the text between items and between properties.
            limits: work and size limits.
            property_order: `"schema"` (keys in `properties` order) or `"any"` (the declared
                properties in any order, each at most once; `docs/json_schema.md` says where
                this is exact).

        Raises:
            GrammarError: with `json_pointer` naming the unsupported or invalid part.
        """
        from .json_schema.compiler import json_schema_to_ir

        if not isinstance(schema, str):  # objects built in Python or loaded from YAML may share nodes
            check_tree_shaped(schema)
        ir = json_schema_to_ir(
            schema,
            whitespace=whitespace,
            lenient=lenient,
            additional_properties_default=additional_properties_default,
            key_separator=key_separator,
            item_separator=item_separator,
            property_order=property_order,
        )
        if isinstance(schema, str):
            return cls.from_ir(ir, source=schema, kind="json_schema", limits=limits)
        grammar = cls.from_ir(ir, kind="json_schema", limits=limits)
        grammar._source, grammar._source_data = None, schema
        return grammar

    @classmethod
    @_collector_paused
    def structural_tag(cls, spec: Any, *, tokenizer: Any = None, limits: Limits | None = None) -> Grammar:
        """A grammar from a structural tag: XGrammar's format for tool calls and reasoning.

        `{"type": "structural_tag", "format": {...}}` as a dict or JSON text (the legacy form
        with `structures` and `triggers` too); the formats and their meaning are in
        `docs/tool_calling.md`.

        Args:
            spec: the structural tag.
            tokenizer: the model's tokenizer: literal pieces that are special tokens' texts
                (`<|call|>`) then match those tokens, and the token formats resolve names.
            limits: work and size limits.

        Raises:
            GrammarError: with `json_pointer` naming the bad node.
        """
        from .structural_tag import structural_tag_to_ir

        if not isinstance(spec, str):
            check_tree_shaped(spec, "the structural tag")  # json.dumps writes a shared node once per place
        try:
            source = spec if isinstance(spec, str) else json.dumps(spec)
        except RecursionError:
            raise GrammarError("the structural tag nests too deeply to read", json_pointer="") from None
        except (TypeError, ValueError) as err:
            raise GrammarError(f"the structural tag is not JSON data: {err}", json_pointer="") from None
        key = ("structural_tag", source, limits)
        cached = _cache.get(tokenizer, key)
        if cached is not None:
            return cached
        ir = structural_tag_to_ir(spec, tokenizer=tokenizer)
        try:
            grammar = cls.from_ir(ir, source=source, kind="structural_tag", limits=limits)
        except GrammarError as error:
            pointer = ir.options.get("lexeme_pointers", {}).get(error.lexeme)  # type: ignore[union-attr]
            if pointer is None or error.json_pointer is not None:
                raise
            raise GrammarError(f"{pointer}: {error}", json_pointer=pointer, lexeme=error.lexeme) from error
        return _cache.put(tokenizer, key, grammar)

    @classmethod
    @_collector_paused
    def tool_calls(
        cls,
        *,
        model: str,
        tools: Sequence[Any] = (),
        tool_choice: Any = "auto",
        parallel_tool_calls: bool = True,
        reasoning: bool | str = "enabled",
        tokenizer: Any = None,
        limits: Limits | None = None,
    ) -> Grammar:
        """A grammar for a model family's tool calls, from the OpenAI request's fields.

        The structural tag it compiles is `tokensieve.tool_call_structural_tag(...)` with the
        same arguments (and `grammar.source` as JSON text); `docs/tool_calling.md` shows each
        family's format.

        Args:
            model: the output format (`"llama"`, `"qwen_3"`, `"hermes"`, `"qwen_3_coder"`,
                `"deepseek_v3_1"`, `"harmony"`, `"kimi"`, `"mistral"`).
            tools: OpenAI tools (`{"type": "function", "function": {...}}`).
            tool_choice: `"auto"`, `"required"`, `"none"`, a named function, or
                `{"type": "allowed_tools", ...}`.
            parallel_tool_calls: False allows at most one call.
            reasoning: `"enabled"`, `"disabled"` or `"auto"` (a leading thinking block).
            tokenizer: the model's tokenizer: markers that are special tokens match them.
            limits: work and size limits.

        Raises:
            GrammarError: an unknown family or a malformed request.
        """
        from .tool_calls import tool_call_structural_tag

        try:
            # Pickling is the cheapest exact serialization of the request (4x faster than JSON
            # on 128 tools, which is most of a cached call).
            request: bytes | None = pickle.dumps([model, list(tools), tool_choice, parallel_tool_calls, reasoning], protocol=5)
        except Exception:  # noqa: BLE001 — anything unpicklable: the tag builder names what is wrong
            request = None
        key = ("tool_calls", request, limits)
        cached = _cache.get(tokenizer, key) if request is not None else None
        if cached is not None:
            return cached
        spec = tool_call_structural_tag(
            model=model, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls, reasoning=reasoning,
        )
        grammar = cls.structural_tag(spec, tokenizer=tokenizer, limits=limits)
        return _cache.put(tokenizer, key, grammar) if request is not None else grammar

    @classmethod
    @_collector_paused
    def gbnf(cls, text: str, *, limits: Limits | None = None) -> Grammar:
        """A grammar in llama.cpp's GBNF syntax (`root ::= …`).

        Raises:
            GrammarError: with `line` and `column` of the problem.
        """
        from .gbnf import gbnf_to_ir

        _reject_lone_surrogates(text, "GBNF grammar")
        return cls.from_ir(gbnf_to_ir(text), source=text, kind="gbnf", limits=limits)

    @classmethod
    def choice(cls, options: Sequence[str], *, limits: Limits | None = None) -> Grammar:
        """A grammar whose output is exactly one of `options`.

        The options become one lexeme, whose expression the core factors into the trie of the
        options: 10,000 options compile in tens of ms into a few MB (docs/lexer.md).

        Raises:
            GrammarError: `options` is empty.
        """
        from .ir import GrammarIR, Lexeme, Sym, alternation_regex

        if isinstance(options, (str, bytes)) or not hasattr(options, "__iter__"):
            # (a str is a sequence of its characters: "abc" would have meant "a", "b" or "c")
            raise ArgumentError(f"Grammar.choice takes a list of strings, not {type(options).__name__}")
        options = list(options)
        if not options or not all(isinstance(o, str) for o in options):
            raise GrammarError("Grammar.choice needs a non-empty list of strings")
        ir = GrammarIR()
        start = ir.add_nonterminal("start")
        texts = list(dict.fromkeys(o for o in options if o))
        if len(texts) < len(options) and "" in options:
            ir.add_rule(start, [])
        if len(texts) == 1:
            ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme(repr(texts[0]), "literal", texts[0])))])
        elif texts:
            name = f"one of {len(texts)} choices"
            ir.add_rule(start, [Sym.t(ir.add_lexeme(Lexeme(name, "regex", alternation_regex(texts))))])
        return cls.from_ir(ir, source=repr(options), kind="choice", limits=limits)

    def __reduce__(self) -> tuple[Callable[..., Grammar], tuple[Any, ...]]:
        """Pickle (multiprocessing, Ray, `copy.deepcopy`) the grammar's binary form with its
        kind, source and limits; not its compiled form in this process's core instances,
        which the copy makes again (the core's compile only: no front-end runs again)."""
        return _restored_grammar, (self.kind, self.source, self._encoded_ir, self.limits, self.has_special_lexemes)

    def built_in(self, core: Core) -> bool:
        """Is the grammar compiled in `core` already?"""
        return self._handles.built_in(core)

    def core_handle(self, core: Core) -> int:
        """The compiled grammar in `core`, compiling it on first use there."""
        return self._handles.get(self, core, self._compile)

    def _compile(self, core: Core) -> int:
        return core.grammar_new(self._encoded_ir, self.limits.core_values())


def _restored_grammar(kind: str, source: str, encoded_ir: bytes, limits: Limits, has_special_lexemes: bool) -> Grammar:
    """A pickled `Grammar` (`Grammar.__reduce__`), compiled where its next matcher goes, as
    `Grammar.from_ir` does (so bytes the core refuses are refused here)."""
    if not (isinstance(encoded_ir, bytes) and isinstance(limits, Limits) and isinstance(kind, str)):
        raise ArgumentError("not a pickled tokensieve Grammar")
    grammar = object.__new__(Grammar)
    grammar._set(kind, source, encoded_ir, bool(has_special_lexemes), limits)
    grammar.core_handle(default_pool().least_loaded())
    return grammar


def _reject_lone_surrogates(text: Any, what: str) -> None:
    """Refuse a text holding a lone surrogate (a `str` can, UTF-8 cannot), naming its place."""
    if not isinstance(text, str):
        raise ArgumentError(f"the {what} must be a str, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        position = err.start
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        raise GrammarError(
            f"the {what} holds a lone surrogate U+{ord(text[position]):04X} at line {line}, column {column} "
            f"(character {position}); it is not a Unicode character and has no UTF-8 form: remove it",
            position=position,
            line=line,
            column=column,
        ) from None


def _with_char_position(err: GrammarError, source: str, data: bytes) -> GrammarError:
    """Turn the core's byte offset into a character offset, line and column in `source`."""
    if err.position is None:
        return err
    char_pos = len(data[: err.position].decode("utf-8", "replace"))
    line = source.count("\n", 0, char_pos) + 1
    column = char_pos - (source.rfind("\n", 0, char_pos) + 1) + 1
    message = str(err)
    pointer = f"\n  {source}\n  {' ' * char_pos}^" if "\n" not in source and len(source) < 200 else ""
    return GrammarError(
        f"bad regex at position {char_pos}: {message}{pointer}",
        position=char_pos,
        line=line,
        column=column,
    )


def _name_lexeme(err: GrammarError, ir: GrammarIR) -> GrammarError:
    """Name the lexeme the core refused by its name and pattern."""
    if err.lexeme is None:
        return err
    if err.lexeme < len(ir.lexemes):
        lexeme = ir.lexemes[err.lexeme]
        what = f"{lexeme.name} /{lexeme.value}/"
    else:
        what = f"the skip pattern /{ir.skip}/"
    where = f" at offset {err.position}" if err.position is not None else ""
    return GrammarError(f"bad pattern in {what}{where}: {err}", position=err.position, lexeme=err.lexeme)


class _GrammarCache:
    """The most recently compiled tool-call and structural-tag grammars, per tokenizer.

    Serving engines compile the same tools for request after request; the text of the request
    is the key (with the limits), so a repeat costs one dictionary lookup. Bounded: the
    least recently used grammar is dropped past `ENTRY_COUNT_MAX` per tokenizer (a cached
    grammar keeps its compiled form and lexer tables alive in the core). Thread-safe.
    """

    ENTRY_COUNT_MAX = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        renew_lock_after_fork(self)
        self._by_tokenizer: weakref.WeakKeyDictionary[Any, OrderedDict[Any, Grammar]] = weakref.WeakKeyDictionary()
        self._untokenized: OrderedDict[Any, Grammar] = OrderedDict()

    def _entries(self, tokenizer: Any) -> OrderedDict[Any, Grammar]:
        if tokenizer is None:
            return self._untokenized
        entries = self._by_tokenizer.get(tokenizer)
        if entries is None:
            entries = self._by_tokenizer[tokenizer] = OrderedDict()
        return entries

    def get(self, tokenizer: Any, key: Any) -> Grammar | None:
        with self._lock:
            entries = self._entries(tokenizer)
            found = entries.get(key)
            if found is not None:
                entries.move_to_end(key)
            return found

    def put(self, tokenizer: Any, key: Any, grammar: Grammar) -> Grammar:
        with self._lock:
            entries = self._entries(tokenizer)
            entries[key] = grammar
            entries.move_to_end(key)
            while len(entries) > self.ENTRY_COUNT_MAX:
                entries.popitem(last=False)
        return grammar

    def clear(self) -> None:
        with self._lock:
            self._by_tokenizer = weakref.WeakKeyDictionary()
            self._untokenized = OrderedDict()


_cache = _GrammarCache()


def clear_grammar_cache() -> None:
    """Forget the cached tool-call and structural-tag grammars (their core memory is freed
    once no matcher uses them)."""
    _cache.clear()


_special_maps: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _special_token_map(tokenizer: Any) -> dict[str, int] | None:
    """Special token text → id, for resolving `<|name|>` in grammars (once per tokenizer)."""
    if tokenizer is None:
        return None
    found = _special_maps.get(tokenizer)
    if found is None:
        found = {}
        for t in range(tokenizer.vocab_size):
            if tokenizer.is_special(t):
                text = tokenizer.token_bytes(t).decode("utf-8", "replace")
                if text:
                    found.setdefault(text, t)
        _special_maps[tokenizer] = found
    return found
