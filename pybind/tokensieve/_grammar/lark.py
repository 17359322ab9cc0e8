"""The Lark-like grammar front-end: grammar text → `GrammarIR`.

The syntax is llguidance's variant of Lark (`docs/syntax.md` in guidance-ai/llguidance), so the
grammars people already write for llguidance, vLLM or SGLang work unchanged:

    %import common.WS
    %ignore WS
    start: value
    value: object | array | STRING | NUMBER | "true" | "false" | "null"
    object: "{" [pair ("," pair)*] "}"
    ...

What is accepted:

- **Rules** `name: alt1 | alt2`, lowercase names (`-` allowed inside); alternatives may continue
  on the next lines, each starting with `|`. `?name:` and `!name:` prefixes, `-> alias` and
  priorities (`name.2:`) are accepted and ignored (they shape Lark's parse tree, not the
  language). `start` is the start rule.
- **Terminals** `NAME: ...`, UPPERCASE names: strings, regexes and other terminals combined
  with `|`, concatenation, `? * + {m} {m,} {m,n} ~m..n` and groups. A terminal compiles to ONE
  regex lexeme: referenced terminals are inlined into a single pattern (recursion is an error).
  No skip (`%ignore`) happens inside a terminal.
- **Strings** `"..."` with escapes `\\" \\\\ \\/ \\' \\b \\f \\n \\r \\t \\v \\0 \\xHH \\uHHHH
  \\UHHHHHHHH`, an optional `i` suffix (ASCII case-insensitive), and Lark ranges `"a".."z"`.
- **Regexes** `/.../flags` in the syntax of `docs/lexer.md`, flags `i` and `s` (`m`, `u`
  accepted and ignored), `\\/` for a slash; inline flags `(?i)`, `(?s)`, `(?i:...)`, `(?-s:...)`
  anywhere. Flags are compiled away (`i` into `[aA]` classes, `s` turns `.` into `[\\s\\S]`), so
  the core sees plain patterns that can be inlined into larger ones. A `^` at the start and a `$`
  at the end of a regex are dropped (lexemes always match whole).
- In rules, `[x]` and `x?` are optional, `x*`, `x+`, `x{m,n}`, `x~m..n` repeat; groups `( )`.
  These desugar into helper nonterminals named `owner/kind` (`list/star`): `*` and `+` are
  left-recursive (`rep → rep x | x`); `x{m,n}` is x^m from doubling rules (`pow2k → powk
  powk`) followed by an optional tail of 0..n−m copies split by the highest power of two
  (`upto_k → upto_{2^h-1} | x^(2^h) upto_{k-2^h}`), so it takes O(log m + log n) rules and stays
  unambiguous. Counts above `REPEAT_COUNT_MAX` are errors.
- **Special tokens** in rules: `<|name|>` (any `<...>`; looked up in `special_tokens` by its full
  text, then by the text between `<|` and `|>`), `<[123]>`, `<[100-200]>`, `<[1,5,7-9]>`.
- **Rule attributes**: `name[lazy]: BODY`, `name[stop="..."]`, `name[suffix="..."]`,
  `name[max_tokens=N]`; `capture`, `capture="n"`, `stop_capture="n"` and `temperature=T` are
  accepted and ignored. `lazy`, `stop`, `suffix` and `max_tokens` need a body that is
  terminal-only (strings, regexes, UPPERCASE names, no rules): it becomes one regex lexeme
  (lazy with `lazy`, `stop`, `suffix`). `stop=X` and `suffix=X`
  (X a string, regex or terminal) both append X to the lexeme and make it lazy: the stop text
  stays **visible** in the output, like llguidance's `suffix=` (llguidance's `stop=` hides it,
  which needs token backtracking). `stop=""` adds nothing and does not make the lexeme lazy.
  With `max_tokens=N` (as in llguidance) the lexeme may span at most N tokens of output; when
  the budget is spent at a token boundary the lexeme ends there if it matches
  (`Lexeme.max_tokens`, docs/lark.md).
- **Directives**: `%ignore X` (several are alternatives; together they become `GrammarIR.skip`,
  which may repeat between lexemes; with `ignore_once` or `skip_repetition: "once"` it is
  matched at most once: `GrammarIR.skip_once`); `%import common.X`,
  `%import common.X -> Y`, `%import common (A, B)` from `COMMON_TERMINALS`; `%override`
  (replaces an earlier definition); `%llguidance {json}` with the options `allow_initial_skip`
  (→ `GrammarIR.allow_initial_skip`), `no_forcing`, `allow_invalid_utf8`, `ignore_once`,
  `skip_repetition: "once"` — all stored in `GrammarIR.options`; other keys are errors.
- **`%json {schema}`** anywhere a rule name can stand (`args: %json {...}`): the JSON Schema
  front-end compiles the schema (compact) and its rules are merged in under names
  `json@LINE:COL/...`. Inside it only JSON whitespace (`[ \\t\\n\\r]+`) may appear between
  lexemes — spelled out around the punctuation, never before the first lexeme or after the
  last — and the grammar's `%ignore` does not reach in (its nonterminals are `no_skip` in the
  IR); `%ignore` still applies on both sides of it. A bad schema is a `GrammarError` at the
  `%json`, with the schema's `json_pointer`.
- Comments: `//` and `#` to the end of the line. Newlines inside `( )`, `[ ]` and `{ }` are
  ignored.

After translation, nonterminals that can derive no text at all (`a: a "x"`) are removed
silently with the rules that use them — unless `start` is one of them, which is a
`GrammarError` listing them. Rules and lexemes not reachable from `start` are dropped too. The
start nonterminal is index 0.

Errors are `GrammarError` with `position` (0-based character offset), `line` and `column`
(1-based); the message starts with "line L, column C:", says what to change, and shows the line.

Not supported (a `GrammarError` says so): `%regex`, `@grammar` references and nested
grammars, `%declare`, templates (`name{x}: ...`), other imports than `common`, negated and
wildcard token sets (`<[^1]>`, `<[*]>`), the regex flag `x`, the `&` and `~` terminal operators
of llguidance, parametric rules.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Iterator, Mapping, NamedTuple, NoReturn, Union

from .._errors import GrammarError
from .ir import GrammarIR, Lexeme, LexemeKind, Sym, alternation_regex, productive_nonterminals
from .json_schema.compiler import json_schema_to_ir

__all__ = ["lark_to_ir", "COMMON_TERMINALS", "NESTING_DEPTH_MAX", "REPEAT_COUNT_MAX"]

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


def lark_to_ir(text: str, *, special_tokens: Mapping[str, int] | None = None) -> GrammarIR:
    """Translate a Lark-like grammar (llguidance's dialect) into the grammar IR.

    Args:
        text: the grammar; must define `start`. Syntax in this module's docstring.
        special_tokens: special token text → token id (`{"<|eot_id|>": 128009}`), used to
            resolve `<|name|>` in rules; without it only numeric `<[id]>` forms work.

    Returns:
        The IR, with `start` at nonterminal 0, unproductive and unreachable parts removed.

    Raises:
        GrammarError: the text is malformed or uses an unsupported feature; `position`, `line`
            and `column` give the place.
        TypeError: `text` is not a str.

    Cost: linear in the text, plus O(log n) rules per `{m,n}`.
    """
    if not isinstance(text, str):
        raise TypeError(f"lark_to_ir takes the grammar as a str, not {type(text).__name__}")
    source = _Source(text)
    tokens = _Lexer(source).run()
    try:
        grammar = _Parser(source, tokens).parse()
        return _Compiler(source, grammar, special_tokens).run()
    except RecursionError:  # only when called with little stack left: depth is bounded
        raise GrammarError(
            "the grammar is nested too deeply to translate here; split deep groups into rules"
        ) from None


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
_LETTERS_RE = re.compile(r"[A-Za-z]*")
_PUNCTUATION = ("->", "..", ":", ",", ".", "(", ")", "{", "}", "[", "]", "~", "|", "=")
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

    def run(self) -> list[_Token]:
        """Tokenize the whole text; the list ends with an "eof" token."""
        text = self.text
        size = len(text)
        tokens = self.tokens
        while self.i < size:
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
        self.tokens.append(_Token("eof", len(text), ""))
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
        self.tokens.append(_Token(kind, self.i, self.text[self.i : m.end()], name, prefix))
        self.i = m.end()

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

    def _directive(self) -> None:
        """`%name`; `%llguidance` also takes the JSON object that follows it."""
        start = self.i
        m = _DIRECTIVE_RE.match(self.text, start)
        assert m is not None
        name = m.group()[1:]
        if name == "regex":
            raise self.source.error("%regex {...} is not supported; write the regex as /.../", start)
        if name not in ("llguidance", "json"):
            self._emit("directive", start, m.end(), name)
            return
        j = m.end()
        while j < len(self.text) and self.text[j] in " \t\r\n":
            j += 1
        example = '%llguidance {"allow_initial_skip": true}' if name == "llguidance" else '%json {"type": "object"}'
        try:
            value, end = json.JSONDecoder().raw_decode(self.text, j)
        except json.JSONDecodeError as err:
            raise self.source.error(
                f"%{name} needs a JSON object after it ({err.msg}), e.g. {example}", err.pos
            ) from None
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
    """A reference to a rule (lowercase) or terminal (UPPERCASE)."""

    pos: int
    name: str
    terminal: bool


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


_Expr = Union[_Lit, _Re, _Range, _Name, _Special, _Seq, _Alt, _Repeat, _Json]


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


@dataclass
class _Grammar:
    defs: dict[str, _Def] = field(default_factory=dict)
    ignores: list[_Expr] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)


def _children(expr: _Expr) -> tuple[_Expr, ...]:
    if isinstance(expr, _Seq):
        return expr.items
    if isinstance(expr, _Alt):
        return expr.alts
    if isinstance(expr, _Repeat):
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

_ATOM_START = frozenset({"(", "[", "string", "regex", "rule", "term", "special", "json"})
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
            items: list[_Expr] = []
            while tokens[self.k].kind in _ATOM_START:
                items.append(self._expr(depth))
            if self.accept("->"):
                self.expect("rule", "an alias name after '->'")
            alts.append(items[0] if len(items) == 1 else _Seq(seq_start, tuple(items)))
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

    def _expr(self, depth: int) -> _Expr:
        """An atom with an optional repetition operator."""
        tok = self.next()
        atom: _Expr
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
            atom = _Name(tok.pos, tok.value, tok.kind == "term")
        elif tok.kind == "json":
            atom = _Json(tok.pos, tok.text, tok.json_value)
        else:
            atom = _Special(tok.pos, tok.value)
        return self._repetition(atom)

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
        elif tok.kind == "~":
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
        if self.peek().kind in ("op", "~", "{"):
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


# ----------------------------------------------------------------------------------------------
# Regex building: patterns with a precedence level, so they can be combined with few groups.
# ----------------------------------------------------------------------------------------------

_ATOM, _QUANT, _SEQ, _ALT = 0, 1, 2, 3
_REGEX_META = frozenset("\\.^$|?*+()[]{}")
_QUANT_BRACE_RE = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_FLAG_GROUP_RE = re.compile(r"\(\?([A-Za-z-]*)([:)])")


class _PatternError(Exception):
    """A problem inside one /regex/; turned into a GrammarError at the regex."""


@dataclass(frozen=True)
class _Rx:
    """A regex and how tightly it binds: `_ATOM` (one atom), `_QUANT` (a quantified atom),
    `_SEQ` (a concatenation) or `_ALT` (has a top-level `|`). `literal` is the exact text when
    the regex matches only that text (case-sensitive literals), else None."""

    pattern: str
    level: int
    literal: str | None = None


_EMPTY_RX = _Rx("", _SEQ, "")


def _literal_rx(text: str, ci: bool) -> _Rx:
    parts = []
    for ch in text:
        if ci and ch.isascii() and ch.isalpha():
            parts.append(f"[{ch.lower()}{ch.upper()}]")
        elif ch in _REGEX_META:
            parts.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            parts.append(f"\\x{ord(ch):02X}")
        else:
            parts.append(ch)
    has_letters = ci and any(c.isascii() and c.isalpha() for c in text)
    return _Rx("".join(parts), _ATOM if len(text) == 1 else _SEQ, None if has_letters else text)


def _class_char(ch: str) -> str:
    """One character written for use inside `[...]`."""
    if ch in "\\]-[^":
        return "\\" + ch
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02X}"
    return ch


def _range_rx(lo: str, hi: str) -> _Rx:
    body = _class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}"
    return _Rx(f"[{body}]", _ATOM)


def _concat_rx(parts: list[_Rx]) -> _Rx:
    parts = [p for p in parts if p.pattern != ""]
    if not parts:
        return _EMPTY_RX
    if len(parts) == 1:
        return parts[0]
    pattern = "".join(f"(?:{p.pattern})" if p.level == _ALT else p.pattern for p in parts)
    literals = [p.literal for p in parts]
    literal = "".join(t for t in literals if t is not None) if None not in literals else None
    return _Rx(pattern, _SEQ, literal)


def _alt_rx(parts: list[_Rx]) -> _Rx:
    if len(parts) == 1:
        return parts[0]
    return _Rx("|".join(p.pattern for p in parts), _ALT)


def _repeat_rx(part: _Rx, low: int, high: int | None) -> _Rx:
    if high == 0 or part.pattern == "":
        return _EMPTY_RX
    if low == high == 1:
        return part
    body = part.pattern if part.level == _ATOM else f"(?:{part.pattern})"
    if (low, high) in ((0, 1), (0, None), (1, None)):
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}[(low, high)]
    elif high is None:
        suffix = f"{{{low},}}"
    else:
        suffix = f"{{{low}}}" if low == high else f"{{{low},{high}}}"
    literal = part.literal * low if low == high and part.literal is not None else None
    return _Rx(body + suffix, _QUANT, literal)


def _regex_rx(pattern: str, flags: str) -> _Rx:
    """A /regex/ with flags → a flag-free pattern with its level.

    Raises:
        _PatternError: unbalanced parentheses, an unclosed class, an unsupported inline flag.
    """
    tokens = _regex_tokens(pattern)
    _check_balanced(tokens)
    if tokens and tokens[0] == ("anchor", "^"):
        tokens = tokens[1:]
    if tokens and tokens[-1] == ("anchor", "$"):
        tokens = tokens[:-1]
    active = frozenset(flags) & frozenset("is")
    return _Rx(_rewrite_regex(tokens, active), _regex_level(tokens))


def _regex_tokens(pattern: str) -> list[tuple[str, str]]:
    """Split a pattern into (kind, text) tokens: escape, class, open, open_flags (text = flags),
    flags (an inline `(?i)`, text = flags), close, alt, quant, dot, anchor, char."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            j = _escape_end(pattern, i)
            out.append(("escape", pattern[i:j]))
        elif c == "[":
            j = _class_end(pattern, i)
            out.append(("class", pattern[i:j]))
        elif c == "(":
            kind, text, j = _group_open(pattern, i)
            out.append((kind, text))
        elif c == "{" and _QUANT_BRACE_RE.match(pattern, i):
            m = _QUANT_BRACE_RE.match(pattern, i)
            assert m is not None
            j = m.end() + (1 if pattern[m.end() : m.end() + 1] == "?" else 0)
            out.append(("quant", pattern[i:j]))
        elif c in "*+?":
            j = i + 2 if pattern[i + 1 : i + 2] in ("?", "+") and i + 1 < len(pattern) else i + 1
            out.append(("quant", pattern[i:j]))
        else:
            kind = {")": "close", "|": "alt", ".": "dot", "^": "anchor", "$": "anchor"}.get(c, "char")
            j = i + 1
            out.append((kind, c))
        i = j
    return out


def _escape_end(pattern: str, i: int) -> int:
    """Index after the escape sequence starting at `pattern[i] == "\\"`."""
    if i + 1 >= len(pattern):
        raise _PatternError("the regex ends with a lone backslash")
    kind = pattern[i + 1]
    if kind in "xupP" and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 2)
        return len(pattern) if close < 0 else close + 1
    width = {"x": 4, "u": 6, "p": 3, "P": 3}.get(kind, 2)
    return min(i + width, len(pattern))


