"""Runtime backends: one small protocol over the WebAssembly core, two implementations.

The matcher core is a freestanding wasm32 module with no imports. Python reaches it
only through a `Runtime`: call an export with integers, move bytes in and out of
linear memory. Two backends implement the protocol:

- `wasmtime` (CPython): calls through wasmtime's unchecked fast path (under a
  microsecond), compiled module cached on disk, memory cap, optional fuel or epoch
  deadline. The only place in the package that imports `wasmtime`.
- `pyodide` (`sys.platform == "emscripten"`): the browser's own engine through
  `js.WebAssembly`.

Nothing outside this package knows which one runs.

Rules every backend keeps:
- Exports take and return only i32. Arguments may be any Python int in
  -2**31 .. 2**32-1 (pointers are u32 in the module); results come back as signed
  Python ints (mask with `& 0xFFFF_FFFF` to read a pointer).
- No view of linear memory outlives the call that made it: memory growth moves
  or detaches the buffer, so every access takes a fresh view. The one exception is
  wasmtime's `source_for` on 64-bit hosts, where memory never moves.
- A trap raises `CoreTrap` and poisons the runtime: later calls raise `CoreTrap`
  without entering the module. A trap never takes the process down.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Callable, Protocol, Union

from ..._errors import TokensieveError

__all__ = [
    "Runtime",
    "WasmSource",
    "load_runtime",
    "read_wasm_bytes",
    "wasm_file_name",
    "VARIANTS",
    "VARIANT_ENV_VAR",
]

VARIANTS: tuple[str, ...] = ("release", "safe")
"""Builds of the core: `release` (ReleaseFast) and `safe` (ReleaseSafe, bounds-checked)."""

VARIANT_ENV_VAR = "TOKENSIEVE_WASM_VARIANT"
"""Environment variable that picks the variant when `load_runtime(variant=None)`."""

_WASM_FILE_NAMES: dict[str, str] = {
    "release": "tokensieve.wasm",
    "safe": "tokensieve_safe.wasm",
}

WasmSource = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]
"""Where a module comes from: its bytes, or a path to a `.wasm` file."""


class Runtime(Protocol):
    """One instance of a WebAssembly module, with its own linear memory.

    Not safe to share between threads without the caller's own locking of
    multi-call sequences; a single call, read or write is atomic on wasmtime.
    """

    name: str
    """Backend name: `"wasmtime"` or `"pyodide"`."""

    @property
    def poisoned(self) -> bool:
        """True once the module trapped; every later call raises `CoreTrap`."""
        ...

    def retire(self, reason: str) -> None:
        """Poison the instance from outside (its state can no longer be trusted): every later
        call raises `CoreTrap` naming `reason`; reads and writes of memory still work."""
        ...

    def func(self, name: str, *, slow: bool = False, trusted: bool = False) -> Callable[..., int]:
        """Return a fast callable for the export `name`.

        Args:
            name: export name, e.g. `"ts_matcher_fill_bitmask"`.
            slow: a construction call, allowed past the per-call deadline (up to 30 s).
            trusted: the caller serializes calls on this runtime and passes in-range ints, so
                the callable may skip its own lock and checks.

        Returns:
            A callable taking ints in -2**31 .. 2**32-1 and returning the i32 result
            as a signed Python int (0 for an export without a result).

        Raises:
            TokensieveError: no such export, or its signature is not all-i32.
        """
        ...

    def read(self, ptr: int, size: int) -> bytes:
        """Copy `size` bytes at `ptr` out of linear memory.

        Raises:
            IndexError: the range is outside linear memory.
        """
        ...

    def write(self, ptr: int, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` (any C-contiguous buffer) into linear memory at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
        """
        ...

    def read_into(self, ptr: int, dest: memoryview) -> None:
        """Copy `dest.nbytes` bytes at `ptr` straight into the writable buffer `dest`.

        Raises:
            IndexError: the range is outside linear memory.
            TypeError: `dest` is read-only or not C-contiguous.
        """
        ...

    def dest_for(self, view: memoryview) -> object:
        """Prepare a writable C-contiguous buffer as a target of `copy_to`.

        The caller keeps `view` alive as long as it uses the result.
        """
        ...

    def copy_to(self, ptr: int, dest: object) -> None:
        """Copy the prepared target's size in bytes at `ptr` into it (one copy, no new
        objects: the step path's copy of a mask)."""
        ...

    def copy_each_to(self, sources: Sequence[object], dests: Sequence[memoryview]) -> None:
        """Copy each `source_for` range `sources[i]` into `dests[i]`, a writable flat byte
        view of the same size (a batch's masks, each from its matcher's own buffer)."""
        ...

    def source_for(self, ptr: int, size: int) -> object:
        """Prepare `size` bytes at `ptr` (a buffer the caller keeps allocated as long as it
        uses the result) as the source of `func_copy`'s copies."""
        ...

    def func_copy(self, name: str, *, copy_from_status: int = 0) -> Callable[..., int]:
        """Return `call(src, dest, *args)`: call the export `name` with `args`, and when its
        result is at least `copy_from_status` copy the `source_for` range `src` into `dest`,
        a writable flat byte memoryview of the same size; returns the result. The caller
        serializes calls on this runtime and passes in-range ints. The step path: under
        wasmtime one C call and one memcpy, under Pyodide one crossing into JS, not five.
        """
        ...

    def read_u32(self, ptr: int) -> int:
        """Read a little-endian u32 at `ptr`."""
        ...

    def read_i32(self, ptr: int) -> int:
        """Read a little-endian i32 at `ptr`."""
        ...

    def memory_size_bytes(self) -> int:
        """Current size of linear memory in bytes."""
        ...


