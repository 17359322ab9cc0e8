//! The slicer: precomputed masks for the tokens that free text allows, so a mask inside a
//! string body does not walk the two thirds of the vocabulary that are plain words.
//!
//! A *slice* is a set of tokens fixed per tokenizer: the tokens whose bytes are strings of one
//! *family* of characters and that are at most `bound_bytes` long. Two families:
//! - **text**: printable ASCII except `"` and `\`, and every non-ASCII Unicode scalar value in
//!   UTF-8 (JSON string bodies, `[^"]*`, prose). A token may end inside a character (the
//!   automaton accepts prefixes); it may not start inside one.
//! - **word**: `[0-9A-Za-z_]`, the characters identifier-like patterns allow
//!   (`^[a-zA-Z0-9_-]+$`, `\w+`, the inside of a C identifier).
//! - **lead_space**: text with no space but possibly the first byte, and none of ECMA-262's
//!   other `\s` characters: a word with its leading space, as nearly every token is (word
//!   counts, `^(?:\S+\s+){0,9}\S+$`, where a space starts a counted word).
//! Each slice stores its tokens as a mask and a trie of every *other* text token (the rest
//! trie). The text family has a few bounds (`text_bounds_bytes`) after the unbounded slice; the
//! word family one slice of at most `word_bound_bytes` (its rest trie is big). When
//! a lexer state allows every string of the family up to a slice's bound, the slice's mask is
//! OR-ed in and only its rest trie is walked; of the slices that apply, the one with the
//! smallest rest trie wins (`Slices.items` is sorted that way). The result is exact: slice and
//! rest trie partition the text tokens, and a slice is used only where each of its tokens keeps
//! the lexer alive byte after byte (so the walk would have allowed it too).
//!
//! Which states allow which slice is decided from the state's expressions, not by exploring
//! the DFA (`DepthCache`): the *depth* of a state for a family is a number of bytes `d` such
//! that every string of the family of at most `d` bytes keeps some pair of the state alive.
//! Structurally:
//! - `X{m,n}` where X matches every character of the family (`covers`, checked once per X with
//!   derivatives) has depth n (a string of d ≤ n bytes has at most n characters, counting a
//!   trailing partial one; padding with more X reaches m);
//! - `h t` has at least the depth of `h` (t is not empty: plain terms never are), and of `t`
//!   when h is nullable;
//! - an alternation has the largest depth of its members;
//! - `A & ~E1 & ~E2 …` with every `Ei` finite has depth ∞ when A has: A then gives each text
//!   string infinitely many completions, and finitely many are excluded (JSON object keys other
//!   than the listed ones); `A & ~ε` (a nullable lexeme's non-empty part) has A's depth, since
//!   a token is never empty;
//! - an infinite `Ei` counts as finite there when the state's other pairs hold A's words in it
//!   (`exclusionHeld`): JSON object keys beside `patternProperties` regions, "any other key"
//!   being `"C*" & ~("x-C*" | names)`, alive on `x-…` through the pattern's own region;
//! - a marked JSON string's `P·v ∩ C{0,m}"` has min(d(P·v), m − completionMax(P·v))
//!   (`lengthDepth`), and so has `P·v ∩ C{a,m}"` with a > 1 when every body of P·v goes on
//!   with any characters (`endsOpen`); a lead-space depth is min(d(e), 1 + d(e·' ')) over text without spaces;
//! - anything else has depth 0 (the walk covers it).
//! This is a sound under-approximation that costs a few lookups per DFA state, computed once per
//! state and family and kept for the grammar's lifetime. It reads no transitions, so bounded
//! strings (`maxLength`: a new DFA state per character) pay nothing beyond their structural
//! check.
//!
//! Lazy lexemes (free text until a stop string) get none of these: they may end inside a token
//! the lexer survives. They get *open* slices instead, built on first use: the text tokens
//! without a few ASCII bytes, found per lexer state by exploring its transitions
//! (`OpenSlices`, `DepthCache.openExcluded`).
//!
//! Memory per tokenizer (Llama-3, 128k ids): see `docs/trie.md`.

const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const ExprId = regex.ExprId;
const ExprSet = regex.ExprSet;
const lexer_mod = @import("lexer.zig");
const Lexer = lexer_mod.Lexer;
const StateId = lexer_mod.StateId;
const ByteSet = lexer_mod.ByteSet;
const trie_mod = @import("trie.zig");
const Trie = trie_mod.Trie;
const TokenKind = trie_mod.TokenKind;

/// Bounds of the bounded text slices, longest first; the unbounded slice comes before them.
/// Chosen from Llama-3's rest-trie sizes: ≤32 leaves 13k nodes to walk, ≤16 26k, ≤8 144k
/// (of 275k); bounded strings (`maxLength`) use them until few characters are left.
pub const text_bounds_bytes = [_]u16{ 32, 16, 8 };
/// The one word slice's bound. Longer word tokens are rare (118 of 34.7k on Llama-3) and cost
/// the rest trie little (207k nodes against 205k without a bound), while patterns such as
/// `[a-zA-Z0-9_-]{1,40}` would never reach the unbounded slice's bound (64 bytes on Llama-3).
pub const word_bound_bytes: u16 = 16;
/// The bound of the one lead-space slice: bounded strings under a word-count pattern use it
/// (`(?:\S+\s+){0,9}\S+` with `maxLength` 100, near the bound), and past 16 bytes of room the
/// ≤32 and unbounded text slices rarely apply to them anyway.
pub const lead_space_bound_bytes: u16 = 16;
pub const slice_count_max = text_bounds_bytes.len + 4;

/// `lead_space`: text with no space but possibly its first byte (Llama-3: 121,654 tokens of
/// at most 16 bytes, against 121,691 for the text family: tokens are words with their leading
/// space); its depths are computed from `no_space`'s. `no_space`: text without a space (the
/// first word of a word count, where a space may not come first), also at most 16 bytes.
pub const Family = enum(u2) { text, word, lead_space, no_space };
pub const family_count = 4;

// -- text characters as a byte automaton ------------------------------------------------------

/// States of the text automaton: 0 = between characters; the others wait for continuation
/// bytes (with the narrowed second-byte ranges of E0, ED, F0 and F4 that exclude overlong
/// forms, surrogates and values above U+10FFFF). `reject` = not text. States 8-17 are
/// `no_space`'s, which also refuses the non-ASCII characters of ECMA-262's `\s` (a JSON
/// Schema pattern's `\S` does not match them).
pub const text_state_count = 18;
pub const reject: u8 = 0xFF;
const need1 = 1;
const need2 = 2;
const need3 = 3;
const after_e0 = 4;
const after_ed = 5;
const after_f0 = 6;
const after_f4 = 7;

pub const text_next: [text_state_count][256]u8 = blk: {
    @setEvalBranchQuota(10_000);
    var table: [text_state_count][256]u8 = @splat(@splat(reject));
    for (0x20..0x7F) |b| {
        if (b != '"' and b != '\\') table[0][b] = 0;
    }
    for (0xC2..0xE0) |b| table[0][b] = need1;
    table[0][0xE0] = after_e0;
    for (0xE1..0xF0) |b| table[0][b] = need2;
    table[0][0xED] = after_ed;
    table[0][0xF0] = after_f0;
    for (0xF1..0xF4) |b| table[0][b] = need3;
    table[0][0xF4] = after_f4;
    for (0x80..0xC0) |b| {
        table[need1][b] = 0;
        table[need2][b] = need1;
        table[need3][b] = need2;
    }
    for (0xA0..0xC0) |b| table[after_e0][b] = need1;
    for (0x80..0xA0) |b| table[after_ed][b] = need1;
    for (0x90..0xC0) |b| table[after_f0][b] = need2;
    for (0x80..0x90) |b| table[after_f4][b] = need2;
    break :blk table;
};

/// The word automaton: one state, looping on `[0-9A-Za-z_]` (padded to the text shape).
const word_next: [text_state_count][256]u8 = blk: {
    var table: [text_state_count][256]u8 = @splat(@splat(reject));
    for ('0'..'9' + 1) |b| table[0][b] = 0;
    for ('A'..'Z' + 1) |b| table[0][b] = 0;
    for ('a'..'z' + 1) |b| table[0][b] = 0;
    table[0]['_'] = 0;
    break :blk table;
};

/// Text without a space or another character of ECMA-262's `\s`: U+00A0, U+1680,
/// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 and U+FEFF (the ASCII ones other
/// than the space are controls, not text).
const no_space_next: [text_state_count][256]u8 = blk: {
    @setEvalBranchQuota(20_000);
    const after_c2 = 8;
    const after_e1 = 9;
    const after_e1_9a = 10;
    const after_e2 = 11;
    const after_e2_80 = 12;
    const after_e2_81 = 13;
    const after_e3 = 14;
    const after_e3_80 = 15;
    const after_ef = 16;
    const after_ef_bb = 17;
    var table = text_next;
    table[0][' '] = reject;
    table[0][0xC2] = after_c2;
    table[0][0xE1] = after_e1;
    table[0][0xE2] = after_e2;
    table[0][0xE3] = after_e3;
    table[0][0xEF] = after_ef;
    for (0x80..0xC0) |b| {
        table[after_c2][b] = 0;
        table[after_e1][b] = need1;
        table[after_e1_9a][b] = 0;
        table[after_e2][b] = need1;
        table[after_e2_80][b] = 0;
        table[after_e2_81][b] = 0;
        table[after_e3][b] = need1;
        table[after_e3_80][b] = 0;
        table[after_ef][b] = need1;
        table[after_ef_bb][b] = 0;
    }
    table[after_c2][0xA0] = reject; // U+00A0
    table[after_e1][0x9A] = after_e1_9a;
    table[after_e1_9a][0x80] = reject; // U+1680
    table[after_e2][0x80] = after_e2_80;
    table[after_e2][0x81] = after_e2_81;
    for (0x80..0x8B) |b| table[after_e2_80][b] = reject; // U+2000-U+200A
    table[after_e2_80][0xA8] = reject; // U+2028
    table[after_e2_80][0xA9] = reject; // U+2029
    table[after_e2_80][0xAF] = reject; // U+202F
    table[after_e2_81][0x9F] = reject; // U+205F
    table[after_e3][0x80] = after_e3_80;
    table[after_e3_80][0x80] = reject; // U+3000
    table[after_ef][0xBB] = after_ef_bb;
    table[after_ef_bb][0xBF] = reject; // U+FEFF
    break :blk table;
};

/// The character automaton of a family; `lead_space` has none of its own (`isIn` reads its
/// first byte, then `no_space`'s automaton).
pub fn familyNext(family: Family) *const [text_state_count][256]u8 {
    return switch (family) {
        .text => &text_next,
        .word => &word_next,
        .lead_space, .no_space => &no_space_next,
    };
}

/// Are `bytes` a prefix of a string of the family's characters?
pub fn isIn(family: Family, bytes: []const u8) bool {
    const next = familyNext(family);
    var state: u8 = 0;
    const rest = if (family == .lead_space and bytes.len > 0 and bytes[0] == ' ') bytes[1..] else bytes;
    for (rest) |b| {
        state = next[state][b];
        if (state == reject) return false;
    }
    return true;
}

pub fn isText(bytes: []const u8) bool {
    return isIn(.text, bytes);
}

// -- per tokenizer: the slices ----------------------------------------------------------------

pub const Slice = struct {
    /// Null for an open slice (`OpenSlices`).
    family: ?Family,
    /// Distinct among the tokenizer's slices, from 1: walk-cache entries recorded over the
    /// slice's rest trie are keyed by it (`matcher.WalkCache`).
    tag: u8 = 0,
    /// Every token of the slice has at most this many bytes.
    bound_bytes: u16,
    token_count: u32,
    /// The slice's tokens, in the matcher's mask layout (one spare word for the dummy bit).
    mask: []u32,
    /// The trie of the text tokens not in the slice.
    rest: Trie,

    fn deinit(self: *Slice, gpa: Allocator) void {
        gpa.free(self.mask);
        self.rest.deinit(gpa);
    }
};

