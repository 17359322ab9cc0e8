//! The module's boundary: the only file with `export`. `wasm/ABI.md` documents every export in
//! the order they appear here.
//!
//! Rules of the boundary:
//! - Only i32 values cross. Every export returns an i32: a negative status from `Status` on
//!   failure; otherwise 0, or the non-negative answer of a query (a count, a boolean as 0/1, a
//!   handle through an out-pointer).
//! - Objects are opaque handles (`index + 1 | generation << 20`), checked on every call: a stale
//!   or forged handle is `Status.invalid_handle`, never a trap. Objects are reference counted, so
//!   freeing a tokenizer or grammar handle while matchers use it is safe.
//! - The host gets memory only from `ts_alloc`/`ts_free`, writes inputs there, and reads results
//!   (masks, forced bytes, the error text) in place. The core keeps no host pointer after a call.
//! - After a failure, `ts_error_message_ptr/len` give a readable message and
//!   `ts_error_position` the byte offset into the grammar text it concerns (or -1).

const std = @import("std");
const builtin = @import("builtin");
const matcher_mod = @import("matcher.zig");
const trie_mod = @import("trie.zig");
const ir_reader = @import("ir_reader.zig");
const PatternCache = @import("pattern_cache.zig").PatternCache;
const handles = @import("handles.zig");
const limit_error = @import("limits.zig");
const distinct = @import("distinct.zig");
const HandleTable = handles.HandleTable;
const Tokenizer = matcher_mod.Tokenizer;
const Grammar = matcher_mod.Grammar;
const Matcher = matcher_mod.Matcher;
const TokenId = trie_mod.TokenId;

pub const abi_version: i32 = 9;

/// Append-only: a code keeps its number forever.
pub const Status = enum(i32) {
    ok = 0,
    invalid_handle = -1,
    out_of_memory = -2,
    grammar_error = -3,
    limit_exceeded = -4,
    invalid_token = -5,
    invalid_argument = -6,
    matcher_failed = -7,
    internal = -8,
    /// A batch entry's token that the grammar refuses (`ts_matcher_fill_bitmasks` with tokens).
    refused_token = -9,
};

/// The order of the u32 limit values `ts_grammar_new_ir` takes (0 keeps a default). Append-only.
pub const LimitField = enum(u32) {
    fuel_step_max = 0,
    state_count_max = 1,
    expr_count_max = 2,
    row_item_count_max = 3,
    step_item_count_max = 4,
    token_history_max = 5,
    fuel_compile_max = 6,
};

/// A JSON text naming the ABI version, the largest input one call takes, every status, every
/// limit kind and the limit fields, generated from the enums so the host never keeps a copy by
/// hand. A host passes a longer input by its length alone (a null pointer): the call refuses it
/// before it looks at the bytes, so they need not be copied into linear memory first.
const manifest = blk: {
    var text: []const u8 = std.fmt.comptimePrint("{{\"abi_version\":{d},\"input_bytes_max\":{d}", .{ abi_version, matcher_mod.input_bytes_max });
    for (.{ .{ "status", Status }, .{ "limit_kind", limit_error.Kind }, .{ "limit_field", LimitField } }) |section| {
        text = text ++ ",\"" ++ section[0] ++ "\":{";
        const info = @typeInfo(section[1]).@"enum";
        for (info.field_names, info.field_values, 0..) |name, value, i| {
            text = text ++ (if (i > 0) "," else "") ++ std.fmt.comptimePrint("\"{s}\":{d}", .{ name, value });
        }
        text = text ++ "}";
    }
    break :blk text ++ "}";
};

const base_allocator: std.mem.Allocator = if (builtin.cpu.arch.isWasm())
    @import("heap.zig").allocator
else
    std.heap.page_allocator;

/// Every allocation of the module goes through this counter, so a host (and the leak tests)
/// can read how many bytes are live: linear memory only grows, the live count goes down.
const Counting = struct {
    var live_bytes: usize = 0;

    fn alloc(_: *anyopaque, len: usize, alignment: std.mem.Alignment, ra: usize) ?[*]u8 {
        const p = base_allocator.rawAlloc(len, alignment, ra) orelse return null;
        live_bytes += len;
        return p;
    }
    fn resize(_: *anyopaque, memory: []u8, alignment: std.mem.Alignment, new_len: usize, ra: usize) bool {
        if (!base_allocator.rawResize(memory, alignment, new_len, ra)) return false;
        live_bytes = live_bytes - memory.len + new_len;
        return true;
    }
    fn remap(_: *anyopaque, memory: []u8, alignment: std.mem.Alignment, new_len: usize, ra: usize) ?[*]u8 {
        const p = base_allocator.rawRemap(memory, alignment, new_len, ra) orelse return null;
        live_bytes = live_bytes - memory.len + new_len;
        return p;
    }
    fn free(_: *anyopaque, memory: []u8, alignment: std.mem.Alignment, ra: usize) void {
        base_allocator.rawFree(memory, alignment, ra);
        live_bytes -= memory.len;
    }
};

const gpa: std.mem.Allocator = .{
    .ptr = undefined,
    .vtable = &.{ .alloc = Counting.alloc, .resize = Counting.resize, .remap = Counting.remap, .free = Counting.free },
};

// ---------------------------------------------------------------------------------------------
// Errors

