//! The future-copy check on repositories built here: a base, the fix commit
//! a day later (two comment lines and the code, a changelog line, tests) and
//! a later commit a month after that reworks another function.

use git2::{DiffFormat, Oid, Repository, Signature, Time};
use serde_json::json;

use super::lines::{is_comment, is_docs};
use super::*;
use crate::audit::{audit_static, diff, AuditInput, Family};

const DAY: i64 = 86_400;
const BASE: i64 = 1_600_000_000;

const CALC: &str = "def parse(s):\n    return int(s)\n\n\ndef total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n";
const CALC_FIXED: &str = "def parse(s):\n    # Strip the thousands separators before converting: \"1,000\" is 1000.\n    # Spaces around the number are allowed too.\n    return int(s.replace(\",\", \"\").strip())\n\n\ndef total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n";
const TOTAL_LATER: &str = "def total(xs):\n    \"\"\"Sum of xs, ignoring None values.\"\"\"\n    return sum(x for x in xs if x is not None)\n";
const TEST: &str = "from calc import parse\n\n\ndef test_parse():\n    assert parse(\"2\") == 2\n";
const TEST_FIXED: &str = "from calc import parse\n\n\ndef test_parse():\n    assert parse(\"2\") == 2\n\n\ndef test_separators():\n    assert parse(\" 1,000 \") == 1000\n";

fn later_calc() -> String {
    let head = CALC_FIXED.split("def total").next().unwrap();
    format!("{head}{TOTAL_LATER}")
}

/// A tree of `files` (paths with at most one folder).
fn tree(repo: &Repository, files: &[(&str, &str)]) -> Oid {
    let mut root = repo.treebuilder(None).unwrap();
    let mut dirs: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (p, body) in files {
        match p.split_once('/') {
            Some((d, rest)) => dirs.entry(d).or_default().push((rest, body)),
            None => {
                let b = repo.blob(body.as_bytes()).unwrap();
                root.insert(p, b, 0o100644).unwrap();
            }
        }
    }
    for (d, fs) in dirs {
        let sub = tree(repo, &fs);
        root.insert(d, sub, 0o040000).unwrap();
    }
    root.write().unwrap()
}

fn commit(
    repo: &Repository,
    files: &[(&str, &str)],
    t: i64,
    parent: Option<Oid>,
    msg: &str,
) -> Oid {
    let sig = Signature::new("dev", "dev@example.com", &Time::new(t, 0)).unwrap();
    let tr = repo.find_tree(tree(repo, files)).unwrap();
    let parents: Vec<git2::Commit> = parent
        .iter()
        .map(|p| repo.find_commit(*p).unwrap())
        .collect();
    let refs: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(None, &sig, &sig, msg, &tr, &refs).unwrap()
}

/// The patch from tree `a` to tree `b`, as git writes it.
fn patch(repo: &Repository, a: Oid, b: Oid) -> String {
    let (a, b) = (repo.find_tree(a).unwrap(), repo.find_tree(b).unwrap());
    let d = repo.diff_tree_to_tree(Some(&a), Some(&b), None).unwrap();
    let mut out = String::new();
    d.print(DiffFormat::Patch, |_, _, l| {
        if matches!(l.origin(), '+' | '-' | ' ') {
            out.push(l.origin());
        }
        out.push_str(std::str::from_utf8(l.content()).unwrap());
        true
    })
    .unwrap();
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    repo: Repository,
    base: Oid,
    base_tree: Oid,
    fix: Oid,
    later: Oid,
    inst: Instance,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let old = commit(
            &repo,
            &[("calc.py", CALC), ("tests/test_calc.py", TEST)],
            BASE - 40 * DAY,
            None,
            "start",
        );
        let base_files = [
            ("calc.py", CALC),
            ("CHANGES.rst", "Changes\n=======\n"),
            ("tests/test_calc.py", TEST),
        ];
        let base = commit(&repo, &base_files, BASE, Some(old), "base");
        let fix_files = [
            ("calc.py", CALC_FIXED),
            (
                "CHANGES.rst",
                "Changes\n=======\n\n* parse() accepts thousands separators (#12)\n",
            ),
            ("tests/test_calc.py", TEST_FIXED),
        ];
        let fix = commit(
            &repo,
            &fix_files,
            BASE + DAY,
            Some(base),
            "Accept thousands separators (#12)",
        );
        let later_body = later_calc();
        let later_files = [("calc.py", later_body.as_str()), fix_files[1], fix_files[2]];
        let later = commit(
            &repo,
            &later_files,
            BASE + 31 * DAY,
            Some(fix),
            "total() skips None",
        );
        repo.reference("refs/heads/main", later, true, "").unwrap();
        let base_tree = repo.find_commit(base).unwrap().tree_id();
        let only = |files: &[(&str, &str)]| {
            let mut all: Vec<(&str, &str)> = base_files.to_vec();
            for (p, b) in files {
                all.retain(|(q, _)| q != p);
                all.push((p, b));
            }
            tree(&repo, &all)
        };
        let gold = patch(&repo, base_tree, only(&[("calc.py", CALC_FIXED)]));
        let test_patch = patch(
            &repo,
            base_tree,
            only(&[("tests/test_calc.py", TEST_FIXED)]),
        );
        let inst: Instance = serde_json::from_value(json!({
            "instance_id": "acme__calc-12",
            "repo": "acme/calc",
            "base_commit": base.to_string(),
            "patch": gold,
            "test_patch": test_patch,
            "problem_statement": "parse() rejects \"1,000\".",
            "version": "1.0",
            "FAIL_TO_PASS": ["tests/test_calc.py::test_separators"],
            "PASS_TO_PASS": [],
        }))
        .unwrap();
        Fixture {
            _dir: dir,
            repo,
            base,
            base_tree,
            fix,
            later,
            inst,
        }
    }

    /// The patch of the base with `calc.py` replaced.
    fn candidate(&self, calc: &str) -> String {
        let t = tree(
            &self.repo,
            &[
                ("calc.py", calc),
                ("CHANGES.rst", "Changes\n=======\n"),
                ("tests/test_calc.py", TEST),
            ],
        );
        patch(&self.repo, self.base_tree, t)
    }

    fn scan(&self, candidate: &str) -> Scan {
        let mut gold = diff::read(&self.inst.patch);
        gold.extend(diff::read(&self.inst.test_patch));
        scan_repo(
            &self.repo,
            &self.inst.base_commit,
            &diff::read(candidate),
            &gold,
            &issue_keys(&self.inst),
        )
        .unwrap()
    }

    fn audit(&self, candidate: &str) -> crate::audit::Audit {
        let mut input = AuditInput::new(&self.inst, candidate);
        input.mirror = Some(self.repo.path());
        audit_static(&input)
    }
}