pub const Slices = struct {
    /// By increasing rest-trie size: the first slice that applies leaves the least to walk.
    items: [slice_count_max]Slice,
    count: u32,
    /// Per token: its characters when it is text (`isText`; a partial last one counts), else
    /// 0xFF (`ShortTexts`' masks are read from it).
    text_chars: []u8 = &.{},

    /// Builds the slices; `trie` is the tokenizer's full trie, which the rest tries are cut from.
    pub fn build(gpa: Allocator, trie: *const Trie, blob: []const u8, offsets: []const u32, kinds: []const TokenKind) trie_mod.Error!Slices {
        var self: Slices = .{ .items = undefined, .count = 0 };
        errdefer self.deinit(gpa);
        self.text_chars = try gpa.alloc(u8, kinds.len);
        @memset(self.text_chars, 0xFF);
        for ([_]Family{ .text, .word, .lead_space, .no_space }) |family| {
            // An unbounded slice's bound is its longest token.
            var longest: u16 = 0;
            for (kinds, 0..) |kind, id| {
                const bytes = blob[offsets[id]..offsets[id + 1]];
                if (kind != .text or bytes.len == 0 or !isIn(family, bytes)) continue;
                longest = @max(longest, @as(u16, @intCast(bytes.len)));
                if (family == .text) {
                    var chars: u32 = 0;
                    for (bytes) |b| chars += @intFromBool(b & 0xC0 != 0x80); // (text starts on a character)
                    self.text_chars[id] = @intCast(@min(chars, 0xFE));
                }
            }
            if (longest == 0) continue;
            const first_bound = switch (family) {
                .word => @min(longest, word_bound_bytes),
                .lead_space, .no_space => @min(longest, lead_space_bound_bytes),
                else => longest,
            };
            self.items[self.count] = try buildOne(gpa, trie, blob, offsets, kinds, family, first_bound);
            self.count += 1;
            if (family != .text) continue;
            for (text_bounds_bytes) |bound| {
                if (bound >= longest) continue; // the unbounded slice already is this one
                self.items[self.count] = try buildOne(gpa, trie, blob, offsets, kinds, family, bound);
                self.count += 1;
            }
        }
        const BySize = struct {
            fn lessThan(_: void, x: Slice, y: Slice) bool {
                return x.rest.nodes.len < y.rest.nodes.len;
            }
        };
        std.mem.sort(Slice, self.items[0..self.count], {}, BySize.lessThan);
        for (self.items[0..self.count], 1..) |*s, tag| s.tag = @intCast(tag);
        return self;
    }

    fn buildOne(
        gpa: Allocator,
        trie: *const Trie,
        blob: []const u8,
        offsets: []const u32,
        kinds: []const TokenKind,
        family: Family,
        bound: u16,
    ) trie_mod.Error!Slice {
        const Members = struct {
            family: Family,
            bound: u16,
            fn has(self: @This(), bytes: []const u8) bool {
                return bytes.len <= self.bound and isIn(self.family, bytes);
            }
        };
        var slice = try buildOf(gpa, trie, blob, offsets, kinds, Members{ .family = family, .bound = bound });
        slice.family = family;
        slice.bound_bytes = bound;
        return slice;
    }

    pub fn deinit(self: *Slices, gpa: Allocator) void {
        for (self.items[0..self.count]) |*s| s.deinit(gpa);
        self.count = 0;
        gpa.free(self.text_chars);
        self.text_chars = &.{};
    }

    /// The text slice without a bound (its longest token's), whose rest trie holds the tokens
    /// outside the text family; null for a tokenizer without text tokens.
    pub fn unboundedText(self: *const Slices) ?*const Slice {
        var best: ?*const Slice = null;
        for (self.items[0..self.count]) |*s| {
            if (s.family == .text and (best == null or s.bound_bytes > best.?.bound_bytes)) best = s;
        }
        return best;
    }

    /// The slice with the smallest rest trie whose tokens `state` all allows, if any.
    pub fn pick(self: *const Slices, cache: *DepthCache, lexer: *Lexer, state: StateId) Error!?*const Slice {
        var depths: [family_count]?u16 = @splat(null);
        for (self.items[0..self.count]) |*s| {
            const family = s.family.?;
            const f = @backingInt(family);
            const depth = depths[f] orelse try cache.depthOf(lexer, state, family);
            depths[f] = depth;
            if (s.bound_bytes <= depth) return s;
        }
        return null;
    }
};

/// The slice of the text tokens `members.has` takes (its `family` and `bound_bytes` left for
/// the caller: null and the longest token's length).
fn buildOf(gpa: Allocator, trie: *const Trie, blob: []const u8, offsets: []const u32, kinds: []const TokenKind, members: anytype) trie_mod.Error!Slice {
    const mask = try gpa.alloc(u32, kinds.len / 32 + 1);
    errdefer gpa.free(mask);
    @memset(mask, 0);
    const rest_kinds = try gpa.dupe(TokenKind, kinds);
    defer gpa.free(rest_kinds);
    var token_count: u32 = 0;
    var longest: u16 = 0;
    for (kinds, 0..) |kind, id| {
        const bytes = blob[offsets[id]..offsets[id + 1]];
        if (kind != .text or bytes.len == 0 or !members.has(bytes)) continue;
        mask[id >> 5] |= @as(u32, 1) << @intCast(id & 31);
        rest_kinds[id] = .unused;
        token_count += 1;
        longest = @max(longest, @as(u16, @intCast(bytes.len)));
    }
    // A rest of few tokens (an open slice's: ~930 of Llama-3's 128k) is built from them, a
    // sort of those tokens, where `filtered` passes over the whole trie three times (~5 ms on
    // Llama-3, most of an open slice's build). The same paths either way (`Trie.filtered`).
    var rest_count: usize = 0;
    for (rest_kinds) |kind| rest_count += @intFromBool(kind == .text);
    const rest = if (rest_count * rest_built_ratio < kinds.len)
        try Trie.build(gpa, blob, offsets, rest_kinds)
    else
        try trie.filtered(gpa, rest_kinds);
    return .{ .family = null, .bound_bytes = longest, .token_count = token_count, .mask = mask, .rest = rest };
}

/// `buildOf` builds a rest trie from its tokens when they are under 1/`rest_built_ratio` of
/// the vocabulary (else it filters the whole trie).
const rest_built_ratio = 16;

// -- per tokenizer, on first use: text without a few ASCII bytes -----------------------------
//
// Free text that runs until a stop string (`</think>`, `<tool_call>`) is a lazy lexeme: it ends
// at the stop string's last byte even inside a token, so the families' slices, which only
// know that the lexer stays alive, do not apply, and a state's first mask walked the whole
// trie (~2 ms on Llama-3, at each of the ~11 free-text states of a tool-call output, on every
// grammar's first request in each core instance). An *open* slice is the text tokens with
// none of a few ASCII bytes (`excluded`), any other ASCII byte (controls, `"` and `\`
// included) and any UTF-8 character allowed. `DepthCache.openExcluded` finds, for a lexer
// state holding a lazy lexeme, bytes whose absence keeps every such string on alive states
// where no lazy lexeme matches: for text until `</think>` the `>`, which ends it. The walk
// takes the slice's tokens as they are and walks the rest trie: Llama-3's slice without `>`
// leaves ~930 tokens and ~1,500 nodes. Slices are kept for the tokenizer's life (entries of
// grammars' walk caches index their rest tries), at most `open_slice_count_max` of them.

pub const open_slice_count_max = 8;
/// An open slice leaves out at most this many ASCII bytes.
pub const open_excluded_max = 8;
/// `openExcluded` gives up past this many (lexer state, character automaton state) pairs, or
/// when its search has made this many new lexer states (each costs a derivative per byte
/// class: the start of a tool-call output made 28).
const open_pairs_max = 128;
const open_new_states_max = 64;

/// The text automaton (`text_next`) with every ASCII byte but those of `excluded`.
fn openNext(state: u8, b: u8, excluded: *const ByteSet) u8 {
    if (b >= 0x80) return text_next[state][b];
    if (state != 0 or (excluded[b >> 6] >> @intCast(b & 63)) & 1 != 0) return reject;
    return 0;
}

/// Are `bytes` a prefix of a string of UTF-8 characters without a byte of `excluded`?
pub fn isOpenText(bytes: []const u8, excluded: *const ByteSet) bool {
    var state: u8 = 0;
    for (bytes) |b| {
        state = openNext(state, b, excluded);
        if (state == reject) return false;
    }
    return true;
}

/// `DepthCache.openExcluded`'s search: the lexer's transitions from a state, paired with the
/// character automaton's (`openNext`), breadth first. A byte that leads to a dead or lazily
/// matching state is left out (a non-ASCII one cannot be: the run fails, but goes on to the
/// end for `trapEntries`) and the search goes on. A byte left out after the search went
/// through it only makes it visit more pairs than the answer reaches, so every pair the
/// answer reaches was checked. It builds the transitions it reads, which the state's first
/// walk would mostly build anyway (free text takes nearly every byte).
const OpenSearch = struct {
    pairs: [open_pairs_max]Pair = undefined,
    /// Per pair: the bytes that lead into it, and how many bytes it leaves out (a refused
    /// non-ASCII byte counts as two: it cannot be left out).
    entries: [open_pairs_max]ByteSet = undefined,
    refusals: [open_pairs_max]u16 = undefined,
    count: usize = 0,
    /// The last run met no pair limit (it left out too many bytes, or a non-ASCII one).
    complete: bool = false,

    const Pair = struct { state: StateId, char: u8 };

    /// The bytes left out from `state`, starting with `excluded`; null past the limits.
    fn run(self: *OpenSearch, lexer: *Lexer, state: StateId, initial: ByteSet) Error!?ByteSet {
        var excluded = initial;
        var refused_non_ascii = false;
        var excluded_count: u32 = 0;
        for (excluded) |word| excluded_count += @popCount(word);
        const states_before = lexer.stateCount();
        if (excluded_count > open_excluded_max) return null;
        self.pairs[0] = .{ .state = state, .char = 0 };
        self.entries[0] = @splat(0);
        self.refusals[0] = 0;
        self.count = 1;
        self.complete = false;
        var next_pair: usize = 0;
        while (next_pair < self.count) : (next_pair += 1) {
            const from = self.pairs[next_pair];
            for (0..256) |byte| {
                const b: u8 = @intCast(byte);
                const char = openNext(from.char, b, &excluded);
                if (char == reject) continue;
                const to = try lexer.next(from.state, b);
                if (lexer.stateCount() - states_before > open_new_states_max) return null;
                if (to == .dead or lexer.stateInfo(to).lazy_accepting) {
                    // (On to the end either way: `trapEntries` reads the refusals.)
                    if (b >= 0x80) {
                        refused_non_ascii = true;
                        self.refusals[next_pair] += 2;
                        continue;
                    }
                    excluded[b >> 6] |= @as(u64, 1) << @intCast(b & 63);
                    excluded_count += 1;
                    self.refusals[next_pair] += 1;
                    continue;
                }
                const pair: Pair = .{ .state = to, .char = char };
                const at = for (self.pairs[0..self.count], 0..) |known, i| {
                    if (known.state == pair.state and known.char == pair.char) break i;
                } else at: {
                    if (self.count == open_pairs_max) return null;
                    self.pairs[self.count] = pair;
                    self.entries[self.count] = @splat(0);
                    self.refusals[self.count] = 0;
                    self.count += 1;
                    break :at self.count - 1;
                };
                self.entries[at][b >> 6] |= @as(u64, 1) << @intCast(b & 63);
            }
        }
        self.complete = true;
        return if (refused_non_ascii or excluded_count > open_excluded_max) null else excluded;
    }

    /// The bytes that lead into the pairs of the last run that left out more than one byte
    /// (not the start's); null when one of them is not ASCII or there is none.
    fn trapEntries(self: *const OpenSearch) ?ByteSet {
        var out: ByteSet = @splat(0);
        var any = false;
        for (self.entries[1..self.count], self.refusals[1..self.count]) |entry, refusals| {
            if (refusals < 2) continue;
            if (entry[2] | entry[3] != 0) return null;
            for (&out, entry) |*o, e| o.* |= e;
            any = true;
        }
        return if (any) out else null;
    }
};