var error_buffer: [1024]u8 = undefined;
var error_len: usize = 0;
var error_position: i32 = -1;
var error_limit: limit_error.Kind = .none;
var error_lexeme: i32 = -1;

fn fail(status: Status, position: i32, comptime fmt: []const u8, args: anytype) i32 {
    const text = std.fmt.bufPrint(&error_buffer, fmt, args) catch blk: {
        const ellipsis = "...";
        @memcpy(error_buffer[error_buffer.len - ellipsis.len ..], ellipsis);
        break :blk error_buffer[0..];
    };
    error_len = text.len;
    error_position = position;
    error_limit = .none;
    error_lexeme = -1;
    return @backingInt(status);
}

/// A `limit_exceeded` status naming the limit and what to raise (`context` says what ran out).
fn failLimit(kind: limit_error.Kind, comptime context: []const u8) i32 {
    const status = switch (kind) {
        .lexer_states => fail(.limit_exceeded, -1, context ++ ": the grammar needs more lexer DFA states than the limit allows (Limits.dfa_state_count_max)", .{}),
        .step_fuel => fail(.limit_exceeded, -1, context ++ ": one call needed more derivative and lexer work than the limit allows (Limits.step_fuel_max)", .{}),
        .expressions => fail(.limit_exceeded, -1, context ++ ": the grammar needs more expression terms than the limit allows (Limits.expression_count_max)", .{}),
        .parser_row_items => fail(.limit_exceeded, -1, context ++ ": a parser row needs more Earley items than the limit allows (Limits.parser_row_items_max)", .{}),
        .parser_step_items => fail(.limit_exceeded, -1, context ++ ": one call needed more parser work (Earley items built and examined) than the limit allows (Limits.parser_step_items_max)", .{}),
        .token_history => fail(.limit_exceeded, -1, context ++ ": the matcher holds as many tokens as the limit allows (Limits.token_history_max); roll back or reset it", .{}),
        .compile_fuel => fail(.limit_exceeded, -1, context ++ ": compiling the grammar (or a matcher's first row) needed more work than the limit allows (Limits.compile_fuel_max)", .{}),
        .derivative_depth => fail(.limit_exceeded, -1, context ++ ": the grammar's expressions nest deeper than the core can take derivatives of; simplify the grammar", .{}),
        .grammar_size => fail(.limit_exceeded, -1, context ++ ": the grammar is too large (nesting, counted repetitions or character classes)", .{}),
        .vocabulary => fail(.limit_exceeded, -1, context ++ ": the vocabulary is too large for the trie (at most {d} ids, tokens of at most {d} bytes)", .{ trie_mod.token_count_max, trie_mod.token_length_max }),
        .handles => fail(.limit_exceeded, -1, context ++ ": this core instance has issued all its handles (about 2^31 in its life); replace the instance", .{}),
        .input_size => fail(.limit_exceeded, -1, context ++ ": the input is larger than one call may take ({d} bytes); pass it in parts", .{matcher_mod.input_bytes_max}),
        .distinct_items => fail(.limit_exceeded, -1, context ++ ": an array whose items must differ (uniqueItems) holds more text than a check reads ({d} bytes of earlier items, {d} bytes of one item), or a number with an exponent of more than 15 digits", .{ distinct.span_bytes_max, distinct.item_bytes_max }),
        .none => fail(.limit_exceeded, -1, context ++ ": a limit was exceeded", .{}),
    };
    error_limit = kind;
    return status;
}

fn ok() i32 {
    return @backingInt(Status.ok);
}

fn failMatcher(m: *const Matcher) i32 {
    return switch (m.failure) {
        .none => unreachable,
        .limit => failLimit(m.failure_limit, "the matcher stopped at a limit (roll back or reset to go on)"),
        .out_of_memory => fail(.out_of_memory, -1, "out of memory in the matcher core", .{}),
    };
}

// ---------------------------------------------------------------------------------------------
// Handles

var tokenizers: HandleTable(Tokenizer) = .{};
var grammars: HandleTable(Grammar) = .{};
var matchers: HandleTable(Matcher) = .{};
/// The instance's parsed patterns, shared by the grammars it compiles (bounded; see
/// `pattern_cache.zig`).
var pattern_cache: PatternCache = .{};
var pattern_cache_enabled: bool = true;

fn failHandles(comptime what: []const u8, err: handles.Error) i32 {
    return switch (err) {
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory registering a " ++ what, .{}),
        error.LimitExceeded => failLimit(.handles, "registering a " ++ what),
    };
}

fn invalidHandle(comptime what: []const u8, handle: i32) i32 {
    return fail(.invalid_handle, -1, "invalid or freed " ++ what ++ " handle {d}", .{handle});
}

// ---------------------------------------------------------------------------------------------
// Host memory

fn slice(comptime T: type, ptr: u32, count: u32) ?[]T {
    if (count == 0) return &.{};
    if (ptr == 0 or ptr % @alignOf(T) != 0) return null;
    const p: [*]T = @ptrFromInt(ptr);
    return p[0..count];
}

