//! The lexer: a DFA over bytes, built lazily from the lexemes' regular expressions.
//!
//! A DFA state is a set of (lexeme index, expression) pairs — the lexemes still possible and
//! what each still has to match — kept sorted and hash-consed, so equal sets are equal ids. The
//! transition on byte b replaces each expression by its derivative and drops the pairs that
//! became `nothing`; the empty set is the dead state.
//!
//! Transitions are cached in a table, `trans`, with a row per state and a column per byte
//! class, stored in fixed-size pages (`Table`). State ids are *pre-multiplied*: a `StateId` is
//! the place of its row, page in the high bits and the row's first entry in that page in the
//! low bits, so the hot step is `pages[state.page()][state.slot() + class_of[byte]]` — a shift,
//! a mask and three loads (the page list is a few hundred pointers, in cache), no multiply
//! (`stateIndex` recovers the state's index for per-state tables). Row 0 is the dead state
//! (all its entries are 0), so "dead" is the comparison `== .dead`. Entries not computed yet
//! hold `.missing`; the slow path (`computeTransition`) fills them with derivatives, paid for
//! with fuel.
//!
//! Why pages: a table in one array is copied whole each time it grows — about 0.6 ms per MB
//! in wasmtime, into memory touched for the first time — and a grammar with tens of thousands
//! of states (a `maxLength` string under a pattern) has a 17-25 MB table, so the one call
//! that grew it paid 10-15 ms for every state before it. A new page is allocated beside the
//! others and nothing moves; only the first page grows like a list (up to one page, 256 KiB),
//! so a small lexer stays small. Rows never span a page: a page wastes less than a row.
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

/// A DFA state, pre-multiplied: the place of its row in `Lexer.trans` (`page`, `slot`), not its
/// index among the states (`Lexer.stateIndex`).
pub const StateId = enum(u32) {
    /// Row 0 of page 0; every entry of its row is `dead` again.
    dead = 0,
    /// A table entry not computed yet (never a state: it would be the last entry of page
    /// 2^16 - 1, and the table never has that many pages).
    missing = std.math.maxInt(u32),
    _,

    /// The id as one number (distinct states have distinct offsets; not an array index).
    pub fn offset(self: StateId) u32 {
        return @backingInt(self);
    }

    pub fn fromOffset(value: u32) StateId {
        return @fromBackingInt(value);
    }

    pub fn fromPlace(page_index: u32, slot_index: u32) StateId {
        assert(page_index < Table.page_count_max and slot_index < Table.page_entries);
        return @fromBackingInt(page_index << Table.page_shift | slot_index);
    }

    /// The page holding the state's row.
    pub inline fn page(self: StateId) u32 {
        return @backingInt(self) >> Table.page_shift;
    }

    /// The row's first entry within its page.
    pub inline fn slot(self: StateId) u32 {
        return @backingInt(self) & (Table.page_entries - 1);
    }
};

