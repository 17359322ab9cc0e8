r"""GBNF (llama.cpp's grammar format) → `GrammarIR`.

GBNF has no lexer/parser split: every terminal is one character. Handing the core one lexeme per
character would be correct but slow (every character is an Earley step), so this front-end
merges regular material into larger lexemes — and must do so without changing the language under
the greedy lexing rule of `docs/grammar_ir.md` (a lexeme ends at its longest match, decided with
one byte of look-ahead, never backtracked).

## Pipeline

1. **Parse** (`parse_gbnf`): a hand-written lexer and recursive-descent parser (group nesting
   bounded by `NESTING_DEPTH_MAX`) builds an AST per rule: character sets, rule references,
   special tokens `<[id]>`, sequences, alternatives and counted repetitions. Every error is a
   `GrammarError` with position, line and column.
2. **Inline regular rules**: a rule that reaches no cycle of the reference graph (and no special
   token) denotes a regular language; it becomes one regular expression and is substituted
   wherever it is used (unless the expression would be too large or deep).
3. **Coarse lexemes**: in every remaining rule, each maximal run of regular items of a sequence
   (literals, classes, quantified regular groups, inlined rules — single-alternative groups are
   spliced so runs continue through them) becomes one candidate lexeme. A run that can match the
   empty text becomes an optional helper (`h → R⁺ | ε`, `R⁺` = R without ε); lexemes never match
   empty text. Non-regular repetition becomes left-recursive helper rules.
4. **Refine until safe**: a lexeme that *could* over-extend (below) is split one level along its
   regex structure — a sequence into its items, an alternation into alternatives, `X{m,n}` into
   rules over X — at every occurrence, and the check is repeated. A one-character lexeme never
   needs splitting, so this ends; in the worst case every lexeme is one character class and the
   grammar is the plain character-level reading of the GBNF.
5. **Emit** the IR: literal lexemes for fixed texts, regex lexemes otherwise.

## Syntax (llama.cpp's `grammars/README.md`)

`name ::= alternatives` with names of letters, digits, `-` and `_`; a rule runs until the next
`name ::=` (so newlines may appear anywhere between items — every grammar llama.cpp accepts
reads the same); `root` is the start. Items: `"literal"`, `[class]`, `[^class]`, `.` (any code
point, newline included), `( … )`, rule names, `<[token-id]>` (a special-token lexeme), each
followed by any of `? * + {m} {m,} {m,n}` (counts up to `REPEAT_COUNT_MAX`). Escapes in literals
and classes: `\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH`. `#` starts a comment. Stricter than
llama.cpp: a rule defined twice, an empty class `[]` and an escape that is not a Unicode scalar
value are errors; token strings `<think>` and negated tokens `!<…>` (which need the tokenizer)
are refused with a message.

## Why the result matches the same texts as the GBNF

Write G for the character-level grammar and H for the lexeme grammar; replacing each lexeme of H
by its language gives exactly G (inlining, run merging and splitting are substitutions of equal
languages, made at the same text points in every context). So every text the core accepts is in
L(G). For the converse take a text in L(G) with a derivation, which induces a split into lexeme
texts w₁ w₂ … of H. Induction on the boundaries: the lexer starts lexeme k with the set A of
lexemes the live parses expect, and the intended lexeme L ∈ A. While inside wₖ, L can continue,
so the lexer does not stop early. It stops right after wₖ iff no lexeme of A can continue wₖ
with the next byte; then every live parse that reads wₖ as some lexeme goes on, the intended
one among them. Step 4 guarantees that stop:

- *Which lexemes can be expected at one boundary.* Lexeme occurrences (a lexeme at one place of
  one production) are tagged with their last two call sites (k-limited call strings; deeper
  context is forgotten, with FOLLOW taking the union over every caller), and FIRST/FOLLOW are
  computed over tagged occurrences. The relation "may be expected together" is the smallest
  that contains FIRST(root)², and contains FOLLOW(m) × FOLLOW(m′) whenever it contains (m, m′)
  and the lexemes of m and m′ can match one same text. By induction every pair of occurrences
  in a real A is in it: the live parses after wₖ read wₖ as occurrences that were expected
  together and all match wₖ, and each expects next something in its FOLLOW.
- *No rival can go on.* For every pair (L, L′) that may be expected together, no w ∈ L and
  character c that can follow L's occurrence (first characters of its FOLLOW, widened to every
  character sharing c's first UTF-8 byte, since the core looks one *byte* ahead) have w·c a
  prefix of a text of L′. Lexemes with disjoint first characters never conflict; the rest are
  decided exactly on pairs of Brzozowski derivatives, with a state budget — running out counts
  as a conflict. Whether two lexemes share a text is decided the same way. Two lexemes with
  small finite languages (word lists) are decided from their texts instead, exactly
  (`automata._Pool.texts`).

When the check flags L′ it is L′ that is split (it is the one that can over-extend; a
one-character lexeme cannot). The check is conservative (FOLLOW forgets context past two calls;
a pair may be flagged that no real boundary holds), so some lexemes are split that could have
stayed whole, never the other way round.

Example: `[a-z]* "x"` is one run, hence one lexeme `[a-z]*x`, and correct; had it been two lexemes
`[a-z]+` and `x`, the check would flag `[a-z]+` (it can continue with the `x` that follows it)
and split it into single-character lexemes with a left-recursive rule.

Measured (CPython 3.11, one core): the test corpus translates in 0.2–22 ms per grammar (the C-like
grammar, with comments inside whitespace, is the slowest: 8 refinement rounds; docs/lexer.md,
"The GBNF refinement on ordinary grammars", has figures beside llguidance); 150 keyword rules in 0.3 s; a
llama.cpp JSON-schema grammar with an `additionalProperties` key trie in 0.5 s; a list of
10,000 words in ~60 ms (docs/lexer.md, "Large alternations").
"""

