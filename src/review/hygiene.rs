//! Review findings read from the diff alone: no checkout, no container.
//!
//! On added lines of code files (strings, comments and docstrings told
//! apart as the audit does, see `audit::text`):
//! - debug prints: `print(`/`pprint(` as a statement in Python library code
//!   (test, example, script, docs and `setup.py`/`__main__.py` files are
//!   exempt; a print with `file=` writes somewhere on purpose; a hunk that
//!   removes as many prints as it adds only edits them), `console.log(` and
//!   `console.debug(` in JS/TS;
//! - debugger calls: `breakpoint()`, `pdb`/`ipdb`/`pudb`, `IPython.embed`,
//!   `code.interact(`, JS `debugger;`;
//! - commented-out code: Python comment lines that read as code (an
//!   import, a `def`/`class`/`if ...:` header, an assignment, a call), one
//!   finding per run of consecutive lines;
//! - TODO/FIXME/XXX/HACK in an added comment.
//!
//! On hunks: whitespace is insignificant outside string literals, except
//! Python's indentation (syntax). A hunk whose two sides are equal line for
//! line once blank lines and insignificant whitespace are dropped is
//! whitespace-only (a moved line is not); inside other hunks, changed lines
//! paired with a removed line that differs only so are churn.
//!
//! On files: a file is unrelated when it is not in gold's footprint and the
//! issue text names neither its path, its file name, its dotted module, nor
//! (for names of 4+ characters other than `__init__`) its stem as a word;
//! test files and documentation (`docs/`, `.rst`, `.md`, `.txt`, changelogs)
//! are never unrelated. Existing test files edited are reported; test files
//! and `def test_` functions added are counted (no penalty).
//!
//! Size against gold: changed lines (added + removed) and non-test files.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use super::{Finding, FindingKind};
use crate::audit::diff::{self, FileDiff, Kind};
use crate::audit::tampering::test_path_kind;
use crate::audit::text::{added_code, is_python, prose_lines};
use crate::patch::ChangeKind;

/// The candidate's changed lines reach [`LARGER_THAN_GOLD_RATIO`] times
/// gold's and exceed gold's by [`LARGER_THAN_GOLD_MIN_EXTRA`].
pub const LARGER_THAN_GOLD_RATIO: f64 = 3.0;
pub const LARGER_THAN_GOLD_MIN_EXTRA: usize = 20;

/// How big a patch is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Footprint {
    pub files: usize,
    /// Files that are not tests.
    pub code_files: usize,
    pub hunks: usize,
    pub added: usize,
    pub removed: usize,
}

impl Footprint {
    pub fn changed(&self) -> usize {
        self.added + self.removed
    }

    fn of(files: &[FileDiff]) -> Footprint {
        let mut f = Footprint {
            files: files.len(),
            ..Footprint::default()
        };
        for file in files {
            if test_path_kind(&file.path).is_none() {
                f.code_files += 1;
            }
            f.hunks += file.sections.len();
            for l in &file.lines {
                match l.kind {
                    Kind::Add => f.added += 1,
                    Kind::Remove => f.removed += 1,
                    Kind::Context => {}
                }
            }
        }
        f
    }
}

/// What the diff-only checks found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Hygiene {
    pub findings: Vec<Finding>,
    pub footprint: Footprint,
    /// Gold's footprint, when gold was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold_footprint: Option<Footprint>,
    /// Test functions (`def test_`) and test files added.
    pub tests_added: usize,
}

/// What the checks read besides the candidate patch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The issue text (problem statement, and hints when wanted).
    pub issue: &'a str,
    /// The gold patch, for footprint and size.
    pub gold_patch: Option<&'a str>,
}

/// Runs every diff-only check on `patch`.
pub fn check(patch: &str, ctx: &Context) -> Hygiene {
    let files = diff::read(patch);
    let mut out = Hygiene {
        footprint: Footprint::of(&files),
        ..Hygiene::default()
    };
    if files.is_empty() {
        if !patch.trim().is_empty() {
            out.findings.push(Finding {
                kind: FindingKind::Unreadable,
                file: None,
                lines: Vec::new(),
                message: "the patch text holds no readable diff".into(),
                excerpt: None,
            });
        }
        return out;
    }
    for f in &files {
        line_checks(f, &mut out.findings);
        whitespace(f, &mut out.findings);
        tests(f, &mut out);
    }
    let gold = ctx.gold_patch.map(diff::read);
    if let Some(gold) = &gold {
        unrelated(&files, gold, ctx.issue, &mut out.findings);
        let g = Footprint::of(gold);
        size(&out.footprint, &g, &mut out.findings);
        out.gold_footprint = Some(g);
    }
    out.findings.sort();
    out
}