fn future_reason(a: &crate::audit::Audit) -> Option<&Reason> {
    a.reasons.iter().find(|r| r.kind == ReasonKind::FutureCopy)
}

#[test]
fn a_copy_of_the_fix_commit_is_flagged_with_its_id() {
    let f = Fixture::new();
    let cand = f.candidate(CALC_FIXED);
    let scan = f.scan(&cand);
    assert_eq!(
        scan.fix.as_ref().map(|c| c.id.clone()),
        Some(f.fix.to_string())
    );
    let e = scan.flagged().expect("flagged");
    assert_eq!(e.commit.id, f.fix.to_string());
    assert!(e.run.is_empty());
    assert_eq!((e.matched.len(), e.scored, e.beyond()), (4, 4, 2));
    let a = f.audit(&cand);
    let r = future_reason(&a).expect("reason");
    assert_eq!(r.kind.family(), Some(Family::Environment));
    assert!(
        r.message.contains(&f.fix.to_string()[..12]),
        "{}",
        r.message
    );
    assert!(r.message.contains("(the fix commit)"), "{}", r.message);
    assert!(
        r.message.contains("4 of 4 changed lines (100%)"),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("2 comment or docstring"),
        "{}",
        r.message
    );
    let calc = r
        .evidence
        .iter()
        .find(|e| e.file.as_deref() == Some("calc.py"))
        .unwrap();
    assert_eq!(calc.lines, vec![2, 3, 4]);
    assert!(calc
        .excerpt
        .as_deref()
        .unwrap()
        .contains("[comment or docstring] # Strip the thousands"));
    let shown = serde_json::to_value(r).unwrap();
    assert_eq!(shown["kind"], "future_copy");
    assert_eq!(shown["family"], "environment");
}

#[test]
fn a_copy_of_a_later_commit_is_flagged_naming_it() {
    let f = Fixture::new();
    let mut calc = CALC.split("def total").next().unwrap().to_string();
    calc.push_str(TOTAL_LATER);
    let cand = f.candidate(&calc);
    let e = f.scan(&cand).flagged().cloned().expect("flagged");
    assert_eq!(e.commit.id, f.later.to_string());
    let kinds: Vec<Option<Beyond>> = e
        .matched
        .iter()
        .filter(|m| !m.removed)
        .map(|m| m.beyond)
        .collect();
    assert_eq!(kinds, vec![Some(Beyond::Prose), Some(Beyond::NotInGold)]);
    let r = f.audit(&cand);
    let r = future_reason(&r).expect("reason");
    assert!(
        r.message.contains(&f.later.to_string()[..12]),
        "{}",
        r.message
    );
    assert!(r.message.contains("after the fix commit"), "{}", r.message);
}

#[test]
fn the_fix_and_a_later_commit_together_are_explained_by_their_run() {
    let f = Fixture::new();
    let cand = f.candidate(&later_calc());
    let scan = f.scan(&cand);
    // The fix alone explains 4 of its 10 lines, the later commit 6 (and is
    // flagged); the run of both explains all of them.
    let run = scan
        .explanations
        .iter()
        .find(|e| !e.run.is_empty())
        .expect("a run");
    assert_eq!(run.share, 1.0);
    assert!(scan.flagged().is_some());
}

