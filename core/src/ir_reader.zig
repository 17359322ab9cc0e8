//! The grammar IR reader: the words a front-end sends (`ts_grammar_new_ir`) become a `Cfg` for
//! the Earley parser and one expression per lexeme for the lexer.
//!
//! The binary layout is in `wasm/ABI.md`, what a grammar means in `docs/grammar_ir.md`; the
//! Python writer is `encode_ir` in `pybind/tokensieve/_ir.py`. In short, little-endian u32
//! words: a header (magic, lexeme count, nonterminal count, rule count, start, flags), the skip
//! pattern and the no-skip nonterminals when the flags say so, each lexeme (kind, flags, length
//! or id count, payload, then its and/not patterns and token budget when its flags say so),
//! each rule (lhs, length, symbols; a symbol is a lexeme index or
//! `ir_nonterminal_flag | nonterminal`). Byte strings are a byte length, then the bytes padded
//! with zeros to whole words.
//!
//! The IR comes from the host, so nothing in it is trusted: every read is bounds-checked
//! (`Reader`), every lexeme and nonterminal index is checked against its count, the counts are
//! below 2^24 so that `end_flag` and `ir_nonterminal_flag` never collide with an index, and the
//! words must be used up exactly. Special token ids are not checked: a grammar does not know
//! its tokenizer, and a matcher ignores ids that are not special tokens of its own
//! (`Tokenizer.isSpecialNotEos`). A malformed IR is `error.BadIr` with a message in the diagnostic (and the lexeme
//! it concerns, when there is one); a bad pattern is `error.Syntax` with its offset.
//!
//! What the reader guarantees the parser and the lexer:
//! - rule 0 is the augmented start `S' → S`, so `Cfg.accept_pos` is 1; `S'` is nonterminal
//!   `nonterminal_count` of the IR, after the IR's own;
//! - no lexeme matches the empty string: a nullable lexeme keeps its non-empty part, and every
//!   use of it becomes an optional nonterminal `opt_l → l | ε` (numbered after `S'`);
//! - alternative lexemes are merged (`mergeAlternatives`): the first of a group stands for all,
//!   the others match nothing and their rules are dropped;
//! - the skip lexeme, if any, is lexer lexeme `lexeme_count`, after the IR's lexemes; special
//!   lexemes are the expression `nothing` in the lexer and carry sorted token ids instead;
//! - `nullable`, the rule index (`nt_rules`, `rule_positions`) and `skip_in_progress` are
//!   computed here once, so the parser only reads tables.
//!
//! It lives apart from `earley.zig` because it is a different kind of code: a validating,
//! run-once translation whose cost is reading the host's words, beside a parser whose cost is
//! its inner loops.

const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const regex_syntax = @import("regex_syntax.zig");
const PatternCache = @import("pattern_cache.zig").PatternCache;
const earley = @import("earley.zig");
const TokenId = @import("trie.zig").TokenId;
const Cfg = earley.Cfg;
const end_flag = earley.end_flag;

// ---------------------------------------------------------------------------------------------
// The layout's constants

pub const ir_magic: u32 = 0x31475354; // "TSG1"
/// Marks a rule symbol as a nonterminal; without it a symbol is a lexeme index.
pub const ir_nonterminal_flag: u32 = 1 << 31;
/// Lexeme, nonterminal and rule counts are below this: indices never reach the flag bits.
const count_max: u32 = 1 << 24;

pub const LexemeKind = enum(u32) { regex = 0, literal = 1, special = 2 };

/// The header's flags word; bits not named here are ignored.
const HeaderFlags = packed struct(u32) {
    /// The skip lexeme may come before the first lexeme and after the last.
    allow_initial_skip: bool,
    /// A skip pattern follows the header.
    has_skip: bool,
    /// A list of no-skip nonterminals follows (after the skip pattern).
    has_no_skip: bool,
    /// At most one skip between two lexemes.
    skip_once: bool,
    /// A list of distinct-list nonterminals follows (after the no-skip list).
    has_distinct: bool,
    unused: u27,
};

/// A lexeme's flags word; bits not named here are ignored.
const LexemeFlags = packed struct(u32) {
    /// Ends at its shortest match.
    lazy: bool,
    /// And/not pattern lists follow the payload (`readBooleanParts`).
    boolean: bool,
    /// `.` matches `\n` too.
    dot_all: bool,
    /// ASCII letters match both cases.
    case_insensitive: bool,
    /// A `max_tokens` word follows.
    token_budget: bool,
    /// A JSON string with a length bound (`docs/grammar_ir.md`): the front-end vouches that
    /// the payload spells only JSON strings `"C*"` and that the one and-pattern is the length
    /// bound `"C{a,n}"`, or (no and-pattern) that the payload is that bound itself, C being
    /// the JSON string character either way. Masks may then drop the bound where no token can
    /// reach it (`regex.ExprSet.clampedLengthBound`) and take the text tokens by their
    /// characters near its end (`slicer.ShortTexts`); any other shape ignores the flag.
    string_length: bool,
    unused: u26,
};

pub const CompileError = regex_syntax.Error || error{BadIr};

pub const CompileDiagnostic = struct {
    /// The lexeme whose pattern failed, if any.
    lexeme: ?u32 = null,
    regex: regex_syntax.Diagnostic = .{},
    message: []const u8 = "",
};

/// The compiled grammar plus what the lexer needs: one expression per lexer lexeme (text and
/// special lexemes, then the skip lexeme) and their laziness.
pub const Compiled = struct {
    cfg: Cfg,
    lexeme_exprs: []regex.ExprId,
    lazy: []bool,
    /// Per lexer lexeme: the character term C of its length bound when the lexeme is a JSON
    /// string `"P" ∩ "C{a,n}"` or bound `"C{a,n}"` marked `string_length`, else `nothing`.
    length_chars: []regex.ExprId,

    pub fn deinit(self: *Compiled, gpa: Allocator) void {
        self.cfg.deinit(gpa);
        gpa.free(self.lexeme_exprs);
        gpa.free(self.lazy);
        gpa.free(self.length_chars);
        self.* = undefined;
    }
};

/// Bounds-checked reads of the host's words. Lengths come from the host too: they are compared
/// with what is left, never added to a position first (in wasm32 `at + len` can wrap).
const Reader = struct {
    words: []const u32,
    at: usize = 0,

    fn word(self: *Reader) error{BadIr}!u32 {
        if (self.at >= self.words.len) return error.BadIr;
        self.at += 1;
        return self.words[self.at - 1];
    }

    /// `len` bytes, padded with zeros to whole words.
    fn bytes(self: *Reader, len: u32) error{BadIr}![]const u8 {
        const padded = try self.slice(len / 4 + @intFromBool(len % 4 != 0));
        return std.mem.sliceAsBytes(padded)[0..len];
    }

    fn slice(self: *Reader, len: u32) error{BadIr}![]const u32 {
        assert(self.at <= self.words.len);
        if (len > self.words.len - self.at) return error.BadIr;
        const result = self.words[self.at..][0..len];
        self.at += len;
        return result;
    }
};

