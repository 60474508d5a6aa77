//! Efficiency measurement (issue 13).

pub mod stats;
pub mod workload;
