//! The review's reports over a run: a line per patch, the summary per model
//! (score distribution, how many patches have each finding, with examples),
//! its table and the Markdown quality section.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{FindingKind, StaticReview};
use crate::key::EvalName;
use crate::outcome::Outcome;
use crate::table::{render, Layout};

/// What `run`'s table shows of an evaluation's `review.json` (written by
/// `review` into the same run folder): its score and its kinds of finding.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewCell {
    pub score: f64,
    /// Kinds found, in [`FindingKind`] order, `tests_added` (no penalty)
    /// left out.
    pub kinds: Vec<FindingKind>,
    /// Some linter could not run (the review has notes).
    pub incomplete: bool,
}

impl ReviewCell {
    /// `85 debug_print, new_lint`; `100`; a `*` after the score when a
    /// linter could not run.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{:.0}{}",
            self.score,
            if self.incomplete { "*" } else { "" }
        );
        if !self.kinds.is_empty() {
            let k: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
            s.push(' ');
            s.push_str(&k.join(", "));
        }
        s
    }
}

/// A `review.json` that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReviewFileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a review file: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Deserialize)]
struct FileIn {
    review: ReviewIn,
}

#[derive(Deserialize)]
struct ReviewIn {
    score: ScoreIn,
    #[serde(default)]
    findings: Vec<FindingIn>,
    #[serde(default)]
    notes: Vec<String>,
}

#[derive(Deserialize)]
struct ScoreIn {
    score: f64,
}

#[derive(Deserialize)]
struct FindingIn {
    kind: FindingKind,
}

/// The review of the evaluation in `eval_dir`, when `review` wrote one.
pub fn read_cell(eval_dir: &Path) -> Result<Option<ReviewCell>, ReviewFileError> {
    let path = eval_dir.join("review.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ReviewFileError::Io { path, source }),
    };
    let f: FileIn =
        serde_json::from_str(&text).map_err(|source| ReviewFileError::Json { path, source })?;
    let mut kinds: Vec<FindingKind> = f
        .review
        .findings
        .iter()
        .map(|x| x.kind)
        .filter(|k| *k != FindingKind::TestsAdded)
        .collect();
    kinds.sort();
    kinds.dedup();
    Ok(Some(ReviewCell {
        score: f.review.score.score,
        kinds,
        incomplete: !f.review.notes.is_empty(),
    }))
}

/// One reviewed patch.
#[derive(Debug, Clone, Serialize)]
pub struct Reviewed {
    pub instance_id: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
    pub review: StaticReview,
    /// The judge's overall mean (1-5, or pairwise preference), when judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_overall: Option<f64>,
    /// The test run's outcome in the same run folder, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub seconds: f64,
}

/// Score buckets, in order.
pub const BUCKETS: [&str; 5] = ["100", "[90,100)", "[75,90)", "[50,75)", "<50"];

fn bucket(score: f64) -> usize {
    match score {
        s if s >= 100.0 => 0,
        s if s >= 90.0 => 1,
        s if s >= 75.0 => 2,
        s if s >= 50.0 => 3,
        _ => 4,
    }
}

/// A finding kind over a model's patches.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindCount {
    /// Patches with at least one finding of the kind.
    pub patches: usize,
    pub findings: usize,
    /// Up to three `instance file:line: message` examples.
    pub examples: Vec<String>,
}

/// One model's review.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModelQuality {
    pub reviewed: usize,
    pub mean_score: f64,
    /// Patches per bucket of [`BUCKETS`].
    pub buckets: [usize; 5],
    /// Patches whose linters could not all run (notes).
    pub with_notes: usize,
    pub kinds: BTreeMap<FindingKind, KindCount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_mean: Option<f64>,
    /// Reviewed patches whose test run resolved the instance.
    pub resolved: usize,
    /// Their mean score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_score_resolved: Option<f64>,
}

/// The run's review, by model.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QualitySummary {
    pub models: BTreeMap<String, ModelQuality>,
}

