//! Handle tables: the opaque integers hosts hold for tokenizers, grammars and matchers.
//!
//! A handle is a positive i32: bits 0..19 are the slot index plus one, bits 20..30 the slot's
//! generation. Removing an object bumps its slot's generation, so a stale handle (freed, or
//! forged) no longer names a live object and every call can check it: `get` returns null
//! instead of a dangling pointer.
//!
//! Invariants:
//! - A handle value is issued at most once per table. A slot whose generation would wrap
//!   around is retired for good instead of reused, so a stale handle can never come to name a
//!   new object, however many objects come and go. The table therefore issues at most
//!   `slot_count_max * generation_count` handles (about 2^31) in its life; after that `add`
//!   fails with `LimitExceeded` and the host replaces the module instance.
//! - The free list can always take every slot: its capacity is grown together with `slots`,
//!   before a slot is appended, so `remove` never allocates and never fails. (It once reserved
//!   room for one more entry per `add` only; freeing thousands of objects then wrote past the
//!   free list and corrupted the allocator.)

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

pub const index_bits = 20;
pub const generation_bits = 11;
/// Slots a table may hold (index 0 .. slot_count_max - 1; the handle stores index + 1).
pub const slot_count_max: u32 = (1 << index_bits) - 1;
/// Generations a slot goes through before it is retired.
pub const generation_count: u32 = 1 << generation_bits;

comptime {
    assert(index_bits + generation_bits == 31);
}

pub const Error = error{ OutOfMemory, LimitExceeded };

pub fn HandleTable(comptime T: type) type {
    return struct {
        const Self = @This();
        const Slot = struct { object: ?*T, generation: u32 };

        slots: std.ArrayList(Slot) = .empty,
        free: std.ArrayList(u32) = .empty,
        live_count: u32 = 0,

        pub fn deinit(self: *Self, gpa: Allocator) void {
            self.slots.deinit(gpa);
            self.free.deinit(gpa);
            self.* = undefined;
        }

        /// Registers `object`; returns its handle.
        pub fn add(self: *Self, gpa: Allocator, object: *T) Error!i32 {
            const index: u32 = if (self.free.pop()) |i| i else blk: {
                const count: u32 = @intCast(self.slots.items.len);
                if (count >= slot_count_max) return limit_error.exceeded(.handles);
                // Room for every slot on the free list first, so `remove` cannot fail.
                try self.free.ensureTotalCapacity(gpa, count + 1);
                try self.slots.append(gpa, .{ .object = null, .generation = 0 });
                break :blk count;
            };
            const slot = &self.slots.items[index];
            assert(slot.object == null);
            assert(slot.generation < generation_count);
            slot.object = object;
            self.live_count += 1;
            return @intCast((index + 1) | (slot.generation << index_bits));
        }

        /// The object `handle` names, or null when it is stale, forged or never issued.
        pub fn get(self: *const Self, handle: i32) ?*T {
            if (handle <= 0) return null;
            const h: u32 = @intCast(handle);
            const index = (h & ((1 << index_bits) - 1)) -% 1;
            if (index >= self.slots.items.len) return null;
            const slot = self.slots.items[index];
            if (slot.generation != h >> index_bits) return null;
            return slot.object;
        }

        /// Unregisters the object `handle` names and returns it (null when the handle is not
        /// live). The handle, and every earlier handle of its slot, stays invalid forever.
        pub fn remove(self: *Self, handle: i32) ?*T {
            const object = self.get(handle) orelse return null;
            const index = (@as(u32, @intCast(handle)) & ((1 << index_bits) - 1)) - 1;
            const slot = &self.slots.items[index];
            slot.object = null;
            slot.generation += 1;
            self.live_count -= 1;
            if (slot.generation < generation_count) {
                assert(self.free.items.len < self.free.capacity);
                self.free.appendAssumeCapacity(index);
            }
            return object;
        }
    };
}

const testing = std.testing;

test "thousands of objects freed at once leave the table consistent" {
    var values: [5000]u32 = undefined;
    var table: HandleTable(u32) = .{};
    defer table.deinit(testing.allocator);
    var handles: [5000]i32 = undefined;
    for (&values, &handles, 0..) |*v, *h, i| {
        v.* = @intCast(i);
        h.* = try table.add(testing.allocator, v);
    }
    for (handles) |h| try testing.expect(table.remove(h) != null);
    try testing.expectEqual(@as(u32, 0), table.live_count);
    for (handles) |h| try testing.expect(table.get(h) == null);
    for (&values, &handles) |*v, *h| h.* = try table.add(testing.allocator, v);
    for (&values, handles) |*v, h| try testing.expectEqual(v, table.get(h).?);
}

test "a stale handle never names a later object" {
    var a: u32 = 1;
    var table: HandleTable(u32) = .{};
    defer table.deinit(testing.allocator);
    var seen: std.AutoHashMapUnmanaged(i32, void) = .empty;
    defer seen.deinit(testing.allocator);
    // One slot reused until it retires: every handle is new, every old one stays dead.
    var last: i32 = 0;
    for (0..generation_count) |_| {
        const h = try table.add(testing.allocator, &a);
        try testing.expect(!seen.contains(h));
        try seen.put(testing.allocator, h, {});
        if (last != 0) try testing.expect(table.get(last) == null);
        try testing.expect(table.remove(h) == &a);
        last = h;
    }
    // The first slot is retired now: the next object gets a new slot.
    const h = try table.add(testing.allocator, &a);
    try testing.expect(!seen.contains(h));
    try testing.expectEqual(@as(usize, 2), table.slots.items.len);
}

test "forged handles are refused" {
    var a: u32 = 1;
    var table: HandleTable(u32) = .{};
    defer table.deinit(testing.allocator);
    const h = try table.add(testing.allocator, &a);
    try testing.expect(table.get(0) == null);
    try testing.expect(table.get(-1) == null);
    try testing.expect(table.get(h + 1) == null);
    try testing.expect(table.get(h | (1 << index_bits)) == null);
    try testing.expect(table.remove(h + 1) == null);
    try testing.expectEqual(&a, table.get(h).?);
}

test "out of memory while adding leaves the table usable" {
    var a: u32 = 1;
    var failing = testing.FailingAllocator.init(testing.allocator, .{ .fail_index = 0 });
    var table: HandleTable(u32) = .{};
    defer table.deinit(testing.allocator);
    try testing.expectError(error.OutOfMemory, table.add(failing.allocator(), &a));
    const h = try table.add(testing.allocator, &a);
    try testing.expectEqual(&a, table.remove(h).?);
}
