//! Distinct items (JSON Schema `uniqueItems` over scalars): the canonical value of a JSON
//! scalar's text, and the set of values an array already holds.
//!
//! The parser (`earley.zig`) calls this where an item of a *distinct list* completes: the
//! grammar IR marks a nonterminal U whose rules end in the item (`U → X`, `U → U "," X`), and
//! the item X must differ, as a JSON value, from every earlier X of the same U. Equal means
//! equal after decoding, not equal text:
//! - strings: after unescaping (`"a"`, `"\u0061"` and `"\u0041"`-vs-`"A"` alike), compared as
//!   the UTF-8 of their code points (a surrogate pair is one code point; a lone surrogate is
//!   its own 3-byte sequence, distinct from every character);
//! - numbers: as exact decimals (`1`, `1.0`, `1e0`, `10e-1`, `-0` and `0` are equal), never
//!   through binary floating point;
//! - `true`, `false`, `null`: themselves; values of different kinds are never equal.
//!
//! A canonical value is one byte of kind and the rest: `s` + UTF-8 for strings; `n` + sign +
//! significant digits + `e` + decimal exponent for numbers (`n0` for zero); `t`, `f`, `z`.
//! Two texts are equal JSON scalars exactly when their canonical values are equal bytes.
//!
//! Bounded: an item's text may have at most `item_bytes_max` bytes and the earlier items of
//! one array at most `span_bytes_max` (then `error.LimitExceeded`, kind `distinct_items`);
//! callers charge the bytes they hand in as parser work. Exponents with more than 15 digits
//! are refused the same way (an exact comparison of them would need big integers).

const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const regex = @import("regex.zig");
const limit_error = @import("limits.zig");

/// Bytes of one item's text (its whitespace included) that a check reads.
pub const item_bytes_max: u32 = 4096;
/// Bytes of one array's earlier items (with their commas and whitespace) that a check reads.
pub const span_bytes_max: u32 = 64 * 1024;
const exponent_digits_max = 15;

pub const Error = error{ OutOfMemory, LimitExceeded };

fn isSpace(b: u8) bool {
    return b == ' ' or b == '\t' or b == '\n' or b == '\r';
}

/// The length of the JSON scalar at the start of `text` (no leading whitespace), or null
/// when no scalar starts there. Strings end at their closing quote; numbers and literals at
/// the first byte that cannot continue them.
fn scalarLength(text: []const u8) ?usize {
    if (text.len == 0) return null;
    if (text[0] == '"') {
        var i: usize = 1;
        while (i < text.len) : (i += 1) {
            if (text[i] == '\\') {
                i += 1;
            } else if (text[i] == '"') {
                return i + 1;
            }
        }
        return null;
    }
    var i: usize = 0;
    while (i < text.len) : (i += 1) {
        switch (text[i]) {
            '0'...'9', '-', '+', '.', 'e', 'E', 'a'...'d', 'f'...'z' => {},
            else => break,
        }
    }
    return if (i == 0) null else i;
}

/// Appends the canonical value of the JSON scalar `text` (exactly one, no whitespace around
/// it) to `out`; false when `text` is not a JSON scalar.
pub fn appendCanonical(gpa: Allocator, text: []const u8, out: *std.ArrayList(u8)) Error!bool {
    if (text.len == 0) return false;
    if (text[0] == '"') return appendString(gpa, text, out);
    if (std.mem.eql(u8, text, "true")) return appendKind(gpa, 't', out);
    if (std.mem.eql(u8, text, "false")) return appendKind(gpa, 'f', out);
    if (std.mem.eql(u8, text, "null")) return appendKind(gpa, 'z', out);
    return appendNumber(gpa, text, out);
}

fn appendKind(gpa: Allocator, kind: u8, out: *std.ArrayList(u8)) Error!bool {
    try out.append(gpa, kind);
    return true;
}

fn hexValue(b: u8) ?u21 {
    return switch (b) {
        '0'...'9' => b - '0',
        'a'...'f' => b - 'a' + 10,
        'A'...'F' => b - 'A' + 10,
        else => null,
    };
}

fn hex4(text: []const u8) ?u21 {
    if (text.len < 4) return null;
    var v: u21 = 0;
    for (text[0..4]) |b| v = v * 16 + (hexValue(b) orelse return null);
    return v;
}

