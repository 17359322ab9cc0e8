"""The Lark-like grammar front-end: grammar text → `GrammarIR`.

The syntax is llguidance's variant of Lark (`docs/syntax.md` in guidance-ai/llguidance), so the
grammars people already write for llguidance, vLLM or SGLang work unchanged:

    %import common.WS
    %ignore WS
    start: value
    value: object | array | STRING | NUMBER | "true" | "false" | "null"
    object: "{" [pair ("," pair)*] "}"
    ...

What is accepted:

- **Rules** `name: alt1 | alt2`, lowercase names (`-` allowed inside); alternatives may continue
  on the next lines, each starting with `|`. `?name:` and `!name:` prefixes, `-> alias` and
  priorities (`name.2:`) are accepted and ignored (they shape Lark's parse tree, not the
  language). `start` is the start rule.
- **Terminals** `NAME: ...`, UPPERCASE names: strings, regexes and other terminals combined
  with `|`, concatenation, `? * + {m} {m,} {m,n} ~m..n` and groups. A terminal compiles to ONE
  regex lexeme: referenced terminals are inlined into a single pattern (recursion is an error).
  No skip (`%ignore`) happens inside a terminal.
- **Strings** `"..."` with escapes `\\" \\\\ \\/ \\' \\b \\f \\n \\r \\t \\v \\0 \\xHH \\uHHHH
  \\UHHHHHHHH`, an optional `i` suffix (ASCII case-insensitive), and Lark ranges `"a".."z"`.
- **Regexes** `/.../flags` in the syntax of `docs/lexer.md`, flags `i` and `s` (`m`, `u`
  accepted and ignored), `\\/` for a slash; inline flags `(?i)`, `(?s)`, `(?i:...)`, `(?-s:...)`
  anywhere. Flags are compiled away (`i` into `[aA]` classes, `s` turns `.` into `[\\s\\S]`), so
  the core sees plain patterns that can be inlined into larger ones. A `^` at the start and a `$`
  at the end of a regex are dropped (lexemes always match whole).
- In rules, `[x]` and `x?` are optional, `x*`, `x+`, `x{m,n}`, `x~m..n` repeat; groups `( )`.
  These desugar into helper nonterminals named `owner/kind` (`list/star`): `*` and `+` are
  left-recursive (`rep → rep x | x`); `x{m,n}` is x^m from doubling rules (`pow2k → powk
  powk`) followed by an optional tail of 0..n−m copies split by the highest power of two
  (`upto_k → upto_{2^h-1} | x^(2^h) upto_{k-2^h}`), so it takes O(log m + log n) rules and stays
  unambiguous. Counts above `REPEAT_COUNT_MAX` are errors.
- **Special tokens** in rules: `<|name|>` (any `<...>`; looked up in `special_tokens` by its full
  text, then by the text between `<|` and `|>`), `<[123]>`, `<[100-200]>`, `<[1,5,7-9]>`.
- **Rule attributes**: `name[lazy]: BODY`, `name[stop="..."]`, `name[suffix="..."]`,
  `name[max_tokens=N]`; `capture`, `capture="n"`, `stop_capture="n"` and `temperature=T` are
  accepted and ignored. `lazy`, `stop`, `suffix` and `max_tokens` need a body that is
  terminal-only (strings, regexes, UPPERCASE names, no rules): it becomes one regex lexeme
  (lazy with `lazy`, `stop`, `suffix`). `stop=X` and `suffix=X`
  (X a string, regex or terminal) both append X to the lexeme and make it lazy: the stop text
  stays **visible** in the output, like llguidance's `suffix=` (llguidance's `stop=` hides it,
  which needs token backtracking). `stop=""` adds nothing and does not make the lexeme lazy.
  With `max_tokens=N` (as in llguidance) the lexeme may span at most N tokens of output; when
  the budget is spent at a token boundary the lexeme ends there if it matches
  (`Lexeme.max_tokens`, docs/lark.md).
- **Directives**: `%ignore X` (several are alternatives; together they become `GrammarIR.skip`,
  which may repeat between lexemes; with `ignore_once` or `skip_repetition: "once"` it is
  matched at most once: `GrammarIR.skip_once`); `%import common.X`,
  `%import common.X -> Y`, `%import common (A, B)` from `COMMON_TERMINALS`; `%override`
  (replaces an earlier definition); `%llguidance {json}` with the options `allow_initial_skip`
  (→ `GrammarIR.allow_initial_skip`), `no_forcing`, `allow_invalid_utf8`, `ignore_once`,
  `skip_repetition: "once"` — all stored in `GrammarIR.options`; other keys are errors.
- **`%json {schema}`** anywhere a rule name can stand (`args: %json {...}`): the JSON Schema
  front-end compiles the schema (compact) and its rules are merged in under names
  `json@LINE:COL/...`. Inside it only JSON whitespace (`[ \\t\\n\\r]+`) may appear between
  lexemes — spelled out around the punctuation, never before the first lexeme or after the
  last — and the grammar's `%ignore` does not reach in (its nonterminals are `no_skip` in the
  IR); `%ignore` still applies on both sides of it. The schema's `x-guidance` options
  (separators as regexes, `whitespace_flexible`, `whitespace_pattern`, `lenient`,
  `coerce_one_of`) apply as in llguidance (`json_schema/x_guidance.py`). A bad schema is a
  `GrammarError` at the `%json`, with the schema's `json_pointer`.
- llguidance's **`&` and `~`** at the top of a terminal definition (`NAME: /[a-z]+/ & ~KEYWORD`):
  the lexeme's pattern, `and_patterns` and `not_patterns`. Elsewhere they are errors.
- llguidance's **`%regex {"substring_words" | "substring_chars" | "substring_chunks": …}`**: one
  regex of every contiguous run of the chunks (`substring.py`).
- llguidance's **`%lark { grammar }`** (one level deep, in a grammar without `%ignore`): merged
  like `%json`, its `%ignore` spelled out after its lexemes (`_merge_nested`).
- llguidance's **parametric rules** (`name::_`, `name::set_bit(0)`, `%if cond`): the instances
  reachable from `start` are expanded into plain rules (`parametric.py`), at most 4,096.
- Comments: `//` and `#` to the end of the line. Newlines inside `( )`, `[ ]` and `{ }` are
  ignored.

After translation, nonterminals that can derive no text at all (`a: a "x"`) are removed
silently with the rules that use them — unless `start` is one of them, which is a
`GrammarError` listing them. Rules and lexemes not reachable from `start` are dropped too. The
start nonterminal is index 0.

Errors are `GrammarError` with `position` (0-based character offset), `line` and `column`
(1-based); the message starts with "line L, column C:", says what to change, and shows the line.

Not supported (a `GrammarError` says so): `@grammar` references, `%lark` under an outer
`%ignore` or inside another `%lark`,
`%declare`, templates (`name{x}: ...`), other imports than `common`, negated and wildcard token
sets (`<[^1]>`, `<[*]>`), the regex flag `x`, `&` and `~` in rules or inside a terminal's
sequence, parametric rules needing more than 4,096 instances.
"""

