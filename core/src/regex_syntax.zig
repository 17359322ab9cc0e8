//! Regex syntax → expressions in an `ExprSet`.
//!
//! The accepted syntax is the common core of ECMA-262 (JSON Schema `pattern`) and Rust's `regex`
//! (Lark terminals): literals and escapes, `.`, bracket classes (negated, ranges, `\d \w \s` as
//! ASCII), alternation, groups (capturing, `(?:…)`, named), the quantifiers `? * + {m} {m,}
//! {m,n}` (a trailing lazy `?` is accepted: it changes which match is reported, not the
//! language), inline flags `(?i)` `(?s)` at the start and scoped ones (`(?i:…)`, `(?-s:…)`),
//! and `^`/`$` at the ends of the pattern. An alternation of many branches (a list of words) is
//! built left-factored, as the trie of its words (`regex.factor_branch_min`).
//!
//! Characters are Unicode scalar values; a class of characters becomes an alternation of UTF-8
//! byte sequences (ranges split so every byte position is one contiguous byte range), so the
//! matcher works on bytes and a token that ends inside a multi-byte character is still judged
//! exactly.
//!
//! Everything the matcher cannot honour exactly is an error with the byte offset of the
//! construct: lookaround, backreferences, word boundaries, `\p{…}` classes (for now), anchors
//! in the middle of a pattern. The parser recurses on groups with a depth bound
//! (`nesting_depth_max`) and refuses counted repetitions above `repeat_count_max`.

const std = @import("std");
const limit_error = @import("limits.zig");
const assert = std.debug.assert;
const regex = @import("regex.zig");
const ExprSet = regex.ExprSet;
const ExprId = regex.ExprId;
const ByteSet = regex.ByteSet;

pub const nesting_depth_max: u32 = 100;
pub const repeat_count_max: u32 = 10_000;
pub const class_range_count_max: u32 = 4_096;
/// Nested `(?~X)` groups: each makes the lexer's dead-state checks search the terms inside (50
/// nested cost a 66 ms mask on Llama-3); the JSON Schema front-end nests at most four.
pub const complement_depth_max: u32 = 6;

pub const Flags = struct {
    /// `.` also matches `\n`.
    dot_all: bool = false,
    /// ASCII letters match both cases.
    case_insensitive: bool = false,
};

pub const Diagnostic = struct {
    /// Byte offset into the pattern where the problem is.
    position: u32 = 0,
    message: []const u8 = "",
};

pub const Error = regex.Error || error{Syntax};

const max_scalar: u21 = 0x10FFFF;

/// A set of Unicode scalar values as sorted, non-overlapping, non-adjacent ranges.
const CharClass = struct {
    ranges: std.ArrayList([2]u21) = .empty,

    fn deinit(self: *CharClass, gpa: std.mem.Allocator) void {
        self.ranges.deinit(gpa);
    }

    fn add(self: *CharClass, gpa: std.mem.Allocator, lo: u21, hi: u21) !void {
        assert(lo <= hi);
        if (self.ranges.items.len >= class_range_count_max) return limit_error.exceeded(.grammar_size);
        try self.ranges.append(gpa, .{ lo, hi });
    }

    fn normalize(self: *CharClass) void {
        const items = self.ranges.items;
        std.mem.sort([2]u21, items, {}, struct {
            fn lessThan(_: void, a: [2]u21, b: [2]u21) bool {
                return a[0] < b[0];
            }
        }.lessThan);
        var out: usize = 0;
        for (items) |r| {
            if (out > 0 and @as(u32, r[0]) <= @as(u32, items[out - 1][1]) + 1) {
                items[out - 1][1] = @max(items[out - 1][1], r[1]);
            } else {
                items[out] = r;
                out += 1;
            }
        }
        self.ranges.shrinkRetainingCapacity(out);
    }

    fn negate(self: *CharClass, gpa: std.mem.Allocator) !void {
        self.normalize();
        var result: CharClass = .{};
        errdefer result.deinit(gpa);
        var next: u32 = 0;
        for (self.ranges.items) |r| {
            if (r[0] > next) try result.add(gpa, @intCast(next), r[0] - 1);
            next = @as(u32, r[1]) + 1;
        }
        if (next <= max_scalar) try result.add(gpa, @intCast(next), max_scalar);
        self.deinit(gpa);
        self.* = result;
    }

    fn addCaseFolds(self: *CharClass, gpa: std.mem.Allocator) !void {
        const n = self.ranges.items.len;
        for (0..n) |i| {
            const r = self.ranges.items[i];
            const pairs = [_][3]u21{ .{ 'a', 'z', 'A' }, .{ 'A', 'Z', 'a' } };
            for (pairs) |p| {
                const lo = @max(r[0], p[0]);
                const hi = @min(r[1], p[1]);
                if (lo <= hi) try self.add(gpa, lo - p[0] + p[2], hi - p[0] + p[2]);
            }
        }
    }
};

