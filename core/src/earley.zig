//! Context-free grammars over lexemes: the compiled form (`Cfg`) and an Earley parser (`Parser`)
//! that the trie walk drives byte by byte together with the lexer. `ir_reader.zig` builds the
//! `Cfg` from the host's grammar IR.
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
//! model's output, counted from the token holding its first byte (`Position.lexeme_token_index`).
//! Budgets are only checked where one token ends and the next begins (`enterToken`): inside a token
//! every byte is in the same token, so the trie walk's hot loop never looks at them. Entering a
//! token, the lexemes of the lexeme in progress whose budget is spent are dropped from the lexer
//! state; when none is left the lexeme ends right there, at the token boundary, even if the next
//! byte could have extended it (llguidance's rule) — or, when it does not match yet, the position
//! is dead. `tokenEndAlive` asks the same question before a token is allowed, so a mask never lets
//! the output into a lexeme it cannot finish in budget.
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
const lexer_mod = @import("lexer.zig");
const Lexer = lexer_mod.Lexer;
const StateId = lexer_mod.StateId;
const trie_mod = @import("trie.zig");
const TokenId = trie_mod.TokenId;
const distinct = @import("distinct.zig");

pub const end_flag: u32 = 1 << 31;

pub const Limits = struct {
    /// Items in one Earley row (8 bytes each).
    row_item_count_max: u32 = 20_000,
    /// Parser work in one call: items built plus items examined (about 6 ns a unit).
    step_item_count_max: u32 = 150_000,
};

pub const Error = error{ OutOfMemory, LimitExceeded };

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
    /// Lazy lexemes, or distinct lists (whose lexemes end as soon as nothing can extend
    /// them, `Lexer.end_when_final`): a lexeme may end on a byte the lexer survives.
    lazy_walk: bool,
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
    special_ids: []TokenId,
    is_special: []bool,
    /// Per lexer lexeme (the skip lexeme included): the most tokens it may span, 0 = no limit.
    token_max: []u32,
    has_token_max: bool,
    /// Per position in `rhs`, when some nonterminal has no skip: the item at that position is
    /// a rule in progress (dot past its first symbol) that lets the skip lexeme in. Empty when
    /// every rule does.
    skip_in_progress: []bool,
    /// Per position in `rhs`, when the grammar has distinct lists: the symbol there is the
    /// item of a distinct list (the last symbol of a rule of a marked nonterminal), whose
    /// value must differ from the list's earlier items (`Parser.repeatsItem`). Empty when
    /// there are none.
    distinct_pos: []bool,

    pub fn deinit(self: *Cfg, gpa: Allocator) void {
        gpa.free(self.token_max);
        gpa.free(self.distinct_pos);
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

    pub fn specialIds(self: *const Cfg, lexeme: u32) []const TokenId {
        return self.special_ids[self.special_start[lexeme]..self.special_start[lexeme + 1]];
    }
};

/// An Earley item: a position in `Cfg.rhs` (the rule and its dot) and the row the rule was
/// predicted in.
pub const Item = packed struct(u64) {
    pos: u32,
    origin: RowId,
};

/// A parser row: its index in `Parser.rows`. Rows form a stack (one per lexeme scanned), so
/// the row a scan builds from `r` is `r.next()`.
pub const RowId = enum(u32) {
    first = 0,
    /// The parent of the first row.
    none = std.math.maxInt(u32),
    _,

    pub fn index(self: RowId) u32 {
        return @backingInt(self);
    }

    pub fn next(self: RowId) RowId {
        assert(self != .none);
        return @fromBackingInt(self.index() + 1);
    }
};

/// What built a row from its parent: the lexer state whose lexemes were scanned, or a special
/// lexeme (`special_key | lexeme`). Rows with the same (parent, key) are equal. State offsets
/// stay far below `special_key` (a trans table that large would not fit in memory).
pub const RowKey = enum(u32) {
    _,

    pub fn scanned(state: StateId) RowKey {
        assert(state.offset() & special_key == 0);
        return @fromBackingInt(state.offset());
    }

    pub fn special(lexeme: u32) RowKey {
        return @fromBackingInt(special_key | lexeme);
    }

    /// The lexer state whose lexemes were scanned, or null for a special lexeme.
    pub fn lexerState(self: RowKey) ?StateId {
        const raw = @backingInt(self);
        return if (raw & special_key == 0) StateId.fromOffset(raw) else null;
    }
};

