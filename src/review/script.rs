//! The review script: lints the base tree, puts the patched files in place,
//! lints again, all in one shell script whose log [`parse_log`] reads. The
//! same script runs in the instance's container (the linters in a tool
//! layer, not in the project's env) and on a host, so the backends only run
//! it, as they run the eval script.
//!
//! The script lints the tree at `root` (the base), then copies the patched
//! versions of the touched files from `patched_dir` over it and removes the
//! files the patch deletes, then lints again. Each run's stdout sits between
//! `>>>>> review <tool> <side> <run>` and `>>>>> review exit <code>` (a
//! newline is written before each marker: tools do not always end their
//! output with one), its stderr in the lines after, up to `>>>>> review
//! end`. A run that exits
//! non-zero (every run passes `--exit-zero`) or whose output does not parse
//! is a failure with its stderr, never an empty result.

use std::collections::BTreeMap;
use std::path::Path;

use super::complexity::{self, ruff_complexity_args};
use super::hygiene::Hygiene;
use super::lines::DiffFile;
use super::lint::{self, Delta, LintFinding, Tool};
use super::StaticReview;

/// What the tool layer installs (`pip install` into its own venv).
pub fn tool_requirements() -> Vec<String> {
    vec![
        format!("ruff=={}", lint::RUFF_VERSION),
        format!("flake8=={}", lint::FLAKE8_VERSION),
        format!("pylint=={}", lint::PYLINT_VERSION),
    ]
}

/// Which side of the patch a run linted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    Base,
    Patched,
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Run {
    /// The linter's findings.
    Lint,
    /// ruff's C901 at maximum 0.
    Complexity,
}

/// What the script does.
#[derive(Debug, Clone)]
pub struct ScriptSpec<'a> {
    /// The tree, at the base: `/testbed` in containers.
    pub root: &'a str,
    /// Folder with the tools' executables (`ruff`, `flake8`, `pylint`).
    pub tool_bin: &'a str,
    /// Folder holding the patched versions of the touched files, by path.
    pub patched_dir: &'a str,
    /// Python files to lint on the base side (the patch's old paths).
    pub base_paths: Vec<String>,
    /// Python files to lint on the patched side (its new paths).
    pub new_paths: Vec<String>,
    /// Every file the patch writes (copied from `patched_dir`).
    pub written: Vec<String>,
    /// Files the patch deletes.
    pub deleted: Vec<String>,
    /// Linters besides ruff (see [`lint::configured`]).
    pub extra: Vec<Tool>,
    /// The project configures ruff ([`lint::ruff_configured`]); otherwise
    /// ruff checks [`lint::DEFAULT_SELECT`].
    pub ruff_configured: bool,
}

/// Single-quotes a word for the shell.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn runs(extra: &[Tool]) -> Vec<(Tool, Run)> {
    let mut v = vec![(Tool::Ruff, Run::Lint), (Tool::Ruff, Run::Complexity)];
    v.extend(
        extra
            .iter()
            .filter(|t| **t != Tool::Ruff)
            .map(|t| (*t, Run::Lint)),
    );
    v
}

fn args(tool: Tool, run: Run, paths: &[&str], ruff_configured: bool) -> Vec<String> {
    match (tool, run) {
        (Tool::Ruff, Run::Complexity) => ruff_complexity_args(paths),
        (Tool::Ruff, Run::Lint) => lint::ruff_check_args(paths, ruff_configured),
        (Tool::Flake8, _) => lint::flake8_args(paths),
        (Tool::Pylint, _) => lint::pylint_args(paths),
    }
}

fn run_name(run: Run) -> &'static str {
    match run {
        Run::Lint => "lint",
        Run::Complexity => "complexity",
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Base => "base",
        Side::Patched => "patched",
    }
}