fn bad(diag: *CompileDiagnostic, message: []const u8) CompileError {
    diag.message = message;
    return error.BadIr;
}

/// Parsed patterns of one compile, by flags and text. Front-ends repeat long patterns (every
/// JSON Schema key lexeme carries the whole JSON string regex, ~230 bytes, whose parse costs
/// about as much as the rest of a small grammar's compile), and a lookup costs one hash of the
/// text. A parse is a function of (text, flags) into the hash-consed `exprs`, so a hit returns
/// the id the parse would return (and spares its fuel). Keys borrow the host's words, which
/// outlive the compile; failed parses are not kept (they end the compile).
///
/// Literal lexemes' terms are kept by their text too (`literals`), and a literal pattern
/// (`literalPatternText`) looks its text up there: a JSON Schema key lexeme excludes its
/// object's property names, `\"name\"`, each of them also the literal lexeme `"name"` of its
/// member, whose term is then found by one hash of the text instead of being interned again
/// byte by byte (MaskBench kb_1161: 2,011 names excluded, 43 kB of distinct texts, a third of
/// its compile's interning).
const ParseMemo = struct {
    by_flags: [4]std.HashMapUnmanaged([]const u8, regex.ExprId, regex.BytesContext, 80) = @splat(.empty),
    /// The terms of the literal lexemes read so far, by their text (keys borrow the host's
    /// words, like `by_flags`'s).
    literals: std.HashMapUnmanaged([]const u8, regex.ExprId, regex.BytesContext, 80) = .empty,
    /// The instance's patterns of earlier grammars (`pattern_cache.zig`), if any.
    shared: ?*PatternCache = null,

    fn deinit(self: *ParseMemo, gpa: Allocator) void {
        for (&self.by_flags) |*map| map.deinit(gpa);
        self.literals.deinit(gpa);
    }

    /// `exprs.literal(text)` for a literal lexeme's `text` (borrowed from the host's words),
    /// kept for the literal patterns that spell the same text.
    fn literal(self: *ParseMemo, exprs: *regex.ExprSet, text: []const u8) CompileError!regex.ExprId {
        if (self.literals.get(text)) |id| return id;
        const id = try exprs.literal(text);
        try self.literals.put(exprs.gpa, text, id);
        return id;
    }

    fn parse(self: *ParseMemo, exprs: *regex.ExprSet, pattern: []const u8, flags: regex_syntax.Flags, diag: *regex_syntax.Diagnostic) CompileError!regex.ExprId {
        const map = &self.by_flags[@as(usize, @intFromBool(flags.dot_all)) * 2 + @intFromBool(flags.case_insensitive)];
        if (map.get(pattern)) |id| return id;
        var text_buffer: [literal_pattern_bytes_max]u8 = undefined;
        const id = if (literalPatternText(pattern, flags, &text_buffer)) |text|
            self.literals.get(text) orelse try exprs.literal(text)
        else if (self.shared) |shared| blk: {
            if (try shared.lookup(exprs, pattern, flags)) |id| break :blk id;
            const id = try regex_syntax.parse(exprs, pattern, flags, diag);
            shared.offer(exprs.gpa, exprs, pattern, flags, id);
            break :blk id;
        } else try regex_syntax.parse(exprs, pattern, flags, diag);
        try map.put(exprs.gpa, pattern, id);
        return id;
    }
};

/// Patterns longer than this are always parsed (`literalPatternText`).
const literal_pattern_bytes_max = 256;

/// The text a pattern matches when it is literal text: ASCII characters that are not regex
/// syntax, and backslash-escaped ASCII punctuation (`\"name\"`, `a\.b`), written into
/// `buffer`; null when the pattern needs the parser (any other syntax, non-ASCII, or ignoring
/// case). The term `ExprSet.literal` builds from it is the one the parser builds from the
/// pattern (hash-consed, right-nested bytes: tested below), without the parser's work or a
/// pattern cache entry. Why: a JSON Schema key lexeme excludes the object's property names
/// as such patterns, which differ from schema to schema, so each missed the pattern cache and
/// was parsed: a fifth of a median MaskBench compile's core work.
fn literalPatternText(pattern: []const u8, flags: regex_syntax.Flags, buffer: *[literal_pattern_bytes_max]u8) ?[]const u8 {
    if (flags.case_insensitive or pattern.len > buffer.len) return null;
    var len: usize = 0;
    var i: usize = 0;
    while (i < pattern.len) : (i += 1) {
        var c = pattern[i];
        if (c == '\\') {
            i += 1;
            if (i == pattern.len) return null;
            c = pattern[i];
            // `\d`, `\n`, `\x41`, … are classes or other characters: only punctuation is itself.
            if (c < 0x21 or c > 0x7E or std.ascii.isAlphanumeric(c)) return null;
        } else {
            if (c < 0x20 or c > 0x7E) return null;
            switch (c) {
                '.', '[', ']', '(', ')', '{', '}', '*', '+', '?', '|', '^', '$' => return null,
                else => {},
            }
        }
        buffer[len] = c;
        len += 1;
    }
    return buffer[0..len];
}

/// `base ∩ and_1 ∩ … ∩ ¬(not_1 | …)`: the and/not pattern lists that follow a lexeme whose
/// flags say `boolean` (each list: a count, then length-prefixed patterns).
/// `length_char`: set to the character term of the one and-pattern when it is a JSON string
/// length bound and there are no not-patterns (`nothing` otherwise).
fn readBooleanParts(exprs: *regex.ExprSet, memo: *ParseMemo, r: *Reader, base: regex.ExprId, length_char: *regex.ExprId, diag: *CompileDiagnostic) CompileError!regex.ExprId {
    var parts: [64]regex.ExprId = undefined;
    var n: usize = 0;
    parts[n] = base;
    n += 1;
    const and_count = try r.word();
    if (and_count > 32) return bad(diag, "too many and-patterns (at most 32)");
    for (0..and_count) |_| {
        const len = try r.word();
        parts[n] = try memo.parse(exprs, try r.bytes(len), .{}, &diag.regex);
        n += 1;
    }
    const not_count = try r.word();
    if (not_count > 0) {
        var excluded: std.ArrayList(regex.ExprId) = .empty;
        defer excluded.deinit(exprs.gpa);
        for (0..not_count) |_| {
            const len = try r.word();
            try excluded.append(exprs.gpa, try memo.parse(exprs, try r.bytes(len), .{}, &diag.regex));
        }
        parts[n] = try exprs.not(try exprs.alt(excluded.items));
        n += 1;
    }
    length_char.* = if (and_count == 1 and not_count == 0) (try exprs.lengthBoundChar(parts[1])) orelse .nothing else .nothing;
    return exprs.andAll(parts[0..n]);
}

