r"""Fuzzing: grammar texts and token streams that try to make tokensieve misbehave.

The promise under test (issue 9): whatever a user sends — a grammar text, a schema, token ids,
arrays — every call ends in a result or a `TokensieveError` subclass whose message names the
place, within a bounded time, and no other request's matcher notices. Concretely a fuzz input
*fails* when:

- a call raises anything that is not a `TokensieveError` (a `KeyError` from a front-end, a
  `RecursionError`, a `UnicodeEncodeError` …), or a `CoreTrap` (a trap is a bug in the core);
- a `LimitError` does not name its limit (`.limit` is None), or it is the wall-clock
  `deadline` (a backstop that the work limits should keep from firing), or a `GrammarError`
  names no place (no position, line, column, JSON pointer or lexeme);
- a step call (a mask, a consume, forced bytes …) takes longer than `step_ms_max`, compiling
  longer than `compile_s_max`, or one input longer than `input_s_max` (a hang);
- a mask disagrees with consume (a token the mask allows is refused, or the other way round),
  EOS is allowed while `is_accepting()` is false, `consumed_tokens` or `token_count` disagree
  with what was consumed and rolled back;
- the bystander — a matcher on a known grammar living in the same core instance as every fuzz
  input — computes a mask that differs from its oracle's (the allowed tokens of a finite set of
  words, computed in Python from the token bytes).

Generators take a `random.Random` (`gen_regex(r)`, `gen_lark(r)`, …), so the command needs no
Hypothesis (`tokensieve fuzz` draws from `random.Random(f"{seed}:{kind}:{i}")`, and input `i`
can be replayed alone), while the test suite draws the same generators from Hypothesis's
`st.randoms()` and gets shrinking. Each generator writes text that is often valid and often
subtly broken: mutations delete, duplicate or insert a character, truncate or swap.
"""

from __future__ import annotations

import gc
import json
import random
import re
import signal
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .._grammar.grammar import _collector_paused

KINDS = ("regex", "lark", "gbnf", "json", "tag", "tokens")
# `--kind all` takes kinds in this order: GBNF half as often, its front-end's analysis costs
# 10-40 times the others' per input (p90 0.2-0.7 s against 10-40 ms).
ALL_ROTATION = ("regex", "lark", "json", "tag", "tokens", "gbnf", "regex", "lark", "json", "tag", "tokens")
STEP_MS_MAX_DEFAULT = 100.0
COMPILE_S_MAX_DEFAULT = 5.0  # the GBNF analysis may spend 2-4.5 s of CPU before its LimitError
INPUT_S_MAX_DEFAULT = 20.0
WALK_STEPS = 6
BYSTANDER_WORDS = ("日本語", "hello world", "a1b2", "Ωmega", "ünïcödé", "🙂ok")


# -- generators: shared pieces ----------------------------------------------------------------

_ASCII_LITERALS = "abcxyzABZ019 _-,:;'\"/@#%&=<>~`"
_UNICODE_LITERALS = "éßΩжあ日本語한글😀🙂\u0301\u200b\u00a0\u2028\uffff\U0010fffd\x00\x7f"
_REGEX_META = "\\^$.|?*+()[]{}"


def _pick(r: random.Random, items: Sequence[Any]) -> Any:
    return items[r.randrange(len(items))]


def _clean(r: random.Random) -> bool:
    """Is this input in clean mode (no deliberate error in its pieces)? Without it, small
    chances of a bad piece compound: a grammar of 30 pieces would almost never be valid."""
    return bool(getattr(r, "_tokensieve_clean", False))


def _start(r: random.Random, clean_share: float = 0.6) -> None:
    """Begin an input: choose clean mode for about `clean_share` of them."""
    r._tokensieve_clean = r.random() < clean_share  # type: ignore[attr-defined]


def _count(r: random.Random) -> int:
    """A repetition count: mostly small, sometimes big or huge (at most 10,000 when clean)."""
    roll = r.random()
    if roll < 0.6:
        return r.randint(0, 5)
    if roll < 0.85:
        return r.randint(6, 100)
    if _clean(r):
        return _pick(r, (255, 1000, 5000, 9999, 10_000))
    if roll < 0.97:
        return _pick(r, (255, 1000, 5000, 9999, 10_000, 10_001, 65_535))
    return _pick(r, (100_000, 2**31 - 1, 2**32, 10**20))


def _literal_char(r: random.Random) -> str:
    roll = r.random()
    if roll < 0.6:
        return _pick(r, _ASCII_LITERALS[:10])
    if roll < 0.85:
        return _pick(r, _ASCII_LITERALS)
    if roll < 0.995 or _clean(r):
        return _pick(r, _UNICODE_LITERALS)
    return _pick(r, ("\ud800", "\udfff"))  # lone surrogates: not encodable as UTF-8


def mutate(r: random.Random, text: str) -> str:
    """`text` with one to three small breakages (or unchanged: always in clean mode, else about
    half of the time)."""
    if not text or _clean(r) or r.random() < 0.5:
        return text
    for _ in range(r.randint(1, 3)):
        if not text:
            break
        i = r.randrange(len(text) + 1)
        op = r.randrange(6)
        if op == 0:  # delete a character
            text = text[: max(i - 1, 0)] + text[i:]
        elif op == 1:  # duplicate a span
            j = min(len(text), i + r.randint(1, 4))
            text = text[:j] + text[i:j] + text[j:]
        elif op == 2:  # insert a metacharacter
            text = text[:i] + _pick(r, _REGEX_META + "\"'#:=|<>%/\n") + text[i:]
        elif op == 3:  # truncate
            text = text[:i]
        elif op == 4:  # swap two neighbours
            if 0 < i < len(text):
                text = text[: i - 1] + text[i] + text[i - 1] + text[i + 1 :]
        else:  # insert a non-ASCII character
            text = text[:i] + _literal_char(r) + text[i:]
    return text


# -- regex ------------------------------------------------------------------------------------


