//! The token trie, laid flat in depth-first order.
//!
//! Built once per tokenizer from the token byte strings and shared, immutable, by every grammar
//! and matcher over that tokenizer. A mask is computed by walking it against an automaton: a
//! node is visited only if the automaton survives its byte, and a refused byte skips the node's
//! whole subtree with one addition (`subtree_size`), so sparse masks cost little.
//!
//! Layout: one 8-byte `Node` per trie edge, in DFS pre-order, root omitted. A node knows
//! - its byte and the token that ends here (if none, the dummy id `token_count`: the walk then
//!   sets a bit just past the vocabulary, which keeps the loop free of a branch);
//! - `subtree_size`, the nodes in its subtree including itself (1 for a leaf);
//! - `pop`, how many levels shallower the next node after its subtree sits than itself: after
//!   skipping or finishing a subtree, the walk drops that many automaton states from its stack.
//! Tokens with the same bytes (it happens in real vocabularies) become sibling leaves.
//! Special tokens and unused ids are not in the trie: the matcher handles them by id.
//!
//! About 2 nodes per token on real vocabularies (1.9 on Llama-3).

const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

pub const Node = packed struct(u64) {
    byte: u8,
    token: u24,
    subtree_size: u22,
    pop: u10,
};

comptime {
    assert(@sizeOf(Node) == 8);
}

/// Ids are 24 bits and `token_count` itself is the dummy id of nodes without a token.
pub const token_count_max: u32 = std.math.maxInt(u24) - 1;
pub const node_count_max: u32 = std.math.maxInt(u22);
/// `pop` is 10 bits, so a token may be at most this long.
pub const token_length_max: u32 = 1023;

pub const TokenKind = enum(u8) {
    text = 0,
    special = 1,
    unused = 2,
};

pub const Error = error{ OutOfMemory, InvalidTokens, LimitExceeded };

pub const Trie = struct {
    nodes: []Node,
    /// Length of the longest token (the depth of the walk's state stack).
    depth_max: u32,
    token_count: u32,

    pub fn deinit(self: *Trie, gpa: Allocator) void {
        gpa.free(self.nodes);
        self.* = undefined;
    }

    /// Builds the trie of the `text` tokens. `offsets` has `token_count + 1` entries into `blob`.
    pub fn build(
        gpa: Allocator,
        blob: []const u8,
        offsets: []const u32,
        kinds: []const TokenKind,
    ) Error!Trie {
        if (offsets.len != kinds.len + 1) return error.InvalidTokens;
        const token_count: u32 = @intCast(kinds.len);
        if (token_count > token_count_max) return error.LimitExceeded;
        for (offsets[0 .. offsets.len - 1], offsets[1..]) |a, b| {
            if (a > b or b > blob.len) return error.InvalidTokens;
            if (b - a > token_length_max) return error.LimitExceeded;
        }
        // Sort the text tokens by their bytes.
        var order: std.ArrayList(u32) = .empty;
        defer order.deinit(gpa);
        for (kinds, 0..) |kind, id| {
            if (kind == .text and offsets[id + 1] > offsets[id]) try order.append(gpa, @intCast(id));
        }
        const Sorter = struct {
            blob: []const u8,
            offsets: []const u32,
            fn bytesOf(s: @This(), id: u32) []const u8 {
                return s.blob[s.offsets[id]..s.offsets[id + 1]];
            }
            fn lessThan(s: @This(), a: u32, b: u32) bool {
                return switch (std.mem.order(u8, s.bytesOf(a), s.bytesOf(b))) {
                    .lt => true,
                    .gt => false,
                    .eq => a < b,
                };
            }
        };
        const sorter: Sorter = .{ .blob = blob, .offsets = offsets };
        std.mem.sort(u32, order.items, sorter, Sorter.lessThan);

        var nodes: std.ArrayList(Node) = .empty;
        errdefer nodes.deinit(gpa);
        var depths: std.ArrayList(u16) = .empty;
        defer depths.deinit(gpa);
        // path[d] = index of the open node at depth d+1.
        var path: std.ArrayList(u32) = .empty;
        defer path.deinit(gpa);
        var previous: []const u8 = "";
        var depth_max: u32 = 0;
        for (order.items) |id| {
            const bytes = sorter.bytesOf(id);
            depth_max = @max(depth_max, @as(u32, @intCast(bytes.len)));
            var common = std.mem.indexOfDiff(u8, previous, bytes) orelse bytes.len;
            // A duplicate gets its own leaf beside the first one.
            if (common == bytes.len) common = bytes.len - 1;
            while (path.items.len > common) closeNode(nodes.items, path.pop().?);
            for (bytes[common..], common..) |b, d| {
                if (nodes.items.len >= node_count_max) return error.LimitExceeded;
                try path.append(gpa, @intCast(nodes.items.len));
                try depths.append(gpa, @intCast(d + 1));
                try nodes.append(gpa, .{ .byte = b, .token = @intCast(token_count), .subtree_size = 0, .pop = 0 });
            }
            nodes.items[path.items[path.items.len - 1]].token = @intCast(id);
            previous = bytes;
        }
        while (path.pop()) |i| closeNode(nodes.items, i);
        // pop = depth(node) - depth(first node after its subtree); the end counts as depth 1.
        for (nodes.items, 0..) |*node, i| {
            const after = i + node.subtree_size;
            const next_depth: u16 = if (after < nodes.items.len) depths.items[after] else 1;
            assert(depths.items[i] >= next_depth);
            node.pop = @intCast(depths.items[i] - next_depth);
        }
        return .{
            .nodes = try nodes.toOwnedSlice(gpa),
            .depth_max = depth_max,
            .token_count = token_count,
        };
    }

    /// The node reached by the path `bytes` from the root, or null when no token starts so.
    pub fn find(self: *const Trie, bytes: []const u8) ?u32 {
        if (bytes.len == 0) return null;
        var p: usize = 0;
        var end: usize = self.nodes.len;
        for (bytes, 0..) |b, i| {
            while (p < end and self.nodes[p].byte != b) p += self.nodes[p].subtree_size;
            if (p >= end) return null;
            if (i + 1 == bytes.len) return @intCast(p);
            end = p + self.nodes[p].subtree_size;
            p += 1;
        }
        unreachable;
    }

    fn closeNode(nodes: []Node, i: u32) void {
        nodes[i].subtree_size = @intCast(nodes.len - i);
    }
};

