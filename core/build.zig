//! `zig build test` runs the core's unit tests natively; `zig build` builds both WebAssembly
//! modules into `zig-out/bin/` (the Python package build calls `wasm/build_wasm.py`, which runs
//! the same compiler with the same flags).
const std = @import("std");

pub fn build(b: *std.Build) void {
    const native = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});

    const tests = b.addTest(.{
        .root_module = b.createModule(.{
            .root_source_file = b.path("src/abi.zig"),
            .target = native,
            .optimize = optimize,
        }),
    });
    const run_tests = b.addRunArtifact(tests);
    b.step("test", "Run the core's unit tests").dependOn(&run_tests.step);

    const wasm = b.resolveTargetQuery(.{
        .cpu_arch = .wasm32,
        .os_tag = .freestanding,
        .cpu_features_add = std.Target.wasm.featureSet(&.{ .simd128, .bulk_memory }),
    });
    const variants = [_]struct { name: []const u8, mode: std.builtin.OptimizeMode }{
        .{ .name = "tokensieve", .mode = .ReleaseFast },
        .{ .name = "tokensieve_safe", .mode = .ReleaseSafe },
    };
    for (variants) |v| {
        const exe = b.addExecutable(.{
            .name = v.name,
            .root_module = b.createModule(.{
                .root_source_file = b.path("src/abi.zig"),
                .target = wasm,
                .optimize = v.mode,
                .strip = true,
            }),
        });
        exe.entry = .disabled;
        exe.rdynamic = true;
        exe.stack_size = stack_size_bytes;
        b.installArtifact(exe);
    }
}

/// The module's shadow stack; derivative recursion is bounded well inside it.
const stack_size_bytes = 8 * 1024 * 1024;
