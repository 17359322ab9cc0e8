"""The `x-guidance` object of a schema: llguidance's compile options, written into the schema.

Schemas written for llguidance may carry `"x-guidance": {...}` at the top level; llguidance
reads its options from there (and ignores the same key deeper down, as do we). The meaning
follows llguidance:

- `item_separator`, `key_separator`: **regexes** (not literal texts) for the text between
  items or properties and between a key and its value; `","` and `":"` by default.
- `whitespace_flexible` (default true): JSON whitespace `[ \\t\\n\\r]+` may appear between
  lexemes; false: none. `whitespace_pattern` (a regex) replaces it when given.
- `lenient`: unsupported keywords become warnings (the grammar accepts a superset).
- `coerce_one_of`: `oneOf` is translated as `anyOf` (a superset where options overlap). Without
  it, tokensieve's `oneOf` is exact where it can be (`docs/json_schema.md`), where llguidance
  refuses overlapping options.
- `json_allowed_escapes` and `json_allow_general_unicode_escapes` are accepted with their
  default values only; other values are refused (tokensieve's strings have one escape set).

A key llguidance does not know, or a value of the wrong type, is a `GrammarError` whose
`json_pointer` names it, as llguidance refuses them too. Options missing from the object keep
the values the caller gave (`Grammar.json_schema`'s keyword arguments; llguidance's defaults
for `%json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._errors import GrammarError

_TYPES: dict[str, tuple[type, ...]] = {
    "item_separator": (str,),
    "key_separator": (str,),
    "whitespace_flexible": (bool,),
    "whitespace_pattern": (str, type(None)),
    "coerce_one_of": (bool,),
    "lenient": (bool,),
    "json_allowed_escapes": (str, type(None)),
    "json_allow_general_unicode_escapes": (bool,),
}
_DEFAULT_ESCAPES = frozenset('nrbtf\\"u')


@dataclass(frozen=True)
class XGuidance:
    """The options an `x-guidance` object sets (None: not set)."""

    item_separator: str | None = None
    key_separator: str | None = None
    whitespace_flexible: bool | None = None
    whitespace_pattern: str | None = None
    lenient: bool | None = None
    coerce_one_of: bool | None = None

    def whitespace(self, default: str) -> str:
        """The `whitespace` argument of `json_schema_to_ir`: "flexible", "compact" or a regex."""
        if self.whitespace_pattern is not None:
            return self.whitespace_pattern
        if self.whitespace_flexible is None:
            return default
        return "flexible" if self.whitespace_flexible else "compact"


def split_x_guidance(schema: Any) -> tuple[Any, XGuidance | None]:
    """The schema without its top-level `x-guidance`, and the options that object sets.

    Raises:
        GrammarError: an unknown key, a value of the wrong type, or an unsupported value;
            `json_pointer` names it.
    """
    if not isinstance(schema, dict) or "x-guidance" not in schema:
        return schema, None
    options = schema["x-guidance"]
    rest = {k: v for k, v in schema.items() if k != "x-guidance"}
    if not isinstance(options, dict):
        raise GrammarError("x-guidance must be an object of compile options", json_pointer="/x-guidance")
    for key, value in options.items():
        pointer = "/x-guidance/" + key.replace("~", "~0").replace("/", "~1")
        types = _TYPES.get(key)
        if types is None:
            raise GrammarError(
                f"unknown x-guidance option {key!r}; the options are {', '.join(_TYPES)}", json_pointer=pointer
            )
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            wanted = " or ".join("null" if t is type(None) else {str: "a string", bool: "a boolean"}[t] for t in types)
            raise GrammarError(f"x-guidance option {key} must be {wanted}, not {value!r}", json_pointer=pointer)
        if key == "json_allowed_escapes" and value is not None and frozenset(value) != _DEFAULT_ESCAPES:
            raise GrammarError(
                "x-guidance option json_allowed_escapes is not supported (tokensieve's JSON strings allow "
                'the escapes n r b t f \\ " u); remove it',
                json_pointer=pointer,
            )
        if key == "json_allow_general_unicode_escapes" and value:
            raise GrammarError(
                "x-guidance option json_allow_general_unicode_escapes is not supported; remove it",
                json_pointer=pointer,
            )
    return rest, XGuidance(
        item_separator=options.get("item_separator"),
        key_separator=options.get("key_separator"),
        whitespace_flexible=options.get("whitespace_flexible"),
        whitespace_pattern=options.get("whitespace_pattern"),
        lenient=options.get("lenient"),
        coerce_one_of=options.get("coerce_one_of"),
    )
