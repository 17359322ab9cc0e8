"""Refinement: split lexemes until none can over-extend — where greedy lexing of one lexeme
could run into the text of another that the grammar expects next, the lexeme is split
(the module docstring of `tokensieve._grammar.gbnf` has the argument). Bounded by
`ANALYSIS_WORK_MAX`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..charset import (
    Ranges, intersects, normalize,
)
from ..._errors import GrammarError, LimitError
from ..automata import _UNLIMITED, _Budget, _OverBudget, _can_extend, _share_text
from .builder import _NT, _SPECIAL, _TERM, Symbol, _Cfg
from .syntax import (
    ANALYSIS_WORK_MAX, CONTEXT_DEPTHS, LEXEME_DEPTH_MAX, LEXEME_SIZE_MAX, REFINE_ROUND_COUNT_MAX,
    TAGGED_OCCURRENCE_COUNT_MAX, _widen_to_lead_bytes,
)


# ===============================================================================================
# Refinement: split lexemes until none can over-extend
# ===============================================================================================

# `together` numbers every FOLLOW set before its worklist up to this many occurrences (hashing
# each occurrence's set costs little there, and lets a pop take its partners a set at a time);
# past it sets are numbered when first met (hashing 50,000 sets of 50,000 bits up front costs
# more than a grammar near the budget does before it runs out).
_EAGER_NUMBERING_MAX = 4096

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
    _by_symbol: dict[Symbol, int] | None = field(default=None, init=False, repr=False)

    def by_symbol(self) -> dict[Symbol, int]:
        """Each symbol's occurrences (a bit set), symbols in order; made once."""
        found = self._by_symbol
        if found is None:
            masks: dict[Symbol, int] = {}
            for o, symbol in enumerate(self.symbols):
                masks[symbol] = masks.get(symbol, 0) | (1 << o)
            found = self._by_symbol = {symbol: masks[symbol] for symbol in sorted(masks)}
        return found

    def symbols_in(self, occurrences: int) -> list[Symbol]:
        """The symbols of a set of occurrences, in order: from its bits when they are fewer
        than the symbols, else by testing each symbol's occurrences."""
        by_symbol = self.by_symbol()
        if occurrences.bit_count() < len(by_symbol):
            return sorted({self.symbols[o] for o in _bits(occurrences)})
        return [symbol for symbol, mask in by_symbol.items() if mask & occurrences]


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

    def rest(self, p: int, d: int, context: Context) -> tuple[int, list[tuple[int, Context]], bool]:
        """Production p from position d in `context`, up to its first symbol that cannot be
        empty: the bit of the occurrence met there (0 if none), the (callee, context) keys
        whose FIRST it reads on the way, and whether the whole rest can be empty."""
        rhs = self.prods[p][1]
        callees: list[tuple[int, Context]] = []
        for position in range(d, len(rhs)):
            kind, value = rhs[position]
            if kind != _NT:
                return 1 << self.ids[(p, position, context)], callees, False
            callees.append((value, self.callee_context(p, position, context)))
            if value not in self.nullable:
                return 0, callees, False
        return 0, callees, True

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
        """The occurrences with FIRST and FOLLOW, or None when over the size budget.

        FIRST and AFTER are least fixpoints, found by passes over every (nonterminal,
        context) key in a fixed order, each pass reading the values the pass has reached so
        far, until a pass changes nothing. Each key's value is a constant (the occurrences it
        reaches directly) or'd with the values of the keys it reads, listed once before the
        passes: a pass is then a few integer operations a key. Each pass costs the budget one
        unit per key plus one per production symbol it spans: the first while its lists are
        made, the others a pass at a time (their units do not depend on the values)."""
        if not self._enumerate_contexts():
            return None
        keys = [(nt, c) for nt, cs in self.contexts.items() for c in cs]
        index = {key: i for i, key in enumerate(keys)}
        prods, by_lhs = self.prods, self.by_lhs
        # FIRST(nt, c): what each production of nt starts with.
        constants: list[int] = []
        reads: list[list[int]] = []
        cost = len(keys)
        self.budget.spend(len(keys))
        for nt, context in keys:
            mask, read = 0, []
            for p in by_lhs[nt]:
                bit, callees, _ = self.rest(p, 0, context)
                mask |= bit
                read += [index[k] for k in callees if k in index]
                cost += 1 + len(prods[p][1])
                self.budget.spend(1 + len(prods[p][1]))
            constants.append(mask)
            reads.append(read)
        first = self._fixpoint(constants, reads, cost)
        # AFTER(nt, c): what follows a complete nt, FIRST now known.
        constants, reads, cost = [], [], len(keys)
        self.budget.spend(len(keys))
        for nt, context in keys:
            mask, read = 0, []
            for q, j, caller in self.returns(nt, context):
                bit, callees, rest_nullable = self.rest(q, j, caller)
                mask |= bit
                for k in callees:
                    if k in index:
                        mask |= first[index[k]]
                if rest_nullable and (prods[q][0], caller) in index:
                    read.append(index[(prods[q][0], caller)])
                cost += 1 + len(prods[q][1]) - j
                self.budget.spend(1 + len(prods[q][1]) - j)
            constants.append(mask)
            reads.append(read)
        after = self._fixpoint(constants, reads, cost)
        follow = [0] * len(self.symbols)
        for (p, d, context), o in self.ids.items():
            bit, callees, rest_nullable = self.rest(p, d + 1, context)
            for k in callees:
                if k in index:
                    bit |= first[index[k]]
            if rest_nullable:
                found = index.get((prods[p][0], context))
                if found is not None:
                    bit |= after[found]
            follow[o] = bit
            self.budget.spend(len(prods[p][1]) - d)
        start = index.get((self.root, (_ROOT_SITE,) if self.depth else ()))
        return _Occurrences(self.symbols, 0 if start is None else first[start], follow)

    def _fixpoint(self, constants: list[int], reads: list[list[int]], pass_cost: int) -> list[int]:
        """values[i] = constants[i] | values of reads[i], least, by passes in index order;
        the first pass was charged while its lists were made."""
        values = [0] * len(constants)
        changed = True
        first_pass = True
        while changed:
            changed = False
            if not first_pass:
                self.budget.spend(pass_cost)
            first_pass = False
            for i, read in enumerate(reads):
                mask = constants[i] | values[i]
                for k in read:
                    mask |= values[k]
                if mask != values[i]:
                    values[i] = mask
                    changed = True
        return values


