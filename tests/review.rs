//! `review`: the static rubric with real ruff on a real git repository made
//! here, and the LLM judge client against a local OpenAI-compatible server
//! started by the test (tests/review/judge.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use patchgrade::review::complexity;
use patchgrade::review::lines::parse_diff;
use patchgrade::review::lint::{self, LintFinding, RUFF_VERSION};

mod common;
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

/// `harness-scripts/bench-static-audit.sh`: the static audit of a whole
/// submission over SWE-bench Lite (`PATCHGRADE_LITE`), for the gold patches
/// and, with `PATCHGRADE_PREDICTIONS`, a real submission. Prints figures.
#[test]
#[ignore = "benchmark: needs SWE-bench Lite (PATCHGRADE_LITE)"]
fn bench_submission_audit_lite() {
    use patchgrade::dataset::{load_predictions, Dataset};
    use patchgrade::review::submission::{audit_submission, SubmissionOptions};
    use std::time::Instant;

    let Some(lite) = std::env::var_os("PATCHGRADE_LITE").map(PathBuf::from) else {
        eprintln!("SKIPPED: set PATCHGRADE_LITE to SWE-bench Lite's test.jsonl");
        return;
    };
    let t_load = Instant::now();
    let ds = Dataset::load(&lite).unwrap();
    println!("dataset loaded in {:.3} s", t_load.elapsed().as_secs_f64());
    let mut sources = vec![PathBuf::from("gold")];
    if let Some(p) = std::env::var_os("PATCHGRADE_PREDICTIONS") {
        sources.push(PathBuf::from(p));
    }
    for src in sources {
        let t_load = Instant::now();
        let preds = load_predictions(std::slice::from_ref(&src), &ds).unwrap();
        println!(
            "{} loaded in {:.3} s",
            src.display(),
            t_load.elapsed().as_secs_f64()
        );
        for with_hints in [false, true] {
            let t0 = Instant::now();
            let a = audit_submission(&ds, &preds, &SubmissionOptions { with_hints });
            let wall = t0.elapsed().as_secs_f64();
            let s = a.summary();
            println!(
                "{} ({} predictions, hints {}): {:.3} s wall; {} empty, {} suspect; mean score {:.1}",
                src.display(),
                s.predictions,
                if with_hints { "on" } else { "off" },
                wall,
                s.empty,
                s.suspect,
                s.mean_score.unwrap_or(f64::NAN)
            );
            println!("  reasons:  {:?}", s.reasons);
            println!("  findings: {:?}", s.findings);
            let mut buckets = [0usize; 5];
            for p in &a.predictions {
                if let Some(r) = &p.review {
                    let b = match r.score.score {
                        x if x >= 100.0 => 0,
                        x if x >= 90.0 => 1,
                        x if x >= 75.0 => 2,
                        x if x >= 50.0 => 3,
                        _ => 4,
                    };
                    buckets[b] += 1;
                }
            }
            println!(
                "  scores: 100: {}, [90,100): {}, [75,90): {}, [50,75): {}, <50: {}",
                buckets[0], buckets[1], buckets[2], buckets[3], buckets[4]
            );
            if std::env::var_os("PATCHGRADE_BENCH_VERBOSE").is_some() {
                for p in &a.predictions {
                    for f in p.review.iter().flat_map(|r| &r.findings) {
                        println!(
                            "    {} {} {} {}",
                            p.instance_id,
                            f.kind,
                            f.location(),
                            f.message
                        );
                    }
                }
            }
        }
    }
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

#[test]
fn planted_problems_found_at_their_lines_with_real_ruff_and_none_on_gold() {
    use patchgrade::review::hygiene::Context;
    use patchgrade::review::local::{review_trees, LocalTools};
    use patchgrade::review::FindingKind;

    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let tools = LocalTools { ruff };
    let base = repo_with(&[("pkg/core.py", CORE_BASE), ("pkg/other.py", "VALUE = 1\n")]);
    let (gold_tree, gold) = patched(base.path(), &[("pkg/core.py", CORE_GOLD)]);
    let issue = "core: div() raises ZeroDivisionError; sub() is fine.";
    let ctx = Context {
        issue,
        gold_patch: Some(&gold),
    };

    let (tree, patch) = patched(
        base.path(),
        &[
            ("pkg/core.py", CORE_PLANTED),
            ("pkg/other.py", "VALUE = 1\nOTHER = 2\n"),
        ],
    );
    let r = review_trees(&tools, base.path(), tree.path(), &patch, &ctx);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    let got: Vec<(FindingKind, String)> =
        r.findings.iter().map(|f| (f.kind, f.location())).collect();
    assert_eq!(
        got,
        vec![
            (FindingKind::NewLint, "pkg/core.py:14".into()),
            (FindingKind::DebugPrint, "pkg/core.py:5".into()),
            (FindingKind::CommentedOutCode, "pkg/core.py:15".into()),
            (FindingKind::WhitespaceOnlyHunk, "pkg/core.py:25".into()),
            (FindingKind::UnrelatedFile, "pkg/other.py:2".into()),
            (FindingKind::MoreFilesThanGold, String::new()),
        ],
        "{:#?}",
        r.findings
    );
    assert!(
        r.findings[0].message.contains("F821"),
        "{}",
        r.findings[0].message
    );
    let d = r.lint.as_ref().unwrap();
    // The pre-existing F401 in helper moved from line 13 to 20: kept.
    assert_eq!(d.kept, 1);
    assert_eq!(d.new.len(), 1);
    assert_eq!(r.score.score, 100.0 - 6.0 - 10.0 - 5.0 - 4.0 - 8.0 - 4.0);
    // Complexity was measured: scale is new (1); sub and mul touched (1 -> 1).
    let cx: Vec<(&str, Option<u32>, u32)> = r
        .complexity
        .iter()
        .map(|c| (c.name.as_str(), c.before, c.after))
        .collect();
    assert_eq!(
        cx,
        vec![("scale", None, 1), ("sub", Some(1), 1), ("mul", Some(1), 1)]
    );

    // Gold reviewed the same way: nothing at all.
    let g = review_trees(&tools, base.path(), gold_tree.path(), &gold, &ctx);
    assert!(
        g.findings.is_empty() && g.notes.is_empty(),
        "{:#?} {:?}",
        g.findings,
        g.notes
    );
    assert_eq!(g.score.score, 100.0);
    assert_eq!(g.lint.as_ref().unwrap().kept, 1);

    // A linter that cannot run is a note, never a clean delta.
    let broken = LocalTools {
        ruff: PathBuf::from("/nonexistent/ruff"),
    };
    let b = review_trees(&broken, base.path(), tree.path(), &patch, &ctx);
    assert!(b.lint.is_none());
    assert!(
        b.notes.iter().any(|n| n.starts_with("ruff not run")),
        "{:?}",
        b.notes
    );
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

#[test]
fn real_flake8_and_pylint_with_the_projects_config() {
    use lint::{Tool, FLAKE8_VERSION, PYLINT_VERSION};
    let (Some(flake8), Some(pylint)) = (
        pinned("flake8", &format!("{FLAKE8_VERSION} ")),
        pinned("pylint", &format!("pylint {PYLINT_VERSION}\n")),
    ) else {
        available(
            &format!("flake8 {FLAKE8_VERSION} and pylint {PYLINT_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    // The project's config: flake8 lines of 40 characters at most; pylint
    // only unused-variable (W0612).
    let base_src = "def f(a):\n    return 'a line longer than forty characters', a\n";
    let new_src = "def g(b):\n    unused = 2\n    return b\n\n\ndef f(a):\n    return 'a line longer than forty characters', a\n\n\nX = 'another line longer than forty characters'\n";
    let base = repo_with(&[
        (
            "setup.cfg",
            "[flake8]\nmax-line-length = 40\nselect = E501\n",
        ),
        (
            "pyproject.toml",
            "[tool.pylint.main]\ndisable = \"all\"\nenable = \"W0612\"\n",
        ),
        ("m.py", base_src),
    ]);
    assert_eq!(
        lint::configured(base.path()),
        vec![Tool::Flake8, Tool::Pylint]
    );
    let (tree, patch) = patched(base.path(), &[("m.py", new_src)]);
    let files = parse_diff(&patch).unwrap();

    let run = |tool, exe: &PathBuf, root: &Path| {
        let args = match tool {
            Tool::Flake8 => lint::flake8_args(&["m.py"]),
            _ => lint::pylint_args(&["m.py"]),
        };
        lint::run_linter(tool, exe, root, &args).unwrap()
    };
    let (b, p) = (
        run(Tool::Flake8, &flake8, base.path()),
        run(Tool::Flake8, &flake8, tree.path()),
    );
    assert_eq!(brief(&b), vec![("m.py".into(), 2, "E501".into())]);
    let d = lint::delta(&b, &p, &files);
    assert_eq!(brief(&d.new), vec![("m.py".into(), 10, "E501".into())]);
    assert_eq!(d.kept, 1, "the moved long line is not blamed");

    let (b, p) = (
        run(Tool::Pylint, &pylint, base.path()),
        run(Tool::Pylint, &pylint, tree.path()),
    );
    assert!(b.is_empty(), "{b:?}");
    let d = lint::delta(&b, &p, &files);
    assert_eq!(brief(&d.new), vec![("m.py".into(), 2, "W0612".into())]);
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

/// `harness-scripts/bench-review-host.sh`: the review script with real
/// linters over one repository's SWE-bench Lite instances, on this host (no
/// container): base trees from a mirror (`PATCHGRADE_MIRROR`, a git
/// directory), gold and, with `PATCHGRADE_PREDICTIONS`, a submission's
/// patches. Prints score distributions, findings and timings.
#[test]
#[ignore = "benchmark: needs SWE-bench Lite and a repository mirror"]
fn bench_review_host_lite() {
    use patchgrade::dataset::{load_predictions, Dataset};
    use patchgrade::patch::{self, Patch};
    use patchgrade::review::hygiene::{self, Context};
    use patchgrade::review::script::{self, ScriptSpec};
    use patchgrade::review::{FindingKind, StaticReview};
    use std::collections::BTreeMap;
    use std::time::Instant;

    let (Some(lite), Some(mirror), Some(repo)) = (
        std::env::var_os("PATCHGRADE_LITE").map(PathBuf::from),
        std::env::var_os("PATCHGRADE_MIRROR").map(PathBuf::from),
        std::env::var("PATCHGRADE_REPO").ok(),
    ) else {
        eprintln!("SKIPPED: set PATCHGRADE_LITE, PATCHGRADE_MIRROR and PATCHGRADE_REPO");
        return;
    };
    let tool_bin = std::env::var("PATCHGRADE_TOOL_BIN").unwrap_or_else(|_| {
        let out = Command::new("sh")
            .args(["-c", "command -v ruff"])
            .output()
            .unwrap();
        let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        p.parent().unwrap().display().to_string()
    });
    let limit: usize = std::env::var("PATCHGRADE_BENCH_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let ds = Dataset::load(&lite).unwrap();
    let mut subs: Vec<(String, BTreeMap<String, String>)> = vec![(
        "gold".into(),
        ds.instances
            .iter()
            .map(|i| (i.instance_id.clone(), i.patch.clone()))
            .collect(),
    )];
    if let Some(p) = std::env::var_os("PATCHGRADE_PREDICTIONS") {
        let preds = load_predictions(&[PathBuf::from(p)], &ds).unwrap();
        let name = preds
            .first()
            .map_or("predictions".into(), |p| p.model_name_or_path.clone());
        subs.push((
            name,
            preds
                .into_iter()
                .filter(|p| !p.is_empty_patch())
                .map(|p| (p.instance_id, p.model_patch.unwrap_or_default()))
                .collect(),
        ));
    }
    let mirror_s = mirror.display().to_string();
    let mut results: BTreeMap<String, Vec<(String, StaticReview, f64)>> = BTreeMap::new();
    let mut not_applied: BTreeMap<String, usize> = BTreeMap::new();
    let t_all = Instant::now();
    for inst in ds.instances.iter().filter(|i| i.repo == repo).take(limit) {
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("testbed");
        std::fs::create_dir(&root).unwrap();
        let sh = |cmd: &str| {
            let out = Command::new("bash")
                .arg("-c")
                .arg(cmd)
                .current_dir(&root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{cmd}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        sh(&format!(
            "git --git-dir='{mirror_s}' archive {} | tar -x && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base",
            inst.base_commit
        ));
        let extra = lint::configured(&root);
        let ctx = Context {
            issue: &inst.problem_statement,
            gold_patch: Some(&inst.patch),
        };
        for (label, patches) in &subs {
            let Some(text) = patches.get(&inst.instance_id) else {
                continue;
            };
            let t0 = Instant::now();
            let applied = Patch::parse(text)
                .ok()
                .filter(|p| patch::apply(&root, p).is_ok());
            if applied.is_none() {
                *not_applied.entry(label.clone()).or_default() += 1;
                continue;
            }
            let files = parse_diff(text).unwrap();
            let (base_paths, new_paths, written, deleted) = script::paths_of(&files);
            let new_dir = work.path().join(format!("new-{label}"));
            for p in &written {
                let (src, dst) = (root.join(p), new_dir.join(p));
                std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
                if src.is_file() {
                    std::fs::copy(src, dst).unwrap();
                }
            }
            sh("git checkout -q -- . && git clean -qfdx");
            let (root_s, new_s) = (root.display().to_string(), new_dir.display().to_string());
            let spec = ScriptSpec {
                root: &root_s,
                tool_bin: &tool_bin,
                patched_dir: &new_s,
                base_paths,
                new_paths,
                written,
                deleted,
                extra: extra.clone(),
                ruff_configured: lint::ruff_configured(&root),
            };
            let out = Command::new("bash")
                .arg("-c")
                .arg(script::build(&spec))
                .output()
                .unwrap();
            let r = script::parse_log(&String::from_utf8_lossy(&out.stdout), &spec);
            let review = script::review_from(&r, &spec, &files, hygiene::check(text, &ctx));
            sh("git checkout -q -- . && git clean -qfdx");
            results.entry(label.clone()).or_default().push((
                inst.instance_id.clone(),
                review,
                t0.elapsed().as_secs_f64(),
            ));
        }
    }
    println!("{repo}: {:.1} s in all", t_all.elapsed().as_secs_f64());
    for (label, rows) in &results {
        let n = rows.len();
        let mut scores: Vec<f64> = rows.iter().map(|r| r.1.score.score).collect();
        scores.sort_by(f64::total_cmp);
        let secs: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let mut kinds: BTreeMap<FindingKind, usize> = BTreeMap::new();
        let mut rules: BTreeMap<String, usize> = BTreeMap::new();
        let mut notes = 0;
        for (_, r, _) in rows {
            let ks: std::collections::BTreeSet<FindingKind> =
                r.findings.iter().map(|f| f.kind).collect();
            for k in ks {
                *kinds.entry(k).or_default() += 1;
            }
            for f in r.lint.iter().flat_map(|d| &d.new) {
                *rules
                    .entry(format!("{} {}", f.tool.name(), f.rule))
                    .or_default() += 1;
            }
            notes += usize::from(r.notes.iter().any(|n| n.starts_with("not run")));
        }
        let bucket = |lo: f64, hi: f64| scores.iter().filter(|s| **s >= lo && **s < hi).count();
        println!(
            "{label}: {n} reviewed ({} not applied), {notes} with a linter that did not run; mean score {:.1}, median {:.0}; 100: {}, [90,100): {}, [75,90): {}, [50,75): {}, <50: {}; {:.2} s per patch (max {:.2})",
            not_applied.get(label).copied().unwrap_or(0),
            scores.iter().sum::<f64>() / n.max(1) as f64,
            scores.get(n / 2).copied().unwrap_or(f64::NAN),
            bucket(100.0, 101.0),
            bucket(90.0, 100.0),
            bucket(75.0, 90.0),
            bucket(50.0, 75.0),
            bucket(0.0, 50.0),
            secs.iter().sum::<f64>() / n.max(1) as f64,
            secs.iter().copied().fold(0.0, f64::max),
        );
        println!("  patches with the finding: {kinds:?}");
        println!("  new lint findings by rule: {rules:?}");
        if std::env::var_os("PATCHGRADE_BENCH_VERBOSE").is_some() {
            for (id, r, _) in rows {
                for f in &r.findings {
                    println!("    {id} {} {} {}", f.kind, f.location(), f.message);
                }
                for n in &r.notes {
                    println!("    {id} note: {n}");
                }
            }
        }
    }
}

#[test]
fn real_ruff_reads_the_projects_own_config_and_else_checks_likely_errors() {
    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let src = "import os\n\n\ndef f(x):\n    return 'x=%s' % x\n";
    // No ruff config: likely errors only (F401), not pyupgrade's UP031.
    let plain = repo_with(&[("m.py", src)]);
    assert!(!lint::ruff_configured(plain.path()));
    let f = lint::run_ruff(
        &ruff,
        plain.path(),
        &lint::ruff_check_args(&["m.py"], false),
    )
    .unwrap();
    assert_eq!(brief(&f), vec![("m.py".into(), 1, "F401".into())]);
    // The project selects UP031 only: that is what runs.
    let configured = repo_with(&[
        (
            "pyproject.toml",
            "[project]\nname = \"m\"\n\n[tool.ruff.lint]\nselect = [\"UP031\"]\n",
        ),
        ("m.py", src),
    ]);
    assert!(lint::ruff_configured(configured.path()));
    let f = lint::run_ruff(
        &ruff,
        configured.path(),
        &lint::ruff_check_args(&["m.py"], true),
    )
    .unwrap();
    assert_eq!(brief(&f), vec![("m.py".into(), 5, "UP031".into())]);
}
