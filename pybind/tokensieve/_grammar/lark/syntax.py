"""Lark text → syntax tree: the source and its positions, the lexer of grammar text, the
expression tree, and the parser (rules, terminals, directives). Limits of nesting and counts
are checked here, at the place in the text."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Union

from ..._errors import GrammarError
from .substring import SubstringError, substring_pattern


NESTING_DEPTH_MAX = 100
"""Deepest nesting of `( )` / `[ ]` groups in one expression: the core's regex group limit. The
parser and the desugaring recurse on groups (at most ~6 Python frames per level), so this also
keeps them far from Python's recursion limit, under Pyodide too."""

REPEAT_COUNT_MAX = 10_000
"""Largest count in `{m,n}` / `~m..n` (the core's regex limit, used for rules too)."""

SPECIAL_TOKEN_IDS_MAX = 1 << 20
"""Most token ids one `<[...]>` set may list (ranges included)."""

# ----------------------------------------------------------------------------------------------
# Lark's common.lark, written in the regex syntax of docs/lexer.md (ASCII classes, no lookaround).
# ----------------------------------------------------------------------------------------------

_INT = "[0-9]+"
_EXP = "[eE][+-]?[0-9]+"
_DECIMAL = r"[0-9]+\.[0-9]*|\.[0-9]+"
_FLOAT = f"{_INT}{_EXP}|(?:{_DECIMAL})(?:{_EXP})?"

COMMON_TERMINALS: dict[str, str] = {
    "DIGIT": "[0-9]",
    "HEXDIGIT": "[0-9a-fA-F]",
    "INT": _INT,
    "SIGNED_INT": f"[+-]?{_INT}",
    "DECIMAL": _DECIMAL,
    "_EXP": _EXP,
    "FLOAT": _FLOAT,
    "SIGNED_FLOAT": f"[+-]?(?:{_FLOAT})",
    "NUMBER": f"{_FLOAT}|{_INT}",
    "SIGNED_NUMBER": f"[+-]?(?:{_FLOAT}|{_INT})",
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\.)*"',
    "LCASE_LETTER": "[a-z]",
    "UCASE_LETTER": "[A-Z]",
    "LETTER": "[A-Za-z]",
    "WORD": "[A-Za-z]+",
    "CNAME": "[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(?:\r?\n)+",
    "SQL_COMMENT": r"--[^\n]*",
    "C_COMMENT": r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/",
    "CPP_COMMENT": r"//[^\n]*",
    "SH_COMMENT": r"#[^\n]*",
}
"""`%import common.NAME` table: terminal name → regex (same languages as Lark's common.lark,
restricted to ASCII letters)."""

# %llguidance option → accepted JSON type (and, for strings, accepted values).
_OPTIONS: dict[str, tuple[type, tuple[str, ...]]] = {
    "allow_initial_skip": (bool, ()),
    "no_forcing": (bool, ()),
    "allow_invalid_utf8": (bool, ()),
    "ignore_once": (bool, ()),
    "skip_repetition": (str, ("once",)),
}


# ----------------------------------------------------------------------------------------------
# Positions and errors
# ----------------------------------------------------------------------------------------------


class _Source:
    """The grammar text, and the conversion of offsets into lines, columns and errors."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_column(self, position: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based character offset."""
        line_index = bisect.bisect_right(self._line_starts, position) - 1
        return line_index + 1, position - self._line_starts[line_index] + 1

    def where(self, position: int) -> str:
        """`line L, column C` for an offset, for messages about another place."""
        line, column = self.line_column(position)
        return f"line {line}, column {column}"

    def error(self, message: str, position: int) -> GrammarError:
        """A `GrammarError` at `position`, with the line shown and a caret under the column."""
        position = max(0, min(position, len(self.text)))
        line, column = self.line_column(position)
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        line_text = self.text[start : len(self.text) if end < 0 else end].rstrip("\r")
        offset = column - 1
        if len(line_text) > 120:  # show a window around the column
            cut = max(0, offset - 60)
            line_text = line_text[cut : cut + 120]
            offset -= cut
        pad = "".join("\t" if ch == "\t" else " " for ch in line_text[:offset])
        full = f"line {line}, column {column}: {message}\n    {line_text}\n    {pad}^"
        return GrammarError(full, position=position, line=line, column=column)


# ----------------------------------------------------------------------------------------------
# Lexer
# ----------------------------------------------------------------------------------------------


class _Token(NamedTuple):
    """One token of grammar text (a named tuple: a grammar of 10,000 alternatives is 20,000
    tokens, and a frozen dataclass costs a microsecond each to build).

    `kind` is "rule", "term", "string", "regex", "number", "special", "directive", "op"
    (`+ * ?`), "newline", "eof", or the punctuation itself (":", "|", "(", "->", ...).
    `value` is the decoded value (name without prefix, string contents, regex body, directive
    name); `flags` the string/regex flags or the name prefix (`?`, `!`).
    """

    kind: str
    pos: int
    text: str
    value: str = ""
    flags: str = ""
    json_value: object = None


