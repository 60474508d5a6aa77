//! Linter findings, typed, and the delta that blames a patch only for what
//! it introduced.
//!
//! Findings come from real linters' output: ruff's JSON
//! (`ruff check --output-format json`), flake8's default text format
//! (`path:row:col: CODE message`) and pylint's JSON
//! (`--output-format=json`). Paths are made relative to the tree the linter
//! ran in, columns 1-based.
//!
//! The delta ([`delta`]) maps every base finding through the diff's line
//! map (see [`super::lines`]) and matches it, rule by rule, to a finding on
//! the patched tree. A patched finding left unmatched is `new` when it sits
//! on a line the patch wrote (added or changed), `induced` when it sits on an
//! unchanged line (the patch made it appear there, say an import left
//! unused); base findings left unmatched are `fixed`. Matching is by
//! (file, rule, line) with counts, never by column: a changed line moves its
//! columns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::lines::{DiffFile, Fate, LineMap};

/// The ruff version the review is pinned to (a tool layer in containers,
/// `pip install ruff==RUFF_VERSION` on a host).
pub const RUFF_VERSION: &str = "0.17.6";
/// flake8 and pylint versions of the tool layer, for projects that
/// configure them.
pub const FLAKE8_VERSION: &str = "7.3.0";
pub const PYLINT_VERSION: &str = "3.3.9";

/// Which linter reported a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Ruff,
    Flake8,
    Pylint,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ruff => "ruff",
            Tool::Flake8 => "flake8",
            Tool::Pylint => "pylint",
        }
    }
}

/// One linter finding. `line` and `col` are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LintFinding {
    pub tool: Tool,
    /// Rule code: `F401`, `E501`, pylint's message id `W0611`; ruff reports
    /// syntax errors as `invalid-syntax`.
    pub rule: String,
    /// Path relative to the linted tree, `/`-separated.
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl LintFinding {
    /// Whether the finding is a syntax error (the file does not parse).
    pub fn is_syntax_error(&self) -> bool {
        matches!(self.rule.as_str(), "invalid-syntax" | "E999" | "E0001")
    }
}