def _class_end(pattern: str, i: int) -> int:
    """Index after the character class starting at `pattern[i] == "["` (a `]` right after `[`
    or `[^` is a literal, as in the core)."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    while j < len(pattern):
        if pattern[j] == "\\":
            j = _escape_end(pattern, j)
        elif pattern[j] == "]":
            return j + 1
        else:
            j += 1
    raise _PatternError("unclosed character class '['")


def _group_open(pattern: str, i: int) -> tuple[str, str, int]:
    """Classify the group opener at `pattern[i] == "("`: (kind, text, index after it)."""
    m = _FLAG_GROUP_RE.match(pattern, i)
    if m is not None and m.group(1) and re.fullmatch(r"[A-Za-z]*(?:-[A-Za-z]*)?", m.group(1)):
        return ("flags" if m.group(2) == ")" else "open_flags"), m.group(1), m.end()
    for opener in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
        if pattern.startswith(opener, i):
            return "open", opener, i + len(opener)
    if pattern.startswith("(?P<", i) or pattern.startswith("(?<", i):
        close = pattern.find(">", i)
        end = len(pattern) if close < 0 else close + 1
        return "open", pattern[i:end], end
    return "open", "(", i + 1


def _check_balanced(tokens: list[tuple[str, str]]) -> None:
    depth = 0
    for kind, _ in tokens:
        if kind in ("open", "open_flags"):
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth < 0:
                raise _PatternError("unbalanced ')' (write \\) for a literal parenthesis)")
    if depth > 0:
        raise _PatternError("unclosed '(' (write \\( for a literal parenthesis)")


def _regex_level(tokens: list[tuple[str, str]]) -> int:
    depth = 0
    pieces = 0
    quantified = False
    alternation = False
    for kind, _ in tokens:
        if kind in ("open", "open_flags"):
            if depth == 0:
                pieces += 1
                quantified = False
            depth += 1
        elif kind == "close":
            depth -= 1
        elif depth > 0 or kind == "flags":
            continue
        elif kind == "alt":
            alternation = True
        elif kind == "quant":
            quantified = True
        else:
            pieces += 1
            quantified = False
    if alternation:
        return _ALT
    if pieces == 1:
        return _QUANT if quantified else _ATOM
    return _SEQ


def _merge_flags(active: frozenset[str], spec: str) -> frozenset[str]:
    """Apply an inline flag spec such as `i`, `is`, `-s`, `i-s` to the active flags."""
    result = set(active)
    on = True
    for ch in spec:
        if ch == "-":
            on = False
        elif ch in "is":
            if on:
                result.add(ch)
            else:
                result.discard(ch)
        elif ch not in "muU":
            raise _PatternError(f"inline flag {ch!r} is not supported (only i and s)")
    return frozenset(result)


def _rewrite_regex(tokens: list[tuple[str, str]], flags: frozenset[str]) -> str:
    """Render tokens with the `i` and `s` flags compiled away (inline flags included)."""
    stack = [flags]
    out: list[str] = []
    for kind, text in tokens:
        active = stack[-1]
        if kind == "flags":
            stack[-1] = _merge_flags(active, text)
        elif kind == "open_flags":
            out.append("(?:")
            stack.append(_merge_flags(active, text))
        elif kind == "open":
            out.append(text)
            stack.append(active)
        elif kind == "close":
            out.append(")")
            stack.pop()
        elif kind == "dot":
            out.append(r"[\s\S]" if "s" in active else ".")
        elif kind in ("char", "escape") and "i" in active:
            ch = text if kind == "char" else _escape_char(text, in_class=False)
            out.append(f"[{ch.lower()}{ch.upper()}]" if ch and ch.isascii() and ch.isalpha() else text)
        elif kind == "class" and "i" in active:
            out.append(_fold_class(text))
        else:
            out.append(text)
    return "".join(out)


_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "e": "\x1b", "0": "\0"}


def _escape_char(escape: str, *, in_class: bool) -> str | None:
    """The one character an escape sequence stands for, or None (`\\d`, unknown escapes)."""
    kind = escape[1:2]
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind]
    if kind == "b":
        return "\b" if in_class else None
    if kind in ("x", "u"):
        digits = escape[3:-1] if escape[2:3] == "{" else escape[2:]
        if not re.fullmatch(r"[0-9a-fA-F]{1,6}", digits):
            return None
        code = int(digits, 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else None
    if not kind or kind.isalnum():
        return None
    return kind


def _fold_class(text: str) -> str:
    """A `[...]` class with the other case of every ASCII letter it names added."""
    body_end = len(text) - 1
    i = 1
    negated = text[1:2] == "^"
    if negated:
        i += 1
    items: list[str] = []
    extra: list[tuple[int, int]] = []
    while i < body_end:
        lo_text, lo, i = _class_item(text, i)
        if lo is not None and text[i : i + 1] == "-" and i + 1 < body_end:
            hi_text, hi, j = _class_item(text, i + 1)
            if hi is not None:
                items.append(f"{lo_text}-{hi_text}")
                extra.extend(_case_partners(ord(lo), ord(hi)))
                i = j
                continue
        items.append(lo_text)
        if lo is not None:
            extra.extend(_case_partners(ord(lo), ord(lo)))
    for a, b in extra:
        items.append(chr(a) if a == b else f"{chr(a)}-{chr(b)}")
    return "[" + ("^" if negated else "") + "".join(items) + "]"


def _class_item(text: str, i: int) -> tuple[str, str | None, int]:
    """One class member at `text[i]`: (rendered text, its character or None, next index)."""
    if text[i] == "\\":
        j = _escape_end(text, i)
        ch = _escape_char(text[i:j], in_class=True)
        return (text[i:j] if ch is None else _class_char(ch)), ch, j
    return _class_char(text[i]), text[i], i + 1


def _case_partners(lo: int, hi: int) -> list[tuple[int, int]]:
    """The other-case ranges of the ASCII letters in `lo..hi`."""
    out = []
    a, b = max(lo, ord("a")), min(hi, ord("z"))
    if a <= b:
        out.append((a - 32, b - 32))
    a, b = max(lo, ord("A")), min(hi, ord("Z"))
    if a <= b:
        out.append((a + 32, b + 32))
    return out


# ----------------------------------------------------------------------------------------------
# Compiler: syntax tree → GrammarIR
# ----------------------------------------------------------------------------------------------


class _Compiler:
    """Turns a parsed `_Grammar` into a `GrammarIR`."""

    def __init__(
        self, source: _Source, grammar: _Grammar, special_tokens: Mapping[str, int] | None
    ) -> None:
        self.source = source
        self.grammar = grammar
        self.special_tokens = special_tokens
        self.ir = GrammarIR()
        self.terminal_rx: dict[str, _Rx] = {}
        self.regex_cache: dict[tuple[str, str], _Rx] = {}
        self.nonterminal_of: dict[str, int] = {}
        self.lexeme_of: dict[tuple[object, ...], int] = {}
        self.helper_of: dict[tuple[object, ...], int] = {}
        self.helper_names: dict[str, int] = {}
        self.json_of: dict[str, Sym] = {}
        self.warnings: list[str] = []

    def run(self) -> GrammarIR:
        """Compile terminals, rules, skip and options; then prune."""
        defs = self.grammar.defs
        if not defs:
            raise self.source.error(
                'the grammar is empty: define at least a start rule, e.g. start: "yes" | "no"', 0
            )
        if "start" not in defs:
            hint = " (rule names are lowercase)" if "START" in defs else ""
            raise self.source.error(f"the grammar has no `start` rule{hint}: add `start: ...`", 0)
        for name in self._terminal_order():
            self.terminal_rx[name] = self._rx(defs[name].body, f"terminal {name}")
        for name, d in defs.items():
            if not d.terminal:
                self.nonterminal_of[name] = self.ir.add_nonterminal(name)
        for d in defs.values():
            if not d.terminal:
                self._rule(d)
        self._skip()
        self.ir.allow_initial_skip = bool(self.grammar.options.get("allow_initial_skip", False))
        self.ir.options = dict(self.grammar.options)
        if self.warnings:
            self.ir.options["warnings"] = list(self.warnings)
        return _prune(self.source, self.ir, self.nonterminal_of["start"], defs["start"].pos)

    # -- terminals -----------------------------------------------------------------------------

    def _terminal_order(self) -> list[str]:
        """Terminals in dependency order (references first); a cycle is a GrammarError."""
        defs = self.grammar.defs
        deps = {name: self._terminal_refs(d) for name, d in defs.items() if d.terminal}
        state: dict[str, int] = {}  # 1 = on the path, 2 = done
        order: list[str] = []
        for root in deps:
            if root in state:
                continue
            state[root] = 1
            path = [root]
            stack = [iter(deps[root])]
            while stack:
                ref = next(stack[-1], None)
                if ref is None:
                    stack.pop()
                    done = path.pop()
                    state[done] = 2
                    order.append(done)
                elif state.get(ref.name) == 1:
                    cycle = " -> ".join(path[path.index(ref.name) :] + [ref.name])
                    raise self.source.error(
                        f"terminal {ref.name} is recursive ({cycle}); terminals are regular "
                        "expressions and cannot refer to themselves: make it a rule by "
                        "writing its name in lowercase",
                        ref.pos,
                    )
                elif ref.name not in state:
                    state[ref.name] = 1
                    path.append(ref.name)
                    stack.append(iter(deps[ref.name]))
        return order

    def _terminal_refs(self, d: _Def) -> list[_Name]:
        """The terminals `d` refers to; rules, specials and unknown names are errors."""
        refs = []
        for node in _walk(d.body):
            if isinstance(node, _Name):
                self._check_terminal_ref(node, f"terminal {d.name}")
                refs.append(node)
            elif isinstance(node, _Special):
                self._no_special(node, f"terminal {d.name}")
            elif isinstance(node, _Json):
                self._no_json(node, f"terminal {d.name}")
        return refs

    def _check_terminal_ref(self, node: _Name, context: str) -> None:
        if not node.terminal:
            raise self.source.error(
                f"{context} refers to rule {node.name!r}; terminals are built only from strings, "
                f"regexes and other terminals: write {node.name.upper()} as a terminal, or make "
                "the terminal a rule (lowercase name)",
                node.pos,
            )
        if node.name not in self.grammar.defs:
            raise self.source.error(_undefined_terminal(node.name), node.pos)

    def _no_json(self, node: _Json, context: str) -> NoReturn:
        raise self.source.error(
            f"%json cannot be used in {context} (a terminal is one regex); use it in a rule, "
            "e.g. args: %json {...}",
            node.pos,
        )

    def _no_special(self, node: _Special, context: str) -> NoReturn:
        raise self.source.error(
            f"special tokens like {node.text} cannot be used in {context}; use them in rules",
            node.pos,
        )

    def _rx(self, expr: _Expr, context: str) -> _Rx:
        """Compile a terminal-only expression to one regex (recursion bounded by parse depth)."""
        if isinstance(expr, _Lit):
            return _literal_rx(expr.text, expr.ci)
        if isinstance(expr, _Re):
            return self._regex(expr)
        if isinstance(expr, _Range):
            return _range_rx(expr.lo, expr.hi)
        if isinstance(expr, _Name):
            self._check_terminal_ref(expr, context)
            return self.terminal_rx[expr.name]
        if isinstance(expr, _Special):
            self._no_special(expr, context)
        if isinstance(expr, _Json):
            self._no_json(expr, context)
        if isinstance(expr, _Seq):
            return _concat_rx([self._rx(item, context) for item in expr.items])
        if isinstance(expr, _Alt):
            return _alt_rx([self._rx(alt, context) for alt in expr.alts])
        assert isinstance(expr, _Repeat)
        return _repeat_rx(self._rx(expr.item, context), expr.min, expr.max)

    def _regex(self, expr: _Re) -> _Rx:
        """A /regex/ as a flag-free `_Rx` (cached); a malformed one is a GrammarError at it."""
        key = (expr.pattern, expr.flags)
        rx = self.regex_cache.get(key)
        if rx is None:
            try:
                rx = self.regex_cache[key] = _regex_rx(expr.pattern, expr.flags)
            except _PatternError as err:
                raise self.source.error(f"in this regex: {err}", expr.pos) from None
        return rx

    def _skip(self) -> None:
        """All `%ignore` expressions as one alternation: the IR's skip regex."""
        if not self.grammar.ignores:
            return
        rx = _alt_rx([self._rx(expr, "%ignore") for expr in self.grammar.ignores])
        if rx.pattern == "":
            raise self.source.error("%ignore matches only the empty string", self.grammar.ignores[0].pos)
        self.ir.skip = rx.pattern
        options = self.grammar.options
        self.ir.skip_once = bool(options.get("ignore_once")) or options.get("skip_repetition") == "once"

    # -- rules ---------------------------------------------------------------------------------

    def _rule(self, d: _Def) -> None:
        lhs = self.nonterminal_of[d.name]
        if d.lazy or d.stop is not None or d.max_tokens is not None:
            self.ir.add_rule(lhs, [self._one_lexeme(d)])
        else:
            for alt in self._alternatives(d.body, d.name):
                self.ir.add_rule(lhs, alt)

    def _one_lexeme(self, d: _Def) -> Sym:
        """The one lexeme of a rule with `lazy`, `stop=`, `suffix=` or `max_tokens=`."""
        for node in _walk(d.body):
            if isinstance(node, (_Special, _Json)) or (isinstance(node, _Name) and not node.terminal):
                attributes = (
                    ("lazy", d.lazy), ("stop=/suffix=", d.stop is not None), ("max_tokens=", d.max_tokens is not None)
                )
                used = [name for name, on in attributes if on]
                raise self.source.error(
                    f"rule {d.name}: {' and '.join(used)} {'needs' if len(used) == 1 else 'need'} "
                    "a body made only of strings, /regexes/ and TERMINALS (it becomes one lexeme); "
                    "move the rest into another rule",
                    d.attr_pos,
                )
        context = f"rule {d.name}"
        rx = self._rx(d.body, context)
        lazy = d.lazy
        if d.stop is not None:
            stop = self._rx(d.stop, f"the stop= of rule {d.name}")
            if stop.pattern != "":
                rx = _concat_rx([rx, stop])
                lazy = True
        return self._lexeme("regex", rx.pattern, d.name, lazy=lazy, max_tokens=d.max_tokens or 0)

    def _alternatives(self, expr: _Expr, owner: str) -> list[list[Sym]]:
        alts: list[_Expr] = []
        pending = [expr]
        while pending:  # flatten nested alternations
            node = pending.pop()
            if isinstance(node, _Alt):
                pending.extend(reversed(node.alts))
            else:
                alts.append(node)
        # Plain strings among the alternatives are one lexeme, their union: wherever one of
        # them may start all of them may, so the lexer and the parse are the same, and a rule
        # of 10,000 names costs one lexeme (which the core factors into their trie) instead of
        # 10,000 (docs/lark.md).
        strings = [a.text for a in alts if isinstance(a, _Lit) and not a.ci and a.text]
        if len(set(strings)) < 2:
            return [self._sequence(alt, owner) for alt in alts]
        shown = " | ".join(json.dumps(t) for t in strings[:3])
        shown += f" | … ({len(strings)} strings)" if len(strings) > 3 else ""
        union = self._lexeme("regex", alternation_regex(strings), shown)
        rest = [a for a in alts if not (isinstance(a, _Lit) and not a.ci and a.text)]
        return [[union], *(self._sequence(alt, owner) for alt in rest)]

    def _sequence(self, expr: _Expr, owner: str) -> list[Sym]:
        items = expr.items if isinstance(expr, _Seq) else (expr,)
        out: list[Sym] = []
        for item in items:
            out.extend(self._symbols(item, owner))
        return out

    def _symbols(self, item: _Expr, owner: str) -> list[Sym]:
        """The symbols one expression stands for in a right-hand side (helpers as needed)."""
        if isinstance(item, _Lit) and not item.ci:
            return [self._lexeme("literal", item.text, json.dumps(item.text))] if item.text else []
        if isinstance(item, (_Lit, _Re, _Range)):
            rx = self._rx(item, f"rule {owner}")
            return [self._lexeme("regex", rx.pattern, item.shown or rx.pattern)]
        if isinstance(item, _Name):
            return self._name_symbols(item)
        if isinstance(item, _Special):
            ids = self._special_ids(item)
            return [self._lexeme("special", "", item.text, token_ids=ids)]
        if isinstance(item, _Json):
            return [self._json(item)]
        if isinstance(item, _Seq):
            return self._sequence(item, owner)
        if isinstance(item, _Alt):
            helper = self._new_helper(owner, "group")
            for alt in self._alternatives(item, owner):
                self.ir.add_rule(helper, alt)
            return [Sym.n(helper)]
        assert isinstance(item, _Repeat)
        return self._repeat(item, owner)

    def _name_symbols(self, item: _Name) -> list[Sym]:
        if item.terminal:
            if item.name not in self.terminal_rx:
                raise self.source.error(_undefined_terminal(item.name), item.pos)
            rx = self.terminal_rx[item.name]
            if rx.literal == "":
                return []
            if rx.literal is not None:
                return [self._lexeme("literal", rx.literal, item.name)]
            return [self._lexeme("regex", rx.pattern, item.name)]
        index = self.nonterminal_of.get(item.name)
        if index is None:
            raise self.source.error(
                f"rule {item.name!r} is not defined; add `{item.name}: ...` or fix the spelling",
                item.pos,
            )
        return [Sym.n(index)]

    def _lexeme(
        self,
        kind: LexemeKind,
        value: str,
        name: str,
        *,
        lazy: bool = False,
        token_ids: tuple[int, ...] = (),
        max_tokens: int = 0,
    ) -> Sym:
        """The lexeme with this kind/value/laziness/budget, shared by every use (first name wins)."""
        key = (kind, value, lazy, token_ids, max_tokens)
        index = self.lexeme_of.get(key)
        if index is None:
            lexeme = Lexeme(name, kind, value, lazy, token_ids, max_tokens=max_tokens)
            index = self.lexeme_of[key] = self.ir.add_lexeme(lexeme)
        return Sym.t(index)

    def _special_ids(self, item: _Special) -> tuple[int, ...]:
        """Token ids of `<[1,5-7]>` or of a named special token."""
        text = item.text
        if text.startswith("<[") and text.endswith("]>"):
            return self._special_id_list(item, text[2:-2])
        if self.special_tokens is None:
            raise self.source.error(
                f"special token {text} needs the tokenizer's special tokens: pass "
                "special_tokens={...}, or write its id as <[123]>",
                item.pos,
            )
        inner = text[2:-2] if text.startswith("<|") and text.endswith("|>") else text[1:-1]
        for key in (text, inner):
            if key in self.special_tokens:
                return (int(self.special_tokens[key]),)
        known = ", ".join(sorted(self.special_tokens)[:8])
        raise self.source.error(
            f"unknown special token {text}; the tokenizer has {known or 'none'}"
            f"{', ...' if len(self.special_tokens) > 8 else ''} (or write its id as <[123]>)",
            item.pos,
        )

    def _special_id_list(self, item: _Special, body: str) -> tuple[int, ...]:
        if body.startswith("^") or body == "*":
            raise self.source.error(
                "negated and wildcard token sets (<[^...]>, <[*]>) are not supported yet; list the ids",
                item.pos,
            )
        ids: set[int] = set()
        for part in body.split(","):
            m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
            if m is None:
                raise self.source.error(
                    f"bad token id list {item.text}; write ids and ranges like <[1,5,7-9]>", item.pos
                )
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            if hi < lo:
                raise self.source.error(f"token id range {part} is backwards; swap the ends", item.pos)
            if hi - lo + 1 + len(ids) > SPECIAL_TOKEN_IDS_MAX:
                raise self.source.error(
                    f"{item.text} lists more than {SPECIAL_TOKEN_IDS_MAX} token ids", item.pos
                )
            ids.update(range(lo, hi + 1))
        return tuple(sorted(ids))

    # -- %json ---------------------------------------------------------------------------------

    def _json(self, item: _Json) -> Sym:
        """The schema's grammar merged into this one (see `_merge_json`); one copy per text."""
        sym = self.json_of.get(item.text)
        if sym is None:
            where = self.source.where(item.pos)
            try:
                sub = json_schema_to_ir(item.schema, whitespace="compact")
            except GrammarError as err:
                pointer = err.json_pointer
                at = f" (at {pointer or '/'})" if pointer is not None and f"(at {pointer}" not in str(err) else ""
                error = self.source.error(f"in this %json schema: {err}{at}", item.pos)
                error.json_pointer = pointer
                raise error from None
            line, column = self.source.line_column(item.pos)
            sym = self.json_of[item.text] = _merge_json(self.ir, sub, f"json@{line}:{column}")
            self.warnings.extend(f"%json at {where}: {w}" for w in sub.options.get("warnings", []))  # type: ignore[union-attr]
        return sym

    # -- repetition helpers --------------------------------------------------------------------

    def _new_helper(self, owner: str, kind: str) -> int:
        """A new helper nonterminal named `owner/kind`, `owner/kind2`, ... (unique names)."""
        name = f"{owner}/{kind}"
        count = self.helper_names[name] = self.helper_names.get(name, 0) + 1
        return self.ir.add_nonterminal(name if count == 1 else f"{name}{count}")

    def _single(self, item: _Expr, owner: str) -> Sym | None:
        """`item` as one symbol (a helper for sequences); None when it is empty."""
        syms = self._symbols(item, owner)
        if not syms:
            return None
        if len(syms) == 1:
            return syms[0]
        helper = self._new_helper(owner, "seq")
        self.ir.add_rule(helper, syms)
        return Sym.n(helper)

    def _repeat(self, item: _Repeat, owner: str) -> list[Sym]:
        """`x{m,n}` as x^m (doubling helpers), then `x*`, or 0..n−m more copies (`_upto`)."""
        x = self._single(item.item, owner)
        if x is None or item.max == 0:
            return []
        low, high = item.min, item.max
        if high is None and low >= 1:
            return self._exactly(x, low - 1, owner) + [self._plus(x, owner)]
        out = self._exactly(x, low, owner)
        if high is None:
            out.append(self._star(x, owner))
        elif high > low:
            tail = self._upto(x, high - low, owner)
            assert tail is not None
            out.append(tail)
        return out

    def _exactly(self, x: Sym, count: int, owner: str) -> list[Sym]:
        """Symbols deriving exactly `count` copies of x: one doubling helper per set bit."""
        if count <= 4:
            return [x] * count
        return [self._power(x, bit, owner) for bit in range(count.bit_length()) if count >> bit & 1]

    def _power(self, x: Sym, exponent: int, owner: str) -> Sym:
        """x repeated 2**exponent times: `pow2k → powk powk` (iterative, cached)."""
        sym = x
        for e in range(1, exponent + 1):
            key = ("pow", x, e)
            helper = self.helper_of.get(key)
            if helper is None:
                helper = self.helper_of[key] = self._new_helper(owner, f"pow{1 << e}")
                self.ir.add_rule(helper, [sym, sym])
            sym = Sym.n(helper)
        return sym

    def _star(self, x: Sym, owner: str) -> Sym:
        """`star → star x | ε` (left-recursive)."""
        key = ("star", x)
        helper = self.helper_of.get(key)
        if helper is None:
            helper = self.helper_of[key] = self._new_helper(owner, "star")
            self.ir.add_rule(helper, [Sym.n(helper), x])
            self.ir.add_rule(helper, [])
        return Sym.n(helper)

    def _plus(self, x: Sym, owner: str) -> Sym:
        """`plus → plus x | x` (left-recursive)."""
        key = ("plus", x)
        helper = self.helper_of.get(key)
        if helper is None:
            helper = self.helper_of[key] = self._new_helper(owner, "plus")
            self.ir.add_rule(helper, [Sym.n(helper), x])
            self.ir.add_rule(helper, [x])
        return Sym.n(helper)

    def _upto(self, x: Sym, count: int, owner: str) -> Sym | None:
        """0..count copies of x in O(log count) rules, unambiguously; None for count 0.

        With 2**h <= count < 2**(h+1): `upto(count) → upto(2**h - 1) | x^(2**h) upto(count - 2**h)`.
        The branches cover 0..2**h-1 and 2**h..count copies, so they never overlap, and
        `upto(2**h - 1)` splits the same way. Recursion depth is at most log2(count) + 1.
        """
        if count == 0:
            return None
        key = ("upto", x, count)
        helper = self.helper_of.get(key)
        if helper is None:
            high = count.bit_length() - 1
            lower = self._upto(x, (1 << high) - 1, owner)
            rest = self._upto(x, count - (1 << high), owner)
            helper = self.helper_of[key] = self._new_helper(owner, "opt" if count == 1 else f"upto{count}")
            self.ir.add_rule(helper, [] if lower is None else [lower])
            self.ir.add_rule(helper, [self._power(x, high, owner)] + ([] if rest is None else [rest]))
        return Sym.n(helper)


