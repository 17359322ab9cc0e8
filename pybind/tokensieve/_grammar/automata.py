"""Automata over characters, in Python, for the front-ends (the core has its own, `regex.zig`).

Two tools, for two questions the front-ends ask before the core sees a grammar:

- **DFAs given as labelled edges** (JSON Schema): Moore's partition refinement (`_minimize`)
  and state elimination to a regex (`_dfa_regex`), for automata built digit by digit such as
  `multipleOf`'s divisibility automaton.
- **Hash-consed regular expressions with Brzozowski derivatives** (GBNF): `_Pool` keeps terms
  in a normal form in which each term has finitely many derivatives, and `_pair_search`
  explores pairs of derivatives to answer "can this lexeme run into that one?" (`_can_extend`)
  and "do two lexemes share a text?" (`_share_text`) within a state budget (`_Budget`).
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable

from .charset import (
    CODE_POINT_MAX, Ranges, class_regex, intersection, intersects, normalize, union,
)

AUTOMATON_STATE_COUNT_MAX = 4_000  # per conflict check; past it the pair counts as conflicting
# A finite language is answered from its texts (`_Pool.texts`) up to this many texts, this many
# characters in all, and character sets of this many characters.
_FINITE_TEXTS_MAX = 20_000
_FINITE_CHARS_MAX = 400_000
_FINITE_SET_MAX = 64
# ... and texts of at most this many characters (a word list's; the derivative search is cheap
# on a long literal, and its texts would not be).
_FINITE_TEXT_LENGTH_MAX = 1_000
_UNLIMITED = 1 << 62


def _contains(ranges: Ranges, c: int) -> bool:
    i = bisect.bisect_right(ranges, (c, CODE_POINT_MAX + 1)) - 1
    return i >= 0 and ranges[i][0] <= c <= ranges[i][1]


def _group(rx: str) -> str:
    return rx if len(rx) == 1 else f"(?:{rx})"


def _minimize(edges: dict[tuple[Any, Any], set[str]], start: Any, accepting: set[Any]) -> tuple[dict[tuple[Any, Any], set[str]], Any, set[Any]]:
    """Moore's partition refinement of a partial DFA given as labelled edges; states become
    block numbers. (`x mod 10` needs 2 states, not 10, and state elimination is exponential
    in the states it is given.)"""
    delta: dict[Any, dict[str, Any]] = {}
    for (a, b), chars in edges.items():
        for ch in chars:
            delta.setdefault(a, {})[ch] = b
        delta.setdefault(b, {})
    block = {q: int(q in accepting) for q in delta}
    # Each state's moves in character order, once: a round then reads blocks only.
    moves = {q: sorted(out.items()) for q, out in delta.items()}
    labels = {q: tuple(ch for ch, _ in m) for q, m in moves.items()}
    targets = {q: [t for _, t in m] for q, m in moves.items()}
    while True:
        signatures = {q: (block[q], labels[q], tuple([block[t] for t in targets[q]])) for q in delta}
        numbering: dict[Any, int] = {}
        refined = {q: numbering.setdefault(sig, len(numbering)) for q, sig in signatures.items()}
        if len(numbering) == len(set(block.values())):
            break
        block = refined
    out: dict[tuple[Any, Any], set[str]] = {}
    for q, moves in delta.items():
        for ch, t in moves.items():
            out.setdefault((block[q], block[t]), set()).add(ch)
    return out, block[start], {block[q] for q in accepting}


def _dfa_regex(edges: dict[tuple[Any, Any], set[str]], start: Any, accepting: set[Any], size_max: int) -> str | None:
    """A regex for a DFA's language by state elimination (None past `size_max` characters)."""
    labels: dict[tuple[Any, Any], str] = {}
    for (a, b), chars in edges.items():
        codes = sorted(ord(ch) for ch in chars)
        ranges: list[tuple[int, int]] = []
        for code in codes:
            if ranges and code == ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
        labels[(a, b)] = class_regex(tuple(ranges))
    begin, end = ("begin",), ("end",)
    labels[(begin, start)] = ""
    for state in accepting:
        labels[(state, end)] = ""
    states = {a for a, _ in labels} | {b for _, b in labels}
    states -= {begin, end}

    def union(x: str | None, y: str) -> str:
        if x is None or x == y:
            return y
        return f"(?:{x}|{y})"

    while states:
        # The state to eliminate: fewest (in-edges x out-edges), loops not counted.
        ins_count = dict.fromkeys(states, 0)
        outs_count = dict.fromkeys(states, 0)
        for a, b in labels:
            if a != b:
                if b in ins_count:
                    ins_count[b] += 1
                if a in outs_count:
                    outs_count[a] += 1
        q = min(states, key=lambda s: ins_count[s] * outs_count[s])
        states.discard(q)
        loop = labels.pop((q, q), None)
        star = "" if loop is None else _group(loop) + "*"
        ins = [(a, rx) for (a, b), rx in labels.items() if b == q]
        outs = [(b, rx) for (a, b), rx in labels.items() if a == q]
        for a, _ in ins:
            del labels[(a, q)]
        for b, _ in outs:
            del labels[(q, b)]
        for a, rin in ins:
            for b, rout in outs:
                # No label is a bare alternation (`union` groups what it joins): pieces concatenate as they are.
                piece = rin + star + rout
                labels[(a, b)] = union(labels.get((a, b)), piece)
                if len(labels[(a, b)]) > size_max:
                    return None
        if sum(len(rx) for rx in labels.values()) > 8 * size_max:
            return None
    return labels.get((begin, end))


