"""The grammar IR: what every front-end (regex, Lark-like, GBNF, choices, JSON Schema) produces
and the core compiles. Documented in `docs/grammar_ir.md`.

A grammar is a context-free grammar over *lexemes* (terminals). A lexeme is a regular
expression, a literal string, or a set of special tokens (by id). Rules are plain BNF: one
nonterminal on the left, a sequence of symbols on the right (possibly empty); front-ends desugar
`? * + {m,n}` and groups into helper nonterminals. One optional *skip* regex (whitespace,
comments) may appear between any two lexemes.

Symbols on right-hand sides are `Sym` values: `Sym.t(i)` for lexeme i, `Sym.n(j)` for
nonterminal j.
"""

from __future__ import annotations

import functools
import inspect
import struct
import sys
from array import array
from dataclasses import dataclass, field, fields
from itertools import repeat
from typing import Literal, NamedTuple, Sequence

from .._errors import GrammarError

LexemeKind = Literal["regex", "literal", "special"]


# `Sym(...)` and `Rule(...)` go through the named tuple's Python-level __new__; the symbols and
# rules a front-end makes are made with this instead (1.6x faster).
_new_tuple = tuple.__new__
_SHARED_INDEX_MAX = 1 << 15  # shared symbols: at most 2 x 32,768 per process (under 10 MB)
_SHARED_BLOCK = 256  # shared symbols are made this many at a time (`_SharedSymbols.__missing__`)


