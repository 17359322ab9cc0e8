"""Tokenizer loading: the byte string of every token id, which ids are special, which end text.

The core never sees a tokenizer. It sees three flat tables (`Tokenizer.core_tables`): the bytes
of every id, where each one starts, and one kind byte per id (text, special, unused). This
module exists to get those bytes exactly right for real tokenizers, and to turn text back into
the ids the real tokenizer would choose (`Tokenizer.encode`, used by fast-forward healing and
prompt lookup).

Sources. A Hugging Face `tokenizer.json` is parsed with the standard `json` module, so loading
works under Pyodide, where `tokenizers`, `numpy` and `transformers` are absent. `from_hf` takes
the same JSON from a live `tokenizers.Tokenizer` (or a `transformers` fast tokenizer's backend),
and `from_token_bytes` takes the byte strings directly.

Token bytes. The flavour is read from the `decoder`, `pre_tokenizer` and `normalizer` sections,
never from file names:

- byte-level BPE (GPT-2, Llama-3, Qwen): each character of a vocab string stands for one byte
  through GPT-2's byte-to-unicode alphabet (`Ġ` is the space). All vocab strings are joined, sent
  through one `str.translate` and encoded as latin-1, then sliced back by length: the Llama-3
  vocabulary (128k tokens) converts in about 30 ms. A string with a character outside the
  alphabet is taken as its UTF-8 bytes, as the `tokenizers` ByteLevel decoder does.
- SentencePiece-style (Mistral, Gemma, Llama-2): `▁` (or the file's Metaspace replacement) is a
  space, and with byte fallback `<0xNN>` is the single raw byte NN. Gemma holds a literal "\\t"
  at id 226, where `<0x09>` would be; the rule gives it b"\\t" with no special case.
- anything else decodes as the UTF-8 of the vocab string; decoders that would change bytes in
  ways not modelled here (WordPiece `##`, BPE `</w>` suffixes, CTC) are rejected.

Added tokens (`added_tokens`) are their `content` as UTF-8.

Kinds. Every id `< vocab_size` is one of: text (0, in the core's token trie, matched by grammar
text), special (1, never matched by grammar text), unused (2: holes in the id space and the
padding ids `n_tokens <= id < vocab_size`; never allowed). Special means: an added token whose
`special` flag is true; an added token with no `special` flag whose content is shaped `<...>`;
any end-of-sequence id. The file's explicit flag wins over the shape, so Qwen's non-special
added tokens (`<tool_call>`, `<|fim_prefix|>`, ...) stay text tokens, matched by grammar text
exactly as the real tokenizer produces them from text.

End-of-sequence ids. Passed explicitly, or else from `tokenizer_config.json` (`eos_token`) and
`generation_config.json` (`eos_token_id`, an int or a list) found beside the file or on the hub,
or else guessed: every added token whose content is one of `_EOS_TOKEN_NAMES`
(`<|end_of_text|>`, `<|endoftext|>`, `</s>`, `<eos>`, `<|eot_id|>`, `<|im_end|>`, `<|end|>`).
Only added tokens count, so a vocab entry `</s>` (Gemma's HTML tag) is never an EOS.

Encoding. `encode` returns ids whose bytes are exactly the input: `decode(encode(x)) == x`,
which fast-forward healing relies on. So it never adds BOS/EOS, and the pipeline steps that
would change the text are turned off: prefix spaces (a `Prepend("▁")` normalizer as in
Mistral/Llama-2, ByteLevel `add_prefix_space`, a Metaspace prepend scheme) and Unicode normal
forms (Qwen's NFC). Text is tokenized as in the middle of a generation. For tokenizers without
such steps (GPT-2, Llama-3, Gemma), and for Qwen on NFC text, the ids equal `tokenizers`'
`encode(text, add_special_tokens=False)`; for Mistral, whose normalizer prepends "▁",
`tokenizers`' encoding of `text` equals `encode(" " + text)` here.

With `tokenizers` importable, `encode` runs a private copy of the real tokenizer with those
steps off and `encode_special_tokens` on, so text that looks like a special token
(`"<|eot_id|>"`) is encoded as plain text, while non-special added tokens are still matched as
the real tokenizer does.
Without it, a pure-Python implementation of the same pipeline runs: added-token split,
normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace), pre-tokenizers (Split,
ByteLevel, Metaspace) and the BPE model (merge ranks applied lowest rank first, leftmost first,
`ignore_merges`, byte fallback, `unk` fusing), mirroring `tokenizers`. The Split regex uses the
`regex` module when importable (it knows `\\p{L}`); otherwise `\\p{..}` classes are expanded to
explicit code point ranges from `unicodedata` for the `re` module, which differs from
`tokenizers` (Oniguruma) only in rare corners such as which control characters `\\s` matches.
Unigram models are supported for token bytes, and for encoding only through `tokenizers`.

Bytes that are not valid UTF-8. `encode(bytes)` splits the input into maximal valid UTF-8 runs
and invalid bytes. Each run is encoded as text; each invalid byte becomes the token whose bytes
are exactly that one byte (a byte-level alphabet token, or `<0xNN>`), so
`decode(encode(data)) == data` holds. Tokenization at the edges of an invalid byte may differ
from what a byte-level model would produce for the whole input; a tokenizer with no token for
some byte raises `TokenizerError`. Likewise a literal "▁" in the input of a SentencePiece-style
tokenizer, which the tokenizer itself would read as a space, becomes its three byte-fallback
tokens (when the tokenizer has them; otherwise the tokenizer's own lossy reading is kept).
"""

from __future__ import annotations

import functools
import gzip
import heapq
import importlib.resources
import json
import os
import re
import sys
import threading
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from ._errors import TokenizerError

__all__ = ["Tokenizer"]

KIND_TEXT: Final = 0
KIND_SPECIAL: Final = 1
KIND_UNUSED: Final = 2

# Ids are stored in u32 tables by the core; a tokenizer.json naming an id beyond this is more
# likely corrupt than real (the largest real vocabularies are around 260k).
_TOKEN_COUNT_MAX: Final = 1 << 24
_SECTION_DEPTH_MAX: Final = 32
_WORD_CACHE_SIZE_MAX: Final = 1 << 16
_WORD_CACHE_LENGTH_MAX: Final = 256

_EOS_TOKEN_NAMES: Final = (
    "<|end_of_text|>",
    "<|endoftext|>",
    "</s>",
    "<eos>",
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
)

_GPT2_SPLIT_PATTERN: Final = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
)

_SUPPORTED_DECODERS: Final = frozenset(
    {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"}
)


# --- GPT-2's byte-to-unicode alphabet ------------------------------------------------------


def _byte_alphabet() -> list[str]:
    """Return the character that stands for each byte value in byte-level vocabularies.

    Printable latin-1 bytes stand for themselves; the other 68 byte values are moved, in
    increasing order, to the code points starting at U+0100.
    """
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    chars: list[str] = []
    moved_count = 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(0x100 + moved_count))
            moved_count += 1
    return chars


_BYTE_TO_CHAR: Final = _byte_alphabet()
# Text (bytes seen as latin-1) -> alphabet characters.
_BYTE_ENCODE_TABLE: Final = {byte: char for byte, char in enumerate(_BYTE_TO_CHAR)}
# Alphabet characters -> latin-1 characters of their bytes. Code points below 256 that are not
# in the alphabet map to U+FFFF, so the latin-1 encoding after `translate` fails on them
# instead of passing them through as if they were bytes.
_BYTE_DECODE_TABLE: Final = {
    **{code_point: 0xFFFF for code_point in range(256)},
    **{ord(char): byte for byte, char in enumerate(_BYTE_TO_CHAR)},
}