// -- per tokenizer, on first use: text tokens by their characters ---------------------------
//
// A JSON string near its `maxLength` (k characters left, k under the smallest text slice's
// bound or not far above it) took no slice or one whose rest trie is most of the trie (the ≤8
// slice leaves 144,000 of Llama-3's 275,000 nodes), and each position is a new lexer state:
// every step to the bound walked ~100,000 nodes (0.6-1.6 ms on Llama-3). Where the state is
// the bound and nothing else (`DepthCache.shortTextChars`), the text tokens it allows are
// exactly those of at most k characters, whatever their bytes: the mask of those, and a walk
// of the tokens outside the text family (quotes, escapes: the unbounded text slice's rest
// trie, a few thousand nodes).

/// `ShortTexts` holds masks for 1 to this many characters.
pub const short_text_chars_max = 31;

/// Per tokenizer (in its `OpenSlices`), built on first use: per count k the text tokens of at
/// most k characters (a partial last character counts as one, as it takes a place in the
/// bound), 16 kB each on Llama-3, from `Slices.text_chars` (a pass over its bytes, ~0.1 ms).
pub const ShortTexts = struct {
    masks: [short_text_chars_max][]u32 = @splat(&.{}),

    pub fn deinit(self: *ShortTexts, gpa: Allocator) void {
        for (self.masks) |m| gpa.free(m);
        self.* = .{};
    }

    /// The text tokens of at most `k` characters (1 ≤ k ≤ `short_text_chars_max`), in the
    /// matcher's mask layout; `text_chars` is the tokenizer's `Slices.text_chars`.
    pub fn mask(self: *ShortTexts, gpa: Allocator, text_chars: []const u8, k: u32) Allocator.Error![]const u32 {
        assert(1 <= k and k <= short_text_chars_max);
        const slot = &self.masks[k - 1];
        if (slot.len > 0) return slot.*;
        const m = try gpa.alloc(u32, text_chars.len / 32 + 1);
        @memset(m, 0);
        for (text_chars, 0..) |c, id| {
            if (c <= k) m[id >> 5] |= @as(u32, 1) << @intCast(id & 31);
        }
        slot.* = m;
        return m;
    }
};

/// Masks walk from a state clamped for tokens of at most this many bytes when that differs
/// from the state clamped for the longest token, and take the longer tokens from a walk of
/// their own trie (`LongTokens`). Llama-3 has 231 text tokens over 32 bytes (3.3k trie
/// nodes); over 16 bytes, 1,566 (17.6k nodes), whose walk from a new state costs about what
/// the shorter clamp saves.
pub const long_token_bytes: u32 = 32;

/// The text tokens longer than `long_token_bytes`: their ids and their trie, per tokenizer
/// (in its `OpenSlices`).
///
/// A mask walks from a *clamped* lexer state, one that answers like the real state for every
/// token of at most L bytes (`Grammar.clampedState`; docs/lexer.md, "Clamped states"), L
/// being the longest token (128 bytes on Llama-3). Counters a long token could exhaust stay,
/// so a word count `(?:\S+\s+){0,49}` (up to 64 copies in 128 bytes) or a JSON string with
/// fewer than ~140 characters left under `maxLength` makes every position a new state, and
/// each mask a first visit: a walk deriving new transitions, ~0.25 ms a step for the word
/// count and ~1.1-1.5 ms under `maxLength` 100 with a pattern (an intersection, whose new
/// states cost more). Clamped for L = `long_token_bytes` instead, those states repeat (the
/// bound is dropped, the counter loses its upper bound) and the walk cache answers; the few
/// longer tokens are then cleared from that mask and walked from the state clamped for the
/// longest token: exact for every token, at the cost of a walk of this trie.
///
/// Where the state clamped for the longest token is a JSON string's bound with k characters
/// left, alone or beside a pattern side of single characters (`DepthCache.boundChars`, the
/// plain `maxLength` string of 40-140 characters), the long tokens of the text family need no
/// walk: the shorter clamp's state answers for them as the pattern side does, and the real
/// state allows those of at most k characters of them. Only the others (`other`: with a
/// quote, a backslash or a control byte) are walked.
pub const LongTokens = struct {
    /// The long tokens in the text family, and the others.
    text_ids: []u32,
    other_ids: []u32,
    trie: Trie,
    /// The trie of the long tokens outside the text family.
    other: Trie,

    fn build(gpa: Allocator, blob: []const u8, offsets: []const u32, kinds: []const TokenKind) trie_mod.Error!LongTokens {
        const long_kinds = try gpa.dupe(TokenKind, kinds);
        defer gpa.free(long_kinds);
        const other_kinds = try gpa.dupe(TokenKind, kinds);
        defer gpa.free(other_kinds);
        var text_ids: std.ArrayList(u32) = .empty;
        defer text_ids.deinit(gpa);
        var other_ids: std.ArrayList(u32) = .empty;
        defer other_ids.deinit(gpa);
        for (long_kinds, other_kinds, 0..) |*kind, *other_kind, id| {
            if (kind.* != .text) continue;
            const bytes = blob[offsets[id]..offsets[id + 1]];
            if (bytes.len <= long_token_bytes) {
                kind.* = .unused;
                other_kind.* = .unused;
            } else if (isIn(.text, bytes)) {
                try text_ids.append(gpa, @intCast(id));
                other_kind.* = .unused;
            } else {
                try other_ids.append(gpa, @intCast(id));
            }
        }
        var trie = try Trie.build(gpa, blob, offsets, long_kinds);
        errdefer trie.deinit(gpa);
        var other = try Trie.build(gpa, blob, offsets, other_kinds);
        errdefer other.deinit(gpa);
        const text_owned = try text_ids.toOwnedSlice(gpa);
        errdefer gpa.free(text_owned);
        return .{ .text_ids = text_owned, .other_ids = try other_ids.toOwnedSlice(gpa), .trie = trie, .other = other };
    }

    pub fn deinit(self: *LongTokens, gpa: Allocator) void {
        gpa.free(self.text_ids);
        gpa.free(self.other_ids);
        self.trie.deinit(gpa);
        self.other.deinit(gpa);
    }

    /// Clear the long tokens' bits of `mask`.
    pub fn clear(self: *const LongTokens, mask: []u32) void {
        for (self.text_ids) |id| clearToken(mask, id);
        for (self.other_ids) |id| clearToken(mask, id);
    }

    /// Clear the bits of the long tokens outside the text family, and of those in it with
    /// more than `chars` characters (`text_chars`: `Slices.text_chars`).
    pub fn clearBeyond(self: *const LongTokens, mask: []u32, text_chars: []const u8, chars: u32) void {
        for (self.text_ids) |id| if (text_chars[id] > chars) clearToken(mask, id);
        for (self.other_ids) |id| clearToken(mask, id);
    }

    fn clearToken(mask: []u32, id: u32) void {
        mask[id >> 5] &= ~(@as(u32, 1) << @intCast(id & 31));
    }
};

/// `DepthCache.openExcluded`'s answers shared between grammars, per tokenizer (in its
/// `OpenSlices`). A server whose requests bring their own tools compiles a grammar per
/// request, and the free text around the calls is the same in each (the tools differ, the
/// text until `<tool_call>` or `</think>` does not); its search made ~28 lexer states with a
/// derivative per byte class each: ~1.5 ms of a new grammar's first mask, and again at the
/// first visit of the reasoning text. An answer depends only on the state's expressions
/// (its pairs' languages, which of their lexemes are lazy, and `end_when_final`), so it is
/// kept under a key that spells them out (`DepthCache.openKey`: each expression as
/// `ExprSet.exportTermCanonical` writes it, independent of the grammar's ids): an equal key
/// is an equal state, whatever grammar it comes from. (The search's limit on new lexer states
/// depends on which states the grammar had already, so a state may find an answer in
/// another grammar that its own search would have given up on: it is the same answer.)
/// Bounded by `open_answer_count_max` and `open_answer_words_max` (then emptied); failing to
/// remember (out of memory) only costs the search next time.
pub const OpenAnswers = struct {
    words: std.ArrayList(u32) = .empty,
    entries: std.ArrayList(Entry) = .empty,
    /// Answers found here (tests, measurements).
    hits: u64 = 0,

    const Entry = struct { hash: u32, start: u32, len: u32, found: bool, excluded: ByteSet };

    pub fn deinit(self: *OpenAnswers, gpa: Allocator) void {
        self.words.deinit(gpa);
        self.entries.deinit(gpa);
    }

    fn find(self: *OpenAnswers, key: []const u32, hash: u32) ?Entry {
        for (self.entries.items) |entry| {
            if (entry.hash == hash and regex.wordsEqual(self.words.items[entry.start..][0..entry.len], key)) {
                self.hits += 1;
                return entry;
            }
        }
        return null;
    }

    fn remember(self: *OpenAnswers, gpa: Allocator, key: []const u32, hash: u32, answer: ?ByteSet) Allocator.Error!void {
        if (self.entries.items.len == open_answer_count_max or self.words.items.len + key.len > open_answer_words_max) {
            self.words.clearRetainingCapacity();
            self.entries.clearRetainingCapacity();
        }
        try self.entries.ensureUnusedCapacity(gpa, 1);
        const start: u32 = @intCast(self.words.items.len);
        try self.words.appendSlice(gpa, key);
        self.entries.appendAssumeCapacity(.{
            .hash = hash,
            .start = start,
            .len = @intCast(key.len),
            .found = answer != null,
            .excluded = answer orelse @splat(0),
        });
    }
};

/// `OpenAnswers`' bounds: entries, and the words of their keys (1 MiB); a key longer than
/// `open_key_words_max` is not kept (nor looked up).
const open_answer_count_max = 64;
const open_answer_words_max = 1 << 18;
const open_key_words_max = 1 << 14;

pub const OpenSlices = struct {
    items: [open_slice_count_max]Slice = undefined,
    excluded: [open_slice_count_max]ByteSet = undefined,
    count: u32 = 0,
    /// `openExcluded`'s answers, for the grammars that follow.
    answers: OpenAnswers = .{},
    /// Text tokens by their characters, for strings near their bound (also built on first use).
    short: ShortTexts = .{},
    /// The tokens longer than `long_token_bytes` (also built on first use).
    long: ?LongTokens = null,

    pub fn deinit(self: *OpenSlices, gpa: Allocator) void {
        for (self.items[0..self.count]) |*s| s.deinit(gpa);
        self.count = 0;
        self.answers.deinit(gpa);
        self.short.deinit(gpa);
        if (self.long) |*long| long.deinit(gpa);
        self.long = null;
    }

    /// The tokenizer's `LongTokens`, built on first use.
    pub fn longTokens(self: *OpenSlices, gpa: Allocator, blob: []const u8, offsets: []const u32, kinds: []const TokenKind) trie_mod.Error!*const LongTokens {
        if (self.long == null) self.long = try LongTokens.build(gpa, blob, offsets, kinds);
        return &self.long.?;
    }

    /// The open slice without the bytes of `excluded`, built on its first use (a pass over
    /// the tokens and a trie of the few others: ~2.7 ms for Llama-3's 128k); null when the
    /// tokenizer has `open_slice_count_max` others.
    pub fn get(self: *OpenSlices, gpa: Allocator, trie: *const Trie, blob: []const u8, offsets: []const u32, kinds: []const TokenKind, excluded: ByteSet) trie_mod.Error!?*const Slice {
        for (self.excluded[0..self.count], self.items[0..self.count]) |known, *s| {
            if (std.mem.eql(u64, &known, &excluded)) return s;
        }
        if (self.count == open_slice_count_max) return null;
        // `openNext` as a table, one load a byte (`isOpenText`, a call and three tests a byte,
        // cost ~0.6 ms more of a build, ~2.7 ms on Llama-3 with its rest trie built from its
        // few tokens: `buildOf`).
        const Members = struct {
            next: *const [text_state_count][256]u8,
            fn has(members: @This(), bytes: []const u8) bool {
                var state: u8 = 0;
                for (bytes) |b| {
                    state = members.next[state][b];
                    if (state == reject) return false;
                }
                return true;
            }
        };
        const next = try gpa.create([text_state_count][256]u8);
        defer gpa.destroy(next);
        for (next, 0..) |*row, state| {
            for (row, 0..) |*to, b| to.* = openNext(@intCast(state), @intCast(b), &excluded);
        }
        var slice = try buildOf(gpa, trie, blob, offsets, kinds, Members{ .next = next });
        // After the families' tags (`Slices.build`: at most `slice_count_max`).
        slice.tag = @intCast(slice_count_max + 1 + self.count);
        self.items[self.count] = slice;
        self.excluded[self.count] = excluded;
        self.count += 1;
        return &self.items[self.count - 1];
    }
};

