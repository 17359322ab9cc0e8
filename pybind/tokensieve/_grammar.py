"""Grammar descriptions and their compiled form in the core."""

from __future__ import annotations

import weakref

from ._abi import REGEX_FLAG_CASE_INSENSITIVE, REGEX_FLAG_DOT_ALL, Core, default_core, free_later
from ._errors import GrammarError


class Grammar:
    """A grammar the output must follow. Build one with a constructor such as `Grammar.regex`.

    A grammar is compiled once per core instance and shared by every `Matcher` built from it,
    together with its lazily built lexer DFA: reuse one `Grammar` object for many requests.
    """

    kind: str
    source: str
    flags: int

    def __init__(self, kind: str, source: str, flags: int = 0) -> None:
        self.kind = kind
        self.source = source
        self.flags = flags
        self._handles: weakref.WeakKeyDictionary[Core, int] = weakref.WeakKeyDictionary()

    @classmethod
    def regex(cls, pattern: str, *, dot_all: bool = False, ignore_case: bool = False) -> Grammar:
        """A grammar whose whole output must match the regular expression `pattern`.

        The syntax is the common core of ECMA-262 and Rust regexes (see `docs/regex.md`):
        literals, escapes, `.`, classes, groups, alternation, `? * + {m} {m,} {m,n}`, and `^`/`$`
        at the ends (the match is always anchored at both ends).

        Args:
            pattern: the regular expression.
            dot_all: `.` also matches a newline.
            ignore_case: ASCII letters match both cases.

        Raises:
            GrammarError: the pattern is malformed or uses an unsupported construct; its
                `position` and `column` give the offset (in characters) into `pattern`.
        """
        if not isinstance(pattern, str):
            raise TypeError(f"Grammar.regex takes a str pattern, not {type(pattern).__name__}")
        flags = (REGEX_FLAG_DOT_ALL if dot_all else 0) | (REGEX_FLAG_CASE_INSENSITIVE if ignore_case else 0)
        grammar = cls("regex", pattern, flags)
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
        self._handles[core] = handle
        free_later(self, core, "ts_grammar_free", handle)
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
