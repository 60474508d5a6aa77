//! `review`: the static rubric with real ruff on a real git repository made
//! here, and the LLM judge client against a local OpenAI-compatible server
//! started by the test (tests/review/judge.rs).
//!
//! The shared helpers (tools at their pinned versions, repositories and
//! patches made by git) are here, with the ruff delta, the review script
//! and the fallback for a rejected ruff configuration. Real ruff, flake8
//! and pylint on planted problems and projects' own configurations are in
//! tests/review/linters.rs; the ignored SWE-bench Lite benchmarks in
//! tests/review/lite_benches.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use patchgrade::review::complexity;
use patchgrade::review::lines::parse_diff;
use patchgrade::review::lint::{self, LintFinding, RUFF_VERSION};

mod common;
#[path = "review/judge.rs"]
mod judge;
#[path = "review/linters.rs"]
mod linters;
#[path = "review/lite_benches.rs"]
mod lite_benches;

/// Like tests/common's `available`: missing tools skip, unless CI requires
/// them (`PATCHGRADE_REQUIRE_PYPI=1`: ruff comes from PyPI).
fn available(what: &str, require_var: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var(require_var).as_deref() == Ok("1") {
        panic!("{what} is required ({require_var}=1) but not available");
    }
    eprintln!("SKIPPED: {what} is not available (set {require_var}=1 to make this a failure)");
    false
}

