//! Context-free grammars over lexemes: the compiled form (`Cfg`) and an Earley parser (`Parser`)
//! that the trie walk drives byte by byte together with the lexer.
//!
//! Layout of a compiled grammar: all right-hand sides in one flat array `rhs`; a rule is its
//! symbols followed by an end marker (`end_flag | lhs`). An Earley item is a pair (position in
//! `rhs`, origin row): the position names both the rule and the dot, so an item is 8 bytes and
//! advancing the dot is `pos + 1`. Terminal symbols are lexeme indices; nonterminals are
//! `nonterminal_base + index`. Rule 0 is the augmented start `S' → S`.
//!
//! Parsing state is a stack of rows (Earley sets), one per lexeme scanned, with their items in
//! one array. A row also knows the lexer state to start the next lexeme in: the lexer restricted
//! to the lexemes the row can accept next (and the skip lexeme where it may appear). During a
//! trie walk, rows are pushed as lexemes end and popped by moving back down the walk's stack;
//! rows above the current one stay in memory, and a row is reused when the same parent scans
//! at the same lexer state again (`parent`, `key`), which is the common case when sibling
//! tokens share their first lexeme.
//!
//! ε-rules: prediction of a nullable nonterminal also advances over it (Aycock and Horspool), so
//! completion never needs to look at the row being built.
//!
//! Token budgets (a lexeme's `max_tokens`): a capped lexeme may span at most N tokens of the
//! model's output, counted from the token holding its first byte (`Position.lexeme_token`).
//! Budgets are only checked where one token ends and the next begins (`enterToken`): inside a
//! token every byte is in the same token, so the trie walk's hot loop never looks at them.
//! Entering a token, the lexemes of the lexeme in progress whose budget is spent are dropped
//! from the lexer state; when none is left the lexeme ends right there, at the token boundary,
//! even if the next byte could have extended it (llguidance's rule) — or, when it does not
//! match yet, the position is dead. `tokenEndAlive` asks the same question before a token is
//! allowed, so a mask never lets the output into a lexeme it cannot finish in budget.
//!
//! Work is bounded: items per row are capped (`row_item_count_max`), and so is the parser's
//! work in one call (`step_item_count_max`): one unit per item built and one per item examined
//! by a completion or a scan. Counting only the items built was not a bound on time: in an
//! ambiguous grammar (`r1 ::= r1+ | …`) a row of a few thousand items completes each of them
//! against a whole origin row, so a call built 200,000 items in 0.5 s. Going over either is
//! `error.LimitExceeded`, with the limit recorded (`limits.zig`).

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const regex_syntax = @import("regex_syntax.zig");
const lexer_mod = @import("lexer.zig");
const Lexer = lexer_mod.Lexer;
const StateId = lexer_mod.StateId;

pub const end_flag: u32 = 1 << 31;

pub const Limits = struct {
    /// Items in one Earley row (8 bytes each).
    row_item_count_max: u32 = 20_000,
    /// Parser work in one call: items built plus items examined (about 5 ns a unit).
    step_item_count_max: u32 = 1_000_000,
};

pub const Error = error{ OutOfMemory, LimitExceeded };

pub const LexemeKind = enum(u32) { regex = 0, literal = 1, special = 2 };

/// A compiled context-free grammar (immutable once built).
pub const Cfg = struct {
    /// Text and special lexemes; the skip lexeme, if any, is lexeme `lexeme_count` in the lexer.
    lexeme_count: u32,
    nonterminal_base: u32,
    skip_lexeme: ?u32,
    allow_initial_skip: bool,
    /// At most one skip between two lexemes (so a bounded skip regex bounds that text).
    skip_once: bool,
    has_lazy: bool,
    has_special: bool,
    rhs: []u32,
    /// Position in `rhs` of the first symbol of each rule of nonterminal n:
    /// `rule_positions[nt_rules[n]..nt_rules[n + 1]]`.
    rule_positions: []u32,
    nt_rules: []u32,
    nullable: []bool,
    /// Position of the end marker of `S' → S`: an item (accept_pos, 0) means accepting.
    accept_pos: u32,
    /// Special lexemes: sorted token ids `special_ids[special_start[l]..special_start[l + 1]]`.
    special_start: []u32,
    special_ids: []u32,
    is_special: []bool,
    /// Per lexer lexeme (the skip lexeme included): the most tokens it may span, 0 = no limit.
    token_max: []u32,
    has_token_max: bool,
    /// Per position in `rhs`, when some nonterminal has no skip: the item at that position is
    /// a rule in progress (dot past its first symbol) that lets the skip lexeme in. Empty when
    /// every rule does.
    skip_in_progress: []bool,

    pub fn deinit(self: *Cfg, gpa: Allocator) void {
        gpa.free(self.token_max);
        gpa.free(self.skip_in_progress);
        gpa.free(self.rhs);
        gpa.free(self.rule_positions);
        gpa.free(self.nt_rules);
        gpa.free(self.nullable);
        gpa.free(self.special_start);
        gpa.free(self.special_ids);
        gpa.free(self.is_special);
        self.* = undefined;
    }

    pub fn nonterminalCount(self: *const Cfg) u32 {
        return @intCast(self.nullable.len);
    }

    pub fn specialIds(self: *const Cfg, lexeme: u32) []const u32 {
        return self.special_ids[self.special_start[lexeme]..self.special_start[lexeme + 1]];
    }
};

pub const Item = packed struct(u64) {
    pos: u32,
    origin: u32,
};

pub const Row = struct {
    items_start: u32,
    items_end: u32,
    /// Leo items of this row: `leo_entries[leo_start..leo_end]`.
    leo_start: u32 = 0,
    leo_end: u32 = 0,
    lexer_start: StateId,
    parent: u32,
    /// What built the row from `parent`: the lexer state whose lexemes were scanned, or
    /// `special_key | lexeme` for a special token. Rows with the same (parent, key) are equal.
    key: u32,
    accepting: bool,
    after_skip: bool,
};

pub const special_key: u32 = 1 << 31;

const LeoEntry = struct { nonterminal: u32, top: Item };
const no_parent = std.math.maxInt(u32);

/// A position of the combined lexer and parser: the lexer state and the current row.
pub const Position = struct {
    lexer_state: StateId,
    row: u32,
    /// Index of the token holding the first byte of the lexeme in progress (meaningless at a
    /// lexeme boundary). Token budgets count from here.
    lexeme_token: u32 = 0,
};