// -- per grammar: the depth of lexer states, per family --------------------------------------

/// Depths: finite ones are at most `depth_finite_max`.
pub const depth_unbounded: u16 = 0xFFFE;
const depth_unknown: u16 = 0xFFFF;
const depth_finite_max: u16 = 0xFFFD;
/// Structural recursion (alternation inside concatenation inside …) deeper than this counts
/// as depth 0, and a finiteness check needing more than `finite_visit_max` new visits says "not
/// finite": both only make the answer more conservative.
const expr_depth_max: u32 = 16;
const finite_visit_max: u32 = 200_000;
/// `exclusionHeld`: infinite excluded terms it takes apart (2^n - 1 cells), inclusion tests per
/// state and family, and the `ExprSet.includes` budget of one test.
const cover_atoms_max: usize = 6;
const cover_steps_max: u32 = 4096;
const cover_include_budget: u32 = 16;
/// `disjoint`: common heads stepped through, and the nesting `firstBytes` reads.
const disjoint_depth_max: u32 = 16;

pub const Error = regex.Error;

const Edge = struct { byte: u8, next: u8 };

/// The depth of each DFA state of one grammar's lexer for each family, computed on first use.
pub const DepthCache = struct {
    gpa: Allocator,
    /// Per family, by state index; `depth_unknown` until computed.
    depths: [family_count]std.ArrayList(u16) = @splat(.empty),
    /// Does expression X match every character of the family? By `id << 2 | family`.
    covers_memo: std.AutoHashMapUnmanaged(u64, bool) = .empty,
    /// Does expression E denote a finite language? By expression id.
    finite_memo: std.AutoHashMapUnmanaged(u32, bool) = .empty,
    /// `charWithin`'s answers, by `x << 32 | y`.
    within_memo: std.AutoHashMapUnmanaged(u64, bool) = .empty,
    /// Per family and automaton state: one byte per (byte class, next state), to take
    /// derivatives with.
    edges: [family_count][text_state_count]std.ArrayList(Edge) = @splat(@splat(.empty)),
    edges_ready: bool = false,
    /// Inclusion tests `exclusionHeld` may still make for the state being measured.
    cover_steps_left: u32 = 0,
    /// Per lexeme, the character term of a JSON string length bound the front-end marked
    /// (`Lexeme.string_length`), else `nothing`: `lengthDepth` reads it. The grammar's.
    length_chars: []const ExprId = &.{},
    /// By state index, `openExcluded`'s answers (entries of states never asked are unknown).
    open: std.ArrayList(OpenAnswer) = .empty,
    /// By state index, `boundChars`' answers: 0 unknown, `short_none` none, else k; and
    /// with k, the answer's pattern-side state (`dead` for a bound alone).
    short: std.ArrayList(u8) = .empty,
    short_patterns: std.ArrayList(StateId) = .empty,

    const OpenAnswer = struct { known: bool = false, found: bool = false, excluded: ByteSet = @splat(0) };

    pub fn init(gpa: Allocator) DepthCache {
        return .{ .gpa = gpa };
    }

    pub fn deinit(self: *DepthCache) void {
        for (&self.depths) |*d| d.deinit(self.gpa);
        self.covers_memo.deinit(self.gpa);
        self.finite_memo.deinit(self.gpa);
        self.within_memo.deinit(self.gpa);
        for (&self.edges) |*per_family| for (per_family) |*e| e.deinit(self.gpa);
        self.open.deinit(self.gpa);
        self.short.deinit(self.gpa);
        self.short_patterns.deinit(self.gpa);
        self.* = undefined;
    }

    /// `shortTextChars`' answer: the characters left, and where the state is an intersection
    /// with a pattern side of single-character loops, the state with that side in its place
    /// (else null).
    pub const ShortText = struct { chars: u32, pattern: ?StateId };

    /// k when `state` is a JSON string with 1 ≤ k ≤ `short_text_chars_max` characters left
    /// and nothing else: one pair, a JSON string lexeme the front-end marked with its length
    /// bound (`length_chars`) whose expression is now the bound `C{a,k}"` between
    /// characters, C covering text. A text token then keeps it alive exactly when it has at
    /// most k characters (a shorter string pads up to a), and no lexeme ends inside one (only
    /// a quote ends the string): those are the tokens `ShortTexts` holds.
    ///
    /// Or the expression is the intersection of that bound with a pattern side `X{a',b'} "`
    /// whose X matches single characters of C only (X ⊆ C, `^[^<>]*$`, `.*` once the pattern
    /// reached it) and b' ≥ k: a text token keeps it alive exactly when it is a prefix of
    /// X characters and has at most k characters (both counters then pad up to their
    /// minimum, the intersection being alive), so the mask is those of `ShortTexts` that a
    /// walk from the pattern side alone allows, and `pattern` is that side's state. Before, each
    /// of the last k characters of such a string was a new state walked through the ≤8 text
    /// slice's rest trie (MaskBench Snowplow's `version`, `^(\d+\.\d+\.\d+.*)$` under
    /// `maxLength` 32: 2.7 ms a step).
    ///
    /// Else null. Computed once per state (every mask asks).
    pub fn shortTextChars(self: *DepthCache, lexer: *Lexer, state: StateId) Error!?ShortText {
        const answer = try self.boundChars(lexer, state) orelse return null;
        return if (answer.chars <= short_text_chars_max) answer else null;
    }

    /// `shortTextChars` without its bound on k (at most `bound_chars_max`): where the state
    /// is such a string, a text token keeps it alive exactly when the pattern side allows it
    /// (or always, for a bound alone) and it has at most k characters, whatever k. The
    /// tokens over `long_token_bytes` are taken that way (`LongTokens`).
    pub fn boundChars(self: *DepthCache, lexer: *Lexer, state: StateId) Error!?ShortText {
        const index = lexer.stateIndex(state);
        if (index >= self.short.items.len) {
            try self.short.appendNTimes(self.gpa, 0, index + 1 - self.short.items.len);
            try self.short_patterns.appendNTimes(self.gpa, .dead, index + 1 - self.short_patterns.items.len);
        }
        const known = self.short.items[index];
        if (known != 0) {
            if (known == short_none) return null;
            const pattern = self.short_patterns.items[index];
            return .{ .chars = known, .pattern = if (pattern == .dead) null else pattern };
        }
        const answer = try self.boundCharsOf(lexer, state);
        self.short.items[index] = if (answer) |a| @intCast(a.chars) else short_none;
        if (answer) |a| self.short_patterns.items[index] = a.pattern orelse .dead;
        return answer;
    }

    const short_none: u8 = 0xFF;
    /// The largest k `boundChars` answers (kept in a byte per state).
    pub const bound_chars_max: u32 = short_none - 1;

    fn boundCharsOf(self: *DepthCache, lexer: *Lexer, state: StateId) Error!?ShortText {
        const pairs = lexer.statePairs(state);
        var only: ?[2]u32 = null;
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (pairs[i] == lexer_mod.start_marker) continue;
            if (only != null) return null;
            only = .{ pairs[i], pairs[i + 1] };
        }
        const pair = only orelse return null;
        const exprs = lexer.exprs;
        // Only a lexeme the front-end marked (`Lexeme.string_length`): its C is the JSON
        // character. (`"X"` of any other lexeme has the bound's shape with X a whole body:
        // `"(?:C*|…)"` read as one character allowed one-character tokens only.)
        if (pair[0] >= self.length_chars.len) return null;
        const char = self.length_chars[pair[0]];
        if (char == .nothing) return null;
        const quote = try exprs.byte('"');
        const e: ExprId = @fromBackingInt(@intCast(pair[1]));
        if (exprs.tag(e) == .and_) {
            const side = try self.shortIntersection(exprs, e, char, quote) orelse return null;
            // The state with the pattern side in the intersection's place (start markers kept).
            const with_side = try self.gpa.dupe(u32, pairs);
            defer self.gpa.free(with_side);
            for (0..with_side.len / 2) |n| {
                if (with_side[2 * n] != lexer_mod.start_marker) with_side[2 * n + 1] = side.pattern.index();
            }
            return .{ .chars = side.chars, .pattern = try lexer.internState(with_side) };
        }
        const k = shortBound(exprs, e, char, quote) orelse return null;
        try self.prepareEdges(lexer);
        if (!try self.covers(exprs, char, .text)) return null;
        return .{ .chars = k, .pattern = null };
    }

    /// k when `e` is the bound `C{a,k}"` between characters with 1 ≤ k ≤ `bound_chars_max`.
    fn shortBound(exprs: *const ExprSet, e: ExprId, char: ExprId, quote: ExprId) ?u32 {
        const shape = exprs.lengthShape(e, char, quote) orelse return null;
        if (shape.prefix_len != 0 or shape.count_max == 0 or shape.count_max > bound_chars_max) return null;
        return shape.count_max;
    }

    /// `shortTextChars` for an intersection: one member the bound, the other a pattern side
    /// of single-character loops (`singleLoop`, `heldByLoops`): k and that side.
    fn shortIntersection(self: *DepthCache, exprs: *ExprSet, e: ExprId, char: ExprId, quote: ExprId) Error!?struct { chars: u32, pattern: ExprId } {
        const args = exprs.args(e);
        if (args.len != 2) return null;
        const members = [2]ExprId{ @fromBackingInt(@intCast(args[0])), @fromBackingInt(@intCast(args[1])) };
        self.cover_steps_left = cover_steps_max;
        for (0..2) |i| {
            const k = shortBound(exprs, members[i], char, quote) orelse continue;
            const pattern = members[1 - i];
            if (try self.singleLoop(exprs, pattern, char, quote, k) or try self.heldByLoops(exprs, pattern, char, quote, k)) return .{ .chars = k, .pattern = pattern };
        }
        return null;
    }

    /// Is `pattern` `H1 (H2 (… (X{a',b'} "))))` with X ⊆ C (`char`), a' ≤ k ≤ b', and, with
    /// heads (what a pattern left of its parts before the loop: `\d*` of
    /// `\d+\.\d+\.\d+.*` after `1.0.0`), the loop unbounded and each head nullable and
    /// inside `X*`? Then it is `X{a',b'} "` as a language (a head adds nothing a loop could
    /// not, and may be empty), and any prefix of its words of at most k characters pads to a
    /// word of at most k.
    fn singleLoop(self: *DepthCache, exprs: *ExprSet, pattern: ExprId, char: ExprId, quote: ExprId, k: u32) Error!bool {
        const shape = exprs.quotedShape(pattern, quote) orelse return false;
        if (shape.prefix_len > short_heads_max or exprs.tag(shape.last) != .repeat) return false;
        const counter = exprs.args(shape.last);
        // (`repeat_unbounded` is the largest)
        if (counter[1] > k or counter[2] < k) return false;
        const x: ExprId = @fromBackingInt(@intCast(counter[0]));
        if (!try self.charWithin(exprs, x, char)) return false;
        if (shape.prefix_len == 0) return true;
        if (counter[2] != regex.repeat_unbounded) return false;
        const star = try exprs.repeat(x, 0, regex.repeat_unbounded);
        for (shape.prefix[0..shape.prefix_len]) |h| {
            if (!exprs.nullable(h) or !try self.included(exprs, h, star)) return false;
        }
        return true;
    }

    /// Is `pattern` an alternation of `singleLoop`s and of members each inside one of them
    /// (an unanchored pattern's body once matched: `C* " | C* [0-9a-f] C* "`)? A text string
    /// keeping it alive is then a prefix of some loop's words (the other members' words are
    /// words of a loop), padded in that loop.
    fn heldByLoops(self: *DepthCache, exprs: *ExprSet, pattern: ExprId, char: ExprId, quote: ExprId, k: u32) Error!bool {
        if (exprs.tag(pattern) != .alt or exprs.args(pattern).len > short_alternatives_max) return false;
        var members_buffer: [short_alternatives_max]ExprId = undefined;
        const alternatives = members_buffer[0..exprs.args(pattern).len];
        for (exprs.args(pattern), alternatives) |raw, *m| m.* = @fromBackingInt(@intCast(raw));
        var loops: [short_alternatives_max]bool = undefined;
        var any_loop = false;
        for (alternatives, 0..) |m, n| {
            loops[n] = try self.singleLoop(exprs, m, char, quote, k);
            any_loop = any_loop or loops[n];
        }
        if (!any_loop) return false;
        var budget: u32 = char_within_budget;
        for (alternatives, 0..) |other, o| {
            if (loops[o]) continue;
            const inside = for (alternatives, 0..) |loop, n| {
                if (loops[n] and exprs.includes(other, loop, &budget)) break true;
            } else false;
            if (!inside) return false;
        }
        return true;
    }

    /// `heldByLoops` reads an alternation of at most this many members.
    const short_alternatives_max = 8;

    /// `shortIntersection` reads at most this many heads before a pattern side's loop.
    const short_heads_max = 4;

    /// `ExprSet.includes` (x ⊆ y) for two character terms, remembered: a pattern's class and
    /// the JSON character are alternations of a few dozen spellings each, which take
    /// hundreds of inclusion steps, and every position of a string asks again.
    fn charWithin(self: *DepthCache, exprs: *const ExprSet, x: ExprId, y: ExprId) Error!bool {
        const key = (@as(u64, x.index()) << 32) | y.index();
        if (self.within_memo.get(key)) |hit| return hit;
        var budget: u32 = char_within_budget;
        const within = exprs.includes(x, y, &budget);
        try self.within_memo.put(self.gpa, key, within);
        return within;
    }

    const char_within_budget: u32 = 4096;

    /// The bytes an open slice at `state` leaves out (`OpenSlices`): every string of UTF-8
    /// characters without them keeps the lexer, byte after byte, on alive states where no
    /// lazy lexeme matches, so the walk would allow every such token without the parser.
    /// Null when none is found (at most `open_excluded_max` bytes, `open_pairs_max` pairs).
    /// Computed once per state (`OpenSearch`).
    pub fn openExcluded(self: *DepthCache, lexer: *Lexer, state: StateId, shared: ?*OpenAnswers) Error!?ByteSet {
        const index = lexer.stateIndex(state);
        if (index < self.open.items.len) {
            const known = self.open.items[index];
            if (known.known) return if (known.found) known.excluded else null;
        } else {
            try self.open.appendNTimes(self.gpa, .{}, index + 1 - self.open.items.len);
        }
        var key: std.ArrayList(u32) = .empty;
        defer key.deinit(self.gpa);
        const keyed = shared != null and try self.openKey(lexer, state, &key);
        const hash = if (keyed) regex.hashWords32(key.items) else 0;
        if (keyed) {
            if (shared.?.find(key.items, hash)) |known| {
                self.open.items[index] = .{ .known = true, .found = known.found, .excluded = known.excluded };
                return if (known.found) known.excluded else null;
            }
        }
        var search: OpenSearch = .{};
        var answer = try search.run(lexer, state, @splat(0));
        if (answer == null and search.complete) {
            // Too many bytes left out, or a non-ASCII one: a state where the free text died
            // beside a literal that ends there (`<think>` beside text that excludes it)
            // refuses every byte. Leave out the bytes that lead into such states instead.
            if (search.trapEntries()) |entries| answer = try search.run(lexer, state, entries);
        }
        self.open.items[index] = .{ .known = true, .found = answer != null, .excluded = answer orelse @splat(0) };
        if (keyed) shared.?.remember(self.gpa, key.items, hash, answer) catch {};
        return answer;
    }

    /// `OpenAnswers`' key of `state`: `end_when_final`, then per pair (the start marker left
    /// out) whether its lexeme is lazy, the length of its expression's recipe and the recipe
    /// (`ExprSet.exportTermCanonical`), the pairs in the order of these words (not of their
    /// lexemes' indices, which depend on the rest of the grammar). False when it grows past
    /// `open_key_words_max`.
    fn openKey(self: *DepthCache, lexer: *Lexer, state: StateId, key: *std.ArrayList(u32)) Allocator.Error!bool {
        var parts: std.ArrayList(u32) = .empty;
        defer parts.deinit(self.gpa);
        var spans: std.ArrayList(Span) = .empty;
        defer spans.deinit(self.gpa);
        const pairs = lexer.statePairs(state); // (no state is added below)
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (pairs[i] == lexer_mod.start_marker) continue;
            const lazy = lexer.lazy.len > 0 and lexer.lazy[pairs[i]];
            const head = parts.items.len;
            try parts.appendSlice(self.gpa, &.{ @intFromBool(lazy), 0 });
            try lexer.exprs.exportTermCanonical(self.gpa, @fromBackingInt(@intCast(pairs[i + 1])), &parts);
            parts.items[head + 1] = @intCast(parts.items.len - head - 2);
            if (parts.items.len >= open_key_words_max) return false;
            try spans.append(self.gpa, .{ .start = @intCast(head), .len = @intCast(parts.items.len - head) });
        }
        std.mem.sortUnstable(Span, spans.items, parts.items, Span.less);
        try key.ensureUnusedCapacity(self.gpa, parts.items.len + 1);
        key.appendAssumeCapacity(@intFromBool(lexer.end_when_final));
        for (spans.items) |span| key.appendSliceAssumeCapacity(parts.items[span.start..][0..span.len]);
        return true;
    }

    /// A pair's words in `openKey`'s list, ordered by length, then word by word.
    const Span = struct {
        start: u32,
        len: u32,
        fn less(words: []const u32, a: Span, b: Span) bool {
            if (a.len != b.len) return a.len < b.len;
            return std.mem.order(u32, words[a.start..][0..a.len], words[b.start..][0..b.len]) == .lt;
        }
    };

    /// The depth of `state` for `family`: every string of the family of at most this many
    /// bytes keeps the lexer alive from it (`depth_unbounded`: any length).
    pub fn depthOf(self: *DepthCache, lexer: *Lexer, state: StateId, family: Family) Error!u16 {
        if (state == .dead) return 0;
        const index = lexer.stateIndex(state);
        const depths = &self.depths[@backingInt(family)];
        if (index < depths.items.len) {
            const known = depths.items[index];
            if (known != depth_unknown) return known;
        } else {
            try depths.appendNTimes(self.gpa, depth_unknown, index + 1 - depths.items.len);
        }
        try self.prepareEdges(lexer);
        var best: u16 = 0;
        const pairs = lexer.statePairs(state);
        self.cover_steps_left = cover_steps_max;
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (pairs[i] == lexer_mod.start_marker) continue;
            const char = if (pairs[i] < self.length_chars.len) self.length_chars[pairs[i]] else .nothing;
            const e: ExprId = @fromBackingInt(@intCast(pairs[i + 1]));
            const d = if (family == .lead_space)
                try self.leadSpaceDepth(lexer.exprs, e, char, pairs)
            else
                try self.exprDepth(lexer.exprs, e, family, char, pairs, expr_depth_max);
            best = @max(best, d);
            if (best == depth_unbounded) break;
        }
        depths.items[index] = best;
        return best;
    }

    /// The `lead_space` depth of one pair's term `e`: its strings are `no_space` strings, and
    /// a space followed by one. So `e` has depth min(d(e), 1 + d(e·' ')) with d the `no_space`
    /// depth, when d(e·' ') > 0 (then the space alone is alive: a string of one character
    /// after it is). The derivative's depth is taken without the state's other pairs (they
    /// would need deriving too), which only makes it smaller.
    fn leadSpaceDepth(self: *DepthCache, exprs: *ExprSet, e: ExprId, char: ExprId, pairs: []const u32) Error!u16 {
        const d = try self.exprDepth(exprs, e, .no_space, char, pairs, expr_depth_max);
        if (d == 0) return 0;
        const after = try exprs.deriv(e, ' ');
        const d_after = try self.exprDepth(exprs, after, .no_space, char, &.{}, expr_depth_max);
        if (d_after == 0) return 0;
        const with_space: u16 = if (d_after >= depth_finite_max) d_after else d_after + 1;
        return @min(d, with_space);
    }

    fn exprDepth(self: *DepthCache, exprs: *ExprSet, e: ExprId, family: Family, char: ExprId, pairs: []const u32, levels: u32) Error!u16 {
        if (levels == 0) return 0;
        const args = exprs.args(e);
        switch (exprs.tag(e)) {
            .repeat => {
                const max = args[2]; // read before `covers` may grow the arena
                if (!try self.covers(exprs, @fromBackingInt(@intCast(args[0])), family)) return 0;
                return if (max == regex.repeat_unbounded) depth_unbounded else @intCast(@min(max, depth_finite_max));
            },
            .concat => {
                const head: ExprId = @fromBackingInt(@intCast(args[0]));
                const tail: ExprId = @fromBackingInt(@intCast(args[1]));
                // A boolean tail may denote ∅, which would leave the head no completion.
                const by_head = if (exprs.isBoolean(tail)) 0 else try self.exprDepth(exprs, head, family, char, pairs, levels - 1);
                if (by_head == depth_unbounded or !exprs.nullable(head)) return by_head;
                // ε in h: h t holds every word of t (after a word-count pattern's space,
                // `\s* (\S+\s+){0,k} \S+"`).
                return @max(by_head, try self.exprDepth(exprs, tail, family, char, pairs, levels - 1));
            },
            .alt => {
                var best: u16 = 0;
                var i: usize = 0;
                // Re-read the members each time: `covers` may grow the arena.
                while (i < exprs.args(e).len) : (i += 1) {
                    best = @max(best, try self.exprDepth(exprs, @fromBackingInt(@intCast(exprs.args(e)[i])), family, char, pairs, levels - 1));
                    if (best == depth_unbounded) break;
                }
                return best;
            },
            .and_ => {
                // A & ~E1 & ~E2 …: with every Ei finite, unbounded when A is. `~ε` (how a
                // nullable lexeme keeps its non-empty part) excludes nothing a token can reach.
                // An infinite Ei counts as finite when the state's other pairs hold all but
                // finitely many of A's words in it (`exclusionHeld`): the state stays alive.
                var positive: ?ExprId = null;
                var excludes_finite = false;
                for (args) |raw| {
                    const m: ExprId = @fromBackingInt(@intCast(raw));
                    if (exprs.tag(m) == .not_) continue;
                    if (positive != null) return self.lengthDepth(exprs, e, family, char, pairs, levels);
                    positive = m;
                }
                for (args) |raw| {
                    const m: ExprId = @fromBackingInt(@intCast(raw));
                    if (exprs.tag(m) != .not_) continue;
                    const excluded: ExprId = @fromBackingInt(@intCast(exprs.args(m)[0]));
                    if (excluded == .epsilon) continue;
                    if (!try self.exclusionHeld(exprs, positive orelse return 0, excluded, pairs)) return 0;
                    excludes_finite = true;
                }
                const a = positive orelse return 0;
                const d = try self.exprDepth(exprs, a, family, char, pairs, levels - 1);
                if (!excludes_finite) return d;
                return if (d == depth_unbounded) depth_unbounded else 0;
            },
            else => return 0,
        }
    }

    /// The depth of a marked JSON string's `P·v ∩ Y` (`Lexeme.string_length`; `char` its C)
    /// where the length bound Y = `C{0,m} "` is within reach of a token, so the clamp keeps it
    /// (docs/lexer.md, "Clamped states"): min(d(P·v), m − mm(P·v)), mm being
    /// `ExprSet.completionMax`. A string w of the family of at most that many bytes keeps P·v
    /// alive, and P·v·w has a completion u of at most mm bytes; P spells only JSON strings and
    /// v ends between characters (Y has no prefix before its counter), so w·u is C characters
    /// then `"`, at most d + mm ≤ m of them: a word of Y too. Either member may be taken for Y
    /// (both spell JSON strings from v on), so both are tried. Needs a lower bound a ≤ 1 (w is
    /// not empty, so w·u has a character: `minLength: 1` at a string's start), or P·v's bodies
    /// all going on with any characters (`endsOpen`), which pad w·u up to a ≤ m; 0
    /// otherwise, and for any other intersection of two positive terms.
    fn lengthDepth(self: *DepthCache, exprs: *ExprSet, e: ExprId, family: Family, char: ExprId, pairs: []const u32, levels: u32) Error!u16 {
        if (char == .nothing or exprs.args(e).len != 2) return 0;
        const quote = try exprs.byte('"');
        const members = [2]ExprId{ @fromBackingInt(@intCast(exprs.args(e)[0])), @fromBackingInt(@intCast(exprs.args(e)[1])) };
        var best: u16 = 0;
        for (0..2) |i| {
            const bound = exprs.lengthShape(members[i], char, quote) orelse continue;
            if (bound.prefix_len != 0) continue;
            const pattern = members[1 - i];
            if (exprs.isBoolean(pattern)) continue;
            // Characters still required (`minLength` not reached): a string that keeps the
            // pattern alive may have no completion long enough (`.{0,8}|x{30}` after `bbbb`
            // under `minLength: 10`), unless every body of the pattern goes on with any
            // characters (`\d+-[0-9a-f]{24}` unanchored: `…[0-9a-f]{24}C*"`), which pad a
            // completion up to the minimum (at most the maximum: padding stops there).
            if (bound.count_min > 1 and !try self.endsOpen(exprs, pattern, char, quote, 0)) continue;
            const mm = exprs.completionMax(pattern);
            const room: u32 = if (bound.count_max == regex.repeat_unbounded) depth_finite_max else bound.count_max;
            if (room <= mm) continue;
            const d = try self.exprDepth(exprs, pattern, family, char, pairs, levels - 1);
            best = @max(best, @min(d, @as(u16, @intCast(@min(room - mm, depth_finite_max)))));
        }
        return best;
    }

    /// Does every word of `e` stay a word of `e` with any characters (`char`) added at its
    /// end, or, with `quote` (`e` a JSON string's rest), put before its closing quote? Every
    /// branch then ends in `Y*` with `char` ⊆ Y (before the quote): `h t` when t does (a
    /// nullable t is then `char`-closed too), an alternation when every member does.
    /// Conservative: anything else is no.
    fn endsOpen(self: *DepthCache, exprs: *const ExprSet, e: ExprId, char: ExprId, quote: ?ExprId, depth: u32) Error!bool {
        if (depth > expr_depth_max) return false;
        const args = exprs.args(e); // (`included` only reads the arena)
        switch (exprs.tag(e)) {
            .repeat => return quote == null and args[2] == regex.repeat_unbounded and try self.included(exprs, char, @fromBackingInt(@intCast(args[0]))),
            .concat => {
                const tail: ExprId = @fromBackingInt(@intCast(args[1]));
                if (quote != null and tail == quote.?) return self.endsOpen(exprs, @fromBackingInt(@intCast(args[0])), char, null, depth + 1);
                return self.endsOpen(exprs, tail, char, quote, depth + 1);
            },
            .alt => {
                for (args) |m| {
                    if (!try self.endsOpen(exprs, @fromBackingInt(@intCast(m)), char, quote, depth + 1)) return false;
                }
                return true;
            },
            else => return false,
        }
    }

    /// Do the state's pairs (`pairs`, its (lexeme, expression) list) hold all words of
    /// `a ∩ excluded` but finitely many? Then the pair `a & ~excluded` loses only finitely many
    /// of a's words as far as the state's liveness goes: a text string that leads a's words into
    /// `excluded` keeps another pair alive. This is how JSON Schema key regions partition the
    /// keys: "any other key" is `"C*" & ~("x-C*" | names)` beside the pattern's own region
    /// `"x-C*" & ~names`, and at a key's start only the two together allow every text token
    /// (JsonSchemaStore---clang-format: a 2 ms walk at every key, no slice).
    ///
    /// Shown by cells: the infinite members X1 … Xn of `excluded` (its *atoms*; finite members
    /// need nothing) split a's words in it by the set S of atoms each is in. For every
    /// non-empty S some pair p must hold the cell: each positive member of p is a member of a
    /// itself or includes some Xi with i in S (`ExprSet.includes`), and each member of each
    /// exclusion of p is finite or included in some Xk with k not in S, so a word of the cell
    /// is in p or in a finite set. A cell with some Xi (i in S) included in some Xk (k not in
    /// S) is empty and needs no pair. Regions of keys under several patterns are the cells of
    /// the front-end's pattern subsets. At most `cover_atoms_max` atoms and `cover_steps_max`
    /// inclusion tests per state; running out answers "not shown", which only costs the slice.
    fn exclusionHeld(self: *DepthCache, exprs: *ExprSet, a: ExprId, excluded: ExprId, pairs: []const u32) Error!bool {
        // Nothing below grows the term arena (`isFinite` and `includes` only read it), so
        // argument slices stay valid.
        var atoms_buffer: [cover_atoms_max]ExprId = undefined;
        var n: usize = 0;
        const members: []const u32 = if (exprs.tag(excluded) == .alt) exprs.args(excluded) else &.{excluded.index()};
        for (members) |raw| {
            const x: ExprId = @fromBackingInt(@intCast(raw));
            if (try self.isFinite(exprs, x)) continue;
            if (n == cover_atoms_max) return false;
            atoms_buffer[n] = x;
            n += 1;
        }
        const atoms = atoms_buffer[0..n];
        const cell_count = @as(u32, 1) << @intCast(n);
        // Cells (bit sets over the atoms) shown empty, then those held by a pair: one bit per
        // cell, 2^6 = 64 at most.
        var done: u64 = 1; // the empty set is no cell
        for (atoms, 0..) |xi, i| for (atoms, 0..) |xk, k| {
            if (i == k) continue;
            // Xi ⊆ Xk: no word is in Xi but not in Xk. Xi, Xk disjoint: none is in both.
            const within = try self.included(exprs, xi, xk);
            const apart = i < k and disjoint(exprs, xi, xk, disjoint_depth_max);
            if (!within and !apart) continue;
            for (1..cell_count) |cell| {
                const has_i = cell >> @intCast(i) & 1 == 1;
                const has_k = cell >> @intCast(k) & 1 == 1;
                if (has_i and ((within and !has_k) or (apart and has_k))) done |= @as(u64, 1) << @intCast(cell);
            }
        };
        var j: usize = 0;
        while (j < pairs.len) : (j += 2) {
            if (pairs[j] == lexer_mod.start_marker) continue;
            done |= try self.cellsHeldBy(exprs, @fromBackingInt(@intCast(pairs[j + 1])), a, atoms);
            if (done | ~cellMask(cell_count) == ~@as(u64, 0)) return true;
        }
        return false;
    }

    /// All cells, as the `done` bits of `exclusionHeld`.
    fn cellMask(cell_count: u32) u64 {
        return if (cell_count == 64) ~@as(u64, 0) else (@as(u64, 1) << @intCast(cell_count)) - 1;
    }

    /// The cells (bit sets over `atoms`) whose words of `a` pair expression `p` holds but
    /// finitely many (see `exclusionHeld`), as one bit per cell. Each positive member of p other
    /// than a needs an atom of the cell within it (`inside`), each infinite part of each
    /// exclusion of p an atom outside the cell holding it (`outside`).
    fn cellsHeldBy(self: *DepthCache, exprs: *ExprSet, p: ExprId, a: ExprId, atoms: []const ExprId) Error!u64 {
        var inside: [8]u32 = undefined;
        var inside_count: usize = 0;
        var outside: [8]u32 = undefined;
        var outside_count: usize = 0;
        const members: []const u32 = if (exprs.tag(p) == .and_) exprs.args(p) else &.{p.index()};
        for (members) |raw| {
            const m: ExprId = @fromBackingInt(@intCast(raw));
            if (exprs.tag(m) == .not_) {
                const f: ExprId = @fromBackingInt(@intCast(exprs.args(m)[0]));
                const parts: []const u32 = if (exprs.tag(f) == .alt) exprs.args(f) else &.{f.index()};
                for (parts) |part_raw| {
                    const part: ExprId = @fromBackingInt(@intCast(part_raw));
                    if (try self.isFinite(exprs, part)) continue;
                    var holders: u32 = 0;
                    for (atoms, 0..) |xk, k| {
                        if (try self.included(exprs, part, xk)) holders |= @as(u32, 1) << @intCast(k);
                    }
                    if (holders == 0 or outside_count == outside.len) return 0;
                    outside[outside_count] = holders;
                    outside_count += 1;
                }
                continue;
            }
            if (m == a) continue;
            if (exprs.isBoolean(m)) return 0;
            var within: u32 = 0;
            for (atoms, 0..) |xi, i| {
                if (try self.included(exprs, xi, m)) within |= @as(u32, 1) << @intCast(i);
            }
            if (within == 0 or inside_count == inside.len) return 0;
            inside[inside_count] = within;
            inside_count += 1;
        }
        var held: u64 = 0;
        for (1..@as(u32, 1) << @intCast(atoms.len)) |cell| {
            const c: u32 = @intCast(cell);
            const ok = for (inside[0..inside_count]) |w| {
                if (w & c == 0) break false;
            } else for (outside[0..outside_count]) |h| {
                if (h & ~c == 0) break false;
            } else true;
            if (ok) held |= @as(u64, 1) << @intCast(cell);
        }
        return held;
    }

    /// Do plain terms `x` and `y` share no word? Shown by their first bytes, stepping through
    /// common single-set heads up to `depth` times (`x-C*"` and `x_C*"`, the rests of keys
    /// under `^x-` and `^x_`); false means "not shown".
    fn disjoint(exprs: *const ExprSet, x: ExprId, y: ExprId, depth: u32) bool {
        if (exprs.nullable(x) and exprs.nullable(y)) return false;
        const fx = firstBytes(exprs, x, disjoint_depth_max) orelse return false;
        const fy = firstBytes(exprs, y, disjoint_depth_max) orelse return false;
        const meet = for (fx.bits, fy.bits) |a, b| {
            if (a & b != 0) break true;
        } else false;
        if (!meet) return true;
        if (depth == 0 or exprs.tag(x) != .concat or exprs.tag(y) != .concat) return false;
        const hx: ExprId = @fromBackingInt(@intCast(exprs.args(x)[0]));
        const hy: ExprId = @fromBackingInt(@intCast(exprs.args(y)[0]));
        if (exprs.tag(hx) != .byte_set or exprs.tag(hy) != .byte_set) return false;
        // x = hx tx, y = hy ty with single bytes at the head: a common word needs one in both rests.
        return disjoint(exprs, @fromBackingInt(@intCast(exprs.args(x)[1])), @fromBackingInt(@intCast(exprs.args(y)[1])), depth - 1);
    }

    /// The bytes that start a word of plain `e` (a superset); null when not known within
    /// `depth` levels or for a term with an intersection or complement.
    fn firstBytes(exprs: *const ExprSet, e: ExprId, depth: u32) ?regex.ByteSet {
        if (depth == 0 or exprs.isBoolean(e)) return null;
        const args = exprs.args(e);
        switch (exprs.tag(e)) {
            .nothing, .epsilon => return .{},
            .byte_set => return exprs.byteSetOf(e),
            .repeat => return firstBytes(exprs, @fromBackingInt(@intCast(args[0])), depth - 1),
            .concat => {
                const head: ExprId = @fromBackingInt(@intCast(args[0]));
                var out = firstBytes(exprs, head, depth - 1) orelse return null;
                if (exprs.nullable(head)) out.unionWith(firstBytes(exprs, @fromBackingInt(@intCast(args[1])), depth - 1) orelse return null);
                return out;
            },
            .alt => {
                var out: regex.ByteSet = .{};
                for (args) |raw| out.unionWith(firstBytes(exprs, @fromBackingInt(@intCast(raw)), depth - 1) orelse return null);
                return out;
            },
            .and_, .not_ => return null,
            .digits_mod => {
                var digits: regex.ByteSet = .{};
                digits.addRange('0', '9');
                if (args[3] & regex.digits_mod_point != 0) digits.add('.');
                return digits;
            },
        }
    }

    /// `ExprSet.includes` (x ⊆ y) within the state's remaining tests; false when they ran out.
    fn included(self: *DepthCache, exprs: *const ExprSet, x: ExprId, y: ExprId) Error!bool {
        if (x == y) return true;
        if (self.cover_steps_left == 0 or exprs.isBoolean(x) or exprs.isBoolean(y)) return false;
        self.cover_steps_left -= 1;
        var budget: u32 = cover_include_budget;
        return exprs.includes(x, y, &budget);
    }

    /// Does `e` denote a finite language (no unbounded repetition, no complement)? Post-order
    /// over the term with an explicit stack, remembered per sub-term: the derivatives of a list
    /// of names share their tails. A term needing more than `finite_visit_max` new visits
    /// counts as infinite.
    fn isFinite(self: *DepthCache, exprs: *const ExprSet, e: ExprId) Error!bool {
        if (self.finite_memo.get(e.index())) |hit| return hit;
        const Entry = struct { expr: ExprId, expanded: bool };
        var stack: std.ArrayList(Entry) = .empty;
        defer stack.deinit(self.gpa);
        try stack.append(self.gpa, .{ .expr = e, .expanded = false });
        var visits: u32 = 0;
        while (stack.pop()) |top| {
            const x = top.expr;
            if (self.finite_memo.contains(x.index())) continue;
            visits += 1;
            if (visits > finite_visit_max) return false;
            const args = exprs.args(x);
            const children: []const u32 = switch (exprs.tag(x)) {
                .nothing, .epsilon, .byte_set => &.{},
                .not_, .digits_mod => {
                    try self.finite_memo.put(self.gpa, x.index(), false);
                    continue;
                },
                .repeat => if (args[2] == regex.repeat_unbounded) {
                    try self.finite_memo.put(self.gpa, x.index(), false);
                    continue;
                } else args[0..1],
                .concat, .alt, .and_ => args,
            };
            if (!top.expanded) {
                try stack.append(self.gpa, .{ .expr = x, .expanded = true });
                for (children) |c| {
                    if (!self.finite_memo.contains(c)) try stack.append(self.gpa, .{ .expr = @fromBackingInt(@intCast(c)), .expanded = false });
                }
                continue;
            }
            // Children were finished before this second visit (the stack is last in, first out).
            var finite = true;
            for (children) |c| finite = finite and (self.finite_memo.get(c) orelse false);
            try self.finite_memo.put(self.gpa, x.index(), finite);
        }
        return self.finite_memo.get(e.index()) orelse false;
    }

    /// Does `x` match every character of the family (as a whole match)? Derivatives by one byte
    /// of each (byte class, automaton state) edge, at most four levels deep; remembered per
    /// expression.
    fn covers(self: *DepthCache, exprs: *ExprSet, x: ExprId, family: Family) Error!bool {
        const key = (@as(u64, x.index()) << 2) | @backingInt(family);
        if (self.covers_memo.get(key)) |hit| return hit;
        const result = if (exprs.isBoolean(x)) false else try self.coversUncached(exprs, x, &self.edges[@backingInt(family)]);
        try self.covers_memo.put(self.gpa, key, result);
        return result;
    }

    fn coversUncached(self: *DepthCache, exprs: *ExprSet, x: ExprId, edges: *const [text_state_count]std.ArrayList(Edge)) Error!bool {
        // Depth-first over (derivative, text state) pairs; the text automaton has no cycle
        // outside state 0, so the stack holds at most three levels of edges. Each pair is
        // expanded once: what is asked of a pair depends on nothing else. Without this the
        // search is a tree of up to (edges per state)^3 derivatives, since a grammar whose
        // byte classes split the continuation bytes finely reaches the same derivative by
        // many of them (Github_hard---o79409: 545,000 derivatives, 5 ms, for one string).
        const Entry = struct { expr: ExprId, state: u8 };
        var stack: std.ArrayList(Entry) = .empty;
        defer stack.deinit(self.gpa);
        var seen: regex.IntMap(u64, void) = .empty; // (std's Wyhash multiplies through __multi3 in wasm32)
        defer seen.deinit(self.gpa);
        try stack.append(self.gpa, .{ .expr = x, .state = 0 });
        while (stack.pop()) |top| {
            for (edges[top.state].items) |edge| {
                const d = try exprs.deriv(top.expr, edge.byte);
                if (edge.next == 0) {
                    if (!exprs.nullable(d)) return false;
                } else {
                    if (d == .nothing) return false;
                    if ((try seen.getOrPut(self.gpa, (@as(u64, d.index()) << 8) | edge.next)).found_existing) continue;
                    try stack.append(self.gpa, .{ .expr = d, .state = edge.next });
                }
            }
        }
        return true;
    }

    /// The family's bytes grouped by (lexer byte class, next automaton state): derivatives by
    /// one byte of a group stand for all of them.
    fn prepareEdges(self: *DepthCache, lexer: *const Lexer) Error!void {
        if (self.edges_ready) return;
        for (&self.edges, 0..) |*per_family, f| for (per_family, 0..) |*list, state| {
            const family: Family = @fromBackingInt(@intCast(f));
            if (family == .lead_space) continue; // its depths come from `no_space`'s
            const table = familyNext(family);
            var seen: [256][text_state_count]bool = @splat(@splat(false));
            for (0..256) |b| {
                const next = table[state][b];
                if (next == reject) continue;
                const class = lexer.class_of[b];
                if (seen[class][next]) continue;
                seen[class][next] = true;
                try list.append(self.gpa, .{ .byte = @intCast(b), .next = next });
            }
        };
        self.edges_ready = true;
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

test "word automaton: letters, digits and underscore" {
    try std.testing.expect(isIn(.word, "snake_case_42"));
    try std.testing.expect(!isIn(.word, "kebab-case"));
    try std.testing.expect(!isIn(.word, " word"));
    try std.testing.expect(!isIn(.word, "caf\xc3\xa9"));
}

test "text automaton: ASCII minus quote and backslash, UTF-8 scalar values, prefixes" {
    try std.testing.expect(isText("hello world"));
    try std.testing.expect(isText("caf\xc3\xa9"));
    try std.testing.expect(isText("caf\xc3")); // ends inside a character
    try std.testing.expect(isText("\xe2\x82\xac")); // €
    try std.testing.expect(isText("\xf0\x9f\x98\x80")); // 😀
    try std.testing.expect(!isText("a\"b"));
    try std.testing.expect(!isText("a\\n"));
    try std.testing.expect(!isText("a\nb"));
    try std.testing.expect(!isText("\x7f"));
    try std.testing.expect(!isText("\xa9")); // starts inside a character
    try std.testing.expect(!isText("\xc0\x80")); // overlong
    try std.testing.expect(!isText("\xed\xa0\x80")); // surrogate
    try std.testing.expect(!isText("\xf4\x90\x80\x80")); // above U+10FFFF
    try std.testing.expect(!isText("\xe0\x80")); // overlong three-byte form
}

const regex_syntax = @import("regex_syntax.zig");

fn depthOfPattern(pattern: []const u8, prefix: []const u8, family: Family) !u16 {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const e = try regex_syntax.parse(&exprs, pattern, .{}, &diag);
    var lexer = try Lexer.init(gpa, &exprs, &.{e}, .{});
    defer lexer.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    var s = try lexer.startState(null);
    for (prefix) |b| s = try lexer.next(s, b);
    return cache.depthOf(&lexer, s, family);
}

test "text depth of lexer states" {
    try std.testing.expectEqual(depth_unbounded, try depthOfPattern("[^\"]*\"", "", .text));
    try std.testing.expectEqual(depth_unbounded, try depthOfPattern("\"(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt])*\"", "\"ab", .text));
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("\"(?:[^\"\\\\\\x00-\\x1f])*\"", "", .text)); // a quote first
    try std.testing.expectEqual(@as(u16, 10), try depthOfPattern("\"[^\"\\\\\\x00-\\x1f]{0,12}\"", "\"ab", .text));
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("[a-z ]*", "", .text)); // not every text character
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("[^\"\\x80-\\x{10FFFF}]*", "", .text)); // ASCII only
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("[^\"]*\"", "\xc3", .text)); // inside a character
    // The word family: identifier-like classes.
    try std.testing.expectEqual(depth_unbounded, try depthOfPattern("[\\-0-9A-Z_a-z]+", "", .word));
    try std.testing.expectEqual(@as(u16, 254), try depthOfPattern("\"[\\-0-9A-Z_a-z]{1,255}\"", "\"a", .word));
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("\"[\\-0-9A-Z_a-z]{1,255}\"", "\"a", .text));
    try std.testing.expectEqual(@as(u16, 0), try depthOfPattern("[a-z0-9]+", "", .word)); // no capitals
    try std.testing.expectEqual(depth_unbounded, try depthOfPattern("[^\"]*\"", "", .word));
}

