//! Regular expressions over bytes as hash-consed terms, with Brzozowski derivatives.
//!
//! Every expression lives once in an `ExprSet`: a node is a short run of `u32` words in one arena
//! (`words`), and a hash table maps the content of a run to its `ExprId`. Structural equality is
//! therefore id equality, which is what makes lazily built DFA states comparable in O(1).
//!
//! Terms are kept in a normal form by the smart constructors (`concat`, `alt`, `repeat`,
//! `andAll`, `not`):
//! - `nothing` (the empty language, ∅) absorbs concatenation and intersection and vanishes
//!   from alternation;
//! - `epsilon` is the unit of concatenation; concatenation is right-nested;
//! - alternation is flattened, its members sorted and deduplicated, and all of its byte-set
//!   members merged into one set (associativity, commutativity, idempotence);
//! - intersection is flattened, sorted and deduplicated, with `¬∅` (every string) as its unit;
//!   complement is an involution (`¬¬x = x`);
//! - an alternation of at least `factor_branch_min` members may instead be built left-factored
//!   (`altFactored`: members sharing a head become `head (tails)`), which denotes the same
//!   language.
//! With these laws the derivatives of an expression are finitely many up to the normal form
//! (Brzozowski 1964; Owens, Reppy, Turon 2009), so the lazily built DFA is finite.
//!
//! A plain term (no intersection, no complement) denotes the empty language exactly when it is
//! `nothing`: every constructor that could produce an empty language from non-empty parts
//! returns `nothing` instead, and the lexer relies on this ("dead state" is one comparison).
//! Terms with intersections or complements need `isEmpty`.
//!
//! ## Length bounds, and deciding "length bound ∧ pattern" arithmetically
//!
//! Every term carries the byte length of its shortest and longest word (`Lengths`), computed
//! once when the term is interned from its children's: exact for plain terms, bounds for the
//! rest. Two uses (and beside them a rule that needs no lengths):
//! - `andAll` returns `nothing` when its members' length intervals do not meet. A JSON string
//!   with `pattern` and `maxLength` is the intersection `"P" ∩ "C{0,n}"`; once the text has
//!   used the length budget, the counter's longest rest is shorter than the pattern's
//!   shortest, and the intersection is ∅ by arithmetic, with no search.
//! - `isEmpty` first tries witnesses: the shortest word of each plain member (built byte by
//!   byte from the length table), checked against the other members. In a lexer over such an
//!   intersection almost every state is alive and the pattern's shortest completion (`"`, or a
//!   character and `"`) fits the counter left, so one short walk replaces a breadth-first
//!   search that derived the whole intersection by every byte class. The member that leads
//!   the walk keeps the lead until its word is done (two searches intersected otherwise
//!   undo each other's partial match at every byte). When both walks fail on three plain
//!   members or more, a small search (`WitnessSearch`) satisfies the members nearest to done
//!   first: several searches inside a length bound, which the walks pad past.
//! - An intersection with members x and ¬y is ∅ when x ⊆ y by structure (`includes`): JSON
//!   Schema keys that exclude each other become ∅ as soon as the text has matched an
//!   excluded pattern, at construction, with no search.
//! Only when neither interval arithmetic, a witness nor inclusion decides does the exact
//! search run. It is best first (A*): the term with the least bytes read plus shortest word
//! left goes first, so a non-empty intersection is shown along about its shortest word's
//! path, where breadth first visited every term of fewer bytes (the product of all members'
//! states); which terms it visits depends on lengths and bytes, not on term ids. An empty one
//! is searched whole; before that, its pairs of members are searched on their own, since a
//! contradiction between two members (`^....$` against `minLength` 10) has a far smaller
//! product. The search keeps each term's derivatives by every byte class as
//! one row, so a search repeated by every call (one that runs out of fuel) reads rows instead
//! of deriving again; an intersection is derived through its members' rows (members recur
//! from term to term), one `andAll` per distinct vector of member derivatives.
//!
//! ## Work is bounded, and charged by size
//!
//! Every operation spends `fuel` in proportion to the work it does, so that fuel bounds wall
//! time: a constructor spends one unit plus one per word of the term it interns (hashing and
//! comparing a run is linear in its length) and one per member it sorts; `deriv` spends one
//! unit per call, cache hits included (a search that re-derives cached terms millions of times
//! is still work) except for a byte-set head, read off the set's bits and paid for by the
//! caller's per-member charge; the emptiness search spends two units per term it visits per
//! byte class (its visited set and queue grow with it). The
//! term count is capped by `expr_count_max`. Running out is `error.LimitExceeded` with the
//! limit recorded (`limits.zig`), never a hang. docs/limits.md has the calibration:
//! a unit costs 5–40 ns measured across MaskBench and the hostile corpus.

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