/// ruff's lint run in a project that configures ruff: when ruff rejects the
/// configuration (a non-zero exit despite `--exit-zero`), the rejection goes
/// to the log between `>>>>> review fallback ruff <code>` and `>>>>> review
/// fallback end`, and this run and every later one lint with
/// [`lint::ruff_isolated_args`], so both sides of the delta use the same
/// rules. The patched side falls back only when the base side did not lint
/// with the configuration: a configuration the patch itself broke stays a
/// failure.
fn ruff_lint_with_fallback(spec: &ScriptSpec, side: Side, p: &[&str]) -> String {
    let exe = q(&format!("{}/ruff", spec.tool_bin.trim_end_matches('/')));
    let join = |a: Vec<String>| a.iter().map(|x| q(x)).collect::<Vec<_>>().join(" ");
    let configured = join(lint::ruff_check_args(p, true));
    let isolated = join(lint::ruff_isolated_args(p));
    let (may_fall_back, after) = match side {
        Side::Base => ("", "elif [ $rc -eq 0 ]; then\n  PGRUFF_BASE_OK=1\n"),
        Side::Patched => (" && [ -z \"$PGRUFF_BASE_OK\" ]", ""),
    };
    format!(
        "if [ -z \"$PGRUFF_ISO\" ]; then\n  {exe} {configured} >\"$OUT\" 2>\"$ERR\"\n  rc=$?\n  if [ $rc -ne 0 ]{may_fall_back}; then\n    echo \">>>>> review fallback ruff $rc\"\n    cat \"$ERR\"\n    echo\n    echo '>>>>> review fallback end'\n    PGRUFF_ISO=1\n  fi\nfi\nif [ -n \"$PGRUFF_ISO\" ]; then\n  {exe} {isolated} >\"$OUT\" 2>\"$ERR\"\n  rc=$?\n{after}fi\necho '>>>>> review ruff {} lint'\ncat \"$OUT\"\necho\necho \">>>>> review exit $rc\"\ncat \"$ERR\"\necho\necho '>>>>> review end'\n",
        side_name(side)
    )
}

/// The bash script.
pub fn build(spec: &ScriptSpec) -> String {
    let mut s = String::from("#!/bin/bash\n# patchgrade review: lint base, put the patched files in place, lint again.\nset -u\n");
    s.push_str(&format!(
        "cd {} || exit 90\nERR=$(mktemp)\nOUT=$(mktemp)\nPGRUFF_ISO=\nPGRUFF_BASE_OK=\n",
        q(spec.root)
    ));
    let emit = |s: &mut String, side: Side, paths: &[String]| {
        if paths.is_empty() {
            return;
        }
        let p: Vec<&str> = paths.iter().map(String::as_str).collect();
        for (tool, run) in runs(&spec.extra) {
            if spec.ruff_configured && (tool, run) == (Tool::Ruff, Run::Lint) {
                s.push_str(&ruff_lint_with_fallback(spec, side, &p));
                continue;
            }
            let argv: Vec<String> = args(tool, run, &p, spec.ruff_configured)
                .iter()
                .map(|a| q(a))
                .collect();
            s.push_str(&format!(
                "echo '>>>>> review {} {} {}'\n{} {} 2>\"$ERR\"\nrc=$?\necho\necho \">>>>> review exit $rc\"\ncat \"$ERR\"\necho\necho '>>>>> review end'\n",
                tool.name(),
                side_name(side),
                run_name(run),
                q(&format!("{}/{}", spec.tool_bin.trim_end_matches('/'), tool.name())),
                argv.join(" ")
            ));
        }
    };
    emit(&mut s, Side::Base, &spec.base_paths);
    for f in &spec.deleted {
        s.push_str(&format!("rm -f -- {}\n", q(f)));
    }
    for f in &spec.written {
        s.push_str(&format!(
            "mkdir -p -- \"$(dirname -- {0})\" && cp -- {1} {0} || echo '>>>>> review copy failed {2}'\n",
            q(f),
            q(&format!("{}/{}", spec.patched_dir.trim_end_matches('/'), f)),
            f.replace('\'', "")
        ));
    }
    emit(&mut s, Side::Patched, &spec.new_paths);
    s.push_str("rm -f \"$ERR\" \"$OUT\"\n");
    s
}

/// The findings of every run that succeeded, and why the others failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptResult {
    pub findings: BTreeMap<(Tool, Side, Run), Vec<LintFinding>>,
    /// `tool side run: reason` of runs that failed or are missing.
    pub failures: Vec<String>,
    /// What the review should say besides: ruff's fallback from a
    /// configuration it rejected ([`lint::fallback_note`]).
    pub notes: Vec<String>,
}

