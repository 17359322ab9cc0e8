//! Regular expressions over bytes as hash-consed terms, with Brzozowski derivatives.
//!
//! Every expression lives once in an `ExprSet`: a node is a short run of `u32` words in one arena
//! (`words`), and a hash table maps the content of a run to its `ExprId`. Structural equality is
//! therefore id equality, which is what makes lazily built DFA states comparable in O(1).
//!
//! Terms are kept in a normal form by the smart constructors (`concat`, `alt`, `repeat`):
//! - `nothing` (the empty language, ∅) absorbs concatenation and vanishes from alternation;
//! - `epsilon` is the unit of concatenation; concatenation is right-nested;
//! - alternation is flattened, its members sorted and deduplicated, and all of its byte-set
//!   members merged into one set (associativity, commutativity, idempotence).
//! With these laws the derivatives of an expression are finitely many up to the normal form
//! (Brzozowski 1964; Owens, Reppy, Turon 2009), so the lazily built DFA is finite.
//!
//! Because there is no intersection or complement yet, an expression denotes the empty language
//! exactly when it is the `nothing` term: every constructor that could produce an empty language
//! from non-empty parts returns `nothing` instead. The lexer relies on this ("dead state" is one
//! comparison). Adding `and`/`not` later needs an emptiness check on top.
//!
//! Work is bounded: every constructor call spends one unit of `fuel`, and the term count is capped
//! by `expr_count_max`; running out is `error.LimitExceeded`, never a hang.

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

pub const ExprId = enum(u32) {
    nothing = 0,
    epsilon = 1,
    _,

    pub fn index(self: ExprId) u32 {
        return @intFromEnum(self);
    }
};

pub const repeat_unbounded: u32 = std.math.maxInt(u32);

pub const Tag = enum(u8) {
    nothing,
    epsilon,
    /// A set of bytes: eight words of bitmap follow.
    byte_set,
    /// `head` then `tail`; `head` is never itself a concatenation (right-nested).
    concat,
    /// Two or more members, sorted by id, no duplicates, at most one byte set.
    alt,
    /// `child`, `min`, `max` (`repeat_unbounded` for no upper bound).
    repeat,
    /// Intersection of two or more members, sorted, no duplicates.
    and_,
    /// Complement of `child` (all byte strings it does not match).
    not_,
};

const flag_nullable: u32 = 1 << 8;
/// Set on terms that contain an intersection or a complement: for those, "denotes the empty
/// language" is no longer "is `nothing`", and `isEmpty` must search.
const flag_boolean: u32 = 1 << 9;

pub const ByteSet = struct {
    bits: [8]u32 = @splat(0),

    pub fn contains(self: *const ByteSet, byte: u8) bool {
        return (self.bits[byte >> 5] >> @intCast(byte & 31)) & 1 != 0;
    }

    pub fn add(self: *ByteSet, byte: u8) void {
        self.bits[byte >> 5] |= @as(u32, 1) << @intCast(byte & 31);
    }

    pub fn addRange(self: *ByteSet, lo: u8, hi: u8) void {
        assert(lo <= hi);
        var b: u32 = lo;
        while (b <= hi) : (b += 1) self.add(@intCast(b));
    }

    pub fn unionWith(self: *ByteSet, other: ByteSet) void {
        for (&self.bits, other.bits) |*a, b| a.* |= b;
    }

    pub fn isEmpty(self: ByteSet) bool {
        for (self.bits) |w| if (w != 0) return false;
        return true;
    }

    pub fn count(self: ByteSet) u32 {
        var n: u32 = 0;
        for (self.bits) |w| n += @popCount(w);
        return n;
    }
};

pub const Error = error{ LimitExceeded, OutOfMemory };

/// Recursion bound for `deriv`; deeper terms (thousands of nested optional parts) are refused.
pub const deriv_depth_max: u32 = 4_000;

/// Terms an emptiness search may visit before giving up with `error.LimitExceeded`.
pub const empty_search_visited_max: u32 = 20_000;

pub const Limits = struct {
    /// Distinct terms the set may hold (about 40 bytes each with the tables).
    expr_count_max: u32 = 2_000_000,
};