test "text depth of a string that must differ from listed names" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const string = try regex_syntax.parse(&exprs, "\"[^\"\\\\]*\"", .{}, &diag);
    // Many names: the finiteness check must not depend on how wide the alternation is.
    var names_pattern: std.ArrayList(u8) = .empty;
    defer names_pattern.deinit(gpa);
    try names_pattern.appendSlice(gpa, "\"(?:name|id");
    for (0..200) |i| try names_pattern.print(gpa, "|key{d}", .{i});
    try names_pattern.appendSlice(gpa, ")\"");
    const names = try regex_syntax.parse(&exprs, names_pattern.items, .{}, &diag);
    const key = try exprs.andAll(&.{ string, try exprs.not(names) });
    const bounded = try regex_syntax.parse(&exprs, "\"[^\"\\\\]{0,5}\"", .{}, &diag);
    const bounded_key = try exprs.andAll(&.{ bounded, try exprs.not(names) });
    var lexer = try Lexer.init(gpa, &exprs, &.{ key, bounded_key }, .{});
    defer lexer.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    const only_key = [_]bool{ true, false };
    const only_bounded = [_]bool{ false, true };
    const s = try lexer.next(try lexer.startState(&only_key), '"');
    try std.testing.expectEqual(depth_unbounded, try cache.depthOf(&lexer, s, .text));
    try std.testing.expectEqual(depth_unbounded, try cache.depthOf(&lexer, try lexer.next(s, 'n'), .text));
    try std.testing.expectEqual(depth_unbounded, try cache.depthOf(&lexer, try lexer.next(try lexer.next(s, 'k'), 'e'), .text));
    // Bounded text with exclusions: finitely many completions, so no structural answer.
    const b = try lexer.next(try lexer.startState(&only_bounded), '"');
    try std.testing.expectEqual(@as(u16, 0), try cache.depthOf(&lexer, b, .text));
}