# A string without escapes: `run` takes it with one match instead of a loop per character.
_PLAIN_STRING_RE = re.compile(r'"([^"\\\n]*)"')
# What after a closing quote makes the string's `i` flag (or a name glued to it): the slow path.
_STRING_FLAG_RE = re.compile(r"[A-Za-z0-9_]")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*")
_NUMBER_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_SPECIAL_RE = re.compile(r"<[^<>\s]+>")
_DIRECTIVE_RE = re.compile(r"%[A-Za-z_]*")
_PARAM_RE = re.compile(r"_(?![A-Za-z0-9_])|0[xX][0-9a-fA-F]+|[0-9]+|[A-Za-z_][A-Za-z0-9_]*")
_LETTERS_RE = re.compile(r"[A-Za-z]*")
_PUNCTUATION = ("->", "..", ":", ",", ".", "(", ")", "{", "}", "[", "]", "~", "|", "=", "&")
_STRING_ESCAPES = {
    '"': '"', "\\": "\\", "/": "/", "'": "'", "b": "\b", "f": "\f",
    "n": "\n", "r": "\r", "t": "\t", "v": "\v", "0": "\0",
}  # fmt: skip
_DIGITS = "0123456789"
_REGEX_FLAG_LETTERS = "imslux"
_REGEX_FLAGS_SUPPORTED = "ismu"


