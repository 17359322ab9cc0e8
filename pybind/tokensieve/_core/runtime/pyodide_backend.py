"""The Pyodide backend: the core under the browser's (or Node's) own WebAssembly engine.

Used when `sys.platform == "emscripten"`. wasmtime and numpy do not exist there; the
module is compiled and instantiated synchronously through `js.WebAssembly` and its
exports are called directly through Pyodide's JS proxies.

Why it is shaped this way:

- Synchronous `new WebAssembly.Module(bytes)` keeps `load_runtime` an ordinary
  function. Browsers refuse it for modules over 4 KB on the main thread, so the
  web demo runs Pyodide in a Worker (Node has no such limit).
- Bytes cross as a JS `Uint8Array` filled with `.assign()` (one copy), never as a
  Python `bytes` proxy or a Node `Buffer`.
- i32 arguments need no conversion: JS `ToInt32` wraps 2**31 .. 2**32-1 to the same
  bit pattern, and results come back as signed JS numbers, i.e. Python ints.
- `memory.buffer` is detached whenever memory grows, so every access builds a new
  `Uint8Array` over the current buffer and drops it before returning.
- The module has no imports, so any JS exception escaping a call came from the
  engine (a `WebAssembly.RuntimeError` trap, or a `RangeError` stack overflow):
  it becomes `CoreTrap` and poisons the runtime.
- **A step is one crossing.** Every Python→JS crossing (a proxy call, an attribute,
  a new typed array) costs microseconds, so the step path (`func_copy`) calls one JS
  closure that runs the export and, on success, copies the mask from the module's
  linear memory straight into a *stage*: a Python `bytearray` whose address in
  Pyodide's own heap was looked up once. Python then copies the stage into the
  caller's array with a plain memoryview assignment (a memcpy). Nothing is converted
  or allocated per step on either side; `copy_to`, and `read`/`write` up to 64 KiB
  (token ids, forced bytes, error texts), use the same stage.
"""

from __future__ import annotations

from typing import Any, Callable, Final

import js  # type: ignore[import-not-found]
import pyodide_js  # type: ignore[import-not-found]
from pyodide.code import run_js  # type: ignore[import-not-found]
from pyodide.ffi import JsException, create_proxy  # type: ignore[import-not-found]

from ..._errors import CoreTrap, TokensieveError
from .health import Health

__all__ = ["PyodideRuntime"]

_I32_MIN: Final = -(1 << 31)
_U32_MAX: Final = (1 << 32) - 1
_U32_MASK: Final = 0xFFFF_FFFF

# JS helpers of one instance. `heap` is Pyodide's Emscripten module: its HEAPU8 is
# replaced when Pyodide's own memory grows, so it is looked up on every copy. The stage
# (address, size) lives in Pyodide's heap; `copy` and the fused callables write there.
_HELPERS_JS: Final = """
(heap, memory) => {
  let stageAddress = 0;
  let stageSize = 0;
  const copy = (src, size) => {
    if (size > stageSize) throw new RangeError("stage too small: " + size + " > " + stageSize);
    heap.HEAPU8.set(new Uint8Array(memory.buffer, src >>> 0, size), stageAddress);
  };
  return {
    setStage(address, size) { stageAddress = address; stageSize = size; },
    copy,
    copyIn(dst, size) {
      if (size > stageSize) throw new RangeError("stage too small: " + size + " > " + stageSize);
      new Uint8Array(memory.buffer, dst >>> 0, size).set(heap.HEAPU8.subarray(stageAddress, stageAddress + size));
    },
    fused(fn, minStatus) {
      return (src, size, a, b, c, d) => {
        const status = fn(a, b, c, d);
        if (status >= minStatus) copy(src, size);
        return status;
      };
    },
  };
}
"""
# Reads and writes up to this size go through the stage (one crossing); larger ones (a
# tokenizer's tables, once) through a fresh typed array, so the stage stays small.
_STAGE_BYTES_MAX: Final = 1 << 16
_ADDRESS_JS: Final = "(proxy) => { const b = proxy.getBuffer('u8'); try { return b.data.byteOffset; } finally { b.release(); } }"


