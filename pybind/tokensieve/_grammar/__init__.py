"""Grammars: the front-ends that translate grammar text and schemas into the core's IR.

`grammar.py` holds the public `Grammar` (and its cache and `Limits`); `ir.py` the IR every
front-end produces; one module or package per front-end (JSON Schema, Lark, GBNF, structural
tags and tool calls); `charset.py` the character-class algebra they share.
"""

from .grammar import Grammar as Grammar
from .grammar import Limits as Limits
from .grammar import clear_grammar_cache as clear_grammar_cache
