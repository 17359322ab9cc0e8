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
# Units charged at once by loops that keep nothing outside their builder (`_OccurrenceBuilder`),
# checked after each step that charges: small enough that a grammar far over the budget stops
# soon (a step is O(production length); per key was too coarse: a nullable rule called 10,000
# times in one long production ran 5 s past its budget).
_BATCH_UNITS = 10_000


class _BatchedCharge:
    """Units charged to a budget in batches of more than `_BATCH_UNITS` (`add`, then `close`
    for the rest), with their total: what a FIRST or AFTER pass costs (`_OccurrenceBuilder`)."""

    __slots__ = ("budget", "pending", "total")

    def __init__(self, budget: _Budget, units: int = 0) -> None:
        self.budget = budget
        self.pending = units
        self.total = 0

    def add(self, units: int) -> None:
        self.pending += units
        if self.pending > _BATCH_UNITS:
            self.close()

    def close(self) -> int:
        """Charge what is pending; the total charged."""
        self.total += self.pending
        self.budget.spend(self.pending)
        self.pending = 0
        return self.total


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


class _Reachable:
    """The reachable productions of the lexeme grammar as one round sees them (split terms
    resolved), with where each nonterminal is called and which can be empty: made once per
    round, shared by its attempts at every context depth (the grammar changes only between
    rounds). `nullable_units` is what finding the nullable nonterminals costs the budget; each
    attempt is charged it, as when each attempt found them again."""

    def __init__(self, cfg: _Cfg, root: int) -> None:
        split_of = cfg.split_of
        # Breadth-first from root, as `_Cfg.reachable`: nonterminals in that order, each
        # one's productions in order.
        nts = [root]
        seen = {root}
        prods: list[tuple[int, tuple[Symbol, ...]]] = []
        for nt in nts:
            for production in cfg.productions[nt]:
                if split_of and any(kind == _TERM and value in split_of for kind, value in production):
                    production = tuple([
                        (_NT, split_of[value]) if kind == _TERM and value in split_of else (kind, value)
                        for kind, value in production
                    ])
                prods.append((nt, production))
                for kind, value in production:
                    if kind == _NT and value not in seen:
                        seen.add(value)
                        nts.append(value)
        self.nts = nts
        self.prods = prods
        self.by_lhs: dict[int, list[int]] = {nt: [] for nt in nts}
        self.sites: dict[int, list[Site]] = {nt: [] for nt in nts}
        self.sites[root].append(_ROOT_SITE)
        for index, (nt, rhs) in enumerate(prods):
            self.by_lhs[nt].append(index)
            for position, s in enumerate(rhs):
                if s[0] == _NT:
                    self.sites[s[1]].append((index, position))
        self.nullable, self.nullable_units = self._nullable()

    def _nullable(self) -> tuple[set[int], int]:
        """The nullable nonterminals, and the units: one per production plus one per
        symbol, and one per use of a nonterminal found nullable."""
        # A worklist, linear in the productions: a fixpoint of passes over every production
        # was quadratic when nullable rules chain (one more per pass), and uncharged.
        nullable: set[int] = set()
        pending = [0] * len(self.prods)  # symbols of each production not yet known nullable
        users: dict[int, list[int]] = {}
        work: list[int] = []
        units = 0
        for index, (nt, rhs) in enumerate(self.prods):
            units += 1 + len(rhs)
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
                units += 1
                pending[index] -= 1
                if pending[index] == 0:
                    work.append(self.prods[index][0])
        return nullable, units


