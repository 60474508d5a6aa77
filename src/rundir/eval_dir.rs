//! One evaluation's folder: the files the runner leaves there, written and
//! read by name here only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::atomic::{write_atomic, write_json_atomic};
use super::RunDirError;
use crate::dataset::Instance;
use crate::grade::{Split, Ungradable};
use crate::outcome::Outcome;
use crate::parse::StatusMap;
use crate::record::EvalRecord;
use crate::spec::SpecSet;

/// patchgrade's record; written last, it marks the evaluation finished.
pub const RECORD_FILE: &str = "patchgrade.json";
const REPORT_FILE: &str = "report.json";
const PATCH_FILE: &str = "patch.diff";
const SCRIPT_FILE: &str = "eval.sh";
const TEST_LOG_FILE: &str = "test_output.txt";
const INSTANCE_LOG_FILE: &str = "run_instance.log";

/// `<log_root>/<run_id>/<model>/<instance_id>[@<sample>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalDir(PathBuf);

impl EvalDir {
    pub fn new(path: PathBuf) -> EvalDir {
        EvalDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `<instance_id>[@<sample>]`.
    pub fn leaf(&self) -> String {
        self.0
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.0)
    }

    pub fn write_patch(&self, patch: &str) -> std::io::Result<()> {
        self.create()?;
        write_atomic(&self.0.join(PATCH_FILE), patch.as_bytes())
    }

    pub fn write_script(&self, script: &str) -> std::io::Result<()> {
        write_atomic(&self.0.join(SCRIPT_FILE), script.as_bytes())
    }

    pub fn write_test_log(&self, text: &str) -> std::io::Result<()> {
        write_atomic(&self.0.join(TEST_LOG_FILE), text.as_bytes())
    }

    pub fn write_instance_log(&self, text: &str) -> std::io::Result<()> {
        write_atomic(&self.0.join(INSTANCE_LOG_FILE), text.as_bytes())
    }

    /// The candidate patch as evaluated, if it was written.
    pub fn patch(&self) -> Option<String> {
        std::fs::read_to_string(self.0.join(PATCH_FILE)).ok()
    }

    pub fn has_patch(&self) -> bool {
        self.0.join(PATCH_FILE).exists()
    }

    /// The test log (lossy UTF-8), if the tests ran.
    pub fn test_log(&self) -> Option<String> {
        let bytes = std::fs::read(self.0.join(TEST_LOG_FILE)).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The instance log (lossy UTF-8), if it was written.
    pub fn instance_log(&self) -> Option<String> {
        let bytes = std::fs::read(self.0.join(INSTANCE_LOG_FILE)).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Copy the `*.log` files of a workspace here (`setup.log` becomes
    /// `workspace-setup.log`), so failures can be read after the workspace
    /// is gone. Best effort: a failure to copy is only logged.
    pub fn keep_workspace_logs(&self, ws_root: &Path) {
        let Ok(rd) = std::fs::read_dir(ws_root) else {
            return;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "log") {
                let name = format!("workspace-{}", entry.file_name().to_string_lossy());
                if let Err(e) = std::fs::copy(&p, self.0.join(name)) {
                    tracing::warn!("cannot keep {}: {e}", p.display());
                }
            }
        }
    }

    /// Copy another evaluation's patch, script and logs here (a sample
    /// whose patch is identical to one already evaluated).
    pub fn copy_files_from(&self, from: &EvalDir) -> std::io::Result<()> {
        self.create()?;
        for f in [PATCH_FILE, SCRIPT_FILE, TEST_LOG_FILE, INSTANCE_LOG_FILE] {
            if from.0.join(f).exists() {
                std::fs::copy(from.0.join(f), self.0.join(f))?;
            }
        }
        Ok(())
    }

    /// Write the result: `report.json` in the reference's schema where the
    /// reference writes one (else a stale one is removed: it would be read
    /// as this result), then the record, last.
    pub fn write_result(&self, record: &EvalRecord, patch_is_none: bool) -> std::io::Result<()> {
        self.create()?;
        let report = self.0.join(REPORT_FILE);
        if record.outcome.has_reference_report() {
            write_json_atomic(&report, &reference_report(record, patch_is_none))?;
        } else if report.exists() {
            std::fs::remove_file(&report)?;
        }
        let written = write_json_atomic(&self.0.join(RECORD_FILE), record);
        if written.is_err() {
            // No record: the evaluation did not finish, and a report.json
            // alone would be read as finished by the reference's tooling.
            let _ = std::fs::remove_file(&report);
        }
        written
    }

    /// The record, or None when the evaluation did not finish.
    pub fn record(&self) -> Result<Option<EvalRecord>, RunDirError> {
        let path = self.0.join(RECORD_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RunDirError::Io { path, source }),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| RunDirError::Record { path, source })
    }

    /// The test statuses of a finished evaluation: as the record keeps them;
    /// records of older versions have none, and their log is parsed (with
    /// the instance's spec) instead. None when the tests did not run.
    pub fn statuses(
        &self,
        record: &EvalRecord,
        specs: &SpecSet,
        inst: &Instance,
    ) -> Option<Result<StatusMap, Ungradable>> {
        if let Some(map) = &record.statuses {
            return Some(Ok(map.clone()));
        }
        if let Some(u) = &record.ungradable {
            return Some(Err(u.clone()));
        }
        let spec = specs.for_instance(inst).ok()?;
        let log = self.test_log()?;
        Some(crate::grade::logs_eval(spec.spec.log_parser, &log))
    }
}

/// The per-instance `report.json`: the reference's keys, patchgrade's
/// record under one more.
#[derive(Serialize)]
struct ReferenceEntry<'a> {
    #[serde(rename = "patch_is_None")]
    patch_is_none: bool,
    patch_exists: bool,
    patch_successfully_applied: bool,
    resolved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tests_status: Option<TestsStatus<'a>>,
    patchgrade: &'a EvalRecord,
}