pub const ExprId = enum(u32) {
    nothing = 0,
    epsilon = 1,
    _,

    pub fn index(self: ExprId) u32 {
        return @backingInt(self);
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
    /// A run of ASCII digits read as a decimal number, modulo `modulus`: `modulus`, `residue`,
    /// `target`, `options` (no child terms). It matches the digit strings w, the empty one
    /// included, with (residue·10^|w| + value(w)) mod modulus = target: `residue` is what the
    /// digits read so far left (0 at the start), so the derivative by digit d is the same term
    /// with residue (10·residue + d) mod modulus, and the term has at most `modulus`
    /// derivatives. Options (`digits_mod_point`, `digits_mod_negated`): the run may also hold
    /// '.' bytes, which leave the residue as it is (the digits of `12.5` read as 125: a
    /// decimal's digits modulo a number coprime to 10, which is what `multipleOf` 9.5 asks of
    /// them besides their last digits); the residue must end anything but `target` (`not
    /// multipleOf` as a plain term: beside a `multipleOf`, a complement would leave emptiness
    /// to a search over the product of their residues, a plain term to the witness walk).
    /// Never empty (past ⌈log10 modulus⌉ digits every residue is reachable; a negated one
    /// takes at most one digit), so it is plain. 2 ≤ modulus ≤ `digits_modulus_max`, residue
    /// and target below it (`digitsMod`).
    digits_mod,
};

/// Largest modulus of a `digits_mod` term. Work per byte does not depend on it (a derivative
/// is a multiply and a remainder), but a term has up to `modulus` derivatives, each a lexer
/// state when the text reaches it, and its shortest word is found by trying up to
/// ⌈log10 modulus⌉ + 1 lengths; at 10^6 that is 7 tries in 64-bit arithmetic, and the lexer's
/// state limit (`dfa_state_count_max`) bounds what a long run of numbers can build.
pub const digits_modulus_max: u32 = 1_000_000;

/// `digits_mod` options: '.' bytes are read and leave the residue as it is.
pub const digits_mod_point: u32 = 1;
/// `digits_mod` options: the run matches when its residue ends anything but the target.
pub const digits_mod_negated: u32 = 2;

/// The digits '0'-'9' as a byte set, and '.' too with `point`.
fn digitBytes(point: bool) ByteSet {
    var set: ByteSet = .{};
    set.addRange('0', '9');
    if (point) set.add('.');
    return set;
}

/// The shortest digit strings w of `digits_mod(modulus, residue, target, options)`: their
/// length, and the value of the least of them (its digits, leading zeros included). With k
/// digits the values residue·10^k + v, v < 10^k, reach target exactly when
/// (target − residue·10^k) mod modulus < 10^k, which holds once 10^k ≥ modulus: at most
/// ⌈log10 modulus⌉ + 1 tries. Negated: none when the residue is not the target already, else
/// the least digit that moves it off (0 or 1 does: they lead to residues 1 apart).
pub fn digitsModShortest(modulus: u32, residue: u32, target: u32, options: u32) struct { len: u32, value: u64 } {
    assert(modulus >= 2 and residue < modulus and target < modulus);
    const m: u64 = modulus;
    if (options & digits_mod_negated != 0) {
        if (residue != target) return .{ .len = 0, .value = 0 };
        const d: u64 = if ((@as(u64, residue) * 10) % m != target) 0 else 1;
        return .{ .len = 1, .value = d };
    }
    var k: u32 = 0;
    var power: u64 = 1; // 10^k
    while (true) : ({
        k += 1;
        power *= 10;
    }) {
        const shifted = (@as(u64, residue) * (power % m)) % m;
        const need = (@as(u64, target) + m - shifted) % m;
        if (need < power) return .{ .len = k, .value = need };
        assert(power < m); // 10^k ≥ modulus always succeeds
    }
}

/// The number of decimal digits after which every residue modulo `modulus` can be reached
/// from any other: the least k with 10^k ≥ modulus (`completionMax` of a `digits_mod` term).
fn digitsModReach(modulus: u32) u32 {
    var k: u32 = 0;
    var power: u64 = 1;
    while (power < modulus) : (power *= 10) k += 1;
    return k;
}

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

    pub fn intersectWith(self: *ByteSet, other: ByteSet) void {
        for (&self.bits, other.bits) |*a, b| a.* &= b;
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

/// What is known of the bytes of a term's words: every byte of every word is in `alphabet`
/// (a superset), and every word holds each byte of `required` (a subset). See
/// `ExprSet.bytesContradict`.
pub const ByteFacts = struct {
    alphabet: ByteSet,
    required: ByteSet,

    const unknown: ByteFacts = .{ .alphabet = .{ .bits = @splat(std.math.maxInt(u32)) }, .required = .{} };
};

fn byteSetWithin(inner: ByteSet, outer: ByteSet) bool {
    for (inner.bits, outer.bits) |a, b| if (a & ~b != 0) return false;
    return true;
}

pub const Error = error{ LimitExceeded, OutOfMemory };

fn orderU32(a: u32, b: u32) std.math.Order {
    return std.math.order(a, b);
}

/// Recursion bound for `deriv`; deeper terms (a thousand optional parts in a row) are refused.
/// A level takes ~250 bytes of the host's native stack (wasmtime JIT code; wasmtime gives wasm
/// 512 KiB): at 4,000, 2,200 optional groups in a row ran out of it, a trap that retired the
/// instance. MaskBench needs 11 levels at most.
pub const deriv_depth_max: u32 = 1_000;

/// Slots of the derivative cache past which a step (a mask, a consume: `step_fuel`) empties it,
/// keeping its memory, instead of growing it. Growing a hash map rehashes every entry into new
/// memory touched for the first time, all in the one call that crosses the load: at 2^19 and
/// 2^20 slots (6.5 and 13 MB) that was 6-10 ms on top of the call's own work (MaskBench
/// Github_hard---o62060, Github_easy---o21053). Capped here, a step grows it to 2^18 slots at
/// most (3.3 MB, about 2 ms), and the derivatives it forgets are recomputed (paid with fuel like
/// the first time): a grammar that needs this many in its steps makes new lexer states all the
/// time, whose derivatives are mostly of new terms anyway. Compiling (`compile_fuel`) grows the
/// cache freely: an emptiness search there may need more than the cap at once (MaskBench
/// Handwritten---string2 ran out of compile fuel re-deriving), and its time is compile time.
pub const default_deriv_cache_slots_max: u32 = 1 << 18;

/// Nesting bound of left factoring (see `factorHeads`): past it, members that share a head stay
/// apart (still exact; the derivative by the head is then an unfactored alternation).
pub const factor_depth_max: u32 = 64;

/// Alternations with at least this many branches are built factored (`altFactored`) by the
/// regex parser and the lexeme merge; smaller ones, and every alternation a derivative builds,
/// keep the plain normal form.
///
/// Why not always: the plain form is what the structural rules read (`absorbedCount` looks for
/// the members of `x` among those of `c`, one level deep), and the DFAs, fuel figures and
/// MaskBench results of every existing grammar were measured with it. Large alternations are
/// lists of words, where the trie is what pays; their derivatives are subterms of the trie, so
/// they need no factoring of their own.
pub const factor_branch_min: usize = 16;

/// Nesting bound of `clampCounts`: deeper parts of a term are left unclamped (exact, only
/// not clamped), so recursion stays bounded; a term's nesting grows with a long literal.
pub const clamp_depth_max: u32 = 256;

/// Longest witness `isEmpty` builds from a member's shortest word before it falls back to the
/// search (a witness costs one derivative per byte and member).
pub const witness_length_max: u32 = 1024;

/// Bytes a witness walk may try off its leader's shortest path, in all (each costs a derivative
/// per member); past it the search decides.
pub const witness_scan_max: u32 = 2048;

/// Most of an intersection's shortest length that lengthens a witness walk (see `hasWitness`).
pub const witness_bound_max: u32 = 1 << 20;

/// The last few bytes a witness walk found by scanning, most recent first (see `stepToward`).
const RecentBytes = struct {
    bytes: [4]u8 = undefined,
    count: u8 = 0,

    fn add(self: *RecentBytes, b: u8) void {
        const keep: usize = @min(self.count, self.bytes.len - 1);
        std.mem.copyBackwards(u8, self.bytes[1 .. keep + 1], self.bytes[0..keep]);
        self.bytes[0] = b;
        self.count = @intCast(keep + 1);
    }
};

/// Changes of leader after which the witness walk keeps its leader (see `hasWitness`).
pub const witness_switches_max: u32 = 4;
/// Terms the witness search of `hasWitness` (`WitnessSearch`) expands before it gives up:
/// Handwritten---allany23's lexeme needs 20-30 of them, and a search that fails costs about
/// as much as the exact search's first `search_expansions_first` expansions of the same term.
pub const witness_search_expansions_max: u32 = 64;
/// Members at most of an intersection the witness search tries: an expansion derives the
/// intersection by up to one byte per member, so with more members than byte classes it
/// would cost more than an expansion of the exact search (MaskBench's largest: 19).
pub const witness_search_members_max: usize = 16;

/// Terms the exact emptiness search expands before it tries the intersection's pairs of
/// members (`ExprSet.emptyPair`), and at most per pair.
pub const search_expansions_first: u32 = 64;
pub const search_expansions_pair: u32 = 512;
/// Terms it expands after the pairs before it tries the intersection with its length bounds
/// counted from 0 (`ExprSet.emptyRelaxed`; most searches that pass the first pause end
/// within these: Handwritten allany15's at 65-95), and at most for that relaxation.
pub const search_expansions_second: u32 = 64;
pub const search_expansions_relaxed: u32 = 512;

/// Steps (`ExprSet.includes` calls) one "x ∩ ¬y with x ⊆ y" check may take when an
/// intersection is built, and when `isEmpty` tries it before its search.
pub const exclusion_budget_construct: u32 = 64;
pub const exclusion_budget_empty: u32 = 4096;

/// Terms whose `ByteFacts` are remembered before the memo is emptied (68 bytes an entry,
/// about 2 MB at most with the table's slack): facts are cheap to rebuild, a unit per term.
pub const byte_facts_count_max: u32 = 1 << 14;

/// Entries the emptiness search's row cache may hold (4 bytes each) before it is cleared.
pub const row_words_max: usize = 4 << 20;
const row_boolean_bit: u32 = 1 << 31;

/// Bounds on the byte length of a term's words: exact for plain terms (the shortest and the
/// longest word), bounds for terms with intersections or complements. `max == unbounded`: no
/// longest word; `min == unbounded` only for ∅ (so ∅'s interval is empty).
pub const Lengths = struct {
    min: u32,
    max: u32,

    pub const unbounded: u32 = std.math.maxInt(u32);

    pub fn isEmpty(self: Lengths) bool {
        return self.min > self.max;
    }
};

pub const Limits = struct {
    /// Distinct terms the set may hold (about 40 bytes each with the tables).
    expr_count_max: u32 = 2_000_000,
};

const Span = struct { start: u32, len: u32 };

/// Are two runs of words equal? A plain loop on purpose: `std.mem.eql` compares through byte
/// vectors, which cranelift (wasmtime) compiles to about 300 ns a call for a 9-word run, so
/// half of compiling a 10,000-word alternation was spent in it; this loop is a few ns.
pub fn wordsEqual(a: []const u32, b: []const u32) bool {
    if (a.len != b.len) return false;
    for (a, b) |x, y| if (x != y) return false;
    return true;
}

/// Are two byte strings equal? `wordsEqual`'s reason again: `std.mem.eql(u8, …)` compares
/// strings longer than 16 bytes through byte vectors that cranelift spills and reads back a
/// lane at a time, so comparing pattern texts (a JSON string's is 218 bytes) was an eighth of
/// a median MaskBench compile in wasmtime; eight bytes a step in a plain loop is a few ns.
pub fn bytesEqual(a: []const u8, b: []const u8) bool {
    if (a.len != b.len) return false;
    var i: usize = 0;
    while (i + 8 <= a.len) : (i += 8) {
        if (std.mem.readInt(u64, a[i..][0..8], .little) != std.mem.readInt(u64, b[i..][0..8], .little)) return false;
    }
    while (i < a.len) : (i += 1) if (a[i] != b[i]) return false;
    return true;
}

/// The hash of a byte string and a small `salt` (flags): `hashWords`'s round, eight bytes at a
/// time (`std.hash.Wyhash` multiplies through `__multi3` in wasm32).
pub fn hashBytes(bytes: []const u8, salt: u8) u64 {
    var h: u64 = 0x9E37_79B9_7F4A_7C15 ^ (@as(u64, bytes.len) << 8 | salt);
    var i: usize = 0;
    while (i + 8 <= bytes.len) : (i += 8) h = hashRound(h, std.mem.readInt(u64, bytes[i..][0..8], .little));
    var tail: u64 = 0;
    for (bytes[i..], 0..) |b, j| tail |= @as(u64, b) << @intCast(8 * j);
    h = (h ^ tail) *% 0xBF58_476D_1CE4_E5B9;
    return hashFinish(h);
}

/// One word into a running hash: a multiply-xorshift round.
fn hashRound(h: u64, w: u64) u64 {
    const m = (h ^ w) *% 0xBF58_476D_1CE4_E5B9;
    return m ^ (m >> 29);
}

/// The splitmix64 finalizer's last steps: every input bit reaches every output bit.
fn hashFinish(h: u64) u64 {
    var x = h ^ (h >> 31);
    x *%= 0x94D0_49BB_1331_11EB;
    return x ^ (x >> 32);
}

/// Hash-map context for byte-string keys (`bytesEqual`, `hashBytes`): `std.StringHashMap`'s
/// without its two wasm32 slow paths.
pub const BytesContext = struct {
    pub fn hash(_: BytesContext, key: []const u8) u64 {
        return hashBytes(key, 0);
    }

    pub fn eql(_: BytesContext, a: []const u8, b: []const u8) bool {
        return bytesEqual(a, b);
    }
};

/// The hash of a run of words: a multiply-xorshift per word and a final avalanche (the
/// splitmix64 finalizer). `std.hash.Wyhash` needs a 64×64→128-bit multiply, a library call in
/// wasm32 (`__multi3`); this uses the native 64-bit multiply and costs a third as much there.
pub fn hashWords(words: []const u32) u64 {
    var h: u64 = 0x9E37_79B9_7F4A_7C15 ^ @as(u64, words.len);
    for (words) |w| h = hashRound(h, w);
    return hashFinish(h);
}

/// A run's hash kept in 32 bits (`ExprSet.hashes`, the lexer's state hashes) and spread back
/// to the 64 bits a hash map reads (its low bits pick the slot, its top 7 the fingerprint).
pub fn hashWords32(words: []const u32) u32 {
    return @truncate(hashWords(words));
}

pub fn spreadHash32(h: u32) u64 {
    return @as(u64, h) *% 0x9E37_79B9_7F4A_7C15;
}

/// Hash-table context for integer keys (ids, packed pairs): one multiply-xorshift round and
/// the splitmix64 finalizer. `std.AutoHashMap` hashes with Wyhash, whose 64×64→128-bit
/// multiply is a library call in wasm32 (`__multi3`): in MaskBench's heaviest masks, lookups
/// in the derivative cache spent an eighth of the call there.
pub fn IntContext(comptime K: type) type {
    return struct {
        pub fn hash(_: @This(), key: K) u64 {
            return hashFinish(@as(u64, key) *% 0x9E37_79B9_7F4A_7C15); // K: an unsigned integer
        }
        pub fn eql(_: @This(), a: K, b: K) bool {
            return a == b;
        }
    };
}

/// A hash map with integer keys hashed by `IntContext`.
pub fn IntMap(comptime K: type, comptime V: type) type {
    return std.HashMapUnmanaged(K, V, IntContext(K), std.hash_map.default_max_load_percentage);
}

/// The hash-consing table: term ids by the hash of their run, open addressing with linear
/// probing over a power-of-two array. Each slot keeps the run's 32-bit hash beside the id, so
/// a probe compares a run only when the hashes match and reads nothing else, and growing the
/// table (or copying a base set's, `ExprSet.initFrom`) moves slots without reading any run:
/// growing past about 100,000 terms, a rehash that read the runs added 6-8 ms to one call
/// (MaskBench Github_easy---o21053). `std.HashMapUnmanaged` with contexts did the same work
/// in about twice the instructions per lookup, and copying a base set's table was one
/// insertion through it per term (a twentieth of a median MaskBench compile).
///
/// At most four fifths full: at seven eighths the probe runs made a median grammar's first
/// mask 20% slower natively; at three quarters the table's blocks (8 bytes a slot) changed
/// how a 10,000-word grammar's compile reused freed memory, and a second compile grew linear
/// memory (`test_large_alternations`).
///
/// Invariants: `slots.len` is 0 or a power of two at least `capacity_min`; at most four
/// fifths of the slots are used; nothing is ever removed (a failed intern checks everything
/// before it inserts), so a probe ends at the first empty slot.
const TermTable = struct {
    slots: []Slot = &.{},
    count: u32 = 0,

    const Slot = struct { hash: u32, id: u32 };
    const empty_id: u32 = std.math.maxInt(u32);
    const capacity_min: usize = 16;

    comptime {
        assert(@sizeOf(Slot) == 8);
    }

    fn deinit(self: *TermTable, gpa: Allocator) void {
        gpa.free(self.slots);
        self.* = undefined;
    }

    pub fn sizeBytes(self: *const TermTable) usize {
        return @sizeOf(Slot) * self.slots.len;
    }

    /// Slots for `count` terms at most four fifths full.
    fn slotsFor(count: usize) usize {
        return std.math.ceilPowerOfTwoAssert(usize, @max(capacity_min, count + count / 4 + 1));
    }

    /// Room for `total` terms without growing.
    fn ensureTotalCapacity(self: *TermTable, gpa: Allocator, total: usize) Allocator.Error!void {
        if (5 * total <= 4 * self.slots.len) return;
        const slots = try gpa.alloc(Slot, slotsFor(total));
        placeAll(slots, self.slots);
        gpa.free(self.slots);
        self.slots = slots;
    }

    /// Empties `slots` and puts the used ones of `from` in them, each by its stored hash.
    fn placeAll(slots: []Slot, from: []const Slot) void {
        @memset(slots, .{ .hash = 0, .id = empty_id });
        for (from) |slot| {
            if (slot.id != empty_id) insertInto(slots, slot);
        }
    }

    /// Puts `slot` in the first empty slot of its probe sequence (its id is not there yet).
    fn insertInto(slots: []Slot, slot: Slot) void {
        const mask = slots.len - 1;
        var i: usize = slot.hash & mask;
        while (slots[i].id != empty_id) i = (i + 1) & mask;
        slots[i] = slot;
    }

    /// The id of the term whose run is `run` (hash `hash32`), or the slot where it goes.
    /// There must be an empty slot (`ensureTotalCapacity`).
    fn find(self: *const TermTable, set: *const ExprSet, run: []const u32, hash32: u32) union(enum) { found: u32, vacant: usize } {
        assert(self.count < self.slots.len);
        const mask = self.slots.len - 1;
        var i: usize = hash32 & mask;
        while (true) : (i = (i + 1) & mask) {
            const slot = self.slots[i];
            if (slot.id == empty_id) return .{ .vacant = i };
            if (slot.hash == hash32 and wordsEqual(run, set.runOf(slot.id))) return .{ .found = slot.id };
        }
    }

    /// A copy of `base`'s table with room for `total` terms: its slots as they are when the
    /// sizes agree, else each moved by its stored hash.
    fn copyFrom(self: *TermTable, gpa: Allocator, base: *const TermTable, total: usize) Allocator.Error!void {
        assert(self.count == 0 and self.slots.len == 0);
        const len = @max(slotsFor(total), base.slots.len);
        self.slots = try gpa.alloc(Slot, len);
        if (len == base.slots.len) {
            @memcpy(self.slots, base.slots);
        } else {
            placeAll(self.slots, base.slots);
        }
        self.count = base.count;
    }
};

pub const ExprSet = struct {
    gpa: Allocator,
    words: std.ArrayList(u32) = .empty,
    spans: std.ArrayList(Span) = .empty,
    table: TermTable = .{},
    deriv_cache: IntMap(u64, ExprId) = .empty,
    empty_cache: IntMap(u32, bool) = .empty,
    /// Terms the exact emptiness search has expanded in this set's life (a diagnostic).
    search_expanded: u64 = 0,
    /// Has `emptyRelaxed` shown an intersection empty? Then the exact search looks up the
    /// relaxation of each intersection it reaches among the remembered answers, and tries
    /// an intersection's relaxation right after its pairs.
    relaxed_shown: bool = false,
    /// Per term: `Lengths`, filled when the term is interned.
    lengths: std.ArrayList(Lengths) = .empty,
    /// Per term: `hashWords32` of its run (what `table` hashes it by).
    hashes: std.ArrayList(u32) = .empty,
    /// Per term: `completionBound`, filled when the term is interned.
    completion_max: std.ArrayList(u32) = .empty,
    /// `clampCounts` results, keyed by (byte bound, term); emptied like `deriv_cache`.
    clamp_cache: IntMap(u64, ExprId) = .empty,
    /// `byteFacts` per term, emptied past `byte_facts_count_max` terms.
    byte_facts_cache: IntMap(u32, ByteFacts) = .empty,
    /// `excludesItself`'s answers per (member, excluded term, budget), emptied like
    /// `deriv_cache` (see `includesMemo`).
    include_cache: IntMap(u64, bool) = .empty,
    scratch: std.ArrayList(u32) = .empty,
    /// Units of work left (see the file comment); `deriv`, the constructors and `isEmpty`
    /// spend it. Whoever sets it names the budget in `fuel_limit`.
    fuel: u64 = std.math.maxInt(u64),
    /// The limit running out of `fuel` reports (`step_fuel` in calls, `compile_fuel` while
    /// compiling).
    fuel_limit: limit_error.Kind = .step_fuel,
    /// Fuel spent since `refuel` (for measurements and the calibration in docs/limits.md).
    fuel_spent: u64 = 0,
    /// The emptiness search's rows: per term it derived by every byte class, the offset in
    /// `row_words` of its derivatives by the bytes `row_representatives` (bit 31 of an entry:
    /// the derivative is boolean). Bounded by `row_words_max` (then cleared).
    row_cache: IntMap(u32, u32) = .empty,
    row_words: std.ArrayList(u32) = .empty,
    row_representatives: [256]u8 = undefined,
    row_representative_count: u16 = 0,
    limits: Limits = .{},
    /// `default_deriv_cache_slots_max`; a field so that tests can make the cache forget.
    deriv_cache_slots_max: u32 = default_deriv_cache_slots_max,
    /// Current recursion depth of `deriv` (nested nullable concatenations recurse).
    deriv_depth: u32 = 0,
    /// The byte set of each single byte, once interned (`nothing` until then).
    byte_ids: [256]ExprId = @splat(.nothing),
    /// Current nesting of `factorHeads` (an alternation factored inside the factoring of
    /// another).
    factor_depth: u32 = 0,
    /// Terms below this id are a copy of the instance's base set (`initFrom`,
    /// `pattern_cache.zig`): the hottest patterns' terms, which a grammar then finds by id
    /// instead of interning them again. 0 in a set of its own.
    base_count: u32 = 0,
    /// The base set's generation when it was copied (the cache's ids are valid in this set
    /// only when it matches).
    base_generation: u32 = 0,
    /// One bit per base term this set *used*: met by interning, or one of the byte sets of a
    /// base pattern it was given (`markBase`). `forEachByteSet` visits only these of the
    /// base terms, so the byte classes are those of the terms the grammar built, as in a set
    /// of its own.
    base_marks: []u64 = &.{},

    pub fn init(gpa: Allocator, limits: Limits) Error!ExprSet {
        var set: ExprSet = .{ .gpa = gpa, .limits = limits };
        errdefer set.deinit();
        const nothing = try set.intern(&.{@backingInt(Tag.nothing)});
        const epsilon = try set.intern(&.{@backingInt(Tag.epsilon) | flag_nullable});
        assert(nothing == .nothing and epsilon == .epsilon);
        return set;
    }

    /// An empty set with room for `term_count` terms (`reserve`).
    pub fn initCapacity(gpa: Allocator, limits: Limits, term_count: u32) Error!ExprSet {
        var set = try init(gpa, limits);
        errdefer set.deinit();
        try set.reserve(term_count);
        return set;
    }

    /// A set that starts as a copy of `base` (a set of its own, at most `base_terms_max`
    /// terms), with room for `term_count` more terms (`reserve`). Its terms are `base`'s, with
    /// their ids, none of them marked used: a term the owner builds that `base` has gets
    /// `base`'s id, and marks it. The copy is the arrays' memory and one table insertion per
    /// base term (by its stored hash); nothing is derived or checked.
    pub fn initFrom(gpa: Allocator, limits: Limits, base: *const ExprSet, generation: u32, term_count: u32) Error!ExprSet {
        assert(base.base_count == 0);
        const n = base.count();
        var set: ExprSet = .{ .gpa = gpa, .limits = limits };
        errdefer set.deinit();
        const total = n + term_count;
        try set.words.ensureTotalCapacity(gpa, base.words.items.len + 4 * @as(usize, term_count));
        set.words.appendSliceAssumeCapacity(base.words.items);
        try set.spans.ensureTotalCapacity(gpa, total);
        set.spans.appendSliceAssumeCapacity(base.spans.items);
        try set.lengths.ensureTotalCapacity(gpa, total);
        set.lengths.appendSliceAssumeCapacity(base.lengths.items);
        try set.hashes.ensureTotalCapacity(gpa, total);
        set.hashes.appendSliceAssumeCapacity(base.hashes.items);
        try set.completion_max.ensureTotalCapacity(gpa, total);
        set.completion_max.appendSliceAssumeCapacity(base.completion_max.items);
        try set.table.copyFrom(gpa, &base.table, total);
        assert(set.table.count == n);
        set.base_marks = try gpa.alloc(u64, (n + 63) / 64);
        @memset(set.base_marks, 0);
        set.base_count = n;
        set.base_generation = generation;
        return set;
    }

    /// Notes that this set uses base term `id` (see `base_marks`).
    pub fn markBase(self: *ExprSet, id: u32) void {
        assert(id < self.base_count);
        self.base_marks[id >> 6] |= @as(u64, 1) << @as(u6, @truncate(id));
    }

    fn baseMarked(self: *const ExprSet, id: u32) bool {
        return self.base_marks[id >> 6] & (@as(u64, 1) << @as(u6, @truncate(id))) != 0;
    }

    /// Room in the term table for `term_count` more terms, taken at once (the arrays grow as
    /// they do): `reserve`'s for a large grammar, whose arrays' blocks, taken in another
    /// order, reused freed memory less well, while the table's one block does not (each
    /// doubling rehashed every slot: a fifth of MaskBench kb_1161's core compile, 0.6 ms).
    /// Only a hint: interning still grows it.
    pub fn reserveTable(self: *ExprSet, term_count: u32) Allocator.Error!void {
        try self.table.ensureTotalCapacity(self.gpa, self.count() + term_count);
    }

    /// Room for `term_count` more terms of about four words each, taken at once: the tables
    /// otherwise grow by doubling from a few entries, and the hash table rehashes at each step
    /// (a twentieth of a median MaskBench compile). Only a hint: interning still grows them.
    pub fn reserve(self: *ExprSet, term_count: u32) Allocator.Error!void {
        const total = self.count() + term_count;
        try self.table.ensureTotalCapacity(self.gpa, total);
        try self.spans.ensureTotalCapacity(self.gpa, total);
        try self.lengths.ensureTotalCapacity(self.gpa, total);
        try self.hashes.ensureTotalCapacity(self.gpa, total);
        try self.completion_max.ensureTotalCapacity(self.gpa, total);
        try self.words.ensureTotalCapacity(self.gpa, self.words.items.len + 4 * @as(usize, term_count));
    }

    pub fn deinit(self: *ExprSet) void {
        self.words.deinit(self.gpa);
        self.spans.deinit(self.gpa);
        self.table.deinit(self.gpa);
        self.deriv_cache.deinit(self.gpa);
        self.empty_cache.deinit(self.gpa);
        self.row_cache.deinit(self.gpa);
        self.row_words.deinit(self.gpa);
        self.lengths.deinit(self.gpa);
        self.hashes.deinit(self.gpa);
        self.completion_max.deinit(self.gpa);
        self.clamp_cache.deinit(self.gpa);
        self.include_cache.deinit(self.gpa);
        self.byte_facts_cache.deinit(self.gpa);
        self.scratch.deinit(self.gpa);
        self.gpa.free(self.base_marks);
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
        return @fromBackingInt(@intCast(@as(u8, @truncate(self.runOf(e.index())[0]))));
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

    /// A fresh budget of `units` for the next operation, reported as `limit` when it runs out.
    pub fn refuel(self: *ExprSet, units: u64, limit: limit_error.Kind) void {
        self.fuel = units;
        self.fuel_limit = limit;
        self.fuel_spent = 0;
    }

    /// Spends `units` of fuel (the lexer charges its own table work here too).
    pub fn spend(self: *ExprSet, units: u64) Error!void {
        if (self.fuel < units) {
            self.fuel_spent += self.fuel;
            self.fuel = 0;
            return limit_error.exceeded(self.fuel_limit);
        }
        self.fuel -= units;
        self.fuel_spent += units;
    }

    pub fn lengthsOf(self: *const ExprSet, e: ExprId) Lengths {
        return self.lengths.items[e.index()];
    }

    /// The `Lengths` of a run about to be interned, from its children's.
    fn runLengths(self: *const ExprSet, run: []const u32) Lengths {
        const unbounded = Lengths.unbounded;
        const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(run[0]))));
        switch (t) {
            .nothing => return .{ .min = unbounded, .max = 0 },
            .epsilon => return .{ .min = 0, .max = 0 },
            .byte_set => return .{ .min = 1, .max = 1 },
            .concat => {
                const h = self.lengths.items[run[1]];
                const tl = self.lengths.items[run[2]];
                return .{ .min = h.min +| tl.min, .max = h.max +| tl.max };
            },
            .alt => {
                var out: Lengths = .{ .min = unbounded, .max = 0 };
                for (run[1..]) |m| {
                    const l = self.lengths.items[m];
                    out = .{ .min = @min(out.min, l.min), .max = @max(out.max, l.max) };
                }
                return out;
            },
            .repeat => {
                const c = self.lengths.items[run[1]];
                const min_count = run[2];
                const max_count = run[3];
                const max = if (c.max == 0)
                    0
                else if (max_count == repeat_unbounded) unbounded else c.max *| max_count;
                return .{ .min = c.min *| min_count, .max = max };
            },
            .and_ => {
                var out: Lengths = .{ .min = 0, .max = unbounded };
                for (run[1..]) |m| {
                    const l = self.lengths.items[m];
                    out = .{ .min = @max(out.min, l.min), .max = @min(out.max, l.max) };
                }
                return out;
            },
            .not_ => return .{ .min = 0, .max = unbounded },
            .digits_mod => return .{ .min = digitsModShortest(run[1], run[2], run[3], run[4]).len, .max = unbounded },
        }
    }

    /// A bound on the shortest completion of every derivative: for a plain term `e`, no
    /// derivative `e·w` that is not ∅ has a shortest word longer than `completionMax(e)` bytes
    /// (`Lengths.unbounded` for terms with intersections or complements: not bounded here).
    /// `clampedLengthBound` reads it: a prefix the pattern allows can be finished within this
    /// many more bytes.
    pub fn completionMax(self: *const ExprSet, e: ExprId) u32 {
        return self.completion_max.items[e.index()];
    }

    /// `completionMax` of a run about to be interned, from its children's. By cases, with
    /// min(x) the shortest word of x (derivatives that are ∅ do not count):
    /// - a byte set: itself (1) or ε (0);
    /// - `h t`: a derivative is `(h·u) t ∪ t·u₂ ∪ …`; a live branch of the first kind
    ///   finishes within `mm(h) + min(t)`, of the second within `mm(t)`;
    /// - an alternation: a derivative is the alternation of the members' derivatives;
    /// - `r{a,b}`: a derivative is `(r·u) r{a-k-1,b-k-1}` after k whole copies (or the term
    ///   itself, `a·min(r)` ≤ `mm(r) + (a-1)·min(r)` since `mm(r)` ≥ `min(r)`), so
    ///   `mm(r) + (a-1)·min(r)`, or `mm(r)` when a = 0.
    fn runCompletionMax(self: *const ExprSet, run: []const u32) u32 {
        const unbounded = Lengths.unbounded;
        if (run[0] & flag_boolean != 0) return unbounded;
        const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(run[0]))));
        const mm = self.completion_max.items;
        switch (t) {
            .nothing, .epsilon => return 0,
            .byte_set => return 1,
            .concat => return @max(mm[run[1]] +| self.lengths.items[run[2]].min, mm[run[2]]),
            .alt => {
                var out: u32 = 0;
                for (run[1..]) |m| out = @max(out, mm[m]);
                return out;
            },
            .repeat => return mm[run[1]] +| ((run[2] -| 1) *| self.lengths.items[run[1]].min),
            .and_, .not_ => return unbounded,
            // Every derivative reaches its target within that many digits.
            .digits_mod => return digitsModReach(run[1]),
        }
    }

    fn intern(self: *ExprSet, run: []const u32) Error!ExprId {
        // Hashing and comparing the run is linear in its length.
        try self.spend(run.len);
        const hash32 = hashWords32(run);
        try self.table.ensureTotalCapacity(self.gpa, self.table.count + 1);
        const slot = switch (self.table.find(self, run, hash32)) {
            .found => |found| {
                if (found < self.base_count) self.markBase(found);
                return @fromBackingInt(@intCast(found));
            },
            .vacant => |slot| slot,
        };
        // Ids stay below 2^31 whatever the limit says: the search's rows use bit 31.
        if (self.spans.items.len >= @min(self.limits.expr_count_max, row_boolean_bit - 1)) {
            return limit_error.exceeded(.expressions);
        }
        const id: u32 = @intCast(self.spans.items.len);
        const start: u32 = @intCast(self.words.items.len);
        try self.lengths.ensureUnusedCapacity(self.gpa, 1);
        try self.hashes.ensureUnusedCapacity(self.gpa, 1);
        try self.completion_max.ensureUnusedCapacity(self.gpa, 1);
        try self.words.appendSlice(self.gpa, run);
        self.spans.append(self.gpa, .{ .start = start, .len = @intCast(run.len) }) catch |err| {
            self.words.shrinkRetainingCapacity(start);
            return err;
        };
        self.lengths.appendAssumeCapacity(self.runLengths(run));
        self.hashes.appendAssumeCapacity(hash32);
        self.completion_max.appendAssumeCapacity(self.runCompletionMax(run));
        assert(self.lengths.items.len == self.spans.items.len and self.hashes.items.len == self.spans.items.len);
        assert(self.completion_max.items.len == self.spans.items.len);
        // Nothing failed: the table gets the id only now, so it never holds a term that is
        // not in the arrays.
        self.table.slots[slot] = .{ .hash = hash32, .id = id };
        self.table.count += 1;
        return @fromBackingInt(@intCast(id));
    }

    pub fn byteSet(self: *ExprSet, set: ByteSet) Error!ExprId {
        try self.spend(1);
        if (set.isEmpty()) return .nothing;
        var run: [9]u32 = undefined;
        run[0] = @backingInt(Tag.byte_set);
        @memcpy(run[1..9], &set.bits);
        return self.intern(&run);
    }

    pub fn byte(self: *ExprSet, b: u8) Error!ExprId {
        // Literal text is mostly single bytes: keep their ids instead of interning each again.
        if (self.byte_ids[b] != .nothing) {
            try self.spend(1);
            return self.byte_ids[b];
        }
        var set: ByteSet = .{};
        set.add(b);
        const id = try self.byteSet(set);
        self.byte_ids[b] = id;
        return id;
    }

    /// The literal byte string `bytes`: what `concat(byte(b), …)` from the last byte builds,
    /// and the fuel it spends, without `concat`'s cases (a byte head is not a concatenation,
    /// not a repeat, not nullable, and the tail is plain): JSON Schema key lexemes exclude
    /// their object's property names as literals, many bytes a grammar.
    pub fn literal(self: *ExprSet, bytes: []const u8) Error!ExprId {
        var result: ExprId = .epsilon;
        var i = bytes.len;
        while (i > 0) {
            i -= 1;
            const head = try self.byte(bytes[i]);
            try self.spend(1); // `concat`'s own unit
            result = if (result == .epsilon) head else try self.intern(&.{ @backingInt(Tag.concat), head.index(), result.index() });
        }
        return result;
    }

    pub fn concat(self: *ExprSet, head: ExprId, tail: ExprId) Error!ExprId {
        try self.spend(1);
        if (head == .nothing or tail == .nothing) return .nothing;
        if (head == .epsilon) return tail;
        if (tail == .epsilon) return head;
        if (self.tag(head) == .concat) {
            // Right-nest: (a b) c = a (b c). Bounded by the head's length.
            const a: ExprId = @fromBackingInt(@intCast(self.args(head)[0]));
            const b: ExprId = @fromBackingInt(@intCast(self.args(head)[1]));
            return self.concat(a, try self.concat(b, tail));
        }
        if (self.absorbedCount(head, tail)) |min| {
            // x{m,n} c* = x{m} c* when every x is a c: the extra copies are c's.
            const child: ExprId = @fromBackingInt(@intCast(self.args(head)[0]));
            return self.concat(try self.repeat(child, min, min), tail);
        }
        const flags = (if (self.nullable(head) and self.nullable(tail)) flag_nullable else 0) |
            self.booleanFlag(head) | self.booleanFlag(tail);
        return self.intern(&.{ @backingInt(Tag.concat) | flags, head.index(), tail.index() });
    }

    /// When `head` is x{m,n} with n > m and `tail` starts with c* such that every word of x is
    /// a word of c, the count m that `head` can be cut to; otherwise null.
    ///
    /// Why: an unanchored pattern `.*X{1,255}.*` (JSON Schema `pattern` is a search) has
    /// derivatives that start the counted part at every position read so far, an alternation
    /// of up to 255 counters that every byte rebuilds. `C* X{1,255} C*` denotes the same
    /// strings as `C* X C*` when X ⊆ C, and that form has two derivatives.
    fn absorbedCount(self: *const ExprSet, head: ExprId, tail: ExprId) ?u32 {
        if (self.tag(head) != .repeat or self.isBoolean(head)) return null;
        const h = self.args(head);
        if (h[2] == h[1]) return null;
        const star = if (self.tag(tail) == .concat) @as(ExprId, @fromBackingInt(@intCast(self.args(tail)[0]))) else tail;
        if (self.tag(star) != .repeat) return null;
        const t = self.args(star);
        if (t[1] != 0 or t[2] != repeat_unbounded) return null;
        if (!self.isSubset(@fromBackingInt(@intCast(h[0])), @fromBackingInt(@intCast(t[0])))) return null;
        return h[1];
    }

    /// A cheap, conservative test of L(x) ⊆ L(c) for plain terms: equal terms, byte sets, and
    /// members of an alternation (one level deep). False means "not shown".
    fn isSubset(self: *const ExprSet, x: ExprId, c: ExprId) bool {
        if (x == c) return true;
        if (self.tag(x) == .alt) {
            for (self.args(x)) |m| {
                if (!self.isMemberSubset(@fromBackingInt(@intCast(m)), c)) return false;
            }
            return true;
        }
        return self.isMemberSubset(x, c);
    }

    fn isMemberSubset(self: *const ExprSet, x: ExprId, c: ExprId) bool {
        if (x == c) return true;
        switch (self.tag(c)) {
            .byte_set => return self.tag(x) == .byte_set and byteSetWithin(self.byteSetOf(x), self.byteSetOf(c)),
            .alt => for (self.args(c)) |m_raw| {
                const m: ExprId = @fromBackingInt(@intCast(m_raw));
                if (m == x) return true;
                if (self.tag(m) == .byte_set and self.tag(x) == .byte_set and
                    byteSetWithin(self.byteSetOf(x), self.byteSetOf(m))) return true;
            } else return false,
            else => return false,
        }
    }

    /// A sound, incomplete test of L(x) ⊆ L(y) for plain terms, by their structure: false
    /// means "not shown". Each call spends one unit of `budget`; at zero the answer is false.
    /// Shown: equal terms; x = ε and y nullable; byte sets by their bits; x an alternation
    /// whose every member is included; y an alternation with a member that includes x;
    /// y = c* when x is a word of pieces each included in c* (a star absorbs any number of
    /// them); y = c* t, by giving x's head to the star or skipping the star; concatenations
    /// part by part; x{m,n} ⊆ c{m',n'} when x ⊆ c and the counts nest.
    ///
    /// Why: JSON Schema keys exclude each other as x ∩ ¬(y1 | y2 | …), and in a lexer state
    /// past an excluded pattern the intersection is empty because x's rest is included in
    /// one yi's rest (`C* netdrv_[a-z]+ C* "` in `C* "`) although no member equals it; the
    /// exact search derived the whole intersection by every byte class to show it.
    pub fn includes(self: *const ExprSet, x: ExprId, y: ExprId, budget: *u32) bool {
        if (x == y or x == .nothing) return true;
        if (budget.* == 0) return false;
        budget.* -= 1;
        const tx = self.tag(x);
        const ty = self.tag(y);
        if (tx == .epsilon) return self.nullable(y);
        if (tx == .alt) {
            for (0..self.args(x).len) |i| if (!self.includes(self.argId(x, i), y, budget)) return false;
            return true;
        }
        switch (ty) {
            .nothing, .epsilon => return false,
            .byte_set => return tx == .byte_set and byteSetWithin(self.byteSetOf(x), self.byteSetOf(y)),
            .alt => {
                // Members are sorted by id: x itself is found by a binary search.
                const members = self.args(y);
                if (std.sort.binarySearch(u32, members, x.index(), orderU32) != null) return true;
                for (0..members.len) |i| if (self.includes(x, self.argId(y, i), budget)) return true;
                return false;
            },
            .repeat => {
                const a = self.args(y);
                const c = self.argId(y, 0);
                if (a[1] == 0 and a[2] == repeat_unbounded) {
                    // y = c*: every piece of x must be in c* (c* c* = c*), or x itself in c
                    // (a JSON string's escape `\u0041` is a word of c, none of its pieces is;
                    // tried only when x's lengths fit c's, which every word of c has).
                    switch (tx) {
                        .concat => return (self.lengthsWithin(x, c) and self.includes(x, c, budget)) or
                            (self.includes(self.argId(x, 0), y, budget) and
                                self.includes(self.argId(x, 1), y, budget)),
                        .repeat => return self.includes(self.argId(x, 0), y, budget),
                        else => return self.includes(x, c, budget),
                    }
                }
                if (tx == .repeat) {
                    const b = self.args(x);
                    return b[1] >= a[1] and b[2] <= a[2] and self.includes(self.argId(x, 0), c, budget);
                }
                return self.includesCopies(x, c, a[1], a[2], budget);
            },
            .concat => {
                const h2 = self.argId(y, 0);
                const t2 = self.argId(y, 1);
                if (self.isStar(h2)) {
                    // y = c* t2: x may give its head to the star and go on, or skip the star.
                    if (tx == .concat and self.includes(self.argId(x, 0), h2, budget) and
                        self.includes(self.argId(x, 1), y, budget)) return true;
                    return self.includes(x, t2, budget);
                }
                if (tx == .concat) {
                    if (self.includes(self.argId(x, 0), h2, budget) and self.includes(self.argId(x, 1), t2, budget)) return true;
                } else if (self.nullable(t2) and self.includes(x, h2, budget)) return true;
                return self.nullable(h2) and self.includes(x, t2, budget);
            },
            // Only itself (x == y above) is shown.
            .and_, .not_, .digits_mod => return false,
        }
    }

    /// Are the lengths of the plain term x within those of the plain term c (which x ⊆ c needs)?
    fn lengthsWithin(self: *const ExprSet, x: ExprId, c: ExprId) bool {
        const lx = self.lengthsOf(x);
        const lc = self.lengthsOf(c);
        return lx.min >= lc.min and lx.max <= lc.max;
    }

    /// `includes` for y = c{lo,hi}, x not a repetition: x's pieces (the parts of its
    /// concatenation) counted as copies of c, a piece included in c as one copy, a piece
    /// p{a,b} with p included in c as a to b copies; every count they add up to must lie in
    /// [lo, hi]; an alternation left at the end is counted member by member. A piece may be
    /// empty only when c is nullable (it is in c), so counting it as a
    /// copy is sound. Why: the JSON string's `\uXXXX` escapes are spelled `[fF][0-9a-fA-F]
    /// [0-9a-fA-F]` by one translation and `[1-9a-fA-F][0-9a-fA-F]{2}` by another, and a
    /// pattern's characters are included in the plain JSON character only through them (a
    /// lookahead's exclusion beside `maxLength`: MaskBench JsonSchemaStore---webhook).
    fn includesCopies(self: *const ExprSet, x: ExprId, c: ExprId, lo: u32, hi: u32, budget: *u32) bool {
        var rest = x;
        var lo_left = lo;
        var hi_left = hi;
        while (rest != .epsilon) {
            if (budget.* == 0) return false;
            budget.* -= 1;
            if (self.tag(rest) == .alt) {
                // The last piece an alternation (`0(1X|0X|2[0-7])`): each member in what is left.
                for (0..self.args(rest).len) |i| {
                    if (!self.includesCopies(self.argId(rest, i), c, lo_left, hi_left, budget)) return false;
                }
                return true;
            }
            const is_concat = self.tag(rest) == .concat;
            const piece = if (is_concat) self.argId(rest, 0) else rest;
            var copies_min: u32 = 1;
            var copies_max: u32 = 1;
            if (self.tag(piece) == .repeat and self.includes(self.argId(piece, 0), c, budget)) {
                copies_min = self.args(piece)[1];
                copies_max = self.args(piece)[2];
            } else if (!self.includes(piece, c, budget)) return false;
            if (hi_left != repeat_unbounded) {
                if (copies_max == repeat_unbounded or copies_max > hi_left) return false;
                hi_left -= copies_max;
            }
            lo_left -|= copies_min;
            rest = if (is_concat) self.argId(rest, 1) else .epsilon;
        }
        return lo_left == 0;
    }

    /// Argument `i` of `e` (a concatenation's parts, a repetition's body) as a term id.
    fn argId(self: *const ExprSet, e: ExprId, i: usize) ExprId {
        return @fromBackingInt(@intCast(self.args(e)[i]));
    }

    fn isStar(self: *const ExprSet, e: ExprId) bool {
        if (self.tag(e) != .repeat) return false;
        const a = self.args(e);
        return a[1] == 0 and a[2] == repeat_unbounded;
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
        return self.altWith(members, false);
    }

    /// The alternation of `members`, left-factored into a trie (see `factorHeads`): for large
    /// alternations of literal-like branches (a regex `a|b|…` of many branches, merged
    /// alternative lexemes). Same language as `alt`, another term.
    pub fn altFactored(self: *ExprSet, members: []const ExprId) Error!ExprId {
        return self.altWith(members, true);
    }

    fn altWith(self: *ExprSet, members: []const ExprId, factor: bool) Error!ExprId {
        try self.spend(1 + members.len);
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
                        const inner: ExprId = @fromBackingInt(@intCast(inner_raw));
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
        // Sorting is the cost that grows with the flattened alternation.
        try self.spend(list.len);
        std.mem.sortUnstable(u32, list, {}, std.sort.asc(u32));
        // Deduplicate in place.
        var unique: usize = 0;
        for (list, 0..) |item, i| {
            if (i == 0 or item != list[unique - 1]) {
                list[unique] = item;
                unique += 1;
            }
        }
        if (unique == 0) return .nothing;
        if (unique == 1) return @fromBackingInt(@intCast(list[0]));
        if (factor) unique = try self.factorHeads(base + 1, unique);
        if (unique == 1) return @fromBackingInt(@intCast(self.scratch.items[base + 1]));
        var boolean: u32 = 0;
        for (self.scratch.items[base + 1 .. base + 1 + unique]) |m| boolean |= self.booleanFlag(@fromBackingInt(@intCast(m)));
        self.scratch.items[base] = @backingInt(Tag.alt) | (if (nullable_any) flag_nullable else 0) | boolean;
        // `intern` copies the run, and may not grow `scratch` itself.
        return self.intern(self.scratch.items[base .. base + 1 + unique]);
    }

    /// The byte set that starts `e` when `e` is a concatenation headed by one, or is one
    /// (`a = a ε`); else null.
    fn byteSetHead(self: *const ExprSet, e: ExprId) ?u32 {
        switch (self.tag(e)) {
            .byte_set => return e.index(),
            .concat => {
                const head = self.args(e)[0];
                return if (self.tag(@fromBackingInt(@intCast(head))) == .byte_set) head else null;
            },
            else => return null,
        }
    }

    /// What follows the head of a member `byteSetHead` found one for.
    fn byteSetTail(self: *const ExprSet, e: ExprId) ExprId {
        return if (self.tag(e) == .byte_set) .epsilon else @fromBackingInt(@intCast(self.args(e)[1]));
    }

    /// Left factoring, `a x | a y = a (x | y)`, for the sorted, deduplicated members
    /// `scratch[start..][0..count]` of an alternation being built: members that are
    /// concatenations headed by the same byte set become one member headed by that set, whose
    /// tail is the alternation of their tails (factored in turn). Returns the new member count;
    /// the members stay sorted and distinct.
    ///
    /// Why: an alternation of 10,000 literals (a list of names) is otherwise a flat term of
    /// 10,000 members, and every derivative derives all of them and interns an alternation of
    /// the survivors: each lexer state of such a grammar cost 10,000 units of work and a new
    /// term as large as the words left. Factored, the alternation is the trie of the words:
    /// a derivative touches only the members of one node (at most one per distinct first
    /// byte), and the derivative by a byte *is* an existing subterm, so walking the words
    /// builds no terms at all.
    ///
    /// Only identical heads are merged (overlapping sets such as `[a-z] x | a y` stay apart),
    /// and only down to `factor_depth_max` nested levels (a shared prefix that long is left
    /// for the derivatives to factor, a level at a time), so recursion stays bounded.
    fn factorHeads(self: *ExprSet, start: usize, member_count: usize) Error!usize {
        if (member_count < 2 or self.factor_depth >= factor_depth_max) return member_count;
        var headed: usize = 0;
        for (self.scratch.items[start..][0..member_count]) |m| {
            if (self.byteSetHead(@fromBackingInt(@intCast(m))) != null) headed += 1;
        }
        if (headed < 2) return member_count;
        // (head, member) pairs sorted by head: a group is a run of equal heads.
        const keys = try self.gpa.alloc(u64, headed);
        defer self.gpa.free(keys);
        var k: usize = 0;
        for (self.scratch.items[start..][0..member_count]) |m| {
            const head = self.byteSetHead(@fromBackingInt(@intCast(m))) orelse continue;
            keys[k] = (@as(u64, head) << 32) | m;
            k += 1;
        }
        try self.spend(headed);
        std.mem.sortUnstable(u64, keys, {}, std.sort.asc(u64));
        const shared = for (keys[1..], keys[0 .. keys.len - 1]) |a, b| {
            if (a >> 32 == b >> 32) break true;
        } else false;
        if (!shared) return member_count;

        // The new members, then written back over the old ones (never more of them).
        const out = try self.gpa.alloc(u32, member_count);
        defer self.gpa.free(out);
        const tails = try self.gpa.alloc(ExprId, headed);
        defer self.gpa.free(tails);
        var n: usize = 0;
        for (self.scratch.items[start..][0..member_count]) |m| {
            if (self.byteSetHead(@fromBackingInt(@intCast(m))) == null) {
                out[n] = m;
                n += 1;
            }
        }
        self.factor_depth += 1;
        defer self.factor_depth -= 1;
        var i: usize = 0;
        while (i < keys.len) {
            const head: u32 = @intCast(keys[i] >> 32);
            var j = i + 1;
            while (j < keys.len and keys[j] >> 32 == head) j += 1;
            if (j - i == 1) {
                out[n] = @truncate(keys[i]);
            } else {
                for (keys[i..j], tails[0 .. j - i]) |key, *t| {
                    t.* = self.byteSetTail(@fromBackingInt(@intCast(@as(u32, @truncate(key)))));
                }
                // `alt` builds above this frame's part of `scratch` and shrinks back to it;
                // the members are re-read by index afterwards (the list may have moved).
                const rest = try self.altFactored(tails[0 .. j - i]);
                out[n] = (try self.concat(@fromBackingInt(@intCast(head)), rest)).index();
            }
            n += 1;
            i = j;
        }
        assert(n < member_count);
        const list = self.scratch.items[start..][0..n];
        @memcpy(list, out[0..n]);
        std.mem.sortUnstable(u32, list, {}, std.sort.asc(u32));
        return n;
    }

    pub fn repeat(self: *ExprSet, child: ExprId, min: u32, max: u32) Error!ExprId {
        try self.spend(1);
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
        return self.intern(&.{ @backingInt(Tag.repeat) | flags, child.index(), min, max });
    }

    /// The intersection of `members`.
    pub fn andAll(self: *ExprSet, members: []const ExprId) Error!ExprId {
        try self.spend(1 + members.len);
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
        try self.spend(list.len);
        std.mem.sortUnstable(u32, list, {}, std.sort.asc(u32));
        var unique: usize = 0;
        var all_nullable = true;
        // The members' length intervals; when they do not meet, no word is in every member.
        var lengths: Lengths = .{ .min = 0, .max = Lengths.unbounded };
        for (list, 0..) |item, i| {
            if (i == 0 or item != list[unique - 1]) {
                list[unique] = item;
                unique += 1;
                all_nullable = all_nullable and self.nullable(@fromBackingInt(@intCast(item)));
                const l = self.lengths.items[item];
                lengths = .{ .min = @max(lengths.min, l.min), .max = @min(lengths.max, l.max) };
            }
        }
        if (unique == 0) return self.not(.nothing);
        if (lengths.isEmpty()) return .nothing;
        if (unique == 1) return @fromBackingInt(@intCast(list[0]));
        if (try self.excludesItself(list[0..unique], exclusion_budget_construct)) return .nothing;
        self.scratch.items[base] = @backingInt(Tag.and_) | flag_boolean | (if (all_nullable) flag_nullable else 0);
        return self.intern(self.scratch.items[base .. base + 1 + unique]);
    }

    /// Do the members of an intersection include x and ¬y with x ⊆ y (shown by `includes`
    /// within `budget_per_pair` steps)? Then the intersection is ∅. This is how JSON Schema keys exclude each
    /// other: "any other key" is `"C*"` ∩ ¬(K1 | K2 | …), and once the text has matched an
    /// excluded pattern Ki (a search: `"C* X C*"`), Ki's derivative has the member `C*"`, which
    /// is the other side's own rest; a lexeme excluded by a pattern every key matches (`.*`) is
    /// ∅ from the start. Without this rule each such state was shown empty by the exact search
    /// (a derivative of the whole intersection by every byte class, for every term reached):
    /// 85–95% of the fuel of MaskBench's heaviest masks (o83286, o82144, o82151).
    fn excludesItself(self: *ExprSet, members: []const u32, budget_per_pair: u32) Error!bool {
        for (members) |n_raw| {
            const n: ExprId = @fromBackingInt(@intCast(n_raw));
            if (self.tag(n) != .not_) continue;
            const excluded: ExprId = @fromBackingInt(@intCast(self.args(n)[0]));
            if (self.isBoolean(excluded)) continue;
            for (members) |m_raw| {
                const m: ExprId = @fromBackingInt(@intCast(m_raw));
                if (m == n or self.isBoolean(m)) continue;
                if (try self.includesMemo(m, excluded, budget_per_pair)) return true;
            }
        }
        return false;
    }

    /// `includes(x, y)` within `budget` steps, remembered: the members of a lexeme's
    /// intersection recur from state to state while one of them changes at every byte (a
    /// pattern's rest and its exclusion's beside a `maxLength` counter), and every state's
    /// intersection asks the same pairs again. Without it each new lexer state of MaskBench
    /// JsonSchemaStore---webhook's `^((?!clyde).)*$` with `maxLength` 80 paid the whole
    /// construction budget twice (the pattern's rest is included in the exclusion's only
    /// through 400 steps). A hit costs one unit.
    fn includesMemo(self: *ExprSet, x: ExprId, y: ExprId, budget: u32) Error!bool {
        assert(budget == exclusion_budget_construct or budget == exclusion_budget_empty);
        assert(x.index() < 1 << 31);
        const wide: u64 = if (budget == exclusion_budget_empty) 1 << 63 else 0;
        const key = wide | @as(u64, x.index()) << 32 | y.index();
        if (self.include_cache.get(key)) |shown| {
            try self.spend(1);
            return shown;
        }
        var left = budget;
        const shown = self.includes(x, y, &left);
        try self.spend(1 + budget - left);
        if (self.cacheFull(self.include_cache)) self.include_cache.clearRetainingCapacity();
        try self.include_cache.put(self.gpa, key, shown);
        return shown;
    }

    /// Is `e` the complement of ∅ (every byte string)?
    pub fn isTop(self: *const ExprSet, e: ExprId) bool {
        return self.tag(e) == .not_ and self.args(e)[0] == ExprId.nothing.index();
    }

    /// The complement of `child`.
    pub fn not(self: *ExprSet, child: ExprId) Error!ExprId {
        try self.spend(1);
        if (self.tag(child) == .not_) return @fromBackingInt(@intCast(self.args(child)[0]));
        const flags = flag_boolean | (if (self.nullable(child)) 0 else flag_nullable);
        return self.intern(&.{ @backingInt(Tag.not_) | flags, child.index() });
    }

    /// The digit runs whose value v, read after digits that left `residue`, has
    /// (residue·10^|v| + v) mod `modulus` = `target` (≠ with `digits_mod_negated`), with '.'
    /// bytes among the digits that change nothing with `digits_mod_point` (see
    /// `Tag.digits_mod`); for `modulus` 1, `[0-9]*` (`[0-9.]*`), or ∅ negated.
    pub fn digitsMod(self: *ExprSet, modulus: u32, residue: u32, target: u32, options: u32) Error!ExprId {
        try self.spend(1);
        assert(modulus >= 1 and modulus <= digits_modulus_max and residue < modulus and target < modulus);
        assert(options & ~(digits_mod_point | digits_mod_negated) == 0);
        const negated = options & digits_mod_negated != 0;
        if (modulus == 1) {
            if (negated) return .nothing;
            return self.repeat(try self.byteSet(digitBytes(options & digits_mod_point != 0)), 0, repeat_unbounded);
        }
        const flags = if ((residue == target) != negated) flag_nullable else 0;
        return self.intern(&.{ @backingInt(Tag.digits_mod) | flags, modulus, residue, target, options });
    }

    /// `e` with the upper bound of every counter that no string of `bytes_max` bytes can
    /// reach removed (`r{a,b}` → `r{a,}`), for the plain term `e`: the same answers as `e` to
    /// "is w a word?" and "is w a prefix of a word?" for every w of at most `bytes_max` bytes
    /// (see docs/lexer.md, "Clamped states"). Returns `e` itself when nothing is clamped.
    ///
    /// Exact because within `bytes_max` bytes a parse of `r{a,b}` uses at most
    /// `bytes_max / max(1, min(r))` non-empty copies (plus the one in progress), so a bound
    /// `b` above that is never reached, and because this sameness up to `bytes_max` bytes is
    /// kept by concatenation, alternation and repetition (every piece of a short word is
    /// short). Lower bounds stay, so shortest words are unchanged. A term whose longest word
    /// is at most `bytes_max` has nothing to clamp; nesting deeper than `clamp_depth_max` is
    /// left as it is (still exact, just not clamped).
    pub fn clampCounts(self: *ExprSet, e: ExprId, bytes_max: u32) Error!ExprId {
        assert(!self.isBoolean(e));
        return self.clampAt(e, bytes_max, 0);
    }

    fn clampAt(self: *ExprSet, e: ExprId, bytes_max: u32, depth: u32) Error!ExprId {
        if (self.lengthsOf(e).max <= bytes_max or depth >= clamp_depth_max) return e;
        const key = (@as(u64, bytes_max) << 32) | e.index();
        if (self.clamp_cache.get(key)) |cached| return cached;
        try self.spend(1);
        const result: ExprId = switch (self.tag(e)) {
            .nothing, .epsilon, .byte_set, .and_, .not_, .digits_mod => e,
            .concat => concat: {
                const head = self.argId(e, 0);
                const tail = self.argId(e, 1);
                const head_clamped = try self.clampAt(head, bytes_max, depth + 1);
                const tail_clamped = try self.clampAt(tail, bytes_max, depth + 1);
                if (head_clamped == head and tail_clamped == tail) break :concat e;
                break :concat try self.concat(head_clamped, tail_clamped);
            },
            .alt => try self.clampMembers(e, bytes_max, depth),
            .repeat => repeat: {
                const a = self.args(e);
                const child = self.argId(e, 0);
                const min = a[1];
                var max = a[2];
                const copies_max = bytes_max / @max(1, self.lengthsOf(child).min);
                if (max != repeat_unbounded and max > copies_max) max = repeat_unbounded;
                const child_clamped = try self.clampAt(child, bytes_max, depth + 1);
                if (child_clamped == child and max == a[2]) break :repeat e;
                break :repeat try self.repeat(child_clamped, min, max);
            },
        };
        if (self.cacheFull(self.clamp_cache)) self.clamp_cache.clearRetainingCapacity();
        try self.clamp_cache.put(self.gpa, key, result);
        return result;
    }

    fn clampMembers(self: *ExprSet, e: ExprId, bytes_max: u32, depth: u32) Error!ExprId {
        try self.spend(self.args(e).len);
        var small: [16]ExprId = undefined;
        const members = try self.copyMembers(e, &small);
        defer self.freeMembers(members, &small);
        var changed = false;
        for (members) |*m| {
            const clamped = try self.clampAt(m.*, bytes_max, depth + 1);
            changed = changed or clamped != m.*;
            m.* = clamped;
        }
        return if (changed) self.alt(members) else e;
    }

    /// For the intersection `e` of a JSON string's pattern side and its length bound (a lexeme
    /// the front-end marked: `"P" ∩ "C{a,n}"`, C = `char`, one JSON string character), the
    /// pattern side alone when no string of `bytes_max` bytes can tell the two apart; else
    /// null. The two members of `e` are then `P·v` and `"C{a,n}"·v` for the text v read so
    /// far (the intersection of derivatives is the derivative of the intersection).
    ///
    /// The bound's derivative is `T C{a',m} "` (T: the rest of a character cut by v, or
    /// nothing), with m the characters left. Every word of P·v is a word of `T C* "` (P
    /// spells only JSON strings), with fewer characters after T than bytes; so when a' = 0
    /// and m ≥ `bytes_max` + `completionMax(P·v)`, every word of P·v up to `bytes_max` bytes
    /// fits the bound, and so does the shortest completion of every prefix of P·v up to
    /// `bytes_max` bytes: both lexemes answer alike for every token (docs/lexer.md has the
    /// whole argument). So also when a' = 1, T is nothing and `"` alone is not a word of P·v
    /// (`minLength: 1` at the start of a pattern that needs a character): every word of P·v
    /// then has a character, and the bound might as well be `C{0,m} "`.
    ///
    /// Which member is the bound: the bound's derivative always has the shape
    /// `T C{a',m} "` or `T C "`, except once m = 0, when it is `T "`, at most `maxlen(C)`
    /// bytes long. A pattern's derivative may have the shape too: when both do, their T
    /// parts must be the same terms (then either one's T is the bound's); when one does, the
    /// other must be longer than `maxlen(C)` (so it is not the bound with m = 0).
    pub fn clampedLengthBound(self: *ExprSet, e: ExprId, char: ExprId, bytes_max: u32) Error!?ExprId {
        if (self.tag(e) != .and_ or self.args(e).len != 2) return null;
        const quote = try self.byte('"');
        const members = [2]ExprId{ self.argId(e, 0), self.argId(e, 1) };
        var shapes: [2]?LengthShape = undefined;
        for (members, &shapes) |m, *shape| shape.* = self.lengthShape(m, char, quote);
        if (shapes[0] != null and shapes[1] != null and !shapes[0].?.samePrefix(shapes[1].?)) return null;
        for (0..2) |i| {
            const bound = shapes[i] orelse continue;
            const pattern = members[1 - i];
            if (bound.count_min > 1 or self.isBoolean(pattern)) continue;
            // One character still required (`minLength: 1` at a string's start): every word
            // of P·v has one when `"` alone is not a word of it, and then the bound is
            // `C{0,m} "` as far as P·v goes.
            if (bound.count_min == 1 and (bound.prefix_len != 0 or self.nullable(try self.deriv(pattern, '"')))) continue;
            if (shapes[1 - i] == null and self.lengthsOf(pattern).max <= self.lengthsOf(char).max) continue;
            if (bound.count_max != repeat_unbounded and bound.count_max < bytes_max +| self.completionMax(pattern)) continue;
            return pattern;
        }
        return null;
    }

    pub const LengthShape = struct {
        /// The terms before the counter, outermost first (T's right-nested parts).
        prefix: [length_prefix_max]ExprId,
        prefix_len: u32,
        count_min: u32,
        count_max: u32,

        fn samePrefix(a: LengthShape, b: LengthShape) bool {
            return a.prefix_len == b.prefix_len and
                wordsEqual(@ptrCast(a.prefix[0..a.prefix_len]), @ptrCast(b.prefix[0..b.prefix_len]));
        }
    };

    /// Heads before the counter a length-bound shape may have: the rest of a character is at
    /// most `maxlen(C) - 1` bytes (11 for a surrogate pair escape), plus the opening quote.
    const length_prefix_max = 16;

    /// `m` as `t₁ (t₂ (… (N "))))` with N = `char{a,b}` or `char` (a = b = 1), or null.
    pub fn lengthShape(self: *const ExprSet, m: ExprId, char: ExprId, quote: ExprId) ?LengthShape {
        const quoted = self.quotedShape(m, quote) orelse return null;
        var shape: LengthShape = .{ .prefix = quoted.prefix, .prefix_len = quoted.prefix_len, .count_min = 1, .count_max = 1 };
        if (quoted.last == char) return shape;
        if (self.tag(quoted.last) != .repeat or self.argId(quoted.last, 0) != char) return null;
        shape.count_min = self.args(quoted.last)[1];
        shape.count_max = self.args(quoted.last)[2];
        return shape;
    }

    /// `m` as `t₁ (t₂ (… (N "))))`: its heads before N (at most `length_prefix_max`) and N.
    pub const QuotedShape = struct { prefix: [length_prefix_max]ExprId, prefix_len: u32, last: ExprId };

    /// `m`'s `QuotedShape`, or null.
    pub fn quotedShape(self: *const ExprSet, m: ExprId, quote: ExprId) ?QuotedShape {
        var shape: QuotedShape = .{ .prefix = undefined, .prefix_len = 0, .last = undefined };
        var x = m;
        while (self.tag(x) == .concat) {
            const head = self.argId(x, 0);
            const tail = self.argId(x, 1);
            if (tail == quote) {
                shape.last = head;
                return shape;
            }
            if (shape.prefix_len == length_prefix_max) return null;
            shape.prefix[shape.prefix_len] = head;
            shape.prefix_len += 1;
            x = tail;
        }
        return null;
    }

    /// The character term of a JSON string length bound `"C{a,n}"` (or `"C"`), or null when
    /// `e` does not have that shape.
    pub fn lengthBoundChar(self: *ExprSet, e: ExprId) Error!?ExprId {
        const quote = try self.byte('"');
        if (self.tag(e) != .concat or self.argId(e, 0) != quote) return null;
        const rest = self.argId(e, 1);
        if (self.tag(rest) != .concat or self.argId(rest, 1) != quote) return null;
        const counted = self.argId(rest, 0);
        const char = if (self.tag(counted) == .repeat) self.argId(counted, 0) else counted;
        if (self.tag(char) == .repeat or self.isBoolean(char)) return null;
        return char;
    }

    /// The derivative of `e` by `b`: the strings s such that `b s` matches `e`.
    pub fn deriv(self: *ExprSet, e: ExprId, b: u8) Error!ExprId {
        // One bit test, paid for by the caller's per-member or per-pair charge.
        if (self.derivByHead(e, b)) |d| return d;
        try self.spend(1);
        const key = (@as(u64, e.index()) << 8) | b;
        if (self.deriv_cache.get(key)) |cached| return cached;
        if (self.deriv_depth >= deriv_depth_max) return limit_error.exceeded(.derivative_depth);
        self.deriv_depth += 1;
        defer self.deriv_depth -= 1;
        const result = try self.derivUncached(e, b);
        if (self.cacheFull(self.deriv_cache) and self.fuel_limit == .step_fuel) self.deriv_cache.clearRetainingCapacity();
        try self.deriv_cache.put(self.gpa, key, result);
        return result;
    }

    fn derivUncached(self: *ExprSet, e: ExprId, b: u8) Error!ExprId {
        try self.spend(1);
        switch (self.tag(e)) {
            .nothing, .epsilon => return .nothing,
            .byte_set => {
                const set = self.byteSetOf(e);
                return if (set.contains(b)) .epsilon else .nothing;
            },
            .concat => {
                const head: ExprId = @fromBackingInt(@intCast(self.args(e)[0]));
                const tail: ExprId = @fromBackingInt(@intCast(self.args(e)[1]));
                const left = try self.concat(try self.deriv(head, b), tail);
                if (!self.nullable(head)) return left;
                return self.alt2(left, try self.deriv(tail, b));
            },
            .alt => return self.derivMembers(e, b, alt),
            .and_ => return self.derivMembers(e, b, andAll),
            .not_ => return self.not(try self.deriv(@fromBackingInt(@intCast(self.args(e)[0])), b)),
            .digits_mod => {
                const a = self.args(e);
                if (b == '.' and a[3] & digits_mod_point != 0) return e;
                if (b < '0' or b > '9') return .nothing;
                const residue: u32 = @intCast((@as(u64, a[1]) * 10 + (b - '0')) % a[0]);
                return self.digitsMod(a[0], residue, a[2], a[3]);
            },
            .repeat => {
                const a = self.args(e);
                const child: ExprId = @fromBackingInt(@intCast(a[0]));
                const min = a[1];
                const max = a[2];
                const next_min = if (min == 0) 0 else min - 1;
                const next_max = if (max == repeat_unbounded) max else max - 1;
                const rest = try self.repeat(child, next_min, next_max);
                return self.concat(try self.deriv(child, b), rest);
            },
        }
    }

    /// The members of `e`, copied out before terms are built from them (building may grow
    /// the arena and move `args`): into `small` when they fit, else allocated (`freeMembers`).
    fn copyMembers(self: *ExprSet, e: ExprId, small: *[16]ExprId) Error![]ExprId {
        const n = self.args(e).len;
        const members = if (n <= small.len) small[0..n] else try self.gpa.alloc(ExprId, n);
        for (members, self.args(e)) |*dst, src| dst.* = @fromBackingInt(@intCast(src));
        return members;
    }

    fn freeMembers(self: *ExprSet, members: []ExprId, small: *[16]ExprId) void {
        if (members.ptr != small) self.gpa.free(members);
    }

    /// Is a result cache at its size bound with no free slot left (`deriv_cache_slots_max`)?
    /// Then it is emptied rather than grown.
    fn cacheFull(self: *const ExprSet, cache: anytype) bool {
        return cache.available == 0 and cache.capacity() >= self.deriv_cache_slots_max;
    }

    /// `combine` of the derivatives of `e`'s members (for alternation and intersection).
    fn derivMembers(
        self: *ExprSet,
        e: ExprId,
        b: u8,
        comptime combine: fn (*ExprSet, []const ExprId) Error!ExprId,
    ) Error!ExprId {
        try self.spend(self.args(e).len);
        var small: [16]ExprId = undefined;
        const members = try self.copyMembers(e, &small);
        defer self.freeMembers(members, &small);
        for (members) |*m| {
            m.* = try self.deriv(m.*, b);
            // ∅ absorbs an intersection: the other members need not be derived.
            if (combine == andAll and m.* == .nothing) return .nothing;
        }
        return combine(self, members);
    }

    /// The derivative of a byte set, or of a concatenation that starts with one, read off
    /// the set's bits (null for other terms), without the cache. A character class in UTF-8
    /// is an alternation of hundreds of such members, a literal lexeme is one, and a lexer
    /// state holds dozens: a cache lookup (or insert) per member and byte class cost more than
    /// the answer, which is one bit test.
    fn derivByHead(self: *const ExprSet, e: ExprId, b: u8) ?ExprId {
        switch (self.tag(e)) {
            .byte_set => return if (self.byteSetOf(e).contains(b)) .epsilon else .nothing,
            .concat => {
                const head: ExprId = @fromBackingInt(@intCast(self.args(e)[0]));
                if (self.tag(head) != .byte_set) return null;
                return if (self.byteSetOf(head).contains(b)) @fromBackingInt(@intCast(self.args(e)[1])) else .nothing;
            },
            else => return null,
        }
    }

    /// Does `e` denote the empty language? Exact, in three steps of rising cost:
    /// 1. plain terms, terms whose length bounds do not meet, and `P ∩ ¬B1 ∩ …` where P has
    ///    a word longer or shorter than all of the Bi's (`longerThanExcluded`) are decided at once;
    /// 2. an intersection for which a length-guided walk finds a word is not empty
    ///    (`hasWitness`);
    /// 3. otherwise a best-first search over derivatives by one byte of each class in
    ///    `representatives` looks for a nullable term (`Search`), bounded by fuel; when it
    ///    does not end within `search_expansions_first` terms, an intersection of three or
    ///    more members two of which already exclude each other is empty (`emptyPair`), and
    ///    after `search_expansions_second` more, one whose relaxation (length bounds counted
    ///    from 0) is empty (`emptyRelaxed`).
    pub fn isEmpty(self: *ExprSet, e: ExprId, representatives: []const u8) Error!bool {
        return (try self.isEmptyWithin(e, representatives, null)).?;
    }

    /// `isEmpty`, its exact search (step 3) expanding at most `expansions_max` terms (null:
    /// bounded by fuel alone); null when that search did not end.
    fn isEmptyWithin(self: *ExprSet, e: ExprId, representatives: []const u8, expansions_max: ?u32) Error!?bool {
        if (e == .nothing) return true;
        if (!self.isBoolean(e)) return false;
        if (self.lengthsOf(e).isEmpty()) return true;
        if (self.empty_cache.get(e.index())) |cached| return cached;
        if (self.longerThanExcluded(e)) {
            // Kept: a later search that reaches e stops there (`isEmptySearch`).
            try self.empty_cache.put(self.gpa, e.index(), false);
            return false;
        }
        if (self.tag(e) == .and_ and try self.bytesContradict(e)) {
            // Before the witness walk, which for an empty term wanders until its bounds.
            try self.empty_cache.put(self.gpa, e.index(), true);
            return true;
        }
        if (try self.hasWitness(e, representatives)) {
            try self.empty_cache.put(self.gpa, e.index(), false);
            return false;
        }
        if (self.tag(e) == .and_ and try self.excludesItself(self.args(e), exclusion_budget_empty)) {
            try self.empty_cache.put(self.gpa, e.index(), true);
            return true;
        }
        return self.isEmptySearch(e, representatives, expansions_max);
    }

    /// Part of step 1 of `isEmpty`: is `e` = `P ∩ ¬B1 ∩ … ∩ ¬Bn` (P and every Bi plain) shown
    /// non-empty by lengths alone? Plain terms' lengths are exact, so when P has a word shorter
    /// or longer than every word of every Bi, that word is in `e`. This is "any other key"
    /// beside a bounded key pattern (`"C*"` ∩ ¬`".{1,255}"`, MaskBench Github_trivial---o9908):
    /// every position of the key was a new lexer state, and each was shown non-empty by a
    /// witness walk past the pattern's 255 characters, 105 of them in the first mask (270,000
    /// units of fuel, 5-7 ms).
    fn longerThanExcluded(self: *const ExprSet, e: ExprId) bool {
        if (self.tag(e) != .and_) return false;
        var positive: ?Lengths = null;
        var excluded: Lengths = .{ .min = Lengths.unbounded, .max = 0 };
        for (self.args(e)) |raw| {
            const m: ExprId = @fromBackingInt(@intCast(raw));
            if (self.tag(m) == .not_) {
                const b = self.argId(m, 0);
                if (self.isBoolean(b)) return false;
                const l = self.lengthsOf(b);
                excluded = .{ .min = @min(excluded.min, l.min), .max = @max(excluded.max, l.max) };
                continue;
            }
            if (self.isBoolean(m) or positive != null) return false;
            positive = self.lengthsOf(m);
        }
        const p = positive orelse return false;
        if (p.isEmpty()) return false;
        // Unbounded: P has words of every length beyond some point (a plain term with no longest word).
        if (p.max > excluded.max) return true;
        return p.min < excluded.min;
    }

    /// Part of `isEmpty`: does one member of the intersection `e` require a byte (every word
    /// of it holds the byte) that another member's words never hold? Then `e` is empty. A
    /// JSON Schema search pattern `[ab]@` beside `format: email` is `"C*[ab]@C*"` ∩ the
    /// address: once the text's `@` follows another letter, the address's rest (a host) has no
    /// `@` while the pattern's rest needs one; the exact search had to exhaust every state of
    /// the host (counted labels, IPv6 groups) to show it, 300,000 units of fuel and more.
    fn bytesContradict(self: *ExprSet, e: ExprId) Error!bool {
        const facts = try self.byteFacts(e, 0);
        return !byteSetWithin(facts.required, facts.alphabet);
    }

    /// The `ByteFacts` of `e`, built from its children's (memoised per term; a unit of fuel per
    /// term computed). Deeper than `clamp_depth_max`, nothing is known (every byte may occur,
    /// none is required), which keeps both sets sound.
    pub fn byteFacts(self: *ExprSet, e: ExprId, depth: u32) Error!ByteFacts {
        if (depth >= clamp_depth_max) return .unknown;
        if (self.byte_facts_cache.get(e.index())) |cached| return cached;
        try self.spend(1);
        const everything = ByteFacts.unknown.alphabet;
        const facts: ByteFacts = switch (self.tag(e)) {
            // No word at all: every statement about its words holds.
            .nothing => .{ .alphabet = .{}, .required = everything },
            .epsilon => .{ .alphabet = .{}, .required = .{} },
            .byte_set => set: {
                const bytes = self.byteSetOf(e);
                break :set .{ .alphabet = bytes, .required = if (bytes.count() == 1) bytes else .{} };
            },
            .concat => concat: {
                var facts = try self.byteFacts(self.argId(e, 0), depth + 1);
                const tail = try self.byteFacts(self.argId(e, 1), depth + 1);
                facts.alphabet.unionWith(tail.alphabet);
                facts.required.unionWith(tail.required);
                break :concat facts;
            },
            .alt => alt: {
                var facts: ByteFacts = .{ .alphabet = .{}, .required = everything };
                for (0..self.args(e).len) |i| {
                    const member = try self.byteFacts(self.argId(e, i), depth + 1);
                    facts.alphabet.unionWith(member.alphabet);
                    facts.required.intersectWith(member.required);
                }
                break :alt facts;
            },
            .repeat => repeat: {
                const child = try self.byteFacts(self.argId(e, 0), depth + 1);
                const a = self.args(e);
                if (a[2] == 0) break :repeat .{ .alphabet = .{}, .required = .{} };
                break :repeat .{ .alphabet = child.alphabet, .required = if (a[1] >= 1) child.required else .{} };
            },
            .and_ => and_: {
                var facts: ByteFacts = .{ .alphabet = everything, .required = .{} };
                for (0..self.args(e).len) |i| {
                    const member = try self.byteFacts(self.argId(e, i), depth + 1);
                    facts.alphabet.intersectWith(member.alphabet);
                    facts.required.unionWith(member.required);
                }
                break :and_ facts;
            },
            .not_ => .unknown,
            .digits_mod => .{ .alphabet = digitBytes(self.args(e)[3] & digits_mod_point != 0), .required = .{} },
        };
        if (self.byte_facts_cache.count() >= byte_facts_count_max) self.byte_facts_cache.clearRetainingCapacity();
        try self.byte_facts_cache.put(self.gpa, e.index(), facts);
        return facts;
    }

    /// Step 3 of `isEmpty`: every term expanded costs two units per byte class. With
    /// `expansions_max`, null when the search has not ended after that many terms.
    fn isEmptySearch(self: *ExprSet, e: ExprId, representatives: []const u8, expansions_max: ?u32) Error!?bool {
        if (!bytesEqual(self.row_representatives[0..self.row_representative_count], representatives)) {
            // Rows hold derivatives by these bytes (one lexer's classes): other bytes, other rows.
            self.row_cache.clearRetainingCapacity();
            self.row_words.clearRetainingCapacity();
            @memcpy(self.row_representatives[0..representatives.len], representatives);
            self.row_representative_count = @intCast(representatives.len);
        }
        var search: Search = .{};
        defer search.deinit(self.gpa);
        var outcome = try search.run(self, e, representatives, expansions_max orelse search_expansions_first);
        if (outcome == .paused) {
            if (expansions_max != null) return null;
            // Not decided quickly: is the intersection of two members empty already? A
            // contradiction usually lies between two members (`^....$` against `minLength` 10),
            // and their product is far smaller than all members' together.
            const several = self.tag(e) == .and_ and self.args(e).len >= 3;
            if (several and try self.emptyPair(e, representatives)) {
                try self.empty_cache.put(self.gpa, e.index(), true);
                return true;
            }
            // Still not decided a little later: is the intersection with its length bounds
            // counted from 0 empty (a contradiction of three members or more inside a length
            // bound, which no pair shows)? Not at once: most searches that pass the first
            // pause end soon after, for less than that search costs; but at once when a
            // relaxation has been shown empty before (the next lexemes of the same schema).
            const relax_now = several and self.relaxed_shown;
            if (relax_now and try self.emptyRelaxed(e, representatives)) {
                try self.empty_cache.put(self.gpa, e.index(), true);
                return true;
            }
            outcome = try search.run(self, e, representatives, search_expansions_second);
            if (outcome == .paused and several and !relax_now and try self.emptyRelaxed(e, representatives)) {
                try self.empty_cache.put(self.gpa, e.index(), true);
                return true;
            }
            if (outcome == .paused) outcome = try search.run(self, e, representatives, null);
        }
        switch (outcome) {
            .found => |at| {
                // Every term on the path from e to the goal has the goal's word (after its
                // prefix): a lexer following that path finds its states decided.
                var i: u32 = at;
                while (true) {
                    try self.empty_cache.put(self.gpa, search.nodes.items[i].term, false);
                    if (i == 0) break;
                    i = search.nodes.items[i].parent;
                }
                return false;
            },
            .exhausted => {
                // Nothing reachable is nullable: every visited term is empty.
                for (search.nodes.items) |node| try self.empty_cache.put(self.gpa, node.term, true);
                return true;
            },
            .paused => unreachable,
        }
    }

    /// The intersection `e` with every member's counter `r{a,b}` (0 < a < b, b bounded)
    /// counted from 0 (`emptyRelaxed`), or null when it has none.
    fn relaxation(self: *ExprSet, e: ExprId) Error!?ExprId {
        var small: [16]ExprId = undefined;
        const members = try self.copyMembers(e, &small);
        defer self.freeMembers(members, &small);
        var changed = false;
        for (members) |*m| {
            const c = self.countedSplit(m.*) orelse continue;
            if (c.min == 0 or c.min >= c.max or c.max == repeat_unbounded) continue;
            var heads: [length_prefix_max]ExprId = undefined;
            var x = m.*;
            for (0..c.heads) |i| {
                heads[i] = self.argId(x, 0);
                x = self.argId(x, 1);
            }
            var t = try self.repeat(c.child, 0, c.max);
            if (c.tail) |tail| t = try self.concat(t, tail);
            var i = c.heads;
            while (i > 0) {
                i -= 1;
                t = try self.concat(heads[i], t);
            }
            m.* = t;
            changed = true;
        }
        if (!changed) return null;
        return try self.andAll(members);
    }

    /// Is the intersection `e` shown empty by its relaxation: every member with a counter
    /// `r{a,b}` (a < b, b bounded: a length bound, not a run) counted from 0 instead
    /// (`r{0,b}`), searched breadth first for at most `search_expansions_relaxed` terms? The
    /// relaxation holds every word of `e`, so when it is empty `e` is. Its counters' bounds
    /// nest (`r{0,b}` ⊆ `r{0,b′}` when b ≤ b′), so the search expands each state of the other
    /// members once, with the most count left (`Search.dominated`), where `e`'s search expands
    /// it at every count; with a minimum, the bounds of two counts do not nest.
    /// Handwritten---allany13: nine lexemes a first `a`, a last `x`, a run of nineteen `1`s
    /// (or eighteen `2`s and a `[aA][12].*[zZ]`) and 10-20 characters, 2,350 expansions each,
    /// now about 180 (after 64-128 of the exact search).
    fn emptyRelaxed(self: *ExprSet, e: ExprId, representatives: []const u8) Error!bool {
        const relaxed = try self.relaxation(e) orelse return false;
        if (relaxed == .nothing) return true;
        var search: Search = .{ .relaxed = true };
        defer search.deinit(self.gpa);
        switch (try search.run(self, relaxed, representatives, search_expansions_relaxed)) {
            .exhausted => {
                for (search.nodes.items) |node| try self.empty_cache.put(self.gpa, node.term, true);
                self.relaxed_shown = true;
                return true;
            },
            .found, .paused => return false,
        }
    }

    /// `m` as `h₁ (h₂ (… (hₖ (r{a,b} s))))` (k ≤ `length_prefix_max`, s absent when the
    /// counter ends the term) with a > 0 or b bounded: the number of heads k, r, a, b and s; or
    /// null. For a fixed rest the language only grows as [a, b] widens (`Search.dominated`).
    pub fn countedSplit(self: *const ExprSet, m: ExprId) ?Counted {
        var x = m;
        var heads: u32 = 0;
        while (true) {
            const counter, const tail: ?ExprId = switch (self.tag(x)) {
                .repeat => .{ x, null },
                .concat => .{ self.argId(x, 0), self.argId(x, 1) },
                else => return null,
            };
            if (self.tag(counter) == .repeat) {
                const a = self.args(counter);
                if (a[1] > 0 or a[2] != repeat_unbounded) {
                    return .{ .heads = heads, .child = self.argId(counter, 0), .min = a[1], .max = a[2], .tail = tail };
                }
            }
            const rest = tail orelse return null;
            if (heads == length_prefix_max) return null;
            heads += 1;
            x = rest;
        }
    }

    pub const Counted = struct { heads: u32, child: ExprId, min: u32, max: u32, tail: ?ExprId };

    /// Is the intersection of some two members of the intersection `e` shown empty, each pair
    /// by `isEmpty`'s steps with a search of at most `search_expansions_pair` terms? Its
    /// answers are remembered like any term's (`empty_cache`); an undecided pair is not.
    fn emptyPair(self: *ExprSet, e: ExprId, representatives: []const u8) Error!bool {
        var small: [16]ExprId = undefined;
        const members = try self.copyMembers(e, &small);
        defer self.freeMembers(members, &small);
        for (members, 0..) |a, i| {
            for (members[i + 1 ..]) |b| {
                const pair = try self.andAll(&.{ a, b });
                if (try self.isEmptyWithin(pair, representatives, search_expansions_pair) == true) return true;
            }
        }
        return false;
    }

    /// Step 2 of `isEmpty`: look for a word of the intersection `e` by walking all of its
    /// members at once, guided by their length tables. The member with the longest shortest
    /// rest leads: the walk takes the first byte of that member's shortest rest when every
    /// member survives it, or else the first byte class that every member survives and that
    /// shortens the leader's rest. It stops when every member is nullable (a witness: not
    /// empty), when no byte qualifies, or after `witness_length_max` bytes ("not shown": the
    /// search decides). For "pattern ∩ length" this is the arithmetic the search lacked: the
    /// counter's minimum leads while the pattern can pad, then the pattern's shortest
    /// completion finishes both.
    fn hasWitness(self: *ExprSet, e: ExprId, representatives: []const u8) Error!bool {
        if (self.tag(e) != .and_) return false;
        if (try self.walkWitness(e, representatives, witness_switches_max)) return true;
        // Three plain members or more: the walk may fail because a member took the lead
        // just before another's word was done and undid it (Handwritten---string3: a search
        // of six contiguous `c1d3g3.{4,8}` runs, ten characters from its end, lost the lead
        // to `(t|8){10}$`, whose bytes broke the sixth run). Walk once more, each leader
        // keeping the lead until its word is done or it is stuck: a witness of 170 bytes,
        // where the search took 1,178 expansions of five members (795,000 units of fuel).
        var plain: u32 = 0;
        for (self.args(e)) |m| {
            if (!self.isBoolean(@fromBackingInt(@intCast(m)))) plain += 1;
        }
        if (plain < 3) return false;
        if (try self.walkWitness(e, representatives, 0)) return true;
        if (self.args(e).len > witness_search_members_max) return false;
        // Both walks let the member with the longest rest lead, and a length bound's rest is
        // the longest: it pads with its shortest byte until its word is done, and several
        // searches beside it are left unmatched (Handwritten---allany23: sixteen characters
        // holding `ab1`, `b12`, `bc1`, `c12`, `ca1`, `a12` and `[aA][12].*[zZ]`). Search a
        // little, satisfying the members nearest to done first (`WitnessSearch`).
        var witness: WitnessSearch = .{};
        defer witness.deinit(self.gpa);
        return witness.run(self, e);
    }

    /// One witness walk of `hasWitness`: the lead changes hands freely until
    /// `switches_max` changes, then the leader keeps it until its word is done.
    fn walkWitness(self: *ExprSet, e: ExprId, representatives: []const u8, switches_max: u32) Error!bool {
        const n = self.args(e).len;
        var small: [2][16]ExprId = undefined;
        const buffer = if (n <= 16) small[0][0..0] else try self.gpa.alloc(ExprId, 2 * n);
        defer if (n > 16) self.gpa.free(buffer);
        var cur: []ExprId = if (n <= 16) small[0][0..n] else buffer.ptr[0..n];
        var next: []ExprId = if (n <= 16) small[1][0..n] else buffer.ptr[n .. 2 * n];
        for (cur, self.args(e)) |*dst, src| dst.* = @fromBackingInt(@intCast(src));
        var steps: u32 = 0;
        var scans: u32 = 0; // bytes tried off the leader's shortest path, over the whole walk
        // The member with the longest rest leads, chosen afresh at each byte, until the lead
        // has changed hands `switches_max` times (`witness_switches_max`, or 0 in
        // `hasWitness`'s second walk): then the leader keeps the lead until its word is done
        // or it is stuck. Choosing afresh ping-pongs between two searches
        // (`.*github.*` ∩ `.*hipchat.*`: each leader's next byte undoes the other's partial
        // match, and the walk ran to `witness_length_max` before the search decided), while
        // keeping the lead from the start made "pattern ∩ length" walks ten times longer (the
        // counter led on past the point where the pattern's completion would end both).
        var kept: ?usize = null;
        var switches: u32 = 0;
        var recent: RecentBytes = .{};
        // A witness of a long length bound is at least as long as the bound: the walk may run
        // past it by `witness_length_max` (each step is charged to the fuel).
        const length_max = witness_length_max +| @min(self.lengthsOf(e).min, witness_bound_max);
        // The members after each byte, to remember the walk's terms as non-empty once it
        // succeeds (`rememberWalk`).
        var path: std.ArrayList(ExprId) = .empty;
        defer path.deinit(self.gpa);
        while (steps < length_max) : (steps += 1) {
            const all_nullable = for (cur) |m| {
                if (!self.nullable(m)) break false;
            } else true;
            if (all_nullable) {
                try self.rememberWalk(path.items, n);
                return true;
            }
            if (steps > 0) try path.appendSlice(self.gpa, cur);
            var leader: ?usize = null;
            if (switches >= switches_max) {
                if (kept) |l| {
                    if (!self.nullable(cur[l])) leader = l;
                }
            }
            if (leader == null) leader = self.leadingMember(cur);
            if (kept != null and leader != null and leader.? != kept.?) switches += 1;
            var stepped = try self.stepToward(cur, next, leader, representatives, &scans, &recent) orelse return false;
            if (!stepped and kept != null and switches >= switches_max) {
                // Stuck behind the kept leader (its rest needs a byte another member refuses):
                // let the member with the longest rest lead from here.
                const fresh = self.leadingMember(cur);
                if (fresh != leader) {
                    leader = fresh;
                    stepped = try self.stepToward(cur, next, leader, representatives, &scans, &recent) orelse return false;
                }
            }
            if (!stepped) return false;
            kept = leader;
            std.mem.swap([]ExprId, &cur, &next);
        }
        return false;
    }

    /// Marks the intersection after each byte of a successful witness walk non-empty (the
    /// rest of the witness is in it), `members` holding `n` members a step. A lexer over
    /// `"P" ∩ "C{a,}"` reaches those terms next, one per text position: each needed a walk of
    /// its own, through what is left of the bound (Handwritten string1's masks and forced
    /// bytes, 10,000 characters, 15-22 ms a step). Skipped when the fuel left could not pay
    /// for it: remembering is never what stops a call.
    fn rememberWalk(self: *ExprSet, members: []const ExprId, n: usize) Error!void {
        if (members.len == 0 or self.fuel < 4 * members.len) return;
        var i: usize = 0;
        while (i < members.len) : (i += n) {
            const t = try self.andAll(members[i..][0..n]);
            if (t != .nothing and self.isBoolean(t)) try self.empty_cache.put(self.gpa, t.index(), false);
        }
    }

    /// One byte of the witness walk into `next`: the first byte of the leader's shortest rest
    /// when every member survives it, else the first byte class every member survives that
    /// shortens the leader's rest (any surviving class when there is no leader). False when no
    /// byte qualifies; null when the walk has tried `witness_scan_max` bytes off the path.
    /// The bytes found by its last scans are tried first, and not counted as scans: a walk
    /// through a long bound repeats a few bytes off the leader's path (`"([a-z][0-9])+"` ∩
    /// `"C{10000,}"`: a letter, a digit, each found by a scan that ran out of
    /// `witness_scan_max` after a few hundred characters, and the search then took 0.1 s).
    fn stepToward(self: *ExprSet, cur: []const ExprId, next: []ExprId, leader: ?usize, representatives: []const u8, scans: *u32, recent: *RecentBytes) Error!?bool {
        if (leader) |l| if (try self.stepMembers(cur, next, self.shortestByte(cur[l]))) return true;
        for (recent.bytes[0..recent.count]) |b| {
            if (try self.stepShortening(cur, next, leader, b)) return true;
        }
        for (representatives) |b| {
            scans.* += 1;
            if (scans.* > witness_scan_max) return null;
            if (!try self.stepShortening(cur, next, leader, b)) continue;
            recent.add(b);
            return true;
        }
        return false;
    }

    /// `stepMembers` by `b`, when it also shortens the leader's rest (any byte when there is
    /// no leader).
    fn stepShortening(self: *ExprSet, cur: []const ExprId, next: []ExprId, leader: ?usize, b: u8) Error!bool {
        if (!try self.stepMembers(cur, next, b)) return false;
        if (leader) |l| if (self.lengthsOf(next[l]).min >= self.lengthsOf(cur[l]).min) return false;
        return true;
    }

    /// The plain, non-nullable member with the longest shortest word (the first on ties).
    fn leadingMember(self: *const ExprSet, members: []const ExprId) ?usize {
        var best: ?usize = null;
        for (members, 0..) |m, i| {
            if (self.isBoolean(m) or self.nullable(m)) continue;
            if (best == null or self.lengthsOf(m).min > self.lengthsOf(members[best.?]).min) best = i;
        }
        return best;
    }

    /// `next[i]` = the derivative of `cur[i]` by `b`; false when one is ∅ or their length
    /// intervals no longer meet.
    fn stepMembers(self: *ExprSet, cur: []const ExprId, next: []ExprId, b: u8) Error!bool {
        try self.spend(cur.len);
        var lengths: Lengths = .{ .min = 0, .max = Lengths.unbounded };
        for (cur, next) |m, *d| {
            d.* = try self.deriv(m, b);
            if (d.* == .nothing) return false;
            const l = self.lengthsOf(d.*);
            lengths = .{ .min = @max(lengths.min, l.min), .max = @min(lengths.max, l.max) };
        }
        return !lengths.isEmpty();
    }

    /// A shortest word of the plain term `e` (at most `out.len` bytes), or null when it is
    /// longer. Each byte is one that starts a shortest word of what is left (`shortestByte`),
    /// so the walk takes exactly `lengthsOf(e).min` derivatives.
    pub fn shortestWord(self: *ExprSet, e: ExprId, out: []u8) Error!?[]const u8 {
        assert(!self.isBoolean(e));
        if (e == .nothing or self.lengthsOf(e).min > out.len) return null;
        var x = e;
        var n: usize = 0;
        while (!self.nullable(x)) : (n += 1) {
            assert(n < out.len); // the shortest word's length is exact for plain terms
            const b = self.shortestByte(x);
            out[n] = b;
            x = try self.deriv(x, b);
            assert(x != .nothing and self.lengthsOf(x).min + n + 1 == self.lengthsOf(e).min);
        }
        return out[0..n];
    }

    /// A byte that starts a shortest word of the plain, non-nullable term `e`. The descent
    /// follows the length table; children have smaller ids than their parents (they are
    /// interned first), so it ends.
    fn shortestByte(self: *const ExprSet, e: ExprId) u8 {
        var x = e;
        while (true) {
            assert(!self.nullable(x) and !self.isBoolean(x));
            const a = self.args(x);
            switch (self.tag(x)) {
                .byte_set => {
                    const set = self.byteSetOf(x);
                    for (set.bits, 0..) |w, i| {
                        if (w != 0) return @intCast(i * 32 + @ctz(w));
                    }
                    unreachable; // byte sets are never empty
                },
                // A nullable head adds nothing to the shortest word.
                .concat => x = if (self.nullable(@fromBackingInt(@intCast(a[0])))) @fromBackingInt(@intCast(a[1])) else @fromBackingInt(@intCast(a[0])),
                .alt => {
                    var best: ExprId = @fromBackingInt(@intCast(a[0]));
                    for (a[1..]) |m| {
                        if (self.lengths.items[m].min < self.lengthsOf(best).min) best = @fromBackingInt(@intCast(m));
                    }
                    x = best;
                },
                .repeat => x = @fromBackingInt(@intCast(a[0])),
                .digits_mod => {
                    // The first digit of the least shortest word (not nullable: at least one).
                    const shortest = digitsModShortest(a[0], a[1], a[2], a[3]);
                    assert(shortest.len >= 1);
                    var power: u64 = 1;
                    for (1..shortest.len) |_| power *= 10;
                    return @intCast('0' + shortest.value / power);
                },
                .nothing, .epsilon, .and_, .not_ => unreachable,
            }
        }
    }

    /// Does `e` match `word`?
    pub fn accepts(self: *ExprSet, e: ExprId, word: []const u8) Error!bool {
        try self.spend(word.len);
        var x = e;
        for (word) |b| {
            x = try self.deriv(x, b);
            if (x == .nothing) return false;
        }
        return self.nullable(x);
    }

    /// Is argument `i` of a node tagged `t` a child term (else a bitmap word or a bound)?
    fn isChildArg(t: Tag, i: usize) bool {
        return switch (t) {
            .nothing, .epsilon, .byte_set, .digits_mod => false,
            .concat, .alt, .and_ => true,
            .repeat, .not_ => i == 0,
        };
    }

    /// Appends the term `e` to `recipe` as a list of nodes that `importTerm` rebuilds in
    /// another set (`pattern_cache.zig`): post-order, each node its header word, its argument
    /// count and its arguments, a child given as its node's position in the list. Only `e`'s
    /// own subterms go in. An explicit stack (terms nest as deep as a long literal).
    pub fn exportTerm(self: *const ExprSet, gpa: Allocator, e: ExprId, recipe: *std.ArrayList(u32)) Allocator.Error!void {
        return self.exportOrdered(gpa, e, recipe, null);
    }

    /// `exportTerm` with the members of each alternation and intersection in an order given by
    /// their structure (a hash of it, ties by id) instead of by their ids, which depend on what
    /// the set built before. So two sets that built the same term give the same recipe (unless
    /// two members' hashes tie), and a recipe is an exact key for facts about the term's
    /// language that hold in any grammar (`slicer.OpenAnswers`): equal recipes are one term,
    /// whatever the hashes were. Two walks over the term, an explicit stack each.
    pub fn exportTermCanonical(self: *const ExprSet, gpa: Allocator, e: ExprId, recipe: *std.ArrayList(u32)) Allocator.Error!void {
        var hashes: IntMap(u32, u64) = .empty; // a term's structure hash
        defer hashes.deinit(gpa);
        var stack: std.ArrayList(u32) = .empty;
        defer stack.deinit(gpa);
        var members: std.ArrayList(u64) = .empty;
        defer members.deinit(gpa);
        try stack.append(gpa, e.index());
        while (stack.items.len > 0) {
            const id = stack.items[stack.items.len - 1];
            if (hashes.contains(id)) {
                _ = stack.pop();
                continue;
            }
            const run = self.runOf(id);
            const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(run[0]))));
            if (try pushPendingChildren(gpa, t, run[1..], &hashes, &stack)) continue;
            _ = stack.pop();
            var h = hashFinish(@as(u64, run[0]) *% 0x9E37_79B9_7F4A_7C15);
            if (t == .alt or t == .and_) {
                members.clearRetainingCapacity();
                for (run[1..]) |arg| try members.append(gpa, hashes.get(arg).?);
                std.mem.sortUnstable(u64, members.items, {}, std.sort.asc(u64));
                for (members.items) |m| h = hashFinish((h ^ m) *% 0x9E37_79B9_7F4A_7C15);
            } else {
                for (run[1..], 0..) |arg, i| {
                    const word = if (isChildArg(t, i)) hashes.get(arg).? else arg;
                    h = hashFinish((h ^ word) *% 0x9E37_79B9_7F4A_7C15);
                }
            }
            try hashes.put(gpa, id, h);
        }
        return self.exportOrdered(gpa, e, recipe, &hashes);
    }

    /// `exportTerm`'s walk; with `hashes` (`exportTermCanonical`'s, of every term under `e`),
    /// each alternation's and intersection's members visited and written in their order.
    fn exportOrdered(self: *const ExprSet, gpa: Allocator, e: ExprId, recipe: *std.ArrayList(u32), hashes: ?*const IntMap(u32, u64)) Allocator.Error!void {
        const Order = struct {
            hashes: *const IntMap(u32, u64),
            fn less(context: @This(), a: u32, b: u32) bool {
                const ha = context.hashes.get(a).?;
                const hb = context.hashes.get(b).?;
                return ha < hb or (ha == hb and a < b);
            }
        };
        var position: IntMap(u32, u32) = .empty; // a term's node position
        defer position.deinit(gpa);
        var stack: std.ArrayList(u32) = .empty;
        defer stack.deinit(gpa);
        var ordered: std.ArrayList(u32) = .empty; // the node's arguments, members in order
        defer ordered.deinit(gpa);
        try stack.append(gpa, e.index());
        var node_count: u32 = 0;
        while (stack.items.len > 0) {
            const id = stack.items[stack.items.len - 1];
            if (position.contains(id)) {
                _ = stack.pop();
                continue;
            }
            const run = self.runOf(id);
            const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(run[0]))));
            var node_args = run[1..];
            if (hashes) |by_structure| if (t == .alt or t == .and_) {
                ordered.clearRetainingCapacity();
                try ordered.appendSlice(gpa, node_args);
                std.mem.sortUnstable(u32, ordered.items, Order{ .hashes = by_structure }, Order.less);
                node_args = ordered.items;
            };
            if (try pushPendingChildren(gpa, t, node_args, &position, &stack)) continue;
            _ = stack.pop();
            try recipe.ensureUnusedCapacity(gpa, node_args.len + 2);
            recipe.appendAssumeCapacity(run[0]);
            recipe.appendAssumeCapacity(@intCast(node_args.len));
            for (node_args, 0..) |arg, i| recipe.appendAssumeCapacity(if (isChildArg(t, i)) position.get(arg).? else arg);
            try position.put(gpa, id, node_count);
            node_count += 1;
        }
    }

    /// A post-order walk's step (`exportTermCanonical`, `exportOrdered`): pushes the children
    /// among a node's `arguments` (of tag `t`) that `done` has no entry for; whether any
    /// was pushed (the node then waits for them).
    fn pushPendingChildren(gpa: Allocator, t: Tag, arguments: []const u32, done: anytype, stack: *std.ArrayList(u32)) Allocator.Error!bool {
        var waiting = false;
        for (arguments, 0..) |arg, i| {
            if (isChildArg(t, i) and !done.contains(arg)) {
                try stack.append(gpa, arg);
                waiting = true;
            }
        }
        return waiting;
    }

    /// Appends to `out` the ids of the terms under `e` (itself included) that `forEachByteSet`
    /// reads: byte sets and `digits_mod` terms. Each once; an explicit stack.
    pub fn classTerms(self: *const ExprSet, gpa: Allocator, e: ExprId, out: *std.ArrayList(u32)) Allocator.Error!void {
        var seen: IntMap(u32, void) = .empty;
        defer seen.deinit(gpa);
        var stack: std.ArrayList(u32) = .empty;
        defer stack.deinit(gpa);
        try stack.append(gpa, e.index());
        while (stack.pop()) |id| {
            if ((try seen.getOrPut(gpa, id)).found_existing) continue;
            const run = self.runOf(id);
            const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(run[0]))));
            switch (t) {
                .byte_set, .digits_mod => try out.append(gpa, id),
                else => {},
            }
            for (run[1..], 0..) |arg, i| {
                if (isChildArg(t, i)) try stack.append(gpa, arg);
            }
        }
    }

    /// The nodes of a recipe of `exportTerm` (the terms `importTerm` interns at most).
    pub fn recipeNodeCount(recipe: []const u32) u32 {
        var nodes: u32 = 0;
        var at: usize = 0;
        while (at < recipe.len) : (nodes += 1) at += 2 + recipe[at + 1];
        return nodes;
    }

    /// The term a recipe of `exportTerm` describes, interned in this set: the same term the
    /// smart constructors would have built here, since every normal-form rule but the order
    /// of alternation and intersection members is independent of ids, and those are sorted
    /// again. One unit of fuel a node.
    pub fn importTerm(self: *ExprSet, recipe: []const u32) Error!ExprId {
        assert(recipe.len >= 2);
        var ids: std.ArrayList(u32) = .empty; // a node position's term in this set
        defer ids.deinit(self.gpa);
        const base = self.scratch.items.len;
        defer self.scratch.shrinkRetainingCapacity(base);
        var at: usize = 0;
        while (at < recipe.len) {
            const header = recipe[at];
            const node_args = recipe[at + 2 ..][0..recipe[at + 1]];
            at += 2 + node_args.len;
            try self.spend(1);
            const t: Tag = @fromBackingInt(@intCast(@as(u8, @truncate(header))));
            self.scratch.shrinkRetainingCapacity(base);
            try self.scratch.ensureUnusedCapacity(self.gpa, node_args.len + 1);
            self.scratch.appendAssumeCapacity(header);
            for (node_args, 0..) |arg, i| self.scratch.appendAssumeCapacity(if (isChildArg(t, i)) ids.items[arg] else arg);
            const run = self.scratch.items[base..];
            if (t == .alt or t == .and_) std.mem.sortUnstable(u32, run[1..], {}, std.sort.asc(u32));
            const id: ExprId = switch (t) {
                .nothing => .nothing,
                .epsilon => .epsilon,
                else => try self.intern(run),
            };
            try ids.append(self.gpa, id.index());
        }
        assert(at == recipe.len);
        return @fromBackingInt(@intCast(ids.items[ids.items.len - 1]));
    }

    /// Every byte set that occurs in the set, for alphabet compression: of the terms copied
    /// from a base set (`initFrom`), only those the set used (`base_marks`), so that the
    /// classes are those of a set that built the same terms on its own.
    /// A `digits_mod` term counts as the ten one-digit sets (every digit moves it
    /// differently), and as `.` when it reads points. Its derivatives are `digits_mod` terms
    /// of the same modulus and kind, so the classes computed from the terms a grammar
    /// compiled to stay valid for every term its lexer derives.
    pub fn forEachByteSet(self: *const ExprSet, context: anytype, comptime visit: fn (@TypeOf(context), ByteSet) void) void {
        var digits_seen = false;
        var point_seen = false;
        var id: u32 = 0;
        while (id < self.count()) : (id += 1) {
            if (id < self.base_count and !self.baseMarked(id)) continue;
            const e: ExprId = @fromBackingInt(@intCast(id));
            switch (self.tag(e)) {
                .byte_set => visit(context, self.byteSetOf(e)),
                .digits_mod => {
                    const singles: []const u8 = if (!digits_seen) "0123456789" else "";
                    digits_seen = true;
                    for (singles) |d| visit(context, singleByte(d));
                    if (self.args(e)[3] & digits_mod_point != 0 and !point_seen) {
                        point_seen = true;
                        visit(context, singleByte('.'));
                    }
                },
                else => {},
            }
        }
    }
};