/// Why linter output could not be read, or a linter not run.
#[derive(Debug, thiserror::Error)]
pub enum LintError {
    #[error("{tool} output is not the expected JSON: {source}")]
    Json {
        tool: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{tool} output line {line_no} is not `path:row:col: CODE message`: {line:?}")]
    Line {
        tool: &'static str,
        line_no: usize,
        line: String,
    },
    #[error("failed to run {program} in {dir}")]
    Spawn {
        program: String,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} failed (exit {code:?}): {stderr}")]
    Failed {
        program: String,
        code: Option<i32>,
        stderr: String,
    },
}

/// `path` relative to `root`, `/`-separated; a path outside it unchanged.
fn relative(path: &str, root: &Path) -> String {
    let p = Path::new(path);
    let rel = p.strip_prefix(root).unwrap_or(p);
    let s = rel.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").map(str::to_string).unwrap_or(s)
}

#[derive(Deserialize)]
struct RuffLocation {
    row: usize,
    column: usize,
}

#[derive(Deserialize)]
struct RuffItem {
    code: Option<String>,
    name: Option<String>,
    filename: String,
    location: RuffLocation,
    message: String,
}

/// Reads `ruff check --output-format json` run in `root`.
pub fn parse_ruff(json: &str, root: &Path) -> Result<Vec<LintFinding>, LintError> {
    let items: Vec<RuffItem> = serde_json::from_str(json).map_err(|source| LintError::Json {
        tool: "ruff",
        source,
    })?;
    Ok(items
        .into_iter()
        .map(|i| LintFinding {
            tool: Tool::Ruff,
            // Older ruff gives syntax errors a null code and a name.
            rule: i
                .code
                .or(i.name)
                .unwrap_or_else(|| "invalid-syntax".to_string()),
            file: relative(&i.filename, root),
            line: i.location.row.max(1),
            col: i.location.column.max(1),
            message: i.message,
        })
        .collect())
}

/// Reads flake8's default output (`path:row:col: CODE message`) run in
/// `root`. Blank lines are skipped; any other unreadable line is an error.
pub fn parse_flake8(text: &str, root: &Path) -> Result<Vec<LintFinding>, LintError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || LintError::Line {
            tool: "flake8",
            line_no: i + 1,
            line: line.to_string(),
        };
        // Split from the right of the path: `path:row:col: CODE msg`, where
        // the path may itself hold colons.
        let (head, rest) = line.split_once(": ").ok_or_else(bad)?;
        let mut parts = head.rsplitn(3, ':');
        let col = parts.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
        let row = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
        let path = parts.next().ok_or_else(bad)?;
        let (code, message) = rest.split_once(' ').unwrap_or((rest, ""));
        if code.is_empty() {
            return Err(bad());
        }
        out.push(LintFinding {
            tool: Tool::Flake8,
            rule: code.to_string(),
            file: relative(path, root),
            line: usize::max(row, 1),
            col: usize::max(col, 1),
            message: message.to_string(),
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
struct PylintItem {
    line: usize,
    column: usize,
    path: String,
    #[serde(rename = "message-id")]
    message_id: String,
    symbol: String,
    message: String,
}

/// Reads `pylint --output-format=json` run in `root`. pylint's columns are
/// 0-based; they are made 1-based.
pub fn parse_pylint(json: &str, root: &Path) -> Result<Vec<LintFinding>, LintError> {
    let items: Vec<PylintItem> = serde_json::from_str(json).map_err(|source| LintError::Json {
        tool: "pylint",
        source,
    })?;
    Ok(items
        .into_iter()
        .map(|i| LintFinding {
            tool: Tool::Pylint,
            rule: i.message_id,
            file: relative(&i.path, root),
            line: i.line.max(1),
            col: i.column + 1,
            message: format!("{} ({})", i.message, i.symbol),
        })
        .collect())
}

/// Rules ruff checks in a project that does not configure ruff: pyflakes
/// (F), pycodestyle's import, statement and syntax errors (E4, E7, E9) and
/// bugbear (B), rules that flag likely errors. ruff 0.17's own default set is
/// far wider (pyupgrade, import sorting, simplifications, ...): style
/// choices a project opts into, which gold patches break as often as agents'
/// (seen on SWE-bench Lite's sympy), so they are left to projects that
/// configure them.
pub const DEFAULT_SELECT: &str = "E4,E7,E9,F,B";
/// Left out of [`DEFAULT_SELECT`]: B905 (`zip()` without `strict=`) asks
/// for a Python 3.10 parameter, a choice for projects that require 3.10.
pub const DEFAULT_IGNORE: &str = "B905";

/// Whether the project at `root` configures ruff (`ruff.toml`,
/// `.ruff.toml`, or `[tool.ruff` in `pyproject.toml`).
pub fn ruff_configured(root: &Path) -> bool {
    root.join("ruff.toml").is_file()
        || root.join(".ruff.toml").is_file()
        || std::fs::read_to_string(root.join("pyproject.toml"))
            .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("[tool.ruff")))
}

/// The arguments of a ruff check whose output [`parse_ruff`] reads. A
/// project that configures ruff gets its own configuration (ruff finds it
/// from the paths); any other gets [`DEFAULT_SELECT`].
pub fn ruff_check_args(paths: &[&str], project_configured: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "check",
        "--output-format",
        "json",
        "--no-cache",
        "--exit-zero",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !project_configured {
        a.extend(
            ["--select", DEFAULT_SELECT, "--ignore", DEFAULT_IGNORE]
                .iter()
                .map(|s| s.to_string()),
        );
    }
    a.extend(paths.iter().map(|p| p.to_string()));
    a
}

/// The arguments of a ruff check that reads no configuration file
/// (`--isolated`) and checks [`DEFAULT_SELECT`]: the fallback when ruff
/// rejects the project's own configuration (a setting a newer ruff no longer
/// accepts, such as `show-source`), so the patch is still linted, and both
/// sides alike.
pub fn ruff_isolated_args(paths: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "check",
        "--isolated",
        "--output-format",
        "json",
        "--no-cache",
        "--exit-zero",
        "--select",
        DEFAULT_SELECT,
        "--ignore",
        DEFAULT_IGNORE,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(paths.iter().map(|p| p.to_string()));
    a
}

/// The review note for a project whose ruff configuration ruff rejected.
pub fn fallback_note(code: Option<i32>, stderr: &str) -> String {
    // ruff's message, without the source snippet it quotes (`1 | [tool.ruff]`).
    let snippet = |l: &str| {
        let rest = l
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        rest.starts_with('|')
    };
    let why: String = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !snippet(l))
        .collect::<Vec<_>>()
        .join("; ")
        .chars()
        .take(300)
        .collect();
    let code = code.map_or_else(|| "?".to_string(), |c| c.to_string());
    format!(
        "ruff rejected the project's configuration (exit {code}: {why}); linted with --isolated and the default selection ({DEFAULT_SELECT})"
    )
}