impl ScriptResult {
    /// Both sides of a run, when both succeeded (a side that was not linted,
    /// a file added or deleted, is empty).
    pub fn pair(
        &self,
        tool: Tool,
        run: Run,
        spec: &ScriptSpec,
    ) -> Option<(Vec<LintFinding>, Vec<LintFinding>)> {
        let side = |s: Side, paths: &[String]| -> Option<Vec<LintFinding>> {
            if paths.is_empty() {
                return Some(Vec::new());
            }
            self.findings.get(&(tool, s, run)).cloned()
        };
        Some((
            side(Side::Base, &spec.base_paths)?,
            side(Side::Patched, &spec.new_paths)?,
        ))
    }
}

/// The paths of a script spec from a patch's files: Python files linted on
/// each side, files written and deleted.
pub fn paths_of(files: &[DiffFile]) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    let py = |p: &&String| p.ends_with(".py");
    let base = files
        .iter()
        .filter_map(|f| f.old_path.as_ref())
        .filter(py)
        .cloned()
        .collect();
    let new = files
        .iter()
        .filter_map(|f| f.new_path.as_ref())
        .filter(py)
        .cloned()
        .collect();
    let written = files.iter().filter_map(|f| f.new_path.clone()).collect();
    // A rename's source goes too.
    let deleted = files
        .iter()
        .filter(|f| f.new_path.is_none() || (f.old_path.is_some() && f.old_path != f.new_path))
        .filter_map(|f| f.old_path.clone())
        .collect();
    (base, new, written, deleted)
}

/// The static review from the script's results: every linter's delta (one
/// [`Delta`] over all tools; findings name their tool; a new finding of the
/// same rule code at the same line from a second tool, flake8's F401 beside
/// ruff's, counted once), ruff's complexity, the hygiene findings; failed
/// runs become notes.
pub fn review_from(
    result: &ScriptResult,
    spec: &ScriptSpec,
    files: &[DiffFile],
    hygiene: Hygiene,
) -> StaticReview {
    let mut notes: Vec<String> = result
        .failures
        .iter()
        .map(|f| format!("not run: {f}"))
        .collect();
    notes.extend(result.notes.iter().cloned());
    let mut delta: Option<Delta> = None;
    for (tool, _) in runs(&spec.extra)
        .into_iter()
        .filter(|(_, r)| *r == Run::Lint)
    {
        if let Some((b, p)) = result.pair(tool, Run::Lint, spec) {
            let d = lint::delta(&b, &p, files);
            let acc = delta.get_or_insert_with(Delta::default);
            acc.new.extend(d.new);
            acc.induced.extend(d.induced);
            acc.fixed.extend(d.fixed);
            acc.kept += d.kept;
        }
    }
    // flake8 reports pyflakes' codes as ruff does: one finding, not two.
    if let Some(d) = &mut delta {
        let mut seen = std::collections::BTreeSet::new();
        d.new
            .retain(|f| seen.insert((f.file.clone(), f.line, f.rule.clone())));
    }
    let cx = match result.pair(Tool::Ruff, Run::Complexity, spec) {
        Some((b, p)) => complexity::complexity_delta(
            &complexity::parse_complexity(&b),
            &complexity::parse_complexity(&p),
            files,
        ),
        None => Vec::new(),
    };
    if spec.new_paths.is_empty() && spec.base_paths.is_empty() {
        notes.push("no Python file touched: nothing to lint (the rubric's linters are Python's; other languages are not linted yet)".into());
    }
    super::assemble(hygiene, delta, cx, notes)
}

fn tool_of(name: &str) -> Option<Tool> {
    [Tool::Ruff, Tool::Flake8, Tool::Pylint]
        .into_iter()
        .find(|t| t.name() == name)
}