def default_variant() -> str:
    """The variant `$TOKENSIEVE_WASM_VARIANT` asks for (default `"release"`)."""
    return _resolve_variant(None)


def wasm_file_name(variant: str) -> str:
    """Return the file name of a variant's module inside `tokensieve/_wasm/`.

    Args:
        variant: `"release"` or `"safe"`.

    Raises:
        ValueError: unknown variant.
    """
    try:
        return _WASM_FILE_NAMES[variant]
    except KeyError:
        raise ValueError(
            f"unknown WebAssembly core variant {variant!r}; pass variant='release' "
            f"or variant='safe' (or set {VARIANT_ENV_VAR} to one of them)"
        ) from None


def _resolve_variant(variant: str | None) -> str:
    """Pick the variant: the argument, else `$TOKENSIEVE_WASM_VARIANT`, else release."""
    if variant is None:
        variant = os.environ.get(VARIANT_ENV_VAR, "").strip() or "release"
    wasm_file_name(variant)
    return variant


def read_wasm_bytes(variant: str | None = None) -> bytes:
    """Read the packaged module of a variant.

    Args:
        variant: `"release"`, `"safe"`, or None for `$TOKENSIEVE_WASM_VARIANT`
            (default release).

    Returns:
        The module's bytes.

    Raises:
        ValueError: unknown variant.
        TokensieveError: the module file is missing from the installed package.
    """
    variant = _resolve_variant(variant)
    file_name = wasm_file_name(variant)
    resource = resources.files("tokensieve") / "_wasm" / file_name
    try:
        return resource.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise TokensieveError(
            f"the WebAssembly core {file_name!r} ({variant} build) is missing from the "
            f"installed package at {resource}; reinstall tokensieve (its build compiles "
            f"core/ with the pinned ziglang), or pass wasm_path= / wasm_bytes= to "
            f"load_runtime"
        ) from None


def _read_source(source: WasmSource) -> bytes:
    """Return module bytes from bytes-like data or a file path."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    try:
        with open(source, "rb") as file:
            return file.read()
    except OSError as error:
        raise TokensieveError(
            f"cannot read the WebAssembly module at {os.fspath(source)!r}: {error}; "
            f"check wasm_path"
        ) from error


def load_runtime(
    variant: str | None = None,
    *,
    wasm_bytes: bytes | bytearray | memoryview | None = None,
    wasm_path: str | os.PathLike[str] | None = None,
    memory_limit_bytes: int | None = None,
    fuel_per_call: int | None = None,
    epoch_deadline_s: float | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    disk_cache: bool = True,
) -> Runtime:
    """Instantiate the core (or any all-i32 module) under the backend for this platform.

    Pyodide (`sys.platform == "emscripten"`) gets the `js.WebAssembly` backend;
    everything else gets wasmtime.

    Args:
        variant: `"release"` or `"safe"`; None reads `$TOKENSIEVE_WASM_VARIANT`
            (default `"release"`). Ignored when `wasm_bytes` or `wasm_path` is given.
        wasm_bytes: load this module instead of the packaged one.
        wasm_path: load the module from this file instead of the packaged one.
        memory_limit_bytes: cap on linear memory (wasmtime only; default 4 GiB, the
            whole wasm32 address space). Growth past it fails inside the module
            (the core's allocator reports out-of-memory), it does not trap.
        fuel_per_call: wasmtime only, off by default: each call may execute about
            this many wasm instructions, then stops with `LimitError`.
        epoch_deadline_s: wasmtime only, off by default: each call may run about
            this many seconds (10 ms resolution), then stops with `LimitError`.
        cache_dir: where wasmtime caches compiled modules (default
            `$TOKENSIEVE_CACHE_DIR`, else `$XDG_CACHE_HOME/tokensieve` or
            `~/.cache/tokensieve`).
        disk_cache: set False to never read or write the on-disk cache.

    Returns:
        A fresh `Runtime` with its own linear memory.

    Raises:
        ValueError: unknown variant, both `wasm_bytes` and `wasm_path`, or an option
            the backend cannot honour.
        TokensieveError: the module is missing, unreadable or invalid.
        LimitError: `memory_limit_bytes` is below the module's initial memory.
        CoreTrap: the module trapped while starting.
    """
    if wasm_bytes is not None and wasm_path is not None:
        raise ValueError("pass either wasm_bytes= or wasm_path=, not both")
    if wasm_bytes is not None:
        module_bytes = _read_source(wasm_bytes)
    elif wasm_path is not None:
        module_bytes = _read_source(wasm_path)
    else:
        module_bytes = read_wasm_bytes(variant)

    if sys.platform == "emscripten":
        unsupported = {
            "memory_limit_bytes": memory_limit_bytes,
            "fuel_per_call": fuel_per_call,
            "epoch_deadline_s": epoch_deadline_s,
        }
        for option, value in unsupported.items():
            if value is not None:
                raise ValueError(
                    f"{option}= is only supported by the wasmtime backend; under "
                    f"Pyodide leave it unset (the browser's engine has no such hook)"
                )
        from .pyodide_backend import PyodideRuntime

        return PyodideRuntime(module_bytes)

    from .wasmtime_backend import WasmtimeRuntime

    return WasmtimeRuntime(
        module_bytes,
        memory_limit_bytes=memory_limit_bytes,
        fuel_per_call=fuel_per_call,
        epoch_deadline_s=epoch_deadline_s,
        cache_dir=cache_dir,
        disk_cache=disk_cache,
    )