/// What the token budgets of a lexer state's lexemes allow: `most`, the largest budget
/// (`unlimited` when some lexeme has none), and `least`, the smallest budget of a capped
/// lexeme (`unlimited` when none is capped). `least == 0` marks an entry not computed yet.
const Budget = struct {
    most: u32,
    least: u32,

    const unlimited = std.math.maxInt(u32);
    const unknown: Budget = .{ .most = 0, .least = 0 };
};

pub const Parser = struct {
    gpa: Allocator,
    cfg: *const Cfg,
    lexer: *Lexer,
    limits: Limits,
    rows: std.ArrayList(Row) = .empty,
    items: std.ArrayList(Item) = .empty,
    seen: std.AutoHashMapUnmanaged(u64, void) = .empty,
    allowed: []bool,
    scan_set: []bool,
    leo_entries: std.ArrayList(LeoEntry) = .empty,
    /// Scratch for computing Leo entries: per nonterminal, items waiting on it in the row.
    leo_count: []u32,
    leo_item: []Item,
    leo_touched: std.ArrayList(u32) = .empty,
    /// Work units spent in this call (see the file comment); `beginStep` resets it.
    work_step: u32 = 0,
    /// Index of the token whose bytes are being stepped (set by the matcher before stepping).
    token_index: u32 = 0,
    /// Per lexer state index: its `Budget`, filled on demand (grammars with budgets only).
    budgets: std.ArrayList(Budget) = .empty,
    /// Scratch for `enterToken`: which lexemes may go on into the next token.
    keep: []bool,

    pub fn init(gpa: Allocator, cfg: *const Cfg, lexer: *Lexer, limits: Limits) Error!Parser {
        const n = lexer.lexemes.len;
        const allowed = try gpa.alloc(bool, n);
        errdefer gpa.free(allowed);
        const keep = try gpa.alloc(bool, n);
        errdefer gpa.free(keep);
        const scan_set = try gpa.alloc(bool, n);
        errdefer gpa.free(scan_set);
        @memset(scan_set, false);
        const leo_count = try gpa.alloc(u32, cfg.nonterminalCount());
        errdefer gpa.free(leo_count);
        @memset(leo_count, 0);
        const leo_item = try gpa.alloc(Item, cfg.nonterminalCount());
        errdefer gpa.free(leo_item);
        var parser: Parser = .{
            .gpa = gpa,
            .cfg = cfg,
            .lexer = lexer,
            .limits = limits,
            .allowed = allowed,
            .keep = keep,
            .scan_set = scan_set,
            .leo_count = leo_count,
            .leo_item = leo_item,
        };
        // Only the lists: the errdefers above free the slices (freeing them twice here
        // corrupted the allocator after a grammar hit a limit in its first row).
        errdefer parser.deinitLists();
        try parser.buildInitialRow();
        return parser;
    }

    pub fn deinit(self: *Parser) void {
        self.deinitLists();
        self.gpa.free(self.allowed);
        self.gpa.free(self.keep);
        self.gpa.free(self.scan_set);
        self.gpa.free(self.leo_count);
        self.gpa.free(self.leo_item);
        self.* = undefined;
    }

    /// Frees the growable lists, which start empty and which `init`'s errdefers do not cover.
    fn deinitLists(self: *Parser) void {
        self.rows.deinit(self.gpa);
        self.items.deinit(self.gpa);
        self.seen.deinit(self.gpa);
        self.budgets.deinit(self.gpa);
        self.leo_entries.deinit(self.gpa);
        self.leo_touched.deinit(self.gpa);
    }

    /// Copies the committed rows `0..=row` of `other` (for forking).
    pub fn copyFrom(self: *Parser, other: *const Parser, row: u32) Error!void {
        self.rows.clearRetainingCapacity();
        self.items.clearRetainingCapacity();
        try self.rows.appendSlice(self.gpa, other.rows.items[0 .. row + 1]);
        try self.items.appendSlice(self.gpa, other.items.items[0..other.rows.items[row].items_end]);
        self.leo_entries.clearRetainingCapacity();
        try self.leo_entries.appendSlice(self.gpa, other.leo_entries.items[0..other.rows.items[row].leo_end]);
    }

    pub fn start(self: *const Parser) Position {
        return .{ .lexer_state = self.rows.items[0].lexer_start, .row = 0 };
    }

    pub fn beginStep(self: *Parser) void {
        self.work_step = 0;
    }

    /// Spends `units` of this call's parser work.
    fn charge(self: *Parser, units: usize) Error!void {
        self.work_step +|= @intCast(@min(units, std.math.maxInt(u32)));
        if (self.work_step > self.limits.step_item_count_max) return limit_error.exceeded(.parser_step_items);
    }

    fn buildInitialRow(self: *Parser) Error!void {
        assert(self.rows.items.len == 0);
        try self.rows.append(self.gpa, .{
            .items_start = 0,
            .items_end = 0,
            .lexer_start = lexer_mod.dead,
            .parent = no_parent,
            .key = 0,
            .accepting = false,
            .after_skip = false,
        });
        self.seen.clearRetainingCapacity();
        // The augmented rule S' → S starts at position 0.
        try self.addItem(.{ .pos = 0, .origin = 0 });
        try self.closeRow(0);
    }

    fn addItem(self: *Parser, item: Item) Error!void {
        const gop = try self.seen.getOrPut(self.gpa, @bitCast(item));
        if (gop.found_existing) return;
        const row_items = self.items.items.len - self.rows.items[self.rows.items.len - 1].items_start;
        if (row_items >= self.limits.row_item_count_max) return limit_error.exceeded(.parser_row_items);
        try self.charge(1);
        try self.items.append(self.gpa, item);
    }

    /// Predict and complete until the last row is closed, then set up its lexer start state.
    fn closeRow(self: *Parser, k: u32) Error!void {
        const cfg = self.cfg;
        const row_start = self.rows.items[k].items_start;
        var i: usize = row_start;
        while (i < self.items.items.len) : (i += 1) {
            const item = self.items.items[i];
            const sym = cfg.rhs[item.pos];
            if (sym & end_flag != 0) {
                if (item.origin == k) continue; // ε: done by nullable prediction
                const lhs = sym & ~end_flag;
                if (self.leoLookup(item.origin, lhs)) |top| {
                    try self.addItem(top);
                    continue;
                }
                const lhs_sym = cfg.nonterminal_base + lhs;
                const origin_row = self.rows.items[item.origin];
                try self.charge(origin_row.items_end - origin_row.items_start);
                var j = origin_row.items_start;
                while (j < origin_row.items_end) : (j += 1) {
                    const waiting = self.items.items[j];
                    if (cfg.rhs[waiting.pos] == lhs_sym) {
                        try self.addItem(.{ .pos = waiting.pos + 1, .origin = waiting.origin });
                    }
                }
            } else if (sym >= cfg.nonterminal_base) {
                const nt = sym - cfg.nonterminal_base;
                for (cfg.rule_positions[cfg.nt_rules[nt]..cfg.nt_rules[nt + 1]]) |pos| {
                    try self.addItem(.{ .pos = pos, .origin = k });
                }
                if (cfg.nullable[nt]) try self.addItem(.{ .pos = item.pos + 1, .origin = item.origin });
            }
        }
        try self.finishRow(k);
    }

    /// Sets the row's end, whether the parse is complete, and its lexer start state.
    fn finishRow(self: *Parser, k: u32) Error!void {
        const cfg = self.cfg;
        const row = &self.rows.items[k];
        row.items_end = @intCast(self.items.items.len);
        // Which lexemes may come next, and is the parse complete?
        @memset(self.allowed, false);
        var any_lexeme = false;
        var skip_in_progress = cfg.skip_in_progress.len == 0 or k == 0;
        row.accepting = false;
        for (self.items.items[row.items_start..row.items_end]) |item| {
            if (cfg.skip_in_progress.len > 0) skip_in_progress = skip_in_progress or cfg.skip_in_progress[item.pos];
            const sym = cfg.rhs[item.pos];
            if (sym < cfg.lexeme_count) {
                self.allowed[sym] = true;
                any_lexeme = true;
            } else if (item.pos == cfg.accept_pos and item.origin == 0) {
                row.accepting = true;
            }
        }
        if (cfg.skip_lexeme) |skip| {
            const boundary_ok = k > 0 or cfg.allow_initial_skip;
            const followed = any_lexeme or cfg.allow_initial_skip;
            // Between two lexemes of no-skip rules (JSON inside a Lark grammar, whose
            // whitespace is in its rules) the skip needs some other rule in progress. With
            // `skip_once`, a bounded skip regex bounds the text between two lexemes (`[ ]{0,4}`:
            // at most four spaces, not four at a time).
            self.allowed[skip] = boundary_ok and followed and skip_in_progress and !(cfg.skip_once and row.after_skip);
        }
        try self.computeLeo(k);
        self.rows.items[k].lexer_start = try self.lexer.startState(self.allowed);
    }

    /// Leo's optimisation (Leo 1991): when row `k` has exactly one item waiting on nonterminal
    /// B, and B is the last symbol of that item's rule, completing B from row k is
    /// deterministic all the way up a chain of such items. The chain's top item is stored once
    /// here, so completing B later adds that one item instead of walking the chain: right
    /// recursion (`list → item "," list`) stays linear instead of quadratic.
    fn computeLeo(self: *Parser, k: u32) Error!void {
        const cfg = self.cfg;
        const row = self.rows.items[k];
        self.leo_touched.clearRetainingCapacity();
        for (self.items.items[row.items_start..row.items_end]) |item| {
            const sym = cfg.rhs[item.pos];
            if (sym & end_flag != 0 or sym < cfg.nonterminal_base) continue;
            const nt = sym - cfg.nonterminal_base;
            if (self.leo_count[nt] == 0) try self.leo_touched.append(self.gpa, nt);
            self.leo_count[nt] += 1;
            self.leo_item[nt] = item;
        }
        const leo_start: u32 = @intCast(self.leo_entries.items.len);
        for (self.leo_touched.items) |nt| {
            defer self.leo_count[nt] = 0;
            if (self.leo_count[nt] != 1) continue;
            const item = self.leo_item[nt];
            const after = cfg.rhs[item.pos + 1];
            if (after & end_flag == 0) continue; // B is not last: not deterministic
            // Items predicted in this row (origin k) would need this row's entries, still being
            // built: stop the chain there (a shorter chain is still correct).
            const advanced: Item = .{ .pos = item.pos + 1, .origin = item.origin };
            const top = if (item.origin < k) self.leoLookup(item.origin, after & ~end_flag) orelse advanced else advanced;
            try self.leo_entries.append(self.gpa, .{ .nonterminal = nt, .top = top });
        }
        self.rows.items[k].leo_start = leo_start;
        self.rows.items[k].leo_end = @intCast(self.leo_entries.items.len);
    }

    fn leoLookup(self: *const Parser, row_index: u32, nt: u32) ?Item {
        const row = self.rows.items[row_index];
        for (self.leo_entries.items[row.leo_start..row.leo_end]) |entry| {
            if (entry.nonterminal == nt) return entry.top;
        }
        return null;
    }

    /// The row after scanning, from row `parent`, the lexemes matching in lexer state `state`
    /// (or the special lexeme `special` when `state` is null); null when no item advances.
    fn scan(self: *Parser, parent: u32, key: u32, lexemes: []const u32) Error!?u32 {
        const k = parent + 1;
        if (self.rows.items.len > k) {
            const cached = self.rows.items[k];
            if (cached.parent == parent and cached.key == key) return k;
        }
        self.rows.shrinkRetainingCapacity(k);
        const parent_row = self.rows.items[parent];
        self.items.shrinkRetainingCapacity(parent_row.items_end);
        self.leo_entries.shrinkRetainingCapacity(parent_row.leo_end);
        const cfg = self.cfg;
        // `lexemes` may point into the lexer's tables, which building the row can grow: use it
        // only before `startState` runs.
        var skip_only = true;
        var has_skip = false;
        for (lexemes) |l| {
            self.scan_set[l] = true;
            const is_skip = cfg.skip_lexeme != null and l == cfg.skip_lexeme.?;
            if (!is_skip) skip_only = false;
            has_skip = has_skip or is_skip;
        }
        try self.rows.append(self.gpa, .{
            .items_start = parent_row.items_end,
            .items_end = parent_row.items_end,
            .lexer_start = lexer_mod.dead,
            .parent = parent,
            .key = key,
            .accepting = false,
            .after_skip = false,
            .leo_start = parent_row.leo_end,
            .leo_end = parent_row.leo_end,
        });
        // A row left half built by a limit must not be found again by (parent, key): it
        // would be reused as if complete after a rollback.
        errdefer _ = self.dropRow(k);
        self.seen.clearRetainingCapacity();
        var advanced = false;
        if (!skip_only) {
            self.charge(parent_row.items_end - parent_row.items_start) catch |err| {
                for (lexemes) |l| self.scan_set[l] = false;
                return err;
            };
            var j = parent_row.items_start;
            while (j < parent_row.items_end) : (j += 1) {
                const item = self.items.items[j];
                const sym = cfg.rhs[item.pos];
                if (sym < cfg.lexeme_count and self.scan_set[sym]) {
                    self.addItem(.{ .pos = item.pos + 1, .origin = item.origin }) catch |err| {
                        for (lexemes) |l| self.scan_set[l] = false;
                        return err;
                    };
                    advanced = true;
                }
            }
        }
        for (lexemes) |l| self.scan_set[l] = false;
        if (advanced and has_skip) {
            // The text also matched the skip lexeme: keep that reading too (the parse staying
            // where it was). The union is still a sound Earley set: every item keeps its origin.
            var j = parent_row.items_start;
            while (j < parent_row.items_end) : (j += 1) try self.addItem(self.items.items[j]);
        }
        if (!advanced) {
            // A skip lexeme keeps the parse where it was: the row is a copy of its parent.
            if (!has_skip) return self.dropRow(k);
            const n = parent_row.items_end - parent_row.items_start;
            try self.items.ensureUnusedCapacity(self.gpa, n);
            self.items.appendSliceAssumeCapacity(self.items.items[parent_row.items_start..parent_row.items_end]);
            self.rows.items[k].after_skip = true;
            try self.finishRow(k);
            return k;
        }
        try self.closeRow(k);
        return k;
    }

    fn dropRow(self: *Parser, k: u32) ?u32 {
        self.rows.shrinkRetainingCapacity(k);
        self.leo_entries.shrinkRetainingCapacity(self.rows.items[k - 1].leo_end);
        self.items.shrinkRetainingCapacity(self.rows.items[k - 1].items_end);
        return null;
    }

    /// Ends the lexeme in progress (lexer state `state`, which must accept) at row `row`.
    pub fn endLexeme(self: *Parser, row: u32, state: StateId) Error!?u32 {
        return self.scan(row, state, self.lexer.acceptingLexemes(state));
    }

    /// One byte from `at`; null when the grammar refuses it.
    pub fn stepByte(self: *Parser, at: Position, b: u8) Error!?Position {
        const lexer = self.lexer;
        const t = try lexer.next(at.lexer_state, b);
        if (t != lexer_mod.dead) {
            if (!self.cfg.has_lazy or !lexer.stateInfo(t).lazy_accepting) {
                const fresh = at.lexer_state == self.rows.items[at.row].lexer_start;
                const first = if (fresh) self.token_index else at.lexeme_token;
                return .{ .lexer_state = t, .row = at.row, .lexeme_token = first };
            }
            const r = try self.endLexeme(at.row, t) orelse return null;
            return .{ .lexer_state = self.rows.items[r].lexer_start, .row = r };
        }
        // `b` cannot extend the lexeme: it ends here (longest match) and `b` starts the next.
        if (at.lexer_state == self.rows.items[at.row].lexer_start) return null;
        if (!lexer.isAccepting(at.lexer_state)) return null;
        const r = try self.endLexeme(at.row, at.lexer_state) orelse return null;
        const start_state = self.rows.items[r].lexer_start;
        const t2 = try lexer.next(start_state, b);
        if (t2 == lexer_mod.dead) return null;
        if (self.cfg.has_lazy and lexer.stateInfo(t2).lazy_accepting) {
            const r2 = try self.endLexeme(r, t2) orelse return null;
            return .{ .lexer_state = self.rows.items[r2].lexer_start, .row = r2 };
        }
        return .{ .lexer_state = t2, .row = r, .lexeme_token = self.token_index };
    }

    /// The position from which the text token with index `token` starts, `at` being the
    /// position after the tokens before it: lexemes in progress whose budget is spent are
    /// dropped, and when none can go on the lexeme ends here (null if it does not match).
    /// Without budgets, `at` itself. Special tokens and EOS start from `at` unchanged: they
    /// never extend a lexeme.
    pub fn enterToken(self: *Parser, at: Position, token: u32) Error!?Position {
        if (!self.cfg.has_token_max) return at;
        const row = self.rows.items[at.row];
        if (at.lexer_state == row.lexer_start) return .{ .lexer_state = at.lexer_state, .row = at.row, .lexeme_token = token };
        assert(token > at.lexeme_token);
        const spent = token - at.lexeme_token;
        const budget = try self.stateBudget(at.lexer_state);
        if (spent < budget.least) return at;
        if (spent < budget.most) {
            for (self.cfg.token_max, self.keep) |limit, *keep| keep.* = limit == 0 or spent < limit;
            const state = try self.lexer.restrict(at.lexer_state, self.keep);
            assert(state != lexer_mod.dead);
            return .{ .lexer_state = state, .row = at.row, .lexeme_token = at.lexeme_token };
        }
        if (!self.lexer.isAccepting(at.lexer_state)) return null;
        const r = try self.endLexeme(at.row, at.lexer_state) orelse return null;
        return .{ .lexer_state = self.rows.items[r].lexer_start, .row = r, .lexeme_token = token };
    }

    /// After the last byte of a text token, `at`: can the next token start (`enterToken` would
    /// not refuse)? Lets masks refuse a token that leaves a capped lexeme unfinished when its
    /// budget runs out. Without budgets, always true.
    pub fn tokenEndAlive(self: *Parser, at: Position, next_token: u32) Error!bool {
        if (!self.cfg.has_token_max) return true;
        if (at.lexer_state == self.rows.items[at.row].lexer_start) return true;
        const budget = try self.stateBudget(at.lexer_state);
        return next_token - at.lexeme_token < budget.most or self.lexer.isAccepting(at.lexer_state);
    }

    /// Is `at` inside a capped lexeme, or right after one that ended lazily? Forced bytes stop
    /// before such a byte: how many tokens they become is not known yet.
    pub fn inBudgetedLexeme(self: *Parser, at: Position) Error!bool {
        if (!self.cfg.has_token_max) return false;
        const row = self.rows.items[at.row];
        const state = if (at.lexer_state != row.lexer_start) at.lexer_state else if (row.key & special_key == 0 and at.row > 0) row.key else return false;
        return (try self.stateBudget(state)).least != Budget.unlimited;
    }

    fn stateBudget(self: *Parser, state: StateId) Error!Budget {
        const index = self.lexer.stateIndex(state);
        if (index >= self.budgets.items.len) {
            try self.budgets.appendNTimes(self.gpa, Budget.unknown, index + 1 - self.budgets.items.len);
        }
        const cached = self.budgets.items[index];
        if (cached.least != 0) return cached;
        var budget: Budget = .{ .most = 0, .least = Budget.unlimited };
        const pairs = self.lexer.statePairs(state);
        var i: usize = 0;
        while (i < pairs.len) : (i += 2) {
            if (pairs[i] == lexer_mod.start_marker) continue;
            const limit = self.cfg.token_max[pairs[i]];
            if (limit == 0) {
                budget.most = Budget.unlimited;
            } else {
                budget.most = @max(budget.most, limit);
                budget.least = @min(budget.least, limit);
            }
        }
        self.budgets.items[index] = budget;
        return budget;
    }

    /// The row at a lexeme boundary from `at`: `at.row` itself when no lexeme is in progress,
    /// else the row after ending the lexeme (null if it cannot end here).
    pub fn boundaryRow(self: *Parser, at: Position) Error!?u32 {
        if (at.lexer_state == self.rows.items[at.row].lexer_start) return at.row;
        if (!self.lexer.isAccepting(at.lexer_state)) return null;
        return self.endLexeme(at.row, at.lexer_state);
    }

    /// May the output end at `at`?
    pub fn eosAllowed(self: *Parser, at: Position) Error!bool {
        const r = try self.boundaryRow(at) orelse return false;
        const row = self.rows.items[r];
        return row.accepting and (!row.after_skip or self.cfg.allow_initial_skip);
    }

    /// The position after special token `token` (matched by a special lexeme), or null.
    pub fn stepSpecial(self: *Parser, at: Position, token: u32) Error!?Position {
        const cfg = self.cfg;
        if (!cfg.has_special) return null;
        const r = try self.boundaryRow(at) orelse return null;
        const row = self.rows.items[r];
        var j = row.items_start;
        while (j < row.items_end) : (j += 1) {
            const sym = cfg.rhs[self.items.items[j].pos];
            if (sym < cfg.lexeme_count and cfg.is_special[sym] and
                std.sort.binarySearch(u32, cfg.specialIds(sym), token, orderU32) != null)
            {
                const r2 = try self.scan(r, special_key | sym, &.{sym}) orelse return null;
                return .{ .lexer_state = self.rows.items[r2].lexer_start, .row = r2 };
            }
        }
        return null;
    }

    /// Calls `visit(context, token)` for every special token allowed at `at`.
    pub fn forEachAllowedSpecial(self: *Parser, at: Position, context: anytype, comptime visit: fn (@TypeOf(context), u32) void) Error!void {
        const cfg = self.cfg;
        if (!cfg.has_special) return;
        const r = try self.boundaryRow(at) orelse return;
        const row = self.rows.items[r];
        var j = row.items_start;
        while (j < row.items_end) : (j += 1) {
            const sym = cfg.rhs[self.items.items[j].pos];
            if (sym < cfg.lexeme_count and cfg.is_special[sym]) {
                for (cfg.specialIds(sym)) |id| visit(context, id);
            }
        }
    }
};

