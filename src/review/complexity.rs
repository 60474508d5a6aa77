//! Cyclomatic complexity of the functions a patch touches, before and after.
//!
//! The figures come from ruff's mccabe rule (C901) run with a maximum of 0,
//! so that every function is reported with its complexity, on both trees
//! (see [`ruff_complexity_args`]). A function is touched when a line the
//! patch wrote lies in its extent: from its `def` line to the line before
//! the next `def` at the same or a shallower indentation (C901 reports the
//! name's column, which orders nesting). Lines of a class body after its last
//! method count towards that method; the imprecision only widens "touched".

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use super::lines::{DiffFile, LineMap};
use super::lint::LintFinding;

/// Arguments of the complexity run: ruff's mccabe rule alone, with no
/// project configuration (a project's `max-complexity` would hide
/// functions), every function reported.
pub fn ruff_complexity_args(paths: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "check",
        "--isolated",
        "--select",
        "C901",
        "--config",
        "lint.mccabe.max-complexity=0",
        "--output-format",
        "json",
        "--no-cache",
        "--exit-zero",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(paths.iter().map(|p| p.to_string()));
    a
}

/// One function's complexity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct FunctionComplexity {
    pub file: String,
    /// Line and column of the function's name.
    pub line: usize,
    pub col: usize,
    pub name: String,
    pub complexity: u32,
}

