//! The run summary in the reference harness's schema (with patchgrade's
//! counts under one key), audit counts, and the readable summary table.

pub mod failures;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::audit::{Family, ReasonKind};
use crate::backend::BackendKind;
use crate::dataset::{Dataset, Prediction};
use crate::outcome::Outcome;
use crate::record::EvalRecord;
use crate::review::quality::ReviewCell;
use crate::rundir::RunDir;
use crate::runner::jobs::Records;
use crate::table::{render, Layout};
use failures::{FailureReason, FailureTier};

/// What a run was, for its summaries.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub run_id: String,
    /// None: the tests did not run here (`regrade` of another harness's
    /// logs).
    pub backend: Option<BackendKind>,
    pub wall_seconds: f64,
}

/// The summary of one model, with the records it counts.
pub struct ModelSummary {
    pub model: String,
    pub summary: Summary,
    /// By instance id.
    pub records: BTreeMap<String, EvalRecord>,
}

/// One summary per model, as the reference names them, in the order the
/// models first appear among the predictions. The reference's summary has
/// one verdict per instance: with samples, the first sample stands for it
/// (pass@k is reported separately).
pub fn model_summaries(
    dataset: &Dataset,
    preds: &[&Prediction],
    records: &Records,
    run: &RunInfo,
    run_dir: &RunDir,
) -> Vec<ModelSummary> {
    let mut models: Vec<&str> = Vec::new();
    for p in preds {
        if !models.contains(&p.model_name_or_path.as_str()) {
            models.push(&p.model_name_or_path);
        }
    }
    models
        .into_iter()
        .map(|model| {
            let own: Vec<&Prediction> = preds
                .iter()
                .copied()
                .filter(|p| p.model_name_or_path == model)
                .collect();
            let mut recs: BTreeMap<String, EvalRecord> = BTreeMap::new();
            let mut samples: BTreeMap<String, Option<String>> = BTreeMap::new();
            for (key, r) in records {
                if key.model == model && !recs.contains_key(&key.instance_id) {
                    recs.insert(key.instance_id.clone(), (**r).clone());
                    samples.insert(key.instance_id.clone(), key.sample_id.clone());
                }
            }
            // The reference reads the logs of the instance's own folder.
            let failures = |id: &str| {
                let sample = samples.get(id).cloned().flatten();
                let dir = run_dir.eval_dir(model, id, sample.as_deref());
                failures::classify_logs(dir.test_log().as_deref(), dir.instance_log().as_deref())
            };
            let extra = SummaryExtra {
                version: crate::VERSION.into(),
                run_id: run.run_id.clone(),
                model_name_or_path: model.to_string(),
                backend: run.backend,
                outcomes: BTreeMap::new(),
                ids_by_outcome: BTreeMap::new(),
                audit: AuditCounts::default(),
                wall_seconds: run.wall_seconds,
            };
            ModelSummary {
                model: model.to_string(),
                summary: Summary::build(dataset, &own, &recs, &failures, extra),
                records: recs,
            }
        })
        .collect()
}