/// The third witness of `ExprSet.hasWitness`: a small best-first search over an intersection's
/// derivatives for a word, the members nearest to done satisfied first. A term's successors
/// are its derivatives by the first byte of each member's shortest rest (at most one per
/// member, in byte order), and the term whose members' shortest rests add up to the least goes
/// first (deeper first on ties, then in the order found): a member that is one byte from done
/// is finished before a search that has not started, and a length bound's padding comes when
/// nothing else shortens anything. The walks let the longest rest lead, which for several
/// searches inside a length bound is the bound: it pads to its end and leaves them unmatched.
/// Its goals are the exact search's (nullable, plain, or known non-empty terms); it expands at
/// most `witness_search_expansions_max` terms, each costing a derivative of the intersection
/// per distinct byte (at most one per member, where the exact search takes one per byte
/// class), and says "not shown" past them. Which terms it visits depends on lengths and bytes
/// only, not on term ids.
const WitnessSearch = struct {
    const Node = struct { term: u32, parent: u32 };
    nodes: std.ArrayList(Node) = .empty,
    visited: IntMap(u32, void) = .empty,
    /// `Search`'s queue order, its score (`f`) the sum of the members' shortest rests.
    open: std.PriorityQueue(Search.Entry, void, Search.order) = .empty,

    fn deinit(self: *WitnessSearch, gpa: Allocator) void {
        self.nodes.deinit(gpa);
        self.visited.deinit(gpa);
        self.open.deinit(gpa);
    }

    /// Is a word of the intersection `e` found? When it is, every term on the path to it is
    /// remembered non-empty (`empty_cache`), as the exact search's path is.
    fn run(self: *WitnessSearch, set: *ExprSet, e: ExprId) Error!bool {
        assert(set.tag(e) == .and_);
        if (try self.reach(set, e, 0, 0)) |goal| return self.found(set, goal);
        var expansions: u32 = 0;
        while (self.open.pop()) |entry| {
            if (expansions >= witness_search_expansions_max) return false;
            expansions += 1;
            const x: ExprId = @fromBackingInt(@intCast(self.nodes.items[entry.node].term));
            try set.spend(set.args(x).len);
            // The next bytes, collected first (deriving builds terms, which may move `args`).
            var bytes: ByteSet = .{};
            for (set.args(x)) |raw| {
                const m: ExprId = @fromBackingInt(@intCast(raw));
                if (set.isBoolean(m) or set.nullable(m)) continue;
                bytes.add(set.shortestByte(m));
            }
            for (0..256) |i| {
                const b: u8 = @intCast(i);
                if (!bytes.contains(b)) continue;
                const y = try set.deriv(x, b);
                if (y == .nothing) continue;
                if (try self.reach(set, y, entry.node, entry.depth + 1)) |goal| return self.found(set, goal);
            }
        }
        return false;
    }

    fn found(self: *WitnessSearch, set: *ExprSet, goal: u32) Error!bool {
        var i: u32 = goal;
        while (true) {
            try set.empty_cache.put(set.gpa, self.nodes.items[i].term, false);
            if (i == 0) return true;
            i = self.nodes.items[i].parent;
        }
    }

    /// Records `t` reached from node `parent` after `depth` bytes: its node when it is a goal,
    /// else queued (once) when it is an intersection not known empty.
    fn reach(self: *WitnessSearch, set: *ExprSet, t: ExprId, parent: u32, depth: u32) Error!?u32 {
        const gop = try self.visited.getOrPut(set.gpa, t.index());
        if (gop.found_existing) return null;
        const node: u32 = @intCast(self.nodes.items.len);
        try self.nodes.append(set.gpa, .{ .term = t.index(), .parent = parent });
        if (!set.isBoolean(t) or set.nullable(t)) return node;
        if (set.empty_cache.get(t.index())) |empty| return if (empty) null else node;
        if (set.longerThanExcluded(t)) return node;
        if (set.tag(t) != .and_) return null;
        var rests: u32 = 0;
        for (set.args(t)) |m| rests +|= set.lengths.items[m].min;
        try self.open.push(set.gpa, .{ .f = rests, .depth = depth, .node = node });
        return null;
    }
};