/// Reads the script's log (stdout and stderr interleaved as the backends
/// record them). Runs the spec expects but the log lacks are failures.
pub fn parse_log(log: &str, spec: &ScriptSpec) -> ScriptResult {
    let root = Path::new(spec.root);
    let mut out = ScriptResult::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut lines = log.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(f) = line.strip_prefix(">>>>> review copy failed ") {
            out.failures
                .push(format!("could not put the patched {f} in place"));
            continue;
        }
        if let Some(code) = line.strip_prefix(">>>>> review fallback ruff ") {
            let mut stderr = String::new();
            for l in lines.by_ref() {
                if l == ">>>>> review fallback end" {
                    break;
                }
                stderr.push_str(l);
                stderr.push('\n');
            }
            out.notes
                .push(lint::fallback_note(code.trim().parse().ok(), &stderr));
            continue;
        }
        let Some(head) = line.strip_prefix(">>>>> review ") else {
            continue;
        };
        let mut w = head.split_whitespace();
        let (Some(tool), Some(side), Some(run)) = (w.next().and_then(tool_of), w.next(), w.next())
        else {
            continue;
        };
        let side = if side == "base" {
            Side::Base
        } else {
            Side::Patched
        };
        let run = if run == "complexity" {
            Run::Complexity
        } else {
            Run::Lint
        };
        let mut stdout = String::new();
        let mut code = None;
        for l in lines.by_ref() {
            if let Some(c) = l.strip_prefix(">>>>> review exit ") {
                code = c.trim().parse::<i32>().ok();
                break;
            }
            stdout.push_str(l);
            stdout.push('\n');
        }
        let mut stderr = String::new();
        for l in lines.by_ref() {
            if l == ">>>>> review end" {
                break;
            }
            stderr.push_str(l);
            stderr.push('\n');
        }
        let name = format!("{} {} {}", tool.name(), side_name(side), run_name(run));
        seen.insert((tool, side, run));
        if code != Some(0) {
            out.failures
                .push(format!("{name}: exit {code:?}: {}", stderr.trim()));
            continue;
        }
        let parsed = match tool {
            Tool::Ruff => lint::parse_ruff(&stdout, root),
            Tool::Flake8 => lint::parse_flake8(&stdout, root),
            Tool::Pylint => lint::parse_pylint(&stdout, root),
        };
        match parsed {
            Ok(f) => {
                out.findings.insert((tool, side, run), f);
            }
            Err(e) => out.failures.push(format!("{name}: {e}")),
        }
    }
    for (side, paths) in [
        (Side::Base, &spec.base_paths),
        (Side::Patched, &spec.new_paths),
    ] {
        if paths.is_empty() {
            continue;
        }
        for (tool, run) in runs(&spec.extra) {
            if !seen.contains(&(tool, side, run)) {
                out.failures.push(format!(
                    "{} {} {}: not in the log",
                    tool.name(),
                    side_name(side),
                    run_name(run)
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ScriptSpec<'static> {
        ScriptSpec {
            root: "/testbed",
            tool_bin: "/opt/pgtools/bin",
            patched_dir: "/tmp/pg-review/new",
            base_paths: vec!["pkg/it's.py".into()],
            new_paths: vec!["pkg/it's.py".into()],
            written: vec!["pkg/it's.py".into()],
            deleted: vec!["old.py".into()],
            extra: vec![Tool::Flake8],
            ruff_configured: false,
        }
    }

    #[test]
    fn script_quotes_paths_and_brackets_every_run() {
        let s = build(&spec());
        assert!(s.contains("'/opt/pgtools/bin/ruff' 'check' '--output-format' 'json'"));
        assert!(s.contains(r"'pkg/it'\''s.py'"));
        assert_eq!(s.matches(">>>>> review ruff base lint").count(), 1);
        assert_eq!(s.matches(">>>>> review flake8 patched lint").count(), 1);
        assert_eq!(s.matches("echo '>>>>> review end'").count(), 6);
        // Deleted files go before the copy, and both before the patched runs.
        let (rm, cp, patched) = (
            s.find("rm -f -- 'old.py'").unwrap(),
            s.find("cp -- '/tmp/pg-review/new/pkg/it'").unwrap(),
            s.find(">>>>> review ruff patched").unwrap(),
        );
        assert!(s.find(">>>>> review ruff base").unwrap() < rm && rm < cp && cp < patched);
        assert_eq!(
            tool_requirements()[0],
            format!("ruff=={}", lint::RUFF_VERSION)
        );
    }

    #[test]
    fn log_with_a_failed_run_and_a_missing_one() {
        let sp = spec();
        let log = ">>>>> review ruff base lint\n[]\n>>>>> review exit 0\n>>>>> review end\n\
>>>>> review ruff base complexity\n[]\n>>>>> review exit 0\n>>>>> review end\n\
>>>>> review flake8 base lint\n>>>>> review exit 127\nbash: flake8: command not found\n>>>>> review end\n\
>>>>> review ruff patched lint\n[{\"code\":\"F401\",\"filename\":\"/testbed/pkg/it's.py\",\"location\":{\"row\":3,\"column\":8},\"message\":\"x\"}]\n>>>>> review exit 0\n>>>>> review end\n";
        let r = parse_log(log, &sp);
        assert_eq!(
            r.findings[&(Tool::Ruff, Side::Patched, Run::Lint)][0].file,
            "pkg/it's.py"
        );
        assert_eq!(r.failures.len(), 3, "{:?}", r.failures);
        assert!(r.failures[0]
            .contains("flake8 base lint: exit Some(127): bash: flake8: command not found"));
        assert!(r
            .failures
            .iter()
            .any(|f| f == "ruff patched complexity: not in the log"));
        assert!(r.pair(Tool::Ruff, Run::Lint, &sp).is_some());
        assert!(r.pair(Tool::Ruff, Run::Complexity, &sp).is_none());
        assert!(r.pair(Tool::Flake8, Run::Lint, &sp).is_none());
    }

    #[test]
    fn a_rejected_configuration_is_a_note_and_both_sides_lint_isolated() {
        let sp = ScriptSpec {
            extra: Vec::new(),
            ruff_configured: true,
            ..spec()
        };
        let s = build(&sp);
        // The project's configuration first; --isolated once ruff rejects it.
        assert_eq!(s.matches("'--isolated' '--output-format'").count(), 2);
        assert_eq!(s.matches(">>>>> review fallback ruff $rc").count(), 2);
        assert!(s.contains("if [ $rc -ne 0 ] && [ -z \"$PGRUFF_BASE_OK\" ]; then"));
        let log = ">>>>> review fallback ruff 2\nruff failed\nunknown field `show-source`\n\n>>>>> review fallback end\n\
>>>>> review ruff base lint\n[]\n>>>>> review exit 0\n>>>>> review end\n\
>>>>> review ruff base complexity\n[]\n>>>>> review exit 0\n>>>>> review end\n\
>>>>> review ruff patched lint\n[]\n>>>>> review exit 0\n>>>>> review end\n\
>>>>> review ruff patched complexity\n[]\n>>>>> review exit 0\n>>>>> review end\n";
        let r = parse_log(log, &sp);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert_eq!(
            r.notes,
            vec![lint::fallback_note(
                Some(2),
                "ruff failed\nunknown field `show-source`\n"
            )]
        );
        let files = crate::review::lines::parse_diff(
            "diff --git a/pkg/it's.py b/pkg/it's.py\n--- a/pkg/it's.py\n+++ b/pkg/it's.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        )
        .unwrap();
        let review = review_from(&r, &sp, &files, Hygiene::default());
        assert!(review.lint.is_some());
        assert_eq!(review.notes, r.notes);
    }

    #[test]
    fn a_finding_two_tools_report_counts_once() {
        let patch =
            "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n x = 1\n+import os\n";
        let files = crate::review::lines::parse_diff(patch).unwrap();
        let sp = ScriptSpec {
            base_paths: vec!["m.py".into()],
            new_paths: vec!["m.py".into()],
            written: vec!["m.py".into()],
            deleted: Vec::new(),
            ..spec()
        };
        let f = |tool| LintFinding {
            tool,
            rule: "F401".into(),
            file: "m.py".into(),
            line: 2,
            col: 1,
            message: "os".into(),
        };
        let mut r = ScriptResult::default();
        for side in [Side::Base, Side::Patched] {
            for (tool, run) in runs(&sp.extra) {
                r.findings.insert((tool, side, run), Vec::new());
            }
        }
        r.findings
            .insert((Tool::Ruff, Side::Patched, Run::Lint), vec![f(Tool::Ruff)]);
        r.findings.insert(
            (Tool::Flake8, Side::Patched, Run::Lint),
            vec![f(Tool::Flake8)],
        );
        let review = review_from(&r, &sp, &files, Hygiene::default());
        let lint: Vec<_> = review.lint.unwrap().new;
        assert_eq!(lint.len(), 1);
        assert_eq!(lint[0].tool, Tool::Ruff);
        assert!(review.notes.is_empty(), "{:?}", review.notes);
    }
}