test "text depth of a key whose exclusions other pairs of the state hold" {
    // JSON Schema key regions: listed names, a pattern region `"x-C*"` minus the names, and
    // "any other key" minus both. At the key's start (after `"`) no pair alone allows every
    // text string (`x-…` kills the last, `a…` the second), but together they do.
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const string = try regex_syntax.parse(&exprs, "\"[^\"\\\\]*\"", .{}, &diag);
    const names = try regex_syntax.parse(&exprs, "\"(?:name|x-id|version)\"", .{}, &diag);
    const pattern = try regex_syntax.parse(&exprs, "\"x-[^\"\\\\]*\"", .{}, &diag);
    const pattern_key = try exprs.andAll(&.{ pattern, try exprs.not(names) });
    const other_key = try exprs.andAll(&.{ string, try exprs.not(try exprs.alt(&.{ pattern, names })) });
    // The same without the pattern's region: the exclusion is then not held by any pair.
    const bounded = try regex_syntax.parse(&exprs, "\"x-[^\"\\\\]{0,3}\"", .{}, &diag);
    const bounded_key = try exprs.andAll(&.{ bounded, try exprs.not(names) });
    var lexer = try Lexer.init(gpa, &exprs, &.{ names, pattern_key, other_key, bounded_key }, .{});
    defer lexer.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    const all = [_]bool{ true, true, true, false };
    const s = try lexer.next(try lexer.startState(&all), '"');
    try std.testing.expectEqual(depth_unbounded, try cache.depthOf(&lexer, s, .text));
    try std.testing.expectEqual(depth_unbounded, try cache.depthOf(&lexer, try lexer.next(s, 'x'), .text));
    // Without the pattern's region, a text string `x-…` kills the state: no depth.
    const no_pattern = [_]bool{ true, false, true, false };
    const t = try lexer.next(try lexer.startState(&no_pattern), '"');
    try std.testing.expectEqual(@as(u16, 0), try cache.depthOf(&lexer, t, .text));
    // A region that holds only part of the excluded pattern (bounded) does not cover it.
    const part = [_]bool{ true, false, true, true };
    const u = try lexer.next(try lexer.startState(&part), '"');
    try std.testing.expectEqual(@as(u16, 0), try cache.depthOf(&lexer, u, .text));
}