pub const Row = struct {
    items_start: u32,
    items_end: u32,
    /// Leo items of this row: `leo_entries[leo_start..leo_end]`.
    leo_start: u32 = 0,
    leo_end: u32 = 0,
    lexer_start: StateId,
    parent: RowId,
    /// What built the row from `parent`.
    key: RowKey,
    accepting: bool,
    after_skip: bool,
    /// Offset in `Parser.text` where the row's lexeme ended (distinct lists only).
    text_end: u32 = 0,
    /// Building the row compared an item's text with its list's earlier items: it depends on
    /// the text, not only on (parent, key), and is reused only when it made one comparison
    /// (`check`) whose outcome is the same for the new text.
    text_checked: bool = false,
    /// The comparisons made building the row (saturating), and the first one.
    check_count: u8 = 0,
    check: Check = undefined,

    pub const Check = struct { list_origin: RowId, item_origin: RowId, repeated: bool };
};

const special_key: u32 = 1 << 31;

const LeoEntry = struct { nonterminal: u32, top: Item };

/// A position of the combined lexer and parser: the lexer state and the current row.
pub const Position = struct {
    lexer_state: StateId,
    row: RowId,
    /// Index of the token holding the first byte of the lexeme in progress (meaningless at a
    /// lexeme boundary). Token budgets count from here.
    lexeme_token_index: u32 = 0,
    /// Bytes of output before this position (`Parser.text` holds them, distinct lists only).
    text_len: u32 = 0,
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
    seen: regex.IntMap(u64, void) = .empty,
    /// Scratch for `finishRow`: which lexemes the row allows (all false between calls), and
    /// the same as a list.
    allowed: []bool,
    allowed_list: std.ArrayList(u32) = .empty,
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
    /// With distinct lists: the output along the current path, the bytes the matcher
    /// consumed and, above them, those of the trie path a mask walk is on. A row's lexeme is
    /// `text[parent.text_end..row.text_end]`.
    text: std.ArrayList(u8) = .empty,
    /// The values of the earlier items of the list last checked (`repeatsItem`).
    values: distinct.ValueSet = .{},
    /// Rows up to this index do not change during the current call (the matcher's current
    /// position's row): values read from them may be remembered until the call ends.
    stable_row: u32 = 0,
    /// Set when a distinct list's item was compared (`repeatsItem`): what was computed
    /// depends on the text, not only on positions (the matcher's one-entry mask cache).
    text_read: bool = false,
    /// While a mask replays a walk-cache entry's frontier subtree (`matcher.WalkCache`): the
    /// bytes of the path down to the subtree's root were never written (`text[start..][0..len]`);
    /// `repeatsItem` fills them from the trie when it needs them.
    text_hole: ?TextHole = null,
    /// Rows built so far (`scan`; a reused row does not count): while it stays the same, every
    /// row keeps its content, so what was read from one still holds (`matcher.EndMemo`).
    rows_built: u32 = 0,

    pub fn init(gpa: Allocator, cfg: *const Cfg, lexer: *Lexer, limits: Limits) Error!Parser {
        const n = lexer.lexemes.len;
        const allowed = try gpa.alloc(bool, n);
        errdefer gpa.free(allowed);
        @memset(allowed, false);
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
        self.allowed_list.deinit(self.gpa);
        self.text.deinit(self.gpa);
        self.values.deinit(self.gpa);
    }

    /// Copies the committed rows `0..=at.row` of `other` and its text before `at` (for forking).
    pub fn copyFrom(self: *Parser, other: *const Parser, at: Position) Error!void {
        const row = at.row;
        self.text.clearRetainingCapacity();
        if (self.cfg.distinct_pos.len > 0) try self.text.appendSlice(self.gpa, other.text.items[0..at.text_len]);
        self.rows.clearRetainingCapacity();
        self.items.clearRetainingCapacity();
        try self.rows.appendSlice(self.gpa, other.rows.items[0 .. row.index() + 1]);
        try self.items.appendSlice(self.gpa, other.items.items[0..other.rows.items[row.index()].items_end]);
        self.leo_entries.clearRetainingCapacity();
        try self.leo_entries.appendSlice(self.gpa, other.leo_entries.items[0..other.rows.items[row.index()].leo_end]);
    }

    pub fn start(self: *const Parser) Position {
        return .{ .lexer_state = self.rows.items[0].lexer_start, .row = .first };
    }

    /// Starts a call: a fresh work budget; rows up to `stable_row` stay as they are during it.
    pub fn beginStep(self: *Parser, stable_row: RowId) void {
        self.work_step = 0;
        self.stable_row = stable_row.index();
        self.values.forget();
    }

    /// Makes `text` at least `len` bytes long (its bytes past the old length undefined).
    pub fn reserveText(self: *Parser, len: usize) Error!void {
        if (self.text.items.len < len) try self.text.resize(self.gpa, len);
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
            .lexer_start = .dead,
            .parent = .none,
            .key = .scanned(.dead), // never looked up: no row has parent `none`
            .accepting = false,
            .after_skip = false,
        });
        self.seen.clearRetainingCapacity();
        // The augmented rule S' → S starts at position 0.
        try self.addItem(.{ .pos = 0, .origin = .first });
        try self.closeRow(.first);
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
    fn closeRow(self: *Parser, k: RowId) Error!void {
        const cfg = self.cfg;
        const row_start = self.rows.items[k.index()].items_start;
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
                const origin_row = self.rows.items[item.origin.index()];
                try self.charge(origin_row.items_end - origin_row.items_start);
                var j = origin_row.items_start;
                while (j < origin_row.items_end) : (j += 1) {
                    const waiting = self.items.items[j];
                    if (cfg.rhs[waiting.pos] == lhs_sym) {
                        if (cfg.distinct_pos.len > 0 and cfg.distinct_pos[waiting.pos]) {
                            const repeated = try self.repeatsItem(waiting.origin, item.origin, k);
                            const row = &self.rows.items[k.index()];
                            row.text_checked = true;
                            if (row.check_count == 0) row.check = .{ .list_origin = waiting.origin, .item_origin = item.origin, .repeated = repeated };
                            row.check_count +|= 1;
                            if (repeated) continue;
                        }
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
    fn finishRow(self: *Parser, k: RowId) Error!void {
        const cfg = self.cfg;
        const row = &self.rows.items[k.index()];
        row.items_end = @intCast(self.items.items.len);
        // Which lexemes may come next (a list, not a pass over every lexeme: a grammar of 128
        // tools has ~700 lexemes, and a mask finishes a row at every lexeme end it meets), and
        // is the parse complete? `allowed` only removes duplicates, and is all false again
        // when this returns.
        const list = &self.allowed_list;
        list.clearRetainingCapacity();
        defer for (list.items) |l| {
            self.allowed[l] = false;
        };
        var any_lexeme = false;
        var skip_in_progress = cfg.skip_in_progress.len == 0 or k == .first;
        row.accepting = false;
        for (self.items.items[row.items_start..row.items_end]) |item| {
            if (cfg.skip_in_progress.len > 0) skip_in_progress = skip_in_progress or cfg.skip_in_progress[item.pos];
            const sym = cfg.rhs[item.pos];
            if (sym < cfg.lexeme_count) {
                if (!self.allowed[sym]) {
                    try list.append(self.gpa, sym);
                    self.allowed[sym] = true;
                }
                any_lexeme = true;
            } else if (item.pos == cfg.accept_pos and item.origin == .first) {
                row.accepting = true;
            }
        }
        if (cfg.skip_lexeme) |skip| {
            const boundary_ok = k != .first or cfg.allow_initial_skip;
            const followed = any_lexeme or cfg.allow_initial_skip;
            // Between two lexemes of no-skip rules (JSON inside a Lark grammar, whose
            // whitespace is in its rules) the skip needs some other rule in progress. With
            // `skip_once`, a bounded skip regex bounds the text between two lexemes (`[ ]{0,4}`:
            // at most four spaces, not four at a time).
            if (boundary_ok and followed and skip_in_progress and !(cfg.skip_once and row.after_skip)) {
                try list.append(self.gpa, skip);
                self.allowed[skip] = true;
            }
        }
        std.mem.sort(u32, list.items, {}, std.sort.asc(u32));
        try self.computeLeo(k);
        self.rows.items[k.index()].lexer_start = try self.lexer.startStateOf(list.items);
    }

    /// Leo's optimisation (Leo 1991): when row `k` has exactly one item waiting on nonterminal
    /// B, and B is the last symbol of that item's rule, completing B from row k is
    /// deterministic all the way up a chain of such items. The chain's top item is stored once
    /// here, so completing B later adds that one item instead of walking the chain: right
    /// recursion (`list → item "," list`) stays linear instead of quadratic.
    fn computeLeo(self: *Parser, k: RowId) Error!void {
        const cfg = self.cfg;
        const row = self.rows.items[k.index()];
        self.leo_touched.clearRetainingCapacity();
        for (self.items.items[row.items_start..row.items_end]) |item| {
            const sym = cfg.rhs[item.pos];
            if (sym & end_flag != 0 or sym < cfg.nonterminal_base) continue;
            const nt = sym - cfg.nonterminal_base;
            if (self.leo_count[nt] == 0) try self.leo_touched.append(self.gpa, nt);
            // The item of a distinct list is checked where it completes: no Leo entry may
            // complete past it (two counts make the entry ambiguous, so none is made).
            self.leo_count[nt] += if (cfg.distinct_pos.len > 0 and cfg.distinct_pos[item.pos]) 2 else 1;
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
            const top = if (item.origin.index() < k.index()) self.leoLookup(item.origin, after & ~end_flag) orelse advanced else advanced;
            try self.leo_entries.append(self.gpa, .{ .nonterminal = nt, .top = top });
        }
        self.rows.items[k.index()].leo_start = leo_start;
        self.rows.items[k.index()].leo_end = @intCast(self.leo_entries.items.len);
    }

    pub const TextHole = struct { start: u32, len: u32, nodes: []const trie_mod.Node, node: u32 };

    /// Does the item of a distinct list that completes in row `k`, predicted in row
    /// `item_origin`, equal (as a JSON value) an earlier item of its list, the list having
    /// begun in row `list_origin`? The earlier items are the text between the list's start
    /// and the item's (`distinct.ValueSet` reads the values off it, once per call while
    /// those rows are stable), the item is the text since.
    fn repeatsItem(self: *Parser, list_origin: RowId, item_origin: RowId, k: RowId) Error!bool {
        const rows = self.rows.items;
        const list_start = rows[list_origin.index()].text_end;
        const item_start = rows[item_origin.index()].text_end;
        const item_end = rows[k.index()].text_end;
        assert(list_start <= item_start and item_start <= item_end and item_end <= self.text.items.len);
        if (item_start == list_start) return false; // the first item
        self.text_read = true;
        if (self.text_hole) |hole| if (list_start < hole.start + hole.len and item_end > hole.start) {
            const written = trie_mod.ancestorBytes(hole.nodes, hole.node, self.text.items[hole.start..][0..hole.len]);
            assert(written == hole.len);
            self.text_hole = null;
        };
        // About 8 ns a byte read: a unit of parser work per 16 bytes.
        try self.charge((item_end - item_start) / 16 + 1);
        const key = [4]u32{ list_origin.index(), item_origin.index(), list_start, item_start };
        const stable = item_origin.index() <= self.stable_row;
        if (!stable) self.values.forget();
        const before = self.values.key;
        if (before == null or !std.mem.eql(u32, &before.?, &key)) try self.charge((item_start - list_start) / 16 + 1);
        try self.values.fill(self.gpa, key, self.text.items[list_start..item_start]);
        const found = try self.values.holds(self.gpa, self.text.items[item_start..item_end]);
        if (!stable) self.values.forget();
        return found;
    }

    fn leoLookup(self: *const Parser, r: RowId, nt: u32) ?Item {
        const row = self.rows.items[r.index()];
        for (self.leo_entries.items[row.leo_start..row.leo_end]) |entry| {
            if (entry.nonterminal == nt) return entry.top;
        }
        return null;
    }

    /// The row after scanning `lexemes` from row `parent` (the lexemes matching in the lexer
    /// state of `key`, or its special lexeme); null when no item advances.
    fn scan(self: *Parser, parent: RowId, key: RowKey, lexemes: []const u32, text_end: u32) Error!?RowId {
        const k = parent.next();
        if (self.rows.items.len > k.index()) {
            const cached = &self.rows.items[k.index()];
            if (cached.parent == parent and cached.key == key and (!cached.text_checked or cached.check_count == 1)) {
                // The same row, but for where its lexeme ended on this path (a sibling token
                // may be longer): distinct lists read the text by it. A row that compared one
                // item stands if the item compares the same way now (a sibling token closing
                // another string): the comparison, not the whole row, is redone.
                const old_end = cached.text_end;
                cached.text_end = text_end;
                if (!cached.text_checked) return k;
                const check = cached.check;
                if (try self.repeatsItem(check.list_origin, check.item_origin, k) == check.repeated) return k;
                self.rows.items[k.index()].text_end = old_end;
            }
        }
        self.rows.shrinkRetainingCapacity(k.index());
        const parent_row = self.rows.items[parent.index()];
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
        self.rows_built +%= 1;
        try self.rows.append(self.gpa, .{
            .items_start = parent_row.items_end,
            .items_end = parent_row.items_end,
            .lexer_start = .dead,
            .parent = parent,
            .key = key,
            .accepting = false,
            .after_skip = false,
            .leo_start = parent_row.leo_end,
            .leo_end = parent_row.leo_end,
            .text_end = text_end,
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
            self.rows.items[k.index()].after_skip = true;
            try self.finishRow(k);
            return k;
        }
        try self.closeRow(k);
        const row = self.rows.items[k.index()];
        if (row.text_checked and row.lexer_start == .dead and !row.accepting and !self.rowAllowsSpecial(row)) {
            // An item that repeats an earlier one was the only way on: the row is dead.
            return self.dropRow(k);
        }
        return k;
    }

    fn rowAllowsSpecial(self: *const Parser, row: Row) bool {
        if (!self.cfg.has_special) return false;
        for (self.items.items[row.items_start..row.items_end]) |item| {
            const sym = self.cfg.rhs[item.pos];
            if (sym < self.cfg.lexeme_count and self.cfg.is_special[sym]) return true;
        }
        return false;
    }

    fn dropRow(self: *Parser, k: RowId) ?RowId {
        self.rows.shrinkRetainingCapacity(k.index());
        const parent_row = self.rows.items[k.index() - 1];
        self.leo_entries.shrinkRetainingCapacity(parent_row.leo_end);
        self.items.shrinkRetainingCapacity(parent_row.items_end);
        return null;
    }

    /// Ends the lexeme in progress (lexer state `state`, which must accept) at row `row`, the
    /// lexeme's text ending at offset `text_end`.
    pub fn endLexeme(self: *Parser, row: RowId, state: StateId, text_end: u32) Error!?RowId {
        return self.scan(row, .scanned(state), self.lexer.acceptingLexemes(state), text_end);
    }

    /// One byte from `at`; null when the grammar refuses it.
    pub fn stepByte(self: *Parser, at: Position, b: u8) Error!?Position {
        const lexer = self.lexer;
        const end = at.text_len + 1;
        if (self.cfg.distinct_pos.len > 0) {
            try self.reserveText(end);
            self.text.items[at.text_len] = b;
        }
        const t = try lexer.next(at.lexer_state, b);
        if (t != .dead) {
            if (!self.cfg.lazy_walk or !lexer.stateInfo(t).lazy_accepting) {
                const fresh = at.lexer_state == self.rows.items[at.row.index()].lexer_start;
                const first = if (fresh) self.token_index else at.lexeme_token_index;
                return .{ .lexer_state = t, .row = at.row, .lexeme_token_index = first, .text_len = end };
            }
            const r = try self.endLexeme(at.row, t, end) orelse return null;
            return .{ .lexer_state = self.rows.items[r.index()].lexer_start, .row = r, .text_len = end };
        }
        // `b` cannot extend the lexeme: it ends here (longest match) and `b` starts the next.
        if (at.lexer_state == self.rows.items[at.row.index()].lexer_start) return null;
        if (!lexer.isAccepting(at.lexer_state)) return null;
        const r = try self.endLexeme(at.row, at.lexer_state, at.text_len) orelse return null;
        const start_state = self.rows.items[r.index()].lexer_start;
        const t2 = try lexer.next(start_state, b);
        if (t2 == .dead) return null;
        if (self.cfg.lazy_walk and lexer.stateInfo(t2).lazy_accepting) {
            const r2 = try self.endLexeme(r, t2, end) orelse return null;
            return .{ .lexer_state = self.rows.items[r2.index()].lexer_start, .row = r2, .text_len = end };
        }
        return .{ .lexer_state = t2, .row = r, .lexeme_token_index = self.token_index, .text_len = end };
    }

    /// The position from which the text token with index `token_index` starts, `at` being the
    /// position after the tokens before it: lexemes in progress whose budget is spent are
    /// dropped, and when none can go on the lexeme ends here (null if it does not match).
    /// Without budgets, `at` itself. Special tokens and EOS start from `at` unchanged: they
    /// never extend a lexeme.
    pub fn enterToken(self: *Parser, at: Position, token_index: u32) Error!?Position {
        if (!self.cfg.has_token_max) return at;
        const row = self.rows.items[at.row.index()];
        if (at.lexer_state == row.lexer_start) return .{ .lexer_state = at.lexer_state, .row = at.row, .lexeme_token_index = token_index, .text_len = at.text_len };
        assert(token_index > at.lexeme_token_index);
        const spent = token_index - at.lexeme_token_index;
        const budget = try self.stateBudget(at.lexer_state);
        if (spent < budget.least) return at;
        if (spent < budget.most) {
            for (self.cfg.token_max, self.keep) |limit, *keep| keep.* = limit == 0 or spent < limit;
            const state = try self.lexer.restrict(at.lexer_state, self.keep);
            assert(state != .dead);
            return .{ .lexer_state = state, .row = at.row, .lexeme_token_index = at.lexeme_token_index, .text_len = at.text_len };
        }
        if (!self.lexer.isAccepting(at.lexer_state)) return null;
        const r = try self.endLexeme(at.row, at.lexer_state, at.text_len) orelse return null;
        return .{ .lexer_state = self.rows.items[r.index()].lexer_start, .row = r, .lexeme_token_index = token_index, .text_len = at.text_len };
    }

    /// After the last byte of a text token, `at`: can the next token start (`enterToken` would
    /// not refuse)? Lets masks refuse a token that leaves a capped lexeme unfinished when its
    /// budget runs out. Without budgets, always true.
    pub fn tokenEndAlive(self: *Parser, at: Position, next_token_index: u32) Error!bool {
        if (!self.cfg.has_token_max) return true;
        if (at.lexer_state == self.rows.items[at.row.index()].lexer_start) return true;
        const budget = try self.stateBudget(at.lexer_state);
        return next_token_index - at.lexeme_token_index < budget.most or self.lexer.isAccepting(at.lexer_state);
    }

    /// Is `at` inside a capped lexeme, or right after one that ended lazily? Forced bytes stop
    /// before such a byte: how many tokens they become is not known yet.
    pub fn inBudgetedLexeme(self: *Parser, at: Position) Error!bool {
        if (!self.cfg.has_token_max) return false;
        const row = self.rows.items[at.row.index()];
        const state = if (at.lexer_state != row.lexer_start)
            at.lexer_state
        else if (at.row == .first)
            return false
        else
            row.key.lexerState() orelse return false;
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
    pub fn boundaryRow(self: *Parser, at: Position) Error!?RowId {
        if (at.lexer_state == self.rows.items[at.row.index()].lexer_start) return at.row;
        if (!self.lexer.isAccepting(at.lexer_state)) return null;
        return self.endLexeme(at.row, at.lexer_state, at.text_len);
    }

    /// May the output end at `at`?
    pub fn eosAllowed(self: *Parser, at: Position) Error!bool {
        const r = try self.boundaryRow(at) orelse return false;
        const row = self.rows.items[r.index()];
        return row.accepting and (!row.after_skip or self.cfg.allow_initial_skip);
    }

    /// The position after special token `token` (matched by a special lexeme), or null.
    pub fn stepSpecial(self: *Parser, at: Position, token: TokenId) Error!?Position {
        const cfg = self.cfg;
        if (!cfg.has_special) return null;
        const r = try self.boundaryRow(at) orelse return null;
        const row = self.rows.items[r.index()];
        var j = row.items_start;
        while (j < row.items_end) : (j += 1) {
            const sym = cfg.rhs[self.items.items[j].pos];
            if (sym < cfg.lexeme_count and cfg.is_special[sym] and
                std.sort.binarySearch(TokenId, cfg.specialIds(sym), token, TokenId.order) != null)
            {
                const r2 = try self.scan(r, .special(sym), &.{sym}, at.text_len) orelse return null;
                return .{ .lexer_state = self.rows.items[r2.index()].lexer_start, .row = r2, .text_len = at.text_len };
            }
        }
        return null;
    }

    /// Calls `visit(context, token)` for every special token allowed at `at`.
    pub fn forEachAllowedSpecial(self: *Parser, at: Position, context: anytype, comptime visit: fn (@TypeOf(context), TokenId) void) Error!void {
        const cfg = self.cfg;
        if (!cfg.has_special) return;
        const r = try self.boundaryRow(at) orelse return;
        const row = self.rows.items[r.index()];
        var j = row.items_start;
        while (j < row.items_end) : (j += 1) {
            const sym = cfg.rhs[self.items.items[j].pos];
            if (sym < cfg.lexeme_count and cfg.is_special[sym]) {
                for (cfg.specialIds(sym)) |id| visit(context, id);
            }
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

const regex = @import("regex.zig");
const ir_reader = @import("ir_reader.zig");
const ir_magic = ir_reader.ir_magic;
const ir_nonterminal_flag = ir_reader.ir_nonterminal_flag;

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

fn walkFrom(parser: *Parser, from: Position, text: []const u8) Error!?Position {
    var at = from;
    for (text) |b| at = try parser.stepByte(at, b) orelse return null;
    return at;
}

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
    var diag: ir_reader.CompileDiagnostic = .{};
    var compiled = try ir_reader.compile(gpa, &exprs, b.words.items, &diag);
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
    var diag: ir_reader.CompileDiagnostic = .{};
    var compiled = try ir_reader.compile(gpa, &exprs, b.words.items, &diag);
    defer compiled.deinit(gpa);
    var lexer = try Lexer.initWithLazy(gpa, &exprs, compiled.lexeme_exprs, compiled.lazy, .{});
    defer lexer.deinit();
    // 40 `a`s build about 1,700 items but examine about 40,000 (each completion scans an
    // origin row): 10,000 units of work is not enough, though the items alone would fit.
    var parser = try Parser.init(gpa, &compiled.cfg, &lexer, .{ .step_item_count_max = 10_000 });
    defer parser.deinit();
    const text: [40]u8 = @splat('a');
    parser.beginStep(.first);
    try std.testing.expectError(error.LimitExceeded, walkText(&parser, &text));
    try std.testing.expectEqual(limit_error.Kind.parser_step_items, limit_error.hit);
    try std.testing.expect(parser.items.items.len < 10_000);
    // With room for the work, the same text parses.
    parser.limits.step_item_count_max = 1_000_000;
    parser.beginStep(.first);
    const at = (try walkText(&parser, &text)) orelse return error.TestUnexpectedResult;
    try std.testing.expect(try parser.eosAllowed(at));
}

/// A JSON-like array whose items must differ: lexemes 0 STRING, 1 NUMBER, 2 "[", 3 "]", 4 ",";
/// skip " *". array → "[" "]" | "[" list "]"; list → item | list "," item (a distinct list);
/// item → STRING | NUMBER.
fn distinctIr(b: *IrBuilder) !void {
    const nt = ir_nonterminal_flag;
    // Flags: a skip pattern (2) and a list of distinct nonterminals (16).
    for ([_]u32{ ir_magic, 5, 3, 6, 0, 2 | 16 }) |w| try b.put(w);
    try b.putBytes(" *");
    for ([_]u32{ 1, 1 }) |w| try b.put(w); // one distinct nonterminal: list (1)
    try b.put(0);
    try b.put(0);
    try b.putBytes("\"(?:[^\"\\\\]|\\\\u[0-9a-f]{4}|\\\\[\"\\\\/nt])*\"");
    try b.put(0);
    try b.put(0);
    try b.putBytes("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?");
    for ([_][]const u8{ "[", "]", "," }) |lit| {
        try b.put(1);
        try b.put(0);
        try b.putBytes(lit);
    }
    const rules = [_][]const u32{
        &.{ 0, 2, 2, 3 },   &.{ 0, 3, 2, nt | 1, 3 },
        &.{ 1, 1, nt | 2 }, &.{ 1, 3, nt | 1, 4, nt | 2 },
        &.{ 2, 1, 0 },      &.{ 2, 1, 1 },
    };
    for (rules) |rule| for (rule) |w| try b.put(w);
}

test "earley: the items of a distinct list differ as JSON values, checked where each completes" {
    const gpa = std.testing.allocator;
    var b: IrBuilder = .{};
    defer b.words.deinit(gpa);
    try distinctIr(&b);
    var exprs = try regex.ExprSet.init(gpa, .{});
    defer exprs.deinit();
    var diag: ir_reader.CompileDiagnostic = .{};
    var compiled = try ir_reader.compile(gpa, &exprs, b.words.items, &diag);
    defer compiled.deinit(gpa);
    try std.testing.expect(compiled.cfg.distinct_pos.len > 0 and compiled.cfg.lazy_walk);
    var lexer = try Lexer.initWithLazy(gpa, &exprs, compiled.lexeme_exprs, compiled.lazy, .{});
    defer lexer.deinit();
    lexer.end_when_final = true;
    var parser = try Parser.init(gpa, &compiled.cfg, &lexer, .{});
    defer parser.deinit();
    parser.beginStep(.first);
    const complete = [_][]const u8{ "[]", "[\"a\"]", "[\"a\", \"b\"]", "[1, 2, \"1\"]", "[1, 12]", "[\"ab\",\"a\"]", "[0.5, 5]" };
    for (complete) |text| {
        const at = (try walkText(&parser, text)) orelse return error.TestUnexpectedResult;
        try std.testing.expect(try parser.eosAllowed(at));
    }
    // Alive: every one of these can still be finished differently from the earlier items.
    const open = [_][]const u8{ "[\"a\", \"a", "[1, 1", "[1, 1.0", "[1, 10e-", "[\"a\", \"\\u00" };
    for (open) |text| try std.testing.expect(try walkText(&parser, text) != null);
    // Dead: a string repeats on its closing quote, a number on the byte after it.
    const repeated = [_][]const u8{
        "[\"a\", \"a\"", "[\"a\",\"b\",\"\\u0061\"", "[\"/\", \"\\/\"", "[1, 1.0,",
        "[1, 2, 1e0]",   "[0, -0 ",                  "[0.5, 50e-2]",    "[\"x\", 3, \"x\"",
    };
    for (repeated) |text| try std.testing.expect(try walkText(&parser, text) == null);
    // A list whose earlier items hold more text than a check reads: a limit, named.
    var at = (try walkText(&parser, "[")) orelse return error.TestUnexpectedResult;
    var item: [100]u8 = @splat('a');
    item[0] = '"';
    item[98] = '"';
    item[99] = ',';
    var i: u32 = 0;
    const outcome: Error!void = while (i < distinct.span_bytes_max / item.len + 2) : (i += 1) {
        parser.beginStep(at.row); // one call per item, as one token each would be
        _ = std.fmt.bufPrint(item[1..5], "{d:0>4}", .{i}) catch unreachable; // distinct items
        at = (walkFrom(&parser, at, &item) catch |err| break err) orelse return error.TestUnexpectedResult;
    };
    try std.testing.expectError(error.LimitExceeded, outcome);
    try std.testing.expectEqual(limit_error.Kind.distinct_items, limit_error.hit);
    try std.testing.expect(i * item.len > distinct.span_bytes_max);
}