fn writeOut(out_ptr: u32, value: i32) bool {
    const out = slice(i32, out_ptr, 1) orelse return false;
    out[0] = value;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Exports

export fn ts_abi_version() i32 {
    return abi_version;
}

/// The manifest: a JSON text naming the ABI version, the statuses, the limit kinds and the
/// limit fields (generated from the enums above).
export fn ts_manifest_ptr() i32 {
    return @intCast(@intFromPtr(manifest.ptr));
}

export fn ts_manifest_len() i32 {
    return manifest.len;
}

export fn ts_error_message_ptr() i32 {
    return @intCast(@intFromPtr(&error_buffer));
}

export fn ts_error_message_len() i32 {
    return @intCast(error_len);
}

export fn ts_error_position() i32 {
    return error_position;
}

/// The limit kind of the last `limit_exceeded` status (the manifest's `limit_kind`), else 0.
export fn ts_error_limit() i32 {
    return @backingInt(error_limit);
}

/// The lexeme index the last `grammar_error` concerns, or -1.
export fn ts_error_lexeme() i32 {
    return error_lexeme;
}

/// Allocates `size` bytes (8-byte aligned); 0 when out of memory.
export fn ts_alloc(size: u32) i32 {
    const bytes = gpa.alignedAlloc(u8, .@"8", @max(size, 1)) catch return 0;
    return @intCast(@intFromPtr(bytes.ptr));
}

/// Frees a block from `ts_alloc`; `size` must be the size asked for.
export fn ts_free(ptr: u32, size: u32) i32 {
    if (ptr == 0) return ok();
    if (ptr % 8 != 0) return fail(.invalid_argument, -1, "ts_free: pointer {d} did not come from ts_alloc", .{ptr});
    const p: [*]align(8) u8 = @ptrFromInt(ptr);
    gpa.free(p[0..@max(size, 1)]);
    return ok();
}

/// What `ts_handles_free` frees: one code per handle kind.
const HandleKind = enum(u32) { tokenizer = 0, grammar = 1, matcher = 2 };

/// Frees `count` handles given as (kind, handle) u32 pairs at `ptr` (kinds: `HandleKind`), in
/// order, and returns how many were live; stale handles and unknown kinds are skipped. A host
/// frees what its finalizers queued in one call instead of one call per handle: a call costs
/// the host 1.5-5 µs, a grammar's free about 1 µs, and the previous request's matchers and
/// grammar were freed inside the next compile's time.
export fn ts_handles_free(ptr: u32, count: u32) i32 {
    const pairs = slice(u32, ptr, count *| 2) orelse return fail(.invalid_argument, -1, "bad handles pointer", .{});
    var freed: i32 = 0;
    var i: usize = 0;
    while (i < pairs.len) : (i += 2) {
        const handle: i32 = @bitCast(pairs[i + 1]);
        const kind = std.enums.fromInt(HandleKind, pairs[i]) orelse continue;
        switch (kind) {
            .tokenizer => (tokenizers.remove(handle) orelse continue).release(gpa),
            .grammar => (grammars.remove(handle) orelse continue).release(gpa),
            .matcher => (matchers.remove(handle) orelse continue).destroy(),
        }
        freed += 1;
    }
    return freed;
}

/// Creates a tokenizer from `n_ids` tokens: `offsets` (u32, n_ids + 1 entries) into `blob`,
/// `kinds` (u8 per id: 0 text, 1 special, 2 unused), and `eos_count` EOS ids (u32).
export fn ts_tokenizer_new(
    blob_ptr: u32,
    blob_len: u32,
    offsets_ptr: u32,
    kinds_ptr: u32,
    n_ids: u32,
    eos_ptr: u32,
    eos_count: u32,
    out_handle: u32,
) i32 {
    const blob = slice(u8, blob_ptr, blob_len) orelse return fail(.invalid_argument, -1, "bad token blob pointer", .{});
    const offsets = slice(u32, offsets_ptr, n_ids + 1) orelse return fail(.invalid_argument, -1, "bad offsets pointer", .{});
    const kinds = slice(u8, kinds_ptr, n_ids) orelse return fail(.invalid_argument, -1, "bad kinds pointer", .{});
    const eos = slice(TokenId, eos_ptr, eos_count) orelse return fail(.invalid_argument, -1, "bad EOS pointer", .{});
    const tokenizer = Tokenizer.create(gpa, blob, offsets, kinds, eos) catch |err| return switch (err) {
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory building the token trie", .{}),
        error.InvalidTokens => fail(.invalid_argument, -1, "token tables are inconsistent (offsets must be non-decreasing and within the blob; kinds 0..2)", .{}),
        error.InvalidEos => fail(.invalid_argument, -1, "an EOS id is not below the vocabulary size {d}", .{n_ids}),
        error.LimitExceeded => failLimit(.vocabulary, "building the token trie"),
    };
    return addTokenizer(tokenizer, out_handle);
}

/// Gives `tokenizer` a handle, written at `out_handle`; on failure it is released.
fn addTokenizer(tokenizer: *Tokenizer, out_handle: u32) i32 {
    const handle = tokenizers.add(gpa, tokenizer) catch |err| {
        tokenizer.release(gpa);
        return failHandles("tokenizer", err);
    };
    if (!writeOut(out_handle, handle)) {
        _ = tokenizers.remove(handle);
        tokenizer.release(gpa);
        return fail(.invalid_argument, -1, "bad out-pointer", .{});
    }
    return ok();
}

/// Creates a tokenizer with the vocabulary of tokenizer `base` and `eos_count` other EOS ids
/// (u32), sharing its trie and tables; `base` may be freed first.
export fn ts_tokenizer_with_eos(base: i32, eos_ptr: u32, eos_count: u32, out_handle: u32) i32 {
    const owner = tokenizers.get(base) orelse return invalidHandle("tokenizer", base);
    const eos = slice(TokenId, eos_ptr, eos_count) orelse return fail(.invalid_argument, -1, "bad EOS pointer", .{});
    const tokenizer = Tokenizer.withEos(gpa, owner, eos) catch |err| return switch (err) {
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory copying the EOS ids", .{}),
        error.InvalidEos => fail(.invalid_argument, -1, "an EOS id is not below the vocabulary size {d}", .{owner.vocabSize()}),
    };
    return addTokenizer(tokenizer, out_handle);
}

export fn ts_tokenizer_free(handle: i32) i32 {
    const tokenizer = tokenizers.remove(handle) orelse return invalidHandle("tokenizer", handle);
    tokenizer.release(gpa);
    return ok();
}

/// The earliest offset `i >= from` such that some token strictly extends the bytes from `i` to
/// the end of the `len` bytes at `ptr`; `len` when none does (the grammar-free healing of
/// `tokenize_partial` in one call).
export fn ts_tokenizer_heal_position(handle: i32, ptr: u32, len: u32, from: u32) i32 {
    const tokenizer = tokenizers.get(handle) orelse return invalidHandle("tokenizer", handle);
    if (len > matcher_mod.input_bytes_max) return failLimit(.input_size, "heal_position");
    const bytes = slice(u8, ptr, len) orelse return fail(.invalid_argument, -1, "bad bytes pointer", .{});
    if (from > len) return fail(.invalid_argument, -1, "heal_position: from {d} is past the {d} bytes", .{ from, len });
    // No token is longer than `token_length_max`: earlier offsets cannot be extended.
    var index: u32 = @max(from, len -| trie_mod.token_length_max);
    while (index < len) : (index += 1) {
        const node = tokenizer.trie.find(bytes[index..]) orelse continue;
        if (tokenizer.trie.hasExtension(node)) break;
    }
    return @intCast(index);
}

/// Compiles a grammar IR: `word_count` u32 words (layout in wasm/ABI.md), with `limit_count`
/// u32 limit values at `limits_ptr` in `LimitField` order (0 keeps a default; missing ones
/// too). A bad lexeme pattern is `grammar_error` with `ts_error_lexeme` the lexeme index and
/// `ts_error_position` the offset into its pattern.
export fn ts_grammar_new_ir(words_ptr: u32, word_count: u32, limits_ptr: u32, limit_count: u32, out_handle: u32) i32 {
    const words = slice(u32, words_ptr, word_count) orelse return fail(.invalid_argument, -1, "bad grammar IR pointer", .{});
    const values = slice(u32, limits_ptr, limit_count) orelse return fail(.invalid_argument, -1, "bad limits pointer", .{});
    var limits: matcher_mod.Limits = .{};
    for (values, 0..) |value, index| {
        if (value == 0) continue;
        const field = std.enums.fromInt(LimitField, index) orelse continue;
        switch (field) {
            .fuel_step_max => limits.fuel_step_max = value,
            .state_count_max => limits.state_count_max = value,
            .expr_count_max => limits.expr_count_max = value,
            .row_item_count_max => limits.row_item_count_max = value,
            .step_item_count_max => limits.step_item_count_max = value,
            .token_history_max => limits.token_history_max = value,
            .fuel_compile_max => limits.fuel_compile_max = value,
        }
    }
    var diag: ir_reader.CompileDiagnostic = .{};
    limit_error.hit = .none;
    const grammar = Grammar.create(gpa, words, limits, if (pattern_cache_enabled) &pattern_cache else null, &diag) catch |err| return switch (err) {
        error.Syntax => failLexeme(diag.lexeme, @intCast(diag.regex.position), diag.regex.message),
        error.BadIr => if (diag.lexeme) |l|
            failLexeme(l, -1, diag.message)
        else
            fail(.invalid_argument, -1, "malformed grammar IR: {s}", .{diag.message}),
        error.LimitExceeded => failLimit(if (limit_error.hit == .step_fuel) .compile_fuel else limit_error.hit, "compiling the grammar"),
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory compiling the grammar", .{}),
    };
    const handle = grammars.add(gpa, grammar) catch |err| {
        grammar.release(gpa);
        return failHandles("grammar", err);
    };
    if (!writeOut(out_handle, handle)) {
        _ = grammars.remove(handle);
        grammar.release(gpa);
        return fail(.invalid_argument, -1, "bad out-pointer", .{});
    }
    return ok();
}

fn failLexeme(lexeme: ?u32, position: i32, message: []const u8) i32 {
    const status = fail(.grammar_error, position, "{s}", .{message});
    error_lexeme = if (lexeme) |l| @intCast(l) else -1;
    return status;
}

export fn ts_grammar_free(handle: i32) i32 {
    const grammar = grammars.remove(handle) orelse return invalidHandle("grammar", handle);
    grammar.release(gpa);
    return ok();
}

fn addMatcher(m: *Matcher, out_handle: u32) i32 {
    const handle = matchers.add(gpa, m) catch |err| {
        m.destroy();
        return failHandles("matcher", err);
    };
    if (!writeOut(out_handle, handle)) {
        _ = matchers.remove(handle);
        m.destroy();
        return fail(.invalid_argument, -1, "bad out-pointer", .{});
    }
    return ok();
}

export fn ts_matcher_new(tokenizer_handle: i32, grammar_handle: i32, out_handle: u32) i32 {
    const tokenizer = tokenizers.get(tokenizer_handle) orelse return invalidHandle("tokenizer", tokenizer_handle);
    const grammar = grammars.get(grammar_handle) orelse return invalidHandle("grammar", grammar_handle);
    const m = Matcher.create(gpa, tokenizer, grammar) catch |err| return switch (err) {
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory creating a matcher", .{}),
        error.LimitExceeded => failLimit(limit_error.hit, "creating a matcher (its first parser row)"),
    };
    return addMatcher(m, out_handle);
}

export fn ts_matcher_free(handle: i32) i32 {
    const m = matchers.remove(handle) orelse return invalidHandle("matcher", handle);
    m.destroy();
    return ok();
}

export fn ts_matcher_fork(handle: i32, out_handle: u32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    const copy = m.fork() catch |err| return switch (err) {
        error.OutOfMemory => fail(.out_of_memory, -1, "out of memory forking a matcher", .{}),
        error.LimitExceeded => failLimit(limit_error.hit, "forking a matcher"),
    };
    return addMatcher(copy, out_handle);
}

export fn ts_matcher_reset(handle: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    m.reset();
    return ok();
}

fn getLive(handle: i32) union(enum) { matcher: *Matcher, status: i32 } {
    const m = matchers.get(handle) orelse return .{ .status = invalidHandle("matcher", handle) };
    if (m.failure != .none) return .{ .status = failMatcher(m) };
    return .{ .matcher = m };
}

fn checkTokens(m: *const Matcher, ids: []const TokenId) i32 {
    const vocab = m.tokenizer.vocabSize();
    for (ids, 0..) |id, i| {
        if (id.index() >= vocab) return fail(.invalid_token, -1, "token id {d} (position {d}) is not below the vocabulary size {d}", .{ id.index(), i, vocab });
    }
    return ok();
}

/// Writes the mask (`out_words` u32 words, bit t%32 of word t/32 = token t allowed).
/// `out_words` must be ceil(vocab_size / 32). With `out_ptr` 0 the mask is only computed,
/// into the matcher's own buffer (`ts_matcher_mask_ptr`): a host that copies it from there
/// into its own array copies it once, not twice.
export fn ts_matcher_fill_bitmask(handle: i32, out_ptr: u32, out_words: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const words_expected = (m.tokenizer.vocabSize() + 31) / 32;
    if (out_words != words_expected) return fail(.invalid_argument, -1, "mask buffer has {d} words; this vocabulary needs {d}", .{ out_words, words_expected });
    if (out_ptr == 0) {
        m.computeMask() catch return failMatcher(m);
        return ok();
    }
    const out = slice(u32, out_ptr, out_words) orelse return fail(.invalid_argument, -1, "mask pointer must be 4-byte aligned", .{});
    m.computeMask() catch return failMatcher(m);
    @memcpy(out, m.mask[0..out_words]);
    return ok();
}

/// Stores at `out_ptr` (a u32) the address of the matcher's own mask buffer, where
/// `ts_matcher_fill_bitmask` and `ts_matcher_consume_and_fill` with `out_ptr` 0 leave the
/// mask: its first ceil(vocab_size / 32) words, valid until the next call on this matcher.
/// The address does not change while the matcher lives (the buffer is sized at creation).
export fn ts_matcher_mask_ptr(handle: i32, out_ptr: u32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    std.debug.assert(m.mask.len >= (m.tokenizer.vocabSize() + 31) / 32);
    if (!writeOut(out_ptr, @bitCast(@as(u32, @intCast(@intFromPtr(m.mask.ptr)))))) {
        return fail(.invalid_argument, -1, "out pointer must be non-null and 4-byte aligned", .{});
    }
    return ok();
}

/// Fills the masks of `count` matchers (i32 handles at `handles_ptr`, all over the same
/// vocabulary width) one after another at `out_ptr`, `out_words` u32 words each, and each
/// matcher's status (0, or the negative status its own fill would return) at `statuses_ptr`.
/// Returns how many failed (their rows are untouched; the error text is the last failure's).
/// A batch fill is one call per core instance instead of one per matcher.
///
/// With `tokens_ptr` non-zero it holds `count` u32 tokens: matcher i first consumes token i
/// (none when it is 0xFFFFFFFF), as `ts_matcher_consume_and_fill` does, so a decoding step is
/// one call for the whole group. A consumed token's entry is overwritten with 0xFFFFFFFF (so
/// the host knows which were consumed when a fill failed after its consume); a token the
/// grammar refuses gets the status `refused_token` and nothing changes for that matcher.
///
/// With `out_ptr` 0 each mask stays in its matcher's own buffer (`ts_matcher_mask_ptr`), as
/// with `ts_matcher_fill_bitmask`'s out_ptr 0: a host that copies the rows from there into its
/// own array copies each mask once. Most masks of a decoding step come from a cache and cost
/// about what copying 16 kB costs (Llama-3), so the copy into a batch buffer was a third of
/// the work of such a row.
export fn ts_matcher_fill_bitmasks(handles_ptr: u32, count: u32, out_ptr: u32, out_words: u32, statuses_ptr: u32, tokens_ptr: u32) i32 {
    const handles_in = slice(i32, handles_ptr, count) orelse return fail(.invalid_argument, -1, "bad handles pointer", .{});
    const statuses = slice(i32, statuses_ptr, count) orelse return fail(.invalid_argument, -1, "bad statuses pointer", .{});
    const tokens: ?[]u32 = if (tokens_ptr == 0) null else slice(u32, tokens_ptr, count) orelse return fail(.invalid_argument, -1, "bad tokens pointer", .{});
    const total = std.math.mul(u32, count, out_words) catch return fail(.invalid_argument, -1, "batch of {d} masks is too large", .{count});
    if (out_ptr != 0 and slice(u32, out_ptr, total) == null) return fail(.invalid_argument, -1, "mask pointer must be 4-byte aligned", .{});
    var failed: i32 = 0;
    for (handles_in, statuses, 0..) |handle, *status, i| {
        const row_ptr = if (out_ptr == 0) 0 else out_ptr + @as(u32, @intCast(i)) * out_words * 4;
        status.* = if (tokens) |t| consumeThenFill(handle, &t[i], row_ptr, out_words) else ts_matcher_fill_bitmask(handle, row_ptr, out_words);
        if (status.* != 0) failed += 1;
    }
    return failed;
}

/// One entry of a batch with tokens: consume `token.*` (unless it is 0xFFFFFFFF, marking it
/// consumed), then fill; 0 or a negative status.
fn consumeThenFill(handle: i32, token: *u32, out_ptr: u32, out_words: u32) i32 {
    if (token.* != no_token) {
        const accepted = ts_matcher_consume_token(handle, token.*);
        if (accepted < 0) return accepted;
        if (accepted == 0) return fail(.refused_token, -1, "the grammar refuses token {d} here", .{token.*});
        token.* = no_token;
    }
    return ts_matcher_fill_bitmask(handle, out_ptr, out_words);
}

const no_token: u32 = 0xFFFF_FFFF;

/// Waits without leaving the module (so the host thread keeps its CPU and holds no host lock)
/// until the u32 at `flag_ptr`, which another host thread writes, reaches `target`: at most
/// `reads` reads of it, then `linger` more once it has. Returns 1 when it reached `target`, 0
/// when the reads ran out, negative on a bad pointer. A batch fill's caller waits here for
/// its helper threads: blocked in the host instead, it was woken ~40 µs after them on a VM.
export fn ts_spin_until(flag_ptr: u32, target: u32, reads: u32, linger: u32) i32 {
    const words = slice(u32, flag_ptr, 1) orelse return fail(.invalid_argument, -1, "flag pointer must be non-null and 4-byte aligned", .{});
    const flag: *volatile u32 = &words[0];
    var left = reads;
    while (left > 0) : (left -= 1) {
        if (flag.* >= target) break;
    } else return 0;
    var extra = linger;
    while (extra > 0) : (extra -= 1) std.mem.doNotOptimizeAway(flag.*);
    return 1;
}

/// Consumes one token: 1 accepted, 0 refused (state unchanged), negative on error.
export fn ts_matcher_consume_token(handle: i32, token: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const ids = [_]TokenId{.fromIndex(token)};
    const check = checkTokens(m, &ids);
    if (check != 0) return check;
    const n = m.consume(&ids, .commit) catch return failMatcher(m);
    return @intCast(n);
}

/// Consumes `count` tokens (u32 at `ids_ptr`) all or nothing; returns the length of the valid
/// prefix (== count when consumed; otherwise nothing was consumed).
export fn ts_matcher_consume_tokens(handle: i32, ids_ptr: u32, count: u32) i32 {
    return consumeMany(handle, ids_ptr, count, .commit);
}

/// The length of the valid prefix of `count` tokens, without changing the state.
export fn ts_matcher_validate_tokens(handle: i32, ids_ptr: u32, count: u32) i32 {
    return consumeMany(handle, ids_ptr, count, .validate);
}

fn consumeMany(handle: i32, ids_ptr: u32, count: u32, mode: Matcher.ConsumeMode) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const ids = slice(TokenId, ids_ptr, count) orelse return fail(.invalid_argument, -1, "token pointer must be non-null and 4-byte aligned", .{});
    const check = checkTokens(m, ids);
    if (check != 0) return check;
    const n = m.consume(ids, mode) catch return failMatcher(m);
    return @intCast(n);
}