def _regex_class(r: random.Random) -> str:
    parts = []
    for _ in range(r.randint(0, 4)):
        roll = r.random()
        if roll < 0.35:
            a, b = sorted((_literal_char(r), _literal_char(r)))
            parts.append(f"{_escape_class(a)}-{_escape_class(b)}")
        elif roll < 0.55:
            parts.append(_pick(r, (r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", r"\n", r"\t", r"\\", r"\]", r"\-")))
        elif roll < 0.6:
            unsupported = () if _clean(r) else (r"\p{L}", r"\p{Lu}", r"\P{N}", "[:alpha:]")
            parts.append(_pick(r, unsupported + (r"\u0041", r"\x41", r"\u{1F600}")))
        else:
            parts.append(_escape_class(_literal_char(r)))
    if not parts and _clean(r):
        parts.append(_escape_class(_literal_char(r)))
    negate = "^" if r.random() < 0.3 else ""
    return f"[{negate}{''.join(parts)}]"


def _escape_class(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c


def _regex_atom(r: random.Random, depth: int) -> str:
    roll = r.random()
    if depth > 0 and roll < 0.25:
        openers = ("(", "(", "(?:", "(?:", "(?s:") if _clean(r) else ("(", "(?:", "(?P<n>", "(?<n>", "(?i)", "(?=", "(?!", "(?s:")
        return _pick(r, openers) + gen_regex_raw(r, depth - 1) + ")"
    if roll < 0.45:
        return _regex_class(r)
    if roll < 0.55:
        unsupported = () if _clean(r) else (r"\b", r"\B", r"\1", r"\k<n>", r"\p{Greek}", r"\z", r"\Q", "^", "$")
        return _pick(r, (".", r"\d", r"\w", r"\s", r"\.", r"\\", r"\n", r"\x7f", r"\u00e9", r"\u{10FFFF}",
                         r"\/", r"\-") + unsupported)
    ch = _literal_char(r)
    return "\\" + ch if ch in _REGEX_META else ch


def _quantifier(r: random.Random) -> str:
    roll = r.random()
    if roll < 0.55:
        return ""
    if roll < 0.75:
        q = _pick(r, ("?", "*", "+"))
    else:
        m, n = _count(r), _count(r)
        shapes = ("{%d}" % m, "{%d,}" % m, "{%d,%d}" % (min(m, n), max(m, n)), "{,%d}" % n)
        q = _pick(r, shapes if _clean(r) else shapes + ("{%d,%d}" % (m, n),))
    suffix = _pick(r, ("", "", "", "", "?") if _clean(r) else ("", "?", "+")) if r.random() < 0.2 else ""
    return q + suffix


def gen_regex_raw(r: random.Random, depth: int = 4) -> str:
    """A regular expression (before mutation), nesting at most `depth` groups."""
    alternatives = []
    for _ in range(1 if r.random() < 0.6 else r.randint(2, 5)):
        items = [_regex_atom(r, depth) + _quantifier(r) for _ in range(r.randint(0, 5))]
        alternatives.append("".join(items))
    text = "|".join(alternatives)
    if depth >= 4 and r.random() < 0.05:  # deep nesting
        n = r.randint(50, 99 if _clean(r) else 150)
        text = "(" * n + text + ")" * n + _quantifier(r)
    return text


def gen_regex(r: random.Random) -> str:
    """A regex text for `Grammar.regex`: often valid, often subtly broken."""
    _start(r)
    return mutate(r, gen_regex_raw(r))


# -- Lark -------------------------------------------------------------------------------------

_LARK_FLAGS = ("", "", "", "i", "s", "is", "x")


def _lark_string(r: random.Random) -> str:
    body = "".join(_literal_char(r) for _ in range(r.randint(0, 4)))
    body = body.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    if r.random() < 0.1:
        body += _pick(r, (r"\x41", r"\u00e9", r"\U0001F600") + (() if _clean(r) else (r"\q", "\\", r"\u12")))
    return f'"{body}"' + ("i" if r.random() < 0.1 else "")


def _lark_item(r: random.Random, rules: list[str], terminals: list[str], depth: int, in_terminal: bool) -> str:
    roll = r.random()
    names = terminals if in_terminal else rules + terminals
    if roll < 0.3:
        item = _lark_string(r)
        if r.random() < 0.05:
            item = (f'"{_pick(r, "abcx")}".."{_pick(r, "xyz")}"' if _clean(r) else f"{item}..{_lark_string(r)}")
    elif roll < 0.5:
        pattern = gen_regex_raw(r, depth=1).replace("\n", "")
        # Clean: no slash at all (an escaped one next to an escaped backslash ends the regex),
        # and never empty (`//` starts a comment).
        pattern = (re.sub(r"\\?/", "_", pattern) or "a") if _clean(r) else pattern.replace("/", "\\/")
        item = f"/{pattern}/{_pick(r, _LARK_FLAGS[:-1] if _clean(r) else _LARK_FLAGS)}"
    elif roll < 0.75 and names:
        item = _pick(r, names)
    elif depth > 0 and roll < 0.88:
        item = "(" + _lark_alternatives(r, rules, terminals, depth - 1, in_terminal) + ")"
    elif depth > 0 and roll < 0.92:
        item = "[" + _lark_alternatives(r, rules, terminals, depth - 1, in_terminal) + "]"
    elif roll < 0.95 and not in_terminal:
        item = _pick(r, ("<|endoftext|>", "<[0]>", "<[1,5,7-9]>", "<[50256]>")
                     + (() if _clean(r) else ("<|eot_id|>", "<[99999999]>", "<|nope|>")))
    elif roll < 0.97 and not in_terminal:
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}} if _clean(r) else gen_json_schema_obj(r, 1)
        item = "%json " + json.dumps(schema)
    elif _clean(r):
        item = '"q"' if in_terminal else "start"
    else:
        item = _pick(r, ("undefined_rule", "UNDEFINED", "start", "_hidden", "a-b"))
    q = r.random()
    if q < 0.15:
        item += _pick(r, ("?", "*", "+"))
    elif q < 0.22:
        m, n = _count(r), _count(r)
        shapes = ("{%d}" % m, "{%d,%d}" % (min(m, n), max(m, n)))
        item += _pick(r, shapes if _clean(r) else shapes + ("{%d,%d}" % (m, n),))
    elif q < 0.25:
        item = f"{item} ~ {_count(r)}" + (f"..{_count(r)}" if r.random() < 0.7 else "")
    return item


def _lark_alternatives(r: random.Random, rules: list[str], terminals: list[str], depth: int, in_terminal: bool) -> str:
    alts = []
    for _ in range(r.randint(1, 3)):
        alts.append(" ".join(_lark_item(r, rules, terminals, depth, in_terminal) for _ in range(r.randint(0, 4))))
    return " | ".join(alts)


def gen_lark_raw(r: random.Random) -> str:
    """A Lark-like grammar (before mutation): rules (recursive, nullable), terminals, directives."""
    rules = ["start"] + [f"r{i}" for i in range(r.randint(0, 4))]
    terminals = [f"T{i}" for i in range(r.randint(0, 3))]
    lines = []  # one entry per definition (a rule and its continuation lines), shuffled below
    if _clean(r) and r.random() < 0.1:
        lines.append('words[lazy]: /[a-z]+/ "."')
        rules_defined = list(rules)
        rules.append("words")
    else:
        rules_defined = list(rules)
    for name in rules_defined:
        prefix = _pick(r, ("", "", "", "?", "!"))
        attrs = ""
        if r.random() < 0.08 and not _clean(r):  # attributes need a body of terminals only
            attrs = _pick(r, ("[lazy]", f"[max_tokens={_count(r)}]", '[stop="x"]', '[suffix=";"]', "[capture]",
                              "[max_tokens=-1]", "[unknown=1]"))
        lines.append(f"{prefix}{name}{attrs}: {_lark_alternatives(r, rules, terminals, 2, False)}")
        if r.random() < 0.2:
            lines[-1] += f"\n    | {_lark_alternatives(r, rules, terminals, 1, False)}"
    for i, name in enumerate(terminals):
        priority = f".{r.randint(-2, 5)}" if r.random() < 0.1 else ""
        # Clean: a terminal names only earlier ones (recursion between terminals is an error).
        usable = terminals[:i] if _clean(r) else terminals
        lines.append(f"{name}{priority}: {_lark_alternatives(r, [], usable, 2, True)}")
    roll = r.random()
    if roll < 0.3:
        lines.append("%ignore " + _pick(r, ('/[ \\t\\n]+/', '" "', "WS", "/#[^\\n]*/", '/\\s*/', '""')))
    if roll < 0.15:
        lines.append(_pick(r, ("%import common.WS", "%import common.NUMBER", "%import common.CNAME -> NAME",
                                "%import common (WS, INT)") + (() if _clean(r) else ("%import nothing.X",))))
    if r.random() < 0.05:
        choices = ("true", "false") if _clean(r) else ("true", "false", "1")
        lines.append('%llguidance {"allow_initial_skip": true, "no_forcing": ' + _pick(r, choices) + "}")
    if r.random() < 0.03 and not _clean(r):
        lines.append(_pick(r, ("%declare X", "%override start: \"a\"", "%regex x /a/", "@sub")))
    r.shuffle(lines)
    return "\n".join(lines) + "\n"


def gen_lark(r: random.Random) -> str:
    """A Lark-like grammar text for `Grammar.lark`: often valid, often subtly broken."""
    _start(r)
    return mutate(r, gen_lark_raw(r))


# -- GBNF -------------------------------------------------------------------------------------


def _gbnf_literal(r: random.Random) -> str:
    body = "".join(_literal_char(r) for _ in range(r.randint(0, 4)))
    body = body.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    if r.random() < 0.1:
        body += _pick(r, (r"\x41", r"\u00e9", r"\U0001F600")
                      + (() if _clean(r) else (r"\q", r"\xZZ", r"\U00110000", r"\ud800")))
    return f'"{body}"'


def _gbnf_class(r: random.Random) -> str:
    parts = []
    for _ in range(r.randint(0, 3)):
        if r.random() < 0.5:
            a, b = sorted((_literal_char(r), _literal_char(r)))
            parts.append(f"{_escape_gbnf(a)}-{_escape_gbnf(b)}")
        else:
            parts.append(_pick(r, (r"\n", r"\t", r"\\", r"\]", r"\x20", r"\u3042", "a", "0")
                               + (() if _clean(r) else ("-", "^"))))
    if _clean(r) and (not parts or parts[0] in ("-", "^")):
        parts.insert(0, "a")
    return "[" + ("^" if r.random() < 0.3 else "") + "".join(parts) + "]"


def _escape_gbnf(c: str) -> str:
    return {"\\": r"\\", "]": r"\]", "[": r"\[", "\n": r"\n", "-": r"\x2d", "^": r"\x5e"}.get(c, c)


def _gbnf_item(r: random.Random, names: list[str], depth: int) -> str:
    roll = r.random()
    if roll < 0.3:
        item = _gbnf_literal(r)
    elif roll < 0.5:
        item = _gbnf_class(r)
    elif roll < 0.75:
        item = _pick(r, names)
    elif depth > 0 and roll < 0.9:
        item = "(" + _gbnf_alternatives(r, names, depth - 1) + ")"
    elif roll < 0.94:
        item = "."
    else:
        item = _pick(r, ("<[0]>", "<[50256]>")
                     + (() if _clean(r) else ("<[-1]>", "<think>", "!<[0]>", "undefined-rule", "<|eot_id|>")))
    q = r.random()
    if q < 0.2:
        item += _pick(r, ("?", "*", "+"))
    elif q < 0.32:
        # Counted repetitions of recursive rules multiply the rules the analysis works on:
        # big counts in a few inputs only, or most GBNF inputs would run to its budget.
        m, n = (_count(r), _count(r)) if getattr(r, "_tokensieve_big", True) else (r.randint(0, 6), r.randint(0, 12))
        shapes = ("{%d}" % m, "{%d,}" % m, "{%d,%d}" % (min(m, n), max(m, n)))
        item += _pick(r, shapes if _clean(r) else shapes + ("{%d,%d}" % (m, n), "{,%d}" % n))
    return item


def _gbnf_alternatives(r: random.Random, names: list[str], depth: int) -> str:
    alts = []
    for _ in range(r.randint(1, 3)):
        alts.append(" ".join(_gbnf_item(r, names, depth) for _ in range(r.randint(0, 4))))
    return " | ".join(alts)


def gen_gbnf_raw(r: random.Random) -> str:
    """A GBNF grammar (before mutation): recursive, nullable, counted rules."""
    names = ["root"] + [f"r{i}" for i in range(r.randint(0, 4))]
    lines = []
    for name in names:
        lines.append(f"{name} ::= {_gbnf_alternatives(r, names, 2)}")
        if r.random() < 0.1:
            lines.append(f"  # a comment {_literal_char(r)}")
    if r.random() < 0.03 and not _clean(r):
        lines.append(lines[0])  # a rule defined twice
    if r.random() < 0.5:
        r.shuffle(lines)
    return "\n".join(lines) + "\n"


def gen_gbnf(r: random.Random) -> str:
    """A GBNF text for `Grammar.gbnf`: often valid, often subtly broken."""
    _start(r)
    r._tokensieve_big = r.random() < 0.15  # type: ignore[attr-defined]
    return mutate(r, gen_gbnf_raw(r))


# -- JSON Schema ------------------------------------------------------------------------------

_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
_FORMATS = ("date", "date-time", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname", "duration", "nope")


def _json_number(r: random.Random) -> Any:
    return _pick(r, (0, 1, -1, 2, 3, 7, 10, 0.5, -2.5, 1e-9, 1e308, -1e308, 2**53 + 1, 10**30, 0.1, 100, 1000, 10**400, -(10**400)))


def _json_value(r: random.Random, depth: int = 2) -> Any:
    roll = r.random()
    if depth > 0 and roll < 0.1:
        return [_json_value(r, depth - 1) for _ in range(r.randint(0, 3))]
    if depth > 0 and roll < 0.2:
        return {_key(r): _json_value(r, depth - 1) for _ in range(r.randint(0, 3))}
    return _pick(r, (None, True, False, _json_number(r), "".join(_literal_char(r) for _ in range(r.randint(0, 5)))))


def _key(r: random.Random) -> str:
    return _pick(r, ("a", "b", "name", "id", "x y", "", "日本", "$ref", "\u0000", "\"q\"", "k" * r.randint(1, 40)))


def gen_json_schema_obj(r: random.Random, depth: int = 3) -> Any:
    """A JSON Schema (a Python value): keywords mixed, nested, recursive, sometimes ill-typed."""
    if r.random() < 0.05:
        return _pick(r, (True, False, {}, [], 3, "string", None))
    schema: dict[str, Any] = {}
    roll = r.random()
    if roll < 0.7:
        odd = (list(r.sample(_TYPES, 2)),) if _clean(r) else (list(r.sample(_TYPES, 2)), "str", 5, [])
        schema["type"] = _pick(r, _TYPES) if r.random() < 0.85 else _pick(r, odd)
    t = schema.get("type")
    for _ in range(r.randint(0, 5)):
        k = r.randrange(22)
        if k == 0:
            schema["minLength"] = _count(r)
        elif k == 1:
            schema["maxLength"] = _count(r) if _clean(r) else _pick(r, (_count(r), -1, "3", 1.5))
        elif k == 2:
            schema["pattern"] = gen_regex(r) if r.random() < 0.7 else gen_regex_raw(r, 2)
        elif k == 3:
            schema["format"] = _pick(r, _FORMATS)
        elif k == 4:
            schema[_pick(r, ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))] = _json_number(r)
        elif k == 5:
            schema["multipleOf"] = _pick(r, (1, 2, 0.5, 0.1, 3) + (() if _clean(r) else (0, -1, 1e-10)))
        elif k == 6:
            schema["enum"] = [_json_value(r) for _ in range(r.randint(0, 6))]
        elif k == 7:
            schema["const"] = _json_value(r)
        elif k == 8 and depth > 0:
            schema["properties"] = {_key(r): gen_json_schema_obj(r, depth - 1) for _ in range(r.randint(0, 4))}
        elif k == 9:
            props = list(schema.get("properties", {})) or [_key(r)]
            schema["required"] = r.sample(props, r.randint(0, len(props))) + (["missing"] if r.random() < 0.2 else [])
        elif k == 10:
            schema["additionalProperties"] = (
                gen_json_schema_obj(r, depth - 1) if depth > 0 and r.random() < 0.5 else r.random() < 0.5
            )
        elif k == 11 and depth > 0:
            schema["items"] = gen_json_schema_obj(r, depth - 1)
        elif k == 12 and depth > 0:
            schema["prefixItems"] = [gen_json_schema_obj(r, depth - 1) for _ in range(r.randint(0, 3))]
        elif k == 13:
            # Past a double's range too (1e308 counted its doubling rules by recursion).
            count = _pick(r, (1e308, 10**400)) if r.random() < 0.05 else _count(r)
            schema[_pick(r, ("minItems", "maxItems", "minProperties", "maxProperties"))] = count
        elif k == 14 and depth > 0:
            schema[_pick(r, ("anyOf", "oneOf", "allOf"))] = [
                gen_json_schema_obj(r, depth - 1) for _ in range(r.randint(0, 3))
            ]
        elif k == 15 and depth > 0:
            schema["not"] = gen_json_schema_obj(r, depth - 1)
        elif k == 16 and depth > 0:
            schema["$defs"] = {"d": gen_json_schema_obj(r, depth - 1), "self": {"$ref": "#"}}
        elif k == 17:
            schema["$ref"] = _pick(r, ("#", "#/$defs/d", "#/$defs/self", "#/definitions/x", "#/properties/a",
                                       "other.json", "#/$defs/~1", "#/items/0"))
        elif k == 18 and depth > 0:
            schema["patternProperties"] = {gen_regex_raw(r, 1): gen_json_schema_obj(r, depth - 1)}
        elif k == 19:
            schema["uniqueItems"] = r.random() < 0.5
        elif k == 20 and depth > 0:
            schema[_pick(r, ("if", "then", "else", "contains", "propertyNames", "dependentSchemas"))] = (
                gen_json_schema_obj(r, depth - 1))
        else:
            schema[_pick(r, ("x-guidance", "title", "description", "default", "examples", "$schema", "$id"))] = (
                _json_value(r))
    if t == "object" and "properties" not in schema and depth > 0 and r.random() < 0.5:
        schema["properties"] = {_key(r): gen_json_schema_obj(r, depth - 1)}
    return schema


def gen_json_schema(r: random.Random) -> str:
    """A JSON Schema as JSON text for `Grammar.json_schema`: often valid, sometimes broken JSON."""
    _start(r)
    text = json.dumps(gen_json_schema_obj(r), ensure_ascii=r.random() < 0.5)
    if r.random() < 0.15:
        return mutate(r, text)
    return text


# -- structural tags ---------------------------------------------------------------------------

_TAG_TEXTS = ("<t>", "</t>", "<f", "<f1>", "</f>", "[", "]", "ab", "\n", "<think>", "</think>", "<|endoftext|>", "é", "")


def _tag_text(r: random.Random) -> str:
    return _pick(r, _TAG_TEXTS) if r.random() < 0.8 else "".join(_literal_char(r) for _ in range(r.randint(0, 4)))


def gen_structural_tag_obj(r: random.Random, depth: int = 3) -> Any:
    """A structural-tag format: every type, nested, with valid fields most of the time."""
    leaf = depth <= 0 or r.random() < 0.3
    kinds = ("const_string", "any_text", "regex", "json_schema", "grammar", "token", "any_tokens") if leaf else (
        "sequence", "or", "tag", "optional", "star", "plus", "repeat", "triggered_tags", "tags_with_separator",
        "dispatch", "qwen_xml_parameter")
    kind = _pick(r, kinds)
    if r.random() < 0.03:
        kind = _pick(r, ("nonsense", "", 5, None))
    sub = lambda: gen_structural_tag_obj(r, depth - 1)  # noqa: E731
    node: dict[str, Any] = {"type": kind}
    if kind == "const_string":
        node["value"] = _tag_text(r)
    elif kind == "any_text":
        if r.random() < 0.3:
            node["excludes"] = [_tag_text(r) for _ in range(r.randint(0, 2))]
        if r.random() < 0.2:
            node["max_chars"] = _count(r)
    elif kind == "regex":
        node["pattern"] = gen_regex_raw(r, 2)
    elif kind in ("json_schema", "qwen_xml_parameter"):
        node["json_schema"] = gen_json_schema_obj(r, 2)
        if r.random() < 0.3:
            node["style"] = _pick(r, ("json", "qwen_xml", "minimax_xml"))
    elif kind == "grammar":
        node["grammar"] = gen_gbnf_raw(r) if r.random() < 0.3 else 'root ::= "x" [0-9]*'
    elif kind == "token":
        node["token"] = _pick(r, ("<|endoftext|>", 0, 50256, -1, 10**9, "x", "nope"))
    elif kind == "any_tokens":
        node["max_tokens"] = _pick(r, (1, 3, 0, -1))
    elif kind in ("sequence", "or"):
        node["elements"] = [sub() for _ in range(r.randint(0 if r.random() < 0.05 else 1, 4))]
    elif kind in ("optional", "star", "plus"):
        node["content"] = sub()
    elif kind == "repeat":
        node.update(content=sub(), min=_pick(r, (0, 1, 2, 5, -1, 300)), max=_pick(r, (-1, 1, 3, 10, 256, 0)))
    elif kind == "tag":
        node.update(begin=_tag_text(r), content=sub(), end=_tag_text(r) if r.random() < 0.8 else [_tag_text(r), _tag_text(r)])
    elif kind == "triggered_tags":
        node["triggers"] = ["<f"] if r.random() < 0.8 else [_tag_text(r)]
        node["tags"] = [{"type": "tag", "begin": _pick(r, ("<f1>", "<f2>", "<g>")), "content": sub(), "end": "</f>"}
                        for _ in range(r.randint(1, 3))]
        node.update(at_least_one=r.random() < 0.3, stop_after_first=r.random() < 0.3)
        if r.random() < 0.3:
            node["excludes"] = [_tag_text(r)]
    elif kind == "tags_with_separator":
        node["tags"] = [{"type": "tag", "begin": _tag_text(r), "content": sub(), "end": _tag_text(r)} for _ in range(r.randint(1, 2))]
        node.update(separator=_pick(r, (",", "\n", "")), at_least_one=r.random() < 0.5)
    elif kind == "dispatch":
        node["rules"] = [[_pick(r, ("<a>", "<b>", "x")), sub()] for _ in range(r.randint(1, 2))]
    return node


def gen_structural_tag(r: random.Random) -> str:
    """A structural tag as JSON text for `Grammar.structural_tag`: often valid, sometimes broken."""
    _start(r)
    text = json.dumps({"type": "structural_tag", "format": gen_structural_tag_obj(r)})
    if r.random() < 0.1:
        return mutate(r, text)
    return text


# -- token programs ---------------------------------------------------------------------------

# Grammars the token programs drive (chosen by index; each kind of front-end, multi-byte text,
# an EOS-only end and a stop).
PROGRAM_GRAMMARS = (
    ("regex", "日本語[ぁ-ん]{0,3}|[a-z]{1,6}( [a-z]{1,6}){0,3}|🙂+"),
    ("regex", "[0-9]{1,4}"),
    ("json", json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string",
                         "maxLength": 5}}, "required": ["a"], "additionalProperties": False})),
    ("lark", 'start: item ("," item)*\nitem: /[a-z]+/ | NUMBER | "é"\nNUMBER: /[0-9]+/\n%ignore " "\n'),
    ("gbnf", 'root ::= "(" root* ")" | [α-ω]\n'),
    ("regex", ""),
)

