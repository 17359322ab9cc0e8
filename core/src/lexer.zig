//! The lexer: a DFA over bytes, built lazily from the lexemes' regular expressions.
//!
//! A DFA state is a set of (lexeme index, expression) pairs — the lexemes still possible and
//! what each still has to match — kept sorted and hash-consed, so equal sets are equal ids. The
//! transition on byte b replaces each expression by its derivative and drops the pairs that
//! became `nothing`; the empty set is the dead state.
//!
//! Transitions are cached in one flat table, `trans`, with a row per state and a column per byte
//! class. State ids are *pre-multiplied*: a `StateId` is the offset of its row, so the hot step
//! is `trans[state.offset() + class_of[byte]]` — two loads, no multiply (`stateIndex` recovers
//! the state's index for per-state tables). Row 0 is the dead state (all its entries are 0),
//! so "dead" is the comparison `== .dead`. Entries not computed yet hold `.missing`; the slow
//! path (`computeTransition`) fills them with derivatives, paid for with fuel.
//!
//! Work is charged to the expression set's fuel like the derivatives themselves: a transition
//! costs a unit plus one per pair it derives, and a new state one per pair it hashes plus a
//! quarter unit per byte class for its table row (measured: a new state of a 100-class lexer
//! costs about as much as 25 derivative units). Going over `state_count_max` is
//! `error.LimitExceeded` with `lexer_states` recorded (`limits.zig`).
//!
//! Byte classes (alphabet compression): bytes that every byte set of the grammar either contains
//! or excludes together behave identically in every derivative, so one column serves them all.
//! The partition is computed once when the lexer is built, from every byte set in the
//! expression set; derivatives only ever create unions of existing sets, which the partition
//! still respects.

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const ExprSet = regex.ExprSet;
const ExprId = regex.ExprId;

/// A DFA state, pre-multiplied: the offset of its row in `Lexer.trans` (`offset`), not its
/// index among the states (`Lexer.stateIndex`).
pub const StateId = enum(u32) {
    /// Row 0; every entry of its row is `dead` again.
    dead = 0,
    /// A `trans` entry not computed yet (never a state).
    missing = std.math.maxInt(u32),
    _,

    pub fn offset(self: StateId) u32 {
        return @backingInt(self);
    }

    pub fn fromOffset(value: u32) StateId {
        return @fromBackingInt(value);
    }
};

/// Lexeme index of the marker pair that only start states carry (see `startState`).
pub const start_marker: u32 = std.math.maxInt(u32);

pub const Limits = struct {
    /// DFA states; each costs a table row (4 bytes per byte class) plus its pair list.
    state_count_max: u32 = 100_000,
};

pub const Error = regex.Error;

const Span = struct { start: u32, len: u32 };

pub const StateInfo = struct {
    /// Lowest lexeme index whose expression is nullable here, or `none`.
    accepting_lexeme: u32,
    /// The lexemes that match here: `accepting_lexemes[accepting_start..][0..accepting_count]`.
    accepting_start: u32 = 0,
    accepting_count: u32 = 0,
    /// Some lazy lexeme matches here: the lexeme ends now, whatever could follow.
    lazy_accepting: bool = false,
    /// Every byte leads to the dead state (computed on demand by `isFinal`).
    final: enum(u2) { unknown, yes, no } = .unknown,

    pub const none = std.math.maxInt(u32);
};

const PairsContext = struct {
    lexer: *const Lexer,
    pub fn hash(self: PairsContext, id: u32) u64 {
        return regex.hashWords(self.lexer.pairsOf(id));
    }
    pub fn eql(self: PairsContext, a: u32, b: u32) bool {
        return regex.wordsEqual(self.lexer.pairsOf(a), self.lexer.pairsOf(b));
    }
};

