//! The module's allocator: size classes for small blocks, a buddy system for large ones.
//!
//! Linear memory only grows, so what matters in a long-lived instance (a server compiling
//! grammars for hours) is that freed memory serves later requests of *other* sizes. Zig's
//! `wasm_allocator` keeps every freed block in the list of its own size class forever: a
//! lexer table freed at 2 MiB can never serve a 4 MiB one, and 20,000 compile/drop cycles of
//! MaskBench grammars grew linear memory steadily while the live bytes stayed flat.
//!
//! Layout:
//! - Memory is managed in *pages* of 64 KiB (the wasm page). A large block is 2^k pages, aligned
//!   to 2^k pages; freeing it merges it with its buddy (the other half of the 2^(k+1) block)
//!   whenever that is free, so freed memory flows back into blocks of every size. A free block
//!   keeps its list links in its first bytes; `free_order[page]` marks the first page of every
//!   free block with its order plus one, which is what the merge checks.
//! - Small blocks (at most half a page) come in power-of-two slot sizes, carved from pages
//!   taken from the buddy system; freed slots go on their class's list (kept in the slot).
//! - Growing memory aligns the new block to its size: the gap below it becomes free blocks.
//!   Pages below the module's initial memory (data and stack) are never free, so a merge
//!   never reaches them.
//!
//! Single threaded, like the module. `memory.grow` failing (the host's memory cap) is
//! `null`, which callers see as `error.OutOfMemory`: no trap.

const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;
const Alignment = std.mem.Alignment;

pub const page_bytes: usize = 64 * 1024;
/// 2^order_max pages = 4 GiB, the whole wasm32 address space.
const order_max: u5 = 16;
const page_count_max: usize = 1 << order_max;
const nil: u32 = std.math.maxInt(u32);

/// Small slots: 2^small_class_min .. 2^(small_class_min + small_class_count - 1) bytes.
const small_class_min: u5 = 3;
const small_class_count: usize = 13; // 8 B .. 32 KiB

const FreeBlock = struct { next: u32, prev: u32 };

var free_heads: [order_max + 1]u32 = @splat(nil);
var free_order: [page_count_max]u8 = @splat(0);
/// First page not yet taken from `memory.grow`; 0 until the first growth.
var top: usize = 0;
var small_free: [small_class_count]usize = @splat(0);
/// Next unused slot of each small class in its current page, or 0 (take a new page).
var small_next: [small_class_count]usize = @splat(0);

pub const allocator: std.mem.Allocator = .{
    .ptr = undefined,
    .vtable = &.{ .alloc = alloc, .resize = resize, .remap = remap, .free = free },
};

fn blockAt(page: usize) *FreeBlock {
    return @ptrFromInt(page * page_bytes);
}

fn pushFree(page: usize, order: u5) void {
    const head = free_heads[order];
    blockAt(page).* = .{ .next = head, .prev = nil };
    if (head != nil) blockAt(head).prev = @intCast(page);
    free_heads[order] = @intCast(page);
    free_order[page] = @as(u8, order) + 1;
}

fn unlinkFree(page: usize, order: u5) void {
    assert(free_order[page] == @as(u8, order) + 1);
    const block = blockAt(page).*;
    if (block.prev != nil) blockAt(block.prev).next = block.next else free_heads[order] = block.next;
    if (block.next != nil) blockAt(block.next).prev = block.prev;
    free_order[page] = 0;
}

/// Frees 2^order pages at `page`, merging with free buddies.
fn freePages(page_in: usize, order_in: u5) void {
    var page = page_in;
    var order = order_in;
    while (order < order_max) {
        const buddy = page ^ (@as(usize, 1) << order);
        if (buddy >= top or free_order[buddy] != @as(u8, order) + 1) break;
        unlinkFree(buddy, order);
        page = @min(page, buddy);
        order += 1;
    }
    pushFree(page, order);
}