def _byte_level_string_to_bytes(text: str) -> bytes:
    """Map one byte-level vocab string to bytes (UTF-8 if it leaves the alphabet)."""
    try:
        return text.translate(_BYTE_DECODE_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _byte_level_all_to_bytes(strings: Sequence[str | None]) -> list[bytes | None]:
    """Map every byte-level vocab string to bytes in one translate-and-encode pass."""
    present = [s for s in strings if s is not None]
    try:
        blob = "".join(present).translate(_BYTE_DECODE_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        return [None if s is None else _byte_level_string_to_bytes(s) for s in strings]
    out: list[bytes | None] = []
    position = 0
    for s in strings:
        if s is None:
            out.append(None)
        else:
            end = position + len(s)
            out.append(blob[position:end])
            position = end
    return out


def _byte_fallback_value(text: str) -> int | None:
    """Return NN for a `<0xNN>` byte-fallback token, else None."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        try:
            return int(text[3:5], 16)
        except ValueError:
            return None
    return None


def _spaced_all_to_bytes(
    strings: Sequence[str | None], space: str, byte_fallback: bool
) -> list[bytes | None]:
    """Map SentencePiece-style vocab strings to bytes: `space` -> " ", `<0xNN>` -> byte NN."""
    out: list[bytes | None] = []
    for s in strings:
        if s is None:
            out.append(None)
            continue
        if byte_fallback and len(s) == 6:
            value = _byte_fallback_value(s)
            if value is not None:
                out.append(bytes((value,)))
                continue
        if space:
            s = s.replace(space, " ")
        out.append(s.encode("utf-8"))
    return out


# --- reading tokenizer.json --------------------------------------------------------------


def _components(section: object) -> list[dict[str, Any]]:
    """Flatten a normalizer / pre_tokenizer / decoder section, expanding `Sequence`s in order."""
    out: list[dict[str, Any]] = []
    stack: list[tuple[object, int]] = [(section, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if depth > _SECTION_DEPTH_MAX:
            raise TokenizerError(
                f"tokenizer.json nests Sequence sections deeper than {_SECTION_DEPTH_MAX}; "
                "flatten the normalizer/pre_tokenizer/decoder sections"
            )
        if node.get("type") == "Sequence":
            children = (
                node.get("normalizers")
                or node.get("pretokenizers")
                or node.get("decoders")
                or node.get("processors")
                or []
            )
            if isinstance(children, list):
                stack.extend((child, depth + 1) for child in reversed(children))
        else:
            out.append(node)
    return out


def _pattern_string(component: Mapping[str, Any]) -> str | None:
    """Return the literal string of a Replace/Split `pattern` ({"String": s}), else None."""
    pattern = component.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return str(pattern["String"])
    return None


class _Flavour:
    """How vocab strings map to bytes: byte-level, spaced (SentencePiece `▁`), or plain."""

    __slots__ = ("byte_level", "space", "byte_fallback")

    def __init__(self, *, byte_level: bool, space: str, byte_fallback: bool) -> None:
        self.byte_level = byte_level
        self.space = space
        self.byte_fallback = byte_fallback


def _detect_flavour(doc: Mapping[str, Any], model: Mapping[str, Any]) -> _Flavour:
    """Read the byte mapping from the decoder, pre-tokenizer and normalizer sections."""
    decoders = _components(doc.get("decoder"))
    pre_tokenizers = _components(doc.get("pre_tokenizer"))
    normalizers = _components(doc.get("normalizer"))
    for decoder in decoders:
        decoder_type = decoder.get("type")
        if decoder_type not in _SUPPORTED_DECODERS:
            raise TokenizerError(
                f"tokenizer.json has decoder type {decoder_type!r}, which changes token bytes "
                "in a way tokensieve does not model (supported decoders: "
                f"{', '.join(sorted(_SUPPORTED_DECODERS))}); build the Tokenizer with "
                "Tokenizer.from_token_bytes(...) from the exact byte string of every token"
            )
    byte_fallback = bool(model.get("byte_fallback")) or any(
        d.get("type") == "ByteFallback" for d in decoders
    )
    if any(c.get("type") == "ByteLevel" for c in decoders + pre_tokenizers):
        return _Flavour(byte_level=True, space="", byte_fallback=False)
    space = ""
    for component in decoders + pre_tokenizers:
        if component.get("type") == "Metaspace":
            replacement = component.get("replacement", "\u2581")
            space = replacement if isinstance(replacement, str) else "\u2581"
            break
    if not space:
        for decoder in decoders:
            pattern = _pattern_string(decoder)
            if decoder.get("type") == "Replace" and decoder.get("content") == " " and pattern:
                space = pattern
                break
    if not space:
        for normalizer in normalizers:
            content = normalizer.get("content")
            if (
                normalizer.get("type") == "Replace"
                and _pattern_string(normalizer) == " "
                and isinstance(content, str)
                and content
            ):
                space = content
                break
    return _Flavour(byte_level=False, space=space, byte_fallback=byte_fallback)


def _model_vocab(model: Mapping[str, Any]) -> tuple[str, list[tuple[str, int]]]:
    """Return (model type, [(vocab string, id)]) of a tokenizer.json `model` section."""
    model_type = model.get("type")
    vocab = model.get("vocab")
    if model_type is None:  # very old files name no type
        model_type = "BPE" if "merges" in model else "Unigram" if isinstance(vocab, list) else None
    if model_type == "BPE":
        if not isinstance(vocab, dict):
            raise TokenizerError(
                'tokenizer.json: model.vocab of a BPE model must be an object {"token": id}'
            )
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(key):
                raise TokenizerError(
                    f"tokenizer.json: BPE with {key}={model[key]!r} is not supported (token "
                    "bytes would include the marker); use Tokenizer.from_token_bytes(...)"
                )
        items = list(vocab.items())
    elif model_type == "Unigram":
        if not isinstance(vocab, list):
            raise TokenizerError(
                "tokenizer.json: model.vocab of a Unigram model must be a list of [piece, score]"
            )
        items = []
        for index, entry in enumerate(vocab):
            if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
                raise TokenizerError(
                    f"tokenizer.json: model.vocab[{index}] of a Unigram model must be "
                    "[piece, score]"
                )
            items.append((entry[0], index))
    else:
        raise TokenizerError(
            f"tokenizer.json: model type {model_type!r} is not supported (supported: 'BPE', "
            "'Unigram'); WordPiece/WordLevel vocabularies do not give token bytes, so build the "
            "Tokenizer with Tokenizer.from_token_bytes(...)"
        )
    # One fast pass (`type(...) is int` also rejects bools); name the culprit only on failure.
    if not all(type(token_id) is int and token_id >= 0 for _, token_id in items):
        text, token_id = next(
            (t, i) for t, i in items if not (type(i) is int and i >= 0)
        )
        raise TokenizerError(
            f"tokenizer.json: vocab entry {text!r} has id {token_id!r}; ids must be "
            "non-negative integers"
        )
    return model_type, items


def _added_tokens(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the validated `added_tokens` entries of a tokenizer.json document."""
    added = doc.get("added_tokens") or []
    if not isinstance(added, list):
        raise TokenizerError("tokenizer.json: added_tokens must be a list")
    for index, token in enumerate(added):
        if (
            not isinstance(token, dict)
            or not isinstance(token.get("id"), int)
            or isinstance(token.get("id"), bool)
            or token["id"] < 0
            or not isinstance(token.get("content"), str)
        ):
            raise TokenizerError(
                f"tokenizer.json: added_tokens[{index}] needs an integer 'id' >= 0 and a "
                "string 'content'"
            )
    return added


def _looks_special(content: str) -> bool:
    """Return True for contents shaped like a control token: `<...>`."""
    return len(content) > 2 and content.startswith("<") and content.endswith(">")


def _added_is_special(token: Mapping[str, Any]) -> bool:
    """Return whether an added token is special: its flag if it has one, else its shape."""
    flag = token.get("special")
    if isinstance(flag, bool):
        return flag
    return _looks_special(str(token["content"]))


def _parse_json(raw: bytes | str, what: str) -> Any:
    """Parse JSON text, turning syntax errors into a TokenizerError that says where."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise TokenizerError(
            f"{what} is not valid JSON: {error.msg} at line {error.lineno} column "
            f"{error.colno}; pass the unmodified contents of tokenizer.json"
        ) from error
    except UnicodeDecodeError as error:
        raise TokenizerError(f"{what} is not UTF-8 text ({error}); pass tokenizer.json") from error


def _read_bytes(path: Path) -> bytes:
    """Read a file, gunzipping it when it starts with the gzip magic bytes."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise TokenizerError(
            f"cannot read tokenizer file {str(path)!r}: {error.strerror or error}; pass the "
            "path of a tokenizer.json or tokenizer.json.gz"
        ) from error
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise TokenizerError(
                f"{str(path)!r} looks gzip-compressed but cannot be decompressed ({error}); "
                "pass an intact tokenizer.json.gz or the uncompressed tokenizer.json"
            ) from error
    return raw


def _read_optional_config(path: Path) -> dict[str, Any] | None:
    """Read a JSON config beside a tokenizer file; None if it does not exist."""
    if not path.is_file():
        return None
    data = _parse_json(_read_bytes(path), f"{str(path)!r}")
    if not isinstance(data, dict):
        raise TokenizerError(
            f"{str(path)!r} must hold a JSON object; fix or remove it, or pass eos_token_ids="
        )
    return data


def _config_eos_contents(tokenizer_config: Mapping[str, Any] | None) -> list[str]:
    """Return the `eos_token` content(s) named by a tokenizer_config.json."""
    if not tokenizer_config:
        return []
    value = tokenizer_config.get("eos_token")
    if isinstance(value, dict):  # older files store an AddedToken object
        value = value.get("content")
    return [value] if isinstance(value, str) and value else []


def _config_eos_ids(generation_config: Mapping[str, Any] | None) -> list[int]:
    """Return the `eos_token_id` value(s) of a generation_config.json or config.json."""
    if not generation_config:
        return []
    value = generation_config.get("eos_token_id")
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def _unique(values: Iterable[int]) -> tuple[int, ...]:
    """Return the values without repeats, first occurrence first."""
    return tuple(dict.fromkeys(values))


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


# --- the public class ---------------------------------------------------------------------


class _TokenIdError(TokenizerError, IndexError):
    """A token id outside 0..vocab_size-1 (also an IndexError)."""


class Tokenizer:
    """A tokenizer's vocabulary as byte strings, with special and end-of-sequence ids.

    Build one with a classmethod (`from_file`, `from_str`, `from_hf`, `from_pretrained`,
    `from_token_bytes`, `default`). Instances are immutable; derived tables are built once and
    cached, so share one Tokenizer between matchers.
    """

    __slots__ = (
        "_token_bytes",
        "_kinds",
        "_vocab_size",
        "_eos_token_ids",
        "_source",
        "_core_tables",
        "_encoders",
        "_byte_token_ids",
        "_space",
        "_widened",
        "_core_handles",
        "_lock",
        "__weakref__",
    )

    def __init__(
        self,
        token_bytes: list[bytes],
        kinds: bytearray,
        *,
        vocab_size: int,
        eos_token_ids: tuple[int, ...],
        source: _JsonSource | None,
        space: str = "",
    ) -> None:
        """Store prepared tables; use the classmethods instead of calling this directly.

        Args:
            token_bytes: the bytes of ids 0..n_tokens-1 (b"" for unused ids).
            kinds: one KIND_* per id 0..vocab_size-1.
            vocab_size: the mask width, >= len(token_bytes).
            eos_token_ids: end-of-sequence ids, each < len(token_bytes).
            source: the tokenizer.json this came from, or None.
            space: the character that stands for a space in vocab strings ("▁"), if any.
        """
        if len(kinds) != vocab_size or len(token_bytes) > vocab_size:
            raise TokenizerError("internal: inconsistent tokenizer tables")
        self._token_bytes = token_bytes
        self._kinds = kinds
        self._vocab_size = vocab_size
        self._eos_token_ids = eos_token_ids
        self._source = source
        self._core_tables: tuple[bytes, bytes, bytes] | None = None
        self._encoders: dict[str, _Encoder] = {}
        self._byte_token_ids: dict[int, int] | None = None
        self._space = space
        # Widened copies by width (`with_vocab_size`), and the trie's handle per core instance.
        self._widened: dict[tuple[int, tuple[int, ...]], Tokenizer] = {}
        self._core_handles: Any = None
        self._lock = threading.Lock()

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ) -> Tokenizer:
        """Load a tokenizer.json or tokenizer.json.gz (or a folder holding one).

        Without `eos_token_ids`, `tokenizer_config.json` (`eos_token`) and
        `generation_config.json` (`eos_token_id`) beside the file are read when present; else
        the EOS ids are guessed from the added tokens (see the module docstring).

        Args:
            path: the file, gzip-compressed or not (detected from its content), or a folder
                with `tokenizer.json` or `tokenizer.json.gz`.
            vocab_size: the model's logits width, if larger than the tokenizer.
            eos_token_ids: end-of-sequence ids, overriding the configs.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: the file is missing, unreadable, not valid JSON, or unsupported;
                `vocab_size` is too small; an EOS id is out of range.

        Cost: about 0.2 s for Llama-3's 9 MB tokenizer.json (0.4 s for Gemma's 17 MB), most
        of it `json.loads`.
        """
        file_path = Path(path)
        if file_path.is_dir():
            for name in ("tokenizer.json", "tokenizer.json.gz"):
                if (file_path / name).is_file():
                    file_path = file_path / name
                    break
            else:
                raise TokenizerError(
                    f"folder {str(file_path)!r} has no tokenizer.json or tokenizer.json.gz; "
                    "pass the path of the tokenizer file itself"
                )
        raw = _read_bytes(file_path)
        tokenizer_config = generation_config = None
        if eos_token_ids is None:
            tokenizer_config = _read_optional_config(file_path.parent / "tokenizer_config.json")
            generation_config = _read_optional_config(
                file_path.parent / "generation_config.json"
            )
        return cls._from_json(
            raw,
            vocab_size=vocab_size,
            eos_token_ids=eos_token_ids,
            tokenizer_config=tokenizer_config,
            generation_config=generation_config,
            what=f"tokenizer file {str(file_path)!r}",
        )

    @classmethod
    def from_str(
        cls,
        json_text: str | bytes,
        *,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ) -> Tokenizer:
        """Load a tokenizer from the text of a tokenizer.json.

        Args:
            json_text: the JSON text (str, or UTF-8 bytes).
            vocab_size: the model's logits width, if larger than the tokenizer.
            eos_token_ids: end-of-sequence ids; default: guessed from the added tokens.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: malformed JSON, unsupported model, `vocab_size` too small, or an
                EOS id out of range.
        """
        if isinstance(json_text, str):
            raw = json_text.encode("utf-8")
        elif isinstance(json_text, (bytes, bytearray, memoryview)):
            raw = bytes(json_text)
        else:
            raise TokenizerError(
                f"from_str needs the tokenizer.json text as str, got {type(json_text).__name__}; "
                "for a path use Tokenizer.from_file(path)"
            )
        return cls._from_json(
            raw,
            vocab_size=vocab_size,
            eos_token_ids=eos_token_ids,
            tokenizer_config=None,
            generation_config=None,
            what="the tokenizer.json text",
        )

    @classmethod
    def from_hf(
        cls,
        hf_tokenizer: Any,
        *,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ) -> Tokenizer:
        """Load from a `tokenizers.Tokenizer` or a `transformers` fast tokenizer.

        The object is serialised (`to_str()`) and read like a tokenizer.json, so later changes
        to it do not affect this Tokenizer. A `transformers` tokenizer's `eos_token_id` is the
        default EOS.

        Args:
            hf_tokenizer: a `tokenizers.Tokenizer`, or an object with `.backend_tokenizer`
                (`transformers.PreTrainedTokenizerFast`).
            vocab_size: the model's logits width (e.g. `model.config.vocab_size`).
            eos_token_ids: end-of-sequence ids overriding the tokenizer's own.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: the object is neither kind (slow `transformers` tokenizers have no
                tokenizer.json: load it with `use_fast=True`), or its content is unsupported.
        """
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        default_eos: list[int] = []
        if backend is not None:
            eos_id = getattr(hf_tokenizer, "eos_token_id", None)
            if isinstance(eos_id, int) and not isinstance(eos_id, bool):
                default_eos = [eos_id]
        else:
            backend = hf_tokenizer
        to_str = getattr(backend, "to_str", None)
        if not callable(to_str):
            raise TokenizerError(
                f"from_hf needs a tokenizers.Tokenizer or a transformers fast tokenizer, got "
                f"{type(hf_tokenizer).__name__}; load transformers tokenizers with "
                "use_fast=True, or use Tokenizer.from_file on its tokenizer.json"
            )
        json_text = to_str()
        generation_config = {"eos_token_id": default_eos} if default_eos else None
        return cls._from_json(
            json_text.encode("utf-8"),
            vocab_size=vocab_size,
            eos_token_ids=eos_token_ids,
            tokenizer_config=None,
            generation_config=generation_config,
            what=f"the {type(hf_tokenizer).__name__}'s tokenizer.json",
        )

    @classmethod
    def from_pretrained(
        cls,
        name: str,
        *,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
        revision: str | None = None,
    ) -> Tokenizer:
        """Download a model's tokenizer.json from the Hugging Face Hub and load it.

        Also reads, when the repository has them, `tokenizer_config.json` and
        `generation_config.json` for the EOS ids and `config.json` for the default
        `vocab_size` (the model's logits width, when larger than the tokenizer). Uses
        `huggingface_hub`'s cache, so it works offline for files downloaded before.

        Args:
            name: the repository id, e.g. "Qwen/Qwen2.5-1.5B-Instruct".
            vocab_size: the model's logits width; default from config.json.
            eos_token_ids: end-of-sequence ids overriding the configs.
            revision: a branch, tag or commit of the repository.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: `huggingface_hub` is missing, the download failed (offline, gated,
                no such repository), or the tokenizer is unsupported.
        """
        try:
            import huggingface_hub
        except ImportError as error:
            raise TokenizerError(
                "Tokenizer.from_pretrained needs the huggingface_hub package (pip install "
                "huggingface_hub); or download tokenizer.json yourself and use "
                "Tokenizer.from_file(path)"
            ) from error
        try:
            tokenizer_path = huggingface_hub.hf_hub_download(
                name, "tokenizer.json", revision=revision
            )
        except Exception as error:  # offline, gated, missing repo: the hub raises many types
            raise TokenizerError(
                f"could not get tokenizer.json of {name!r} from the Hugging Face Hub "
                f"({type(error).__name__}: {error}); check the name, revision and network "
                "(or HF_HUB_OFFLINE), log in for gated models, or download tokenizer.json and "
                "use Tokenizer.from_file(path)"
            ) from error

        def optional(filename: str) -> dict[str, Any] | None:
            try:
                path = huggingface_hub.hf_hub_download(name, filename, revision=revision)
            except Exception:  # a missing optional file is normal; tokenizer.json came through
                return None
            return _read_optional_config(Path(path))

        tokenizer_config = generation_config = None
        if eos_token_ids is None:
            tokenizer_config = optional("tokenizer_config.json")
            generation_config = optional("generation_config.json")
        model_config = optional("config.json") if vocab_size is None else None
        return cls._from_json(
            _read_bytes(Path(tokenizer_path)),
            vocab_size=vocab_size,
            eos_token_ids=eos_token_ids,
            tokenizer_config=tokenizer_config,
            generation_config=generation_config,
            what=f"tokenizer.json of {name!r}",
            model_config=model_config,
        )

    @classmethod
    def from_token_bytes(
        cls,
        tokens: Sequence[bytes | None],
        *,
        eos_token_ids: Sequence[int] = (),
        special_token_ids: Sequence[int] = (),
        vocab_size: int | None = None,
    ) -> Tokenizer:
        """Build a tokenizer from the byte string of every id.

        Such a tokenizer has no merge rules, so `encode` is greedy longest-match over the text
        tokens (good for tests and byte-level toy vocabularies, not a real BPE).

        Args:
            tokens: the bytes of ids 0..len-1; None marks an unused id. A text token with
                empty bytes is treated as unused.
            eos_token_ids: end-of-sequence ids (special).
            special_token_ids: ids never matched by grammar text; their bytes are their text.
            vocab_size: the mask width, if larger than len(tokens).

        Returns:
            The Tokenizer.

        Raises:
            TokenizerError: an entry is not bytes/None, an id is out of range or unused,
                or `vocab_size` is too small.
        """
        token_bytes: list[bytes] = []
        kinds = bytearray()
        for index, token in enumerate(tokens):
            if token is None:
                token_bytes.append(b"")
                kinds.append(KIND_UNUSED)
            elif isinstance(token, (bytes, bytearray, memoryview)):
                token_bytes.append(bytes(token))
                kinds.append(KIND_TEXT if len(token) else KIND_UNUSED)
            else:
                raise TokenizerError(
                    f"tokens[{index}] is {type(token).__name__}; every entry must be bytes "
                    "(or None for an unused id)"
                )
        n_tokens = len(token_bytes)
        checks = (
            ("special_token_ids", _id_tuple(special_token_ids, "special_token_ids")),
            ("eos_token_ids", _id_tuple(eos_token_ids, "eos_token_ids")),
        )
        for argument, ids in checks:
            for token_id in ids:
                _check_id_in(token_id, n_tokens, argument)
                if tokens[token_id] is None:
                    raise TokenizerError(
                        f"{argument} names id {token_id}, but tokens[{token_id}] is None "
                        "(unused); give that id its bytes"
                    )
                kinds[token_id] = KIND_SPECIAL
        size = _checked_vocab_size(vocab_size, n_tokens)
        kinds.extend(bytes([KIND_UNUSED]) * (size - n_tokens))
        return cls(
            token_bytes,
            kinds,
            vocab_size=size,
            eos_token_ids=checks[1][1],
            source=None,
        )

    @classmethod
    def default(cls) -> Tokenizer:
        """Return the bundled GPT-2 tokenizer (50,257 ids, EOS `<|endoftext|>` = 50256).

        Loaded once per process from the package data (plain file reading, so it works
        under Pyodide) and shared.

        Returns:
            The GPT-2 Tokenizer.
        """
        return _default_tokenizer()

    @classmethod
    def _from_json(
        cls,
        raw: bytes,
        *,
        vocab_size: int | None,
        eos_token_ids: Sequence[int] | None,
        tokenizer_config: Mapping[str, Any] | None,
        generation_config: Mapping[str, Any] | None,
        what: str,
        model_config: Mapping[str, Any] | None = None,
    ) -> Tokenizer:
        """Build a Tokenizer from tokenizer.json bytes (the one loading path)."""
        doc = _parse_json(raw, what)
        if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
            raise TokenizerError(
                f"{what} has no 'model' object; pass a Hugging Face tokenizer.json (not "
                "tokenizer_config.json, vocab.json or a SentencePiece .model file)"
            )
        model = doc["model"]
        _, vocab_items = _model_vocab(model)
        added = _added_tokens(doc)
        flavour = _detect_flavour(doc, model)

        id_end = max(
            max((token_id for _, token_id in vocab_items), default=-1),
            max((token["id"] for token in added), default=-1),
        ) + 1
        if id_end > _TOKEN_COUNT_MAX:
            raise TokenizerError(
                f"{what} uses token id {id_end - 1}, more than {_TOKEN_COUNT_MAX} ids; the "
                "file is probably corrupt"
            )
        strings: list[str | None] = [None] * id_end
        for text, token_id in vocab_items:
            strings[token_id] = text
        if flavour.byte_level:
            converted = _byte_level_all_to_bytes(strings)
        else:
            converted = _spaced_all_to_bytes(strings, flavour.space, flavour.byte_fallback)

        kinds = bytearray(bytes([KIND_UNUSED]) * id_end)
        token_bytes: list[bytes] = [b""] * id_end
        for token_id, data in enumerate(converted):
            if data:
                token_bytes[token_id] = data
                kinds[token_id] = KIND_TEXT

        # content -> id, for EOS names in configs; added tokens take precedence over the model.
        content_ids: dict[str, int] = {}
        special_contents: set[str] = set()
        flags_differ = False
        for token in added:
            token_id, content = token["id"], token["content"]
            content_ids[content] = token_id
            data = content.encode("utf-8")
            token_bytes[token_id] = data
            if _added_is_special(token):
                special_contents.add(content)
                kinds[token_id] = KIND_SPECIAL
                flags_differ |= token.get("special") is not True
            else:
                kinds[token_id] = KIND_TEXT if data else KIND_UNUSED

        # End-of-sequence ids: explicit > configs > names of added tokens.
        if eos_token_ids is not None:
            eos = _id_tuple(eos_token_ids, "eos_token_ids")
            for token_id in eos:
                _check_id_in(token_id, id_end, "eos_token_ids")
        else:
            model_ids = model["vocab"] if isinstance(model["vocab"], dict) else {}
            named = [
                content_ids.get(c, model_ids.get(c))
                for c in _config_eos_contents(tokenizer_config)
            ]
            from_configs = [
                i
                for i in named + list(_config_eos_ids(generation_config))
                if isinstance(i, int) and 0 <= i < id_end
            ]
            if from_configs:
                eos = _unique(from_configs)
            else:
                eos = _unique(
                    token["id"]
                    for token in sorted(added, key=lambda t: int(t["id"]))
                    if token["content"] in _EOS_TOKEN_NAMES
                )
        added_by_id = {int(token["id"]): token for token in added}
        for token_id in eos:
            if kinds[token_id] == KIND_UNUSED and not token_bytes[token_id]:
                raise TokenizerError(
                    f"eos token id {token_id} is not a token of {what}; pass eos_token_ids= "
                    "with ids the tokenizer defines"
                )
            kinds[token_id] = KIND_SPECIAL
            if token_id in added_by_id:
                content = str(added_by_id[token_id]["content"])
                if content not in special_contents:
                    special_contents.add(content)
                    flags_differ = True

        if vocab_size is None and model_config is not None:
            configured = model_config.get("vocab_size")
            if configured is None and isinstance(model_config.get("text_config"), dict):
                configured = model_config["text_config"].get("vocab_size")
            if isinstance(configured, int) and configured >= id_end:
                vocab_size = configured
        size = _checked_vocab_size(vocab_size, id_end)
        kinds.extend(bytes([KIND_UNUSED]) * (size - id_end))
        needs_rewrite = flags_differ or _make_byte_exact(_pipeline_copy(doc))
        source = _JsonSource(raw, frozenset(special_contents), needs_rewrite)
        space = "" if flavour.byte_level else flavour.space
        return cls(
            token_bytes, kinds, vocab_size=size, eos_token_ids=eos, source=source, space=space
        )

    # -- the vocabulary ------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """The mask width: the model's logits width, >= n_tokens; ids >= n_tokens are padding."""
        return self._vocab_size

    @property
    def n_tokens(self) -> int:
        """How many ids the tokenizer itself defines (its largest id + 1)."""
        return len(self._token_bytes)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """The end-of-sequence ids (all special), primary first."""
        return self._eos_token_ids

    def with_vocab_size(self, vocab_size: int) -> Tokenizer:
        """Return this tokenizer with another mask width (shares the vocabulary and encoders).

        Args:
            vocab_size: the model's logits width, >= n_tokens.

        Returns:
            `self` if the width is unchanged, else a Tokenizer whose ids
            n_tokens..vocab_size-1 are padding.

        Raises:
            TokenizerError: `vocab_size` is smaller than n_tokens.
        """
        size = _checked_vocab_size(vocab_size, len(self._token_bytes))
        return self._variant(size, self._eos_token_ids)

    def with_eos_token_ids(self, eos_token_ids: Iterable[int]) -> Tokenizer:
        """Return this tokenizer with other end-of-sequence ids (a request's stop tokens).

        Args:
            eos_token_ids: ids, each below `vocab_size`, that end the output: they are allowed
                exactly where the grammar may end.

        Raises:
            TokenizerError: an id is out of range.
        """
        ids = _unique(sorted(_id_tuple(eos_token_ids, "eos_token_ids")))
        for token_id in ids:
            _check_id_in(token_id, self._vocab_size, "eos_token_ids")
        return self._variant(self._vocab_size, ids)

    def _variant(self, size: int, eos: tuple[int, ...]) -> Tokenizer:
        """This vocabulary at another width or with other EOS ids. One object per variant: its
        trie is built once per core instance and shared by every matcher of that variant (each
        new matcher used to rebuild it, 0.1 s each)."""
        if size == self._vocab_size and eos == self._eos_token_ids:
            return self
        key = (size, eos)
        with self._lock:
            found = self._widened.get(key)
            if found is None:
                kinds = bytearray(self._kinds[: len(self._token_bytes)])
                kinds.extend(bytes([KIND_UNUSED]) * (size - len(self._token_bytes)))
                found = Tokenizer(
                    self._token_bytes,
                    kinds,
                    vocab_size=size,
                    eos_token_ids=eos,
                    source=self._source,
                    space=self._space,
                )
                found._encoders = self._encoders  # the same text gives the same ids
                self._widened[key] = found
        return found

    def __repr__(self) -> str:
        """Show the sizes and EOS ids."""
        return (
            f"Tokenizer(n_tokens={self.n_tokens}, vocab_size={self._vocab_size}, "
            f"eos_token_ids={self._eos_token_ids})"
        )

    def _check_id(self, token_id: int) -> int:
        """Return `token_id` if it is an id of the mask, else raise."""
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise TypeError(f"token id must be an int, got {type(token_id).__name__}")
        if not 0 <= token_id < self._vocab_size:
            raise _TokenIdError(
                f"token id {token_id} is out of range: ids are 0..{self._vocab_size - 1} "
                f"(vocab_size={self._vocab_size})"
            )
        return token_id

    def token_bytes(self, id: int) -> bytes:  # noqa: A002 - the documented argument name
        """Return the bytes of one token.

        Args:
            id: a token id, 0 <= id < vocab_size.

        Returns:
            The token's bytes; a special token's text (b"<|eot_id|>"); b"" for padding and
            unused ids.

        Raises:
            TokenizerError: `id` is out of range (the error is also an IndexError).
        """
        token_id = self._check_id(id)
        return self._token_bytes[token_id] if token_id < len(self._token_bytes) else b""

    def is_special(self, id: int) -> bool:  # noqa: A002 - the documented argument name
        """Return whether grammar text can never match this id.

        True for special added tokens (flag set, or `<...>`-shaped with no flag), EOS ids,
        and unused/padding ids.

        Args:
            id: a token id, 0 <= id < vocab_size.

        Raises:
            TokenizerError: `id` is out of range (the error is also an IndexError).
        """
        return self._kinds[self._check_id(id)] != KIND_TEXT

    def decode(self, ids: Sequence[int]) -> bytes:
        """Return the concatenated bytes of `ids` (special tokens as their text).

        Args:
            ids: token ids, each 0 <= id < vocab_size.

        Raises:
            TokenizerError: an id is out of range (the error is also an IndexError).
        """
        table = self._token_bytes
        token_count = len(table)
        parts = []
        for token_id in ids:
            if not (isinstance(token_id, int) and 0 <= token_id < token_count):
                self._check_id(token_id)
                continue  # a padding id: no bytes
            parts.append(table[token_id])
        return b"".join(parts)

    def core_tables(self) -> tuple[bytes, bytes, bytes]:
        """Return the flat tables the core builds its token trie from (built once, cached).

        Returns:
            (blob, offsets, kinds): blob is every token's bytes concatenated in id order for
            ids 0..vocab_size-1; offsets is a little-endian u32 array of vocab_size + 1 start
            offsets into blob (token i is blob[offsets[i]:offsets[i+1]]); kinds is one byte per
            id: 0 text token, 1 special (not in the text trie), 2 padding/unused.
        """
        if self._core_tables is None:
            blob = b"".join(self._token_bytes)
            if len(blob) >= 1 << 32:
                raise TokenizerError("token bytes exceed 4 GiB; the core's offsets are u32")
            offsets = array("I", [0])
            if offsets.itemsize != 4:  # pragma: no cover - every CPython/Pyodide has 4
                offsets = array("L", [0])
            position = 0
            for data in self._token_bytes:
                position += len(data)
                offsets.append(position)
            offsets.extend([position] * (self._vocab_size - len(self._token_bytes)))
            if sys.byteorder == "big":  # pragma: no cover
                offsets.byteswap()
            self._core_tables = (blob, offsets.tobytes(), bytes(self._kinds))
        return self._core_tables

    # -- encoding --------------------------------------------------------------------------

    def encode(self, text_or_bytes: str | bytes) -> list[int]:
        """Return the ids the tokenizer gives this text, with no special tokens added.

        No BOS/EOS is added, and text that looks like a special token ("<|eot_id|>") is
        encoded as plain text, never as the special id. Bytes that are not valid UTF-8 are
        encoded byte by byte (see the module docstring).

        Args:
            text_or_bytes: str, or bytes (any bytes).

        Returns:
            Token ids; `decode` of them gives the input's UTF-8 bytes back.

        Raises:
            TokenizerError: a str with lone surrogates, an invalid byte with no single-byte
                token, or (without `tokenizers`) a pipeline step the pure-Python encoder
                does not implement.
        """
        return self._encode_with(text_or_bytes, "auto")

    def tokenize_partial(
        self, new_bytes: bytes, recent_tokens: Sequence[int] | None = None
    ) -> tuple[list[int], bytes]:
        """Tokenize the part of `new_bytes` that bytes coming after it cannot change.

        Returns:
            (tokens, leftover) with `decode(tokens) + leftover == new_bytes`; trailing bytes
            that some longer token could extend are left over (see `_fastforward`).
        """
        from ._fastforward import tokenize_partial

        return tokenize_partial(self, new_bytes, recent_tokens)

    def _encode_with(
        self, text_or_bytes: str | bytes, engine: Literal["auto", "hf", "python"]
    ) -> list[int]:
        """Encode with a chosen engine ("hf" = tokenizers, "python" = the fallback)."""
        if isinstance(text_or_bytes, str):
            if not text_or_bytes.isascii():
                try:
                    text_or_bytes.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise TokenizerError(
                        f"text has a lone surrogate at index {error.start}; pass the raw "
                        "bytes instead (encode accepts bytes that are not valid UTF-8)"
                    ) from error
            parts: list[str | int] = [text_or_bytes]
        elif isinstance(text_or_bytes, (bytes, bytearray, memoryview)):
            parts = _split_utf8(bytes(text_or_bytes))
        else:
            raise TypeError(
                f"encode takes str or bytes, got {type(text_or_bytes).__name__}"
            )
        if self._space and any(isinstance(p, str) and self._space in p for p in parts):
            parts = self._split_literal_space_char(parts)
        encoder = self._encoder(engine)
        ids: list[int] = []
        for part in parts:
            if isinstance(part, int):
                ids.append(self._byte_token_id(part))
            elif part:
                ids.extend(encoder.encode_str(part))
        return ids

    def _split_literal_space_char(self, parts: list[str | int]) -> list[str | int]:
        """Turn a literal "▁" in SentencePiece-style input into its bytes, when tokens exist.

        The tokenizer itself would read it as a space; its byte-fallback tokens keep the
        text exact. Without them the tokenizer's own (lossy) reading is kept.
        """
        space_bytes = list(self._space.encode("utf-8"))
        try:
            for byte in space_bytes:
                self._byte_token_id(byte)
        except TokenizerError:
            return parts
        out: list[str | int] = []
        for part in parts:
            if isinstance(part, int) or self._space not in part:
                out.append(part)
                continue
            for index, piece in enumerate(part.split(self._space)):
                if index:
                    out.extend(space_bytes)
                out.append(piece)
        return out

    def _encoder(self, engine: Literal["auto", "hf", "python"]) -> _Encoder:
        """Return (building once) the encoder for `engine`."""
        if engine == "auto":
            chosen = self._encoders.get("auto")
            if chosen is None:
                use_hf = self._source is not None and _import_tokenizers() is not None
                chosen = self._encoders["auto"] = self._encoder("hf" if use_hf else "python")
            return chosen
        encoder = self._encoders.get(engine)
        if encoder is None:
            if self._source is None:
                encoder = _GreedyEncoder(self._token_bytes, self._kinds)
            elif engine == "hf":
                module = _import_tokenizers()
                if module is None:
                    raise TokenizerError(
                        "the tokenizers package is not importable; pip install tokenizers"
                    )
                encoder = _HfEncoder(module, self._source)
            else:
                encoder = _PyEncoder(self._source.encoding_doc(), self._source)
            self._encoders[engine] = encoder
        return encoder

    def _byte_token_id(self, byte: int) -> int:
        """Return the text token whose bytes are exactly `byte` (for invalid UTF-8 input)."""
        if self._byte_token_ids is None:
            table: dict[int, int] = {}
            for token_id, data in enumerate(self._token_bytes):
                if len(data) == 1 and self._kinds[token_id] == KIND_TEXT:
                    table.setdefault(data[0], token_id)
            self._byte_token_ids = table
        found = self._byte_token_ids.get(byte)
        if found is None:
            raise TokenizerError(
                f"this tokenizer has no single-byte token for byte 0x{byte:02X}, so input "
                "that is not valid UTF-8 cannot be encoded; pass valid UTF-8 text"
            )
        return found


