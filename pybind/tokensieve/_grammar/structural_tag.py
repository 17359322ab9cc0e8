"""Structural tags (XGrammar's format): free text with triggered, schema-constrained parts.

What serving engines send for tool calling and reasoning models: `{"type": "structural_tag",
"format": {...}}` where the format nests `const_string`, `json_schema`, `regex`, `grammar`,
`any_text`, `sequence`, `or`, `tag`, `triggered_tags`, `tags_with_separator`, `optional`,
`plus`, `star`, `repeat`, `dispatch` and token forms. `docs/tool_calling.md` lists each with its
meaning and where tokensieve differs from XGrammar.

How it compiles (continuation-passing): a format is translated together with what follows it,
`fmt · K`, where `K` is a list of alternatives `(lead, rest)`: a literal text that must come
first and the symbol for everything after it. That is what lets free text end: `any_text`
followed by `</think>` becomes one *lazy* lexeme "text without `</think>`, then `</think>`",
which ends at the first `</think>` (a lexer cannot end a free-text lexeme exactly before a
string that it could also swallow; absorbing the string into the lexeme solves it). Literals
are concatenated with the lead that follows them, so `tag(begin, any_text, end)` inside a
sequence costs one literal and one lazy lexeme.

Where alternatives meet (`or`, `optional`, `star`, `repeat`, `tags_with_separator`, a tag
list), free text beside a sibling that starts with the same bytes would share a lexer row with
it and take its text (a lazy lexeme is never backtracked); `_Compiler.resolve` spells such a
group one character per lexeme, as XGrammar reads it (`docs/tool_calling.md`).

Special tokens: with a tokenizer, a literal piece that is exactly a special token's text (such
as `<|channel|>` or `<|call|>`) matches that special token, as the model writes it; free text
never contains special tokens (text lexemes never match them), so special-token triggers need
no lazy lexeme at all.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

from .._core.fork import renew_global_lock_after_fork
from .._errors import GrammarError
from .ir import GrammarIR, Lexeme, Rule, Sym
from .json_schema.compiler import json_schema_to_ir
from .json_schema.embed import merge_ir

# A regex of any one character (the core reads `.` without dot_all as "not a newline").
_ANY = r"[\s\S]"
_WS = r"[ \t\n\r]*"
_FORMAT_TYPES = (
    "const_string", "json_schema", "qwen_xml_parameter", "any_text", "grammar", "regex", "sequence", "or", "tag",
    "triggered_tags", "token_triggered_tags", "tags_with_separator", "optional", "plus", "star", "repeat",
    "dispatch", "token_dispatch", "token", "exclude_token", "any_tokens",
)
_XML_STYLES_UNSUPPORTED = ("minimax_xml", "minimax_m3_xml", "deepseek_xml", "glm_xml", "cohere_xml", "kimi_k3_xml", "deepseek_v4_1_xml")
_REPEAT_UNROLL_MAX = 256
# Formats compiled for one tag (a repeat compiles its content once per copy), and nesting depth
# (in JSON pointer segments: two per level).
_PIECE_COUNT_MAX = 20_000
_NESTING_DEPTH_MAX = 300
# Alternatives carried past one element of a sequence before they become one nonterminal: a
# sequence of `or`s would otherwise multiply them.
_ALTERNATIVE_COUNT_MAX = 256
_REPEAT_ALTERNATIVE_COUNT_MAX = 32


def _minimal_strings(strings: set[str]) -> list[str]:
    """`strings` without those that contain another of them (sorted): text free of the result
    is free of all of `strings`."""
    ordered = sorted(strings, key=lambda s: (len(s), s))
    kept: list[str] = []
    for candidate in ordered:
        if not any(k in candidate for k in kept):
            kept.append(candidate)
    return sorted(kept)


def regex_escape(text: str) -> str:
    """`text` as a regex of the core's syntax matching exactly it."""
    out = []
    for char in text:
        if char in "\\.^$|?*+()[]{}/-":
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


class _Alt(NamedTuple):
    """One way the rest of the output may go: `lead` text first (may be empty), then `rest`
    (a symbol, or None for the end of the output)."""

    lead: str
    rest: Sym | None
    # The lead is read one character per lexeme (`_Compiler.resolve`).
    spelled: bool = False

    def after(self, text: str) -> _Alt:
        """`text`, then this alternative."""
        return _Alt(text + self.lead, self.rest, self.spelled)


_END = (_Alt("", None),)


@dataclass(eq=False)
class _FreeText:
    """What one `free_text` call was asked for, kept so that it can be spelled again one
    character per lexeme (`_Compiler.spelled_free`) where it would share a lexer row with a
    sibling alternative (`_Compiler.resolve`)."""

    follow: tuple[_Alt, ...]
    banned: tuple[str, ...]  # the strings the text never contains (minimal)
    cuts: tuple[str, ...]  # where the lazy lexemes end
    name: str
    spelled: Sym | None = None


@dataclass(frozen=True)
class _FreeHead:
    """An alternative's rest that starts with the free text `free`: its lazy lexemes, or when
    `spelled` its one-character form (`_Compiler.spelled_free`)."""

    free: _FreeText
    spelled: bool

# The IR of each tool's argument schema, across grammars: servers compile the same tools in many
# combinations (other tool lists, tool choices, reasoning modes). Read-only once built; oldest
# dropped first.
_SCHEMA_IR_COUNT_MAX = 4096
_schema_irs: dict[str | bytes, GrammarIR] = {}
_schema_irs_lock = threading.Lock()
renew_global_lock_after_fork(globals(), "_schema_irs_lock")


def _schema_key(schema: Any) -> str | bytes:
    """The key of a tool's argument schema in `_schema_irs`: equal keys are equal schemas with
    the keys in the same order (property order is part of the grammar). Pickled, which is
    exact (1, 1.0 and true differ) and 4x faster than JSON text; JSON text for what pickle
    refuses (the tag has been serialised as JSON already, so that works)."""
    try:
        return pickle.dumps(schema, protocol=5)
    except Exception:  # noqa: BLE001 — e.g. a dict subclass pickle cannot import
        return json.dumps(schema)


