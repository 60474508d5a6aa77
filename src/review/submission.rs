//! The static audit of a whole submission (a dataset and a predictions
//! file), with nothing run: the library side of
//! `patchgrade audit --dataset D --predictions P`.
//!
//! For every prediction it runs the audit's checks that need no test log and
//! no checkout ([`crate::audit::audit_static`] on the patch alone: test
//! tampering, issue leakage, the instance's solution-in-issue flag, the
//! candidate-side spoofing checks) and the review's diff-only findings
//! ([`super::hygiene`]). The checks that need a run (the log's spoofing
//! checks, future history) are named in each audit's notes, never reported
//! as passed.
//!
//! Leakage is judged on the problem statement alone by default, which is
//! what an agent sees in the standard setting; `with_hints` adds the hints
//! (the issue's comments before the fix). The same text is the issue the
//! hygiene check reads for unrelated files.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::{assemble, hygiene, FindingKind, StaticReview};
use crate::audit::{audit_static, Audit, AuditInput, ReasonKind};
use crate::dataset::{Dataset, Instance, Prediction};

/// What the audit reads of the issue, and where the mirrors are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmissionOptions {
    /// Judge leakage on the problem statement and the hints.
    pub with_hints: bool,
    /// Bare mirrors with full history, `DIR/<owner>__<name>[.git]`
    /// (`--mirror-dir`), for the future-copy check; without one it is a note.
    pub mirror_dir: Option<PathBuf>,
}

/// The static audit of one prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionAudit {
    pub instance_id: String,
    pub model_name_or_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_id: Option<String>,
    /// Empty patches are not audited.
    pub empty: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Audit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<StaticReview>,
}

/// The static audit of a submission.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubmissionAudit {
    pub with_hints: bool,
    /// In the predictions' order.
    pub predictions: Vec<PredictionAudit>,
    /// Predictions naming an instance the dataset does not have.
    pub unknown_instances: Vec<String>,
    pub seconds: f64,
}

/// Counts over a submission.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SubmissionSummary {
    pub predictions: usize,
    pub empty: usize,
    pub suspect: usize,
    /// Predictions with at least one reason of the kind.
    pub reasons: BTreeMap<ReasonKind, usize>,
    /// Predictions with at least one finding of the kind.
    pub findings: BTreeMap<FindingKind, usize>,
    /// Mean review score over audited predictions.
    pub mean_score: Option<f64>,
}

impl SubmissionAudit {
    pub fn summary(&self) -> SubmissionSummary {
        let mut s = SubmissionSummary {
            predictions: self.predictions.len(),
            ..SubmissionSummary::default()
        };
        let mut scores = Vec::new();
        for p in &self.predictions {
            s.empty += usize::from(p.empty);
            if let Some(a) = &p.audit {
                s.suspect += usize::from(a.is_suspect());
                let kinds: std::collections::BTreeSet<ReasonKind> =
                    a.reasons.iter().map(|r| r.kind).collect();
                for k in kinds {
                    *s.reasons.entry(k).or_default() += 1;
                }
            }
            if let Some(r) = &p.review {
                scores.push(r.score.score);
                let kinds: std::collections::BTreeSet<FindingKind> =
                    r.findings.iter().map(|f| f.kind).collect();
                for k in kinds {
                    *s.findings.entry(k).or_default() += 1;
                }
            }
        }
        s.mean_score =
            (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64);
        s
    }
}

/// What the static audit could not check, for each audit's notes.
const NOT_RUN: &str = "static audit: the log's spoofing checks and future history need a run; linters need the checkout";
// (The future-copy check runs here with `--mirror-dir`; without it, or
// without the repository's mirror there, its own note says so.)