pub const Parser = struct {
    set: *ExprSet,
    pattern: []const u8,
    pos: u32 = 0,
    depth: u32 = 0,
    /// `(?~X)` groups open around the current position (`complement_depth_max`).
    complements: u32 = 0,
    flags: Flags,
    diag: *Diagnostic,

    fn fail(self: *Parser, position: u32, message: []const u8) Error {
        self.diag.* = .{ .position = position, .message = message };
        return error.Syntax;
    }

    fn peek(self: *const Parser) ?u8 {
        return if (self.pos < self.pattern.len) self.pattern[self.pos] else null;
    }

    fn peekAt(self: *const Parser, offset: u32) ?u8 {
        const i = self.pos + offset;
        return if (i < self.pattern.len) self.pattern[i] else null;
    }

    fn eat(self: *Parser, c: u8) bool {
        if (self.peek() == c) {
            self.pos += 1;
            return true;
        }
        return false;
    }

    fn parseInlineFlags(self: *Parser) Error!void {
        while (self.pos + 2 < self.pattern.len and self.pattern[self.pos] == '(' and
            self.pattern[self.pos + 1] == '?')
        {
            var i = self.pos + 2;
            var flags = self.flags;
            while (i < self.pattern.len) : (i += 1) {
                switch (self.pattern[i]) {
                    'i' => flags.case_insensitive = true,
                    's' => flags.dot_all = true,
                    'u', 'm' => {},
                    ')' => break,
                    else => return, // not an inline-flag group: parse as a group
                }
            } else return;
            if (i == self.pos + 2) return;
            self.flags = flags;
            self.pos = i + 1;
        }
    }

    /// alternation := concatenation ('|' concatenation)*
    fn parseAlternation(self: *Parser) Error!ExprId {
        if (self.depth >= nesting_depth_max) return self.fail(self.pos, "groups nested too deeply");
        self.depth += 1;
        defer self.depth -= 1;
        if (!self.flags.case_insensitive) {
            if (try self.literalAlternation()) |words| return words;
        }
        const first = try self.parseConcatenation();
        if (self.peek() != '|') return first;
        // One alternation of every branch: adding the branches one at a time would intern an
        // alternation of each length on the way (quadratic in words and time: 10,000 branches
        // took 3 s and 760 MB).
        var branches: std.ArrayList(ExprId) = .empty;
        defer branches.deinit(self.set.gpa);
        try branches.append(self.set.gpa, first);
        while (self.eat('|')) try branches.append(self.set.gpa, try self.parseConcatenation());
        // Many branches: a list of words, built as their trie (`regex.factor_branch_min`).
        if (branches.items.len >= regex.factor_branch_min) return self.set.altFactored(branches.items);
        return self.set.alt(branches.items);
    }

    /// An alternation of at least `regex.factor_branch_min` branches that are all plain text
    /// (a list of words: `(alpha|beta|…)`), built directly as the trie of the words; null, with
    /// nothing consumed, for anything else. The general path would first intern every word as
    /// a chain of concatenations, then factor the chains into the trie; this interns the trie
    /// and the words' unshared tails only (about half the terms for 10,000 identifiers).
    fn literalAlternation(self: *Parser) Error!?ExprId {
        const gpa = self.set.gpa;
        const start = self.pos;
        var bytes: std.ArrayList(u8) = .empty;
        defer bytes.deinit(gpa);
        var ends: std.ArrayList(u32) = .empty; // end offset of each branch in `bytes`
        defer ends.deinit(gpa);
        while (true) {
            if (!try self.literalBranch(&bytes)) break;
            try ends.append(gpa, @intCast(bytes.items.len));
            if (!self.eat('|')) {
                if (ends.items.len >= regex.factor_branch_min and
                    std.unicode.utf8ValidateSlice(bytes.items)) return try self.wordTrie(bytes.items, ends.items);
                break;
            }
        }
        self.pos = start;
        return null;
    }

    /// Appends the plain text of one branch to `bytes` and stops before `|`, `)` or the end;
    /// false when the branch is anything but text (a class, a group, a quantifier, an anchor,
    /// an escape other than punctuation and `\xHH`).
    fn literalBranch(self: *Parser, bytes: *std.ArrayList(u8)) Error!bool {
        const gpa = self.set.gpa;
        while (self.peek()) |c| {
            switch (c) {
                '|', ')' => return true,
                '^', '$', '.', '?', '*', '+', '(', '[', ']', '{', '}' => return false,
                '\\' => {
                    const e = self.peekAt(1) orelse return false;
                    if (std.mem.indexOfScalar(u8, "\\^$.|?*+()[]{}/-", e) != null) {
                        try bytes.append(gpa, e);
                        self.pos += 2;
                    } else if (e == 'x' and self.pos + 4 <= self.pattern.len) {
                        const code = std.fmt.parseInt(u8, self.pattern[self.pos + 2 ..][0..2], 16) catch return false;
                        var utf8: [2]u8 = undefined;
                        const n = std.unicode.utf8Encode(code, &utf8) catch unreachable;
                        try bytes.appendSlice(gpa, utf8[0..n]);
                        self.pos += 4;
                    } else return false;
                },
                else => {
                    try bytes.append(gpa, c);
                    self.pos += 1;
                },
            }
        }
        return true;
    }

    /// The trie of the words `bytes[ends[i-1]..ends[i]]`, as `altFactored` would factor them.
    fn wordTrie(self: *Parser, bytes: []const u8, ends: []const u32) Error!ExprId {
        const gpa = self.set.gpa;
        const words = try gpa.alloc([]const u8, ends.len);
        defer gpa.free(words);
        var from: u32 = 0;
        for (words, ends) |*w, end| {
            w.* = bytes[from..end];
            from = end;
        }
        std.mem.sortUnstable([]const u8, words, {}, struct {
            fn lessThan(_: void, a: []const u8, b: []const u8) bool {
                return std.mem.lessThan(u8, a, b);
            }
        }.lessThan);
        // Distinct words only (equal ones are adjacent once sorted).
        var count: usize = 0;
        for (words) |w| {
            if (count > 0 and regex.bytesEqual(words[count - 1], w)) continue;
            words[count] = w;
            count += 1;
        }
        return trieNode(self.set, words[0..count], 0, 0);
    }

    fn parseConcatenation(self: *Parser) Error!ExprId {
        var parts: std.ArrayList(ExprId) = .empty;
        defer parts.deinit(self.set.gpa);
        while (self.peek()) |c| {
            if (c == '|' or c == ')') break;
            if (c == '^') {
                if (self.pos != 0 and !(self.depth == 1 and parts.items.len == 0 and
                    self.pattern[self.pos - 1] == '|'))
                {
                    return self.fail(self.pos, "'^' is only supported at the start of the pattern");
                }
                self.pos += 1;
                continue;
            }
            if (c == '$') {
                const at_end = self.pos + 1 == self.pattern.len or
                    (self.depth == 1 and self.pattern[self.pos + 1] == '|');
                if (!at_end) return self.fail(self.pos, "'$' is only supported at the end of the pattern");
                self.pos += 1;
                continue;
            }
            const atom = try self.parseAtom();
            try parts.append(self.set.gpa, try self.parseQuantifiers(atom));
        }
        return self.set.concatAll(parts.items);
    }

    fn parseQuantifiers(self: *Parser, atom_in: ExprId) Error!ExprId {
        var atom = atom_in;
        while (self.peek()) |c| {
            const start = self.pos;
            var min: u32 = undefined;
            var max: u32 = undefined;
            switch (c) {
                '?' => {
                    min = 0;
                    max = 1;
                    self.pos += 1;
                },
                '*' => {
                    min = 0;
                    max = regex.repeat_unbounded;
                    self.pos += 1;
                },
                '+' => {
                    min = 1;
                    max = regex.repeat_unbounded;
                    self.pos += 1;
                },
                '{' => {
                    const bounds = try self.parseCounted() orelse return atom;
                    min = bounds[0];
                    max = bounds[1];
                },
                else => return atom,
            }
            _ = self.eat('?'); // lazy: same language
            if (self.peek() == '+') return self.fail(self.pos, "possessive quantifiers are not supported");
            if (self.peek()) |n| {
                if (n == '*' or n == '?' or n == '{') {
                    if (n != '{' or (self.peekAt(1) != null and std.ascii.isDigit(self.peekAt(1).?))) {
                        return self.fail(self.pos, "a quantifier cannot follow another quantifier");
                    }
                }
            }
            _ = start;
            atom = try self.set.repeat(atom, min, max);
        }
        return atom;
    }

    /// `{m}`, `{m,}`, `{m,n}`; null (and no input consumed) when `{` is a literal brace.
    fn parseCounted(self: *Parser) Error!?[2]u32 {
        assert(self.peek() == '{');
        const start = self.pos;
        var i = self.pos + 1;
        const min = self.parseNumber(&i) orelse return null;
        var max = min;
        if (i < self.pattern.len and self.pattern[i] == ',') {
            i += 1;
            max = self.parseNumber(&i) orelse regex.repeat_unbounded;
        }
        if (i >= self.pattern.len or self.pattern[i] != '}') return null;
        self.pos = i + 1;
        if (min > repeat_count_max or (max != regex.repeat_unbounded and max > repeat_count_max)) {
            return self.fail(start, "counted repetition above 10000");
        }
        if (max < min) return self.fail(start, "repetition range {m,n} has n < m");
        return .{ min, max };
    }

    fn parseNumber(self: *const Parser, i: *u32) ?u32 {
        const begin = i.*;
        var value: u64 = 0;
        while (i.* < self.pattern.len and std.ascii.isDigit(self.pattern[i.*])) : (i.* += 1) {
            value = @min(value * 10 + (self.pattern[i.*] - '0'), std.math.maxInt(u32) - 1);
        }
        if (i.* == begin) return null;
        return @intCast(value);
    }

    fn parseAtom(self: *Parser) Error!ExprId {
        const start = self.pos;
        const c = self.peek().?;
        switch (c) {
            '(' => return self.parseGroup(),
            '[' => {
                var class = try self.parseClass();
                defer class.deinit(self.set.gpa);
                return self.classExpr(&class);
            },
            '.' => {
                self.pos += 1;
                var class: CharClass = .{};
                defer class.deinit(self.set.gpa);
                if (self.flags.dot_all) {
                    try class.add(self.set.gpa, 0, max_scalar);
                } else {
                    try class.add(self.set.gpa, '\n', '\n');
                    try class.negate(self.set.gpa);
                }
                return self.classExpr(&class);
            },
            '\\' => {
                var class: CharClass = .{};
                defer class.deinit(self.set.gpa);
                try self.parseEscape(&class, false);
                return self.classExpr(&class);
            },
            '*', '+', '?' => return self.fail(start, "quantifier without anything to repeat"),
            '{' => {
                if (try self.parseCounted() != null) return self.fail(start, "quantifier without anything to repeat");
                self.pos += 1;
                return self.charExpr('{');
            },
            else => {
                const ch = try self.parseUtf8Char();
                return self.charExpr(ch);
            },
        }
    }

    fn charExpr(self: *Parser, ch: u21) Error!ExprId {
        // A character that folds to nothing else is its UTF-8 bytes (the same term the class
        // would give): the common case of literal text, without building a class.
        const folds = self.flags.case_insensitive and ch < 128 and std.ascii.isAlphabetic(@intCast(ch));
        if (!folds) {
            var bytes: [4]u8 = undefined;
            const n = std.unicode.utf8Encode(ch, &bytes) catch unreachable; // decoded from UTF-8
            return self.set.literal(bytes[0..n]);
        }
        var class: CharClass = .{};
        defer class.deinit(self.set.gpa);
        try class.add(self.set.gpa, ch, ch);
        return self.classExpr(&class);
    }

    fn parseUtf8Char(self: *Parser) Error!u21 {
        const start = self.pos;
        const len = std.unicode.utf8ByteSequenceLength(self.pattern[start]) catch
            return self.fail(start, "the pattern is not valid UTF-8");
        if (start + len > self.pattern.len) return self.fail(start, "the pattern is not valid UTF-8");
        const ch = std.unicode.utf8Decode(self.pattern[start..][0..len]) catch
            return self.fail(start, "the pattern is not valid UTF-8");
        self.pos += len;
        return ch;
    }

    fn parseGroup(self: *Parser) Error!ExprId {
        const start = self.pos;
        assert(self.peek() == '(');
        if (self.depth >= nesting_depth_max) return self.fail(start, "groups nested too deeply");
        self.pos += 1;
        if (self.eat('?')) {
            const kind = self.peek() orelse return self.fail(start, "unclosed group");
            switch (kind) {
                ':' => self.pos += 1,
                '=', '!' => return self.fail(start, "lookahead is not supported"),
                '~' => {
                    // `(?~X)`: the byte strings X does not match (`ExprSet.not`). Not ECMA-262
                    // or Rust syntax (both refuse `(?~`); the JSON Schema front-end writes it
                    // for lookaheads inside a pattern (docs/grammar_ir.md).
                    if (self.complements >= complement_depth_max) return self.fail(start, "(?~X) groups nested too deeply");
                    self.pos += 1;
                    self.complements += 1;
                    defer self.complements -= 1;
                    const inner = try self.parseAlternation();
                    if (!self.eat(')')) return self.fail(start, "unclosed group");
                    return self.set.not(inner);
                },
                '%' => return self.parseDigitsMod(start),
                '<' => {
                    const next = self.peekAt(1);
                    if (next == '=' or next == '!') return self.fail(start, "lookbehind is not supported");
                    try self.skipGroupName(start);
                },
                'P' => {
                    self.pos += 1;
                    if (self.peek() != '<') return self.fail(start, "unsupported group syntax");
                    try self.skipGroupName(start);
                },
                else => {
                    // Scoped flags: (?is:...) or (?-i:...) apply inside the group only.
                    var flags = self.flags;
                    var on = true;
                    while (self.peek()) |f| : (self.pos += 1) {
                        switch (f) {
                            'i' => flags.case_insensitive = on,
                            's' => flags.dot_all = on,
                            'u', 'm', 'x' => if (f == 'x') return self.fail(start, "verbose mode (?x) is not supported"),
                            '-' => on = false,
                            ':' => break,
                            else => return self.fail(start, "unsupported group syntax"),
                        }
                    } else return self.fail(start, "unclosed group");
                    self.pos += 1; // ':'
                    const saved = self.flags;
                    self.flags = flags;
                    defer self.flags = saved;
                    const inner = try self.parseAlternation();
                    if (!self.eat(')')) return self.fail(start, "unclosed group");
                    return inner;
                },
            }
        }
        const inner = try self.parseAlternation();
        if (!self.eat(')')) return self.fail(start, "unclosed group");
        return inner;
    }

    /// `(?%C,R)` or `(?%C,R,S)` after `(?`: the digit runs whose value is ≡ R (mod C), read
    /// after digits that left residue S (0 when not given); `(?%!…)`: ≢ R instead; `(?%.…)`,
    /// `(?%!.…)`: runs of digits and '.', the points left out of the value
    /// (`ExprSet.digitsMod`). Not ECMA-262
    /// or Rust syntax (both refuse `(?%`), so no pattern of theirs changes meaning; the JSON
    /// Schema front-end writes it for `multipleOf` (docs/grammar_ir.md).
    fn parseDigitsMod(self: *Parser, start: u32) Error!ExprId {
        assert(self.peek() == '%');
        var i = self.pos + 1;
        var options: u32 = 0;
        if (i < self.pattern.len and self.pattern[i] == '!') {
            options |= regex.digits_mod_negated;
            i += 1;
        }
        if (i < self.pattern.len and self.pattern[i] == '.') {
            options |= regex.digits_mod_point;
            i += 1;
        }
        var values: [3]u32 = .{ 0, 0, 0 };
        var count: usize = 0;
        while (count < values.len) {
            values[count] = self.parseNumber(&i) orelse return self.fail(start, "(?%C,R) needs decimal numbers");
            count += 1;
            if (i < self.pattern.len and self.pattern[i] == ',') {
                i += 1;
            } else break;
        }
        if (i >= self.pattern.len or self.pattern[i] != ')') return self.fail(start, "(?%C,R) or (?%C,R,S) expected");
        if (count < 2) return self.fail(start, "(?%C,R) needs a modulus and a residue");
        const modulus = values[0];
        if (modulus < 1 or modulus > regex.digits_modulus_max) return self.fail(start, "the modulus of (?%C,R) must be 1 to 1000000");
        if (values[1] >= modulus or values[2] >= modulus) return self.fail(start, "the residues of (?%C,R,S) must be below the modulus");
        self.pos = i + 1;
        return self.set.digitsMod(modulus, values[2], values[1], options); // (modulus, start residue S, target R)
    }

    fn skipGroupName(self: *Parser, start: u32) Error!void {
        assert(self.peek() == '<');
        self.pos += 1;
        while (self.peek()) |c| : (self.pos += 1) {
            if (c == '>') {
                self.pos += 1;
                return;
            }
            if (!(std.ascii.isAlphanumeric(c) or c == '_')) break;
        }
        return self.fail(start, "bad group name");
    }

    /// `[` `^`? items `]`
    fn parseClass(self: *Parser) Error!CharClass {
        const start = self.pos;
        assert(self.peek() == '[');
        self.pos += 1;
        const gpa = self.set.gpa;
        var class: CharClass = .{};
        errdefer class.deinit(gpa);
        const negated = self.eat('^');
        var first = true;
        while (true) {
            const c = self.peek() orelse return self.fail(start, "unclosed character class");
            if (c == ']' and !first) {
                self.pos += 1;
                break;
            }
            if (c == '[' and self.peekAt(1) == ':') return self.fail(self.pos, "POSIX classes like [:alpha:] are not supported");
            first = false;
            const item_start = self.pos;
            var lo: u21 = undefined;
            if (c == '\\') {
                var single: CharClass = .{};
                defer single.deinit(gpa);
                try self.parseEscape(&single, true);
                if (single.ranges.items.len == 1 and single.ranges.items[0][0] == single.ranges.items[0][1] and
                    self.peek() == '-' and self.peekAt(1) != null and self.peekAt(1).? != ']')
                {
                    lo = single.ranges.items[0][0];
                } else {
                    for (single.ranges.items) |r| try class.add(gpa, r[0], r[1]);
                    continue;
                }
            } else {
                lo = try self.parseUtf8Char();
            }
            if (self.peek() == '-' and self.peekAt(1) != null and self.peekAt(1).? != ']') {
                self.pos += 1;
                var hi: u21 = undefined;
                if (self.peek() == '\\') {
                    var single: CharClass = .{};
                    defer single.deinit(gpa);
                    const esc_start = self.pos;
                    try self.parseEscape(&single, true);
                    if (single.ranges.items.len != 1 or single.ranges.items[0][0] != single.ranges.items[0][1]) {
                        return self.fail(esc_start, "a class escape cannot end a range");
                    }
                    hi = single.ranges.items[0][0];
                } else {
                    hi = try self.parseUtf8Char();
                }
                if (hi < lo) return self.fail(item_start, "character range is out of order");
                try class.add(gpa, lo, hi);
            } else {
                try class.add(gpa, lo, lo);
            }
        }
        if (self.flags.case_insensitive) try class.addCaseFolds(gpa);
        if (negated) try class.negate(gpa);
        return class;
    }

    /// An escape sequence; adds what it denotes to `class`.
    fn parseEscape(self: *Parser, class: *CharClass, in_class: bool) Error!void {
        const start = self.pos;
        assert(self.peek() == '\\');
        self.pos += 1;
        const gpa = self.set.gpa;
        const c = self.peek() orelse return self.fail(start, "pattern ends with a lone backslash");
        self.pos += 1;
        switch (c) {
            'd', 'D', 'w', 'W', 's', 'S' => {
                var sub: CharClass = .{};
                defer sub.deinit(gpa);
                switch (std.ascii.toLower(c)) {
                    'd' => try sub.add(gpa, '0', '9'),
                    'w' => {
                        try sub.add(gpa, '0', '9');
                        try sub.add(gpa, 'A', 'Z');
                        try sub.add(gpa, '_', '_');
                        try sub.add(gpa, 'a', 'z');
                    },
                    's' => {
                        try sub.add(gpa, '\t', '\r');
                        try sub.add(gpa, ' ', ' ');
                    },
                    else => unreachable,
                }
                if (std.ascii.isUpper(c)) try sub.negate(gpa);
                for (sub.ranges.items) |r| try class.add(gpa, r[0], r[1]);
            },
            'n' => try class.add(gpa, '\n', '\n'),
            'r' => try class.add(gpa, '\r', '\r'),
            't' => try class.add(gpa, '\t', '\t'),
            'f' => try class.add(gpa, 0x0C, 0x0C),
            'v' => try class.add(gpa, 0x0B, 0x0B),
            'a' => try class.add(gpa, 0x07, 0x07),
            'e' => try class.add(gpa, 0x1B, 0x1B),
            '0' => {
                if (self.peek() != null and std.ascii.isDigit(self.peek().?)) return self.fail(start, "octal escapes are not supported");
                try class.add(gpa, 0, 0);
            },
            'x' => {
                const ch = try self.parseHexEscape(start, 2);
                try class.add(gpa, ch, ch);
            },
            'u' => {
                const ch = try self.parseHexEscape(start, 4);
                try class.add(gpa, ch, ch);
            },
            'b' => {
                if (in_class) {
                    try class.add(gpa, 0x08, 0x08);
                } else return self.fail(start, "word boundaries (\\b) are not supported");
            },
            'B', 'A', 'z', 'Z', 'G' => return self.fail(start, "this anchor escape is not supported"),
            'p', 'P' => return self.fail(start, "Unicode property classes (\\p{...}) are not supported yet"),
            'c' => return self.fail(start, "control escapes (\\cX) are not supported"),
            'k', '1'...'9' => return self.fail(start, "backreferences are not supported"),
            else => {
                if (std.ascii.isAlphanumeric(c)) return self.fail(start, "unknown escape");
                self.pos -= 1;
                const ch = try self.parseUtf8Char();
                try class.add(gpa, ch, ch);
                return;
            },
        }
        if (self.flags.case_insensitive and !in_class) try class.addCaseFolds(gpa);
    }

    /// After `\x` or `\u`: exactly `digits` hex digits, or `{h…}`.
    fn parseHexEscape(self: *Parser, start: u32, digits: u32) Error!u21 {
        var value: u32 = 0;
        if (self.eat('{')) {
            var n: u32 = 0;
            while (self.peek()) |c| : (self.pos += 1) {
                if (c == '}') break;
                const d = std.fmt.charToDigit(c, 16) catch return self.fail(start, "bad hex escape");
                value = value * 16 + d;
                n += 1;
                if (n > 6) return self.fail(start, "bad hex escape");
            } else return self.fail(start, "bad hex escape");
            self.pos += 1;
            if (n == 0) return self.fail(start, "bad hex escape");
        } else {
            var n: u32 = 0;
            while (n < digits) : (n += 1) {
                const c = self.peek() orelse return self.fail(start, "bad hex escape");
                const d = std.fmt.charToDigit(c, 16) catch return self.fail(start, "bad hex escape");
                value = value * 16 + d;
                self.pos += 1;
            }
        }
        if (value > max_scalar or (value >= 0xD800 and value <= 0xDFFF)) {
            return self.fail(start, "escape is not a Unicode scalar value");
        }
        return @intCast(value);
    }

    fn classExpr(self: *Parser, class: *CharClass) Error!ExprId {
        if (self.flags.case_insensitive) try class.addCaseFolds(self.set.gpa);
        class.normalize();
        return utf8ClassExpr(self.set, class.ranges.items);
    }
};