const PairsLookup = struct {
    lexer: *const Lexer,
    pub fn hash(_: PairsLookup, pairs: []const u32) u64 {
        return regex.hashWords(pairs);
    }
    pub fn eql(self: PairsLookup, pairs: []const u32, b: u32) bool {
        return regex.wordsEqual(pairs, self.lexer.pairsOf(b));
    }
};

pub const Lexer = struct {
    gpa: Allocator,
    exprs: *ExprSet,
    lexemes: []const ExprId,
    class_of: [256]u8,
    class_count: u32,
    /// ceil(2^32 / class_count): `stateIndex` multiplies by it instead of dividing, since the
    /// walk asks "is this state accepting?" for every trie node it enters and a division costs
    /// tens of cycles. Exact for every multiple of `class_count` below 2^32 (see `stateIndex`).
    class_reciprocal: u64 = 0,
    /// A byte of each class, to take derivatives with.
    class_representative: [256]u8,
    /// How many bytes each class has (forced bytes need a class of exactly one byte).
    class_size: [256]u16,
    trans: std.ArrayList(StateId) = .empty,
    pair_words: std.ArrayList(u32) = .empty,
    pair_spans: std.ArrayList(Span) = .empty,
    state_table: std.HashMapUnmanaged(u32, void, PairsContext, 80) = .empty,
    info: std.ArrayList(StateInfo) = .empty,
    accepting_lexemes: std.ArrayList(u32) = .empty,
    /// Per lexeme: ends at its shortest match. Empty slice: no lazy lexemes.
    lazy: []const bool = &.{},
    limits: Limits,

    /// Builds a lexer over `lexemes` (ids in `exprs`, which must outlive the lexer).
    pub fn init(gpa: Allocator, exprs: *ExprSet, lexemes: []const ExprId, limits: Limits) Error!Lexer {
        return initWithLazy(gpa, exprs, lexemes, &.{}, limits);
    }

    /// Like `init`, with `lazy[i]` telling whether lexeme i ends at its shortest match.
    pub fn initWithLazy(gpa: Allocator, exprs: *ExprSet, lexemes: []const ExprId, lazy: []const bool, limits: Limits) Error!Lexer {
        assert(lazy.len == 0 or lazy.len == lexemes.len);
        var lexer: Lexer = .{
            .gpa = gpa,
            .exprs = exprs,
            .lexemes = lexemes,
            .lazy = lazy,
            .class_of = undefined,
            .class_count = 0,
            .class_representative = undefined,
            .class_size = @splat(0),
            .limits = limits,
        };
        errdefer lexer.deinit();
        lexer.computeClasses();
        const dead_state = try lexer.internState(&.{});
        assert(dead_state == .dead);
        return lexer;
    }

    pub fn deinit(self: *Lexer) void {
        self.trans.deinit(self.gpa);
        self.pair_words.deinit(self.gpa);
        self.pair_spans.deinit(self.gpa);
        self.state_table.deinit(self.gpa);
        self.info.deinit(self.gpa);
        self.accepting_lexemes.deinit(self.gpa);
        self.* = undefined;
    }

    fn computeClasses(self: *Lexer) void {
        @memset(&self.class_of, 0);
        var count: u32 = 1;
        const Refiner = struct {
            lexer: *Lexer,
            count: *u32,
            fn visit(r: @This(), set: regex.ByteSet) void {
                // Split every class into its part inside `set` and its part outside.
                var remap: [256]u16 = @splat(0xFFFF);
                var new_count: u32 = 0;
                var b: u32 = 0;
                while (b < 256) : (b += 1) {
                    const inside: u32 = @intFromBool(set.contains(@intCast(b)));
                    const key = @as(u32, r.lexer.class_of[b]) * 2 + inside;
                    if (remap[key] == 0xFFFF) {
                        remap[key] = @intCast(new_count);
                        new_count += 1;
                    }
                    r.lexer.class_of[b] = @intCast(remap[key]);
                }
                r.count.* = new_count;
            }
        };
        self.exprs.forEachByteSet(Refiner{ .lexer = self, .count = &count }, Refiner.visit);
        self.class_count = count;
        self.class_reciprocal = ((@as(u64, 1) << 32) + count - 1) / count;
        var b: u32 = 256;
        while (b > 0) {
            b -= 1;
            const class = self.class_of[b];
            self.class_representative[class] = @intCast(b);
            self.class_size[class] += 1;
        }
        assert(self.class_count >= 1 and self.class_count <= 256);
    }

    fn pairsOf(self: *const Lexer, state_index: u32) []const u32 {
        const span = self.pair_spans.items[state_index];
        return self.pair_words.items[span.start..][0..span.len];
    }

    /// The (lexeme, expression) pairs of `state`, flattened; start states end with the marker
    /// pair (`start_marker`, nothing). Valid until the next state is added.
    pub fn statePairs(self: *const Lexer, state: StateId) []const u32 {
        return self.pairsOf(self.stateIndex(state));
    }

    pub fn stateIndex(self: *const Lexer, state: StateId) u32 {
        // state = k·c and c·r = 2^32 + e with 0 ≤ e < c, so state·r = k·2^32 + k·e, and
        // k·e < k·c = state < 2^32: the high word is exactly k.
        const index: u32 = @intCast((@as(u64, state.offset()) * self.class_reciprocal) >> 32);
        assert(index * self.class_count == state.offset());
        return index;
    }

    pub fn stateInfo(self: *const Lexer, state: StateId) StateInfo {
        return self.info.items[self.stateIndex(state)];
    }

    pub fn isAccepting(self: *const Lexer, state: StateId) bool {
        return self.stateInfo(state).accepting_lexeme != StateInfo.none;
    }

    /// Does every byte lead from `state` to the dead state? Then a lexeme matching here can
    /// only end here. Computes the state's missing transitions once.
    pub fn isFinal(self: *Lexer, state: StateId) Error!bool {
        const index = self.stateIndex(state);
        switch (self.info.items[index].final) {
            .yes => return true,
            .no => return false,
            .unknown => {},
        }
        var final = true;
        var class: u32 = 0;
        while (class < self.class_count) : (class += 1) {
            if (try self.next(state, self.class_representative[class]) != .dead) {
                final = false;
                break;
            }
        }
        self.info.items[index].final = if (final) .yes else .no;
        return final;
    }

    /// The lexemes that match in `state` (sorted by index).
    pub fn acceptingLexemes(self: *const Lexer, state: StateId) []const u32 {
        const info = self.stateInfo(state);
        return self.accepting_lexemes.items[info.accepting_start..][0..info.accepting_count];
    }

    pub fn stateCount(self: *const Lexer) u32 {
        return @intCast(self.pair_spans.items.len);
    }

    /// Interns a sorted pair list (lexeme, expr, lexeme, expr, …) as a state.
    fn internState(self: *Lexer, pairs: []const u32) Error!StateId {
        assert(pairs.len % 2 == 0);
        const gop = try self.state_table.getOrPutContextAdapted(
            self.gpa,
            pairs,
            PairsLookup{ .lexer = self },
            PairsContext{ .lexer = self },
        );
        if (gop.found_existing) return .fromOffset(gop.key_ptr.* * self.class_count);
        errdefer self.state_table.removeByPtr(gop.key_ptr);
        const index: u32 = @intCast(self.pair_spans.items.len);
        if (index >= self.limits.state_count_max) return limit_error.exceeded(.lexer_states);
        try self.exprs.spend(pairs.len + self.class_count / 4);
        var accepting: u32 = StateInfo.none;
        const accepting_start: u32 = @intCast(self.accepting_lexemes.items.len);
        var lazy_accepting = false;
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (self.exprs.nullable(@fromBackingInt(@intCast(pairs[i + 1])))) {
                accepting = @min(accepting, pairs[i]);
                try self.accepting_lexemes.append(self.gpa, pairs[i]);
                if (self.lazy.len > 0 and self.lazy[pairs[i]]) lazy_accepting = true;
            }
        }
        errdefer self.accepting_lexemes.shrinkRetainingCapacity(accepting_start);
        const accepting_count: u32 = @as(u32, @intCast(self.accepting_lexemes.items.len)) - accepting_start;
        if (self.trans.capacity - self.trans.items.len < self.class_count) {
            // Growing the table copies it into new memory whose pages are touched for the
            // first time: about 0.6 ms per MB in wasmtime, one call paying for all the states
            // before it. Charged by the size copied, a unit per 16 entries (64 bytes), about
            // half the measured cost (all of it made a passing MaskBench schema run out), so
            // the call that grows a large table is bounded like other work: a table past about
            // 6.4 million entries (25 MB) cannot grow within one call's default fuel.
            try self.exprs.spend(self.trans.items.len / 16);
        }
        try self.trans.ensureUnusedCapacity(self.gpa, self.class_count);
        try self.info.ensureUnusedCapacity(self.gpa, 1);
        try self.pair_spans.ensureUnusedCapacity(self.gpa, 1);
        const start: u32 = @intCast(self.pair_words.items.len);
        try self.pair_words.appendSlice(self.gpa, pairs);
        self.pair_spans.appendAssumeCapacity(.{ .start = start, .len = @intCast(pairs.len) });
        self.info.appendAssumeCapacity(.{
            .accepting_lexeme = accepting,
            .accepting_start = accepting_start,
            .accepting_count = accepting_count,
            .lazy_accepting = lazy_accepting,
        });
        self.trans.appendNTimesAssumeCapacity(if (index == 0) .dead else .missing, self.class_count);
        gop.key_ptr.* = index;
        return .fromOffset(index * self.class_count);
    }

    /// The state in which every lexeme whose bit is set in `allowed` may start
    /// (`allowed == null`: all lexemes).
    pub fn startState(self: *Lexer, allowed: ?[]const bool) Error!StateId {
        var pairs: std.ArrayList(u32) = .empty;
        defer pairs.deinit(self.gpa);
        for (self.lexemes, 0..) |e, i| {
            if (allowed) |a| if (!a[i]) continue;
            if (try self.isDead(e)) continue;
            try pairs.appendSlice(self.gpa, &.{ @intCast(i), e.index() });
        }
        // The marker makes a start state differ from every state reached by reading bytes,
        // even when a lexeme's derivative equals itself (`[^"]*"` after `a`): "no lexeme in
        // progress" is then one comparison with the row's start state.
        if (pairs.items.len > 0) try pairs.appendSlice(self.gpa, &.{ start_marker, ExprId.nothing.index() });
        return self.internState(pairs.items);
    }

    /// `startState` for the lexemes listed in `allowed` (ascending, no repeats): the same
    /// state, at a cost in the list's length rather than the grammar's lexeme count.
    pub fn startStateOf(self: *Lexer, allowed: []const u32) Error!StateId {
        var pairs: std.ArrayList(u32) = .empty;
        defer pairs.deinit(self.gpa);
        for (allowed, 0..) |i, n| {
            assert(n == 0 or allowed[n - 1] < i);
            const e = self.lexemes[i];
            if (try self.isDead(e)) continue;
            try pairs.appendSlice(self.gpa, &.{ i, e.index() });
        }
        if (pairs.items.len > 0) try pairs.appendSlice(self.gpa, &.{ start_marker, ExprId.nothing.index() });
        return self.internState(pairs.items);
    }

    /// Can `e` match nothing more? One comparison for plain terms; a bounded search for terms
    /// with intersections or complements (see `ExprSet.isEmpty`).
    fn isDead(self: *Lexer, e: ExprId) Error!bool {
        if (e == .nothing) return true;
        if (!self.exprs.isBoolean(e)) return false;
        return self.exprs.isEmpty(e, self.class_representative[0..self.class_count]);
    }

    /// The state after `byte`, computing the transition if it is not cached.
    pub inline fn next(self: *Lexer, state: StateId, byte: u8) Error!StateId {
        const target = self.trans.items[state.offset() + self.class_of[byte]];
        if (target != .missing) return target;
        return self.computeTransition(state, self.class_of[byte]);
    }

    /// `state` without the lexemes whose bit in `keep` is clear (the dead state when none is
    /// left). Used at token boundaries to drop lexemes whose token budget is spent.
    pub fn restrict(self: *Lexer, state: StateId, keep: []const bool) Error!StateId {
        var result: std.ArrayList(u32) = .empty;
        defer result.deinit(self.gpa);
        const index = self.stateIndex(state);
        var i: u32 = 0;
        while (i < self.pair_spans.items[index].len) : (i += 2) {
            const pairs = self.pairsOf(index);
            if (pairs[i] != start_marker and !keep[pairs[i]]) continue;
            try result.appendSlice(self.gpa, pairs[i..][0..2]);
        }
        if (result.items.len == 2 and result.items[0] == start_marker) return .dead;
        return self.internState(result.items);
    }

    /// Slow path: derive every pair of `state` by a byte of `class` and cache the result.
    pub fn computeTransition(self: *Lexer, state: StateId, class: u8) Error!StateId {
        assert(state.offset() % self.class_count == 0 and class < self.class_count);
        const b = self.class_representative[class];
        var result: std.ArrayList(u32) = .empty;
        defer result.deinit(self.gpa);
        const index = self.stateIndex(state);
        const n = self.pair_spans.items[index].len;
        try self.exprs.spend(1 + n / 2);
        var i: u32 = 0;
        while (i < n) : (i += 2) {
            // Re-read each time: deriving does not touch our arrays, but keep it obviously safe.
            const pairs = self.pairsOf(index);
            const lexeme = pairs[i];
            if (lexeme == start_marker) continue;
            const d = try self.exprs.deriv(@fromBackingInt(@intCast(pairs[i + 1])), b);
            if (!try self.isDead(d)) try result.appendSlice(self.gpa, &.{ lexeme, d.index() });
        }
        const target = try self.internState(result.items);
        self.trans.items[state.offset() + class] = target;
        return target;
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

const regex_syntax = @import("regex_syntax.zig");

test "lazy DFA caches transitions and finds dead states" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const e = try regex_syntax.parse(&exprs, "[0-9]{1,3}", .{}, &diag);
    var lexer = try Lexer.init(gpa, &exprs, &.{e}, .{});
    defer lexer.deinit();
    try std.testing.expectEqual(@as(u32, 2), lexer.class_count);
    const s0 = try lexer.startState(null);
    try std.testing.expect(!lexer.isAccepting(s0));
    const s1 = try lexer.next(s0, '4');
    try std.testing.expect(lexer.isAccepting(s1));
    try std.testing.expectEqual(s1, try lexer.next(s0, '7')); // same class, cached
    try std.testing.expectEqual(StateId.dead, try lexer.next(s0, 'x'));
    const s3 = try lexer.next(try lexer.next(s1, '1'), '2');
    try std.testing.expectEqual(StateId.dead, try lexer.next(s3, '3'));
    try std.testing.expectEqual(StateId.dead, try lexer.next(.dead, '3'));
}

test "state limit is an error" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const e = try regex_syntax.parse(&exprs, "a{0,100}", .{}, &diag);
    var lexer = try Lexer.init(gpa, &exprs, &.{e}, .{ .state_count_max = 10 });
    defer lexer.deinit();
    var s = try lexer.startState(null);
    var i: u32 = 0;
    const result = while (i < 100) : (i += 1) {
        s = lexer.next(s, 'a') catch |err| break err;
    } else error.NoError;
    try std.testing.expectEqual(error.LimitExceeded, result);
}