class _SharedSymbols(dict[int, "Sym"]):
    """The shared symbols of one kind by index (`Sym.t`, `Sym.n`): a lookup is the dict's own
    `__getitem__`, in C (a median schema asks for ~35); a new symbol is made by `__missing__`,
    with the rest of its block, and kept when its index is below `_SHARED_INDEX_MAX`."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def __missing__(self, index: int) -> Sym:
        if not 0 <= index < _SHARED_INDEX_MAX:
            return _new_tuple(Sym, (self.terminal, index))
        # The whole block of `_SHARED_BLOCK` indices around it, made at C speed (`map` calls
        # `tuple.__new__(Sym, (terminal, i))` itself): a large schema's first compile asked
        # for ~19,000 symbols one Python call each (MaskBench kb_1161: 150,000 bytecodes of its
        # first compile), and the indices a grammar uses are dense from 0.
        low = index - index % _SHARED_BLOCK
        indices = range(low, low + _SHARED_BLOCK)
        self.update(zip(indices, map(_new_tuple, repeat(Sym), zip(repeat(self.terminal), indices))))
        return dict.__getitem__(self, index)


_TERMINALS = _SharedSymbols(True)
_NONTERMINALS = _SharedSymbols(False)


class Sym(NamedTuple):
    """A symbol on a right-hand side: a lexeme (`terminal=True`) or a nonterminal, by index.

    `Sym.t(i)` and `Sym.n(i)` return shared instances for indices below `_SHARED_INDEX_MAX`:
    a front-end makes tens of thousands of symbols for one large schema, and a lookup costs a
    fifth of a new tuple and leaves nothing for the garbage collector to trace.
    """

    terminal: bool
    index: int

    t = staticmethod(_TERMINALS.__getitem__)  # Sym.t(index) -> Sym
    n = staticmethod(_NONTERMINALS.__getitem__)  # Sym.n(index) -> Sym


@dataclass(frozen=True)
class Lexeme:
    """A terminal of the grammar.

    Attributes:
        name: for messages (`NUMBER`, `"{"`, `<|eot_id|>`).
        kind: `"regex"` (value is a pattern, full-match), `"literal"` (value is the exact text),
            or `"special"` (token_ids lists the special tokens that match it; value is unused).
        value: the pattern or the literal text.
        lazy: end the lexeme at the shortest match (for text that ends at a stop string),
            instead of the longest.
        token_ids: for `"special"` lexemes, the token ids it matches.
        and_patterns: regexes the text must also match (intersection), e.g. a JSON Schema
            `pattern` together with `maxLength`.
        not_patterns: regexes the text must not match (difference), e.g. property names
            already taken, for `additionalProperties` keys.
        dot_all: in `value`, `.` also matches a newline.
        ignore_case: in `value`, ASCII letters match both cases.
        max_tokens: the most tokens of model output one occurrence may span (0: no limit).
            When the budget is spent at a token boundary the lexeme ends there if it matches
            (even if the next byte could extend it); `docs/grammar_ir.md` has the details.
        string_length: a JSON string with a length bound: either `value` spells only JSON
            strings (`"` STRING_CHAR* `"`) and the one and-pattern is the length bound, or
            `value` is the bound itself with no and-pattern (`strings.string_regex` both).
            Lets masks drop the bound where no token can reach it and take the text tokens by
            their characters near its end (`docs/lexer.md`, `docs/trie.md`); a promise the
            front-end makes, so only set it when it holds.
    """

    name: str
    kind: LexemeKind
    value: str = ""
    lazy: bool = False
    token_ids: tuple[int, ...] = ()
    and_patterns: tuple[str, ...] = ()
    not_patterns: tuple[str, ...] = ()
    dot_all: bool = False
    ignore_case: bool = False
    max_tokens: int = 0
    string_length: bool = False

    def __init__(
        self,
        name: str,
        kind: LexemeKind,
        value: str = "",
        lazy: bool = False,
        token_ids: tuple[int, ...] = (),
        and_patterns: tuple[str, ...] = (),
        not_patterns: tuple[str, ...] = (),
        dot_all: bool = False,
        ignore_case: bool = False,
        max_tokens: int = 0,
        string_length: bool = False,
    ) -> None:
        # The fields above, in their order (checked below the class). Written out because the
        # frozen dataclass's own __init__ sets them one `object.__setattr__` at a time, 2.5x
        # slower: a 128-tool grammar makes ~1,600 lexemes.
        self.__dict__.update(
            name=name, kind=kind, value=value, lazy=lazy, token_ids=token_ids, and_patterns=and_patterns,
            not_patterns=not_patterns, dot_all=dot_all, ignore_case=ignore_case, max_tokens=max_tokens,
            string_length=string_length,
        )

    def __hash__(self) -> int:
        # Five fields, not all eleven: front-ends hash lexemes for every symbol they add
        # (`add_lexeme`), and equal lexemes still hash equal. The pattern lists are among them:
        # a JSON Schema's key lexemes differ in them alone (the names already taken), and 256
        # alike in the rest made `add_lexeme` compare 33,000 pairs (MaskBench tmlanguage).
        # Kept in the lexeme (`_hash`, not a field, like `_ir_words`): the shared ones
        # (punctuation, types, property names) are added to grammar after grammar.
        fields = self.__dict__
        value = fields.get("_hash")
        if value is None:
            value = fields["_hash"] = hash(
                (fields["name"], fields["kind"], fields["value"], fields["and_patterns"], fields["not_patterns"])
            )
        return value

    def __getstate__(self) -> dict[str, object]:
        # Without `_hash`: a str's hash differs from process to process.
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


assert [f.name for f in fields(Lexeme)] == list(inspect.signature(Lexeme.__init__).parameters)[1:], (
    "Lexeme.__init__ must take exactly the fields, in order"
)


class Rule(NamedTuple):
    """`lhs → rhs`; an empty `rhs` is an ε-rule. (A named tuple, not a dataclass: a large
    grammar has tens of thousands, and a tuple is made in half the time.)"""

    lhs: int
    rhs: tuple[Sym, ...]


@dataclass
class GrammarIR:
    """A whole grammar.

    Attributes:
        nonterminals: names, indexed by nonterminal index (for messages).
        lexemes: indexed by lexeme index.
        rules: in any order; a nonterminal may have several.
        start: the start nonterminal.
        skip: a regex that may appear between lexemes (e.g. whitespace), or None.
        allow_initial_skip: the skip regex may also appear before the first lexeme (and after
            the last one).
        skip_once: the skip regex matches at most once between two lexemes (so a bounded
            regex bounds the text there); otherwise skips may follow each other.
        no_skip: nonterminals whose text admits no skip regex between their lexemes (their
            rules spell out their own whitespace, e.g. JSON inside a Lark grammar): at a lexeme
            boundary the skip regex needs some other rule in progress across it (`docs/grammar_ir.md`).
        distinct: *distinct lists*, nonterminals whose rules all end with their item, a
            nonterminal that is not nullable (`U → X`, `U → U "," X`): the items of one list
            must differ as JSON scalars (strings after unescaping, numbers by value), which the
            core checks where each item completes (`docs/grammar_ir.md`; JSON Schema
            `uniqueItems`).
        options: front-end options the IR has no field for, by name (the Lark front-end's
            `%llguidance {...}` keys such as `no_forcing`, `allow_invalid_utf8`, `ignore_once`).
    """

    nonterminals: list[str] = field(default_factory=list)
    lexemes: list[Lexeme] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    start: int = 0
    skip: str | None = None
    allow_initial_skip: bool = False
    skip_once: bool = False
    no_skip: set[int] = field(default_factory=set)
    distinct: set[int] = field(default_factory=set)
    options: dict[str, object] = field(default_factory=dict)
    _lexeme_index: dict[Lexeme, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _shared_index: dict[tuple[object, ...], int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def add_nonterminal(self, name: str) -> int:
        self.nonterminals.append(name)
        return len(self.nonterminals) - 1

    def add_lexeme(self, lexeme: Lexeme) -> int:
        """Add a lexeme, reusing an identical one; returns its index."""
        lexemes = self.lexemes
        index = self._lexeme_index.setdefault(lexeme, len(lexemes))  # one hash of the lexeme, not two
        if index == len(lexemes):
            lexemes.append(lexeme)
        return index

    def add_shared_lexeme(self, lexeme: Lexeme, name: str | None = None) -> int:
        """Add a lexeme, reusing one that differs at most in its name (which only messages
        read); returns its index. With `name`, a lexeme added is `lexeme` renamed (the copy is
        made only then)."""
        key = (lexeme.kind, lexeme.value, lexeme.lazy, lexeme.token_ids, lexeme.and_patterns, lexeme.not_patterns,
               lexeme.dot_all, lexeme.ignore_case, lexeme.max_tokens, lexeme.string_length)  # every field but the name
        index = self._shared_index.get(key)
        if index is None:
            if name is not None and name != lexeme.name:
                lexeme = Lexeme(name, *key)
            index = self._shared_index[key] = self.add_lexeme(lexeme)
        return index

    def add_rule(self, lhs: int, rhs: Sequence[Sym]) -> None:
        # `Rule(lhs, rhs)` goes through the named tuple's Python-level __new__ (1.6x slower;
        # a 128-tool grammar adds ~6,000 rules).
        self.rules.append(_new_tuple(Rule, (lhs, tuple(rhs))))

    def add_rules(self, lhs: int, alternatives: Sequence[Sequence[Sym]]) -> None:
        """`add_rule(lhs, rhs)` for each of `alternatives`, in order."""
        self.rules += [_new_tuple(Rule, (lhs, tuple(rhs))) for rhs in alternatives]


# The core's regex metacharacters (docs/lexer.md), `-` and `/` included so a literal is safe in
# any position, and control characters as `\xHH`. The other ASCII characters map to themselves
# in the table: `str.translate` raises and clears a KeyError inside for each character a table
# lacks (most of every text: twice the time of a full table on enum values and names).
_LITERAL_ESCAPES = str.maketrans(
    {**{chr(i): chr(i) for i in range(0x80)}, **{c: "\\" + c for c in "\\.^$|?*+()[]{}/-"},
     **{chr(i): f"\\x{i:02x}" for i in (*range(0x20), 0x7F)}}
)


def literal_regex(text: str) -> str:
    """A regex of the core's syntax that matches exactly `text`."""
    return text.translate(_LITERAL_ESCAPES)