from __future__ import annotations


from ..._errors import LimitError
from ..automata import _UNLIMITED, _Budget, _OverBudget
from ..ir import GrammarIR, Lexeme, Sym, alternation_regex
from .builder import _NT, _SPECIAL, Symbol, _Builder, _Cfg
from .refine import _Refiner
from .syntax import ANALYSIS_WORK_MAX, _check_references, parse_gbnf


__all__ = ["gbnf_to_ir", "parse_gbnf"]
# ===============================================================================================
# IR emission
# ===============================================================================================


def _emit(cfg: _Cfg, root: int) -> GrammarIR:
    """The IR of the reachable part of the lexeme grammar; root is nonterminal 0."""
    pool = cfg.pool
    ir = GrammarIR()
    order = cfg.reachable(root)
    index = {nt: ir.add_nonterminal(cfg.names[nt]) for nt in order}
    ir.start = index[root]
    lexeme_index: dict[Symbol, int] = {}

    def lexeme(symbol: Symbol) -> int:
        found = lexeme_index.get(symbol)
        if found is None:
            kind, value = symbol
            if kind == _SPECIAL:
                lex = Lexeme(f"<[{value}]>", "special", token_ids=(value,))
            else:
                text = pool.fixed_text(value)
                if text is not None:
                    lex = Lexeme(_quote(text), "literal", text)
                elif (words := pool.words(value)) is not None:  # as the other front-ends give word lists
                    lex = Lexeme(f"one of {len(words)} words", "regex", alternation_regex(words))
                else:
                    pattern = pool.pattern(value)
                    lex = Lexeme(_short(f"/{pattern}/"), "regex", pattern)
            found = lexeme_index[symbol] = ir.add_lexeme(lex)
        return found

    for nt in order:
        for production in cfg.productions[nt]:
            rhs = []
            for symbol in production:
                kind, value = cfg.resolve(symbol)
                rhs.append(Sym.n(index[value]) if kind == _NT else Sym.t(lexeme((kind, value))))
            ir.add_rule(index[nt], rhs)
    return ir


def _quote(text: str) -> str:
    return _short('"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"')


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


# ===============================================================================================
# Entry point
# ===============================================================================================


def gbnf_to_ir(text: str) -> GrammarIR:
    """Translate a GBNF grammar (llama.cpp's format) into the grammar IR.

    The output must match rule `root`. Regular parts of the grammar become regex or literal
    lexemes as large as greedy lexing allows (see the module docstring); the rest become rules.

    Args:
        text: the grammar text.

    Returns:
        The IR; nonterminal names are the rule names (helpers are `name~k`, `opt~k`, `lexeme~k`).

    Raises:
        GrammarError: the text is malformed, a rule is undefined or defined twice, or `root` is
            missing; `position`, `line` and `column` say where.
        LimitError: building the lexemes or their refinement ran past `ANALYSIS_WORK_MAX` (`limit` is
            `"gbnf_analysis"`): the grammar is too complex to translate in about a second.

    Cost: parsing is linear; the lexeme refinement is about quadratic in the number of
    lexemes that share first characters, each check bounded by `automata.AUTOMATON_STATE_COUNT_MAX`,
    and all of it by `ANALYSIS_WORK_MAX`.
    """
    grammar = parse_gbnf(text)
    _check_references(grammar)
    builder = _Builder(grammar)
    # Building the lexeme grammar is term work too: an optional regular part becomes its
    # non-empty form, and that of a sequence of n optional parts lists n suffixes (n² items:
    # 40,000 `"…"?` in a row built for 88 s). It has a budget of its own, the analysis's size
    # (the test corpus and 4,000 fuzz grammars need at most 423 units), so the analysis's
    # units stay what they were.
    pool = builder.cfg.pool
    pool.budget = _Budget(ANALYSIS_WORK_MAX)
    try:
        builder.inline_regular_rules()
        root = builder.build()
    except _OverBudget:
        raise LimitError(
            f"the GBNF grammar is too complex to split into lexemes safely: building its lexemes ran past "
            f"{ANALYSIS_WORK_MAX:,} steps; simplify it (long runs of optional parts such as \"a\"? \"b\"? … "
            "make a term per suffix)",
            limit="gbnf_analysis",
        ) from None
    pool.budget = _Budget(_UNLIMITED)
    _Refiner(builder.cfg, root).run()
    return _emit(builder.cfg, root)