/// The exact emptiness search (`ExprSet.isEmptySearch`): best first over the derivatives of a
/// term by one byte of each class, the term with the least (bytes read + shortest word left)
/// first, deeper first on ties, then in the order found. Only the lengths and the bytes read
/// order it, so the terms visited do not depend on term ids (the order of an intersection's
/// members). A term reached is a goal when it is nullable, plain (and not ∅), or known
/// non-empty; an empty term's search visits everything reachable, in any order.
const Search = struct {
    const Node = struct { term: u32, parent: u32, depth: u32 };
    const Entry = struct { f: u32, depth: u32, node: u32 };
    nodes: std.ArrayList(Node) = .empty,
    visited: IntMap(u32, void) = .empty,
    open: std.PriorityQueue(Entry, void, order) = .empty,
    /// The expanded intersection's members, their rows (`loadMemberRows`) and its
    /// derivatives so far by their members' derivatives (`memberDerivative`).
    members: std.ArrayList(ExprId) = .empty,
    member_rows: std.ArrayList(u32) = .empty,
    vector: std.ArrayList(ExprId) = .empty,
    distinct: IntMap(u64, Distinct) = .empty,
    distinct_words: std.ArrayList(u32) = .empty,
    /// Members seen in an expansion of this search: met again, a member gets its row.
    members_met: IntMap(u32, void) = .empty,
    /// Intersections queued, by their members with one counter's bounds left out
    /// (its heads, repeated term and tail): the widest bounds queued for each (`dominated`).
    counted: IntMap(u64, Counted) = .empty,
    /// Breadth first, intersections contained in one queued before left out (`dominated`):
    /// the search of `ExprSet.emptyRelaxed`.
    relaxed: bool = false,
    counted_words: std.ArrayList(u32) = .empty,
    key: std.ArrayList(u32) = .empty,
    const Distinct = struct { start: u32, term: u32 };
    const Counted = struct { start: u32, len: u32, min: u32, max: u32 };

    fn order(_: void, a: Entry, b: Entry) std.math.Order {
        if (a.f != b.f) return std.math.order(a.f, b.f);
        if (a.depth != b.depth) return std.math.order(b.depth, a.depth);
        return std.math.order(a.node, b.node);
    }

    fn deinit(self: *Search, gpa: Allocator) void {
        self.nodes.deinit(gpa);
        self.visited.deinit(gpa);
        self.open.deinit(gpa);
        self.members.deinit(gpa);
        self.member_rows.deinit(gpa);
        self.vector.deinit(gpa);
        self.distinct.deinit(gpa);
        self.distinct_words.deinit(gpa);
        self.members_met.deinit(gpa);
        self.counted.deinit(gpa);
        self.counted_words.deinit(gpa);
        self.key.deinit(gpa);
    }

    const Outcome = union(enum) { found: u32, exhausted, paused };

    /// Searches from `e` (or goes on where the last call paused), expanding at most
    /// `expansions_max` more terms (null: no bound but fuel): the node of a goal reached,
    /// `exhausted` when every term reachable is empty, else `paused`.
    fn run(self: *Search, set: *ExprSet, e: ExprId, representatives: []const u8, expansions_max: ?u32) Error!Outcome {
        if (self.nodes.items.len == 0) {
            if (try self.reach(set, e.index(), 0, 0)) |g| return .{ .found = g };
        }
        var expansions: u32 = 0;
        while (self.open.count() > 0) {
            if (expansions_max) |m| if (expansions >= m) return .paused;
            const entry = self.open.pop().?;
            const x: ExprId = @fromBackingInt(@intCast(self.nodes.items[entry.node].term));
            if (set.empty_cache.get(x.index())) |empty| {
                // Shown empty since it was queued (a known non-empty term is a goal when reached).
                if (empty) continue;
                return .{ .found = entry.node };
            }
            expansions += 1;
            set.search_expanded += 1;
            // A derivative per byte class, plus the visited set and queue that grow with the
            // search (measured: a visited term costs about two units per class).
            try set.spend(2 * representatives.len);
            const depth = entry.depth + 1;
            if (set.row_cache.get(x.index())) |start| {
                // Searched before (a search that ran out of fuel is repeated by every call):
                // the row is one read, where a derivative per class was a lookup in a cache
                // of millions of entries, a cache miss each.
                for (set.row_words.items[start..][0..representatives.len]) |entry_word| {
                    const y = entry_word & ~row_boolean_bit;
                    if (y == ExprId.nothing.index()) continue;
                    if (try self.reach(set, y, entry.node, depth)) |g| return .{ .found = g };
                }
                continue;
            }
            // An intersection is derived through its members' rows (`loadMemberRows`).
            const member_count: usize = if (set.tag(x) == .and_) set.args(x).len else 0;
            if (member_count > 0) try self.loadMemberRows(set, x, representatives);
            if (set.row_words.items.len + representatives.len > row_words_max) {
                set.row_cache.clearRetainingCapacity();
                set.row_words.clearRetainingCapacity();
            }
            const start: u32 = @intCast(set.row_words.items.len);
            errdefer set.row_words.shrinkRetainingCapacity(start);
            try set.row_words.ensureUnusedCapacity(set.gpa, representatives.len);
            for (representatives, 0..) |b, class| {
                const y = if (member_count > 0)
                    try self.memberDerivative(set, b, class, representatives.len)
                else
                    try set.deriv(x, b);
                set.row_words.appendAssumeCapacity(y.index() | (if (set.isBoolean(y)) row_boolean_bit else 0));
                if (y == .nothing) continue;
                if (try self.reach(set, y.index(), entry.node, depth)) |g| {
                    // The search ends: the row stays incomplete and is not kept.
                    set.row_words.shrinkRetainingCapacity(start);
                    return .{ .found = g };
                }
            }
            try set.row_cache.put(set.gpa, x.index(), start);
        }
        return .exhausted;
    }

    /// Prepares the derivatives of the intersection `x` by every class from its members'
    /// rows: a member's derivatives recur from term to term of the search (ten members of a
    /// few states each make hundreds of intersections), so its row is one lookup where a
    /// derivative per class was one each. A member met for the first time in this search is
    /// derived class by class instead (`row_pending`), as it is needed: a member that changes
    /// at every byte (a residue run's residue) would otherwise be derived by every class even
    /// where another member's derivative is already ∅.
    fn loadMemberRows(self: *Search, set: *ExprSet, x: ExprId, representatives: []const u8) Error!void {
        const class_count = representatives.len;
        self.member_rows.clearRetainingCapacity();
        self.distinct.clearRetainingCapacity();
        self.distinct_words.clearRetainingCapacity();
        self.members.clearRetainingCapacity();
        try self.members.appendSlice(set.gpa, @ptrCast(set.args(x)));
        // A unit per member, and per eight entries of the rows read (the reads replace a
        // derivative's unit per member and class).
        try set.spend(self.members.items.len + self.members.items.len * class_count / 8);
        try self.member_rows.ensureTotalCapacity(set.gpa, self.members.items.len * class_count);
        try self.vector.resize(set.gpa, self.members.items.len);
        for (self.members.items) |m| {
            if (set.row_cache.get(m.index())) |start| {
                for (set.row_words.items[start..][0..class_count]) |word| {
                    self.member_rows.appendAssumeCapacity(word & ~row_boolean_bit);
                }
                continue;
            }
            const met = try self.members_met.getOrPut(set.gpa, m.index());
            if (!met.found_existing) {
                self.member_rows.appendNTimesAssumeCapacity(row_pending, class_count);
                continue;
            }
            if (set.row_words.items.len + class_count > row_words_max) {
                set.row_cache.clearRetainingCapacity();
                set.row_words.clearRetainingCapacity();
            }
            const start: u32 = @intCast(set.row_words.items.len);
            errdefer set.row_words.shrinkRetainingCapacity(start);
            try set.row_words.ensureUnusedCapacity(set.gpa, class_count);
            for (representatives) |b| {
                const d = try set.deriv(m, b);
                set.row_words.appendAssumeCapacity(d.index() | (if (set.isBoolean(d)) row_boolean_bit else 0));
                self.member_rows.appendAssumeCapacity(d.index());
            }
            try set.row_cache.put(set.gpa, m.index(), start);
        }
    }

    /// A `member_rows` entry of a member derived as it is needed (`loadMemberRows`).
    const row_pending: u32 = std.math.maxInt(u32);

    /// The derivative of the intersection whose member rows `loadMemberRows` loaded, by the
    /// byte `b` of class `class`: ∅ when a member's is (the rows read first, then the members
    /// derived as needed), else the intersection of the members' (what `deriv` builds).
    /// Classes whose members' derivatives are all the same give the same term, built once:
    /// in a JSON string, every printable byte that no member names.
    fn memberDerivative(self: *Search, set: *ExprSet, b: u8, class: usize, class_count: usize) Error!ExprId {
        const words: []u32 = @ptrCast(self.vector.items);
        for (words, 0..) |*w, i| {
            w.* = self.member_rows.items[i * class_count + class];
            if (w.* == ExprId.nothing.index()) return .nothing;
        }
        for (words, self.members.items) |*w, m| {
            if (w.* != row_pending) continue;
            const d = try set.deriv(m, b);
            if (d == .nothing) return .nothing;
            w.* = d.index();
        }
        const seen = try self.distinct.getOrPut(set.gpa, hashWords(words));
        if (seen.found_existing) {
            const first = seen.value_ptr.*;
            if (wordsEqual(self.distinct_words.items[first.start..][0..words.len], words)) return @fromBackingInt(first.term);
        }
        // (A hash shared with other derivatives keeps the first: this one is built again.)
        const y = try set.andAll(self.vector.items);
        if (!seen.found_existing) {
            seen.value_ptr.* = .{ .start = @intCast(self.distinct_words.items.len), .term = y.index() };
            try self.distinct_words.appendSlice(set.gpa, words);
        }
        return y;
    }

    /// Records `y` reached from node `parent` after `depth` bytes: its node when it is a goal,
    /// else queued (once).
    fn reach(self: *Search, set: *ExprSet, y: u32, parent: u32, depth: u32) Error!?u32 {
        const gop = try self.visited.getOrPut(set.gpa, y);
        if (gop.found_existing) return null;
        const node: u32 = @intCast(self.nodes.items.len);
        try self.nodes.append(set.gpa, .{ .term = y, .parent = parent, .depth = depth });
        const t: ExprId = @fromBackingInt(@intCast(y));
        if (!set.isBoolean(t) or set.nullable(t)) return node;
        if (set.empty_cache.get(y)) |empty| {
            if (!empty) return node;
            return null;
        }
        if (set.longerThanExcluded(t)) return node;
        if (!self.relaxed) {
            if (set.relaxed_shown and set.tag(t) == .and_ and set.args(t).len >= 3) {
                // A state of an intersection whose relaxation a relaxed search showed empty
                // (Handwritten---allany13: after its first byte, a lexeme with a first `c` is
                // one with a first `b`, shown empty by its relaxation).
                if (try set.relaxation(t)) |r| if (set.empty_cache.get(r.index()) == true) {
                    try set.empty_cache.put(set.gpa, y, true);
                    return null;
                };
            }
            try self.open.push(set.gpa, .{ .f = depth +| set.lengthsOf(t).min, .depth = depth, .node = node });
            return null;
        }
        if (try self.dominated(set, t)) return null;
        try self.open.push(set.gpa, .{ .f = depth, .depth = depth, .node = node });
        return null;
    }

    /// Is the intersection `t` contained in one queued before (so that this search need not
    /// expand it)? That one has the same members but one, `h₁ (h₂ (… r{a′,b′} s))`, where `t`
    /// has `h₁ (h₂ (… r{a,b} s))` with a′ ≤ a and b ≤ b′: the same heads, repeated term and
    /// tail, wider bounds, so every word of `t` is a word of it. Any word of `t` is then found
    /// from there, and when that one is empty so is `t`: skipping `t` leaves every answer of
    /// the search unchanged. A length bound's counter is such a member (Handwritten---allany13:
    /// `"C{10,20}"` beside `^a`, `x$`, `1{19}` and `[aA][12].*[zZ]`, empty since the first
    /// four need 21 characters): the other members' states recur with every count left, and
    /// each is expanded only at the count where it is first queued, not at every count after.
    /// Otherwise `t` is recorded with its bounds (widened when they contain the recorded ones).
    fn dominated(self: *Search, set: *ExprSet, t: ExprId) Error!bool {
        if (set.tag(t) != .and_) return false;
        const members = set.args(t);
        // A unit per term, and one per eight members walked.
        try set.spend(1 + members.len / 8);
        // Every counted member gives a key (a length bound beside `1{19}`: both counted).
        var found: [counted_members_max]?*Counted = @splat(null);
        var splits: [counted_members_max]ExprSet.Counted = undefined;
        var n: usize = 0;
        for (members, 0..) |raw, at| {
            if (n == counted_members_max) break;
            const c = set.countedSplit(@fromBackingInt(@intCast(raw))) orelse continue;
            try set.spend(1);
            self.key.clearRetainingCapacity();
            try self.key.appendSlice(set.gpa, members[0..at]);
            try self.key.appendSlice(set.gpa, members[at + 1 ..]);
            // The counted member with its bounds left out: its heads, then the repeated term
            // and the tail (after the members' count, so that members and heads cannot run
            // into each other).
            try self.key.append(set.gpa, @intCast(members.len));
            var x: ExprId = @fromBackingInt(@intCast(raw));
            for (0..c.heads) |_| {
                try self.key.append(set.gpa, set.args(x)[0]);
                x = set.argId(x, 1);
            }
            try self.key.append(set.gpa, c.child.index());
            try self.key.append(set.gpa, if (c.tail) |tail| tail.index() else ExprId.nothing.index());
            const words = self.key.items;
            const gop = try self.counted.getOrPut(set.gpa, hashWords(words));
            if (!gop.found_existing) {
                gop.value_ptr.* = .{ .start = @intCast(self.counted_words.items.len), .len = @intCast(words.len), .min = c.min, .max = c.max };
                try self.counted_words.appendSlice(set.gpa, words);
                continue;
            }
            const seen = gop.value_ptr;
            // (Another key with the same hash: not compared.)
            if (!wordsEqual(self.counted_words.items[seen.start..][0..seen.len], words)) continue;
            if (seen.min <= c.min and c.max <= seen.max) return true;
            found[n] = seen;
            splits[n] = c;
            n += 1;
        }
        // Not contained in any: t is queued, and its bounds widen the ones recorded.
        for (found[0..n], splits[0..n]) |seen_or_null, c| {
            const seen = seen_or_null.?;
            if (c.min <= seen.min and seen.max <= c.max) {
                seen.min = c.min;
                seen.max = c.max;
            }
        }
        return false;
    }

    /// Counted members of an intersection that `dominated` keys (the first ones in order).
    const counted_members_max = 4;
};

