//! patchgrade: grades SWE-bench-style candidate patches by running them.
//!
//! Data flow (see ARCHITECTURE.md): dataset + predictions + specs -> runner
//! (repo checkout, patch apply, backend runs the eval script) -> parse -> grade
//! -> report. Parsing and grading are plain sync code; async is only used to
//! orchestrate processes, containers and timers.

pub mod audit;
pub mod backend;
pub mod cli;
pub mod dataset;
pub mod grade;
pub mod image;
pub mod metrics;
pub mod outcome;
pub mod parse;
pub mod passk;
pub mod patch;
pub mod plot;
pub mod reaudit;
pub mod repo;
pub mod report;
pub mod review;
pub mod runner;
pub mod script;
pub mod select;
pub mod spec;
pub mod validate;
