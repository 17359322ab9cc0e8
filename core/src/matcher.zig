//! Tokenizers, compiled grammars and matchers: the objects behind the ABI handles.
//!
//! Ownership and lifetimes:
//! - `Tokenizer` holds the token bytes, the trie and the slices (`slicer.zig`); immutable after
//!   creation but for the open slices free text builds on first use, shared by every matcher
//!   over it (reference counted, so freeing a handle never leaves a matcher dangling).
//! - `Grammar` holds a compiled grammar IR (`earley.Cfg`, read by `ir_reader.zig`), its
//!   expression set, the lazy lexer DFA, and the caches masks read (`slicer.DepthCache`,
//!   `WalkCache`). The DFA cache grows as matchers walk it, within the grammar's limits; all
//!   matchers of a grammar share it (the module is single threaded: no lock needed). A plain
//!   regex is the grammar `S → L` over one lexeme, so there is one code path.
//! - `Matcher` holds one decoding position: its Earley parser (rows), the position (lexer
//!   state, row) after each consumed token — rollback is a truncation — whether EOS was
//!   consumed, a sticky failure once a limit was hit, and its last mask (`mask_key`).
//!
//! A token is allowed when the lexer and parser survive all of its bytes: the output can still
//! be completed after it. EOS ids are allowed exactly when the output may end here; consuming
//! EOS stops the matcher. Special tokens are allowed where a special lexeme is; unused ids never.

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const lexer_mod = @import("lexer.zig");
const trie_mod = @import("trie.zig");
const earley = @import("earley.zig");
const ir_reader = @import("ir_reader.zig");
const PatternCache = @import("pattern_cache.zig").PatternCache;
const slicer = @import("slicer.zig");
const Position = earley.Position;
const Lexer = lexer_mod.Lexer;
const StateId = lexer_mod.StateId;
const Trie = trie_mod.Trie;
const Node = trie_mod.Node;
const TokenKind = trie_mod.TokenKind;
const TokenId = trie_mod.TokenId;

/// Every limit of a grammar and its matchers; docs/limits.md has what each bounds and what it
/// costs at its default. Each is reported as its own `limits.Kind` when hit.
pub const Limits = struct {
    /// Derivative, construction and lexer-table work allowed for compiling a grammar and for a
    /// matcher's first row, in fuel units (`regex.zig`; 10–40 ns each).
    fuel_compile_max: u64 = 8_000_000,
    /// The same work allowed in one call (a mask, a consume, forced bytes, a healing
    /// question): 5–7.5 ms of derivative work in wasmtime at the default (17–25 ns a unit),
    /// 2× what MaskBench's heaviest call needs (docs/limits.md).
    fuel_step_max: u64 = 300_000,
    state_count_max: u32 = 100_000,
    expr_count_max: u32 = 2_000_000,
    /// Tokens a matcher may hold in its history (rollback depth and memory bound).
    token_history_max: u32 = 1_000_000,
    /// Earley items in one parser row (`earley.Limits`).
    row_item_count_max: u32 = (earley.Limits{}).row_item_count_max,
    /// Parser work in one call (`earley.Limits`): about 1 ms at the default on an ambiguous
    /// Lark grammar, 3–6 ms on fuzzed ambiguous GBNF; MaskBench's heaviest call needs 18,000.
    step_item_count_max: u32 = (earley.Limits{}).step_item_count_max,
};

/// Bytes one healing call (`healPosition`, and the tokenizer's) or text validation may be
/// given. Healing asks about offsets within a token's length of the end
/// (`trie_mod.token_length_max`) and only steps the parser over the bytes before them, so a
/// call is linear in its input; this bound (the host's forced-bytes buffer, 1 MiB) keeps it
/// near 10 ms. 10 MB of forced bytes took 5 s when every offset was looked up in the trie.
pub const input_bytes_max: u32 = 1 << 20;

pub const Error = error{ OutOfMemory, LimitExceeded };

var tokenizer_serial: u32 = 0;

pub const Tokenizer = struct {
    ref_count: u32 = 1,
    /// Distinct for every tokenizer this instance creates: grammars key their walk caches by
    /// it (an address may be reused after a tokenizer is freed; a serial is not).
    serial: u32 = 0,
    blob: []u8,
    offsets: []u32,
    kinds: []TokenKind,
    eos_ids: []TokenId,
    trie: Trie,
    /// Text tokens as precomputed masks, each with the trie of the other tokens (`slicer.zig`).
    slices: slicer.Slices,
    /// The open slices (`slicer.OpenSlices`), built as free text asks for them: the one
    /// part of a tokenizer that changes after it is made (a core instance is
    /// single-threaded). Shared with the tokenizers made `withEos`.
    open_slices: *slicer.OpenSlices,
    /// The tokenizer whose tables (`blob`, `offsets`, `kinds`, `trie`, `slices`) this one
    /// shares, holding a reference to it (`withEos`); null when it owns them.
    base: ?*Tokenizer = null,

    pub const InitError = trie_mod.Error || error{InvalidEos};

    pub fn create(
        gpa: Allocator,
        blob: []const u8,
        offsets: []const u32,
        kinds_raw: []const u8,
        eos_ids: []const TokenId,
    ) InitError!*Tokenizer {
        for (kinds_raw) |k| if (k > @backingInt(TokenKind.unused)) return error.InvalidTokens;
        const kinds: []const TokenKind = @ptrCast(kinds_raw);
        for (eos_ids) |id| if (id.index() >= kinds.len) return error.InvalidEos;
        var trie = try Trie.build(gpa, blob, offsets, kinds);
        errdefer trie.deinit(gpa);
        var slices = try slicer.Slices.build(gpa, &trie, blob, offsets, kinds);
        errdefer slices.deinit(gpa);
        const self = try gpa.create(Tokenizer);
        errdefer gpa.destroy(self);
        const blob_copy = try gpa.dupe(u8, blob);
        errdefer gpa.free(blob_copy);
        const offsets_copy = try gpa.dupe(u32, offsets);
        errdefer gpa.free(offsets_copy);
        const kinds_copy = try gpa.dupe(TokenKind, kinds);
        errdefer gpa.free(kinds_copy);
        const eos_copy = try gpa.dupe(TokenId, eos_ids);
        errdefer gpa.free(eos_copy);
        const open_slices = try gpa.create(slicer.OpenSlices);
        open_slices.* = .{};
        tokenizer_serial +%= 1;
        self.* = .{
            .serial = tokenizer_serial,
            .blob = blob_copy,
            .offsets = offsets_copy,
            .kinds = kinds_copy,
            .eos_ids = eos_copy,
            .trie = trie,
            .slices = slices,
            .open_slices = open_slices,
        };
        return self;
    }

    /// The same vocabulary with other EOS ids (a request's stop tokens), sharing `base`'s tables
    /// instead of building them again (~0.1 s and ~10-20 MB for 128k tokens). The trie holds
    /// text tokens only and EOS ids are applied after the walk (`Matcher.fillMask`), so the two
    /// walk alike: the serial, which keys a grammar's walk cache, is shared too.
    pub fn withEos(gpa: Allocator, base: *Tokenizer, eos_ids: []const TokenId) error{ OutOfMemory, InvalidEos }!*Tokenizer {
        for (eos_ids) |id| if (id.index() >= base.kinds.len) return error.InvalidEos;
        const owner = base.base orelse base;
        const self = try gpa.create(Tokenizer);
        errdefer gpa.destroy(self);
        const eos_copy = try gpa.dupe(TokenId, eos_ids);
        owner.ref_count += 1;
        self.* = owner.*;
        self.ref_count = 1;
        self.eos_ids = eos_copy;
        self.base = owner;
        return self;
    }

    pub fn release(self: *Tokenizer, gpa: Allocator) void {
        assert(self.ref_count > 0);
        self.ref_count -= 1;
        if (self.ref_count > 0) return;
        if (self.base) |owner| {
            gpa.free(self.eos_ids);
            gpa.destroy(self);
            owner.release(gpa);
            return;
        }
        gpa.free(self.blob);
        gpa.free(self.offsets);
        gpa.free(self.kinds);
        gpa.free(self.eos_ids);
        self.trie.deinit(gpa);
        self.slices.deinit(gpa);
        self.open_slices.deinit(gpa);
        gpa.destroy(self.open_slices);
        gpa.destroy(self);
    }

    pub fn vocabSize(self: *const Tokenizer) u32 {
        return @intCast(self.kinds.len);
    }

    pub fn tokenBytes(self: *const Tokenizer, id: TokenId) []const u8 {
        return self.blob[self.offsets[id.index()]..self.offsets[id.index() + 1]];
    }

    pub fn isEos(self: *const Tokenizer, id: TokenId) bool {
        return std.mem.indexOfScalar(TokenId, self.eos_ids, id) != null;
    }

    /// A special token a special lexeme may match: kind `.special`, in the vocabulary, not EOS.
    pub fn isSpecialNotEos(self: *const Tokenizer, id: TokenId) bool {
        return id.index() < self.kinds.len and self.kinds[id.index()] == .special and !self.isEos(id);
    }

    /// Words in a mask of this vocabulary, plus room for the trie's dummy bit.
    pub fn maskWordsInternal(self: *const Tokenizer) u32 {
        return self.vocabSize() / 32 + 1;
    }
};

/// IRs up to this many words get their expression tables sized up front (`Grammar.create`).
const reserve_ir_words_max: usize = 4096;

pub const Grammar = struct {
    ref_count: u32 = 1,
    exprs: regex.ExprSet,
    compiled: ir_reader.Compiled,
    lexer: Lexer,
    /// Text depth of the lexer's states, for choosing a slice (see `slicer.zig`).
    slice_depths: slicer.DepthCache,
    walk_cache: WalkCache,
    /// `clampedState` results, keyed by (token length bound, state): a state per mask start
    /// visited (16 bytes an entry in the map), so a state is clamped once.
    clamped_states: regex.IntMap(u64, StateId),
    limits: Limits,

    /// Compiles a grammar IR (see docs/grammar_ir.md), its patterns through `patterns` (the
    /// instance's cache of earlier grammars' patterns, `pattern_cache.zig`) when given.
    pub fn create(
        gpa: Allocator,
        words: []const u32,
        limits: Limits,
        patterns: ?*PatternCache,
        diag: *ir_reader.CompileDiagnostic,
    ) ir_reader.CompileError!*Grammar {
        const self = try gpa.create(Grammar);
        errdefer gpa.destroy(self);
        self.limits = limits;
        self.ref_count = 1;
        // A median MaskBench IR of 420 words builds about 180 terms (its first row some more).
        // All the tables only for small grammars, where the growth steps are a visible part of
        // the compile: a large one's blocks, taken in another order, reused freed memory less
        // well (test_large_alternations: a second compile of 10,000 words grew linear memory);
        // a large one gets its term table alone (`reserveTable`, below).
        const reserve_terms: u32 = if (words.len <= reserve_ir_words_max) @intCast(words.len / 2 + 64) else 0;
        const expr_limits: regex.Limits = .{ .expr_count_max = limits.expr_count_max };
        // With the instance's cache, the set starts as a copy of its base set (the hottest
        // patterns' terms, `pattern_cache.zig`).
        self.exprs = if (patterns) |cache|
            try cache.startSet(gpa, expr_limits, reserve_terms)
        else
            try regex.ExprSet.initCapacity(gpa, expr_limits, reserve_terms);
        errdefer self.exprs.deinit();
        if (words.len > reserve_ir_words_max) {
            try self.exprs.reserveTable(@intCast(@min(words.len / 2, limits.expr_count_max)));
        }
        self.exprs.refuel(limits.fuel_compile_max, .compile_fuel);
        self.compiled = try ir_reader.compileShared(gpa, &self.exprs, words, patterns, diag);
        errdefer self.compiled.deinit(gpa);
        self.lexer = try Lexer.initWithLazy(gpa, &self.exprs, self.compiled.lexeme_exprs, self.compiled.lazy, .{
            .state_count_max = limits.state_count_max,
        });
        self.lexer.end_when_final = self.compiled.cfg.distinct_pos.len > 0;
        self.slice_depths = slicer.DepthCache.init(gpa);
        self.slice_depths.length_chars = self.compiled.length_chars;
        self.walk_cache = .{};
        self.clamped_states = .empty;
        return self;
    }

    pub fn release(self: *Grammar, gpa: Allocator) void {
        assert(self.ref_count > 0);
        self.ref_count -= 1;
        if (self.ref_count > 0) return;
        self.slice_depths.deinit();
        self.walk_cache.deinit(gpa);
        self.clamped_states.deinit(gpa);
        self.lexer.deinit();
        self.compiled.deinit(gpa);
        self.exprs.deinit();
        gpa.destroy(self);
    }

    /// Gives the next operation its own work budget.
    fn refuel(self: *Grammar) void {
        self.exprs.refuel(self.limits.fuel_step_max, .step_fuel);
    }

    /// A state that allows exactly the tokens of at most `bytes_max` bytes that `state`
    /// allows, with the counters no such token can reach clamped (`regex.ExprSet.clampCounts`)
    /// and a JSON string's length bound dropped where no token can reach it
    /// (`clampedLengthBound`); `state` itself when nothing changes. A mask walks from it: a
    /// counter that every token decrements (`(?:\S+\s+){0,999}`, `maxLength` 10000) makes
    /// every position a new state, a first visit, a walk of the whole trie deriving new
    /// transitions; clamped, the positions share a few states, and the walk cache hits.
    /// docs/lexer.md ("Clamped states") has the argument and the cost.
    pub fn clampedState(self: *Grammar, gpa: Allocator, state: StateId, bytes_max: u32) Error!StateId {
        const key = (@as(u64, bytes_max) << 32) | state.offset();
        if (self.clamped_states.get(key)) |clamped| return clamped;
        const clamped = try self.clampStateUncached(gpa, state, bytes_max);
        try self.clamped_states.put(gpa, key, clamped);
        return clamped;
    }

    fn clampStateUncached(self: *Grammar, gpa: Allocator, state: StateId, bytes_max: u32) Error!StateId {
        const exprs = &self.exprs;
        // A copy: interning terms and states does not touch the pair list, but a new state may.
        const pairs = try gpa.dupe(u32, self.lexer.statePairs(state));
        defer gpa.free(pairs);
        try exprs.spend(1 + pairs.len / 2);
        var changed = false;
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            const lexeme = pairs[i];
            if (lexeme == lexer_mod.start_marker) continue;
            const e: regex.ExprId = @fromBackingInt(@intCast(pairs[i + 1]));
            var clamped = e;
            if (!exprs.isBoolean(e)) {
                clamped = try exprs.clampCounts(e, bytes_max);
            } else if (self.compiled.length_chars[lexeme] != .nothing) {
                if (try exprs.clampedLengthBound(e, self.compiled.length_chars[lexeme], bytes_max)) |pattern| {
                    clamped = try exprs.clampCounts(pattern, bytes_max);
                }
            }
            changed = changed or clamped != e;
            pairs[i + 1] = clamped.index();
        }
        if (!changed) return state;
        return self.lexer.internState(pairs);
    }
};

pub const Failure = enum { none, limit, out_of_memory };

/// Masks walk from clamped states (`Grammar.clampedState`). A switch for tests, which compare
/// the masks with the walk from the real state (`ts_debug_clamp`); a core instance is
/// single-threaded.
pub var clamp_enabled: bool = true;

/// Masks use the slicer (`slicer.zig`), or walk the whole trie (false). A switch for tests, which
/// compare the two (`ts_debug_slices`); a core instance is single-threaded.
pub var slices_enabled: bool = true;