/// "None" in the per-lexeme tables of `compile` (no left-hand side, not optional).
const no_lhs = std.math.maxInt(u32);

/// Merges *alternative lexemes* into one: lexemes that are each the whole right-hand side of a
/// rule of the same nonterminal (`A → l₁ | l₂ | …`) and occur nowhere else. The first of them
/// (lowest index) becomes the union of their expressions; the others become ∅ and are marked
/// in `merged`, and the compiler drops their rules. Reads the rules from `r` without
/// consuming them (the caller rewinds); the IR is validated by the caller's own pass.
///
/// Why: a choice list, a Lark rule of string alternatives or a JSON Schema `enum` of 10,000
/// strings is 10,000 lexemes. A lexer state then holds 10,000 (lexeme, expression) pairs, and
/// every transition out of it derives them all, so one mask did millions of units of work and
/// ran out of fuel. As one lexeme, the union is one expression, which `ExprSet.alt` factors
/// into the trie of the words (`factorHeads`): a transition is then a lookup of one member.
///
/// The language and the parse are unchanged: wherever the parser allows one of these lexemes
/// it allows all of them (they all complete `A`, and appear nowhere else), so the lexer state
/// holds all or none of them; longest match ends the union exactly where it ends the last of
/// them; and whichever of them matched, the parser completes `A`. Lazy, special, capped and
/// nullable lexemes keep their own identity (their ending rules differ).
fn mergeAlternatives(
    gpa: Allocator,
    exprs: *regex.ExprSet,
    r_in: Reader,
    rule_count: u32,
    lexeme_exprs: []regex.ExprId,
    mergeable: []const bool,
    merged: []bool,
) CompileError!void {
    const lexeme_count = merged.len;
    @memset(merged, false);
    // Per lexeme: how often it occurs in a right-hand side, and the left-hand side of the rule
    // it is the whole of (or `no_lhs`).
    const uses = try gpa.alloc(u32, lexeme_count);
    defer gpa.free(uses);
    @memset(uses, 0);
    const sole_lhs = try gpa.alloc(u32, lexeme_count);
    defer gpa.free(sole_lhs);
    @memset(sole_lhs, no_lhs);
    var r = r_in;
    for (0..rule_count) |_| {
        // A malformed IR merges nothing; the caller's pass says what is wrong with it.
        const lhs = r.word() catch return;
        const len = r.word() catch return;
        const symbols = r.slice(len) catch return;
        for (symbols) |sym| {
            if (sym & ir_nonterminal_flag == 0 and sym < lexeme_count) uses[sym] +|= 1;
        }
        if (len == 1 and symbols[0] & ir_nonterminal_flag == 0 and symbols[0] < lexeme_count) sole_lhs[symbols[0]] = lhs;
    }
    // (lhs, lexeme) of each candidate, sorted: a group is a run of one lhs.
    var keys: std.ArrayList(u64) = .empty;
    defer keys.deinit(gpa);
    for (0..lexeme_count) |l| {
        if (uses[l] != 1 or sole_lhs[l] == no_lhs or !mergeable[l]) continue;
        try keys.append(gpa, (@as(u64, sole_lhs[l]) << 32) | l);
    }
    std.mem.sortUnstable(u64, keys.items, {}, std.sort.asc(u64));
    var members: std.ArrayList(regex.ExprId) = .empty;
    defer members.deinit(gpa);
    var i: usize = 0;
    while (i < keys.items.len) {
        var j = i + 1;
        while (j < keys.items.len and keys.items[j] >> 32 == keys.items[i] >> 32) j += 1;
        if (j - i >= 2) {
            members.clearRetainingCapacity();
            for (keys.items[i..j]) |key| try members.append(gpa, lexeme_exprs[@as(u32, @truncate(key))]);
            const first: u32 = @truncate(keys.items[i]);
            lexeme_exprs[first] = if (members.items.len >= regex.factor_branch_min)
                try exprs.altFactored(members.items)
            else
                try exprs.alt(members.items);
            for (keys.items[i + 1 .. j]) |key| {
                const l: u32 = @truncate(key);
                lexeme_exprs[l] = .nothing;
                merged[l] = true;
            }
        }
        i = j;
    }
}

/// Reads and checks the IR `words`, building its lexemes' expressions in `exprs`. On
/// `error.BadIr` and `error.Syntax`, `diag` says what and where.
pub fn compile(gpa: Allocator, exprs: *regex.ExprSet, words: []const u32, diag: *CompileDiagnostic) CompileError!Compiled {
    return compileShared(gpa, exprs, words, null, diag);
}