static C901: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^`([^`]+)` is too complex \((\d+) > \d+\)").expect("regex"));

/// The C901 findings of a ruff run, as complexities; other rules ignored.
pub fn parse_complexity(findings: &[LintFinding]) -> Vec<FunctionComplexity> {
    let mut out: Vec<FunctionComplexity> = findings
        .iter()
        .filter(|f| f.rule == "C901")
        .filter_map(|f| {
            let c = C901.captures(&f.message)?;
            Some(FunctionComplexity {
                file: f.file.clone(),
                line: f.line,
                col: f.col,
                name: c[1].to_string(),
                complexity: c[2].parse().ok()?,
            })
        })
        .collect();
    out.sort();
    out
}

/// A touched function's complexity before and after the patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComplexityChange {
    pub file: String,
    pub name: String,
    /// Line of the name in the patched file.
    pub line: usize,
    /// `None` for a function the patch adds.
    pub before: Option<u32>,
    pub after: u32,
}

impl ComplexityChange {
    /// After minus before (a new function counts from 0).
    pub fn delta(&self) -> i64 {
        i64::from(self.after) - i64::from(self.before.unwrap_or(0))
    }
}

/// For each function of the patched tree that the patch touched, its
/// complexity before and after. Base functions are matched through the line
/// map (the `def` line's origin), else by name within the file.
pub fn complexity_delta(
    base: &[FunctionComplexity],
    patched: &[FunctionComplexity],
    files: &[DiffFile],
) -> Vec<ComplexityChange> {
    let mut by_file: BTreeMap<&str, Vec<&FunctionComplexity>> = BTreeMap::new();
    for f in patched {
        by_file.entry(f.file.as_str()).or_default().push(f);
    }
    let mut out = Vec::new();
    for file in files {
        let (Some(new_path), map) = (file.new_path.as_deref(), file.line_map()) else {
            continue;
        };
        let Some(funcs) = by_file.get_mut(new_path) else {
            continue;
        };
        funcs.sort();
        // Blank lines written between functions touch neither.
        let touched: Vec<usize> = file
            .added()
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(n, _)| n)
            .collect();
        let old_path = file.old_path.as_deref();
        let base_funcs: Vec<&FunctionComplexity> = base
            .iter()
            .filter(|b| Some(b.file.as_str()) == old_path)
            .collect();
        for (i, f) in funcs.iter().enumerate() {
            let end = funcs[i + 1..]
                .iter()
                .find(|g| g.col <= f.col)
                .map_or(usize::MAX, |g| g.line);
            if !touched.iter().any(|&t| t >= f.line && t < end) {
                continue;
            }
            out.push(ComplexityChange {
                file: f.file.clone(),
                name: f.name.clone(),
                line: f.line,
                before: before_of(f, &base_funcs, &map),
                after: f.complexity,
            });
        }
    }
    out
}

fn before_of(f: &FunctionComplexity, base: &[&FunctionComplexity], map: &LineMap) -> Option<u32> {
    if let Some(b) = map.origin(f.line).base_line() {
        if let Some(g) = base.iter().find(|g| g.line == b && g.name == f.name) {
            return Some(g.complexity);
        }
    }
    let mut same_name = base.iter().filter(|g| g.name == f.name);
    match (same_name.next(), same_name.next()) {
        (Some(g), None) => Some(g.complexity),
        _ => None,
    }
}

/// A new function at or above this complexity is a finding (ruff's and
/// mccabe's usual maximum is 10).
pub const NEW_FUNCTION_MAX: u32 = 11;

/// A touched function whose complexity rises by this much is a finding; a
/// fix that adds one guard (+1) or two is ordinary.
pub const RISE_MIN: i64 = 3;

/// Touched functions whose complexity rose by [`RISE_MIN`] or more or went
/// past 10, and new functions at or above [`NEW_FUNCTION_MAX`], as review
/// findings.
pub fn findings_of(changes: &[ComplexityChange]) -> Vec<super::Finding> {
    changes
        .iter()
        .filter(|c| match c.before {
            Some(b) => {
                c.delta() >= RISE_MIN || (b < NEW_FUNCTION_MAX && c.after >= NEW_FUNCTION_MAX)
            }
            None => c.after >= NEW_FUNCTION_MAX,
        })
        .map(|c| super::Finding {
            kind: super::FindingKind::ComplexityIncrease,
            file: Some(c.file.clone()),
            lines: vec![c.line],
            message: match c.before {
                Some(b) => format!("`{}`: cyclomatic complexity {b} -> {}", c.name, c.after),
                None => format!(
                    "new function `{}` has cyclomatic complexity {}",
                    c.name, c.after
                ),
            },
            excerpt: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_changes_are_findings() {
        let c = |before, after| ComplexityChange {
            file: "m.py".into(),
            name: "f".into(),
            line: 1,
            before,
            after,
        };
        let found = |v: &[ComplexityChange]| findings_of(v).len();
        assert_eq!(found(&[c(Some(1), 2), c(Some(4), 6), c(None, 10)]), 0);
        assert_eq!(found(&[c(Some(1), 4)]), 1);
        assert_eq!(found(&[c(Some(10), 11)]), 1);
        assert_eq!(found(&[c(None, 11)]), 1);
        assert!(findings_of(&[c(Some(2), 7)])[0].message.contains("2 -> 7"));
    }
    use crate::review::lines::parse_diff;
    use crate::review::lint::Tool;

    fn c901(line: usize, col: usize, name: &str, n: u32) -> LintFinding {
        LintFinding {
            tool: Tool::Ruff,
            rule: "C901".into(),
            file: "m.py".into(),
            line,
            col,
            // As ruff 0.17.6 writes it.
            message: format!("`{name}` is too complex ({n} > 0)"),
        }
    }

    #[test]
    fn touched_functions_with_before_and_after() {
        // f gains a branch; g is untouched but moves down; h is new.
        let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,5 @@\n def f(x):\n+    if x:\n+        return 0\n     return 1\n \n@@ -7,0 +10,3 @@\n+def h(y):\n+    return y\n+\n";
        let files = parse_diff(p).unwrap();
        let base = parse_complexity(&[c901(1, 5, "f", 1), c901(5, 5, "g", 3)]);
        let patched =
            parse_complexity(&[c901(1, 5, "f", 2), c901(7, 5, "g", 3), c901(10, 5, "h", 1)]);
        assert_eq!(patched.len(), 3);
        let d = complexity_delta(&base, &patched, &files);
        let got: Vec<(&str, Option<u32>, u32, i64)> = d
            .iter()
            .map(|c| (c.name.as_str(), c.before, c.after, c.delta()))
            .collect();
        assert_eq!(got, vec![("f", Some(1), 2, 1), ("h", None, 1, 1)]);
    }

    #[test]
    fn a_nested_function_ends_at_the_next_outer_def() {
        // Method `a` (col 9) then `b` (col 9) in a class; the change is in b.
        let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -6,1 +6,1 @@\n-        return 1\n+        return 2\n";
        let files = parse_diff(p).unwrap();
        let funcs = parse_complexity(&[c901(2, 9, "a", 1), c901(5, 9, "b", 1)]);
        let d = complexity_delta(&funcs, &funcs, &files);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].name.as_str(), d[0].delta()), ("b", 0));
    }
}