const Span = struct { start: u32, len: u32 };

/// Hash-table context: keys are ids, compared by the content of their runs in the arena.
const IdContext = struct {
    set: *const ExprSet,

    pub fn hash(self: IdContext, id: u32) u64 {
        return std.hash.Wyhash.hash(0, std.mem.sliceAsBytes(self.set.runOf(id)));
    }

    pub fn eql(self: IdContext, a: u32, b: u32) bool {
        return std.mem.eql(u32, self.set.runOf(a), self.set.runOf(b));
    }
};

/// Lookup context: a candidate run (not yet in the arena) against stored ids.
const RunContext = struct {
    set: *const ExprSet,

    pub fn hash(_: RunContext, run: []const u32) u64 {
        return std.hash.Wyhash.hash(0, std.mem.sliceAsBytes(run));
    }

    pub fn eql(self: RunContext, run: []const u32, b: u32) bool {
        return std.mem.eql(u32, run, self.set.runOf(b));
    }
};

pub const ExprSet = struct {
    gpa: Allocator,
    words: std.ArrayList(u32) = .empty,
    spans: std.ArrayList(Span) = .empty,
    table: std.HashMapUnmanaged(u32, void, IdContext, 80) = .empty,
    deriv_cache: std.AutoHashMapUnmanaged(u64, ExprId) = .empty,
    empty_cache: std.AutoHashMapUnmanaged(u32, bool) = .empty,
    scratch: std.ArrayList(u32) = .empty,
    /// Units of construction work left; `deriv` and the constructors spend it.
    fuel: u64 = std.math.maxInt(u64),
    limits: Limits = .{},
    /// Current recursion depth of `deriv` (nested nullable concatenations recurse).
    deriv_depth: u32 = 0,

    pub fn init(gpa: Allocator, limits: Limits) Error!ExprSet {
        var set: ExprSet = .{ .gpa = gpa, .limits = limits };
        errdefer set.deinit();
        const nothing = try set.intern(&.{@intFromEnum(Tag.nothing)});
        const epsilon = try set.intern(&.{@intFromEnum(Tag.epsilon) | flag_nullable});
        assert(nothing == .nothing and epsilon == .epsilon);
        return set;
    }

    pub fn deinit(self: *ExprSet) void {
        self.words.deinit(self.gpa);
        self.spans.deinit(self.gpa);
        self.table.deinit(self.gpa);
        self.deriv_cache.deinit(self.gpa);
        self.empty_cache.deinit(self.gpa);
        self.scratch.deinit(self.gpa);
        self.* = undefined;
    }

    pub fn count(self: *const ExprSet) u32 {
        return @intCast(self.spans.items.len);
    }

    fn runOf(self: *const ExprSet, id: u32) []const u32 {
        const span = self.spans.items[id];
        return self.words.items[span.start..][0..span.len];
    }

    pub fn tag(self: *const ExprSet, e: ExprId) Tag {
        return @enumFromInt(@as(u8, @truncate(self.runOf(e.index())[0])));
    }

    pub fn nullable(self: *const ExprSet, e: ExprId) bool {
        return self.runOf(e.index())[0] & flag_nullable != 0;
    }

    /// Contains an intersection or complement (emptiness needs `isEmpty`).
    pub fn isBoolean(self: *const ExprSet, e: ExprId) bool {
        return self.runOf(e.index())[0] & flag_boolean != 0;
    }

    fn booleanFlag(self: *const ExprSet, e: ExprId) u32 {
        return self.runOf(e.index())[0] & flag_boolean;
    }

    /// The arguments of a node (the words after its header).
    pub fn args(self: *const ExprSet, e: ExprId) []const u32 {
        return self.runOf(e.index())[1..];
    }

    pub fn byteSetOf(self: *const ExprSet, e: ExprId) ByteSet {
        assert(self.tag(e) == .byte_set);
        var set: ByteSet = .{};
        @memcpy(&set.bits, self.args(e)[0..8]);
        return set;
    }

    fn spend(self: *ExprSet) Error!void {
        if (self.fuel == 0) return limit_error.exceeded(.step_fuel);
        self.fuel -= 1;
    }

    fn intern(self: *ExprSet, run: []const u32) Error!ExprId {
        const gop = try self.table.getOrPutContextAdapted(
            self.gpa,
            run,
            RunContext{ .set = self },
            IdContext{ .set = self },
        );
        if (gop.found_existing) return @enumFromInt(gop.key_ptr.*);
        if (self.spans.items.len >= self.limits.expr_count_max) {
            self.table.removeByPtr(gop.key_ptr);
            return limit_error.exceeded(.expressions);
        }
        const id: u32 = @intCast(self.spans.items.len);
        const start: u32 = @intCast(self.words.items.len);
        self.words.appendSlice(self.gpa, run) catch |err| {
            self.table.removeByPtr(gop.key_ptr);
            return err;
        };
        self.spans.append(self.gpa, .{ .start = start, .len = @intCast(run.len) }) catch |err| {
            self.words.shrinkRetainingCapacity(start);
            self.table.removeByPtr(gop.key_ptr);
            return err;
        };
        gop.key_ptr.* = id;
        return @enumFromInt(id);
    }

    pub fn byteSet(self: *ExprSet, set: ByteSet) Error!ExprId {
        try self.spend();
        if (set.isEmpty()) return .nothing;
        var run: [9]u32 = undefined;
        run[0] = @intFromEnum(Tag.byte_set);
        @memcpy(run[1..9], &set.bits);
        return self.intern(&run);
    }

    pub fn byte(self: *ExprSet, b: u8) Error!ExprId {
        var set: ByteSet = .{};
        set.add(b);
        return self.byteSet(set);
    }

    /// The literal byte string `bytes`.
    pub fn literal(self: *ExprSet, bytes: []const u8) Error!ExprId {
        var result: ExprId = .epsilon;
        var i = bytes.len;
        while (i > 0) {
            i -= 1;
            result = try self.concat(try self.byte(bytes[i]), result);
        }
        return result;
    }

    pub fn concat(self: *ExprSet, head: ExprId, tail: ExprId) Error!ExprId {
        try self.spend();
        if (head == .nothing or tail == .nothing) return .nothing;
        if (head == .epsilon) return tail;
        if (tail == .epsilon) return head;
        if (self.tag(head) == .concat) {
            // Right-nest: (a b) c = a (b c). Bounded by the head's length.
            const a: ExprId = @enumFromInt(self.args(head)[0]);
            const b: ExprId = @enumFromInt(self.args(head)[1]);
            return self.concat(a, try self.concat(b, tail));
        }
        const flags = (if (self.nullable(head) and self.nullable(tail)) flag_nullable else 0) |
            self.booleanFlag(head) | self.booleanFlag(tail);
        return self.intern(&.{ @intFromEnum(Tag.concat) | flags, head.index(), tail.index() });
    }

    /// A concatenation of many parts, right-nested.
    pub fn concatAll(self: *ExprSet, parts: []const ExprId) Error!ExprId {
        var result: ExprId = .epsilon;
        var i = parts.len;
        while (i > 0) {
            i -= 1;
            result = try self.concat(parts[i], result);
        }
        return result;
    }

    pub fn alt2(self: *ExprSet, a: ExprId, b: ExprId) Error!ExprId {
        return self.alt(&.{ a, b });
    }

    /// The alternation of `members`, in normal form.
    pub fn alt(self: *ExprSet, members: []const ExprId) Error!ExprId {
        try self.spend();
        // Collect flattened members into scratch (after a header slot), merging byte sets.
        const base = self.scratch.items.len;
        defer self.scratch.shrinkRetainingCapacity(base);
        try self.scratch.append(self.gpa, 0);
        var bytes: ByteSet = .{};
        var has_bytes = false;
        var nullable_any = false;
        for (members) |m| {
            switch (self.tag(m)) {
                .nothing => {},
                .byte_set => {
                    bytes.unionWith(self.byteSetOf(m));
                    has_bytes = true;
                },
                .alt => {
                    for (self.args(m)) |inner_raw| {
                        const inner: ExprId = @enumFromInt(inner_raw);
                        if (self.tag(inner) == .byte_set) {
                            bytes.unionWith(self.byteSetOf(inner));
                            has_bytes = true;
                        } else {
                            try self.scratch.append(self.gpa, inner_raw);
                        }
                    }
                    nullable_any = nullable_any or self.nullable(m);
                },
                else => {
                    try self.scratch.append(self.gpa, m.index());
                    nullable_any = nullable_any or self.nullable(m);
                },
            }
        }
        if (has_bytes) {
            const set_id = try self.byteSet(bytes);
            try self.scratch.append(self.gpa, set_id.index());
        }
        const list = self.scratch.items[base + 1 ..];
        std.mem.sort(u32, list, {}, std.sort.asc(u32));
        // Deduplicate in place.
        var unique: usize = 0;
        for (list, 0..) |item, i| {
            if (i == 0 or item != list[unique - 1]) {
                list[unique] = item;
                unique += 1;
            }
        }
        if (unique == 0) return .nothing;
        if (unique == 1) return @enumFromInt(list[0]);
        var boolean: u32 = 0;
        for (self.scratch.items[base + 1 .. base + 1 + unique]) |m| boolean |= self.booleanFlag(@enumFromInt(m));
        self.scratch.items[base] = @intFromEnum(Tag.alt) | (if (nullable_any) flag_nullable else 0) | boolean;
        // `intern` copies the run, and may not grow `scratch` itself.
        return self.intern(self.scratch.items[base .. base + 1 + unique]);
    }

    pub fn repeat(self: *ExprSet, child: ExprId, min: u32, max: u32) Error!ExprId {
        try self.spend();
        assert(min <= max);
        if (max == 0) return .epsilon;
        if (child == .nothing) return if (min == 0) .epsilon else .nothing;
        if (child == .epsilon) return .epsilon;
        if (min == 1 and max == 1) return child;
        if (self.tag(child) == .repeat) {
            // (x{0,∞}){m,n} = x{0,∞}; (x{a,∞}){m,∞} = x{a*m,∞} when that does not overflow.
            const inner = self.args(child);
            if (inner[1] == 0 and inner[2] == repeat_unbounded) return child;
        }
        const flags = (if (min == 0 or self.nullable(child)) flag_nullable else 0) | self.booleanFlag(child);
        return self.intern(&.{ @intFromEnum(Tag.repeat) | flags, child.index(), min, max });
    }

    /// The intersection of `members`.
    pub fn andAll(self: *ExprSet, members: []const ExprId) Error!ExprId {
        try self.spend();
        const base = self.scratch.items.len;
        defer self.scratch.shrinkRetainingCapacity(base);
        try self.scratch.append(self.gpa, 0);
        for (members) |m| {
            if (m == .nothing) return .nothing;
            if (self.isTop(m)) continue; // "any string" is the unit of intersection
            if (self.tag(m) == .and_) {
                try self.scratch.appendSlice(self.gpa, self.args(m));
            } else {
                try self.scratch.append(self.gpa, m.index());
            }
        }
        const list = self.scratch.items[base + 1 ..];
        std.mem.sort(u32, list, {}, std.sort.asc(u32));
        var unique: usize = 0;
        var all_nullable = true;
        for (list, 0..) |item, i| {
            if (i == 0 or item != list[unique - 1]) {
                list[unique] = item;
                unique += 1;
                all_nullable = all_nullable and self.nullable(@enumFromInt(item));
            }
        }
        if (unique == 0) return self.not(.nothing);
        if (unique == 1) return @enumFromInt(list[0]);
        self.scratch.items[base] = @intFromEnum(Tag.and_) | flag_boolean | (if (all_nullable) flag_nullable else 0);
        return self.intern(self.scratch.items[base .. base + 1 + unique]);
    }

    /// Is `e` the complement of ∅ (every byte string)?
    pub fn isTop(self: *const ExprSet, e: ExprId) bool {
        return self.tag(e) == .not_ and self.args(e)[0] == ExprId.nothing.index();
    }

    /// The complement of `child`.
    pub fn not(self: *ExprSet, child: ExprId) Error!ExprId {
        try self.spend();
        if (self.tag(child) == .not_) return @enumFromInt(self.args(child)[0]);
        const flags = flag_boolean | (if (self.nullable(child)) 0 else flag_nullable);
        return self.intern(&.{ @intFromEnum(Tag.not_) | flags, child.index() });
    }

    /// The derivative of `e` by `b`: the strings s such that `b s` matches `e`.
    pub fn deriv(self: *ExprSet, e: ExprId, b: u8) Error!ExprId {
        const key = (@as(u64, e.index()) << 8) | b;
        if (self.deriv_cache.get(key)) |hit| return hit;
        if (self.deriv_depth >= deriv_depth_max) return limit_error.exceeded(.derivative_depth);
        self.deriv_depth += 1;
        defer self.deriv_depth -= 1;
        const result = try self.derivUncached(e, b);
        try self.deriv_cache.put(self.gpa, key, result);
        return result;
    }

    fn derivUncached(self: *ExprSet, e: ExprId, b: u8) Error!ExprId {
        try self.spend();
        switch (self.tag(e)) {
            .nothing, .epsilon => return .nothing,
            .byte_set => {
                const set = self.byteSetOf(e);
                return if (set.contains(b)) .epsilon else .nothing;
            },
            .concat => {
                const head: ExprId = @enumFromInt(self.args(e)[0]);
                const tail: ExprId = @enumFromInt(self.args(e)[1]);
                const left = try self.concat(try self.deriv(head, b), tail);
                if (!self.nullable(head)) return left;
                return self.alt2(left, try self.deriv(tail, b));
            },
            .alt => return self.derivMembers(e, b, alt),
            .and_ => return self.derivMembers(e, b, andAll),
            .not_ => return self.not(try self.deriv(@enumFromInt(self.args(e)[0]), b)),
            .repeat => {
                const a = self.args(e);
                const child: ExprId = @enumFromInt(a[0]);
                const min = a[1];
                const max = a[2];
                const next_min = if (min == 0) 0 else min - 1;
                const next_max = if (max == repeat_unbounded) max else max - 1;
                const rest = try self.repeat(child, next_min, next_max);
                return self.concat(try self.deriv(child, b), rest);
            },
        }
    }

    /// `combine` of the derivatives of `e`'s members (for alternation and intersection).
    fn derivMembers(
        self: *ExprSet,
        e: ExprId,
        b: u8,
        comptime combine: fn (*ExprSet, []const ExprId) Error!ExprId,
    ) Error!ExprId {
        // Copy the members first: `deriv` may grow the arena and move `args`.
        const n = self.args(e).len;
        var small: [16]ExprId = undefined;
        const members = if (n <= small.len) small[0..n] else try self.gpa.alloc(ExprId, n);
        defer if (n > small.len) self.gpa.free(members);
        for (members, self.args(e)) |*dst, src| dst.* = @enumFromInt(src);
        for (members) |*m| m.* = try self.deriv(m.*, b);
        return combine(self, members);
    }

    /// Does `e` denote the empty language? Exact: a search over derivatives by one byte of each
    /// class in `representatives` for a nullable term, bounded by fuel and `visited_max`.
    pub fn isEmpty(self: *ExprSet, e: ExprId, representatives: []const u8) Error!bool {
        if (e == .nothing) return true;
        if (!self.isBoolean(e)) return false;
        if (self.empty_cache.get(e.index())) |hit| return hit;
        var queue: std.ArrayList(ExprId) = .empty;
        defer queue.deinit(self.gpa);
        var visited: std.AutoHashMapUnmanaged(u32, void) = .empty;
        defer visited.deinit(self.gpa);
        try queue.append(self.gpa, e);
        try visited.put(self.gpa, e.index(), {});
        var head: usize = 0;
        const non_empty = search: while (head < queue.items.len) : (head += 1) {
            const x = queue.items[head];
            if (self.nullable(x)) break :search true;
            if (self.empty_cache.get(x.index())) |empty| {
                if (!empty) break :search true;
                continue;
            }
            for (representatives) |b| {
                const y = try self.deriv(x, b);
                if (y == .nothing) continue;
                if (!self.isBoolean(y)) break :search true; // plain terms other than ∅ are non-empty
                if (visited.contains(y.index())) continue;
                if (visited.count() >= empty_search_visited_max) return limit_error.exceeded(.step_fuel);
                try visited.put(self.gpa, y.index(), {});
                try queue.append(self.gpa, y);
            }
        } else false;
        if (non_empty) {
            try self.empty_cache.put(self.gpa, e.index(), false);
        } else {
            // Nothing reachable is nullable: every visited term is empty.
            for (queue.items) |x| try self.empty_cache.put(self.gpa, x.index(), true);
        }
        return !non_empty;
    }

    /// Every byte set that occurs in the set, for alphabet compression.
    pub fn forEachByteSet(self: *const ExprSet, context: anytype, comptime visit: fn (@TypeOf(context), ByteSet) void) void {
        var id: u32 = 0;
        while (id < self.count()) : (id += 1) {
            const e: ExprId = @enumFromInt(id);
            if (self.tag(e) == .byte_set) visit(context, self.byteSetOf(e));
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

fn matches(set: *ExprSet, e: ExprId, input: []const u8) !bool {
    var cur = e;
    for (input) |b| cur = try set.deriv(cur, b);
    return set.nullable(cur);
}

test "smart constructors keep the normal form" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const a = try set.byte('a');
    const b = try set.byte('b');
    try std.testing.expectEqual(a, try set.byte('a'));
    try std.testing.expectEqual(ExprId.nothing, try set.concat(a, .nothing));
    try std.testing.expectEqual(a, try set.concat(.epsilon, a));
    const ab = try set.alt2(a, b);
    try std.testing.expectEqual(ab, try set.alt2(b, a));
    try std.testing.expectEqual(ab, try set.alt(&.{ a, b, a, .nothing }));
    try std.testing.expectEqual(Tag.byte_set, set.tag(ab));
    const abc = try set.literal("abc");
    const left = try set.concat(try set.concat(a, b), try set.byte('c'));
    try std.testing.expectEqual(abc, left);
}

test "derivatives recognise simple languages" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var digits: ByteSet = .{};
    digits.addRange('0', '9');
    const d = try set.byteSet(digits);
    const num = try set.repeat(d, 1, 3);
    try std.testing.expect(try matches(&set, num, "7"));
    try std.testing.expect(try matches(&set, num, "123"));
    try std.testing.expect(!try matches(&set, num, "1234"));
    try std.testing.expect(!try matches(&set, num, ""));
    const star = try set.repeat(try set.byte('a'), 0, repeat_unbounded);
    const e = try set.concat(star, try set.byte('b'));
    try std.testing.expect(try matches(&set, e, "aaab"));
    try std.testing.expect(!try matches(&set, e, "aaa"));
    // The derivative of a* b by a is the same term: the DFA is finite.
    try std.testing.expectEqual(e, try set.deriv(e, 'a'));
}

test "intersection and complement, with an exact emptiness check" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var lower: ByteSet = .{};
    lower.addRange('a', 'z');
    const word = try set.repeat(try set.byteSet(lower), 1, repeat_unbounded);
    const not_cat = try set.not(try set.literal("cat"));
    const e = try set.andAll(&.{ word, not_cat });
    try std.testing.expect(try matches(&set, e, "dog"));
    try std.testing.expect(try matches(&set, e, "cats"));
    try std.testing.expect(!try matches(&set, e, "cat"));
    try std.testing.expect(!try matches(&set, e, ""));
    var reps: [256]u8 = undefined;
    for (&reps, 0..) |*r, i| r.* = @intCast(i);
    try std.testing.expect(!try set.isEmpty(e, &reps));
    // [a-z]{2} ∩ ¬[a-z]+ is empty, though not syntactically ∅.
    const two = try set.repeat(try set.byteSet(lower), 2, 2);
    const empty = try set.andAll(&.{ two, try set.not(word) });
    try std.testing.expect(empty != .nothing);
    try std.testing.expect(try set.isEmpty(empty, &reps));
    try std.testing.expect(try set.isEmpty(try set.deriv(empty, 'q'), &reps));
}

test "running out of fuel is an error, not a hang" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    set.fuel = 10;
    try std.testing.expectError(error.LimitExceeded, set.literal("abcdefghijklmnop"));
}
