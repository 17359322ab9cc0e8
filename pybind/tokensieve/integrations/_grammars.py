"""Grammars from the request types serving engines pass, compiled once per distinct request.

Engines send the same schema or regex with many requests; a `Grammar` is compiled once per
(kind, text, options) here and reused (its core compilation, per core instance, is cached in
the Grammar itself). The cache is bounded.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from .._core.fork import renew_global_lock_after_fork
from .._errors import GrammarError
from .._grammar.grammar import Grammar

_CACHE_ENTRIES_MAX = 1024
_cache: OrderedDict[tuple[Any, ...], tuple[Any, Grammar]] = OrderedDict()
_lock = threading.Lock()
renew_global_lock_after_fork(globals(), "_lock")

KINDS = ("json", "json_object", "regex", "grammar", "lark", "gbnf", "ebnf", "choice", "structural_tag")


def is_gbnf(text: str) -> bool:
    """GBNF / EBNF (`rule ::= …`) rather than the Lark-like syntax (`rule: …`)."""
    return "::=" in text


def grammar_for(kind: str, spec: Any, *, tokenizer: Any = None, whitespace: str = "flexible") -> Grammar:
    """The grammar for one engine request.

    Args:
        kind: `json` (a JSON Schema, as text or parsed), `json_object` (any JSON object),
            `regex`, `grammar` (Lark-like or GBNF, told apart by `::=`), `lark`, `gbnf` / `ebnf`,
            `choice` (a list of strings, or its JSON text), `structural_tag` (XGrammar's
            structural-tag JSON).
        spec: the request's grammar text or value.
        tokenizer: the model's tokenizer (special tokens in Lark grammars and structural tags).
        whitespace: JSON whitespace: `"flexible"`, `"compact"` or a regex per gap.

    Raises:
        GrammarError: the spec is invalid or unsupported, with its place.
    """
    text = spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True)
    key = (kind, text, whitespace, id(tokenizer) if tokenizer is not None else None)
    with _lock:
        found = _cache.get(key)
        # The entry holds its tokenizer: an id can be reused once a tokenizer is freed.
        if found is not None and found[0] is tokenizer:
            _cache.move_to_end(key)
            return found[1]
    grammar = _build(kind, spec, tokenizer=tokenizer, whitespace=whitespace)
    with _lock:
        _cache[key] = (tokenizer, grammar)
        while len(_cache) > _CACHE_ENTRIES_MAX:
            _cache.popitem(last=False)
    return grammar


def _build(kind: str, spec: Any, *, tokenizer: Any, whitespace: str) -> Grammar:
    if kind == "json":
        return Grammar.json_schema(spec, whitespace=whitespace)
    if kind == "json_object":
        return Grammar.json_schema({"type": "object"}, whitespace=whitespace)
    if kind == "regex":
        return Grammar.regex(spec)
    if kind == "grammar":
        kind = "gbnf" if is_gbnf(spec) else "lark"
    if kind == "lark":
        return Grammar.lark(spec, tokenizer=tokenizer)
    if kind in ("gbnf", "ebnf"):
        return Grammar.gbnf(spec)
    if kind == "choice":
        options = json.loads(spec) if isinstance(spec, str) else spec
        return Grammar.choice(options)
    if kind == "structural_tag":
        return Grammar.structural_tag(spec, tokenizer=tokenizer)
    raise GrammarError(f"unknown grammar request kind {kind!r}; use one of {KINDS}")