/// The node of a word trie for `words` (sorted, distinct, sharing their first `offset` bytes):
/// what follows that prefix. Recursion follows shared prefixes, bounded by
/// `regex.factor_depth_max` levels; below it the rests are alternated unfactored.
fn trieNode(set: *ExprSet, words: []const []const u8, offset: usize, depth: u32) regex.Error!ExprId {
    assert(words.len > 0);
    if (words.len == 1) return set.literal(words[0][offset..]);
    var members: std.ArrayList(ExprId) = .empty;
    defer members.deinit(set.gpa);
    if (depth >= regex.factor_depth_max) {
        for (words) |w| try members.append(set.gpa, try set.literal(w[offset..]));
        return set.alt(members.items);
    }
    var i: usize = 0;
    // Sorted: a word that ends here (a prefix of the others) comes first.
    if (words[0].len == offset) {
        try members.append(set.gpa, .epsilon);
        i = 1;
    }
    while (i < words.len) {
        const b = words[i][offset];
        var j = i + 1;
        while (j < words.len and words[j][offset] == b) j += 1;
        const rest = try trieNode(set, words[i..j], offset + 1, depth + 1);
        try members.append(set.gpa, try set.concat(try set.byte(b), rest));
        i = j;
    }
    return set.alt(members.items);
}