def _id_tuple(ids: object, argument: str) -> tuple[int, ...]:
    """Return a sequence of token ids as a tuple without repeats, or raise."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TokenizerError(
            f"{argument} must be a sequence of token ids, e.g. [2], got {type(ids).__name__}"
        )
    values = tuple(ids)
    for value in values:
        if type(value) is not int:
            raise TokenizerError(f"{argument} must hold ints, got {type(value).__name__}")
    return _unique(values)


def _check_id_in(token_id: object, id_end: int, argument: str) -> None:
    """Raise unless `token_id` is an int in 0..id_end-1."""
    if not isinstance(token_id, int) or isinstance(token_id, bool):
        raise TokenizerError(f"{argument} must hold ints, got {type(token_id).__name__}")
    if not 0 <= token_id < id_end:
        raise TokenizerError(
            f"{argument} has id {token_id}, but the tokenizer's ids are 0..{id_end - 1}; pass "
            "ids the tokenizer defines"
        )


def _checked_vocab_size(vocab_size: int | None, id_end: int) -> int:
    """Return the mask width: `vocab_size`, or the tokenizer's own size."""
    if vocab_size is None:
        return id_end
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TokenizerError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size < id_end:
        raise TokenizerError(
            f"vocab_size={vocab_size} is smaller than the tokenizer, which defines ids "
            f"0..{id_end - 1}; pass vocab_size >= {id_end} (the model's logits width)"
        )
    return vocab_size