static PRINT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(print|pprint|pprint\.pprint)\s*\(").expect("regex"));
static DEBUGGER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\bbreakpoint\s*\(|\b(i?pdb|pudb)\.set_trace\s*\(|^\s*import\s+(i?pdb|pudb)\b|^\s*from\s+(i?pdb|pudb|IPython)\s+import\b|\bIPython\.embed\s*\(|\bembed\s*\(\s*\)|\bcode\.interact\s*\(",
    )
    .expect("regex")
});
static CONSOLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bconsole\.(log|debug)\s*\(").expect("regex"));
static JS_DEBUGGER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*debugger\s*;?\s*$").expect("regex"));
static TODO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(#|//|/\*).*\b(TODO|FIXME|XXX|HACK)\b").expect("regex"));
static CODE_COMMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(import [\w.]+|from [\w.]+ import \S",
        r"|(def|class) \w+.*:$",
        r"|(if|elif|while|with|except) .*:$|for .* in .*:$|(else|try|finally|except):$",
        r"|(return|raise|yield|del|assert)( [\w.\[\]()'\x22, +\-*/%=<>!]+)?$",
        r"|[\w.\[\]'\x22]+ ?([+\-*/%|&]?=) ?[^=\s].*",
        r"|[\w.]+\(.*\)$)",
    ))
    .expect("regex")
});
/// Statement headers: code even when they read like words.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(import |from |def |class |if |elif |while |for |with |except\b|else:|try:|finally:)",
    )
    .expect("regex")
});
/// Three plain words in a row: prose (`# return the value`).
static PROSE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z]{2,} [A-Za-z]{2,} [A-Za-z]{2,}").expect("regex"));
/// Tool directives written as comments: not commented-out code.
const DIRECTIVES: [&str; 9] = [
    "type:", "noqa", "pragma", "pylint:", "fmt:", "mypy:", "isort:", "ruff:", "-*-",
];

fn is_js(path: &str) -> bool {
    [".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs"]
        .iter()
        .any(|e| path.ends_with(e))
}

/// Files where printing is the point: tests, examples, scripts, docs, entry
/// points.
fn prints_allowed(path: &str) -> bool {
    let name = diff::basename(path);
    test_path_kind(path).is_some()
        || matches!(name, "setup.py" | "__main__.py" | "conftest.py" | "conf.py")
        || path.split('/').any(|d| {
            matches!(
                d,
                "examples"
                    | "example"
                    | "scripts"
                    | "bin"
                    | "tools"
                    | "docs"
                    | "doc"
                    | "benchmarks"
            )
        })
}

fn is_doc(path: &str) -> bool {
    let name = diff::basename(path).to_ascii_lowercase();
    path.split('/').any(|d| d == "docs" || d == "doc")
        || [".rst", ".md", ".txt"].iter().any(|e| name.ends_with(e))
        || name.starts_with("changelog")
        || name.starts_with("changes")
        || name.starts_with("news")
}

fn finding(
    kind: FindingKind,
    f: &FileDiff,
    lines: Vec<usize>,
    message: String,
    excerpt: Vec<&str>,
) -> Finding {
    Finding {
        kind,
        file: Some(f.path.clone()),
        lines,
        message,
        excerpt: (!excerpt.is_empty()).then(|| crate::audit::excerpt(excerpt, 8)),
    }
}

fn line_checks(f: &FileDiff, out: &mut Vec<Finding>) {
    if is_python(&f.path) {
        python_lines(f, out);
    } else if is_js(&f.path) {
        for l in f.added() {
            let t = l.text.trim_start();
            if t.starts_with("//") {
                continue;
            }
            if CONSOLE.is_match(t) {
                out.push(finding(
                    FindingKind::DebugPrint,
                    f,
                    vec![l.new_no],
                    "console output added".into(),
                    vec![&l.text],
                ));
            } else if JS_DEBUGGER.is_match(t) {
                out.push(finding(
                    FindingKind::DebuggerCall,
                    f,
                    vec![l.new_no],
                    "debugger statement added".into(),
                    vec![&l.text],
                ));
            }
        }
    }
    if !is_doc(&f.path) {
        for l in f.added() {
            if let Some(c) = TODO.captures(&l.text) {
                out.push(finding(
                    FindingKind::TodoAdded,
                    f,
                    vec![l.new_no],
                    format!("{} comment added", &c[2]),
                    vec![&l.text],
                ));
            }
        }
    }
}