/// Counts per model.
pub fn summarise(reviewed: &[Reviewed]) -> QualitySummary {
    let mut out = QualitySummary::default();
    let mut judged: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in reviewed {
        let m = out.models.entry(r.model.clone()).or_default();
        m.reviewed += 1;
        m.mean_score += r.review.score.score;
        m.buckets[bucket(r.review.score.score)] += 1;
        m.with_notes += usize::from(!r.review.notes.is_empty());
        if r.outcome == Some(Outcome::Resolved) {
            m.resolved += 1;
            *m.mean_score_resolved.get_or_insert(0.0) += r.review.score.score;
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &r.review.findings {
            let k = m.kinds.entry(f.kind).or_default();
            k.findings += 1;
            if seen.insert(f.kind) {
                k.patches += 1;
            }
            if k.examples.len() < 3 {
                k.examples
                    .push(format!("{} {}: {}", r.instance_id, f.location(), f.message));
            }
        }
        if let Some(j) = r.judge_overall {
            judged.entry(&r.model).or_default().push(j);
        }
    }
    for (name, m) in out.models.iter_mut() {
        m.mean_score /= m.reviewed.max(1) as f64;
        if let Some(s) = &mut m.mean_score_resolved {
            *s /= m.resolved.max(1) as f64;
        }
        m.judge_mean = judged
            .get(name.as_str())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64);
    }
    out
}

/// `<model>  <instance>  score N  kinds`, or the notes when linters could
/// not run.
pub fn line(r: &Reviewed) -> String {
    let who = EvalName::new(&r.instance_id, r.sample.as_deref());
    let mut kinds: Vec<String> = r
        .review
        .findings
        .iter()
        .filter(|f| f.kind != FindingKind::TestsAdded)
        .map(|f| format!("{} {}", f.kind, f.location()))
        .collect();
    kinds.dedup();
    let mut s = format!("{}  {who}  score {:.0}", r.model, r.review.score.score);
    if !kinds.is_empty() {
        s.push_str(&format!("  {}", kinds.join(", ")));
    }
    if !r.review.notes.is_empty() {
        s.push_str(&format!("  [{}]", r.review.notes.join("; ")));
    }
    s
}

/// The summary table: a row per model.
pub fn table(s: &QualitySummary) -> String {
    let mut header = vec!["model", "reviewed", "mean score"];
    header.extend(BUCKETS);
    header.extend([
        "not fully linted",
        "resolved (mean)",
        "top findings (patches)",
    ]);
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for (name, m) in &s.models {
        let mut row = vec![
            name.clone(),
            m.reviewed.to_string(),
            format!("{:.1}", m.mean_score),
        ];
        row.extend(m.buckets.iter().map(usize::to_string));
        row.push(m.with_notes.to_string());
        row.push(resolved_cell(m));
        row.push(top(m, 4));
        rows.push(row);
    }
    render(&rows, Layout::default())
}

fn resolved_cell(m: &ModelQuality) -> String {
    match m.mean_score_resolved {
        Some(s) => format!("{} ({s:.1})", m.resolved),
        None => "-".into(),
    }
}