/// Consumes `token`, then writes the next mask: the one call of a decoding step.
/// Returns 1 (accepted, mask written), 0 (refused, state and buffer unchanged) or an error.
/// With `out_ptr` 0 the mask stays in the matcher's own buffer (`ts_matcher_mask_ptr`).
export fn ts_matcher_consume_and_fill(handle: i32, token: u32, out_ptr: u32, out_words: u32) i32 {
    const accepted = ts_matcher_consume_token(handle, token);
    if (accepted != 1) return accepted;
    const status = ts_matcher_fill_bitmask(handle, out_ptr, out_words);
    if (status != 0) return status;
    return 1;
}

/// Undoes the last `count` tokens (EOS counts as one).
export fn ts_matcher_rollback(handle: i32, count: u32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    if (!m.rollback(count)) return fail(.invalid_argument, -1, "cannot roll back {d} tokens: only {d} consumed", .{ count, m.tokenCount() });
    return ok();
}

export fn ts_matcher_token_count(handle: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    return @intCast(m.tokenCount());
}

/// 1 when the output may end here (EOS allowed), else 0.
export fn ts_matcher_is_accepting(handle: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    return @intFromBool(m.isAccepting());
}

/// 1 when nothing but EOS can follow (or EOS was consumed, or the matcher failed), else 0.
export fn ts_matcher_is_stopped(handle: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    const stopped = m.isStopped() catch return failMatcher(m);
    return @intFromBool(stopped);
}

