"""`Matcher`: one decoding position of a grammar over a tokenizer, driven in the core."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Sequence

from ._abi import Core, default_core, free_later
from ._errors import CoreTrap, TokensieveError
from ._grammar import Grammar

if TYPE_CHECKING:
    from ._tokenizer import Tokenizer

# Forced bytes are asked for in chunks of this size (the core stops at any choice).
_FF_CHUNK_BYTES = 4096
_FF_BYTES_MAX = 1 << 20

_tokenizer_handles: weakref.WeakKeyDictionary[Core, weakref.WeakKeyDictionary[Any, int]] = (
    weakref.WeakKeyDictionary()
)


def tokenizer_handle(core: Core, tokenizer: Tokenizer) -> int:
    """The tokenizer's trie in `core`, built on first use and shared by all its matchers."""
    per_core = _tokenizer_handles.setdefault(core, weakref.WeakKeyDictionary())
    handle = per_core.get(tokenizer)
    if handle is not None:
        return handle
    blob, offsets, kinds = tokenizer.core_tables()
    eos = b"".join(int(t).to_bytes(4, "little") for t in tokenizer.eos_token_ids)
    buffers = [core.put_bytes(data) for data in (blob, offsets, kinds, eos)]
    try:
        (blob_ptr, blob_len), (offsets_ptr, _), (kinds_ptr, n_ids), (eos_ptr, eos_len) = buffers
        handle = core.call_out(
            "ts_tokenizer_new", blob_ptr, blob_len, offsets_ptr, kinds_ptr, n_ids, eos_ptr, eos_len // 4
        )
    finally:
        for ptr, size in buffers:
            core.free(ptr, size)
    per_core[tokenizer] = handle
    free_later(tokenizer, core, "ts_tokenizer_free", handle)
    return handle


