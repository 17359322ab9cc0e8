"""Token bytes from `tokenizer.json`: the flavour of the vocabulary (byte-level, SentencePiece,
plain UTF-8), the byte string of every id, added tokens, end-of-sequence ids from the config
files. The rules are in the package's docstring (`tokensieve._tokenizer`)."""


from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .._errors import TokenizerError


_SECTION_DEPTH_MAX: Final = 32


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
        pass
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise TokenizerError(
            f"tokenizer.json: the vocab entry {text.encode('utf-8', 'backslashreplace').decode()} holds a lone "
            "surrogate, which has no bytes; the file is probably corrupt"
        ) from None


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