fn singleByte(b: u8) ByteSet {
    var set: ByteSet = .{};
    set.add(b);
    return set;
}

// ---------------------------------------------------------------------------------------------
// Tests

fn matches(set: *ExprSet, e: ExprId, input: []const u8) !bool {
    var cur = e;
    for (input) |b| cur = try set.deriv(cur, b);
    return set.nullable(cur);
}

test "bytesEqual and hashBytes agree with std.mem.eql on every length and every differing byte" {
    var a: [40]u8 = undefined;
    var b: [40]u8 = undefined;
    for (&a, 0..) |*x, i| x.* = @truncate(i * 7 + 3);
    for (0..a.len + 1) |len| {
        b = a;
        try std.testing.expect(bytesEqual(a[0..len], b[0..len]));
        try std.testing.expectEqual(hashBytes(a[0..len], 1), hashBytes(b[0..len], 1));
        try std.testing.expect(!bytesEqual(a[0..len], b[0..len -| 1]) or len == 0);
        for (0..len) |i| {
            b = a;
            b[i] ^= 0x80;
            try std.testing.expectEqual(std.mem.eql(u8, a[0..len], b[0..len]), bytesEqual(a[0..len], b[0..len]));
            try std.testing.expect(!bytesEqual(a[0..len], b[0..len]));
            try std.testing.expect(hashBytes(a[0..len], 1) != hashBytes(b[0..len], 1));
        }
    }
    // The salt (a pattern's flags) is part of the hash, and so is the length (zero tail bytes).
    try std.testing.expect(hashBytes("ab", 0) != hashBytes("ab", 1));
    try std.testing.expect(hashBytes("ab", 0) != hashBytes("ab\x00", 0));
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

test "a derivative cache emptied when full (in steps) still recognises the language" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    set.deriv_cache_slots_max = 8; // the smallest map: emptied at its 7th entry
    // (ab|cd){2,40} ∩ ¬(.*cdcd.*): pairs of ab/cd, 2 to 40 of them, never two cd in a row.
    const ab = try set.concat(try set.byte('a'), try set.byte('b'));
    const cd = try set.concat(try set.byte('c'), try set.byte('d'));
    const pairs = try set.repeat(try set.alt2(ab, cd), 2, 40);
    var every_byte: ByteSet = .{};
    every_byte.addRange(0, 255);
    const any = try set.repeat(try set.byteSet(every_byte), 0, repeat_unbounded);
    const cdcd = try set.concat(try set.concat(cd, cd), any);
    const banned = try set.not(try set.concat(any, cdcd));
    const e = try set.andAll(&.{ pairs, banned });
    var prng = std.Random.DefaultPrng.init(7);
    const random = prng.random();
    var text: [84]u8 = undefined;
    var round: u32 = 0;
    while (round < 300) : (round += 1) {
        // A random sequence of ab/cd pairs, sometimes with a stray byte; the oracle below
        // decides it by counting.
        const pair_count = random.uintLessThan(u32, 42);
        var len: usize = 0;
        var repeated_cd = false;
        var last_cd = false;
        for (0..pair_count) |_| {
            const is_cd = random.boolean();
            if (is_cd and last_cd) repeated_cd = true;
            last_cd = is_cd;
            text[len] = if (is_cd) 'c' else 'a';
            text[len + 1] = if (is_cd) 'd' else 'b';
            len += 2;
        }
        const stray = random.uintLessThan(u32, 8) == 0 and len > 0;
        if (stray) text[random.uintLessThan(usize, len)] = 'x';
        const expected = !stray and pair_count >= 2 and pair_count <= 40 and !repeated_cd;
        try std.testing.expectEqual(expected, try matches(&set, e, text[0..len]));
        try std.testing.expect(set.deriv_cache.capacity() <= 8);
    }
}

