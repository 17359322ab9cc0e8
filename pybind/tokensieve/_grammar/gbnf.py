r"""GBNF (llama.cpp's grammar format) → `GrammarIR`.

GBNF has no lexer/parser split: every terminal is one character. Handing the core one lexeme per
character would be correct but slow (every character is an Earley step), so this front-end
merges regular material into larger lexemes — and must do so without changing the language under
the greedy lexing rule of `docs/grammar_ir.md` (a lexeme ends at its longest match, decided with
one byte of look-ahead, never backtracked).

## Pipeline

1. **Parse** (`parse_gbnf`): a hand-written lexer and recursive-descent parser (group nesting
   bounded by `NESTING_DEPTH_MAX`) builds an AST per rule: character sets, rule references,
   special tokens `<[id]>`, sequences, alternatives and counted repetitions. Every error is a
   `GrammarError` with position, line and column.
2. **Inline regular rules**: a rule that reaches no cycle of the reference graph (and no special
   token) denotes a regular language; it becomes one regular expression and is substituted
   wherever it is used (unless the expression would be too large or deep).
3. **Coarse lexemes**: in every remaining rule, each maximal run of regular items of a sequence
   (literals, classes, quantified regular groups, inlined rules — single-alternative groups are
   spliced so runs continue through them) becomes one candidate lexeme. A run that can match the
   empty text becomes an optional helper (`h → R⁺ | ε`, `R⁺` = R without ε); lexemes never match
   empty text. Non-regular repetition becomes left-recursive helper rules.
4. **Refine until safe**: a lexeme that *could* over-extend (below) is split one level along its
   regex structure — a sequence into its items, an alternation into alternatives, `X{m,n}` into
   rules over X — at every occurrence, and the check is repeated. A one-character lexeme never
   needs splitting, so this ends; in the worst case every lexeme is one character class and the
   grammar is the plain character-level reading of the GBNF.
5. **Emit** the IR: literal lexemes for fixed texts, regex lexemes otherwise.

## Syntax (llama.cpp's `grammars/README.md`)

`name ::= alternatives` with names of letters, digits, `-` and `_`; a rule runs until the next
`name ::=` (so newlines may appear anywhere between items — every grammar llama.cpp accepts
reads the same); `root` is the start. Items: `"literal"`, `[class]`, `[^class]`, `.` (any code
point, newline included), `( … )`, rule names, `<[token-id]>` (a special-token lexeme), each
followed by any of `? * + {m} {m,} {m,n}` (counts up to `REPEAT_COUNT_MAX`). Escapes in literals
and classes: `\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH`. `#` starts a comment. Stricter than
llama.cpp: a rule defined twice, an empty class `[]` and an escape that is not a Unicode scalar
value are errors; token strings `<think>` and negated tokens `!<…>` (which need the tokenizer)
are refused with a message.

## Why the result matches the same texts as the GBNF

Write G for the character-level grammar and H for the lexeme grammar; replacing each lexeme of H
by its language gives exactly G (inlining, run merging and splitting are substitutions of equal
languages, made at the same text points in every context). So every text the core accepts is in
L(G). For the converse take a text in L(G) with a derivation, which induces a split into lexeme
texts w₁ w₂ … of H. Induction on the boundaries: the lexer starts lexeme k with the set A of
lexemes the live parses expect, and the intended lexeme L ∈ A. While inside wₖ, L can continue,
so the lexer does not stop early. It stops right after wₖ iff no lexeme of A can continue wₖ
with the next byte; then every live parse that reads wₖ as some lexeme goes on, the intended
one among them. Step 4 guarantees that stop:

- *Which lexemes can be expected at one boundary.* Lexeme occurrences (a lexeme at one place of
  one production) are tagged with their last two call sites (k-limited call strings; deeper
  context is forgotten, with FOLLOW taking the union over every caller), and FIRST/FOLLOW are
  computed over tagged occurrences. The relation "may be expected together" is the smallest
  that contains FIRST(root)², and contains FOLLOW(m) × FOLLOW(m′) whenever it contains (m, m′)
  and the lexemes of m and m′ can match one same text. By induction every pair of occurrences
  in a real A is in it: the live parses after wₖ read wₖ as occurrences that were expected
  together and all match wₖ, and each expects next something in its FOLLOW.
- *No rival can go on.* For every pair (L, L′) that may be expected together, no w ∈ L and
  character c that can follow L's occurrence (first characters of its FOLLOW, widened to every
  character sharing c's first UTF-8 byte, since the core looks one *byte* ahead) have w·c a
  prefix of a text of L′. Lexemes with disjoint first characters never conflict; the rest are
  decided exactly on pairs of Brzozowski derivatives, with a state budget — running out counts
  as a conflict. Whether two lexemes share a text is decided the same way.

When the check flags L′ it is L′ that is split (it is the one that can over-extend; a
one-character lexeme cannot). The check is conservative (FOLLOW forgets context past two calls;
a pair may be flagged that no real boundary holds), so some lexemes are split that could have
stayed whole, never the other way round.

Example: `[a-z]* "x"` is one run, hence one lexeme `[a-z]*x`, and correct; had it been two lexemes
`[a-z]+` and `x`, the check would flag `[a-z]+` (it can continue with the `x` that follows it)
and split it into single-character lexemes with a left-recursive rule.

Measured (CPython 3.11, one core): the test corpus translates in 1–70 ms per grammar (the C-like
grammar, with comments inside whitespace, is the slowest); 150 keyword rules in 0.3 s; a
llama.cpp JSON-schema grammar with an `additionalProperties` key trie in 0.5 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, Union

from .charset import (
    CODE_POINT_MAX, SURROGATES, Ranges, complement, intersects, normalize, union,
)
from .._errors import GrammarError, LimitError
from .automata import _ALT, _SEQ, _UNLIMITED, _Budget, _OverBudget, _Pool, _can_extend, _share_text
from .ir import GrammarIR, Lexeme, Sym


__all__ = ["gbnf_to_ir", "parse_gbnf"]

NESTING_DEPTH_MAX = 200  # parenthesised groups inside one another
REPEAT_COUNT_MAX = 10_000  # bound in {m,n}; the core's regex limit too
LEXEME_DEPTH_MAX = 80  # expression nesting of one regex lexeme (the core refuses > 100 groups)
LEXEME_SIZE_MAX = 20_000  # approximate pattern length of one regex lexeme
INLINE_SIZE_MAX = 4_000  # a regular rule larger than this stays a nonterminal
REFINE_ROUND_COUNT_MAX = 10_000
CONTEXT_DEPTHS = (2, 1, 0)  # calling-context depths the conflict analysis tries, most precise first
TAGGED_OCCURRENCE_COUNT_MAX = 50_000  # lexeme occurrences × contexts; past it a shallower depth
# Work of the whole lexeme refinement (occurrence fixpoints, the "expected together" closure,
# conflict checks), in units of one inner-loop step (≈ 0.2–0.6 µs): about 1.5 s at most.
# Counted repetitions of recursive rules (`r2 ::= r1* | r2{0,100}`) expand into hundreds of
# helper rules whose occurrence closure is cubic; unbounded, such a grammar ran for minutes.
# A depth of calling context that runs over its share falls back to a shallower one (less
# precise, more lexemes split, still correct); past the whole budget the translation stops
# with a `LimitError`. The test corpus's largest grammar (c.gbnf) uses 6% of it.
ANALYSIS_WORK_MAX = 3_000_000


# ===============================================================================================
# Errors
# ===============================================================================================


def _error(text: str, position: int, message: str) -> GrammarError:
    """A `GrammarError` at `position` of `text`, with line and column in the message."""
    position = max(0, min(position, len(text)))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return GrammarError(
        f"GBNF grammar, line {line}, column {column}: {message}", position=position, line=line, column=column
    )


# ===============================================================================================
# Character sets
# ===============================================================================================




def _widen_to_lead_bytes(ranges: Ranges) -> Ranges:
    """Every code point whose UTF-8 encoding starts with the same byte as one in `ranges`."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for block_lo, block_hi, shift in _UTF8_LEAD_BLOCKS:
            a, b = max(lo, block_lo), min(hi, block_hi)
            if a <= b:  # code points sharing a lead byte are aligned runs of 1 << shift
                run_lo, run_hi = (a >> shift) << shift, ((b >> shift) << shift) + (1 << shift) - 1
                out.append((max(run_lo, block_lo), min(run_hi, block_hi)))
    return normalize(out)