pub const Matcher = struct {
    gpa: Allocator,
    tokenizer: *Tokenizer,
    grammar: *Grammar,
    parser: earley.Parser,
    /// `history[i]` is the position after `i` tokens; never empty.
    history: std.ArrayList(Position) = .empty,
    eos_consumed: bool = false,
    failure: Failure = .none,
    /// Which limit a `.limit` failure hit.
    failure_limit: limit_error.Kind = .none,
    /// The mask with room for the dummy bit; copied out to the host's buffer.
    mask: []u32,
    /// The position `mask` was computed for, while still valid. Decoding often comes back to
    /// the same position (inside a string, a run of digits), so one entry saves most walks.
    /// Rollback and reset clear it: they may rebuild rows under the same index.
    mask_key: ?Position = null,

    pub fn create(gpa: Allocator, tokenizer: *Tokenizer, grammar: *Grammar) Error!*Matcher {
        const self = try gpa.create(Matcher);
        errdefer gpa.destroy(self);
        const mask = try gpa.alloc(u32, tokenizer.maskWordsInternal());
        errdefer gpa.free(mask);
        // The first row is part of compiling (a schema's first lexemes may need an emptiness
        // proof of a long length bound): it gets the compile budget.
        grammar.exprs.refuel(grammar.limits.fuel_compile_max, .compile_fuel);
        var parser = try earley.Parser.init(gpa, &grammar.compiled.cfg, &grammar.lexer, .{
            .row_item_count_max = grammar.limits.row_item_count_max,
            .step_item_count_max = grammar.limits.step_item_count_max,
        });
        errdefer parser.deinit();
        self.* = .{ .gpa = gpa, .tokenizer = tokenizer, .grammar = grammar, .parser = parser, .mask = mask };
        errdefer self.history.deinit(gpa);
        try self.history.append(gpa, parser.start());
        tokenizer.ref_count += 1;
        grammar.ref_count += 1;
        return self;
    }

    pub fn fork(self: *const Matcher) Error!*Matcher {
        const copy = try create(self.gpa, self.tokenizer, self.grammar);
        errdefer copy.destroy();
        try copy.parser.copyFrom(&self.parser, self.current());
        copy.history.clearRetainingCapacity();
        try copy.history.appendSlice(self.gpa, self.history.items);
        copy.eos_consumed = self.eos_consumed;
        copy.failure = self.failure;
        copy.failure_limit = self.failure_limit;
        return copy;
    }

    pub fn destroy(self: *Matcher) void {
        const gpa = self.gpa;
        self.parser.deinit();
        self.history.deinit(gpa);
        gpa.free(self.mask);
        self.tokenizer.release(gpa);
        self.grammar.release(gpa);
        gpa.destroy(self);
    }

    pub fn reset(self: *Matcher) void {
        self.history.shrinkRetainingCapacity(1);
        self.eos_consumed = false;
        self.failure = .none;
        self.mask_key = null;
    }

    pub fn current(self: *const Matcher) Position {
        return self.history.items[self.history.items.len - 1];
    }

    /// Tokens consumed, EOS included.
    pub fn tokenCount(self: *const Matcher) u32 {
        return @intCast(self.history.items.len - 1 + @intFromBool(self.eos_consumed));
    }

    fn fail(self: *Matcher, err: Error) Error {
        self.failure = switch (err) {
            error.LimitExceeded => .limit,
            error.OutOfMemory => .out_of_memory,
        };
        self.failure_limit = if (err == error.LimitExceeded) limit_error.hit else .none;
        return err;
    }

    /// Starts an operation: a fresh work budget for the lexer and the parser.
    fn begin(self: *Matcher) void {
        self.grammar.refuel();
        self.parser.beginStep(self.current().row);
    }

    /// Fuel the last operation on this matcher's grammar spent (measurements, calibration).
    pub fn fuelSpent(self: *const Matcher) u64 {
        return self.grammar.exprs.fuel_spent;
    }

    pub fn isAccepting(self: *Matcher) bool {
        if (self.failure != .none) return false;
        if (self.eos_consumed) return true;
        self.begin();
        return self.parser.eosAllowed(self.current()) catch |err| {
            _ = self.fail(err) catch {};
            return false;
        };
    }

    /// Stopped: EOS was consumed, the matcher failed, or nothing but EOS can follow.
    pub fn isStopped(self: *Matcher) Error!bool {
        if (self.eos_consumed or self.failure != .none) return true;
        self.begin();
        const open = self.anyContinuation(self.current()) catch |err| return self.fail(err);
        return !open;
    }

    /// Index of the next token: tokens consumed so far, EOS excluded.
    fn nextTokenIndex(self: *const Matcher) u32 {
        return @intCast(self.history.items.len - 1);
    }

    /// The position the next text token starts from (token budgets applied; see
    /// `earley.Parser.enterToken`), or null when no text token can follow.
    fn enterNextToken(self: *Matcher, at: Position) Error!?Position {
        self.parser.token_index = self.nextTokenIndex();
        return self.parser.enterToken(at, self.parser.token_index);
    }

    /// Can anything but EOS follow `at`: a byte, or a special token?
    fn anyContinuation(self: *Matcher, at: Position) Error!bool {
        const lexer = &self.grammar.lexer;
        if (try self.enterNextToken(at)) |entered| {
            var class: u32 = 0;
            while (class < lexer.class_count) : (class += 1) {
                if (try self.parser.stepByte(entered, lexer.class_representative[class]) != null) return true;
            }
        }
        return self.anySpecialAllowed(at);
    }

    fn anySpecialAllowed(self: *Matcher, at: Position) Error!bool {
        var any = false;
        // A special lexeme matches special tokens only, as `advance` reads them: an EOS id in
        // one (`<[eos]>`) is still EOS, allowed where the grammar may end; a text token's id
        // (`<[0]>`) is still read as its bytes; ids past the vocabulary never come.
        const Flag = struct {
            flag: *bool,
            tokenizer: *const Tokenizer,
            fn set(ctx: @This(), id: TokenId) void {
                if (ctx.tokenizer.isSpecialNotEos(id)) ctx.flag.* = true;
            }
        };
        try self.parser.forEachAllowedSpecial(at, Flag{ .flag = &any, .tokenizer = self.tokenizer }, Flag.set);
        return any;
    }

    /// The position after `token`, the token with index `index` in the output, from `at`;
    /// null when the grammar refuses it.
    fn advance(self: *Matcher, at: Position, token: TokenId, index: u32) Error!?Position {
        assert(token.index() < self.tokenizer.vocabSize());
        switch (self.tokenizer.kinds[token.index()]) {
            .special => return self.parser.stepSpecial(at, token),
            .unused => return null,
            .text => {},
        }
        const bytes = self.tokenizer.tokenBytes(token);
        if (bytes.len == 0) return null;
        self.parser.token_index = index;
        var pos = try self.parser.enterToken(at, index) orelse return null;
        for (bytes) |b| pos = try self.parser.stepByte(pos, b) orelse return null;
        if (!try self.parser.tokenEndAlive(pos, index + 1)) return null;
        return pos;
    }

    /// What `consume` does with the tokens it accepts.
    pub const ConsumeMode = enum {
        /// All or nothing: every token is consumed, or (when one is refused) none is.
        commit,
        /// Only measure the valid prefix; the state does not change.
        validate,
    };

    /// The length of the longest valid prefix of `tokens`; with `.commit`, the tokens are
    /// consumed when the prefix is all of them.
    pub fn consume(self: *Matcher, tokens: []const TokenId, mode: ConsumeMode) Error!u32 {
        assert(self.failure == .none);
        self.begin();
        return self.consumeInner(tokens, mode) catch |err| self.fail(err);
    }

    fn consumeInner(self: *Matcher, tokens: []const TokenId, mode: ConsumeMode) Error!u32 {
        const commit = mode == .commit;
        const base_len = self.history.items.len;
        const base_eos = self.eos_consumed;
        const base_index = self.nextTokenIndex();
        var at = self.current();
        var eos = base_eos;
        var count: u32 = 0;
        for (tokens, 0..) |token, i| {
            if (eos) break;
            // Each token is a step with its own work budget: a call's work is bounded by
            // its length times the step budget.
            if (i > 0) self.begin();
            if (self.tokenizer.isEos(token)) {
                if (!try self.parser.eosAllowed(at)) break;
                eos = true;
            } else {
                at = try self.advance(at, token, base_index + count) orelse break;
                if (commit) {
                    if (self.history.items.len > self.grammar.limits.token_history_max) return limit_error.exceeded(.token_history);
                    try self.history.append(self.gpa, at);
                }
            }
            count += 1;
        }
        if (commit) {
            self.eos_consumed = eos;
            if (count < tokens.len) {
                // Undo to the state before the call: an EOS consumed by an earlier call stays
                // (a refused token after EOS must not roll the EOS back).
                self.history.shrinkRetainingCapacity(base_len);
                self.eos_consumed = base_eos;
            }
        }
        return count;
    }

    pub fn rollback(self: *Matcher, count: u32) bool {
        if (count > self.tokenCount()) return false;
        var n = count;
        if (n > 0 and self.eos_consumed) {
            self.eos_consumed = false;
            n -= 1;
        }
        self.history.shrinkRetainingCapacity(self.history.items.len - n);
        self.mask_key = null;
        self.failure = .none;
        return true;
    }

    /// Computes the allowed-token mask into `self.mask`.
    pub fn computeMask(self: *Matcher) Error!void {
        assert(self.failure == .none);
        self.begin();
        self.computeMaskInner() catch |err| return self.fail(err);
    }

    fn computeMaskInner(self: *Matcher) Error!void {
        const at = self.current();
        if (!self.eos_consumed) if (self.mask_key) |key| if (std.meta.eql(key, maskKey(at))) return;
        self.mask_key = null;
        self.parser.text_read = false;
        @memset(self.mask, 0);
        const tokenizer = self.tokenizer;
        // With token budgets the mask also depends on the token index, and a slice token must
        // still be checked where it ends: no mask cache, no slices.
        const budgeted = self.parser.cfg.has_token_max;
        // The tokens over `slicer.long_token_bytes` and where to walk them from, when the
        // walk below starts from a state clamped for the shorter ones only.
        var long_walk: ?struct { tokens: *const slicer.LongTokens, from: Position } = null;
        if (!self.eos_consumed) walk: {
            var entered = try self.enterNextToken(at) orelse break :walk;
            // After a lexeme nothing can extend (a literal's last byte) the walk goes on from
            // the next lexeme's start (`WalkCache.afterFinal`): its slice applies.
            if (!budgeted) entered = try WalkCache.afterFinal(&self.parser, entered) orelse break :walk;
            // A lazy lexeme can end inside a token even while the lexer stays alive: no slices
            // and no clamped state from a state holding one. A state without one (a JSON
            // argument's string inside a tool call) is walked as in a grammar without them.
            const lazy = self.parser.cfg.has_lazy and self.parser.lexer.stateInfo(entered.lexer_state).lazy_pairs;
            // Only the walk starts from the clamped state: the positions kept, consumes and
            // forks use the real one. Not a row's start state (the parser tells "no lexeme in
            // progress" by it), nor with lazy lexemes or token budgets (they ask more of a
            // state than which tokens it allows).
            const row_start = self.parser.rows.items[entered.row.index()].lexer_start;
            if (clamp_enabled and !lazy and !budgeted and entered.lexer_state != row_start) {
                const real = entered.lexer_state;
                entered.lexer_state = try self.grammar.clampedState(self.gpa, real, tokenizer.trie.depth_max);
                // Clamped for the tokens of at most `long_token_bytes` instead, when that
                // clamps more (a word count, a string's bound within reach of the longest
                // token only): the longer ones are walked apart (`slicer.LongTokens`).
                if (slices_enabled and tokenizer.trie.depth_max > slicer.long_token_bytes) {
                    const short = try self.grammar.clampedState(self.gpa, real, slicer.long_token_bytes);
                    if (short != entered.lexer_state) if (try self.longTokens()) |tokens| {
                        long_walk = .{ .tokens = tokens, .from = entered };
                        entered.lexer_state = short;
                    };
                }
            }
            // A string near its bound and nothing else: its text tokens by their characters
            // (those its pattern side allows, when it has one), then the tokens outside the
            // text family (`slicer.ShortTexts`).
            if (slices_enabled and !lazy and !budgeted) if (try self.shortTexts(entered.lexer_state)) |short| {
                if (short.pattern) |side| {
                    var pattern = entered;
                    pattern.lexer_state = side;
                    try self.walkSliced(pattern, false);
                    for (self.mask, short.mask) |*word, text| word.* &= text;
                } else {
                    @memcpy(self.mask, short.mask);
                }
                try walkTrieTop(short.rest.nodes, short.rest.top, &self.parser, entered, self.mask);
                break :walk;
            };
            if (budgeted) {
                try walkTrieTop(tokenizer.trie.nodes, tokenizer.trie.top, &self.parser, entered, self.mask);
            } else {
                try self.walkSliced(entered, lazy);
            }
        }
        if (long_walk) |long| {
            // A string's bound (and a pattern side of single characters): the long text
            // tokens as the shorter clamp allowed them, held to the characters left; the
            // others walked (`slicer.LongTokens`). Else every long token walked.
            if (try self.grammar.slice_depths.boundChars(self.parser.lexer, long.from.lexer_state)) |bound| {
                long.tokens.clearBeyond(self.mask, tokenizer.slices.text_chars, bound.chars);
                try walkTrieTop(long.tokens.other.nodes, long.tokens.other.top, &self.parser, long.from, self.mask);
            } else {
                long.tokens.clear(self.mask);
                try walkTrieTop(long.tokens.trie.nodes, long.tokens.trie.top, &self.parser, long.from, self.mask);
            }
        }
        if (!self.eos_consumed) {
            // Clear the dummy bit of nodes without a token.
            const dummy = tokenizer.vocabSize();
            self.mask[dummy >> 5] &= ~(@as(u32, 1) << @intCast(dummy & 31));
            // Special tokens only (see `anySpecialAllowed`); EOS ids are set below.
            const Setter = struct {
                mask: []u32,
                vocab: u32,
                tokenizer: *const Tokenizer,
                fn set(ctx: @This(), id: TokenId) void {
                    if (id.index() < ctx.vocab and ctx.tokenizer.isSpecialNotEos(id)) allow(ctx.mask, id);
                }
            };
            try self.parser.forEachAllowedSpecial(at, Setter{ .mask = self.mask, .vocab = dummy, .tokenizer = tokenizer }, Setter.set);
        }
        if (self.eos_consumed or try self.parser.eosAllowed(at)) {
            for (tokenizer.eos_ids) |id| allow(self.mask, id);
        }
        // A mask that read no item's text (distinct lists) is a function of the position
        // without its text offset, like every other grammar's.
        if (!self.eos_consumed and !budgeted and !self.parser.text_read) self.mask_key = maskKey(at);
    }

    /// The mask of `entered` (into the zeroed `self.mask`) by the slice its state allows,
    /// through the walk cache, or by an open slice for a state holding a lazy lexeme.
    fn walkSliced(self: *Matcher, entered: Position, lazy: bool) Error!void {
        const tokenizer = self.tokenizer;
        const slice = if (!slices_enabled)
            null
        else if (lazy)
            try self.openSlice(entered.lexer_state)
        else
            try tokenizer.slices.pick(&self.grammar.slice_depths, self.parser.lexer, entered.lexer_state);
        // (An open slice goes through the cache although its rest trie is small: free
        // text's frontier, the tokens that could end it, is smaller still.)
        if (slice != null and !lazy and slice.?.rest.nodes.len < self.grammar.walk_cache.rest_nodes_min) {
            @memcpy(self.mask, slice.?.mask);
            try walkTrieTop(slice.?.rest.nodes, slice.?.rest.top, &self.parser, entered, self.mask);
        } else {
            try self.grammar.walk_cache.walk(self.gpa, tokenizer, &self.parser, entered, slice, self.mask);
        }
    }

    /// The text tokens `state` allows when it is a string near its bound and nothing else
    /// (`slicer.DepthCache.shortTextChars`): those of at most k characters, of which the
    /// walk from the pattern side's state must also allow each, when there is one
    /// (`pattern`); and the trie of the tokens outside the text family (the unbounded text
    /// slice's rest) to walk beside them. Else null.
    fn shortTexts(self: *Matcher, state: StateId) Error!?struct { mask: []const u32, pattern: ?StateId, rest: *const trie_mod.Trie } {
        const short = try self.grammar.slice_depths.shortTextChars(self.parser.lexer, state) orelse return null;
        const tokenizer = self.tokenizer;
        const text = tokenizer.slices.unboundedText() orelse return null;
        const mask = try tokenizer.open_slices.short.mask(self.gpa, tokenizer.slices.text_chars, short.chars);
        return .{ .mask = mask, .pattern = short.pattern, .rest = &text.rest };
    }

    /// The tokenizer's long tokens (`slicer.LongTokens`), null when they cannot be had.
    fn longTokens(self: *Matcher) Error!?*const slicer.LongTokens {
        const tokenizer = self.tokenizer;
        return tokenizer.open_slices.longTokens(self.gpa, tokenizer.blob, tokenizer.offsets, tokenizer.kinds) catch |err| switch (err) {
            error.OutOfMemory => error.OutOfMemory,
            // (The trie was built from these tokens: it cannot refuse them now.)
            error.InvalidTokens, error.LimitExceeded => null,
        };
    }

    /// The open slice a walk from `state`, which holds a lazy lexeme, may take (`slicer.OpenSlices`);
    /// null when there is none (nor with distinct lists, whose walks read the text).
    fn openSlice(self: *Matcher, state: StateId) Error!?*const slicer.Slice {
        if (self.parser.cfg.distinct_pos.len > 0) return null;
        const tokenizer = self.tokenizer;
        const excluded = try self.grammar.slice_depths.openExcluded(self.parser.lexer, state, &tokenizer.open_slices.answers) orelse return null;
        return tokenizer.open_slices.get(self.gpa, &tokenizer.trie, tokenizer.blob, tokenizer.offsets, tokenizer.kinds, excluded) catch |err| switch (err) {
            error.OutOfMemory => error.OutOfMemory,
            // (The trie was built from these tokens: it cannot refuse them now.)
            error.InvalidTokens, error.LimitExceeded => null,
        };
    }

    /// Bytes the grammar forces next (no alternative, and it cannot end here), up to `out.len`.
    pub fn forcedBytes(self: *Matcher, out: []u8) Error!u32 {
        assert(self.failure == .none);
        if (self.eos_consumed) return 0;
        self.begin();
        return self.forcedBytesInner(out) catch |err| self.fail(err);
    }

    fn forcedBytesInner(self: *Matcher, out: []u8) Error!u32 {
        const raw = self.current();
        if (try self.parser.eosAllowed(raw)) return 0;
        if (try self.anySpecialAllowed(raw)) return 0;
        // The forced bytes are stepped as if they all went into the next token; how many tokens
        // they become is not known, so they stop before a byte of a capped lexeme.
        const at = try self.enterNextToken(raw) orelse return 0;
        return self.forcedFrom(at, out);
    }

    /// The forced bytes from `start`, a position inside the next token, up to `out.len`.
    fn forcedFrom(self: *Matcher, start: Position, out: []u8) Error!u32 {
        const lexer = &self.grammar.lexer;
        var at = start;
        var n: u32 = 0;
        const capacity = @min(out.len, forced_bytes_per_call_max);
        outer: while (n < capacity) {
            // A long run stops while fuel remains for another byte (the next call goes on), so
            // that probing every class of every byte never fails a legitimate forced run.
            if (n > 0 and self.grammar.exprs.fuel < forced_fuel_reserve + lexer.class_count * forced_probe_fuel) break;
            if (try self.parser.eosAllowed(at)) break;
            if (try self.anySpecialAllowed(at)) break;
            var only: ?u8 = null;
            var class: u32 = 0;
            while (class < lexer.class_count) : (class += 1) {
                const b = lexer.class_representative[class];
                // A probe's lexer and parser work beyond the derivatives it charges itself
                // (fuzzed regexes ran 30-40 ns a unit here against 16-18 elsewhere).
                try self.grammar.exprs.spend(forced_probe_fuel);
                if (try self.parser.stepByte(at, b) == null) continue;
                if (only != null or lexer.class_size[class] != 1) break :outer;
                only = b;
            }
            const b = only orelse break;
            // Step again: probing later classes may have rebuilt the rows the first step made.
            const next = (try self.parser.stepByte(at, b)).?;
            if (try self.parser.inBudgetedLexeme(next)) break;
            at = next;
            out[n] = b;
            n += 1;
        }
        return n;
    }

    /// Forced bytes one call computes at most, whatever the caller's buffer: each byte probes
    /// every byte class, so a long forced literal is computed in chunks, one per call, each
    /// well inside the step fuel.
    pub const forced_bytes_per_call_max: usize = 1024;
    /// Fuel charged per byte-class probe of the forced-bytes walk.
    const forced_probe_fuel: u64 = 6;
    /// Fuel a forced-bytes call keeps for the derivatives of one more byte before it stops.
    const forced_fuel_reserve: u64 = 100_000;

    /// How far the grammar follows `text` from here, and the bytes it forces after that far.
    pub const TextStep = struct { valid_bytes: u32, forced_bytes: u32 };

    /// The longest prefix of `text` the grammar allows from the current position, and the
    /// bytes it forces after that prefix (written to `forced`, up to its length). Prompt
    /// lookup's text drafts ask this once per lookup round: the draft is cut where the grammar
    /// refuses it and extended by what the grammar leaves no choice about. The bytes are read
    /// as one token (token budgets are not charged), as for forced bytes. Does not change the
    /// state.
    pub fn validateText(self: *Matcher, text: []const u8, forced: []u8) Error!TextStep {
        assert(self.failure == .none);
        if (self.eos_consumed) return .{ .valid_bytes = 0, .forced_bytes = 0 };
        self.begin();
        return self.validateTextInner(text, forced) catch |err| self.fail(err);
    }

    fn validateTextInner(self: *Matcher, text: []const u8, forced: []u8) Error!TextStep {
        var at = try self.enterNextToken(self.current()) orelse return .{ .valid_bytes = 0, .forced_bytes = 0 };
        var valid: u32 = 0;
        for (text) |b| {
            at = try self.parser.stepByte(at, b) orelse break;
            valid += 1;
        }
        return .{ .valid_bytes = valid, .forced_bytes = try self.forcedFrom(at, forced) };
    }

    /// Masks at every position of a draft: `out` receives the mask before each valid draft
    /// token and after the last one (`words` u32 words each, at least `tokens.len + 1` masks of
    /// room). Returns how many tokens of the draft the grammar accepts, so `valid + 1` masks are
    /// written. Verification masks each draft position with these, in one call. Does not
    /// change the state; the current position's mask stays cached.
    pub fn draftMasks(self: *Matcher, tokens: []const TokenId, out: []u32, words: u32) Error!u32 {
        assert(self.failure == .none);
        assert(out.len >= (tokens.len + 1) * words);
        assert(words <= self.mask.len);
        self.begin();
        const base_len = self.history.items.len;
        const base_eos = self.eos_consumed;
        defer {
            self.history.shrinkRetainingCapacity(base_len);
            self.eos_consumed = base_eos;
        }
        return self.draftMasksInner(tokens, out, words) catch |err| self.fail(err);
    }

    fn draftMasksInner(self: *Matcher, tokens: []const TokenId, out: []u32, words: u32) Error!u32 {
        try self.computeMaskInner();
        @memcpy(out[0..words], self.mask[0..words]);
        const base_key = self.mask_key;
        var valid: u32 = 0;
        for (tokens) |token| {
            if (self.eos_consumed) break;
            if (self.tokenizer.isEos(token)) {
                if (!try self.parser.eosAllowed(self.current())) break;
                self.eos_consumed = true;
            } else {
                const at = try self.advance(self.current(), token, self.nextTokenIndex()) orelse break;
                if (self.history.items.len > self.grammar.limits.token_history_max) return limit_error.exceeded(.token_history);
                try self.history.append(self.gpa, at);
            }
            valid += 1;
            self.mask_key = null;
            self.begin();
            try self.computeMaskInner();
            @memcpy(out[valid * words ..][0..words], self.mask[0..words]);
        }
        // The rows above the current one are rebuilt by the next step anyway; the current
        // position's mask is the first one written, so it can stay cached.
        @memcpy(self.mask[0..words], out[0..words]);
        self.mask_key = base_key;
        return valid;
    }

    /// After the bytes `prefix` (which the grammar must allow from here), does the grammar
    /// allow some token that strictly extends `suffix`? The question fast-forward healing asks
    /// before committing forced bytes as tokens. Does not change the state.
    pub fn extensionAllowed(self: *Matcher, prefix: []const u8, suffix: []const u8) Error!bool {
        assert(self.failure == .none);
        if (self.eos_consumed) return false;
        self.begin();
        return self.extensionAllowedInner(prefix, suffix) catch |err| self.fail(err);
    }

    fn extensionAllowedInner(self: *Matcher, prefix: []const u8, suffix: []const u8) Error!bool {
        const node = self.tokenizer.trie.find(suffix) orelse return false;
        var at = try self.enterNextToken(self.current()) orelse return false;
        for (prefix) |b| at = try self.parser.stepByte(at, b) orelse return false;
        return self.extensionFrom(at, node, suffix);
    }

    /// Depth-first over the trie subtree below `root` from `at`, stopping at the first
    /// token the grammar allows.
    fn subtreeAllows(self: *Matcher, at: Position, root: trie_mod.NodeIndex) Error!bool {
        const trie = &self.tokenizer.trie;
        const subtree_end = root.index() + trie.nodeAt(root).subtree_size;
        var stack: [trie_mod.token_length_max + 1]Position = undefined;
        stack[0] = at;
        var depth: usize = 0;
        var p: usize = root.index() + 1;
        while (p < subtree_end) {
            const node = trie.nodes[p];
            if (try self.parser.stepByte(stack[depth], node.byte)) |q| {
                if (node.token != self.tokenizer.vocabSize()) return true;
                if (node.subtree_size > 1) {
                    depth += 1;
                    stack[depth] = q;
                    p += 1;
                    continue;
                }
            }
            p += node.subtree_size;
            // The last node may pop above the subtree's root: the walk ends there anyway.
            depth -|= node.pop;
        }
        return false;
    }

    /// The earliest offset `i >= from` such that some token strictly extends `data[i..]` and
    /// the grammar, after `data[0..i]`, allows such a token; `data.len` when there is none.
    /// The whole healing question of fast-forwarding in one call: `data` are the forced bytes,
    /// `from` where the look-back window starts. Does not change the state.
    pub fn healPosition(self: *Matcher, data: []const u8, from: usize) Error!usize {
        assert(self.failure == .none);
        assert(from <= data.len);
        assert(data.len <= input_bytes_max); // the boundary refuses longer inputs
        if (self.eos_consumed) return data.len;
        self.begin();
        return self.healPositionInner(data, from) catch |err| self.fail(err);
    }

    fn healPositionInner(self: *Matcher, data: []const u8, from: usize) Error!usize {
        const trie = &self.tokenizer.trie;
        var at = try self.enterNextToken(self.current()) orelse return data.len;
        for (data[0..from]) |b| at = try self.parser.stepByte(at, b) orelse return data.len;
        var index = from;
        while (index < data.len) : (index += 1) {
            // No token is longer than `token_length_max`: further back, only step the parser.
            if (data.len - index <= trie_mod.token_length_max) if (trie.find(data[index..])) |node| {
                if (trie.hasExtension(node) and try self.extensionFrom(at, node, data[index..])) return index;
            };
            at = try self.parser.stepByte(at, data[index]) orelse return data.len;
        }
        return data.len;
    }

    /// From `at`, does the grammar allow `suffix` (whose trie node is `node`) followed
    /// by the bytes of some token below that node?
    fn extensionFrom(self: *Matcher, start: Position, node: trie_mod.NodeIndex, suffix: []const u8) Error!bool {
        var at = start;
        for (suffix) |b| at = try self.parser.stepByte(at, b) orelse return false;
        return self.subtreeAllows(at, node);
    }
};