@functools.lru_cache(maxsize=1)
def _default_tokenizer() -> Tokenizer:
    """Load the bundled GPT-2 tokenizer once."""
    package = __package__ or "tokensieve"
    resource = importlib.resources.files(package).joinpath("data").joinpath(
        "gpt2.tokenizer.json.gz"
    )
    raw = gzip.decompress(resource.read_bytes())
    return Tokenizer._from_json(
        raw,
        vocab_size=None,
        eos_token_ids=None,
        tokenizer_config=None,
        generation_config=None,
        what="the bundled GPT-2 tokenizer",
    )


def _split_utf8(data: bytes) -> list[str | int]:
    """Split bytes into maximal valid UTF-8 runs (str) and single invalid bytes (int)."""
    try:
        return [data.decode("utf-8")]
    except UnicodeDecodeError:
        pass
    # surrogateescape turns each invalid byte (always >= 0x80) into U+DC80..U+DCFF, which valid
    # UTF-8 can never produce, so one linear pass splits the runs.
    text = data.decode("utf-8", "surrogateescape")
    parts: list[str | int] = []
    for piece in re.split("([\udc80-\udcff])", text):
        if len(piece) == 1 and "\udc80" <= piece <= "\udcff":
            parts.append(ord(piece) - 0xDC00)
        elif piece:
            parts.append(piece)
    return parts


