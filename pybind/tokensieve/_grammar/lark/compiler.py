"""Syntax tree → grammar IR: terminals become lexemes (regular parts inlined into one lexeme
where possible), rules become productions, `%json` embeds a JSON Schema's IR, and the result
is pruned to what `start` reaches."""

from __future__ import annotations

import json
import re
from typing import Mapping, NoReturn, Sequence

from ..._errors import GrammarError
from ..ir import GrammarIR, Lexeme, LexemeKind, Sym, alternation_regex, productive_nonterminals
from ..json_schema.compiler import json_schema_to_ir
from ..json_schema.embed import merge_ir
from .parametric import PARAMETRIC_INSTANCE_COUNT_MAX, ParamError, eval_condition, eval_param
from .regex import (
    _ATOM, _EMPTY_RX, _alt_rx, _concat_rx, _literal_rx, _PatternError, _range_rx, _regex_rx, _repeat_rx, _Rx,
)
from .syntax import (
    _Alt, _And, _Cond, _Def, _Expr, _Grammar, _Json, _Lark, _Lit, _Name, _Not, _Parser, _Range, _Re, _RegexExt, _Repeat,
    _Seq, _Source, _Special, _walk,
    COMMON_TERMINALS, SPECIAL_TOKEN_IDS_MAX,
)


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
        # Terminals whose body is an `&` of (maybe negated) parts: (pattern, and, not) patterns.
        self.terminal_bool: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        self.regex_cache: dict[tuple[str, str], _Rx] = {}
        self.nonterminal_of: dict[str, int] = {}
        self.lexeme_of: dict[tuple[object, ...], int] = {}
        self.helper_of: dict[tuple[object, ...], int] = {}
        self.helper_names: dict[str, int] = {}
        self.json_of: dict[str, Sym] = {}
        self.lark_of: dict[str, Sym] = {}
        self.nested = False  # compiling a %lark body: its %ignore is spelled out, not the IR's skip
        # Parametric rules: instances (name, value) → nonterminal, those still to expand, and
        # the parameter of the instance being expanded (None outside parametric rules).
        self.instance_of: dict[tuple[str, int], int] = {}
        self.instances_pending: list[tuple[str, int]] = []
        self.param: int | None = None
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
            body = defs[name].body
            if isinstance(body, (_And, _Not)):
                self.terminal_bool[name] = self._boolean(body, f"terminal {name}")
            else:
                self.terminal_rx[name] = self._rx(body, f"terminal {name}")
        for name, d in defs.items():
            if not d.terminal and d.param is None:
                self.nonterminal_of[name] = self.ir.add_nonterminal(name)
        if defs["start"].param is not None:
            raise self.source.error("start cannot be parametric; write start: name::0", defs["start"].pos)
        for d in defs.values():
            if not d.terminal and d.param is None:
                self._rule(d)
        self._expand_instances()
        self._skip()
        self.ir.allow_initial_skip = bool(self.grammar.options.get("allow_initial_skip", False))
        self.ir.options = dict(self.grammar.options)
        embedded = [sym.index for sym in (*self.json_of.values(), *self.lark_of.values())]
        if embedded:  # names survive pruning; `_merge_nested` looks for them
            self.ir.options["embedded_starts"] = [self.ir.nonterminals[i] for i in embedded]
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
        if isinstance(expr, _RegexExt):
            return _Rx(expr.pattern, _ATOM) if expr.pattern else _EMPTY_RX
        if isinstance(expr, _Name):
            self._check_terminal_ref(expr, context)
            if expr.name in self.terminal_bool:
                raise self.source.error(
                    f"terminal {expr.name} uses & or ~, so it can be used in rules but not inside {context} "
                    "(& and ~ are supported at the top of a terminal definition only); "
                    f"write {context.split()[-1]}'s text into {expr.name}, or make {context.split()[-1]} a rule",
                    expr.pos,
                )
            return self.terminal_rx[expr.name]
        if isinstance(expr, (_And, _Not)):
            raise self.source.error(
                f"{'&' if isinstance(expr, _And) else '~'} in {context} is supported only at the top of a "
                "terminal definition (A: B & ~C), not inside a sequence, group or repetition",
                expr.pos,
            )
        if isinstance(expr, _Special):
            self._no_special(expr, context)
        if isinstance(expr, _Json):
            self._no_json(expr, context)
        if isinstance(expr, _Lark):
            raise self.source.error(f"%lark cannot be used in {context} (a terminal is one regex); use it in a rule", expr.pos)
        if isinstance(expr, _Seq):
            return _concat_rx([self._rx(item, context) for item in expr.items])
        if isinstance(expr, _Alt):
            return _alt_rx([self._rx(alt, context) for alt in expr.alts])
        assert isinstance(expr, _Repeat)
        return _repeat_rx(self._rx(expr.item, context), expr.min, expr.max)

    def _boolean(self, expr: _And | _Not, context: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """llguidance's `A & ~B & C` at the top of a terminal: the first positive part is the
        lexeme's pattern, the other positive parts its `and_patterns`, the negated ones its
        `not_patterns` (the core intersects and subtracts them). Without a positive part the
        pattern is any text (valid UTF-8: llguidance's bare `~B` also matches invalid UTF-8)."""
        positive: list[str] = []
        negative: list[str] = []
        pending: list[tuple[_Expr, bool]] = [(expr, True)]
        while pending:
            node, sign = pending.pop()
            if isinstance(node, _And) and sign:
                pending.extend((item, True) for item in reversed(node.items))
            elif isinstance(node, _Not):
                pending.append((node.item, not sign))
            else:
                (positive if sign else negative).append(self._rx(node, context).pattern)
        pattern = positive[0] if positive else r"[\s\S]*"
        return pattern, tuple(positive[1:]), tuple(negative)

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
            if isinstance(node, (_Special, _Json, _Lark)) or (isinstance(node, _Name) and not node.terminal):
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
        while pending:  # flatten nested alternations, keep the alternatives whose %if holds
            node = pending.pop()
            if isinstance(node, _Alt):
                pending.extend(reversed(node.alts))
            elif isinstance(node, _Cond):
                if self.param is None:
                    raise self.source.error("%if is allowed only in parametric rules (name::_: ...)", node.pos)
                try:
                    holds = eval_condition(node.cond, self.param)
                except ParamError as err:
                    raise self.source.error(str(err), node.pos) from None
                if holds:
                    pending.append(node.item)
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
        if isinstance(item, (_Lit, _Re, _Range, _RegexExt)):
            rx = self._rx(item, f"rule {owner}")
            return [self._lexeme("regex", rx.pattern, item.shown or rx.pattern)]
        if isinstance(item, _Name):
            return self._name_symbols(item)
        if isinstance(item, _Special):
            ids = self._special_ids(item)
            return [self._lexeme("special", "", item.text, token_ids=ids)]
        if isinstance(item, _Json):
            return [self._json(item)]
        if isinstance(item, _Lark):
            return [self._lark(item)]
        if isinstance(item, (_And, _Not)):
            op = "&" if isinstance(item, _And) else "~"
            raise self.source.error(
                f"{op} in rule {owner}: & and ~ are supported only in terminal definitions (as llguidance "
                "documents them); define an UPPERCASE terminal, e.g. A: B & ~C, and use it here",
                item.pos,
            )
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
            if item.name in self.terminal_bool:
                pattern, ands, nots = self.terminal_bool[item.name]
                return [self._lexeme("regex", pattern, item.name, and_patterns=ands, not_patterns=nots)]
            if item.name not in self.terminal_rx:
                raise self.source.error(_undefined_terminal(item.name), item.pos)
            rx = self.terminal_rx[item.name]
            if rx.literal == "":
                return []
            if rx.literal is not None:
                return [self._lexeme("literal", rx.literal, item.name)]
            return [self._lexeme("regex", rx.pattern, item.name)]
        d = self.grammar.defs.get(item.name)
        if d is not None and (d.param is not None or item.param is not None):
            return [self._instance(item, d)]
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
        and_patterns: tuple[str, ...] = (),
        not_patterns: tuple[str, ...] = (),
    ) -> Sym:
        """The lexeme with this kind/value/laziness/budget, shared by every use (first name wins)."""
        key = (kind, value, lazy, token_ids, max_tokens, and_patterns, not_patterns)
        index = self.lexeme_of.get(key)
        if index is None:
            lexeme = Lexeme(
                name, kind, value, lazy, token_ids, and_patterns, not_patterns, max_tokens=max_tokens
            )
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
        """The schema's grammar merged into this one (see `merge_ir`); one copy per text."""
        sym = self.json_of.get(item.text)
        if sym is None:
            where = self.source.where(item.pos)
            try:
                sub = json_schema_to_ir(item.schema)  # x-guidance may change the whitespace
            except GrammarError as err:
                pointer = err.json_pointer
                at = f" (at {pointer or '/'})" if pointer is not None and f"(at {pointer}" not in str(err) else ""
                error = self.source.error(f"in this %json schema: {err}{at}", item.pos)
                error.json_pointer = pointer
                raise error from None
            line, column = self.source.line_column(item.pos)
            sym = self.json_of[item.text] = merge_ir(self.ir, sub, f"json@{line}:{column}", whitespace=sub.skip)
            self.warnings.extend(f"%json at {where}: {w}" for w in sub.options.get("warnings", []))  # type: ignore[union-attr]
        return sym

    # -- parametric rules ----------------------------------------------------------------------

    def _instance(self, item: _Name, d: _Def) -> Sym:
        """The nonterminal of `name::param` for the current parameter (queued if new)."""
        if d.param is None:
            raise self.source.error(f"rule {item.name} is not parametric; write it without ::", item.pos)
        if item.param is None:
            raise self.source.error(
                f"rule {item.name} is parametric; refer to it with a parameter, e.g. {item.name}::0", item.pos
            )
        try:
            value = eval_param(item.param, self.param or 0)
        except ParamError as err:
            raise self.source.error(str(err), item.pos) from None
        key = (item.name, value)
        index = self.instance_of.get(key)
        if index is None:
            if len(self.instance_of) >= PARAMETRIC_INSTANCE_COUNT_MAX:
                raise self.source.error(
                    f"parametric rules need more than {PARAMETRIC_INSTANCE_COUNT_MAX} instances (tokensieve "
                    "expands every reachable parameter value into rules); use fewer bits or fewer items",
                    item.pos,
                )
            index = self.instance_of[key] = self.ir.add_nonterminal(f"{item.name}::{value:#x}")
            self.instances_pending.append(key)
        return Sym.n(index)

    def _expand_instances(self) -> None:
        """The rules of every instance reachable so far, breadth first, until none is new."""
        done = 0
        while done < len(self.instances_pending):
            name, value = self.instances_pending[done]
            done += 1
            self.param = value
            lhs = self.instance_of[(name, value)]
            for alt in self._alternatives(self.grammar.defs[name].body, f"{name}::{value:#x}"):
                self.ir.add_rule(lhs, alt)
        self.param = None

    # -- %lark ---------------------------------------------------------------------------------

    def _lark(self, item: _Lark) -> Sym:
        """A nested grammar merged into this one (see `_merge_nested`); one copy per text."""
        sym = self.lark_of.get(item.text)
        if sym is None:
            if self.nested:
                # llguidance's skips across two levels of nested lexers follow rules we have not
                # matched (an outer skip is allowed between the inner lexemes): refuse, not guess.
                raise self.source.error(
                    "%lark inside %lark is not supported; write the inner grammar's rules into the outer %lark",
                    item.pos,
                )
            if self.grammar.ignores:
                # The core lets the one skip regex in wherever some rule in progress allows it:
                # where the nested grammar could end but goes on, the outer %ignore would leak
                # in, and llguidance also refuses it right before the nested grammar.
                raise self.source.error(
                    "%lark in a grammar with %ignore is not supported (the outer %ignore would reach into "
                    "the nested grammar where it could end); move the %ignore into the nested grammars, or "
                    "write the nested rules into this grammar",
                    item.pos,
                )
            grammar = _Parser(self.source, item.tokens).parse()  # type: ignore[arg-type]
            if "start" not in grammar.defs:
                raise self.source.error("the grammar inside this %lark has no `start` rule", item.pos)
            if grammar.options:
                raise self.source.error(
                    "%llguidance options inside %lark are not supported; put them in the outer grammar", item.pos
                )
            inner = _Compiler(self.source, grammar, self.special_tokens)
            inner.nested = True
            sub = inner.run()
            line, column = self.source.line_column(item.pos)
            sym = self.lark_of[item.text] = _merge_nested(self.ir, sub, f"lark@{line}:{column}")
            self.warnings.extend(f"%lark at line {line}: {w}" for w in sub.options.get("warnings", []))  # type: ignore[union-attr]
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


