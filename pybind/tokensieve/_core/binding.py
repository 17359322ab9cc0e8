"""The binding: one core instance and its exports as typed methods.

This is the only module that knows the core's export names, its status codes and how its
errors are decoded (`wasm/ABI.md` is the contract). Everything above it calls methods such as
`Core.matcher_fill_bitmask(handle, words, dest)` and gets Python values or exceptions.

Why it is shaped this way:

- **One lock per instance, held for a whole method.** A method is often several calls into
  the module: write the arguments into linear memory, call the export, read the status, read
  the error text or an out-value. Holding the instance's lock across the sequence is what
  makes the methods atomic: two threads creating matchers at once can never read each
  other's handle from the shared out-pointer (they once could). The wasmtime calls release
  the GIL, so threads working on *different* instances run at the same time.
- **Statuses come from the module itself.** The core's manifest (generated from its enums)
  names every status and limit kind; the binding reads it at load and checks the version.
- **Structured errors.** A failing export leaves its status, message, byte position, limit
  kind and lexeme index in the module; the binding turns them into `GrammarError` (with the
  lexeme index for the front-end to name), `LimitError` (with the limit's name) or
  `TokensieveError`. No message text is parsed.
- **Scratch buffers per instance.** Calls on one instance are serialized, so one id buffer and
  one byte buffer serve every matcher of the instance; a matcher costs the core nothing in the
  host's buffers.
- **The step path copies a mask once.** `fill_bitmask` and `consume_and_fill` leave the mask
  in the matcher's own buffer in the core (out_ptr 0), and the runtime's `func_copy` copies it
  from there into the caller's row after the call: one call, one copy, nothing allocated.
- **Frees from finalizers are deferred.** A finalizer may run in any thread at any allocation,
  including inside one of this instance's locked methods; taking the lock there would
  deadlock. So `free_later` only queues the handle (a deque append is atomic) and the next
  methods drain the queue under the lock, at most `_DRAIN_PER_CALL` handles each (`live_kib`
  drains it all).
- **Poisoning.** A trap or deadline poisons the runtime (`poisoned`); later calls raise
  `CoreTrap` without entering the module. The pool replaces the instance (see `pool.py`).
"""

from __future__ import annotations

import itertools
import json
from collections import deque
import struct
import threading
from collections.abc import Sequence
from typing import Any, Callable, Final

from .._errors import CoreTrap, GrammarError, LimitError, TokensieveError
from .fork import MID_CALL_AT_FORK, renew_lock_after_fork
from .runtime import Runtime

ABI_VERSION: Final = 9

# The statuses the binding acts on, by their manifest names (their numbers come from the
# module's manifest, generated from `Status` in core/src/abi.zig).
_STATUS_NAMES: Final = (
    "ok", "invalid_handle", "out_of_memory", "grammar_error", "limit_exceeded",
    "invalid_token", "invalid_argument", "matcher_failed", "internal", "refused_token",
)

# `LimitField` order of `ts_grammar_new_ir`'s limit values, with the `Limits` attribute each
# comes from.
LIMIT_FIELDS: Final = (
    ("fuel_step_max", "step_fuel_max"),
    ("state_count_max", "dfa_state_count_max"),
    ("expr_count_max", "expression_count_max"),
    ("row_item_count_max", "parser_row_items_max"),
    ("step_item_count_max", "parser_step_items_max"),
    ("token_history_max", "token_history_max"),
    ("fuel_compile_max", "compile_fuel_max"),
)

_EXPORTS: Final = (
    "ts_abi_version", "ts_manifest_ptr", "ts_manifest_len",
    "ts_error_message_ptr", "ts_error_message_len", "ts_error_position", "ts_error_limit",
    "ts_error_lexeme", "ts_alloc", "ts_free", "ts_handles_free",
    "ts_tokenizer_new", "ts_tokenizer_with_eos", "ts_tokenizer_free", "ts_tokenizer_node_count", "ts_tokenizer_has_extension",
    "ts_tokenizer_heal_position",
    "ts_grammar_new_ir", "ts_grammar_free",
    "ts_matcher_new", "ts_matcher_free", "ts_matcher_fork", "ts_matcher_reset",
    "ts_matcher_fill_bitmask", "ts_matcher_mask_ptr", "ts_matcher_fill_bitmasks", "ts_matcher_consume_token", "ts_matcher_consume_tokens",
    "ts_matcher_validate_tokens", "ts_matcher_consume_and_fill", "ts_matcher_rollback",
    "ts_matcher_token_count", "ts_matcher_is_accepting", "ts_matcher_is_stopped",
    "ts_matcher_compute_ff_bytes", "ts_matcher_extension_allowed", "ts_matcher_heal_position",
    "ts_matcher_validate_text", "ts_matcher_fill_draft_masks", "ts_matcher_last_fuel", "ts_debug_live_kib", "ts_debug_walk_replays", "ts_debug_pattern_cache_kib", "ts_debug_spin", "ts_debug_clamp", "ts_spin_until",
    "ts_debug_pattern_cache", "ts_debug_slices", "ts_debug_trap",
)