class _Lexer:
    """Splits grammar text into `_Token`s; newlines count only outside brackets."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self.text = source.text
        self.i = 0
        self.depth = 0
        self.tokens: list[_Token] = []
        self.nested = False  # a %lark body: an unmatched `}` ends it
        self.closed = False
        self.nesting = 0  # how many %lark bodies enclose this one

    def run(self) -> list[_Token]:
        """Tokenize the whole text; the list ends with an "eof" token."""
        text = self.text
        size = len(text)
        tokens = self.tokens
        while self.i < size and not self.closed:
            i = self.i
            ch = text[i]
            if ch in " \t\r\f\v\ufeff":
                self.i = i + 1
            elif ch == "|":  # the common tokens of a long list of alternatives, inline
                tokens.append(_Token("|", i, "|"))
                self.i = i + 1
            elif (
                ch == '"' and (plain := _PLAIN_STRING_RE.match(text, i)) and not _STRING_FLAG_RE.match(text, plain.end())
            ):
                tokens.append(_Token("string", i, plain.group(), plain.group(1)))
                self.i = plain.end()
            elif ch == "\n":
                if self.depth == 0 and self.tokens and self.tokens[-1].kind != "newline":
                    self.tokens.append(_Token("newline", self.i, "\n"))
                self.i += 1
            elif ch == "#" or text.startswith("//", self.i):
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            else:
                self._token(ch)
        if self.nested and not self.closed:
            raise self.source.error("this %lark { has no closing }", self.tokens[0].pos if self.tokens else size)
        self.tokens.append(_Token("eof", self.i - 1 if self.closed else len(text), ""))
        return self.tokens

    def _emit(self, kind: str, start: int, end: int, value: str = "", flags: str = "") -> None:
        self.tokens.append(_Token(kind, start, self.text[start:end], value, flags))
        self.i = end

    def _at_line_start(self) -> bool:
        last = self.tokens[-1] if self.tokens else None
        if last is None or last.kind == "newline":
            return True
        return last.kind == "directive" and last.value == "override"

    def _token(self, ch: str) -> None:
        """Lex one token starting with `ch` at `self.i`."""
        text, i = self.text, self.i
        nxt = text[i + 1 : i + 2]
        if ch == '"':
            self._string()
        elif ch == "/":
            self._regex()
        elif ch == "<":
            self._special()
        elif ch == "%":
            self._directive()
        elif ch == "@":
            raise self.source.error(
                "grammar references (@name) and nested grammars are not supported; "
                "write the referenced grammar's rules into this one",
                i,
            )
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            self._name(i, "")
        elif ch in "?!" and self._at_line_start() and _IDENT_RE.match(text, i + 1):
            self._name(i + 1, ch)
        elif ch in _DIGITS or (ch == "-" and nxt != "" and nxt in _DIGITS):
            m = _NUMBER_RE.match(text, i)
            assert m is not None
            self._emit("number", i, m.end(), m.group())
        elif ch in "+*?":
            self._emit("op", i, i + 1, ch)
        else:
            self._punctuation(ch)

    def _punctuation(self, ch: str) -> None:
        if ch == "}" and self.nested and self.depth == 0:
            self.closed = True
            self.i += 1
            return
        for punct in _PUNCTUATION:
            if self.text.startswith(punct, self.i):
                if punct in "([{":
                    self.depth += 1
                elif punct in ")]}":
                    self.depth = max(0, self.depth - 1)
                self._emit(punct, self.i, self.i + len(punct))
                return
        raise self.source.error(
            f"unexpected character {ch!r}; rules look like `name: \"text\" /regex/ OTHER_NAME`",
            self.i,
        )

    def _name(self, start: int, prefix: str) -> None:
        """A rule (lowercase) or terminal (UPPERCASE) name, with an optional `?`/`!` prefix."""
        m = _IDENT_RE.match(self.text, start)
        assert m is not None
        name = m.group()
        param: str | None = None
        end = m.end()
        if self.text.startswith("::", end):
            param, end = self._param(end + 2)
        letters = [c for c in name if c.isalpha()]
        if not letters:
            raise self.source.error(f"name {name!r} needs at least one letter", start)
        if all(c.islower() for c in letters):
            kind = "rule"
        elif all(c.isupper() for c in letters):
            kind = "term"
        else:
            raise self.source.error(
                f"name {name!r} mixes cases: rule names are lowercase, terminal names UPPERCASE",
                start,
            )
        if param is not None and kind == "term":
            raise self.source.error("only rules (lowercase) can be parametric (name::param)", start)
        self.tokens.append(_Token(kind, self.i, self.text[self.i : end], name, prefix, json_value=param))
        self.i = end

    def _param(self, i: int) -> tuple[str, int]:
        """The parameter after `name::`: `_`, a number, or `function(...)`; (text, end)."""
        m = _PARAM_RE.match(self.text, i)
        if m is None:
            raise self.source.error("expected a parameter after :: (_, 0x0 or a function like set_bit(0))", i)
        end = m.end()
        if self.text.startswith("(", end) and m.group()[0].isalpha():
            depth = 0
            while end < len(self.text):
                ch = self.text[end]
                depth += (ch == "(") - (ch == ")")
                end += 1
                if depth == 0 or ch == "\n":
                    break
            if depth != 0:
                raise self.source.error("unbalanced parentheses in this parameter", i)
        return self.text[i:end], end

    def _string(self) -> None:
        """`"..."` with escapes and an optional `i` flag."""
        text, start = self.text, self.i
        i = start + 1
        out: list[str] = []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.source.error(
                    'unterminated string: close it with " on the same line (write \\n for a '
                    "line break inside it)",
                    start,
                )
            ch = text[i]
            if ch == '"':
                i += 1
                break
            if ch == "\\":
                decoded, i = self._string_escape(i)
                out.append(decoded)
            else:
                out.append(ch)
                i += 1
        flags = ""
        if text[i : i + 1] == "i" and not re.match(r"[A-Za-z0-9_]", text[i + 1 : i + 2]):
            flags = "i"
            i += 1
        self._emit("string", start, i, "".join(out), flags)

    def _string_escape(self, i: int) -> tuple[str, int]:
        """Decode the escape at `text[i] == "\\"`; returns (text, index after it)."""
        text = self.text
        kind = text[i + 1 : i + 2]
        if kind in _STRING_ESCAPES:
            return _STRING_ESCAPES[kind], i + 2
        digits = {"x": 2, "u": 4, "U": 8}.get(kind)
        if digits is None:
            shown = "\\" + kind if kind and kind != "\n" else "\\"
            raise self.source.error(
                f"unknown escape '{shown}' in a string; use \\\" \\\\ \\n \\t \\r \\xHH or \\uHHHH "
                "(write \\\\ for a backslash)",
                i,
            )
        hex_text = text[i + 2 : i + 2 + digits]
        if not re.fullmatch(f"[0-9a-fA-F]{{{digits}}}", hex_text):
            raise self.source.error(
                f"escape \\{kind} needs exactly {digits} hex digits (\\{kind}{'H' * digits})", i
            )
        code = int(hex_text, 16)
        end = i + 2 + digits
        low_surrogate = re.match(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", text[end : end + 6])
        if kind == "u" and 0xD800 <= code <= 0xDBFF and low_surrogate:
            low = int(text[end + 2 : end + 6], 16)
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), end + 6
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise self.source.error(f"escape {text[i:end]!r} is not a Unicode scalar value", i)
        return chr(code), end

    def _regex(self) -> None:
        """`/.../flags`; `\\/` stands for `/`. A regex must end on its own line."""
        text, start = self.text, self.i
        i = start + 1
        body: list[str] = []
        unterminated = (
            "unterminated regex: a /regex/ ends with / on the same line "
            "(write \\/ for a slash inside it)"
        )
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.source.error(unterminated, start)
            ch = text[i]
            if ch == "/":
                i += 1
                break
            if ch == "\\":
                if i + 1 >= len(text) or text[i + 1] == "\n":
                    raise self.source.error(unterminated, start)
                body.append("/" if text[i + 1] == "/" else text[i : i + 2])
                i += 2
            else:
                body.append(ch)
                i += 1
        run = _LETTERS_RE.match(text, i)
        letters = run.group() if run else ""
        flags = ""
        after = text[i + len(letters) : i + len(letters) + 1]
        if letters and all(c in _REGEX_FLAG_LETTERS for c in letters) and not re.match(r"[0-9_]", after):
            for c in letters:
                if c not in _REGEX_FLAGS_SUPPORTED:
                    raise self.source.error(
                        f"regex flag {c!r} is not supported; use i (ignore case) or s (. matches "
                        "newline)",
                        i,
                    )
            flags = letters
            i += len(letters)
        self._emit("regex", start, i, "".join(body), flags)

    def _special(self) -> None:
        m = _SPECIAL_RE.match(self.text, self.i)
        if m is None:
            raise self.source.error(
                "unexpected '<': special tokens are written <|name|> or <[123]> (no spaces)", self.i
            )
        self._emit("special", self.i, m.end(), m.group())

    def _nested_lark(self, start: int, after: int) -> None:
        """`%lark { grammar }`: the body is lexed here (positions stay those of the whole text)."""
        j = after
        while j < len(self.text) and self.text[j] in " \t\r\n":
            j += 1
        if not self.text.startswith("{", j):
            raise self.source.error('%lark needs a grammar in braces after it, e.g. %lark { start: "a" }', start)
        if self.nesting >= NESTING_DEPTH_MAX:
            raise self.source.error(f"%lark nested more than {NESTING_DEPTH_MAX} deep", start)
        inner = _Lexer(self.source)
        inner.i, inner.nested, inner.nesting = j + 1, True, self.nesting + 1
        tokens = inner.run()
        self.tokens.append(_Token("lark", start, self.text[start : inner.i], "lark", json_value=tokens))
        self.i = inner.i

    def _directive(self) -> None:
        """`%name`; `%llguidance` also takes the JSON object that follows it."""
        start = self.i
        m = _DIRECTIVE_RE.match(self.text, start)
        assert m is not None
        name = m.group()[1:]
        if name == "if":
            end = self.text.find("\n", m.end())
            end = len(self.text) if end < 0 else end
            bar = self.text.find("|", m.end(), end)
            end = end if bar < 0 else bar
            self.tokens.append(_Token("if", start, self.text[start:end], self.text[m.end() : end].strip()))
            self.i = end
            return
        if name == "lark":
            self._nested_lark(start, m.end())
            return
        if name not in ("llguidance", "json", "regex"):
            self._emit("directive", start, m.end(), name)
            return
        j = m.end()
        while j < len(self.text) and self.text[j] in " \t\r\n":
            j += 1
        example = {
            "llguidance": '%llguidance {"allow_initial_skip": true}',
            "json": '%json {"type": "object"}',
            "regex": '%regex {"substring_words": "some text"}',
        }[name]
        try:
            value, end = json.JSONDecoder().raw_decode(self.text, j)
        except json.JSONDecodeError as err:
            raise self.source.error(
                f"%{name} needs a JSON object after it ({err.msg}), e.g. {example}", err.pos
            ) from None
        if name == "regex":
            try:
                pattern = substring_pattern(value)
            except SubstringError as err:
                raise self.source.error(str(err), start) from None
            self.tokens.append(_Token("regex_ext", start, self.text[start:end], pattern))
            self.i = end
            return
        kind = "directive" if name == "llguidance" else "json"
        self.tokens.append(_Token(kind, start, self.text[start:end], name, json_value=value))
        self.i = end


# ----------------------------------------------------------------------------------------------
# Syntax tree
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lit:
    """A string literal; `ci` = ASCII case-insensitive (`"abc"i`)."""

    pos: int
    text: str
    ci: bool = False
    shown: str = ""


@dataclass(frozen=True)
class _Re:
    """A `/regex/flags`."""

    pos: int
    pattern: str
    flags: str = ""
    shown: str = ""


@dataclass(frozen=True)
class _Range:
    """Lark's `"a".."z"`: one character in the range."""

    pos: int
    lo: str
    hi: str
    shown: str = ""