/// `compile`, parsing the lexemes' patterns through `shared` (the instance's pattern cache)
/// when given: the same terms, built from recipes where a pattern was met before.
pub fn compileShared(gpa: Allocator, exprs: *regex.ExprSet, words: []const u32, shared: ?*PatternCache, diag: *CompileDiagnostic) CompileError!Compiled {
    // What a failed read (`Reader`) means; every other check sets its own message.
    diag.message = "the IR ends early (truncated, or a length or count runs past its end)";
    var r: Reader = .{ .words = words };
    const header = try readHeader(&r, diag);
    var lexemes = try Lexemes.init(gpa, header.lexeme_count, header.flags.has_skip);
    defer lexemes.deinitScratch(gpa);
    var memo: ParseMemo = .{ .shared = shared };
    defer memo.deinit(gpa);
    errdefer lexemes.deinitResult(gpa);
    // Room for every lexeme at once (each takes three words at least): growing by doubling
    // rehashed the texts at each step (kb_1161's 1,422 names: a tenth of the memo's time).
    try memo.literals.ensureTotalCapacity(gpa, @intCast(@min(header.lexeme_count, words.len / 3)));
    if (header.flags.has_skip) {
        const len = try r.word();
        const pattern = try r.bytes(len);
        diag.lexeme = header.lexeme_count;
        // Through the memo and the instance's cache like the lexemes' patterns: a JSON
        // Schema's whitespace is every grammar's skip, and parsing it was a tenth of a median
        // compile in wasmtime with masks between compiles (the parser's code had gone cold).
        lexemes.exprs[header.lexeme_count] = try memo.parse(exprs, pattern, .{}, &diag.regex);
    }
    const no_skip = try gpa.alloc(bool, header.nt_count + 1);
    defer gpa.free(no_skip);
    @memset(no_skip, false);
    if (header.flags.has_no_skip) {
        const count = try r.word();
        for (try r.slice(count)) |nt| {
            if (nt >= header.nt_count) return bad(diag, "no-skip nonterminal out of range");
            no_skip[nt] = true;
        }
    }
    const distinct_lists = try gpa.alloc(bool, header.nt_count);
    defer gpa.free(distinct_lists);
    @memset(distinct_lists, false);
    if (header.flags.has_distinct) {
        const count = try r.word();
        for (try r.slice(count)) |nt| {
            if (nt >= header.nt_count) return bad(diag, "distinct-list nonterminal out of range");
            distinct_lists[nt] = true;
        }
    }
    for (0..header.lexeme_count) |l| try lexemes.read(gpa, exprs, &memo, &r, @intCast(l), diag);
    diag.lexeme = null;
    lexemes.special_start[header.lexeme_count] = @intCast(lexemes.special_ids.items.len);

    var rules: Rules = .{};
    defer rules.starts.deinit(gpa);
    defer rules.lhs.deinit(gpa);
    defer rules.rhs.deinit(gpa);
    try readRules(gpa, exprs, &r, header, &lexemes, &rules, diag);
    if (r.at != words.len) return bad(diag, "trailing words after the grammar IR");

    const nt_count_total = header.nt_count + 1 + @as(u32, @intCast(lexemes.optional.items.len));
    const nt_base = header.lexeme_count;
    const skip_in_progress: []bool = if (header.flags.has_no_skip) try skipInProgress(gpa, &rules, header.nt_count, no_skip) else &.{};
    errdefer gpa.free(skip_in_progress);
    const nt_rules = try gpa.alloc(u32, nt_count_total + 1);
    errdefer gpa.free(nt_rules);
    const rule_positions = try gpa.alloc(u32, rules.lhs.items.len);
    errdefer gpa.free(rule_positions);
    try groupRules(gpa, &rules, nt_rules, rule_positions);
    const nullable = try gpa.alloc(bool, nt_count_total);
    errdefer gpa.free(nullable);
    try computeNullable(gpa, &rules, nt_base, nullable);
    const rhs = try gpa.dupe(u32, rules.rhs.items);
    errdefer gpa.free(rhs);
    const distinct_pos: []bool = if (header.flags.has_distinct) try distinctPositions(gpa, &rules, nt_base, distinct_lists, nullable, diag) else &.{};
    errdefer gpa.free(distinct_pos);
    const special_ids = try gpa.dupe(TokenId, lexemes.special_ids.items);

    lexemes.special_ids.deinit(gpa); // its copy goes into the result, with the other tables
    return .{
        .cfg = .{
            .lexeme_count = header.lexeme_count,
            .nonterminal_base = nt_base,
            .skip_lexeme = if (header.flags.has_skip) header.lexeme_count else null,
            .allow_initial_skip = header.flags.allow_initial_skip,
            .skip_once = header.flags.skip_once,
            .has_lazy = lexemes.has_lazy,
            .lazy_walk = lexemes.has_lazy or distinct_pos.len > 0,
            .has_special = lexemes.has_special,
            .rhs = rhs,
            .rule_positions = rule_positions,
            .nt_rules = nt_rules,
            .nullable = nullable,
            .accept_pos = 1,
            .special_start = lexemes.special_start,
            .special_ids = special_ids,
            .is_special = lexemes.is_special,
            .token_max = lexemes.token_max,
            .has_token_max = std.mem.indexOfNone(u32, lexemes.token_max, &.{0}) != null,
            .skip_in_progress = skip_in_progress,
            .distinct_pos = distinct_pos,
        },
        .lexeme_exprs = lexemes.exprs,
        .lazy = lexemes.lazy,
        .length_chars = lexemes.length_chars,
    };
}

const Header = struct {
    lexeme_count: u32,
    nt_count: u32,
    rule_count: u32,
    start_nt: u32,
    flags: HeaderFlags,
};

fn readHeader(r: *Reader, diag: *CompileDiagnostic) CompileError!Header {
    if (try r.word() != ir_magic) return bad(diag, "not a grammar IR (bad magic)");
    const header: Header = .{
        .lexeme_count = try r.word(),
        .nt_count = try r.word(),
        .rule_count = try r.word(),
        .start_nt = try r.word(),
        .flags = @bitCast(try r.word()),
    };
    if (header.nt_count == 0 or header.start_nt >= header.nt_count) return bad(diag, "start nonterminal out of range");
    if (header.lexeme_count >= count_max or header.nt_count >= count_max or header.rule_count >= count_max) {
        return bad(diag, "grammar too large");
    }
    return header;
}

