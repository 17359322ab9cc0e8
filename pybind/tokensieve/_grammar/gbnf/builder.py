"""Syntax tree → the lexeme grammar under construction (`_Cfg`): regular rules inlined into
lexemes as large as greedy lexing allows, the rest kept as rules, counted repetitions expanded."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from ..automata import _ALT, _SEQ, _Pool
from .syntax import (
    INLINE_SIZE_MAX, LEXEME_DEPTH_MAX, CharSet, Choice, Concat, GbnfGrammar, Literal, Node, Repeat, RuleRef, SpecialToken,
    _children, _walk,
)


# An alternation split with at least this many words among other alternatives keeps the words
# together (`_Cfg.split`); fewer are split a word at a time, which costs the analysis little.
WORD_GROUP_MIN = 64

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
            words = self.word_group(x)
            if words is not None:
                listed = set(words)
                self.productions[nt] = [tuple(self.chunk(pool.alt(words)))] + [
                    tuple(self.chunk(i)) for i in items if i not in listed
                ]
            else:
                self.productions[nt] = [tuple(self.chunk(i)) for i in items]
        else:
            min_count, max_count = pool.counts[x]
            self.productions[nt] = _repeat_productions(
                self, f"lexeme~{x}", nt, (_TERM, items[0]), min_count, max_count
            )

    def word_group(self, x: int) -> list[int] | None:
        """The words of alternation x when it holds a long list of them beside other
        alternatives (`name | [0-9]+`, at least `WORD_GROUP_MIN`), else None. Split, x keeps
        the words as one term, which is never too long and is checked from its texts, and
        splits the others off; flagged again, the list splits a word at a time. Whole, x is
        split before any check (`_Refiner.too_large`): the derivative search over a list of
        thousands of words runs out of its states, slowly."""
        pool = self.pool
        if pool.kind[x] != _ALT or len(pool.items[x]) <= WORD_GROUP_MIN:
            return None
        words = [i for i in pool.items[x] if pool.fixed_text(i) is not None]
        return words if WORD_GROUP_MIN <= len(words) < len(pool.items[x]) else None

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
        # The regex of each regular rule body, made once: a body too large to inline (a list of
        # 10,000 words) was built again for its own productions.
        self._body_regex: dict[int, int] = {}

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
            x = self._body_regex[id(rule.body)] = self.regex(rule.body)
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
            if isinstance(n, Literal):
                done[id(n)] = pool.literal(n.codes)
            elif isinstance(n, CharSet):
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
            x = self._body_regex.get(id(choice))
            return [tuple(self.cfg.chunk(self.regex(choice) if x is None else x))]
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