/// Code point `c` as UTF-8 (a surrogate as its own 3-byte sequence).
fn appendCodePoint(gpa: Allocator, c: u21, out: *std.ArrayList(u8)) Error!void {
    var buf: [4]u8 = undefined;
    const n: usize = if (c < 0x80) 1 else if (c < 0x800) 2 else if (c < 0x10000) 3 else 4;
    switch (n) {
        1 => buf[0] = @intCast(c),
        2 => {
            buf[0] = @intCast(0xC0 | (c >> 6));
            buf[1] = @intCast(0x80 | (c & 0x3F));
        },
        3 => {
            buf[0] = @intCast(0xE0 | (c >> 12));
            buf[1] = @intCast(0x80 | ((c >> 6) & 0x3F));
            buf[2] = @intCast(0x80 | (c & 0x3F));
        },
        else => {
            buf[0] = @intCast(0xF0 | (c >> 18));
            buf[1] = @intCast(0x80 | ((c >> 12) & 0x3F));
            buf[2] = @intCast(0x80 | ((c >> 6) & 0x3F));
            buf[3] = @intCast(0x80 | (c & 0x3F));
        },
    }
    try out.appendSlice(gpa, buf[0..n]);
}

fn appendString(gpa: Allocator, text: []const u8, out: *std.ArrayList(u8)) Error!bool {
    if (text.len < 2 or text[text.len - 1] != '"') return false;
    try out.append(gpa, 's');
    const body = text[1 .. text.len - 1];
    var i: usize = 0;
    while (i < body.len) {
        const b = body[i];
        if (b != '\\') {
            if (b == '"') return false;
            try out.append(gpa, b);
            i += 1;
            continue;
        }
        if (i + 1 >= body.len) return false;
        const e = body[i + 1];
        i += 2;
        const simple: ?u8 = switch (e) {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => 0x08,
            'f' => 0x0C,
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            else => null,
        };
        if (simple) |s| {
            try out.append(gpa, s);
            continue;
        }
        if (e != 'u') return false;
        var c = hex4(body[i..]) orelse return false;
        i += 4;
        // A high surrogate followed by a low one is one character.
        if (c >= 0xD800 and c < 0xDC00 and i + 6 <= body.len and body[i] == '\\' and body[i + 1] == 'u') {
            if (hex4(body[i + 2 ..])) |low| if (low >= 0xDC00 and low < 0xE000) {
                c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            };
        }
        try appendCodePoint(gpa, c, out);
    }
    return true;
}

/// A JSON number (`-? int frac? exp?`, leading zeros tolerated) as sign, significant digits
/// and the exponent of the last of them.
fn appendNumber(gpa: Allocator, text: []const u8, out: *std.ArrayList(u8)) Error!bool {
    var i: usize = 0;
    const negative = text[0] == '-';
    if (negative) i += 1;
    const digits_start = out.items.len + 2; // after `n` and the sign
    try out.append(gpa, 'n');
    try out.append(gpa, if (negative) '-' else '+');
    var exponent: i64 = 0;
    var any_digit = false;
    var seen_point = false;
    while (i < text.len) : (i += 1) {
        const b = text[i];
        if (b >= '0' and b <= '9') {
            any_digit = true;
            if (seen_point) exponent -= 1;
            // Leading zeros are no digits of the value.
            if (b != '0' or out.items.len > digits_start) try out.append(gpa, b);
        } else if (b == '.' and !seen_point) {
            seen_point = true;
        } else break;
    }
    if (!any_digit) return false;
    if (i < text.len) {
        if (text[i] != 'e' and text[i] != 'E') return false;
        i += 1;
        var exp_negative = false;
        if (i < text.len and (text[i] == '+' or text[i] == '-')) {
            exp_negative = text[i] == '-';
            i += 1;
        }
        if (i >= text.len) return false;
        var value: i64 = 0;
        var count: usize = 0;
        while (i < text.len) : (i += 1) {
            const b = text[i];
            if (b < '0' or b > '9') return false;
            if (value == 0 and b == '0') continue; // leading zeros of the exponent
            count += 1;
            if (count > exponent_digits_max) return limit_error.exceeded(.distinct_items);
            value = value * 10 + (b - '0');
        }
        exponent += if (exp_negative) -value else value;
    }
    // Digits before the point that were leading zeros were dropped without moving the
    // exponent; fraction digits all moved it. Now drop trailing zeros into the exponent.
    while (out.items.len > digits_start and out.items[out.items.len - 1] == '0') {
        out.items.len -= 1;
        exponent += 1;
    }
    if (out.items.len == digits_start) {
        // Zero, whatever its sign and spelling.
        out.items.len = digits_start - 1;
        return true;
    }
    var buf: [24]u8 = undefined;
    const shown = std.fmt.bufPrint(&buf, "e{d}", .{exponent}) catch unreachable;
    try out.appendSlice(gpa, shown);
    return true;
}