fn orderU32(a: u32, b: u32) std.math.Order {
    return std.math.order(a, b);
}

// ---------------------------------------------------------------------------------------------
// Compiling the grammar IR (see docs/grammar_ir.md; the binary layout is in wasm/ABI.md)

pub const ir_magic: u32 = 0x31475354; // "TSG1"
pub const ir_nonterminal_flag: u32 = 1 << 31;

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

    pub fn deinit(self: *Compiled, gpa: Allocator) void {
        self.cfg.deinit(gpa);
        gpa.free(self.lexeme_exprs);
        gpa.free(self.lazy);
        self.* = undefined;
    }
};

const Reader = struct {
    words: []const u32,
    at: usize = 0,

    fn word(self: *Reader) error{BadIr}!u32 {
        if (self.at >= self.words.len) return error.BadIr;
        self.at += 1;
        return self.words[self.at - 1];
    }

    fn bytes(self: *Reader, len: u32) error{BadIr}![]const u8 {
        const n_words = (len + 3) / 4;
        if (self.at + n_words > self.words.len) return error.BadIr;
        const all = std.mem.sliceAsBytes(self.words[self.at..][0..n_words]);
        self.at += n_words;
        return all[0..len];
    }

    fn slice(self: *Reader, len: u32) error{BadIr}![]const u32 {
        if (self.at + len > self.words.len) return error.BadIr;
        self.at += len;
        return self.words[self.at - len ..][0..len];
    }
};