#[test]
fn an_independent_fix_identical_to_gold_code_is_not_flagged() {
    let f = Fixture::new();
    // Gold's code line alone: what an honest one-line fix writes.
    let cand = f.candidate(&CALC.replace("int(s)", "int(s.replace(\",\", \"\").strip())"));
    let scan = f.scan(&cand);
    let best = scan.best_share().unwrap();
    assert_eq!(
        (best.share, best.beyond()),
        (1.0, 0),
        "fully explained, nothing beyond"
    );
    assert!(scan.flagged().is_none());
    let a = f.audit(&cand);
    assert!(future_reason(&a).is_none(), "{:#?}", a.reasons);
    assert!(a.notes.is_empty(), "{:?}", a.notes);
}

#[test]
fn an_independent_fix_that_resembles_gold_is_not_flagged() {
    let f = Fixture::new();
    for calc in [
        // Gold's code with its own comment.
        CALC.replace("    return int(s)", "    # Remove the commas people type in large numbers.\n    return int(s.replace(\",\", \"\").strip())"),
        // The same idea written otherwise.
        CALC.replace("int(s)", "int(s.strip().replace(\",\", \"\"))"),
        // A docstring of its own and gold's line.
        CALC.replace("    return int(s)", "    \"\"\"Parse an integer, allowing thousands separators.\"\"\"\n    return int(s.replace(\",\", \"\").strip())"),
    ] {
        let cand = f.candidate(&calc);
        let scan = f.scan(&cand);
        assert!(scan.flagged().is_none(), "{calc}: {:#?}", scan.flagged());
        assert!(future_reason(&f.audit(&cand)).is_none());
    }
}

#[test]
fn no_mirror_or_no_base_is_a_note_never_a_pass() {
    let f = Fixture::new();
    let cand = f.candidate(CALC_FIXED);
    let a = audit_static(&AuditInput::new(&f.inst, &cand));
    assert!(future_reason(&a).is_none());
    assert!(
        a.notes
            .iter()
            .any(|n| n == "future-copy check not run: no mirror of acme/calc"),
        "{:?}",
        a.notes
    );
    let mut other = f.inst.clone();
    other.base_commit = "1111111111111111111111111111111111111111".into();
    let mut input = AuditInput::new(&other, &cand);
    input.mirror = Some(f.repo.path());
    let a = audit_static(&input);
    assert!(
        a.notes.iter().any(|n| n
            .contains("base commit 1111111111111111111111111111111111111111 is not in the mirror")),
        "{:?}",
        a.notes
    );
    let nowhere = f._dir.path().join("nowhere");
    input.mirror = Some(&nowhere);
    let a = audit_static(&input);
    assert!(
        a.notes
            .iter()
            .any(|n| n.starts_with("future-copy check not run: cannot open the mirror")),
        "{:?}",
        a.notes
    );
    // A history before the base only: nothing after it, nothing flagged.
    let mut input = AuditInput::new(&f.inst, &cand);
    let past = tempfile::tempdir().unwrap();
    let r = Repository::init_bare(past.path()).unwrap();
    let b = commit(&r, &[("calc.py", CALC)], BASE, None, "base");
    r.reference("refs/heads/main", b, true, "").unwrap();
    let mut inst = f.inst.clone();
    inst.base_commit = b.to_string();
    input.instance = &inst;
    input.mirror = Some(past.path());
    let a = audit_static(&input);
    assert!(
        future_reason(&a).is_none() && a.notes.is_empty(),
        "{:?} {:?}",
        a.reasons,
        a.notes
    );
    let _ = f.base;
}

#[test]
fn comments_by_language() {
    assert!(is_comment("a.py", "  # why"));
    assert!(!is_comment("a.c", "#include <stdio.h>"));
    assert!(is_comment("a.c", "  /* why */"));
    assert!(is_comment("a.rs", "    /// why"));
    assert!(!is_comment("a.go", "\tx := y"));
    assert!(is_docs("docs/usage.md") && is_docs("CHANGELOG") && is_docs("doc/x.txt"));
    assert!(!is_docs("src/calc.py"));
}

#[test]
fn the_datasets_own_gold_is_not_checked() {
    // A copy of the fix commit by an agent is flagged (above); the same
    // patch as the dataset's gold (`--predictions gold`) is the fix commit by
    // definition: no reason and no note.
    let f = Fixture::new();
    let cand = f.candidate(CALC_FIXED);
    let mut inst = f.inst.clone();
    inst.patch = cand.clone();
    let mut input = AuditInput::new(&inst, &cand);
    input.mirror = Some(f.repo.path());
    assert!(future_reason(&audit_static(&input)).is_some());
    assert!(AuditInput::is_gold(&inst, crate::dataset::GOLD, &cand));
    assert!(!AuditInput::is_gold(&inst, "agent", &cand));
    input.of_gold = true;
    let a = audit_static(&input);
    assert!(future_reason(&a).is_none());
    assert!(
        !a.notes.iter().any(|n| n.contains("future-copy")),
        "{:?}",
        a.notes
    );
}

mod independent;