class Matcher:
    """Tracks one output against a grammar and computes which tokens may come next.

    A token is allowed when the output so far plus the token's bytes can still be completed to a
    string of the grammar. EOS ids are allowed exactly when the output may end here; consuming
    one stops the matcher. Special tokens (other than EOS) and ids beyond the tokenizer's own
    (up to `vocab_size`) are never allowed.

    Every method is one call into the WebAssembly core.

    Args:
        tokenizer: the model's tokenizer.
        grammar: what the output must follow.
        vocab_size: the model's logits width, if wider than `tokenizer.vocab_size` is not
            already; masks are this many bits.
    """

    def __init__(self, tokenizer: Tokenizer, grammar: Grammar, *, vocab_size: int | None = None) -> None:
        if not isinstance(grammar, Grammar):
            raise TypeError(f"Matcher needs a tokensieve.Grammar, not {type(grammar).__name__}")
        if vocab_size is not None and vocab_size != tokenizer.vocab_size:
            tokenizer = tokenizer.with_vocab_size(vocab_size)
        self.tokenizer = tokenizer
        self.grammar = grammar
        self.vocab_size: int = tokenizer.vocab_size
        self.mask_words: int = (self.vocab_size + 31) // 32
        self._core = default_core()
        self._handle = self._core.call_out(
            "ts_matcher_new", tokenizer_handle(self._core, tokenizer), grammar._handle(self._core)
        )
        self._tokens: list[int] = []
        self._init_buffers()

    def _init_buffers(self) -> None:
        core = self._core
        self._mask_ptr = core.alloc(self.mask_words * 4)
        self._ff_ptr = core.alloc(_FF_CHUNK_BYTES)
        f = core.f
        self._fill = f["ts_matcher_fill_bitmask"]
        self._consume = f["ts_matcher_consume_token"]
        self._consume_fill = f["ts_matcher_consume_and_fill"]
        # The last (bitmask, row) filled and its validated byte view: decoding loops fill the
        # same buffer at every step, and validating it costs more than a cached mask.
        self._last_dest: tuple[Any, int, memoryview] | None = None
        handle, mask, ff = self._handle, self._mask_ptr, self._ff_ptr
        words = self.mask_words

        def release(c: Core = core) -> None:
            if not c.poisoned:
                c.f["ts_matcher_free"](handle)
                c.free(mask, words * 4)
                c.free(ff, _FF_CHUNK_BYTES)

        weakref.finalize(self, release)

    def _live(self) -> Core:
        core = self._core
        if core.poisoned:
            raise CoreTrap(
                "this matcher's WASM core trapped earlier and cannot be used; create a new Matcher"
            )
        return core

    def __repr__(self) -> str:
        return f"<Matcher {self.grammar!r} tokens={self.token_count}>"

    # -- masks -----------------------------------------------------------------------------

    def compute_bitmask(self) -> Any:
        """The allowed tokens as a bitmask.

        Returns:
            A numpy int32 array of ceil(vocab_size / 32) words: token t is allowed when bit
            t % 32 (least significant first) of word t // 32 is set. Without numpy (Pyodide),
            an `array.array("i")` with the same layout.

        Raises:
            LimitError: the grammar needed more lexer work than the limits allow.
        """
        try:
            import numpy as np
        except ImportError:
            import array

            out: Any = array.array("i", bytes(self.mask_words * 4))
        else:
            out = np.empty(self.mask_words, dtype=np.int32)
        self._fill_into(memoryview(out).cast("B"))
        return out

    def fill_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write the allowed-token mask into row `row` of a caller's int32 array.

        The layout is the one serving engines use (see `compute_bitmask`), copied straight from
        the core's linear memory into the array.

        Args:
            bitmask: a numpy array or CPU torch tensor of int32, shape (batch, words) or
                (words,), with words = ceil(vocab_size / 32); rows must be contiguous.
            row: the row to fill.

        The matcher remembers the last array it filled (repeated fills of the same row skip
        re-validating it), which keeps that array alive and its size fixed while the matcher
        is alive.

        Raises:
            ValueError: wrong dtype, shape or device.
        """
        self._fill_into(self._dest(bitmask, row))

    def _dest(self, bitmask: Any, row: int) -> memoryview:
        last = self._last_dest
        if last is not None and last[0] is bitmask and last[1] == row:
            return last[2]
        view = _row_view(bitmask, row, self.mask_words)
        self._last_dest = (bitmask, row, view)
        return view

    def _fill_into(self, dest: memoryview) -> None:
        core = self._live()
        core.check(self._fill(self._handle, self._mask_ptr, self.mask_words), "fill_bitmask")
        core.runtime.read_into(self._mask_ptr, dest)

    def consume_and_fill_bitmask(self, token: int, bitmask: Any, row: int = 0) -> bool:
        """Consume `token` and write the next mask, in one call into the core.

        Returns:
            True when the token was accepted (and the mask written); False when the grammar
            refuses it (nothing changes).
        """
        dest = self._dest(bitmask, row)
        core = self._live()
        if not 0 <= token < self.vocab_size:
            raise _bad_token(token, self.vocab_size)
        accepted = core.check(
            self._consume_fill(self._handle, token, self._mask_ptr, self.mask_words), "consume"
        )
        if accepted:
            self._tokens.append(token)
            core.runtime.read_into(self._mask_ptr, dest)
        return bool(accepted)

    # -- consuming -------------------------------------------------------------------------

    def consume_token(self, token: int) -> bool:
        """Advance by one token.

        Returns:
            True when the grammar allows it (the state advanced); False when it does not (the
            state is unchanged).

        Raises:
            TokensieveError: `token` is not below `vocab_size`.
        """
        core = self._live()
        if not 0 <= token < self.vocab_size:
            raise _bad_token(token, self.vocab_size)
        accepted = bool(core.check(self._consume(self._handle, token), "consume_token"))
        if accepted:
            self._tokens.append(token)
        return accepted

    def consume_tokens(self, tokens: Sequence[int]) -> bool:
        """Advance by several tokens, all or nothing.

        Returns:
            True when all were consumed; False when one is refused (nothing is consumed).
        """
        core = self._live()
        n = len(tokens)
        ptr = core.put_ids(tokens)
        valid = core.check(core.f["ts_matcher_consume_tokens"](self._handle, ptr, n), "consume_tokens")
        if valid == n:
            self._tokens.extend(tokens)
        return valid == n

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many of `tokens`, from the start, the grammar would accept; the state is unchanged."""
        core = self._live()
        ptr = core.put_ids(tokens)
        return core.check(core.f["ts_matcher_validate_tokens"](self._handle, ptr, len(tokens)), "validate_tokens")

    def rollback(self, count: int) -> None:
        """Undo the last `count` consumed tokens (an EOS counts as one).

        Raises:
            TokensieveError: fewer than `count` tokens were consumed.
        """
        if count < 0:
            raise TokensieveError(f"rollback takes a non-negative count, not {count}")
        core = self._live()
        core.check(core.f["ts_matcher_rollback"](self._handle, count), "rollback")
        if count:
            del self._tokens[-count:]

    def reset(self) -> None:
        """Go back to the start of the grammar."""
        core = self._live()
        core.check(core.f["ts_matcher_reset"](self._handle), "reset")
        self._tokens.clear()

    def fork(self) -> Matcher:
        """An independent copy of this matcher at the same position (shares the compiled grammar)."""
        core = self._live()
        copy = object.__new__(Matcher)
        copy.tokenizer = self.tokenizer
        copy.grammar = self.grammar
        copy.vocab_size = self.vocab_size
        copy.mask_words = self.mask_words
        copy._core = core
        copy._handle = core.call_out("ts_matcher_fork", self._handle)
        copy._tokens = list(self._tokens)
        copy._init_buffers()
        return copy

    # -- state -----------------------------------------------------------------------------

    @property
    def token_count(self) -> int:
        """Tokens consumed so far (EOS included)."""
        core = self._live()
        return core.check(core.f["ts_matcher_token_count"](self._handle))

    @property
    def consumed_tokens(self) -> list[int]:
        """The tokens consumed so far, in order (EOS included); a copy."""
        return list(self._tokens)

    def is_accepting(self) -> bool:
        """True when the output may end here (EOS is allowed)."""
        core = self._live()
        return bool(core.check(core.f["ts_matcher_is_accepting"](self._handle)))

    def is_stopped(self) -> bool:
        """True when nothing but EOS can follow, or EOS was consumed."""
        core = self._live()
        return bool(core.check(core.f["ts_matcher_is_stopped"](self._handle), "is_stopped"))

    def extension_allowed(self, prefix: bytes, suffix: bytes) -> bool:
        """After the bytes `prefix`, would the grammar allow a token strictly extending `suffix`?

        The question fast-forward healing asks before turning forced bytes into tokens. Does
        not change the state; False when the grammar refuses `prefix` itself.
        """
        core = self._live()
        data = bytes(prefix) + bytes(suffix)
        ptr, size = core.put_bytes(data)
        try:
            answer = core.f["ts_matcher_extension_allowed"](self._handle, ptr, len(prefix), ptr + len(prefix), len(suffix))
            return bool(core.check(answer, "extension_allowed"))
        finally:
            core.free(ptr, size)

    def heal_position(self, data: bytes, start: int = 0) -> int:
        """The earliest offset `i >= start` from which a token the grammar allows (after
        `data[:i]`) strictly extends `data[i:]`; `len(data)` when there is none.

        Fast-forward healing's question in one call into the core. Does not change the state.
        """
        core = self._live()
        if not 0 <= start <= len(data):
            raise ValueError(f"start {start} is outside 0..{len(data)}")
        if len(data) <= _FF_CHUNK_BYTES:
            ptr, size, owned = self._ff_ptr, len(data), False
            core.runtime.write(ptr, bytes(data))
        else:
            ptr, size = core.put_bytes(bytes(data))
            owned = True
        try:
            return core.check(core.f["ts_matcher_heal_position"](self._handle, ptr, size, start), "heal_position")
        finally:
            if owned:
                core.free(ptr, size)

    def validate_text(self, data: bytes) -> tuple[int, bytes]:
        """How far the grammar follows `data` from here, and what it forces after that.

        Prompt lookup's question for a text draft, in one call into the core. The bytes are read
        as if they went into one token (token budgets are not charged). Does not change the state.

        Returns:
            (valid, forced): `data[:valid]` is the longest prefix the grammar allows; `forced`
            are the bytes it forces after that prefix (at most 4096).
        """
        core = self._live()
        data = bytes(data)
        ptr, size = core.put_bytes(data)
        try:
            valid = core.check(
                core.f["ts_matcher_validate_text"](
                    self._handle, ptr, size, self._ff_ptr, _FF_CHUNK_BYTES, core.out_ptr
                ),
                "validate_text",
            )
            forced = core.read(self._ff_ptr, core.out_i32())
        finally:
            core.free(ptr, size)
        return valid, forced

    def fill_draft_masks(self, tokens: Sequence[int], bitmask: Any = None) -> tuple[int, Any]:
        """The masks at every position of a draft, from one call into the core.

        Row i is the mask before `tokens[i]`; the row after the last accepted token is the mask
        after the draft. Verification of speculative drafts masks each position with these.
        Does not change the state.

        Args:
            tokens: the draft.
            bitmask: optional int32 array of shape (>= len(tokens) + 1, words) to fill; by
                default a new one (numpy, or a list of `array.array("i")` rows without numpy).

        Returns:
            (valid, masks): `valid` draft tokens are accepted; rows 0..valid are written.
        """
        core = self._live()
        ids = [int(t) for t in tokens]
        for t in ids:
            if not 0 <= t < self.vocab_size:
                raise _bad_token(t, self.vocab_size)
        words = self.mask_words
        rows = len(ids) + 1
        size = rows * words * 4
        out_ptr = core.alloc(size)
        try:
            ids_ptr = core.put_ids(ids)
            valid = core.check(
                core.f["ts_matcher_fill_draft_masks"](self._handle, ids_ptr, len(ids), out_ptr, words),
                "fill_draft_masks",
            )
            if bitmask is None:
                bitmask = _new_masks(rows, words)
            for row in range(valid + 1):
                dest = _row_view(bitmask[row], 0, words) if isinstance(bitmask, list) else _row_view(bitmask, row, words)
                core.runtime.read_into(out_ptr + row * words * 4, dest)
        finally:
            core.free(out_ptr, size)
        return valid, bitmask

    def compute_ff_bytes(self) -> bytes:
        """The bytes the grammar forces next: no alternative, and it cannot end before them.

        Does not change the state. Empty when there is a choice (or the output may end here).
        """
        core = self._live()
        n = core.check(
            core.f["ts_matcher_compute_ff_bytes"](self._handle, self._ff_ptr, _FF_CHUNK_BYTES),
            "compute_ff_bytes",
        )
        return core.read(self._ff_ptr, n)

    def compute_ff_tokens(self, *, lookback: int = 4, context_tokens: Sequence[int] | None = None) -> list[int]:
        """The tokens the grammar forces next, healed to be canonical (see `_fastforward`).

        Args:
            lookback: how many trailing tokens may be dropped because a longer allowed token
                could start inside them (0: no healing).
            context_tokens: the output's recent tokens; the last one is tokenizer context.
                Default: the tokens this matcher consumed.

        Does not change the state. Forced special tokens are included as their ids.
        """
        from ._fastforward import compute_ff_tokens

        if context_tokens is None:
            context_tokens = self._tokens[-lookback - 1 :]
        return compute_ff_tokens(self, lookback=lookback, context_tokens=context_tokens)

    def consume_ff_tokens(self, *, lookback: int = 4, context_tokens: Sequence[int] | None = None) -> list[int]:
        """Consume the tokens `compute_ff_tokens` returns, and return them."""
        tokens = self.compute_ff_tokens(lookback=lookback, context_tokens=context_tokens)
        if tokens and not self.consume_tokens(tokens):
            raise TokensieveError(
                f"internal: the grammar refused its own forced tokens {tokens!r}; please report this with the grammar"
            )
        return tokens


