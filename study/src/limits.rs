//! Bounds on what one study may ask for. A study comes from a browser, a
//! file or an import: before anything is built from it (a grid, a
//! sample, a parser's tree) its sizes are checked against these
//! ([`crate::within_limits`]), so a request of a few bytes can never ask
//! for gigabytes or seconds.

/// Longest study name, in characters.
pub const MAX_NAME: usize = 200;
/// Most settings varied, fixed or given for the baseline (each).
pub const MAX_SETTINGS: usize = 64;
/// Most values one setting may take in a study (a list, a range's steps,
/// a decimal range's points).
pub const MAX_AXIS_VALUES: u64 = 10_000;
/// Most constraints.
pub const MAX_CONSTRAINTS: usize = 32;
/// Most objectives and bounds together.
pub const MAX_TARGETS: usize = 16;
/// Most trials a budget may allow.
pub const MAX_TRIALS: u32 = 100_000;
/// Most pairs a pick is confirmed with.
pub const MAX_CONFIRM_PAIRS: u32 = 20;
/// Most machines named.
pub const MAX_MACHINES: usize = 64;