fn bad(diag: *CompileDiagnostic, message: []const u8) CompileError {
    diag.message = message;
    return error.BadIr;
}

/// `base ∩ and_1 ∩ … ∩ ¬(not_1 | …)`: the and/not pattern lists that follow a lexeme whose
/// flags have bit 1 set (each list: a count, then length-prefixed patterns).
fn readBooleanParts(exprs: *regex.ExprSet, r: *Reader, base: regex.ExprId, diag: *CompileDiagnostic) CompileError!regex.ExprId {
    var parts: [64]regex.ExprId = undefined;
    var n: usize = 0;
    parts[n] = base;
    n += 1;
    const and_count = try r.word();
    if (and_count > 32) return bad(diag, "too many and-patterns (at most 32)");
    for (0..and_count) |_| {
        const len = try r.word();
        parts[n] = try regex_syntax.parse(exprs, try r.bytes(len), .{}, &diag.regex);
        n += 1;
    }
    const not_count = try r.word();
    if (not_count > 0) {
        var excluded: std.ArrayList(regex.ExprId) = .empty;
        defer excluded.deinit(exprs.gpa);
        for (0..not_count) |_| {
            const len = try r.word();
            try excluded.append(exprs.gpa, try regex_syntax.parse(exprs, try r.bytes(len), .{}, &diag.regex));
        }
        parts[n] = try exprs.not(try exprs.alt(excluded.items));
        n += 1;
    }
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

pub fn compile(gpa: Allocator, exprs: *regex.ExprSet, words: []const u32, diag: *CompileDiagnostic) CompileError!Compiled {
    var r: Reader = .{ .words = words };
    if (try r.word() != ir_magic) return bad(diag, "not a grammar IR (bad magic)");
    const lexeme_count = try r.word();
    const nt_count = try r.word();
    const rule_count = try r.word();
    const start_nt = try r.word();
    const flags = try r.word();
    if (nt_count == 0 or start_nt >= nt_count) return bad(diag, "start nonterminal out of range");
    if (lexeme_count >= (1 << 24) or nt_count >= (1 << 24) or rule_count >= (1 << 24)) return bad(diag, "grammar too large");
    const has_skip = flags & 2 != 0;
    const lexer_lexemes = lexeme_count + @intFromBool(has_skip);

    const lexeme_exprs = try gpa.alloc(regex.ExprId, lexer_lexemes);
    errdefer gpa.free(lexeme_exprs);
    const lazy = try gpa.alloc(bool, lexer_lexemes);
    errdefer gpa.free(lazy);
    @memset(lazy, false);
    const is_special = try gpa.alloc(bool, lexeme_count);
    errdefer gpa.free(is_special);
    const token_max = try gpa.alloc(u32, lexer_lexemes);
    errdefer gpa.free(token_max);
    @memset(token_max, 0);
    const special_start = try gpa.alloc(u32, lexeme_count + 1);
    errdefer gpa.free(special_start);
    var special_ids: std.ArrayList(u32) = .empty;
    errdefer special_ids.deinit(gpa);

    if (has_skip) {
        const len = try r.word();
        const pattern = try r.bytes(len);
        diag.lexeme = lexeme_count;
        lexeme_exprs[lexeme_count] = try regex_syntax.parse(exprs, pattern, .{}, &diag.regex);
    }
    const no_skip = try gpa.alloc(bool, nt_count + 1);
    defer gpa.free(no_skip);
    @memset(no_skip, false);
    const has_no_skip = flags & 4 != 0;
    if (has_no_skip) {
        const count = try r.word();
        for (try r.slice(count)) |nt| {
            if (nt >= nt_count) return bad(diag, "no-skip nonterminal out of range");
            no_skip[nt] = true;
        }
    }
    var has_lazy = false;
    var has_special = false;
    var optional_lexemes: std.ArrayList(u32) = .empty;
    defer optional_lexemes.deinit(gpa);
    // Per lexeme: its index in `optional_lexemes`, or `no_lhs`.
    const optional_index = try gpa.alloc(u32, lexeme_count);
    defer gpa.free(optional_index);
    @memset(optional_index, no_lhs);
    // Per lexeme: may it be merged with alternatives (`mergeAlternatives`)?
    const mergeable = try gpa.alloc(bool, lexeme_count);
    defer gpa.free(mergeable);
    for (0..lexeme_count) |l| {
        const kind = try r.word();
        const lexeme_flags = try r.word();
        const n = try r.word();
        lazy[l] = lexeme_flags & 1 != 0;
        const syntax_flags: regex_syntax.Flags = .{
            .dot_all = lexeme_flags & 4 != 0,
            .case_insensitive = lexeme_flags & 8 != 0,
        };
        has_lazy = has_lazy or lazy[l];
        special_start[l] = @intCast(special_ids.items.len);
        is_special[l] = false;
        diag.lexeme = @intCast(l);
        switch (kind) {
            @backingInt(LexemeKind.regex) => lexeme_exprs[l] = try regex_syntax.parse(exprs, try r.bytes(n), syntax_flags, &diag.regex),
            @backingInt(LexemeKind.literal) => lexeme_exprs[l] = try exprs.literal(try r.bytes(n)),
            @backingInt(LexemeKind.special) => {
                lexeme_exprs[l] = .nothing;
                is_special[l] = true;
                has_special = true;
                const ids = try r.slice(n);
                try special_ids.appendSlice(gpa, ids);
                std.mem.sort(u32, special_ids.items[special_start[l]..], {}, std.sort.asc(u32));
            },
            else => return bad(diag, "unknown lexeme kind"),
        }
        if (lexeme_flags & 2 != 0) {
            if (kind == @backingInt(LexemeKind.special)) return bad(diag, "a special lexeme cannot have and/not patterns");
            lexeme_exprs[l] = try readBooleanParts(exprs, &r, lexeme_exprs[l], diag);
        }
        if (lexeme_flags & 16 != 0) {
            // A special lexeme is one token: a budget cannot bind it.
            const limit = try r.word();
            if (limit == 0) return bad(diag, "a lexeme's max_tokens must be at least 1");
            if (kind != @backingInt(LexemeKind.special)) token_max[l] = limit;
        }
        if (kind != @backingInt(LexemeKind.special) and exprs.nullable(lexeme_exprs[l])) {
            // A lexeme never matches empty text: keep its non-empty part, and let the rules
            // skip it instead (every use of it becomes an optional nonterminal, below).
            lexeme_exprs[l] = try exprs.andAll(&.{ lexeme_exprs[l], try exprs.not(.epsilon) });
            optional_index[l] = @intCast(optional_lexemes.items.len);
            try optional_lexemes.append(gpa, @intCast(l));
        }
        // Only plain expressions: the union of intersections (JSON Schema strings with a
        // pattern and a length, keys that exclude others) would be one term whose emptiness
        // checks explore both sides at once (MaskBench Handwritten---allany20 ran out of fuel).
        mergeable[l] = kind != @backingInt(LexemeKind.special) and !lazy[l] and token_max[l] == 0 and
            optional_index[l] == no_lhs and !exprs.isBoolean(lexeme_exprs[l]);
    }
    diag.lexeme = null;
    special_start[lexeme_count] = @intCast(special_ids.items.len);

    // Rules: rule 0 is S' -> S with S' = nonterminal nt_count; then the rules read from the IR;
    // then `opt_l -> l | ε` for each nullable lexeme l (nonterminals nt_count + 1 + i).
    const total_nt = nt_count + 1 + @as(u32, @intCast(optional_lexemes.items.len));
    const nt_base = lexeme_count;
    var rhs: std.ArrayList(u32) = .empty;
    errdefer rhs.deinit(gpa);
    var rule_starts: std.ArrayList(u32) = .empty;
    defer rule_starts.deinit(gpa);
    var rule_lhs: std.ArrayList(u32) = .empty;
    defer rule_lhs.deinit(gpa);
    try rule_starts.append(gpa, 0);
    try rule_lhs.append(gpa, nt_count);
    try rhs.appendSlice(gpa, &.{ nt_base + start_nt, end_flag | nt_count });
    const merged = try gpa.alloc(bool, lexeme_count);
    defer gpa.free(merged);
    try mergeAlternatives(gpa, exprs, r, rule_count, lexeme_exprs[0..lexeme_count], mergeable, merged);
    for (0..rule_count) |_| {
        const lhs = try r.word();
        const len = try r.word();
        if (lhs >= nt_count) return bad(diag, "rule left-hand side out of range");
        const symbols = try r.slice(len);
        // The rule of a lexeme merged into an alternative's: that one's rule stands for both.
        if (len == 1 and symbols[0] & ir_nonterminal_flag == 0 and symbols[0] < lexeme_count and merged[symbols[0]]) continue;
        try rule_starts.append(gpa, @intCast(rhs.items.len));
        try rule_lhs.append(gpa, lhs);
        for (symbols) |sym| {
            if (sym & ir_nonterminal_flag != 0) {
                const nt = sym & ~ir_nonterminal_flag;
                if (nt >= nt_count) return bad(diag, "rule symbol: nonterminal out of range");
                try rhs.append(gpa, nt_base + nt);
            } else {
                if (sym >= lexeme_count) return bad(diag, "rule symbol: lexeme out of range");
                const optional = optional_index[sym];
                try rhs.append(gpa, if (optional != no_lhs) nt_base + nt_count + 1 + optional else sym);
            }
        }
        try rhs.append(gpa, end_flag | lhs);
    }
    if (r.at != words.len) return bad(diag, "trailing words after the grammar IR");
    for (optional_lexemes.items, 0..) |l, i| {
        const opt: u32 = nt_count + 1 + @as(u32, @intCast(i));
        try rule_starts.append(gpa, @intCast(rhs.items.len));
        try rule_lhs.append(gpa, opt);
        try rhs.appendSlice(gpa, &.{ l, end_flag | opt });
        try rule_starts.append(gpa, @intCast(rhs.items.len));
        try rule_lhs.append(gpa, opt);
        try rhs.append(gpa, end_flag | opt);
    }

    // Items of rules that let the skip in, past their first symbol (see `skip_in_progress`).
    var skip_in_progress: []bool = &.{};
    errdefer gpa.free(skip_in_progress);
    if (has_no_skip) {
        skip_in_progress = try gpa.alloc(bool, rhs.items.len);
        for (rule_lhs.items, rule_starts.items) |lhs, pos| {
            // S' lets it in; an optional lexeme's rule (one symbol) leaves it to its user.
            const lets_skip = lhs == nt_count or (lhs < nt_count and !no_skip[lhs]);
            var p = pos;
            skip_in_progress[p] = false;
            while (rhs.items[p] & end_flag == 0) {
                p += 1;
                skip_in_progress[p] = lets_skip;
            }
        }
    }

    // Group rule positions by left-hand side.
    const nt_rules = try gpa.alloc(u32, total_nt + 1);
    errdefer gpa.free(nt_rules);
    @memset(nt_rules, 0);
    for (rule_lhs.items) |lhs| nt_rules[lhs + 1] += 1;
    for (1..nt_rules.len) |i| nt_rules[i] += nt_rules[i - 1];
    const rule_positions = try gpa.alloc(u32, rule_lhs.items.len);
    errdefer gpa.free(rule_positions);
    const fill = try gpa.dupe(u32, nt_rules[0..total_nt]);
    defer gpa.free(fill);
    for (rule_lhs.items, rule_starts.items) |lhs, pos| {
        rule_positions[fill[lhs]] = pos;
        fill[lhs] += 1;
    }

    // Nullable nonterminals: a fixpoint, at most one pass per nonterminal.
    const nullable = try gpa.alloc(bool, total_nt);
    errdefer gpa.free(nullable);
    @memset(nullable, false);
    var changed = true;
    var passes: u32 = 0;
    while (changed and passes <= total_nt) : (passes += 1) {
        changed = false;
        for (rule_lhs.items, rule_starts.items) |lhs, pos| {
            if (nullable[lhs]) continue;
            var p = pos;
            const all_nullable = while (rhs.items[p] & end_flag == 0) : (p += 1) {
                const sym = rhs.items[p];
                if (sym < nt_base or !nullable[sym - nt_base]) break false;
            } else true;
            if (all_nullable) {
                nullable[lhs] = true;
                changed = true;
            }
        }
    }

    return .{
        .cfg = .{
            .lexeme_count = lexeme_count,
            .nonterminal_base = nt_base,
            .skip_lexeme = if (has_skip) lexeme_count else null,
            .allow_initial_skip = flags & 1 != 0,
            .skip_once = flags & 8 != 0,
            .has_lazy = has_lazy,
            .has_special = has_special,
            .rhs = try rhs.toOwnedSlice(gpa),
            .rule_positions = rule_positions,
            .nt_rules = nt_rules,
            .nullable = nullable,
            .accept_pos = 1,
            .special_start = special_start,
            .special_ids = try special_ids.toOwnedSlice(gpa),
            .is_special = is_special,
            .token_max = token_max,
            .has_token_max = std.mem.indexOfNone(u32, token_max, &.{0}) != null,
            .skip_in_progress = skip_in_progress,
        },
        .lexeme_exprs = lexeme_exprs,
        .lazy = lazy,
    };
}

// ---------------------------------------------------------------------------------------------
// Tests

const IrBuilder = struct {
    words: std.ArrayList(u32) = .empty,

    fn put(self: *IrBuilder, w: u32) !void {
        try self.words.append(std.testing.allocator, w);
    }

    fn putBytes(self: *IrBuilder, text: []const u8) !void {
        try self.put(@intCast(text.len));
        var i: usize = 0;
        while (i < text.len) : (i += 4) {
            var chunk: [4]u8 = @splat(0);
            const n = @min(4, text.len - i);
            @memcpy(chunk[0..n], text[i..][0..n]);
            try self.put(std.mem.readInt(u32, &chunk, .little));
        }
    }
};

fn walkText(parser: *Parser, text: []const u8) !?Position {
    var at = parser.start();
    for (text) |b| at = try parser.stepByte(at, b) orelse return null;
    return at;
}

/// The IR of the arithmetic grammar the tests below use.
/// Lexemes: 0 NUMBER [0-9]+, 1 "+", 2 "*", 3 "(", 4 ")"; skip " +".
/// expr -> expr "+" term | term ; term -> term "*" factor | factor ; factor -> NUMBER | "(" expr ")"
fn arithmeticIr(b: *IrBuilder) !void {
    const nt = ir_nonterminal_flag;
    for ([_]u32{ ir_magic, 5, 3, 6, 0, 2 }) |w| try b.put(w);
    try b.putBytes(" +");
    try b.put(0);
    try b.put(0);
    try b.putBytes("[0-9]+");
    for ([_][]const u8{ "+", "*", "(", ")" }) |lit| {
        try b.put(1);
        try b.put(0);
        try b.putBytes(lit);
    }
    const rules = [_][]const u32{
        &.{ 0, 3, nt | 0, 1, nt | 1 }, &.{ 0, 1, nt | 1 },
        &.{ 1, 3, nt | 1, 2, nt | 2 }, &.{ 1, 1, nt | 2 },
        &.{ 2, 1, 0 },                 &.{ 2, 3, 3, nt | 0, 4 },
    };
    for (rules) |rule| for (rule) |w| try b.put(w);
}

/// Compiles the arithmetic grammar with `gpa`, starts a parser and runs `check` on it, then
/// frees everything.
fn withArithmeticParser(gpa: Allocator, comptime check: fn (*Parser) anyerror!void) !void {
    var b: IrBuilder = .{};
    defer b.words.deinit(std.testing.allocator);
    try arithmeticIr(&b);
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, b.words.items, &diag);
    defer compiled.deinit(gpa);
    var lexer = try Lexer.initWithLazy(gpa, &exprs, compiled.lexeme_exprs, compiled.lazy, .{});
    defer lexer.deinit();
    var parser = try Parser.init(gpa, &compiled.cfg, &lexer, .{});
    defer parser.deinit();
    try check(&parser);
}

