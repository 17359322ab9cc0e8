"""Grammar descriptions and their compiled form in the core."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ._abi import REGEX_FLAG_CASE_INSENSITIVE, REGEX_FLAG_DOT_ALL, Core, default_core, free_later
from ._errors import GrammarError


@dataclass(frozen=True)
class Limits:
    """Work and size limits of a compiled grammar; going over one is a `LimitError`.

    Attributes:
        step_fuel_max: derivative work one call (a mask, a consume, forced bytes) may do, in
            units of one expression construction (~10 ns each); the default bounds a call to
            roughly 10 ms of lexer construction.
        dfa_state_count_max: lexer DFA states the grammar may build (each costs a table row of
            4 bytes per byte class plus its expression list).
    """

    step_fuel_max: int = 1_000_000
    dfa_state_count_max: int = 100_000

    def __post_init__(self) -> None:
        for name in ("step_fuel_max", "dfa_state_count_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= 0xFFFFFFFF:
                raise ValueError(f"Limits.{name} must be an int in 1..2**32-1, not {value!r}")


class Grammar:
    """A grammar the output must follow. Build one with a constructor such as `Grammar.regex`.

    A grammar is compiled once per core instance and shared by every `Matcher` built from it,
    together with its lazily built lexer DFA: reuse one `Grammar` object for many requests.
    """

    kind: str
    source: str
    flags: int
    limits: Limits

    def __init__(self, kind: str, source: str, flags: int = 0, limits: Limits | None = None) -> None:
        self.kind = kind
        self.source = source
        self.flags = flags
        self.limits = limits or Limits()
        self._handles: weakref.WeakKeyDictionary[Core, int] = weakref.WeakKeyDictionary()

    @classmethod
    def regex(
        cls, pattern: str, *, dot_all: bool = False, ignore_case: bool = False, limits: Limits | None = None
    ) -> Grammar:
        """A grammar whose whole output must match the regular expression `pattern`.

        The syntax is the common core of ECMA-262 and Rust regexes (see `docs/regex.md`):
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
            raise TypeError(f"Grammar.regex takes a str pattern, not {type(pattern).__name__}")
        flags = (REGEX_FLAG_DOT_ALL if dot_all else 0) | (REGEX_FLAG_CASE_INSENSITIVE if ignore_case else 0)
        grammar = cls("regex", pattern, flags, limits)
        grammar._handle(default_core())  # compile now, so a bad pattern fails here
        return grammar

    def __repr__(self) -> str:
        return f"Grammar.{self.kind}({self.source!r})"

    def _handle(self, core: Core) -> int:
        """The compiled grammar in `core`, compiling it on first use."""
        handle = self._handles.get(core)
        if handle is not None:
            return handle
        data = self.source.encode("utf-8")
        ptr, size = core.put_bytes(data)
        try:
            status = core.f["ts_grammar_new_regex"](ptr, size, self.flags, core.out_ptr)
            try:
                core.check(status, "regex")
            except GrammarError as err:
                raise _with_char_position(err, self.source, data) from None
        finally:
            core.free(ptr, size)
        handle = core.out_i32()
        free_later(self, core, "ts_grammar_free", handle)
        core.check(
            core.f["ts_grammar_set_limits"](handle, self.limits.step_fuel_max, self.limits.dfa_state_count_max),
            "limits",
        )
        self._handles[core] = handle
        return handle


def _with_char_position(err: GrammarError, source: str, data: bytes) -> GrammarError:
    """Turn the core's byte offset into a character offset, line and column in `source`."""
    if err.position is None:
        return err
    char_pos = len(data[: err.position].decode("utf-8", "replace"))
    line = source.count("\n", 0, char_pos) + 1
    column = char_pos - (source.rfind("\n", 0, char_pos) + 1) + 1
    message = str(err).removeprefix("regex: ")
    pointer = f"\n  {source}\n  {' ' * char_pos}^" if "\n" not in source and len(source) < 200 else ""
    return GrammarError(
        f"bad regex at position {char_pos}: {message}{pointer}",
        position=char_pos,
        line=line,
        column=column,
    )