# (first code point, last code point, bits after the lead byte) per UTF-8 encoding length
_UTF8_LEAD_BLOCKS = ((0, 0x7F, 0), (0x80, 0x7FF, 6), (0x800, 0xFFFF, 12), (0x10000, CODE_POINT_MAX, 18))


# ===============================================================================================
# GBNF syntax tree
# ===============================================================================================


@dataclass(eq=False)
class CharSet:
    """One character from `ranges`."""

    ranges: Ranges


@dataclass(eq=False)
class RuleRef:
    """A reference to the rule `name`, written at `position`."""

    name: str
    position: int


@dataclass(eq=False)
class SpecialToken:
    """`<[id]>`: one special token, never text."""

    token_id: int


@dataclass(eq=False)
class Concat:
    """Items one after the other (empty: the empty text)."""

    items: list[Node]


@dataclass(eq=False)
class Choice:
    """One of the alternatives."""

    alternatives: list[Concat]


@dataclass(eq=False)
class Repeat:
    """`item{min_count,max_count}`; `max_count` None is unbounded."""

    item: Node
    min_count: int
    max_count: int | None


Node = Union[CharSet, RuleRef, SpecialToken, Concat, Choice, Repeat]


@dataclass
class RuleDef:
    """One `name ::= body` definition, starting at `position`."""

    name: str
    body: Choice
    position: int


@dataclass
class GbnfGrammar:
    """A parsed GBNF grammar: its rules by name, in the order they were written."""

    text: str
    rules: dict[str, RuleDef] = field(default_factory=dict)


# ===============================================================================================
# Parser
# ===============================================================================================

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_SIMPLE_ESCAPES = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93}
_HEX_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}
_ESCAPE_HELP = "write one of \\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH"