class _Compiler:
    def __init__(self, tokenizer: Any, json_whitespace: str) -> None:
        self.ir = GrammarIR()
        self.ir.start = self.ir.add_nonterminal("start")
        self.tokenizer = tokenizer
        self.json_whitespace = json_whitespace
        self.specials = _special_texts(tokenizer)
        self._nt_count = 0
        self._literal_memo: dict[str, list[Sym]] = {}
        self._json_memo: dict[str, Sym] = {}
        self._grammar_memo: dict[str, Sym] = {}
        self._stops: tuple[str, ...] = ()  # the end strings of the innermost tag being compiled
        self._pieces = 0  # formats compiled so far (see `compile`)
        self.own_literals: set[int] = set()  # the tag's literal lexemes (not a JSON grammar's)
        # Rests that start with free text, and nonterminals whose first literals are to be
        # spelled one character per lexeme (see `resolve`).
        self.spell_first: set[int] = set()
        self._firsts: dict[int, list[Sym]] = {}  # first symbol of each rule `add_rule` added
        self._free_heads: dict[Sym, _FreeHead] = {}

    # -- symbols -----------------------------------------------------------------------------

    def nonterminal(self, name: str) -> int:
        self._nt_count += 1
        return self.ir.add_nonterminal(f"{name}~{self._nt_count}")

    def literal(self, text: str) -> list[Sym]:
        """The symbols spelling `text`: literal lexemes, and special lexemes for the pieces
        that are special tokens' texts."""
        found = self._literal_memo.get(text)
        if found is not None:
            return found
        out: list[Sym] = []
        for piece, token in _split_specials(text, self.specials):
            if token is not None:
                out.append(Sym.t(self.ir.add_lexeme(Lexeme(piece, "special", token_ids=(token,)))))
            elif piece:
                index = self.ir.add_lexeme(Lexeme(repr(piece), "literal", piece))
                self.own_literals.add(index)
                out.append(Sym.t(index))
        self._literal_memo[text] = out
        return out

    def add_rule(self, nt: int, symbols: list[Sym]) -> None:
        """`nt → symbols`, its first symbol remembered (`_starts_with_own_literal`)."""
        self.ir.add_rule(nt, symbols)
        if symbols:
            self._firsts.setdefault(nt, []).append(symbols[0])

    def symbols(self, alt: _Alt) -> list[Sym]:
        """The symbols of one alternative: its lead, then its rest."""
        lead = self.chars(alt.lead) if alt.spelled else self.literal(alt.lead)
        return lead + ([alt.rest] if alt.rest is not None else [])

    def symbol_of(self, alts: Sequence[_Alt], name: str) -> Sym:
        """A nonterminal deriving every alternative of `alts`."""
        if len(alts) == 1 and not alts[0].lead and alts[0].rest is not None:
            return alts[0].rest
        nt = self.nonterminal(name)
        for alt in alts:
            self.add_rule(nt, self.symbols(alt))
        return Sym.n(nt)

    def then(self, first: list[Sym], follow: Sequence[_Alt], name: str) -> tuple[_Alt, ...]:
        """`first` (symbols) followed by `follow`, as one alternative."""
        nt = self.nonterminal(name)
        for alt in follow:
            self.add_rule(nt, first + self.symbols(alt))
        return (_Alt("", Sym.n(nt)),)

    # -- free text beside a sibling -------------------------------------------------------

    def resolve(self, alts: Sequence[_Alt]) -> tuple[_Alt, ...]:
        """`alts` (alternatives starting at one place), once each, with those that would lose a
        branch under the core's longest-match lexing spelled one character per lexeme.

        Free text is a lazy lexeme, ended by the lexer and never backtracked (`docs/grammar_ir.md`,
        "What a grammar matches"). Beside a sibling alternative that reads the same first bytes
        as something else — `<u ` then free text, and `<u <c>/>` — the lexer has both in one
        row: the text runs on past the sibling's literal characters (or ends inside the
        sibling's literal), and the sibling's branch is lost, where XGrammar, reading
        character by character, keeps both. Such a group is spelled as XGrammar reads it: the
        free text as a right-linear grammar of one-character lexemes (`spelled_free`), the
        sibling's literal text one character per lexeme, so every reading reaches the parser.
        Not conflicts, and kept as they are (the fast form of every tool-call format): leads
        that differ before either ends; free text after an empty lead that dies (an excluded
        string) before a sibling's literal ends (`<think>` beside text excluding `<think>`);
        two free texts with the same lead and excluded strings. A sibling whose rest (not its
        literal lead) starts with a JSON value or a regex is left as it is (a documented
        difference: those lexemes are not spelled)."""
        alts = tuple(dict.fromkeys(alts))
        if not self._free_heads or len(alts) < 2:
            return alts
        # The ends of one free text (one lexeme per ending string) are checked as one group.
        groups: dict[tuple[str, int, bool], list[int]] = {}
        for i, alt in enumerate(alts):
            head = self._head(alt)
            if head is not None:
                groups.setdefault((alt.lead, id(head.free), head.spelled), []).append(i)
        if not groups and not any(alt.spelled for alt in alts):
            return alts
        spell: set[int] = set()
        for members in groups.values():
            alt = alts[members[0]]
            head = self._head(alt)
            assert head is not None
            lead = alt.lead
            for j, other in enumerate(alts):
                if not (other.lead.startswith(lead) or lead.startswith(other.lead)) or j in members:
                    continue
                other_head = self._head(other)
                if other_head is not None:
                    if other.lead == lead:
                        # Lazy lexemes that end at the same strings end together; otherwise
                        # the first to end takes the text from the other.
                        same = (other_head.free.banned, other_head.free.cuts) == (head.free.banned, head.free.cuts)
                        if not same or other_head.spelled != head.spelled:
                            spell.update(members + [j])
                    elif other.lead.startswith(lead):  # the other way round is seen from `other`
                        if lead or head.spelled or other_head.spelled or not self._dies_within(head.free, other.lead):
                            spell.update(members + [j])
                elif other.lead.startswith(lead) and other.lead != lead:
                    if lead or head.spelled or not self._dies_within(head.free, other.lead):
                        spell.update(members + [j])
                elif lead.startswith(other.lead) and other.rest is not None and self._starts_with_own_literal(other.rest):
                    # The sibling's literal text is in its rest (a star's loop): spelled too.
                    spell.update(members + [j])
                    self.spell_first.add(other.rest.index)
        # A spelled lead beside a literal lead with the same first character: the literal,
        # one lexeme, would outlast the characters; spelled too (until nothing changes).
        grown = True
        while grown:
            grown = False
            for i, alt in enumerate(alts):
                if not (alt.spelled or i in spell) or not alt.lead:
                    continue
                for j, other in enumerate(alts):
                    if j not in spell and not other.spelled and other.lead[:1] == alt.lead[:1]:
                        spell.add(j)
                        grown = True
        if not spell:
            return alts
        out: list[_Alt] = []
        done: set[tuple[str, int]] = set()
        for i, alt in enumerate(alts):
            head = self._head(alt)
            if i not in spell:
                out.append(alt)
            elif head is None or head.spelled:
                out.append(_Alt(alt.lead, alt.rest, spelled=True))
            elif (alt.lead, id(head.free)) not in done:  # one spelled free text stands for all its ends
                done.add((alt.lead, id(head.free)))
                out.append(_Alt(alt.lead, self.spelled_free(head.free), spelled=True))
        return tuple(dict.fromkeys(out))

    def _head(self, alt: _Alt) -> _FreeHead | None:
        return self._free_heads.get(alt.rest) if alt.rest is not None else None

    def _starts_with_own_literal(self, rest: Sym) -> bool:
        """Does every way `rest` starts begin with a literal lexeme of the tag's own (not a
        JSON value's or a regex's, which are not spelled)? Follows first nonterminals."""
        if rest.terminal:
            return rest.index in self.own_literals
        seen = {rest.index}
        todo = [rest.index]
        while todo:
            nt = todo.pop()
            if nt not in self._firsts:
                return False  # a JSON value's or a grammar's nonterminal
            for sym in self._firsts[nt]:
                if sym.terminal:
                    if sym.index not in self.own_literals:
                        return False
                elif sym.index not in seen:
                    seen.add(sym.index)
                    todo.append(sym.index)
        return True

    def _dies_within(self, free: _FreeText, text: str) -> bool:
        """Does the free text die within `text` (an excluded string, or a special token, which
        text lexemes never match) before it could end there (one of its ends matched)? A
        string search per pattern: 128 tool leads are checked against each free text."""
        head, token = _first_piece(text, self.specials)
        if token is not None:
            return True
        def first_end(patterns: Sequence[str]) -> int:
            ends = [at + len(p) for p in patterns if (at := head.find(p)) >= 0]
            return min(ends) if ends else len(head) + 1
        banned_end = first_end(free.banned)
        cut_end = first_end(free.cuts)
        if banned_end < cut_end:
            return True
        # A special token after the text piece ends the free text there, unless it ended first.
        return cut_end > len(head) and len(head) < len(text)

    def chars(self, text: str) -> list[Sym]:
        """The symbols spelling `text` one character per literal lexeme (special tokens' texts
        as their special lexemes)."""
        out: list[Sym] = []
        for piece, token in _split_specials(text, self.specials):
            if token is not None:
                out.extend(self.literal(piece))
            else:
                for char in piece:
                    out.extend(self.literal(char))
        return out

    def spelled_free(self, free: _FreeText) -> Sym:
        """The free text of `free` and what follows it, one character per lexeme: text without
        any `free.banned` string (states: the longest suffix read that begins one, as in
        Aho-Corasick), then any of `free.follow`. XGrammar's reading: the parser, not the
        lexer, decides where the text ends."""
        if free.spelled is not None:
            return free.spelled
        banned = free.banned
        # "" is the state with nothing read toward a banned string, there when nothing is banned.
        starts = sorted({""} | {b[:i] for b in banned for i in range(len(b))}, key=lambda t: (len(t), t))
        alphabet = sorted({c for b in banned for c in b})
        states = {start: self.nonterminal(free.name + " spelled") for start in starts}
        end = self.nonterminal(free.name + " spelled end")
        pattern = "[^" + "".join(regex_escape(c) for c in alphabet) + "]" if alphabet else _ANY
        other = Sym.t(self.ir.add_lexeme(Lexeme(f"{free.name} character", "regex", pattern)))
        for start, nt in states.items():
            for char in alphabet:
                seen = start + char
                if any(seen.endswith(b) for b in banned):
                    continue
                after = next(seen[k:] for k in range(len(seen) + 1) if seen[k:] in states)
                self.add_rule(nt, self.literal(char) + [Sym.n(states[after])])
            self.add_rule(nt, [other, Sym.n(states[""])])
            self.add_rule(nt, [Sym.n(end)])
        for alt in free.follow:
            head, token = _first_piece(alt.lead, self.specials)
            if alt.lead and token is None:  # the text ends where a lead's text begins: one character per lexeme
                self.add_rule(end, self.chars(head) + self.symbols(_Alt(alt.lead[len(head):], alt.rest, alt.spelled)))
            else:
                self.add_rule(end, self.symbols(alt))
        free.spelled = Sym.n(states[""])
        self._free_heads[free.spelled] = _FreeHead(free, spelled=True)
        return free.spelled

    # -- formats ------------------------------------------------------------------------------

    def compile(self, fmt: Any, follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        """The alternatives of `fmt` followed by `follow`."""
        if not isinstance(fmt, dict):
            raise _error("a format must be a JSON object", pointer)
        # Bounded work: nested repeats multiply (each copy is compiled), and nesting is recursion.
        self._pieces += 1
        if self._pieces > _PIECE_COUNT_MAX:
            raise _error(
                f"the structural tag expands to more than {_PIECE_COUNT_MAX:,} pieces (nested repeat counts "
                "multiply); use star or plus for long repetitions", pointer)
        if pointer.count("/") > _NESTING_DEPTH_MAX:
            raise _error(f"formats nest deeper than {_NESTING_DEPTH_MAX} levels", pointer[:200] + "...")
        kind = fmt.get("type")
        method: Callable[[dict[str, Any], Sequence[_Alt], str], tuple[_Alt, ...]] | None = getattr(self, f"f_{kind}", None) if isinstance(kind, str) else None
        if method is None:
            raise _error(f"unknown format type {kind!r}; the types are {', '.join(_FORMAT_TYPES)}", pointer + "/type")
        return method(fmt, follow, pointer)

    def f_const_string(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        value = _field(fmt, "value", str, pointer)
        return tuple(alt.after(value) for alt in follow)

    def f_sequence(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        elements = _field(fmt, "elements", list, pointer)
        alts = tuple(follow)
        for index in range(len(elements) - 1, -1, -1):
            if len(alts) > _ALTERNATIVE_COUNT_MAX:
                alts = (_Alt("", self.symbol_of(alts, "sequence rest")),)
            alts = self.compile(elements[index], alts, f"{pointer}/elements/{index}")
        return alts

    def any_of(self, formats: list[Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        """The alternatives of each of `formats` (at `pointer/index`), followed by `follow`."""
        out: list[_Alt] = []
        for index, fmt in enumerate(formats):
            out.extend(self.compile(fmt, follow, f"{pointer}/{index}"))
        return self.resolve(out)

    def f_or(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        elements = _field(fmt, "elements", list, pointer)
        if not elements:
            raise _error("an `or` needs at least one element", pointer + "/elements")
        return self.any_of(elements, follow, pointer + "/elements")

    def f_tag(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        ends = fmt.get("end")
        if isinstance(ends, str):
            ends = [ends]
        if isinstance(ends, dict):
            end_alts = self.compile(ends, follow, pointer + "/end")
        elif isinstance(ends, list) and ends and all(isinstance(e, str) for e in ends):
            end_alts = tuple(alt.after(end) for end in ends for alt in follow)
        else:
            raise _error("`end` must be a string, a non-empty list of strings or a token", pointer + "/end")
        if "content" not in fmt:
            raise _error("a tag needs `content`", pointer)
        # Free text anywhere in the content ends at the first occurrence of an end string,
        # even where more literal text follows the end (XGrammar's meaning).
        outer, self._stops = self._stops, (tuple(e for e in ends if e) if isinstance(ends, list) else ())
        try:
            inner = self.compile(fmt["content"], end_alts, pointer + "/content")
        finally:
            self._stops = outer
        begin = fmt.get("begin")
        if isinstance(begin, dict):
            return self.compile(begin, inner, pointer + "/begin")
        if not isinstance(begin, str):
            raise _error("`begin` must be a string or a token", pointer + "/begin")
        return tuple(alt.after(begin) for alt in inner)

    def f_optional(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        return self.resolve(self.compile(_content(fmt, pointer), follow, pointer + "/content") + tuple(follow))

    def f_star(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        loop = self.nonterminal("star")
        body = self.compile(_content(fmt, pointer), (_Alt("", Sym.n(loop)),), pointer + "/content")
        for alt in self.resolve(tuple(follow) + body):
            self.add_rule(loop, self.symbols(alt))
        return (_Alt("", Sym.n(loop)),)

    def f_plus(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        return self.compile(_content(fmt, pointer), self.f_star(fmt, follow, pointer), pointer + "/content")

    def f_repeat(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        low = _field(fmt, "min", int, pointer)
        high = _field(fmt, "max", int, pointer)
        if low < 0 or (high != -1 and high < low):
            raise _error(f"repeat bounds min={low}, max={high} are not a range (max -1 means unbounded)", pointer)
        if max(low, high) > _REPEAT_UNROLL_MAX:
            raise _error(f"repeat counts above {_REPEAT_UNROLL_MAX} are not supported", pointer)
        content = _content(fmt, pointer)
        alts = self.f_star(fmt, follow, pointer) if high == -1 else tuple(follow)
        if high != -1:
            for _ in range(high - low):  # optional copies: content? content? …
                alts = self.resolve(self.compile(content, alts, pointer + "/content") + alts)
                if len(alts) > _REPEAT_ALTERNATIVE_COUNT_MAX:  # else each copy adds to all later ones
                    alts = (_Alt("", self.symbol_of(alts, "repeat rest")),)
        for _ in range(low):
            if len(alts) > _REPEAT_ALTERNATIVE_COUNT_MAX:
                alts = (_Alt("", self.symbol_of(alts, "repeat rest")),)
            alts = self.compile(content, alts, pointer + "/content")
        return alts

    def f_any_text(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        excludes = _strings(fmt, "excludes", pointer)
        max_tokens = fmt.get("max_tokens")
        max_chars = fmt.get("max_chars")
        return self.free_text(follow, excludes, pointer, max_tokens=max_tokens, max_chars=max_chars, stops=self._stops)

    def free_text(
        self,
        follow: Sequence[_Alt],
        excludes: Sequence[str],
        pointer: str,
        *,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        min_chars: int = 0,
        stops: Sequence[str] = (),
        name: str = "text",
    ) -> tuple[_Alt, ...]:
        """Free text followed by `follow`.

        For each alternative whose lead starts with text, a lazy lexeme "text, then the lead's
        first text piece", which ends at the first occurrence of such a piece; a lead that starts
        with a special token, or the end of the output, follows plain free text (text lexemes
        never match special tokens, so nothing is needed to end it). The free text itself never
        contains `excludes`, `stops` (the ends of the tag around it) nor any lead's text piece.
        """
        textual: list[_Alt] = []
        plain: list[_Alt] = []
        for alt in follow:
            head, token = _first_piece(alt.lead, self.specials)
            if alt.lead and token is None:
                textual.append(alt)
            elif alt.lead or alt.rest is None:
                plain.append(alt)
            else:
                raise _error(
                    "free text must be followed by a literal string, a tag or the end of the output "
                    "(tokensieve ends free text at the first occurrence of what follows it)",
                    pointer,
                )
        if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0):
            raise _error("`max_chars` must be a non-negative integer", pointer + "/max_chars")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0):
            raise _error("`max_tokens` must be a non-negative integer", pointer + "/max_tokens")
        heads = {_first_piece(alt.lead, self.specials)[0] for alt in textual}
        # Text without any of these strings; one that contains another of them adds nothing.
        shortest = _minimal_strings(heads | {e for e in (*excludes, *stops) if e})
        banned = "|".join(regex_escape(b) for b in shortest)
        chars = f"{{{min_chars},{'' if max_chars is None else max_chars}}}" if max_chars is not None or min_chars else "*"
        out: list[_Alt] = []
        # The free text ends where a lead's text begins. Leads that begin with the same banned
        # string (a trigger, then each tag's own rest) share one lexeme ending at that string,
        # and the rests follow as literals: one lexeme per trigger, not one per tag.
        by_cut: dict[str, list[_Alt]] = {}
        for alt in textual:
            head, _ = _first_piece(alt.lead, self.specials)
            cut = min((b for b in shortest if head.startswith(b)), key=len, default=head)
            by_cut.setdefault(cut, []).append(alt)
        for cut, alts in by_cut.items():
            # The text before `cut` contains no banned string (so the lexeme ends at its first
            # occurrence); `cut` itself may.
            lexeme = Lexeme(
                f"{name} until {cut!r}", "regex", f"{_ANY}{chars}{regex_escape(cut)}", lazy=True,
                not_patterns=(f"{_ANY}*(?:{banned}){_ANY}*{regex_escape(cut)}",), max_tokens=max_tokens or 0,
            )
            text = Sym.t(self.ir.add_lexeme(lexeme))
            rests = [_Alt(alt.lead[len(cut):], alt.rest, alt.spelled) for alt in alts]
            if len(rests) == 1:
                symbols = [text] + self.symbols(rests[0])
            else:
                symbols = [text, self.symbol_of(rests, name + " then")]
            out.append(_Alt("", Sym.n(self._sequence(symbols, name))))
        if plain:
            nots = (f"{_ANY}*(?:{banned}){_ANY}*",) if banned else ()
            lexeme = Lexeme(f"{name}", "regex", f"{_ANY}{chars}", not_patterns=nots, max_tokens=max_tokens or 0)
            text = Sym.t(self.ir.add_lexeme(lexeme))
            # Free text may be empty: the lexeme or nothing, then the plain alternatives.
            optional = self.nonterminal(name + "?")
            self.add_rule(optional, [text])
            if not min_chars:
                self.add_rule(optional, [])
            out.extend(self.then([Sym.n(optional)], plain, name))
        if max_tokens is None and max_chars is None and not min_chars:
            free = _FreeText(tuple(follow), tuple(shortest), tuple(by_cut), name)
            for alt in out:
                assert alt.rest is not None
                self._free_heads[alt.rest] = _FreeHead(free, spelled=False)
        return tuple(out)

    def _sequence(self, symbols: list[Sym], name: str) -> int:
        nt = self.nonterminal(name)
        self.add_rule(nt, symbols)
        return nt

    def f_triggered_tags(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        triggers = _strings(fmt, "triggers", pointer)
        tags = _field(fmt, "tags", list, pointer)
        excludes = _strings(fmt, "excludes", pointer)
        if not triggers or any(not t for t in triggers):
            raise _error("`triggers` must be a non-empty list of non-empty strings", pointer + "/triggers")
        if not tags:
            raise _error("`tags` must not be empty", pointer + "/tags")
        for index, tag in enumerate(tags):
            begin = tag.get("begin") if isinstance(tag, dict) else None
            if not isinstance(begin, str):
                raise _error("tags of triggered_tags need a string `begin` (use token_triggered_tags for tokens)", f"{pointer}/tags/{index}/begin")
            matching = [t for t in triggers if begin.startswith(t)]
            if len(matching) != 1:
                raise _error(f"the begin {begin!r} must start with exactly one trigger, not {len(matching)}", f"{pointer}/tags/{index}/begin")
        return self.loop_of_tags(
            tags, follow, pointer, excludes=excludes, triggers=triggers,
            at_least_one=bool(fmt.get("at_least_one", False)), stop_after_first=bool(fmt.get("stop_after_first", False)),
        )

    def loop_of_tags(
        self,
        tags: list[Any],
        follow: Sequence[_Alt],
        pointer: str,
        *,
        excludes: Sequence[str],
        triggers: Sequence[str] = (),
        at_least_one: bool,
        stop_after_first: bool,
    ) -> tuple[_Alt, ...]:
        """Free text with tags in it (`triggered_tags` and `dispatch`).

        XGrammar's meaning: with `at_least_one` the output starts with a tag; with
        `stop_after_first` nothing follows the (first) tag; otherwise free text and tags
        alternate, and the free text never contains a trigger or an excluded string."""
        banned = list(excludes) + [t for t in triggers if _first_piece(t, self.specials)[1] is None]

        def tags_then(after: Sequence[_Alt]) -> tuple[_Alt, ...]:
            return self.any_of(tags, after, f"{pointer}/tags")

        if stop_after_first:
            first = tags_then(follow)
            if at_least_one:
                return first
            return self.free_text(self.resolve(first + tuple(follow)), banned, pointer)
        loop = self.nonterminal("tags")
        body = self.free_text(self.resolve(tags_then((_Alt("", Sym.n(loop)),)) + tuple(follow)), banned, pointer)
        for alt in body:
            self.add_rule(loop, self.symbols(alt))
        if at_least_one:
            return tags_then((_Alt("", Sym.n(loop)),))
        return (_Alt("", Sym.n(loop)),)

    def f_tags_with_separator(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        tags = _field(fmt, "tags", list, pointer)
        separator = _field(fmt, "separator", str, pointer)
        if not tags:
            raise _error("`tags` must not be empty", pointer + "/tags")
        at_least_one = bool(fmt.get("at_least_one", False))
        stop_after_first = bool(fmt.get("stop_after_first", False))

        def tags_then(after: Sequence[_Alt]) -> tuple[_Alt, ...]:
            return self.any_of(tags, after, f"{pointer}/tags")

        if stop_after_first:
            first = tags_then(follow)
        else:
            more = self.nonterminal("separated")  # more → separator tag more | follow
            after = tuple(alt.after(separator) for alt in tags_then((_Alt("", Sym.n(more)),)))
            for alt in self.resolve(tuple(follow) + after):
                self.add_rule(more, self.symbols(alt))
            first = tags_then((_Alt("", Sym.n(more)),))
        return first if at_least_one else self.resolve(first + tuple(follow))

    def f_dispatch(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        rules = _field(fmt, "rules", list, pointer)
        tags = []
        for index, rule in enumerate(rules):
            if not (isinstance(rule, (list, tuple)) and len(rule) == 2 and isinstance(rule[0], str) and rule[0]):
                raise _error("each rule is a [pattern string, format] pair", f"{pointer}/rules/{index}")
            tags.append({"type": "tag", "begin": rule[0], "content": rule[1], "end": ""})
        if not tags:
            raise _error("`rules` must not be empty", pointer + "/rules")
        return self.loop_of_tags(
            tags, follow, pointer, excludes=_strings(fmt, "excludes", pointer), triggers=[tag["begin"] for tag in tags],
            at_least_one=False, stop_after_first=not bool(fmt.get("loop", True)),
        )

    def f_regex(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        pattern = _field(fmt, "pattern", str, pointer)
        index = self.ir.add_lexeme(Lexeme(f"regex {pattern!r}", "regex", pattern))
        # The core parses the pattern; Grammar.structural_tag maps its error back to this node.
        self.ir.options.setdefault("lexeme_pointers", {})[index] = pointer + "/pattern"  # type: ignore[union-attr]
        return self.then([Sym.t(index)], follow, "regex")

    def f_json_schema(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        schema = fmt.get("json_schema")
        if not isinstance(schema, (dict, bool)):
            raise _error("`json_schema` must be a JSON Schema (an object or a boolean)", pointer + "/json_schema")
        style = fmt.get("style", "json")
        if style == "qwen_xml":
            return self.qwen_xml(schema, follow, pointer)
        if style in _XML_STYLES_UNSUPPORTED:
            raise _error(f"the json_schema style {style!r} is not supported yet; use \"json\" or \"qwen_xml\"", pointer + "/style")
        if style != "json":
            raise _error(f"unknown json_schema style {style!r}", pointer + "/style")
        return self.then([self.json(schema, pointer)], follow, "json")

    def f_qwen_xml_parameter(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        return self.qwen_xml(fmt.get("json_schema"), follow, pointer)

    def json(self, schema: Any, pointer: str) -> Sym:
        key = _schema_key(schema)
        found = self._json_memo.get(key)
        if found is None:
            sub = _schema_irs.get(key)
            if sub is None:
                try:
                    sub = json_schema_to_ir(_strict(schema), whitespace="compact")
                except GrammarError as err:
                    inner = err.json_pointer or ""
                    raise _error(f"in this json_schema: {err}", f"{pointer}/json_schema{inner}") from None
                with _schema_irs_lock:
                    _schema_irs[key] = sub
                    while len(_schema_irs) > _SCHEMA_IR_COUNT_MAX:
                        _schema_irs.pop(next(iter(_schema_irs)))
            found = self._json_memo[key] = merge_ir(self.ir, sub, f"json{len(self._json_memo)}", lexeme_prefix="json")
        return found

    def qwen_xml(self, schema: Any, follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        """Qwen3-Coder's parameters, with XGrammar's meaning: `<parameter=NAME>VALUE</parameter>`
        for each declared property in the schema's order (optional ones skippable), then any
        number of other parameters if `additionalProperties` allows them (absent counts as
        false when there are `properties`, as true when there are none); whitespace before,
        between and after them. A string value is raw text up to the first `</parameter>`,
        other values are JSON with whitespace around. A schema that is not an object is one
        such value."""
        if schema is True or schema == {}:
            schema = {"type": "object"}
        if not isinstance(schema, dict):
            raise _error("the qwen_xml style needs a JSON Schema object", pointer + "/json_schema")
        if schema.get("type", "object") != "object":
            return self.xml_value(schema, follow, pointer + "/json_schema", top=True)
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        extra = schema.get("additionalProperties", "properties" not in schema)
        tail = self.ws_then(follow, "xml whitespace")
        if extra is not False:
            # Any number of other parameters: a loop nonterminal, then the tail.
            loop = self.nonterminal("xml extra parameters")
            for alt in tail:
                self.add_rule(loop, self.symbols(alt))
            value = self.xml_value(extra if isinstance(extra, dict) else True, (_Alt("</parameter>", Sym.n(loop)),), pointer + "/json_schema/additionalProperties")
            name = Sym.t(self.ir.add_lexeme(Lexeme("parameter name", "regex", "[a-zA-Z_][a-zA-Z0-9_]*")))
            opened = self.ws_then((_Alt("<parameter=", Sym.n(self._sequence([name] + self.literal(">") + [self.symbol_of(value, "xml value")], "xml parameter"))),), "xml whitespace")
            for alt in opened:
                self.add_rule(loop, self.symbols(alt))
            tail = (_Alt("", Sym.n(loop)),)
        alts = tail
        for name in reversed(list(properties)):
            where = f"{pointer}/json_schema/properties/{_escape_pointer(name)}"
            value = self.xml_value(properties[name], (_Alt("</parameter>", self.symbol_of(alts, "parameter end")),), where)
            opened = self.ws_then(tuple(v.after(f"<parameter={name}>") for v in value), "xml whitespace")
            alts = tuple(dict.fromkeys(opened + (alts if name not in required else ())))
        return alts

    def xml_value(self, schema: Any, follow: Sequence[_Alt], pointer: str, *, top: bool = False) -> tuple[_Alt, ...]:
        """A qwen_xml value, then `follow`, as XGrammar reads it: a string that may be anything
        is raw text without `</parameter>`; a constrained string (enum, const, pattern,
        format, lengths) is its raw text, trimmed of whitespace except under length bounds;
        anything else is JSON. Inside a parameter, whitespace may surround the value."""
        kind, raw = _xml_value_kind(schema)
        if kind == "text":
            return self.free_text(follow, ["</parameter>"], pointer, name="parameter text")
        if kind == "sized":
            lo, hi = raw
            return self.free_text(follow, ["</parameter>"], pointer, min_chars=lo, max_chars=hi, name="parameter text")
        if kind == "raw":
            value = Sym.t(self.ir.add_lexeme(Lexeme("parameter value", "regex", raw)))
        else:
            value = self.json(schema, pointer)
        if top:
            return self.then([value], follow, "value")
        return self.ws_then(self.then([value], self.ws_then(follow, "xml whitespace"), "parameter value"), "xml whitespace")

    def ws_then(self, follow: Sequence[_Alt], name: str) -> tuple[_Alt, ...]:
        """Optional whitespace, then `follow`. Whitespace and a textual lead become one regex
        lexeme (`[ \t\n\r]*</parameter>`), so a lead that itself starts with a newline
        (`\n</function>`) is not eaten by the whitespace."""
        out: list[_Alt] = []
        for alt in follow:
            head, token = _first_piece(alt.lead, self.specials)
            if alt.lead and token is None:
                lexeme = Sym.t(self.ir.add_lexeme(Lexeme(f"whitespace then {head!r}", "regex", _WS + regex_escape(head))))
                symbols = [lexeme] + self.symbols(_Alt(alt.lead[len(head):], alt.rest, alt.spelled))
                out.append(_Alt("", Sym.n(self._sequence(symbols, name))))
            else:
                space = Sym.t(self.ir.add_lexeme(Lexeme("whitespace", "regex", _WS)))
                out.extend(self.then([space], (alt,), name))
        return tuple(out)

    def f_grammar(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        from .gbnf import gbnf_to_ir

        text = _field(fmt, "grammar", str, pointer)
        found = self._grammar_memo.get(text)  # once per text: a repeat compiles its content per copy
        if found is None:
            try:
                sub = gbnf_to_ir(text)
            except GrammarError as err:
                raise _error(f"in this grammar: {err}", pointer + "/grammar") from None
            found = self._grammar_memo[text] = _merge(self.ir, sub, f"grammar{len(self.ir.nonterminals)}")
        return self.then([found], follow, "grammar")

    # -- token forms ---------------------------------------------------------------------------

    def token_id(self, token: Any, pointer: str) -> int:
        if isinstance(token, bool) or not isinstance(token, (int, str)):
            raise _error("a token is an id (int) or a token's text (str)", pointer)
        if isinstance(token, int):
            if self.tokenizer is None or not 0 <= token < self.tokenizer.vocab_size:
                raise _error(f"token id {token} is not in the tokenizer (pass tokenizer=)", pointer)
            return token
        found = self.specials.get(token)
        if found is None:
            raise _error(f"{token!r} is not a special token of the tokenizer (pass tokenizer=)", pointer)
        return found

    def f_token(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        token = self.token_id(fmt.get("token"), pointer + "/token")
        if self.tokenizer.is_special(token):
            sym = Sym.t(self.ir.add_lexeme(Lexeme(f"token {token}", "special", token_ids=(token,))))
        else:
            text = self.tokenizer.token_bytes(token).decode("utf-8", "surrogateescape")
            sym = Sym.t(self.ir.add_lexeme(Lexeme(repr(text), "literal", text, max_tokens=1)))
        return self.then([sym], follow, "token")

    def f_exclude_token(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        return self.token_text(fmt, follow, pointer, one=True)

    def f_any_tokens(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        return self.token_text(fmt, follow, pointer, one=False)

    def token_text(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str, *, one: bool) -> tuple[_Alt, ...]:
        """Text tokens (special tokens never match text): one token, or any number up to
        `max_tokens`. Excluded tokens must be special tokens."""
        for index, token in enumerate(fmt.get("exclude_tokens") or []):
            token_id = self.token_id(token, f"{pointer}/exclude_tokens/{index}")
            if not self.tokenizer.is_special(token_id):
                raise _error("tokensieve excludes special tokens only (text tokens are text)", f"{pointer}/exclude_tokens/{index}")
        if one:
            return self.free_text(follow, [], pointer, max_tokens=1, name="one token")
        return self.free_text(follow, [], pointer, max_tokens=fmt.get("max_tokens"), name="tokens")

    def f_token_triggered_tags(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        tags = _field(fmt, "tags", list, pointer)
        for index, tag in enumerate(tags):
            begin = tag.get("begin") if isinstance(tag, dict) else None
            if not isinstance(begin, dict) or begin.get("type") != "token":
                raise _error("tags of token_triggered_tags need a token `begin`", f"{pointer}/tags/{index}/begin")
        for index, token in enumerate(_field(fmt, "trigger_tokens", list, pointer)):
            self.token_id(token, f"{pointer}/trigger_tokens/{index}")
        return self.loop_of_tags(
            tags, follow, pointer, excludes=[],
            at_least_one=bool(fmt.get("at_least_one", False)), stop_after_first=bool(fmt.get("stop_after_first", False)),
        )

    def f_token_dispatch(self, fmt: dict[str, Any], follow: Sequence[_Alt], pointer: str) -> tuple[_Alt, ...]:
        rules = _field(fmt, "rules", list, pointer)
        tags = []
        for index, rule in enumerate(rules):
            if not (isinstance(rule, (list, tuple)) and len(rule) == 2):
                raise _error("each rule is a [token, format] pair", f"{pointer}/rules/{index}")
            tags.append({"type": "tag", "begin": {"type": "token", "token": rule[0]}, "content": rule[1], "end": ""})
        return self.loop_of_tags(tags, follow, pointer, excludes=[], at_least_one=False, stop_after_first=not bool(fmt.get("loop", True)))


def _merge(ir: GrammarIR, sub: GrammarIR, prefix: str) -> Sym:
    """Append the grammar `sub` (no skip regex) to `ir`; its start symbol."""
    if sub.skip is not None:
        raise GrammarError("an embedded grammar with a skip pattern cannot be merged")
    base = len(ir.nonterminals)
    for name in sub.nonterminals:
        ir.add_nonterminal(f"{prefix}/{name}")
    lexeme_of = [ir.add_lexeme(dataclasses.replace(lx, name=f"{prefix} {lx.name}")) for lx in sub.lexemes]
    for rule in sub.rules:
        ir.add_rule(base + rule.lhs, [Sym.t(lexeme_of[s.index]) if s.terminal else Sym.n(base + s.index) for s in rule.rhs])
    return Sym.n(base + sub.start)


_special_patterns: weakref.WeakKeyDictionary[Any, re.Pattern[str] | None] = weakref.WeakKeyDictionary()


def _special_texts(tokenizer: Any) -> _Specials:
    if tokenizer is None:
        return _Specials({})
    from .grammar import _special_token_map

    table = _special_token_map(tokenizer) or {}
    if tokenizer not in _special_patterns:  # once per tokenizer: 7 ms for Llama-3's 256
        _special_patterns[tokenizer] = _special_pattern(table)
    return _Specials(table, _special_patterns[tokenizer])


def _special_pattern(table: dict[str, int]) -> re.Pattern[str] | None:
    """A regex whose leftmost match in a text is where the first special token's text starts,
    the longest one there (alternatives are tried in order, longest first)."""
    if not table:
        return None
    return re.compile("|".join(re.escape(text) for text in sorted(table, key=len, reverse=True)))


class _Specials:
    """Special token texts of a tokenizer, for splitting literals."""

    def __init__(self, table: dict[str, int], pattern: re.Pattern[str] | None = None) -> None:
        self.table = table
        # `_special_pattern(table)`: finds a piece in one regex search (0.1 µs) instead of a
        # loop over the text's characters (5 µs for a tool-call opening).
        self.pattern = pattern if pattern is not None or not table else _special_pattern(table)

    def get(self, text: str) -> int | None:
        return self.table.get(text)

    def first_piece(self, text: str) -> tuple[str, int | None]:
        """The first piece of `text` (see `_first_piece`), remembered: free text asks it of
        every lead after it, and 128 tools make hundreds of long leads."""
        memo = self.__dict__.setdefault("_first", {})
        found = memo.get(text)
        if found is None:
            found = memo[text] = _first_piece_uncached(text, self)
        return found


def _split_specials(text: str, specials: _Specials) -> list[tuple[str, int | None]]:
    """`text` as pieces: (special token text, id) where a special token's text occurs, else
    (plain text, None). Longest special text first at each position."""
    if not specials.table or not text:
        return [(text, None)]
    assert specials.pattern is not None
    out: list[tuple[str, int | None]] = []
    plain_start = 0
    for match in specials.pattern.finditer(text):
        if plain_start < match.start():
            out.append((text[plain_start : match.start()], None))
        out.append((match[0], specials.table[match[0]]))
        plain_start = match.end()
    if plain_start < len(text):
        out.append((text[plain_start:], None))
    return out


def _first_piece(text: str, specials: _Specials) -> tuple[str, int | None]:
    """The first piece of `text` (plain text up to the first special token, or that token)."""
    return specials.first_piece(text)


def _first_piece_uncached(text: str, specials: _Specials) -> tuple[str, int | None]:
    if not specials.table or not text:
        return (text, None)
    assert specials.pattern is not None
    match = specials.pattern.search(text)
    if match is None:
        return (text, None)
    return (text[: match.start()], None) if match.start() else (match[0], specials.table[match[0]])


_SCHEMA_MAPS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))
_SCHEMA_LISTS = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))
_SCHEMA_VALUES = frozenset(("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                            "additionalItems", "unevaluatedProperties", "unevaluatedItems"))


def _strict(schema: Any) -> Any:
    """XGrammar's reading of a tool schema (its strict mode): an object that lists
    `properties` allows no others unless `additionalProperties` says so, and `prefixItems`
    without `items` allows no more items. A copy; the caller's schema is untouched."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key, value in schema.items():  # a schema's few keys, not the 20 that may hold schemas
        if key in _SCHEMA_MAPS:
            if isinstance(value, dict):
                out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS:
            if isinstance(value, list):
                out[key] = [_strict(sub) for sub in value]
        elif key in _SCHEMA_VALUES:
            out[key] = [_strict(sub) for sub in value] if key == "items" and isinstance(value, list) else _strict(value)
    if "properties" in out and "additionalProperties" not in out and "unevaluatedProperties" not in out:
        out["additionalProperties"] = False
    if "prefixItems" in out and "items" not in out and "unevaluatedItems" not in out:
        out["items"] = False
    return out


def _xml_value_kind(schema: Any) -> tuple[str, Any]:
    """How a qwen_xml value is written: ("text", None) any raw text; ("sized", (lo, hi)) raw
    text of lo..hi characters; ("raw", regex) raw text matching the regex; ("json", None)."""
    from .json_schema.strings import FORMAT_REGEXES

    if schema is True or schema == {}:
        return "text", None
    if not isinstance(schema, dict):
        return "json", None
    for key in ("anyOf", "oneOf"):
        if any(_xml_value_kind(option)[0] == "text" for option in schema.get(key) or ()):
            return "text", None
    types = schema.get("type")
    if isinstance(types, list):
        return ("text", None) if "string" in types else ("json", None)
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if values is not None and types in (None, "string"):
        spelled = [v if isinstance(v, str) else json.dumps(v) for v in values if types is None or isinstance(v, str)]
        return "raw", "|".join(regex_escape(v) for v in spelled) if spelled else "[^\\s\\S]"
    if types != "string":
        return "json", None
    if "pattern" in schema:
        pattern = schema["pattern"]
        if not isinstance(pattern, str):
            return "json", None
        return "raw", pattern[1 if pattern.startswith("^") else 0: -1 if pattern.endswith("$") and not pattern.endswith("\\$") else None]
    if "format" in schema:
        found = FORMAT_REGEXES.get(schema["format"])
        return ("raw", found) if found is not None else ("text", None)
    if "minLength" in schema or "maxLength" in schema:
        return "sized", (int(schema.get("minLength", 0)), schema.get("maxLength"))
    return "text", None


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _error(message: str, pointer: str) -> GrammarError:
    return GrammarError(f"structural tag at {pointer or '/'}: {message}", json_pointer=pointer)


def _field(fmt: dict[str, Any], name: str, kind: type, pointer: str) -> Any:
    value = fmt.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise _error(f"`{name}` must be {'a list' if kind is list else 'a string' if kind is str else 'an integer'}", f"{pointer}/{name}")
    return value


def _strings(fmt: dict[str, Any], name: str, pointer: str) -> list[str]:
    value = fmt.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _error(f"`{name}` must be a list of strings", f"{pointer}/{name}")
    return value


def _content(fmt: dict[str, Any], pointer: str) -> Any:
    if "content" not in fmt:
        raise _error("missing `content`", pointer)
    return fmt["content"]


def normalize(spec: Any) -> tuple[Any, str]:
    """The format of a structural tag (a dict or JSON text) and its JSON pointer; the legacy
    form (`structures` with `begin` / `schema` / `end`, plus `triggers`) becomes
    `triggered_tags`."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except RecursionError:
            raise GrammarError("the structural tag nests too deeply to read", json_pointer="") from None
        except ValueError as err:
            raise GrammarError(f"the structural tag is not valid JSON: {err}", json_pointer="") from None
    if not isinstance(spec, dict):
        raise GrammarError("a structural tag is a JSON object", json_pointer="")
    if "structures" in spec:
        structures = spec["structures"]
        triggers = spec.get("triggers")
        if not isinstance(structures, list) or not isinstance(triggers, list):
            raise GrammarError("a legacy structural tag needs `structures` and `triggers` lists", json_pointer="")
        tags = []
        for index, item in enumerate(structures):
            if not isinstance(item, dict) or not all(k in item for k in ("begin", "schema", "end")):
                raise _error("each structure needs `begin`, `schema` and `end`", f"/structures/{index}")
            schema = json.loads(item["schema"]) if isinstance(item["schema"], str) else item["schema"]
            tags.append({"type": "tag", "begin": item["begin"], "content": {"type": "json_schema", "json_schema": schema}, "end": item["end"]})
        return {"type": "triggered_tags", "triggers": triggers, "tags": tags}, ""
    if spec.get("type") == "structural_tag":
        if "format" not in spec:
            raise _error("missing `format`", "")
        return spec["format"], "/format"
    return spec, ""


def structural_tag_to_ir(spec: Any, *, tokenizer: Any = None, json_whitespace: str = "flexible") -> GrammarIR:
    """Translate a structural tag into the grammar IR.

    Raises:
        GrammarError: with `json_pointer` naming the bad node.
    """
    fmt, pointer = normalize(spec)
    compiler = _Compiler(tokenizer, json_whitespace)
    alts = compiler.compile(fmt, _END, pointer)
    for alt in alts:
        compiler.ir.add_rule(compiler.ir.start, compiler.symbols(alt))
    _spell_first_literals(compiler, compiler.spell_first)
    _split_prefix_literals(compiler.ir, compiler.own_literals)
    return compiler.ir


def _spell_first_literals(compiler: _Compiler, nonterminals: set[int]) -> None:
    """Spell, one character per lexeme, the literal that starts each rule of `nonterminals`
    (and of the nonterminals that start them): a sibling's text beside spelled free text
    (`_Compiler.resolve`)."""
    if not nonterminals:
        return
    ir = compiler.ir
    todo = list(nonterminals)
    spelled = set(todo)
    while todo:
        nt = todo.pop()
        for index, rule in enumerate(ir.rules):
            if rule.lhs != nt or not rule.rhs:
                continue
            first = rule.rhs[0]
            if not first.terminal:
                if first.index not in spelled:
                    spelled.add(first.index)
                    todo.append(first.index)
            elif first.index in compiler.own_literals and len(ir.lexemes[first.index].value) > 1:
                ir.rules[index] = Rule(rule.lhs, tuple(compiler.chars(ir.lexemes[first.index].value)) + tuple(rule.rhs[1:]))


def _split_prefix_literals(ir: GrammarIR, own: set[int]) -> None:
    """Spell out, one character per lexeme, every literal lexeme of the tag (`own`: not the
    lexemes of its JSON and GBNF parts, which are built for longest match) that is a proper
    prefix of another such literal or has one as a proper prefix.

    A structural tag's literals are text the output must contain, read character by character
    in XGrammar; the core reads lexemes longest match first. Where two literals can start at
    the same place and one extends the other (`abab` and `ababab`, from `ab` repeated), longest
    match would read `ababab` out of `abababab` and fail on the rest, where `abab abab` fits.
    Literals that no other literal extends are read the same either way; the others become
    single characters, which never extend one another (one character lexemes are shared).
    """
    while True:
        # First the cheap check on all own literals, used or not: sorted, a proper prefix comes
        # right before some text it starts (a 128-tool grammar has ~20,000 symbols to scan).
        texts = sorted({ir.lexemes[index].value for index in own
                        if ir.lexemes[index].kind == "literal" and not ir.lexemes[index].max_tokens})
        if not any(b.startswith(a) for a, b in zip(texts, texts[1:]) if a):
            return
        used = {sym.index for rule in ir.rules for sym in rule.rhs if sym.terminal}
        literals = {ir.lexemes[index].value: index for index in own & used
                    if ir.lexemes[index].kind == "literal" and not ir.lexemes[index].max_tokens and ir.lexemes[index].value}
        split = set()
        for text in literals:
            for end in range(1, len(text)):
                if text[:end] in literals:
                    split.update((literals[text[:end]], literals[text]))
        split = {i for i in split if len(ir.lexemes[i].value) > 1}
        if not split:
            return
        chars = {i: [Sym.t(ir.add_lexeme(Lexeme(repr(c), "literal", c))) for c in ir.lexemes[i].value] for i in split}
        own.update(sym.index for spelled in chars.values() for sym in spelled)
        ir.rules = [
            Rule(rule.lhs, tuple(out for sym in rule.rhs for out in (chars[sym.index] if sym.terminal and sym.index in chars else [sym])))
            for rule in ir.rules
        ]
