"""The tokensieve error tree.

Every error the package raises on purpose derives from `TokensieveError`, so one
`except tokensieve.TokensieveError` catches them all. Messages say what to change
(which argument, which limit), not only what went wrong.

    TokensieveError
    ├── GrammarError    the grammar or schema is invalid or unsupported (with its place)
    ├── LimitError      a configured or built-in limit was hit (raise it, or simplify input)
    ├── CoreTrap        the WebAssembly core trapped; its runtime is poisoned
    ├── TokenizerError  the tokenizer could not be loaded or is inconsistent
    └── ArgumentError   a bad argument to a call (also a `TypeError` and a `ValueError`)
"""

from __future__ import annotations

__all__ = [
    "TokensieveError",
    "GrammarError",
    "LimitError",
    "CoreTrap",
    "TokenizerError",
    "ArgumentError",
]


class TokensieveError(Exception):
    """Base class of every error tokensieve raises on purpose."""


class GrammarError(TokensieveError):
    """A grammar, schema or regular expression is invalid or unsupported.

    The message should already name the place; the attributes repeat it for tools.

    Attributes:
        position: 0-based character offset in the grammar text, if known.
        line: 1-based line in the grammar text, if known.
        column: 1-based column in the grammar text, if known.
        json_pointer: RFC 6901 pointer to the offending part of a JSON Schema, if known.
        lexeme: index of the grammar IR lexeme the core refused, if that is where it is.
    """

    position: int | None
    line: int | None
    column: int | None
    json_pointer: str | None
    lexeme: int | None

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        line: int | None = None,
        column: int | None = None,
        json_pointer: str | None = None,
        lexeme: int | None = None,
    ) -> None:
        """Create a grammar error.

        Args:
            message: what is wrong and what to change.
            position: 0-based character offset, if known.
            line: 1-based line, if known.
            column: 1-based column, if known.
            json_pointer: pointer into a JSON Schema, if known.
            lexeme: index of the IR lexeme the core refused, if known.
        """
        super().__init__(message)
        self.position = position
        self.line = line
        self.column = column
        self.json_pointer = json_pointer
        self.lexeme = lexeme


class LimitError(TokensieveError):
    """A limit was hit: memory cap, fuel or time deadline, or a core-side budget.

    The message names the limit and the argument that raises it.

    Attributes:
        limit: which limit, as the core names it (`"lexer_states"`, `"step_fuel"`,
            `"expressions"`, `"parser_row_items"`, `"parser_step_items"`, `"token_history"`,
            `"compile_fuel"`, `"input_size"`, `"distinct_items"`, `"memory"`, `"deadline"`, `"fuel"`, and
            `"gbnf_analysis"` for the GBNF front-end's budget; see docs/limits.md), or None
            when unknown.
    """

    limit: str | None

    def __init__(self, message: str, *, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class CoreTrap(TokensieveError):
    """The WebAssembly core trapped (a bug in tokensieve, never in the caller's input).

    The runtime that trapped is poisoned: every later call on it raises `CoreTrap`
    without entering the module. Create a new matcher (and runtime) to continue, and
    please report the message.
    """


class TokenizerError(TokensieveError):
    """A tokenizer could not be loaded, or its vocabulary is inconsistent."""


class ArgumentError(TokensieveError, TypeError, ValueError):
    """A call got a bad argument: a token id that is not an int or not in the vocabulary, a
    negative row or count, a bitmask of the wrong dtype, shape or layout.

    The message names the argument and what it must be. It is also a `TypeError` and a
    `ValueError`, the exceptions Python code expects for bad arguments, so
    `except TokensieveError` catches everything tokensieve raises on purpose while
    `except (TypeError, ValueError)` keeps working.
    """
