"""Text to ids with the `tokenizers` library: a private copy of the real pipeline with the
text-changing steps off (prefix spaces, normal forms), and the greedy fallback for vocabularies
with no `tokenizer.json` pipeline. Without `tokenizers`, `pybpe.py` runs the same pipeline."""


from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from .._errors import TokenizerError
from .vocab import _components


KIND_TEXT: Final = 0

_SECTION_DEPTH_MAX: Final = 32


# --- encoders -------------------------------------------------------------------------------


class _JsonSource:
    """What `encode` needs to rebuild a tokenizer: the JSON text and our special contents."""

    __slots__ = ("raw", "special_contents", "needs_rewrite")

    def __init__(self, raw: bytes, special_contents: frozenset[str], needs_rewrite: bool) -> None:
        self.raw = raw
        self.special_contents = special_contents
        # True when the JSON must be edited before `tokenizers` loads it: some added token's
        # `special` flag is not our decision, or a step inserts a prefix space.
        self.needs_rewrite = needs_rewrite

    def encoding_doc(self) -> dict[str, Any]:
        """Parse the JSON as `encode` runs it: our special flags, no text-changing steps."""
        doc: dict[str, Any] = json.loads(self.raw)
        for token in doc.get("added_tokens") or []:
            token["special"] = token["content"] in self.special_contents
        _make_byte_exact(doc)
        return doc


class _Encoder(Protocol):
    def encode_str(self, text: str) -> list[int]:
        """Encode valid text (no prefix space, no special tokens)."""
        ...


_TEXT_CHANGING_NORMALIZERS: Final = frozenset({"Prepend", "NFC", "NFD", "NFKC", "NFKD"})


def _pipeline_copy(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return a deep copy of the sections `_make_byte_exact` edits (to test without mutating)."""
    sections = {"normalizer": doc.get("normalizer"), "pre_tokenizer": doc.get("pre_tokenizer")}
    copy: dict[str, Any] = json.loads(json.dumps(sections))
    return copy


def _without_text_changing(node: Any, depth: int) -> tuple[Any, bool]:
    """Return a normalizer section without its text-changing steps, and whether it had any."""
    if not isinstance(node, dict):
        return node, False
    if depth > _SECTION_DEPTH_MAX:
        raise TokenizerError(
            f"tokenizer.json nests Sequence sections deeper than {_SECTION_DEPTH_MAX}; "
            "flatten the normalizer section"
        )
    if node.get("type") in _TEXT_CHANGING_NORMALIZERS:
        return None, True
    if node.get("type") != "Sequence":
        return node, False
    kept = []
    changed = False
    for child in node.get("normalizers") or []:
        child, child_changed = _without_text_changing(child, depth + 1)
        changed |= child_changed
        if child is not None:
            kept.append(child)
    node["normalizers"] = kept
    return node, changed


def _make_byte_exact(doc: dict[str, Any]) -> bool:
    """Turn off the steps that change the text (prefix spaces, Unicode normal forms).

    Returns whether any step was on.
    """
    doc["normalizer"], changed = _without_text_changing(doc.get("normalizer"), 0)
    for component in _components(doc.get("pre_tokenizer")):
        if component.get("type") == "ByteLevel" and component.get("add_prefix_space"):
            component["add_prefix_space"] = False
            changed = True
        if component.get("type") == "Metaspace":
            if component.get("prepend_scheme", "always") != "never" or component.get(
                "add_prefix_space"
            ):
                component["prepend_scheme"] = "never"
                component["add_prefix_space"] = False
                changed = True
    return changed


class _HfEncoder:
    """Encodes with a private copy of the real tokenizer; special-token text stays text."""

    def __init__(self, tokenizers: Any, source: _JsonSource) -> None:
        self._tokenizers = tokenizers
        if source.needs_rewrite:
            self._tokenizer = self._load(json.dumps(source.encoding_doc()))
        else:
            self._tokenizer = self._load(source.raw)

    def _load(self, json_text: bytes | str) -> Any:
        """Load a tokenizers.Tokenizer that never adds or parses special tokens."""
        try:
            if isinstance(json_text, bytes):
                tokenizer = self._tokenizers.Tokenizer.from_buffer(json_text)
            else:
                tokenizer = self._tokenizers.Tokenizer.from_str(json_text)
        except Exception as err:  # noqa: BLE001 - the library's own errors (ValueError, its Exception)
            raise TokenizerError(f"tokenizer.json: the tokenizers library cannot load it: {err}") from None
        tokenizer.encode_special_tokens = True
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def encode_str(self, text: str) -> list[int]:
        """Encode valid text with `tokenizers` (add_special_tokens=False)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


class _GreedyEncoder:
    """Greedy longest-match over text tokens, for tokenizers given as bare byte strings."""

    def __init__(self, token_bytes: Sequence[bytes], kinds: bytearray) -> None:
        self._ids: dict[bytes, int] = {}
        for token_id, data in enumerate(token_bytes):
            if kinds[token_id] == KIND_TEXT:
                self._ids.setdefault(data, token_id)
        self._length_max = max((len(data) for data in self._ids), default=0)

    def encode_str(self, text: str) -> list[int]:
        """Encode by taking the longest text token at each position."""
        data = text.encode("utf-8")
        ids: list[int] = []
        position = 0
        while position < len(data):
            for length in range(min(self._length_max, len(data) - position), 0, -1):
                token_id = self._ids.get(data[position : position + length])
                if token_id is not None:
                    ids.append(token_id)
                    position += length
                    break
            else:
                raise TokenizerError(
                    f"no token matches the byte 0x{data[position]:02X} at byte offset "
                    f"{position}; the vocabulary given to from_token_bytes cannot encode it"
                )
        return ids


# The pure-Python pipeline: normalizers, pre-tokenizers and the BPE model, as `tokenizers`
# runs them. Each normalizer maps text -> text; each pre-tokenizer maps (pieces, at_start) ->
# pieces, where at_start says pieces[0] starts the input.