/// What a mask is remembered by (`Matcher.mask_key`): the position but for its text offset,
/// which differs after every token while the mask inside a string or number does not.
fn maskKey(at: Position) Position {
    var key = at;
    key.text_len = 0;
    return key;
}

/// Sets `token`'s bit in `mask` (bit t % 32 of word t / 32).
fn allow(mask: []u32, token: TokenId) void {
    const t = token.index();
    mask[t >> 5] |= @as(u32, 1) << @intCast(t & 31);
}

/// The trie walk: sets the bit of every token whose bytes the lexer and parser survive from
/// `start`.
///
/// The lexer state and the row per trie depth are kept in separate arrays: inside a lexeme
/// the loop touches only lexer states, and a step is two loads (the byte's class, the
/// transition). The parser runs only at lexeme boundaries and for transitions the lazy DFA has
/// not built yet. A dead transition asks whether the lexeme in progress could end before the
/// byte (the state is accepting); when it cannot, the byte is a plain refusal. That question
/// is asked on dead transitions rather than remembered per depth on the way down: most nodes
/// the walk enters are alive, and measured on Llama-3 the lazy form is 15-30% faster on full
/// walks. Nodes without a token set the dummy bit just past the vocabulary instead of
/// branching; a refused byte skips the node's whole subtree.
pub fn walkTrie(
    nodes: []const Node,
    parser: *earley.Parser,
    start: Position,
    mask: []u32,
) Error!void {
    return walkTrieTop(nodes, null, parser, start, mask);
}

/// `walkTrie` over a whole trie whose `TopIndex` is `top`: the subtrees of first bytes the
/// lexer and the parser refuse from `start` are not visited at all (null: every top-level
/// node is, as `walkTrie` does).
pub fn walkTrieTop(
    nodes: []const Node,
    top: ?*const trie_mod.TopIndex,
    parser: *earley.Parser,
    start: Position,
    mask: []u32,
) Error!void {
    // Copies of the loop: without lazy lexemes, token budgets and distinct lists (the common
    // case) the test for the slow path is one comparison per node.
    const lazy = parser.cfg.lazy_walk;
    if (parser.cfg.distinct_pos.len > 0) {
        // Distinct lists end their lexemes eagerly (`lazy_walk`) and read the path's text.
        try parser.reserveText(@as(usize, start.text_len) + trie_mod.token_length_max + 1);
        if (parser.cfg.has_token_max) return walkTrieWith(.{ .lazy = true, .budgeted = true, .text = true }, nodes, null, parser, start, mask);
        return walkTrieWith(.{ .lazy = true, .budgeted = false, .text = true }, nodes, null, parser, start, mask);
    }
    if (parser.cfg.has_token_max) {
        if (lazy) return walkTrieWith(.{ .lazy = true, .budgeted = true }, nodes, top, parser, start, mask);
        return walkTrieWith(.{ .lazy = false, .budgeted = true }, nodes, top, parser, start, mask);
    }
    if (lazy) return walkTrieWith(.{ .lazy = true, .budgeted = false }, nodes, top, parser, start, mask);
    return walkTrieWith(.{ .lazy = false, .budgeted = false }, nodes, top, parser, start, mask);
}

/// Above this many live bytes a walk visits every node of the level (`liveBytes`).
const top_ranges_live_max = 128;

/// The ranges of nodes a walk visits: every top-level node, or with a `TopIndex`, those of
/// the first bytes in `bytes`, by increasing byte (so by increasing node). A wide top-level
/// node comes alone, with its children's index (`TopIndex.children`): once the walk has
/// entered it, `expand` gives its children's live bytes, whose ranges come next, one level
/// down.
const TopRanges = struct {
    top: ?*const trie_mod.TopIndex,
    bytes: lexer_mod.ByteSet = @splat(0),
    word: u32 = 0,
    end: u32,
    done: bool = false,
    /// The children being walked, and their live bytes not walked yet.
    children: ?*const trie_mod.TopIndex = null,
    child_bytes: lexer_mod.ByteSet = @splat(0),
    child_word: u32 = 0,

    const Range = struct { begin: u32, end: u32, depth: u32 = 0, children: ?*const trie_mod.TopIndex = null };

    fn next(self: *TopRanges) ?Range {
        const top = self.top orelse {
            if (self.done) return null;
            self.done = true;
            return .{ .begin = 0, .end = self.end };
        };
        if (self.children) |children| {
            if (nextByte(&self.child_bytes, &self.child_word, children)) |b| return .{ .begin = children.start[b], .end = children.end[b], .depth = 1 };
            self.children = null;
        }
        const b = nextByte(&self.bytes, &self.word, top) orelse return null;
        if (top.children(b)) |children| return .{ .begin = top.start[b], .end = top.start[b] + 1, .children = children };
        return .{ .begin = top.start[b], .end = top.end[b] };
    }

    /// Walk the children of the wide node just entered whose bytes are in `bytes`.
    fn expand(self: *TopRanges, children: *const trie_mod.TopIndex, bytes: lexer_mod.ByteSet) void {
        self.children = children;
        self.child_bytes = bytes;
        self.child_word = 0;
    }

    /// The next byte of `bytes` (taken out) with nodes in `index`.
    fn nextByte(bytes: *lexer_mod.ByteSet, word: *u32, index: *const trie_mod.TopIndex) ?u8 {
        while (word.* < 4) {
            const bits = bytes[word.*];
            if (bits == 0) {
                word.* += 1;
                continue;
            }
            const b: u8 = @intCast(word.* * 64 + @ctz(bits));
            bytes[word.*] = bits & (bits - 1);
            if (index.start[b] < index.end[b]) return b;
        }
        return null;
    }
};

/// The bytes of `wanted` a walk at `at` would not refuse: those the lexer state goes on with,
/// and where its lexeme may end, those the next lexeme may start with (`EndMemo`'s test), with
/// that lexeme's start state when the lexeme's end was asked about (`ended`).
const Live = struct { bytes: lexer_mod.ByteSet, ended: bool = false, ended_start: ?StateId = null };