_BAD_IDS = (-1, -2, -(2**31), 2**31, 2**32, 2**32 + 5, 2**64, 10**30, True, False, 1.0, 2.5, float("nan"),
            "5", b"5", None, [1], object())


@dataclass
class Op:
    """One step of a token program: a method name and its arguments (JSON-able for the corpus;
    ids are symbolic — `"allowed"`, `"any"`, `"eos"`, `"split"`, `"bad:i"` — resolved at run time
    by the program's own random stream)."""

    name: str
    args: list[Any] = field(default_factory=list)

    def to_json(self) -> list[Any]:
        return [self.name, *self.args]


def _sym_id(r: random.Random) -> Any:
    roll = r.random()
    if roll < 0.45:
        return "allowed"
    if roll < 0.6:
        return "any"
    if roll < 0.7:
        return "eos"
    if roll < 0.82:
        return "split"  # a token that ends inside a UTF-8 character
    return f"bad:{r.randrange(len(_BAD_IDS))}"


def gen_token_program(r: random.Random) -> dict[str, Any]:
    """A token program: a grammar of `PROGRAM_GRAMMARS` and a list of `Op`s on a set of
    matchers (index 0 is the first; forks append), JSON-able."""
    ops: list[Op] = []
    for _ in range(r.randint(1, 30)):
        k = r.randrange(100)
        m = r.randrange(4)  # which live matcher (modulo their number)
        if k < 22:
            ops.append(Op("consume", [m, _sym_id(r)]))
        elif k < 30:
            ops.append(Op("consume_tokens", [m, [_sym_id(r) for _ in range(r.randint(0, 5))]]))
        elif k < 36:
            ops.append(Op("validate_tokens", [m, [_sym_id(r) for _ in range(r.randint(0, 5))]]))
        elif k < 44:
            ops.append(Op("consume_and_fill", [m, _sym_id(r), _bad_array_spec(r)]))
        elif k < 52:
            ops.append(Op("rollback", [m, _pick(r, (0, 1, 2, 3, 50, -1, 2**40, 1.5, None, "1", True))]))
        elif k < 55:
            ops.append(Op("reset", [m]))
        elif k < 63:
            ops.append(Op("fork", [m, _pick(r, (1, 1, 2, 5, 50, 300))]))
        elif k < 68:
            ops.append(Op("drop", [m]))
        elif k < 78:
            ops.append(Op("fill_bitmask", [m, _bad_array_spec(r)]))
        elif k < 82:
            ops.append(Op("ff", [m, _pick(r, (0, 1, 4, -1, 100, 2.0))]))
        elif k < 86:
            ops.append(Op("heal_position", [m, _random_bytes_hex(r), _pick(r, (0, 1, 3, -1, 1000))]))
        elif k < 90:
            ops.append(Op("validate_text", [m, _random_bytes_hex(r)]))
        elif k < 93:
            ops.append(Op("extension_allowed", [m, _random_bytes_hex(r), _random_bytes_hex(r)]))
        elif k < 97:
            ops.append(Op("draft_masks", [m, [_sym_id(r) for _ in range(r.randint(0, 6))], _bad_array_spec(r)]))
        else:
            ops.append(Op("state", [m]))
    return {"grammar": r.randrange(len(PROGRAM_GRAMMARS)), "seed": r.randrange(2**32),
            "ops": [op.to_json() for op in ops]}


