//! The typed outcome of evaluating one (instance, prediction), and the record
//! patchgrade keeps of it.

use serde::{Deserialize, Deserializer, Serialize};

use crate::audit::{Audit, Verdict};
use crate::grade::{Grade, Ungradable};
use crate::parse::StatusMap;
use crate::patch::ApplyStrategy;
use crate::script::dataset::ScriptUsed;

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

/// patchgrade's own record of one evaluation (`patchgrade.json`, and the
/// `patchgrade` key of report.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub instance_id: String,
    pub model_name_or_path: String,
    /// Which sample of this model for this instance, when there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_id: Option<String>,
    /// Set when this sample's patch was identical to another sample's and
    /// that sample's evaluation was reused (its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluated_as: Option<String>,
    pub outcome: Outcome,
    /// Why, in words, for every outcome but a clean grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Inputs that produced this result; a rerun reuses it only on a match.
    pub cache_key: String,
    pub patch_sha256: Option<String>,
    pub spec_hash: Option<String>,
    /// Set when the tests ran the instance's own `eval_script`
    /// (`--eval-script dataset`); absent: the spec's script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_script: Option<ScriptUsed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_strategy: Option<ApplyStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<Grade>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ungradable: Option<Ungradable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_exit_code: Option<i32>,
    /// Status of every test in the log, when the tests ran and the log
    /// parsed (records of 0.1.0 have none: their log is parsed again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statuses: Option<StatusMap>,
    /// Whether a pass is clean or suspect, and why (graded runs only).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "audit_or_verdict"
    )]
    pub audit: Option<Audit>,
    pub backend: String,
    /// Image id (docker) or env path (local) the tests ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    pub timings: Timings,
    pub patchgrade_version: String,
}

impl EvalRecord {
    /// A record with nothing known yet but who and where; the outcome is
    /// `infra_error` until a step says otherwise.
    pub fn new(instance_id: &str, model: &str, backend: &str) -> EvalRecord {
        EvalRecord {
            instance_id: instance_id.to_string(),
            model_name_or_path: model.to_string(),
            sample_id: None,
            evaluated_as: None,
            outcome: Outcome::InfraError,
            detail: None,
            cache_key: String::new(),
            patch_sha256: None,
            spec_hash: None,
            eval_script: None,
            apply_strategy: None,
            grade: None,
            ungradable: None,
            test_exit_code: None,
            statuses: None,
            audit: None,
            backend: backend.to_string(),
            environment: None,
            timings: Timings::default(),
            patchgrade_version: crate::VERSION.into(),
        }
    }
}

/// An audit as patchgrade writes it, or one reduced to its verdict (edited
/// by hand or by other tools): the verdict is what reports count.
fn audit_or_verdict<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Audit>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Full(Audit),
        Verdict { verdict: Verdict },
    }
    Ok(match Option::<Stored>::deserialize(d)? {
        None => None,
        Some(Stored::Full(a)) => Some(a),
        Some(Stored::Verdict { verdict }) => Some(Audit {
            verdict,
            reasons: Vec::new(),
            seconds: 0.0,
            notes: Vec::new(),
            checks: Vec::new(),
        }),
    })
}