test "earley: arithmetic with precedence, skip and nullable rules" {
    try withArithmeticParser(std.testing.allocator, checkArithmetic);
}

fn checkArithmetic(parser: *Parser) !void {
    const good = [_][]const u8{ "1", "12 + 3", "(1+2)*3", "2 * (3 + 4) * 5", "((7))" };
    for (good) |text| {
        const at = (try walkText(parser, text)) orelse return error.TestUnexpectedResult;
        try std.testing.expect(try parser.eosAllowed(at));
    }
    const prefixes = [_][]const u8{ "1 +", "(1+2", "(", "2 * (" };
    for (prefixes) |text| {
        const at = (try walkText(parser, text)) orelse return error.TestUnexpectedResult;
        try std.testing.expect(!try parser.eosAllowed(at));
    }
    const bad_texts = [_][]const u8{ "1 2", "+1", "(1))", " 1", "1 * * 2" };
    for (bad_texts) |text| {
        if (try walkText(parser, text)) |at| {
            try std.testing.expect(!try parser.eosAllowed(at));
        }
    }
}

fn walkOnce(parser: *Parser) !void {
    _ = try walkText(parser, "(1+2)*3");
}

fn buildArithmeticParser(gpa: Allocator) !void {
    try withArithmeticParser(gpa, walkOnce);
}