def alternation_regex(texts: Sequence[str]) -> str:
    """One regex matching exactly the given literal texts (an empty text matches the empty string).

    Front-ends use it for a list of literal alternatives (`Grammar.choice`, a JSON Schema
    `enum` of strings, a Lark rule of strings) instead of one lexeme per text: 10,000 lexemes
    cost a Python object, an IR record and a core table entry each, one lexeme costs one
    pattern, which the core factors into the trie of the texts (`docs/lexer.md`).
    """
    return "(?:" + "|".join(literal_regex(t) for t in dict.fromkeys(texts)) + ")"


def productive_nonterminals(ir: GrammarIR) -> list[bool]:
    """Which nonterminals derive at least one string of lexemes (worklist, linear time).

    Two passes over the rules in order come first: front-ends add a nonterminal's rules after
    those of what it uses (but for references, met in the second pass), so they mark every
    nonterminal productive in most grammars, at half the worklist's cost; what they mark is
    productive, so when that is all of them it is the answer; the second reads only the rules
    the first left unmarked (MaskBench kb_1161: 215 of 7,315, whose references get their
    rules later; reading them all again cost 0.2 ms). Otherwise the worklist runs
    over the rules of the nonterminals still unmarked only (the others' marks stand, and a
    rule counts only its unmarked nonterminals as missing): one unmarked nonterminal in
    8,751 rules (MaskBench kb_1161) cost a worklist over all of them, 10 ms."""
    productive = [False] * len(ir.nonterminals)
    rules = ir.rules
    for _ in range(2):
        failed = []  # the rules this pass left unmarked: the next pass reads only them
        for rule in rules:
            lhs, rhs = rule
            if not productive[lhs]:
                for terminal, index in rhs:
                    if not (terminal or productive[index]):
                        failed.append(rule)
                        break
                else:
                    productive[lhs] = True
        if all(productive):
            return productive
        rules = failed
    left = [rule for rule in rules if not productive[rule[0]]]
    missing = [0] * len(left)
    uses: dict[int, list[int]] = {}
    queue = []
    for r, (_, rhs) in enumerate(left):
        count = 0
        for terminal, index in rhs:
            if not (terminal or productive[index]):
                uses.setdefault(index, []).append(r)
                count += 1
        if count:
            missing[r] = count
        else:
            queue.append(r)
    while queue:
        lhs = left[queue.pop()][0]
        if productive[lhs]:
            continue
        productive[lhs] = True
        for r in uses.get(lhs, ()):
            missing[r] -= 1
            if missing[r] == 0:
                queue.append(r)
    return productive


