//! `review`: the static rubric with real ruff on a real git repository made
//! here, and the LLM judge client against a local OpenAI-compatible server
//! started by the test (tests/review/judge.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use patchgrade::review::complexity;
use patchgrade::review::lines::parse_diff;
use patchgrade::review::lint::{self, LintFinding, RUFF_VERSION};

#[path = "review/judge.rs"]
mod judge;

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

    let args = lint::ruff_check_args(&["pkg"]);
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