fn top(m: &ModelQuality, n: usize) -> String {
    let mut kinds: Vec<(&FindingKind, &KindCount)> = m.kinds.iter().collect();
    kinds.sort_by(|a, b| b.1.patches.cmp(&a.1.patches).then(a.0.cmp(b.0)));
    kinds
        .iter()
        .take(n)
        .map(|(k, c)| format!("{k} {}", c.patches))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Markdown quality section: score distribution per model, the most
/// frequent findings with examples.
pub fn markdown(s: &QualitySummary, reviewed: &[Reviewed]) -> String {
    let mut out = String::from("## Quality (static review)\n\n");
    out.push_str(&format!(
        "{} patches reviewed. Scores: 100 minus documented penalties per finding (docs/review.md).\n\n",
        reviewed.len()
    ));
    out.push_str("| model | reviewed | mean score |");
    for b in BUCKETS {
        out.push_str(&format!(" {b} |"));
    }
    out.push_str(" not fully linted | resolved (mean score) | judge mean |\n|---|---|---|");
    out.push_str(&"---|".repeat(BUCKETS.len() + 3));
    out.push('\n');
    for (name, m) in &s.models {
        out.push_str(&format!(
            "| {name} | {} | {:.1} |",
            m.reviewed, m.mean_score
        ));
        for b in m.buckets {
            out.push_str(&format!(" {b} |"));
        }
        let j = m.judge_mean.map_or("-".into(), |j| format!("{j:.2}"));
        out.push_str(&format!(
            " {} | {} | {j} |\n",
            m.with_notes,
            resolved_cell(m)
        ));
    }
    for (name, m) in &s.models {
        out.push_str(&format!("\n### {name}: most frequent findings\n\n"));
        if m.kinds.is_empty() {
            out.push_str("No findings.\n");
            continue;
        }
        out.push_str("| finding | patches | findings | examples |\n|---|---|---|---|\n");
        let mut kinds: Vec<(&FindingKind, &KindCount)> = m.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.patches.cmp(&a.1.patches).then(a.0.cmp(b.0)));
        for (k, c) in kinds {
            let ex: Vec<String> = c
                .examples
                .iter()
                .map(|e| format!("`{}`", e.replace('|', "\\|").replace('`', "'")))
                .collect();
            out.push_str(&format!(
                "| {k} | {} | {} | {} |\n",
                c.patches,
                c.findings,
                ex.join("<br>")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::{assemble, hygiene, Finding};

    fn reviewed(model: &str, id: &str, kinds: &[FindingKind]) -> Reviewed {
        let h = hygiene::Hygiene {
            findings: kinds
                .iter()
                .map(|k| Finding {
                    kind: *k,
                    file: Some("a.py".into()),
                    lines: vec![3],
                    message: "m".into(),
                    excerpt: None,
                })
                .collect(),
            ..hygiene::Hygiene::default()
        };
        Reviewed {
            instance_id: id.into(),
            model: model.into(),
            sample: None,
            review: assemble(h, None, Vec::new(), Vec::new()),
            judge_overall: None,
            outcome: (id == "i-1").then_some(Outcome::Resolved),
            seconds: 0.1,
        }
    }

    #[test]
    fn summary_counts_patches_and_buckets() {
        let r = vec![
            reviewed("a", "i-1", &[]),
            reviewed(
                "a",
                "i-2",
                &[FindingKind::DebugPrint, FindingKind::DebugPrint],
            ),
            reviewed("b", "i-1", &[FindingKind::UnrelatedFile]),
        ];
        let s = summarise(&r);
        let a = &s.models["a"];
        assert_eq!(a.reviewed, 2);
        assert_eq!(a.buckets, [1, 0, 1, 0, 0]);
        assert_eq!(a.mean_score, 90.0);
        let d = &a.kinds[&FindingKind::DebugPrint];
        assert_eq!((d.patches, d.findings), (1, 2));
        assert_eq!(d.examples[0], "i-2 a.py:3: m");
        assert!(table(&s).contains("debug_print 1"));
        let md = markdown(&s, &r);
        assert!(
            md.contains("| a | 2 | 90.0 | 1 | 0 | 1 | 0 | 0 | 0 | 1 (100.0) | - |"),
            "{md}"
        );
        assert!(
            md.contains("| debug_print | 1 | 2 | `i-2 a.py:3: m`<br>`i-2 a.py:3: m` |"),
            "{md}"
        );
        assert_eq!(line(&r[1]), "a  i-2  score 80  debug_print a.py:3");
    }

    #[test]
    fn a_review_file_reads_back_as_its_table_cell() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_cell(d.path()).unwrap().is_none());
        let mut r = reviewed(
            "a",
            "i-2",
            &[
                FindingKind::UnrelatedFile,
                FindingKind::DebugPrint,
                FindingKind::DebugPrint,
                FindingKind::TestsAdded,
            ],
        );
        r.review.notes.push("not run: flake8 base lint".into());
        // What `review` writes: the review under "review", beside other keys.
        let file = serde_json::json!({"instance_id": "i-2", "review": r.review, "seconds": 0.5});
        std::fs::write(d.path().join("review.json"), file.to_string()).unwrap();
        let cell = read_cell(d.path()).unwrap().unwrap();
        assert_eq!(
            cell.kinds,
            vec![FindingKind::DebugPrint, FindingKind::UnrelatedFile]
        );
        assert_eq!(cell.score, r.review.score.score);
        assert_eq!(cell.text(), "72* debug_print, unrelated_file");
        std::fs::write(d.path().join("review.json"), "{\"review\": 3}").unwrap();
        let e = read_cell(d.path()).unwrap_err().to_string();
        assert!(e.contains("review.json is not a review file"), "{e}");
    }
}