from __future__ import annotations

from typing import Mapping

from ..._errors import GrammarError
from ..ir import GrammarIR
from .compiler import _Compiler
from .syntax import COMMON_TERMINALS, NESTING_DEPTH_MAX, REPEAT_COUNT_MAX, _Lexer, _Parser, _Source


__all__ = ["lark_to_ir", "COMMON_TERMINALS", "NESTING_DEPTH_MAX", "REPEAT_COUNT_MAX"]
def lark_to_ir(text: str, *, special_tokens: Mapping[str, int] | None = None) -> GrammarIR:
    """Translate a Lark-like grammar (llguidance's dialect) into the grammar IR.

    Args:
        text: the grammar; must define `start`. Syntax in this module's docstring.
        special_tokens: special token text → token id (`{"<|eot_id|>": 128009}`), used to
            resolve `<|name|>` in rules; without it only numeric `<[id]>` forms work.

    Returns:
        The IR, with `start` at nonterminal 0, unproductive and unreachable parts removed.

    Raises:
        GrammarError: the text is malformed or uses an unsupported feature; `position`, `line`
            and `column` give the place.
        TypeError: `text` is not a str.

    Cost: linear in the text, plus O(log n) rules per `{m,n}`.
    """
    if not isinstance(text, str):
        raise TypeError(f"lark_to_ir takes the grammar as a str, not {type(text).__name__}")
    source = _Source(text)
    tokens = _Lexer(source).run()
    try:
        grammar = _Parser(source, tokens).parse()
        return _Compiler(source, grammar, special_tokens).run()
    except RecursionError:  # only when called with little stack left: depth is bounded
        raise GrammarError(
            "the grammar is nested too deeply to translate here; split deep groups into rules"
        ) from None