class _Parser:
    """Recursive descent over GBNF text; two Python frames per nested group."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, message: str, position: int | None = None) -> GrammarError:
        return _error(self.text, self.pos if position is None else position, message)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    def skip_space(self) -> None:
        """Skip whitespace (newlines included) and `#` comments."""
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            else:
                break

    def parse_name(self) -> str:
        start = self.pos
        while self.peek() and self.peek() in _NAME_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def at_rule_start(self) -> bool:
        """Is the text at `pos` a rule head `name ::=`? (pos is restored)"""
        saved = self.pos
        try:
            if not self.parse_name():
                return False
            self.skip_space()
            return self.text.startswith("::=", self.pos)
        finally:
            self.pos = saved

    def parse_grammar(self) -> GbnfGrammar:
        grammar = GbnfGrammar(self.text)
        self.skip_space()
        while self.pos < len(self.text):
            start = self.pos
            name = self.parse_name()
            if not name:
                if self.text.startswith("::=", self.pos):
                    raise self.fail("'::=' has no rule name before it; write `name ::= ...`")
                raise self.fail(
                    f"expected a rule name (letters, digits, '-', '_') to start a rule `name ::= ...`, "
                    f"found {self.peek()!r}"
                )
            self.skip_space()
            if not self.text.startswith("::=", self.pos):
                raise self.fail(f"expected '::=' after the rule name {name!r}")
            self.pos += 3
            body = self.parse_choice(top_level=True)
            if name in grammar.rules:
                first = grammar.rules[name].position
                first_line = self.text.count("\n", 0, first) + 1
                raise self.fail(
                    f"rule {name!r} is defined twice (first on line {first_line}); "
                    f"merge the definitions with '|'",
                    start,
                )
            grammar.rules[name] = RuleDef(name, body, start)
            self.skip_space()
        return grammar

    def parse_choice(self, *, top_level: bool) -> Choice:
        alternatives = [self.parse_sequence(top_level=top_level)]
        while self.peek() == "|":
            self.pos += 1
            alternatives.append(self.parse_sequence(top_level=top_level))
        return Choice(alternatives)

    def parse_sequence(self, *, top_level: bool) -> Concat:
        """Items up to `|`, `)`, the end, or (at top level) the next rule head."""
        items: list[Node] = []
        while True:
            self.skip_space()
            c = self.peek()
            if c == "" or c == "|":
                break
            if c == ")":
                if top_level:
                    raise self.fail("unmatched ')'; remove it or open a group with '(' before it")
                break
            if c in "*+?{":
                if not items:
                    raise self.fail(f"{c!r} has nothing to repeat; put it right after an item")
                items[-1] = self.parse_quantifier(items[-1])
            elif c in _NAME_CHARS:
                if self.at_rule_start():
                    if not top_level:
                        raise self.fail(
                            "a rule definition starts inside parentheses; close the group with ')'"
                        )
                    break
                start = self.pos
                items.append(RuleRef(self.parse_name(), start))
            else:
                items.append(self.parse_atom(c))
        return Concat(items)

    def parse_atom(self, c: str) -> Node:
        if c == '"':
            return self.parse_literal()
        if c == "[":
            return self.parse_class()
        if c == ".":
            self.pos += 1
            return CharSet(complement(()))
        if c == "(":
            return self.parse_group()
        if c == "<":
            return self.parse_special()
        if c == "!":
            raise self.fail("negated tokens (!<...>) are not supported; list the allowed text instead")
        if self.text.startswith("::=", self.pos):
            raise self.fail("'::=' has no rule name before it; write `name ::= ...`")
        raise self.fail(
            f"unexpected character {c!r}; expected a \"literal\", a [class], '.', '(', a rule name, "
            "or <[token-id]>"
        )

    def parse_group(self) -> Choice:
        start = self.pos
        if self.depth >= NESTING_DEPTH_MAX:
            raise self.fail(
                f"groups are nested deeper than {NESTING_DEPTH_MAX}; flatten them with helper rules"
            )
        self.depth += 1
        self.pos += 1
        inner = self.parse_choice(top_level=False)
        if self.peek() != ")":
            raise self.fail("unclosed '(': close the group with ')'", start)
        self.pos += 1
        self.depth -= 1
        return inner

    def parse_literal(self) -> Node:
        start = self.pos
        self.pos += 1
        chars: list[Node] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail('unterminated string literal; close it with \'"\'', start)
            if self.peek() == '"':
                self.pos += 1
                break
            c = self.parse_char()
            chars.append(CharSet(((c, c),)))
        return chars[0] if len(chars) == 1 else Concat(chars)

    def parse_class(self) -> CharSet:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated character class; close it with ']'", start)
            if self.peek() == "]":
                self.pos += 1
                break
            lo_pos = self.pos
            lo = self.parse_char()
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = self.parse_char()
                if hi < lo:
                    raise self.fail(
                        f"reversed range {_show(lo)}-{_show(hi)} in a character class; "
                        f"write {_show(hi)}-{_show(lo)}",
                        lo_pos,
                    )
            ranges.append((lo, hi))
        result = complement(normalize(ranges)) if negated else normalize(ranges)
        if not result:
            raise self.fail("this character class matches no character; remove it or add characters", start)
        return CharSet(result)

    def parse_char(self) -> int:
        """One character of a literal or class, escapes decoded."""
        start = self.pos
        c = self.text[self.pos]
        self.pos += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        if e in _SIMPLE_ESCAPES:
            self.pos += 1
            return _SIMPLE_ESCAPES[e]
        if e in _HEX_ESCAPE_DIGITS:
            digit_count = _HEX_ESCAPE_DIGITS[e]
            digits = self.text[self.pos + 1 : self.pos + 1 + digit_count]
            if len(digits) != digit_count or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"bad escape: \\{e} needs exactly {digit_count} hex digits", start)
            value = int(digits, 16)
            if value > CODE_POINT_MAX or SURROGATES[0] <= value <= SURROGATES[1]:
                raise self.fail(f"bad escape: \\{e}{digits} is not a Unicode scalar value", start)
            self.pos += 1 + digit_count
            return value
        shown = "at the end of the text" if e == "" else f"'\\{e}'"
        raise self.fail(f"bad escape {shown}; {_ESCAPE_HELP}", start)

    def parse_quantifier(self, item: Node) -> Repeat:
        c = self.peek()
        self.pos += 1
        if c == "*":
            return Repeat(item, 0, None)
        if c == "+":
            return Repeat(item, 1, None)
        if c == "?":
            return Repeat(item, 0, 1)
        start = self.pos - 1
        min_count = self.parse_count(start)
        max_count: int | None = min_count
        self.skip_space()
        if self.peek() == ",":
            self.pos += 1
            self.skip_space()
            max_count = self.parse_count(start) if self.peek().isdigit() else None
            self.skip_space()
        if self.peek() != "}":
            raise self.fail("expected '}' to close the repetition {m}, {m,} or {m,n}")
        self.pos += 1
        if max_count is not None and max_count < min_count:
            raise self.fail(
                f"bad repetition bounds {{{min_count},{max_count}}}: the minimum is above the maximum", start
            )
        return Repeat(item, min_count, max_count)

    def parse_count(self, start: int) -> int:
        self.skip_space()
        digits_start = self.pos
        while self.peek().isdigit() and self.peek() in "0123456789":
            self.pos += 1
        if self.pos == digits_start:
            raise self.fail("expected a number in the repetition {m}, {m,} or {m,n}")
        value = int(self.text[digits_start : self.pos])
        if value > REPEAT_COUNT_MAX:
            raise self.fail(
                f"repetition count {value} is above {REPEAT_COUNT_MAX}; use '*' or '+' for long repetitions",
                digits_start,
            )
        return value

    def parse_special(self) -> SpecialToken:
        start = self.pos
        if self.text.startswith("<[", self.pos):
            end = self.text.find("]>", self.pos)
            digits = self.text[self.pos + 2 : end] if end > 0 else ""
            if digits.isdigit() and digits.isascii():
                self.pos = end + 2
                return SpecialToken(int(digits))
            raise self.fail("a token id must be written <[number]>, e.g. <[128009]>", start)
        raise self.fail(
            "token strings like <think> need the tokenizer; write the token id instead, e.g. <[128009]>",
            start,
        )


def _show(c: int) -> str:
    return chr(c) if 0x20 < c < 0x7F else f"\\u{c:04X}" if c <= 0xFFFF else f"\\U{c:08X}"


def parse_gbnf(text: str) -> GbnfGrammar:
    """Parse GBNF text into per-rule syntax trees (no checks across rules).

    Raises:
        GrammarError: malformed text; `position`, `line`, `column` give the place.
    """
    if not isinstance(text, str):
        raise TypeError(f"a GBNF grammar is a str, not {type(text).__name__}")
    return _Parser(text).parse_grammar()


def _check_references(grammar: GbnfGrammar) -> None:
    """Every referenced rule exists, and `root` does."""
    for rule in grammar.rules.values():
        for node in _walk(rule.body):
            if isinstance(node, RuleRef) and node.name not in grammar.rules:
                raise _error(
                    grammar.text,
                    node.position,
                    f"rule {node.name!r} is not defined; "
                    f"define it with `{node.name} ::= ...` or fix the name",
                )
    if "root" not in grammar.rules:
        message = "the grammar has no 'root' rule; add `root ::= ...` (what the whole output matches)"
        raise _error(grammar.text, 0, message)


def _children(node: Node) -> Sequence[Node]:
    if isinstance(node, Choice):
        return node.alternatives
    if isinstance(node, Concat):
        return node.items
    if isinstance(node, Repeat):
        return (node.item,)
    return ()


def _walk(node: Node) -> Iterator[Node]:
    """Every node under `node` (iterative, any depth)."""
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(_children(n))


# ===============================================================================================
# The lexeme grammar under construction
# ===============================================================================================

_NT, _TERM, _SPECIAL = 0, 1, 2
Symbol = tuple[int, int]  # (_NT, nonterminal) | (_TERM, regex term) | (_SPECIAL, token id)


class _Cfg:
    """Nonterminals with productions over nonterminals, regex terms and special tokens.

    A term that was split is replaced, at every occurrence, by the nonterminal in `split_of`.
    """

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.names: list[str] = []
        self.productions: list[list[tuple[Symbol, ...]]] = []
        self.split_of: dict[int, int] = {}
        self._optional_of: dict[int, int] = {}
        self._helper_counts: dict[str, int] = {}

    def add(self, name: str) -> int:
        self.names.append(name)
        self.productions.append([])
        return len(self.names) - 1

    def helper(self, owner: str, productions: list[tuple[Symbol, ...]]) -> int:
        count = self._helper_counts.get(owner, 0) + 1
        self._helper_counts[owner] = count
        nt = self.add(f"{owner}~{count}")
        self.productions[nt] = productions
        return nt

    def resolve(self, symbol: Symbol) -> Symbol:
        if symbol[0] == _TERM and symbol[1] in self.split_of:
            return (_NT, self.split_of[symbol[1]])
        return symbol

    def chunk(self, x: int) -> list[Symbol]:
        """Symbols for regex term x: nothing for ε, `opt → x⁺ | ε` if nullable, else x."""
        pool = self.pool
        if x == pool.eps:
            return []
        if not pool.nullable[x]:
            return [(_TERM, x)]
        nt = self._optional_of.get(x)
        if nt is None:
            nt = self._optional_of[x] = self.add(f"opt~{x}")
            self.productions[nt] = [((_TERM, pool.nonempty(x)),), ()]
        return [(_NT, nt)]

    def split(self, x: int) -> None:
        """Replace term x everywhere by a nonterminal one level finer along x's structure."""
        pool = self.pool
        assert not pool.is_single_char(x) and not pool.nullable[x] and x not in self.split_of
        nt = self.split_of[x] = self.add(f"lexeme~{x}")
        kind, items = pool.kind[x], pool.items[x]
        if kind == _SEQ:
            self.productions[nt] = [tuple(s for i in items for s in self.chunk(i))]
        elif kind == _ALT:
            self.productions[nt] = [tuple(self.chunk(i)) for i in items]
        else:
            min_count, max_count = pool.counts[x]
            self.productions[nt] = _repeat_productions(
                self, f"lexeme~{x}", nt, (_TERM, items[0]), min_count, max_count
            )

    def reachable(self, root: int) -> list[int]:
        seen = {root}
        order = [root]
        for nt in order:
            for production in self.productions[nt]:
                for symbol in production:
                    kind, value = self.resolve(symbol)
                    if kind == _NT and value not in seen:
                        seen.add(value)
                        order.append(value)
        return order


