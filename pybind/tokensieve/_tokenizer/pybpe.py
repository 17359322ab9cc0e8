"""The `tokenizers` pipeline in pure Python, for Pyodide and installs without `tokenizers`:
added-token split, normalizers, pre-tokenizers (Split, ByteLevel, Metaspace) and the BPE
model, mirroring `tokenizers` (details in the package's docstring)."""


from __future__ import annotations

import functools
import heapq
import importlib.resources
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._errors import TokenizerError
from .encoders import _JsonSource
from .vocab import _BYTE_ENCODE_TABLE, _added_tokens, _components, _pattern_string


_WORD_CACHE_SIZE_MAX: Final = 1 << 16
_WORD_CACHE_LENGTH_MAX: Final = 256


_GPT2_SPLIT_PATTERN: Final = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
)


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