/// Writes the bytes the grammar forces next (at most `capacity`); returns how many.
export fn ts_matcher_compute_ff_bytes(handle: i32, out_ptr: u32, capacity: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const out = slice(u8, out_ptr, capacity) orelse return fail(.invalid_argument, -1, "bad forced-bytes buffer", .{});
    const n = m.forcedBytes(out) catch return failMatcher(m);
    return @intCast(n);
}

/// Fast-forward healing in one call: the earliest offset `i >= from` such that some token
/// strictly extends the bytes from `i` to the end of the `len` bytes at `ptr`, and the grammar,
/// after the bytes before `i`, allows such a token; `len` when none. The state does not change.
export fn ts_matcher_heal_position(handle: i32, ptr: u32, len: u32, from: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    if (len > matcher_mod.input_bytes_max) return failLimit(.input_size, "heal_position");
    const bytes = slice(u8, ptr, len) orelse return fail(.invalid_argument, -1, "bad bytes pointer", .{});
    if (from > len) return fail(.invalid_argument, -1, "heal_position: from {d} is past the {d} bytes", .{ from, len });
    const index = m.healPosition(bytes, from) catch return failMatcher(m);
    return @intCast(index);
}

/// How far the grammar follows the `len` bytes at `ptr` from the current position: returns
/// the length of the longest prefix it allows, and writes the bytes it forces after that
/// prefix (at most `forced_capacity`) to `forced_ptr`, their count to `forced_len_out`. The
/// state does not change. Prompt lookup's text drafts: one call per lookup round.
export fn ts_matcher_validate_text(handle: i32, ptr: u32, len: u32, forced_ptr: u32, forced_capacity: u32, forced_len_out: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    if (len > matcher_mod.input_bytes_max) return failLimit(.input_size, "validate_text");
    const text = slice(u8, ptr, len) orelse return fail(.invalid_argument, -1, "bad text pointer", .{});
    const forced = slice(u8, forced_ptr, forced_capacity) orelse return fail(.invalid_argument, -1, "bad forced-bytes buffer", .{});
    if (slice(i32, forced_len_out, 1) == null) return fail(.invalid_argument, -1, "bad out-pointer", .{});
    const step = m.validateText(text, forced) catch return failMatcher(m);
    _ = writeOut(forced_len_out, @intCast(step.forced_bytes));
    return @intCast(step.valid_bytes);
}