fn liveAmong(parser: *earley.Parser, at: Position, wanted: lexer_mod.ByteSet) Error!Live {
    const lexer = parser.lexer;
    var live: Live = .{ .bytes = try lexer.aliveAmong(at.lexer_state, wanted) };
    var dead: lexer_mod.ByteSet = undefined;
    var any_dead: u64 = 0;
    for (&dead, wanted, live.bytes) |*d, there, alive| {
        d.* = there & ~alive;
        any_dead |= d.*;
    }
    if (any_dead == 0 or !lexer.isAccepting(at.lexer_state)) return live;
    live.ended = true;
    live.ended_start = try WalkCache.nextLexemeStart(parser, at);
    if (live.ended_start) |next| {
        const more = try lexer.aliveAmong(next, dead);
        for (&live.bytes, more) |*word, extra| word.* |= extra;
    }
    return live;
}

/// `liveAmong` of a level of the trie (its first bytes `present`), with `memo` seeded with what
/// the walk's loop would find at the first byte that ends the lexeme; null when so many bytes
/// live that a pass over every node costs less.
fn liveBytes(parser: *earley.Parser, at: Position, present: lexer_mod.ByteSet, memo: *EndMemo) Error!?lexer_mod.ByteSet {
    const live = try liveAmong(parser, at, present);
    if (live.ended) memo.* = .{ .state = at.lexer_state, .row = at.row, .start = live.ended_start, .built = parser.rows_built };
    // Most bytes live (inside a string): the plain pass.
    var count: u32 = 0;
    for (live.bytes) |word| count += @popCount(word);
    return if (count > top_ranges_live_max) null else live.bytes;
}

/// Which copy of the walk's loop runs: what the grammar has that the common case does not.
const WalkVariant = struct {
    /// Lazy lexemes: a byte the lexer survives may still end the lexeme (a lazy match).
    lazy: bool,
    /// Token budgets: a node's token is allowed only if the output can go on past its end
    /// (`earley.Parser.tokenEndAlive`); its subtree is walked either way, since a longer token
    /// may finish the capped lexeme.
    budgeted: bool,
    /// Distinct lists: each node's byte is written to the parser's text at its offset
    /// (`earley.Parser.text`), so a row built at a node can read the lexeme it ends.
    text: bool = false,
};

/// The recorder of the walk in progress, if it records a `WalkCache` entry. A variable rather
/// than an argument or a variant of the walk: read only where the walk asks the parser, it
/// leaves the loop's code as it is. A core instance is single-threaded. A recording walk still
/// costs 10-15% more than a plain one on MaskBench first visits (best of 5, wasmtime), for a
/// reason not found: a variant of the loop with the recorder as an argument, noting in place
/// instead of calling `note`, or the walk kept out of line all measured the same; the walk
/// with no recorder set measures as before.
var walk_recorder: ?*Recorder = null;

/// What a walk collects for a `WalkCache` entry: the frontier, the nodes where the lexeme of
/// its start would end and the parser decides.
const Recorder = struct {
    gpa: Allocator,
    frontier: std.ArrayList(WalkCache.Frontier),
    /// The trie the walk runs over.
    nodes: []const Node,
    /// Frontier subtrees of more nodes go through nested entries on replay (maxInt: none do).
    nested_nodes_min: usize,
    /// The nodes of the frontier subtrees this walk entered (the parser took the byte) that a
    /// replay walks (not through nested entries): what a replay would cost, were the parser to
    /// decide the same. (Subtrees the parser refused cost a replay one parser step each.)
    walked: usize = 0,
    /// The end of the last `after` node's subtree (its children are not noted).
    after_end: usize = 0,

    /// After the parser was asked at node `p` (byte `byte` from `state`, the subtree of
    /// `size` nodes entered when `alive`), reached with the walk's start row: the lexer's own
    /// answer, now in the table, says whether the lexeme goes on (the parser was asked only
    /// to build the transition) or would end here (a frontier node). Out of the walk's loop,
    /// which runs faster with fewer values live.
    ///
    /// Where `state` is final (nothing extends the lexeme), every child of the node before
    /// ends the lexeme: when that node's subtree is large, the node is noted once, as a
    /// frontier whose children a replay takes through a nested entry (`Frontier.after`), and
    /// its children are not noted (a literal separator before a word: `", "`, whose space
    /// leads to every " word" token).
    noinline fn note(self: *Recorder, lexer: *Lexer, state: StateId, byte: u8, p: u32, depth: usize, alive: bool, size: usize) Error!void {
        const lexed = lexer_mod.Table.get(lexer.trans.pages.items, state, lexer.class_of[byte]);
        const ends = if (lexed == .dead) lexer.isAccepting(state) else lexer.stateInfo(lexed).lazy_accepting;
        if (!ends) return;
        if (p < self.after_end) return; // (a child of the last `after` node)
        // `p` is the first child of node p - 1 when that node has children (a leaf before `p`
        // ends an earlier sibling's subtree); its later children meet the check above.
        if (depth > 0 and lexed == .dead and self.nodes[p - 1].subtree_size - 1 > self.nested_nodes_min) {
            if (try self.noteAfter(lexer, state, p - 1, depth - 1)) return;
        }
        try self.frontier.append(self.gpa, .{ .node = p, .state = state, .depth = @intCast(depth), .taken = alive });
        if (alive and size <= self.nested_nodes_min) self.walked += size;
    }

    /// Notes `node` as an `after` frontier when `state`, its byte's, is final.
    noinline fn noteAfter(self: *Recorder, lexer: *Lexer, state: StateId, node: u32, depth: usize) Error!bool {
        if (!try lexer.isFinal(state)) return false;
        try self.frontier.append(self.gpa, .{ .node = node, .state = state, .depth = @intCast(depth), .after = true });
        self.after_end = node + self.nodes[node].subtree_size;
        return true;
    }
};

/// `earley.Parser.stepByte` for the walk, refusing without the parser a byte that ends the
/// lexeme when the next lexeme cannot start with it. Ending the lexeme gives the same row
/// from the same row and lexer state while no row is rebuilt (`Parser.rows_built`): the start
/// state of the lexeme after it is kept for the last (state, row), so a run of siblings ending
/// the same lexeme (every child of a space that only a comma may follow) costs one lookup each.
/// Not with distinct lists (their rows read the text).
const EndMemo = struct {
    state: StateId = .missing,
    row: earley.RowId = .first,
    built: u32 = 0,
    /// The next lexeme's start state; null when the parser refuses the lexeme's end.
    start: ?StateId = null,

    /// Whether what is kept refuses `class` (a byte's) after the lexeme `at` ends, by the
    /// transition table alone (a transition not built yet: no).
    inline fn refuses(self: *const EndMemo, parser: *const earley.Parser, at: Position, pages: []const [*]StateId, class: u32) bool {
        if (self.state != at.lexer_state or self.row != at.row or self.built != parser.rows_built) return false;
        const next_start = self.start orelse return true;
        return lexer_mod.Table.get(pages, next_start, class) == .dead;
    }

    noinline fn stepByte(self: *EndMemo, parser: *earley.Parser, at: Position, b: u8) Error!?Position {
        const lexer = parser.lexer;
        if (try lexer.next(at.lexer_state, b) == .dead) {
            if (self.state != at.lexer_state or self.row != at.row or self.built != parser.rows_built) {
                self.start = try WalkCache.nextLexemeStart(parser, at);
                self.state = at.lexer_state;
                self.row = at.row;
                self.built = parser.rows_built;
            }
            const next_start = self.start orelse return null;
            if (try lexer.next(next_start, b) == .dead) return null;
        }
        return parser.stepByte(at, b);
    }
};

fn walkTrieWith(
    comptime variant: WalkVariant,
    nodes: []const Node,
    top: ?*const trie_mod.TopIndex,
    parser: *earley.Parser,
    start: Position,
    mask: []u32,
) Error!void {
    const lexer = parser.lexer;
    var memo: EndMemo = .{};
    var ranges: TopRanges = .{ .top = null, .end = @intCast(nodes.len) };
    // A recording walk notes every top-level node where the lexeme would end, refused or not
    // (a replay asks the parser again there), so it visits them all.
    const filtered = top != null and !variant.text and walk_recorder == null;
    if (filtered) {
        const at: Position = .{ .lexer_state = start.lexer_state, .row = start.row, .lexeme_token_index = start.lexeme_token_index, .text_len = 0 };
        if (try liveBytes(parser, at, top.?.present, &memo)) |bytes| {
            ranges.top = top;
            ranges.bytes = bytes;
        }
    }
    var pages = lexer.trans.pages.items;
    const class_of = &lexer.class_of;
    var states: [trie_mod.token_length_max + 1]StateId = undefined;
    var rows: [trie_mod.token_length_max + 1]earley.RowId = undefined;
    states[0] = start.lexer_state;
    rows[0] = start.row;
    var depth: usize = 0;
    var p: usize = 0;
    comptime assert(StateId.dead.offset() == 0 and StateId.missing.offset() == std.math.maxInt(u32));
    while (ranges.next()) |range| {
        p = range.begin;
        depth = range.depth;
        while (p < range.end) {
            const node = nodes[p];
            const state = states[depth];
            const text_len: u32 = if (variant.text) start.text_len + @as(u32, @intCast(depth)) else 0;
            if (variant.text) parser.text.items[text_len] = node.byte;
            var next_state = lexer_mod.Table.get(pages, state, class_of[node.byte]);
            var next_row = rows[depth];
            // `dead` (0) and `missing` (all ones) are the two values for which `+% 1 <= 1`.
            const special = next_state.offset() +% 1 <= 1;
            var alive = !special;
            // Inside a lazy lexeme a byte that reaches one of its matches ends it: the parser too.
            const ends_lazily = variant.lazy and !special and lexer.stateInfo(next_state).lazy_accepting;
            if (ends_lazily or (special and (next_state == .missing or lexer.isAccepting(state)))) {
                // The lexeme in progress started in this token unless it is the start's own.
                const first = if (rows[depth] == start.row) start.lexeme_token_index else parser.token_index;
                const at: Position = .{ .lexer_state = state, .row = rows[depth], .lexeme_token_index = first, .text_len = text_len };
                const q = if (variant.text)
                    try parser.stepByte(at, node.byte)
                else if (next_state == .dead and memo.refuses(parser, at, pages, class_of[node.byte]))
                    null // (in the loop: a sibling run of refusals is most of some walks)
                else
                    try memo.stepByte(parser, at, node.byte);
                pages = lexer.trans.pages.items;
                // A position whose lexer state is dead is still alive: the parse is complete there
                // and only EOS may follow (a lazy lexeme ending the grammar).
                alive = q != null;
                if (q) |pos| {
                    next_state = pos.lexer_state;
                    next_row = pos.row;
                }
                if (walk_recorder) |recorder| if (rows[depth] == start.row) try recorder.note(lexer, state, node.byte, @intCast(p), depth, alive, node.subtree_size);
            }
            if (alive) {
                if (variant.budgeted) {
                    const first = if (next_row == start.row) start.lexeme_token_index else parser.token_index;
                    const end: Position = .{ .lexer_state = next_state, .row = next_row, .lexeme_token_index = first, .text_len = text_len + 1 };
                    if (try parser.tokenEndAlive(end, parser.token_index + 1)) {
                        mask[node.token >> 5] |= @as(u32, 1) << @intCast(node.token & 31);
                    }
                } else {
                    mask[node.token >> 5] |= @as(u32, 1) << @intCast(node.token & 31);
                }
                if (node.subtree_size > 1) {
                    depth += 1;
                    states[depth] = next_state;
                    rows[depth] = next_row;
                    p += 1;
                    continue;
                }
            }
            p += node.subtree_size;
            // Wraps only past the last node of a subtree walked on its own (`WalkCache`).
            depth -%= node.pop;
        }
        // A wide node the walk entered (its children next): only its children's live bytes.
        if (range.children) |children| if (depth == 1 and p == range.end) {
            const first = if (rows[1] == start.row) start.lexeme_token_index else parser.token_index;
            const at: Position = .{ .lexer_state = states[1], .row = rows[1], .lexeme_token_index = first, .text_len = 0 };
            ranges.expand(children, try liveBytes(parser, at, children.present, &memo) orelse children.present);
            pages = lexer.trans.pages.items;
        };
    }
}