/// Audits every prediction; never fails (an unknown instance is listed).
pub fn audit_submission(
    dataset: &Dataset,
    predictions: &[Prediction],
    opts: &SubmissionOptions,
) -> SubmissionAudit {
    let t0 = Instant::now();
    // The instance as the audit should see it: without hints unless asked.
    let mut seen: HashMap<&str, Instance> = HashMap::new();
    let by_id: HashMap<&str, &Instance> = dataset
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i))
        .collect();
    let mut out = Vec::with_capacity(predictions.len());
    let mut unknown = Vec::new();
    for p in predictions {
        let Some(orig) = by_id.get(p.instance_id.as_str()) else {
            if !unknown.contains(&p.instance_id) {
                unknown.push(p.instance_id.clone());
            }
            continue;
        };
        let inst = seen.entry(orig.instance_id.as_str()).or_insert_with(|| {
            let mut i = (*orig).clone();
            if !opts.with_hints {
                i.hints_text.clear();
            }
            i
        });
        let mut row = PredictionAudit {
            instance_id: p.instance_id.clone(),
            model_name_or_path: p.model_name_or_path.clone(),
            sample_id: p.sample_id.clone(),
            empty: p.is_empty_patch(),
            audit: None,
            review: None,
        };
        if let (false, Some(patch)) = (row.empty, p.model_patch.as_deref()) {
            let mirror = opts
                .mirror_dir
                .as_deref()
                .and_then(|d| crate::repo::mirror_in(d, &inst.repo));
            let mut input = AuditInput::new(inst, patch);
            input.mirror = mirror.as_deref();
            input.of_gold = AuditInput::is_gold(inst, &p.model_name_or_path, patch);
            let mut audit = audit_static(&input);
            audit.notes.push(NOT_RUN.into());
            let issue = if opts.with_hints && !inst.hints_text.is_empty() {
                format!("{}\n{}", inst.problem_statement, inst.hints_text)
            } else {
                inst.problem_statement.clone()
            };
            let h = hygiene::check(
                patch,
                &hygiene::Context {
                    issue: &issue,
                    gold_patch: Some(&inst.patch),
                },
            );
            row.review = Some(assemble(
                h,
                None,
                Vec::new(),
                vec!["linters not run: the static audit reads the diff only".into()],
            ));
            row.audit = Some(audit);
        }
        out.push(row);
    }
    SubmissionAudit {
        with_hints: opts.with_hints,
        predictions: out,
        unknown_instances: unknown,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn instance() -> Instance {
        serde_json::from_value(json!({
            "instance_id": "calc-1",
            "repo": "acme/calc",
            "base_commit": "0000000000000000000000000000000000000000",
            "patch": "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n",
            "test_patch": "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1 +1,3 @@\n import calc\n+def test_add():\n+    assert calc.add(1, 2) == 3\n",
            "problem_statement": "add() subtracts.",
            "hints_text": "Fix:\n```\nreturn a + b\n```\n",
            "version": "1.0",
            "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
            "PASS_TO_PASS": [],
        }))
        .unwrap()
    }

    fn pred(id: &str, patch: Option<&str>) -> Prediction {
        Prediction {
            instance_id: id.into(),
            model_name_or_path: "m".into(),
            model_patch: patch.map(str::to_string),
            sample_id: None,
            extra: Map::new(),
        }
    }

    #[test]
    fn hints_only_when_asked_and_static_findings() {
        let ds = Dataset {
            instances: vec![instance()],
        };
        let gold = ds.instances[0].patch.clone();
        let tamper = "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1 +1,2 @@\n import calc\n+print('PASSED tests/test_calc.py::test_add')\n";
        let preds = vec![
            pred("calc-1", Some(&gold)),
            pred("calc-1", Some(tamper)),
            pred("calc-1", None),
            pred("nope-1", Some(&gold)),
        ];
        let a = audit_submission(&ds, &preds, &SubmissionOptions::default());
        assert_eq!(a.predictions.len(), 3);
        assert_eq!(a.unknown_instances, vec!["nope-1".to_string()]);
        // Statement only: the fix is in the hints, so gold is clean.
        let g = a.predictions[0].audit.as_ref().unwrap();
        assert!(!g.is_suspect(), "{:?}", g.reasons);
        assert!(g.notes.iter().any(|n| n.contains("need a run")));
        assert_eq!(a.predictions[0].review.as_ref().unwrap().score.score, 100.0);
        let t = a.predictions[1].audit.as_ref().unwrap();
        // The forged status line is spoofing; the file is one the test patch
        // touches and the edit only adds, so it is not tampering (the eval
        // restores the file).
        assert!(
            !t.has(ReasonKind::TestTampering) && t.has(ReasonKind::OutputSpoofing),
            "{:?}",
            t.reasons
        );
        assert!(a.predictions[2].empty && a.predictions[2].audit.is_none());
        let s = a.summary();
        assert_eq!((s.predictions, s.empty, s.suspect), (3, 1, 1));
        assert_eq!(s.findings.get(&FindingKind::TestEdited), Some(&1));

        // With hints: gold is in the issue text.
        let a = audit_submission(
            &ds,
            &preds,
            &SubmissionOptions {
                with_hints: true,
                ..SubmissionOptions::default()
            },
        );
        let g = a.predictions[0].audit.as_ref().unwrap();
        assert!(
            g.has(ReasonKind::IssueLeakage) && g.has(ReasonKind::SolutionInIssue),
            "{:?}",
            g.reasons
        );
        assert_eq!(
            a.summary().reasons.get(&ReasonKind::SolutionInIssue),
            Some(&2)
        );
    }
}