/// Masks for every position of a draft of `count` tokens (u32 at `ids_ptr`): the mask before
/// each token the grammar accepts and after the last, `out_words` u32 words each, written one
/// after another to `out_ptr` (room for `count + 1` masks). Returns the number of accepted
/// draft tokens `v`; `v + 1` masks are written. The state does not change.
export fn ts_matcher_fill_draft_masks(handle: i32, ids_ptr: u32, count: u32, out_ptr: u32, out_words: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const words_expected = (m.tokenizer.vocabSize() + 31) / 32;
    if (out_words != words_expected) return fail(.invalid_argument, -1, "mask buffer has {d} words per mask; this vocabulary needs {d}", .{ out_words, words_expected });
    const ids = slice(TokenId, ids_ptr, count) orelse return fail(.invalid_argument, -1, "token pointer must be non-null and 4-byte aligned", .{});
    const check = checkTokens(m, ids);
    if (check != 0) return check;
    const total = std.math.mul(u32, count + 1, out_words) catch return fail(.invalid_argument, -1, "draft of {d} tokens is too long", .{count});
    const out = slice(u32, out_ptr, total) orelse return fail(.invalid_argument, -1, "mask pointer must be non-null and 4-byte aligned", .{});
    const valid = m.draftMasks(ids, out, out_words) catch return failMatcher(m);
    return @intCast(valid);
}