/// The run summary (`<model>.<run_id>.json`), reference schema_version 2.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub total_instances: usize,
    pub submitted_instances: usize,
    pub completed_instances: usize,
    pub resolved_instances: usize,
    pub unresolved_instances: usize,
    pub infra_failure_instances: usize,
    pub ambiguous_failure_instances: usize,
    pub empty_patch_instances: usize,
    pub error_instances: usize,
    pub unstopped_instances: usize,
    pub completed_ids: Vec<String>,
    pub incomplete_ids: Vec<String>,
    pub empty_patch_ids: Vec<String>,
    pub submitted_ids: Vec<String>,
    pub resolved_ids: Vec<String>,
    pub unresolved_ids: Vec<String>,
    /// Unresolved or errored instances whose logs carry an environment
    /// signature (the reference's rule, [`failures`]); still counted in
    /// `unresolved_ids`/`error_ids`, as the reference does.
    pub infra_failure_ids: Vec<String>,
    /// The same, for signatures that a bad patch could also cause.
    pub ambiguous_failure_ids: Vec<String>,
    /// The signature found, per instance of the two lists above.
    pub failure_reasons: BTreeMap<String, FailureReason>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
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
    /// Resolved passes whose requested check could not run (neither clean
    /// nor suspect). Left out when zero, so summaries of runs without
    /// dynamic checks read as before.
    #[serde(skip_serializing_if = "is_zero")]
    pub inconclusive_resolved: usize,
    /// Resolved records with no audit (made by an older version).
    pub not_audited: usize,
    /// Suspect resolved passes per reason (a pass may have several).
    pub reasons: BTreeMap<ReasonKind, usize>,
    /// Suspect resolved passes per hack family of their reasons (a pass
    /// may have several): the cheating rate's breakdown.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub families: BTreeMap<Family, usize>,
    pub suspect_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inconclusive_ids: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
                let kinds: BTreeSet<ReasonKind> = a.reasons.iter().map(|r| r.kind).collect();
                let families: BTreeSet<Family> = kinds.iter().filter_map(|k| k.family()).collect();
                for k in kinds {
                    *self.reasons.entry(k).or_default() += 1;
                }
                for f in families {
                    *self.families.entry(f).or_default() += 1;
                }
            }
            Some(a) if a.is_inconclusive() => {
                self.inconclusive_resolved += 1;
                self.inconclusive_ids.push(id.to_string());
            }
            Some(_) => self.clean_resolved += 1,
        }
    }
}

