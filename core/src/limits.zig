//! Which limit stopped the work: every `error.LimitExceeded` site records its kind here first.
//!
//! Zig error values carry no payload, and the module is single threaded, so the site that
//! runs out sets `hit` and returns the plain error; the boundary reads `hit` when it turns the
//! error into a status, and a matcher keeps it with its sticky failure. That is how a host
//! learns *which* `Limits` field to raise without parsing message text.

/// Append-only: a kind keeps its number (the ABI manifest lists them).
pub const Kind = enum(i32) {
    none = 0,
    /// Lexer DFA states a grammar may build (`state_count_max`).
    lexer_states = 1,
    /// Derivative and emptiness work of one call (`fuel_step_max`).
    step_fuel = 2,
    /// Expression terms a grammar may hold (`expr_count_max`).
    expressions = 3,
    /// Earley items in one parser row (`row_item_count_max`).
    parser_row_items = 4,
    /// Earley items built by one call (`step_item_count_max`).
    parser_step_items = 5,
    /// Tokens a matcher may hold in its history (`token_history_max`).
    token_history = 6,
    /// Compiling a grammar needed more work than `fuel_compile_max`.
    compile_fuel = 7,
    /// The grammar text itself is too large (nesting, counted repetition, class ranges).
    grammar_size = 8,
    /// The vocabulary is too large for the trie.
    vocabulary = 9,
    /// The instance has issued all its handles.
    handles = 10,
    /// Nested derivatives went deeper than the derivative stack allows.
    derivative_depth = 11,
    /// An input of one call is too large (bytes to heal or validate).
    input_size = 12,
    /// The earlier items of an array with distinct items (`uniqueItems`), or one item, are
    /// longer than a check reads (`distinct.zig`: 64 KiB, 4 KiB), or a number's exponent
    /// has more than 15 digits.
    distinct_items = 13,
};

pub var hit: Kind = .none;

/// Records `kind` and returns the error, for `return limits.exceeded(.x);`.
pub fn exceeded(kind: Kind) error{LimitExceeded} {
    hit = kind;
    return error.LimitExceeded;
}