fn python_lines(f: &FileDiff, out: &mut Vec<Finding>) {
    let prose = prose_lines(f);
    let code = added_code(f);
    // Prints removed per hunk: a hunk that edits an existing print is not
    // adding one.
    let mut removed_prints = vec![0usize; f.sections.len().max(1)];
    for l in f.lines.iter().filter(|l| l.kind == Kind::Remove) {
        if PRINT.is_match(&l.text) {
            if let Some(n) = removed_prints.get_mut(l.hunk) {
                *n += 1;
            }
        }
    }
    let allow_prints = prints_allowed(&f.path);
    let mut comment_run: Vec<(usize, &str)> = Vec::new();
    let mut last_idx = None;
    for (idx, c) in &code {
        let l = &f.lines[*idx];
        if prose[*idx] {
            continue;
        }
        if PRINT.is_match(c) && !c.contains("file=") && !allow_prints {
            match removed_prints.get_mut(l.hunk) {
                Some(n) if *n > 0 => *n -= 1,
                _ => out.push(finding(
                    FindingKind::DebugPrint,
                    f,
                    vec![l.new_no],
                    "print call added to library code".into(),
                    vec![&l.text],
                )),
            }
        }
        if DEBUGGER.is_match(c) {
            out.push(finding(
                FindingKind::DebuggerCall,
                f,
                vec![l.new_no],
                "debugger call added".into(),
                vec![&l.text],
            ));
        }
        // Commented-out code: runs of consecutive added comment lines.
        let t = l.text.trim_start();
        let is_code_comment = t.strip_prefix('#').is_some_and(|rest| {
            let rest = rest.trim();
            !rest.starts_with('!')
                && !DIRECTIVES.iter().any(|d| rest.starts_with(d))
                && (!rest.ends_with('.') || rest.ends_with("..."))
                && CODE_COMMENT.is_match(rest)
                && (HEADER.is_match(rest) || !PROSE.is_match(rest))
        });
        let consecutive = last_idx.is_some_and(|p: usize| p + 1 == *idx);
        if !(is_code_comment && consecutive) {
            flush_comments(f, &mut comment_run, out);
        }
        if is_code_comment {
            comment_run.push((l.new_no, &l.text));
        }
        last_idx = Some(*idx);
    }
    flush_comments(f, &mut comment_run, out);
}

fn flush_comments(f: &FileDiff, run: &mut Vec<(usize, &str)>, out: &mut Vec<Finding>) {
    if run.is_empty() {
        return;
    }
    let n = run.len();
    out.push(finding(
        FindingKind::CommentedOutCode,
        f,
        run.iter().map(|(l, _)| *l).collect(),
        format!(
            "{n} line{} of commented-out code added",
            if n == 1 { "" } else { "s" }
        ),
        run.iter().map(|(_, t)| *t).collect(),
    ));
    run.clear();
}