/// The arguments of a flake8 run whose output [`parse_flake8`] reads (the
/// project's flake8 configuration applies).
pub fn flake8_args(paths: &[&str]) -> Vec<String> {
    let mut a = vec!["--exit-zero".to_string()];
    a.extend(paths.iter().map(|p| p.to_string()));
    a
}

/// The arguments of a pylint run whose output [`parse_pylint`] reads.
pub fn pylint_args(paths: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--output-format=json".to_string(),
        "--exit-zero".to_string(),
    ];
    a.extend(paths.iter().map(|p| p.to_string()));
    a
}

/// The linters besides ruff that a project configures, from its files at
/// `root`: flake8 (`.flake8`, or a `[flake8]` section in `setup.cfg` or
/// `tox.ini`) and pylint (`.pylintrc`, `pylintrc`, a `[pylint...]` section
/// in `setup.cfg`, `[tool.pylint...]` in `pyproject.toml`). ruff reads
/// neither tool's configuration, so these run with their own.
pub fn configured(root: &Path) -> Vec<Tool> {
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
    let has_section =
        |text: &str, prefix: &str| text.lines().any(|l| l.trim_start().starts_with(prefix));
    let mut out = Vec::new();
    let (setup_cfg, tox_ini) = (read("setup.cfg"), read("tox.ini"));
    if root.join(".flake8").is_file()
        || has_section(&setup_cfg, "[flake8]")
        || has_section(&tox_ini, "[flake8]")
    {
        out.push(Tool::Flake8);
    }
    if root.join(".pylintrc").is_file()
        || root.join("pylintrc").is_file()
        || has_section(&setup_cfg, "[pylint")
        || has_section(&read("pyproject.toml"), "[tool.pylint")
    {
        out.push(Tool::Pylint);
    }
    out
}