def _merge_nested(ir: GrammarIR, sub: GrammarIR, prefix: str) -> Sym:
    """Append the nested grammar `sub` to `ir` with its own `%ignore`; return its start.

    The IR has one skip regex (the outer grammar's), so the nested nonterminals are `no_skip`
    and the nested `%ignore` is spelled out as an optional gap after nested lexemes. In
    llguidance the skip belongs to the nested lexer, which stays active while the nested parse
    can go on: so the gap follows a lexeme wherever the nested grammar can continue after it
    (the last lexeme too, if more could follow), never precedes the first lexeme, and not an
    embedded grammar (`%json`, `%lark`) that comes next in the same rule.
    """
    base = len(ir.nonterminals)
    for name in sub.nonterminals:
        ir.add_nonterminal(f"{prefix}/{name}")
    lexeme_of = [
        ir.add_lexeme(Lexeme(
            f"{prefix} {lx.name}", lx.kind, lx.value, lx.lazy, lx.token_ids, lx.and_patterns, lx.not_patterns,
            lx.dot_all, lx.ignore_case, lx.max_tokens, lx.string_length,
        ))
        for lx in sub.lexemes
    ]
    padded = [Sym.t(index) for index in lexeme_of]
    if sub.skip is not None:
        ws = Sym.t(ir.add_lexeme(Lexeme(f"{prefix} %ignore", "regex", sub.skip)))
        gap = ir.add_nonterminal(f"{prefix}/%ignore")
        ir.add_rule(gap, [])
        ir.add_rule(gap, [ws] if sub.skip_once else [Sym.n(gap), ws])
        ir.no_skip.add(gap)
        for i, lx in enumerate(sub.lexemes):
            helper = ir.add_nonterminal(f"{prefix}/{lx.name} %ignore")
            ir.add_rule(helper, [padded[i], Sym.n(gap)])
            ir.no_skip.add(helper)
            padded[i] = Sym.n(helper)
    names = set(sub.options.get("embedded_starts", ()))  # type: ignore[arg-type]
    embedded = {i for i, name in enumerate(sub.nonterminals) if name in names}
    # and the nonterminals all of whose rules begin with one (`b: %lark {...}`), to a fixpoint
    firsts: dict[int, list[Sym | None]] = {}
    for rule in sub.rules:
        firsts.setdefault(rule.lhs, []).append(rule.rhs[0] if rule.rhs else None)
    changed = bool(embedded)
    while changed:
        changed = False
        for lhs, heads in firsts.items():
            if lhs not in embedded and all(h is not None and not h.terminal and h.index in embedded for h in heads):
                embedded.add(lhs)
                changed = True
    # Nonterminals after which the nested text can go on: some occurrence has a symbol after
    # it, or ends a rule whose left side can go on (to a fixpoint).
    goes_on: set[int] = set()
    changed = True
    while changed:
        changed = False
        for rule in sub.rules:
            for i, s in enumerate(rule.rhs):
                if not s.terminal and s.index not in goes_on and (i + 1 < len(rule.rhs) or rule.lhs in goes_on):
                    goes_on.add(s.index)
                    changed = True

    def gap_after(rhs: Sequence[Sym], i: int, lhs: int) -> bool:
        if i + 1 == len(rhs):
            return lhs in goes_on
        return rhs[i + 1].terminal or rhs[i + 1].index not in embedded

    for rule in sub.rules:
        rhs = rule.rhs
        ir.add_rule(base + rule.lhs, [
            (padded[s.index] if gap_after(rhs, i, rule.lhs) else Sym.t(lexeme_of[s.index])) if s.terminal
            else Sym.n(base + s.index)
            for i, s in enumerate(rhs)
        ])
    ir.no_skip.update(range(base, base + len(sub.nonterminals)))
    return Sym.n(base + sub.start)


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
    out.distinct = {new_nt[nt] for nt in ir.distinct if nt in new_nt}
    return out