/// A line with its insignificant whitespace removed: whitespace outside
/// string literals, except (in Python, where it is syntax) the indentation.
/// Empty for a blank line.
fn squash(s: &str, python: bool) -> String {
    let body = s.trim_start();
    if body.trim_end().is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if python {
        out.push_str(&s[..s.len() - body.len()]);
        out.push('|');
    }
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in body.chars() {
        match quote {
            Some(q) => {
                out.push(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                out.push(c);
            }
            None if !c.is_whitespace() => out.push(c),
            None => {}
        }
    }
    out
}

fn whitespace(f: &FileDiff, out: &mut Vec<Finding>) {
    // A new or deleted file is all content, never churn.
    if matches!(f.kind, ChangeKind::Added | ChangeKind::Deleted) {
        return;
    }
    let py = is_python(&f.path);
    let mut churn: Vec<usize> = Vec::new();
    for h in 0..f.sections.len() {
        let lines: Vec<_> = f.lines.iter().filter(|l| l.hunk == h).collect();
        // Each side of the hunk, blank lines dropped, in order (so a moved
        // line is not whitespace).
        let side = |k: Kind| -> Vec<String> {
            lines
                .iter()
                .filter(|l| l.kind == Kind::Context || l.kind == k)
                .map(|l| squash(&l.text, py))
                .filter(|t| !t.is_empty())
                .collect()
        };
        let (removed, added) = (side(Kind::Remove), side(Kind::Add));
        let changes = lines.iter().filter(|l| l.kind != Kind::Context).count();
        if changes > 0 && removed == added {
            let at: Vec<usize> = lines
                .iter()
                .filter(|l| l.kind == Kind::Add)
                .map(|l| l.new_no)
                .collect();
            let at = if at.is_empty() {
                vec![lines
                    .iter()
                    .find(|l| l.kind == Kind::Remove)
                    .map_or(0, |l| l.new_no)]
            } else {
                at
            };
            out.push(finding(
                FindingKind::WhitespaceOnlyHunk,
                f,
                at,
                format!("hunk {} changes only whitespace ({changes} lines)", h + 1),
                Vec::new(),
            ));
            continue;
        }
        // Pair removed and added lines within each change block.
        let mut rem: Vec<&str> = Vec::new();
        let mut add: Vec<(usize, &str)> = Vec::new();
        let mut flush = |rem: &mut Vec<&str>, add: &mut Vec<(usize, &str)>| {
            for (r, (n, a)) in rem.iter().zip(add.iter()) {
                if r != a && squash(r, py) == squash(a, py) && !squash(a, py).is_empty() {
                    churn.push(*n);
                }
            }
            rem.clear();
            add.clear();
        };
        for l in &lines {
            match l.kind {
                Kind::Context => flush(&mut rem, &mut add),
                Kind::Remove => rem.push(&l.text),
                Kind::Add => add.push((l.new_no, &l.text)),
            }
        }
        flush(&mut rem, &mut add);
    }
    if !churn.is_empty() {
        let n = churn.len();
        out.push(finding(
            FindingKind::WhitespaceChurn,
            f,
            churn,
            format!(
                "{n} changed line{} differ from the base only in whitespace",
                if n == 1 { "" } else { "s" }
            ),
            Vec::new(),
        ));
    }
}

static TEST_DEF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(async\s+)?def\s+test\w*\s*\(").expect("regex"));

fn tests(f: &FileDiff, out: &mut Hygiene) {
    if test_path_kind(&f.path).is_none() {
        return;
    }
    let defs: Vec<usize> = f
        .added()
        .filter(|l| TEST_DEF.is_match(&l.text))
        .map(|l| l.new_no)
        .collect();
    match f.kind {
        ChangeKind::Added => out.tests_added += 1.max(defs.len()),
        _ => {
            out.tests_added += defs.len();
            out.findings.push(finding(
                FindingKind::TestEdited,
                f,
                f.lines
                    .iter()
                    .filter(|l| l.kind != Kind::Context)
                    .map(|l| l.new_no)
                    .take(20)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                format!(
                    "existing test file {}",
                    match f.kind {
                        ChangeKind::Deleted => "deleted",
                        ChangeKind::Renamed { .. } => "renamed",
                        _ => "edited",
                    }
                ),
                Vec::new(),
            ));
        }
    }
    if !defs.is_empty() || f.kind == ChangeKind::Added {
        out.findings.push(finding(
            FindingKind::TestsAdded,
            f,
            defs.clone(),
            if defs.is_empty() {
                "test file added".into()
            } else {
                format!(
                    "{} test function{} added",
                    defs.len(),
                    if defs.len() == 1 { "" } else { "s" }
                )
            },
            Vec::new(),
        ));
    }
}

/// Whether the issue text suggests `path`.
fn suggested(path: &str, issue: &str) -> bool {
    let name = diff::basename(path);
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let module = path
        .rsplit_once('.')
        .map_or(path, |(s, _)| s)
        .replace('/', ".");
    let module = module.strip_suffix(".__init__").unwrap_or(&module);
    if issue.contains(path) || issue.contains(name) || issue.contains(module) {
        return true;
    }
    stem.len() >= 4 && stem != "__init__" && has_word(issue, stem)
}

/// Whether `word` occurs in `text` with no identifier character either side.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(i, _)| {
        !ident(text[..i].chars().next_back()) && !ident(text[i + word.len()..].chars().next())
    })
}

fn unrelated(files: &[FileDiff], gold: &[FileDiff], issue: &str, out: &mut Vec<Finding>) {
    let gold_paths: BTreeSet<&str> = gold.iter().flat_map(|f| f.paths()).collect();
    for f in files {
        if f.paths().any(|p| gold_paths.contains(p))
            || test_path_kind(&f.path).is_some()
            || is_doc(&f.path)
            || f.paths().any(|p| suggested(p, issue))
        {
            continue;
        }
        out.push(finding(
            FindingKind::UnrelatedFile,
            f,
            f.lines
                .iter()
                .find(|l| l.kind != Kind::Context)
                .map(|l| l.new_no)
                .into_iter()
                .collect(),
            "file is not in gold's footprint and the issue text does not name it".into(),
            Vec::new(),
        ));
    }
}

fn size(c: &Footprint, g: &Footprint, out: &mut Vec<Finding>) {
    let (cc, gc) = (c.changed(), g.changed());
    if cc as f64 >= LARGER_THAN_GOLD_RATIO * gc as f64 && cc >= gc + LARGER_THAN_GOLD_MIN_EXTRA {
        out.push(Finding {
            kind: FindingKind::LargerThanGold,
            file: None,
            lines: Vec::new(),
            message: format!(
                "{cc} changed lines against gold's {gc} ({} hunks against {})",
                c.hunks, g.hunks
            ),
            excerpt: None,
        });
    }
    if c.code_files > g.code_files {
        out.push(Finding {
            kind: FindingKind::MoreFilesThanGold,
            file: None,
            lines: Vec::new(),
            message: format!(
                "{} non-test files against gold's {}",
                c.code_files, g.code_files
            ),
            excerpt: None,
        });
    }
}

#[cfg(test)]
#[path = "hygiene_tests.rs"]
mod tests;