/// The UTF-8 encodings of the scalar values in `ranges` (sorted, disjoint), as an expression.
/// Surrogates are excluded. Each range is split so that, for every split piece, byte position
/// i of the encoding ranges over one contiguous byte interval independently of the others.
fn utf8ClassExpr(set: *ExprSet, ranges: []const [2]u21) regex.Error!ExprId {
    var members: std.ArrayList(ExprId) = .empty;
    defer members.deinit(set.gpa);
    var ascii: ByteSet = .{};
    var stack: std.ArrayList([2]u21) = .empty;
    defer stack.deinit(set.gpa);
    for (ranges) |r| {
        // Drop surrogates.
        if (r[1] < 0xD800 or r[0] > 0xDFFF) {
            try stack.append(set.gpa, r);
        } else {
            if (r[0] < 0xD800) try stack.append(set.gpa, .{ r[0], 0xD7FF });
            if (r[1] > 0xDFFF) try stack.append(set.gpa, .{ 0xE000, r[1] });
        }
    }
    while (stack.pop()) |r| {
        const lo = r[0];
        const hi = r[1];
        // Split at encoded-length boundaries.
        const boundaries = [_]u21{ 0x7F, 0x7FF, 0xFFFF };
        var split = false;
        for (boundaries) |bound| {
            if (lo <= bound and hi > bound) {
                try stack.append(set.gpa, .{ lo, bound });
                try stack.append(set.gpa, .{ bound + 1, hi });
                split = true;
                break;
            }
        }
        if (split) continue;
        if (hi <= 0x7F) {
            ascii.addRange(@intCast(lo), @intCast(hi));
            continue;
        }
        // Split so that trailing continuation positions cover whole blocks.
        var i: u5 = 1;
        const len: u5 = if (hi <= 0x7FF) 2 else if (hi <= 0xFFFF) 3 else 4;
        while (i < len) : (i += 1) {
            const m: u21 = (@as(u21, 1) << (6 * @as(u5, i))) - 1;
            if ((lo & ~m) != (hi & ~m)) {
                if ((lo & m) != 0) {
                    try stack.append(set.gpa, .{ lo, lo | m });
                    try stack.append(set.gpa, .{ (lo | m) + 1, hi });
                    split = true;
                    break;
                }
                if ((hi & m) != m) {
                    try stack.append(set.gpa, .{ lo, (hi & ~m) - 1 });
                    try stack.append(set.gpa, .{ hi & ~m, hi });
                    split = true;
                    break;
                }
            }
        }
        if (split) continue;
        var lo_bytes: [4]u8 = undefined;
        var hi_bytes: [4]u8 = undefined;
        const n = std.unicode.utf8Encode(lo, &lo_bytes) catch unreachable;
        const n_hi = std.unicode.utf8Encode(hi, &hi_bytes) catch unreachable;
        assert(n == n_hi);
        var parts: [4]ExprId = undefined;
        for (0..n) |k| {
            var bs: ByteSet = .{};
            bs.addRange(lo_bytes[k], hi_bytes[k]);
            parts[k] = try set.byteSet(bs);
        }
        try members.append(set.gpa, try set.concatAll(parts[0..n]));
    }
    if (!ascii.isEmpty()) try members.append(set.gpa, try set.byteSet(ascii));
    return set.alt(members.items);
}

