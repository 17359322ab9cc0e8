"""Context-free grammar masks in the core, checked against the slow reference recognizer.

At several steps of sample texts (replayed as canonical tokens), every allowed token must be
completable per `tests/reference_cfg.py` (no false positives), and a random sample of the
other tokens must not be (no false negatives). Only tokens whose text is valid UTF-8 on its own
are compared: the reference works on characters (byte-level behaviour is covered by the regex
suite). Runs under both module builds.
"""

from __future__ import annotations

import pytest

from cfg_check import check_against_reference
from tokensieve import Grammar, Matcher
from tokensieve._grammar.ir import GrammarIR, Lexeme, Sym



def ir_from_rules(rules: dict[str, list[list[str]]], lexemes: dict[str, tuple[str, str]], *, skip=None,
                  lazy=(), allow_initial_skip=False) -> GrammarIR:
    """A small IR from readable rules: symbols are lexeme names or nonterminal names."""
    ir = GrammarIR(skip=skip, allow_initial_skip=allow_initial_skip)
    nts = {name: ir.add_nonterminal(name) for name in rules}
    lex = {name: ir.add_lexeme(Lexeme(name, kind, value, lazy=name in lazy)) for name, (kind, value) in lexemes.items()}
    for name, alternatives in rules.items():
        for alt in alternatives:
            ir.add_rule(nts[name], [Sym.n(nts[s]) if s in nts else Sym.t(lex[s]) for s in alt])
    ir.start = nts[next(iter(rules))]
    return ir


ARITH = ir_from_rules(
    {
        "expr": [["expr", "+", "term"], ["expr", "-", "term"], ["term"]],
        "term": [["term", "*", "factor"], ["factor"]],
        "factor": [["NUM"], ["(", "expr", ")"]],
    },
    {"NUM": ("regex", r"[0-9]+(\.[0-9]+)?"), "+": ("literal", "+"), "-": ("literal", "-"),
     "*": ("literal", "*"), "(": ("literal", "("), ")": ("literal", ")")},
    skip=r"[ \t]+",
)

JSON = ir_from_rules(
    {
        "value": [["object"], ["array"], ["STRING"], ["NUMBER"], ["true"], ["false"], ["null"]],
        "object": [["{", "}"], ["{", "members", "}"]],
        "members": [["pair"], ["members", ",", "pair"]],
        "pair": [["STRING", ":", "value"]],
        "array": [["[", "]"], ["[", "elements", "]"]],
        "elements": [["value"], ["elements", ",", "value"]],
    },
    {"STRING": ("regex", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'),
     "NUMBER": ("regex", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"),
     "true": ("literal", "true"), "false": ("literal", "false"), "null": ("literal", "null"),
     "{": ("literal", "{"), "}": ("literal", "}"), "[": ("literal", "["), "]": ("literal", "]"),
     ",": ("literal", ","), ":": ("literal", ":")},
    skip=r"[ \t\n\r]+",
)

COMMENTED = ir_from_rules(
    {"doc": [["items"]], "items": [["item"], ["items", "item"]], "item": [["WORD"], ["COMMENT"]]},
    {"WORD": ("regex", r"[a-z]+"), "COMMENT": ("regex", r"/\*(.|\n)*\*/")},
    skip=r"[ \n]+", lazy=("COMMENT",),
)

NESTED = ir_from_rules(
    {"list": [["[", "]"], ["[", "items", "]"]], "items": [["item"], ["items", ",", "item"]],
     "item": [["list"], ["ATOM"], ["opt", "ATOM"]], "opt": [[], ["~"]]},
    {"[": ("literal", "["), "]": ("literal", "]"), ",": ("literal", ","), "ATOM": ("regex", "[a-z]+"),
     "~": ("literal", "~")},
)

RIGHT_LIST = ir_from_rules(
    {"list": [["[", "items", "]"]], "items": [["NUM"], ["NUM", ",", "items"]]},
    {"[": ("literal", "["), "]": ("literal", "]"), ",": ("literal", ","), "NUM": ("regex", "[0-9]+")},
    skip=" +",
)

# A lexeme whose derivative can equal itself (`[^"]*"` after `a`): a boundary must still be
# told apart from the middle of a lexeme (EOS after `abc` is not allowed).
OPTIONAL_RUN = ir_from_rules(
    {"start": [[], ["RUN"], ["RUN", "RUN"]]},
    {"RUN": ("regex", '[^"]*"')},
)

CASES = {
    "arith": (ARITH, ["1 + 2 * (3 - 4.5)", "((7))*8", "10-2-3"], ["1 + + 2", "(1"]),
    "json": (JSON, ['{"a": [1, 2.5e-3, true], "b": {"c": null}}', "[]", '["x", {"y": "z\\n"}]'],
             ['{"a" 1}', "[1,]"]),
    "lazy_comment": (COMMENTED, ["abc /* a comment */ def", "/* x */ /* y */"], ["abc */"]),
    "nested_nullable": (NESTED, ["[a,[b,~c],[]]", "[[[x]]]"], ["[a,,b]", "[~~a]"]),
    "right_recursion": (RIGHT_LIST, ["[1, 2, 3]", "[42]"], ["[1,,2]", "[1 2]"]),
    "self_looping_lexeme": (OPTIONAL_RUN, ['abc"', 'x y"z"', '"'], ['a"b"c"']),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("tok_name", ["gpt2", "llama3"])
def test_cfg_masks_follow_the_reference(name, tok_name, wasm_variant):
    from conftest import load_shared_tokenizer

    ir, accept, reject = CASES[name]
    check_against_reference(load_shared_tokenizer(tok_name), Grammar.from_ir(ir), ir, accept, reject, seed=name + tok_name)


@pytest.mark.parametrize("ir", [JSON, RIGHT_LIST], ids=["left_recursive_json", "right_recursive"])
def test_long_lists_cost_the_same_per_step(ir, wasm_variant):
    """Step 10,000 of a long array costs about what step 100 does (no growth with position).

    The right-recursive grammar needs Leo's optimisation for this; without it each step would
    complete a chain as long as the list.
    """
    import time

    from conftest import load_shared_tokenizer

    tok = load_shared_tokenizer("llama3")
    m = Matcher(tok, Grammar.from_ir(ir))
    element = tok.encode("12, ")
    assert m.consume_tokens(tok.encode("["))

    def timed(n: int) -> float:
        best = float("inf")
        for _ in range(n):
            t0 = time.perf_counter()
            m.compute_bitmask()
            best = min(best, time.perf_counter() - t0)
            assert m.consume_tokens(element)
        return best

    timed(100)
    early = timed(20)
    for _ in range(10_000 // len(element)):
        assert m.consume_tokens(element)
    late = timed(20)
    # Generous: a quadratic parser would be ~100x slower here.
    assert late < early * 5 + 0.0005, (early, late)