test "terms stay hash-consed across the table's growth (stored hashes)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // 30,000 distinct terms (the table grows past 2^15 slots), then the same again: every
    // one found, none new.
    var ids: [30_000]ExprId = undefined;
    for (&ids, 0..) |*id, i| {
        id.* = try set.concat(try set.byte(@intCast(i % 256)), try set.byte(@intCast(i / 256)));
    }
    const count = set.count();
    for (ids, 0..) |id, i| {
        try std.testing.expectEqual(id, try set.concat(try set.byte(@intCast(i % 256)), try set.byte(@intCast(i / 256))));
    }
    try std.testing.expectEqual(count, set.count());
}

test "a term table reserved up front takes its terms without growing, and finds terms made before" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const before = try set.concat(try set.byte('a'), try set.byte('b'));
    try set.reserveTable(20_000);
    const slots = set.table.slots.ptr;
    try std.testing.expectEqual(before, try set.concat(try set.byte('a'), try set.byte('b')));
    for (0..20_000 - set.count()) |i| {
        _ = try set.concat(try set.byte(@intCast(i % 256)), try set.byte(@intCast(i / 256 + 'c')));
    }
    try std.testing.expectEqual(slots, set.table.slots.ptr);
    try std.testing.expectEqual(before, try set.concat(try set.byte('a'), try set.byte('b')));
}

test "a copy of a base set's table finds every base term by its id, slots copied or placed again" {
    const gpa = std.testing.allocator;
    var base = try ExprSet.init(gpa, .{});
    defer base.deinit();
    var ids: [300]ExprId = undefined;
    for (&ids, 0..) |*id, i| id.* = try base.concat(try base.byte(@intCast(i % 64)), try base.byte(@intCast(i / 64)));
    // No room asked: the base's slots are copied as they are; room for 5,000 more: the ids
    // are placed again in a larger table.
    for ([_]u32{ 0, 5000 }, [_]bool{ true, false }) |room, same_size| {
        var copy = try ExprSet.initFrom(gpa, .{}, &base, 1, room);
        defer copy.deinit();
        try std.testing.expectEqual(same_size, copy.table.slots.len == base.table.slots.len);
        for (ids, 0..) |id, i| {
            try std.testing.expectEqual(id, try copy.concat(try copy.byte(@intCast(i % 64)), try copy.byte(@intCast(i / 64))));
        }
        try std.testing.expectEqual(base.count(), copy.count());
        // A new term gets the next id, and is found again after the table grows.
        const fresh = try copy.literal("not in the base");
        try std.testing.expect(fresh.index() >= base.count());
        for (0..2000) |i| _ = try copy.concat(try copy.byte(@intCast(i % 256)), try copy.byte(@intCast(200 + i / 256)));
        try std.testing.expectEqual(fresh, try copy.literal("not in the base"));
    }
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
    // [a-z]{2} ∩ ¬[a-z]+ is ∅ at construction ([a-z]{2} ⊆ [a-z]+ by structure);
    // [a-z]{2} ∩ ¬([a-z][a-z]) is empty too, but only the search shows it.
    const two = try set.repeat(try set.byteSet(lower), 2, 2);
    try std.testing.expectEqual(ExprId.nothing, try set.andAll(&.{ two, try set.not(word) }));
    const pair = try set.concat(try set.byteSet(lower), try set.byteSet(lower));
    const empty = try set.andAll(&.{ two, try set.not(pair) });
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

const regex_syntax = @import("regex_syntax.zig");

/// `WitnessSearch.run` on its own.
fn witnessSearch(set: *ExprSet, e: ExprId) !bool {
    var witness: WitnessSearch = .{};
    defer witness.deinit(set.gpa);
    return witness.run(set, e);
}

fn parseTest(set: *ExprSet, pattern: []const u8) !ExprId {
    var diag: regex_syntax.Diagnostic = .{};
    return regex_syntax.parse(set, pattern, .{}, &diag);
}

/// A test's search for a random word of 1 to `word_max` letters of `abc`, between quotes:
/// `"[abc]*word[abc]*"`.
fn randomSearchTest(set: *ExprSet, random: std.Random, word_max: usize) !ExprId {
    var word: [8]u8 = undefined;
    const len = 1 + random.uintLessThan(usize, word_max);
    for (word[0..len]) |*c| c.* = "abc"[random.uintLessThan(usize, 3)];
    var text: [32]u8 = undefined;
    return parseTest(set, try std.fmt.bufPrint(&text, "\"[abc]*{s}[abc]*\"", .{word[0..len]}));
}

/// Every byte as its own representative: emptiness decided over single bytes (tests).
const each_byte_alone: [256]u8 = blk: {
    var bytes: [256]u8 = undefined;
    for (&bytes, 0..) |*b, i| b.* = @intCast(i);
    break :blk bytes;
};

test "length bounds make an intersection ∅ without a search" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // A pattern of exactly six letters against a counter with room for five: what a string
    // with `pattern` and `maxLength` becomes once the text has used the length budget. (The
    // bounds are in bytes: a counter of UTF-8 characters has room for four bytes each.)
    const six = try parseTest(&set, "[a-z]{6}\"");
    const at_most_five = try parseTest(&set, "[ -!#-~]{0,5}\"");
    try std.testing.expectEqual(Lengths{ .min = 7, .max = 7 }, set.lengthsOf(six));
    try std.testing.expectEqual(Lengths{ .min = 1, .max = 6 }, set.lengthsOf(at_most_five));
    try std.testing.expectEqual(ExprId.nothing, try set.andAll(&.{ six, at_most_five }));
    // One more byte of room and the intersection is a term again (and not empty).
    const at_most_six = try parseTest(&set, "[ -!#-~]{0,6}\"");
    const both = try set.andAll(&.{ six, at_most_six });
    try std.testing.expect(both != .nothing);
    try std.testing.expect(!try set.isEmpty(both, &.{ 'a', '"', 0 }));
}

test "pattern ∩ long counter: a witness decides in little fuel where the search could not" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // MaskBench Github_easy---o21053: at most 100 words, at most 5000 characters, and here at
    // least 300 characters, so the pattern's own shortest completion is too short. The old
    // breadth-first search ran out of 10,000 units here.
    const words = try parseTest(&set, "(?:[a-z]+ +){0,99}[a-z]+\"");
    const length = try parseTest(&set, "[^\"]{300,5000}\"");
    var e = try set.andAll(&.{ words, length });
    const representatives = [_]u8{ 0, ' ', '"', 'a' }; // one byte per class
    for ("ab cd e") |b| e = try set.deriv(e, b);
    set.fuel = 10_000;
    try std.testing.expect(!try set.isEmpty(e, &representatives));
    // Past the counter, the shortest rest is longer than the longest: ∅ by arithmetic.
    set.fuel = std.math.maxInt(u64);
    var full = try set.andAll(&.{ words, try parseTest(&set, "[ -!#-~]{0,3}\"") });
    for ("abc") |b| full = try set.deriv(full, b);
    try std.testing.expect(!try set.isEmpty(full, &representatives));
    try std.testing.expectEqual(ExprId.nothing, try set.deriv(full, ' '));
}

test "pattern ∩ a bound past the walk's old length: a walk through bytes off the leader's path" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // MaskBench Handwritten---string1 (minLength 10000): the counter leads with a space, which
    // the pattern refuses, so every byte is found off its path; before, the walk ran out of
    // scans after a few hundred characters and the search took the whole bound.
    const pattern = try parseTest(&set, "\"(?:[a-z][0-9])+\"");
    const representatives = [_]u8{ 0, ' ', '"', '0', 'a' }; // one byte per class
    const long = try set.andAll(&.{ pattern, try parseTest(&set, "\"[ -!#-~]{3000,}\"") });
    set.fuel = 100_000; // the walk: 62,000 units; the search after it: 187,000
    try std.testing.expect(!try set.isEmpty(long, &representatives));
    // Odd lengths: the pattern's words have an even number of characters.
    set.fuel = std.math.maxInt(u64);
    const odd = try set.andAll(&.{ pattern, try parseTest(&set, "\"[ -!#-~]{3001}\"") });
    try std.testing.expect(try set.isEmpty(odd, &representatives));
    const even = try set.andAll(&.{ pattern, try parseTest(&set, "\"[ -!#-~]{3000}\"") });
    try std.testing.expect(!try set.isEmpty(even, &representatives));
}

test "a witness walk keeps its last four scanned bytes, most recent first" {
    var recent: RecentBytes = .{};
    for ("abcdef") |b| recent.add(b);
    try std.testing.expectEqualSlices(u8, "fedc", recent.bytes[0..recent.count]);
}

test "fuel is charged by the size of the work, cache hits included" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var members: [1000]ExprId = undefined;
    for (&members, 0..) |*m, i| {
        var text: [8]u8 = undefined;
        m.* = try set.literal(std.fmt.bufPrint(&text, "w{d}", .{i}) catch unreachable);
    }
    // One alternation call sorts a thousand members: it costs at least a thousand units.
    set.refuel(500, .step_fuel);
    try std.testing.expectError(error.LimitExceeded, set.alt(&members));
    try std.testing.expectEqual(limit_error.Kind.step_fuel, limit_error.hit);
    set.refuel(1_000_000, .compile_fuel);
    const all = try set.alt(&members);
    try std.testing.expect(set.fuel_spent >= 1000);
    // A cached derivative is still a unit: a search that re-derives cached terms is work.
    _ = try set.deriv(all, 'w');
    set.refuel(0, .compile_fuel);
    try std.testing.expectError(error.LimitExceeded, set.deriv(all, 'w'));
    try std.testing.expectEqual(limit_error.Kind.compile_fuel, limit_error.hit);
}

test "an alternation of literals is factored into their trie, and deriving it builds nothing" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const words = [_][]const u8{ "get_user", "get_users", "get_order", "set_user", "gem", "x" };
    var members: [words.len]ExprId = undefined;
    for (&members, words) |*m, w| m.* = try set.literal(w);
    const all = try set.altFactored(&members);
    // One member per distinct first byte: g, s and x.
    try std.testing.expectEqual(Tag.alt, set.tag(all));
    try std.testing.expectEqual(@as(usize, 3), set.args(all).len);
    // The same terms in any order, or added one at a time, are the same term.
    var reversed = members;
    std.mem.reverse(ExprId, &reversed);
    try std.testing.expectEqual(all, try set.altFactored(&reversed));
    // The plain normal form keeps the members (same language, another term).
    const plain = try set.alt(&members);
    try std.testing.expect(plain != all);
    try std.testing.expectEqual(@as(usize, words.len), set.args(plain).len);
    // Walking a word derives into existing subterms: no new term is interned.
    const before = set.count();
    var e = all;
    for ("get_users") |b| e = try set.deriv(e, b);
    try std.testing.expect(set.nullable(e));
    try std.testing.expectEqual(before, set.count());
    // The language is unchanged: every word, and nothing else.
    for (words) |w| try std.testing.expect(try matches(&set, all, w));
    for ([_][]const u8{ "", "get", "get_", "get_userss", "ge", "gemm", "set_users", "y" }) |w| {
        try std.testing.expect(!try matches(&set, all, w));
    }
}

test "factoring a long shared prefix stops at its depth bound and stays exact" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var a: [300]u8 = @splat('p');
    var b: [300]u8 = @splat('p');
    a[299] = 'a';
    b[299] = 'b';
    const e = try set.altFactored(&.{ try set.literal(&a), try set.literal(&b) });
    try std.testing.expect(try matches(&set, e, &a));
    try std.testing.expect(try matches(&set, e, &b));
    try std.testing.expect(!try matches(&set, e, a[0..299]));
    try std.testing.expectEqual(@as(u32, 0), set.factor_depth);
}

test "a counted run inside an unanchored pattern keeps two derivatives, not one per start" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // `"C*[A-Za-z]{1,255}C*"`: the JSON Schema patternProperties key `[A-Za-z]{1,255}`, a search.
    const counted = try parseTest(&set, "\"[^\"]*[A-Za-z]{1,255}[^\"]*\"");
    const single = try parseTest(&set, "\"[^\"]*[A-Za-z][^\"]*\"");
    try std.testing.expectEqual(single, counted);
    var e = counted;
    for ("\"abcdefghijklmnopqrstuvwxyz") |b| e = try set.deriv(e, b);
    try std.testing.expectEqual(Tag.alt, set.tag(e));
    try std.testing.expect(set.args(e).len <= 2);
}

test "shortest words follow the length table" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const e = try parseTest(&set, "(?:xyz|ab)+c{2,4}(?:d|ef)?");
    var out: [16]u8 = undefined;
    const w = (try set.shortestWord(e, &out)).?;
    try std.testing.expectEqualStrings("abcc", w);
    try std.testing.expect(try set.accepts(e, w));
    try std.testing.expectEqual(@as(?[]const u8, null), try set.shortestWord(e, out[0..3]));
}

test "two searches intersected: the kept leader finds a witness without the search" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // MaskBench Github_hard---o82144: a key matching both patternProperties `github` and
    // `hipchat`. Choosing the longest rest afresh at every byte ping-ponged between the two
    // (each one's next byte undid the other's partial match) until the walk's length bound,
    // and the search then derived the intersection by every byte class.
    const github = try parseTest(&set, "\"[ -!#-~]*github[ -!#-~]*\"");
    const hipchat = try parseTest(&set, "\"[ -!#-~]*hipchat[ -!#-~]*\"");
    var e = try set.andAll(&.{ github, hipchat });
    var classes: ByteSet = .{};
    for ("\"bcghiptu") |b| classes.add(b);
    var representatives: [256]u8 = undefined;
    var n: usize = 0;
    for (0..256) |b| if (classes.contains(@intCast(b)) or b == 'a' or b == 0) {
        representatives[n] = @intCast(b);
        n += 1;
    };
    for ("\"gith") |b| e = try set.deriv(e, b);
    set.refuel(1_500, .step_fuel);
    try std.testing.expect(!try set.isEmpty(e, representatives[0..n]));
    try std.testing.expect(set.fuel_spent < 1_500);
}

test "x ∩ ¬y is ∅ at construction when x ⊆ y by structure (keys that exclude each other)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // JSON Schema keys: "any other key" excludes the patternProperties searches; a search
    // every key matches (`.*`) excludes everything.
    const any = try parseTest(&set, "\"[a-z_]*\"");
    const netdir = try parseTest(&set, "\"[a-z_]*netdir_(?:work|home)[a-z_]*\"");
    const netdrv = try parseTest(&set, "\"[a-z_]*netdrv_[a-z]+[a-z_]*\"");
    try std.testing.expectEqual(ExprId.nothing, try set.andAll(&.{ netdir, try set.not(any) }));
    try std.testing.expectEqual(ExprId.nothing, try set.andAll(&.{ netdir, try set.not(try set.alt2(any, netdrv)) }));
    // "Neither netdir nor netdrv": alive until the text has matched one, then ∅ as built.
    var other = try set.andAll(&.{ any, try set.not(try set.alt2(netdir, netdrv)) });
    const representatives = each_byte_alone;
    for ("\"a_netdir_") |b| other = try set.deriv(other, b);
    try std.testing.expect(!try set.isEmpty(other, &representatives));
    for ("work") |b| other = try set.deriv(other, b);
    try std.testing.expectEqual(ExprId.nothing, other);
    // "netdrv but not netdir" after a netdir key: ∅ as built as well.
    var drv = try set.andAll(&.{ netdrv, try set.not(netdir) });
    for ("\"netdir_home") |b| drv = try set.deriv(drv, b);
    try std.testing.expectEqual(ExprId.nothing, drv);
}

test "includes never claims an inclusion that a word refutes (random terms over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const random = prng.random();
    var terms: [160]ExprId = undefined;
    for (&terms, 0..) |*t, i| t.* = try randomTerm(&set, random, @intCast(1 + i % 3), counters_small);
    // Every word over {a, b} of at most 7 bytes.
    var words: std.ArrayList([]const u8) = .empty;
    defer {
        for (words.items) |w| std.testing.allocator.free(w);
        words.deinit(std.testing.allocator);
    }
    for (0..8) |len| {
        for (0..(@as(usize, 1) << @intCast(len))) |bits| {
            const w = try std.testing.allocator.alloc(u8, len);
            for (w, 0..) |*c, i| c.* = if ((bits >> @intCast(i)) & 1 == 1) 'b' else 'a';
            try words.append(std.testing.allocator, w);
        }
    }
    var shown: u32 = 0;
    for (terms) |x| for (terms) |y| {
        var budget: u32 = 4096;
        if (!set.includes(x, y, &budget) or x == y) continue;
        shown += 1;
        for (words.items) |w| {
            if (try matches(&set, x, w)) try std.testing.expect(try matches(&set, y, w));
        }
    };
    try std.testing.expect(shown > 64); // more than x ⊆ x: the test exercises the rules
}

test "a second witness walk, leaders keeping the lead, finds what ping-ponging leaders undid (Handwritten string3)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // allOf of three patterns, the `anyOf` of their negations, `minLength` 100: the option
    // whose negated pattern is the second, anchored at the start.
    const members = [_]ExprId{
        try parseTest(&set, "\"(?:[a-z][0-9])+\""),
        try parseTest(&set, "\"[a-z0-9]*(?:c1d3g3[a-z0-9]{4,8}){6}[a-z0-9]*\""),
        try parseTest(&set, "\"[a-z0-9]*(?:t|8){10}\""),
        try parseTest(&set, "\"[a-z0-9]{100,}\""),
        try set.not(try parseTest(&set, "\"(?:c1d3g3[a-z0-9]{4,8}){6}[a-z0-9]*\"")),
    };
    const e = try set.andAll(&members);
    // Not empty: a word of every member, written by hand.
    var word: std.ArrayList(u8) = .empty;
    defer word.deinit(std.testing.allocator);
    try word.append(std.testing.allocator, '"');
    for (0..20) |_| try word.appendSlice(std.testing.allocator, "a0");
    for (0..6) |_| try word.appendSlice(std.testing.allocator, "c1d3g3a0a0");
    for (0..5) |_| try word.appendSlice(std.testing.allocator, "t8");
    try word.append(std.testing.allocator, '"');
    try std.testing.expect(try matches(&set, e, word.items));
    const representatives = each_byte_alone;
    // Shown by the second walk; the search needed about 800,000 units for it.
    set.refuel(60_000, .step_fuel);
    try std.testing.expect(try set.hasWitness(e, &representatives));
    // The first walk alone fails: the search's target lost the lead ten bytes from its end.
    try std.testing.expect(!try set.walkWitness(e, &representatives, witness_switches_max));
}