def token_has_extension(tokenizer: Tokenizer, data: bytes) -> bool:
    """Does some token of `tokenizer` strictly extend `data`? Answered by the core's trie."""
    core = default_core()
    handle = tokenizer_handle(core, tokenizer)
    ptr, size = core.put_bytes(bytes(data))
    try:
        return bool(core.check(core.f["ts_tokenizer_has_extension"](handle, ptr, size), "has_extension"))
    finally:
        core.free(ptr, size)


def token_heal_position(tokenizer: Tokenizer, data: bytes, start: int = 0) -> int:
    """The earliest offset `i >= start` such that some token strictly extends `data[i:]`;
    `len(data)` when none (`tokenize_partial`'s healing, one call into the core)."""
    if not 0 <= start <= len(data):
        raise ValueError(f"start {start} is outside 0..{len(data)}")
    core = default_core()
    handle = tokenizer_handle(core, tokenizer)
    ptr, size = core.put_bytes(bytes(data))
    try:
        return core.check(core.f["ts_tokenizer_heal_position"](handle, ptr, size, start), "heal_position")
    finally:
        core.free(ptr, size)


def mask_token_ids(mask: Sequence[int], limit: int) -> list[int]:
    """The token ids below `limit` whose bit is set in `mask` (int32 words), in order; plain
    Python, for hosts without numpy."""
    ids: list[int] = []
    for index, word in enumerate(mask):
        bits = int(word) & 0xFFFFFFFF
        while bits:
            low = bits & -bits
            token = index * 32 + low.bit_length() - 1
            if token < limit:
                ids.append(token)
            bits ^= low
    return ids