def _repeat_productions(
    cfg: _Cfg, owner: str, nt: int, symbol: Symbol, min_count: int, max_count: int | None
) -> list[tuple[Symbol, ...]]:
    """Productions of `nt` for symbol{min,max}: left-recursive when unbounded, a chain of
    helpers `P_k → s | s P_{k-1}` (one to k more copies) when bounded."""
    head = (symbol,) * min_count
    if max_count is None:
        if min_count == 0:
            return [((_NT, nt), symbol), ()]
        return [((_NT, nt), symbol), head]
    extra = max_count - min_count
    if extra == 0:
        return [head]
    more = symbol
    for _ in range(extra - 1):
        more = (_NT, cfg.helper(owner, [(symbol,), (symbol, more)]))
    return [head, head + (more,)]


# ===============================================================================================
# From the syntax tree to the lexeme grammar
# ===============================================================================================


class _Builder:
    """Inlines regular rules and turns every other rule into productions with coarse lexemes."""

    def __init__(self, grammar: GbnfGrammar) -> None:
        self.grammar = grammar
        self.pool = _Pool()
        self.cfg = _Cfg(self.pool)
        self.rule_regex: dict[str, int] = {}  # inlined rules
        self.rule_nt: dict[str, int] = {}
        self._pending: list[str] = []  # rules with a nonterminal but no productions yet
        self._regular: dict[int, bool] = {}

    # ---- which rules are regular --------------------------------------------------------------

    def inline_regular_rules(self) -> None:
        """Give every non-recursive rule that reaches only such rules a regex (if small)."""
        refs = {name: _referenced(rule.body) for name, rule in self.grammar.rules.items()}
        for name in _postorder(refs):
            rule = self.grammar.rules[name]
            if name in refs[name] or not all(r in self.rule_regex for r in refs[name]):
                continue
            if any(isinstance(n, SpecialToken) for n in _walk(rule.body)):
                continue
            x = self.regex(rule.body)
            if self.pool.size[x] <= INLINE_SIZE_MAX and self.pool.depth[x] <= LEXEME_DEPTH_MAX // 2:
                self.rule_regex[name] = x

    def is_regular(self, node: Node) -> bool:
        found = self._regular.get(id(node))
        if found is None:
            found = all(
                not isinstance(n, SpecialToken) and (not isinstance(n, RuleRef) or n.name in self.rule_regex)
                for n in _walk(node)
            )
            self._regular[id(node)] = found
        return found

    def regex(self, node: Node) -> int:
        """The regex term of a regular node (iterative post-order: any nesting depth)."""
        pool = self.pool
        done: dict[int, int] = {}
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            n, children_done = stack.pop()
            children = _children(n)
            if children and not children_done:
                stack.append((n, True))
                stack.extend((c, False) for c in children if id(c) not in done)
                continue
            if isinstance(n, CharSet):
                done[id(n)] = pool.chars(n.ranges)
            elif isinstance(n, RuleRef):
                done[id(n)] = self.rule_regex[n.name]
            elif isinstance(n, Concat):
                done[id(n)] = pool.seq((done[id(i)] for i in n.items), flatten=False)
            elif isinstance(n, Choice):
                done[id(n)] = pool.alt(done[id(a)] for a in n.alternatives)
            elif isinstance(n, Repeat):
                done[id(n)] = pool.rep(done[id(n.item)], n.min_count, n.max_count)
            else:
                raise AssertionError(f"not regular: {n!r}")
        return done[id(node)]

    # ---- productions ---------------------------------------------------------------------------

    def build(self) -> int:
        """Create the productions of every rule reachable from root; returns root's nonterminal."""
        root = self.nonterminal("root")
        while self._pending:  # each rule is added once, so this ends
            name = self._pending.pop()
            nt = self.rule_nt[name]
            if name in self.rule_regex:
                self.cfg.productions[nt] = [tuple(self.cfg.chunk(self.rule_regex[name]))]
            else:
                self.cfg.productions[nt] = self.alternatives(name, self.grammar.rules[name].body)
        return root

    def nonterminal(self, name: str) -> int:
        """The nonterminal of a rule, queued for `build` on first use."""
        nt = self.rule_nt.get(name)
        if nt is None:
            nt = self.rule_nt[name] = self.cfg.add(name)
            self._pending.append(name)
        return nt

    def alternatives(self, owner: str, choice: Choice) -> list[tuple[Symbol, ...]]:
        if self.is_regular(choice):
            return [tuple(self.cfg.chunk(self.regex(choice)))]
        return [tuple(self.sequence(owner, alt.items)) for alt in choice.alternatives]

    def sequence(self, owner: str, items: Sequence[Node]) -> list[Symbol]:
        """Symbols for items: maximal regular runs become one term each."""
        out: list[Symbol] = []
        run: list[int] = []
        for item in _spliced(items, self.is_regular):
            if self.is_regular(item):
                run.append(self.regex(item))
                continue
            out.extend(self.cfg.chunk(self.pool.seq(run, flatten=False)))
            run = []
            out.append(self.symbol(owner, item))
        out.extend(self.cfg.chunk(self.pool.seq(run, flatten=False)))
        return out

    def symbol(self, owner: str, node: Node) -> Symbol:
        """One symbol standing for a non-regular node (helpers for groups and repetitions)."""
        if isinstance(node, RuleRef):
            return (_NT, self.nonterminal(node.name))
        if isinstance(node, SpecialToken):
            return (_SPECIAL, node.token_id)
        if isinstance(node, Choice):
            return (_NT, self.cfg.helper(owner, self.alternatives(owner, node)))
        if isinstance(node, Concat):
            return (_NT, self.cfg.helper(owner, [tuple(self.sequence(owner, node.items))]))
        if isinstance(node, Repeat):
            item = self.symbol(owner, node.item)
            nt = self.cfg.helper(owner, [])
            self.cfg.productions[nt] = _repeat_productions(
                self.cfg, owner, nt, item, node.min_count, node.max_count
            )
            return (_NT, nt)
        raise AssertionError(f"regular node {node!r} reached symbol()")