@dataclass(frozen=True)
class _Name:
    """A reference to a rule (lowercase) or terminal (UPPERCASE); `param` for `name::param`."""

    pos: int
    name: str
    terminal: bool
    param: str | None = None


@dataclass(frozen=True)
class _Cond:
    """An alternative of a parametric rule with its `%if` condition (text)."""

    pos: int
    item: _Expr
    cond: str


@dataclass(frozen=True)
class _Special:
    """`<|name|>` or `<[ids]>`, as written."""

    pos: int
    text: str


@dataclass(frozen=True)
class _Seq:
    pos: int
    items: tuple[_Expr, ...]


@dataclass(frozen=True)
class _Alt:
    pos: int
    alts: tuple[_Expr, ...]


@dataclass(frozen=True)
class _Repeat:
    """`item{min,max}`; `max` None = unbounded."""

    pos: int
    item: _Expr
    min: int
    max: int | None


@dataclass(frozen=True)
class _Json:
    """`%json {schema}`: a JSON Schema standing for the JSON texts it accepts."""

    pos: int
    text: str  # the schema as written, for equality (the parsed value is not hashable)
    schema: object = field(compare=False, hash=False, default=None)


@dataclass(frozen=True)
class _And:
    """llguidance's `A & B`: text both match (terminals only)."""

    pos: int
    items: tuple[_Expr, ...]


@dataclass(frozen=True)
class _Not:
    """llguidance's `~A`: text A does not match (terminals only)."""

    pos: int
    item: _Expr


