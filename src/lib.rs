//! patchgrade: grades SWE-bench-style candidate patches by running them.
//!
//! Data flow (see ARCHITECTURE.md): dataset + predictions + specs -> engine
//! -> runner (repo checkout, patch apply, backend runs the eval script) ->
//! parse -> grade -> audit -> rundir; analysis and passk read run folders
//! back. Parsing, grading and statistics are plain sync code; async is only
//! used to orchestrate processes, containers and timers. The command line
//! (clap arguments, commands, exit codes) is the binary's, not the library's.

pub mod analysis;
pub mod audit;
pub mod backend;
pub mod conda;
pub mod dataset;
pub mod debian;
pub mod engine;
pub mod exit;
pub mod grade;
pub mod heap;
pub mod impossible;
pub mod key;
pub mod metrics;
pub mod outcome;
pub mod parse;
pub mod passk;
pub mod patch;
pub mod perf;
pub mod python;
pub mod record;
pub mod repo;
pub mod report;
pub mod review;
pub mod rundir;
pub mod runner;
pub mod script;
pub mod serve;
pub mod settings;
pub mod spec;
pub mod table;
pub mod task_repo;
#[cfg(test)]
mod test_support;
pub mod toolchain;

/// The version written into records and summaries.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