test "earley: every allocation failure while building a parser is freed exactly once" {
    // Parser.init once freed its slices twice when its first row failed, which corrupted the
    // WASM allocator for every later grammar in the process.
    try std.testing.checkAllAllocationFailures(std.testing.allocator, buildArithmeticParser, .{});
}

/// `S → S S | "a"`: every split of a run of `a`s is a parse, so each row completes items
/// against every earlier row.
fn ambiguousIr(b: *IrBuilder) !void {
    const nt = ir_nonterminal_flag;
    for ([_]u32{ ir_magic, 1, 1, 2, 0, 0 }) |w| try b.put(w);
    try b.put(1);
    try b.put(0);
    try b.putBytes("a");
    for ([_][]const u32{ &.{ 0, 2, nt | 0, nt | 0 }, &.{ 0, 1, 0 } }) |rule| for (rule) |w| try b.put(w);
}

test "earley: items examined by completions count as work, not only items built" {
    const gpa = std.testing.allocator;
    var b: IrBuilder = .{};
    defer b.words.deinit(gpa);
    try ambiguousIr(&b);
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: CompileDiagnostic = .{};
    var compiled = try compile(gpa, &exprs, b.words.items, &diag);
    defer compiled.deinit(gpa);
    var lexer = try Lexer.initWithLazy(gpa, &exprs, compiled.lexeme_exprs, compiled.lazy, .{});
    defer lexer.deinit();
    // 40 `a`s build about 1,700 items but examine about 40,000 (each completion scans an
    // origin row): 10,000 units of work is not enough, though the items alone would fit.
    var parser = try Parser.init(gpa, &compiled.cfg, &lexer, .{ .step_item_count_max = 10_000 });
    defer parser.deinit();
    const text: [40]u8 = @splat('a');
    parser.beginStep();
    try std.testing.expectError(error.LimitExceeded, walkText(&parser, &text));
    try std.testing.expectEqual(limit_error.Kind.parser_step_items, limit_error.hit);
    try std.testing.expect(parser.items.items.len < 10_000);
    // With room for the work, the same text parses.
    parser.limits.step_item_count_max = 1_000_000;
    parser.beginStep();
    const at = (try walkText(&parser, &text)) orelse return error.TestUnexpectedResult;
    try std.testing.expect(try parser.eosAllowed(at));
}