test "the witness search, nearest member first, satisfies several searches inside a length bound (Handwritten allany23)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // allany23's first lexeme with ASCII characters: a search `[aA][12].*[zZ]`, exactly
    // sixteen characters, six searches of three characters, and 10 to 90 characters.
    const members = [_]ExprId{
        try parseTest(&set, "\"[ -~]*[aA][12][ -~]*[zZ][ -~]*\""),
        try parseTest(&set, "\"[ -~]{16}\""),
        try parseTest(&set, "\"[ -~]*ab1[ -~]*\""),
        try parseTest(&set, "\"[ -~]*b12[ -~]*\""),
        try parseTest(&set, "\"[ -~]*bc1[ -~]*\""),
        try parseTest(&set, "\"[ -~]*c12[ -~]*\""),
        try parseTest(&set, "\"[ -~]*ca1[ -~]*\""),
        try parseTest(&set, "\"[ -~]*a12[ -~]*\""),
        try parseTest(&set, "\"[ -~]{10,90}\""),
    };
    const e = try set.andAll(&members);
    try std.testing.expect(set.tag(e) == .and_);
    // Not empty: a word of every member, written by hand.
    try std.testing.expect(try matches(&set, e, "\"ab12bc12ca12z   \""));
    // One byte of each class the members tell apart.
    const representatives = [_]u8{ 0, ' ', '"', '1', '2', 'A', 'Z', 'a', 'b', 'c', 'z' };
    // The two walks that let the longest rest lead pad with the bound's shortest byte and
    // leave the searches unmatched; the exact search took 2,683 expansions of the JSON
    // version (5.8 million units).
    try std.testing.expect(!try set.walkWitness(e, &representatives, witness_switches_max));
    try std.testing.expect(!try set.walkWitness(e, &representatives, 0));
    set.refuel(20_000, .step_fuel);
    try std.testing.expect(try witnessSearch(&set, e));
    // The path's terms are remembered non-empty: one derivative of e is on it.
    var remembered: u32 = 0;
    for (representatives) |b| {
        const d = try set.deriv(e, b);
        if (set.empty_cache.get(d.index())) |empty| {
            try std.testing.expect(!empty);
            remembered += 1;
        }
    }
    try std.testing.expectEqual(@as(u32, 1), remembered);
    try std.testing.expect(!try set.isEmpty(e, &representatives));
    // Twelve characters are too few: `ab12`, `bc12` and `ca12` cannot overlap (each starts
    // with a letter and ends in `12`), and a `z` must follow the first `a1`. The search
    // gives up within its bound, and the exact answer is "empty".
    const short = try set.andAll(&.{ members[0], try parseTest(&set, "\"[ -~]{12}\""), members[2], members[3], members[4], members[5], members[6], members[7] });
    set.refuel(20_000, .step_fuel);
    try std.testing.expect(!try witnessSearch(&set, short));
    set.refuel(std.math.maxInt(u64), .step_fuel);
    try std.testing.expect(try set.isEmpty(short, &representatives));
    try std.testing.expect(try referenceEmpty(&set, short, &representatives));
}

test "the witness search only ever shows words that are there (random searches within length bounds over {a, b, c})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x2323);
    const random = prng.random();
    const representatives = [_]u8{ '"', 'a', 'b', 'c' };
    var shown: u32 = 0;
    var empty: u32 = 0;
    for (0..300) |_| {
        // Three to six searches for a word of one to three letters, and a length bound.
        var members: [8]ExprId = undefined;
        const n = 3 + random.uintLessThan(usize, 4);
        for (members[0..n]) |*m| m.* = try randomSearchTest(&set, random, 3);
        const min = random.uintLessThan(u32, 6);
        const max = min + random.uintLessThan(u32, 4);
        var bound_text: [32]u8 = undefined;
        members[n] = try parseTest(&set, try std.fmt.bufPrint(&bound_text, "\"[abc]{{{d},{d}}}\"", .{ min, max }));
        const e = try set.andAll(members[0 .. n + 1]);
        if (!set.isBoolean(e)) continue;
        const expected_empty = try referenceEmpty(&set, e, &representatives);
        if (expected_empty) empty += 1;
        if (set.tag(e) == .and_ and try witnessSearch(&set, e)) {
            try std.testing.expect(!expected_empty);
            shown += 1;
        }
        // And the whole answer, from a fresh start.
        set.empty_cache.clearRetainingCapacity();
        try std.testing.expectEqual(expected_empty, try set.isEmpty(e, &representatives));
        set.empty_cache.clearRetainingCapacity();
    }
    try std.testing.expect(shown > 30 and empty > 30);
}

test "includes counts pieces as copies of a counted member, and finds a whole word in a star's member" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const shown = struct {
        fn check(s: *ExprSet, x_text: []const u8, y_text: []const u8) !bool {
            const x = try parseTest(s, x_text);
            const y = try parseTest(s, y_text);
            var budget: u32 = 4096;
            return s.includes(x, y, &budget);
        }
    }.check;
    // A `\uXXXX` escape spelled by two translations of a JSON string's character.
    try std.testing.expect(try shown(&set, "[fF][0-9a-f][0-9a-f]", "[1-9a-fA-F][0-9a-f]{2}"));
    try std.testing.expect(!try shown(&set, "[fF][0-9a-f][0-9a-f]", "[1-9a-f][0-9a-f]{2}"));
    try std.testing.expect(try shown(&set, "20(?:0[0-9]|1[0-9]|2[0-7])", "[0-9a-f]{4}"));
    try std.testing.expect(try shown(&set, "[0-9]{2}[a-f]", "[0-9a-f]{1,3}"));
    try std.testing.expect(!try shown(&set, "[0-9][0-9][0-9]", "[0-9]{2}"));
    try std.testing.expect(!try shown(&set, "[0-9]", "[0-9]{2}"));
    try std.testing.expect(!try shown(&set, "[0-9][0-9]x", "[0-9]{3}"));
    // A word of the star's member none of whose pieces is in it.
    try std.testing.expect(try shown(&set, "(?:a|\\\\u0041)*\"", "(?:[a-z]|\\\\u[0-9A-F]{4})*\""));
    try std.testing.expect(!try shown(&set, "(?:a|\\\\u004)*\"", "(?:[a-z]|\\\\u[0-9A-F]{4})*\""));
    // Each verdict agrees with the languages (every word of x up to 8 bytes over x's bytes).
    const cases = [_][2][]const u8{
        .{ "[fF][0-9a-f][0-9a-f]", "[1-9a-fA-F][0-9a-f]{2}" },
        .{ "20(?:0[0-9]|1[0-9]|2[0-7])", "[0-9a-f]{4}" },
        .{ "(?:a|\\\\u0041)*\"", "(?:[a-z]|\\\\u[0-9A-F]{4})*\"" },
    };
    for (cases) |c| {
        const x = try parseTest(&set, c[0]);
        const y = try parseTest(&set, c[1]);
        var buf: [16]u8 = undefined;
        const w = (try set.shortestWord(x, &buf)).?;
        try std.testing.expect(try matches(&set, y, w));
    }
}

test "includes with counted copies never claims an inclusion a word refutes (random terms over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0xc0b1e5);
    const random = prng.random();
    var words = try allWords(std.testing.allocator, "ab", 9);
    defer freeWords(std.testing.allocator, &words);
    var shown: u32 = 0;
    for (0..4000) |_| {
        // x a concatenation, y a counted or starred term, so that the new rules are reached.
        const x = try set.concat(try randomTerm(&set, random, 2, counters_small), try randomTerm(&set, random, 2, counters_small));
        const child = try randomTerm(&set, random, 2, counters_small);
        const min = random.uintLessThan(u32, 3);
        const max = if (random.boolean()) repeat_unbounded else min + random.uintLessThan(u32, 4);
        const y = try set.repeat(child, min, @max(min, max));
        var budget: u32 = 4096;
        if (!set.includes(x, y, &budget) or x == y) continue;
        shown += 1;
        for (words.items) |w| {
            if (try matches(&set, x, w)) try std.testing.expect(try matches(&set, y, w));
        }
    }
    try std.testing.expect(shown > 100);
}

test "byte facts: every word's bytes lie in the alphabet and hold the required bytes (random terms)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0xb17e5);
    const random = prng.random();
    var words = try allWords(std.testing.allocator, "abc", 6);
    defer freeWords(std.testing.allocator, &words);
    var contradictions: u32 = 0;
    var non_empty: u32 = 0;
    for (0..400) |_| {
        var members: [3]ExprId = undefined;
        for (&members) |*m| {
            m.* = try randomTerm(&set, random, 3, counters_small);
            if (random.uintLessThan(u32, 4) == 0) m.* = try set.concat(try set.byte('c'), m.*);
            if (random.uintLessThan(u32, 5) == 0) m.* = try set.not(m.*);
        }
        const e = try set.andAll(&members);
        for (members ++ [1]ExprId{e}) |t| {
            const facts = try set.byteFacts(t, 0);
            for (words.items) |w| {
                if (!try matches(&set, t, w)) continue;
                var in_word: ByteSet = .{};
                for (w) |b| {
                    try std.testing.expect(facts.alphabet.contains(b));
                    in_word.add(b);
                }
                try std.testing.expect(byteSetWithin(facts.required, in_word));
            }
        }
        if (set.tag(e) != .and_) continue;
        if (try set.bytesContradict(e)) {
            contradictions += 1;
            try std.testing.expect(try referenceEmpty(&set, e, "abc"));
        } else if (!try referenceEmpty(&set, e, "abc")) non_empty += 1;
    }
    try std.testing.expect(contradictions > 20 and non_empty > 20);
}

test "a member that needs a byte another never has: ∅ without the search (a search pattern beside email)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // `[ab]@` as a JSON Schema search, beside an address whose host has counted labels and an
    // IPv6-like literal: many states for an exhaustive search.
    const search = try parseTest(&set, "\"[a-z.@\\[\\]:]*[ab]@[a-z.@\\[\\]:]*\"");
    const address = try parseTest(&set, "\"[a-z]+(?:\\.[a-z]+)*@(?:[a-z](?:[a-z-]{0,61}[a-z])?(?:\\.[a-z](?:[a-z-]{0,61}[a-z])?)*|\\[(?:[0-9a-f]{1,4}:){1,7}[0-9a-f]{1,4}\\])\"");
    var e = try set.andAll(&.{ search, address });
    const representatives = each_byte_alone;
    for ("\"xa@b") |b| e = try set.deriv(e, b);
    try std.testing.expect(!try set.isEmpty(e, &representatives));
    e = try set.andAll(&.{ search, address });
    for ("\"xy@b") |b| e = try set.deriv(e, b);
    set.refuel(2_000, .step_fuel);
    try std.testing.expect(try set.isEmpty(e, &representatives));
}

test "x ∩ ¬y shown non-empty by lengths agrees with the exact search (random terms over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x1e9);
    const random = prng.random();
    var terms: [120]ExprId = undefined;
    for (&terms, 0..) |*t, i| t.* = try randomTerm(&set, random, @intCast(1 + i % 3), counters_small);
    const representatives = [_]u8{ 'a', 'b', 'c' };
    var shown: u32 = 0;
    for (terms) |x| for (terms) |y| {
        const e = try set.andAll(&.{ x, try set.not(y) });
        if (set.tag(e) != .and_ or !set.longerThanExcluded(e)) continue;
        shown += 1;
        try std.testing.expect(!(try set.isEmptySearch(e, &representatives, null)).?);
    };
    try std.testing.expect(shown > 64);
    // "Any other key" beside a bounded key pattern: decided at once, at every position.
    const other = try parseTest(&set, "\"[^\"]*\"");
    const pattern = try parseTest(&set, "\"[^\"\\n]{1,255}\"");
    var e = try set.andAll(&.{ other, try set.not(pattern) });
    for ("\"key") |b| e = try set.deriv(e, b);
    set.fuel = 100;
    try std.testing.expect(!try set.isEmpty(e, &.{ 'a', '"', '\n', 0 }));
}

/// How `randomTerm` draws counters: lower bounds below `min_below`, one in `unbounded_one_in`
/// without an upper bound, the others up to `span_below - 1` over their lower bound; a counter
/// is drawn `repeat_weight` times as often as an alternation.
const Counters = struct { min_below: u32, span_below: u32, unbounded_one_in: u32, repeat_weight: u32 };
/// Small counters, as often as an alternation.
const counters_small: Counters = .{ .min_below = 3, .span_below = 3, .unbounded_one_in = 2, .repeat_weight = 1 };
/// Counters up to 12, twice as often, so that bounds get clamped.
const counters_clamped: Counters = .{ .min_below = 4, .span_below = 10, .unbounded_one_in = 4, .repeat_weight = 2 };

/// A random term over {a, b} of nesting `depth` at most.
fn randomTerm(set: *ExprSet, random: std.Random, depth: u32, counters: Counters) Error!ExprId {
    const choice = random.uintLessThan(u32, if (depth == 0) 3 else 6 + counters.repeat_weight);
    switch (choice) {
        0 => return set.byte('a'),
        1 => return set.byte('b'),
        2 => {
            var ab: ByteSet = .{};
            ab.add('a');
            ab.add('b');
            return set.byteSet(ab);
        },
        3, 4 => return set.concat(try randomTerm(set, random, depth - 1, counters), try randomTerm(set, random, depth - 1, counters)),
        5 => return set.alt2(try randomTerm(set, random, depth - 1, counters), try randomTerm(set, random, depth - 1, counters)),
        else => {
            const min = random.uintLessThan(u32, counters.min_below);
            const unbounded = random.uintLessThan(u32, counters.unbounded_one_in) == 0;
            const max = if (unbounded) repeat_unbounded else min + random.uintLessThan(u32, counters.span_below);
            return set.repeat(try randomTerm(set, random, depth - 1, counters), min, @max(min, max));
        },
    }
}

/// Every word over `alphabet` of at most `len_max` bytes (for brute-force checks).
fn allWords(gpa: Allocator, alphabet: []const u8, len_max: usize) !std.ArrayList([]const u8) {
    var words: std.ArrayList([]const u8) = .empty;
    errdefer freeWords(gpa, &words);
    try words.append(gpa, try gpa.alloc(u8, 0));
    var start: usize = 0;
    for (0..len_max) |_| {
        const end = words.items.len;
        for (start..end) |i| for (alphabet) |c| {
            const prev = words.items[i];
            const w = try gpa.alloc(u8, prev.len + 1);
            @memcpy(w[0..prev.len], prev);
            w[prev.len] = c;
            try words.append(gpa, w);
        };
        start = end;
    }
    return words;
}

fn freeWords(gpa: Allocator, words: *std.ArrayList([]const u8)) void {
    for (words.items) |w| gpa.free(w);
    words.deinit(gpa);
}

/// Is `w` a prefix of a word of `e`? (The derivative by `w` is not empty.)
fn viable(set: *ExprSet, e: ExprId, w: []const u8, representatives: []const u8) !bool {
    var cur = e;
    for (w) |b| cur = try set.deriv(cur, b);
    return !try set.isEmpty(cur, representatives);
}

test "clamped counters answer alike for every word up to the bound (random terms over {a, b})" {
    const gpa = std.testing.allocator;
    var set = try ExprSet.init(gpa, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0xc1a3);
    const random = prng.random();
    var words = try allWords(gpa, "ab", 7);
    defer freeWords(gpa, &words);
    var clamped_count: u32 = 0;
    // Counters near the bound: r{m,n} with r's words of one or two bytes, n around
    // bytes_max / min(r), then random terms.
    var terms: std.ArrayList(ExprId) = .empty;
    defer terms.deinit(gpa);
    const a = try set.byte('a');
    const ab = try set.concat(a, try set.byte('b'));
    for ([_]ExprId{ a, ab, try set.alt2(a, ab), try set.alt2(ab, try set.repeat(a, 0, 1)) }) |r| {
        for (0..13) |n| for ([_]u32{ 0, 1, 2 }) |m| {
            if (m > n) continue;
            try terms.append(gpa, try set.concat(try set.repeat(r, m, @intCast(n)), try set.byte('b')));
        };
    }
    for (0..300) |i| try terms.append(gpa, try randomTerm(&set, random, @intCast(1 + i % 4), counters_clamped));
    for (terms.items) |t| {
        for ([_]u32{ 3, 5, 7 }) |bytes_max| {
            const c = try set.clampCounts(t, bytes_max);
            try std.testing.expect(!set.isBoolean(c));
            try std.testing.expectEqual(set.lengthsOf(t).min, set.lengthsOf(c).min);
            if (c == t) continue;
            clamped_count += 1;
            try std.testing.expect(set.lengthsOf(c).max > set.lengthsOf(t).max or set.lengthsOf(t).max == Lengths.unbounded);
            for (words.items) |w| {
                if (w.len > bytes_max) break; // words come by length
                try std.testing.expectEqual(try matches(&set, t, w), try matches(&set, c, w));
                try std.testing.expectEqual(try viable(&set, t, w, "ab"), try viable(&set, c, w, "ab"));
            }
        }
    }
    try std.testing.expect(clamped_count > 100); // the test exercises the rule
}

test "a clamped counter makes the states along a bounded run one state" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // (ab){0,500} b: each "ab" read is a new term; clamped for 8-byte tokens they are one.
    const ab = try set.concat(try set.byte('a'), try set.byte('b'));
    const e = try set.concat(try set.repeat(ab, 0, 500), try set.byte('b'));
    var x = e;
    const first = try set.clampCounts(x, 8);
    try std.testing.expect(first != x);
    for (0..300) |_| {
        x = try set.deriv(try set.deriv(x, 'a'), 'b');
        try std.testing.expectEqual(first, try set.clampCounts(x, 8));
    }
    // Past 500 - 4 pairs the bound is within reach of 8 bytes: no clamp, the real term.
    for (0..197) |_| x = try set.deriv(try set.deriv(x, 'a'), 'b');
    try std.testing.expectEqual(x, try set.clampCounts(x, 8));
}

test "completionMax bounds the shortest word of every live derivative (random terms)" {
    const gpa = std.testing.allocator;
    var set = try ExprSet.init(gpa, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x3377);
    const random = prng.random();
    var words = try allWords(gpa, "ab", 7);
    defer freeWords(gpa, &words);
    var tight: u32 = 0;
    for (0..300) |i| {
        const t = try randomTerm(&set, random, @intCast(1 + i % 4), counters_clamped);
        const bound = set.completionMax(t);
        try std.testing.expect(bound >= set.lengthsOf(t).min);
        var reached: u32 = 0;
        for (words.items) |w| {
            var d = t;
            for (w) |b| d = try set.deriv(d, b);
            if (d == .nothing) continue;
            try std.testing.expect(set.lengthsOf(d).min <= bound);
            reached = @max(reached, set.lengthsOf(d).min);
        }
        if (reached == bound) tight += 1;
    }
    try std.testing.expect(tight > 100); // often exact, not a loose constant
}

test "a length bound no short word can reach is dropped, with the same answers" {
    const gpa = std.testing.allocator;
    var set = try ExprSet.init(gpa, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x1e57);
    const random = prng.random();
    // Strings `"…"` of "characters" a and b (C = [ab]), a pattern side P = "X" and the bound
    // "C{min,n}"; prefixes v and short words w over {a, b, "}: wherever the bound is
    // dropped, the pattern side alone answers as the intersection does.
    var ab: ByteSet = .{};
    ab.add('a');
    ab.add('b');
    const char = try set.byteSet(ab);
    const quote = try set.byte('"');
    var words = try allWords(gpa, "ab\"", 6);
    defer freeWords(gpa, &words);
    var prefixes = try allWords(gpa, "ab", 9);
    defer freeWords(gpa, &prefixes);
    const representatives = "ab\"x";
    var dropped: u32 = 0;
    var kept: u32 = 0;
    // At the start under `minLength: 1` (a' = 1), where X needs a character.
    var dropped_needing_one: u32 = 0;
    for (0..60) |i| {
        const x = try randomTerm(&set, random, @intCast(1 + i % 3), counters_clamped);
        const pattern = try set.concatAll(&.{ quote, x, quote });
        const min = random.uintLessThan(u32, 3);
        const n = min + 4 + random.uintLessThan(u32, 12);
        const bound = try set.concatAll(&.{ quote, try set.repeat(char, min, n), quote });
        try std.testing.expectEqual(char, (try set.lengthBoundChar(bound)).?);
        const lexeme = try set.andAll(&.{ pattern, bound });
        for (prefixes.items) |v| {
            var z = try set.deriv(lexeme, '"');
            for (v) |b| z = try set.deriv(z, b);
            if (try set.isEmpty(z, representatives)) continue;
            for ([_]u32{ 2, 4 }) |bytes_max| {
                const p = try set.clampedLengthBound(z, char, bytes_max) orelse {
                    kept += 1;
                    continue;
                };
                dropped += 1;
                if (min == 1 and v.len == 0) dropped_needing_one += 1;
                try std.testing.expect(!set.isBoolean(p));
                for (words.items) |w| {
                    if (w.len > bytes_max) break;
                    try std.testing.expectEqual(try matches(&set, z, w), try matches(&set, p, w));
                    try std.testing.expectEqual(try viable(&set, z, w, representatives), try viable(&set, p, w, representatives));
                }
            }
        }
    }
    try std.testing.expect(dropped > 100 and kept > 100 and dropped_needing_one > 4);
}

/// The value of the digit string `w` modulo `modulus`, after digits that left `residue`: the
/// residue automaton run by hand, for the tests.
fn residueAfter(modulus: u32, residue: u32, w: []const u8) u32 {
    var r: u64 = residue;
    for (w) |b| r = (r * 10 + (b - '0')) % modulus;
    return @intCast(r);
}

test "digits_mod: every digit string up to five digits against the residue, lengths and shortest words" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const cases = [_][3]u32{
        .{ 2, 0, 0 },     .{ 3, 0, 0 },   .{ 7, 3, 0 },    .{ 11, 0, 5 },      .{ 16, 9, 0 }, .{ 33, 0, 0 },
        .{ 125, 4, 100 }, .{ 999, 0, 0 }, .{ 1000, 7, 3 }, .{ 65_537, 12, 0 }, .{ 1, 0, 0 },  .{ 1_000_000, 999_999, 1 },
    };
    var word: [5]u8 = undefined;
    for (cases) |case| for ([_]u32{ 0, digits_mod_negated }) |options| {
        const modulus, const residue, const target = case;
        const negated = options == digits_mod_negated;
        const e = try set.digitsMod(modulus, residue, target, options);
        if (modulus == 1 and negated) {
            try std.testing.expectEqual(ExprId.nothing, e);
            continue;
        }
        // Brute force: the least length with a matching word must be the term's shortest.
        var shortest_seen: ?u32 = null;
        for (0..word.len + 1) |len| {
            var count: u32 = 1;
            for (0..len) |_| count *= 10;
            var n: u32 = 0;
            while (n < count) : (n += 1) {
                var v = n;
                var i = len;
                while (i > 0) : (v /= 10) {
                    i -= 1;
                    word[i] = @intCast('0' + v % 10);
                }
                const w = word[0..len];
                const expected = (residueAfter(modulus, residue, w) == target) != negated;
                try std.testing.expectEqual(expected, try matches(&set, e, w));
                if (expected and shortest_seen == null) shortest_seen = @intCast(len);
            }
        }
        const lengths = set.lengthsOf(e);
        try std.testing.expectEqual(Lengths.unbounded, lengths.max);
        if (shortest_seen) |len| try std.testing.expectEqual(len, lengths.min) else try std.testing.expect(lengths.min > word.len);
        // A shortest word, built byte by byte from the length table, is a word.
        var out: [16]u8 = undefined;
        const w = (try set.shortestWord(e, &out)).?;
        try std.testing.expectEqual(lengths.min, @as(u32, @intCast(w.len)));
        try std.testing.expectEqual(!negated, target == residueAfter(modulus, residue, w));
        // Anything but a digit ends it.
        for ([_]u8{ '.', '-', 'a', '/', ':', 0, 255 }) |b| try std.testing.expectEqual(ExprId.nothing, try set.deriv(e, b));
        // Every derivative finishes within `completionMax` digits (a few sampled).
        var x = e;
        for ("3141592653589793") |b| {
            x = try set.deriv(x, b);
            try std.testing.expect(x != .nothing and set.lengthsOf(x).min <= set.completionMax(e));
        }
    };
}

test "digits_mod: derivatives are the residues, interned once; the lexer splits the digits" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    const e = try set.digitsMod(7, 0, 0, 0);
    try std.testing.expectEqual(e, try set.digitsMod(7, 0, 0, 0));
    try std.testing.expectEqual(try set.digitsMod(7, 3, 0, 0), try set.deriv(e, '3'));
    try std.testing.expectEqual(try set.digitsMod(7, 31 % 7, 0, 0), try set.deriv(try set.deriv(e, '3'), '1'));
    try std.testing.expectEqual(e, try set.deriv(e, '7')); // 7 ≡ 0
    try std.testing.expect(set.nullable(e) and !set.nullable(try set.deriv(e, '1')));
    try std.testing.expect(!set.isBoolean(e));
    // Modulus 1 is `[0-9]*`.
    var digits: ByteSet = .{};
    digits.addRange('0', '9');
    try std.testing.expectEqual(try set.repeat(try set.byteSet(digits), 0, repeat_unbounded), try set.digitsMod(1, 0, 0, 0));
    // The ten digits are ten byte sets for alphabet compression, whatever else the set holds.
    const Counter = struct {
        singles: *u32,
        fn visit(self: @This(), s: ByteSet) void {
            if (s.count() == 1) self.singles.* += 1;
        }
    };
    var singles: u32 = 0;
    set.forEachByteSet(Counter{ .singles = &singles }, Counter.visit);
    try std.testing.expectEqual(@as(u32, 10), singles);
    // With points: '.' leaves the residue, and is an eleventh single byte.
    const pointed = try set.digitsMod(7, 0, 0, digits_mod_point);
    try std.testing.expect(pointed != e);
    try std.testing.expectEqual(pointed, try set.deriv(pointed, '.'));
    try std.testing.expectEqual(try set.digitsMod(7, 3, 0, digits_mod_point), try set.deriv(try set.deriv(pointed, '3'), '.'));
    try std.testing.expectEqual(ExprId.nothing, try set.deriv(e, '.'));
    singles = 0;
    set.forEachByteSet(Counter{ .singles = &singles }, Counter.visit);
    try std.testing.expectEqual(@as(u32, 11), singles);
    // A recipe rebuilds the same term.
    var recipe: std.ArrayList(u32) = .empty;
    defer recipe.deinit(std.testing.allocator);
    const term = try set.concat(try set.byte('-'), try set.deriv(e, '5'));
    try set.exportTerm(std.testing.allocator, term, &recipe);
    var other = try ExprSet.init(std.testing.allocator, .{});
    defer other.deinit();
    const rebuilt = try other.importTerm(recipe.items);
    try std.testing.expectEqual(try other.concat(try other.byte('-'), try other.digitsMod(7, 5, 0, 0)), rebuilt);
}