class _Refiner:
    """Finds the lexemes that could over-extend and splits them (see the module docstring)."""

    def __init__(self, cfg: _Cfg, root: int) -> None:
        self.cfg = cfg
        self.pool = cfg.pool
        self.root = root
        # `can_extend`'s answers by (term, number of the FOLLOW characters, rival); the
        # characters by number, numbered by value (`follow_number`); whether two terms' first
        # characters meet.
        self._extend_cache: dict[tuple[int, int, int], bool] = {}
        self._follow_numbers: dict[tuple[int, ...], int] = {}
        self._chars_numbers: dict[Ranges, int] = {}
        self._follow_chars: list[Ranges] = []
        self._first_meets: dict[tuple[int, int], bool] = {}
        self._wide_first: dict[int, Ranges] = {}  # a term's first characters, widened
        self._share_cache: dict[tuple[int, int], bool] = {}
        # `sharing_masks`' answers over every round: the symbols asked about with each symbol,
        # and those that share a text with it.
        self._share_asked: dict[Symbol, set[Symbol]] = {}
        self._share_partners: dict[Symbol, set[Symbol]] = {}
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
        """Terms the core could not take as one pattern (too deep or too long). A list of
        literal words is never too long: the core reads any number of them as one lexeme
        (docs/lexer.md, "Large alternations"), where split into one lexeme a word, a list of
        10,000 words ran the refinement's pairwise checks past their budget. Nor is another
        small finite language (`_Pool.texts`): the one-character words of a list, which `alt`
        merges into a character set, or a list of words with a separator after them. A long
        list of words beside infinite alternatives is split into the list and the others
        (`_Cfg.word_group`) whatever its length."""
        return {x for kind, x in set(occ.symbols) if kind == _TERM and self.split_for_size(x)}

    def split_for_size(self, x: int) -> bool:
        """`too_large`'s test of one term."""
        pool = self.pool
        if pool.is_single_char(x):
            return False
        if pool.depth[x] > LEXEME_DEPTH_MAX and pool.words(x) is None:
            return True
        if pool.size[x] > LEXEME_SIZE_MAX and pool.words(x) is None and pool.texts(x, self.budget) is None:
            return True
        return self.cfg.word_group(x) is not None and pool.texts(x, self.budget) is None

    def conflicts(self, occ: _Occurrences) -> set[int]:
        """Terms L′ that some intended lexeme L, followed by a possible character, extends,
        for every pair (L, L′) that `together` says may be expected at one boundary."""
        pool = self.pool
        first = pool.first
        together = self.together(occ)
        budget = self.budget
        victims: set[int] = set()
        checked: set[tuple[int, int, int]] = set()  # (term, FOLLOW characters' number, rival)
        # Occurrences share their FOLLOW and `together` sets (a lexeme in many places): each
        # set's characters and lexemes are found once (c_like_functions: 835 occurrences, 109
        # FOLLOW sets, 125 `together` sets). A set's lexemes are read from each lexeme's
        # occurrences (a few dozen lexemes, where a set has up to hundreds of occurrences).
        terms = [(x, mask) for (kind, x), mask in occ.by_symbol().items() if kind == _TERM]
        rival_terms = [(x, mask) for x, mask in terms if not pool.is_single_char(x)]
        follow_of: dict[int, int] = {}
        rivals_of: dict[int, list[int]] = {}
        meets = self._first_meets
        extend_cache = self._extend_cache
        chars_of = self._follow_chars
        for o, (kind, x) in enumerate(occ.symbols):
            if kind != _TERM:
                continue
            after = occ.follow[o]
            number = follow_of.get(after)
            if number is None:
                number = follow_of[after] = self.follow_number(tuple([t for t, mask in terms if mask & after]))
            if number < 0:  # nothing can follow
                continue
            mask = together[o]
            budget.spend(mask.bit_count())
            rivals = rivals_of.get(mask)
            if rivals is None:
                rivals = rivals_of[mask] = [t for t, t_mask in rival_terms if t_mask & mask]
            for other in rivals:
                key = (x, number, other)
                if other in victims or key in checked:
                    continue
                checked.add(key)
                meet = meets.get((x, other))
                if meet is None:
                    meet = meets[(x, other)] = intersects(first[x], first[other])
                if not meet:
                    continue
                found = extend_cache.get(key)
                if found is None:
                    found = extend_cache[key] = _can_extend(pool, x, chars_of[number], other, budget)
                if found:
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
        # FOLLOW sets by number (all first, or when first needed past
        # `_EAGER_NUMBERING_MAX`), each set's bits listed once; `applied` holds f·count + g
        # for the pairs (f, g) of numbers whose consequence is applied already (numbered when
        # first needed; `applied_to` below otherwise).
        follow_number: dict[int, int] = {}
        follow_masks: list[int] = []
        follow_bits: list[list[int] | None] = []
        follow_of = [-1] * count
        applied: set[int] = set()

        def number(o: int) -> int:
            f = follow_number.get(occ.follow[o])
            if f is None:
                f = follow_number[occ.follow[o]] = len(follow_masks)
                follow_masks.append(occ.follow[o])
                follow_bits.append(None)
            follow_of[o] = f
            return f

        for x in _bits(occ.first_root):
            together[x] |= occ.first_root
        # Units: one per pop of the work list (charged in batches: the loop has no other
        # effect the budget must order), and per pair of FOLLOW sets applied, one per bit
        # visited times the width of the bit sets. An occurrence that shares a text with
        # nothing does nothing when popped: it is counted, not pushed (the other pops come
        # in the same order).
        # Up to `_EAGER_NUMBERING_MAX` occurrences every FOLLOW set is numbered first, with the
        # occurrences of each number: then a pop takes its fresh partners a FOLLOW set at a
        # time (the first partner of each set, lowest first, as one at a time does), and
        # `applied_to[f]` holds the occurrences whose set is applied with set f.
        eager = count <= _EAGER_NUMBERING_MAX
        occurrences_of: list[int] = []
        applied_to: list[int] = []
        if eager:
            for o in range(count):
                if follow_of[o] < 0:
                    number(o)
            occurrences_of = [0] * len(follow_masks)
            for o, f in enumerate(follow_of):
                occurrences_of[f] |= 1 << o
            applied_to = [0] * len(follow_masks)
        unit = 1 + count // 256
        work = [m for m in range(count) if sharing[m]]
        units = (count - len(work)) * unit
        budget = self.budget
        while work:
            m = work.pop()
            fresh = together[m] & ~done[m] & sharing[m]
            units += unit
            if fresh:
                done[m] |= fresh
                fm = follow_of[m]
                if fm < 0:
                    fm = number(m)
                if eager:
                    fresh &= ~applied_to[fm]
                while fresh:
                    low = fresh & -fresh
                    o = low.bit_length() - 1
                    f2 = follow_of[o]
                    # Both orders of a pair are applied in one step.
                    if eager:
                        fresh &= ~occurrences_of[f2]
                        applied_to[fm] |= occurrences_of[f2]
                        applied_to[f2] |= occurrences_of[fm]
                    else:
                        fresh ^= low
                        if f2 < 0:
                            f2 = number(o)
                        key = fm * count + f2
                        if key in applied:
                            continue
                        applied.add(key)
                        applied.add(f2 * count + fm)
                    for fa, fb in ((fm, f2), (f2, fm)) if fm != f2 else ((fm, fm),):
                        bits = follow_bits[fa]
                        if bits is None:
                            bits = follow_bits[fa] = list(_bits(follow_masks[fa]))
                        units += len(bits) * unit
                        b = follow_masks[fb]
                        for x in bits:
                            t = together[x]
                            if b | t != t:
                                together[x] = b | t
                                if sharing[x]:
                                    work.append(x)
                                else:
                                    units += unit
            if units > 4096:
                budget.spend(units)
                units = 0
        budget.spend(units)
        return together

    def sharing_masks(self, occ: _Occurrences) -> list[int]:
        """sharing[m]: the occurrences whose lexeme can match a text that m's lexeme matches."""
        by_symbol = occ.by_symbol()
        symbols = list(by_symbol)
        # Pairs are asked in the order of the full triangle, but a pair answered in an earlier
        # round (or attempt) is not asked again: its answer is among `partners` already.
        asked, partners = self._share_asked, self._share_partners
        for i, a in enumerate(symbols):
            self.budget.spend(len(symbols) - i)
            asked_a = asked.setdefault(a, set())
            for b in [b for b in symbols[i:] if b not in asked_a]:
                if self.share_text(a, b):  # (may run out of budget: then b stays unasked)
                    partners.setdefault(a, set()).add(b)
                    partners.setdefault(b, set()).add(a)
                asked_a.add(b)
                asked.setdefault(b, set()).add(a)
        shared: dict[Symbol, int] = {}
        for a in symbols:
            mask = 0
            for b in partners.get(a, ()):
                mask |= by_symbol.get(b, 0)
            shared[a] = mask
        return [shared[symbol] for symbol in occ.symbols]

    def follow_number(self, terms: tuple[int, ...]) -> int:
        """The number of the first characters of `terms` (-1 when there are none), widened to
        whole lead bytes: numbered by value over every round (the union made once per set of
        lexemes)."""
        number = self._follow_numbers.get(terms)
        if number is None:
            # Widening is per character, so the union of the terms' widened first characters
            # (each widened once) is the widened union.
            wide = self._wide_first
            for term in terms:
                if term not in wide:
                    first = self.pool.first[term]
                    wide[term] = _widen_to_lead_bytes(first) if first else ()
            chars = wide[terms[0]] if len(terms) == 1 else normalize([r for term in terms for r in wide[term]])
            if chars:
                number = self._chars_numbers.setdefault(chars, len(self._follow_chars))
                if number == len(self._follow_chars):
                    self._follow_chars.append(chars)
            else:
                number = -1
            self._follow_numbers[terms] = number
        return number

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