class _OccurrenceBuilder:
    """Builds `_Occurrences` for one context depth: FIRST per (nonterminal, context) and
    AFTER per (nonterminal, context) by fixpoints (every pass only grows bit sets)."""

    def __init__(self, grammar: _Reachable, root: int, depth: int, budget: _Budget) -> None:
        self.budget = budget
        self.depth = depth
        self.root = root
        self.prods = grammar.prods
        self.by_lhs = grammar.by_lhs
        self.sites = grammar.sites
        self.nullable = grammar.nullable
        # The nullable nonterminals' units (nothing here outlives the builder, so the units of
        # a computation that could have run out part way are charged in one amount).
        budget.spend(grammar.nullable_units)
        self.contexts: dict[int, list[Context]] = {}
        self.extensions: dict[tuple[int, Context], list[Context]] = {}
        self.symbols: list[Symbol] = []
        self.ids: dict[tuple[int, int, Context], int] = {}

    def _enumerate_contexts(self) -> bool:
        """Call strings of length `depth` (shorter when they reach the start) per nonterminal;
        False past `TAGGED_OCCURRENCE_COUNT_MAX` tagged occurrences. Both counts are found
        before any list is built (a grammar of 20,000 rules built 50,000 call strings to
        find them too many, at two depths)."""
        prods, sites = self.prods, self.sites
        callers = {
            nt: [-1 if site == _ROOT_SITE else prods[site[0]][0] for site in nt_sites] for nt, nt_sites in sites.items()
        }
        counts = {nt: 1 for nt in self.by_lhs}
        for _ in range(self.depth):
            counts = {nt: sum([1 if c < 0 else counts[c] for c in cs]) for nt, cs in callers.items()}
            if sum(counts.values()) > TAGGED_OCCURRENCE_COUNT_MAX:
                return False
        if self.depth == 0:
            self.contexts = {nt: [()] for nt in self.by_lhs}
        else:
            level: dict[int, list[Context]] = {nt: [()] for nt in self.by_lhs}
            for _ in range(self.depth):
                level = {
                    nt: [
                        (site,) + (() if site == _ROOT_SITE else rest)
                        for site in nt_sites
                        for rest in ([()] if site == _ROOT_SITE else level[prods[site[0]][0]])
                    ]
                    for nt, nt_sites in sites.items()
                }
            self.contexts = {nt: sorted(set(cs)) if len(cs) > 1 else cs for nt, cs in level.items()}
            for nt, cs in self.contexts.items():
                for c in cs:
                    self.extensions.setdefault((nt, c[: self.depth - 1]), []).append(c)
        contexts = self.contexts
        occurrence_count = sum([len(contexts[nt]) for nt, rhs in prods for kind, _ in rhs if kind != _NT])
        if occurrence_count > TAGGED_OCCURRENCE_COUNT_MAX:
            return False
        ids, symbols = self.ids, self.symbols
        for index, (nt, rhs) in enumerate(prods):
            for position, s in enumerate(rhs):
                if s[0] != _NT:
                    for c in contexts[nt]:
                        ids[(index, position, c)] = len(symbols)
                        symbols.append(s)
        return True

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
        made, the others a pass at a time (their units do not depend on the values). Nothing
        here outlives the builder, so units are charged in batches (`_BATCH_UNITS`): an
        attempt that runs out spends all of its budget wherever it stops."""
        if not self._enumerate_contexts():
            return None
        keys = [(nt, c) for nt, cs in self.contexts.items() for c in cs]
        index = {key: i for i, key in enumerate(keys)}
        prods, by_lhs, ids, nullable, depth = self.prods, self.by_lhs, self.ids, self.nullable, self.depth
        budget = self.budget

        def rest(p: int, d: int, context: Context) -> tuple[int, list[int], bool]:
            """Production p from position d in `context`, up to its first symbol that cannot
            be empty: the bit of the occurrence met there (0 if none), the keys of the
            callees whose FIRST it reads on the way, and whether the whole rest can be empty."""
            rhs = prods[p][1]
            read: list[int] = []
            for position in range(d, len(rhs)):
                kind, value = rhs[position]
                if kind != _NT:
                    return 1 << ids[(p, position, context)], read, False
                k = index.get((value, (((p, position),) + context)[:depth] if depth else ()))
                if k is not None:
                    read.append(k)
                if value not in nullable:
                    return 0, read, False
            return 0, read, True

        # FIRST(nt, c): what each production of nt starts with.
        constants: list[int] = []
        reads: list[list[int]] = []
        charge = _BatchedCharge(budget, len(keys))  # the first pass, while its lists are made
        for nt, context in keys:
            mask, read = 0, []
            for p in by_lhs[nt]:
                bit, callees, _ = rest(p, 0, context)
                mask |= bit
                read += callees
                charge.add(1 + len(prods[p][1]))
            constants.append(mask)
            reads.append(read)
        first = self._fixpoint(constants, reads, charge.close())
        # AFTER(nt, c): what follows a complete nt, FIRST now known.
        constants, reads = [], []
        charge = _BatchedCharge(budget, len(keys))
        for nt, context in keys:
            mask, read = 0, []
            for q, j, caller in self.returns(nt, context):
                bit, callees, rest_nullable = rest(q, j, caller)
                mask |= bit
                for k in callees:
                    mask |= first[k]
                if rest_nullable:
                    k = index.get((prods[q][0], caller))
                    if k is not None:
                        read.append(k)
                charge.add(1 + len(prods[q][1]) - j)
            constants.append(mask)
            reads.append(read)
        after = self._fixpoint(constants, reads, charge.close())
        follow = [0] * len(self.symbols)
        charge = _BatchedCharge(budget)
        for (p, d, context), o in ids.items():
            bit, callees, rest_nullable = rest(p, d + 1, context)
            for k in callees:
                bit |= first[k]
            if rest_nullable:
                found = index.get((prods[p][0], context))
                if found is not None:
                    bit |= after[found]
            follow[o] = bit
            charge.add(len(prods[p][1]) - d)
        charge.close()
        start = index.get((self.root, (_ROOT_SITE,) if self.depth else ()))
        return _Occurrences(self.symbols, 0 if start is None else first[start], follow)

    def _fixpoint(self, constants: list[int], reads: list[list[int]], pass_cost: int) -> list[int]:
        """values[i] = constants[i] | values of reads[i], least, by passes in index order;
        the first pass was charged while its lists were made. A key that reads nothing holds
        its constant from the first pass on: later passes (each charged `pass_cost`, as a
        pass over every key) visit only the others, which changes no value and no pass count."""
        values = [0] * len(constants)
        changed = False
        readers: list[tuple[int, list[int]]] = []
        for i, read in enumerate(reads):
            mask = constants[i]
            if read:
                readers.append((i, read))
                for k in read:
                    mask |= values[k]
            if mask:
                values[i] = mask
                changed = True
        while changed:
            changed = False
            self.budget.spend(pass_cost)
            for i, read in readers:
                old = values[i]
                mask = old
                for k in read:
                    mask |= values[k]
                if mask != old:
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
            grammar = _Reachable(self.cfg, self.root)
            while True:
                last = depth_index == len(CONTEXT_DEPTHS) - 1
                # A deeper (more precise) context may use a quarter of what is left; the last
                # depth may use all of it.
                self.budget = _Budget(max(total.left, 0) if last else max(total.left, 0) // 4)
                self.pool.budget = self.budget
                try:
                    occ = _OccurrenceBuilder(grammar, self.root, CONTEXT_DEPTHS[depth_index], self.budget).build()
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
