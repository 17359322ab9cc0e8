"""The wasmtime backend: the core under CPython, sandboxed, about a microsecond per call.

This is the only file in the package that imports `wasmtime`.

Why it is shaped this way:

- **Unchecked calls.** wasmtime-py's `Func.__call__` looks up the function type,
  builds typed `wasmtime_val_t` arrays and converts every value, about 20 µs a call.
  A decoding step makes a few calls, so that alone would cost more than computing
  the mask. Every export of the core is all-i32, so each callable here owns ONE
  `wasmtime_val_raw_t` array (sized max(params, results)), writes the arguments
  into it as plain i32 words and calls `wasmtime_func_call_unchecked` through a
  ctypes prototype whose five arguments are made once: about 1 µs in all (0.4 µs of
  it the ctypes call itself, the rest argument checks and the lock). The step path's
  `func_copy` callables do the call and the copy of a mask in one frame (see
  `_copy_callable`).
  The signature is checked once, when the callable is made, which is what makes the
  unchecked call sound.
- **The GIL is released during a call** (ordinary ctypes behaviour), so other
  Python threads run meanwhile and the epoch ticker can interrupt a long call. A
  per-runtime lock keeps two threads from entering the same store (or sharing a
  raw array) at once.
- **Compiled code is cached** in process (one `Module` per engine and module hash,
  shared by every runtime) and on disk across processes (`Module.serialize`), keyed
  by the sha256 of the wasm bytes, the wasmtime version and the engine
  configuration. Entries carry their own sha256 and are written atomically; an
  entry that fails any check is ignored and rebuilt, since deserializing trusts
  the bytes it is given.
- **Limits**: a store limiter caps linear memory (`memory.grow` past it returns
  -1, which the core's allocator reports as out-of-memory, no trap). Fuel and
  epoch deadlines are opt-in because they cost a little on every call and change
  the compiled code.
- **Fixed memory, else a moving one.** On 64-bit hosts linear memory reserves 4 GiB of
  address space, so it never moves and bounds checks are free. Where the process's address
  space cannot hold that (`ulimit -v`), an instance starts again on a memory that reserves
  what it uses and moves as it grows (about 1.5x slower masks; docs/runtime.md, "Address
  space"), rather than not at all.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import logging
import math
import os
import platform
import sys
import tempfile
import threading
import weakref
import time
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable, Final, NoReturn

import wasmtime
from wasmtime import _ffi as ffi

from ..fork import MID_CALL_AT_FORK, after_fork, renew_global_lock_after_fork, renew_lock_after_fork
from ..._errors import CoreTrap, LimitError, TokensieveError
from .health import Health

__all__ = [
    "WasmtimeRuntime",
    "bench_call_us",
    "default_cache_dir",
    "MEMORY_LIMIT_BYTES_DEFAULT",
]

_log = logging.getLogger("tokensieve")

MEMORY_LIMIT_BYTES_DEFAULT: Final = 4 << 30
"""Default cap on linear memory: 4 GiB, the whole wasm32 address space."""

_I32_MIN: Final = -(1 << 31)
_I32_MAX: Final = (1 << 31) - 1
_U32_MAX: Final = (1 << 32) - 1
_U32_MASK: Final = 0xFFFF_FFFF
_EPOCH_TICK_S: Final = 0.01
# Construction calls (a 128k-token trie, a large grammar) may run this long whatever the
# per-call deadline: their work is bounded by their input, not by a decoding step.
_SLOW_CALL_TICKS: Final = int(30 / _EPOCH_TICK_S)
_CACHE_MAGIC: Final = b"TSCWASM\x01"
_CACHE_HEADER_SIZE_BYTES: Final = len(_CACHE_MAGIC) + 32

try:
    _WASMTIME_VERSION: str | None = metadata.version("wasmtime")
except metadata.PackageNotFoundError:  # pragma: no cover - vendored copies
    _WASMTIME_VERSION = None

# Raw prototypes over wasmtime's C API that take bare addresses (ints), so a call
# skips wasmtime-py's argument conversion. The restype c_void_p yields int | None.
_c_void_p = ctypes.c_void_p
# The call itself has no argtypes: each callable passes the same five ctypes objects
# (context, function, raw array, slot count, trap out-pointer), made once, which ctypes
# hands to C as they are. Declared argtypes would convert five ints per call, each into a
# new argument object: about 0.1 µs of the 0.5 µs a call costs from Python.
_call_unchecked = ctypes.CFUNCTYPE(_c_void_p)(("wasmtime_func_call_unchecked", ffi.dll))
_call_unchecked.argtypes = None
# The short calls below keep the GIL (PYFUNCTYPE): a CFUNCTYPE call releases it, and under
# load the epoch ticker's thread (which takes the GIL every 10 ms) or any other then takes it
# over, so a call of a few nanoseconds waited ~100 µs of wall time to get it back (seen in the
# compile path's `prepare_call`). Only the module call itself releases it, so that instances
# run in parallel.
_memory_data = ctypes.PYFUNCTYPE(_c_void_p, _c_void_p, _c_void_p)(
    ("wasmtime_memory_data", ffi.dll)
)
_memory_data_size = ctypes.PYFUNCTYPE(ctypes.c_size_t, _c_void_p, _c_void_p)(
    ("wasmtime_memory_data_size", ffi.dll)
)
_set_fuel = ctypes.PYFUNCTYPE(_c_void_p, _c_void_p, ctypes.c_uint64)(
    ("wasmtime_context_set_fuel", ffi.dll)
)
_set_epoch_deadline = ctypes.PYFUNCTYPE(None, _c_void_p, ctypes.c_uint64)(
    ("wasmtime_context_set_epoch_deadline", ffi.dll)
)
# Copies between host buffers and linear memory keep the GIL. `ctypes.memmove` releases it
# around every copy, which buys nothing for a mask (16 KB, about a microsecond) and costs a
# thread switch whenever another thread waits for the GIL: it takes the GIL over, and getting
# it back waits for that thread's next release. A batch fill's threads then hand the GIL to
# each other once per row (a convoy). A PYFUNCTYPE prototype of the same C function keeps it.
_memmove = ctypes.PYFUNCTYPE(_c_void_p, _c_void_p, _c_void_p, ctypes.c_size_t)(
    ctypes.cast(ctypes.memmove, _c_void_p).value
)
_RAW_SIZE_BYTES: Final = ctypes.sizeof(ffi.wasmtime_val_raw_t)
# On 64-bit hosts the engine reserves 4 GiB per memory so it never moves (see `_engine`),
# unless the process's address space cannot hold the reservation (`WasmtimeRuntime`).
_FIXED_MEMORY: Final = sys.maxsize > 2**32
# Whether an instance first tries the fixed 4 GiB reservation (tests set it False to run the
# moving memory's paths on a 64-bit host).
fixed_memory_first = True
# How much address space a moving memory keeps beyond its size to grow in place.
_MOVING_GROWTH_BYTES: Final = 64 << 20
# What wasmtime says when the address space cannot hold a memory's reservation.
_RESERVE_FAILURE: Final = "failed to reserve"
# How much slower masks run on a moving memory (measured: `docs/runtime.md`).
_MOVING_SLOWDOWN: Final = "1.5x"
_RAW_STRIDE_WORDS: Final = _RAW_SIZE_BYTES // 4
assert _RAW_SIZE_BYTES % 4 == 0, "wasmtime_val_raw_t is a whole number of i32 words"


# --- engines and compiled modules -------------------------------------------------


@dataclass(frozen=True)
class _EngineOptions:
    """Engine settings that change compiled code (so they key the module cache)."""

    fuel: bool
    epoch: bool
    # Memory at a fixed address (4 GiB reserved, guard pages for bounds), or one that starts
    # small and may move as it grows (explicit bounds checks in the compiled code).
    fixed: bool = _FIXED_MEMORY

    def fingerprint(self) -> str:
        """Describe everything the serialized code depends on, as a stable string."""
        return ";".join(
            [
                f"wasmtime={_WASMTIME_VERSION}",
                "strategy=cranelift",
                "opt=speed",
                "simd=1",
                f"fuel={int(self.fuel)}",
                f"epoch={int(self.epoch)}",
                f"fixed_memory={int(self.fixed)}",
                f"target={sys.platform}-{platform.machine()}",
            ]
        )


_engines: dict[_EngineOptions, wasmtime.Engine] = {}
_modules: dict[str, wasmtime.Module] = {}
_stores: "weakref.WeakSet[wasmtime.Store]" = weakref.WeakSet()
_states: "weakref.WeakSet[_StoreState]" = weakref.WeakSet()
_exiting = False


@atexit.register
def _close_at_exit() -> None:
    """Leave the wasmtime objects to the operating system at interpreter exit.

    Every runtime is marked closed first, so a finalizer that runs after this hook (atexit
    hooks run in reverse order of registration, and importing torch registers
    `weakref.finalize`'s hook before this one) finds a poisoned runtime and skips its call
    instead of entering a store during teardown, which crashed the process at exit.

    The stores, modules and engines are then kept alive for good (a reference nobody drops),
    not closed: a daemon thread (a batch helper, a server's worker) may be inside a call on any
    store with the GIL released, and closing that store under it crashed every such process
    at exit (status 139); module teardown would have deleted them just as well, and
    wasmtime-py's `__del__` fails noisily then. The process's memory goes with the process.
    """
    global _exiting
    _exiting = True
    for state in list(_states):
        state.poisoned = True
        state.poison_reason = "the interpreter is exiting"
    for kept in (*list(_stores), *_modules.values(), *_engines.values()):
        _keep_forever(kept)


_keep_forever = ctypes.pythonapi.Py_IncRef
_keep_forever.argtypes = [ctypes.py_object]
_keep_forever.restype = None

# In the child of `os.fork` (`fork.py`), a lock another thread held is replaced; a store whose
# lock was held was mid-call and is retired (`_StoreState.retire_after_fork`).
_compile_lock = threading.Lock()
_engine_lock = threading.Lock()
renew_global_lock_after_fork(globals(), "_compile_lock")
renew_global_lock_after_fork(globals(), "_engine_lock")


def _engine(options: _EngineOptions) -> wasmtime.Engine:
    """Return the process-wide engine for these options (created once).

    Exactly one engine per options matters: a module compiled by one engine cannot
    be instantiated in a store of another.
    """
    with _engine_lock:
        engine = _engines.get(options)
        if engine is None:
            config = wasmtime.Config()
            config.strategy = "cranelift"
            config.cranelift_opt_level = "speed"
            config.wasm_simd = True
            config.consume_fuel = options.fuel
            config.epoch_interruption = options.epoch
            if options.fixed:
                # Reserve the whole wasm32 space up front: linear memory never moves, so its
                # host address is read once and every copy of a mask is one memmove.
                config.memory_reservation = 1 << 32
                config.memory_may_move = False
            elif _FIXED_MEMORY:
                # The fallback where a 4 GiB reservation does not fit (a process address-space
                # limit, `ulimit -v`): reserve only what the memory uses, plus room to grow
                # in place, and no guard pages (the code checks bounds itself).
                config.memory_reservation = 0
                config.memory_guard_size = 0
                config.memory_reservation_for_growth = _MOVING_GROWTH_BYTES
                config.memory_may_move = True
            engine = wasmtime.Engine(config)
            _engines[options] = engine
        return engine


def default_cache_dir() -> Path:
    """Return where compiled modules are cached on disk.

    Returns:
        `$TOKENSIEVE_CACHE_DIR` if set, else `$XDG_CACHE_HOME/tokensieve`, else
        `~/.cache/tokensieve`.
    """
    explicit = os.environ.get("TOKENSIEVE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "tokensieve"


def _module_key(wasm_sha256: str, options: _EngineOptions) -> str:
    """Key a compiled module by its bytes and everything the compiled code depends on."""
    return hashlib.sha256(
        f"{wasm_sha256}|{options.fingerprint()}".encode()
    ).hexdigest()


def _cache_path(cache_dir: Path, key: str) -> Path:
    """Return the file that holds the compiled module with this key."""
    return cache_dir / f"wasmtime-{_WASMTIME_VERSION}" / f"{key}.cwasm"


def _read_cache_entry(path: Path) -> bytes | None:
    """Return the serialized module stored at `path`, or None if absent or damaged."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if len(blob) <= _CACHE_HEADER_SIZE_BYTES or not blob.startswith(_CACHE_MAGIC):
        _log.debug("ignoring malformed module cache entry %s", path)
        return None
    digest = blob[len(_CACHE_MAGIC) : _CACHE_HEADER_SIZE_BYTES]
    payload = blob[_CACHE_HEADER_SIZE_BYTES:]
    if hashlib.sha256(payload).digest() != digest:
        _log.debug("ignoring corrupt module cache entry %s", path)
        return None
    return payload


def _write_cache_entry(path: Path, payload: bytes) -> None:
    """Store a serialized module at `path` atomically (temp file + rename); never raises."""
    temp_name: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=path.name + ".", suffix=".tmp", delete=False
        ) as temp:
            temp_name = temp.name
            temp.write(_CACHE_MAGIC)
            temp.write(hashlib.sha256(payload).digest())
            temp.write(payload)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
        temp_name = None
    except OSError as error:
        _log.debug("cannot write module cache entry %s: %s", path, error)
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass


def _compile(engine: wasmtime.Engine, wasm: bytes) -> wasmtime.Module:
    """Compile module bytes, turning wasmtime's error into a TokensieveError."""
    try:
        return wasmtime.Module(engine, wasm)
    except wasmtime.WasmtimeError as error:
        raise TokensieveError(
            f"the WebAssembly module is invalid ({error}); rebuild the core or check "
            f"the bytes passed as wasm_bytes= / wasm_path="
        ) from None


_moving_memory_warned = False


def _warn_moving_memory(error: str) -> None:
    """Say once per process that instances run on a moving memory, and why."""
    global _moving_memory_warned
    if not _moving_memory_warned:
        _moving_memory_warned = True
        _log.warning(
            "tokensieve: the process's address space has no room for a core instance's 4 GiB "
            "reservation (%s; a `ulimit -v` limit?): instances that do not fit run on a "
            "memory that reserves only what it uses, with bounds checked in the compiled "
            "code (masks about %s slower)", _first_line(error), _MOVING_SLOWDOWN,
        )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _load_module(
    wasm: bytes,
    options: _EngineOptions,
    cache_dir: Path | None,
) -> tuple[wasmtime.Module, str, Path | None]:
    """Find or compile the module: in-process cache, then disk cache, then Cranelift.

    Args:
        wasm: module bytes.
        options: engine options (part of the key).
        cache_dir: disk cache folder, or None to skip the disk cache.

    Returns:
        (module, where it came from: "memory_cache" | "disk_cache" | "compiled",
        the disk cache file or None).
    """
    engine = _engine(options)
    key = _module_key(hashlib.sha256(wasm).hexdigest(), options)
    path = _cache_path(cache_dir, key) if cache_dir and _WASMTIME_VERSION else None
    with _compile_lock:
        module = _modules.get(key)
        if module is not None:
            return module, "memory_cache", path
        source = "compiled"
        if path is not None:
            payload = _read_cache_entry(path)
            if payload is not None:
                try:
                    module = wasmtime.Module.deserialize(engine, payload)
                    source = "disk_cache"
                except wasmtime.WasmtimeError as error:
                    _log.debug("rebuilding module cache entry %s: %s", path, error)
        if module is None:
            module = _compile(engine, wasm)
            if path is not None:
                _write_cache_entry(path, bytes(module.serialize()))
        _modules[key] = module
        return module, source, path


class _EpochTicker:
    """Daemon thread that advances an engine's epoch every `_EPOCH_TICK_S` seconds.

    `ticks` counts its increments (it is the engine's epoch, or one behind it for the moment
    between the two updates): the calls read it to know when their deadline needs refreshing,
    an attribute read instead of a clock call on every step.
    """

    _tickers: dict[int, _EpochTicker] = {}
    _lock = threading.Lock()

    @classmethod
    def ensure(cls, engine: wasmtime.Engine) -> _EpochTicker:
        """Start the ticker of `engine` unless it runs already; return it."""
        with cls._lock:
            ticker = cls._tickers.get(id(engine))
            if ticker is None:
                ticker = cls._tickers[id(engine)] = cls(engine)
            return ticker

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self.ticks = 0
        self._start()

    def _start(self) -> None:
        thread = threading.Thread(
            target=self._run, name="tokensieve-epoch-ticker", daemon=True
        )
        thread.start()

    @classmethod
    def after_fork_in_child(cls) -> None:
        """A forked child has only the thread that forked: without its tickers no deadline
        would ever fire there. Start them again."""
        for ticker in cls._tickers.values():
            ticker._start()

    def _run(self) -> None:
        while not _exiting:
            time.sleep(_EPOCH_TICK_S)
            try:
                self._engine.increment_epoch()
            except Exception:  # noqa: BLE001 - the engine was closed at exit
                return
            self.ticks += 1


renew_lock_after_fork(_EpochTicker)
after_fork(_EpochTicker.after_fork_in_child)


# --- the runtime --------------------------------------------------------------------


class _StoreState(Health):
    """What every callable of one runtime shares: the store, its lock, its health (`Health`).

    Callables hold this object rather than the runtime, so there is no reference
    cycle: dropping a runtime and its callables frees the store (and its linear
    memory) at once instead of at the next garbage collection.
    """

    __slots__ = (
        "store",
        "context_address",
        "lock",
        "prepare_call",
        "prepare_slow_call",
        "prepare_always",
        "ticker",
        "refresh_at",
        "__weakref__",
    )

    def __init__(
        self,
        store: wasmtime.Store,
        fuel_per_call: int | None,
        epoch_deadline_ticks: int | None,
        ticker: _EpochTicker | None = None,
    ) -> None:
        self.store = store
        self.context_address: int = (
            ctypes.cast(store._context(), ctypes.c_void_p).value or 0
        )
        super().__init__()
        self.lock = threading.Lock()
        renew_lock_after_fork(self, "lock", _StoreState.retire_after_fork)
        self.prepare_call: Callable[[], None] | None = None
        self.prepare_slow_call: Callable[[], None] | None = None
        # With fuel every call sets it; with a deadline alone `prepare_call` has work only once
        # `ticker.ticks >= refresh_at`, which the step path checks inline (no call otherwise).
        self.prepare_always = fuel_per_call is not None
        self.ticker = ticker
        self.refresh_at = 0
        if epoch_deadline_ticks is not None and ticker is None:
            raise ValueError("an epoch deadline needs its engine's ticker")
        if fuel_per_call is not None or epoch_deadline_ticks is not None:
            context = self.context_address

            # The deadline is `epoch + ticks` when set. Setting it costs a C call, so it is
            # refreshed only once half of it has passed, by the ticker's count (the engine's
            # epoch or one behind, see `_EpochTicker`): a call then starts with at least half
            # the deadline ahead of it, at most all of it. A slow call's longer deadline is
            # always replaced before the next ordinary call.
            state = self
            refresh_ticks = None if epoch_deadline_ticks is None else epoch_deadline_ticks // 2

            def prepare_call() -> None:
                if fuel_per_call is not None:
                    _set_fuel(context, fuel_per_call)
                if epoch_deadline_ticks is not None:
                    now = ticker.ticks
                    if now >= state.refresh_at:
                        _set_epoch_deadline(context, epoch_deadline_ticks)
                        state.refresh_at = now + refresh_ticks

            slow_ticks = None if epoch_deadline_ticks is None else max(epoch_deadline_ticks, _SLOW_CALL_TICKS)

            def prepare_slow_call() -> None:
                if fuel_per_call is not None:
                    _set_fuel(context, fuel_per_call)
                if slow_ticks is not None:
                    _set_epoch_deadline(context, slow_ticks)
                    state.refresh_at = 0

            self.prepare_call = prepare_call
            self.prepare_slow_call = prepare_slow_call

    def raise_failure(
        self, name: str, error: int | None, trap: ctypes.c_void_p
    ) -> NoReturn:
        """Turn a trap or error out of an unchecked call into an exception; poison."""
        trap_address = trap.value
        trap.value = None
        message = "unknown failure"
        code: Any = None
        if error is not None:  # wrapping takes ownership, so the error is freed
            wrapped_error = wasmtime.WasmtimeError._from_ptr(
                ctypes.cast(error, ctypes.POINTER(ffi.wasmtime_error_t))
            )
            message = str(wrapped_error)
        if trap_address is not None:
            wrapped_trap = wasmtime.Trap._from_ptr(
                ctypes.cast(trap_address, ctypes.POINTER(ffi.wasm_trap_t))
            )
            message = wrapped_trap.message
            code = _trap_code(wrapped_trap)
        self.poison(name, message)
        raise _error_for(name, message, code)

    def poison(self, name: str, message: str) -> None:
        """Mark the store unusable after a failed call."""
        self.poisoned = True
        self.poison_reason = f"{name}: {_trap_summary(message)}"

    def retire_after_fork(self) -> None:
        """In the child of `os.fork`, a store whose lock another thread held was mid-call."""
        self.retire(MID_CALL_AT_FORK)


class WasmtimeRuntime:
    """One instance of a module under wasmtime, with its own store and memory.

    Attributes:
        name: `"wasmtime"`.
        poisoned: True once a call trapped (or ran out of fuel or time).
        module_source: where the compiled code came from: `"compiled"`,
            `"disk_cache"` or `"memory_cache"`.
        cache_path: the disk cache file of this module (None if disabled).
        memory_limit_bytes: the cap on linear memory.
    """

    name: str = "wasmtime"

    def __init__(
        self,
        wasm: bytes,
        *,
        memory_limit_bytes: int | None = None,
        fuel_per_call: int | None = None,
        epoch_deadline_s: float | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        disk_cache: bool = True,
    ) -> None:
        """Compile (or fetch from cache) and instantiate a module.

        Args:
            wasm: module bytes; every export used through `func` must be all-i32.
            memory_limit_bytes: cap on linear memory (default 4 GiB).
            fuel_per_call: opt-in instruction budget per call (`LimitError` past it).
            epoch_deadline_s: opt-in wall-clock budget per call, 10 ms resolution.
            cache_dir: disk cache folder (default `default_cache_dir()`).
            disk_cache: False to never touch the disk cache.

        Raises:
            ValueError: an option is out of range.
            TokensieveError: the module is invalid, imports anything or has no memory.
            LimitError: `memory_limit_bytes` is below the module's initial memory, or the
                process's address space has no room for it (`ulimit -v`).
            CoreTrap: the module trapped while starting.
        """
        if memory_limit_bytes is None:
            memory_limit_bytes = MEMORY_LIMIT_BYTES_DEFAULT
        if memory_limit_bytes <= 0:
            raise ValueError(
                f"memory_limit_bytes must be positive, got {memory_limit_bytes}"
            )
        if fuel_per_call is not None and fuel_per_call <= 0:
            raise ValueError(f"fuel_per_call must be positive, got {fuel_per_call}")
        if epoch_deadline_s is not None and not epoch_deadline_s > 0:
            raise ValueError(
                f"epoch_deadline_s must be positive, got {epoch_deadline_s}"
            )
        self.memory_limit_bytes = memory_limit_bytes
        self._callables: dict[str, Callable[..., int]] = {}

        options = _EngineOptions(
            fuel=fuel_per_call is not None, epoch=epoch_deadline_s is not None
        )
        resolved_cache_dir: Path | None = None
        if disk_cache:
            try:
                resolved_cache_dir = (
                    Path(cache_dir) if cache_dir is not None else default_cache_dir()
                )
            except RuntimeError:  # no home directory: run without the disk cache
                resolved_cache_dir = None
        if epoch_deadline_s is not None:
            # +1: the current tick may be about to end.
            epoch_deadline_ticks = math.ceil(epoch_deadline_s / _EPOCH_TICK_S) + 1
        else:
            epoch_deadline_ticks = None
        instance = None
        for fixed in (True, False) if _FIXED_MEMORY and fixed_memory_first else (False,):
            options = replace(options, fixed=fixed)
            module, self.module_source, self.cache_path = _load_module(
                wasm, options, resolved_cache_dir
            )
            if module.imports:
                names = ", ".join(f"{i.module}.{i.name}" for i in module.imports)
                raise TokensieveError(
                    f"the WebAssembly module imports {names}; tokensieve runs only "
                    f"freestanding modules (no imports)"
                )
            self._module = module
            self._fixed = fixed
            engine = _engine(options)
            ticker = _EpochTicker.ensure(engine) if epoch_deadline_s is not None else None
            store = wasmtime.Store(engine)
            _stores.add(store)
            store.set_limits(memory_size=memory_limit_bytes)
            self._state = state = _StoreState(store, fuel_per_call, epoch_deadline_ticks, ticker)
            _states.add(state)
            if state.prepare_call is not None:
                state.prepare_call()
            try:
                instance = wasmtime.Instance(store, module, [])
                break
            except (wasmtime.Trap, wasmtime.WasmtimeError) as error:
                state.poison("instantiation", str(error))
                minimum_bytes = self._initial_memory_bytes()
                if minimum_bytes > memory_limit_bytes:
                    raise LimitError(
                        f"the module needs {minimum_bytes} bytes of linear memory at start "
                        f"but memory_limit_bytes={memory_limit_bytes}; raise "
                        f"memory_limit_bytes"
                    ) from None
                if fixed and _RESERVE_FAILURE in str(error):
                    # The process's address space cannot hold 4 GiB more (`ulimit -v`):
                    # start again on a memory that reserves only what it uses.
                    _warn_moving_memory(str(error))
                    continue
                if _RESERVE_FAILURE in str(error):
                    raise LimitError(
                        f"the WebAssembly module could not reserve address space for its "
                        f"linear memory ({_first_line(str(error))}): the process's "
                        f"address-space limit (`ulimit -v`) is too low for another core "
                        f"instance; raise it or use fewer instances (CoreOptions.instances)"
                    ) from None
                raise CoreTrap(
                    f"the WebAssembly module failed to start: {error}; this is a bug in "
                    f"tokensieve, please report it"
                ) from None
        assert instance is not None

        self._exports = instance.exports(store)
        memory = self._exports.get("memory")
        if not isinstance(memory, wasmtime.Memory):
            memory = next(
                (e for e in self._exports.values() if isinstance(e, wasmtime.Memory)),
                None,
            )
        if memory is None:
            raise TokensieveError("the WebAssembly module exports no linear memory")
        self._memory = memory
        self._memory_address = ctypes.addressof(memory._memory)
        # Linear memory only grows; a size read once is a lower bound for bounds checks, and
        # with a fixed reservation the base address never changes.
        self._known_size = 0
        self._base = 0

    @property
    def poisoned(self) -> bool:
        """True once a call trapped (or ran out of fuel or time)."""
        return self._state.poisoned

    def retire(self, reason: str) -> None:
        """Poison the instance from outside; later calls raise `CoreTrap` naming `reason`."""
        self._state.retire(reason)

    def _initial_memory_bytes(self) -> int:
        """Return the sum of the module's memories' minimum sizes, in bytes."""
        total = 0
        for export in self._module.exports:
            if isinstance(export.type, wasmtime.MemoryType):
                total += export.type.limits.min * 65536
        return total

    # --- calls ------------------------------------------------------------------

    def _export_func(self, name: str) -> tuple[wasmtime.Func, int, int]:
        """Find an all-i32 function export; return it with its param and result counts."""
        export = self._exports.get(name)
        if not isinstance(export, wasmtime.Func):
            raise TokensieveError(
                f"the WebAssembly module has no function export {name!r}; the "
                f"package and its core are out of sync, reinstall tokensieve"
            )
        func_type = export.type(self._state.store)
        i32 = wasmtime.ValType.i32()
        params, results = func_type.params, func_type.results
        if any(p != i32 for p in params) or any(r != i32 for r in results):
            raise TokensieveError(
                f"export {name!r} has signature ({', '.join(map(str, params))}) -> "
                f"({', '.join(map(str, results))}); the runtime calls only exports "
                f"whose parameters and result are i32"
            )
        if len(results) > 1:
            raise TokensieveError(
                f"export {name!r} returns {len(results)} values; the runtime "
                f"calls only exports with at most one i32 result"
            )
        return export, len(params), len(results)

    def func(self, name: str, *, slow: bool = False, trusted: bool = False) -> Callable[..., int]:
        """Return a fast callable for the export `name` (cached per name).

        With `slow`, the call may run past the per-call deadline, up to 30 s (construction:
        building a trie, compiling a grammar). A `trusted` callable skips the runtime's lock
        and argument checks (about 0.3 µs): for a caller that serializes calls on this
        runtime itself and passes in-range ints (the binding's step path).

        The callable takes ints in -2**31 .. 2**32-1 and returns the i32 result as a
        signed int (0 if the export has no result). Cost: about 1 µs; the GIL is
        released while the module runs.

        Args:
            name: export name.

        Returns:
            The callable.

        Raises:
            TokensieveError: no such export, or its signature is not all-i32.
        """
        key = f"{name}/slow={slow}/trusted={trusted}"
        existing = self._callables.get(key)
        if existing is not None:
            return existing
        func, param_count, result_count = self._export_func(name)
        prepare = self._state.prepare_slow_call if slow else self._state.prepare_call
        callable_ = _fast_callable(self._state, name, func, param_count, result_count, prepare, trusted)
        self._callables[key] = callable_
        return callable_

    def checked_func(self, name: str) -> Callable[..., int]:
        """Return a callable through wasmtime-py's ordinary `Func.__call__` (~20 µs).

        Kept for benchmarks and for cross-checking the fast path; same error handling.

        Args:
            name: export name.

        Raises:
            TokensieveError: no such export, or its signature is not all-i32.
        """
        func, param_count, _ = self._export_func(name)
        state = self._state

        def call_checked(*args: int) -> int:
            if state.poisoned:
                raise state.poisoned_error(name)
            if len(args) != param_count:
                raise TypeError(
                    f"{name} takes {param_count} i32 arguments, got {len(args)}"
                )
            signed = [v - (1 << 32) if v > 0x7FFF_FFFF else v for v in args]
            with state.lock:
                if state.prepare_call is not None:
                    state.prepare_call()
                try:
                    result = func(state.store, *signed)
                except (wasmtime.Trap, wasmtime.WasmtimeError) as error:
                    state.poison(name, str(error))
                    raise _error_for(name, str(error), _trap_code(error)) from None
            return 0 if result is None else int(result)

        return call_checked

    # --- memory -----------------------------------------------------------------

    def memory_size_bytes(self) -> int:
        """Return the current size of linear memory in bytes."""
        return int(_memory_data_size(self._state.context_address, self._memory_address))

    def _address(self, ptr: int, size: int) -> int:
        """Return the host address of [ptr, ptr+size) in linear memory, bounds-checked.

        Must be called with the lock held; the address is valid only until the next
        call into the module (memory may move when it grows, unless it is fixed).
        """
        if not _I32_MIN <= ptr <= _U32_MAX or size < 0:
            raise IndexError(f"bad linear memory range: ptr={ptr}, size={size}")
        start = ptr & _U32_MASK
        if self._fixed and self._base and start + size <= self._known_size:
            return self._base + start
        context, memory = self._state.context_address, self._memory_address
        memory_size = _memory_data_size(context, memory)
        if start + size > memory_size:
            raise IndexError(
                f"linear memory range [{start}, {start + size}) is outside the "
                f"module's {memory_size} bytes; this is a bug in tokensieve, please "
                f"report it"
            )
        base = _memory_data(context, memory) or 0
        self._known_size = memory_size
        self._base = base
        return base + start

    def read(self, ptr: int, size: int) -> bytes:
        """Copy `size` bytes at `ptr` out of linear memory.

        Args:
            ptr: u32 address (a negative i32 is read as its u32 value).
            size: number of bytes.

        Returns:
            A new bytes object.

        Raises:
            IndexError: the range is outside linear memory.
        """
        with self._state.lock:
            address = self._address(ptr, size)
            return ctypes.string_at(address, size) if size else b""

    def write(self, ptr: int, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` (any C-contiguous buffer) into linear memory at `ptr`.

        Args:
            ptr: u32 address.
            data: bytes, bytearray, or a memoryview / array of any item type.

        Raises:
            IndexError: the range is outside linear memory.
            TypeError: `data` is not a C-contiguous buffer.
        """
        if isinstance(data, bytes):
            source: Any = data
            size = len(data)
        else:
            view = _byte_view(data)
            size = view.nbytes
            if view.readonly:
                source = view.tobytes()
            else:
                source = (ctypes.c_char * size).from_buffer(view) if size else b""
        with self._state.lock:
            address = self._address(ptr, size)
            if size:
                _memmove(address, source, size)

    def read_into(self, ptr: int, dest: memoryview) -> None:
        """Copy `dest.nbytes` bytes at `ptr` straight into a writable buffer.

        No intermediate bytes object: one memmove from linear memory into `dest`
        (a numpy array, torch tensor memory, bytearray...).

        Args:
            ptr: u32 address.
            dest: writable C-contiguous buffer (any item type).

        Raises:
            IndexError: the range is outside linear memory.
            TypeError: `dest` is read-only or not C-contiguous.
        """
        view = _byte_view(dest)
        if view.readonly:
            raise TypeError("read_into needs a writable buffer, got a read-only one")
        size = view.nbytes
        target = (ctypes.c_char * size).from_buffer(view) if size else None
        with self._state.lock:
            address = self._address(ptr, size)
            if target is not None:
                _memmove(target, address, size)

    def dest_for(self, view: memoryview) -> Any:
        """Prepare a writable C-contiguous buffer as a target of `copy_to` (its host address).

        The caller keeps `view` (and what it views) alive as long as it uses the result.
        """
        target = _byte_view(view)
        if target.readonly:
            raise TypeError("copy_to needs a writable buffer, got a read-only one")
        size = target.nbytes
        holder = (ctypes.c_char * size).from_buffer(target) if size else None
        return (ctypes.addressof(holder) if holder is not None else 0, size, holder)

    def copy_to(self, ptr: int, dest: Any) -> None:
        """Copy `dest`'s size in bytes at `ptr` into a target prepared by `dest_for`: one
        memmove, no new objects (the step path's copy of a mask)."""
        address, size, _ = dest
        if size:
            _memmove(address, self._address(ptr, size), size)

    def copy_each_to(self, sources: Sequence[Any], dests: Sequence[memoryview]) -> None:
        """Copy each `source_for` range `sources[i]` into `dests[i]`, a writable flat byte
        view of the same size: a batch's masks, each from its matcher's own buffer. On fixed
        memory a memoryview assignment per row (a C memcpy, the GIL held: ~0.6 µs for a
        Llama-3 mask, where a ctypes memmove call cost ~2.5 µs); elsewhere `read_into`.

        Raises:
            ValueError: a target's size differs from its source's.
        """
        if not self._fixed:
            for ptr, dest in zip(sources, dests):
                self.read_into(ptr, dest)
            return
        whole = slice(None)
        for source, dest in zip(sources, dests):
            dest[whole] = source

    def source_for(self, ptr: int, size: int) -> Any:
        """Prepare `size` bytes of linear memory at `ptr` as the source of `func_copy`'s
        copies (the binding's: a matcher's own mask in the core, which stays put while the
        matcher lives; the binding drops the view when it frees the matcher).

        On 64-bit hosts linear memory never moves (see `_engine`), so this is a byte view of
        the range made once and kept: the one exception to "no view of linear memory
        outlives the call that made it", sound because the address cannot change while the
        store lives, and the view is only read by this runtime's own `func_copy` callables,
        after a successful call (so never once the store is poisoned or closed at exit).
        Elsewhere it is `ptr`, and each copy looks the address up.

        Raises:
            IndexError: the range is outside linear memory.
        """
        if not self._fixed:
            return ptr
        with self._state.lock:
            address = self._address(ptr, size)
        if not size:
            return memoryview(b"")
        return memoryview((ctypes.c_char * size).from_address(address)).cast("B")

    def func_copy(self, name: str, *, copy_from_status: int = 0) -> Callable[..., int]:
        """Return `call(src, dest, *args)`: call the export `name` (trusted: the caller
        serializes calls and passes in-range ints) and, when its result is at least
        `copy_from_status`, copy `src` (a `source_for` range) into `dest` (a writable flat
        byte memoryview of the same size, the caller's row). The step path: one Python
        frame, one C call and one memcpy, nothing allocated (see `_copy_callable`).

        Raises:
            TokensieveError: no such export, or its signature is not all-i32 -> i32.
        """
        func, param_count, result_count = self._export_func(name)
        if result_count != 1:
            raise TokensieveError(f"func_copy needs an export with an i32 result; {name!r} has none")
        if self._fixed:
            return _copy_callable(self._state, name, func, param_count, copy_from_status)
        plain = self.func(name, trusted=True)
        read_into = self.read_into

        def call_copy(src: int, dest: memoryview, *args: int) -> int:
            result = plain(*args)
            if result >= copy_from_status:
                read_into(src, dest)
            return result

        call_copy.__name__ = f"{name}+copy"
        return call_copy

    def read_u32(self, ptr: int) -> int:
        """Read a little-endian u32 at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
        """
        with self._state.lock:
            return int.from_bytes(ctypes.string_at(self._address(ptr, 4), 4), "little")

    def read_i32(self, ptr: int) -> int:
        """Read a little-endian i32 at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
        """
        with self._state.lock:
            return int.from_bytes(
                ctypes.string_at(self._address(ptr, 4), 4), "little", signed=True
            )


class _RawCall:
    """What an unchecked call of one export needs, made once: its raw value array (sized
    max(params, results, 1)), an i32 view of it, and the five ctypes arguments of
    `wasmtime_func_call_unchecked`. The i32 field sits at offset 0 of each raw slot, so
    argument i is word `i * _RAW_STRIDE_WORDS` and the result is word 0.

    Sound only because the caller checked that `func` belongs to `state.store` and is
    (i32 x param_count) -> (i32 x result_count), with result_count <= 1. The closures built
    over it keep it alive, and it keeps alive everything its addresses point at.
    """

    __slots__ = ("func", "raw", "words", "trap", "args")

    def __init__(self, state: _StoreState, func: wasmtime.Func, param_count: int, result_count: int) -> None:
        slot_count = max(param_count, result_count, 1)
        self.func = func
        self.raw = (ffi.wasmtime_val_raw_t * slot_count)()
        self.words = (ctypes.c_int32 * (slot_count * _RAW_STRIDE_WORDS)).from_buffer(self.raw)
        self.trap = ctypes.c_void_p()
        self.args = (
            ctypes.c_void_p(state.context_address),
            ctypes.c_void_p(ctypes.addressof(func._func)),
            ctypes.c_void_p(ctypes.addressof(self.raw)),
            ctypes.c_size_t(slot_count),
            ctypes.c_void_p(ctypes.addressof(self.trap)),
        )


def _fast_callable(
    state: _StoreState,
    name: str,
    func: wasmtime.Func,
    param_count: int,
    result_count: int,
    prepare: Callable[[], None] | None,
    trusted: bool = False,
) -> Callable[..., int]:
    """Build the closure that calls `func` through `wasmtime_func_call_unchecked`.

    Sound only because the caller checked that `func` belongs to `state.store` and
    is (i32 x param_count) -> (i32 x result_count), with result_count <= 1. A `trusted`
    closure skips the lock and the argument checks: its caller holds its own lock for the
    instance and passes exactly `param_count` ints in range.
    """
    parts = _RawCall(state, func, param_count, result_count)
    words, trap, (a0, a1, a2, a3, a4) = parts.words, parts.trap, parts.args
    stride = _RAW_STRIDE_WORDS
    has_result = result_count == 1
    lock = state.lock
    call = _call_unchecked

    if trusted:
        offsets = [i * stride for i in range(param_count)]

        def call_trusted(*args: int) -> int:
            if state.poisoned:
                raise state.poisoned_error(name)
            for offset, value in zip(offsets, args):
                words[offset] = value
            if prepare is not None:
                prepare()
            error = call(a0, a1, a2, a3, a4)
            if error is not None or trap.value is not None:
                state.raise_failure(name, error, trap)
            return words[0] if has_result else 0

        call_trusted.__name__ = name
        setattr(call_trusted, "_keep_alive", parts)
        return call_trusted

    def call_export(*args: int) -> int:
        if state.poisoned:
            raise state.poisoned_error(name)
        if len(args) != param_count:
            raise TypeError(f"{name} takes {param_count} i32 arguments, got {len(args)}")
        with lock:
            word_index = 0
            for value in args:
                if not _I32_MIN <= value <= _U32_MAX:
                    raise OverflowError(
                        f"{name}: argument {value} does not fit in 32 bits "
                        f"(allowed -2**31 .. 2**32-1)"
                    )
                words[word_index] = value
                word_index += stride
            if prepare is not None:
                prepare()
            error = call(a0, a1, a2, a3, a4)
            if error is not None or trap.value is not None:
                state.raise_failure(name, error, trap)
            return words[0] if has_result else 0

    call_export.__name__ = name
    call_export.__qualname__ = f"WasmtimeRuntime.func({name!r})"
    call_export.__doc__ = f"Call the export {name} (unchecked fast path)."
    # The closure must own everything its addresses point at.
    setattr(call_export, "_keep_alive", parts)
    return call_export


def _copy_callable(
    state: _StoreState, name: str, func: wasmtime.Func, param_count: int, copy_from_status: int
) -> Callable[..., int]:
    """Build `call(src, dest, *args)` for `func_copy` on fixed memory: the step path.

    One Python frame: check the store's health, write the arguments, refresh the deadline
    when due (inline, by the ticker's count; `prepare_call` only when it has work), one C
    call, the status, and the copy as a memoryview assignment from `src` (a `source_for` view
    of linear memory) into `dest` (a C-level memcpy; no ctypes call, no object made).
    Trusted: the caller holds its lock for the instance and passes in-range ints. Fixed
    arities for the step path's two exports (3 and 4 arguments); others write their
    arguments in a loop.

    A trap leaves the result slot as it was, holding the first argument: only a result equal
    to it needs the trap pointer read (a ctypes attribute, 0.04 µs), which is then exact (a
    first argument past 2**31 - 1 reads back wrapped, so it always does).
    """
    parts = _RawCall(state, func, param_count, 1)
    words, trap, (a0, a1, a2, a3, a4) = parts.words, parts.trap, parts.args
    s1, s2, s3 = _RAW_STRIDE_WORDS, 2 * _RAW_STRIDE_WORDS, 3 * _RAW_STRIDE_WORDS
    prepare = state.prepare_call
    always = state.prepare_always
    ticker = state.ticker  # None without a deadline: then `prepare` is None, or `always` holds
    call = _call_unchecked
    whole = slice(None)  # `dest[:]` would build this slice on every call

    if param_count == 3:

        def call_copy(src: memoryview, dest: memoryview, a: int, b: int, c: int) -> int:
            if state.poisoned:
                raise state.poisoned_error(name)
            words[0] = a
            words[s1] = b
            words[s2] = c
            if prepare is not None and (always or ticker.ticks >= state.refresh_at):
                prepare()
            error = call(a0, a1, a2, a3, a4)
            result = words[0]
            if error is not None or ((result == a or a > _I32_MAX) and trap.value is not None):
                state.raise_failure(name, error, trap)
            if result >= copy_from_status:
                dest[whole] = src
            return result

    elif param_count == 4:

        def call_copy(src: memoryview, dest: memoryview, a: int, b: int, c: int, d: int) -> int:  # type: ignore[misc]
            if state.poisoned:
                raise state.poisoned_error(name)
            words[0] = a
            words[s1] = b
            words[s2] = c
            words[s3] = d
            if prepare is not None and (always or ticker.ticks >= state.refresh_at):
                prepare()
            error = call(a0, a1, a2, a3, a4)
            result = words[0]
            if error is not None or ((result == a or a > _I32_MAX) and trap.value is not None):
                state.raise_failure(name, error, trap)
            if result >= copy_from_status:
                dest[whole] = src
            return result

    else:
        plain = _fast_callable(state, name, func, param_count, 1, prepare, trusted=True)

        def call_copy(src: memoryview, dest: memoryview, *args: int) -> int:  # type: ignore[misc]
            result = plain(*args)
            if result >= copy_from_status:
                dest[whole] = src
            return result

    call_copy.__name__ = f"{name}+copy"
    setattr(call_copy, "_keep_alive", parts)
    return call_copy


def _error_for(name: str, message: str, code: Any) -> Exception:
    """Build the exception for a failed call (LimitError for fuel / deadline)."""
    if code == wasmtime.TrapCode.OUT_OF_FUEL:
        return LimitError(
            f"{name} ran out of fuel (CoreOptions.fuel_per_call is too small for this grammar or "
            f"input); raise it or simplify the grammar. This core instance is retired",
            limit="fuel",
        )
    if code == wasmtime.TrapCode.INTERRUPT:
        return LimitError(
            f"{name} ran past its deadline (CoreOptions.deadline_s); raise it or simplify "
            f"the grammar. This core instance is retired",
            limit="deadline",
        )
    return CoreTrap(
        f"the WebAssembly core trapped in {name} ({_trap_summary(message)}); this is "
        f"a bug in tokensieve, please report it with the details below. The runtime "
        f"is now unusable; create a new one.\n\n{message.strip()}"
    )


def _byte_view(data: Any) -> memoryview:
    """Return a flat unsigned-byte view of a C-contiguous buffer."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if not view.c_contiguous:
        raise TypeError("linear memory transfers need a C-contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _trap_summary(message: str) -> str:
    """Pick the line that says why wasmtime trapped (it comes after the backtrace)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        _, found, reason = line.partition("wasm trap: ")
        if found:
            return reason
    return lines[-1] if lines else "no message"


def _trap_code(error: BaseException) -> Any:
    """Return a wasmtime trap's code, or None if unknown or not a trap."""
    if not isinstance(error, wasmtime.Trap):
        return None
    try:
        return error.trap_code
    except ValueError:
        return None


def bench_call_us(
    runtime: Any, name: str, *args: int, n: int = 100_000, checked: bool = False
) -> float:
    """Measure the average cost of calling an export, in microseconds.

    Args:
        runtime: a `WasmtimeRuntime` (any `Runtime` works with checked=False).
        name: export to call.
        *args: its arguments.
        n: number of calls timed (after a short warm-up).
        checked: time wasmtime-py's ordinary `Func.__call__` instead of the fast path.

    Returns:
        Mean wall-clock µs per call.
    """
    call = runtime.checked_func(name) if checked else runtime.func(name)
    for _ in range(min(n, 1000)):
        call(*args)
    start = time.perf_counter()
    for _ in range(n):
        call(*args)
    return (time.perf_counter() - start) / n * 1e6
