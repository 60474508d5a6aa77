//! One number per patch: 100 minus the penalties of its findings.
//!
//! Each finding kind costs a fixed number of points per finding, up to a cap
//! for the kind, so that one noisy category cannot sink a patch alone; the
//! score is floored at 0. It depends only on the multiset of finding kinds,
//! never on their order, timing or messages, so it is the same on every run
//! over the same findings. The table is [`WEIGHTS`], and docs/review.md shows
//! it (a test keeps the two equal).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Finding, FindingKind};

/// The score of a patch with no findings.
pub const FULL: f64 = 100.0;

/// (kind, points per finding, cap for the kind).
pub const WEIGHTS: [(FindingKind, f64, f64); 15] = [
    (FindingKind::NewSyntaxError, 40.0, 40.0),
    (FindingKind::NewLint, 6.0, 30.0),
    (FindingKind::ComplexityIncrease, 4.0, 12.0),
    (FindingKind::DebuggerCall, 20.0, 40.0),
    (FindingKind::DebugPrint, 10.0, 30.0),
    (FindingKind::CommentedOutCode, 5.0, 15.0),
    (FindingKind::TodoAdded, 3.0, 9.0),
    (FindingKind::WhitespaceOnlyHunk, 4.0, 12.0),
    (FindingKind::WhitespaceChurn, 2.0, 6.0),
    (FindingKind::UnrelatedFile, 8.0, 24.0),
    (FindingKind::TestEdited, 3.0, 9.0),
    (FindingKind::LargerThanGold, 8.0, 8.0),
    (FindingKind::MoreFilesThanGold, 4.0, 4.0),
    (FindingKind::Unreadable, 100.0, 100.0),
    (FindingKind::TestsAdded, 0.0, 0.0),
];

/// The points and cap of a kind.
pub fn weight(kind: FindingKind) -> (f64, f64) {
    WEIGHTS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map_or((0.0, 0.0), |(_, p, c)| (*p, *c))
}

/// What one kind of finding cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Penalty {
    pub kind: FindingKind,
    pub count: usize,
    pub points: f64,
}

/// A patch's score with its breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// 0 to 100.
    pub score: f64,
    /// By kind, in [`FindingKind`] order; kinds that cost nothing left out.
    pub penalties: Vec<Penalty>,
}

/// Scores a patch's findings.
pub fn score(findings: &[Finding]) -> Score {
    let mut counts: BTreeMap<FindingKind, usize> = BTreeMap::new();
    for f in findings {
        *counts.entry(f.kind).or_default() += 1;
    }
    let mut penalties = Vec::new();
    let mut total = 0.0;
    for (kind, count) in counts {
        let (per, cap) = weight(kind);
        let points = (per * count as f64).min(cap);
        if points > 0.0 {
            total += points;
            penalties.push(Penalty {
                kind,
                count,
                points,
            });
        }
    }
    Score {
        score: (FULL - total).max(0.0),
        penalties,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kind: FindingKind) -> Finding {
        Finding {
            kind,
            file: Some("m.py".into()),
            lines: vec![1],
            message: String::new(),
            excerpt: None,
        }
    }

    #[test]
    fn penalties_add_up_with_caps() {
        assert_eq!(score(&[]).score, 100.0);
        let s = score(&[
            f(FindingKind::NewLint),
            f(FindingKind::NewLint),
            f(FindingKind::DebugPrint),
            f(FindingKind::TestsAdded),
        ]);
        assert_eq!(s.score, 100.0 - 12.0 - 10.0);
        assert_eq!(s.penalties.len(), 2);
        // Ten new lint findings cost the cap, 30.
        let many: Vec<Finding> = (0..10).map(|_| f(FindingKind::NewLint)).collect();
        assert_eq!(score(&many).score, 70.0);
        // Floored at 0.
        let worst: Vec<Finding> = WEIGHTS.iter().map(|(k, _, _)| f(*k)).collect();
        assert_eq!(score(&worst).score, 0.0);
    }

    #[test]
    fn stable_whatever_the_order() {
        let mut v = vec![
            f(FindingKind::UnrelatedFile),
            f(FindingKind::CommentedOutCode),
            f(FindingKind::NewLint),
            f(FindingKind::UnrelatedFile),
        ];
        let a = score(&v);
        v.reverse();
        assert_eq!(score(&v), a);
        assert_eq!(a.score, 100.0 - 16.0 - 5.0 - 6.0);
    }

    /// Exhaustive: a new kind fails to compile here until it is weighed.
    fn listed(k: FindingKind) -> bool {
        use FindingKind::*;
        match k {
            NewLint | NewSyntaxError | ComplexityIncrease | DebugPrint | DebuggerCall
            | CommentedOutCode | TodoAdded | WhitespaceOnlyHunk | WhitespaceChurn
            | UnrelatedFile | TestEdited | TestsAdded | LargerThanGold | MoreFilesThanGold
            | Unreadable => WEIGHTS.iter().any(|(w, _, _)| *w == k),
        }
    }

    #[test]
    fn every_kind_has_a_weight_and_the_docs_show_the_table() {
        assert!(WEIGHTS.iter().all(|(k, _, _)| listed(*k)));
        assert_eq!(WEIGHTS.len(), 15, "every FindingKind once");
        let kinds: std::collections::BTreeSet<FindingKind> =
            WEIGHTS.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(kinds.len(), WEIGHTS.len());
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/review.md"),
        )
        .expect("docs/review.md");
        for (k, per, cap) in WEIGHTS {
            let row = format!("| `{}` | {per} | {cap} |", k.name());
            assert!(doc.contains(&row), "docs/review.md lacks the row {row}");
        }
    }
}