/// The transition table: rows of `row_len` entries in pages of `page_entries`, a row never
/// spanning two pages. Growing it allocates a page and moves nothing (only the first page
/// grows like a list, up to one page, so that a small lexer stays small). The hot step is
/// `get(pages, state, class)`, with `pages` read from `pages.items` and read again after
/// anything that may add a state (the page list itself may move; the pages do not, except
/// the first one while it grows).
pub const Table = struct {
    /// The pages' first entries. Every page but the first holds `page_entries` entries.
    pages: std.ArrayList([*]StateId) = .empty,
    /// Entries allocated in the first page (`page_entries` once it is full-size).
    first_capacity: u32 = 0,
    /// Entries used in the last page.
    tail_len: u32 = 0,
    row_len: u32,
    /// Rows in a page: `page_entries / row_len`.
    rows_per_page: u32,
    /// ceil(2^32 / row_len): `rowIndex` multiplies by it instead of dividing, since the walk
    /// asks "is this state accepting?" for every trie node it enters and a division costs tens
    /// of cycles.
    row_reciprocal: u64,

    pub const page_shift = 16;
    /// Entries per page: 256 KiB, four wasm pages, a block of the buddy allocator.
    pub const page_entries: u32 = 1 << page_shift;
    /// At most this many pages (the ids above it are never rows; see `StateId.missing`).
    pub const page_count_max: u32 = (1 << (32 - page_shift)) - 1;
    /// The first allocation of the first page, in rows.
    const first_rows_min: u32 = 8;

    pub fn init(row_len: u32) Table {
        assert(row_len >= 1 and row_len <= 256);
        return .{
            .row_len = row_len,
            .rows_per_page = page_entries / row_len,
            .row_reciprocal = ((@as(u64, 1) << 32) + row_len - 1) / row_len,
        };
    }

    pub fn deinit(self: *Table, gpa: Allocator) void {
        for (self.pages.items, 0..) |base, i| {
            const capacity = if (i == 0) self.first_capacity else page_entries;
            gpa.free(base[0..capacity]);
        }
        self.pages.deinit(gpa);
        self.* = undefined;
    }

    /// The entry for `class` in `state`'s row.
    pub inline fn get(pages: []const [*]StateId, state: StateId, class: u32) StateId {
        return pages[state.page()][state.slot() + class];
    }

    pub fn set(self: *Table, state: StateId, class: u32, target: StateId) void {
        assert(class < self.row_len);
        self.pages.items[state.page()][state.slot() + class] = target;
    }

    pub fn rowCount(self: *const Table) u32 {
        if (self.pages.items.len == 0) return 0;
        const full: u32 = @intCast(self.pages.items.len - 1);
        return full * self.rows_per_page + self.tail_len / self.row_len;
    }

    /// The index of the row `state` (rows are numbered in the order they were appended).
    pub inline fn rowIndex(self: *const Table, state: StateId) u32 {
        // slot = k·c and c·r = 2^32 + e with 0 ≤ e < c, so slot·r = k·2^32 + k·e, and
        // k·e < k·c = slot < 2^32: the high word is exactly k.
        const in_page: u32 = @intCast((@as(u64, state.slot()) * self.row_reciprocal) >> 32);
        assert(in_page * self.row_len == state.slot());
        return state.page() * self.rows_per_page + in_page;
    }

    /// The id of row `index`.
    pub fn rowId(self: *const Table, index: u32) StateId {
        return .fromPlace(index / self.rows_per_page, index % self.rows_per_page * self.row_len);
    }

    /// Bytes allocated for the table (pages and page list).
    pub fn bytesAllocated(self: *const Table) usize {
        if (self.pages.items.len == 0) return 0;
        const entries = self.first_capacity + (self.pages.items.len - 1) * page_entries;
        return entries * @sizeOf(StateId) + self.pages.capacity * @sizeOf([*]StateId);
    }

    /// Appends a row whose entries are all `fill` and returns its id. Copies nothing but a
    /// first page still growing (at most a page).
    pub fn appendRow(self: *Table, gpa: Allocator, fill: StateId) Allocator.Error!StateId {
        const row_len = self.row_len;
        const page_count: u32 = @intCast(self.pages.items.len);
        if (page_count == 0 or self.tail_len + row_len > self.capacityOfLast()) {
            if (page_count == 1 and self.first_capacity < page_entries and self.tail_len + row_len <= page_entries) {
                try self.growFirst(gpa);
            } else {
                try self.addPage(gpa);
            }
        }
        const page_index: u32 = @intCast(self.pages.items.len - 1);
        assert(self.tail_len + row_len <= self.capacityOfLast());
        const id: StateId = .fromPlace(page_index, self.tail_len);
        @memset(self.pages.items[page_index][self.tail_len..][0..row_len], fill);
        self.tail_len += row_len;
        return id;
    }

    fn capacityOfLast(self: *const Table) u32 {
        return if (self.pages.items.len == 1) self.first_capacity else page_entries;
    }

    /// The first page, doubled (at least `first_rows_min` rows, at most a page).
    fn growFirst(self: *Table, gpa: Allocator) Allocator.Error!void {
        const wanted = @max(self.first_capacity * 2, first_rows_min * self.row_len);
        const capacity = @min(page_entries, wanted);
        assert(capacity >= self.tail_len + self.row_len);
        if (self.pages.items.len == 0) {
            try self.pages.ensureUnusedCapacity(gpa, 1);
            const page = try gpa.alloc(StateId, capacity);
            self.pages.appendAssumeCapacity(page.ptr);
        } else {
            const old = self.pages.items[0][0..self.first_capacity];
            const page = try gpa.realloc(old, capacity);
            self.pages.items[0] = page.ptr;
        }
        self.first_capacity = capacity;
    }

    fn addPage(self: *Table, gpa: Allocator) Allocator.Error!void {
        if (self.pages.items.len == 0) return self.growFirst(gpa);
        if (self.pages.items.len >= page_count_max) return error.OutOfMemory;
        try self.pages.ensureUnusedCapacity(gpa, 1);
        const page = try gpa.alloc(StateId, page_entries);
        self.pages.appendAssumeCapacity(page.ptr);
        self.tail_len = 0;
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

/// A set of bytes: byte b is bit b % 64 of word b / 64.
pub const ByteSet = [4]u64;

/// `Lexer.aliveAmong`'s record of a state: the bytes asked, and those alive among them.
pub const AliveBytes = struct {
    asked: ByteSet = @splat(0),
    alive: ByteSet = @splat(0),
};

pub const StateInfo = struct {
    /// Lowest lexeme index whose expression is nullable here, or `none`.
    accepting_lexeme: u32,
    /// The lexemes that match here: `accepting_lexemes[accepting_start..][0..accepting_count]`.
    accepting_start: u32 = 0,
    accepting_count: u32 = 0,
    /// Some lazy lexeme matches here: the lexeme ends now, whatever could follow.
    lazy_accepting: bool = false,
    /// Some pair's lexeme is lazy. Without one no state reached from here is a lazy match (a
    /// byte keeps each pair's lexeme or drops the pair; `end_when_final` marks final states
    /// as in a grammar without lazy lexemes), so a walk from here asks the lexer only what it
    /// asks in such a grammar (slices and clamped states apply: `Matcher.computeMask`).
    lazy_pairs: bool = false,
    /// Every byte leads to the dead state (computed on demand by `isFinal`).
    final: enum(u2) { unknown, yes, no } = .unknown,
    /// `Lexer.alive_bytes` holds this state's entry (`aliveAmong`).
    alive_known: bool = false,

    pub const none = std.math.maxInt(u32);
};

/// Keys are state indices, hashed by the hash stored when the state was made (growing the
/// table rehashes every key without reading their pair lists).
const PairsContext = struct {
    lexer: *const Lexer,
    pub fn hash(self: PairsContext, id: u32) u64 {
        return regex.spreadHash32(self.lexer.pair_hashes.items[id]);
    }
    pub fn eql(self: PairsContext, a: u32, b: u32) bool {
        return regex.wordsEqual(self.lexer.pairsOf(a), self.lexer.pairsOf(b));
    }
};

/// A pair list not interned yet; `hash32` is its `regex.hashWords32`.
const PairsLookup = struct {
    lexer: *const Lexer,
    hash32: u32,
    pub fn hash(self: PairsLookup, pairs: []const u32) u64 {
        assert(self.hash32 == regex.hashWords32(pairs));
        return regex.spreadHash32(self.hash32);
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
    /// A byte of each class, to take derivatives with.
    class_representative: [256]u8,
    /// How many bytes each class has (forced bytes need a class of exactly one byte).
    class_size: [256]u16,
    /// The transitions, a row of `class_count` entries per state (set up by `init`).
    trans: Table = .init(1),
    pair_words: std.ArrayList(u32) = .empty,
    pair_spans: std.ArrayList(Span) = .empty,
    /// Per state: `regex.hashWords32` of its pairs (what `state_table` hashes it by).
    pair_hashes: std.ArrayList(u32) = .empty,
    state_table: std.HashMapUnmanaged(u32, void, PairsContext, 80) = .empty,
    info: std.ArrayList(StateInfo) = .empty,
    accepting_lexemes: std.ArrayList(u32) = .empty,
    /// By state index, the bytes asked of a state by `aliveAmong` and which of them it does
    /// not send to the dead state (entries of states never asked are not read:
    /// `StateInfo.alive_known`).
    alive_bytes: std.ArrayList(AliveBytes) = .empty,
    /// Per lexeme: ends at its shortest match. Empty slice: no lazy lexemes.
    lazy: []const bool = &.{},
    /// A state in which every lexeme has matched and none can go on (each pair's expression
    /// is ε) counts as `lazy_accepting`: the lexeme ends on its last byte instead of on the
    /// next one. The same lexemes end at the same places (longest match could only end it
    /// there), but the parser sees the end at once, which distinct lists need: a closing
    /// quote that repeats an earlier item is refused on the token that holds it. Set before
    /// any state but the dead one is made.
    end_when_final: bool = false,
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
        lexer.trans = .init(lexer.class_count);
        const dead_state = try lexer.internState(&.{});
        assert(dead_state == .dead);
        return lexer;
    }

    pub fn deinit(self: *Lexer) void {
        self.trans.deinit(self.gpa);
        self.pair_words.deinit(self.gpa);
        self.pair_spans.deinit(self.gpa);
        self.pair_hashes.deinit(self.gpa);
        self.state_table.deinit(self.gpa);
        self.info.deinit(self.gpa);
        self.accepting_lexemes.deinit(self.gpa);
        self.alive_bytes.deinit(self.gpa);
        self.* = undefined;
    }

    /// The byte classes: bytes that every byte set of the expressions either contains or
    /// misses together. Partition refinement over 256-bit sets, keeping each byte's current
    /// class (`index`): a set of at most `small_set_bytes_max` bytes (a literal's byte, `[eE]`:
    /// two thirds of a median MaskBench grammar's sets) splits only the classes of its own
    /// bytes, found by lookup; a larger one is tested against every class, two vector ANDs a
    /// class (a pass over all 256 bytes per set had been a third of a median compile; the
    /// scan of every class for every set, a fifth once the rest shrank). A split gives the new
    /// index to the smaller part, so relabelling bytes costs O(256 log 256) over all splits.
    /// The partition does not depend on the order of the sets; classes are then numbered in
    /// the order of their smallest byte, and a class's representative is its smallest byte.
    fn computeClasses(self: *Lexer) void {
        // Field by field: a default-initialized `Refiner` is copied from a constant, 8 KiB of
        // classes included.
        var refiner: Refiner = undefined;
        refiner.count = 1;
        refiner.index = @splat(0);
        refiner.classes[0] = @splat(0xFFFF_FFFF);
        self.exprs.forEachByteSet(&refiner, Refiner.visit);
        var order: [256]u8 = undefined; // refinement's class index -> its number
        var numbered: [256]bool = @splat(false);
        var number: u32 = 0;
        for (refiner.index, 0..) |index, b| {
            if (!numbered[index]) {
                numbered[index] = true;
                order[index] = @intCast(number);
                self.class_representative[number] = @intCast(b);
                number += 1;
            }
            const class = order[index];
            self.class_of[b] = class;
            self.class_size[class] += 1;
        }
        assert(number == refiner.count);
        self.class_count = refiner.count;
        assert(self.class_count >= 1 and self.class_count <= 256);
    }

    /// Sets of at most this many bytes refine by looking up their bytes' classes.
    const small_set_bytes_max = 8;

    const Refiner = struct {
        /// The classes found so far, `count` of them.
        classes: [256]ByteSetBits,
        count: u32,
        /// Per byte: the index of its class in `classes`.
        index: [256]u8,

        fn visit(r: *Refiner, set: regex.ByteSet) void {
            const s: ByteSetBits = set.bits;
            if (set.count() <= small_set_bytes_max) {
                // Only the classes of the set's bytes can be cut. Once one is split, its
                // other bytes in the set are in the inside part, which the set does not cut.
                for (set.bits, 0..) |word, w| {
                    var bits = word;
                    while (bits != 0) : (bits &= bits - 1) {
                        const b = w * 32 + @ctz(bits);
                        r.split(r.index[b], s);
                    }
                }
                return;
            }
            // Classes appended here lie inside or outside `set`: it cuts none of them.
            const n = r.count;
            for (0..n) |c| r.split(@intCast(c), s);
        }

        /// Splits class `c` by `s` if `s` cuts it; the smaller part gets a new index.
        fn split(r: *Refiner, c: u8, s: ByteSetBits) void {
            const class = r.classes[c];
            const inside = class & s;
            const outside = class & ~s;
            if (@reduce(.Or, inside) == 0 or @reduce(.Or, outside) == 0) return;
            const inside_set: regex.ByteSet = .{ .bits = inside };
            const smaller_inside = inside_set.count() <= (regex.ByteSet{ .bits = outside }).count();
            const moved: [8]u32 = if (smaller_inside) inside else outside;
            r.classes[c] = if (smaller_inside) outside else inside;
            r.classes[r.count] = moved;
            for (moved, 0..) |word, w| {
                var bits = word;
                while (bits != 0) : (bits &= bits - 1) r.index[w * 32 + @ctz(bits)] = @intCast(r.count);
            }
            r.count += 1;
        }
    };

    const ByteSetBits = @Vector(8, u32);

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
        return self.trans.rowIndex(state);
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

    /// The bytes of `wanted` that `state` does not send to the dead state. Kept per state, byte
    /// by byte as asked: a walk from `state` asks at every mask, for the first bytes of its
    /// trie (`matcher.walkTrieTop`), and a byte first asked builds the transition the walk
    /// would have built for it, no other.
    pub fn aliveAmong(self: *Lexer, state: StateId, wanted: ByteSet) Error!ByteSet {
        const index = self.stateIndex(state);
        if (!self.info.items[index].alive_known) {
            if (self.alive_bytes.items.len <= index) try self.alive_bytes.appendNTimes(self.gpa, .{}, index + 1 - self.alive_bytes.items.len);
            self.alive_bytes.items[index] = .{};
            self.info.items[index].alive_known = true;
        }
        var known = self.alive_bytes.items[index];
        for (0..4) |w| {
            var missing = wanted[w] & ~known.asked[w];
            while (missing != 0) : (missing &= missing - 1) {
                const b: u8 = @intCast(w * 64 + @ctz(missing));
                const bit = @as(u64, 1) << @intCast(b & 63);
                // (Building a transition may grow the lexer's tables, never this list: the
                // entry is written back below.)
                if (try self.next(state, b) != .dead) known.alive[w] |= bit;
                known.asked[w] |= bit;
            }
        }
        self.alive_bytes.items[index] = known;
        var out: ByteSet = undefined;
        for (&out, known.alive, wanted) |*o, a, want| o.* = a & want;
        return out;
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
    pub fn internState(self: *Lexer, pairs: []const u32) Error!StateId {
        assert(pairs.len % 2 == 0);
        const hash32 = regex.hashWords32(pairs);
        const gop = try self.state_table.getOrPutContextAdapted(
            self.gpa,
            pairs,
            PairsLookup{ .lexer = self, .hash32 = hash32 },
            PairsContext{ .lexer = self },
        );
        if (gop.found_existing) return self.trans.rowId(gop.key_ptr.*);
        errdefer self.state_table.removeByPtr(gop.key_ptr);
        const index: u32 = @intCast(self.pair_spans.items.len);
        if (index >= self.limits.state_count_max) return limit_error.exceeded(.lexer_states);
        try self.exprs.spend(pairs.len + self.class_count / 4);
        var accepting: u32 = StateInfo.none;
        const accepting_start: u32 = @intCast(self.accepting_lexemes.items.len);
        var lazy_accepting = false;
        var lazy_pairs = false;
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (self.lazy.len > 0 and pairs[i] != start_marker and self.lazy[pairs[i]]) lazy_pairs = true;
            if (self.exprs.nullable(@fromBackingInt(@intCast(pairs[i + 1])))) {
                accepting = @min(accepting, pairs[i]);
                try self.accepting_lexemes.append(self.gpa, pairs[i]);
                if (self.lazy.len > 0 and self.lazy[pairs[i]]) lazy_accepting = true;
            }
        }
        errdefer self.accepting_lexemes.shrinkRetainingCapacity(accepting_start);
        if (self.end_when_final and accepting != StateInfo.none and !lazy_accepting) {
            lazy_accepting = for (0..pairs.len / 2) |p| {
                if (pairs[2 * p] == start_marker or pairs[2 * p + 1] != regex.ExprId.epsilon.index()) break false;
            } else true;
        }
        const accepting_count: u32 = @as(u32, @intCast(self.accepting_lexemes.items.len)) - accepting_start;
        try self.info.ensureUnusedCapacity(self.gpa, 1);
        try self.pair_spans.ensureUnusedCapacity(self.gpa, 1);
        try self.pair_hashes.ensureUnusedCapacity(self.gpa, 1);
        try self.pair_words.ensureUnusedCapacity(self.gpa, pairs.len);
        // Last: nothing after it can fail, so no row is left without its state.
        const id = try self.trans.appendRow(self.gpa, if (index == 0) .dead else .missing);
        assert(self.trans.rowIndex(id) == index);
        const start: u32 = @intCast(self.pair_words.items.len);
        self.pair_words.appendSliceAssumeCapacity(pairs);
        self.pair_spans.appendAssumeCapacity(.{ .start = start, .len = @intCast(pairs.len) });
        self.pair_hashes.appendAssumeCapacity(hash32);
        self.info.appendAssumeCapacity(.{
            .accepting_lexeme = accepting,
            .accepting_start = accepting_start,
            .accepting_count = accepting_count,
            .lazy_accepting = lazy_accepting,
            .lazy_pairs = lazy_pairs,
        });
        gop.key_ptr.* = index;
        return id;
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
        const target = Table.get(self.trans.pages.items, state, self.class_of[byte]);
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
        assert(state.slot() % self.class_count == 0 and class < self.class_count);
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
        self.trans.set(state, class, target);
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

test "table: rows across pages read back like a flat reference" {
    const gpa = std.testing.allocator;
    // Row lengths that divide a page, that do not (a page then wastes its last entries), and
    // the extremes.
    for ([_]u32{ 1, 3, 71, 100, 256 }) |row_len| {
        var table: Table = .init(row_len);
        defer table.deinit(gpa);
        var flat: std.ArrayList(StateId) = .empty;
        defer flat.deinit(gpa);
        var ids: std.ArrayList(StateId) = .empty;
        defer ids.deinit(gpa);
        // Past three pages, so the first page's growth and two whole pages are crossed.
        const row_count = 3 * (Table.page_entries / row_len) + 5;
        var row: u32 = 0;
        while (row < row_count) : (row += 1) {
            const id = try table.appendRow(gpa, if (row == 0) .dead else .missing);
            try ids.append(gpa, id);
            try std.testing.expectEqual(row, table.rowIndex(id));
            try std.testing.expectEqual(id, table.rowId(row));
            try std.testing.expectEqual(row + 1, table.rowCount());
            try std.testing.expect(id.slot() + row_len <= Table.page_entries);
            try std.testing.expect(id != .missing);
            try flat.appendNTimes(gpa, if (row == 0) .dead else .missing, row_len);
            // Fill some entries of earlier rows as the lexer would, in both tables.
            var k: u32 = 0;
            while (k < 3) : (k += 1) {
                const r = (row *% 2654435761 +% k) % (row + 1);
                const class = (row + k * 7) % row_len;
                const target = ids.items[(r + 1) % (row + 1)];
                if (r == 0) continue; // the dead row stays dead
                table.set(ids.items[r], class, target);
                flat.items[r * row_len + class] = target;
            }
        }
        try std.testing.expectEqual(@as(usize, 4), table.pages.items.len);
        for (ids.items, 0..) |id, r| {
            var class: u32 = 0;
            while (class < row_len) : (class += 1) {
                try std.testing.expectEqual(flat.items[r * row_len + class], Table.get(table.pages.items, id, class));
            }
        }
    }
}

test "table: a row never spans pages and a full first page is left as it is" {
    const gpa = std.testing.allocator;
    // 65536 = 255·257 + 1: a page holds 257 rows of 255 and wastes one entry.
    var table: Table = .init(255);
    defer table.deinit(gpa);
    var row: u32 = 0;
    var last: StateId = .dead;
    while (row < 258) : (row += 1) last = try table.appendRow(gpa, .missing);
    try std.testing.expectEqual(@as(u32, 257), table.rows_per_page);
    try std.testing.expectEqual(@as(u32, 1), last.page());
    try std.testing.expectEqual(@as(u32, 0), last.slot());
    try std.testing.expectEqual(StateId.fromPlace(0, 256 * 255), table.rowId(256));
    // The first page grew by doubling, so its first pages were copied: the page list points
    // at the grown page.
    try std.testing.expectEqual(Table.page_entries, table.first_capacity);
}

test "lexer: states past the first page step like states within it" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    // a{0,6000} beside the one-byte lexemes b … z: 27 byte classes, so 2,427 rows a page, and
    // one state per count of a's after the first: the table spans three pages. The state
    // after i a's is accepting and its successor by `b` is dead, as a reference count says.
    var lexemes: [26]ExprId = undefined;
    lexemes[0] = try regex_syntax.parse(&exprs, "a{0,6000}", .{}, &diag);
    for (lexemes[1..], 1..) |*l, k| l.* = try regex_syntax.parse(&exprs, &.{@intCast('a' + k)}, .{}, &diag);
    var lexer = try Lexer.init(gpa, &exprs, &lexemes, .{});
    defer lexer.deinit();
    try std.testing.expectEqual(@as(u32, 27), lexer.class_count);
    var states: std.ArrayList(StateId) = .empty;
    defer states.deinit(gpa);
    var s = try lexer.next(try lexer.startState(null), 'a');
    var i: u32 = 1;
    while (i <= 6000) : (i += 1) {
        try states.append(gpa, s);
        try std.testing.expect(lexer.isAccepting(s));
        try std.testing.expectEqual(StateId.dead, try lexer.next(s, 'b'));
        s = try lexer.next(s, 'a');
    }
    try std.testing.expectEqual(StateId.dead, s); // 6,001 a's
    try std.testing.expectEqual(@as(usize, 3), lexer.trans.pages.items.len);
    try std.testing.expect(states.items[states.items.len - 1].page() >= 1);
    // Cached: the same steps again give the same states, without new ones.
    const count = lexer.stateCount();
    s = states.items[0];
    for (states.items[1..]) |expected| {
        s = try lexer.next(s, 'a');
        try std.testing.expectEqual(expected, s);
        try std.testing.expectEqual(expected, lexer.trans.rowId(lexer.stateIndex(expected)));
    }
    try std.testing.expectEqual(count, lexer.stateCount());
}

test "lexer: byte classes are the bytes no byte set tells apart, numbered by their smallest byte" {
    const gpa = std.testing.allocator;
    var prng = std.Random.DefaultPrng.init(0x7c1a55e5);
    const random = prng.random();
    var round: u32 = 0;
    while (round < 200) : (round += 1) {
        var exprs = try ExprSet.init(gpa, .{});
        defer exprs.deinit();
        // A few byte sets of random ranges and scattered bytes (up to 40: some rounds end
        // with every byte its own class).
        var sets: std.ArrayList(regex.ByteSet) = .empty;
        defer sets.deinit(gpa);
        const set_count = random.uintLessThan(u32, 40);
        var lexemes: std.ArrayList(ExprId) = .empty;
        defer lexemes.deinit(gpa);
        var k: u32 = 0;
        while (k < set_count) : (k += 1) {
            var set: regex.ByteSet = .{};
            if (random.boolean()) {
                const lo = random.int(u8);
                set.addRange(lo, lo + random.uintAtMost(u8, 255 - lo));
            } else {
                var j = random.uintLessThan(u32, 12);
                while (j > 0) : (j -= 1) set.add(random.int(u8));
            }
            if (set.isEmpty()) continue;
            try sets.append(gpa, set);
            try lexemes.append(gpa, try exprs.byteSet(set));
        }
        var lexer = try Lexer.init(gpa, &exprs, lexemes.items, .{});
        defer lexer.deinit();
        // The reference: a byte's class is its membership in every set; numbered by first
        // appearance in byte order.
        var seen: std.ArrayList(u64) = .empty;
        defer seen.deinit(gpa);
        var sizes: [256]u16 = @splat(0);
        var b: u32 = 0;
        while (b < 256) : (b += 1) {
            var signature: u64 = 0;
            for (sets.items, 0..) |set, i| {
                if (set.contains(@intCast(b))) signature |= @as(u64, 1) << @intCast(i);
            }
            const class: u32 = @intCast(std.mem.indexOfScalar(u64, seen.items, signature) orelse blk: {
                try seen.append(gpa, signature);
                try std.testing.expectEqual(@as(u8, @intCast(b)), lexer.class_representative[seen.items.len - 1]);
                break :blk seen.items.len - 1;
            });
            try std.testing.expectEqual(class, lexer.class_of[b]);
            sizes[class] += 1;
        }
        try std.testing.expectEqual(@as(u32, @intCast(seen.items.len)), lexer.class_count);
        try std.testing.expectEqualSlices(u16, sizes[0..seen.items.len], lexer.class_size[0..seen.items.len]);
    }
}