# Construction: bounded by its input, allowed past the per-call deadline. A matcher's first
# parser row is compile work (`Limits.compile_fuel_max`, up to about 0.3 s of CPU): under the
# step deadline a busy host retired instances for matchers the fuel was about to refuse anyway.
_SLOW_EXPORTS: Final = frozenset({"ts_tokenizer_new", "ts_grammar_new_ir", "ts_matcher_new"})

# Queued frees one call performs: a free through wasmtime's checked call costs ~20-40 µs, and
# 300 dropped forks drained by one call took 10-15 ms of CPU (the fuzzer's fork storms).
_DRAIN_PER_CALL: Final = 16
# IRs up to this size go through the scratch buffer, which keeps its size: a median MaskBench
# IR is ~1.7 KB; a 10,000-word list's would keep 256 KiB allocated after its grammar is gone.
_SCRATCH_IR_BYTES_MAX: Final = 16 * 1024
# `ts_handles_free`'s kind codes, by the export that frees one handle of the kind.
_FREE_KINDS: Final = {"ts_tokenizer_free": 0, "ts_grammar_free": 1, "ts_matcher_free": 2}
_FF_CHUNK_BYTES: Final = 1024  # the core computes at most this many forced bytes per call
_serial = itertools.count(1)


def _retire_after_fork(core: Core) -> None:
    """In the child of `os.fork`, an instance whose lock another thread held (`fork.py`) was in
    the middle of a method (its memory, or this object's tables, half updated): it is retired,
    as after a trap, and its matchers move to a fresh instance on their next call."""
    core.runtime.retire(MID_CALL_AT_FORK)


class BatchCall:
    """One prepared `ts_matcher_fill_bitmasks` call (see `Core.batch_begin`)."""

    __slots__ = ("statuses_ptr", "tokens_ptr", "count", "words", "sources", "dests", "failed", "error", "ran", "unconsumed")

    def __init__(self, statuses_ptr: int, tokens_ptr: int, count: int, words: int, sources: list[Any],
                 dests: Sequence[memoryview]) -> None:
        self.statuses_ptr = statuses_ptr
        self.tokens_ptr = tokens_ptr
        self.count = count
        self.words = words
        self.sources = sources
        self.dests = dests
        self.failed = 0
        self.error: BaseException | None = None
        self.ran = False  # the call returned (whatever its statuses)
        # Set by `batch_finish`: the entries whose token, if they had one, is not consumed
        # (all of them when the call did not run or failed as a whole).
        self.unconsumed: set[int] | range = range(count)


