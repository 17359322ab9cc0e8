"""JSON Schema to IR: `compiler.py` translates, `logic.py` handles negation and the boolean
combinators, `instance.py` checks concrete JSON values against a schema."""

from .compiler import json_schema_to_ir as json_schema_to_ir