test "text depth of a key beside several pattern regions: every cell held, or empty" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const string = try regex_syntax.parse(&exprs, "\"[^\"\\\\]*\"", .{}, &diag);
    const names = try regex_syntax.parse(&exprs, "\"(?:name|version)\"", .{}, &diag);
    const x = try regex_syntax.parse(&exprs, "\"x-[^\"\\\\]*\"", .{}, &diag);
    const under = try regex_syntax.parse(&exprs, "\"x_[^\"\\\\]*\"", .{}, &diag); // disjoint from x
    const search = try regex_syntax.parse(&exprs, "\"[^\"\\\\]*y[^\"\\\\]*\"", .{}, &diag); // meets x
    const not_names = try exprs.not(names);
    // Regions as the front-end builds them: one per set of patterns a key matches.
    const x_only_d = try exprs.andAll(&.{ x, not_names, try exprs.not(under) });
    const under_only = try exprs.andAll(&.{ under, not_names, try exprs.not(x) });
    const other_d = try exprs.andAll(&.{ string, try exprs.not(try exprs.alt(&.{ x, under, names })) });
    const x_only_s = try exprs.andAll(&.{ x, not_names, try exprs.not(search) });
    const search_only = try exprs.andAll(&.{ search, not_names, try exprs.not(x) });
    const both = try exprs.andAll(&.{ x, search, not_names });
    const other_s = try exprs.andAll(&.{ string, try exprs.not(try exprs.alt(&.{ x, search, names })) });
    var lexer = try Lexer.init(gpa, &exprs, &.{ names, x_only_d, under_only, other_d, x_only_s, search_only, both, other_s }, .{});
    defer lexer.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    const Case = struct { allowed: [8]bool, depth: u16 };
    const cases = [_]Case{
        // Disjoint patterns: the cell of keys under both is empty, the two others held.
        .{ .allowed = .{ true, true, true, true, false, false, false, false }, .depth = depth_unbounded },
        .{ .allowed = .{ true, false, true, true, false, false, false, false }, .depth = 0 },
        // Overlapping patterns: all three cells held, and without the region of both, not.
        .{ .allowed = .{ true, false, false, false, true, true, true, true }, .depth = depth_unbounded },
        .{ .allowed = .{ true, false, false, false, true, true, false, true }, .depth = 0 },
    };
    for (cases) |case| {
        const s = try lexer.next(try lexer.startState(&case.allowed), '"');
        try std.testing.expectEqual(case.depth, try cache.depthOf(&lexer, s, .text));
    }
}

