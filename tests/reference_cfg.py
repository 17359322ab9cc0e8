"""A slow, obviously-correct recognizer for the grammar IR, used by tests as an oracle.

It implements "What a grammar matches" in `docs/grammar_ir.md` directly, on characters:

- A *configuration* is (parse chart, text of the current lexeme, the lexemes that can still
  match it, whether the last lexeme was the skip regex). Reading a character maps each
  configuration to zero or more; the configurations after every prefix of a text are cached.
- At a lexeme boundary the candidates are the lexemes the Earley chart expects next, plus the
  skip regex once a lexeme has been scanned (from the very start only with
  `allow_initial_skip`). A character extends the lexeme while some candidate still matches
  partially (`regex` `fullmatch(..., partial=True)`); otherwise the lexeme ends (longest match,
  no backtracking), every candidate that fully matches it is scanned at once, and the character
  starts the next lexeme. A lexeme also ends as soon as a *lazy* candidate fully matches it.
- The parser is a plain Earley recognizer over lexeme indices (predict / scan / complete), with
  Aycock and Horspool's fix for nullable nonterminals: predicting a nullable `B` in
  `A → α • B β` also adds `A → α B • β`.

Resolutions of points the doc leaves open (test_reference_cfg.py pins those it can):

- Characters, not bytes: look-ahead is one character. The core looks one *byte* ahead, which
  differs only when the lead byte of a non-ASCII character could extend a lexeme but the whole
  character cannot.
- A lexeme never matches empty text (at EOS an empty current lexeme means "at a boundary").
  A lexeme whose pattern matches the empty string is optional where rules use it (as
  `docs/grammar_ir.md` says): the parser may step over it like over a nullable nonterminal.
- `no_skip` nonterminals: at a boundary the skip regex is a candidate only if the last Earley
  set holds an item past its first symbol whose rule's left side is not `no_skip` (a rule in
  progress across the boundary that lets it in), or at the very start.
- Skip regexes may follow each other, unless `skip_once`. When the skip regex and real lexemes
  both match a lexeme, both readings are kept (the parser either stays or advances over the real
  ones); with `skip_once` only the real reading may be followed by a skip (the core merges the
  two readings into one row and allows a skip after either; no test grammar tells them apart).
  EOS right after a skip needs `allow_initial_skip`.
- When a lazy candidate matches, the lexeme ends even if a greedy candidate could go on; every
  candidate fully matching at that point is scanned.
- Rules that can never derive a lexeme sequence (unproductive) are dropped first, so "the
  lexemes the parser can accept next" are those after which the parse can still finish.
- Special lexemes never match text. They still count as a possible future in `completable`
  (text followed by a special token), but `full_match` of text never crosses one.
- Token budgets (`Lexeme.max_tokens`) only exist for token sequences: `token_prefix_ok` reads
  the text token by token. A lexeme counts the tokens it has characters in. Where one token
  ends and the next begins, candidates whose budget is spent are dropped; if none is left the
  lexeme ends right there (every candidate that fully matches is scanned), else it goes on
  with the rest. The texts-only answers (`full_match`, `completable`) ignore budgets.
  Future tokens are assumed to be able to hold any text: after the last token, what is left of
  a lexeme could come in one more token.
- Boolean lexemes: a full match must match every `and_patterns` entry and no `not_patterns`
  entry; a prefix is judged by the positive patterns only (an over-approximation), except for
  the structural-tag free-text shape "text in which no B ends, then HEAD", which becomes one
  exact regex with a look-behind (`_tempered_free_text`).
- Regex syntax is handed to the `regex` module (flag `ASCII`); `\\u{H…}` and `\\x{H…}` are
  rewritten to `\\UHHHHHHHH` first.

`completable` decides the *current* lexeme exactly and the rest at the lexeme level: it assumes
that any lexeme sequence the parser accepts after the current lexeme can be written as text that
the lexer splits that way. That fails only where the lexer's rules forbid a boundary (longest
match, a lazy lexeme that ends first): for `/a+/ /a+/`, "a" is completable here yet no text
matches. llguidance lets such text through too.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Sequence

import regex

from tokensieve._grammar.ir import GrammarIR, Rule

SKIP = -1  # the skip regex's index among lexeme indices
_CACHE_ENTRY_COUNT_MAX = 200_000  # cached prefixes; the caches are dropped past this

Item = tuple[int, int, int]  # (rule index, dot position, origin set index)


class ReferenceLimitError(RuntimeError):
    """A chart set or a configuration set grew past the recognizer's limit."""


