"""`Tokenizer`: the byte string of every token id, which ids are special, which end text, and
text to ids (the package's docstring has the rules; `vocab.py` reads the file, `encoders.py`
and `pybpe.py` encode)."""


from __future__ import annotations

import functools
import gzip
import importlib.resources
import os
import re
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from .._core.fork import renew_lock_after_fork
from .._errors import TokenizerError
from .encoders import _Encoder, _GreedyEncoder, _HfEncoder, _JsonSource, _make_byte_exact, _pipeline_copy
from .pybpe import _PyEncoder
from .vocab import (
    _added_is_special, _added_tokens, _byte_level_all_to_bytes, _config_eos_contents, _config_eos_ids,
    _detect_flavour, _model_vocab, _parse_json, _read_bytes, _read_optional_config, _spaced_all_to_bytes, _unique,
)

if TYPE_CHECKING:
    from .._core import Core, CorePool


KIND_TEXT: Final = 0
KIND_SPECIAL: Final = 1
KIND_UNUSED: Final = 2

# Ids are stored in u32 tables by the core; a tokenizer.json naming an id beyond this is more
# likely corrupt than real (the largest real vocabularies are around 260k).
_TOKEN_COUNT_MAX: Final = 1 << 24

_EOS_TOKEN_NAMES: Final = (
    "<|end_of_text|>",
    "<|endoftext|>",
    "</s>",
    "<eos>",
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
)


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
        "_trie_owner",
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
            vocab_size: the mask width, >= len(token_bytes) (`_fitted` cuts the tables of a narrower one).
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
        # The tokenizer of the same width whose trie this one shares in the core (EOS variants).
        self._trie_owner: Tokenizer | None = None
        self._lock = threading.Lock()
        renew_lock_after_fork(self)

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
            vocab_size: the model's logits width, when it is not the tokenizer's size (ids
                past the tokenizer are padding; below it, the ids at or past it are dropped).
            eos_token_ids: end-of-sequence ids, overriding the configs.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: the file is missing, unreadable, not valid JSON, or unsupported;
                `vocab_size` is out of range; an EOS id is out of range.

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
            vocab_size: the model's logits width, when it is not the tokenizer's size.
            eos_token_ids: end-of-sequence ids; default: guessed from the added tokens.

        Returns:
            The loaded Tokenizer.

        Raises:
            TokenizerError: malformed JSON, unsupported model, `vocab_size` out of range, or an
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
        `vocab_size` (the model's logits width: wider than the tokenizer when its rows are
        padded, narrower when it leaves out added tokens). Uses `huggingface_hub`'s cache, so
        it works offline for files downloaded before.

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
            vocab_size: the mask width, when it is not len(tokens) (ids at or past a smaller
                one are dropped).

        Returns:
            The Tokenizer.

        Raises:
            TokenizerError: an entry is not bytes/None, an id is out of range or unused,
                or `vocab_size` is out of range.
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
        token_bytes, kinds, eos = _fitted(token_bytes, kinds, size, checks[1][1])
        return cls(token_bytes, kinds, vocab_size=size, eos_token_ids=eos, source=None)

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
            if isinstance(configured, int) and configured > 0:
                vocab_size = configured
        size = _checked_vocab_size(vocab_size, id_end)
        token_bytes, kinds, eos = _fitted(token_bytes, kinds, size, eos)
        needs_rewrite = flags_differ or _make_byte_exact(_pipeline_copy(doc))
        source = _JsonSource(raw, frozenset(special_contents), needs_rewrite)
        space = "" if flavour.byte_level else flavour.space
        return cls(
            token_bytes, kinds, vocab_size=size, eos_token_ids=eos, source=source, space=space
        )

    # -- the vocabulary ------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """The mask width: the model's logits width. Ids past the tokenizer's own are padding
        (never allowed); a model narrower than its tokenizer drops the ids past its width
        (Llama-3.2 Vision's `<|image|>`), so `n_tokens` is then `vocab_size`."""
        return self._vocab_size

    @property
    def n_tokens(self) -> int:
        """How many ids the tokenizer itself defines (its largest id + 1)."""
        return len(self._token_bytes)

    def core_handle(self, core: Core) -> int:
        """This tokenizer's trie in `core` (one core instance), built there on first use (about
        0.1 s for 128k tokens) and freed with the tokenizer."""
        handles = self._core_handles
        if handles is None:
            from .._core.handles import CoreHandles

            with self._lock:
                handles = self._core_handles
                if handles is None:
                    handles = self._core_handles = CoreHandles("tokenizer")
        return handles.get(self, core, self._build_in)  # type: ignore[no-any-return]

    def prepare(self, pool: CorePool | None = None, *, encoder: bool = True) -> Tokenizer:
        """Build now what the first requests would otherwise wait for: this tokenizer's trie in
        every instance of `pool` (the default pool; about 0.1 s an instance for 128k tokens,
        paid by the first matcher placed there) and, unless `encoder` is False, its encoder
        (`encode`'s first call, the first forced tokens' healing: ~0.55 s for Llama-3). A server
        calls it at start-up; the vLLM and SGLang backends and `hf.LogitsProcessor` do. Returns
        self.
        """
        from .._core import default_pool

        for core in (pool or default_pool()).instances():
            self.core_handle(core)
        if encoder:
            self._encoder("auto")
        return self

    def _build_in(self, core: Core) -> int:
        owner = self._trie_owner
        if owner is not None:  # microseconds: the owner's trie, built or reused in that instance
            return core.tokenizer_with_eos(owner.core_handle(core), self.eos_token_ids)
        blob, offsets, kinds = self.core_tables()
        return core.tokenizer_new(blob, offsets, kinds, self.eos_token_ids)

    @property
    def text_token_length_max(self) -> int:
        """The length in bytes of the longest text token (the reach of healing's look-back)."""
        kinds = self._kinds
        return max((len(data) for token_id, data in enumerate(self._token_bytes) if kinds[token_id] == 0), default=0)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """The end-of-sequence ids (all special), primary first."""
        return self._eos_token_ids

    def with_vocab_size(self, vocab_size: int) -> Tokenizer:
        """Return this tokenizer with another mask width (shares the vocabulary and encoders).

        Args:
            vocab_size: the model's logits width.

        Returns:
            `self` if the width is unchanged, else a Tokenizer whose ids
            n_tokens..vocab_size-1 are padding, or, narrower, without the ids at or past
            `vocab_size` (a model whose logits leave out some of its tokenizer's added tokens).

        Raises:
            TokenizerError: `vocab_size` is out of range, or every EOS id is at or past it.
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
        new matcher used to rebuild it, 0.1 s each). A variant of the same width shares this
        tokenizer's trie and tables in the core too (`ts_tokenizer_with_eos`): a request's stop
        tokens cost microseconds, not another trie of ~10-20 MB per instance."""
        if size == self._vocab_size and eos == self._eos_token_ids:
            return self
        key = (size, eos)
        with self._lock:
            found = self._widened.get(key)
            if found is None:
                same_width = size == self._vocab_size
                token_bytes = self._token_bytes
                if same_width:
                    kinds = self._kinds  # read-only once made
                else:
                    token_bytes, kinds, eos = _fitted(token_bytes, bytearray(self._kinds[: len(token_bytes)]), size, eos)
                found = Tokenizer(
                    token_bytes,
                    kinds,
                    vocab_size=size,
                    eos_token_ids=eos,
                    source=self._source,
                    space=self._space,
                )
                found._encoders = self._encoders  # the same text gives the same ids
                if same_width:
                    found._trie_owner = self._trie_owner or self
                self._widened[key] = found
        return found

    def __reduce__(self) -> tuple[Callable[..., Tokenizer], tuple[Any, ...]]:
        """Pickle (multiprocessing, Ray, `copy.deepcopy`) the vocabulary and what `encode`
        needs (the tokenizer.json it came from); not the tables and tries built from it,
        which the copy builds again where it is used. A variant with other EOS ids
        (`with_eos_token_ids`) is pickled as its tokenizer's variant, so that the two still
        share one trie per instance."""
        owner = self._trie_owner
        if owner is not None:
            return _tokenizer_variant, (owner, self._vocab_size, self._eos_token_ids)
        return _restored_tokenizer, (
            self._token_bytes, bytes(self._kinds), self._vocab_size, self._eos_token_ids, self._source, self._space,
        )

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
        from .partial import tokenize_partial

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


def _restored_tokenizer(
    token_bytes: list[bytes], kinds: bytes, vocab_size: int, eos_token_ids: tuple[int, ...],
    source: _JsonSource | None, space: str,
) -> Tokenizer:
    """A pickled `Tokenizer` (`Tokenizer.__reduce__`)."""
    return Tokenizer(token_bytes, bytearray(kinds), vocab_size=vocab_size, eos_token_ids=tuple(eos_token_ids),
                     source=source, space=space)


def _tokenizer_variant(owner: Tokenizer, vocab_size: int, eos_token_ids: tuple[int, ...]) -> Tokenizer:
    """A pickled variant of a tokenizer (`Tokenizer.__reduce__`)."""
    return owner._variant(vocab_size, tuple(eos_token_ids))


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
    if vocab_size < 1:
        raise TokenizerError(f"vocab_size={vocab_size} must be positive (the model's logits width)")
    if vocab_size > _TOKEN_COUNT_MAX:  # (a mask of 10**12 ids was a MemoryError)
        raise TokenizerError(f"vocab_size={vocab_size} is more than {_TOKEN_COUNT_MAX:,}, the most ids tokensieve supports")
    return vocab_size


def _fitted(token_bytes: list[bytes], kinds: bytearray, size: int,
            eos: tuple[int, ...]) -> tuple[list[bytes], bytearray, tuple[int, ...]]:
    """The tables of ids 0..n_tokens-1 at mask width `size`: padded with unused ids, or cut
    to the first `size` ids (their EOS ids with them).

    Raises:
        TokenizerError: every EOS id is at or past a narrower `size`.
    """
    n_tokens = len(token_bytes)
    if size >= n_tokens:
        kinds.extend(bytes([KIND_UNUSED]) * (size - n_tokens))
        return token_bytes, kinds, eos
    kept = tuple(token_id for token_id in eos if token_id < size)
    if eos and not kept:
        raise TokenizerError(
            f"vocab_size={size} leaves out every EOS id ({', '.join(map(str, eos))}); pass "
            "eos_token_ids= with ids below it"
        )
    return token_bytes[:size], kinds[:size], kept


@functools.lru_cache(maxsize=1)
def _default_tokenizer() -> Tokenizer:
    """Load the bundled GPT-2 tokenizer once."""
    resource = importlib.resources.files("tokensieve").joinpath("data").joinpath(
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