def _import_tokenizers() -> Any:
    """Return the `tokenizers` module, or None when it is not installed (e.g. Pyodide)."""
    try:
        return importlib.import_module("tokenizers")
    except ImportError:
        return None


# --- encoders -------------------------------------------------------------------------------


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
        if isinstance(json_text, bytes):
            tokenizer = self._tokenizers.Tokenizer.from_buffer(json_text)
        else:
            tokenizer = self._tokenizers.Tokenizer.from_str(json_text)
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

_Normalizer = Callable[[str], str]
_PreTokenizer = Callable[[list[str], bool], list[str]]


def _unsupported(kind: str, component: Mapping[str, Any]) -> TokenizerError:
    """Return the error for a pipeline step the pure-Python encoder lacks."""
    return TokenizerError(
        f"the pure-Python encoder does not implement the {kind} {component.get('type')!r}; "
        "pip install tokenizers to encode with this tokenizer"
    )


@functools.lru_cache(maxsize=1)
def _general_categories() -> bytes:
    """Return an index into `_CATEGORY_NAMES` for every code point (built once, ~0.4 s)."""
    index = {name: i for i, name in enumerate(_CATEGORY_NAMES)}
    category = unicodedata.category
    return bytes(index[category(chr(code_point))] for code_point in range(0x110000))


