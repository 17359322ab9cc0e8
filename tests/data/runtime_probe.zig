//! runtime_probe: a tiny freestanding module that exercises the runtime layer only.
//!
//! `tests/test_runtime.py` compiles it with the same flags as the real core
//! (wasm32-freestanding, no imports, ReleaseSafe, SIMD128) and checks that both
//! backends (wasmtime and Pyodide) pass integers, move bytes and report traps
//! identically. It knows nothing about grammars or tokens: every export is a
//! one-line probe of one property of the boundary.
//!
//! Invariants: every export takes and returns only 32-bit integers; pointers
//! cross as `u32` (the host sees them as i32 and must convert); the only
//! allocator is `std.heap.wasm_allocator`, so running past the host's memory
//! cap shows up as `error.OutOfMemory` (returned as 0), never as a trap.

const std = @import("std");

const page_size_bytes: u32 = 65536;

/// Wrapping add: checks that signed results come back sign-extended.
export fn probe_add(a: i32, b: i32) i32 {
    return a +% b;
}

/// Returns its argument unchanged: checks the u32 <-> i32 crossing both ways.
export fn probe_echo(value: u32) u32 {
    return value;
}

/// Returns the top bit of a u32 argument: 1 only if 2**31..2**32-1 arrived intact.
export fn probe_high_bit(value: u32) u32 {
    return value >> 31;
}

/// Allocates `size_bytes` bytes; returns the address, or 0 when memory runs out.
export fn probe_alloc(size_bytes: u32) u32 {
    const bytes = std.heap.wasm_allocator.alloc(u8, size_bytes) catch return 0;
    return @intFromPtr(bytes.ptr);
}

/// Sets `len` bytes at `ptr` to `byte`; returns `len`.
export fn probe_fill(ptr: u32, len: u32, byte: u32) u32 {
    const dest: [*]u8 = @ptrFromInt(ptr);
    @memset(dest[0..len], @truncate(byte));
    return len;
}

/// Sums `len` bytes at `ptr` (wrapping): checks what the host wrote.
export fn probe_sum(ptr: u32, len: u32) u32 {
    const source: [*]const u8 = @ptrFromInt(ptr);
    var sum: u32 = 0;
    for (source[0..len]) |byte| sum +%= byte;
    return sum;
}

/// Traps with `unreachable` (the way a failed safety check ends).
export fn probe_trap() i32 {
    @trap();
}

/// Loads from the last bytes of the 4 GiB address space: an out-of-bounds trap.
export fn probe_out_of_bounds() u32 {
    const far: *volatile u32 = @ptrFromInt(0xFFFF_FFF0);
    return far.*;
}

/// Grows linear memory by `pages`; returns the old size in pages, or -1 if refused.
export fn probe_grow(pages: u32) i32 {
    const old_size_pages: isize = @wasmMemoryGrow(0, pages);
    return @intCast(old_size_pages);
}

/// Current linear memory size in bytes (wraps to 0 at exactly 4 GiB).
export fn probe_memory_size_bytes() u32 {
    return @truncate(@wasmMemorySize(0) *% page_size_bytes);
}

/// Spins `iterations` times: lets fuel and epoch deadlines interrupt a long call.
export fn probe_spin(iterations: u32) u32 {
    var counter: u32 = 0;
    var i: u32 = 0;
    while (i < iterations) : (i += 1) {
        const volatile_counter: *volatile u32 = &counter;
        volatile_counter.* +%= i;
    }
    return counter;
}