def _spliced(items: Sequence[Node], is_regular: Callable[[Node], bool]) -> Iterator[Node]:
    """Items with non-regular single-alternative groups opened in place (iteratively), so a
    run of regular items continues through them."""
    stack: list[Iterator[Node]] = [iter(items)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
        elif isinstance(item, Choice) and len(item.alternatives) == 1 and not is_regular(item):
            stack.append(iter(item.alternatives[0].items))
        elif isinstance(item, Concat) and not is_regular(item):
            stack.append(iter(item.items))
        else:
            yield item


def _referenced(node: Node) -> set[str]:
    return {n.name for n in _walk(node) if isinstance(n, RuleRef)}


def _postorder(refs: dict[str, set[str]]) -> list[str]:
    """Rules with callees first, as far as cycles allow (iterative depth-first search)."""
    order: list[str] = []
    state: dict[str, int] = {}
    for top in refs:
        if top in state:
            continue
        state[top] = 1
        stack: list[tuple[str, Iterator[str]]] = [(top, iter(sorted(refs[top])))]
        while stack:
            name, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                state[name] = 2
                order.append(name)
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(refs[child]))))
            elif state[child] == 1:
                _mark_cycle(refs, stack, child)
    return order


def _mark_cycle(refs: dict[str, set[str]], stack: list[tuple[str, Iterator[str]]], head: str) -> None:
    """Mark every rule on the cycle ending at `head` as recursive (a self-reference in refs)."""
    for name, _ in reversed(stack):
        refs[name].add(name)
        if name == head:
            break