_CATEGORY_NAMES: Final = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn"
).split()


@functools.lru_cache(maxsize=None)
def _category_class_body(name: str, negate: bool) -> str:
    """Return `re` character-class ranges for a general category like "L" or "Nd"."""
    wanted = {i for i, full in enumerate(_CATEGORY_NAMES) if full.startswith(name)}
    categories = _general_categories()
    ranges: list[str] = []
    start = -1
    for code_point in range(0x110001):
        member = code_point < 0x110000 and ((categories[code_point] in wanted) != negate)
        if member and start < 0:
            start = code_point
        elif not member and start >= 0:
            end = code_point - 1
            ranges.append(
                f"\\U{start:08x}" if start == end else f"\\U{start:08x}-\\U{end:08x}"
            )
            start = -1
    return "".join(ranges)


def _translate_for_re(pattern: str) -> str:
    """Rewrite `\\p{..}` / `\\P{..}` general-category classes for Python's `re` module."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escape = pattern[index + 1]
            if escape in "pP":
                if pattern.startswith("{", index + 2):
                    close = pattern.find("}", index + 3)
                    if close < 0:
                        raise TokenizerError(f"unterminated \\p{{ in regex {pattern!r}")
                    name, index = pattern[index + 3 : close], close + 1
                else:
                    name, index = pattern[index + 2 : index + 3], index + 3
                negate = escape == "P"
                if name.startswith("^"):
                    negate, name = not negate, name[1:]
                known = any(full.startswith(name) for full in _CATEGORY_NAMES)
                if not name or len(name) > 2 or not known:
                    raise TokenizerError(
                        f"regex {pattern!r} uses \\p{{{name}}}, which needs the `regex` "
                        "package (pip install regex) or tokenizers"
                    )
                body = _category_class_body(name, negate)
                out.append(body if in_class else f"[{body}]")
                continue
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            out.append(char)
            index += 1
            if pattern.startswith("^", index):
                out.append("^")
                index += 1
            if pattern.startswith("]", index):
                out.append("\\]")
                index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _compile_pattern(pattern: str) -> Any:
    """Compile an Oniguruma-style pattern with `regex` if importable, else translated for `re`."""
    module = _import_regex()
    try:
        if module is not None:
            return module.compile(pattern)
        return re.compile(_translate_for_re(pattern))
    except Exception as error:  # re.error, or regex.error (not a re.error subclass)
        raise TokenizerError(
            f"cannot compile the tokenizer's regex {pattern!r}: {error}; pip install tokenizers "
            "to encode with this tokenizer"
        ) from error


def _import_regex() -> Any:
    """Return the `regex` module, or None when it is not installed."""
    try:
        return importlib.import_module("regex")
    except ImportError:
        return None


def _component_pattern(component: Mapping[str, Any]) -> Any:
    """Compile the `pattern` of a Split pre-tokenizer or Replace normalizer."""
    pattern = component.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return _compile_pattern(re.escape(pattern["String"]))
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        return _compile_pattern(pattern["Regex"])
    raise TokenizerError(f"tokenizer.json: {component.get('type')} has no usable pattern")


def _make_normalizer(component: Mapping[str, Any]) -> _Normalizer:
    """Return the pure-Python version of one normalizer."""
    kind = component.get("type")
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        form = str(kind)
        return lambda text: unicodedata.normalize(form, text)  # type: ignore[arg-type]
    if kind == "Lowercase":
        return lambda text: text.lower()
    if kind == "Prepend":
        prefix = str(component.get("prepend", ""))
        return lambda text: prefix + text if text else text
    if kind == "Replace":
        content = str(component.get("content", ""))
        literal = _pattern_string(component)
        if literal is not None:
            return lambda text: text.replace(literal, content)
        compiled = _component_pattern(component)
        return lambda text: compiled.sub(lambda match: content, text)
    raise _unsupported("normalizer", component)


def _split_spans(text: str, pattern: Any, behavior: str, invert: bool) -> list[str]:
    """Split text on pattern matches the way `tokenizers`' Split behaviours do."""
    spans: list[tuple[int, int, bool]] = []
    position = 0
    for match in pattern.finditer(text):
        start, end = match.span()
        if start == end:
            continue
        if start > position:
            spans.append((position, start, False))
        spans.append((start, end, True))
        position = end
    if position < len(text):
        spans.append((position, len(text), False))
    if invert:
        spans = [(start, end, not is_match) for start, end, is_match in spans]
    if behavior == "Isolated":
        merged = [[start, end] for start, end, _ in spans]
    elif behavior == "Removed":
        merged = [[start, end] for start, end, is_match in spans if not is_match]
    elif behavior in ("MergedWithPrevious", "MergedWithNext", "Contiguous"):
        ordered = spans if behavior != "MergedWithNext" else list(reversed(spans))
        merged = []
        previous_match = False
        for start, end, is_match in ordered:
            if behavior == "Contiguous":
                join = is_match == previous_match and bool(merged)
            else:
                join = is_match and not previous_match and bool(merged)
            if join and behavior == "MergedWithNext":
                merged[-1][0] = start
            elif join:
                merged[-1][1] = end
            else:
                merged.append([start, end])
            previous_match = is_match
        if behavior == "MergedWithNext":
            merged.reverse()
    else:
        raise TokenizerError(f"tokenizer.json: unknown Split behavior {behavior!r}")
    return [text[start:end] for start, end in merged if end > start]