def _bad_array_spec(r: random.Random) -> list[Any]:
    """How the bitmask argument is made: [kind, rows, row] (kind "ok" is a good array)."""
    kind = _pick(r, ("ok", "ok", "ok", "ok", "int64", "uint32", "float32", "short", "long", "3d", "1d", "readonly",
                     "strided", "list", "none", "bytearray", "fortran"))
    rows = _pick(r, (1, 1, 2, 4))
    row = _pick(r, (0, 0, 0, 1, 3, -1, -5, 4, 2**40, True, 1.0, None, "0"))
    return [kind, rows, row]


def _random_bytes_hex(r: random.Random) -> str:
    roll = r.random()
    if roll < 0.3:
        data = "".join(_pick(r, BYSTANDER_WORDS + ("日本語", "ぁ", "abc", " ", "1", ",")) for _ in range(r.randint(0, 3)))
        raw = data.encode("utf-8")
        if raw and r.random() < 0.5:
            raw = raw[: r.randrange(len(raw))]  # cut inside a character
        return raw.hex()
    return bytes(r.randrange(256) for _ in range(r.randint(0, 12))).hex()


# -- running one input ------------------------------------------------------------------------


class FuzzFailure(Exception):
    """An input broke the promise; `what` is the failure's class, the message its detail."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}")
        self.what = what
        self.detail = detail


class _InputTimeout(BaseException):
    """Raised by the alarm when one input runs past `input_s_max` (a hang)."""


@dataclass
class FuzzStats:
    """Counts by outcome (`ok`, `grammar_error`, `limit:<name>`, `error:<class>`) and failures."""

    inputs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    worst_step_ms: float = 0.0
    worst_step_what: str = ""
    worst_compile_s: float = 0.0
    bystander_checks: int = 0

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


class Bystander:
    """A matcher on a finite set of words, in the same core instance as the fuzz inputs, whose
    masks are checked against an oracle computed from the token bytes in Python."""

    def __init__(self, tokenizer: Any, words: Sequence[str] = BYSTANDER_WORDS) -> None:
        from .._grammar.grammar import Grammar
        from .._decoding.matcher import Matcher

        self.tokenizer = tokenizer
        self.words = [w.encode("utf-8") for w in words]
        self.grammar = Grammar.regex("|".join(_regex_escape(w) for w in words))
        self.matcher = Matcher(tokenizer, self.grammar)
        self.prefix = b""
        self._expected: dict[bytes, set[int]] = {}
        # Tokens by their first byte: the oracle only looks at tokens that can start a rest.
        self._by_first: dict[int, list[tuple[int, bytes]]] = {}
        for t in range(tokenizer.vocab_size):
            if tokenizer.is_special(t) or t in tokenizer.eos_token_ids:
                continue
            data = tokenizer.token_bytes(t)
            if data:
                self._by_first.setdefault(data[0], []).append((t, data))

    def expected(self, prefix: bytes) -> set[int]:
        """The oracle: token ids allowed after `prefix` (EOS when `prefix` is a word)."""
        found = self._expected.get(prefix)
        if found is None:
            rests = [w[len(prefix):] for w in self.words if w.startswith(prefix) and len(w) > len(prefix)]
            found = {t for rest in rests for t, data in self._by_first.get(rest[0], ()) if rest.startswith(data)}
            if prefix in self.words:
                found |= set(self.tokenizer.eos_token_ids)
            self._expected[prefix] = found
        return found

    def check(self, r: random.Random) -> None:
        """Compare the mask with the oracle, then take one step (a random allowed token, a
        rollback, or a reset at the end of a word)."""
        from .._decoding.matcher import mask_token_ids

        got = set(mask_token_ids(self.matcher.compute_bitmask(), self.matcher.vocab_size))
        want = self.expected(self.prefix)
        if got != want:
            extra, missing = sorted(got - want)[:5], sorted(want - got)[:5]
            raise FuzzFailure("bystander", f"after {self.prefix!r}: mask allows {extra} (not allowed) and "
                              f"refuses {missing} (allowed); {len(got)} vs {len(want)} tokens")
        choices = sorted(t for t in want if t not in self.tokenizer.eos_token_ids)
        if not choices or r.random() < 0.1:
            self.matcher.reset()
            self.prefix = b""
            return
        if self.prefix and r.random() < 0.15:
            tokens = self.matcher.consumed_tokens
            self.matcher.rollback(1)
            self.prefix = self.prefix[: len(self.prefix) - len(self.tokenizer.token_bytes(tokens[-1]))]
            return
        token = _pick(r, choices)
        if not self.matcher.consume_token(token):
            raise FuzzFailure("bystander", f"after {self.prefix!r}: refused token {token}, which its mask allows")
        self.prefix += self.tokenizer.token_bytes(token)


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_META or c in "/-" else c for c in text)


class Fuzzer:
    """Runs fuzz inputs against one tokenizer in the default pool and classifies the outcomes.

    Args:
        tokenizer: the tokenizer every matcher uses.
        step_ms_max: a step call (mask, consume, forced bytes …) slower than this fails (CPU
            time of the calling thread, so that a busy machine does not fail a step).
        compile_s_max: building a grammar and its first matcher slower than this fails (CPU).
        input_s_max: one input using more CPU than this is cut off (an alarm) and fails as a hang.
        bystander_every: check the bystander every this many inputs (0: never).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        step_ms_max: float = STEP_MS_MAX_DEFAULT,
        compile_s_max: float = COMPILE_S_MAX_DEFAULT,
        input_s_max: float = INPUT_S_MAX_DEFAULT,
        bystander_every: int = 25,
    ) -> None:
        import numpy as np

        self.np = np
        self.tokenizer = tokenizer
        self.step_ms_max = step_ms_max
        self.compile_s_max = compile_s_max
        self.input_s_max = input_s_max
        self.bystander_every = bystander_every
        self.stats = FuzzStats()
        self._last_step_ms = 0.0
        self.words = (tokenizer.vocab_size + 31) // 32
        self.bystander = Bystander(tokenizer) if bystander_every else None
        self._bystander_rng = random.Random(0)
        self._program_grammars: dict[int, Any] = {}
        self._split_tokens = [t for t in range(tokenizer.vocab_size) if _splits_utf8(tokenizer.token_bytes(t))]
        # One-time costs are not step costs: the tokenizer's encoder (built on first use, about
        # 0.15 s for GPT-2) and the trie in the instance (built by the bystander's matcher).
        tokenizer.encode("warm up")
        # The oracle's tables are large and live for the whole run: keep them out of the
        # cyclic GC, whose full passes over them would be charged to whichever step they hit.
        gc.collect()
        gc.freeze()

    # -- the entry point

    def run(self, kind: str, value: Any) -> str:
        """Run one input (a grammar text for the grammar kinds, a program for `tokens`); return
        its outcome, or raise `FuzzFailure`."""
        self.stats.inputs += 1
        # A CPU-time alarm (ITIMER_PROF): on a machine shared with other work a wall-clock one
        # cut off inputs that were only waiting for a core.
        use_alarm = self.input_s_max > 0 and hasattr(signal, "ITIMER_PROF")
        if use_alarm:
            previous = signal.signal(signal.SIGPROF, _alarm)
            signal.setitimer(signal.ITIMER_PROF, self.input_s_max)
        try:
            outcome = self._run(kind, value)
        except _InputTimeout:
            raise FuzzFailure("hang", f"one input ran past {self.input_s_max:g} s of CPU") from None
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_PROF, 0)
                signal.signal(signal.SIGPROF, previous)
        self.stats.count(f"{kind} {outcome}")
        if self.bystander is not None and self.stats.inputs % self.bystander_every == 0:
            self.check_bystander()
        return outcome

    def check_bystander(self) -> None:
        if self.bystander is not None:
            self.stats.bystander_checks += 1
            try:
                self.bystander.check(self._bystander_rng)
            except FuzzFailure:
                raise
            except Exception as err:
                raise FuzzFailure("bystander", f"{type(err).__name__}: {err}") from err

    def _run(self, kind: str, value: Any) -> str:
        if kind == "tokens":
            return self._run_program(value)
        try:
            grammar, matcher = self._compile(kind, value)
        except FuzzFailure:
            raise
        except Exception as err:
            return self._expected_error(err, "compiling")
        try:
            return self._walk(matcher, random.Random(zlib.crc32(value.encode("utf-8", "surrogatepass"))))
        except FuzzFailure:
            raise
        except Exception as err:
            return self._expected_error(err, "walking")

    def _compile(self, kind: str, text: str) -> tuple[Any, Any]:
        from .._grammar.grammar import Grammar
        from .._decoding.matcher import Matcher

        t0 = time.thread_time()
        try:
            if kind == "regex":
                grammar = Grammar.regex(text)
            elif kind == "lark":
                grammar = Grammar.lark(text, tokenizer=self.tokenizer)
            elif kind == "gbnf":
                grammar = Grammar.gbnf(text)
            elif kind == "json":
                grammar = Grammar.json_schema(text)
            elif kind == "tag":
                grammar = Grammar.structural_tag(text, tokenizer=self.tokenizer)
            else:
                raise ValueError(f"unknown fuzz kind {kind!r}")
            return grammar, Matcher(self.tokenizer, grammar)
        finally:
            seconds = time.thread_time() - t0
            self.stats.worst_compile_s = max(self.stats.worst_compile_s, seconds)
            if seconds > self.compile_s_max:
                raise FuzzFailure("slow_compile", f"compiling took {seconds:.2f} s (bound {self.compile_s_max:g} s)")

    def _expected_error(self, err: BaseException, where: str) -> str:
        """The outcome of an exception that ended an input, or a `FuzzFailure` when it is not
        one the promise allows."""
        from .._errors import CoreTrap, GrammarError, LimitError, TokensieveError

        if isinstance(err, CoreTrap):
            raise FuzzFailure("trap", f"{where}: {err}") from err
        if isinstance(err, LimitError):
            if err.limit is None:
                raise FuzzFailure("unnamed_limit", f"{where}: {err}") from err
            if err.limit == "deadline":
                if self._last_step_ms < self.step_ms_max:
                    # The call used little CPU: the process waited for a core past the
                    # wall-clock deadline (a busy machine), not a call the limits failed to bound.
                    return "limit:deadline(waiting)"
                raise FuzzFailure("deadline", f"{where}: {err}") from err
            return f"limit:{err.limit}"
        if isinstance(err, GrammarError):
            if (err.position is None and err.line is None and err.json_pointer is None and err.lexeme is None):
                raise FuzzFailure("grammar_error_without_place", f"{where}: {err}") from err
            return "grammar_error"
        if isinstance(err, TokensieveError):
            if not str(err):
                raise FuzzFailure("empty_message", f"{where}: {type(err).__name__}") from err
            return f"error:{type(err).__name__}"
        raise FuzzFailure("exception", f"{where}: {type(err).__name__}: {err}") from err

    def _timed(self, what: str, call: Callable[[], Any]) -> Any:
        # The CPU time of this thread: a machine shared with other work must not make a step
        # look slow (wasmtime runs the module in the calling thread). The collector is paused
        # during the call and its pending pass runs after the clock stops: a full pass over a
        # long-lived process's objects (a test run's) is not the step's work (a single `fork`
        # read 103 ms once in CI, 0.1 ms as a rule).
        @_collector_paused
        def timed() -> Any:
            t0 = time.thread_time()
            try:
                return call()
            finally:
                ms = self._last_step_ms = (time.thread_time() - t0) * 1e3
                if ms > self.stats.worst_step_ms:
                    self.stats.worst_step_ms, self.stats.worst_step_what = ms, what
                if ms > self.step_ms_max:
                    raise FuzzFailure("slow_step", f"{what} took {ms:.1f} ms (bound {self.step_ms_max:g} ms)")

        return timed()

    # -- grammar inputs: a random walk with mask / consume consistency

    def _walk(self, matcher: Any, r: random.Random, steps: int = WALK_STEPS) -> str:
        np = self.np
        buf = np.zeros((1, self.words), dtype=np.int32)
        eos = set(self.tokenizer.eos_token_ids)
        for step in range(steps):
            self._timed("compute_ff_bytes", matcher.compute_ff_bytes)
            self._timed("fill_bitmask", lambda: matcher.fill_bitmask(buf))
            allowed = _mask_ids(np, buf[0], self.tokenizer.vocab_size)
            accepting = self._timed("is_accepting", matcher.is_accepting)
            eos_allowed = any(_bit(buf[0], t) for t in eos)
            if eos_allowed != accepting:
                raise FuzzFailure("mask_vs_state", f"step {step}: EOS allowed={eos_allowed}, is_accepting={accepting}")
            # A token the mask refuses must be refused by consume (state unchanged).
            probe = r.randrange(self.tokenizer.vocab_size)
            if not _bit(buf[0], probe):
                if self._timed("consume_token", lambda: matcher.consume_token(probe)):
                    raise FuzzFailure("mask_vs_consume", f"step {step}: token {probe} is refused by the mask but consumed")
            if len(allowed) == 0:
                return "ok"
            token = int(allowed[r.randrange(len(allowed))])
            if not self._timed("consume_token", lambda: matcher.consume_token(token)):
                raise FuzzFailure("mask_vs_consume", f"step {step}: token {token} is allowed by the mask but refused")
            if token in eos:
                return "ok"
        return "ok"

    # -- token programs

    def _program_grammar(self, index: int) -> Any:
        from .._grammar.grammar import Grammar

        grammar = self._program_grammars.get(index)
        if grammar is None:
            kind, text = PROGRAM_GRAMMARS[index % len(PROGRAM_GRAMMARS)]
            build = {"regex": Grammar.regex, "json": Grammar.json_schema, "gbnf": Grammar.gbnf,
                     "lark": lambda t: Grammar.lark(t, tokenizer=self.tokenizer)}[kind]
            grammar = self._program_grammars[index] = build(text)
        return grammar

    def _run_program(self, program: dict[str, Any]) -> str:
        from .._decoding.matcher import Matcher

        r = random.Random(program.get("seed", 0))
        matchers: list[tuple[Any, list[int]]] = [(Matcher(self.tokenizer, self._program_grammar(program["grammar"])), [])]
        outcome = "ok"
        for i, raw in enumerate(program["ops"]):
            op = Op(raw[0], list(raw[1:]))
            if not matchers:
                matchers.append((Matcher(self.tokenizer, self._program_grammar(program["grammar"])), []))
            index = int(op.args[0]) % len(matchers) if op.args else 0
            try:
                self._op(op, matchers, index, r)
            except FuzzFailure as failure:
                raise FuzzFailure(failure.what, f"op {i} {raw!r}: {failure.detail}") from failure
            except Exception as err:
                outcome = self._expected_error(err, f"op {i} {op.name}")
                if outcome.startswith("limit:") or outcome == "grammar_error":
                    # A failed matcher: its calls raise until reset; reset it and go on.
                    matcher, shadow = matchers[index]
                    matcher.reset()
                    shadow.clear()
            for matcher, shadow in matchers:
                if matcher.consumed_tokens != shadow:
                    raise FuzzFailure("history", f"after op {i} {raw!r}: consumed_tokens "
                                      f"{matcher.consumed_tokens[-8:]} differ from {shadow[-8:]}")
        for matcher, shadow in matchers:
            count = matcher.token_count
            if count != len(shadow):
                raise FuzzFailure("history", f"token_count {count} but {len(shadow)} tokens consumed")
        return outcome

    def _resolve(self, sym: Any, matcher: Any, r: random.Random) -> Any:
        np = self.np
        vocab = self.tokenizer.vocab_size
        if sym == "allowed":
            mask = matcher.compute_bitmask()
            allowed = _mask_ids(np, mask, vocab)
            return int(allowed[r.randrange(len(allowed))]) if len(allowed) else r.randrange(vocab)
        if sym == "any":
            return r.randrange(vocab)
        if sym == "eos":
            return self.tokenizer.eos_token_ids[0] if self.tokenizer.eos_token_ids else 0
        if sym == "split":
            return _pick(r, self._split_tokens) if self._split_tokens else 0
        if isinstance(sym, str) and sym.startswith("bad:"):
            value = _BAD_IDS[int(sym[4:]) % len(_BAD_IDS)]
            if value == 2**31 and r.random() < 0.5:
                return np.int64(vocab)  # numpy ints are ids too
            return value
        return sym

    def _array(self, spec: list[Any]) -> tuple[Any, Any]:
        np = self.np
        kind, rows, row = spec
        words = self.words
        if kind == "ok":
            return np.zeros((rows, words), dtype=np.int32), row
        if kind in ("int64", "uint32", "float32"):
            return np.zeros((rows, words), dtype=kind), row
        if kind == "short":
            return np.zeros((rows, words - 1), dtype=np.int32), row
        if kind == "long":
            return np.zeros((rows, words + 1), dtype=np.int32), row
        if kind == "3d":
            return np.zeros((rows, 1, words), dtype=np.int32), row
        if kind == "1d":
            return np.zeros(words, dtype=np.int32), row
        if kind == "readonly":
            a = np.zeros((rows, words), dtype=np.int32)
            a.flags.writeable = False
            return a, row
        if kind == "strided":
            return np.zeros((rows, 2 * words), dtype=np.int32)[:, ::2], row
        if kind == "fortran":
            return np.zeros((max(rows, 2), words), dtype=np.int32, order="F"), row
        if kind == "list":
            return [[0] * words for _ in range(rows)], row
        if kind == "bytearray":
            return bytearray(4 * words * rows), row
        return None, row

    def _op(self, op: Op, matchers: list[tuple[Any, list[int]]], index: int, r: random.Random) -> None:
        matcher, shadow = matchers[index]
        name, args = op.name, op.args
        if name == "consume":
            token = self._resolve(args[1], matcher, r)
            # After EOS the mask keeps EOS set (a finished row of a batch stays valid) but
            # nothing more is consumed (see `Matcher`): no comparison there.
            ended = bool(shadow) and shadow[-1] in self.tokenizer.eos_token_ids
            allowed_before = None if ended else self._allowed(matcher, token)
            accepted = self._timed("consume_token", lambda: matcher.consume_token(token))
            if allowed_before is not None and accepted != allowed_before:
                raise FuzzFailure("mask_vs_consume", f"token {token}: mask allowed={allowed_before}, consume={accepted}")
            if accepted:
                shadow.append(int(token))
        elif name in ("consume_tokens", "validate_tokens"):
            tokens = [self._resolve(s, matcher, r) for s in args[1]]
            if name == "consume_tokens":
                if self._timed(name, lambda: matcher.consume_tokens(tokens)):
                    shadow.extend(int(t) for t in tokens)
            else:
                valid = self._timed(name, lambda: matcher.validate_tokens(tokens))
                if not 0 <= valid <= len(tokens):
                    raise FuzzFailure("result", f"validate_tokens returned {valid} for {len(tokens)} tokens")
        elif name == "consume_and_fill":
            token = self._resolve(args[1], matcher, r)
            array, row = self._array(args[2])
            if self._timed(name, lambda: matcher.consume_and_fill_bitmask(token, array, row)):
                shadow.append(int(token))
        elif name == "rollback":
            count = args[1]
            self._timed(name, lambda: matcher.rollback(count))
            if count:
                del shadow[-int(count):]
        elif name == "reset":
            self._timed(name, matcher.reset)
            shadow.clear()
        elif name == "fork":
            for _ in range(int(args[1])):
                copy = self._timed("fork", matcher.fork)
                matchers.append((copy, list(shadow)))
            if len(matchers) > 64:  # a storm: drop most of them again
                keep = [matchers[0]] + r.sample(matchers[1:], 8)
                matchers[:] = keep
        elif name == "drop":
            del matchers[index]
        elif name == "fill_bitmask":
            array, row = self._array(args[1])
            self._timed(name, lambda: matcher.fill_bitmask(array, row))
        elif name == "ff":
            lookback = args[1]
            self._timed("compute_ff_tokens", lambda: matcher.compute_ff_tokens(lookback=lookback))
        elif name == "heal_position":
            data, start = bytes.fromhex(args[1]), args[2]
            self._timed(name, lambda: matcher.heal_position(data, start))
        elif name == "validate_text":
            data = bytes.fromhex(args[1])
            valid, _ = self._timed(name, lambda: matcher.validate_text(data))
            if not 0 <= valid <= len(data):
                raise FuzzFailure("result", f"validate_text returned {valid} for {len(data)} bytes")
        elif name == "extension_allowed":
            prefix, suffix = bytes.fromhex(args[1]), bytes.fromhex(args[2])
            self._timed(name, lambda: matcher.extension_allowed(prefix, suffix))
        elif name == "draft_masks":
            tokens = [self._resolve(s, matcher, r) for s in args[1]]
            kind = args[2][0]
            array = None if kind == "ok" else self._array([kind, max(len(tokens) + 1, 1), 0])[0]
            valid, _ = self._timed(name, lambda: matcher.fill_draft_masks(tokens, array))
            if not 0 <= valid <= len(tokens):
                raise FuzzFailure("result", f"fill_draft_masks returned {valid} for {len(tokens)} tokens")
        elif name == "state":
            stopped = self._timed("is_stopped", matcher.is_stopped)
            accepting = self._timed("is_accepting", matcher.is_accepting)
            if stopped and shadow and shadow[-1] in self.tokenizer.eos_token_ids and not accepting:
                pass  # after EOS the matcher need not accept again
        else:
            raise ValueError(f"unknown op {name!r}")

    def _allowed(self, matcher: Any, token: Any) -> bool | None:
        """Whether the mask allows `token` (None when `token` is not a valid id)."""
        if type(token) is not int or not 0 <= token < self.tokenizer.vocab_size:
            return None
        try:
            mask = matcher.compute_bitmask()
        except Exception:
            return None
        return _bit(mask, token)