/// ruff at the pinned version: `$PATCHGRADE_RUFF`, else `ruff` on PATH.
/// Another version counts as missing (its rules and messages differ).
fn ruff() -> Option<PathBuf> {
    let exe = std::env::var_os("PATCHGRADE_RUFF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("ruff"));
    let out = Command::new(&exe).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    if v.trim() == format!("ruff {RUFF_VERSION}") {
        Some(exe)
    } else {
        eprintln!("found {} but need ruff {RUFF_VERSION}", v.trim());
        None
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const BASE: &str = r#""""A module with one lint error before the patch."""


def helper():
    return 1


def old():
    import os
    return 2
"#;

/// A hunk inserted above the pre-existing error (which moves from line 9 to
/// line 15) and a new error of the same rule (F401) below it.
const PATCHED: &str = r#""""A module with one lint error before the patch."""


def added(x):
    if x:
        return 3
    return 4


def helper():
    return 1


def old():
    import os
    return 2


def newer():
    import json
    return 5
"#;

fn brief(f: &[LintFinding]) -> Vec<(String, usize, String)> {
    f.iter()
        .map(|x| (x.file.clone(), x.line, x.rule.clone()))
        .collect()
}

#[test]
fn real_ruff_delta_blames_the_new_error_not_the_moved_one() {
    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::create_dir(repo.join("pkg")).unwrap();
    std::fs::write(repo.join("pkg/m.py"), BASE).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", "base"]);

    let args = lint::ruff_check_args(&["pkg"], lint::ruff_configured(repo));
    let base = lint::run_ruff(&ruff, repo, &args).unwrap();
    assert_eq!(brief(&base), vec![("pkg/m.py".into(), 9, "F401".into())]);
    let cargs = complexity::ruff_complexity_args(&["pkg"]);
    let base_cx = complexity::parse_complexity(&lint::run_ruff(&ruff, repo, &cargs).unwrap());

    std::fs::write(repo.join("pkg/m.py"), PATCHED).unwrap();
    let patch = git(repo, &["diff"]);
    let patched = lint::run_ruff(&ruff, repo, &args).unwrap();
    assert_eq!(
        brief(&patched),
        vec![
            ("pkg/m.py".into(), 15, "F401".into()),
            ("pkg/m.py".into(), 20, "F401".into())
        ]
    );

    let files = parse_diff(&patch).unwrap();
    let d = lint::delta(&base, &patched, &files);
    assert_eq!(brief(&d.new), vec![("pkg/m.py".into(), 20, "F401".into())]);
    assert!(d.new[0].message.contains("json"), "{:?}", d.new[0]);
    assert_eq!(
        d.kept, 1,
        "the moved pre-existing error is kept, not blamed"
    );
    assert!(d.induced.is_empty() && d.fixed.is_empty(), "{d:?}");

    // Complexity: the two added functions are touched; helper and old only
    // moved.
    let patched_cx = complexity::parse_complexity(&lint::run_ruff(&ruff, repo, &cargs).unwrap());
    assert_eq!(base_cx.len(), 2);
    assert_eq!(patched_cx.len(), 4);
    let cx: Vec<(String, usize, Option<u32>, u32)> =
        complexity::complexity_delta(&base_cx, &patched_cx, &files)
            .into_iter()
            .map(|c| (c.name, c.line, c.before, c.after))
            .collect();
    assert_eq!(
        cx,
        vec![("added".into(), 4, None, 2), ("newer".into(), 19, None, 1)]
    );
}

const CORE_BASE: &str = r#""""Core arithmetic."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def helper():
    import os
    return 1


def mul(a, b):
    r=a * b
    return r


def div(a, b):
    return a / b
"#;

/// Planted: a new function with a debug print inserted above everything, a
/// new lint error (F821) on a changed line, commented-out code, a
/// whitespace-only hunk; the pre-existing F401 in `helper` moves down and
/// must not be blamed.
const CORE_PLANTED: &str = r#""""Core arithmetic."""


def scale(x, k):
    print("scale", x, k)
    return x * k


def add(a, b):
    return a + b


def sub(a, b):
    return a - c
    # d = a - b
    # return d


def helper():
    import os
    return 1


def mul(a, b):
    r = a * b
    return r


def div(a, b):
    return a / b
"#;

/// Gold: a clean fix.
const CORE_GOLD: &str = r#""""Core arithmetic."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def helper():
    import os
    return 1


def mul(a, b):
    r=a * b
    return r


def div(a, b):
    if b == 0:
        return None
    return a / b
"#;

/// A real git repository with `files` committed; returns its path holder.
fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    for (p, text) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    dir
}

/// A copy of `base`'s tree with `changes` written, and the diff between them
/// (git's own).
fn patched(base: &Path, changes: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = base.display().to_string();
    git(dir.path(), &["clone", "-q", &src, "."]);
    for (p, text) in changes {
        std::fs::write(dir.path().join(p), text).unwrap();
    }
    let diff = git(dir.path(), &["diff"]);
    (dir, diff)
}

/// A tool at its pinned version (`$PATCHGRADE_<TOOL>` or the name on PATH),
/// or None.
fn pinned(name: &str, version_line: &str) -> Option<PathBuf> {
    let var = format!("PATCHGRADE_{}", name.to_ascii_uppercase());
    let exe = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(name));
    let out = Command::new(&exe).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).to_string();
    if v.starts_with(version_line) {
        Some(exe)
    } else {
        eprintln!("found {name} {:?}, need {version_line}", v.lines().next());
        None
    }
}