IR_MAGIC = 0x31475354
_NONTERMINAL_FLAG = 1 << 31
_WORD_MAX = (1 << 32) - 1
_KIND_CODES = {"regex": 0, "literal": 1, "special": 2}


def _text_words(text: str, lexeme: int) -> bytes:
    try:
        return _utf8_words(text)
    except UnicodeEncodeError as err:
        # A lone surrogate (from a `\ud800` escape in a schema or grammar string) is not text.
        raise GrammarError(
            f"the pattern holds a lone surrogate U+{ord(text[err.start]):04X} (at character {err.start}), "
            "which is not a Unicode character and has no UTF-8 form; remove it or write a whole "
            "surrogate pair",
            position=err.start,
            lexeme=lexeme,
        ) from None


@functools.lru_cache(maxsize=4096)
def _utf8_words(text: str) -> bytes:
    """A text as the IR spells it (byte length, UTF-8, zero padding). Cached: the same patterns
    (a JSON string, a number) recur in grammar after grammar; an error is not cached.

    Raises:
        UnicodeEncodeError: the text has no UTF-8 form (a lone surrogate).
    """
    data = text.encode("utf-8")
    return struct.pack("<I", len(data)) + data + b"\0" * (-len(data) % 4)


# A lexeme record's first two words (kind, flags) when there are no flags (`_lexeme_words`).
_PLAIN_RECORD_HEADS = {kind: struct.pack("<2I", code, 0) for kind, code in _KIND_CODES.items()}
_LITERAL_RECORD_HEAD = _PLAIN_RECORD_HEADS["literal"]


def _lexeme_words(lexeme: Lexeme, index: int) -> bytes:
    """A lexeme's record in the IR (kind, flags, pattern or token ids, and/not patterns,
    token budget), kept in the lexeme itself (`_ir_words`, not a field: equality, hashing and
    `repr` ignore it): a lexeme is immutable, and the shared ones (punctuation, the JSON
    string, property names: `_plain_lexeme`, `_json_string_lexeme`) recur in grammar after
    grammar, so most lexemes of an IR are encoded once per process (a fifth of a median
    schema's `encode_ir`). `index` only names the lexeme in an error, which is not kept.

    Raises:
        GrammarError: a pattern is not valid Unicode.
    """
    fields = lexeme.__dict__
    kind = fields["kind"]
    if not (fields["and_patterns"] or fields["not_patterns"] or fields["lazy"] or fields["dot_all"]
            or fields["ignore_case"] or fields["max_tokens"] or fields["string_length"] or kind == "special"):
        # The commonest record (no flags, a pattern or literal; most lexemes of a median schema):
        # `_lexeme_record`'s words with flags 0, from a header made once per kind
        # (tests/test_core_api.py compares the two).
        try:
            record = _PLAIN_RECORD_HEADS[kind] + _utf8_words(fields["value"])  # (cached; `_text_words` on failure)
        except UnicodeEncodeError:
            record = _PLAIN_RECORD_HEADS[kind] + _text_words(fields["value"], index)  # raises, naming the lexeme
    else:
        record = _lexeme_record(lexeme, index)
    fields["_ir_words"] = record
    return record


# A literal lexeme's fields, in order, its name and value to be set (`literal_lexeme`). Only
# untracked values (str, bool, int, ()): a copy of the dict is then untracked by the collector.
_LITERAL_FIELDS = dict(name="", kind="literal", value="", lazy=False, token_ids=(), and_patterns=(), not_patterns=(),
                       dot_all=False, ignore_case=False, max_tokens=0, string_length=False)
assert list(_LITERAL_FIELDS) == [f.name for f in fields(Lexeme)], "_LITERAL_FIELDS must list Lexeme's fields, in order"
assert all(_LITERAL_FIELDS[f.name] == f.default for f in fields(Lexeme)[2:]), "_LITERAL_FIELDS: Lexeme's defaults"
_new_object = object.__new__
_set_attribute = object.__setattr__