/// The per-lexeme tables `compile` fills while reading the lexemes. `exprs`, `lazy` and
/// `token_max` have an entry per lexer lexeme (the IR's, then the skip lexeme if any), the
/// others one per IR lexeme. The first six go into the result; the rest is scratch for
/// reading the rules.
const Lexemes = struct {
    exprs: []regex.ExprId,
    lazy: []bool,
    length_chars: []regex.ExprId,
    token_max: []u32,
    is_special: []bool,
    /// Lexeme l's special token ids are `special_ids[special_start[l]..special_start[l + 1]]`.
    special_start: []u32,
    special_ids: std.ArrayList(TokenId) = .empty,
    has_lazy: bool = false,
    has_special: bool = false,
    /// The nullable lexemes, in order; per lexeme, its index among them, or `no_lhs`.
    optional: std.ArrayList(u32) = .empty,
    optional_index: []u32,
    /// Per lexeme: may it be merged with alternatives (`mergeAlternatives`)?
    mergeable: []bool,

    fn init(gpa: Allocator, count: u32, has_skip: bool) Allocator.Error!Lexemes {
        const lexer_count = count + @intFromBool(has_skip);
        const exprs = try gpa.alloc(regex.ExprId, lexer_count);
        errdefer gpa.free(exprs);
        const lazy = try gpa.alloc(bool, lexer_count);
        errdefer gpa.free(lazy);
        @memset(lazy, false);
        const length_chars = try gpa.alloc(regex.ExprId, lexer_count);
        errdefer gpa.free(length_chars);
        @memset(length_chars, .nothing);
        const token_max = try gpa.alloc(u32, lexer_count);
        errdefer gpa.free(token_max);
        @memset(token_max, 0);
        const is_special = try gpa.alloc(bool, count);
        errdefer gpa.free(is_special);
        const special_start = try gpa.alloc(u32, count + 1);
        errdefer gpa.free(special_start);
        const optional_index = try gpa.alloc(u32, count);
        errdefer gpa.free(optional_index);
        @memset(optional_index, no_lhs);
        const mergeable = try gpa.alloc(bool, count);
        return .{
            .exprs = exprs,
            .lazy = lazy,
            .length_chars = length_chars,
            .token_max = token_max,
            .is_special = is_special,
            .special_start = special_start,
            .optional_index = optional_index,
            .mergeable = mergeable,
        };
    }

    fn deinitScratch(self: *Lexemes, gpa: Allocator) void {
        self.optional.deinit(gpa);
        gpa.free(self.optional_index);
        gpa.free(self.mergeable);
    }

    /// On failure: the tables the result would have taken.
    fn deinitResult(self: *Lexemes, gpa: Allocator) void {
        gpa.free(self.exprs);
        gpa.free(self.lazy);
        gpa.free(self.length_chars);
        gpa.free(self.token_max);
        gpa.free(self.is_special);
        gpa.free(self.special_start);
        self.special_ids.deinit(gpa);
    }

    /// Reads IR lexeme `l`: kind, flags, payload, then its and/not patterns and token budget.
    fn read(self: *Lexemes, gpa: Allocator, exprs: *regex.ExprSet, memo: *ParseMemo, r: *Reader, l: u32, diag: *CompileDiagnostic) CompileError!void {
        const kind = try r.word();
        const flags: LexemeFlags = @bitCast(try r.word());
        const n = try r.word();
        const special = kind == @backingInt(LexemeKind.special);
        self.lazy[l] = flags.lazy;
        self.has_lazy = self.has_lazy or flags.lazy;
        self.special_start[l] = @intCast(self.special_ids.items.len);
        self.is_special[l] = special;
        diag.lexeme = l;
        const syntax_flags: regex_syntax.Flags = .{ .dot_all = flags.dot_all, .case_insensitive = flags.case_insensitive };
        switch (kind) {
            @backingInt(LexemeKind.regex) => self.exprs[l] = try memo.parse(exprs, try r.bytes(n), syntax_flags, &diag.regex),
            @backingInt(LexemeKind.literal) => self.exprs[l] = try memo.literal(exprs, try r.bytes(n)),
            @backingInt(LexemeKind.special) => {
                self.exprs[l] = .nothing;
                self.has_special = true;
                try self.special_ids.appendSlice(gpa, @ptrCast(try r.slice(n)));
                std.mem.sort(TokenId, self.special_ids.items[self.special_start[l]..], {}, TokenId.lessThan);
            },
            else => return bad(diag, "unknown lexeme kind"),
        }
        if (flags.boolean) {
            if (special) return bad(diag, "a special lexeme cannot have and/not patterns");
            var length_char: regex.ExprId = .nothing;
            self.exprs[l] = try readBooleanParts(exprs, memo, r, self.exprs[l], &length_char, diag);
            // The shape `clampedLengthBound` relies on: a two-member intersection of plain terms.
            const e = self.exprs[l];
            const two_plain = exprs.tag(e) == .and_ and exprs.args(e).len == 2 and
                !exprs.isBoolean(@fromBackingInt(@intCast(exprs.args(e)[0]))) and
                !exprs.isBoolean(@fromBackingInt(@intCast(exprs.args(e)[1])));
            if (flags.string_length and two_plain) self.length_chars[l] = length_char;
        } else if (flags.string_length and kind == @backingInt(LexemeKind.regex)) {
            self.length_chars[l] = try exprs.lengthBoundChar(self.exprs[l]) orelse .nothing;
        }
        if (flags.token_budget) {
            // A special lexeme is one token: a budget cannot bind it.
            const limit = try r.word();
            if (limit == 0) return bad(diag, "a lexeme's max_tokens must be at least 1");
            if (!special) self.token_max[l] = limit;
        }
        if (!special and exprs.nullable(self.exprs[l])) {
            // A lexeme never matches empty text: keep its non-empty part, and let the rules
            // skip it instead (every use of it becomes an optional nonterminal, `readRules`).
            self.exprs[l] = try exprs.andAll(&.{ self.exprs[l], try exprs.not(.epsilon) });
            self.length_chars[l] = .nothing;
            self.optional_index[l] = @intCast(self.optional.items.len);
            try self.optional.append(gpa, l);
        }
        // Only plain expressions: the union of intersections (JSON Schema strings with a
        // pattern and a length, keys that exclude others) would be one term whose emptiness
        // checks explore both sides at once (MaskBench Handwritten---allany20 ran out of fuel).
        self.mergeable[l] = !special and !flags.lazy and self.token_max[l] == 0 and
            self.optional_index[l] == no_lhs and !exprs.isBoolean(self.exprs[l]);
    }
};

/// Reads the IR's rules into `rules`: rule 0 is S' -> S with S' = nonterminal `nt_count`; then
/// the rules read from the IR (those of merged alternatives dropped, nonterminals renumbered
/// after the lexemes, nullable lexemes replaced by their optional nonterminal); then
/// `opt_l -> l | ε` for each nullable lexeme l (nonterminals `nt_count + 1 + i`).
fn readRules(
    gpa: Allocator,
    exprs: *regex.ExprSet,
    r: *Reader,
    header: Header,
    lexemes: *Lexemes,
    rules: *Rules,
    diag: *CompileDiagnostic,
) CompileError!void {
    const lexeme_count = header.lexeme_count;
    const nt_count = header.nt_count;
    const nt_base = lexeme_count;
    try rules.starts.append(gpa, 0);
    try rules.lhs.append(gpa, nt_count);
    try rules.rhs.appendSlice(gpa, &.{ nt_base + header.start_nt, end_flag | nt_count });
    const merged = try gpa.alloc(bool, lexeme_count);
    defer gpa.free(merged);
    try mergeAlternatives(gpa, exprs, r.*, header.rule_count, lexemes.exprs[0..lexeme_count], lexemes.mergeable, merged);
    for (0..header.rule_count) |_| {
        const lhs = try r.word();
        const len = try r.word();
        if (lhs >= nt_count) return bad(diag, "rule left-hand side out of range");
        const symbols = try r.slice(len);
        // The rule of a lexeme merged into an alternative's: that one's rule stands for both.
        if (len == 1 and symbols[0] & ir_nonterminal_flag == 0 and symbols[0] < lexeme_count and merged[symbols[0]]) continue;
        try rules.starts.append(gpa, @intCast(rules.rhs.items.len));
        try rules.lhs.append(gpa, lhs);
        for (symbols) |sym| {
            if (sym & ir_nonterminal_flag != 0) {
                const nt = sym & ~ir_nonterminal_flag;
                if (nt >= nt_count) return bad(diag, "rule symbol: nonterminal out of range");
                try rules.rhs.append(gpa, nt_base + nt);
            } else {
                if (sym >= lexeme_count) return bad(diag, "rule symbol: lexeme out of range");
                const optional = lexemes.optional_index[sym];
                try rules.rhs.append(gpa, if (optional != no_lhs) nt_base + nt_count + 1 + optional else sym);
            }
        }
        try rules.rhs.append(gpa, end_flag | lhs);
    }
    for (lexemes.optional.items, 0..) |l, i| {
        const opt: u32 = nt_count + 1 + @as(u32, @intCast(i));
        try rules.starts.append(gpa, @intCast(rules.rhs.items.len));
        try rules.lhs.append(gpa, opt);
        try rules.rhs.appendSlice(gpa, &.{ l, end_flag | opt });
        try rules.starts.append(gpa, @intCast(rules.rhs.items.len));
        try rules.lhs.append(gpa, opt);
        try rules.rhs.append(gpa, end_flag | opt);
    }
}