/// Parses `pattern` into `set`. On `error.Syntax`, `diag` says where and why.
pub fn parse(set: *ExprSet, pattern: []const u8, flags: Flags, diag: *Diagnostic) Error!ExprId {
    var parser: Parser = .{ .set = set, .pattern = pattern, .flags = flags, .diag = diag };
    try parser.parseInlineFlags();
    const result = try parser.parseAlternation();
    if (parser.pos < pattern.len) {
        assert(pattern[parser.pos] == ')');
        return parser.fail(parser.pos, "unmatched ')'");
    }
    return result;
}

// ---------------------------------------------------------------------------------------------
// Tests

fn fullMatch(pattern: []const u8, input: []const u8) !bool {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var diag: Diagnostic = .{};
    var e = try parse(&set, pattern, .{}, &diag);
    for (input) |b| e = try set.deriv(e, b);
    return set.nullable(e);
}

fn expectSyntaxError(pattern: []const u8, position: u32) !void {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var diag: Diagnostic = .{};
    try std.testing.expectError(error.Syntax, parse(&set, pattern, .{}, &diag));
    try std.testing.expectEqual(position, diag.position);
}

test "literals, classes and quantifiers" {
    try std.testing.expect(try fullMatch("abc", "abc"));
    try std.testing.expect(!try fullMatch("abc", "abd"));
    try std.testing.expect(try fullMatch("a|bc", "bc"));
    try std.testing.expect(try fullMatch("(ab)+", "ababab"));
    try std.testing.expect(!try fullMatch("(ab)+", ""));
    try std.testing.expect(try fullMatch("[a-c]{2,3}", "cab"));
    try std.testing.expect(!try fullMatch("[a-c]{2,3}", "cabc"));
    try std.testing.expect(try fullMatch("x{2,}", "xxxxx"));
    try std.testing.expect(try fullMatch("[^\"]*\"", "hello\""));
    try std.testing.expect(!try fullMatch("[^\"]*\"", "he\"llo\""));
    try std.testing.expect(try fullMatch("\\d+\\.\\d*", "12."));
    try std.testing.expect(try fullMatch("^(?:yes|no)$", "no"));
    try std.testing.expect(try fullMatch("a{,3}", "a{,3}"));
    try std.testing.expect(try fullMatch("[]a]", "]"));
    try std.testing.expect(try fullMatch("[a-]", "-"));
    try std.testing.expect(try fullMatch("\\u00e9\\x41", "éA"));
    try std.testing.expect(try fullMatch("(?i)abc", "AbC"));
    try std.testing.expect(try fullMatch("a(?i:b)c", "aBc"));
    try std.testing.expect(!try fullMatch("a(?i:b)c", "aBC"));
    try std.testing.expect(try fullMatch("(?s:.)", "\n"));
}