@dataclass(frozen=True)
class _Lark:
    """`%lark { grammar }`: a nested grammar, as its tokens (positions in the whole text)."""

    pos: int
    text: str
    tokens: object = field(compare=False, hash=False, default=None)


@dataclass(frozen=True)
class _RegexExt:
    """llguidance's `%regex {...}` (substring forms), as a pattern of the core's syntax."""

    pos: int
    pattern: str
    shown: str = ""


_Expr = Union[_Lit, _Re, _Range, _Name, _Special, _Seq, _Alt, _Repeat, _Json, _And, _Not, _RegexExt, _Lark, _Cond]


@dataclass
class _Def:
    """A rule or terminal definition with its attributes."""

    name: str
    terminal: bool
    body: _Expr
    pos: int
    lazy: bool = False
    stop: _Expr | None = None
    max_tokens: int | None = None
    attr_pos: int = 0
    imported: str | None = None
    param: str | None = None  # `name::_`: a parametric rule


@dataclass
class _Grammar:
    defs: dict[str, _Def] = field(default_factory=dict)
    ignores: list[_Expr] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)


def _children(expr: _Expr) -> tuple[_Expr, ...]:
    if isinstance(expr, (_Seq, _And)):
        return expr.items
    if isinstance(expr, _Alt):
        return expr.alts
    if isinstance(expr, (_Repeat, _Not, _Cond)):
        return (expr.item,)
    return ()