def _js_error_text(error: BaseException) -> str:
    """Return `Name: message` of a JS exception as plainly as Pyodide allows."""
    name = getattr(error, "name", None) or type(error).__name__
    message = getattr(error, "message", None) or str(error)
    return f"{name}: {message}"


class _CallState(Health):
    """Health of one instance (`Health`), shared by its callables, which must not hold the
    runtime: dropping the runtime then releases the JS instance and its memory at once."""

    __slots__ = ()

    def trap(self, name: str, error: BaseException) -> CoreTrap:
        """Poison the instance and build the error for a trap inside `name`."""
        text = _js_error_text(error)
        self.poisoned = True
        self.poison_reason = f"{name}: {text}"
        return CoreTrap(
            f"the WebAssembly core trapped in {name} ({text}); this is a bug in "
            f"tokensieve, please report it. The runtime is now unusable; create a "
            f"new one"
        )


class PyodideRuntime:
    """One instance of a module under `js.WebAssembly`, with its own linear memory.

    Attributes:
        name: `"pyodide"`.
        poisoned: True once a call trapped.
    """

    name: str = "pyodide"

    def __init__(self, wasm: bytes) -> None:
        """Compile and instantiate a module synchronously.

        Args:
            wasm: module bytes; every export used through `func` must be all-i32.

        Raises:
            TokensieveError: the module is invalid, imports anything, has no memory,
                or the page forbids synchronous compilation (main thread).
            CoreTrap: the module trapped while starting.
        """
        self._state = _CallState()
        self._callables: dict[str, Callable[..., int]] = {}
        wasm_array = js.Uint8Array.new(len(wasm))
        wasm_array.assign(wasm)
        try:
            module = js.WebAssembly.Module.new(wasm_array)
        except JsException as error:
            hint = (
                "; the browser forbids synchronous compilation of large modules on "
                "the main thread, so run Pyodide in a Web Worker"
                if "4KB" in str(error) or "main thread" in str(error)
                else "; rebuild the core or check wasm_bytes= / wasm_path="
            )
            raise TokensieveError(
                f"cannot compile the WebAssembly module ({_js_error_text(error)}){hint}"
            ) from None
        imports = js.WebAssembly.Module.imports(module)
        if imports.length:
            names = ", ".join(f"{i.module}.{i.name}" for i in imports)
            raise TokensieveError(
                f"the WebAssembly module imports {names}; tokensieve runs only "
                f"freestanding modules (no imports)"
            )
        self._function_names = {
            export.name
            for export in js.WebAssembly.Module.exports(module)
            if export.kind == "function"
        }
        try:
            instance = js.WebAssembly.Instance.new(module, js.Object.new())
        except JsException as error:
            self._state.poisoned = True
            raise CoreTrap(
                f"the WebAssembly module failed to start ({_js_error_text(error)}); "
                f"this is a bug in tokensieve, please report it"
            ) from None
        self._exports = instance.exports
        memory = getattr(self._exports, "memory", None)
        if memory is None or not hasattr(memory, "buffer"):
            raise TokensieveError("the WebAssembly module exports no linear memory")
        self._memory = memory
        heap = getattr(pyodide_js, "_module", None)
        # Without Pyodide's heap (another Pyodide), steps take the slower copy path.
        self._helpers = run_js(_HELPERS_JS)(heap, memory) if heap is not None else None
        self._stage = bytearray(0)
        self._stage_view = memoryview(self._stage)

    @property
    def poisoned(self) -> bool:
        """True once a call trapped; every later call raises `CoreTrap`."""
        return self._state.poisoned

    def retire(self, reason: str) -> None:
        """Poison the instance from outside; later calls raise `CoreTrap` naming `reason`."""
        self._state.retire(reason)

    # --- calls ------------------------------------------------------------------

    def func(self, name: str, *, slow: bool = False, trusted: bool = False) -> Callable[..., int]:
        """Return a callable for the export `name` (cached per name).

        The callable takes ints in -2**31 .. 2**32-1 and returns the i32 result as a
        signed int (0 if the export has no result).

        Args:
            name: export name.

        Returns:
            The callable.

        Raises:
            TokensieveError: no such function export.
        """
        existing = self._callables.get(name)
        if existing is not None:
            return existing
        if name not in self._function_names:
            raise TokensieveError(
                f"the WebAssembly module has no function export {name!r}; the "
                f"package and its core are out of sync, reinstall tokensieve"
            )
        js_function = getattr(self._exports, name)
        param_count = int(js_function.length)
        state = self._state

        def call_export(*args: int) -> int:
            if state.poisoned:
                raise state.poisoned_error(name)
            if len(args) != param_count:
                raise TypeError(
                    f"{name} takes {param_count} i32 arguments, got {len(args)}"
                )
            for value in args:
                if not _I32_MIN <= value <= _U32_MAX:
                    raise OverflowError(
                        f"{name}: argument {value} does not fit in 32 bits "
                        f"(allowed -2**31 .. 2**32-1)"
                    )
            try:
                result = js_function(*args)
            except JsException as error:
                raise state.trap(name, error) from None
            return 0 if result is None else int(result)

        call_export.__name__ = name
        call_export.__qualname__ = f"PyodideRuntime.func({name!r})"
        call_export.__doc__ = f"Call the export {name} through js.WebAssembly."
        self._callables[name] = call_export
        return call_export

    def source_for(self, ptr: int, size: int) -> int:
        """Prepare `size` bytes at `ptr` as the source of `func_copy` (here, `ptr` itself:
        memory growth detaches every view, so each copy takes a fresh one)."""
        return ptr

    def func_copy(self, name: str, *, copy_from_status: int = 0) -> Callable[..., int]:
        """Return `call(src, dest, *args)`: call the export `name` with `args` and, when its
        result is at least `copy_from_status`, copy `dest`'s size in bytes at `src` (a
        `source_for` pointer) into `dest` (a writable flat byte memoryview). One crossing
        into JS per call: the step path.

        Raises:
            TokensieveError: no such function export.
        """
        plain = self.func(name)  # checks the name
        if self._helpers is None:

            def call_then_copy(src: int, dest: memoryview, *args: int) -> int:
                result = plain(*args)
                if result >= copy_from_status:
                    self.read_into(src, dest)
                return result

            return call_then_copy
        fused = self._helpers.fused(getattr(self._exports, name), copy_from_status)
        state = self._state
        stage_for = self._stage_for

        def call_copy(src: int, dest: memoryview, *args: int) -> int:
            if state.poisoned:
                raise state.poisoned_error(name)
            size = dest.nbytes
            stage = stage_for(size)
            try:
                result = fused(src, size, *args)
            except JsException as error:
                raise state.trap(name, error) from None
            if result >= copy_from_status and size:
                dest[:] = stage[:size]
            return int(result)

        call_copy.__name__ = f"{name}+copy"
        return call_copy

    def _stage_for(self, size: int) -> memoryview:
        """The stage, grown to at least `size` bytes (its new address told to JS)."""
        if size > len(self._stage):
            self._stage_view.release()
            self._stage = bytearray(max(size, 2 * len(self._stage), 4096))
            self._stage_view = memoryview(self._stage)
            proxy = create_proxy(self._stage)
            try:
                address = int(run_js(_ADDRESS_JS)(proxy))
            finally:
                proxy.destroy()
            self._helpers.setStage(address, len(self._stage))
        return self._stage_view

    # --- memory -----------------------------------------------------------------

    def memory_size_bytes(self) -> int:
        """Return the current size of linear memory in bytes."""
        return int(self._memory.buffer.byteLength)

    def _view(self, ptr: int, size: int) -> Any:
        """Return a fresh `Uint8Array` over [ptr, ptr+size); valid until the next call."""
        if not _I32_MIN <= ptr <= _U32_MAX or size < 0:
            raise IndexError(f"bad linear memory range: ptr={ptr}, size={size}")
        start = ptr & _U32_MASK
        buffer = self._memory.buffer
        memory_size = int(buffer.byteLength)
        if start + size > memory_size:
            raise IndexError(
                f"linear memory range [{start}, {start + size}) is outside the "
                f"module's {memory_size} bytes; this is a bug in tokensieve, please "
                f"report it"
            )
        return js.Uint8Array.new(buffer, start, size)

    def read(self, ptr: int, size: int) -> bytes:
        """Copy `size` bytes at `ptr` out of linear memory.

        Raises:
            IndexError: the range is outside linear memory.
        """
        if self._helpers is not None and 0 < size <= _STAGE_BYTES_MAX:
            stage = self._stage_for(size)
            self._staged(self._helpers.copy, ptr, size)
            return bytes(stage[:size])
        view = self._view(ptr, size)
        return bytes(view.to_bytes()) if size else b""

    def write(self, ptr: int, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` (any C-contiguous buffer) into linear memory at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
            TypeError: `data` is not a C-contiguous buffer.
        """
        source = _byte_view(data)
        size = source.nbytes
        if self._helpers is not None and 0 < size <= _STAGE_BYTES_MAX:
            stage = self._stage_for(size)
            stage[:size] = source
            self._staged(self._helpers.copyIn, ptr, size)
            return
        view = self._view(ptr, size)
        if size:
            view.assign(source)

    def _staged(self, transfer: Any, ptr: int, size: int) -> None:
        """Run a stage transfer (`copy` or `copyIn`) of `size` bytes at `ptr`: one crossing."""
        if not _I32_MIN <= ptr <= _U32_MAX:
            raise IndexError(f"bad linear memory range: ptr={ptr}, size={size}")
        try:
            transfer(ptr, size)
        except JsException as error:
            raise IndexError(
                f"linear memory range [{ptr & _U32_MASK}, {(ptr & _U32_MASK) + size}) is outside the "
                f"module's memory ({_js_error_text(error)}); this is a bug in tokensieve, please report it"
            ) from None

    def read_into(self, ptr: int, dest: memoryview) -> None:
        """Copy `dest.nbytes` bytes at `ptr` straight into a writable buffer.

        Raises:
            IndexError: the range is outside linear memory.
            TypeError: `dest` is read-only or not C-contiguous.
        """
        target = _byte_view(dest)
        if target.readonly:
            raise TypeError("read_into needs a writable buffer, got a read-only one")
        view = self._view(ptr, target.nbytes)
        if target.nbytes:
            view.assign_to(target)

    def dest_for(self, view: memoryview) -> Any:
        """Prepare a writable buffer as a target of `copy_to` (here, the view itself)."""
        return _byte_view(view)

    def copy_to(self, ptr: int, dest: Any) -> None:
        """Copy `dest.nbytes` bytes at `ptr` into a target prepared by `dest_for` (one
        crossing into JS, then a memcpy from the stage).

        Raises:
            IndexError: the range is outside linear memory.
        """
        size = dest.nbytes
        if not size:
            return
        if self._helpers is None:
            self.read_into(ptr, dest)
            return
        stage = self._stage_for(size)
        self._staged(self._helpers.copy, ptr, size)
        dest[:] = stage[:size]

    def copy_each_to(self, sources: Any, dests: Any) -> None:
        """Copy each `source_for` range `sources[i]` (here an address) into `dests[i]`, a
        writable flat byte view of the size to copy."""
        for ptr, dest in zip(sources, dests):
            self.copy_to(ptr, dest)

    def read_u32(self, ptr: int) -> int:
        """Read a little-endian u32 at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
        """
        return int.from_bytes(self.read(ptr, 4), "little")

    def read_i32(self, ptr: int) -> int:
        """Read a little-endian i32 at `ptr`.

        Raises:
            IndexError: the range is outside linear memory.
        """
        return int.from_bytes(self.read(ptr, 4), "little", signed=True)


def _byte_view(data: Any) -> memoryview:
    """Return a flat unsigned-byte view of a C-contiguous buffer."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if not view.c_contiguous:
        raise TypeError("linear memory transfers need a C-contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