test "unicode classes become UTF-8 byte sequences" {
    try std.testing.expect(try fullMatch("[α-ω]+", "αβγ"));
    try std.testing.expect(!try fullMatch("[α-ω]+", "αbγ"));
    try std.testing.expect(try fullMatch(".", "日"));
    try std.testing.expect(try fullMatch(".", "😀"));
    try std.testing.expect(!try fullMatch(".", "\n"));
    try std.testing.expect(try fullMatch("[^a]", "€"));
    try std.testing.expect(!try fullMatch("[^a]", "\xed\xa0\x80")); // a surrogate is not UTF-8
    try std.testing.expect(!try fullMatch(".", "\xff"));
    try std.testing.expect(try fullMatch("[\\u0080-\\u{10FFFF}]", "\u{10FFFF}"));
    try std.testing.expect(try fullMatch("[\\u0080-\\u{10FFFF}]", "\u{800}"));
    try std.testing.expect(!try fullMatch("[\\u0080-\\u{10FFFF}]", "\x7f"));
}

test "unsupported and malformed patterns name the position" {
    try expectSyntaxError("ab(c", 2);
    try expectSyntaxError("a)", 1);
    try expectSyntaxError("a(?=b)", 1);
    try expectSyntaxError("x\\bx", 1);
    try expectSyntaxError("*a", 0);
    try expectSyntaxError("[b-a]", 1);
    try expectSyntaxError("a{3,2}", 1);
    try expectSyntaxError("ab\\", 2);
    try expectSyntaxError("a^b", 1);
    try expectSyntaxError("\\p{L}", 0);
    try expectSyntaxError("[abc", 0);
}