/// The review script (what containers will run) executed by bash on this
/// host with the real ruff gives the same review as `review_trees`.
#[test]
fn review_script_run_by_bash_matches_the_host_review() {
    use patchgrade::review::hygiene::{self, Context};
    use patchgrade::review::local::{review_trees, LocalTools};
    use patchgrade::review::script::{self, ScriptSpec};

    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    // The script calls `<tool_bin>/ruff`: a folder with a link to the one
    // found.
    let bin = tempfile::tempdir().unwrap();
    let exe = if ruff.components().count() > 1 {
        ruff.clone()
    } else {
        let out = Command::new("sh")
            .args(["-c", "command -v ruff"])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    std::os::unix::fs::symlink(&exe, bin.path().join("ruff")).unwrap();

    let base = repo_with(&[("pkg/core.py", CORE_BASE), ("pkg/other.py", "VALUE = 1\n")]);
    let (gold_tree, gold) = patched(base.path(), &[("pkg/core.py", CORE_GOLD)]);
    drop(gold_tree);
    let (tree, patch) = patched(
        base.path(),
        &[
            ("pkg/core.py", CORE_PLANTED),
            ("pkg/other.py", "VALUE = 1\nOTHER = 2\n"),
        ],
    );
    let ctx = Context {
        issue: "core: div() raises ZeroDivisionError; sub() is fine.",
        gold_patch: Some(&gold),
    };
    let expected = review_trees(&LocalTools { ruff }, base.path(), tree.path(), &patch, &ctx);

    // The container layout: the tree at base, the patched files aside.
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("testbed");
    git(
        work.path(),
        &["clone", "-q", &base.path().display().to_string(), "testbed"],
    );
    let files = parse_diff(&patch).unwrap();
    let (base_paths, new_paths, written, deleted) = script::paths_of(&files);
    let new_dir = work.path().join("new");
    for p in &written {
        let dst = new_dir.join(p);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(tree.path().join(p), dst).unwrap();
    }
    let (root_s, bin_s, new_s) = (
        root.display().to_string(),
        bin.path().display().to_string(),
        new_dir.display().to_string(),
    );
    let spec = ScriptSpec {
        root: &root_s,
        tool_bin: &bin_s,
        patched_dir: &new_s,
        base_paths,
        new_paths,
        written,
        deleted,
        extra: Vec::new(),
        ruff_configured: false,
    };
    let text = script::build(&spec);
    let out = Command::new("bash").arg("-c").arg(&text).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stdout);
    let result = script::parse_log(&log, &spec);
    assert!(result.failures.is_empty(), "{:?}\n{log}", result.failures);
    let got = script::review_from(&result, &spec, &files, hygiene::check(&patch, &ctx));
    assert_eq!(got.findings, expected.findings);
    assert_eq!(got.score, expected.score);
    assert_eq!(got.complexity, expected.complexity);
    assert_eq!(got.lint.as_ref().map(|d| d.kept), Some(1));
    // The tree now holds the patched files.
    assert_eq!(
        std::fs::read_to_string(root.join("pkg/core.py")).unwrap(),
        CORE_PLANTED
    );

    // A missing tool is a failure in the log, then a note, never clean.
    let broken = ScriptSpec {
        tool_bin: "/nonexistent",
        ..spec.clone()
    };
    let out = Command::new("bash")
        .arg("-c")
        .arg(script::build(&broken))
        .output()
        .unwrap();
    let r = script::parse_log(&String::from_utf8_lossy(&out.stdout), &broken);
    assert_eq!(r.failures.len(), 4, "{:?}", r.failures);
    let review = script::review_from(&r, &broken, &files, hygiene::check(&patch, &ctx));
    assert!(
        review.lint.is_none() && review.notes.len() == 4,
        "{:?}",
        review.notes
    );
}