fn growPages(count: usize) bool {
    if (builtin.cpu.arch.isWasm()) {
        const old = @wasmMemoryGrow(0, count);
        if (old < 0) return false;
        assert(@as(usize, @intCast(old)) == top);
        return true;
    }
    return false;
}

/// 2^order pages, aligned to their size; null when memory cannot grow.
fn allocPages(order: u5) ?usize {
    var found = order;
    while (found <= order_max and free_heads[found] == nil) found += 1;
    if (found <= order_max) {
        const page: usize = free_heads[found];
        unlinkFree(page, found);
        while (found > order) {
            found -= 1;
            pushFree(page + (@as(usize, 1) << found), found);
        }
        return page;
    }
    if (top == 0) top = if (builtin.cpu.arch.isWasm()) @wasmMemorySize(0) else return null;
    const size = @as(usize, 1) << order;
    if (top + size > page_count_max) return null;
    // Fill the gap up to the block's alignment with free blocks, largest aligned first.
    const start = std.mem.alignForward(usize, top, size);
    if (start + size > page_count_max) return null;
    if (!growPages(start + size - top)) return null;
    while (top < start) {
        var o: u5 = @intCast(@min(@ctz(top), order_max));
        while (top + (@as(usize, 1) << o) > start) o -= 1;
        const page = top;
        top += @as(usize, 1) << o;
        freePages(page, o);
    }
    top = start + size;
    return start;
}

fn pageOrder(len: usize) ?u5 {
    const pages = std.math.divCeil(usize, len, page_bytes) catch unreachable;
    const rounded = std.math.ceilPowerOfTwo(usize, pages) catch return null;
    const order = std.math.log2_int(usize, rounded);
    return if (order <= order_max) @intCast(order) else null;
}

/// The small class of a request, or null when it takes whole pages.
fn smallClass(len: usize, alignment: Alignment) ?usize {
    const size = @max(len, alignment.toByteUnits(), @as(usize, 1) << small_class_min);
    if (size > page_bytes / 2) return null;
    const rounded = std.math.ceilPowerOfTwoAssert(usize, size);
    return std.math.log2_int(usize, rounded) - small_class_min;
}

fn alloc(_: *anyopaque, len: usize, alignment: Alignment, _: usize) ?[*]u8 {
    if (smallClass(len, alignment)) |class| {
        const slot_bytes = @as(usize, 1) << @intCast(class + small_class_min);
        if (small_free[class] != 0) {
            const addr = small_free[class];
            small_free[class] = @as(*usize, @ptrFromInt(addr)).*;
            return @ptrFromInt(addr);
        }
        var addr = small_next[class];
        if (addr == 0) addr = page_bytes * (allocPages(0) orelse return null);
        const next = addr + slot_bytes;
        small_next[class] = if (next % page_bytes == 0) 0 else next;
        return @ptrFromInt(addr);
    }
    if (alignment.toByteUnits() > page_bytes) return null;
    const order = pageOrder(len) orelse return null;
    return @ptrFromInt(page_bytes * (allocPages(order) orelse return null));
}

fn sameBlock(old_len: usize, new_len: usize, alignment: Alignment) bool {
    const old_class = smallClass(old_len, alignment);
    const new_class = smallClass(new_len, alignment);
    if (old_class != null or new_class != null) return old_class == new_class;
    const new_order = pageOrder(new_len) orelse return false;
    return pageOrder(old_len).? == new_order;
}

fn resize(_: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, _: usize) bool {
    return sameBlock(memory.len, new_len, alignment);
}

fn remap(_: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, _: usize) ?[*]u8 {
    return if (sameBlock(memory.len, new_len, alignment)) memory.ptr else null;
}

fn free(_: *anyopaque, memory: []u8, alignment: Alignment, _: usize) void {
    const addr = @intFromPtr(memory.ptr);
    if (smallClass(memory.len, alignment)) |class| {
        @as(*usize, @ptrFromInt(addr)).* = small_free[class];
        small_free[class] = addr;
        return;
    }
    assert(addr % page_bytes == 0);
    freePages(addr / page_bytes, pageOrder(memory.len).?);
}
