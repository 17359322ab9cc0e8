"""The runtime layer: both backends pass integers, move bytes and report traps alike.

Everything runs against `tests/data/runtime_probe.zig`, a tiny module compiled here
with the same flags as the core, so these tests do not depend on the core's ABI.
wasmtime is tested in process; Pyodide runs one batch of the same checks inside
Node (see `pyodide_run` in conftest.py) and each test below asserts one part of it.
"""

from __future__ import annotations

import array
import gc
import json
import os
import struct
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

import pytest

from tokensieve._errors import CoreTrap, LimitError, TokensieveError
from tokensieve._core.runtime import (
    VARIANT_ENV_VAR,
    load_runtime,
    read_wasm_bytes,
    wasm_file_name,
)
from tokensieve._core.runtime import wasmtime_backend as _wasmtime
from tokensieve._core.runtime.wasmtime_backend import WasmtimeRuntime, bench_call_us

PROBE_SOURCE = Path(__file__).parent / "data" / "runtime_probe.zig"
PYBIND_DIR = Path(__file__).resolve().parent.parent / "pybind"
U32_MASK = 0xFFFF_FFFF
PAGE_SIZE_BYTES = 65536


@pytest.fixture(scope="session")
def probe_wasm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compile runtime_probe.zig once per session with the core's flags."""
    out_dir = tmp_path_factory.mktemp("runtime_probe")
    wasm_path = out_dir / "probe.wasm"
    command = [
        sys.executable, "-m", "ziglang", "build-exe", str(PROBE_SOURCE),
        "-target", "wasm32-freestanding", "-fno-entry", "-rdynamic",
        "-O", "ReleaseSafe", "-mcpu=generic+simd128", "-fstrip",
        f"-femit-bin={wasm_path}",
    ]  # fmt: skip
    completed = subprocess.run(
        command, cwd=out_dir, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, f"zig build failed:\n{completed.stderr}"
    return wasm_path


@pytest.fixture(scope="session")
def probe_wasm(probe_wasm_path: Path) -> bytes:
    """The compiled probe module's bytes."""
    return probe_wasm_path.read_bytes()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the disk cache at a fresh folder for this test."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOKENSIEVE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(params=["fixed", "moving"])
def runtime(request: pytest.FixtureRequest, probe_wasm: bytes, cache_dir: Path,
            monkeypatch: pytest.MonkeyPatch) -> WasmtimeRuntime:
    """A fresh wasmtime runtime over the probe, on each kind of linear memory: the fixed 4
    GiB reservation, and the moving memory instances fall back to when the address space
    cannot hold it (`ulimit -v`), whose host address changes as it grows."""
    monkeypatch.setattr(_wasmtime, "fixed_memory_first", request.param == "fixed")
    loaded = load_runtime(wasm_bytes=probe_wasm)
    assert isinstance(loaded, WasmtimeRuntime)
    assert loaded._fixed == (request.param == "fixed")
    return loaded


# --- wasmtime: calls ----------------------------------------------------------------


def test_wasmtime_results_are_signed_i32(runtime: WasmtimeRuntime) -> None:
    add = runtime.func("probe_add")
    assert runtime.name == "wasmtime"
    assert add(1, 2) == 3
    assert add(-5, 3) == -2
    assert add(2**31 - 1, 1) == -(2**31)
    assert add(U32_MASK, 0) == -1


def test_wasmtime_u32_arguments_cross_intact(runtime: WasmtimeRuntime) -> None:
    echo, high_bit = runtime.func("probe_echo"), runtime.func("probe_high_bit")
    assert echo(0xFFFF_FFF0) == -16
    assert echo(0xFFFF_FFF0) & U32_MASK == 0xFFFF_FFF0
    assert echo(-1) & U32_MASK == U32_MASK
    assert high_bit(2**31) == 1
    assert high_bit(2**31 - 1) == 0
    assert high_bit(U32_MASK) == 1


def test_wasmtime_rejects_bad_arguments_without_poisoning(
    runtime: WasmtimeRuntime,
) -> None:
    add = runtime.func("probe_add")
    with pytest.raises(OverflowError, match="32 bits"):
        add(2**32, 0)
    with pytest.raises(OverflowError):
        add(-(2**31) - 1, 0)
    with pytest.raises(TypeError, match="takes 2"):
        add(1)
    assert not runtime.poisoned
    assert add(40, 2) == 42


def test_wasmtime_unknown_or_non_function_export(runtime: WasmtimeRuntime) -> None:
    with pytest.raises(TokensieveError, match="no function export 'nope'"):
        runtime.func("nope")
    with pytest.raises(TokensieveError, match="no function export"):
        runtime.func("__stack_pointer")


def test_wasmtime_export_without_arguments(runtime: WasmtimeRuntime) -> None:
    size = runtime.func("probe_memory_size_bytes")()
    assert size == runtime.memory_size_bytes()
    assert size % PAGE_SIZE_BYTES == 0


def test_wasmtime_runtime_is_freed_without_garbage_collection(
    probe_wasm: bytes, cache_dir: Path
) -> None:
    """Callables hold the store, not the runtime: no cycle keeps linear memory alive."""
    gc.disable()
    try:
        loaded = load_runtime(wasm_bytes=probe_wasm)
        assert loaded.func("probe_add")(1, 2) == 3
        alive = weakref.ref(loaded)
        del loaded
        assert alive() is None
    finally:
        gc.enable()


def test_wasmtime_fast_and_checked_paths_agree(runtime: WasmtimeRuntime) -> None:
    cases = [(0, 0), (1, 2), (-7, 3), (2**31 - 1, 1), (U32_MASK, U32_MASK)]
    fast, checked = runtime.func("probe_add"), runtime.checked_func("probe_add")
    for a, b in cases:
        assert fast(a, b) == checked(a, b)


def test_wasmtime_threads_share_one_runtime_safely(runtime: WasmtimeRuntime) -> None:
    add = runtime.func("probe_add")
    failures: list[tuple[int, int]] = []

    def hammer(offset: int) -> None:
        for i in range(5000):
            if add(i, offset) != i + offset:
                failures.append((i, offset))

    threads = [threading.Thread(target=hammer, args=(k * 100_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_wasmtime_fast_call_cost(
    runtime: WasmtimeRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    """Print the per-call cost (the figure is reported, not asserted)."""
    fast_us = bench_call_us(runtime, "probe_add", 1, 2, n=100_000)
    fast_3_us = bench_call_us(runtime, "probe_fill", 1024, 0, 0, n=100_000)
    checked_us = bench_call_us(runtime, "probe_add", 1, 2, n=10_000, checked=True)
    with capsys.disabled():
        print(
            f"\n[runtime] wasmtime call cost: fast path {fast_us:.2f} us (2 args), "
            f"{fast_3_us:.2f} us (3 args); Func.__call__ {checked_us:.2f} us"
        )


# --- wasmtime: memory ---------------------------------------------------------------


def test_wasmtime_write_then_core_reads(runtime: WasmtimeRuntime) -> None:
    data = bytes(range(256)) * 4
    ptr = runtime.func("probe_alloc")(len(data)) & U32_MASK
    assert ptr != 0
    probe_sum = runtime.func("probe_sum")
    for payload in (data, bytearray(data), memoryview(data), memoryview(bytearray(data))):
        runtime.write(ptr, b"\0" * len(data))
        runtime.write(ptr, payload)
        assert probe_sum(ptr, len(data)) == sum(data)
        assert runtime.read(ptr, len(data)) == data


def test_wasmtime_write_accepts_typed_buffers(runtime: WasmtimeRuntime) -> None:
    token_ids = array.array("i", [1, -1, 70_000, 2**31 - 1])
    ptr = runtime.func("probe_alloc")(16) & U32_MASK
    runtime.write(ptr, memoryview(token_ids))
    assert runtime.read(ptr, 16) == token_ids.tobytes()
    assert runtime.read_i32(ptr + 4) == -1
    assert runtime.read_u32(ptr + 4) == U32_MASK
    assert runtime.read_u32(ptr + 8) == 70_000


def test_wasmtime_core_writes_then_read_into(runtime: WasmtimeRuntime) -> None:
    ptr = runtime.func("probe_alloc")(64) & U32_MASK
    runtime.func("probe_fill")(ptr, 64, 0xAB)
    target = bytearray(64)
    runtime.read_into(ptr, memoryview(target))
    assert target == b"\xab" * 64
    words = array.array("I", [0] * 16)
    runtime.read_into(ptr, memoryview(words))
    assert list(words) == [0xABABABAB] * 16
    with pytest.raises(TypeError, match="writable"):
        runtime.read_into(ptr, memoryview(bytes(4)))


def test_wasmtime_read_into_numpy(runtime: WasmtimeRuntime) -> None:
    numpy = pytest.importorskip("numpy")
    ptr = runtime.func("probe_alloc")(32) & U32_MASK
    runtime.write(ptr, struct.pack("<8i", *range(-4, 4)))
    mask = numpy.zeros(8, dtype=numpy.int32)
    runtime.read_into(ptr, memoryview(mask))
    assert mask.tolist() == list(range(-4, 4))


def test_wasmtime_memory_access_is_bounds_checked(runtime: WasmtimeRuntime) -> None:
    size = runtime.memory_size_bytes()
    assert runtime.read(size - 4, 4) == runtime.read(size - 4, 4)
    assert runtime.read(size, 0) == b""
    with pytest.raises(IndexError, match="outside"):
        runtime.read(size - 4, 8)
    with pytest.raises(IndexError, match="outside"):
        runtime.write(size - 1, b"ab")
    with pytest.raises(IndexError):
        runtime.read(2**32, 1)
    with pytest.raises(IndexError, match="outside"):
        runtime.read_into(size - 1, memoryview(bytearray(2)))
    assert not runtime.poisoned


def test_wasmtime_reads_follow_a_memory_that_moves(runtime: WasmtimeRuntime) -> None:
    """Bytes written before the memory grows read back after it (a moving memory has a new
    host address then), through every read path: `read`, `read_into`, `copy_each_to` from
    `source_for` ranges made before the growth, and `func_copy`."""
    ptr = runtime.func("probe_alloc")(4096) & U32_MASK
    runtime.func("probe_fill")(ptr, 4096, 0x5A)
    source = runtime.source_for(ptr, 4096)
    copy_fill = runtime.func_copy("probe_fill", copy_from_status=0)
    pages = runtime.memory_size_bytes() // PAGE_SIZE_BYTES
    state = runtime._state
    bases = {_wasmtime._memory_data(state.context_address, runtime._memory_address)}
    for grow_pages in (1, 64, 4096):  # up to 256 MiB more: past the growth reserve
        assert runtime.func("probe_grow")(grow_pages) == pages
        pages += grow_pages
        bases.add(_wasmtime._memory_data(state.context_address, runtime._memory_address))
        assert runtime.read(ptr, 4096) == b"\x5a" * 4096
        target = bytearray(4096)
        runtime.read_into(ptr, memoryview(target))
        assert target == b"\x5a" * 4096
        rows = [memoryview(bytearray(4096))]
        runtime.copy_each_to([source], rows)
        assert rows[0] == b"\x5a" * 4096
        high = pages * PAGE_SIZE_BYTES - 64  # in the newest page
        runtime.write(high, b"\x03" * 64)
        assert runtime.func("probe_sum")(high, 64) == 3 * 64
    dest = memoryview(bytearray(4096))
    assert copy_fill(source, dest, ptr, 4096, 0x11) == 4096
    assert dest == b"\x11" * 4096
    # The moving memory did move (else this test would not test it); the fixed one never does.
    assert (len(bases) > 1) == (not runtime._fixed)


def test_wasmtime_addresses_above_2_gib(runtime: WasmtimeRuntime) -> None:
    """Pointers >= 2**31 cross as negative i32 and still address the right bytes."""
    pages = runtime.memory_size_bytes() // PAGE_SIZE_BYTES
    assert runtime.func("probe_grow")(2**31 // PAGE_SIZE_BYTES + 1 - pages) == pages
    high = 2**31 + 4096
    assert runtime.func("probe_fill")(high, 16, 7) == 16
    assert runtime.read(high, 16) == b"\x07" * 16
    assert runtime.read(high - 2**32, 16) == b"\x07" * 16
    runtime.write(high, b"\x01" * 16)
    assert runtime.func("probe_sum")(high, 16) == 16


# --- wasmtime: traps and limits -----------------------------------------------------


def test_wasmtime_trap_raises_core_trap_and_poisons(
    runtime: WasmtimeRuntime, probe_wasm: bytes
) -> None:
    with pytest.raises(CoreTrap, match="unreachable") as raised:
        runtime.func("probe_trap")()
    assert "probe_trap" in str(raised.value)
    assert runtime.poisoned
    with pytest.raises(CoreTrap, match="poisoned"):
        runtime.func("probe_add")(1, 2)
    with pytest.raises(CoreTrap, match="poisoned"):
        runtime.checked_func("probe_add")(1, 2)
    fresh = load_runtime(wasm_bytes=probe_wasm)
    assert fresh.func("probe_add")(1, 2) == 3


def test_wasmtime_out_of_bounds_access_is_a_trap(runtime: WasmtimeRuntime) -> None:
    with pytest.raises(CoreTrap, match="out of bounds"):
        runtime.func("probe_out_of_bounds")()
    assert runtime.poisoned


def test_wasmtime_checked_path_trap_poisons(runtime: WasmtimeRuntime) -> None:
    with pytest.raises(CoreTrap, match="unreachable"):
        runtime.checked_func("probe_trap")()
    assert runtime.poisoned


def test_wasmtime_memory_cap_makes_growth_fail_cleanly(
    probe_wasm: bytes, cache_dir: Path
) -> None:
    initial = load_runtime(wasm_bytes=probe_wasm).memory_size_bytes()
    capped = load_runtime(
        wasm_bytes=probe_wasm, memory_limit_bytes=initial + 4 * PAGE_SIZE_BYTES
    )
    assert capped.func("probe_alloc")(1 << 20) == 0  # the allocator reports OOM
    assert capped.func("probe_grow")(100) == -1
    assert capped.func("probe_grow")(4) == initial // PAGE_SIZE_BYTES
    assert capped.func("probe_grow")(1) == -1
    assert not capped.poisoned
    assert capped.func("probe_add")(2, 2) == 4


def test_wasmtime_memory_cap_below_initial_memory(
    probe_wasm: bytes, cache_dir: Path
) -> None:
    with pytest.raises(LimitError, match="raise memory_limit_bytes"):
        load_runtime(wasm_bytes=probe_wasm, memory_limit_bytes=PAGE_SIZE_BYTES)


def test_wasmtime_fuel_limit(probe_wasm: bytes, cache_dir: Path) -> None:
    limited = load_runtime(wasm_bytes=probe_wasm, fuel_per_call=100_000)
    spin = limited.func("probe_spin")
    for _ in range(3):  # fuel is refilled for every call
        assert spin(1000) == 1000 * 999 // 2
    with pytest.raises(LimitError, match="fuel"):
        spin(10**9)
    assert limited.poisoned
    with pytest.raises(CoreTrap, match="poisoned"):
        spin(1)


def test_wasmtime_epoch_deadline(probe_wasm: bytes, cache_dir: Path) -> None:
    limited = load_runtime(wasm_bytes=probe_wasm, epoch_deadline_s=0.05)
    spin = limited.func("probe_spin")
    assert spin(1000) == 1000 * 999 // 2
    start = time.perf_counter()
    with pytest.raises(LimitError, match="deadline"):
        spin(U32_MASK)  # about a second per 4e9 iterations without the deadline
    assert time.perf_counter() - start < 5.0
    assert limited.poisoned


def test_wasmtime_deadline_is_per_call_across_many_calls(probe_wasm: bytes, cache_dir: Path) -> None:
    """Calls that together run for several deadlines never hit it: it is refreshed (by the
    epoch ticker's count, once half has passed) through the plain callables and the step
    path's `func_copy` alike, which copies only when the result allows it."""
    limited = load_runtime(wasm_bytes=probe_wasm, epoch_deadline_s=0.1)
    spin = limited.func("probe_spin")
    ptr = limited.func("probe_alloc")(64) & U32_MASK
    source = limited.source_for(ptr, 64)
    fill = limited.func_copy("probe_fill", copy_from_status=64)  # returns its length
    never = limited.func_copy("probe_fill", copy_from_status=65)
    dest = memoryview(bytearray(64))
    end, calls = time.perf_counter() + 0.5, 0
    while time.perf_counter() < end:
        assert spin(1000) == 1000 * 999 // 2
        assert fill(source, dest, ptr, 64, calls % 251) == 64
        assert dest == bytes([calls % 251]) * 64
        assert never(source, dest, ptr, 64, 255) == 64
        assert dest == bytes([calls % 251]) * 64  # not copied
        calls += 1
    assert calls > 100 and not limited.poisoned


def test_wasmtime_func_copy_trap_poisons(probe_wasm: bytes, cache_dir: Path) -> None:
    """A trap inside the step path's call raises and copies nothing, whatever its first
    argument (the check reads the trap pointer when the result slot kept that argument)."""
    for address in (U32_MASK - 15, 1 << 31, 64 << 20):  # past the end of memory: a trap
        loaded = load_runtime(wasm_bytes=probe_wasm)
        ptr = loaded.func("probe_alloc")(64) & U32_MASK
        fill = loaded.func_copy("probe_fill", copy_from_status=0)
        dest = memoryview(bytearray(64))
        with pytest.raises(CoreTrap, match="out of bounds"):
            fill(loaded.source_for(ptr, 64), dest, address, 64, 7)
        assert dest == bytes(64)
        assert loaded.poisoned


def test_wasmtime_rejects_bad_options(probe_wasm: bytes, cache_dir: Path) -> None:
    with pytest.raises(ValueError, match="memory_limit_bytes"):
        load_runtime(wasm_bytes=probe_wasm, memory_limit_bytes=0)
    with pytest.raises(ValueError, match="fuel"):
        load_runtime(wasm_bytes=probe_wasm, fuel_per_call=0)
    with pytest.raises(ValueError, match="deadline"):
        load_runtime(wasm_bytes=probe_wasm, epoch_deadline_s=0)
    with pytest.raises(TokensieveError, match="invalid"):
        load_runtime(wasm_bytes=b"\0asm\x01\0\0\0garbage")


# --- wasmtime: module caches --------------------------------------------------------


def test_wasmtime_module_shared_in_process(probe_wasm: bytes, cache_dir: Path) -> None:
    first = load_runtime(wasm_bytes=probe_wasm)
    second = load_runtime(wasm_bytes=probe_wasm)
    assert isinstance(first, WasmtimeRuntime) and isinstance(second, WasmtimeRuntime)
    assert second.module_source == "memory_cache"
    ptr = first.func("probe_alloc")(8) & U32_MASK
    assert second.func("probe_alloc")(8) & U32_MASK == ptr
    first.write(ptr, b"ABCDEFGH")
    assert second.read(ptr, 8) != b"ABCDEFGH"  # separate stores, separate memories


_LOAD_IN_SUBPROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tokensieve._core.runtime import load_runtime
rt = load_runtime(wasm_path=sys.argv[2])
print(json.dumps({"source": rt.module_source, "path": str(rt.cache_path),
                  "add": rt.func("probe_add")(2, 3)}))
"""


def _load_in_subprocess(probe_wasm_path: Path, cache_dir: Path) -> dict[str, Any]:
    """Load the probe in a fresh interpreter; return where its code came from."""
    completed = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_SUBPROCESS, str(PYBIND_DIR), str(probe_wasm_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TOKENSIEVE_CACHE_DIR=str(cache_dir)),
    )
    assert completed.returncode == 0, completed.stderr
    answer: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer["add"] == 5
    return answer


def test_wasmtime_disk_cache_reused_across_processes(
    probe_wasm_path: Path, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    first = _load_in_subprocess(probe_wasm_path, cache_dir)
    assert first["source"] == "compiled"
    cache_file = Path(first["path"])
    assert cache_file.is_file() and cache_file.is_relative_to(cache_dir)
    assert [p.name for p in cache_file.parent.iterdir()] == [cache_file.name]  # no temp left
    second = _load_in_subprocess(probe_wasm_path, cache_dir)
    assert second == first | {"source": "disk_cache"}


@pytest.mark.parametrize(
    "damage",
    ["truncate", "flip_byte", "garbage", "empty"],
)
def test_wasmtime_damaged_cache_entry_is_rebuilt(
    probe_wasm_path: Path, tmp_path: Path, damage: str
) -> None:
    cache_dir = tmp_path / "cache"
    cache_file = Path(_load_in_subprocess(probe_wasm_path, cache_dir)["path"])
    blob = cache_file.read_bytes()
    damaged = {
        "truncate": blob[: len(blob) // 2],
        "flip_byte": blob[:-100] + bytes([blob[-100] ^ 0xFF]) + blob[-99:],
        "garbage": os.urandom(len(blob)),
        "empty": b"",
    }[damage]
    cache_file.write_bytes(damaged)
    assert _load_in_subprocess(probe_wasm_path, cache_dir)["source"] == "compiled"
    assert cache_file.read_bytes() != damaged
    assert _load_in_subprocess(probe_wasm_path, cache_dir)["source"] == "disk_cache"


def test_wasmtime_disk_cache_can_be_disabled(
    probe_wasm: bytes, cache_dir: Path
) -> None:
    loaded = load_runtime(wasm_bytes=probe_wasm, disk_cache=False)
    assert isinstance(loaded, WasmtimeRuntime)
    assert loaded.cache_path is None
    assert not cache_dir.exists()


def test_wasmtime_cache_key_covers_engine_options() -> None:
    plain = _wasmtime._EngineOptions(fuel=False, epoch=False)
    fueled = _wasmtime._EngineOptions(fuel=True, epoch=False)
    assert _wasmtime._module_key("ab", plain) != _wasmtime._module_key("ab", fueled)
    assert _wasmtime._module_key("ab", plain) != _wasmtime._module_key("cd", plain)
    assert "wasmtime=" in plain.fingerprint()
    moving = _wasmtime._EngineOptions(fuel=False, epoch=False, fixed=False)
    assert _wasmtime._module_key("ab", plain) != _wasmtime._module_key("ab", moving)


# --- load_runtime ------------------------------------------------------------------


def test_load_runtime_variant_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wasm_file_name("release") == "tokensieve.wasm"
    assert wasm_file_name("safe") == "tokensieve_safe.wasm"
    with pytest.raises(ValueError, match="variant='release'"):
        wasm_file_name("debug")
    monkeypatch.setenv(VARIANT_ENV_VAR, "debug")
    with pytest.raises(ValueError, match=VARIANT_ENV_VAR):
        read_wasm_bytes()


def test_load_runtime_missing_packaged_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokensieve._core import runtime as _runtime

    monkeypatch.setitem(_runtime._WASM_FILE_NAMES, "safe", "no_such_core.wasm")
    with pytest.raises(TokensieveError, match="missing from the installed package"):
        load_runtime("safe")


def test_load_runtime_source_arguments(probe_wasm_path: Path, cache_dir: Path) -> None:
    with pytest.raises(ValueError, match="either wasm_bytes= or wasm_path="):
        load_runtime(wasm_bytes=b"", wasm_path=probe_wasm_path)
    with pytest.raises(TokensieveError, match="check wasm_path"):
        load_runtime(wasm_path=probe_wasm_path.with_name("absent.wasm"))
    assert load_runtime(wasm_path=str(probe_wasm_path)).func("probe_add")(1, 1) == 2


# --- Pyodide --------------------------------------------------------------------------

_PYODIDE_PROBE = r"""
import array, sys
from tokensieve._errors import CoreTrap, TokensieveError
from tokensieve._core.runtime import load_runtime

MASK = 0xFFFF_FFFF
probe = open("/tmp/probe/probe.wasm", "rb").read()
out = {"platform": sys.platform, "wasmtime_imported": "wasmtime" in sys.modules}

def raises(call, *args):
    try:
        call(*args)
    except Exception as error:
        return [type(error).__name__, str(error)]
    return None

rt = load_runtime(wasm_bytes=probe)
out["name"] = rt.name
add, echo, high_bit = rt.func("probe_add"), rt.func("probe_echo"), rt.func("probe_high_bit")
out["add"] = [add(1, 2), add(-5, 3), add(2**31 - 1, 1), add(MASK, 0)]
out["echo"] = [echo(0xFFFF_FFF0), echo(-1) & MASK, high_bit(2**31), high_bit(2**31 - 1)]
out["bad_args"] = [raises(add, 2**32, 0), raises(add, 1), raises(rt.func, "nope"),
                   raises(rt.func, "__stack_pointer")]
out["size_matches"] = rt.func("probe_memory_size_bytes")() == rt.memory_size_bytes()

data = bytes(range(256)) * 4
ptr = rt.func("probe_alloc")(len(data)) & MASK
sums = []
for payload in (data, bytearray(data), memoryview(data)):
    rt.write(ptr, b"\0" * len(data))
    rt.write(ptr, payload)
    sums.append(rt.func("probe_sum")(ptr, len(data)))
out["sums"] = sums
out["read_back"] = rt.read(ptr, len(data)) == data
rt.write(ptr, array.array("i", [1, -1, 70000, 2**31 - 1]))
out["ints"] = [rt.read_i32(ptr + 4), rt.read_u32(ptr + 4), rt.read_u32(ptr + 8)]
rt.func("probe_fill")(ptr, 64, 0xAB)
target = bytearray(64)
rt.read_into(ptr, memoryview(target))
words = array.array("I", [0] * 16)
rt.read_into(ptr, memoryview(words))
out["read_into"] = [target == b"\xab" * 64, list(words) == [0xABABABAB] * 16]
size = rt.memory_size_bytes()
out["bounds"] = [raises(rt.read, size - 4, 8), raises(rt.write, size - 1, b"ab"),
                 len(rt.read(size, 0))]

pages = size // 65536
out["grow"] = rt.func("probe_grow")(2**31 // 65536 + 1 - pages) == pages
high = 2**31 + 4096
rt.func("probe_fill")(high, 16, 7)
out["high"] = [rt.read(high, 16) == b"\x07" * 16, rt.read(high - 2**32, 16) == b"\x07" * 16]
out["poisoned_before"] = rt.poisoned

out["trap"] = raises(rt.func("probe_trap"))
out["poisoned_after"] = rt.poisoned
out["after_trap"] = raises(add, 1, 2)
fresh = load_runtime(wasm_bytes=probe)
out["oob"] = raises(fresh.func("probe_out_of_bounds"))
out["fresh_add"] = load_runtime(wasm_bytes=probe).func("probe_add")(20, 22)
out["wasmtime_only"] = [raises(lambda: load_runtime(wasm_bytes=probe, fuel_per_call=10)),
                        raises(lambda: load_runtime(wasm_bytes=probe, memory_limit_bytes=10))]
RESULT = out
"""


@pytest.fixture(scope="module")
def pyodide_probe(pyodide_run: Callable[..., Any], probe_wasm: bytes) -> dict[str, Any]:
    """Run the probe checks once inside Pyodide; return what they found."""
    start = time.perf_counter()
    result: dict[str, Any] = pyodide_run(
        _PYODIDE_PROBE, files={"/tmp/probe/probe.wasm": probe_wasm}
    )
    result["elapsed_s"] = time.perf_counter() - start
    return result


def test_pyodide_backend_is_selected(pyodide_probe: dict[str, Any]) -> None:
    assert pyodide_probe["platform"] == "emscripten"
    assert pyodide_probe["name"] == "pyodide"
    assert not pyodide_probe["wasmtime_imported"]


def test_pyodide_results_and_arguments(pyodide_probe: dict[str, Any]) -> None:
    assert pyodide_probe["add"] == [3, -2, -(2**31), -1]
    assert pyodide_probe["echo"] == [-16, U32_MASK, 1, 0]
    assert pyodide_probe["size_matches"]
    overflow, arity, missing, not_function = pyodide_probe["bad_args"]
    assert overflow[0] == "OverflowError"
    assert arity[0] == "TypeError"
    assert missing[0] == not_function[0] == "TokensieveError"


def test_pyodide_memory_transfers(pyodide_probe: dict[str, Any]) -> None:
    assert pyodide_probe["sums"] == [sum(range(256)) * 4] * 3
    assert pyodide_probe["read_back"]
    assert pyodide_probe["ints"] == [-1, U32_MASK, 70000]
    assert pyodide_probe["read_into"] == [True, True]
    read_past, write_past, empty = pyodide_probe["bounds"]
    assert read_past[0] == write_past[0] == "IndexError"
    assert empty == 0


def test_pyodide_addresses_above_2_gib(pyodide_probe: dict[str, Any]) -> None:
    assert pyodide_probe["grow"]
    assert pyodide_probe["high"] == [True, True]


def test_pyodide_trap_raises_core_trap_and_poisons(
    pyodide_probe: dict[str, Any],
) -> None:
    assert not pyodide_probe["poisoned_before"]
    kind, message = pyodide_probe["trap"]
    assert kind == "CoreTrap" and "unreachable" in message
    assert pyodide_probe["poisoned_after"]
    kind, message = pyodide_probe["after_trap"]
    assert kind == "CoreTrap" and "poisoned" in message
    kind, message = pyodide_probe["oob"]
    assert kind == "CoreTrap" and "out of bounds" in message
    assert pyodide_probe["fresh_add"] == 42


def test_pyodide_rejects_wasmtime_only_options(pyodide_probe: dict[str, Any]) -> None:
    for kind, message in pyodide_probe["wasmtime_only"]:
        assert kind == "ValueError" and "wasmtime backend" in message


def test_pyodide_run_time(
    pyodide_probe: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Print how long one Pyodide job takes (reported, not asserted)."""
    with capsys.disabled():
        print(f"\n[runtime] Pyodide probe job: {pyodide_probe['elapsed_s']:.1f} s")
