"""A JSON grammar inside another grammar: Lark's `%json` and structural tags' `json_schema`
parts embed the compact IR of a schema with its own whitespace rules (`merge_ir`)."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from ..ir import GrammarIR, Lexeme, Sym

JSON_WHITESPACE = r"[\x20\x0A\x0D\x09]+"
_JSON_OPEN = ("{", "[")
_JSON_CLOSE = ("}", "]")


def merge_ir(
    ir: GrammarIR,
    sub: GrammarIR,
    prefix: str,
    *,
    lexeme_prefix: str | None = None,
    whitespace: str | None = JSON_WHITESPACE,
) -> Sym:
    """Append the compact JSON grammar `sub` to `ir`, with its own whitespace; return its start.

    The Lark grammar's `%ignore` is the IR's one skip regex, which must not reach inside the
    JSON. So every JSON nonterminal is marked `no_skip`, and JSON whitespace is spelled out in
    the rules: it may follow `{ [ , :` and precede `} ] , :` — every boundary between two JSON
    lexemes has punctuation on one side, so this is exactly "between any two lexemes, not
    before the first or after the last". Names get `prefix` so messages tell copies apart;
    with `lexeme_prefix`, lexemes are named by it instead and copies share the lexemes that
    differ only in name (a string, a number, `{`): many schemas in one grammar (tool calls) then cost the
    lexer a few lexemes each rather than dozens. `whitespace` is the regex of the JSON
    whitespace (an `x-guidance` `whitespace_pattern`), None for none at all. The separators
    are found by `sub.options["separator_lexemes"]` (they may be regexes, from `x-guidance`).
    """
    lexeme_prefix = prefix if lexeme_prefix is None else lexeme_prefix
    nt_base = len(ir.nonterminals)
    ir.nonterminals.extend([f"{prefix}/{name}" for name in sub.nonterminals])
    nonterminals = [Sym.n(index) for index in range(nt_base, len(ir.nonterminals))]  # sub's j → ours
    if lexeme_prefix == prefix:
        lexeme_of = [
            ir.add_lexeme(Lexeme(
                f"{lexeme_prefix} {lx.name}", lx.kind, lx.value, lx.lazy, lx.token_ids, lx.and_patterns,
                lx.not_patterns, lx.dot_all, lx.ignore_case, lx.max_tokens, lx.string_length,
            ))  # not dataclasses.replace: it costs 10x more, and a grammar with many schemas has thousands
            for lx in sub.lexemes
        ]
        add = ir.add_lexeme
    else:  # renamed copies made only for lexemes the grammar does not have yet
        lexeme_of = [ir.add_shared_lexeme(lx, f"{lexeme_prefix} {lx.name}") for lx in sub.lexemes]
        add = ir.add_shared_lexeme
    if whitespace is None:
        for rule in sub.rules:
            ir.add_rule(nt_base + rule.lhs, [
                Sym.t(lexeme_of[s.index]) if s.terminal else nonterminals[s.index] for s in rule.rhs
            ])
        ir.no_skip.update(range(nt_base, nt_base + len(sub.nonterminals)))
        ir.distinct.update(nt_base + nt for nt in sub.distinct)
        return Sym.n(nt_base + sub.start)
    ws = Sym.t(add(Lexeme(f"{lexeme_prefix} whitespace", "regex", whitespace)))
    padded: dict[int, Sym] = {}

    def pad(index: int) -> Sym:
        """The punctuation lexeme `index` of `sub` with the whitespace it may have around it."""
        sym = padded.get(index)
        if sym is None:
            lexeme = sub.lexemes[index]
            p = Sym.t(lexeme_of[index])
            helper = ir.add_nonterminal(f"{prefix}/{lexeme.value} ws")
            ir.no_skip.add(helper)
            before = lexeme.kind != "literal" or lexeme.value not in _JSON_OPEN
            after = lexeme.kind != "literal" or lexeme.value not in _JSON_CLOSE
            for lead in ([[], [ws]] if before else [[]]):
                for trail in ([[], [ws]] if after else [[]]):
                    ir.add_rule(helper, lead + [p] + trail)
            sym = padded[index] = Sym.n(helper)
        return sym

    punctuation = {
        i for i, lx in enumerate(sub.lexemes)
        if lx.kind == "literal" and lx.value in _JSON_OPEN + _JSON_CLOSE
    }
    punctuation.update(sub.options.get("separator_lexemes", ()))  # type: ignore[arg-type]
    opening = {i for i in punctuation if sub.lexemes[i].kind == "literal" and sub.lexemes[i].value in _JSON_OPEN}

    terminals = [Sym.t(index) for index in lexeme_of]

    def rhs_of(rhs: Sequence[Sym]) -> list[Sym]:
        out: list[Sym] = []
        after_opening = False
        for terminal, index in rhs:
            if not terminal:
                out.append(nonterminals[index])
            elif index not in punctuation or after_opening:
                # after an opening bracket (`{}` / `[]`): one gap, already padded after the
                # bracket (a bounded whitespace pattern must not fit twice)
                out.append(terminals[index])
            else:
                out.append(padded.get(index) or pad(index))
            after_opening = terminal and index in opening
        return out

    nonempty = _NonEmpty(ir, sub, prefix, rhs_of)
    for rule in sub.rules:
        rhs = rule.rhs
        middle = rhs[1] if len(rhs) == 3 else None
        if (
            middle is not None and not middle.terminal
            and rhs[0].terminal and rhs[0].index in opening and rhs[2].terminal and rhs[2].index in punctuation
            and middle.index in nonempty.nullable
        ):
            # `{ members }` with optional members: `{}` has one gap (after the bracket), and
            # the members' other rule starts with some lexeme, so a bounded pattern never fits twice
            plus = nonempty.plus(middle.index)
            if plus is not None:
                ir.add_rule(nt_base + rule.lhs, [pad(rhs[0].index), Sym.t(lexeme_of[rhs[2].index])])
                ir.add_rule(nt_base + rule.lhs, [pad(rhs[0].index), plus, pad(rhs[2].index)])
                continue
        ir.add_rule(nt_base + rule.lhs, rhs_of(rhs))
    nonempty.finish()
    ir.no_skip.update(range(nt_base, nt_base + len(sub.nonterminals)))
    ir.no_skip.update(nonempty.made)
    ir.distinct.update(nt_base + nt for nt in sub.distinct)
    return Sym.n(nt_base + sub.start)


class _NonEmpty:
    """ε-free copies `N⁺` of the nullable nonterminals of `sub` (the texts of N but the empty
    one), built on demand into `ir`; each rule's nullable symbols are kept or dropped in every
    combination (at most `_DROP_BITS_MAX` of them per rule, else `plus` gives up with None)."""

    def __init__(self, ir: GrammarIR, sub: GrammarIR, prefix: str, rhs_of: Callable[[Sequence[Sym]], list[Sym]]):
        self.ir, self.sub, self.prefix, self.rhs_of = ir, sub, prefix, rhs_of
        self.plus_of: dict[int, int | None] = {}
        self.pending: list[int] = []
        self.made: list[int] = []

    # Computed when first asked: `merge_ir` asks only at a rule `{ X }` or `[ X ]`, which 18
    # of the 128 argument schemas of `bench tools` have.

    @functools.cached_property
    def rules_of(self) -> dict[int, list[Sequence[Sym]]]:
        rules_of: dict[int, list[Sequence[Sym]]] = {}
        for rule in self.sub.rules:
            rules_of.setdefault(rule.lhs, []).append(rule.rhs)
        return rules_of

    @functools.cached_property
    def nullable(self) -> set[int]:
        nullable: set[int] = set()
        # Only rules of nonterminals alone can make their left side nullable.
        candidates = [rule for rule in self.sub.rules if not any(terminal for terminal, _ in rule.rhs)]
        changed = True
        while changed:
            changed = False
            for rule in candidates:
                if rule.lhs not in nullable and all(s.index in nullable for s in rule.rhs):
                    nullable.add(rule.lhs)
                    changed = True
        return nullable

    def plus(self, n: int) -> Sym | None:
        if n not in self.plus_of:
            if any(sum(not s.terminal and s.index in self.nullable for s in rhs) > _DROP_BITS_MAX
                   for rhs in self.rules_of.get(n, [])):
                self.plus_of[n] = None
            else:
                index = self.ir.add_nonterminal(f"{self.prefix}/{self.sub.nonterminals[n]}+")
                self.plus_of[n] = index
                self.made.append(index)
                self.pending.append(n)
        index = self.plus_of[n]
        return None if index is None else Sym.n(index)

    def finish(self) -> None:
        """The rules of every `N⁺` asked for (which may ask for more)."""
        while self.pending:
            n = self.pending.pop()
            lhs = self.plus_of[n]
            assert lhs is not None
            for rhs in self.rules_of.get(n, []):
                optional = [i for i, s in enumerate(rhs) if not s.terminal and s.index in self.nullable]
                for mask in range(1 << len(optional)):
                    kept = [s for i, s in enumerate(rhs) if i not in optional or mask >> optional.index(i) & 1]
                    if not kept:
                        continue
                    out: list[Sym] = []
                    ok = True
                    for i, s in enumerate(kept):
                        if not s.terminal and s.index in self.nullable:
                            plus = self.plus(s.index)
                            if plus is None:
                                ok = False
                                break
                            out.append(plus)
                        else:
                            out.extend(self.rhs_of(kept[max(i - 1, 0): i + 1])[-1:])
                    if ok:
                        self.ir.add_rule(lhs, out)


_DROP_BITS_MAX = 4  # nullable symbols per rule an ε-free copy expands (2^4 rules at most)