/// A project whose ruff configuration ruff 0.17.6 rejects (`show-source`,
/// as in sphinx-doc__sphinx-11445's pyproject.toml): the review script and
/// the host review both fall back to `--isolated` with the default
/// selection on both sides, say so in a note, and still blame the new error
/// and keep the old one. A configuration the patch itself breaks is a
/// failure, never a clean delta.
#[test]
fn a_rejected_ruff_configuration_falls_back_to_isolated_on_both_sides() {
    use patchgrade::review::hygiene::{self, Context};
    use patchgrade::review::local::{review_trees, LocalTools};
    use patchgrade::review::script::{self, ScriptSpec};

    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let bin = tempfile::tempdir().unwrap();
    let exe = if ruff.components().count() > 1 {
        ruff.clone()
    } else {
        let out = Command::new("sh")
            .args(["-c", "command -v ruff"])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    std::os::unix::fs::symlink(&exe, bin.path().join("ruff")).unwrap();

    let pyproject = "[project]\nname = \"p\"\n[tool.ruff]\nshow-source = true\nline-length = 100\n";
    let base = repo_with(&[("pyproject.toml", pyproject), ("pkg/m.py", BASE)]);
    assert!(lint::ruff_configured(base.path()));
    let (tree, patch) = patched(base.path(), &[("pkg/m.py", PATCHED)]);
    let ctx = Context {
        issue: "pkg/m.py needs added() and newer()",
        gold_patch: None,
    };
    let host = review_trees(
        &LocalTools { ruff: ruff.clone() },
        base.path(),
        tree.path(),
        &patch,
        &ctx,
    );
    let expect_new = vec![("pkg/m.py".to_string(), 20, "F401".to_string())];
    let d = host
        .lint
        .as_ref()
        .expect("linted despite the rejected configuration");
    assert_eq!(brief(&d.new), expect_new);
    assert_eq!(d.kept, 1);
    assert_eq!(host.notes.len(), 1, "{:?}", host.notes);
    assert!(
        host.notes[0].starts_with("ruff rejected the project's configuration (exit 2:")
            && host.notes[0].contains("show-source")
            && host.notes[0].contains("--isolated"),
        "{}",
        host.notes[0]
    );

    // The same through the script, in the container layout.
    let run_script = |base: &Path, changes: &[(&str, &str)]| {
        let (tree, patch) = patched(base, changes);
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("testbed");
        git(
            work.path(),
            &["clone", "-q", &base.display().to_string(), "testbed"],
        );
        let files = parse_diff(&patch).unwrap();
        let (base_paths, new_paths, written, deleted) = script::paths_of(&files);
        let new_dir = work.path().join("new");
        for p in &written {
            let dst = new_dir.join(p);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(tree.path().join(p), dst).unwrap();
        }
        let (root_s, bin_s, new_s) = (
            root.display().to_string(),
            bin.path().display().to_string(),
            new_dir.display().to_string(),
        );
        let spec = ScriptSpec {
            root: &root_s,
            tool_bin: &bin_s,
            patched_dir: &new_s,
            base_paths,
            new_paths,
            written,
            deleted,
            extra: Vec::new(),
            ruff_configured: true,
        };
        let out = Command::new("bash")
            .arg("-c")
            .arg(script::build(&spec))
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout).into_owned();
        let r = script::parse_log(&log, &spec);
        let review = script::review_from(&r, &spec, &files, hygiene::check(&patch, &ctx));
        (r, review, log)
    };
    let (r, got, log) = run_script(base.path(), &[("pkg/m.py", PATCHED)]);
    assert!(r.failures.is_empty(), "{:?}\n{log}", r.failures);
    assert_eq!(
        log.matches(">>>>> review fallback ruff 2").count(),
        1,
        "{log}"
    );
    // The same note (ruff names the configuration file by its path, which
    // differs between the two trees).
    assert_eq!(got.notes.len(), 1, "{:?}", got.notes);
    let head = |n: &str| n.split(" (exit").next().unwrap().to_string();
    assert_eq!(head(&got.notes[0]), head(&host.notes[0]));
    assert!(
        got.notes[0].contains("unknown field `show-source`"),
        "{:?}",
        got.notes
    );
    assert_eq!(got.lint, host.lint);
    assert_eq!(got.findings, host.findings);

    // A valid configuration the patch breaks: the patched lint fails (the
    // base linted with the project's rules), no fallback, no delta.
    let good = repo_with(&[
        (
            "pyproject.toml",
            "[project]\nname = \"p\"\n[tool.ruff]\nline-length = 100\n",
        ),
        ("pkg/m.py", BASE),
    ]);
    let (r, review, log) = run_script(
        good.path(),
        &[("pkg/m.py", PATCHED), ("pyproject.toml", pyproject)],
    );
    assert!(!log.contains(">>>>> review fallback"), "{log}");
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert!(
        r.failures[0].starts_with("ruff patched lint: exit Some(2)"),
        "{:?}",
        r.failures
    );
    assert!(review.lint.is_none(), "{:?}", review.lint);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}
