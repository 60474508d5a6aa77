//! The documented exit codes of the patchgrade command (README, "Exit
//! codes"). The binary picks them; they live in the library so that tests
//! (and the engine's second Ctrl-C) name them instead of repeating numbers.

/// The command completed (whatever the verdicts).
pub const OK: i32 = 0;
/// Internal error: a bug (a panic, a broken invariant).
pub const INTERNAL: i32 = 1;
/// Bad input: arguments, dataset, predictions, specs or run folders.
pub const BAD_INPUT: i32 = 2;
/// Infrastructure failure: reports could not be written, no backend.
pub const INFRA: i32 = 3;
/// Completed, but some results are inconclusive: an audit check could not
/// run, or evaluations ended in environment or infrastructure failures
/// (after the retry). Everything was written.
pub const INCONCLUSIVE: i32 = 4;
/// Interrupted (Ctrl-C; 128 + SIGINT); finished results are kept.
pub const INTERRUPTED: i32 = 130;