def literal_lexeme(text: str) -> Lexeme:
    """`Lexeme(text, "literal", text)` with its hash and its IR record already kept (what
    `Lexeme.__hash__` and `_lexeme_words` would keep; a text with no UTF-8 form gets its
    record, and its error, from `_lexeme_words`). For the lexemes a front-end keeps per
    process, made on first sight: a property name's is made once, hashed once and encoded
    once, and doing the three at once, from a copy of the fields rather than through the
    frozen dataclass's constructor and two cached helpers, takes half the instructions
    (MaskBench kb_1161's first compile meets 1,415 names).
    """
    fields = _LITERAL_FIELDS.copy()
    fields["name"] = fields["value"] = text
    fields["_hash"] = hash((text, "literal", text, (), ()))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        fields["_ir_words"] = _LITERAL_RECORD_HEAD + len(data).to_bytes(4, "little") + data + b"\0" * (-len(data) % 4)
    lexeme = _new_object(Lexeme)
    _set_attribute(lexeme, "__dict__", fields)
    return lexeme


def _lexeme_record(lexeme: Lexeme, index: int) -> bytes:
    """`_lexeme_words`'s record of any lexeme, field by field (not kept in the lexeme)."""
    boolean = bool(lexeme.and_patterns or lexeme.not_patterns)
    flags = (
        (1 if lexeme.lazy else 0)
        | (2 if boolean else 0)
        | (4 if lexeme.dot_all else 0)
        | (8 if lexeme.ignore_case else 0)
        | (16 if lexeme.max_tokens else 0)
        | (32 if lexeme.string_length else 0)
    )
    out = [struct.pack("<2I", _KIND_CODES[lexeme.kind], flags)]
    if lexeme.kind == "special":
        ids = lexeme.token_ids
        out.append(struct.pack(f"<{len(ids) + 1}I", len(ids), *ids))
    else:
        out.append(_text_words(lexeme.value, index))
    if boolean:
        for patterns in (lexeme.and_patterns, lexeme.not_patterns):
            try:
                texts = b"".join(map(_utf8_words, patterns))  # (a key lexeme excludes every name listed)
            except UnicodeEncodeError:
                texts = b"".join(_text_words(p, index) for p in patterns)  # raises, naming the lexeme
            out.append(struct.pack("<I", len(patterns)) + texts)
    if lexeme.max_tokens:
        # A budget past the IR's word (`max_tokens=4294967296` in Lark, found by the fuzzer:
        # struct.error) is one no output can spend: the core counts tokens in 32 bits.
        out.append(struct.pack("<I", min(lexeme.max_tokens, _WORD_MAX)))
    return b"".join(out)


def encode_ir(ir: GrammarIR) -> bytes:
    """The binary form the core's `ts_grammar_new_ir` takes (layout in wasm/ABI.md).

    Raises:
        GrammarError: a pattern is not valid Unicode (`.lexeme` names it; the skip pattern is
            lexeme `len(ir.lexemes)`).
    """
    flags = (
        (1 if ir.allow_initial_skip else 0) | (2 if ir.skip is not None else 0) | (4 if ir.no_skip else 0)
        | (8 if ir.skip_once else 0) | (16 if ir.distinct else 0)
    )
    out = [struct.pack("<6I", IR_MAGIC, len(ir.lexemes), len(ir.nonterminals), len(ir.rules), ir.start, flags)]
    if ir.skip is not None:
        out.append(_text_words(ir.skip, len(ir.lexemes)))
    if ir.no_skip:
        out.append(struct.pack(f"<{len(ir.no_skip) + 1}I", len(ir.no_skip), *sorted(ir.no_skip)))
    if ir.distinct:
        out.append(struct.pack(f"<{len(ir.distinct) + 1}I", len(ir.distinct), *sorted(ir.distinct)))
    out += [lexeme.__dict__.get("_ir_words") or _lexeme_words(lexeme, index) for index, lexeme in enumerate(ir.lexemes)]
    # The rules, one flat run of words (a struct.pack per rule cost 5x more), each symbol's
    # word by arithmetic: as fast as a table of the words warm, and faster once the CPU's
    # caches have been flushed (the table is a large dict of tuples; a median schema's first
    # encoding after a run of masks was 9% faster without it).
    listed: list[int] = []
    append = listed.append
    for lhs, rhs in ir.rules:
        append(lhs)
        append(len(rhs))
        for terminal, index in rhs:
            append(index if terminal else _NONTERMINAL_FLAG | index)
    words = array("I", listed)
    if sys.byteorder != "little":
        words.byteswap()
    out.append(words.tobytes())
    return b"".join(out)