def _make_pre_tokenizer(component: Mapping[str, Any]) -> _PreTokenizer:
    """Return the pure-Python version of one pre-tokenizer."""
    kind = component.get("type")
    if kind == "Split":
        pattern = _component_pattern(component)
        behavior = str(component.get("behavior", "Isolated"))
        invert = bool(component.get("invert"))

        def split(pieces: list[str], at_start: bool) -> list[str]:
            return [p for piece in pieces for p in _split_spans(piece, pattern, behavior, invert)]

        return split
    if kind == "ByteLevel":
        add_prefix_space = bool(component.get("add_prefix_space"))
        gpt2 = _compile_pattern(_GPT2_SPLIT_PATTERN) if component.get("use_regex", True) else None

        def byte_level(pieces: list[str], at_start: bool) -> list[str]:
            out: list[str] = []
            for piece in pieces:
                if add_prefix_space and not piece.startswith(" "):
                    piece = " " + piece
                parts = _split_spans(piece, gpt2, "Isolated", False) if gpt2 else [piece]
                out.extend(
                    part.encode("utf-8").decode("latin-1").translate(_BYTE_ENCODE_TABLE)
                    for part in parts
                )
            return out

        return byte_level
    if kind == "Metaspace":
        replacement = str(component.get("replacement", "\u2581"))
        scheme = component.get("prepend_scheme")
        if scheme is None:
            scheme = "always" if component.get("add_prefix_space", True) else "never"
        split_on_space = bool(component.get("split", True))
        separator = re.compile(re.escape(replacement))

        def metaspace(pieces: list[str], at_start: bool) -> list[str]:
            out: list[str] = []
            for index, piece in enumerate(pieces):
                piece = piece.replace(" ", replacement)
                first = at_start and index == 0
                if (scheme == "always" or (scheme == "first" and first)) and not piece.startswith(
                    replacement
                ):
                    piece = replacement + piece
                if split_on_space:
                    out.extend(_split_spans(piece, separator, "MergedWithNext", False))
                else:
                    out.append(piece)
            return out

        return metaspace
    raise _unsupported("pre-tokenizer", component)


