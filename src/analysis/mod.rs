//! Analyses over finished evaluations, as library code (the commands print
//! and write what they return): instance validation, re-auditing a run, the
//! confirmation run of a pass, and best-of-n selection. Test statuses come
//! from the records, through [`crate::rundir`].

pub mod confirm;
pub mod reaudit;
pub mod regrade;
pub mod select;
pub mod validate;