// ---------------------------------------------------------------------------------------------
// Diagnostics: what the decoding path itself never calls (healing asks `ts_*_heal_position`,
// which answers the two extension questions below for a whole window in one call). Tests,
// benchmarks and fuzzing use them; wasm/ABI.md lists them apart.

/// Fuel units the last call on the matcher's grammar spent (saturating at 2^31 - 1): the work
/// measure that `docs/limits.md` calibrates against wall time, for benchmarks and tests.
export fn ts_matcher_last_fuel(handle: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    return @intCast(@min(m.fuelSpent(), std.math.maxInt(i32)));
}

/// Trie nodes of a tokenizer (for benchmarks and tests).
export fn ts_tokenizer_node_count(handle: i32) i32 {
    const tokenizer = tokenizers.get(handle) orelse return invalidHandle("tokenizer", handle);
    return @intCast(tokenizer.trie.nodes.len);
}

/// 1 when some token's bytes strictly extend the `len` bytes at `ptr`, else 0 (the
/// grammar-free question of `tokenize_partial`); answered from the trie, not the vocabulary.
export fn ts_tokenizer_has_extension(handle: i32, ptr: u32, len: u32) i32 {
    const tokenizer = tokenizers.get(handle) orelse return invalidHandle("tokenizer", handle);
    const bytes = slice(u8, ptr, len) orelse return fail(.invalid_argument, -1, "bad bytes pointer", .{});
    const node = tokenizer.trie.find(bytes) orelse return 0;
    return @intFromBool(tokenizer.trie.hasExtension(node));
}

