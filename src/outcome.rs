//! The typed outcome of evaluating one (instance, prediction), and the
//! seconds its stages took. The record that holds them is `crate::record`'s.

use serde::{Deserialize, Serialize};

/// What happened to one candidate. Environment and infrastructure failures
/// are kept apart from the candidate's own failures: they say nothing about
/// the patch and are worth a rerun.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Resolved,
    Unresolved,
    EmptyPatch,
    PatchApplyFailed,
    TestsTimedOut,
    EnvironmentBuildFailed,
    InfraError,
}

impl Outcome {
    pub const ALL: [Outcome; 7] = [
        Outcome::Resolved,
        Outcome::Unresolved,
        Outcome::EmptyPatch,
        Outcome::PatchApplyFailed,
        Outcome::TestsTimedOut,
        Outcome::EnvironmentBuildFailed,
        Outcome::InfraError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Resolved => "resolved",
            Outcome::Unresolved => "unresolved",
            Outcome::EmptyPatch => "empty_patch",
            Outcome::PatchApplyFailed => "patch_apply_failed",
            Outcome::TestsTimedOut => "tests_timed_out",
            Outcome::EnvironmentBuildFailed => "environment_build_failed",
            Outcome::InfraError => "infra_error",
        }
    }

    /// Whether the outcome is the candidate's to answer for. Environment and
    /// infrastructure failures are not: they depend on the machine (a daemon
    /// restarted, an interpreter installed), so they are left out of pass@k's
    /// n, counted apart by validate, and never reused on rerun.
    pub fn counts_for_model(self) -> bool {
        !matches!(self, Outcome::InfraError | Outcome::EnvironmentBuildFailed)
    }

    /// Whether the reference harness writes a report.json for this outcome
    /// (apply failures and timeouts have none there, so tooling counts them
    /// as errors).
    pub fn has_reference_report(self) -> bool {
        matches!(self, Outcome::Resolved | Outcome::Unresolved)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub checkout: f64,
    pub env: f64,
    pub apply: f64,
    pub tests: f64,
    pub total: f64,
    /// Docker: the test container's own phases (within `tests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerTimings>,
}

/// Seconds of each phase of a test container. Its removal is not here: it
/// happens after the result is recorded, off the critical path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerTimings {
    /// Tar of the candidate's changed files and the eval script.
    pub archive: f64,
    pub create: f64,
    pub upload: f64,
    pub attach: f64,
    pub start: f64,
    /// Start to the end of the output stream: the script's run, its output
    /// read as it is written (there is no separate log read).
    pub run: f64,
}