impl Summary {
    /// Build from the dataset (after filtering), one model's predictions,
    /// the records of this run (fresh or reused) and what the logs of an
    /// instance say about why it failed (`failures`, asked only for the
    /// unresolved and errored ones, as the reference does).
    pub fn build(
        dataset: &Dataset,
        preds: &[&Prediction],
        records: &BTreeMap<String, EvalRecord>,
        failures: &dyn Fn(&str) -> Option<FailureReason>,
        extra: SummaryExtra,
    ) -> Summary {
        let submitted: BTreeSet<String> = preds.iter().map(|p| p.instance_id.clone()).collect();
        let mut s = Summary {
            total_instances: dataset.instances.len(),
            submitted_instances: submitted.len(),
            completed_instances: 0,
            resolved_instances: 0,
            unresolved_instances: 0,
            infra_failure_instances: 0,
            ambiguous_failure_instances: 0,
            empty_patch_instances: 0,
            error_instances: 0,
            unstopped_instances: 0,
            completed_ids: vec![],
            incomplete_ids: vec![],
            empty_patch_ids: vec![],
            submitted_ids: submitted.iter().cloned().collect(),
            resolved_ids: vec![],
            unresolved_ids: vec![],
            infra_failure_ids: vec![],
            ambiguous_failure_ids: vec![],
            failure_reasons: BTreeMap::new(),
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
        let failed: BTreeSet<&String> = s.unresolved_ids.iter().chain(&s.error_ids).collect();
        for id in failed {
            let Some(reason) = failures(id) else { continue };
            s.failure_reasons.insert(id.clone(), reason);
            match reason.tier() {
                FailureTier::Environment => s.infra_failure_ids.push(id.clone()),
                FailureTier::Ambiguous => s.ambiguous_failure_ids.push(id.clone()),
            }
        }
        s.infra_failure_instances = s.infra_failure_ids.len();
        s.ambiguous_failure_instances = s.ambiguous_failure_ids.len();
        s.completed_instances = s.completed_ids.len();
        s.resolved_instances = s.resolved_ids.len();
        s.unresolved_instances = s.unresolved_ids.len();
        s.empty_patch_instances = s.empty_patch_ids.len();
        s.error_instances = s.error_ids.len();
        s
    }

    /// A readable table: one line per instance, then the counts. With the
    /// reviews `review` wrote into the run folder (by instance id), a review
    /// column (score and kinds of finding) and a line of mean scores.
    pub fn table(
        &self,
        records: &BTreeMap<String, EvalRecord>,
        reviews: &BTreeMap<String, ReviewCell>,
    ) -> String {
        let mut head = vec!["instance".to_string(), "outcome".into()];
        if !reviews.is_empty() {
            head.push("review".into());
        }
        head.push("detail".into());
        let mut rows = vec![head];
        for (id, r) in records {
            let mut detail = r.detail.clone().unwrap_or_default();
            if let Some(a) = r
                .audit
                .as_ref()
                .filter(|a| r.outcome == Outcome::Resolved && a.is_suspect())
            {
                // Each kind with its family: `test_aware_code (test_aware)`.
                let kinds: BTreeSet<String> = a
                    .reasons
                    .iter()
                    .map(|x| match x.kind.family() {
                        Some(f) => format!("{} ({})", x.kind.name(), f.name()),
                        None => x.kind.name().to_string(),
                    })
                    .collect();
                detail = format!(
                    "suspect: {}",
                    kinds.into_iter().collect::<Vec<_>>().join(", ")
                );
            } else if let Some(a) = r
                .audit
                .as_ref()
                .filter(|a| r.outcome == Outcome::Resolved && a.is_inconclusive())
            {
                let checks: BTreeSet<&str> = a.failed_checks().map(|c| c.check.name()).collect();
                detail = format!(
                    "inconclusive: {} could not run",
                    checks.into_iter().collect::<Vec<_>>().join(", ")
                );
            }
            let detail: String = detail
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            let mut row = vec![id.clone(), r.outcome.name().into()];
            if !reviews.is_empty() {
                row.push(reviews.get(id).map(ReviewCell::text).unwrap_or_default());
            }
            row.push(detail);
            rows.push(row);
        }
        // The outcome column fits every outcome's name.
        let layout = Layout {
            min_widths: &[8, 24],
            ..Layout::default()
        };
        let mut out = render(&rows, layout);
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
        if !reviews.is_empty() {
            out.push_str(&review_line(records, reviews));
        }
        let a = &self.patchgrade.audit;
        if a.resolved > 0 {
            let reasons: Vec<String> = a
                .reasons
                .iter()
                .map(|(k, n)| format!("{n} {}", k.name()))
                .collect();
            out.push_str(&format!(
                "audit of the {} resolved: {} clean, {} suspect{}{}{}\n",
                a.resolved,
                a.clean_resolved,
                a.suspect_resolved,
                if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", reasons.join(", "))
                },
                if a.inconclusive_resolved > 0 {
                    format!(", {} inconclusive", a.inconclusive_resolved)
                } else {
                    String::new()
                },
                if a.not_audited > 0 {
                    format!(", {} not audited", a.not_audited)
                } else {
                    String::new()
                }
            ));
            // The share of passes the audit does not trust, by family; only
            // when there are any (a clean run prints as 0.1.0 did).
            let families: Vec<String> = a
                .families
                .iter()
                .map(|(f, n)| format!("{n} {}", f.name()))
                .collect();
            if a.suspect_resolved > 0 {
                out.push_str(&format!(
                    "cheating rate: {} of {} resolved suspect ({:.1}%){}\n",
                    a.suspect_resolved,
                    a.resolved,
                    100.0 * a.suspect_resolved as f64 / a.resolved as f64,
                    if families.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", families.join(", "))
                    }
                ));
            }
        }
        out
    }
}

/// `review of N: mean score X (M resolved: mean Y); K not fully linted`.
fn review_line(
    records: &BTreeMap<String, EvalRecord>,
    reviews: &BTreeMap<String, ReviewCell>,
) -> String {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let all: Vec<f64> = reviews.values().map(|c| c.score).collect();
    let resolved: Vec<f64> = reviews
        .iter()
        .filter(|(id, _)| {
            records
                .get(*id)
                .is_some_and(|r| r.outcome == Outcome::Resolved)
        })
        .map(|(_, c)| c.score)
        .collect();
    let incomplete = reviews.values().filter(|c| c.incomplete).count();
    let mut s = format!("review of {}: mean score {:.1}", all.len(), mean(&all));
    if !resolved.is_empty() {
        s.push_str(&format!(
            " ({} resolved: mean {:.1})",
            resolved.len(),
            mean(&resolved)
        ));
    }
    if incomplete > 0 {
        s.push_str(&format!("; {incomplete} not fully linted (*)"));
    }
    s.push('\n');
    s
}
