"""GBNF text → syntax tree: errors with their place, character sets, the tree's nodes and the
parser. The limits of the translation (nesting, counts, lexeme size, analysis work) are here too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence, Union

from ..charset import (
    CODE_POINT_MAX, SURROGATES, Ranges, complement, normalize,
)
from ..._errors import GrammarError


NESTING_DEPTH_MAX = 200  # parenthesised groups inside one another
REPEAT_COUNT_MAX = 10_000  # bound in {m,n}; the core's regex limit too
LEXEME_DEPTH_MAX = 80  # expression nesting of one regex lexeme (the core refuses > 100 groups)
LEXEME_SIZE_MAX = 20_000  # approximate pattern length of one regex lexeme
INLINE_SIZE_MAX = 4_000  # a regular rule larger than this stays a nonterminal
REFINE_ROUND_COUNT_MAX = 10_000
CONTEXT_DEPTHS = (2, 1, 0)  # calling-context depths the conflict analysis tries, most precise first
TAGGED_OCCURRENCE_COUNT_MAX = 50_000  # lexeme occurrences × contexts; past it a shallower depth
# Work of the whole lexeme refinement (occurrence fixpoints, the "expected together" closure,
# conflict checks), in units of one inner-loop step (≈ 0.2–0.6 µs): about 0.5 s at most.
# Counted repetitions of recursive rules (`r2 ::= r1* | r2{0,100}`) expand into hundreds of
# helper rules whose occurrence closure is cubic; unbounded, such a grammar ran for minutes.
# A depth of calling context that runs over its share falls back to a shallower one (less
# precise, more lexemes split, still correct); past the whole budget the translation stops
# with a `LimitError`. The test corpus's largest grammar (c.gbnf) uses 18% of it; running out
# takes about 0.5 s of CPU (3,000,000 steps took 1.5 s).
ANALYSIS_WORK_MAX = 1_000_000


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
class Literal:
    """A quoted text of two or more characters (one is a `CharSet`, none an empty `Concat`):
    a leaf, so the walks over a word list visit a node per word, not per character."""

    codes: tuple[int, ...]


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


Node = Union[CharSet, Literal, RuleRef, SpecialToken, Concat, Choice, Repeat]


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
        text = self.text
        end = text.find('"', start + 1)
        if end > 0 and text.find("\\", start + 1, end) < 0:
            # No escape before the closing quote: the characters are the text's.
            self.pos = end + 1
            codes = tuple(map(ord, text[start + 1 : end]))
        else:
            self.pos += 1
            read: list[int] = []
            while True:
                if self.pos >= len(text):
                    raise self.fail('unterminated string literal; close it with \'"\'', start)
                if text[self.pos] == '"':
                    self.pos += 1
                    break
                read.append(self.parse_char())
            codes = tuple(read)
        if len(codes) == 1:
            return CharSet(((codes[0], codes[0]),))
        return Literal(codes) if codes else Concat([])

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
    """Every node under `node` (iterative, any depth; `_children` inlined: the walks visit
    every node of a grammar several times)."""
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        yield n
        kind = type(n)
        if kind is Concat:
            stack.extend(n.items)  # type: ignore[union-attr]
        elif kind is Choice:
            stack.extend(n.alternatives)  # type: ignore[union-attr]
        elif kind is Repeat:
            stack.append(n.item)  # type: ignore[union-attr]