class Core:
    """One instance of the core module, its exports as typed methods.

    Every method is atomic (the instance's lock is held throughout) and raises on a failing
    status: `GrammarError`, `LimitError` (`.limit` names the limit), `CoreTrap` (the
    instance trapped or is poisoned), `TokensieveError` (a bad argument or handle).

    Attributes:
        serial: a process-wide number of this instance (diagnostics, tests).
        options: the options it was created with (a `CoreOptions`), kept for its replacement.
        matcher_count: live matchers placed on it (the pool places new ones by it).
    """

    def __init__(self, runtime: Runtime, options: Any = None) -> None:
        self.runtime = runtime
        self.options = options
        self.serial = next(_serial)
        self.lock = threading.Lock()
        self.matcher_count = 0
        renew_lock_after_fork(self, "lock", _retire_after_fork)
        self._pending_frees: deque[tuple[str, int]] = deque()
        f = {name: runtime.func(name, slow=name in _SLOW_EXPORTS) for name in _EXPORTS}
        self._f = f
        version = f["ts_abi_version"]()
        if version != ABI_VERSION:
            raise TokensieveError(
                f"the WASM core speaks ABI version {version}, this package expects {ABI_VERSION}; "
                "reinstall tokensieve so the module and the Python code match"
            )
        manifest = json.loads(runtime.read(f["ts_manifest_ptr"](), f["ts_manifest_len"]()))
        status = manifest["status"]
        missing = [name for name in _STATUS_NAMES if name not in status]
        if missing:
            raise TokensieveError(f"the WASM core's manifest lacks the statuses {missing}; reinstall tokensieve")
        self._status_name = {value: name for name, value in status.items()}
        self._limit_name = {value: name for name, value in manifest["limit_kind"].items()}
        self._input_bytes_max: int = manifest["input_bytes_max"]
        if list(manifest["limit_field"]) != [name for name, _ in LIMIT_FIELDS]:
            raise TokensieveError("the WASM core's limit fields differ from this package's; reinstall tokensieve")
        # Scratch: an out-value area, a growable id/byte buffer and the forced-bytes buffer.
        self._out = self._alloc(16)
        self._scratch_ptr = 0
        self._scratch_bytes = 0
        self._ff_ptr = self._alloc(_FF_CHUNK_BYTES)
        # Each live matcher's own mask buffer as a `source_for` range, by handle (handle
        # values are never reused in an instance; an entry goes when its matcher is freed).
        self._mask_sources: dict[int, Any] = {}
        # The same buffers' addresses in linear memory, for the batch path's copies.
        self._mask_ptrs: dict[int, int] = {}
        self._batch_ptr = 0
        self._batch_bytes = 0
        # The step path's calls, without the runtime's own lock (this instance's lock is held).
        self._fill = runtime.func_copy("ts_matcher_fill_bitmask", copy_from_status=0)
        self._consume = runtime.func("ts_matcher_consume_token", trusted=True)
        self._consume_fill = runtime.func_copy("ts_matcher_consume_and_fill", copy_from_status=1)
        self._fill_many = runtime.func("ts_matcher_fill_bitmasks", trusted=True)
        self._spin_until = runtime.func("ts_spin_until", trusted=True)
        self._spin_ptr = 0
        self._spin_word: Any = None  # see `spin_word`; False where memory may move

    def __repr__(self) -> str:
        state = "poisoned" if self.poisoned else "live"
        return f"<Core #{self.serial} {self.runtime.name} {state}, {self.matcher_count} matchers>"

    @property
    def poisoned(self) -> bool:
        """True once the instance trapped, ran past a deadline or fuel, or the process exits."""
        return bool(self.runtime.poisoned)

    # -- memory (lock held) ----------------------------------------------------------------

    def _alloc(self, size: int) -> int:
        ptr = self._f["ts_alloc"](size)
        if ptr == 0:
            raise LimitError(
                f"the WASM core is out of memory (allocating {size} bytes); raise "
                "CoreOptions.memory_limit_bytes or use fewer grammars per instance",
                limit="memory",
            )
        return ptr & 0xFFFFFFFF

    def _free(self, ptr: int, size: int) -> None:
        if not self.poisoned:
            self._f["ts_free"](ptr, size)

    def _scratch(self, size: int) -> int:
        """The instance's reusable input buffer, grown to at least `size` bytes."""
        if size > self._scratch_bytes:
            if self._scratch_ptr:
                self._f["ts_free"](self._scratch_ptr, self._scratch_bytes)
                self._scratch_ptr = self._scratch_bytes = 0
            capacity = max(256, 1 << (size - 1).bit_length())
            self._scratch_ptr = self._alloc(capacity)
            self._scratch_bytes = capacity
        return self._scratch_ptr

    def _put_input(self, data: bytes) -> int:
        """`data` in linear memory for a call that takes at most the manifest's
        `input_bytes_max` bytes; a longer input goes by its length alone (the call refuses it
        with `LimitError(limit="input_size")` before reading), so it is never copied."""
        return self._put_bytes(data) if len(data) <= self._input_bytes_max else 0

    def _put_bytes(self, data: bytes) -> int:
        ptr = self._scratch(len(data))
        if data:
            self.runtime.write(ptr, data)
        return ptr

    def _put_ids(self, ids: Sequence[int]) -> int:
        n = len(ids)
        ptr = self._scratch(4 * n)
        if n:
            self.runtime.write(ptr, struct.pack(f"<{n}I", *ids))
        return ptr

    def _mask_source(self, handle: int, words: int) -> Any:
        """The matcher's own mask buffer (`ts_matcher_mask_ptr`: its address never changes
        while the matcher lives) as a `source_for` range of `4 * words` bytes, made on the
        matcher's first fill and kept until it is freed (lock held). The step path calls the
        fill with out_ptr 0 and copies from here: the mask is copied once, into the caller's
        array, not first into a buffer of the binding's."""
        source = self.runtime.source_for(self._mask_ptrs.get(handle) or self._mask_ptr(handle), 4 * words)
        self._mask_sources[handle] = source
        return source

    def _out_i32(self, index: int = 0) -> int:
        return self.runtime.read_i32(self._out + 4 * index)

    # -- statuses (lock held) ---------------------------------------------------------------

    def _check(self, status: int, what: str) -> int:
        """`status` when it is not an error; otherwise raise what the module says."""
        if status >= 0:
            return status
        f = self._f
        text = self.runtime.read(f["ts_error_message_ptr"](), f["ts_error_message_len"]()).decode("utf-8", "replace")
        name = self._status_name.get(status, "internal")
        if name == "grammar_error":
            position = f["ts_error_position"]()
            lexeme = f["ts_error_lexeme"]()
            raise GrammarError(text, position=position if position >= 0 else None, lexeme=lexeme if lexeme >= 0 else None)
        if name in ("limit_exceeded", "matcher_failed"):
            raise LimitError(f"{what}: {text}", limit=self._limit_name.get(f["ts_error_limit"]()))
        if name == "out_of_memory":
            raise LimitError(
                f"{what}: {text}; raise CoreOptions.memory_limit_bytes or simplify the grammar", limit="memory"
            )
        raise TokensieveError(f"{what}: {text}")

    def _call(self, name: str, *args: int) -> int:
        """Call an export and check its status (lock held)."""
        return self._check(self._f[name](*args), name)

    def _call_out(self, name: str, *args: int) -> int:
        """Call an export whose last argument is an out-pointer; return the value (lock held)."""
        self._check(self._f[name](*args, self._out), name)
        return self._out_i32()

    def _locked(self, name: str, *args: int) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call(name, *args)

    def _drain(self, count: int = _DRAIN_PER_CALL) -> None:
        """Free the handles finalizers queued, at most `count` of them, so that a storm of
        dropped forks does not make one call slow (lock held)."""
        pending = self._pending_frees
        pairs: list[int] = []
        while pending and count > 0:
            count -= 1
            name, handle = pending.popleft()
            if name == "ts_matcher_free":
                self._mask_sources.pop(handle, None)
                self._mask_ptrs.pop(handle, None)
            pairs += (_FREE_KINDS[name], handle)
        # One call for all of them: the previous request's matchers and grammar are drained
        # by the next compile, and a call costs 1.5-5 µs, more than a free.
        if pairs and not self.poisoned:
            self._f["ts_handles_free"](self._put_ids(pairs), len(pairs) // 2)

    # -- tokenizers ------------------------------------------------------------------------

    def tokenizer_new(self, blob: bytes, offsets: bytes, kinds: bytes, eos_ids: Sequence[int]) -> int:
        """Build a tokenizer's trie; returns its handle."""
        eos = struct.pack(f"<{len(eos_ids)}I", *eos_ids)
        with self.lock:
            if self._pending_frees:
                self._drain()
            pointers = []
            try:
                for data in (blob, offsets, kinds, eos):
                    ptr = self._alloc(max(len(data), 1))
                    pointers.append((ptr, max(len(data), 1)))
                    if data:
                        self.runtime.write(ptr, data)
                (blob_ptr, _), (offsets_ptr, _), (kinds_ptr, _), (eos_ptr, _) = pointers
                return self._call_out(
                    "ts_tokenizer_new", blob_ptr, len(blob), offsets_ptr, kinds_ptr, len(kinds), eos_ptr, len(eos_ids)
                )
            finally:
                for ptr, size in pointers:
                    self._free(ptr, size)

    def tokenizer_with_eos(self, base: int, eos_ids: Sequence[int]) -> int:
        """A tokenizer sharing tokenizer `base`'s trie with other EOS ids; returns its handle."""
        with self.lock:
            if self._pending_frees:
                self._drain()
            ptr = self._put_ids(eos_ids)
            return self._call_out("ts_tokenizer_with_eos", base, ptr, len(eos_ids))

    def tokenizer_free(self, handle: int) -> None:
        self._locked("ts_tokenizer_free", handle)

    def tokenizer_node_count(self, handle: int) -> int:
        return self._locked("ts_tokenizer_node_count", handle)

    def tokenizer_has_extension(self, handle: int, data: bytes) -> bool:
        with self.lock:
            if self._pending_frees:
                self._drain()
            ptr = self._put_bytes(data)
            return bool(self._call("ts_tokenizer_has_extension", handle, ptr, len(data)))

    def tokenizer_heal_position(self, handle: int, data: bytes, start: int) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call("ts_tokenizer_heal_position", handle, self._put_input(data), len(data), start)

    # -- grammars --------------------------------------------------------------------------

    def grammar_new(self, ir: bytes, limits: Sequence[int]) -> int:
        """Compile grammar IR words with limit values in `LIMIT_FIELDS` order; its handle.

        Raises:
            GrammarError: a lexeme's pattern is bad (`.lexeme` is its index, `.position` the
                byte offset in its pattern).
        """
        with self.lock:
            if self._pending_frees:
                self._drain()
            if len(ir) + 4 * len(limits) <= _SCRATCH_IR_BYTES_MAX:
                # The IR and the limits after it in the scratch buffer: one call into the module
                # instead of three (an alloc and a free around it, ~1.5 µs each, a twentieth
                # of a median MaskBench grammar's core compile).
                ptr = self._put_bytes(ir + struct.pack(f"<{len(limits)}I", *limits))
                return self._call_out("ts_grammar_new_ir", ptr, len(ir) // 4, ptr + len(ir), len(limits))
            ir_ptr = self._alloc(max(len(ir), 4))
            try:
                self.runtime.write(ir_ptr, ir)
                limits_ptr = self._put_ids(limits)
                return self._call_out("ts_grammar_new_ir", ir_ptr, len(ir) // 4, limits_ptr, len(limits))
            finally:
                self._free(ir_ptr, max(len(ir), 4))

    def grammar_free(self, handle: int) -> None:
        self._locked("ts_grammar_free", handle)

    # -- matchers --------------------------------------------------------------------------

    def matcher_new(self, tokenizer: int, grammar: int) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call_out("ts_matcher_new", tokenizer, grammar)

    def matcher_free(self, handle: int) -> None:
        with self.lock:
            if self._pending_frees:
                self._drain()
            self._mask_sources.pop(handle, None)
            self._mask_ptrs.pop(handle, None)
            self._call("ts_matcher_free", handle)

    def matcher_fork(self, handle: int) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call_out("ts_matcher_fork", handle)

    def matcher_reset(self, handle: int) -> None:
        self._locked("ts_matcher_reset", handle)

    def matcher_rollback(self, handle: int, count: int) -> None:
        self._locked("ts_matcher_rollback", handle, count)

    def matcher_token_count(self, handle: int) -> int:
        return self._locked("ts_matcher_token_count", handle)

    def matcher_is_accepting(self, handle: int) -> bool:
        return bool(self._locked("ts_matcher_is_accepting", handle))

    def matcher_is_stopped(self, handle: int) -> bool:
        return bool(self._locked("ts_matcher_is_stopped", handle))

    def mask_bit(self, handle: int, token: int) -> bool:
        """Token `token`'s bit in the matcher's own mask buffer, as the last fill on it left
        it: read in place, no call into the module, no lock (only calls on this matcher
        write its buffer, and the matcher's caller holds the matcher). False when the buffer
        is not readable in place (no fill yet, linear memory that may move, or a poisoned
        instance, whose store may be closed)."""
        source = self._mask_sources.get(handle)
        if type(source) is not memoryview or self.runtime.poisoned:
            return False
        return bool(source[token >> 3] >> (token & 7) & 1)

    def matcher_fill_bitmask(self, handle: int, words: int, dest: memoryview) -> None:
        """Compute the mask and copy it into `dest`, a writable flat byte view of `4 * words`
        bytes (the caller's row): the step path, one call into the module and one copy, from
        the matcher's own buffer (`_mask_source`)."""
        # `with`, not acquire() and try: an exception a signal handler raises (Ctrl-C) can
        # come between acquire() returning and the try, which left the instance locked for
        # good (every later call waited forever); `with` leaves no such gap (0.08 µs more).
        with self.lock:
            if self._pending_frees:
                self._drain()
            source = self._mask_sources.get(handle)
            if source is None:
                source = self._mask_source(handle, words)
            status = self._fill(source, dest, handle, 0, words)
            if status < 0:
                self._check(status, "fill_bitmask")

    def matcher_fill_bitmasks(self, handles: Sequence[int], words: int, dests: Sequence[memoryview]) -> list[int]:
        """Fill the masks of several matchers of this instance in one call; copy mask i into
        `dests[i]`, a writable flat byte view of `4 * words` bytes (its row). Returns the
        indices of the matchers whose fill failed (their `dests` are untouched; fill them
        alone to get their error). `batch_begin`, `batch_compute` and `batch_finish` in a row.
        """
        call = self.batch_begin(handles, words, dests)
        self.batch_compute(call)
        return self.batch_finish(call)

    def batch_begin(self, handles: Sequence[int], words: int, dests: Sequence[memoryview],
                    tokens: Sequence[int] | None = None, sources: list[Any] | None = None) -> BatchCall:
        """Prepare one call that fills the masks of several of its matchers
        (`ts_matcher_fill_bitmasks`); mask i goes to `dests[i]`, a writable flat byte view of
        `4 * words` bytes. With `tokens`, matcher i first consumes `tokens[i]` (none when it is
        -1) in the same call. `sources` are the matchers' mask buffers as an earlier call on the
        same handles found them (`BatchCall.sources`). The caller holds the instance's lock, in
        a `with`, from here until `batch_finish` has returned (an acquire() here and a release
        there left the instance locked for good when an exception a signal handler raised came
        between them: `batch.fill_bitmasks`).

        A batch fill is split in three so that the call (`batch_compute`, which releases the
        GIL) can run in another thread while the thread that began it prepares or copies
        other instances' rows: the Python work of a batch stays in one thread, where the
        matchers and the caller's array are in its core's cache.
        """
        if self._pending_frees:
            self._drain()
        if sources is None:
            get_source = self._mask_sources.get
            sources = [get_source(handle) or self._mask_source(handle, words) for handle in handles]
        n = len(handles)
        # One buffer: the statuses, the handles, then the tokens (u32; -1 is none).
        statuses_ptr = self._batch_buffer(12 * n if tokens is not None else 8 * n)
        if tokens is None:
            self.runtime.write(statuses_ptr + 4 * n, struct.pack(f"<{n}i", *handles))
            tokens_ptr = 0
        else:
            self.runtime.write(statuses_ptr + 4 * n, struct.pack(f"<{n}i{n}i", *handles, *tokens))
            tokens_ptr = statuses_ptr + 8 * n
        return BatchCall(statuses_ptr, tokens_ptr, n, words, sources, dests)

    def batch_compute(self, call: BatchCall) -> None:
        """Make the call `batch_begin` prepared, in any thread (the thread that began it holds
        the instance's lock for it). Never raises: an error is kept for `batch_finish`."""
        try:
            call.failed = self._fill_many(call.statuses_ptr + 4 * call.count, call.count, 0, call.words,
                                          call.statuses_ptr, call.tokens_ptr)
            call.ran = True
        except BaseException as error:  # noqa: BLE001 - raised by batch_finish
            call.error = error

    def batch_finish(self, call: BatchCall, *, copy: bool = True) -> list[int]:
        """Copy the masks of a computed `call` into their rows and return the indices of the
        matchers whose fill failed (their rows are untouched), in any thread (the thread that
        began the call holds the instance's lock until this has returned).
        `call.unconsumed` then says which entries did not consume their token. With `copy`
        False (the batch was abandoned), only find that out.

        Raises:
            CoreTrap, LimitError, TokensieveError: the call failed as a whole (a trap, the
                deadline): no row was written.
        """
        failed = call.failed
        if call.ran and failed >= 0:
            if failed and call.tokens_ptr:  # the core marks each consumed token -1
                left = struct.unpack(f"<{call.count}i", self.runtime.read(call.tokens_ptr, 4 * call.count))
                call.unconsumed = {i for i, token in enumerate(left) if token != -1}
            else:
                call.unconsumed = set()
        if not copy:
            return []
        if call.error is not None:
            raise call.error
        if failed < 0:
            self._check(failed, "fill_bitmasks")
        if not failed:
            self.runtime.copy_each_to(call.sources, call.dests)
            return []
        n = call.count
        statuses = struct.unpack(f"<{n}i", self.runtime.read(call.statuses_ptr, 4 * n))
        ok = [i for i, status in enumerate(statuses) if status == 0]
        self.runtime.copy_each_to([call.sources[i] for i in ok], [call.dests[i] for i in ok])
        return [i for i, status in enumerate(statuses) if status != 0]

    def _mask_ptr(self, handle: int) -> int:
        """The address of the matcher's own mask buffer in linear memory (fixed while the
        matcher lives), asked once and kept until it is freed (lock held)."""
        self._check(self._f["ts_matcher_mask_ptr"](handle, self._out), "mask_ptr")
        ptr = self._mask_ptrs[handle] = self.runtime.read_u32(self._out)
        return ptr

    def _batch_buffer(self, size: int) -> int:
        """The instance's reusable buffer for batch masks, grown to `size` bytes (lock held)."""
        if size > self._batch_bytes:
            if self._batch_ptr:
                self._free(self._batch_ptr, self._batch_bytes)
                self._batch_ptr = self._batch_bytes = 0
            capacity = 1 << (size - 1).bit_length()
            self._batch_ptr = self._alloc(capacity)
            self._batch_bytes = capacity
        return self._batch_ptr

    def spin_word(self) -> Any:
        """A u32 of this instance's linear memory that other threads write while `spin_until`
        waits for it: a memoryview of one unsigned int, or None where linear memory may move
        (the view would not stay valid). Made once; any thread may write it without the lock
        (it lives as long as the instance's store, which stays open while this object lives).

        Raises:
            CoreTrap, LimitError: making it failed (a poisoned instance, no memory left).
        """
        word = self._spin_word
        if word is None:
            with self.lock:
                if self._spin_word is None:
                    ptr = self._alloc(4)
                    view = self.runtime.source_for(ptr, 4)
                    self._spin_ptr = ptr
                    self._spin_word = view.cast("I") if type(view) is memoryview else False
                word = self._spin_word
        return word or None

    def spin_until(self, target: int, reads: int, linger: int) -> bool:
        """Wait inside the module, the GIL released, until `spin_word` holds at least
        `target`: at most `reads` reads of it, then `linger` more (`ts_spin_until`). True when
        it got there (lock held, `spin_word` made)."""
        return self._spin_until(self._spin_ptr, target, reads, linger) == 1

    def matcher_consume_token(self, handle: int, token: int) -> bool:
        with self.lock:
            if self._pending_frees:
                self._drain()
            status = self._consume(handle, token)
            if status < 0:
                self._check(status, "consume_token")
            return bool(status)

    def matcher_consume_and_fill(self, handle: int, token: int, words: int, dest: memoryview) -> bool:
        """Consume `token` and copy the next mask into `dest` (as `matcher_fill_bitmask`);
        False (nothing written) when the grammar refuses the token."""
        with self.lock:  # (not acquire() and try: `matcher_fill_bitmask`)
            if self._pending_frees:
                self._drain()
            source = self._mask_sources.get(handle)
            if source is None:
                source = self._mask_source(handle, words)
            status = self._consume_fill(source, dest, handle, token, 0, words)
            if status < 0:
                self._check(status, "consume_and_fill")
            return status == 1

    def matcher_consume_tokens(self, handle: int, ids: Sequence[int]) -> int:
        """Consume all of `ids` or none; returns the valid prefix length (== len when consumed)."""
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call("ts_matcher_consume_tokens", handle, self._put_ids(ids), len(ids))

    def matcher_validate_tokens(self, handle: int, ids: Sequence[int]) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call("ts_matcher_validate_tokens", handle, self._put_ids(ids), len(ids))

    def matcher_compute_ff_bytes(self, handle: int) -> bytes:
        with self.lock:
            if self._pending_frees:
                self._drain()
            n = self._call("ts_matcher_compute_ff_bytes", handle, self._ff_ptr, _FF_CHUNK_BYTES)
            return self.runtime.read(self._ff_ptr, n)

    def matcher_extension_allowed(self, handle: int, prefix: bytes, suffix: bytes) -> bool:
        with self.lock:
            if self._pending_frees:
                self._drain()
            ptr = self._put_bytes(prefix + suffix)
            return bool(self._call("ts_matcher_extension_allowed", handle, ptr, len(prefix), ptr + len(prefix), len(suffix)))

    def matcher_heal_position(self, handle: int, data: bytes, start: int) -> int:
        with self.lock:
            if self._pending_frees:
                self._drain()
            return self._call("ts_matcher_heal_position", handle, self._put_input(data), len(data), start)

    def matcher_validate_text(self, handle: int, data: bytes) -> tuple[int, bytes]:
        with self.lock:
            if self._pending_frees:
                self._drain()
            valid = self._call(
                "ts_matcher_validate_text", handle, self._put_input(data), len(data), self._ff_ptr, _FF_CHUNK_BYTES,
                self._out,
            )
            return valid, self.runtime.read(self._ff_ptr, self._out_i32())

    def matcher_fill_draft_masks(self, handle: int, ids: Sequence[int], words: int, dest_row: Callable[[int], Any]) -> int:
        """Masks at every draft position; copies row i into `dest_row(i)` (a `dest_for`
        target) for the accepted prefix and the position after it; returns how many draft
        tokens are accepted."""
        size = 4 * words * (len(ids) + 1)
        with self.lock:
            if self._pending_frees:
                self._drain()
            out = self._alloc(size)
            try:
                valid = self._call("ts_matcher_fill_draft_masks", handle, self._put_ids(ids), len(ids), out, words)
                for row in range(valid + 1):
                    self.runtime.copy_to(out + 4 * words * row, dest_row(row))
                return valid
            finally:
                self._free(out, size)

    # -- diagnostics -----------------------------------------------------------------------

    def matcher_last_fuel(self, handle: int) -> int:
        """Fuel units the last call on the matcher's grammar spent (docs/limits.md)."""
        with self.lock:
            return int(self._check(self._f["ts_matcher_last_fuel"](handle), "last_fuel"))

    def live_kib(self) -> int:
        """KiB the module has allocated (objects and buffers), after freeing the handles
        finalizers queued (so a dropped grammar no longer counts)."""
        with self.lock:
            if self._pending_frees:
                self._drain(len(self._pending_frees))
            return int(self._f["ts_debug_live_kib"]())

    def pattern_cache_kib(self) -> int:
        """Of `live_kib`, the KiB the instance's pattern cache holds (at most its bound,
        `docs/lexer.md`; emptied and refilled when full)."""
        with self.lock:
            return int(self._f["ts_debug_pattern_cache_kib"]())

    def memory_size_bytes(self) -> int:
        """The instance's linear memory (it only grows)."""
        return self.runtime.memory_size_bytes()

    def debug_spin(self, rounds: int) -> int:
        """Busy work inside the module (tests of the deadline): `rounds` million loop steps."""
        with self.lock:
            return int(self._f["ts_debug_spin"](rounds))

    def debug_walk_replays(self, matcher: int, *, nested: bool = False) -> int:
        """Masks of the matcher's grammar served by a walk-cache entry, or (`nested`) the
        nested entries they took (`docs/trie.md`): tests check which paths ran."""
        with self.lock:
            return int(self._check(self._f["ts_debug_walk_replays"](matcher, 1 if nested else 0), "debug_walk_replays"))

    def debug_clamp(self, on: bool) -> bool:
        """Masks walk from clamped lexer states (True, the default) or the real ones (tests
        compare the two); returns the previous setting."""
        with self.lock:
            return bool(self._f["ts_debug_clamp"](1 if on else 0))

    def debug_pattern_cache(self, on: bool) -> int:
        """Grammars compiled afterwards share parsed patterns through the instance's cache
        (True, the default) or parse each pattern themselves (False, which also empties it;
        tests compare the two); returns how many patterns the cache has supplied so far."""
        with self.lock:
            return int(self._f["ts_debug_pattern_cache"](1 if on else 0))

    def debug_slices(self, on: bool) -> bool:
        """Masks use the slicer (True, the default) or walk the whole trie (False: tests compare
        the two); returns the previous setting."""
        with self.lock:
            return bool(self._f["ts_debug_slices"](1 if on else 0))

    def debug_trap(self) -> None:
        """Trap on purpose (tests of failure scope); raises `CoreTrap` and poisons the instance."""
        with self.lock:
            self._f["ts_debug_trap"]()

    def free_later(self, kind: str, handle: int) -> None:
        """Queue a `tokenizer`, `grammar` or `matcher` handle to be freed by the next method
        (safe from finalizers, in any thread; nothing happens on a poisoned instance)."""
        if not self.poisoned:
            self._pending_frees.append((f"ts_{kind}_free", handle))