_BRACE_ESCAPE_RE = re.compile(r"\\\\|\\[ux]\{([0-9A-Fa-f]{1,6})\}")


def _to_python_pattern(pattern: str) -> str:
    """Rewrite `\\u{H…}` / `\\x{H…}` (docs/lexer.md) to `\\UHHHHHHHH`, which `regex` reads."""

    def sub(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) is None else f"\\U{int(m.group(1), 16):08x}"

    return _BRACE_ESCAPE_RE.sub(sub, pattern)


_FREE_TEXT_RE = re.compile(r"\[\\s\\S\](\*|\{\d+,\d*\})(.*)", re.DOTALL)


def _tempered_free_text(lexeme) -> str | None:
    """The structural-tag free-text lexeme `[\\s\\S]*HEAD` minus `[\\s\\S]*(?:B…)[\\s\\S]*HEAD`
    ("text in which no B ends, then HEAD") as one regex: each character of the text is
    followed by a look-behind that no B ends there. Exact for prefixes too; None for other
    lexemes."""
    if lexeme.and_patterns or len(lexeme.not_patterns) != 1:
        return None
    found = _FREE_TEXT_RE.fullmatch(lexeme.value)
    if found is None:
        return None
    count, head = found.groups()
    prefix = "[\\s\\S]*(?:"
    banned_and_rest = lexeme.not_patterns[0]
    if not banned_and_rest.startswith(prefix) or not banned_and_rest.endswith(")[\\s\\S]*" + head):
        return None
    banned = banned_and_rest[len(prefix): len(banned_and_rest) - len(")[\\s\\S]*" + head)]
    return f"(?:[\\s\\S](?<!(?:{banned}))){count}{head}"


class _EarleySet:
    """One Earley set, indexed by the symbol each item waits for."""

    __slots__ = ("items", "by_lexeme", "by_nonterminal", "accepting")

    def __init__(self, items: frozenset[Item], rules: Sequence[Rule], start: int) -> None:
        self.items = items
        self.by_lexeme: dict[int, list[Item]] = {}
        self.by_nonterminal: dict[int, list[Item]] = {}
        self.accepting = False
        for item in items:
            rule_index, dot, origin = item
            rhs = rules[rule_index].rhs
            if dot == len(rhs):
                self.accepting |= rules[rule_index].lhs == start and origin == 0
            else:
                index = self.by_lexeme if rhs[dot].terminal else self.by_nonterminal
                index.setdefault(rhs[dot].index, []).append(item)


class _Chart:
    """The Earley sets after each scanned lexeme. Interned, so equal charts are one object."""

    __slots__ = ("sets",)

    def __init__(self, sets: tuple[_EarleySet, ...]) -> None:
        self.sets = sets

    @property
    def last(self) -> _EarleySet:
        return self.sets[-1]


class _Config(NamedTuple):
    """Where the lexer and parser may be after some text."""

    chart: _Chart
    current: str  # text of the current lexeme; "" at a boundary
    candidates: frozenset[int]  # lexemes (or SKIP) that still match `current` partially
    after_skip: bool  # at a boundary: the last lexeme was the skip regex
    spanned: int = 0  # tokens the current lexeme has characters in (token_prefix_ok only)