# ===============================================================================================
# Refinement: split lexemes until none can over-extend
# ===============================================================================================

@dataclass
class _Occurrences:
    """Tagged lexeme occurrences of the reachable lexeme grammar, with FIRST and FOLLOW.

    An occurrence is a term or special token at one position of one production, *tagged with
    its calling context*: the last `depth` call sites on the way to the production (k-limited
    call strings, "k-CFA"). The string lexeme of a JSON `value` inside an array and the same
    lexeme inside an object are different tagged occurrences, with different FOLLOW sets;
    past `depth` calls the context is forgotten and FOLLOW unions over every caller. Sets of
    occurrences are bit sets (bit i = occurrence i).
    """

    symbols: list[Symbol]  # occurrence → its lexeme symbol
    first_root: int  # occurrences that can come first
    follow: list[int]  # occurrence → occurrences that can come right after it


def _bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


Site = tuple[int, int]  # (production, position) of a nonterminal on a right-hand side
Context = tuple[Site, ...]  # innermost call site first
_ROOT_SITE: Site = (-1, -1)  # the call of the start nonterminal


class _OccurrenceBuilder:
    """Builds `_Occurrences` for one context depth: FIRST per (nonterminal, context) and
    AFTER per (nonterminal, context) by fixpoints (every pass only grows bit sets)."""

    def __init__(self, cfg: _Cfg, root: int, depth: int, budget: _Budget) -> None:
        nts = cfg.reachable(root)
        self.budget = budget
        self.depth = depth
        self.root = root
        self.prods = [(nt, tuple(cfg.resolve(s) for s in p)) for nt in nts for p in cfg.productions[nt]]
        self.by_lhs: dict[int, list[int]] = {nt: [] for nt in nts}
        self.sites: dict[int, list[Site]] = {nt: [] for nt in nts}
        self.sites[root].append(_ROOT_SITE)
        for index, (nt, rhs) in enumerate(self.prods):
            self.by_lhs[nt].append(index)
            for position, s in enumerate(rhs):
                if s[0] == _NT:
                    self.sites[s[1]].append((index, position))
        self.nullable = self._nullable()
        self.contexts: dict[int, list[Context]] = {}
        self.extensions: dict[tuple[int, Context], list[Context]] = {}
        self.symbols: list[Symbol] = []
        self.ids: dict[tuple[int, int, Context], int] = {}
        self.first: dict[tuple[int, Context], int] = {}
        self.after: dict[tuple[int, Context], int] = {}

    def _nullable(self) -> set[int]:
        # A worklist, linear in the productions: a fixpoint of passes over every production
        # was quadratic when nullable rules chain (one more per pass), and uncharged.
        nullable: set[int] = set()
        pending = [0] * len(self.prods)  # symbols of each production not yet known nullable
        users: dict[int, list[int]] = {}
        work: list[int] = []
        for index, (nt, rhs) in enumerate(self.prods):
            self.budget.spend(1 + len(rhs))
            if any(s[0] != _NT for s in rhs):
                pending[index] = -1  # holds a terminal: never nullable
                continue
            pending[index] = len(rhs)
            for s in rhs:
                users.setdefault(s[1], []).append(index)
            if not rhs:
                work.append(nt)
        while work:
            nt = work.pop()
            if nt in nullable:
                continue
            nullable.add(nt)
            for index in users.get(nt, ()):
                self.budget.spend()
                pending[index] -= 1
                if pending[index] == 0:
                    work.append(self.prods[index][0])
        return nullable

    def _enumerate_contexts(self) -> bool:
        """Call strings of length `depth` (shorter when they reach the start) per nonterminal;
        False past `TAGGED_OCCURRENCE_COUNT_MAX` tagged occurrences."""
        level: dict[int, list[Context]] = {nt: [()] for nt in self.by_lhs}
        for _ in range(self.depth):
            level = {
                nt: [
                    (site,) + (() if site == _ROOT_SITE else rest)
                    for site in sites
                    for rest in ([()] if site == _ROOT_SITE else level[self.prods[site[0]][0]])
                ]
                for nt, sites in self.sites.items()
            }
            if sum(len(c) for c in level.values()) > TAGGED_OCCURRENCE_COUNT_MAX:
                return False
        self.contexts = {nt: sorted(set(cs)) for nt, cs in level.items()}
        for nt, cs in self.contexts.items():
            for c in cs:
                self.extensions.setdefault((nt, c[: self.depth - 1] if self.depth else ()), []).append(c)
        for index, (nt, rhs) in enumerate(self.prods):
            for position, s in enumerate(rhs):
                if s[0] != _NT:
                    for c in self.contexts[nt]:
                        self.ids[(index, position, c)] = len(self.symbols)
                        self.symbols.append(s)
                        if len(self.symbols) > TAGGED_OCCURRENCE_COUNT_MAX:
                            return False
        return True

    def callee_context(self, p: int, position: int, context: Context) -> Context:
        return (((p, position),) + context)[: self.depth]

    def first_seq(self, p: int, d: int, context: Context) -> tuple[int, bool]:
        """FIRST of production p from position d in `context`, and whether that rest is nullable."""
        mask = 0
        rhs = self.prods[p][1]
        self.budget.spend(1 + len(rhs) - d)
        for position in range(d, len(rhs)):
            s = rhs[position]
            if s[0] != _NT:
                return mask | (1 << self.ids[(p, position, context)]), False
            mask |= self.first.get((s[1], self.callee_context(p, position, context)), 0)
            if s[1] not in self.nullable:
                return mask, False
        return mask, True

    def returns(self, nt: int, context: Context) -> list[tuple[int, int, Context]]:
        """Where parsing goes on when `nt`, called in `context`, is complete: (production,
        position after the call, the caller's context)."""
        if self.depth == 0:
            return [(q, j + 1, ()) for q, j in self.sites[nt] if (q, j) != _ROOT_SITE]
        site = context[0]
        if site == _ROOT_SITE:
            return []
        q, j = site
        return [(q, j + 1, c) for c in self.extensions.get((self.prods[q][0], context[1:]), [])]

    def build(self) -> _Occurrences | None:
        """The occurrences with FIRST and FOLLOW, or None when over the size budget."""
        if not self._enumerate_contexts():
            return None
        keys = [(nt, c) for nt, cs in self.contexts.items() for c in cs]
        for table, compute in ((self.first, self._first_of), (self.after, self._after_of)):
            changed = True
            while changed:
                changed = False
                self.budget.spend(len(keys))  # the pass itself, beside what `compute` spends
                for key in keys:
                    mask = compute(*key) | table.get(key, 0)
                    if mask != table.get(key, 0):
                        table[key] = mask
                        changed = True
        follow = [0] * len(self.symbols)
        for (p, d, context), o in self.ids.items():
            first, rest_nullable = self.first_seq(p, d + 1, context)
            follow[o] = first | (self.after.get((self.prods[p][0], context), 0) if rest_nullable else 0)
        start = (_ROOT_SITE,) if self.depth else ()
        return _Occurrences(self.symbols, self.first.get((self.root, start), 0), follow)

    def _first_of(self, nt: int, context: Context) -> int:
        mask = 0
        for p in self.by_lhs[nt]:
            mask |= self.first_seq(p, 0, context)[0]
        return mask

    def _after_of(self, nt: int, context: Context) -> int:
        mask = 0
        for q, j, caller_context in self.returns(nt, context):
            first, rest_nullable = self.first_seq(q, j, caller_context)
            mask |= first | (self.after.get((self.prods[q][0], caller_context), 0) if rest_nullable else 0)
        return mask