def _walk(expr: _Expr) -> Iterator[_Expr]:
    """Every node of `expr`, iteratively (no recursion), in pre-order."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(_children(node)))


# ----------------------------------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------------------------------

_ATOM_START = frozenset({"(", "[", "string", "regex", "rule", "term", "special", "json", "~", "regex_ext", "lark"})
_OP_COUNTS: dict[str, tuple[int, int | None]] = {"?": (0, 1), "*": (0, None), "+": (1, None)}
_ATTRIBUTES_HELP = 'lazy, max_tokens=N, stop="...", suffix="...", capture, temperature=T'


class _Parser:
    """Recursive descent over `_Token`s; group nesting is bounded by `NESTING_DEPTH_MAX`."""

    def __init__(self, source: _Source, tokens: list[_Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.k = 0
        self.grammar = _Grammar()

    # -- token access --------------------------------------------------------------------------

    # `self.k` never passes the final "eof" token, so `self.tokens[self.k]` is always valid.

    def peek(self, offset: int = 0) -> _Token:
        if offset == 0:
            return self.tokens[self.k]
        return self.tokens[min(self.k + offset, len(self.tokens) - 1)]

    def next(self) -> _Token:
        tok = self.tokens[self.k]
        if tok.kind != "eof":
            self.k += 1
        return tok

    def accept(self, kind: str) -> _Token | None:
        tok = self.tokens[self.k]
        if tok.kind == kind:
            if kind != "eof":
                self.k += 1
            return tok
        return None

    def expect(self, kind: str, what: str) -> _Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.source.error(f"expected {what}, found {_describe(tok)}", tok.pos)
        return self.next()

    # -- items ---------------------------------------------------------------------------------

    def parse(self) -> _Grammar:
        """Parse every definition and directive."""
        while True:
            tok = self.peek()
            if tok.kind == "newline":
                self.next()
                continue
            if tok.kind == "eof":
                return self.grammar
            self._item()
            end = self.peek()
            if end.kind not in ("newline", "eof"):
                raise self._trailing_error(end)

    def _trailing_error(self, tok: _Token) -> GrammarError:
        if tok.kind == ":":
            return self.source.error(
                "unexpected ':': a definition ends at the end of its line; start the next "
                "definition on a new line",
                tok.pos,
            )
        return self.source.error(
            f"unexpected {_describe(tok)}: a definition ends at the end of its line "
            "(continue alternatives on the next line with a leading |)",
            tok.pos,
        )

    def _item(self) -> None:
        tok = self.peek()
        if tok.kind == "rule":
            self._define(self._rule_def())
        elif tok.kind == "term":
            self._define(self._term_def())
        elif tok.kind == "directive":
            self._directive()
        elif tok.kind in _ATOM_START:
            raise self.source.error(
                f"unexpected {_describe(tok)} at the start of a line: a line that continues a "
                "rule's alternatives must start with |",
                tok.pos,
            )
        else:
            raise self.source.error(
                f"expected a rule (`name: ...`), a terminal (`NAME: ...`) or a directive "
                f"(%ignore, %import, %override, %llguidance), found {_describe(tok)}",
                tok.pos,
            )

    def _define(self, d: _Def, *, override: bool = False) -> None:
        defs = self.grammar.defs
        existing = defs.get(d.name)
        what = "terminal" if d.terminal else "rule"
        if override:
            if existing is None:
                raise self.source.error(
                    f"%override {d.name}: there is no earlier definition of {what} {d.name!r} "
                    "to override; remove %override",
                    d.pos,
                )
        elif existing is not None:
            if d.imported is not None and existing.imported == d.imported:
                return  # the same import twice
            raise self.source.error(
                f"{what} {d.name!r} is defined twice (first at {self.source.where(existing.pos)}); "
                "rename one, join the alternatives with |, or use %override",
                d.pos,
            )
        defs[d.name] = d

    def _head_extras(self, name_tok: _Token) -> None:
        """Reject templates, skip a priority (`name.2`)."""
        if self.peek().kind == "{":
            raise self.source.error(
                f"templates ({name_tok.value}{{...}}) are not supported; write the rule out",
                self.peek().pos,
            )
        if self.accept("."):
            self.expect("number", "a priority number after '.'")

    def _rule_def(self) -> _Def:
        name_tok = self.next()
        self._head_extras(name_tok)
        d = _Def(name_tok.value, False, _Seq(name_tok.pos, ()), name_tok.pos)
        if name_tok.json_value is not None:
            if name_tok.json_value != "_":
                raise self.source.error(f"a parametric rule is defined as {name_tok.value}::_", name_tok.pos)
            d.param = "_"
        if self.peek().kind == "[":
            self._attributes(d)
        colon = self.peek()
        if colon.kind != ":":
            continuation = colon.kind in ("newline", "eof") or colon.kind in _ATOM_START
            hint = " (a line that continues a rule's alternatives must start with |)"
            raise self.source.error(
                f"expected ':' after the rule name {name_tok.value!r}, found {_describe(colon)}"
                f"{hint if continuation else ''}",
                colon.pos,
            )
        self.next()
        d.body = self._expansions(0)
        return d

    def _term_def(self) -> _Def:
        name_tok = self.next()
        if name_tok.flags:
            raise self.source.error(
                f"the {name_tok.flags!r} prefix applies to rules only; remove it", name_tok.pos
            )
        self._head_extras(name_tok)
        if self.peek().kind == "[":
            raise self.source.error(
                f"attributes like [lazy] go on rules: write `{name_tok.value.lower()}[...]: "
                f"{name_tok.value}` and use the rule",
                self.peek().pos,
            )
        self.expect(":", f"':' after the terminal name {name_tok.value!r}")
        return _Def(name_tok.value, True, self._expansions(0), name_tok.pos)

    def _attributes(self, d: _Def) -> None:
        """`[key, key=value, ...]` after a rule name."""
        d.attr_pos = self.expect("[", "'['").pos
        while True:
            key_tok = self.expect("rule", f"an attribute ({_ATTRIBUTES_HELP})")
            self._attribute(d, key_tok)
            if not self.accept(","):
                break
        self.expect("]", "']' or ',' in the attribute list")

    def _attribute(self, d: _Def, key_tok: _Token) -> None:
        key = key_tok.value
        if key == "lazy":
            d.lazy = True
        elif key == "capture":
            if self.accept("="):
                self.expect("string", 'a capture name in quotes, e.g. capture="x"')
        elif key in ("stop", "suffix"):
            self.expect("=", f"'=' after {key}")
            if d.stop is not None:
                raise self.source.error("give only one of stop= and suffix=", key_tok.pos)
            d.stop = self._attribute_value(key)
        elif key == "max_tokens":
            self.expect("=", "'=' after max_tokens")
            number = self.expect("number", "a token count after max_tokens=")
            if not number.value.isdigit() or int(number.value) < 1:
                raise self.source.error("max_tokens must be a positive integer", number.pos)
            d.max_tokens = int(number.value)
        elif key == "temperature":
            self.expect("=", "'=' after temperature")
            self.expect("number", "a number after temperature=")
        elif key == "stop_capture":
            self.expect("=", "'=' after stop_capture")
            self.expect("string", 'a capture name in quotes, e.g. stop_capture="x"')
        else:
            raise self.source.error(
                f"unknown attribute {key!r}; supported: {_ATTRIBUTES_HELP}", key_tok.pos
            )

    def _attribute_value(self, key: str) -> _Expr:
        tok = self.next()
        if tok.kind == "string":
            return _Lit(tok.pos, tok.value, tok.flags == "i", tok.text)
        if tok.kind == "regex":
            return _Re(tok.pos, tok.value, tok.flags, tok.text)
        if tok.kind == "term":
            return _Name(tok.pos, tok.value, True)
        raise self.source.error(
            f'{key}= takes a string, a /regex/ or a TERMINAL name, found {_describe(tok)}', tok.pos
        )

    # -- expressions ---------------------------------------------------------------------------

    def _expansions(self, depth: int) -> _Expr:
        """`alias (| alias)*`, where an alias is a sequence of expressions, maybe `-> name`."""
        tokens = self.tokens  # `self.tokens[self.k]` is `self.peek()`, without the call
        start = tokens[self.k].pos
        alts: list[_Expr] = []
        while True:
            seq_start = tokens[self.k].pos
            conjuncts: list[_Expr] = []
            while True:  # `&` binds looser than a sequence, tighter than `|`
                part_start = tokens[self.k].pos
                items: list[_Expr] = []
                while tokens[self.k].kind in _ATOM_START:
                    items.append(self._expr(depth))
                if not items and (conjuncts or tokens[self.k].kind == "&"):
                    raise self.source.error("& needs an expression on both sides", part_start)
                conjuncts.append(items[0] if len(items) == 1 else _Seq(part_start, tuple(items)))
                if not self.accept("&"):
                    break
            if self.accept("->"):
                self.expect("rule", "an alias name after '->'")
            alt = conjuncts[0] if len(conjuncts) == 1 else _And(seq_start, tuple(conjuncts))
            if tokens[self.k].kind == "if":
                cond = self.next()
                alt = _Cond(cond.pos, alt, cond.value)
            alts.append(alt)
            if not self._match_vbar():
                break
        return alts[0] if len(alts) == 1 else _Alt(start, tuple(alts))

    def _match_vbar(self) -> bool:
        if self.accept("|"):
            return True
        if self.peek().kind == "newline" and self.peek(1).kind == "|":
            self.k += 2
            return True
        return False

    def _expr(self, depth: int, *, repetition: bool = True) -> _Expr:
        """An atom with an optional repetition operator."""
        tok = self.next()
        atom: _Expr
        if tok.kind == "~":  # llguidance's negation binds tighter than a repetition: ~A+ is (~A)+
            if depth >= NESTING_DEPTH_MAX:
                raise self.source.error(f"~ nested more than {NESTING_DEPTH_MAX} deep", tok.pos)
            if self.peek().kind not in _ATOM_START:
                raise self.source.error(f"expected what ~ negates, found {_describe(self.peek())}", self.peek().pos)
            inner = self._expr(depth + 1, repetition=False)
            return self._repetition(_Not(tok.pos, inner)) if repetition else _Not(tok.pos, inner)
        if tok.kind in ("(", "["):
            if depth >= NESTING_DEPTH_MAX:
                raise self.source.error(
                    f"groups nested more than {NESTING_DEPTH_MAX} deep; split the expression into rules",
                    tok.pos,
                )
            inner = self._expansions(depth + 1)
            closer = ")" if tok.kind == "(" else "]"
            end = self.peek()
            if end.kind != closer:
                raise self.source.error(
                    f"expected '{closer}' to close the '{tok.kind}' at {self.source.where(tok.pos)}, "
                    f"found {_describe(end)}",
                    end.pos,
                )
            self.next()
            atom = inner if tok.kind == "(" else _Repeat(tok.pos, inner, 0, 1)
        elif tok.kind == "string":
            atom = self._string_atom(tok)
        elif tok.kind == "regex":
            atom = _Re(tok.pos, tok.value, tok.flags, tok.text)
        elif tok.kind in ("rule", "term"):
            if tok.flags:
                raise self.source.error(
                    f"the {tok.flags!r} prefix is only allowed where a rule is defined", tok.pos
                )
            atom = _Name(tok.pos, tok.value, tok.kind == "term", tok.json_value)  # type: ignore[arg-type]
        elif tok.kind == "json":
            atom = _Json(tok.pos, tok.text, tok.json_value)
        elif tok.kind == "lark":
            atom = _Lark(tok.pos, tok.text, tok.json_value)
        elif tok.kind == "regex_ext":
            atom = _RegexExt(tok.pos, tok.value, tok.text if len(tok.text) <= 40 else tok.text[:39] + "…")
        else:
            atom = _Special(tok.pos, tok.value)
        return self._repetition(atom) if repetition else atom

    def _string_atom(self, tok: _Token) -> _Expr:
        if not self.accept(".."):
            return _Lit(tok.pos, tok.value, tok.flags == "i", tok.text)
        hi = self.expect("string", 'a string after ".." (a range looks like "a".."z")')
        if len(tok.value) != 1 or len(hi.value) != 1 or tok.flags or hi.flags:
            raise self.source.error(
                'a range "a".."z" needs two one-character strings without flags', tok.pos
            )
        if hi.value < tok.value:
            raise self.source.error(f"range {tok.text}..{hi.text} is backwards; swap the ends", tok.pos)
        return _Range(tok.pos, tok.value, hi.value, f"{tok.text}..{hi.text}")

    def _repetition(self, atom: _Expr) -> _Expr:
        """Apply a following `? * +`, `~m..n` or `{m,n}` to `atom`, if any."""
        tok = self.peek()
        if tok.kind == "op":
            self.next()
            low, high = _OP_COUNTS[tok.value]
        elif tok.kind == "~" and self.peek(1).kind == "number":
            self.next()
            low = self._count()
            high = self._count() if self.accept("..") else low
        elif tok.kind == "{":
            self.next()
            low, high = self._braces()
        else:
            return atom
        if high is not None and high < low:
            raise self.source.error(f"repetition {{{low},{high}}} needs min <= max", tok.pos)
        if self.peek().kind in ("op", "{") or (self.peek().kind == "~" and self.peek(1).kind == "number"):
            raise self.source.error(
                "two repetition operators in a row; add parentheses, e.g. (x+)?", self.peek().pos
            )
        return _Repeat(tok.pos, atom, low, high)

    def _braces(self) -> tuple[int, int | None]:
        """After `{`: `m}`, `m,}`, `,n}` or `m,n}`."""
        low = 0 if self.peek().kind == "," else self._count()
        high: int | None = low
        if self.accept(","):
            high = None if self.peek().kind == "}" else self._count()
        end = self.peek()
        if end.kind != "}":
            raise self.source.error(
                f"expected '}}' to end the count, found {_describe(end)} (counts look like "
                "{3}, {2,5} or {2,}; templates are not supported)",
                end.pos,
            )
        self.next()
        return low, high

    def _count(self) -> int:
        tok = self.expect("number", "a repetition count")
        if not tok.value.isdigit():
            raise self.source.error("a repetition count is a non-negative integer", tok.pos)
        value = int(tok.value)
        if value > REPEAT_COUNT_MAX:
            raise self.source.error(
                f"repetition count {value} is above {REPEAT_COUNT_MAX}; use * or + instead", tok.pos
            )
        return value

    # -- directives ----------------------------------------------------------------------------

    def _directive(self) -> None:
        tok = self.next()
        name = tok.value
        if name == "ignore":
            expr = self._expansions(0)
            if isinstance(expr, _Seq) and not expr.items:
                raise self.source.error(
                    "%ignore needs what to skip, e.g. %ignore WS or %ignore /[ \\t]+/", self.peek().pos
                )
            self.grammar.ignores.append(expr)
        elif name == "import":
            self._import()
        elif name == "override":
            nxt = self.peek()
            if nxt.kind == "rule":
                self._define(self._rule_def(), override=True)
            elif nxt.kind == "term":
                self._define(self._term_def(), override=True)
            else:
                raise self.source.error(
                    f"expected a definition after %override, found {_describe(nxt)}", nxt.pos
                )
        elif name == "llguidance":
            self._options(tok)
        elif name == "declare":
            raise self.source.error(
                "%declare is not supported (there is no post-lexer to supply declared "
                "terminals); define the terminals instead",
                tok.pos,
            )
        else:
            raise self.source.error(
                f"unknown directive %{name}; supported: %ignore, %import, %override, %llguidance",
                tok.pos,
            )

    def _import(self) -> None:
        """`%import common.X`, `%import common.X -> Y`, `%import common (A, B)`."""
        start = self.peek()
        if start.kind == ".":
            raise self.source.error(
                "only `%import common.NAME` is supported; copy the definitions into this grammar",
                start.pos,
            )
        path = [self._import_name()]
        while self.peek().kind == "." and self.peek(1).kind in ("rule", "term"):
            self.next()
            path.append(self._import_name())
        names: list[tuple[_Token, _Token]] = []
        if self.accept("("):
            module = path
            while True:
                name = self._import_name()
                names.append((name, name))
                if not self.accept(","):
                    break
            self.expect(")", "')' or ',' in the import list")
        else:
            module = path[:-1]
            alias = self._import_name() if self.accept("->") else path[-1]
            names.append((path[-1], alias))
        module_name = ".".join(t.value for t in module)
        if module_name != "common":
            raise self.source.error(
                f"only `%import common.NAME` is supported, not {module_name or path[-1].value!r}; "
                "copy the definitions into this grammar",
                start.pos,
            )
        for name, alias in names:
            self._import_common(name, alias)

    def _import_name(self) -> _Token:
        tok = self.peek()
        if tok.kind not in ("rule", "term"):
            raise self.source.error(f"expected a name in %import, found {_describe(tok)}", tok.pos)
        return self.next()

    def _import_common(self, name: _Token, alias: _Token) -> None:
        pattern = COMMON_TERMINALS.get(name.value)
        if pattern is None:
            known = ", ".join(sorted(COMMON_TERMINALS))
            raise self.source.error(f"common has no terminal {name.value!r}; it has {known}", name.pos)
        if alias.kind != "term":
            raise self.source.error(
                f"import {name.value} under an UPPERCASE name: it is a terminal", alias.pos
            )
        body = _Re(name.pos, pattern)
        self._define(_Def(alias.value, True, body, alias.pos, imported=name.value))

    def _options(self, tok: _Token) -> None:
        """Merge a `%llguidance {...}` object into the grammar options."""
        value = tok.json_value
        if not isinstance(value, dict):
            raise self.source.error(
                '%llguidance takes a JSON object, e.g. %llguidance {"allow_initial_skip": true}', tok.pos
            )
        for key, option in value.items():
            spec = _OPTIONS.get(key)
            if spec is None:
                raise self.source.error(
                    f"unknown %llguidance option {key!r}; supported: {', '.join(_OPTIONS)}", tok.pos
                )
            kind, allowed = spec
            if not isinstance(option, kind) or (allowed and option not in allowed):
                want = " or ".join(json.dumps(a) for a in allowed) if allowed else "true or false"
                raise self.source.error(f"%llguidance option {key!r} must be {want}", tok.pos)
            self.grammar.options[key] = option


def _describe(tok: _Token) -> str:
    if tok.kind == "eof":
        return "the end of the grammar"
    if tok.kind == "newline":
        return "the end of the line"
    shown = tok.text if len(tok.text) <= 30 else tok.text[:27] + "..."
    return f"'{shown}'"