/// Runs a linter (a path, or a name on PATH) with `args` inside `root` on
/// this host and reads its findings. In containers the same arguments run in
/// the tool layer; this is the host form (tests, `--backend local`).
pub fn run_linter(
    tool: Tool,
    program: &Path,
    root: &Path,
    args: &[String],
) -> Result<Vec<LintFinding>, LintError> {
    let name = program.display().to_string();
    let out = Command::new(program)
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|source| LintError::Spawn {
            program: name.clone(),
            dir: root.to_path_buf(),
            source,
        })?;
    // Every run uses `--exit-zero`: a non-zero exit is the tool failing,
    // not findings.
    if !out.status.success() {
        return Err(LintError::Failed {
            program: name,
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let root_abs = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f = match tool {
        Tool::Ruff => parse_ruff(&text, &root_abs)?,
        Tool::Flake8 => parse_flake8(&text, &root_abs)?,
        Tool::Pylint => parse_pylint(&text, &root_abs)?,
    };
    if root_abs != root {
        for x in &mut f {
            x.file = relative(&x.file, root);
        }
    }
    Ok(f)
}

/// [`run_linter`] for ruff.
pub fn run_ruff(ruff: &Path, root: &Path, args: &[String]) -> Result<Vec<LintFinding>, LintError> {
    run_linter(Tool::Ruff, ruff, root, args)
}

/// A base finding's line in the patched file, or `None` when its line was
/// removed (and not replaced) or its file deleted.
fn mapped_line(
    f: &LintFinding,
    by_old: &BTreeMap<&str, (&DiffFile, LineMap)>,
) -> Option<(String, usize)> {
    match by_old.get(f.file.as_str()) {
        None => Some((f.file.clone(), f.line)),
        Some((file, map)) => {
            let new_path = file.new_path.as_ref()?;
            match map.fate(f.line) {
                Fate::Kept(n) | Fate::Replaced(n) => Some((new_path.clone(), n)),
                Fate::Removed => None,
            }
        }
    }
}

/// What a patch did to the linter's findings.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delta {
    /// On a line the patch wrote, with no base finding of the same rule
    /// mapped to it: the patch's own.
    pub new: Vec<LintFinding>,
    /// On an unchanged line, with no base finding of the same rule mapped to
    /// it (an import the patch left unused, say). Reported, not blamed.
    pub induced: Vec<LintFinding>,
    /// Base findings with no counterpart in the patched tree.
    pub fixed: Vec<LintFinding>,
    /// Findings present before and after (moved or not).
    pub kept: usize,
}

/// Splits the patched tree's findings into new, induced and kept, and finds
/// the fixed ones, using the line maps of the patch's files. Findings of
/// files the patch does not touch map to themselves.
pub fn delta(base: &[LintFinding], patched: &[LintFinding], files: &[DiffFile]) -> Delta {
    let by_old: BTreeMap<&str, (&DiffFile, LineMap)> = files
        .iter()
        .filter_map(|f| Some((f.old_path.as_deref()?, (f, f.line_map()))))
        .collect();
    let by_new: BTreeMap<&str, LineMap> = files
        .iter()
        .filter_map(|f| Some((f.new_path.as_deref()?, f.line_map())))
        .collect();

    // Base findings keyed by where they land: (tool, file, rule, line).
    let mut landed: BTreeMap<(Tool, String, String, usize), Vec<&LintFinding>> = BTreeMap::new();
    let mut out = Delta::default();
    let mut base_sorted: Vec<&LintFinding> = base.iter().collect();
    base_sorted.sort();
    for f in base_sorted {
        match mapped_line(f, &by_old) {
            Some((file, line)) => landed
                .entry((f.tool, file, f.rule.clone(), line))
                .or_default()
                .push(f),
            None => out.fixed.push(f.clone()),
        }
    }
    let mut patched_sorted: Vec<&LintFinding> = patched.iter().collect();
    patched_sorted.sort();
    for f in patched_sorted {
        let key = (f.tool, f.file.clone(), f.rule.clone(), f.line);
        if let Some(v) = landed.get_mut(&key) {
            if v.pop().is_some() {
                out.kept += 1;
                continue;
            }
        }
        let touched = match by_new.get(f.file.as_str()) {
            Some(map) => map.origin(f.line).is_touched(),
            None => false,
        };
        if touched {
            out.new.push(f.clone());
        } else {
            out.induced.push(f.clone());
        }
    }
    for v in landed.into_values() {
        out.fixed.extend(v.into_iter().cloned());
    }
    out.fixed.sort();
    out
}

/// The delta's new findings as review findings (induced and fixed ones are
/// reported in the delta, not blamed).
pub fn findings_of(d: &Delta) -> Vec<super::Finding> {
    d.new
        .iter()
        .map(|f| super::Finding {
            kind: if f.is_syntax_error() {
                super::FindingKind::NewSyntaxError
            } else {
                super::FindingKind::NewLint
            },
            file: Some(f.file.clone()),
            lines: vec![f.line],
            message: format!(
                "{} {} (col {}): {}",
                f.tool.name(),
                f.rule,
                f.col,
                f.message
            ),
            excerpt: None,
        })
        .collect()
}

#[cfg(test)]
#[path = "lint_tests.rs"]
mod tests;
