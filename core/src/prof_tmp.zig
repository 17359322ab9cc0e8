const std = @import("std");
const matcher = @import("matcher.zig");
const earley = @import("earley.zig");

fn nowNs() u64 {
    var ts: std.c.timespec = undefined;
    _ = std.c.clock_gettime(.MONOTONIC, &ts);
    return @as(u64, @intCast(ts.sec)) * 1_000_000_000 + @as(u64, @intCast(ts.nsec));
}

fn run(name: []const u8, comptime file: []const u8) !void {
    const gpa = std.heap.c_allocator;
    const data align(4) = @embedFile(file).*;
    const words: []const u32 = std.mem.bytesAsSlice(u32, &data);
    var i: u32 = 0;
    while (i < 3) : (i += 1) {
        const t0 = nowNs();
        var diag: earley.CompileDiagnostic = .{};
        const g = try matcher.Grammar.create(gpa, words, .{ .fuel_compile_max = 1 << 40 }, &diag);
        const t1 = nowNs();
        std.debug.print("{s}: compile {d} us, exprs {d}, words {d}, classes {d}\n", .{ name, (t1 - t0) / 1000, g.exprs.count(), g.exprs.words.items.len, g.lexer.class_count });
        g.release(gpa);
    }
}

pub fn main() !void {
    try run("regex", "prof_regex.bin");
    try run("choice", "prof_choice.bin");
}
