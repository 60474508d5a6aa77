//! The static rubric on two trees on this host: the base checkout and the
//! patched one. The container form (phase 2) runs the same ruff arguments in
//! the instance's image with ruff in a tool layer and feeds the same parsers;
//! this form serves `--backend local` and the tests.
//!
//! Only the Python files the patch touches are linted, on each side (their
//! base paths in the base tree, their new paths in the patched tree), from
//! the tree's root so the project's own ruff configuration applies. A linter
//! that cannot run leaves a note and no delta: it is never counted as clean.

use std::path::{Path, PathBuf};

use super::complexity::{self, ComplexityChange};
use super::hygiene::{self, Context};
use super::lines::{parse_diff, DiffFile};
use super::lint::{self, Delta, LintError, LintFinding};
use super::{assemble, StaticReview};

/// Where the tools are.
#[derive(Debug, Clone)]
pub struct LocalTools {
    /// A ruff executable (path, or a name on PATH) at [`lint::RUFF_VERSION`].
    pub ruff: PathBuf,
}

fn python_paths<'a>(
    files: &'a [DiffFile],
    side: impl Fn(&'a DiffFile) -> Option<&'a str>,
    root: &Path,
) -> Vec<&'a str> {
    files
        .iter()
        .filter_map(side)
        .filter(|p| p.ends_with(".py") && root.join(p).is_file())
        .collect()
}

fn run(tools: &LocalTools, root: &Path, args: Vec<String>) -> Result<Vec<LintFinding>, LintError> {
    lint::run_ruff(&tools.ruff, root, &args)
}

type Sides = (Vec<LintFinding>, Vec<LintFinding>, Option<String>);

/// ruff on both trees, with the project's configuration when it has one.
/// A configuration ruff rejects on the base side (or with no base side to
/// lint) makes both sides lint with [`lint::ruff_isolated_args`], with a
/// note, as the review script does; one the patch broke stays an error.
fn ruff_lint(
    tools: &LocalTools,
    base: &Path,
    patched: &Path,
    old: &[&str],
    new: &[&str],
    configured: bool,
) -> Result<Sides, LintError> {
    let isolated = |why: String| -> Result<Sides, LintError> {
        let b = if old.is_empty() {
            Vec::new()
        } else {
            run(tools, base, lint::ruff_isolated_args(old))?
        };
        Ok((
            b,
            run(tools, patched, lint::ruff_isolated_args(new))?,
            Some(why),
        ))
    };
    let b = if old.is_empty() {
        None
    } else {
        match run(tools, base, lint::ruff_check_args(old, configured)) {
            Ok(b) => Some(b),
            Err(LintError::Failed { code, stderr, .. }) if configured => {
                return isolated(lint::fallback_note(code, &stderr))
            }
            Err(e) => return Err(e),
        }
    };
    match (
        run(tools, patched, lint::ruff_check_args(new, configured)),
        b,
    ) {
        (Ok(p), b) => Ok((b.unwrap_or_default(), p, None)),
        (Err(LintError::Failed { code, stderr, .. }), None) if configured => {
            isolated(lint::fallback_note(code, &stderr))
        }
        (Err(e), _) => Err(e),
    }
}

/// Lints both trees and reviews the patch: hygiene, lint delta, complexity.
pub fn review_trees(
    tools: &LocalTools,
    base: &Path,
    patched: &Path,
    patch: &str,
    ctx: &Context,
) -> StaticReview {
    let h = hygiene::check(patch, ctx);
    let mut notes = Vec::new();
    let files = match parse_diff(patch) {
        Ok(f) => f,
        Err(e) => {
            notes.push(format!("linters not run: the patch does not parse ({e})"));
            return assemble(h, None, Vec::new(), notes);
        }
    };
    let old = python_paths(&files, |f| f.old_path.as_deref(), base);
    let new = python_paths(&files, |f| f.new_path.as_deref(), patched);
    if new.is_empty() {
        return assemble(h, None, Vec::new(), notes);
    }
    let configured = lint::ruff_configured(base);
    let lint_both = |args: &dyn Fn(&[&str]) -> Vec<String>| -> Result<(Vec<LintFinding>, Vec<LintFinding>), LintError> {
        let b = if old.is_empty() {
            Vec::new()
        } else {
            run(tools, base, args(&old))?
        };
        Ok((b, run(tools, patched, args(&new))?))
    };
    let delta: Option<Delta> = match ruff_lint(tools, base, patched, &old, &new, configured) {
        Ok((b, p, fallback)) => {
            notes.extend(fallback);
            Some(lint::delta(&b, &p, &files))
        }
        Err(e) => {
            notes.push(format!("ruff not run: {e}"));
            None
        }
    };
    let cx: Vec<ComplexityChange> = match lint_both(&complexity::ruff_complexity_args) {
        Ok((b, p)) => complexity::complexity_delta(
            &complexity::parse_complexity(&b),
            &complexity::parse_complexity(&p),
            &files,
        ),
        Err(e) => {
            notes.push(format!("complexity not measured: {e}"));
            Vec::new()
        }
    };
    assemble(h, delta, cx, notes)
}