test "covers: each (derivative, automaton state) pair once, the same answer as every character" {
    // The oracle: X covers the text family exactly when it matches every text character
    // (every Unicode scalar value's UTF-8 bytes, ASCII controls, `"` and `\` aside), each
    // derived byte by byte. The lexer's byte classes split the continuation bytes finely, so
    // the search reaches the same derivative by many bytes; the fourth class also reaches one
    // derivative at two automaton states (after F0 and after F1-F3, which allow different
    // second bytes), where only one of them fails.
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    const patterns = [_][]const u8{
        "[^\"\\\\\\x00-\\x1f]",
        ".",
        "[\\x00-\\x{D7FF}\\x{E000}-\\x{10FFFF}]",
        "[\\x00-\\x{3FFFF}\\x{50000}-\\x{10FFFF}]",
        "[^\\x{800}]",
        "[^\\x{10FFFF}]",
        "[^\\x{E000}-\\x{E0FF}]",
        "[^\\x{7F}-\\x{9F}]",
        "[0-9A-Z_a-z]",
        ecma_non_space,
        "[^ \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]", // U+FEFF left in
        "[^ \\x{A0}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}]", // U+1680 left in
        "[^ ]",
    };
    var terms: [patterns.len]ExprId = undefined;
    for (patterns, 0..) |p, i| terms[i] = try regex_syntax.parse(&exprs, p, .{}, &diag);
    // Fine byte classes: every other continuation byte after C2, E1 80 and F1 80 80.
    var fine: std.ArrayList(u8) = .empty;
    defer fine.deinit(gpa);
    try fine.appendSlice(gpa, "[");
    var c: u21 = 0x80;
    while (c < 0xC0) : (c += 2) try fine.print(gpa, "\\x{{{X}}}\\x{{{X}}}\\x{{{X}}}", .{ c, 0x1000 + (c - 0x80), 0x40000 + (c - 0x80) });
    try fine.appendSlice(gpa, "]");
    var lexemes: [patterns.len + 1]ExprId = undefined;
    @memcpy(lexemes[0..patterns.len], &terms);
    lexemes[patterns.len] = try regex_syntax.parse(&exprs, fine.items, .{}, &diag);
    var lexer = try Lexer.init(gpa, &exprs, &lexemes, .{});
    defer lexer.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    try cache.prepareEdges(&lexer);
    for (terms, patterns) |x, p| {
        var every_text = true;
        var cp: u21 = 0x20;
        while (cp <= 0x10FFFF and every_text) : (cp += 1) {
            if (cp == '"' or cp == '\\' or cp == 0x7F or (cp >= 0xD800 and cp <= 0xDFFF)) continue;
            var bytes: [4]u8 = undefined;
            const n = std.unicode.utf8Encode(cp, &bytes) catch unreachable;
            var d = x;
            for (bytes[0..n]) |b| d = try exprs.deriv(d, b);
            every_text = exprs.nullable(d);
        }
        var every_no_space = true;
        cp = 0x20;
        while (cp <= 0x10FFFF and every_no_space) : (cp += 1) {
            if (cp == '"' or cp == '\\' or cp == 0x7F or (cp >= 0xD800 and cp <= 0xDFFF) or isEcmaSpace(cp)) continue;
            var bytes: [4]u8 = undefined;
            const n = std.unicode.utf8Encode(cp, &bytes) catch unreachable;
            var d = x;
            for (bytes[0..n]) |b| d = try exprs.deriv(d, b);
            every_no_space = exprs.nullable(d);
        }
        std.testing.expectEqual(every_no_space, try cache.covers(&exprs, x, .no_space)) catch |err| {
            std.debug.print("no_space family, pattern {s}\n", .{p});
            return err;
        };
        var every_word = true;
        for (0..256) |b| {
            if (!isIn(.word, &.{@intCast(b)})) continue;
            if (!exprs.nullable(try exprs.deriv(x, @intCast(b)))) every_word = false;
        }
        std.testing.expectEqual(every_text, try cache.covers(&exprs, x, .text)) catch |err| {
            std.debug.print("text family, pattern {s}\n", .{p});
            return err;
        };
        std.testing.expectEqual(every_word, try cache.covers(&exprs, x, .word)) catch |err| {
            std.debug.print("word family, pattern {s}\n", .{p});
            return err;
        };
    }
}

/// ECMA-262's `\s` outside ASCII controls: the oracle of the `no_space` tests.
fn isEcmaSpace(cp: u21) bool {
    return switch (cp) {
        ' ', 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF => true,
        else => false,
    };
}

/// The JSON Schema front-end's ECMA `\S` (json_schema/strings.py), quote and backslash aside.
const ecma_non_space = "[^\\t-\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}\"\\\\]";

test "no_space and lead_space membership: every character, and a leading space" {
    var cp: u21 = 0;
    while (cp <= 0x10FFFF) : (cp += 1) {
        if (cp >= 0xD800 and cp <= 0xDFFF) continue;
        var bytes: [5]u8 = undefined;
        const n = std.unicode.utf8Encode(cp, bytes[1..]) catch unreachable;
        const char = bytes[1 .. 1 + n];
        const text = cp >= 0x20 and cp != '"' and cp != '\\' and cp != 0x7F;
        try std.testing.expectEqual(text, isIn(.text, char));
        try std.testing.expectEqual(text and !isEcmaSpace(cp), isIn(.no_space, char));
        bytes[0] = ' ';
        try std.testing.expectEqual(text and !isEcmaSpace(cp), isIn(.lead_space, bytes[0 .. 1 + n]));
        try std.testing.expectEqual(text and (!isEcmaSpace(cp) or cp == ' '), isIn(.lead_space, char));
    }
    try std.testing.expect(isIn(.lead_space, " ab"));
    try std.testing.expect(!isIn(.lead_space, "a b"));
    try std.testing.expect(!isIn(.lead_space, "  b"));
    try std.testing.expect(isIn(.lead_space, " \xe2\x80")); // ends inside a character
}

test "strings near their bound beside a pattern: loops of single characters, and alternations they hold" {
    const gpa = std.testing.allocator;
    var exprs = try ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var cache = DepthCache.init(gpa);
    defer cache.deinit();
    var diag: regex_syntax.Diagnostic = .{};
    // Characters a, b and c (C), three of them left: the bound `C{0,3}"`.
    var abc: regex.ByteSet = .{};
    for ("abc") |b| abc.add(b);
    const char = try exprs.byteSet(abc);
    const quote = try exprs.byte('"');
    const k = 3;
    const bound = try exprs.concatAll(&.{ try exprs.repeat(char, 0, k), quote });
    // `taken`: the intersection takes the short-text rule (a text string keeps it alive exactly
    // when the pattern side allows it and it has at most k characters); `wrong`: that rule
    // would answer wrongly for some string, so it must not be taken.
    const Case = struct { pattern: []const u8, taken: bool, wrong: bool = false };
    const cases = [_]Case{
        .{ .pattern = "[ab]*\"", .taken = true },
        .{ .pattern = "[ab]*\"|c*\"", .taken = true },
        .{ .pattern = "[ab]*\"|a*b\"", .taken = true }, // a member inside the loop
        .{ .pattern = "a*[ab]*\"", .taken = true }, // a head inside the loop
        .{ .pattern = "[ab]*\"|cccccc\"", .taken = false, .wrong = true }, // `c` needs six characters
        .{ .pattern = "[ab]*\"|c{6,}\"", .taken = false, .wrong = true }, // a loop needing more than k
        .{ .pattern = "(?:ab)*\"", .taken = false, .wrong = true }, // two characters a copy: `aba`
        .{ .pattern = "c?[ab]*\"", .taken = false }, // a head outside the loop (refused, though harmless here)
    };
    const representatives = "abc\"x";
    const Viable = struct {
        fn of(set: *ExprSet, e: ExprId, w: []const u8) !bool {
            var d = e;
            for (w) |b| d = try set.deriv(d, b);
            return !try set.isEmpty(d, representatives);
        }
    };
    var word: [4]u8 = undefined;
    for (cases) |case| {
        const pattern = try regex_syntax.parse(&exprs, case.pattern, .{}, &diag);
        const e = try exprs.andAll(&.{ pattern, bound });
        const answer = try cache.shortIntersection(&exprs, e, char, quote);
        std.testing.expectEqual(case.taken, answer != null) catch |err| {
            std.debug.print("pattern {s}\n", .{case.pattern});
            return err;
        };
        if (answer) |a| try std.testing.expectEqual(@as(u32, k), a.chars);
        // Every string over {a, b, c} of up to 4 characters: the rule against the intersection.
        var disagreements: u32 = 0;
        for (0..word.len + 1) |len| {
            var n: usize = 0;
            const count = std.math.pow(usize, 3, len);
            while (n < count) : (n += 1) {
                var v = n;
                for (word[0..len]) |*b| {
                    b.* = "abc"[v % 3];
                    v /= 3;
                }
                const w = word[0..len];
                const rule = w.len <= k and try Viable.of(&exprs, pattern, w);
                if (rule != try Viable.of(&exprs, e, w)) disagreements += 1;
            }
        }
        if (case.taken) try std.testing.expectEqual(@as(u32, 0), disagreements);
        if (case.wrong) try std.testing.expect(disagreements > 0);
    }
}