// ---------------------------------------------------------------------------------------------
// Tests

const TestVocab = struct {
    blob: std.ArrayList(u8) = .empty,
    offsets: std.ArrayList(u32) = .empty,
    kinds: std.ArrayList(TokenKind) = .empty,

    fn init(gpa: Allocator, tokens: []const []const u8) !TestVocab {
        var v: TestVocab = .{};
        try v.offsets.append(gpa, 0);
        for (tokens) |t| {
            try v.blob.appendSlice(gpa, t);
            try v.offsets.append(gpa, @intCast(v.blob.items.len));
            try v.kinds.append(gpa, .text);
        }
        return v;
    }

    fn deinit(v: *TestVocab, gpa: Allocator) void {
        v.blob.deinit(gpa);
        v.offsets.deinit(gpa);
        v.kinds.deinit(gpa);
    }
};

/// Recovers (token, bytes) from the flat layout by replaying the walk that accepts everything.
fn collectTokens(gpa: Allocator, trie: Trie, out: *std.StringHashMapUnmanaged(u32)) !void {
    var prefix: std.ArrayList(u8) = .empty;
    defer prefix.deinit(gpa);
    var p: usize = 0;
    while (p < trie.nodes.len) {
        const node = trie.nodes[p];
        try prefix.append(gpa, node.byte);
        if (node.token != trie.token_count) {
            const gop = try out.getOrPut(gpa, prefix.items);
            if (!gop.found_existing) gop.key_ptr.* = try gpa.dupe(u8, prefix.items);
            gop.value_ptr.* = node.token;
        }
        if (node.subtree_size > 1) {
            p += 1;
        } else {
            p += 1;
            prefix.shrinkRetainingCapacity(prefix.items.len - 1 - node.pop);
        }
    }
}

test "flat trie holds every token once, in DFS order" {
    const gpa = std.testing.allocator;
    const tokens = [_][]const u8{ "a", "ab", "abc", "b", "ba", "abd", "c", "ab" };
    var v = try TestVocab.init(gpa, &tokens);
    defer v.deinit(gpa);
    var trie = try Trie.build(gpa, v.blob.items, v.offsets.items, v.kinds.items);
    defer trie.deinit(gpa);
    try std.testing.expectEqual(@as(u32, 3), trie.depth_max);
    // a, ab, ab(dup), abc, abd, b, ba, c
    try std.testing.expectEqual(@as(usize, 8), trie.nodes.len);
    try std.testing.expectEqual(@as(u22, 5), trie.nodes[0].subtree_size);
    var seen: std.StringHashMapUnmanaged(u32) = .empty;
    defer {
        var it = seen.keyIterator();
        while (it.next()) |k| gpa.free(k.*);
        seen.deinit(gpa);
    }
    try collectTokens(gpa, trie, &seen);
    for (tokens, 0..) |t, id| {
        if (id == 1) continue; // "ab" has two ids; the map keeps the last
        try std.testing.expectEqual(@as(u32, @intCast(id)), seen.get(t).?);
    }
}

test "find follows a path of bytes" {
    const gpa = std.testing.allocator;
    const tokens = [_][]const u8{ "a", "ab", "abc", "b", "ba" };
    var v = try TestVocab.init(gpa, &tokens);
    defer v.deinit(gpa);
    var trie = try Trie.build(gpa, v.blob.items, v.offsets.items, v.kinds.items);
    defer trie.deinit(gpa);
    try std.testing.expectEqual(@as(u24, 2), trie.nodes[trie.find("abc").?].token);
    try std.testing.expectEqual(@as(u24, 4), trie.nodes[trie.find("ba").?].token);
    try std.testing.expectEqual(@as(?u32, null), trie.find("ac"));
    try std.testing.expectEqual(@as(?u32, null), trie.find("abcd"));
    try std.testing.expectEqual(@as(u22, 3), trie.nodes[trie.find("a").?].subtree_size);
}

test "bad token tables are refused" {
    const gpa = std.testing.allocator;
    const kinds = [_]TokenKind{ .text, .text };
    try std.testing.expectError(error.InvalidTokens, Trie.build(gpa, "abc", &.{ 0, 2 }, &kinds));
    try std.testing.expectError(error.InvalidTokens, Trie.build(gpa, "abc", &.{ 0, 2, 9 }, &kinds));
    try std.testing.expectError(error.InvalidTokens, Trie.build(gpa, "abc", &.{ 2, 1, 3 }, &kinds));
}