def _new_masks(rows: int, words: int) -> Any:
    """A zeroed (rows, words) int32 array: numpy when importable, else rows of `array.array`."""
    try:
        import numpy as np
    except ImportError:
        import array

        return [array.array("i", bytes(words * 4)) for _ in range(rows)]
    return np.zeros((rows, words), dtype=np.int32)


def _bad_token(token: int, vocab_size: int) -> TokensieveError:
    return TokensieveError(f"token id {token} is not in 0..{vocab_size - 1} (the matcher's vocab_size)")


def _row_view(bitmask: Any, row: int, words: int) -> memoryview:
    """A writable byte view of one contiguous int32 row of a numpy array or CPU torch tensor."""
    module = type(bitmask).__module__
    if module.startswith("torch"):
        if bitmask.device.type != "cpu":
            raise ValueError(
                f"fill_bitmask needs a CPU tensor (got device {bitmask.device}); fill a CPU "
                "(ideally pinned) tensor and copy it to the device"
            )
        bitmask = bitmask.numpy()
    shape = getattr(bitmask, "shape", None)
    dtype = getattr(bitmask, "dtype", None)
    if shape is None or dtype is None:
        view = memoryview(bitmask)
        if view.format not in ("i", "l") or view.itemsize != 4:
            raise ValueError("fill_bitmask needs an int32 buffer")
        target = view.cast("B")
        if target.nbytes % (words * 4):
            raise ValueError(f"the bitmask buffer's size is not a multiple of {words} int32 words")
        return target[row * words * 4 : (row + 1) * words * 4]
    if str(dtype) != "int32":
        raise ValueError(f"fill_bitmask needs an int32 array, got {dtype}")
    if shape[-1] != words:
        raise ValueError(f"the bitmask has {shape[-1]} words per row; this vocabulary needs {words}")
    target_row = bitmask[row] if len(shape) == 2 else bitmask
    if len(shape) not in (1, 2):
        raise ValueError(f"fill_bitmask needs a 1-D or 2-D array, got shape {tuple(shape)}")
    if not target_row.flags["C_CONTIGUOUS"]:
        raise ValueError("the bitmask row must be contiguous")
    return memoryview(target_row).cast("B")
