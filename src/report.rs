//! Reports in the reference harness's schemas, written atomically, and the
//! readable summary table.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::dataset::{Dataset, Prediction};
use crate::grade::Split;
use crate::outcome::{EvalRecord, Outcome};

/// Write `bytes` to `path` so that readers see the old file or the whole new
/// one, never a part: a temp file in the same folder, fsync, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Every `<model>/<leaf>/patchgrade.json` of a run folder, sorted.
pub fn record_paths(run_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut models: Vec<PathBuf> = std::fs::read_dir(run_dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    models.sort();
    for m in models {
        let mut leaves: Vec<PathBuf> = std::fs::read_dir(&m)?
            .filter_map(Result::ok)
            .map(|e| e.path().join("patchgrade.json"))
            .filter(|p| p.is_file())
            .collect();
        leaves.sort();
        out.extend(leaves);
    }
    Ok(out)
}

pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    text.push(b'\n');
    write_atomic(path, &text)
}

/// The per-instance `report.json`, standard keys as the reference writes
/// them, patchgrade's record under one extra key.
pub fn instance_report(record: &EvalRecord, patch_is_none: bool) -> Value {
    let mut entry = serde_json::Map::new();
    entry.insert("patch_is_None".into(), json!(patch_is_none));
    entry.insert("patch_exists".into(), json!(!patch_is_none));
    let gradable = record.grade.is_some();
    entry.insert("patch_successfully_applied".into(), json!(gradable));
    entry.insert(
        "resolved".into(),
        json!(record.outcome == Outcome::Resolved),
    );
    if let Some(g) = &record.grade {
        let empty = Split::default();
        entry.insert(
            "tests_status".into(),
            json!({
                "FAIL_TO_PASS": g.fail_to_pass,
                "PASS_TO_PASS": g.pass_to_pass,
                "FAIL_TO_FAIL": empty,
                "PASS_TO_FAIL": empty,
            }),
        );
    }
    entry.insert(
        "patchgrade".into(),
        serde_json::to_value(record).expect("record serialises"),
    );
    json!({ record.instance_id.clone(): entry })
}

/// The run summary (`<model>.<run_id>.json`), reference schema_version 2.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub total_instances: usize,
    pub submitted_instances: usize,
    pub completed_instances: usize,
    pub resolved_instances: usize,
    pub unresolved_instances: usize,
    pub empty_patch_instances: usize,
    pub error_instances: usize,
    pub unstopped_instances: usize,
    pub completed_ids: Vec<String>,
    pub incomplete_ids: Vec<String>,
    pub empty_patch_ids: Vec<String>,
    pub submitted_ids: Vec<String>,
    pub resolved_ids: Vec<String>,
    pub unresolved_ids: Vec<String>,
    pub error_ids: Vec<String>,
    pub unstopped_containers: Vec<String>,
    pub unremoved_images: Vec<String>,
    pub schema_version: u32,
    pub patchgrade: SummaryExtra,
}

#[derive(Debug, Clone, Serialize)]
pub struct SummaryExtra {
    pub version: String,
    pub run_id: String,
    pub model_name_or_path: String,
    pub backend: String,
    /// Count per outcome, every outcome present (zero included).
    pub outcomes: BTreeMap<Outcome, usize>,
    pub ids_by_outcome: BTreeMap<Outcome, Vec<String>>,
    /// Resolved passes split by the audit.
    pub audit: AuditCounts,
    pub wall_seconds: f64,
}

/// How many resolved passes are clean or suspect, and why.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditCounts {
    pub resolved: usize,
    pub clean_resolved: usize,
    pub suspect_resolved: usize,
    /// Resolved records with no audit (made by an older version).
    pub not_audited: usize,
    /// Suspect resolved passes per reason (a pass may have several).
    pub reasons: BTreeMap<crate::audit::ReasonKind, usize>,
    pub suspect_ids: Vec<String>,
}

impl AuditCounts {
    pub fn add(&mut self, id: &str, record: &EvalRecord) {
        if record.outcome != Outcome::Resolved {
            return;
        }
        self.resolved += 1;
        match &record.audit {
            None => self.not_audited += 1,
            Some(a) if a.is_suspect() => {
                self.suspect_resolved += 1;
                self.suspect_ids.push(id.to_string());
                let kinds: BTreeSet<crate::audit::ReasonKind> =
                    a.reasons.iter().map(|r| r.kind).collect();
                for k in kinds {
                    *self.reasons.entry(k).or_default() += 1;
                }
            }
            Some(_) => self.clean_resolved += 1,
        }
    }
}