# JSON whitespace between the lexemes of an embedded schema (llguidance's default for %json).
JSON_WHITESPACE = r"[\x20\x0A\x0D\x09]+"
_JSON_OPEN = ("{", "[")
_JSON_CLOSE = ("}", "]")
_JSON_SEPARATORS = (",", ":")


def _merge_json(ir: GrammarIR, sub: GrammarIR, prefix: str, *, lexeme_prefix: str | None = None) -> Sym:
    """Append the compact JSON grammar `sub` to `ir`, with its own whitespace; return its start.

    The Lark grammar's `%ignore` is the IR's one skip regex, which must not reach inside the
    JSON. So every JSON nonterminal is marked `no_skip`, and JSON whitespace is spelled out in
    the rules: it may follow `{ [ , :` and precede `} ] , :` — every boundary between two JSON
    lexemes has punctuation on one side, so this is exactly "between any two lexemes, not
    before the first or after the last". Names get `prefix` so messages tell copies apart;
    with `lexeme_prefix`, lexemes are named by it instead and copies share the lexemes that
    differ only in name (a string, a number, `{`): many schemas in one grammar (tool calls) then cost the
    lexer a few lexemes each rather than dozens.
    """
    lexeme_prefix = prefix if lexeme_prefix is None else lexeme_prefix
    nt_base = len(ir.nonterminals)
    for name in sub.nonterminals:
        ir.add_nonterminal(f"{prefix}/{name}")
    add = ir.add_lexeme if lexeme_prefix == prefix else ir.add_shared_lexeme
    lexeme_of = [
        add(Lexeme(
            f"{lexeme_prefix} {lx.name}", lx.kind, lx.value, lx.lazy, lx.token_ids, lx.and_patterns, lx.not_patterns,
            lx.dot_all, lx.ignore_case, lx.max_tokens,
        ))  # not dataclasses.replace: it costs 10x more, and a grammar with many schemas has thousands
        for lx in sub.lexemes
    ]
    ws = Sym.t(add(Lexeme(f"{lexeme_prefix} whitespace", "regex", JSON_WHITESPACE)))
    padded: dict[int, Sym] = {}

    def pad(index: int) -> Sym:
        """The punctuation lexeme `index` of `sub` with the whitespace it may have around it."""
        sym = padded.get(index)
        if sym is None:
            lexeme = sub.lexemes[index]
            p = Sym.t(lexeme_of[index])
            helper = ir.add_nonterminal(f"{prefix}/{lexeme.value} ws")
            ir.no_skip.add(helper)
            before = lexeme.value not in _JSON_OPEN
            after = lexeme.value not in _JSON_CLOSE
            for lead in ([[], [ws]] if before else [[]]):
                for trail in ([[], [ws]] if after else [[]]):
                    ir.add_rule(helper, lead + [p] + trail)
            sym = padded[index] = Sym.n(helper)
        return sym

    punctuation = {
        i for i, lx in enumerate(sub.lexemes)
        if lx.kind == "literal" and lx.value in _JSON_OPEN + _JSON_CLOSE + _JSON_SEPARATORS
    }
    for rule in sub.rules:
        rhs = [
            (pad(s.index) if s.index in punctuation else Sym.t(lexeme_of[s.index])) if s.terminal
            else Sym.n(nt_base + s.index)
            for s in rule.rhs
        ]
        ir.add_rule(nt_base + rule.lhs, rhs)
    ir.no_skip.update(range(nt_base, nt_base + len(sub.nonterminals)))
    return Sym.n(nt_base + sub.start)