/// Per lexer state, the part of a full walk the lexer alone decides, shared by every matcher
/// of the grammar: the tokens whose bytes keep the lexeme going (no lexeme ends inside them),
/// and the *frontier*, the nodes where the lexer needs the parser (the lexeme would end: a
/// dead transition from an accepting state, or a lazy lexeme's match). A mask from a cached
/// state copies the tokens and walks only the frontier's subtrees with the parser, so a state
/// whose walk covers most of the trie (free text between stop strings, a key that must not
/// match a pattern) costs a copy and a few subtrees instead of a walk of the whole trie.
///
/// The result is exactly the full walk's: that walk reaches a frontier node with the same
/// lexer state and row (no lexeme ends on the way), and there runs the same parser step.
/// The entry is recorded by the walk of the state's first visit, riding along the walk the
/// mask needs anyway. A state whose slice leaves a large rest trie (`rest_nodes_min`) is
/// cached the same way, its entry holding the slice's tokens and the frontier in the rest trie.
///
/// *Nested entries.* Where a frontier node's subtree is large (`nested_nodes_min`; the full
/// trie only, no distinct lists), a replay steps the parser over the node's byte and then
/// takes the node's children through an entry of their own, keyed by the node and the lexer
/// state the step reached: the same split of the children's walk into what the lexer alone
/// allows and a frontier. Lexemes that meet inside tokens need it: in `(WORD " ")*` the
/// state inside a word ends its lexeme at every space, and the space's subtree (every
/// " word" token, a third of Llama-3's trie) is a new lexeme's walk, which the lexer alone
/// decides again whatever the row. The children's tokens are exact for the same reason as a
/// root entry's: below the node, up to the nested frontier, no lexeme ends.
///
/// Memory is bounded per grammar and core instance: entries take at most `bytes_max` (a mask
/// of vocabulary / 8 bytes, or 4 bytes per token for a nested entry with few tokens, plus 16
/// bytes per frontier node: about 250 full entries of a 128k vocabulary), and entries not
/// replayed yet at most `unproven_bytes_max`. Most states are visited once (each position
/// inside a bounded string is a new state): their entries are dropped oldest first to make
/// room for new ones, while an entry replayed once is kept for the grammar's life.
pub const WalkCache = struct {
    entries: std.HashMapUnmanaged(Key, Entry, KeyContext, std.hash_map.default_max_load_percentage) = .empty,
    /// Keys of the entries not replayed yet, oldest first from `unproven_head` (keys of
    /// entries since replayed or dropped are skipped when met).
    unproven: std.ArrayList(Key) = .empty,
    unproven_head: usize = 0,
    bytes: usize = 0,
    unproven_bytes: usize = 0,
    /// The recording walk's frontier, reused: most recordings are not kept.
    scratch_frontier: std.ArrayList(Frontier) = .empty,
    /// A nested recording's own tokens, apart from the mask the replay fills (reused).
    scratch_mask: []u32 = &.{},
    /// A slice whose rest trie has fewer nodes is walked directly (a walk of 10,000-30,000
    /// nodes costs about what copying an entry and walking its frontier does); larger rest
    /// tries (the ≤8-byte text slice, the word slice: 144,000-207,000 nodes on Llama-3) go
    /// through the cache. A field so that tests can send every slice through the cache.
    rest_nodes_min: usize = default_rest_nodes_min,
    /// Fields so that tests can make the cache keep small walks, nest small subtrees and evict.
    record_tokens_min: usize = default_record_tokens_min,
    nested_nodes_min: usize = default_nested_nodes_min,
    /// Nested entries with at least this many tokens keep a whole mask (null: a quarter of
    /// the mask's words), the others a list of ids.
    nested_mask_tokens_min: ?usize = null,
    bytes_max: usize = default_bytes_max,
    unproven_bytes_max: usize = default_unproven_bytes_max,
    /// Masks served by replaying an entry, nested entries replayed, and entries dropped (for
    /// tests and measurements).
    replays: u64 = 0,
    nested_replays: u64 = 0,
    dropped: u64 = 0,

    pub const default_rest_nodes_min: usize = 64 * 1024;
    pub const default_bytes_max: usize = 4 << 20;
    pub const default_unproven_bytes_max: usize = 1 << 20;
    /// Walks worth less are not kept: the tokens they allowed plus 16 per frontier node (a
    /// parser step costs about what 16 nodes do, and a replay refuses most of them by a table
    /// lookup), less the nodes of the frontier subtrees a replay walks. A JSON value after
    /// `": "` allows a few thousand tokens but asks the parser at every child of the space
    /// (~15 µs a walk, ~4 µs a replay). 16,384 kept too few: tool-call argument masks 10 µs
    /// on average, 6 µs with 4,096.
    pub const default_record_tokens_min: usize = 4 * 1024;
    /// Frontier subtrees of fewer nodes are walked on replay: a walk of 1,000 nodes (~4 µs)
    /// costs about what a lookup and a few hundred tokens set do. (`bench cfg`, Llama-3:
    /// the C-like grammar's masks 165 µs on average with 1,024, 460 with 4,096, 138 with 256.)
    pub const default_nested_nodes_min: usize = 1024;
    /// What a parser step costs a walk, in trie nodes visited (`record_tokens_min`).
    const parser_step_nodes = 16;

    /// The slice's tag (0: none; an entry's frontier indexes its slice's rest trie), the
    /// tokenizer's serial, the frontier node plus one (0: the walk from the top of the trie
    /// or of a slice's rest trie) and the lexer state the walk starts from.
    const Key = u128;

    const KeyContext = struct {
        pub fn hash(_: KeyContext, key: Key) u64 {
            const low: u64 = @truncate(key);
            const high: u64 = @truncate(key >> 64);
            return regex.IntContext(u64).hash(.{}, low ^ (high *% 0xC2B2_AE3D_27D4_EB4F));
        }
        pub fn eql(_: KeyContext, a: Key, b: Key) bool {
            return a == b;
        }
    };

    fn keyOf(slice: ?*const slicer.Slice, serial: u32, below: ?u32, state: StateId) Key {
        const node: u64 = if (below) |n| @as(u64, n) + 1 else 0;
        const tag: Key = if (slice) |s| s.tag else 0;
        return tag << 96 | @as(Key, serial) << 64 | @as(Key, node) << 32 | state.offset();
    }

    const Entry = struct {
        /// The tokens the lexer alone allows: a whole mask (a root entry's, or a nested one's
        /// with many), else their ids.
        mask: []u32 = &.{},
        tokens: []u32 = &.{},
        frontier: []Frontier,
        /// Replayed at least once: kept.
        proven: bool = false,
        /// A walk not worth an entry, remembered so that later visits walk without
        /// recording it again; no tokens, no frontier.
        plain: bool = false,
        /// The bytes of the frontier nodes reached from the entry's own lexer state (not
        /// `after`): a replay refuses those neither it nor the next lexeme goes on with by a
        /// bit test (`replay`).
        first_bytes: lexer_mod.ByteSet = @splat(0),

        fn bytes(self: Entry) usize {
            if (self.plain) return plain_entry_bytes;
            return (self.mask.len + self.tokens.len) * 4 + self.frontier.len * @sizeOf(Frontier) + @sizeOf(lexer_mod.ByteSet);
        }

        /// `first_bytes` of a recorded frontier over `nodes`, walked from `state`.
        fn firstBytes(frontier: []const Frontier, nodes: []const Node, state: StateId) lexer_mod.ByteSet {
            var set: lexer_mod.ByteSet = @splat(0);
            for (frontier) |f| {
                if (f.after or f.state != state) continue;
                const b = nodes[f.node].byte;
                set[b >> 6] |= @as(u64, 1) << @intCast(b & 63);
            }
            return set;
        }

        /// What a plain entry is counted as: about its slot in the map.
        const plain_entry_bytes = 64;

        fn free(self: Entry, gpa: Allocator) void {
            gpa.free(self.mask);
            gpa.free(self.tokens);
            gpa.free(self.frontier);
        }
    };

    /// A frontier node, the lexer state before its byte, and its depth below the walk's start
    /// (the bytes before it, which distinct lists may need: `earley.Parser.text_hole`). With
    /// `after`, a node the lexer alone allows whose byte reached `state`, a final state: its
    /// children, which all end the lexeme, are the frontier (`Recorder.note`).
    /// `taken`: the recording walk's parser took the byte (else nothing below was allowed).
    pub const Frontier = struct { node: u32, state: StateId, depth: u32, after: bool = false, taken: bool = true };

    comptime {
        assert(@sizeOf(Frontier) == 16); // (the budgets' figures)
    }

    pub fn deinit(self: *WalkCache, gpa: Allocator) void {
        var it = self.entries.valueIterator();
        while (it.next()) |entry| entry.free(gpa);
        self.entries.deinit(gpa);
        self.unproven.deinit(gpa);
        self.scratch_frontier.deinit(gpa);
        gpa.free(self.scratch_mask);
        self.* = undefined;
    }

    /// Sets in `mask` (all zeros) every token allowed from `from`, which `walkTrie` over the
    /// whole trie would set; `slice` is the slice `from` allows, if any, its tokens then
    /// copied and only its rest trie walked. `from` is past any lexeme nothing extends
    /// (`afterFinal`: the caller's first step), so its entries are keyed by states that recur.
    fn walk(self: *WalkCache, gpa: Allocator, tokenizer: *const Tokenizer, parser: *earley.Parser, from: Position, slice: ?*const slicer.Slice, mask: []u32) Error!void {
        const nodes = if (slice) |s| s.rest.nodes else tokenizer.trie.nodes;
        const top = if (slice) |s| s.rest.top else tokenizer.trie.top;
        // A state's slice is a function of the state (but for tests, which turn slices off),
        // and the key holds it: an entry's frontier indexes the trie it was recorded over.
        const nested = slice == null and parser.cfg.distinct_pos.len == 0;
        const key = keyOf(slice, tokenizer.serial, null, from.lexer_state);
        const known = self.entries.getPtr(key);
        if (known) |entry| {
            self.prove(entry);
            if (!entry.plain) {
                self.replays += 1;
                // (The entry's mask holds the slice's tokens: the replay copies it.)
                return self.replay(gpa, tokenizer.serial, entry.*, nodes, 0, parser, from, mask, nested, true);
            }
        }
        if (slice) |s| @memcpy(mask, s.mask);
        if (known != null) return walkTrieTop(nodes, top, parser, from, mask); // (plain: not worth recording, `keepPlain`)
        if (self.full(mask.len)) return walkTrieTop(nodes, top, parser, from, mask);
        const recorder = try self.recordingWalk(gpa, nodes, parser, from, mask, if (nested) self.nested_nodes_min else std.math.maxInt(usize));
        // Worth keeping when the walk allowed many tokens (it visited at least as many nodes),
        // and the frontier's subtrees a replay walks are under a quarter of the trie: otherwise
        // a replay costs about what the walk did. (The tokens of subtrees a replay takes
        // through nested entries count: those entries are kept on the same terms. With
        // `record_tokens_min` 0, as in tests, every walk is kept.) Not the quarter for an open
        // slice: its rest trie is small (~1,500 nodes on Llama-3) and free text's frontier,
        // the tokens that could end it, is much of it near a stop string, yet a replay still
        // costs less than a walk (`bench tools`' free-text steps at `<think` and after
        // `</think>`: 13-16 µs replayed, 20 as plain entries; without the slice, 13-16).
        if (self.record_tokens_min > 0) {
            const open_slice = slice != null and slice.?.family == null;
            if (recorder.walked > nodes.len / 4 and !open_slice) return self.keepPlain(gpa, key);
            // Every eighth word of the mask estimates the tokens allowed: a full count costs
            // a few µs, which most walks (a position inside a short string) would pay.
            var sampled: usize = 0;
            var i: usize = 0;
            while (i < mask.len) : (i += 8) sampled += @popCount(mask[i]);
            if (sampled * 8 + recorder.frontier.items.len * parser_step_nodes < self.record_tokens_min + recorder.walked) return self.keepPlain(gpa, key);
        }
        const size = mask.len * 4 + recorder.frontier.items.len * @sizeOf(Frontier);
        if (!self.makeRoom(gpa, size)) return;
        // The entry's tokens are the mask's but for the frontier's subtrees: a token id sits
        // at one trie node, and the walk reached every node outside those subtrees with the
        // start's row, so the lexer alone kept their tokens. (Clearing the dummy bit of nodes
        // without a token does no harm: the matcher clears it anyway.)
        const entry_mask = try gpa.dupe(u32, mask);
        clearFrontier(entry_mask, recorder.frontier.items, nodes);
        const frontier = gpa.dupe(Frontier, recorder.frontier.items) catch |err| {
            gpa.free(entry_mask);
            return err;
        };
        try self.keep(gpa, key, .{ .mask = entry_mask, .frontier = frontier, .first_bytes = Entry.firstBytes(frontier, nodes, from.lexer_state) });
    }

    /// Whether the entries replayed fill the budget (no entry of a `words`-word mask fits):
    /// new walks are then not recorded.
    fn full(self: *const WalkCache, words: usize) bool {
        return self.bytes + words * 4 > self.bytes_max and self.unproven_head == self.unproven.items.len;
    }

    /// `walkTrie` from `from` into `out`, noting its frontier (subtrees of more than
    /// `nested_nodes_min` nodes nested). The recorder's list is the reused scratch list: read
    /// it before the next recording.
    fn recordingWalk(self: *WalkCache, gpa: Allocator, nodes: []const Node, parser: *earley.Parser, from: Position, out: []u32, nested_nodes_min: usize) Error!Recorder {
        var recorder: Recorder = .{ .gpa = gpa, .frontier = self.scratch_frontier, .nodes = nodes, .nested_nodes_min = nested_nodes_min };
        recorder.frontier.clearRetainingCapacity();
        defer self.scratch_frontier = recorder.frontier; // (its capacity, grown or not)
        walk_recorder = &recorder;
        defer walk_recorder = null;
        try walkTrie(nodes, parser, from, out);
        return recorder;
    }

    /// `at`, or where a walk from it really starts: a lexeme that nothing can extend (a
    /// literal's last byte) ends at every byte, so the walk goes on from the next lexeme's
    /// start, the state the walk reaches for each byte anyway; null when the parser refuses
    /// the lexeme's end (nothing below is allowed). Keeps the cache keyed by states that
    /// recur (a row's start state).
    fn afterFinal(parser: *earley.Parser, at: Position) Error!?Position {
        const lexer = parser.lexer;
        if (at.lexer_state == parser.rows.items[at.row.index()].lexer_start or
            !lexer.isAccepting(at.lexer_state) or !try lexer.isFinal(at.lexer_state)) return at;
        const r = try endedRow(parser, at) orelse return null;
        return .{ .lexer_state = parser.rows.items[r.index()].lexer_start, .row = r, .lexeme_token_index = parser.token_index, .text_len = at.text_len };
    }

    /// The start state of the lexeme after the one `at` ends, as `earley.Parser.stepByte`
    /// finds it for a byte the lexeme cannot take; null when it refuses every such byte.
    fn nextLexemeStart(parser: *earley.Parser, at: Position) Error!?StateId {
        const r = try endedRow(parser, at) orelse return null;
        return parser.rows.items[r.index()].lexer_start;
    }

    /// The row after the lexeme in progress at `at` ends there; null when there is none in
    /// progress, it cannot end here, or the parser refuses it.
    fn endedRow(parser: *earley.Parser, at: Position) Error!?earley.RowId {
        if (at.lexer_state == parser.rows.items[at.row.index()].lexer_start) return null;
        if (!parser.lexer.isAccepting(at.lexer_state)) return null;
        return parser.endLexeme(at.row, at.lexer_state, at.text_len);
    }

    /// Clears the tokens of `frontier`'s subtrees in `mask` (below an `after` node: its own
    /// token is the lexer's), those the walk entered: a refused one holds none, and may be
    /// most of the trie (a space after a number), which clearing cost ~150 µs.
    fn clearFrontier(mask: []u32, frontier: []const Frontier, nodes: []const Node) void {
        for (frontier) |f| {
            if (!f.taken) continue;
            const first = f.node + @intFromBool(f.after);
            for (nodes[first .. f.node + nodes[f.node].subtree_size]) |node| {
                mask[node.token >> 5] &= ~(@as(u32, 1) << @intCast(node.token & 31));
            }
        }
    }

    fn prove(self: *WalkCache, entry: *Entry) void {
        if (!entry.proven) {
            entry.proven = true;
            self.unproven_bytes -= entry.bytes();
        }
    }

    /// Adds `entry` under `key` (its room made), unproven; frees it on failure.
    fn keep(self: *WalkCache, gpa: Allocator, key: Key, entry: Entry) Error!void {
        errdefer entry.free(gpa);
        try self.unproven.ensureUnusedCapacity(gpa, 1);
        try self.entries.putNoClobber(gpa, key, entry);
        self.unproven.appendAssumeCapacity(key);
        self.bytes += entry.bytes();
        self.unproven_bytes += entry.bytes();
    }

    /// Remembers that the walk of `key` is not worth recording (when there is room).
    fn keepPlain(self: *WalkCache, gpa: Allocator, key: Key) Error!void {
        if (!self.makeRoom(gpa, Entry.plain_entry_bytes)) return;
        try self.keep(gpa, key, .{ .frontier = &.{}, .plain = true });
    }

    /// Drops unproven entries, oldest first, until an entry of `size` bytes fits both budgets;
    /// false when it cannot.
    fn makeRoom(self: *WalkCache, gpa: Allocator, size: usize) bool {
        while (self.bytes + size > self.bytes_max or self.unproven_bytes + size > self.unproven_bytes_max) {
            if (self.unproven_head == self.unproven.items.len) return false;
            const key = self.unproven.items[self.unproven_head];
            self.unproven_head += 1;
            // Skip keys of entries replayed since they were queued.
            const entry = (self.entries.getPtr(key) orelse continue).*;
            if (entry.proven) continue;
            assert(self.entries.remove(key));
            self.bytes -= entry.bytes();
            self.unproven_bytes -= entry.bytes();
            entry.free(gpa);
            self.dropped += 1;
        }
        // Forget the queue's consumed part once it is most of the queue.
        if (self.unproven_head > 64 and self.unproven_head * 2 > self.unproven.items.len) {
            const rest = self.unproven.items[self.unproven_head..];
            std.mem.copyForwards(Key, self.unproven.items[0..rest.len], rest);
            self.unproven.shrinkRetainingCapacity(rest.len);
            self.unproven_head = 0;
        }
        return true;
    }

    /// A mask from a recorded entry: its tokens (copied into `mask` for a root entry, added
    /// for a nested one), then the frontier's subtrees with the parser, large ones through
    /// nested entries when `nested`. `nodes` is the trie the entry was recorded on, `base` the
    /// index of its first node in the whole trie (nested keys). The entry stays while this
    /// runs: it is proven, and only unproven entries are dropped.
    fn replay(self: *WalkCache, gpa: Allocator, serial: u32, entry: Entry, nodes: []const Node, base: u32, parser: *earley.Parser, from: Position, mask: []u32, nested: bool, root: bool) Error!void {
        if (root) {
            @memcpy(mask, entry.mask);
        } else if (entry.mask.len > 0) {
            for (mask, entry.mask) |*word, own| word.* |= own;
        } else {
            for (entry.tokens) |t| mask[t >> 5] |= @as(u32, 1) << @intCast(t & 31);
        }
        const distinct_lists = parser.cfg.distinct_pos.len > 0;
        defer parser.text_hole = null;
        // Most frontier nodes end the lexeme on a byte no next lexeme starts with (a word
        // followed by punctuation the grammar refuses there). Ending the lexeme gives the
        // same row for every node of the same state (the walk's row, the same lexer state):
        // its start state is kept for the last state met, and a byte that is dead from it
        // is refused without the parser. (Rows read no text without distinct lists.) Not
        // `EndMemo`: it checks that no row was built since, as a walk's rows change, while the
        // replay's row stays, and the walks between frontier nodes build rows: ending the
        // lexeme again after each, `start: (WORD " ")*` took 44 µs a mask instead of 21.
        const lexer = parser.lexer;
        var ended_state: StateId = .missing;
        var ended_start: ?StateId = null;
        // The frontier nodes from the entry's own state (most of them: every first byte
        // after a number) refused at once: their bytes the state does not go on with, less
        // those the next lexeme may start with.
        var refused: lexer_mod.ByteSet = @splat(0);
        if (!distinct_lists) {
            const live = try liveAmong(parser, from, entry.first_bytes);
            for (&refused, entry.first_bytes, live.bytes) |*out, there, alive| out.* = there & ~alive;
            if (live.ended) {
                ended_state = from.lexer_state;
                ended_start = live.ended_start;
            }
        }
        for (entry.frontier) |f| {
            if (f.state == from.lexer_state and !f.after) {
                const b = nodes[f.node].byte;
                if (refused[b >> 6] >> @intCast(b & 63) & 1 != 0) continue;
            }
            const at: Position = .{ .lexer_state = f.state, .row = from.row, .lexeme_token_index = from.lexeme_token_index, .text_len = from.text_len + f.depth };
            const subtree = nodes[f.node..][0..nodes[f.node].subtree_size];
            if (f.after) {
                // The node's token is in the entry; its children start from `f.state`.
                const below: Position = .{ .lexer_state = f.state, .row = from.row, .lexeme_token_index = from.lexeme_token_index, .text_len = at.text_len + 1 };
                try self.walkBelow(gpa, serial, subtree, base + f.node, parser, below, mask);
                continue;
            }
            if (!distinct_lists and try lexer.next(f.state, subtree[0].byte) == .dead) {
                if (ended_state != f.state) {
                    ended_state = f.state;
                    ended_start = try nextLexemeStart(parser, at);
                }
                const next_start = ended_start orelse continue;
                if (try lexer.next(next_start, subtree[0].byte) == .dead) continue;
            }
            if (nested and subtree.len > self.nested_nodes_min) {
                // What the walk does at the node (the lexeme ends: the parser steps over the
                // byte), then the children through their own entry.
                const q = try parser.stepByte(at, subtree[0].byte) orelse continue;
                mask[subtree[0].token >> 5] |= @as(u32, 1) << @intCast(subtree[0].token & 31);
                try self.walkBelow(gpa, serial, subtree, base + f.node, parser, q, mask);
                continue;
            }
            if (distinct_lists) {
                try parser.reserveText(@as(usize, at.text_len) + trie_mod.token_length_max + 1);
                parser.text_hole = .{ .start = from.text_len, .len = f.depth, .nodes = nodes, .node = f.node };
            }
            try walkTrie(subtree, parser, at, mask);
        }
    }

    /// Adds to `mask` the tokens below the top node of `subtree` (the whole trie's node
    /// `index`) allowed from `at`, the position after the node's byte: through the entry of
    /// (`index`, state), else by a walk that records one.
    fn walkBelow(self: *WalkCache, gpa: Allocator, serial: u32, subtree: []const Node, index: u32, parser: *earley.Parser, at: Position, mask: []u32) Error!void {
        const children = subtree[1..];
        if (children.len == 0) return;
        const from = try afterFinal(parser, at) orelse return;
        const key = keyOf(null, serial, index, from.lexer_state);
        if (self.entries.getPtr(key)) |entry| {
            self.prove(entry);
            if (entry.plain) return walkTrie(children, parser, from, mask);
            self.nested_replays += 1;
            return self.replay(gpa, serial, entry.*, children, index + 1, parser, from, mask, true, false);
        }
        if (self.full(mask.len)) return walkTrie(children, parser, from, mask);
        // The walk's own tokens apart from `mask`, which holds other subtrees'. (No replay
        // runs inside a recording walk, so one scratch mask serves.)
        if (self.scratch_mask.len != mask.len) {
            gpa.free(self.scratch_mask);
            self.scratch_mask = &.{};
            self.scratch_mask = try gpa.alloc(u32, mask.len);
        }
        const own = self.scratch_mask;
        @memset(own, 0);
        const recorder = try self.recordingWalk(gpa, children, parser, from, own, self.nested_nodes_min);
        for (mask, own) |*word, o| word.* |= o;
        // Kept on the root entries' terms, the tokens counted in full (a recording is rare)
        // and at least a quarter of `nested_nodes_min`; a walk not kept is remembered as
        // plain, so that later replays do not record it again.
        if (self.record_tokens_min > 0) {
            if (recorder.walked > children.len / 4) return self.keepPlain(gpa, key);
            var allowed: usize = 0;
            for (own) |word| allowed += @popCount(word);
            if (allowed < self.nested_nodes_min / 4 + recorder.walked) return self.keepPlain(gpa, key);
        }
        clearFrontier(own, recorder.frontier.items, children);
        var count: usize = 0;
        for (own) |word| count += @popCount(word);
        // A whole mask where ORing it costs less than setting the bits one by one.
        const as_mask = count >= self.nested_mask_tokens_min orelse own.len / 4;
        const size = (if (as_mask) own.len else count) * 4 + recorder.frontier.items.len * @sizeOf(Frontier);
        if (!self.makeRoom(gpa, size)) return;
        var entry: Entry = .{ .frontier = &.{} };
        if (as_mask) {
            entry.mask = try gpa.dupe(u32, own);
        } else {
            entry.tokens = try gpa.alloc(u32, count);
            var n: usize = 0;
            for (own, 0..) |word, w| {
                var bits = word;
                while (bits != 0) : (bits &= bits - 1) {
                    entry.tokens[n] = @intCast(w * 32 + @ctz(bits));
                    n += 1;
                }
            }
        }
        entry.frontier = gpa.dupe(Frontier, recorder.frontier.items) catch |err| {
            entry.free(gpa);
            return err;
        };
        entry.first_bytes = Entry.firstBytes(entry.frontier, children, from.lexer_state);
        try self.keep(gpa, key, entry);
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

/// Token ids from integer literals.
fn ids(comptime values: []const u32) []const TokenId {
    const result = comptime blk: {
        var out: [values.len]TokenId = undefined;
        for (values, &out) |v, *id| id.* = .fromIndex(v);
        break :blk out;
    };
    return &result;
}

/// The IR words of the one-lexeme grammar `S → /pattern/`.
fn regexIr(gpa: Allocator, pattern: []const u8) !std.ArrayList(u32) {
    return booleanIr(gpa, pattern, &.{});
}

/// The IR words of `S → L` where L matches `pattern` but none of `excluded`.
fn booleanIr(gpa: Allocator, pattern: []const u8, excluded: []const []const u8) !std.ArrayList(u32) {
    var words: std.ArrayList(u32) = .empty;
    errdefer words.deinit(gpa);
    const lexeme_flags: u32 = if (excluded.len > 0) 2 else 0;
    try words.appendSlice(gpa, &.{ ir_reader.ir_magic, 1, 1, 1, 0, 0, 0, lexeme_flags });
    try ir_reader.appendIrBytes(gpa, &words, pattern);
    if (excluded.len > 0) {
        try words.appendSlice(gpa, &.{ 0, @intCast(excluded.len) });
        for (excluded) |x| try ir_reader.appendIrBytes(gpa, &words, x);
    }
    try words.appendSlice(gpa, &.{ 0, 1, 0 });
    return words;
}

const TestSetup = struct {
    tokenizer: *Tokenizer,
    grammar: *Grammar,
    matcher: *Matcher,

    fn init(gpa: Allocator, tokens: []const []const u8, pattern: []const u8) !TestSetup {
        return initExcluding(gpa, tokens, pattern, &.{});
    }

    fn initExcluding(gpa: Allocator, tokens: []const []const u8, pattern: []const u8, excluded: []const []const u8) !TestSetup {
        var words = try booleanIr(gpa, pattern, excluded);
        defer words.deinit(gpa);
        return initTokenizer(gpa, try testTokenizer(gpa, tokens), words.items);
    }

    /// A tokenizer of `tokens`, the last one `<eos>`.
    fn testTokenizer(gpa: Allocator, tokens: []const []const u8) !*Tokenizer {
        return testTokenizerEos(gpa, tokens, &.{.fromIndex(@intCast(tokens.len - 1))});
    }

    /// A tokenizer of `tokens` (those that begin with `<` special) with these EOS ids.
    fn testTokenizerEos(gpa: Allocator, tokens: []const []const u8, eos: []const TokenId) !*Tokenizer {
        var blob: std.ArrayList(u8) = .empty;
        defer blob.deinit(gpa);
        var offsets: std.ArrayList(u32) = .empty;
        defer offsets.deinit(gpa);
        var kinds: std.ArrayList(u8) = .empty;
        defer kinds.deinit(gpa);
        try offsets.append(gpa, 0);
        for (tokens) |t| {
            try blob.appendSlice(gpa, t);
            try offsets.append(gpa, @intCast(blob.items.len));
            try kinds.append(gpa, if (t.len > 1 and t[0] == '<') 1 else 0);
        }
        return Tokenizer.create(gpa, blob.items, offsets.items, kinds.items, eos);
    }

    /// A grammar from IR words and its matcher, over a tokenizer that the setup then owns.
    fn initTokenizer(gpa: Allocator, tokenizer: *Tokenizer, words: []const u32) !TestSetup {
        errdefer tokenizer.release(gpa);
        var diag: ir_reader.CompileDiagnostic = .{};
        const grammar = try Grammar.create(gpa, words, .{}, null, &diag);
        errdefer grammar.release(gpa);
        const matcher = try Matcher.create(gpa, tokenizer, grammar);
        return .{ .tokenizer = tokenizer, .grammar = grammar, .matcher = matcher };
    }

    fn deinit(self: *TestSetup, gpa: Allocator) void {
        self.matcher.destroy();
        self.grammar.release(gpa);
        self.tokenizer.release(gpa);
    }

    fn allowed(self: *TestSetup, id: u32) bool {
        return (self.matcher.mask[id >> 5] >> @intCast(id & 31)) & 1 != 0;
    }
};

test "mask, consume, rollback and EOS over a tiny vocabulary" {
    const gpa = std.testing.allocator;
    const vocab = [_][]const u8{ "1", "12", "123", "1234", "a", "2", "<eos>" };
    var t = try TestSetup.init(gpa, &vocab, "[0-9]{1,3}");
    defer t.deinit(gpa);
    const m = t.matcher;
    try m.computeMask();
    const expected_start = [_]bool{ true, true, true, false, false, true, false };
    for (expected_start, 0..) |want, id| try std.testing.expectEqual(want, t.allowed(@intCast(id)));
    try std.testing.expectEqual(@as(u32, 1), try m.consume(ids(&.{1}), .commit)); // "12"
    try m.computeMask();
    const expected_after = [_]bool{ true, false, false, false, false, true, true };
    for (expected_after, 0..) |want, id| try std.testing.expectEqual(want, t.allowed(@intCast(id)));
    try std.testing.expect(m.isAccepting());
    try std.testing.expect(!try m.isStopped());
    try std.testing.expectEqual(@as(u32, 0), try m.consume(ids(&.{2}), .commit)); // "123" too long
    try std.testing.expectEqual(@as(u32, 1), m.tokenCount());
    try std.testing.expectEqual(@as(u32, 1), try m.consume(ids(&.{5}), .commit)); // "2": "122"
    try std.testing.expect(try m.isStopped()); // only EOS can follow
    try std.testing.expectEqual(@as(u32, 1), try m.consume(ids(&.{6}), .commit)); // EOS
    try std.testing.expect(try m.isStopped());
    try m.computeMask();
    for (0..6) |id| try std.testing.expect(!t.allowed(@intCast(id)));
    try std.testing.expect(t.allowed(6));
    // After EOS nothing more is consumed (EOS included), and the refusal keeps the EOS: it
    // once rolled the EOS back while reporting nothing consumed.
    try std.testing.expectEqual(@as(u32, 0), try m.consume(ids(&.{6}), .commit));
    try std.testing.expectEqual(@as(u32, 0), try m.consume(ids(&.{0}), .commit));
    try std.testing.expectEqual(@as(u32, 3), m.tokenCount());
    try std.testing.expect(try m.isStopped());
    try std.testing.expect(m.rollback(2));
    try std.testing.expectEqual(@as(u32, 1), m.tokenCount());
    try std.testing.expect(!try m.isStopped());
    try std.testing.expect(!m.rollback(5));
}

test "a tokenizer with other EOS ids shares its base's tables and masks like one built alone" {
    const gpa = std.testing.allocator;
    const tokens = [_][]const u8{ "1", "12", "123", "a", "2", "<eos>", "<stop>" };
    const eos = [_]TokenId{.fromIndex(5)};
    const stop = [_]TokenId{ .fromIndex(6), .fromIndex(4) }; // a text token may stop too
    const base = try TestSetup.testTokenizerEos(gpa, &tokens, &eos);
    const alone = try TestSetup.testTokenizerEos(gpa, &tokens, &stop);
    defer alone.release(gpa);
    const variant = try Tokenizer.withEos(gpa, base, &stop);
    defer variant.release(gpa);
    // A variant of a variant shares the tables' owner.
    const again = try Tokenizer.withEos(gpa, variant, &eos);
    try std.testing.expect(again.base == base and again.trie.nodes.ptr == base.trie.nodes.ptr);
    again.release(gpa);
    try std.testing.expectError(error.InvalidEos, Tokenizer.withEos(gpa, base, &.{.fromIndex(7)}));

    var words = try booleanIr(gpa, "[0-9]{1,3}", &.{});
    defer words.deinit(gpa);
    var diag: ir_reader.CompileDiagnostic = .{};
    const grammar = try Grammar.create(gpa, words.items, .{}, null, &diag);
    defer grammar.release(gpa);
    // The base's matcher walks first, so the variant's masks replay the grammar's walk cache.
    const on_base = try Matcher.create(gpa, base, grammar);
    defer on_base.destroy();
    base.release(gpa); // the matcher and the variant keep the tables alive
    const on_variant = try Matcher.create(gpa, variant, grammar);
    defer on_variant.destroy();
    const on_alone = try Matcher.create(gpa, alone, grammar);
    defer on_alone.destroy();
    const steps = [_]u32{ 0, 0, 0 }; // "111": then only EOS
    for (0..steps.len + 1) |step| {
        for (0..2) |_| try on_base.computeMask();
        try on_variant.computeMask();
        try on_alone.computeMask();
        try std.testing.expectEqualSlices(u32, on_alone.mask, on_variant.mask);
        if (step == steps.len) break;
        const token = [_]TokenId{.fromIndex(steps[step])};
        for ([_]*Matcher{ on_base, on_variant, on_alone }) |m| {
            try std.testing.expectEqual(@as(u32, 1), try m.consume(&token, .commit));
        }
    }
    // Only EOS is left: the variant's stop ids (the text token "2" among them), not the base's.
    try std.testing.expectEqual(@as(u32, 1 << 4 | 1 << 6), on_variant.mask[0]);
    try std.testing.expectEqual(@as(u32, 1 << 5), on_base.mask[0]);
}

test "a nullable regex: EOS at the start, then the non-empty part" {
    const gpa = std.testing.allocator;
    const vocab = [_][]const u8{ "x", "xx", "<eos>" };
    var t = try TestSetup.init(gpa, &vocab, "x*");
    defer t.deinit(gpa);
    try t.matcher.computeMask();
    try std.testing.expect(t.allowed(0) and t.allowed(1) and t.allowed(2));
    try std.testing.expectEqual(@as(u32, 2), try t.matcher.consume(ids(&.{ 1, 0 }), .commit));
    try t.matcher.computeMask();
    try std.testing.expect(t.allowed(0) and t.allowed(2));
}

test "forced bytes stop at a choice or an accepting state" {
    const gpa = std.testing.allocator;
    const vocab = [_][]const u8{ "a", "<eos>" };
    var t = try TestSetup.init(gpa, &vocab, "hello (world|there)!");
    defer t.deinit(gpa);
    var buf: [64]u8 = undefined;
    const n = try t.matcher.forcedBytes(&buf);
    try std.testing.expectEqualStrings("hello ", buf[0..n]);
}

/// Builds a tokenizer, grammar and matcher with `gpa` and runs each kind of step once.
fn exerciseMatcher(gpa: Allocator) !void {
    const vocab = [_][]const u8{ "1", "12", "a", "ab", "x", "\"", "<eos>" };
    var t = try TestSetup.init(gpa, &vocab, "([0-9]{1,3}x|ab)+\"");
    defer t.deinit(gpa);
    const m = t.matcher;
    try m.computeMask();
    _ = try m.consume(ids(&.{ 1, 4 }), .commit);
    const copy = try m.fork();
    copy.destroy();
    try m.computeMask();
    var out: [16]u8 = undefined;
    _ = try m.forcedBytes(&out);
    _ = try m.healPosition("ab", 0);
    _ = m.rollback(1);
}

/// Masks through the walk cache with every walk kept and every frontier subtree nested: each
/// position's first mask records an entry, the second replays it and records nested entries
/// (and `after` nodes' children: a literal's last byte), the third replays those.
fn exerciseWalkCache(gpa: Allocator) !void {
    const vocab = [_][]const u8{ "a", "b", "-", "{", "}", "ab", "ba", "a-", "a-b", "-a", "-ab", "-{", "-{a", "ab-", "ab-a", "}-", "}-a", "{a", "{ab", "<eos>" };
    var t = try nestedListSetup(gpa, &vocab, "[a-z]+", 0);
    defer t.deinit(gpa);
    const cache = &t.grammar.walk_cache;
    cache.record_tokens_min = 0;
    cache.nested_nodes_min = 0;
    const m = t.matcher;
    for ([_]u32{ 0, 1, 2, 3, 0, 2, 1, 4, 2, 0 }) |id| { // a b - { a - b } - a
        for (0..3) |_| {
            m.mask_key = null;
            try m.computeMask();
        }
        try std.testing.expectEqual(@as(u32, 1), try m.consume(&.{.fromIndex(id)}, .commit));
    }
    try std.testing.expect(cache.replays > 0 and cache.nested_replays > 0);
}

test "every allocation failure in the walk cache's nested entries is freed exactly once" {
    try exerciseWalkCache(std.testing.allocator);
    try std.testing.checkAllAllocationFailures(NoRemap.allocator, exerciseWalkCache, .{});
}

test "every allocation failure in a matcher's life is freed exactly once" {
    try std.testing.checkAllAllocationFailures(NoRemap.allocator, exerciseMatcher, .{});
}

/// The testing allocator without growing in place: whether that succeeds depends on what
/// earlier runs left in the testing allocator; refusing it makes every run allocate the same
/// way, as `checkAllAllocationFailures` needs.
const NoRemap = struct {
    const allocator: Allocator = .{ .ptr = undefined, .vtable = &.{
        .alloc = alloc,
        .resize = std.mem.Allocator.noResize,
        .remap = std.mem.Allocator.noRemap,
        .free = free,
    } };

    fn alloc(_: *anyopaque, len: usize, alignment: std.mem.Alignment, ra: usize) ?[*]u8 {
        return std.testing.allocator.rawAlloc(len, alignment, ra);
    }
    fn free(_: *anyopaque, memory: []u8, alignment: std.mem.Alignment, ra: usize) void {
        std.testing.allocator.rawFree(memory, alignment, ra);
    }
};

/// A vocabulary for slicer tests: every single byte (id = byte), then `count` random tokens of
/// 2–40 bytes built from text, quotes, backslashes, control bytes, whole and partial UTF-8
/// characters, then `<eos>`.
fn slicerTestVocab(arena: Allocator, count: u32) ![]const []const u8 {
    // Text pieces are drawn more often, so most tokens are text and the slices are large.
    const text_pieces = [_][]const u8{ "a", "b", "e", "m", "n", " ", "z", "-", "{", "0", "A", "_", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xe4\xb8\xad" };
    const other_pieces = [_][]const u8{ "\"", "\\", "\n", "\x7f", "\xc3", "\xa9", "\xe2\x82", "\xff" };
    const pieces = text_pieces ++ other_pieces;
    const text_piece_count = text_pieces.len;
    var tokens: std.ArrayList([]const u8) = .empty;
    for (0..256) |b| try tokens.append(arena, try arena.dupe(u8, &.{@intCast(b)}));
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const random = prng.random();
    for (0..count) |_| {
        const len = random.intRangeAtMost(usize, 2, 40);
        var token: std.ArrayList(u8) = .empty;
        while (token.items.len < len) {
            const i = if (random.uintLessThan(u32, 10) < 9) random.uintLessThan(usize, text_piece_count) else random.uintLessThan(usize, pieces.len);
            try token.appendSlice(arena, pieces[i]);
        }
        try tokens.append(arena, token.items[0..@min(token.items.len, 40)]);
    }
    try tokens.append(arena, "<eos>");
    return tokens.items;
}

const ecma_space = "[\\t-\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}]";
const ecma_non_space = "[^\\t-\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}]";

const SlicerCase = struct {
    pattern: []const u8,
    excluded: []const []const u8 = &.{},
    text: []const u8,
    /// Some step must use a slice (so the case tests the slicer, not only the walk).
    sliced: bool,
    /// Some step must use a slice of this family.
    family: ?slicer.Family = null,
};

/// Feeds byte `i` of a test case's `text` to `m`, naming the case when the grammar refuses it.
fn consumeTestByte(m: *Matcher, name: []const u8, text: []const u8, i: usize) !void {
    std.testing.expectEqual(@as(u32, 1), try m.consume(&.{.fromIndex(text[i])}, .commit)) catch |err| {
        std.debug.print("case {s}: byte {d} refused\n", .{ name, i });
        return err;
    };
}

/// The byte set of `bytes`.
fn testByteSet(bytes: []const u8) lexer_mod.ByteSet {
    var set: lexer_mod.ByteSet = @splat(0);
    for (bytes) |b| set[b >> 6] |= @as(u64, 1) << @intCast(b & 63);
    return set;
}

/// A matcher over `vocab` and the grammar of `nestedListIr`.
fn nestedListSetup(gpa: Allocator, vocab: []const []const u8, lexeme: []const u8, lexeme_flags: u32) !TestSetup {
    var words = try nestedListIr(gpa, lexeme, lexeme_flags);
    defer words.deinit(gpa);
    return TestSetup.initTokenizer(gpa, try TestSetup.testTokenizer(gpa, vocab), words.items);
}

/// `S → E | E "-" S`, `E → L | "{" S "}"`: lists of `lexeme`s (flags `lexeme_flags`) joined
/// by dashes, nested in braces, so that tokens span lexeme ends (the walk cache's frontier)
/// and a lexer state recurs where the parser decides differently (a `}` only inside braces).
fn nestedListIr(gpa: Allocator, lexeme: []const u8, lexeme_flags: u32) !std.ArrayList(u32) {
    var words: std.ArrayList(u32) = .empty;
    errdefer words.deinit(gpa);
    try words.appendSlice(gpa, &.{ ir_reader.ir_magic, 4, 2, 4, 0, 0, 0, lexeme_flags });
    try ir_reader.appendIrBytes(gpa, &words, lexeme);
    for ("-{}") |c| try words.appendSlice(gpa, &.{ 1, 0, 1, c });
    const s = ir_reader.ir_nonterminal_flag | 0;
    const e = ir_reader.ir_nonterminal_flag | 1;
    try words.appendSlice(gpa, &.{ 0, 1, e }); // S → E
    try words.appendSlice(gpa, &.{ 0, 3, e, 1, s }); // S → E "-" S
    try words.appendSlice(gpa, &.{ 1, 1, 0 }); // E → L
    try words.appendSlice(gpa, &.{ 1, 3, 2, s, 3 }); // E → "{" S "}"
    return words;
}

test "walk-cache entries, recorded and replayed, equal full trie walks across lexeme ends" {
    const gpa = std.testing.allocator;
    var arena_state = std.heap.ArenaAllocator.init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const vocab = try slicerTestVocab(arena, 3000);
    const Case = struct { lexeme: []const u8, flags: u32, text: []const u8 };
    const cases = [_]Case{
        .{ .lexeme = "\"[^\"\\\\]*\"", .flags = 0, .text = "\"ab\"-{\"c d\"}-{{\"-e\"-\"\"}}-\"\xc3\xa9z\"" },
        .{ .lexeme = "\"[ !#-~]{0,12}\"", .flags = 0, .text = "\"ab_9\"-{\"-\"}-\"x y\"" }, // the word slice
        .{ .lexeme = "[a-z]+", .flags = 0, .text = "{{ab}-m}-ab-{zz}-m-{{abc-ab}}" },
        .{ .lexeme = "(?s:.)*\"", .flags = 1, .text = "ab \"-x-y\"-\"" }, // lazy: free text up to a quote
    };
    // Slices walked directly, then through the cache (three masks per position: the first
    // records, the others replay), then through a cache that holds two entries not replayed
    // yet and four in all, so that entries are dropped and recorded again; each with every
    // frontier subtree through a nested entry and without.
    const Config = struct {
        rest_nodes_min: usize,
        entries_max: usize,
        nested_nodes_min: usize = WalkCache.default_nested_nodes_min,
        nested_mask_tokens_min: ?usize = null,
        /// Walks worth less are remembered as plain (this vocabulary's walks are small: with
        /// the default, every one is).
        record_tokens_min: usize = 0,
    };
    var dropped: u64 = 0;
    var nested_replays: u64 = 0;
    var plain_entries: usize = 0;
    const configs = [_]Config{
        .{ .rest_nodes_min = WalkCache.default_rest_nodes_min, .entries_max = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 4 },
        .{ .rest_nodes_min = WalkCache.default_rest_nodes_min, .entries_max = 0, .nested_nodes_min = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 0, .nested_nodes_min = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 4, .nested_nodes_min = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 0, .nested_nodes_min = 0, .nested_mask_tokens_min = 0 },
        .{ .rest_nodes_min = 0, .entries_max = 0, .record_tokens_min = WalkCache.default_record_tokens_min },
    };
    for (configs) |config| for (cases) |case| {
        var t = try nestedListSetup(gpa, vocab, case.lexeme, case.flags);
        defer t.deinit(gpa);
        const cache = &t.grammar.walk_cache;
        cache.rest_nodes_min = config.rest_nodes_min;
        cache.record_tokens_min = config.record_tokens_min;
        cache.nested_nodes_min = config.nested_nodes_min;
        cache.nested_mask_tokens_min = config.nested_mask_tokens_min;
        if (config.entries_max > 0) {
            // An entry of this vocabulary: its mask and up to 64 frontier nodes.
            const entry_bytes = t.matcher.mask.len * 4 + 64 * @sizeOf(WalkCache.Frontier);
            cache.bytes_max = config.entries_max * entry_bytes;
            cache.unproven_bytes_max = config.entries_max / 2 * entry_bytes;
        }
        const rest_nodes_min = config.rest_nodes_min;
        const m = t.matcher;
        const expected = try gpa.alloc(u32, m.mask.len);
        defer gpa.free(expected);
        const dummy = t.tokenizer.vocabSize();
        for (0..case.text.len + 1) |i| {
            @memset(expected, 0);
            try walkTrie(t.tokenizer.trie.nodes, &m.parser, m.current(), expected);
            expected[dummy >> 5] &= ~(@as(u32, 1) << @intCast(dummy & 31));
            // With the small cache one mask per position: states recur along the text, and
            // entries are dropped before they do.
            const visits: usize = if (config.entries_max > 0) 1 else 3;
            for (0..visits) |visit| {
                const replays = cache.replays;
                m.mask_key = null;
                try m.computeMask();
                // Every mask goes through the cache when slices do, every walk is kept and
                // nothing is dropped.
                const every_mask_cached = config.rest_nodes_min == 0 and config.entries_max == 0 and config.record_tokens_min == 0;
                if (every_mask_cached and visit > 0 and cache.replays != replays + 1) {
                    std.debug.print("case {s} after {d} bytes: not replayed\n", .{ case.lexeme, i });
                    return error.TestUnexpectedResult;
                }
                // EOS is set by id, outside the walk.
                const eos = dummy - 1;
                m.mask[eos >> 5] &= ~(@as(u32, 1) << @intCast(eos & 31));
                std.testing.expectEqualSlices(u32, expected, m.mask) catch |err| {
                    std.debug.print("case {s} after {d} bytes, visit {d}, rest_nodes_min {d}, nested_nodes_min {d}\n", .{ case.lexeme, i, visit, rest_nodes_min, config.nested_nodes_min });
                    return err;
                };
            }
            m.mask_key = null;
            if (i == case.text.len) break;
            try consumeTestByte(m, case.lexeme, case.text, i);
        }
        try std.testing.expect(m.isAccepting());
        var it = cache.entries.valueIterator();
        while (it.next()) |entry| plain_entries += @intFromBool(entry.plain);
        std.testing.expect(config.entries_max > 0 or config.record_tokens_min > 0 or cache.replays > 0) catch |err| {
            std.debug.print("case {s}, rest_nodes_min {d}, entries_max {d}: no replay\n", .{ case.lexeme, config.rest_nodes_min, config.entries_max });
            return err;
        };
        try std.testing.expect(cache.bytes <= cache.bytes_max and cache.unproven_bytes <= cache.unproven_bytes_max);
        dropped += cache.dropped;
        nested_replays += cache.nested_replays;
    };
    try std.testing.expect(dropped > 0);
    try std.testing.expect(nested_replays > 0);
    try std.testing.expect(plain_entries > 0);
}

test "open slices: masks over lazy free text equal full trie walks" {
    const gpa = std.testing.allocator;
    var arena_state = std.heap.ArenaAllocator.init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    // Tokens of stop-string pieces, text, a quote, partial and whole UTF-8 characters.
    const pieces = [_][]const u8{ "a", "b", "x", " ", "<", "/", ">", "\"", "-", "{", "}", "\n", "\xc3\xa9", "\xe2\x82\xac", "\xc3", "\xa9", "\xff" };
    var tokens: std.ArrayList([]const u8) = .empty;
    for (0..256) |b| try tokens.append(arena, try arena.dupe(u8, &.{@intCast(b)}));
    var prng = std.Random.DefaultPrng.init(0x09e2);
    const random = prng.random();
    for (0..2000) |_| {
        var token: std.ArrayList(u8) = .empty;
        for (0..random.intRangeAtMost(usize, 2, 6)) |_| try token.appendSlice(arena, pieces[random.uintLessThan(usize, pieces.len)]);
        try tokens.append(arena, token.items);
    }
    try tokens.append(arena, "<eos>");
    const Case = struct { lexeme: []const u8, text: []const u8, excluded: ?[]const u8 };
    const cases = [_]Case{
        // Text until `</x>`: every string without `>` keeps it going.
        .{ .lexeme = "(?s:.)*</x>", .text = "a</b </x x>y\xc3\xa9\n</x>-q<</x>", .excluded = ">" },
        .{ .lexeme = "(?s:.)*\"", .text = "ab \"-x-y\"-\"", .excluded = "\"" },
        // A shortest match after one letter: every letter would have to be left out.
        .{ .lexeme = "[a-z]+", .text = "a-b-{x}", .excluded = null },
        // Ends at a non-ASCII character, which an open slice cannot leave out.
        .{ .lexeme = "(?s:.)*\xc3\xa9", .text = "ab\xc3\xa9-\xc3\xa9", .excluded = null },
    };
    for ([_]usize{ 0, WalkCache.default_record_tokens_min }) |record_tokens_min| for (cases) |case| {
        var t = try nestedListSetup(gpa, tokens.items, case.lexeme, 1);
        defer t.deinit(gpa);
        t.grammar.walk_cache.record_tokens_min = record_tokens_min;
        const m = t.matcher;
        const expected = try gpa.alloc(u32, m.mask.len);
        defer gpa.free(expected);
        const dummy = t.tokenizer.vocabSize();
        const eos = dummy - 1;
        for (0..case.text.len + 1) |i| {
            @memset(expected, 0);
            try walkTrie(t.tokenizer.trie.nodes, &m.parser, m.current(), expected);
            expected[dummy >> 5] &= ~(@as(u32, 1) << @intCast(dummy & 31));
            for (0..3) |visit| {
                m.mask_key = null;
                try m.computeMask();
                m.mask[eos >> 5] &= ~(@as(u32, 1) << @intCast(eos & 31));
                std.testing.expectEqualSlices(u32, expected, m.mask) catch |err| {
                    std.debug.print("case {s} after {d} bytes, visit {d}, record_tokens_min {d}\n", .{ case.lexeme, i, visit, record_tokens_min });
                    return err;
                };
            }
            m.mask_key = null;
            if (i == case.text.len) break;
            try consumeTestByte(m, case.lexeme, case.text, i);
        }
        const open = t.tokenizer.open_slices;
        if (case.excluded) |bytes| {
            const want = testByteSet(bytes);
            std.testing.expect(open.count == 1 and std.mem.eql(u64, &open.excluded[0], &want)) catch |err| {
                std.debug.print("case {s}: {d} open slices\n", .{ case.lexeme, open.count });
                return err;
            };
            // Its tokens are the text tokens without those bytes.
            for (tokens.items, 0..) |token, id| {
                const in_slice = (open.items[0].mask[id >> 5] >> @intCast(id & 31)) & 1 != 0;
                const text = t.tokenizer.kinds[id] == .text and slicer.isOpenText(token, &want);
                try std.testing.expectEqual(text, in_slice);
            }
        } else {
            try std.testing.expectEqual(@as(u32, 0), open.count);
        }
    };
}

test "open slices: a grammar takes the answer an earlier grammar's search found for its free text" {
    const gpa = std.testing.allocator;
    var answers: slicer.OpenAnswers = .{};
    defer answers.deinit(gpa);
    // `nestedListIr`'s language, its lexeme (lazy) first or after the punctuation: other
    // lexeme indices and other expression ids, the same states.
    const listIr = struct {
        fn build(lexeme: []const u8, last: bool, close: u8) !std.ArrayList(u32) {
            const a = std.testing.allocator;
            var words: std.ArrayList(u32) = .empty;
            errdefer words.deinit(a);
            try words.appendSlice(a, &.{ ir_reader.ir_magic, 4, 2, 4, 0, 0 });
            const punctuation = [_]u8{ '-', '{', close };
            if (!last) try appendLazy(&words, lexeme);
            for (punctuation) |c| try words.appendSlice(a, &.{ 1, 0, 1, c });
            if (last) try appendLazy(&words, lexeme);
            const l: u32 = if (last) 3 else 0;
            const p: u32 = if (last) 0 else 1; // the dash; the braces follow it
            const s = ir_reader.ir_nonterminal_flag | 0;
            const e = ir_reader.ir_nonterminal_flag | 1;
            try words.appendSlice(a, &.{ 0, 1, e, 0, 3, e, p, s, 1, 1, l, 1, 3, p + 1, s, p + 2 });
            return words;
        }
        fn appendLazy(words: *std.ArrayList(u32), lexeme: []const u8) !void {
            try words.appendSlice(std.testing.allocator, &.{ 0, 1 });
            try ir_reader.appendIrBytes(std.testing.allocator, words, lexeme);
        }
    }.build;
    const Case = struct { lexeme: []const u8, last: bool, close: u8 = '}', hits: u64, excluded: []const u8 };
    const cases = [_]Case{
        .{ .lexeme = "(?s:.)*</x>", .last = false, .hits = 0, .excluded = ">" },
        .{ .lexeme = "(?s:.)*</x>", .last = true, .hits = 1, .excluded = ">" },
        // Another stop string with the same answer, another literal beside: not the same state.
        .{ .lexeme = "(?s:.)*</y>", .last = true, .hits = 1, .excluded = ">" },
        .{ .lexeme = "(?s:.)*</x>", .last = false, .close = ']', .hits = 1, .excluded = ">" },
        .{ .lexeme = "(?s:.)*\"", .last = false, .hits = 1, .excluded = "\"" },
        .{ .lexeme = "(?s:.)*\"", .last = true, .hits = 2, .excluded = "\"" },
    };
    for (cases, 0..) |case, k| {
        var words = try listIr(case.lexeme, case.last, case.close);
        defer words.deinit(gpa);
        var diag: ir_reader.CompileDiagnostic = .{};
        const grammar = try Grammar.create(gpa, words.items, .{}, null, &diag);
        defer grammar.release(gpa);
        const start = try grammar.lexer.startState(null);
        const got = try grammar.slice_depths.openExcluded(&grammar.lexer, start, &answers) orelse return error.TestUnexpectedResult;
        std.testing.expectEqual(case.hits, answers.hits) catch |err| {
            std.debug.print("case {d}\n", .{k});
            return err;
        };
        // What the grammar's own search finds (a cache of its own, nothing shared).
        var alone = slicer.DepthCache.init(gpa);
        defer alone.deinit();
        const own = try alone.openExcluded(&grammar.lexer, start, null) orelse return error.TestUnexpectedResult;
        try std.testing.expectEqualSlices(u64, &own, &got);
        try std.testing.expectEqualSlices(u64, &testByteSet(case.excluded), &got);
    }
}

test "walks over the live first bytes only equal walks of every top-level node" {
    const gpa = std.testing.allocator;
    var arena_state = std.heap.ArenaAllocator.init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    // With two-byte tokens of every printable second byte after some first bytes: top-level
    // nodes with enough children for an index of their own (`TopIndex.children`), which a
    // walk enters and then walks only the live children of.
    const base = try slicerTestVocab(arena, 3000);
    var tokens: std.ArrayList([]const u8) = .empty;
    try tokens.appendSlice(arena, base[0 .. base.len - 1]);
    for ("-{a1 \"") |first| for (0x20..0x7f) |second| try tokens.append(arena, try arena.dupe(u8, &.{ first, @intCast(second) }));
    try tokens.append(arena, base[base.len - 1]); // the EOS, last
    const vocab = tokens.items;
    const Case = struct { lexeme: []const u8, flags: u32, text: []const u8 };
    const cases = [_]Case{
        // A number ends at any other byte: the next lexeme (`-`, `}`) decides which first
        // bytes live, and only inside braces may `}` follow.
        .{ .lexeme = "[0-9]+", .flags = 0, .text = "12-{3-{45}-6}-7" },
        .{ .lexeme = "\"[^\"\\\\]*\"", .flags = 0, .text = "\"ab\"-{\"c d\"}-\"\"" },
        .{ .lexeme = "[a-z]+", .flags = 0, .text = "{{ab}-m}-ab-{zz}" },
        .{ .lexeme = "(?s:.)*\"", .flags = 1, .text = "ab \"-x-y\"-\"" }, // lazy: free text up to a quote
    };
    var narrowed: usize = 0;
    for (cases) |case| {
        var t = try nestedListSetup(gpa, vocab, case.lexeme, case.flags);
        defer t.deinit(gpa);
        const m = t.matcher;
        const trie = &t.tokenizer.trie;
        for ("-{a1 \"") |first| try std.testing.expect(trie.top.children(first) != null);
        const expected = try gpa.alloc(u32, m.mask.len);
        defer gpa.free(expected);
        const got = try gpa.alloc(u32, m.mask.len);
        defer gpa.free(got);
        for (0..case.text.len + 1) |i| {
            const at = m.current();
            @memset(expected, 0);
            try walkTrie(trie.nodes, &m.parser, at, expected);
            // Twice: the first walk asks the lexer about each first byte, the second reads
            // what it kept.
            for (0..2) |visit| {
                @memset(got, 0);
                try walkTrieTop(trie.nodes, trie.top, &m.parser, at, got);
                std.testing.expectEqualSlices(u32, expected, got) catch |err| {
                    std.debug.print("case {s} after {d} bytes, visit {d}\n", .{ case.lexeme, i, visit });
                    return err;
                };
            }
            const alive = try m.parser.lexer.aliveAmong(at.lexer_state, trie.top.present);
            var live: u32 = 0;
            var present: u32 = 0;
            for (alive, trie.top.present) |a, p| {
                live += @popCount(a);
                present += @popCount(p);
            }
            narrowed += @intFromBool(live < present);
            if (i == case.text.len) break;
            try consumeTestByte(m, case.lexeme, case.text, i);
        }
    }
    // (Most positions' states refuse most first bytes.)
    try std.testing.expect(narrowed > 20);
}

test "masks with slices equal full trie walks, byte by byte" {
    const gpa = std.testing.allocator;
    var arena_state = std.heap.ArenaAllocator.init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const vocab = try slicerTestVocab(arena, 3000);
    var many_names: std.ArrayList([]const u8) = .empty;
    for (0..100) |i| try many_names.append(arena, try std.fmt.allocPrint(arena, "\"name{d}\"", .{i}));
    const json_char = "(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})";
    const cases = [_]SlicerCase{
        .{ .pattern = "[^\"]*\"", .text = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac\xf0\x9f\x98\x80 \\ \n end\"", .sliced = true },
        .{ .pattern = "\"[^\"\\\\\\x00-\\x1f]{0,40}\"", .text = "\"abcdefgh\xc3\xa9ijklmnopqrstuvwxyz 0123456789\xe2\x82\xac-\"", .sliced = true },
        .{ .pattern = "\"" ++ json_char ++ "{3,20}\"", .text = "\"ab\\ncd\\u00e9 \xe4\xb8\xad\xe4\xb8\xad efgh\"", .sliced = true },
        .{ .pattern = "[^\"]{0,20}", .text = "abc \xc3\xa9 defghijklmno", .sliced = true },
        .{ .pattern = "[ -~]{0,30}", .text = "plain ascii text, 30 bytes ok", .sliced = true }, // the word slice
        .{ .pattern = "[ -^a-~]{0,30}", .text = "ascii without underscore", .sliced = false },
        .{ .pattern = "[^\"\xc3\xa9]*\"", .text = "no e-acute here \xe2\x82\xac\"", .sliced = true }, // the word slice
        .{ .pattern = "[a-z ]{0,50}", .text = "some words here", .sliced = false },
        .{ .pattern = "\"[\\-0-9A-Z_a-z]{1,255}\"", .text = "\"snake_case-and-kebab_42\"", .sliced = true },
        .{ .pattern = "[A-Za-z_][A-Za-z0-9_]*", .text = "_identifier_9Z", .sliced = true },
        .{ .pattern = "[a-z0-9]+", .text = "lower0case9", .sliced = false },
        .{ .pattern = "\"[^\"\\\\]*\"", .excluded = many_names.items, .text = "\"name1 \xc3\xa9x\"", .sliced = true },
        .{ .pattern = "\"[^\"\\\\]{0,12}\"", .excluded = &.{ "\"ab\"", "\"abc\"" }, .text = "\"abz\"", .sliced = true },
        // Word counts: the lead-space slice while a word is left (after a space too: the
        // nullable head `\s*`), then the last word refuses a space.
        .{ .pattern = "(?:\\S+\\s+){0,3}\\S+\"", .text = "ab m\xc3\xa9  e0 z_-\"", .sliced = true, .family = .lead_space },
        .{ .pattern = "\"(?:[^\\s\"]+ ){0,5}[^\\s\"]+\"", .text = "\"a b\xe2\x82\xac e n a bb\"", .sliced = true, .family = .lead_space },
        // ECMA-262's `\S` and `\s`, as the JSON Schema front-end writes them.
        .{ .pattern = "(?:" ++ ecma_non_space ++ "+" ++ ecma_space ++ "+){0,4}" ++ ecma_non_space ++ "+\"", .text = "a\xe2\x82\xac b  e\xc2\xa0m -z_\"", .sliced = true, .family = .lead_space },
        // The first word (no space may come first) and the last (no space may follow).
        .{ .pattern = "\"" ++ ecma_non_space ++ "+(?:" ++ ecma_space ++ "+" ++ ecma_non_space ++ "+){0,2}\"", .text = "\"ab\xe2\x82\xac b\xc2\xa0m\"", .sliced = true, .family = .no_space },
    };
    // Twice: slices walked directly (the test vocabulary's rest tries are small), then every
    // slice through the walk cache, as large rest tries go.
    for ([_]usize{ WalkCache.default_rest_nodes_min, 0 }) |rest_nodes_min| for (cases) |case| {
        var t = try TestSetup.initExcluding(gpa, vocab, case.pattern, case.excluded);
        defer t.deinit(gpa);
        t.grammar.walk_cache.rest_nodes_min = rest_nodes_min;
        t.grammar.walk_cache.record_tokens_min = 0;
        const m = t.matcher;
        const expected = try gpa.alloc(u32, m.mask.len);
        defer gpa.free(expected);
        const eos: u32 = t.tokenizer.vocabSize() - 1;
        var sliced_steps: u32 = 0;
        var family_steps: u32 = 0;
        for (0..case.text.len + 1) |i| {
            @memset(expected, 0);
            try walkTrie(t.tokenizer.trie.nodes, &m.parser, m.current(), expected);
            for ([_]u32{ eos, t.tokenizer.vocabSize() }) |id| expected[id >> 5] &= ~(@as(u32, 1) << @intCast(id & 31));
            // Three masks at each position: a state's first visit records a walk-cache entry,
            // the others replay it.
            for (0..3) |visit| {
                m.mask_key = null;
                try m.computeMask();
                for ([_]u32{ eos, t.tokenizer.vocabSize() }) |id| m.mask[id >> 5] &= ~(@as(u32, 1) << @intCast(id & 31));
                std.testing.expectEqualSlices(u32, expected, m.mask) catch |err| {
                    std.debug.print("case {s} after {d} bytes, visit {d}, rest_nodes_min {d}\n", .{ case.pattern, i, visit, rest_nodes_min });
                    return err;
                };
            }
            m.mask_key = null; // the mask was edited above
            if (try t.tokenizer.slices.pick(&t.grammar.slice_depths, &t.grammar.lexer, m.current().lexer_state)) |slice| {
                sliced_steps += 1;
                if (case.family == slice.family) family_steps += 1;
            }
            if (i == case.text.len) break;
            try consumeTestByte(m, case.pattern, case.text, i);
        }
        std.testing.expectEqual(case.sliced, sliced_steps > 0) catch |err| {
            std.debug.print("case {s}: {d} sliced steps\n", .{ case.pattern, sliced_steps });
            return err;
        };
        if (case.family != null) std.testing.expect(family_steps > 0) catch |err| {
            std.debug.print("case {s}: no step sliced by its family\n", .{case.pattern});
            return err;
        };
    };
}

test "a walk whose parser steps move the table onto its second page gives the right mask" {
    const gpa = std.testing.allocator;
    var arena_state = std.heap.ArenaAllocator.init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    // (S1 S2 … S94){0,9} with Si = [\x21-(0x20 + i)]: 95 byte classes (689 rows a page) and a
    // state per position, so a walk down 800 bytes of "!" makes the lexer's table cross its
    // first page. Token "!"^k c is allowed exactly when c ≤ 0x21 + k mod 94 (the oracle).
    var pattern: std.ArrayList(u8) = .empty;
    try pattern.appendSlice(arena, "(?:");
    for (0x21..0x7f) |hi| try pattern.print(arena, "[\\x21-\\x{x:0>2}]", .{hi});
    try pattern.appendSlice(arena, "){0,9}");
    const run_length = 800;
    const ends = [_]u8{ '"', '0', '~' };
    var tokens: std.ArrayList([]const u8) = .empty;
    const bangs = try arena.alloc(u8, run_length);
    @memset(bangs, '!');
    for (1..run_length + 1) |k| {
        try tokens.append(arena, bangs[0..k]);
        for (ends) |c| {
            const token = try arena.alloc(u8, k + 1);
            @memset(token[0..k], '!');
            token[k] = c;
            try tokens.append(arena, token);
        }
    }
    try tokens.append(arena, "<eos>");
    var t = try TestSetup.init(gpa, tokens.items, pattern.items);
    defer t.deinit(gpa);
    try std.testing.expectEqual(@as(u32, 95), t.grammar.lexer.class_count);
    try std.testing.expectEqual(@as(usize, 1), t.grammar.lexer.trans.pages.items.len);
    try t.matcher.computeMask();
    try std.testing.expect(t.grammar.lexer.trans.pages.items.len >= 2);
    var id: u32 = 0;
    for (1..run_length + 1) |k| {
        try std.testing.expect(t.allowed(id)); // "!"^k
        id += 1;
        for (ends) |c| {
            try std.testing.expectEqual(c <= 0x21 + k % 94, t.allowed(id));
            id += 1;
        }
    }
    try std.testing.expect(t.allowed(id)); // EOS: the empty string matches
}

test "grammars started from the pattern cache's base set have the classes and masks of grammars compiled alone" {
    const gpa = std.testing.allocator;
    var cache: PatternCache = .{};
    defer cache.deinit(gpa);
    const vocab = [_][]const u8{ "\"", "\"a", "\"id\"", "\"name", "e\"", "\\u00e9", "\\", "x", "1", "\"\\n\"", "q\"", "<eos>" };
    const json_string = "\"(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*\"";
    const names = [_][]const u8{ "\"id\"", "\"name\"", "\"q\"", "\"x1\"" };
    var based: u32 = 0;
    for (0..40) |round| {
        // A key lexeme as the JSON Schema front-end writes it: the JSON string without this
        // object's property names (which differ from grammar to grammar).
        const excluded = names[0 .. round % names.len + 1];
        var words = try booleanIr(gpa, json_string, excluded);
        defer words.deinit(gpa);
        var diag: ir_reader.CompileDiagnostic = .{};
        const shared = try Grammar.create(gpa, words.items, .{}, &cache, &diag);
        defer shared.release(gpa);
        const alone = try Grammar.create(gpa, words.items, .{}, null, &diag);
        defer alone.release(gpa);
        if (shared.exprs.base_count > 0) based += 1;
        try std.testing.expectEqual(alone.lexer.class_count, shared.lexer.class_count);
        try std.testing.expectEqualSlices(u8, &alone.lexer.class_of, &shared.lexer.class_of);
        // The masks along a text, from each grammar.
        const tokenizer = try TestSetup.testTokenizer(gpa, &vocab);
        defer tokenizer.release(gpa);
        const m_shared = try Matcher.create(gpa, tokenizer, shared);
        defer m_shared.destroy();
        const m_alone = try Matcher.create(gpa, tokenizer, alone);
        defer m_alone.destroy();
        for ([_]u32{ 1, 7, 5, 4 }) |token| {
            try m_shared.computeMask();
            try m_alone.computeMask();
            try std.testing.expectEqualSlices(u32, m_alone.mask, m_shared.mask);
            const n_shared = try m_shared.consume(&.{.fromIndex(token)}, .commit);
            try std.testing.expectEqual(try m_alone.consume(&.{.fromIndex(token)}, .commit), n_shared);
            if (n_shared == 0) break;
        }
    }
    try std.testing.expect(based > 20);
}