/// The values of one array's earlier items, read from their text (`fill`), with a one-entry
/// memo: the matcher asks about the same array many times in one call (every token that
/// would close the item in progress), and the earlier items do not change within it.
pub const ValueSet = struct {
    bytes: std.ArrayList(u8) = .empty,
    entries: std.ArrayList(Entry) = .empty,
    /// First entry with a hash, by hash; entries with the same hash chain through `next`.
    by_hash: regex.IntMap(u64, u32) = .empty,
    /// What the set was filled from (`fill`'s key); null: nothing.
    key: ?[4]u32 = null,
    /// The text was a list of JSON scalars (else nothing is known about it).
    valid: bool = false,
    /// Scratch for the value being checked.
    scratch: std.ArrayList(u8) = .empty,

    const Entry = struct { start: u32, len: u32, next: u32 };
    const no_entry = std.math.maxInt(u32);

    pub fn deinit(self: *ValueSet, gpa: Allocator) void {
        self.bytes.deinit(gpa);
        self.entries.deinit(gpa);
        self.by_hash.deinit(gpa);
        self.scratch.deinit(gpa);
        self.* = undefined;
    }

    pub fn forget(self: *ValueSet) void {
        self.key = null;
    }

    fn clear(self: *ValueSet) void {
        self.bytes.clearRetainingCapacity();
        self.entries.clearRetainingCapacity();
        self.by_hash.clearRetainingCapacity();
        self.valid = false;
        self.key = null;
    }

    /// Reads `text` — items separated by commas, each a JSON scalar with whitespace around
    /// it, maybe a comma last — into the set, unless it was filled from `key` already. A text
    /// of another shape leaves the set `valid == false`.
    pub fn fill(self: *ValueSet, gpa: Allocator, key: [4]u32, text: []const u8) Error!void {
        if (self.key) |k| if (std.mem.eql(u32, &k, &key)) return;
        self.clear();
        if (text.len > span_bytes_max) return limit_error.exceeded(.distinct_items);
        var i: usize = 0;
        while (true) {
            while (i < text.len and isSpace(text[i])) i += 1;
            if (i == text.len) break;
            const len = scalarLength(text[i..]) orelse return;
            const start: u32 = @intCast(self.bytes.items.len);
            if (!try appendCanonical(gpa, text[i..][0..len], &self.bytes)) return;
            try self.insert(gpa, start);
            i += len;
            while (i < text.len and isSpace(text[i])) i += 1;
            if (i == text.len) break;
            if (text[i] != ',') return;
            i += 1;
        }
        self.valid = true;
        self.key = key;
    }

    /// Adds the value `bytes[start..]` (duplicates are kept once).
    fn insert(self: *ValueSet, gpa: Allocator, start: u32) Error!void {
        const value = self.bytes.items[start..];
        const hash = regex.hashBytes(value, 0);
        if (self.find(hash, value)) {
            self.bytes.items.len = start;
            return;
        }
        const index: u32 = @intCast(self.entries.items.len);
        const gop = try self.by_hash.getOrPut(gpa, hash);
        const next = if (gop.found_existing) gop.value_ptr.* else no_entry;
        gop.value_ptr.* = index;
        try self.entries.append(gpa, .{ .start = start, .len = @intCast(value.len), .next = next });
    }

    fn find(self: *const ValueSet, hash: u64, value: []const u8) bool {
        var e = self.by_hash.get(hash) orelse return false;
        while (e != no_entry) {
            const entry = self.entries.items[e];
            if (regex.bytesEqual(self.bytes.items[entry.start..][0..entry.len], value)) return true;
            e = entry.next;
        }
        return false;
    }

    /// Is the item `text` (a JSON scalar with whitespace around it) equal to a value of the
    /// set? False when the set or the item is not made of JSON scalars (nothing is known).
    pub fn holds(self: *ValueSet, gpa: Allocator, text: []const u8) Error!bool {
        if (!self.valid or self.entries.items.len == 0) return false;
        if (text.len > item_bytes_max) return limit_error.exceeded(.distinct_items);
        var a: usize = 0;
        var b: usize = text.len;
        while (a < b and isSpace(text[a])) a += 1;
        while (b > a and isSpace(text[b - 1])) b -= 1;
        self.scratch.clearRetainingCapacity();
        if (!try appendCanonical(gpa, text[a..b], &self.scratch)) return false;
        return self.find(regex.hashBytes(self.scratch.items, 0), self.scratch.items);
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

fn canonicalOf(text: []const u8, out: *std.ArrayList(u8)) ![]const u8 {
    out.clearRetainingCapacity();
    try std.testing.expect(try appendCanonical(std.testing.allocator, text, out));
    return out.items;
}

test "distinct: equal JSON values have equal canonical forms, others differ" {
    const gpa = std.testing.allocator;
    var a: std.ArrayList(u8) = .empty;
    defer a.deinit(gpa);
    var b: std.ArrayList(u8) = .empty;
    defer b.deinit(gpa);
    const equal = [_][2][]const u8{
        .{ "\"a\"", "\"\\u0061\"" },
        .{ "\"\\u00e9\"", "\"\xc3\xa9\"" },
        .{ "\"\\u00E9\"", "\"\\u00e9\"" },
        .{ "\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"" },
        .{ "\"\\/\\n\"", "\"/\\u000a\"" },
        .{ "1", "1.0" },
        .{ "1", "1e0" },
        .{ "1", "10e-1" },
        .{ "1", "0.1E+1" },
        .{ "100", "1e2" },
        .{ "-0", "0" },
        .{ "0.0", "0e5" },
        .{ "-2.50", "-25e-1" },
        .{ "0.001", "1e-3" },
        .{ "true", "true" },
    };
    for (equal) |pair| {
        const x = try canonicalOf(pair[0], &a);
        const y = try canonicalOf(pair[1], &b);
        try std.testing.expectEqualStrings(x, y);
    }
    const different = [_][2][]const u8{
        .{ "\"a\"", "\"A\"" },
        .{ "\"a\"", "\"a \"" },
        .{ "1", "\"1\"" },
        .{ "1", "-1" },
        .{ "1", "1.01" },
        .{ "10", "1" },
        .{ "0.1", "0.01" },
        .{ "true", "false" },
        .{ "null", "\"null\"" },
        .{ "0", "false" },
        .{ "\"\\ud800\"", "\"\"" },
    };
    for (different) |pair| {
        const x = try canonicalOf(pair[0], &a);
        const y = try canonicalOf(pair[1], &b);
        try std.testing.expect(!std.mem.eql(u8, x, y));
    }
}

test "distinct: a value set holds the items of a list's text" {
    const gpa = std.testing.allocator;
    var set: ValueSet = .{};
    defer set.deinit(gpa);
    try set.fill(gpa, .{ 1, 2, 3, 4 }, " \"a\" ,1.50,\n true , \"x,y\" ,");
    try std.testing.expect(set.valid);
    try std.testing.expect(try set.holds(gpa, " \"\\u0061\""));
    try std.testing.expect(try set.holds(gpa, "15e-1 "));
    try std.testing.expect(try set.holds(gpa, "true"));
    try std.testing.expect(try set.holds(gpa, "\"x,y\""));
    try std.testing.expect(!try set.holds(gpa, "\"x\""));
    try std.testing.expect(!try set.holds(gpa, "false"));
    try std.testing.expect(!try set.holds(gpa, "1.5001"));
    // The memo: the same key is not read again, another key is.
    try set.fill(gpa, .{ 1, 2, 3, 4 }, "");
    try std.testing.expect(try set.holds(gpa, "true"));
    try set.fill(gpa, .{ 1, 2, 3, 5 }, "");
    try std.testing.expect(!try set.holds(gpa, "true"));
    // Not a list of scalars: nothing is known, so nothing is held.
    try set.fill(gpa, .{ 9, 9, 9, 9 }, "{\"a\": 1}, 2,");
    try std.testing.expect(!set.valid);
    try std.testing.expect(!try set.holds(gpa, "2"));
    // Over the bounds: a limit.
    const long: [span_bytes_max + 1]u8 = @splat(' ');
    try std.testing.expectError(error.LimitExceeded, set.fill(gpa, .{ 7, 7, 7, 7 }, &long));
    try std.testing.expectEqual(limit_error.Kind.distinct_items, limit_error.hit);
}