/// The rules as `compile` builds them: every right-hand side in `rhs` (symbols, then
/// `end_flag | lhs`), and per rule where it starts and its left-hand side.
const Rules = struct {
    rhs: std.ArrayList(u32) = .empty,
    starts: std.ArrayList(u32) = .empty,
    lhs: std.ArrayList(u32) = .empty,
};

/// Per position in `rules.rhs`: is the item there a rule in progress (dot past its first
/// symbol) that lets the skip lexeme in? See `Cfg.skip_in_progress`.
fn skipInProgress(gpa: Allocator, rules: *const Rules, nt_count: u32, no_skip: []const bool) Allocator.Error![]bool {
    const rhs = rules.rhs.items;
    const result = try gpa.alloc(bool, rhs.len);
    for (rules.lhs.items, rules.starts.items) |lhs, pos| {
        // S' lets it in; an optional lexeme's rule (one symbol) leaves it to its user.
        const lets_skip = lhs == nt_count or (lhs < nt_count and !no_skip[lhs]);
        var p = pos;
        result[p] = false;
        while (rhs[p] & end_flag == 0) {
            p += 1;
            result[p] = lets_skip;
        }
    }
    return result;
}

/// Per position in `rules.rhs`: is the symbol there the item of a distinct list, the last
/// symbol of a rule of a nonterminal in `lists` (`Cfg.distinct_pos`)? Such a rule must end
/// with a nonterminal that is not nullable: the check runs where that item completes.
fn distinctPositions(gpa: Allocator, rules: *const Rules, nt_base: u32, lists: []const bool, nullable: []const bool, diag: *CompileDiagnostic) CompileError![]bool {
    const rhs = rules.rhs.items;
    const result = try gpa.alloc(bool, rhs.len);
    errdefer gpa.free(result);
    @memset(result, false);
    var any = false;
    for (rules.lhs.items, rules.starts.items) |lhs, pos| {
        if (lhs >= lists.len or !lists[lhs]) continue;
        var p = pos;
        while (rhs[p] & end_flag == 0) p += 1;
        if (p == pos or rhs[p - 1] < nt_base or nullable[rhs[p - 1] - nt_base]) {
            return bad(diag, "a rule of a distinct list must end with its item, a nonterminal that is not nullable");
        }
        result[p - 1] = true;
        any = true;
    }
    if (!any) {
        gpa.free(result);
        return &.{};
    }
    return result;
}

/// Groups rule positions by left-hand side: the rules of nonterminal n start at
/// `rule_positions[nt_rules[n]..nt_rules[n + 1]]`, in the order they were read.
fn groupRules(gpa: Allocator, rules: *const Rules, nt_rules: []u32, rule_positions: []u32) Allocator.Error!void {
    assert(rule_positions.len == rules.lhs.items.len);
    @memset(nt_rules, 0);
    for (rules.lhs.items) |lhs| nt_rules[lhs + 1] += 1;
    for (1..nt_rules.len) |i| nt_rules[i] += nt_rules[i - 1];
    const fill = try gpa.dupe(u32, nt_rules[0 .. nt_rules.len - 1]);
    defer gpa.free(fill);
    for (rules.lhs.items, rules.starts.items) |lhs, pos| {
        rule_positions[fill[lhs]] = pos;
        fill[lhs] += 1;
    }
}

/// Nullable nonterminals, by a worklist (linear in the rules' size): a rule counts its
/// occurrences of nonterminals not known to be nullable yet, and its left-hand side is nullable
/// when that count reaches zero. A fixpoint of passes over the rules needed one pass per link
/// of a chain listed top down (`a0: a1 | "x"`, `a1: a2 | "x"`, …): 32,000 such rules took 2.7 s
/// to compile.
fn computeNullable(gpa: Allocator, rules: *const Rules, nt_base: u32, nullable: []bool) Allocator.Error!void {
    const rhs = rules.rhs.items;
    const starts = rules.starts.items;
    const lhs_of = rules.lhs.items;
    @memset(nullable, false);
    // Per rule, its nonterminals not known nullable (`has_lexeme`: it never derives ε).
    const missing = try gpa.alloc(u32, starts.len);
    defer gpa.free(missing);
    // Per nonterminal, the rules it occurs in (once per occurrence), by offsets into `users`.
    const offsets = try gpa.alloc(u32, nullable.len + 1);
    defer gpa.free(offsets);
    @memset(offsets, 0);
    for (starts, missing) |pos, *count| {
        count.* = 0;
        var p = pos;
        while (rhs[p] & end_flag == 0) : (p += 1) {
            if (rhs[p] < nt_base) break;
            count.* += 1;
        } else {
            p = pos;
            while (rhs[p] & end_flag == 0) : (p += 1) offsets[rhs[p] - nt_base + 1] += 1;
            continue;
        }
        count.* = has_lexeme;
    }
    for (1..offsets.len) |i| offsets[i] += offsets[i - 1];
    const users = try gpa.alloc(u32, offsets[nullable.len]);
    defer gpa.free(users);
    const next = try gpa.dupe(u32, offsets[0..nullable.len]);
    defer gpa.free(next);
    for (starts, missing, 0..) |pos, count, r| {
        if (count == has_lexeme) continue;
        var p = pos;
        while (rhs[p] & end_flag == 0) : (p += 1) {
            const nt = rhs[p] - nt_base;
            users[next[nt]] = @intCast(r);
            next[nt] += 1;
        }
    }
    // Each nonterminal enters the stack once, when it is found nullable.
    const stack = try gpa.alloc(u32, nullable.len);
    defer gpa.free(stack);
    var top: usize = 0;
    for (missing, lhs_of) |count, lhs| {
        if (count == 0 and !nullable[lhs]) {
            nullable[lhs] = true;
            stack[top] = lhs;
            top += 1;
        }
    }
    while (top > 0) {
        top -= 1;
        const nt = stack[top];
        for (users[offsets[nt]..offsets[nt + 1]]) |r| {
            missing[r] -= 1;
            const lhs = lhs_of[r];
            if (missing[r] == 0 and !nullable[lhs]) {
                nullable[lhs] = true;
                stack[top] = lhs;
                top += 1;
            }
        }
    }
}

/// `computeNullable`'s count for a rule with a lexeme (never nullable, never counted down).
const has_lexeme = std.math.maxInt(u32);

// ---------------------------------------------------------------------------------------------
// Tests