impl Summary {
    /// Build from the dataset (after filtering), one model's predictions and
    /// the records of this run (fresh or reused).
    pub fn build(
        dataset: &Dataset,
        preds: &[&Prediction],
        records: &BTreeMap<String, EvalRecord>,
        extra: SummaryExtra,
    ) -> Summary {
        let submitted: BTreeSet<String> = preds.iter().map(|p| p.instance_id.clone()).collect();
        let mut s = Summary {
            total_instances: dataset.instances.len(),
            submitted_instances: submitted.len(),
            completed_instances: 0,
            resolved_instances: 0,
            unresolved_instances: 0,
            empty_patch_instances: 0,
            error_instances: 0,
            unstopped_instances: 0,
            completed_ids: vec![],
            incomplete_ids: vec![],
            empty_patch_ids: vec![],
            submitted_ids: submitted.iter().cloned().collect(),
            resolved_ids: vec![],
            unresolved_ids: vec![],
            error_ids: vec![],
            unstopped_containers: vec![],
            unremoved_images: vec![],
            schema_version: 2,
            patchgrade: extra,
        };
        s.patchgrade.outcomes = Outcome::ALL.iter().map(|o| (*o, 0)).collect();
        for inst in &dataset.instances {
            let id = &inst.instance_id;
            if !submitted.contains(id) {
                s.incomplete_ids.push(id.clone());
                continue;
            }
            match records.get(id) {
                Some(r) => {
                    *s.patchgrade.outcomes.entry(r.outcome).or_default() += 1;
                    s.patchgrade.audit.add(id, r);
                    s.patchgrade
                        .ids_by_outcome
                        .entry(r.outcome)
                        .or_default()
                        .push(id.clone());
                    // Ids land in the reference's lists as the reference puts them.
                    match r.outcome {
                        Outcome::EmptyPatch => s.empty_patch_ids.push(id.clone()),
                        Outcome::Resolved => {
                            s.completed_ids.push(id.clone());
                            s.resolved_ids.push(id.clone());
                        }
                        Outcome::Unresolved => {
                            s.completed_ids.push(id.clone());
                            s.unresolved_ids.push(id.clone());
                        }
                        _ => s.error_ids.push(id.clone()),
                    }
                }
                // Submitted but never finished (interrupted run).
                None => s.error_ids.push(id.clone()),
            }
        }
        for v in [
            &mut s.completed_ids,
            &mut s.incomplete_ids,
            &mut s.empty_patch_ids,
            &mut s.resolved_ids,
            &mut s.unresolved_ids,
            &mut s.error_ids,
        ] {
            v.sort();
        }
        s.completed_instances = s.completed_ids.len();
        s.resolved_instances = s.resolved_ids.len();
        s.unresolved_instances = s.unresolved_ids.len();
        s.empty_patch_instances = s.empty_patch_ids.len();
        s.error_instances = s.error_ids.len();
        s
    }

    pub fn file_name(model_dir: &str, run_id: &str) -> PathBuf {
        PathBuf::from(format!("{model_dir}.{run_id}.json"))
    }

    /// A readable table: one line per instance, then the counts.
    pub fn table(&self, records: &BTreeMap<String, EvalRecord>) -> String {
        let mut out = String::new();
        let width = records.keys().map(String::len).max().unwrap_or(8).max(8);
        out.push_str(&format!(
            "{:<width$}  {:<24}  detail\n",
            "instance", "outcome"
        ));
        for (id, r) in records {
            let mut detail = r.detail.clone().unwrap_or_default();
            if let Some(a) = r
                .audit
                .as_ref()
                .filter(|a| r.outcome == Outcome::Resolved && a.is_suspect())
            {
                let kinds: BTreeSet<String> = a
                    .reasons
                    .iter()
                    .filter_map(|x| {
                        serde_json::to_value(x.kind)
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                    })
                    .collect();
                detail = format!(
                    "suspect: {}",
                    kinds.into_iter().collect::<Vec<_>>().join(", ")
                );
            }
            let detail = detail.as_str();
            let detail: String = detail
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            out.push_str(&format!(
                "{id:<width$}  {:<24}  {detail}\n",
                r.outcome.name()
            ));
        }
        out.push_str(&format!(
            "\n{} instances, {} submitted: {} resolved, {} unresolved, {} empty patch, {} errors",
            self.total_instances,
            self.submitted_instances,
            self.resolved_instances,
            self.unresolved_instances,
            self.empty_patch_instances,
            self.error_instances
        ));
        let errs: Vec<String> = self
            .patchgrade
            .outcomes
            .iter()
            .filter(|(o, n)| {
                **n > 0
                    && !matches!(
                        o,
                        Outcome::Resolved | Outcome::Unresolved | Outcome::EmptyPatch
                    )
            })
            .map(|(o, n)| format!("{n} {o}"))
            .collect();
        if !errs.is_empty() {
            out.push_str(&format!(" ({})", errs.join(", ")));
        }
        out.push('\n');
        let a = &self.patchgrade.audit;
        if a.resolved > 0 {
            let reasons: Vec<String> = a
                .reasons
                .iter()
                .map(|(k, n)| {
                    format!(
                        "{n} {}",
                        serde_json::to_value(k)
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default()
                    )
                })
                .collect();
            out.push_str(&format!(
                "audit of the {} resolved: {} clean, {} suspect{}{}\n",
                a.resolved,
                a.clean_resolved,
                a.suspect_resolved,
                if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", reasons.join(", "))
                },
                if a.not_audited > 0 {
                    format!(", {} not audited", a.not_audited)
                } else {
                    String::new()
                }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/report.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // No temp files left behind.
        assert_eq!(std::fs::read_dir(d.path().join("sub")).unwrap().count(), 1);
    }
}