def _undefined_terminal(name: str) -> str:
    if name in COMMON_TERMINALS:
        return f"terminal {name} is not defined; add `%import common.{name}`"
    return f"terminal {name} is not defined; define it (`{name}: /.../`) or fix the spelling"


# ----------------------------------------------------------------------------------------------
# Pruning: drop unproductive and unreachable nonterminals, renumber from start = 0.
# ----------------------------------------------------------------------------------------------


_productive = productive_nonterminals


def _prune(source: _Source, ir: GrammarIR, start: int, start_pos: int) -> GrammarIR:
    """A copy of `ir` with only productive nonterminals reachable from `start` (numbered in
    breadth-first order, so start is 0) and the lexemes they use."""
    productive = _productive(ir)
    if not productive[start]:
        stuck = [name for name, ok in zip(ir.nonterminals, productive) if not ok and "/" not in name]
        raise source.error(
            "rule 'start' cannot match any text: every alternative needs a rule that never ends "
            f"(unproductive: {', '.join(stuck)}); give the recursion a base case, e.g. "
            'a: a "x" | "x"',
            start_pos,
        )
    rules = [
        r for r in ir.rules if productive[r.lhs] and all(s.terminal or productive[s.index] for s in r.rhs)
    ]
    by_lhs: dict[int, list[int]] = {}
    for r, rule in enumerate(rules):
        by_lhs.setdefault(rule.lhs, []).append(r)
    new_nt = {start: 0}
    new_lexeme: dict[int, int] = {}
    order = [start]
    out = GrammarIR(skip=ir.skip, allow_initial_skip=ir.allow_initial_skip, skip_once=ir.skip_once, options=dict(ir.options))
    for nt in order:  # grows while iterating: breadth-first
        for r in by_lhs.get(nt, []):
            for s in rules[r].rhs:
                if s.terminal and s.index not in new_lexeme:
                    new_lexeme[s.index] = out.add_lexeme(ir.lexemes[s.index])
                elif not s.terminal and s.index not in new_nt:
                    new_nt[s.index] = len(order)
                    order.append(s.index)
    for nt in order:
        out.add_nonterminal(ir.nonterminals[nt])
    for nt in order:
        for r in by_lhs.get(nt, []):
            rhs = [Sym.t(new_lexeme[s.index]) if s.terminal else Sym.n(new_nt[s.index]) for s in rules[r].rhs]
            out.add_rule(new_nt[nt], rhs)
    out.start = 0
    out.no_skip = {new_nt[nt] for nt in ir.no_skip if nt in new_nt}
    return out