/// After the `prefix_len` bytes at `prefix_ptr` (from the current position), does the grammar
/// allow a token that strictly extends the `suffix_len` bytes at `suffix_ptr`? 1 or 0; the
/// state does not change. The question `ts_matcher_heal_position` asks at each offset.
export fn ts_matcher_extension_allowed(handle: i32, prefix_ptr: u32, prefix_len: u32, suffix_ptr: u32, suffix_len: u32) i32 {
    const m = switch (getLive(handle)) {
        .matcher => |m| m,
        .status => |s| return s,
    };
    const prefix = slice(u8, prefix_ptr, prefix_len) orelse return fail(.invalid_argument, -1, "bad prefix pointer", .{});
    const suffix = slice(u8, suffix_ptr, suffix_len) orelse return fail(.invalid_argument, -1, "bad suffix pointer", .{});
    const allowed = m.extensionAllowed(prefix, suffix) catch return failMatcher(m);
    return @intFromBool(allowed);
}

// ---------------------------------------------------------------------------------------------
// Debugging

/// Bytes currently allocated by the module (all objects and host buffers), in KiB: a leak
/// shows here as growth, while linear memory itself never shrinks.
export fn ts_debug_live_kib() i32 {
    return @intCast(Counting.live_bytes >> 10);
}

/// Of those, the KiB the instance's pattern cache holds (`pattern_cache.zig`): bounded, and
/// emptied when full, so a leak check counts the rest.
export fn ts_debug_pattern_cache_kib() i32 {
    return @intCast(pattern_cache.sizeBytes() >> 10);
}

/// Work on purpose: `rounds` million steps of a loop the optimizer cannot remove, so hosts
/// can test their wall-clock deadline. Returns a checksum.
export fn ts_debug_spin(rounds: u32) i32 {
    var x: u32 = 1;
    var i: u64 = 0;
    const steps = @as(u64, rounds) * 1_000_000;
    while (i < steps) : (i += 1) {
        x = x *% 1_664_525 +% 1_013_904_223;
        std.mem.doNotOptimizeAway(x);
    }
    return @bitCast(x);
}

/// Masks walk from clamped lexer states (`on` ≠ 0, the default) or from the real ones (0): tests
/// compare the two. Applies to every matcher of the instance. Returns the previous setting.
export fn ts_debug_clamp(on: i32) i32 {
    const previous = matcher_mod.clamp_enabled;
    matcher_mod.clamp_enabled = on != 0;
    return @intFromBool(previous);
}

/// Grammars compiled afterwards share parsed patterns through the instance's cache (`on` ≠ 0,
/// the default) or parse every pattern themselves (0, which also empties the cache): tests
/// compare the two. Returns how many patterns the cache has supplied so far (saturating).
export fn ts_debug_pattern_cache(on: i32) i32 {
    const hits = pattern_cache.hits;
    pattern_cache_enabled = on != 0;
    if (!pattern_cache_enabled) pattern_cache.clear(gpa);
    return @intCast(@min(hits, std.math.maxInt(i32)));
}

/// How many masks of the matcher's grammar replayed a walk-cache entry (`nested` = 0), or how
/// many nested entries those replays took (`nested` ≠ 0), saturating: tests check that the
/// cache's paths ran. -1 for an unknown handle.
export fn ts_debug_walk_replays(handle: i32, nested: i32) i32 {
    const m = matchers.get(handle) orelse return invalidHandle("matcher", handle);
    const cache = &m.grammar.walk_cache;
    return @intCast(@min(if (nested != 0) cache.nested_replays else cache.replays, std.math.maxInt(i32)));
}

/// Masks use the slicer (`on` ≠ 0, the default) or walk the whole trie (0): tests compare the
/// two. Applies to every matcher of the instance. Returns the previous setting.
export fn ts_debug_slices(on: i32) i32 {
    const previous = matcher_mod.slices_enabled;
    matcher_mod.slices_enabled = on != 0;
    return @intFromBool(previous);
}

/// A trap on purpose, so hosts can test that a trap inside the module is survivable.
export fn ts_debug_trap() i32 {
    @trap();
}

test {
    _ = @import("regex.zig");
    _ = @import("pattern_cache.zig");
    _ = @import("regex_syntax.zig");
    _ = @import("lexer.zig");
    _ = @import("trie.zig");
    _ = @import("matcher.zig");
    _ = @import("earley.zig");
    _ = @import("ir_reader.zig");
    _ = @import("slicer.zig");
    _ = @import("handles.zig");
    _ = @import("distinct.zig");
}