def _alarm(signum: int, frame: Any) -> None:
    raise _InputTimeout


def _bit(mask: Any, token: int) -> bool:
    return bool((int(mask[token >> 5]) >> (token & 31)) & 1)


def _mask_ids(np: Any, mask: Any, vocab: int) -> Any:
    bits = np.unpackbits(np.ascontiguousarray(mask).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab])


def _splits_utf8(data: bytes) -> bool:
    """Does `data` end inside a UTF-8 character (or start with a continuation byte)?"""
    if not data:
        return False
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


GENERATORS: dict[str, Callable[[random.Random], Any]] = {
    "regex": gen_regex,
    "lark": gen_lark,
    "gbnf": gen_gbnf,
    "json": gen_json_schema,
    "tag": gen_structural_tag,
    "tokens": gen_token_program,
}


def input_rng(seed: int, kind: str, index: int) -> random.Random:
    """The random stream of input `index` of `kind` under `seed` (replayable alone)."""
    return random.Random(f"{seed}:{kind}:{index}")


# -- the command ------------------------------------------------------------------------------


def add_fuzz_command(sub: Any) -> None:
    """Register `tokensieve fuzz`."""
    p = sub.add_parser("fuzz", help="fuzz grammar texts and token streams: every outcome a result or a named error",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--inputs", type=int, default=1_000_000, help="inputs to run (default 1,000,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kind", choices=(*KINDS, "all"), default="all")
    p.add_argument("--start", type=int, default=0, help="the first input index (resume or replay)")
    p.add_argument("--tokenizer", help="tokenizer.json(.gz) (default: the bundled GPT-2 tokenizer)")
    p.add_argument("--step-ms", type=float, default=STEP_MS_MAX_DEFAULT, help="a slower step call fails")
    p.add_argument("--compile-s", type=float, default=COMPILE_S_MAX_DEFAULT, help="a slower compile fails")
    p.add_argument("--every", type=int, default=1000, help="print counts every N inputs")
    p.add_argument("--failures", help="append failures to this JSON Lines file")
    p.add_argument("--stop-after", type=int, default=0, help="stop after this many failures (0: never)")
    p.set_defaults(run=_run_command)


def _run_command(args: Any) -> int:
    from .._core import configure
    from .._tokenizer.tokenizer import Tokenizer

    configure(instances=1)  # the bystander shares the instance with every input
    tokenizer = Tokenizer.from_file(args.tokenizer) if args.tokenizer else Tokenizer.default()
    fuzzer = Fuzzer(tokenizer, step_ms_max=args.step_ms, compile_s_max=args.compile_s)
    kinds = ALL_ROTATION if args.kind == "all" else (args.kind,)
    started = time.perf_counter()
    failures = 0
    out = open(args.failures, "a", encoding="utf-8") if args.failures else None
    try:
        for index in range(args.start, args.start + args.inputs):
            kind = kinds[index % len(kinds)]
            value = GENERATORS[kind](input_rng(args.seed, kind, index))
            try:
                fuzzer.run(kind, value)
            except FuzzFailure as failure:
                failures += 1
                fuzzer.stats.count(f"{kind} FAILED:{failure.what}")
                record = {"kind": kind, "seed": args.seed, "index": index, "what": failure.what,
                          "detail": failure.detail[:2000], "input": value}
                print(f"FAILURE #{failures} [{kind} {index}] {failure.what}: {failure.detail[:300]}", flush=True)
                if out:
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                if args.stop_after and failures >= args.stop_after:
                    break
            done = index - args.start + 1
            if done % args.every == 0:
                _print_counts(fuzzer.stats, done, failures, time.perf_counter() - started,
                              full=done % (args.every * 10) == 0)
    finally:
        if out:
            out.close()
    _print_counts(fuzzer.stats, fuzzer.stats.inputs, failures, time.perf_counter() - started, full=True)
    return 1 if failures else 0


def _print_counts(stats: FuzzStats, done: int, failures: int, seconds: float, *, full: bool = False) -> None:
    print(f"{done} inputs in {seconds:.0f} s ({done / max(seconds, 1e-9):.0f}/s), {failures} failures, "
          f"{stats.bystander_checks} bystander checks; worst step {stats.worst_step_ms:.1f} ms CPU "
          f"({stats.worst_step_what}), worst compile {stats.worst_compile_s:.2f} s CPU", flush=True)
    if full:
        by_kind: dict[str, list[tuple[str, int]]] = {}
        for key, n in stats.outcomes.items():
            kind, outcome = key.split(" ", 1)
            by_kind.setdefault(kind, []).append((outcome, n))
        for kind, rows in sorted(by_kind.items()):
            total = sum(n for _, n in rows)
            print(f"  {kind:>6} {total:>9}: " + ", ".join(f"{o} {n}" for o, n in sorted(rows, key=lambda r: -r[1])),
                  flush=True)


__all__ = ["Fuzzer", "FuzzFailure", "GENERATORS", "KINDS", "gen_regex", "gen_lark", "gen_gbnf", "gen_json_schema", "gen_structural_tag",
           "gen_token_program", "input_rng", "mutate"]
