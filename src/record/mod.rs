//! patchgrade's record of one evaluation (`patchgrade.json`).

mod environment;

pub use environment::{Environment, ImageEnv};

use serde::{Deserialize, Deserializer, Serialize};

use crate::audit::{Audit, Verdict};
use crate::grade::{Grade, Ungradable};
use crate::outcome::{Outcome, Timings};
use crate::parse::StatusMap;
use crate::patch::ApplyStrategy;
use crate::script::dataset::ScriptUsed;
use crate::script::machinery::SetAside;
use crate::settings::BackendKind;

/// What produced an evaluation's log, the record's `backend`: one of
/// patchgrade's backends, or the reference harness (the records `regrade`
/// makes from its logs). Written as `docker`, `local`, `swarm` or
/// `reference-log`, as records of 0.1.0 and since say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RanOn {
    Backend(BackendKind),
    ReferenceLog,
}

impl RanOn {
    const REFERENCE_LOG: &'static str = "reference-log";

    /// The backend, when patchgrade ran the tests.
    pub fn backend(self) -> Option<BackendKind> {
        match self {
            RanOn::Backend(b) => Some(b),
            RanOn::ReferenceLog => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RanOn::Backend(b) => b.name(),
            RanOn::ReferenceLog => Self::REFERENCE_LOG,
        }
    }
}

impl From<BackendKind> for RanOn {
    fn from(b: BackendKind) -> RanOn {
        RanOn::Backend(b)
    }
}

impl std::fmt::Display for RanOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for RanOn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for RanOn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RanOn, D::Error> {
        let text = String::deserialize(d)?;
        if text == RanOn::REFERENCE_LOG {
            return Ok(RanOn::ReferenceLog);
        }
        text.parse::<BackendKind>()
            .map(RanOn::Backend)
            .map_err(|_| {
                serde::de::Error::custom(format!(
                    "unknown backend {text:?} (docker, local, swarm, reference-log)"
                ))
            })
    }
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
    /// The candidate's changes to the test machinery and what was done with
    /// each before the tests ran (`script::machinery`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<SetAside>,
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
    pub backend: RanOn,
    /// Where the tests ran: the image (docker, swarm: with its node) or the
    /// venv or interpreter (local); written as one line of text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    pub timings: Timings,
    pub patchgrade_version: String,
}

impl EvalRecord {
    /// A record with nothing known yet but who and where; the outcome is
    /// `infra_error` until a step says otherwise.
    pub fn new(instance_id: &str, model: &str, backend: impl Into<RanOn>) -> EvalRecord {
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
            set_aside: Vec::new(),
            grade: None,
            ungradable: None,
            test_exit_code: None,
            statuses: None,
            audit: None,
            backend: backend.into(),
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