test "deep nesting is refused, not a stack overflow" {
    var buf: [1000]u8 = undefined;
    @memset(buf[0..500], '(');
    @memset(buf[500..], ')');
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var diag: Diagnostic = .{};
    try std.testing.expectError(error.Syntax, parse(&set, &buf, .{}, &diag));
}

test "a long alternation of words is built as their trie, with the same language" {
    var set = try ExprSet.init(std.testing.allocator, .{});
    defer set.deinit();
    var diag: Diagnostic = .{};
    const pattern = "(get|get_user|get_users|set_user|a\\.b|x\\x41y|caf\xc3\xa9|q|qq|r|s|t|u|v|w|z||get)";
    const e = try parse(&set, pattern, .{}, &diag);
    const words = [_][]const u8{ "get", "get_user", "get_users", "set_user", "a.b", "xAy", "caf\xc3\xa9", "q", "qq", "", "z" };
    for (words) |w| {
        var x = e;
        for (w) |b| x = try set.deriv(x, b);
        try std.testing.expect(set.nullable(x));
    }
    for ([_][]const u8{ "ge", "get_", "get_userss", "a\\.b", "x\\x41y", "caf", "qqq", "zz" }) |w| {
        var x = e;
        for (w) |b| x = try set.deriv(x, b);
        try std.testing.expect(!set.nullable(x));
    }
    // Walking a word builds no term: every derivative is a subterm of the trie.
    const before = set.count();
    var x = e;
    for ("get_users") |b| x = try set.deriv(x, b);
    try std.testing.expectEqual(before, set.count());
    // Anything but plain text takes the general path, with the same meaning.
    const general = try parse(&set, "(get|get_user|get_users|set_user|a\\.b|x\\x41y|caf\xc3\xa9|q|qq|r|s|t|u|v|w|z||ge[t])", .{}, &diag);
    for (words) |w| {
        var y = general;
        for (w) |b| y = try set.deriv(y, b);
        try std.testing.expect(set.nullable(y));
    }
}