class _OverBudget(Exception):
    """The refinement's work budget (`ANALYSIS_WORK_MAX`) ran out."""


class _Budget:
    """Work units left for one attempt of the lexeme refinement."""

    def __init__(self, units: int) -> None:
        self.units = units
        self.left = units

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise _OverBudget

    @property
    def spent(self) -> int:
        return self.units - max(self.left, 0)


# ===============================================================================================
# Regular expressions: hash-consed terms, derivatives, emission
# ===============================================================================================

_CHARS, _SEQ, _ALT, _REP = 0, 1, 2, 3


class _Pool:
    """Hash-consed regular expressions in a normal form (one id per distinct term).

    `seq` is flattened (unless asked to keep the grammar's structure) and drops ε; `alt` is
    flattened, sorted, deduplicated, merges its character sets and drops ∅; `rep` of a nullable
    item repeats the item without ε. With these laws the Brzozowski derivatives of a term are
    finitely many, and a term denotes ∅ exactly when it *is* ∅. Nullability, first characters,
    depth and pattern length are computed once per term, bottom-up, so no query recurses over
    a deep term.

    Per term: `kind`; `ranges` (for a character set); `items` (children of a sequence or an
    alternation; the repeated item of a repetition); `counts` (min, max of a repetition).
    """

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.ranges: list[Ranges] = []
        self.items: list[tuple[int, ...]] = []
        self.counts: list[tuple[int, int | None]] = []
        self.nullable: list[bool] = []
        self.first: list[Ranges] = []
        self.depth: list[int] = []
        self.size: list[int] = []
        self._index: dict[tuple[int, Ranges, tuple[int, ...], tuple[int, int | None]], int] = {}
        self._derivatives: dict[tuple[int, int], int] = {}
        self._first_classes: dict[int, frozenset[Ranges]] = {}
        self._points: dict[int, frozenset[int]] = {}
        self._patterns: dict[int, str] = {}
        self._words: dict[int, list[str] | None] = {}
        self._char_terms: dict[int, int] = {}  # `literal`'s one-character terms by code point
        self._literal_texts: dict[int, str] = {}  # the texts of the terms `literal` made
        self._texts: dict[int, frozenset[str] | None] = {}  # `texts`
        self._nexts: dict[int, dict[str, set[int]] | None] = {}  # `next_characters`
        self._tables: dict[int, dict[str, set[int]]] = {}  # `_prefix_table`
        # `_pair_search`: the pairs of derivatives a pair of terms steps to, one per
        # character of `step_characters`, for pairs explored to the end.
        self._pair_moves: dict[tuple[int, int], list[tuple[int, int]]] = {}
        # Work budget of the lexeme refinement while it runs (`_Refiner` sets it): every term
        # built or looked up costs a unit plus one per child, every derivative a unit.
        self.budget = _Budget(_UNLIMITED)
        self.empty = self._make(_ALT, items=())
        self.eps = self._make(_SEQ, items=())

    def _make(
        self,
        kind: int,
        *,
        ranges: Ranges = (),
        items: tuple[int, ...] = (),
        counts: tuple[int, int | None] = (1, 1),
    ) -> int:
        self.budget.spend(1 + len(items))
        key = (kind, ranges, items, counts)
        found = self._index.get(key)
        if found is not None:
            return found
        depth = 1 + max((self.depth[i] for i in items), default=0)
        if kind == _CHARS:
            return self._add(key, depth, False, ranges, len(class_regex(ranges)))
        if kind == _REP:
            return self._add(key, depth, counts[0] == 0, self.first[items[0]], self.size[items[0]] + 4 + len(_quantifier(*counts)))
        if kind == _SEQ:
            first: Ranges = ()
            for i in items:
                first = union(first, self.first[i])
                if not self.nullable[i]:
                    break
            # an alternation inside a sequence gets a group
            size = sum(self.size[i] + 4 * (self.kind[i] == _ALT) for i in items)
            return self._add(key, depth, all(self.nullable[i] for i in items), first, size)
        # separators, and a possible (?:…)? around the whole
        size = sum(self.size[i] for i in items) + len(items) + 5
        return self._add(key, depth, any(self.nullable[i] for i in items), normalize(r for i in items for r in self.first[i]), size)

    def _add(self, key: tuple[int, Ranges, tuple[int, ...], tuple[int, int | None]], depth: int, nullable: bool,
             first: Ranges, size: int) -> int:
        """A new term: `key` as `_make` builds it, and what is computed once per term."""
        ident = len(self.kind)
        self._index[key] = ident
        kind, ranges, items, counts = key
        self.kind.append(kind)
        self.ranges.append(ranges)
        self.items.append(items)
        self.counts.append(counts)
        self.depth.append(depth)
        self.nullable.append(nullable)
        self.first.append(first)
        self.size.append(size)
        return ident

    # ---- smart constructors --------------------------------------------------------------

    def chars(self, ranges: Ranges) -> int:
        return self._make(_CHARS, ranges=ranges) if ranges else self.empty

    def literal(self, codes: Iterable[int]) -> int:
        """The sequence of one-character sets spelling `codes` (two or more): what `seq` of
        their `chars` makes (a word list's 5,000 words cost what their walks cost, not three
        times that), each character's term found in a table, and the text kept for
        `fixed_text`."""
        codes = tuple(codes)
        terms = self._char_terms
        items = tuple(map(terms.get, codes))
        if None in items:  # (no character's term is None: ids 0 and 1 are ∅ and ε)
            for code in codes:
                if code not in terms:
                    terms[code] = self.chars(((code, code),))
            items = tuple(map(terms.__getitem__, codes))
        key = (_SEQ, (), items, (1, 1))
        self.budget.spend(1 + len(items))
        found = self._index.get(key)
        if found is None:
            # A sequence of single characters: depth 2, not nullable, first its first's.
            size = self.size
            found = self._add(key, 2, False, self.first[items[0]], sum([size[i] for i in items]))
            self._literal_texts[found] = "".join(map(chr, codes))
        return found

    def seq(self, items: Iterable[int], *, flatten: bool = True) -> int:
        """Concatenation. With `flatten=False` child sequences stay children (ε still drops):
        the grammar's own structure (a literal, an inlined rule) is kept for splitting."""
        flat: list[int] = []
        for i in items:
            if i == self.empty:
                return self.empty
            if self.kind[i] == _SEQ and (flatten or i == self.eps):
                flat.extend(self.items[i])
            else:
                flat.append(i)
        return flat[0] if len(flat) == 1 else self._make(_SEQ, items=tuple(flat))

    def alt(self, items: Iterable[int]) -> int:
        members: set[int] = set()
        ranges: Ranges = ()
        for i in items:
            for j in self.items[i] if self.kind[i] == _ALT else (i,):
                if self.kind[j] == _CHARS:
                    ranges = union(ranges, self.ranges[j])
                else:
                    members.add(j)
        if ranges:
            members.add(self.chars(ranges))
        ordered = tuple(sorted(members))
        return ordered[0] if len(ordered) == 1 else self._make(_ALT, items=ordered)

    def rep(self, item: int, min_count: int, max_count: int | None) -> int:
        if max_count == 0 or item == self.eps:
            return self.eps
        if item == self.empty:
            return self.eps if min_count == 0 else self.empty
        if self.nullable[item]:
            item, min_count = self.nonempty(item), 0
            if item == self.empty:
                return self.eps
        if min_count == 1 and max_count == 1:
            return item
        if self.kind[item] == _REP and max_count is None and min_count <= 1:
            inner_min, inner_max = self.counts[item]
            if inner_max is None and inner_min <= 1:
                return self._make(_REP, items=self.items[item], counts=(min_count * inner_min, None))
        return self._make(_REP, items=(item,), counts=(min_count, max_count))

    def nonempty(self, x: int) -> int:
        """The term for L(x) without the empty text."""
        if not self.nullable[x]:
            return x
        kind, items = self.kind[x], self.items[x]
        if kind == _ALT:
            return self.alt(self.nonempty(i) for i in items)
        if kind == _REP:
            return self.rep(items[0], 1, self.counts[x][1])
        # Every item is nullable: a non-empty match has a first non-empty item k.
        return self.alt(
            self.seq((self.nonempty(items[k]),) + items[k + 1 :], flatten=False) for k in range(len(items))
        )

    # ---- derivatives ----------------------------------------------------------------------

    def derivative(self, x: int, c: int) -> int:
        """The term for { s : c·s ∈ L(x) } (recursion bounded by the term's depth)."""
        self.budget.spend()
        key = (x, c)
        found = self._derivatives.get(key)
        if found is not None:
            return found
        kind, items = self.kind[x], self.items[x]
        if kind == _CHARS:
            result = self.eps if _contains(self.ranges[x], c) else self.empty
        elif kind == _ALT:
            result = self.alt(self.derivative(i, c) for i in items)
        elif kind == _REP:
            min_count, max_count = self.counts[x]
            rest = self.rep(items[0], max(min_count - 1, 0), None if max_count is None else max_count - 1)
            result = self.seq((self.derivative(items[0], c), rest))
        else:
            parts = []
            for k, i in enumerate(items):
                parts.append(self.seq((self.derivative(i, c),) + items[k + 1 :]))
                if not self.nullable[i]:
                    break
            result = self.alt(parts)
        self._derivatives[key] = result
        return result

    def first_classes(self, x: int) -> frozenset[Ranges]:
        """The character sets in first position of x: a derivative depends only on them."""
        found = self._first_classes.get(x)
        if found is not None:
            return found
        kind = self.kind[x]
        if kind == _CHARS:
            result = frozenset((self.ranges[x],))
        elif kind == _REP:
            result = self.first_classes(self.items[x][0])
        else:
            acc: set[Ranges] = set()
            for i in self.items[x]:
                acc |= self.first_classes(i)
                if kind == _SEQ and not self.nullable[i]:
                    break
            result = frozenset(acc)
        self._first_classes[x] = result
        return result

    def step_characters(self, a: int, b: int) -> list[int]:
        """One character per class of characters that both a and b can start with and that
        every first-position set of a and b treats alike."""
        common = self.first[a] if a == b else intersection(self.first[a], self.first[b])
        if not common:
            return []
        if len(common) == 1 and common[0][0] == common[0][1]:
            return [common[0][0]]
        points = self._first_points(a).union(self._first_points(b), [lo for lo, _ in common])
        # The points inside `common`: both sorted, walked together.
        out: list[int] = []
        i, n = 0, len(common)
        for point in sorted(points):
            while common[i][1] < point:
                i += 1
                if i == n:
                    return out
            if point >= common[i][0]:
                out.append(point)
        return out

    def _first_points(self, x: int) -> frozenset[int]:
        """Where membership in some first-position set of x changes."""
        found = self._points.get(x)
        if found is None:
            found = self._points[x] = frozenset(
                point for ranges in self.first_classes(x) for lo, hi in ranges for point in (lo, hi + 1)
            )
        return found

    # ---- emission ---------------------------------------------------------------------------

    def is_single_char(self, x: int) -> bool:
        return self.kind[x] == _CHARS

    def fixed_text(self, x: int) -> str | None:
        """The one text x matches, if it is a plain literal."""
        text = self._literal_texts.get(x)
        if text is not None:
            return text
        out = []
        stack = [x]
        while stack:
            i = stack.pop()
            if self.kind[i] == _SEQ:
                stack.extend(reversed(self.items[i]))
                continue
            ranges = self.ranges[i]
            if self.kind[i] != _CHARS or len(ranges) != 1 or ranges[0][0] != ranges[0][1]:
                return None
            out.append(chr(ranges[0][0]))
        return "".join(out) if out else None

    def words(self, x: int) -> list[str] | None:
        """The texts of x when it is an alternation of plain literals (a list of words)."""
        if x not in self._words:
            texts = [self.fixed_text(item) for item in self.items[x]] if self.kind[x] == _ALT else [None]
            self._words[x] = None if None in texts else texts  # type: ignore[assignment]
        return self._words[x]

    def texts(self, x: int, budget: _Budget) -> frozenset[str] | None:
        """The texts of x when its language is finite and small (at most `_FINITE_TEXTS_MAX`
        texts of `_FINITE_CHARS_MAX` characters in all, each at most `_FINITE_TEXT_LENGTH_MAX`,
        character sets of at most `_FINITE_SET_MAX` characters); else None. Built bottom-up once per term (recursion
        bounded by the term's depth), each text costing `budget` a unit."""
        if x in self._texts:
            return self._texts[x]
        result: frozenset[str] | None = None
        text = self._literal_texts.get(x)
        kind, items = self.kind[x], self.items[x]
        if text is not None:
            result = frozenset((text,))
        elif kind == _CHARS:
            ranges = self.ranges[x]
            if sum(hi - lo + 1 for lo, hi in ranges) <= _FINITE_SET_MAX:
                result = frozenset(chr(c) for lo, hi in ranges for c in range(lo, hi + 1))
        elif kind == _ALT:
            parts = [self.texts(i, budget) for i in items]
            if None not in parts:
                result = frozenset().union(*parts)  # type: ignore[arg-type]
        elif kind == _SEQ:
            # (the items' texts made lazily: a give-up stops them, as it did)
            result = _sequence_texts((self.texts(i, budget) for i in items), budget)
        else:
            min_count, max_count = self.counts[x]
            part = self.texts(items[0], budget)
            if (
                part is not None
                and max_count is not None
                and max_count * max(map(len, part)) <= _FINITE_TEXT_LENGTH_MAX
                and not _powers_too_many(part, min_count, max_count, budget)
            ):
                power: frozenset[str] | None = frozenset(("",))
                found: set[str] = set()
                chars = 0  # of the texts added to `found` (with repeats: a bound)
                for count in range(max_count + 1):
                    assert power is not None
                    if count >= min_count:
                        found |= power
                        chars += sum(map(len, power))
                        if len(found) > _FINITE_TEXTS_MAX or chars > _FINITE_CHARS_MAX:
                            break
                    if count == max_count:
                        result = frozenset(found)
                    else:
                        power = _product(power, part, budget)
                        if power is None:
                            break
        if result is not None and (len(result) > _FINITE_TEXTS_MAX or sum(map(len, result)) > _FINITE_CHARS_MAX):
            result = None
        budget.spend(1 + (len(result) if result is not None else 0))
        self._texts[x] = result
        return result

    def next_characters(self, x: int, budget: _Budget) -> dict[str, set[int]] | None:
        """For a term with a finite language (`texts`): each proper prefix of its texts and
        the characters that follow it in some text; else None. Charged a unit per text and
        per character of the texts, once per term."""
        if x in self._nexts:
            return self._nexts[x]
        texts = self.texts(x, budget)
        nexts: dict[str, set[int]] | None = None
        if texts is not None:
            budget.spend(len(texts) + sum(map(len, texts)))
            nexts = self._prefix_table(x, texts)
        self._nexts[x] = nexts
        return nexts

    def _prefix_table(self, x: int, texts: frozenset[str]) -> dict[str, set[int]]:
        """`next_characters` of x, whose texts are `texts` (uncharged; made once per term; not
        changed once made, so tables share their sets).

        A sequence of two items whose first item's texts are prefix-free (a keyword, a list of
        keywords) has texts a·y split one way only: its proper prefixes are those of the
        words a, with their next characters, and a·q for q a proper prefix of a text y, with
        q's. So `[` or `(null|false|true)` before bounded whitespace reuses the whitespace's
        table (json_arr.gbnf: 1,539 texts and 513 for each of five punctuation marks, which
        took 0.2-0.6 ms each a text at a time)."""
        table = self._tables.get(x)
        if table is not None:
            return table
        items = self.items[x]
        heads = tails = None
        if self.kind[x] == _SEQ and len(items) == 2:
            heads, tails = self._texts.get(items[0]), self._texts.get(items[1])
        if heads is not None and tails is not None and _prefix_free(heads):
            table = dict(self._prefix_table(items[0], heads))
            tail_table = self._prefix_table(items[1], tails)
            for head in heads:
                for prefix, chars in tail_table.items():
                    table[head + prefix] = chars
        else:
            # A text's prefixes are entered longest first until one is known: an earlier text
            # entered that one, and every shorter one with the character after it (a set of
            # 1,500 texts with long common prefixes, as bounded whitespace `[ \t]{0,8}` after
            # a keyword makes, took 2.5 ms a character at a time, 0.5 ms so).
            table = {}
            for text in texts:
                for k in range(len(text) - 1, -1, -1):
                    prefix = text[:k]
                    chars = table.get(prefix)
                    if chars is not None:
                        chars.add(ord(text[k]))
                        break
                    table[prefix] = {ord(text[k])}
        self._tables[x] = table
        return table

    def pattern(self, x: int) -> str:
        """x in the regex syntax of docs/lexer.md (recursion bounded by the term's depth)."""
        found = self._patterns.get(x)
        if found is not None:
            return found
        kind, items = self.kind[x], self.items[x]
        if kind == _CHARS:
            result = class_regex(self.ranges[x])
        elif kind == _SEQ:
            result = "".join(
                f"(?:{self.pattern(i)})" if self._needs_group(i) else self.pattern(i) for i in items
            )
        elif kind == _ALT:
            members = [i for i in items if i != self.eps]
            body = "|".join(self.pattern(i) for i in members)
            result = f"(?:{body})?" if len(members) < len(items) else body
        else:
            item = items[0]
            atom = self.pattern(item) if self.kind[item] == _CHARS else f"(?:{self.pattern(item)})"
            result = atom + _quantifier(*self.counts[x])
        self._patterns[x] = result
        return result

    def _needs_group(self, x: int) -> bool:
        """An alternation inside a sequence needs a group, unless it is already `(?:…)?`."""
        return self.kind[x] == _ALT and self.eps not in self.items[x]