class _Refiner:
    """Finds the lexemes that could over-extend and splits them (see the module docstring)."""

    def __init__(self, cfg: _Cfg, root: int) -> None:
        self.cfg = cfg
        self.pool = cfg.pool
        self.root = root
        self._extend_cache: dict[tuple[int, Ranges, int], bool] = {}
        self._share_cache: dict[tuple[int, int], bool] = {}
        self.budget = _Budget(_UNLIMITED)

    def run(self) -> None:
        total = _Budget(ANALYSIS_WORK_MAX)
        depth_index = 0  # into CONTEXT_DEPTHS; once a depth ran over, later rounds start lower
        for _ in range(REFINE_ROUND_COUNT_MAX):
            while True:
                last = depth_index == len(CONTEXT_DEPTHS) - 1
                # A deeper (more precise) context may use a quarter of what is left; the last
                # depth may use all of it.
                self.budget = _Budget(max(total.left, 0) if last else max(total.left, 0) // 4)
                self.pool.budget = self.budget
                try:
                    occ = _OccurrenceBuilder(self.cfg, self.root, CONTEXT_DEPTHS[depth_index], self.budget).build()
                    if occ is None:
                        raise _OverBudget
                    victims = self.too_large(occ) or self.conflicts(occ)
                    total.left -= self.budget.spent
                    break
                except _OverBudget:
                    total.left -= self.budget.spent
                    self.pool.budget = _Budget(_UNLIMITED)
                    if last:
                        raise LimitError(
                            f"the GBNF grammar is too complex to split into lexemes safely: after expanding "
                            f"repetitions it has {sum(len(p) for p in self.cfg.productions)} productions, and "
                            f"the analysis ran past its budget of {ANALYSIS_WORK_MAX:,} steps; simplify it "
                            "(counted repetitions such as x{0,100} of recursive or nullable rules multiply "
                            "the rules)",
                            limit="gbnf_analysis",
                        ) from None
                    depth_index += 1
            self.pool.budget = _Budget(_UNLIMITED)
            if not victims:
                return
            for x in sorted(victims):
                self.cfg.split(x)
        raise GrammarError("the GBNF grammar needs too many lexeme refinements; simplify it")

    def too_large(self, occ: _Occurrences) -> set[int]:
        """Terms the core could not take as one pattern (too deep or too long)."""
        pool = self.pool
        return {
            x
            for kind, x in set(occ.symbols)
            if kind == _TERM
            and not pool.is_single_char(x)
            and (pool.depth[x] > LEXEME_DEPTH_MAX or pool.size[x] > LEXEME_SIZE_MAX)
        }

    def conflicts(self, occ: _Occurrences) -> set[int]:
        """Terms L′ that some intended lexeme L, followed by a possible character, extends,
        for every pair (L, L′) that `together` says may be expected at one boundary."""
        pool = self.pool
        together = self.together(occ)
        victims: set[int] = set()
        checked: set[tuple[int, Ranges, int]] = set()
        for o, (kind, x) in enumerate(occ.symbols):
            if kind != _TERM:
                continue
            follow_chars = self.follow_chars(occ, occ.follow[o])
            if not follow_chars:
                continue
            self.budget.spend(together[o].bit_count())
            rivals = {occ.symbols[r] for r in _bits(together[o])}
            for r_kind, other in sorted(rivals):
                if r_kind != _TERM or pool.is_single_char(other) or other in victims:
                    continue
                key = (x, follow_chars, other)
                if key not in checked:
                    checked.add(key)
                    if intersects(pool.first[x], pool.first[other]) and self.can_extend(*key):
                        victims.add(other)
        return victims

    def together(self, occ: _Occurrences) -> list[int]:
        """together[x]: occurrences that may be expected at one lexeme boundary with x.

        The smallest relation that holds for the first boundary (FIRST(root) × FIRST(root))
        and is closed under: if m and m′ may be expected together and share a text, then
        FOLLOW(m) × FOLLOW(m′) may be expected together — a boundary after a text read as m
        by one live parse and as m′ by another expects what follows either. By induction,
        every pair of occurrences expected at one real boundary is in the relation.
        """
        count = len(occ.symbols)
        sharing = self.sharing_masks(occ)
        together = [0] * count
        done = [0] * count  # partners whose consequence is applied already
        applied: set[tuple[int, int]] = set()  # (FOLLOW(m), FOLLOW(m′)) pairs applied already
        for x in _bits(occ.first_root):
            together[x] |= occ.first_root
        work = list(range(count))
        budget = self.budget
        while work:
            m = work.pop()
            fresh = together[m] & ~done[m] & sharing[m]
            done[m] |= fresh
            budget.spend(1 + count // 256)
            for m2 in _bits(fresh):
                for a, b in ((occ.follow[m], occ.follow[m2]), (occ.follow[m2], occ.follow[m])):
                    if (a, b) in applied:
                        continue
                    applied.add((a, b))
                    # One unit per bit visited, plus the width of the bit sets it combines.
                    budget.spend(a.bit_count() * (1 + count // 256))
                    for x in _bits(a):
                        if b & ~together[x]:
                            together[x] |= b
                            work.append(x)
        return together

    def sharing_masks(self, occ: _Occurrences) -> list[int]:
        """sharing[m]: the occurrences whose lexeme can match a text that m's lexeme matches."""
        by_symbol: dict[Symbol, int] = {}
        for o, symbol in enumerate(occ.symbols):
            by_symbol[symbol] = by_symbol.get(symbol, 0) | (1 << o)
        symbols = sorted(by_symbol)
        shared: dict[Symbol, int] = {}
        for i, a in enumerate(symbols):
            self.budget.spend(len(symbols) - i)
            for b in symbols[i:]:
                if self.share_text(a, b):
                    shared[a] = shared.get(a, 0) | by_symbol[b]
                    shared[b] = shared.get(b, 0) | by_symbol[a]
        return [shared.get(symbol, 0) for symbol in occ.symbols]

    def follow_chars(self, occ: _Occurrences, after: int) -> Ranges:
        """First characters of the occurrences in `after`, widened to whole lead bytes."""
        chars: Ranges = ()
        for s in _bits(after):
            if occ.symbols[s][0] == _TERM:
                chars = union(chars, self.pool.first[occ.symbols[s][1]])
        return _widen_to_lead_bytes(chars) if chars else ()

    def share_text(self, p: Symbol, q: Symbol) -> bool:
        """Can lexemes p and q match one same text? (Special tokens: the same token.)"""
        if p[0] == _SPECIAL or q[0] == _SPECIAL:
            return p == q
        if p == q:
            return True
        a, b = min(p[1], q[1]), max(p[1], q[1])
        if not intersects(self.pool.first[a], self.pool.first[b]):
            return False
        found = self._share_cache.get((a, b))
        if found is None:
            found = self._share_cache[(a, b)] = _share_text(self.pool, a, b, self.budget)
        return found

    def can_extend(self, x: int, follow_chars: Ranges, other: int) -> bool:
        key = (x, follow_chars, other)
        found = self._extend_cache.get(key)
        if found is None:
            found = self._extend_cache[key] = _can_extend(self.pool, x, follow_chars, other, self.budget)
        return found


# ===============================================================================================
# IR emission
# ===============================================================================================


def _emit(cfg: _Cfg, root: int) -> GrammarIR:
    """The IR of the reachable part of the lexeme grammar; root is nonterminal 0."""
    pool = cfg.pool
    ir = GrammarIR()
    order = cfg.reachable(root)
    index = {nt: ir.add_nonterminal(cfg.names[nt]) for nt in order}
    ir.start = index[root]
    lexeme_index: dict[Symbol, int] = {}

    def lexeme(symbol: Symbol) -> int:
        found = lexeme_index.get(symbol)
        if found is None:
            kind, value = symbol
            if kind == _SPECIAL:
                lex = Lexeme(f"<[{value}]>", "special", token_ids=(value,))
            else:
                text = pool.fixed_text(value)
                if text is not None:
                    lex = Lexeme(_quote(text), "literal", text)
                else:
                    pattern = pool.pattern(value)
                    lex = Lexeme(_short(f"/{pattern}/"), "regex", pattern)
            found = lexeme_index[symbol] = ir.add_lexeme(lex)
        return found

    for nt in order:
        for production in cfg.productions[nt]:
            rhs = []
            for symbol in production:
                kind, value = cfg.resolve(symbol)
                rhs.append(Sym.n(index[value]) if kind == _NT else Sym.t(lexeme((kind, value))))
            ir.add_rule(index[nt], rhs)
    return ir


def _quote(text: str) -> str:
    return _short('"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"')


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


# ===============================================================================================
# Entry point
# ===============================================================================================


def gbnf_to_ir(text: str) -> GrammarIR:
    """Translate a GBNF grammar (llama.cpp's format) into the grammar IR.

    The output must match rule `root`. Regular parts of the grammar become regex or literal
    lexemes as large as greedy lexing allows (see the module docstring); the rest become rules.

    Args:
        text: the grammar text.

    Returns:
        The IR; nonterminal names are the rule names (helpers are `name~k`, `opt~k`, `lexeme~k`).

    Raises:
        GrammarError: the text is malformed, a rule is undefined or defined twice, or `root` is
            missing; `position`, `line` and `column` say where.
        LimitError: the lexeme refinement ran past `ANALYSIS_WORK_MAX` (`limit` is
            `"gbnf_analysis"`): the grammar is too complex to translate in about a second.

    Cost: parsing is linear; the lexeme refinement is about quadratic in the number of
    lexemes that share first characters, each check bounded by `automata.AUTOMATON_STATE_COUNT_MAX`,
    and all of it by `ANALYSIS_WORK_MAX`.
    """
    grammar = parse_gbnf(text)
    _check_references(grammar)
    builder = _Builder(grammar)
    builder.inline_regular_rules()
    root = builder.build()
    _Refiner(builder.cfg, root).run()
    return _emit(builder.cfg, root)
