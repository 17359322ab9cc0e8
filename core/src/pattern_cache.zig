//! Parsed patterns shared between the grammars of one core instance.
//!
//! Every grammar has its own expression set (`regex.ExprSet`): its terms, derivatives and lazy
//! DFA live and die with it. But the same pattern texts come back in grammar after grammar — a
//! JSON Schema's string, number and integer lexemes, its formats — and parsing them is most of
//! a median MaskBench compile's core work (the JSON string alone is a UTF-8 class and a dozen
//! `\u` escapes: about a third). So the instance keeps, per pattern text and flags, a *recipe*
//! of the term it parsed to (`ExprSet.exportTerm`: its nodes in post-order, children by
//! position), and a grammar that meets the text again rebuilds the term from the recipe
//! (`ExprSet.importTerm`: one intern a node, no parsing, no UTF-8 splitting).
//!
//! Importing still interns every node of a recipe (about 120 terms a median grammar), so the
//! patterns most grammars use also go into a *base set* (`base`), which every grammar's set
//! starts as a copy of (`startSet`, `ExprSet.initFrom`): a lookup of one of them is its id in
//! the copy. The copy's terms a grammar does not use do not count for its byte classes
//! (`ExprSet.base_marks`), so its lexer is the one a set of its own would get.
//!
//! Invariants and bounds:
//! - A recipe holds only the term's own nodes, so the rebuilt term is the one parsing would
//!   have built (see `importTerm`), and the grammar's set gets no other terms: its byte
//!   classes are those of its own lexemes.
//! - A text is kept on its second sight: a pattern met once (a property's own `pattern`)
//!   costs one hash insertion, not an export.
//! - Memory is bounded by `bytes_max` (texts, recipes and both tables); past it the cache is
//!   emptied and starts over. The seen-once table is emptied past `seen_count_max` entries.
//! - The base set is rebuilt at the end of each window of grammars from the patterns an
//!   eighth of them used, and holds at most `base_terms_max` terms (its bytes count in
//!   `bytes_max`). Ids from it are used only in a copy of the same base (`generation`); a base
//!   lookup spends the fuel a recipe import would, and grammars with a tight expression limit
//!   start empty, so limits run out where they did without it.
//! - It is per instance (a global of the module, `abi.zig`); nothing in it refers to a
//!   grammar, so freeing grammars (or one failing) never touches it. Failures to remember
//!   (out of memory) are ignored: the cache only ever saves work.

const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const regex_syntax = @import("regex_syntax.zig");

/// The base set (see `PatternCache.base`) is rebuilt after this many grammars started from
/// the cache, and then every `base_window_max` (the first rebuilds come sooner: 16, 32, …),
/// from the patterns that at least one grammar in `base_share` of the window looked up.
pub const base_window_max: u32 = 256;
pub const base_window_min: u32 = 16;
pub const base_share: u32 = 8;
/// The base set's bound: every grammar's set starts as a copy of it, so it holds only what
/// most grammars use (on MaskBench the JSON string, number, integer and boolean are about
/// 120 terms, a copy of about 8 kB).
pub const base_terms_max: u32 = 256;
/// Grammars whose expression limit is below this many times the base's bound do not start
/// from the base (a tight limit counts only the grammar's own terms, as without the base).
pub const base_limit_factor: u32 = 64;

/// The cache's memory bound. The 150 MaskBench schemas of the leak test keep 1.7 MB (with
/// the tables' growth by doubling): at 1 MiB the cache emptied and refilled every pass.
pub const default_bytes_max: usize = 2 << 20;
/// Texts seen once that are remembered (by hash, 16 bytes each in the table).
pub const seen_count_max: u32 = 8192;