#[derive(Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
struct TestsStatus<'a> {
    fail_to_pass: &'a Split,
    pass_to_pass: &'a Split,
    fail_to_fail: Split,
    pass_to_fail: Split,
}

fn reference_report(
    record: &EvalRecord,
    patch_is_none: bool,
) -> BTreeMap<&str, ReferenceEntry<'_>> {
    let entry = ReferenceEntry {
        patch_is_none,
        patch_exists: !patch_is_none,
        patch_successfully_applied: record.grade.is_some(),
        resolved: record.outcome == Outcome::Resolved,
        tests_status: record.grade.as_ref().map(|g| TestsStatus {
            fail_to_pass: &g.fail_to_pass,
            pass_to_pass: &g.pass_to_pass,
            fail_to_fail: Split::default(),
            pass_to_fail: Split::default(),
        }),
        patchgrade: record,
    };
    BTreeMap::from([(record.instance_id.as_str(), entry)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::TestStatus;
    use crate::test_support::{pytest_specs, test_log};

    /// Statuses come from the record; a record of 0.1.0 (none kept) has its
    /// log parsed with the instance's spec instead.
    #[test]
    fn statuses_from_the_record_else_from_the_log() {
        let d = tempfile::tempdir().unwrap();
        let specs = pytest_specs(d.path());
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "a", "version": "1"
        }))
        .unwrap();
        let dir = super::super::RunDir::new(d.path(), "r").eval_dir("m", "o__r-1", None);
        dir.write_patch("").unwrap();
        dir.write_test_log(&test_log("PASSED t.py::a")).unwrap();
        let mut record = EvalRecord::new("o__r-1", "m", crate::settings::BackendKind::Local);
        record.outcome = Outcome::Unresolved;
        let from_log = dir.statuses(&record, &specs, &inst).unwrap().unwrap();
        assert_eq!(from_log.get("t.py::a"), Some(&TestStatus::Passed));
        record.statuses = Some(StatusMap::from([(
            "t.py::b".to_string(),
            TestStatus::Failed,
        )]));
        dir.write_result(&record, false).unwrap();
        let read = dir.record().unwrap().unwrap();
        let kept = dir.statuses(&read, &specs, &inst).unwrap().unwrap();
        assert_eq!(kept, record.statuses.unwrap());
    }
}