def _product(left: frozenset[str], right: frozenset[str], budget: _Budget) -> frozenset[str] | None:
    """Every text of `left` followed by every text of `right`, or None past `_FINITE_TEXTS_MAX`
    texts or `_FINITE_CHARS_MAX` characters (both counted before any is made: a literal
    repeated {3,9999} times would otherwise build texts of 40,000 characters, 9,999 of them)."""
    count = len(left) * len(right)
    chars = len(right) * sum(map(len, left)) + len(left) * sum(map(len, right))
    if count > _FINITE_TEXTS_MAX or chars > _FINITE_CHARS_MAX:
        return None
    if max(map(len, left)) + max(map(len, right)) > _FINITE_TEXT_LENGTH_MAX:
        return None
    budget.spend(1 + count + chars // 64)
    return frozenset([a + b for a in left for b in right])


def _uniform_length(texts: frozenset[str]) -> int | None:
    """The one length of all of `texts`, or None (none, or lengths that differ). Texts of one
    length concatenated with texts of one length are all distinct: their number and size are
    known without building them."""
    for text in texts:
        length = len(text)
        return length if all(len(other) == length for other in texts) else None
    return None


def _sequence_texts(parts: Iterable[frozenset[str] | None], budget: _Budget) -> frozenset[str] | None:
    """The texts of a sequence from its items' texts (`parts`, made one at a time in order),
    or None: the product of the parts step by step, each step charged as `_product` charges it
    (after the step's part is made). While every part has texts of one length the steps are
    counted, not built, so a sequence that gives up builds nothing (`"u" hex hex hex hex`
    built 10,648 texts to find the fifth step too large); the counted ones are built at the
    end, or when a part of mixed lengths comes."""
    counted: list[frozenset[str]] = []  # parts of one length each, not multiplied out yet
    count, length = 1, 0  # texts of the counted product, and their one length
    result: frozenset[str] | None = None  # the product once built (then nothing is counted)
    for part in parts:
        if part is None:
            return None
        part_length = _uniform_length(part) if result is None else None
        if part_length is not None:
            size = count * len(part)
            chars = len(part) * count * length + count * len(part) * part_length
            if size > _FINITE_TEXTS_MAX or chars > _FINITE_CHARS_MAX:
                return None
            if length + part_length > _FINITE_TEXT_LENGTH_MAX:
                return None
            budget.spend(1 + size + chars // 64)
            count, length = size, length + part_length
            counted.append(part)
            continue
        if result is None:
            result = _multiply(counted)
        result = _product(result, part, budget)
        if result is None:
            return None
    return _multiply(counted) if result is None else result


def _prefix_free(texts: frozenset[str]) -> bool:
    """No text of `texts` is a proper prefix of another (sorted, a prefix comes right before
    a text it starts)."""
    ordered = sorted(texts)
    return not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))