class _Bpe:
    """The BPE model of `tokenizers`, on strings: merge ranks, byte fallback, unk fusing."""

    def __init__(self, model: Mapping[str, Any]) -> None:
        vocab = model["vocab"]
        self._vocab: dict[str, int] = vocab
        self._ignore_merges = bool(model.get("ignore_merges"))
        self._byte_fallback = bool(model.get("byte_fallback"))
        self._fuse_unk = bool(model.get("fuse_unk"))
        unk = model.get("unk_token")
        self._unk = unk if isinstance(unk, str) and unk in vocab else None
        # "left right" -> rank. Keys reuse the strings json already built, which keeps the
        # table small (Gemma: 580k merges).
        ranks: dict[str, int] = {}
        for rank, merge in enumerate(model.get("merges") or []):
            if isinstance(merge, list) and len(merge) == 2:
                merge = f"{merge[0]} {merge[1]}"
            if not isinstance(merge, str):
                continue
            parts = merge.split(" ")
            if len(parts) != 2 or "".join(parts) not in vocab:
                continue
            if parts[0] not in vocab or parts[1] not in vocab:
                continue
            ranks[merge] = rank
        self._ranks = ranks
        self._cache: dict[str, list[int]] = {}

    def _symbols(self, word: str) -> list[str]:
        """Split a word into initial symbols: characters, byte-fallback tokens, or unk."""
        vocab = self._vocab
        symbols: list[str] = []
        pending_unk = False
        for char in word:
            if char in vocab:
                symbols.append(char)
                pending_unk = False
                continue
            if self._byte_fallback:
                names = [f"<0x{byte:02X}>" for byte in char.encode("utf-8")]
                if all(name in vocab for name in names):
                    symbols.extend(names)
                    pending_unk = False
                    continue
            if self._unk is not None:
                if not (pending_unk and self._fuse_unk):
                    symbols.append(self._unk)
                pending_unk = True
        return symbols

    def tokenize(self, word: str) -> list[int]:
        """Return the ids of one pre-tokenized word."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        vocab = self._vocab
        if self._ignore_merges and word in vocab:
            ids = [vocab[word]]
        else:
            ids = [vocab[symbol] for symbol in self._merge(self._symbols(word))]
        if len(word) <= _WORD_CACHE_LENGTH_MAX:
            if len(self._cache) >= _WORD_CACHE_SIZE_MAX:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    def _merge(self, symbols: list[str]) -> list[str]:
        """Apply merges lowest rank first, leftmost first, as `tokenizers`' Word::merge_all."""
        count = len(symbols)
        if count < 2:
            return symbols
        ranks = self._ranks
        following = list(range(1, count + 1))
        following[-1] = -1
        preceding = list(range(-1, count - 1))
        live: list[str | None] = list(symbols)
        queue: list[tuple[int, int, str]] = []
        for position in range(count - 1):
            rank = ranks.get(f"{symbols[position]} {symbols[position + 1]}")
            if rank is not None:
                queue.append((rank, position, symbols[position] + symbols[position + 1]))
        heapq.heapify(queue)
        while queue:
            rank, position, merged = heapq.heappop(queue)
            left = live[position]
            right_position = following[position]
            if left is None or right_position < 0:
                continue
            right = live[right_position]
            assert right is not None
            if left + right != merged:
                continue  # stale: a neighbour changed since this pair was queued
            live[position] = merged
            live[right_position] = None
            after = following[right_position]
            following[position] = after
            if after >= 0:
                preceding[after] = position
            before = preceding[position]
            if before >= 0:
                before_symbol = live[before]
                assert before_symbol is not None
                pair_rank = ranks.get(f"{before_symbol} {merged}")
                if pair_rank is not None:
                    heapq.heappush(queue, (pair_rank, before, before_symbol + merged))
            if after >= 0:
                after_symbol = live[after]
                assert after_symbol is not None
                pair_rank = ranks.get(f"{merged} {after_symbol}")
                if pair_rank is not None:
                    heapq.heappush(queue, (pair_rank, position, merged + after_symbol))
        return [symbol for symbol in live if symbol is not None]


class _PyEncoder:
    """The pure-Python tokenizer pipeline (used when `tokenizers` is not installed)."""

    def __init__(self, doc: Mapping[str, Any], source: _JsonSource) -> None:
        model = doc["model"]
        if model.get("type", "BPE" if "merges" in model else None) != "BPE":
            raise TokenizerError(
                f"the pure-Python encoder implements BPE models only, not "
                f"{model.get('type')!r}; pip install tokenizers to encode with this tokenizer"
            )
        self._bpe = _Bpe(model)
        self._normalizers = [_make_normalizer(c) for c in _components(doc.get("normalizer"))]
        self._pre_tokenizers = [
            _make_pre_tokenizer(c) for c in _components(doc.get("pre_tokenizer"))
        ]
        # Added tokens that are not special are matched in the raw text, longest first, as the
        # real tokenizer does even with encode_special_tokens on.
        self._added: dict[str, tuple[int, bool, bool]] = {}
        for token in _added_tokens(doc):
            if token["content"] and token["content"] not in source.special_contents:
                self._added[token["content"]] = (
                    int(token["id"]),
                    bool(token.get("lstrip")),
                    bool(token.get("rstrip")),
                )
        self._added_pattern = (
            re.compile("|".join(re.escape(c) for c in sorted(self._added, key=len, reverse=True)))
            if self._added
            else None
        )

    def _split_added(self, text: str) -> list[str | int]:
        """Split text into plain segments (str) and matched non-special added tokens (id)."""
        if self._added_pattern is None:
            return [text]
        parts: list[str | int] = []
        position = 0
        while position < len(text):
            match = self._added_pattern.search(text, position)
            if match is None:
                break
            token_id, lstrip, rstrip = self._added[match.group()]
            start, end = match.span()
            if lstrip:
                while start > position and text[start - 1].isspace():
                    start -= 1
            if rstrip:
                while end < len(text) and text[end].isspace():
                    end += 1
            if start > position:
                parts.append(text[position:start])
            parts.append(token_id)
            position = end
        if position < len(text):
            parts.append(text[position:])
        return parts

    def encode_str(self, text: str) -> list[int]:
        """Encode valid text: added-token split, normalize, pre-tokenize, BPE."""
        ids: list[int] = []
        at_start = True
        for part in self._split_added(text):
            if isinstance(part, int):
                ids.append(part)
                at_start = False
                continue
            for normalize in self._normalizers:
                part = normalize(part)
            pieces = [part] if part else []
            for pre_tokenize in self._pre_tokenizers:
                pieces = pre_tokenize(pieces, at_start)
            for piece in pieces:
                if piece:
                    ids.extend(self._bpe.tokenize(piece))
            at_start = False
        return ids