class ReferenceRecognizer:
    """Decides full matches and completable prefixes of text for one `GrammarIR`.

    Args:
        ir: the grammar.
        item_count_max: most items in one Earley set.
        config_count_max: most configurations after one prefix.

    Raises:
        ValueError: a rule names a lexeme or nonterminal that does not exist.
        regex.error: a lexeme pattern the `regex` module cannot compile.
    """

    def __init__(
        self, ir: GrammarIR, *, item_count_max: int = 100_000, config_count_max: int = 100_000
    ) -> None:
        self.ir = ir
        self.item_count_max = item_count_max
        self.config_count_max = config_count_max
        self._patterns: list[regex.Pattern[str] | None] = []
        self._boolean: dict[int, tuple[list[regex.Pattern[str]], list[regex.Pattern[str]]]] = {}
        for index, lexeme in enumerate(ir.lexemes):
            if lexeme.kind == "regex":
                tempered = _tempered_free_text(lexeme)
                self._patterns.append(regex.compile(_to_python_pattern(tempered or lexeme.value), regex.ASCII))
                if tempered is None and (lexeme.and_patterns or lexeme.not_patterns):
                    self._boolean[index] = (
                        [regex.compile(_to_python_pattern(p), regex.ASCII) for p in lexeme.and_patterns],
                        [regex.compile(_to_python_pattern(p), regex.ASCII) for p in lexeme.not_patterns],
                    )
            elif lexeme.kind == "literal":
                self._patterns.append(regex.compile(regex.escape(lexeme.value)))
            else:
                self._patterns.append(None)  # special: matches tokens, never text
        self._skip = regex.compile(_to_python_pattern(ir.skip), regex.ASCII) if ir.skip else None
        self._optional_lexemes = {
            i for i, p in enumerate(self._patterns) if p is not None and p.fullmatch("") is not None
        }
        for rule in ir.rules:
            for sym in rule.rhs:
                bound = len(ir.lexemes) if sym.terminal else len(ir.nonterminals)
                if not 0 <= sym.index < bound:
                    raise ValueError(f"rule for nonterminal {rule.lhs} names missing symbol {sym}")
        self._rules = _productive_rules(ir.rules)
        self._rules_by_lhs: dict[int, list[int]] = {}
        for i, rule in enumerate(self._rules):
            self._rules_by_lhs.setdefault(rule.lhs, []).append(i)
        self._nullable = _nullable_nonterminals(self._rules, self._optional_lexemes)
        self._match_cache: dict[tuple[int, str, bool], bool] = {}
        self._configs_cache: dict[str, frozenset[_Config]] = {}
        self._charts: dict[tuple[int, frozenset[Item]], _Chart] = {}

    # ---- public answers -------------------------------------------------------------------

    def full_match(self, text: str) -> bool:
        """True when `text` is a complete match (EOS is allowed after it)."""
        return self._any_full_match(self._configs(text))

    def _any_full_match(self, configs: Iterable[_Config]) -> bool:
        for config in configs:
            ends = [config] if not config.current else self._end_lexeme(config)
            if any(self._eos_ok(end.chart, end.after_skip) for end in ends):
                return True
        return False

    def completable(self, text: str) -> bool:
        """True when `text` can still be extended to a full match (see the module docstring).

        Cost: one step per character not already cached for a prefix of `text`.
        """
        return self._any_completable(self._configs(text))

    def _any_completable(self, configs: Iterable[_Config]) -> bool:
        for config in configs:
            if config.current and any(c != SKIP for c in config.candidates):
                return True  # the current lexeme can still become one the parser expects
            # At a boundary, or inside a skip: finish now, or go on with any expected lexeme.
            after_skip = config.after_skip or bool(config.current)
            if self._eos_ok(config.chart, after_skip) or config.chart.last.by_lexeme:
                return True
        return False

    def token_prefix_ok(self, tokens: Sequence[str]) -> tuple[bool, bool]:
        """(completable, full match) of the text of `tokens`, with token budgets applied.

        Completable: the next token can start (budgets allow it) and the text can still become
        a full match; full match: EOS may follow the last token.
        """
        chart = self._initial_chart()
        configs = frozenset() if chart is None else frozenset([self._boundary(chart, False)])
        for i, token in enumerate(tokens):
            if i > 0:
                configs = frozenset(c for config in configs for c in self._enter_token(config))
            for char in token:
                configs = frozenset(
                    _spanned(after, config) for config in configs for after in self._step(config, char)
                )
                if len(configs) > self.config_count_max:
                    raise ReferenceLimitError(f"more than {self.config_count_max} configurations")
        full = self._any_full_match(configs)
        entered = frozenset(c for config in configs for c in self._enter_token(config))
        return self._any_completable(entered) or full, full

    def _enter_token(self, config: _Config) -> list[_Config]:
        """The configurations in which the next token starts (token budgets applied)."""
        if not config.current:
            return [config]
        budget = {c for c in config.candidates if c == SKIP or not self.ir.lexemes[c].max_tokens
                  or config.spanned < self.ir.lexemes[c].max_tokens}
        if budget:  # goes on: its next character is in one more token
            return [config._replace(candidates=frozenset(budget), spanned=config.spanned + 1)]
        return self._end_lexeme(config)

    def valid_prefix_len(self, chunks: Sequence[str]) -> int:
        """How many leading chunks keep the concatenation completable (the first failure index)."""
        text = ""
        for i, chunk in enumerate(chunks):
            text += chunk
            if not self.completable(text):
                return i
        return len(chunks)

    # ---- lexer ------------------------------------------------------------------------------

    def _matches(self, lexeme: int, text: str, *, partial: bool) -> bool:
        """Does `text` match lexeme (or SKIP) fully, or as a prefix of a match when `partial`?"""
        key = (lexeme, text, partial)
        hit = self._match_cache.get(key)
        if hit is None:
            pattern = self._skip if lexeme == SKIP else self._patterns[lexeme]
            hit = pattern is not None and pattern.fullmatch(text, partial=partial) is not None
            if hit and lexeme in self._boolean:
                ands, nots = self._boolean[lexeme]
                hit = all(a.fullmatch(text, partial=partial) is not None for a in ands)
                if not partial:  # a prefix is judged by the positive patterns only
                    hit = hit and not any(n.fullmatch(text) is not None for n in nots)
            self._match_cache[key] = hit
        return hit

    def _is_lazy(self, lexeme: int) -> bool:
        return lexeme != SKIP and self.ir.lexemes[lexeme].lazy

    def _boundary(self, chart: _Chart, after_skip: bool) -> _Config:
        """The configuration at the start of a lexeme."""
        candidates = {i for i in chart.last.by_lexeme if self._patterns[i] is not None}
        once_done = after_skip and self.ir.skip_once
        if (
            self._skip is not None and not once_done and (self.ir.allow_initial_skip or len(chart.sets) > 1)
            and self._skip_in_progress(chart)
        ):
            candidates.add(SKIP)
        return _Config(chart, "", frozenset(candidates), after_skip)

    def _skip_in_progress(self, chart: _Chart) -> bool:
        if not self.ir.no_skip or len(chart.sets) == 1:
            return True
        return any(dot > 0 and self._rules[r].lhs not in self.ir.no_skip for r, dot, _ in chart.last.items)

    def _end_lexeme(self, config: _Config) -> list[_Config]:
        """End the (non-empty) current lexeme: scan every candidate that fully matches it."""
        assert config.current, "a lexeme never matches empty text"
        matched = {c for c in config.candidates if self._matches(c, config.current, partial=False)}
        ends: list[_Config] = []
        real = matched - {SKIP}
        if real:
            chart = self._scan(config.chart, real)
            if chart is not None:
                ends.append(self._boundary(chart, after_skip=False))
        if SKIP in matched:
            ends.append(self._boundary(config.chart, after_skip=True))
        return ends

    def _step(self, config: _Config, char: str) -> list[_Config]:
        """The configurations after reading one more character."""
        text = config.current + char
        extended = frozenset(c for c in config.candidates if self._matches(c, text, partial=True))
        if extended:
            grown = _Config(config.chart, text, extended, False)
            if any(self._is_lazy(c) and self._matches(c, text, partial=False) for c in extended):
                return self._end_lexeme(grown)  # a lazy lexeme ends at its shortest match
            return [grown]
        if not config.current:
            return []  # nothing can start with `char` here
        # `char` cannot extend the lexeme: it ends here, and `char` starts the next one.
        return [after for end in self._end_lexeme(config) for after in self._step(end, char)]

    def _eos_ok(self, chart: _Chart, after_skip: bool) -> bool:
        """May the output stop at this boundary?"""
        return chart.last.accepting and (not after_skip or self.ir.allow_initial_skip)

    def _configs(self, text: str) -> frozenset[_Config]:
        """The configurations after `text`, reusing those cached for its longest cached prefix."""
        cache = self._configs_cache
        if len(cache) > _CACHE_ENTRY_COUNT_MAX:
            cache.clear()
            self._match_cache.clear()
            self._charts.clear()
        if "" not in cache:
            chart = self._initial_chart()
            cache[""] = frozenset() if chart is None else frozenset([self._boundary(chart, False)])
        known = len(text)
        while text[:known] not in cache:
            known -= 1
        configs = cache[text[:known]]
        for i in range(known, len(text)):
            if not configs:
                return configs
            after = {new for config in configs for new in self._step(config, text[i])}
            if len(after) > self.config_count_max:
                raise ReferenceLimitError(f"more than {self.config_count_max} configurations")
            configs = cache[text[: i + 1]] = frozenset(after)
        return configs

    # ---- parser -----------------------------------------------------------------------------

    def _initial_chart(self) -> _Chart | None:
        kernel = [(r, 0, 0) for r in self._rules_by_lhs.get(self.ir.start, [])]
        return self._extend((), kernel)

    def _scan(self, chart: _Chart, lexemes: Iterable[int]) -> _Chart | None:
        """The chart after one more lexeme that may be any of `lexemes`; None if none fits."""
        by_lexeme = chart.last.by_lexeme
        kernel = [(r, dot + 1, o) for lex in lexemes for (r, dot, o) in by_lexeme.get(lex, [])]
        return self._extend(chart.sets, kernel)

    def _extend(self, sets: tuple[_EarleySet, ...], kernel: Iterable[Item]) -> _Chart | None:
        """Close `kernel` into set number len(sets) (predict and complete); None if empty."""
        k = len(sets)
        items = set(kernel)
        work = list(items)
        while work:
            rule_index, dot, origin = work.pop()
            rhs = self._rules[rule_index].rhs
            if dot < len(rhs):
                sym = rhs[dot]
                if sym.terminal:
                    if sym.index not in self._optional_lexemes:
                        continue
                    new = [(rule_index, dot + 1, origin)]  # an optional lexeme: step over it
                else:
                    new = [(r, 0, k) for r in self._rules_by_lhs.get(sym.index, [])]
                    if sym.index in self._nullable:  # Aycock–Horspool: B ⇒* ε, so step over it
                        new.append((rule_index, dot + 1, origin))
            elif origin < k:
                lhs = self._rules[rule_index].lhs
                new = [(r, d + 1, o) for (r, d, o) in sets[origin].by_nonterminal.get(lhs, [])]
            else:
                continue  # ε-completion inside this set: the nullable step already advanced
            for item in new:
                if item not in items:
                    items.add(item)
                    work.append(item)
            if len(items) > self.item_count_max:
                raise ReferenceLimitError(f"more than {self.item_count_max} items in one set")
        if not items:
            return None
        frozen = frozenset(items)
        # A set belongs to one chart and the table keeps it alive, so its id names the parent.
        key = (id(sets[-1]) if sets else 0, frozen)
        chart = self._charts.get(key)
        if chart is None:
            chart = self._charts[key] = _Chart(sets + (_EarleySet(frozen, self._rules, self.ir.start),))
        return chart


def _spanned(after: _Config, before: _Config) -> _Config:
    """`after` (one character read from `before`) with its lexeme's token count: a lexeme that
    just started has one token, one that went on keeps its count."""
    if not after.current:
        return after
    return after._replace(spanned=1 if len(after.current) == 1 else before.spanned)


def _productive_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The rules whose every symbol can derive some lexeme sequence."""
    productive: set[int] = set()
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.lhs not in productive and all(s.terminal or s.index in productive for s in rule.rhs):
                productive.add(rule.lhs)
                changed = True
    return [r for r in rules if all(s.terminal or s.index in productive for s in r.rhs)]


def _nullable_nonterminals(rules: Sequence[Rule], optional_lexemes: set[int]) -> set[int]:
    """Nonterminals that derive the empty sequence (over nullable nonterminals and optional
    lexemes only)."""
    nullable: set[int] = set()
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.lhs not in nullable and all(
                s.index in optional_lexemes if s.terminal else s.index in nullable for s in rule.rhs
            ):
                nullable.add(rule.lhs)
                changed = True
    return nullable
