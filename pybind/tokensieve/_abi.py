"""The one module that knows the core's export names and status codes.

`Core` wraps one instance of the WebAssembly module (through a runtime backend) and offers its
exports as typed methods. Statuses become exceptions here; nothing above this module sees a raw
status code. See `wasm/ABI.md` for the contract.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import weakref
from enum import IntEnum
from typing import Callable, Sequence

from ._errors import CoreTrap, GrammarError, LimitError, TokensieveError
from ._runtime import Runtime, load_runtime

ABI_VERSION = 3


class Status(IntEnum):
    """Status codes returned by the core (append-only; mirrors `Status` in `core/src/abi.zig`)."""

    OK = 0
    INVALID_HANDLE = -1
    OUT_OF_MEMORY = -2
    GRAMMAR_ERROR = -3
    LIMIT_EXCEEDED = -4
    INVALID_TOKEN = -5
    INVALID_ARGUMENT = -6
    MATCHER_FAILED = -7
    INTERNAL = -8


_EXPORTS = (
    "ts_abi_version", "ts_manifest_ptr", "ts_manifest_len",
    "ts_error_message_ptr", "ts_error_message_len", "ts_error_position",
    "ts_alloc", "ts_free",
    "ts_tokenizer_new", "ts_tokenizer_free", "ts_tokenizer_node_count", "ts_tokenizer_has_extension",
    "ts_tokenizer_heal_position",
    "ts_grammar_new_ir", "ts_grammar_free", "ts_grammar_set_limits", "ts_grammar_state_count",
    "ts_matcher_new", "ts_matcher_free", "ts_matcher_fork", "ts_matcher_reset",
    "ts_matcher_fill_bitmask", "ts_matcher_consume_token", "ts_matcher_consume_tokens",
    "ts_matcher_validate_tokens", "ts_matcher_consume_and_fill", "ts_matcher_rollback",
    "ts_matcher_token_count", "ts_matcher_is_accepting", "ts_matcher_is_stopped",
    "ts_matcher_compute_ff_bytes", "ts_matcher_extension_allowed", "ts_matcher_heal_position",
    "ts_matcher_validate_text", "ts_matcher_fill_draft_masks", "ts_debug_live_kib", "ts_debug_trap",
)



class Core:
    """One instance of the core module, with its exports bound to fast callables.

    A trap inside the module poisons the instance: every later call raises `CoreTrap`, and
    `default_core()` hands out a fresh instance to new objects.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.f: dict[str, Callable[..., int]] = {name: runtime.func(name) for name in _EXPORTS}
        version = self.f["ts_abi_version"]()
        if version != ABI_VERSION:
            raise TokensieveError(
                f"the WASM core speaks ABI version {version}, this package expects {ABI_VERSION}; "
                "reinstall tokensieve so the module and the Python code match"
            )
        manifest = json.loads(self.read(self.f["ts_manifest_ptr"](), self.f["ts_manifest_len"]()))
        for status in Status:
            if manifest["status"].get(status.name.lower()) != status.value:
                raise TokensieveError(f"the WASM core's status table disagrees on {status.name}")
        # A small scratch area for out-parameters, and a growable one for token id lists.
        self.out_ptr = self.alloc(16)
        self._ids_ptr = 0
        self._ids_capacity = 0

    @property
    def poisoned(self) -> bool:
        return bool(getattr(self.runtime, "poisoned", False))

    # -- memory ---------------------------------------------------------------------------

    def read(self, ptr: int, size: int) -> bytes:
        return self.runtime.read(ptr, size)

    def alloc(self, size: int) -> int:
        ptr = self.f["ts_alloc"](size)
        if ptr == 0:
            raise TokensieveError(f"the WASM core is out of memory (allocating {size} bytes)")
        return ptr & 0xFFFFFFFF

    def free(self, ptr: int, size: int) -> None:
        if not self.poisoned:
            self.f["ts_free"](ptr, size)

    def put_bytes(self, data: bytes) -> tuple[int, int]:
        """Copy `data` into freshly allocated linear memory; returns (ptr, size)."""
        size = len(data)
        ptr = self.alloc(size)
        if size:
            self.runtime.write(ptr, data)
        return ptr, size

    def put_ids(self, ids: Sequence[int]) -> int:
        """Write token ids (u32) into the reusable id buffer; returns its pointer."""
        n = len(ids)
        if n > self._ids_capacity:
            if self._ids_ptr:
                self.free(self._ids_ptr, self._ids_capacity * 4)
            capacity = max(64, 1 << (n - 1).bit_length())
            self._ids_ptr = self.alloc(capacity * 4)
            self._ids_capacity = capacity
        for t in ids:
            if not 0 <= t <= 0xFFFFFFFF:
                raise TokensieveError(f"token id {t} is not a valid id (must be a non-negative int)")
        if n:
            self.runtime.write(self._ids_ptr, struct.pack(f"<{n}I", *ids))
        return self._ids_ptr

    def out_i32(self) -> int:
        return self.runtime.read_i32(self.out_ptr)

    # -- statuses -------------------------------------------------------------------------

    def check(self, status: int, what: str = "") -> int:
        """Return `status` if it is not an error; otherwise raise the matching exception."""
        if status >= 0:
            return status
        message = self.read(self.f["ts_error_message_ptr"](), self.f["ts_error_message_len"]())
        text = message.decode("utf-8", "replace")
        if what:
            text = f"{what}: {text}"
        code = Status(status) if status in Status._value2member_map_ else Status.INTERNAL
        if code == Status.GRAMMAR_ERROR:
            position = self.f["ts_error_position"]()
            raise GrammarError(text, position=position if position >= 0 else None)
        if code in (Status.LIMIT_EXCEEDED, Status.MATCHER_FAILED):
            raise LimitError(text)
        if code == Status.OUT_OF_MEMORY:
            raise LimitError(text)
        raise TokensieveError(text)

    def call_out(self, name: str, *args: int) -> int:
        """Call an export whose last argument is an out-pointer for a handle; returns it."""
        self.check(self.f[name](*args, self.out_ptr), name)
        return self.out_i32()


_cores: dict[str, Core] = {}
_cores_lock = threading.Lock()


def default_variant() -> str:
    """The module variant to load: `TOKENSIEVE_WASM_VARIANT` ("release" or "safe")."""
    return os.environ.get("TOKENSIEVE_WASM_VARIANT", "release")


def default_core(variant: str | None = None) -> Core:
    """The shared core instance for `variant`, re-created after a trap poisoned the old one."""
    variant = variant or default_variant()
    with _cores_lock:
        core = _cores.get(variant)
        if core is None or core.poisoned:
            core = Core(load_runtime(variant))
            _cores[variant] = core
        return core


def free_later(owner: object, core: Core, export: str, handle: int) -> None:
    """Free `handle` with `export` when `owner` is garbage collected (unless the core trapped)."""

    def release(core_ref: weakref.ref[Core] = weakref.ref(core)) -> None:
        c = core_ref()
        if c is not None and not c.poisoned:
            try:
                c.f[export](handle)
            except CoreTrap:
                pass

    weakref.finalize(owner, release)