fn expectBadIr(words: []const u32) !void {
    const gpa = std.testing.allocator;
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    try std.testing.expectError(error.BadIr, compile(gpa, &exprs, words, &diag));
    try std.testing.expect(diag.message.len > 0);
}

test "lengths near 2^32 are malformed IR, not reads past the words" {
    // A rule of 2^32 - 1 symbols: `at + len` wrapped in wasm32 and the slice ran off the end
    // of memory (a trap in the host).
    const a: u32 = 'a';
    try expectBadIr(&.{ ir_magic, 1, 1, 1, 0, 0, 1, 0, 1, a, 0, 0xFFFF_FFFF });
    // A pattern of 2^32 - 2 bytes: its word count overflowed.
    try expectBadIr(&.{ ir_magic, 1, 1, 1, 0, 0, 0, 0, 0xFFFF_FFFE });
    try expectBadIr(&.{ ir_magic, 1, 1, 1, 0, 0, 0, 0, 5, a });
    // Special token ids and no-skip nonterminals: counts past the end.
    try expectBadIr(&.{ ir_magic, 1, 1, 1, 0, 0, 2, 0, 0xFFFF_FFFF });
    try expectBadIr(&.{ ir_magic, 1, 1, 1, 0, 4, 0xFFFF_FFFF });
}

test "a well-formed IR compiles, and one word less or more is malformed" {
    const gpa = std.testing.allocator;
    const a: u32 = 'a';
    const words = [_]u32{ ir_magic, 1, 1, 1, 0, 0, 1, 0, 1, a, 0, 1, 0 };
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, &words, &diag);
    defer compiled.deinit(gpa);
    try std.testing.expectEqual(@as(u32, 1), compiled.cfg.lexeme_count);
    try expectBadIr(words[0 .. words.len - 1]);
    try expectBadIr(&(words ++ [_]u32{0}));
}

/// An IR with every part the reader handles: a skip pattern, a no-skip nonterminal, two
/// literals that merge (`A → "a" | "b"`), a special lexeme (ids out of order) and a nullable
/// regex: `S → A | <7,3> c*`.
const every_part_ir = [_]u32{ ir_magic, 4, 2, 4, 0, 2 | 4 } ++ // 4 lexemes, 2 nonterminals, 4 rules
    [_]u32{ 1, ' ' } ++ // the skip pattern " "
    [_]u32{ 1, 1 } ++ // no-skip nonterminals: A
    [_]u32{ 1, 0, 1, 'a' } ++ [_]u32{ 1, 0, 1, 'b' } ++ // literals
    [_]u32{ 2, 0, 2, 7, 3 } ++ // special ids 7 and 3
    [_]u32{ 0, 0, 2, 'c' | '*' << 8 } ++ // regex c*
    [_]u32{ 0, 1, ir_nonterminal_flag | 1 } ++ [_]u32{ 1, 1, 0 } ++ [_]u32{ 1, 1, 1 } ++ [_]u32{ 0, 2, 2, 3 };

fn compileEveryPart(gpa: Allocator) !void {
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, &every_part_ir, &diag);
    defer compiled.deinit(gpa);
}

test "every part of the IR: merged alternatives, sorted special ids, an optional lexeme" {
    const gpa = std.testing.allocator;
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, &every_part_ir, &diag);
    defer compiled.deinit(gpa);
    const cfg = &compiled.cfg;
    try std.testing.expectEqual(@as(?u32, 4), cfg.skip_lexeme);
    try std.testing.expectEqual(@as(usize, 5), compiled.lexeme_exprs.len);
    try std.testing.expectEqual(regex.ExprId.nothing, compiled.lexeme_exprs[1]); // merged into 0
    try std.testing.expectEqualSlices(TokenId, &.{ .fromIndex(3), .fromIndex(7) }, cfg.specialIds(2));
    try std.testing.expect(cfg.has_special and cfg.is_special[2] and !cfg.is_special[3]);
    // S, A, S', then opt_3 → c+ | ε.
    try std.testing.expectEqual(@as(u32, 4), cfg.nonterminalCount());
    try std.testing.expect(cfg.nullable[3] and !cfg.nullable[0]);
    try std.testing.expect(cfg.skip_in_progress.len == cfg.rhs.len);
}

test "every allocation failure while reading an IR is freed exactly once" {
    try std.testing.checkAllAllocationFailures(std.testing.allocator, compileEveryPart, .{});
}

/// The IR of `a0 → a1 | "x" "x"`, `a1 → a2 | "x" "x"`, …, `a[n] → ε`: its rules listed top
/// down, so that each pass of a fixpoint over them in order finds one more link nullable.
fn nullableChainIr(gpa: Allocator, n: u32) !std.ArrayList(u32) {
    var words: std.ArrayList(u32) = .empty;
    errdefer words.deinit(gpa);
    try words.appendSlice(gpa, &.{ ir_magic, 1, n + 1, 2 * n + 1, 0, 0, @backingInt(LexemeKind.literal), 0 });
    try appendIrBytes(gpa, &words, "x");
    for (0..n) |i| {
        try words.appendSlice(gpa, &.{ @intCast(i), 1, ir_nonterminal_flag | @as(u32, @intCast(i + 1)) });
        try words.appendSlice(gpa, &.{ @intCast(i), 2, 0, 0 });
    }
    try words.appendSlice(gpa, &.{ n, 0 });
    return words;
}

test "a chain of nullable rules listed top down is nullable all along, in one worklist" {
    const gpa = std.testing.allocator;
    const n: u32 = 3_000;
    var words = try nullableChainIr(gpa, n);
    defer words.deinit(gpa);
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, words.items, &diag);
    defer compiled.deinit(gpa);
    // a0 … a[n], then S' → a0.
    try std.testing.expectEqual(n + 2, compiled.cfg.nonterminalCount());
    for (compiled.cfg.nullable) |is_nullable| try std.testing.expect(is_nullable);
}

/// The nullable nonterminals as a fixpoint of passes over the rules (the reference for
/// `computeNullable`: slow, plainly right).
fn nullableByPasses(rules: *const Rules, nt_base: u32, nullable: []bool) void {
    const rhs = rules.rhs.items;
    @memset(nullable, false);
    var changed = true;
    while (changed) {
        changed = false;
        for (rules.lhs.items, rules.starts.items) |lhs, pos| {
            if (nullable[lhs]) continue;
            var p = pos;
            const all_nullable = while (rhs[p] & end_flag == 0) : (p += 1) {
                if (rhs[p] < nt_base or !nullable[rhs[p] - nt_base]) break false;
            } else true;
            if (all_nullable) {
                nullable[lhs] = true;
                changed = true;
            }
        }
    }
}