test "(?~X): the complement of X, inside a concatenation" {
    // Strings of a and b with no "aa", then a "c": the complement intersected by hand.
    const no_aa = "(?~(?~[ab]*)|[ab]*aa[ab]*)c";
    const words = [_][]const u8{ "c", "ac", "abac", "bbc", "aac", "baabc", "ab", "", "abca" };
    for (words) |w| {
        const expected = w.len > 0 and w[w.len - 1] == 'c' and std.mem.indexOf(u8, w[0 .. w.len - 1], "aa") == null and
            std.mem.indexOfScalar(u8, w[0 .. w.len - 1], 'c') == null;
        try std.testing.expectEqual(expected, try fullMatch(no_aa, w));
    }
    try std.testing.expect(try fullMatch("x(?~)", "xy"));
    try std.testing.expect(!try fullMatch("x(?~)", "x"));
    try expectSyntaxError("(?~a", 0);
    try std.testing.expect(try fullMatch("(?~(?~(?~(?~(?~(?~a))))))", "a"));
    try expectSyntaxError("(?~(?~(?~(?~(?~(?~(?~a)))))))", 18);
}

test "(?%C,R) and (?%C,R,S): digit runs by residue, and their errors" {
    // Multiples of 7 without leading zeros: the first digit starts the residue.
    const sevens = "0|1(?%7,0,1)|2(?%7,0,2)|3(?%7,0,3)|4(?%7,0,4)|5(?%7,0,5)|6(?%7,0,6)|7(?%7,0)|8(?%7,0,1)|9(?%7,0,2)";
    var buf: [8]u8 = undefined;
    var n: u32 = 0;
    while (n < 3000) : (n += 1) {
        const text = std.fmt.bufPrint(&buf, "{d}", .{n}) catch unreachable;
        try std.testing.expectEqual(n % 7 == 0, try fullMatch(sevens, text));
    }
    try std.testing.expect(!try fullMatch(sevens, "07"));
    try std.testing.expect(try fullMatch("(?%3,0)", ""));
    try std.testing.expect(try fullMatch("(?%3,0)", "0012"));
    try std.testing.expect(!try fullMatch("(?%3,0)", "13"));
    try std.testing.expect(try fullMatch("x(?%10,4)\\.5", "x1234.5"));
    try std.testing.expect(try fullMatch("(?%1000000,999999)", "123999999"));
    try expectSyntaxError("a(?%7)", 1);
    try expectSyntaxError("(?%0,0)", 0);
    try expectSyntaxError("(?%7,7)", 0);
    try expectSyntaxError("(?%7,1,7)", 0);
    try expectSyntaxError("(?%7,1,2,3)", 0);
    try expectSyntaxError("(?%1000001,0)", 0);
    try expectSyntaxError("(?%7,x)", 0);
    try expectSyntaxError("(?%7,1", 0);
    try expectSyntaxError("(?%7.,1)", 0);
    // With points: 12.5 reads as 125 = 19·6 + 11; 9.5 as 95 = 19·5.
    try std.testing.expect(try fullMatch("(?%.19,0)", "9.5"));
    try std.testing.expect(try fullMatch("(?%.19,0)", "0.95"));
    try std.testing.expect(try fullMatch("(?%.19,11)", "12.5"));
    try std.testing.expect(try fullMatch("(?%.19,0)", "."));
    try std.testing.expect(!try fullMatch("(?%19,0)", "9.5"));
    try std.testing.expect(try fullMatch("(?%.1,0)", "1.2.3"));
    try std.testing.expect(!try fullMatch("(?%.19,0)", "9,5"));
    // Negated: every run but the multiples (the empty run is 0, a multiple).
    try std.testing.expect(!try fullMatch("(?%!7,0)", ""));
    try std.testing.expect(!try fullMatch("(?%!7,0)", "700"));
    try std.testing.expect(try fullMatch("(?%!7,0)", "701"));
    try std.testing.expect(try fullMatch("(?%!.7,0)", "70.1"));
    try std.testing.expect(!try fullMatch("(?%!1,0)", "5"));
    try expectSyntaxError("(?%.!7,0)", 0);
}