/// The number lexeme of MaskBench Handwritten---allany7 (a multiple of 429 and of none of 8, 6
/// and 7), as the JSON Schema front-end writes it: the number, then one residue run each.
const allany7_members = [_][]const u8{
    "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?",
    "-?(?:0|1(?%429,0,1)|2(?%429,0,2)|3(?%429,0,3)|4(?%429,0,4)|5(?%429,0,5)|6(?%429,0,6)|7(?%429,0,7)|8(?%429,0,8)|9(?%429,0,9))(?:\\.0+)?",
    "-?(?:8(?%!8,0)|[19](?%!8,0,1)|2(?%!8,0,2)|3(?%!8,0,3)|4(?%!8,0,4)|5(?%!8,0,5)|6(?%!8,0,6)|7(?%!8,0,7))(?:\\.0+)?|-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*",
    "-?(?:6(?%!6,0)|[17](?%!6,0,1)|[28](?%!6,0,2)|[39](?%!6,0,3)|4(?%!6,0,4)|5(?%!6,0,5))(?:\\.0+)?|-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*",
    "-?(?:7(?%!7,0)|[18](?%!7,0,1)|[29](?%!7,0,2)|3(?%!7,0,3)|4(?%!7,0,4)|5(?%!7,0,5)|6(?%!7,0,6))(?:\\.0+)?|-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*",
};

/// One byte of each class a number grammar with residue runs has: the digits apart, '.', '-'
/// and one byte for the rest.
const number_representatives = [_]u8{ '-', '.', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'x' };

/// The intersection of `patterns` parsed in the order of `order` (so that the members' ids,
/// and the order of the intersection's members, follow it).
fn intersectionInOrder(set: *ExprSet, patterns: []const []const u8, order: []const usize) !ExprId {
    var members: [8]ExprId = undefined;
    for (order) |k| members[k] = try parseTest(set, patterns[k]);
    return set.andAll(members[0..patterns.len]);
}

test "best-first search: a residue-run conjunction is shown non-empty along its word, whatever the term ids" {
    // Breadth first, this search visited every residue combination of fewer digits than the
    // first word: 2,700,000 fuel units (60 ms) for allany7's first row, or 0.1 ms when the
    // same patterns were rebuilt from the pattern cache in another id order (the witness walk
    // then happened to succeed).
    const forward = [_]usize{ 0, 1, 2, 3, 4 };
    const backward = [_]usize{ 4, 3, 2, 1, 0 };
    var spent: [2]u64 = undefined; // terms expanded
    for ([_][]const usize{ &forward, &backward }, 0..) |order, run| {
        var set = try ExprSet.init(std.testing.allocator, .{});
        defer set.deinit();
        const e = try intersectionInOrder(&set, &allany7_members, order);
        try std.testing.expect(set.tag(e) == .and_);
        const before = set.fuel_spent;
        try std.testing.expect(!(try set.isEmptySearch(e, &number_representatives, null)).?);
        try std.testing.expect(set.fuel_spent - before < 20_000);
        spent[run] = set.search_expanded;
        // The oracle: arithmetic (a multiple of 429 and of none of 8, 6 and 7), on the
        // integers around the first two multiples.
        for ([_]u32{ 428, 429, 430, 858, 1287 }) |n| {
            var text: [8]u8 = undefined;
            const want = n % 429 == 0 and n % 8 != 0 and n % 6 != 0 and n % 7 != 0;
            try std.testing.expectEqual(want, try matches(&set, e, try std.fmt.bufPrint(&text, "{d}", .{n})));
        }
        // The path to the word found is remembered: the lexer's next states are decided.
        try std.testing.expectEqual(false, set.empty_cache.get((try set.deriv(e, '4')).index()).?);
    }
    // The terms visited depend on lengths and bytes only, not on which member came first.
    try std.testing.expectEqual(spent[0], spent[1]);
}

/// Is `e` empty? The slow, obviously exact answer: breadth first over its derivatives by every
/// byte of `alphabet` (a byte outside it must have no word), with no caches, witnesses or
/// shortcuts.
fn referenceEmpty(set: *ExprSet, e: ExprId, alphabet: []const u8) !bool {
    var seen: IntMap(u32, void) = .empty;
    defer seen.deinit(set.gpa);
    var queue: std.ArrayList(ExprId) = .empty;
    defer queue.deinit(set.gpa);
    try queue.append(set.gpa, e);
    try seen.put(set.gpa, e.index(), {});
    var head: usize = 0;
    while (head < queue.items.len) : (head += 1) {
        const x = queue.items[head];
        if (set.nullable(x)) return false;
        for (alphabet) |b| {
            const y = try set.deriv(x, b);
            if (y == .nothing or seen.contains(y.index())) continue;
            try seen.put(set.gpa, y.index(), {});
            try queue.append(set.gpa, y);
        }
    }
    return true;
}

test "the best-first search and the pair check agree with a plain breadth-first search (random intersections of three over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0xa11a);
    const random = prng.random();
    const representatives = [_]u8{ 'a', 'b', 'c' };
    var empty: u32 = 0;
    var non_empty: u32 = 0;
    for (0..600) |_| {
        var members: [3]ExprId = undefined;
        for (&members) |*m| {
            m.* = try randomTerm(&set, random, 3, counters_clamped);
            if (random.boolean()) m.* = try set.not(m.*);
        }
        const e = try set.andAll(&members);
        if (!set.isBoolean(e)) continue;
        const expected = try referenceEmpty(&set, e, &representatives);
        // A fresh answer each time: what other terms' searches remembered is not reused.
        set.empty_cache.clearRetainingCapacity();
        try std.testing.expectEqual(expected, try set.isEmpty(e, &representatives));
        // And the exact search alone (no witness walk), with its pair check.
        set.empty_cache.clearRetainingCapacity();
        try std.testing.expectEqual(expected, (try set.isEmptySearch(e, &representatives, null)).?);
        if (expected) empty += 1 else non_empty += 1;
    }
    try std.testing.expect(empty > 30 and non_empty > 30);
}

test "the exact search's rows, an intersection's built from its members' rows, hold the derivatives (random intersections over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x7075);
    const random = prng.random();
    const representatives = [_]u8{ 'a', 'b', 'c' };
    var rows_checked: u32 = 0;
    var members_with_rows: u32 = 0;
    for (0..1000) |_| {
        var members: [4]ExprId = undefined;
        const n = 2 + random.uintLessThan(usize, 3);
        for (members[0..n]) |*m| {
            m.* = try randomTerm(&set, random, 3, counters_clamped);
            if (random.uintLessThan(u32, 4) == 0) m.* = try set.not(m.*);
        }
        const e = try set.andAll(members[0..n]);
        if (set.tag(e) != .and_) continue;
        set.empty_cache.clearRetainingCapacity();
        _ = try set.isEmptySearch(e, &representatives, null);
    }
    // Every row kept, of an intersection or of a member, against `deriv` (which derives an
    // intersection member by member, without rows).
    var it = set.row_cache.iterator();
    while (it.next()) |kv| {
        const x: ExprId = @fromBackingInt(kv.key_ptr.*);
        if (set.tag(x) != .and_) members_with_rows += 1;
        for (representatives, set.row_words.items[kv.value_ptr.*..][0..representatives.len]) |b, word| {
            const d = try set.deriv(x, b);
            try std.testing.expectEqual(d.index(), word & ~row_boolean_bit);
            try std.testing.expectEqual(set.isBoolean(d), word & row_boolean_bit != 0);
        }
        rows_checked += 1;
    }
    try std.testing.expect(rows_checked > 300 and members_with_rows > 30);
}

test "an intersection whose two members exclude each other is shown empty by the pair" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // Handwritten---allany16's contradiction: exactly four characters (`^....$`) against at
    // least ten (`minLength`), characters of up to four bytes, so lengths in bytes meet;
    // beside them, searches that multiply the states of the whole intersection.
    const four = try parseTest(&set, "\"(?:[a-z]|\\u{10000}){4}\"");
    const ten = try parseTest(&set, "\"(?:[a-z]|\\u{10000}){10,20}\"");
    const ab = try parseTest(&set, "\"(?:[a-z]|\\u{10000})*ab(?:[a-z]|\\u{10000})*\"");
    const cd = try parseTest(&set, "\"(?:[a-z]|\\u{10000})*c(?:[a-z]|\\u{10000})*d(?:[a-z]|\\u{10000})*\"");
    const e = try set.andAll(&.{ four, ten, ab, cd });
    try std.testing.expect(set.isBoolean(e) and !set.lengthsOf(e).isEmpty());
    const representatives = [_]u8{ '"', 'a', 'b', 'c', 'd', 'e', 0xF0, 0x90, 0x80, 0 };
    try std.testing.expect(try set.emptyPair(e, &representatives));
    // The pair's answer is remembered for the next intersection holding both members.
    try std.testing.expectEqual(true, set.empty_cache.get((try set.andAll(&.{ four, ten })).index()).?);
    try std.testing.expect(try set.isEmpty(e, &representatives));
    try std.testing.expect(try referenceEmpty(&set, e, &representatives));
    // Without the contradiction the same members have a word.
    const three = try parseTest(&set, "\"(?:[a-z]|\\u{10000}){3,12}\"");
    const f = try set.andAll(&.{ three, ten, ab, cd });
    try std.testing.expect(!try set.emptyPair(f, &representatives));
    try std.testing.expect(!try set.isEmpty(f, &representatives));
    try std.testing.expect(try matches(&set, f, "\"abcdzzzzzz\""));
}

test "a contradiction of three members inside a length bound, which no pair shows, is shown by the relaxation (Handwritten allany13)" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    // allany13 in small: a first `a`, a last `x`, six `1`s in a row and three to seven
    // characters of up to four bytes: the first three need eight characters, any two fit.
    const c = "(?:[a-z0-9]|\\u{10000})";
    const first = try parseTest(&set, "\"a" ++ c ++ "*\"");
    const last = try parseTest(&set, "\"" ++ c ++ "*x\"");
    const run = try parseTest(&set, "\"" ++ c ++ "*111111" ++ c ++ "*\"");
    const within = try parseTest(&set, "\"" ++ c ++ "{3,7}\"");
    const e = try set.andAll(&.{ first, last, run, within });
    try std.testing.expect(set.isBoolean(e) and !set.lengthsOf(e).isEmpty());
    const representatives = [_]u8{ '"', 'a', 'x', '1', 'b', 0xF0, 0x90, 0x80, 0 };
    try std.testing.expect(!try set.emptyPair(e, &representatives));
    const x0 = set.search_expanded;
    try std.testing.expect(try set.emptyRelaxed(e, &representatives));
    const relaxed_expansions = set.search_expanded - x0;
    try std.testing.expect(try referenceEmpty(&set, e, &representatives));
    // The relaxed search expands each state of the other members once, at the most count
    // left; the exact search expands it at every count.
    set.empty_cache.clearRetainingCapacity();
    const x1 = set.search_expanded;
    try std.testing.expect((try set.isEmptySearch(e, &representatives, null)).?);
    try std.testing.expect(set.search_expanded - x1 > 2 * relaxed_expansions);
    // The same with a first `b`: after one byte its states are the first's, whose
    // relaxations were shown empty, and the exact search reads that.
    const first_b = try parseTest(&set, "\"b" ++ c ++ "*\"");
    const g = try set.andAll(&.{ first_b, last, run, within });
    set.empty_cache.clearRetainingCapacity();
    try std.testing.expect(try set.emptyRelaxed(e, &representatives));
    const x2 = set.search_expanded;
    try std.testing.expect((try set.isEmptySearch(g, &representatives, null)).?);
    // (2 terms, where without reading the relaxations it takes 9, against the relaxed 12.)
    try std.testing.expect(set.search_expanded - x2 < relaxed_expansions / 2);
    try std.testing.expect(try referenceEmpty(&set, g, &representatives));
    // One character more and the same members have a word; the relaxation is not shown empty.
    const eight = try parseTest(&set, "\"" ++ c ++ "{3,8}\"");
    const f = try set.andAll(&.{ first, last, run, eight });
    try std.testing.expect(!try set.emptyRelaxed(f, &representatives));
    set.empty_cache.clearRetainingCapacity();
    try std.testing.expect(!try set.isEmpty(f, &representatives));
    try std.testing.expect(try matches(&set, f, "\"a111111x\""));
}

test "the relaxed search agrees with a plain breadth-first search, and the relaxation holds the intersection (random counted intersections over {a, b, c})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0x1313);
    const random = prng.random();
    const representatives = [_]u8{ '"', 'a', 'b', 'c' };
    var relaxed_empty: u32 = 0;
    var relaxed_non_empty: u32 = 0;
    var shown: u32 = 0;
    for (0..400) |_| {
        // Two to four random members (searches, counters, complements) and a length bound
        // counted from one or more.
        var members: [6]ExprId = undefined;
        const n = 2 + random.uintLessThan(usize, 3);
        for (members[0..n]) |*m| {
            const kind = random.uintLessThan(u32, 3);
            if (kind == 0) {
                m.* = try randomSearchTest(&set, random, 4);
            } else {
                const inner = try randomTerm(&set, random, 3, counters_clamped);
                const quote = try set.byte('"');
                m.* = try set.concat(quote, try set.concat(inner, quote));
                if (kind == 2) m.* = try set.not(m.*);
            }
        }
        const min = 1 + random.uintLessThan(u32, 5);
        const max = min + 1 + random.uintLessThan(u32, 4);
        var bound_text: [32]u8 = undefined;
        members[n] = try parseTest(&set, try std.fmt.bufPrint(&bound_text, "\"[abc]{{{d},{d}}}\"", .{ min, max }));
        const e = try set.andAll(members[0 .. n + 1]);
        if (set.tag(e) != .and_) continue;
        const relaxed = (try set.relaxation(e)) orelse continue;
        // The relaxation holds every word of the intersection (every word up to 9 bytes).
        const expected_empty = try referenceEmpty(&set, e, &representatives);
        const relaxed_expected = try referenceEmpty(&set, relaxed, &representatives);
        if (relaxed_expected) try std.testing.expect(expected_empty);
        // The relaxed search (breadth first, contained terms left out), unbounded, agrees
        // with the breadth-first reference on the relaxation.
        set.empty_cache.clearRetainingCapacity();
        var search: Search = .{ .relaxed = true };
        defer search.deinit(set.gpa);
        const outcome = try search.run(&set, relaxed, &representatives, null);
        try std.testing.expectEqual(relaxed_expected, outcome == .exhausted);
        if (relaxed_expected) relaxed_empty += 1 else relaxed_non_empty += 1;
        // And `emptyRelaxed` shows only what is empty; the whole answer agrees, from a fresh
        // start and with what the relaxed searches remembered (which the exact search then
        // reads for the relaxation of every state it reaches).
        set.empty_cache.clearRetainingCapacity();
        if (try set.emptyRelaxed(e, &representatives)) {
            try std.testing.expect(expected_empty);
            shown += 1;
        }
        try std.testing.expectEqual(expected_empty, (try set.isEmptySearch(e, &representatives, null)).?);
        set.empty_cache.clearRetainingCapacity();
        try std.testing.expectEqual(expected_empty, try set.isEmpty(e, &representatives));
        // A state of e: what the relaxed searches of earlier terms remembered is kept.
        const d = try set.deriv(e, "\"abc"[random.uintLessThan(usize, 4)]);
        try std.testing.expectEqual(try referenceEmpty(&set, d, &representatives), try set.isEmpty(d, &representatives));
    }
    try std.testing.expect(set.relaxed_shown);
    try std.testing.expect(relaxed_empty > 30 and relaxed_non_empty > 30 and shown > 30);
}

test "an intersection the relaxed search leaves out is contained in one it queued (random counters over {a, b})" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var prng = std.Random.DefaultPrng.init(0xd0d0);
    const random = prng.random();
    var words = try allWords(std.testing.allocator, "ab", 7);
    defer freeWords(std.testing.allocator, &words);
    var left_out: u32 = 0;
    var kept: u32 = 0;
    for (0..400) |_| {
        // Members the same but one, h r{a,b} s against h r{a',b'} s with random bounds.
        const other = try randomTerm(&set, random, 3, counters_clamped);
        const head = try set.byte("ab"[random.uintLessThan(usize, 2)]);
        const child = try set.concat(try randomTerm(&set, random, 1, counters_clamped), try set.byte('a'));
        const tail = try randomTerm(&set, random, 2, counters_clamped);
        var terms: [2]ExprId = undefined;
        for (&terms) |*t| {
            const lo = random.uintLessThan(u32, 3);
            const hi = @max(lo, 2) + random.uintLessThan(u32, 3);
            t.* = try set.andAll(&.{ other, try set.concat(head, try set.concat(try set.repeat(child, lo, hi), tail)) });
        }
        if (set.tag(terms[0]) != .and_ or set.tag(terms[1]) != .and_ or terms[0] == terms[1]) continue;
        var search: Search = .{ .relaxed = true };
        defer search.deinit(set.gpa);
        _ = try search.dominated(&set, terms[0]);
        if (!try search.dominated(&set, terms[1])) {
            kept += 1;
            continue;
        }
        left_out += 1;
        for (words.items) |w| {
            if (try set.accepts(terms[1], w)) try std.testing.expect(try set.accepts(terms[0], w));
        }
    }
    try std.testing.expect(left_out > 30 and kept > 30);
}

/// The byte partition the sets `forEachByteSet` visits induce, by pairs: `same[a][b]` when no
/// visited set holds one of a, b and not the other (the oracle the refinement must match).
fn testSamePartition(set: *const ExprSet) ![256][256]bool {
    var sets: std.ArrayList(ByteSet) = .empty;
    defer sets.deinit(std.testing.allocator);
    const Collect = struct {
        list: *std.ArrayList(ByteSet),
        failed: *bool,
        fn visit(c: @This(), s: ByteSet) void {
            c.list.append(std.testing.allocator, s) catch {
                c.failed.* = true;
            };
        }
    };
    var failed = false;
    set.forEachByteSet(Collect{ .list = &sets, .failed = &failed }, Collect.visit);
    if (failed) return error.OutOfMemory;
    var same: [256][256]bool = undefined;
    for (0..256) |a| {
        for (0..256) |b| {
            same[a][b] = for (sets.items) |s| {
                if (s.contains(@intCast(a)) != s.contains(@intCast(b))) break false;
            } else true;
        }
    }
    return same;
}

test "a set started from a base set builds the same terms, with the byte classes of the terms it used" {
    const gpa = std.testing.allocator;
    const used = [_][]const u8{ "\"(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt])*\"", "-?(?:0|[1-9][0-9]*)" };
    const unused = [_][]const u8{ "[q-z]+%[A-F]{2}", "\\d{3}x" };
    const own = [_][]const u8{ "ab|[a-f]+", "true|false" };
    var base = try ExprSet.init(gpa, .{});
    defer base.deinit();
    for (used ++ unused) |p| _ = try parseTest(&base, p);
    // The reference: a set of its own that builds the used and own patterns.
    var alone = try ExprSet.init(gpa, .{});
    defer alone.deinit();
    var alone_ids: [used.len + own.len]ExprId = undefined;
    for (used ++ own, 0..) |p, i| alone_ids[i] = try parseTest(&alone, p);
    // The copy builds the same patterns: the used ones are found in the base, by id.
    var copy = try ExprSet.initFrom(gpa, .{}, &base, 7, 16);
    defer copy.deinit();
    try std.testing.expectEqual(base.count(), copy.base_count);
    try std.testing.expectEqual(@as(u32, 7), copy.base_generation);
    var copy_ids: [used.len + own.len]ExprId = undefined;
    for (used ++ own, 0..) |p, i| copy_ids[i] = try parseTest(&copy, p);
    for (0..used.len) |i| {
        try std.testing.expect(copy_ids[i].index() < copy.base_count);
        try std.testing.expectEqual(try parseTest(&base, used[i]), copy_ids[i]);
    }
    // Same terms: both rebuilt in a third set are one id each.
    var third = try ExprSet.init(gpa, .{});
    defer third.deinit();
    for (alone_ids, copy_ids) |a, c| {
        var ra: std.ArrayList(u32) = .empty;
        defer ra.deinit(gpa);
        var rc: std.ArrayList(u32) = .empty;
        defer rc.deinit(gpa);
        try alone.exportTerm(gpa, a, &ra);
        try copy.exportTerm(gpa, c, &rc);
        try std.testing.expectEqual(try third.importTerm(ra.items), try third.importTerm(rc.items));
    }
    // The classes are the reference's: the unused base patterns' sets ([q-z], %, [A-F], \d)
    // cut nothing, which they would if every base term counted.
    const want = try testSamePartition(&alone);
    const got = try testSamePartition(&copy);
    for (0..256) |a| {
        for (0..256) |b| try std.testing.expectEqual(want[a][b], got[a][b]);
    }
    try std.testing.expect(want['p']['q']);
    // Marking the base's [q-z] (as interning it would) makes it count: p and q part.
    var q_z: ByteSet = .{};
    q_z.addRange('q', 'z');
    const q_z_id = try base.byteSet(q_z);
    try std.testing.expect(q_z_id.index() < copy.base_count);
    copy.markBase(q_z_id.index());
    const after = try testSamePartition(&copy);
    try std.testing.expect(!after['p']['q'] and after['w']['y']);
}

test "classTerms lists each byte set and digits term under a term once" {
    const gpa = std.testing.allocator;
    var set = try ExprSet.init(gpa, .{});
    defer set.deinit();
    const e = try parseTest(&set, "(?:ab|[a-c]x)+a");
    const d = try set.concat(e, try set.digitsMod(7, 0, 0, 0));
    var out: std.ArrayList(u32) = .empty;
    defer out.deinit(gpa);
    try set.classTerms(gpa, d, &out);
    // a, b, [a-c], x and the digits term: each once.
    try std.testing.expectEqual(@as(usize, 5), out.items.len);
    for (out.items, 0..) |id, i| {
        const t = set.tag(@fromBackingInt(id));
        try std.testing.expect(t == .byte_set or t == .digits_mod);
        for (out.items[0..i]) |other| try std.testing.expect(other != id);
    }
}

test "literal builds the term and spends the fuel of concatenating its bytes" {
    const gpa = std.testing.allocator;
    var prng = std.Random.DefaultPrng.init(0x11e7a1);
    const random = prng.random();
    var fast = try ExprSet.init(gpa, .{});
    defer fast.deinit();
    var reference = try ExprSet.init(gpa, .{});
    defer reference.deinit();
    var text: [24]u8 = undefined;
    for (0..300) |_| {
        const len = random.uintAtMost(usize, text.len);
        // Few distinct bytes, so that terms recur (hits) as well as being new.
        for (text[0..len]) |*b| b.* = "ab\"\\\x00\xff"[random.uintLessThan(usize, 6)];
        fast.refuel(1_000_000, .compile_fuel);
        reference.refuel(1_000_000, .compile_fuel);
        var want: ExprId = .epsilon;
        var i = len;
        while (i > 0) {
            i -= 1;
            want = try reference.concat(try reference.byte(text[i]), want);
        }
        const got = try fast.literal(text[0..len]);
        // The two sets build the same terms in the same order: the same ids.
        try std.testing.expectEqual(want, got);
        try std.testing.expectEqual(reference.count(), fast.count());
        try std.testing.expectEqual(reference.fuel_spent, fast.fuel_spent);
        if (len > 0) try std.testing.expect(fast.accepts(got, text[0..len]) catch unreachable);
    }
}

test "canonical recipe: a term built after other terms (other ids) gives the same recipe, one that rebuilds it" {
    const gpa = std.testing.allocator;
    const parts = [_][]const u8{ "</think>", "<tool_call>", "[0-9]+x", "a(?:b|c)", "zz*" };
    const Built = struct {
        set: ExprSet,
        term: ExprId,
        fn init(order: []const usize) !@This() {
            var set = try ExprSet.init(std.testing.allocator, .{});
            errdefer set.deinit();
            // The parts first, in `order`: their ids (and the order of the alternation's and
            // the intersection's members by id) follow it.
            var ids: [parts.len]ExprId = undefined;
            for (order) |i| ids[i] = try parseTest(&set, parts[i]);
            const any = try parseTest(&set, "(?s:.)*");
            var searches: [2]ExprId = undefined;
            for (&searches, ids[0..2]) |*s, stop| s.* = try set.concat(any, try set.concat(stop, any));
            const text = try set.andAll(&.{ try set.not(searches[0]), try set.not(searches[1]), any });
            const term = try set.concat(try set.alt(&.{ ids[2], ids[3], ids[4] }), text);
            return .{ .set = set, .term = term };
        }
    };
    var forward = try Built.init(&.{ 0, 1, 2, 3, 4 });
    defer forward.set.deinit();
    var backward = try Built.init(&.{ 4, 3, 2, 1, 0 });
    defer backward.set.deinit();
    var recipes: [4]std.ArrayList(u32) = @splat(.empty);
    defer for (&recipes) |*r| r.deinit(gpa);
    try forward.set.exportTerm(gpa, forward.term, &recipes[0]);
    try backward.set.exportTerm(gpa, backward.term, &recipes[1]);
    try forward.set.exportTermCanonical(gpa, forward.term, &recipes[2]);
    try backward.set.exportTermCanonical(gpa, backward.term, &recipes[3]);
    // The ids order the members differently (else this test shows nothing), the structure not.
    try std.testing.expect(!std.mem.eql(u32, recipes[0].items, recipes[1].items));
    try std.testing.expectEqualSlices(u32, recipes[2].items, recipes[3].items);
    // Every recipe rebuilds the one term in a third set.
    var third = try ExprSet.init(gpa, .{});
    defer third.deinit();
    const rebuilt = try third.importTerm(recipes[0].items);
    for (recipes[1..]) |r| try std.testing.expectEqual(rebuilt, try third.importTerm(r.items));
    // Another term (one stop string changed) has another recipe.
    var other: std.ArrayList(u32) = .empty;
    defer other.deinit(gpa);
    const changed = try forward.set.concat(try parseTest(&forward.set, "[0-9]+x|a(?:b|c)|zz*"), try forward.set.andAll(&.{
        try forward.set.not(try parseTest(&forward.set, "(?s:.)*</think>(?s:.)*")),
        try forward.set.not(try parseTest(&forward.set, "(?s:.)*<tool_cal>(?s:.)*")),
    }));
    try forward.set.exportTermCanonical(gpa, changed, &other);
    try std.testing.expect(!std.mem.eql(u32, other.items, recipes[2].items));
}