pub const PatternCache = struct {
    entries: regex.IntMap(u64, Entry) = .empty,
    seen: regex.IntMap(u64, void) = .empty,
    texts: std.ArrayList(u8) = .empty,
    recipes: std.ArrayList(u32) = .empty,
    bytes_max: usize = default_bytes_max,
    /// The terms of the patterns most grammars look up (`rebuildBase`), at most
    /// `base_terms_max`: a grammar's set starts as a copy of it (`startSet`), and a lookup of
    /// one of these patterns is then its id in the copy, with nothing interned. Null until
    /// the first window ends, or when no pattern qualifies; emptied with the cache.
    base: ?regex.ExprSet = null,
    /// Changes whenever the base set is dropped (rebuilt, or the cache cleared): a set copied
    /// from an older base gets recipes, not ids.
    generation: u32 = 1,
    /// The byte-set terms of each base pattern (`ExprSet.classTerms`), which a lookup marks
    /// used in the grammar's set (`Entry.marks_start`).
    base_class_terms: std.ArrayList(u32) = .empty,
    /// Lookups answered from the cache (by recipe or from the base), answered from the base,
    /// texts remembered, and times it started over (tests, measurements).
    hits: u64 = 0,
    base_hits: u64 = 0,
    /// Grammars started since the base was last rebuilt, and how many end the window.
    window_starts: u32 = 0,
    window: u32 = base_window_min,
    stored: u64 = 0,
    clears: u64 = 0,

    const no_base: u32 = std.math.maxInt(u32);

    const Entry = struct {
        flags: u8,
        text_start: u32,
        text_len: u32,
        recipe_start: u32,
        recipe_len: u32,
        /// Lookups in the current window (saturating).
        hits: u32 = 0,
        /// The term's id in `base`, or `no_base`.
        base_id: u32 = no_base,
        /// The fuel `importTerm` spends on the recipe: a lookup answered from the base
        /// spends it too, so that compile budgets run out where they did without the base.
        base_fuel: u32 = 0,
        marks_start: u32 = 0,
        marks_len: u32 = 0,
    };

    pub fn deinit(self: *PatternCache, gpa: Allocator) void {
        self.entries.deinit(gpa);
        self.seen.deinit(gpa);
        self.texts.deinit(gpa);
        self.recipes.deinit(gpa);
        if (self.base) |*b| b.deinit();
        self.base_class_terms.deinit(gpa);
        self.* = undefined;
    }

    /// Forget everything, and give the memory back.
    pub fn clear(self: *PatternCache, gpa: Allocator) void {
        self.clears += 1;
        self.entries.clearAndFree(gpa);
        self.seen.clearAndFree(gpa);
        self.texts.clearAndFree(gpa);
        self.recipes.clearAndFree(gpa);
        self.dropBase(gpa);
    }

    fn dropBase(self: *PatternCache, gpa: Allocator) void {
        if (self.base) |*b| b.deinit();
        self.base = null;
        self.base_class_terms.clearAndFree(gpa);
        self.generation +%= 1;
    }

    /// Bytes the cache holds now (what `bytes_max` bounds).
    pub fn sizeBytes(self: *const PatternCache) usize {
        return self.texts.capacity + 4 * self.recipes.capacity +
            (@sizeOf(u64) + @sizeOf(Entry) + 1) * self.entries.capacity() +
            (@sizeOf(u64) + 1) * self.seen.capacity() + self.baseBytes();
    }

    /// Bytes of the base set and its class terms (within `sizeBytes`).
    pub fn baseBytes(self: *const PatternCache) usize {
        const b = if (self.base) |*b| b else return 4 * self.base_class_terms.capacity;
        return 4 * self.base_class_terms.capacity + 4 * b.words.capacity +
            (@sizeOf(regex.Lengths) + 8 + 4 + 4) * b.spans.capacity + b.table.sizeBytes();
    }

    /// A grammar's expression set: a copy of the base set when there is one and the grammar's
    /// expression limit leaves room for it (`base_limit_factor`), else an empty set; with room
    /// for `term_count` more terms. Rebuilds the base set at the end of a window.
    pub fn startSet(self: *PatternCache, gpa: Allocator, limits: regex.Limits, term_count: u32) regex.Error!regex.ExprSet {
        self.window_starts += 1;
        if (self.window_starts >= self.window) self.rebuildBase(gpa);
        if (self.base) |*b| {
            if (limits.expr_count_max / base_limit_factor >= base_terms_max) {
                return regex.ExprSet.initFrom(gpa, limits, b, self.generation, term_count);
            }
        }
        return regex.ExprSet.initCapacity(gpa, limits, term_count);
    }

    /// The term `pattern` with `flags` parses to, in `exprs`, if the cache has it: its id
    /// when `exprs` is a copy of the base set that holds it, else built from its recipe;
    /// null otherwise.
    pub fn lookup(self: *PatternCache, exprs: *regex.ExprSet, pattern: []const u8, flags: regex_syntax.Flags) regex.Error!?regex.ExprId {
        const entry = self.entries.getPtr(key(pattern, flags)) orelse return null;
        if (entry.flags != flagsByte(flags)) return null;
        if (!regex.bytesEqual(self.texts.items[entry.text_start..][0..entry.text_len], pattern)) return null;
        self.hits += 1;
        entry.hits +|= 1;
        if (entry.base_id != no_base and exprs.base_generation == self.generation and entry.base_id < exprs.base_count) {
            try exprs.spend(entry.base_fuel);
            for (self.base_class_terms.items[entry.marks_start..][0..entry.marks_len]) |id| exprs.markBase(id);
            self.base_hits += 1;
            return @fromBackingInt(entry.base_id);
        }
        return try exprs.importTerm(self.recipes.items[entry.recipe_start..][0..entry.recipe_len]);
    }

    /// Builds the base set anew from the patterns of the window that ends (the most looked up
    /// first, while they fit), and starts the next window. Failing (out of memory) leaves no
    /// base set: grammars then import every pattern.
    fn rebuildBase(self: *PatternCache, gpa: Allocator) void {
        const window = self.window;
        self.window = @min(window * 2, base_window_max);
        self.window_starts = 0;
        self.dropBase(gpa);
        self.fillBase(gpa, window) catch self.dropBase(gpa);
        var it = self.entries.valueIterator();
        while (it.next()) |entry| entry.hits = 0;
    }

    fn fillBase(self: *PatternCache, gpa: Allocator, window: u32) Allocator.Error!void {
        const Candidate = struct {
            hits: u32,
            key: u64,
            entry: *Entry,
            fn before(_: void, a: @This(), b: @This()) bool {
                return a.hits > b.hits or (a.hits == b.hits and a.key < b.key);
            }
        };
        var chosen: std.ArrayList(Candidate) = .empty;
        defer chosen.deinit(gpa);
        var it = self.entries.iterator();
        while (it.next()) |kv| {
            const entry = kv.value_ptr;
            entry.base_id = no_base;
            if (@as(u64, entry.hits) * base_share < window) continue;
            try chosen.append(gpa, .{ .hits = entry.hits, .key = kv.key_ptr.*, .entry = entry });
        }
        if (chosen.items.len == 0) return;
        std.mem.sortUnstable(Candidate, chosen.items, {}, Candidate.before);
        self.base = regex.ExprSet.init(gpa, .{}) catch return error.OutOfMemory; // no limits
        const b = &self.base.?;
        for (chosen.items) |candidate| {
            const entry = candidate.entry;
            const recipe = self.recipes.items[entry.recipe_start..][0..entry.recipe_len];
            if (b.count() + regex.ExprSet.recipeNodeCount(recipe) > base_terms_max) continue;
            const fuel_before = b.fuel_spent;
            const id = b.importTerm(recipe) catch return error.OutOfMemory; // the base has no limits
            const marks_start = self.base_class_terms.items.len;
            try b.classTerms(gpa, id, &self.base_class_terms);
            entry.base_fuel = @intCast(b.fuel_spent - fuel_before);
            entry.marks_start = @intCast(marks_start);
            entry.marks_len = @intCast(self.base_class_terms.items.len - marks_start);
            entry.base_id = id.index();
        }
        if (self.sizeBytes() > self.bytes_max) return error.OutOfMemory;
    }

    /// `pattern` with `flags` was parsed into `exprs` as `e`: remember its recipe if the text
    /// was seen before, else note that it was seen.
    pub fn offer(self: *PatternCache, gpa: Allocator, exprs: *const regex.ExprSet, pattern: []const u8, flags: regex_syntax.Flags, e: regex.ExprId) void {
        const k = key(pattern, flags);
        if (self.seen.fetchRemove(k) == null) {
            if (self.seen.count() >= seen_count_max) self.seen.clearRetainingCapacity();
            self.seen.put(gpa, k, {}) catch {};
            return;
        }
        if (self.entries.contains(k)) return; // another text with the same hash: keep the first
        self.store(gpa, exprs, pattern, flags, e, k) catch {
            self.clear(gpa);
        };
    }

    fn store(self: *PatternCache, gpa: Allocator, exprs: *const regex.ExprSet, pattern: []const u8, flags: regex_syntax.Flags, e: regex.ExprId, k: u64) Allocator.Error!void {
        var recipe: std.ArrayList(u32) = .empty;
        defer recipe.deinit(gpa);
        try exprs.exportTerm(gpa, e, &recipe);
        const needed = 4 * recipe.items.len + pattern.len + 64;
        if (needed > self.bytes_max / 64) return; // one term would crowd out many others
        if (self.sizeBytes() + needed > self.bytes_max) self.clear(gpa);
        const recipe_start = self.recipes.items.len;
        try self.recipes.appendSlice(gpa, recipe.items);
        errdefer self.recipes.shrinkRetainingCapacity(recipe_start);
        try self.add(gpa, pattern, flags, k, recipe_start, recipe.items.len);
        // Growth by doubling may have passed the bound: start over rather than exceed it.
        if (self.sizeBytes() > self.bytes_max) self.clear(gpa);
    }

    fn add(self: *PatternCache, gpa: Allocator, pattern: []const u8, flags: regex_syntax.Flags, k: u64, recipe_start: usize, recipe_len: usize) Allocator.Error!void {
        const text_start = self.texts.items.len;
        try self.texts.appendSlice(gpa, pattern);
        errdefer self.texts.shrinkRetainingCapacity(text_start);
        try self.entries.put(gpa, k, .{
            .flags = flagsByte(flags),
            .text_start = @intCast(text_start),
            .text_len = @intCast(pattern.len),
            .recipe_start = @intCast(recipe_start),
            .recipe_len = @intCast(recipe_len),
        });
        self.stored += 1;
    }

    fn flagsByte(flags: regex_syntax.Flags) u8 {
        return @as(u8, @intFromBool(flags.dot_all)) | @as(u8, @intFromBool(flags.case_insensitive)) << 1;
    }

    /// The text's hash with its flags.
    fn key(pattern: []const u8, flags: regex_syntax.Flags) u64 {
        return regex.hashBytes(pattern, flagsByte(flags));
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

const test_patterns = [_][]const u8{
    // A JSON string as the JSON Schema front-end writes it (UTF-8 class, escapes, \u ranges).
    "\"(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*\"",
    "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    "[a-zA-Z_][a-zA-Z0-9_]{0,63}",
    "(?:ab|ac|b)+c?",
    "\\d{4}-\\d{2}-\\d{2}",
    ".*foo.*",
    "[\\u00e9\\u4e00-\\u9fff]+|x{3,}",
    "true|false|null",
};

fn parseFresh(exprs: *regex.ExprSet, pattern: []const u8, flags: regex_syntax.Flags) !regex.ExprId {
    var diag: regex_syntax.Diagnostic = .{};
    return regex_syntax.parse(exprs, pattern, flags, &diag);
}

test "pattern cache: a term rebuilt from its recipe is the term parsing builds, in a set with other ids" {
    const gpa = std.testing.allocator;
    var cache: PatternCache = .{};
    defer cache.deinit(gpa);
    const flag_cases = [_]regex_syntax.Flags{ .{}, .{ .dot_all = true }, .{ .case_insensitive = true } };
    for (flag_cases) |flags| {
        // Two grammars' sets meet every pattern: the second sight stores it.
        for (0..2) |_| {
            var source = try regex.ExprSet.init(gpa, .{});
            defer source.deinit();
            for (test_patterns) |p| {
                try std.testing.expectEqual(null, try cache.lookup(&source, p, flags));
                cache.offer(gpa, &source, p, flags, try parseFresh(&source, p, flags));
            }
        }
    }
    const stored = cache.stored;
    try std.testing.expectEqual(@as(u64, test_patterns.len * flag_cases.len), stored);
    for (flag_cases) |flags| {
        // A third set, whose ids are shifted by other terms first, and the reference: the
        // same pattern parsed in that set.
        var target = try regex.ExprSet.init(gpa, .{});
        defer target.deinit();
        _ = try parseFresh(&target, "[q-t]{2,5}(?:zz|y)*", .{});
        for (test_patterns) |p| {
            const rebuilt = (try cache.lookup(&target, p, flags)).?;
            try std.testing.expectEqual(try parseFresh(&target, p, flags), rebuilt);
        }
    }
    try std.testing.expectEqual(@as(u64, test_patterns.len * flag_cases.len), cache.hits);
    // Flags are part of the key: `.` with and without dot_all are different terms.
    var check = try regex.ExprSet.init(gpa, .{});
    defer check.deinit();
    const dot = (try cache.lookup(&check, ".*foo.*", .{})).?;
    const dot_all = (try cache.lookup(&check, ".*foo.*", .{ .dot_all = true })).?;
    try std.testing.expect(dot != dot_all);
    try std.testing.expectEqual(null, try cache.lookup(&check, ".*fo.*", .{}));
}

test "pattern cache: memory stays within its bound, and what it answers stays right" {
    const gpa = std.testing.allocator;
    var cache: PatternCache = .{ .bytes_max = 64 * 1024 };
    defer cache.deinit(gpa);
    var text_buffer: [64]u8 = undefined;
    var round: u32 = 0;
    while (round < 300) : (round += 1) {
        // Distinct patterns (a counter in each), each met twice: the cache fills and starts over.
        const p = try std.fmt.bufPrint(&text_buffer, "[a-f]{{1,{d}}}(?:x|y{d})*", .{ round % 97 + 1, round });
        for (0..2) |_| {
            var exprs = try regex.ExprSet.init(gpa, .{});
            defer exprs.deinit();
            if (try cache.lookup(&exprs, p, .{})) |rebuilt| {
                try std.testing.expectEqual(try parseFresh(&exprs, p, .{}), rebuilt);
            } else {
                cache.offer(gpa, &exprs, p, .{}, try parseFresh(&exprs, p, .{}));
            }
            try std.testing.expect(cache.sizeBytes() <= cache.bytes_max);
        }
        var exprs = try regex.ExprSet.init(gpa, .{});
        defer exprs.deinit();
        const rebuilt = (try cache.lookup(&exprs, p, .{})) orelse continue;
        try std.testing.expectEqual(try parseFresh(&exprs, p, .{}), rebuilt);
    }
    try std.testing.expect(cache.hits > 200);
    try std.testing.expect(cache.clears > 0); // the bound was reached
}

/// What `ir_reader.ParseMemo` does with a pattern: the cache's term, or a parse it offers.
fn testTerm(cache: *PatternCache, exprs: *regex.ExprSet, pattern: []const u8) !regex.ExprId {
    if (try cache.lookup(exprs, pattern, .{})) |id| return id;
    const id = try parseFresh(exprs, pattern, .{});
    cache.offer(std.testing.allocator, exprs, pattern, .{}, id);
    return id;
}

test "pattern cache: the base set holds the patterns a window's grammars share, and answers them by id" {
    const gpa = std.testing.allocator;
    var cache: PatternCache = .{};
    defer cache.deinit(gpa);
    const common = test_patterns[0..3];
    var unique_buffer: [32]u8 = undefined;
    var grammar: u32 = 0;
    while (grammar < 100) : (grammar += 1) {
        var exprs = try cache.startSet(gpa, .{}, 16);
        defer exprs.deinit();
        const from_base = exprs.base_count > 0;
        // Every grammar uses the common patterns, every third one a pattern of its own (met
        // again by the next grammar, so that it is cached but rare).
        for (common) |p| {
            exprs.refuel(1_000_000, .compile_fuel);
            const id = try testTerm(&cache, &exprs, p);
            const spent = exprs.fuel_spent;
            // The oracle: the pattern parsed in the same set (hash-consed: the same id).
            try std.testing.expectEqual(try parseFresh(&exprs, p, .{}), id);
            if (from_base) {
                try std.testing.expect(id.index() < exprs.base_count);
                // The fuel a recipe import spends, in a set of its own.
                var alone = try regex.ExprSet.init(gpa, .{});
                defer alone.deinit();
                alone.refuel(1_000_000, .compile_fuel);
                const entry = cache.entries.get(PatternCache.key(p, .{})).?;
                _ = try alone.importTerm(cache.recipes.items[entry.recipe_start..][0..entry.recipe_len]);
                try std.testing.expectEqual(alone.fuel_spent, spent);
            }
        }
        if (grammar % 3 == 0) {
            const p = try std.fmt.bufPrint(&unique_buffer, "[a-f]{{{d}}}z", .{grammar / 6 + 1});
            const id = try testTerm(&cache, &exprs, p);
            try std.testing.expectEqual(try parseFresh(&exprs, p, .{}), id);
        }
        try std.testing.expectEqual(from_base, grammar + 1 >= base_window_min); // the 16th starts from it
        if (cache.base) |*b| try std.testing.expect(b.count() <= base_terms_max);
    }
    try std.testing.expect(cache.base_hits >= 3 * (100 - base_window_min));
    // The rare patterns (a sixth of the grammars each) are not in the base.
    const rare = cache.entries.get(PatternCache.key("[a-f]{2}z", .{})).?;
    try std.testing.expectEqual(PatternCache.no_base, rare.base_id);
    // A set copied before the cache is emptied gets recipes afterwards, not stale ids.
    var old = try cache.startSet(gpa, .{}, 16);
    defer old.deinit();
    try std.testing.expect(old.base_count > 0);
    cache.clear(gpa);
    for (0..2) |_| {
        var other = try regex.ExprSet.init(gpa, .{}); // a second sight stores the pattern
        defer other.deinit();
        _ = try testTerm(&cache, &other, common[0]);
    }
    const id = (try cache.lookup(&old, common[0], .{})).?;
    try std.testing.expectEqual(try parseFresh(&old, common[0], .{}), id);
}

test "pattern cache: a tight expression limit starts from an empty set" {
    const gpa = std.testing.allocator;
    var cache: PatternCache = .{};
    defer cache.deinit(gpa);
    for (0..base_window_min + 1) |_| {
        var exprs = try cache.startSet(gpa, .{}, 0);
        defer exprs.deinit();
        _ = try testTerm(&cache, &exprs, test_patterns[0]);
    }
    try std.testing.expect(cache.base != null);
    var tight = try cache.startSet(gpa, .{ .expr_count_max = base_terms_max * base_limit_factor - 1 }, 0);
    defer tight.deinit();
    try std.testing.expectEqual(@as(u32, 2), tight.count());
    var roomy = try cache.startSet(gpa, .{ .expr_count_max = base_terms_max * base_limit_factor }, 0);
    defer roomy.deinit();
    try std.testing.expect(roomy.base_count > 2);
}