test "computeNullable agrees with a fixpoint of passes on random grammars" {
    const gpa = std.testing.allocator;
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const random = prng.random();
    const nt_base: u32 = 3; // lexemes 0..2
    for (0..500) |_| {
        const nt_count = random.intRangeAtMost(u32, 1, 12);
        var rules: Rules = .{};
        defer rules.starts.deinit(gpa);
        defer rules.lhs.deinit(gpa);
        defer rules.rhs.deinit(gpa);
        for (0..random.intRangeAtMost(u32, 0, 24)) |_| {
            const lhs = random.uintLessThan(u32, nt_count);
            try rules.starts.append(gpa, @intCast(rules.rhs.items.len));
            try rules.lhs.append(gpa, lhs);
            for (0..random.uintLessThan(u32, 4)) |_| {
                // Mostly nonterminals (repeats included), sometimes a lexeme.
                const sym = if (random.uintLessThan(u32, 5) == 0) random.uintLessThan(u32, nt_base) else nt_base + random.uintLessThan(u32, nt_count);
                try rules.rhs.append(gpa, sym);
            }
            try rules.rhs.append(gpa, end_flag | lhs);
        }
        const expected = try gpa.alloc(bool, nt_count);
        defer gpa.free(expected);
        const actual = try gpa.alloc(bool, nt_count);
        defer gpa.free(actual);
        nullableByPasses(&rules, nt_base, expected);
        try computeNullable(gpa, &rules, nt_base, actual);
        try std.testing.expectEqualSlices(bool, expected, actual);
    }
}

test "a literal pattern builds the term the parser builds, and any other syntax goes to the parser" {
    const gpa = std.testing.allocator;
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var buffer: [literal_pattern_bytes_max]u8 = undefined;
    const literal_cases = [_][]const u8{
        "\\\"name\\\"", "\\\"updated\\_by\\\"", "a\\.b\\-c\\/d", "key with spaces, :;<>=!@#%&~`'\"", "\\\\x", "", "\\{\\}\\[\\]\\(\\)\\*\\+\\?\\|\\^\\$",
    };
    for (literal_cases) |p| {
        const text = literalPatternText(p, .{}, &buffer) orelse return error.TestExpectedLiteral;
        var diag: regex_syntax.Diagnostic = .{};
        try std.testing.expectEqual(try regex_syntax.parse(&exprs, p, .{}, &diag), try exprs.literal(text));
        // No case has `.`, so dot_all must not change what the parser builds either.
        try std.testing.expectEqual(try regex_syntax.parse(&exprs, p, .{ .dot_all = true }, &diag), try exprs.literal(text));
    }
    try std.testing.expectEqualStrings("\"name\"", literalPatternText("\\\"name\\\"", .{}, &buffer).?);
    const parsed_cases = [_][]const u8{
        "a.b", "a|b",       "a*", "a+", "a?", "a{2}", "[ab]", "(a)", "^a", "a$", "\\d", "\\n", "\\x41", "\\u00e9", "\\0",
        "é",
        "a\\", "tab\there",
    };
    for (parsed_cases) |p| try std.testing.expectEqual(null, literalPatternText(p, .{}, &buffer));
    try std.testing.expectEqual(null, literalPatternText("abc", .{ .case_insensitive = true }, &buffer));
    const long: [literal_pattern_bytes_max + 1]u8 = @splat('x');
    try std.testing.expectEqual(null, literalPatternText(&long, .{}, &buffer));
}

/// The IR of `S → "name" | K`: the literal lexeme `"name"` and the key lexeme K, a JSON-ish
/// string `"[a-z]*"` that excludes `\"name\"` and `\"other\"`, in the order `key_first` says.
fn keyAndNameIr(gpa: Allocator, key_first: bool) !std.ArrayList(u32) {
    var words: std.ArrayList(u32) = .empty;
    errdefer words.deinit(gpa);
    try words.appendSlice(gpa, &.{ ir_magic, 2, 1, 2, 0, 0 });
    for (0..2) |i| {
        if ((i == 0) == key_first) {
            try words.appendSlice(gpa, &.{ @backingInt(LexemeKind.regex), 2 });
            try appendIrBytes(gpa, &words, "\"[a-z]*\"");
            try words.appendSlice(gpa, &.{ 0, 2 });
            try appendIrBytes(gpa, &words, "\\\"name\\\"");
            try appendIrBytes(gpa, &words, "\\\"other\\\"");
        } else {
            try words.appendSlice(gpa, &.{ @backingInt(LexemeKind.literal), 0 });
            try appendIrBytes(gpa, &words, "\"name\"");
        }
    }
    try words.appendSlice(gpa, &.{ 0, 1, 0, 0, 1, 1 });
    return words;
}

/// A byte string as the IR writes it, for tests that build IR by hand: its length in bytes,
/// then the bytes padded with zeros to whole words.
pub fn appendIrBytes(gpa: Allocator, words: *std.ArrayList(u32), bytes: []const u8) !void {
    try words.append(gpa, @intCast(bytes.len));
    var i: usize = 0;
    while (i < bytes.len) : (i += 4) {
        var chunk: [4]u8 = @splat(0);
        const n = @min(4, bytes.len - i);
        @memcpy(chunk[0..n], bytes[i..][0..n]);
        try words.append(gpa, std.mem.readInt(u32, &chunk, .little));
    }
}

test "an excluded name that is a literal lexeme's text is that lexeme's term, found without interning it again" {
    const gpa = std.testing.allocator;
    var spent: [2]u64 = undefined;
    for ([_]bool{ false, true }, &spent) |key_first, *fuel_spent| {
        var words = try keyAndNameIr(gpa, key_first);
        defer words.deinit(gpa);
        var exprs = try regex.ExprSet.init(gpa, .{});
        defer exprs.deinit();
        var diag: CompileDiagnostic = .{};
        const fuel_before = exprs.fuel;
        var compiled = try compile(gpa, &exprs, words.items, &diag);
        defer compiled.deinit(gpa);
        fuel_spent.* = fuel_before - exprs.fuel;
        // The terms the parser builds from the patterns, whatever the order.
        var regex_diag: regex_syntax.Diagnostic = .{};
        const name = try regex_syntax.parse(&exprs, "\"name\"", .{}, &regex_diag);
        const excluded = try exprs.alt(&.{ name, try regex_syntax.parse(&exprs, "\"other\"", .{}, &regex_diag) });
        const key = try exprs.andAll(&.{ try regex_syntax.parse(&exprs, "\"[a-z]*\"", .{}, &regex_diag), try exprs.not(excluded) });
        const key_index: usize = if (key_first) 0 else 1;
        try std.testing.expectEqual(name, compiled.lexeme_exprs[1 - key_index]);
        try std.testing.expectEqual(key, compiled.lexeme_exprs[key_index]);
    }
    // With the name's lexeme first, its exclusion is a lookup: the six bytes of `"name"` are
    // not interned (and charged) a second time.
    try std.testing.expect(spent[0] < spent[1]);
}