def _multiply(parts: list[frozenset[str]]) -> frozenset[str]:
    """Every concatenation of one text of each part (charged by the caller)."""
    result = frozenset(("",))
    for part in parts:
        result = frozenset([a + b for a in result for b in part])
    return result


def _powers_too_many(part: frozenset[str], min_count: int, max_count: int, budget: _Budget) -> bool:
    """Whether `_Pool.texts` of `part{min_count,max_count}` gives up (too many texts or
    characters), found by counting when the texts of `part` all have one length ≥ 1: then
    the k-th power has len(part)^k distinct texts of k times that length, and powers of
    different counts share no text. `budget` is charged what building the powers up to where
    `texts` gives up charges (the same amounts in the same order); `texts` then builds none
    of them (`[0-9]{0,15}` in a number built 11,111 texts to find it has too many). False
    (nothing charged) when the lengths differ or the powers fit: `texts` builds them."""
    length = _uniform_length(part)
    if not length:
        return False
    n = len(part)
    spends: list[int] = []
    found = chars = 0
    for count in range(max_count + 1):
        size = n**count  # the texts of power `count`, each count·length characters long
        if count >= min_count:
            found += size
            chars += size * count * length
            if found > _FINITE_TEXTS_MAX or chars > _FINITE_CHARS_MAX:
                break
        if count == max_count:
            return False  # the powers fit: `texts` builds them
        # `_product(power, part)`: its checks, then its charge.
        product_count = size * n
        product_chars = n * size * count * length + size * n * length
        if product_count > _FINITE_TEXTS_MAX or product_chars > _FINITE_CHARS_MAX:
            break
        if (count + 1) * length > _FINITE_TEXT_LENGTH_MAX:
            break
        spends.append(1 + product_count + product_chars // 64)
    for units in spends:
        budget.spend(units)
    return True


def _quantifier(min_count: int, max_count: int | None) -> str:
    if max_count is None:
        return "*" if min_count == 0 else "+" if min_count == 1 else f"{{{min_count},}}"
    if (min_count, max_count) == (0, 1):
        return "?"
    return f"{{{min_count}}}" if min_count == max_count else f"{{{min_count},{max_count}}}"


# ---- the two automaton questions the refinement asks -------------------------------------------


def _can_extend(pool: _Pool, lexeme: int, follow: Ranges, other: int, budget: _Budget) -> bool:
    """Is there w ∈ L(lexeme) and c ∈ follow with w·c a prefix of a text of L(other)?

    Two finite languages (word lists, a word list and its separator) are answered from their
    texts; the derivatives' pairs of a list of 3,000 words ran past the state budget (each
    prefix of a word is a pair), and the answer "yes" split the list into a rule per word.
    Running out of the state budget answers True (the caller then splits, which is always safe).
    """
    texts = pool.texts(lexeme, budget)
    nexts = pool.next_characters(other, budget) if texts is not None else None
    if nexts is not None:
        assert texts is not None
        # The characters after any text of `lexeme` in `other`'s texts, gathered from the
        # smaller side, then looked up once each.
        if len(texts) <= len(nexts):
            after = set().union(*[nexts.get(text, ()) for text in texts])
        else:
            after = set().union(*[chars for prefix, chars in nexts.items() if prefix in texts])
        return any(_contains(follow, c) for c in after)
    return _pair_search(pool, lexeme, other, lambda a, b: pool.nullable[a] and intersects(pool.first[b], follow), budget)


def _share_text(pool: _Pool, a0: int, b0: int, budget: _Budget) -> bool:
    """Do L(a0) and L(b0) share a text? (True when the state budget runs out; two finite
    languages are answered from their texts.)"""
    a_texts = pool.texts(a0, budget)
    b_texts = pool.texts(b0, budget) if a_texts is not None else None
    if b_texts is not None:
        assert a_texts is not None
        return not a_texts.isdisjoint(b_texts)
    return _pair_search(pool, a0, b0, lambda a, b: pool.nullable[a] and pool.nullable[b], budget)


def _pair_search(pool: _Pool, a0: int, b0: int, found: Callable[[int, int], bool], budget: _Budget) -> bool:
    """Is a pair of derivatives of (a0, b0) by the same text `found`? Explores the pairs up to
    `AUTOMATON_STATE_COUNT_MAX` of them; running out answers True (the safe answer here).
    Each pair explored costs `budget` a unit per character class it steps by."""
    seen = {(a0, b0)}
    queue = [(a0, b0)]
    moves_of = pool._pair_moves
    while queue:
        a, b = queue.pop()
        if found(a, b):
            return True
        moves = moves_of.get((a, b))
        if moves is None:
            steps = pool.step_characters(a, b)
            budget.spend(1 + len(steps))
            moves = []
            for c in steps:
                pair = (pool.derivative(a, c), pool.derivative(b, c))
                moves.append(pair)
                if pair not in seen:
                    if len(seen) >= AUTOMATON_STATE_COUNT_MAX:
                        return True
                    seen.add(pair)
                    queue.append(pair)
            moves_of[(a, b)] = moves
            continue
        # The pair was explored before: the same units as exploring it again (a derivative
        # found in the pool's table costs one), without the work.
        budget.spend(1 + len(moves))
        units = 0
        for pair in moves:
            units += 2
            if pair not in seen:
                if len(seen) >= AUTOMATON_STATE_COUNT_MAX:
                    pool.budget.spend(units)
                    return True
                seen.add(pair)
                queue.append(pair)
        pool.budget.spend(units)
    return False


