//! The history check on real git repositories: built ones that must come
//! out clean or flagged (counted into the table of
//! `fixtures_precision_recall`), patchgrade's own checkout and full clone,
//! and this repository's history.

use git2::{Oid, Repository, Signature, Time};
use patchgrade::audit::history;

use super::*;

fn sig(t: i64) -> Signature<'static> {
    Signature::new("dev", "dev@example.com", &Time::new(t, 0)).unwrap()
}

fn commit(
    repo: &Repository,
    refname: Option<&str>,
    file: &str,
    body: &str,
    t: i64,
    parents: &[Oid],
) -> Oid {
    let blob = repo.blob(body.as_bytes()).unwrap();
    let mut tb = repo.treebuilder(None).unwrap();
    tb.insert(file, blob, 0o100644).unwrap();
    let tree = repo.find_tree(tb.write().unwrap()).unwrap();
    let parents: Vec<git2::Commit> = parents
        .iter()
        .map(|p| repo.find_commit(*p).unwrap())
        .collect();
    let refs: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(
        refname,
        &sig(t),
        &sig(t),
        &format!("change {file} at {t}"),
        &tree,
        &refs,
    )
    .unwrap()
}

const DAY: i64 = 86_400;
const BASE: i64 = 1_600_000_000;

/// A repository with history up to the base: c1 <- c2 <- base (HEAD, main).
fn past_repo(dir: &Path) -> (Repository, Oid) {
    let repo = Repository::init(dir).unwrap();
    let c1 = commit(&repo, None, "a.py", "1", BASE - 30 * DAY, &[]);
    let c2 = commit(&repo, None, "a.py", "2", BASE - 10 * DAY, &[c1]);
    let base = commit(&repo, Some("refs/heads/main"), "a.py", "3", BASE, &[c2]);
    repo.set_head("refs/heads/main").unwrap();
    (repo, base)
}

fn instance(base: Oid, created_at: &str) -> Instance {
    serde_json::from_value(serde_json::json!({
        "instance_id": "o__r-1",
        "repo": "o/r",
        "base_commit": base.to_string(),
        "created_at": created_at,
    }))
    .unwrap()
}

type Build = fn(&Path) -> (Oid, Option<i64>);

/// Repositories that must come out clean, and ones that must be flagged.
fn history_cases() -> Vec<(&'static str, bool, Build)> {
    vec![
        ("only the base commit", false, |d| {
            let repo = Repository::init(d).unwrap();
            let b = commit(&repo, Some("HEAD"), "a.py", "x", BASE, &[]);
            (b, None)
        }),
        ("history before the base", false, |d| (past_repo(d).1, None)),
        ("old side branch", false, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/heads/old"),
                "b.py",
                "x",
                BASE - 5 * DAY,
                &[],
            );
            (base, None)
        }),
        ("old tags, lightweight and annotated", false, |d| {
            let (repo, base) = past_repo(d);
            let obj = repo.find_object(base, None).unwrap();
            repo.tag_lightweight("v1.0", &obj, false).unwrap();
            repo.tag("v1.0a", &obj, &sig(BASE - DAY), "release", false)
                .unwrap();
            (base, None)
        }),
        ("uncommitted work in the tree", false, |d| {
            let (_, base) = past_repo(d);
            std::fs::write(d.join("a.py"), "edited by the candidate").unwrap();
            (base, None)
        }),
        ("reflog of the base only", false, |d| {
            let (repo, base) = past_repo(d);
            repo.reference("refs/heads/work", base, true, "branch: Created from HEAD")
                .unwrap();
            (base, None)
        }),
        ("base time passed explicitly", false, |d| {
            let (_, base) = past_repo(d);
            (base, Some(BASE))
        }),
        ("base missing, created_at fallback", false, |d| {
            let repo = Repository::init(d).unwrap();
            commit(&repo, Some("HEAD"), "a.py", "x", BASE - DAY, &[]);
            (
                Oid::from_str("1111111111111111111111111111111111111111").unwrap(),
                None,
            )
        }),
        (
            "commits dated before the base on another root",
            false,
            |d| {
                let (repo, base) = past_repo(d);
                let r = commit(&repo, None, "z.py", "z", BASE - 100 * DAY, &[]);
                commit(
                    &repo,
                    Some("refs/heads/legacy"),
                    "z.py",
                    "zz",
                    BASE - 90 * DAY,
                    &[r],
                );
                (base, None)
            },
        ),
        ("rebased ancestor dated after its child", false, |d| {
            // An ancestor of the base with a later date is not future.
            let repo = Repository::init(d).unwrap();
            let c1 = commit(&repo, None, "a.py", "1", BASE + 5 * DAY, &[]);
            let base = commit(&repo, Some("refs/heads/main"), "a.py", "2", BASE, &[c1]);
            repo.set_head("refs/heads/main").unwrap();
            (base, None)
        }),
        ("future commit on a branch", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/heads/fix"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            (base, None)
        }),
        ("future commit on main, HEAD reset to base", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/heads/main"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            repo.set_head_detached(base).unwrap();
            (base, None)
        }),
        ("future commit only in a reflog", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/heads/main"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            repo.reference("refs/heads/main", base, true, "reset: moving to base")
                .unwrap();
            (base, None)
        }),
        ("future lightweight tag", true, |d| {
            let (repo, base) = past_repo(d);
            let f = commit(&repo, None, "a.py", "fix", BASE + 3 * DAY, &[base]);
            repo.tag_lightweight("v2.0", &repo.find_object(f, None).unwrap(), false)
                .unwrap();
            (base, None)
        }),
        ("annotated tag dated after the base", true, |d| {
            let (repo, base) = past_repo(d);
            let obj = repo.find_object(base, None).unwrap();
            repo.tag("v1.1", &obj, &sig(BASE + 2 * DAY), "later", false)
                .unwrap();
            (base, None)
        }),
        ("remote-tracking ref", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/remotes/origin/main"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            (base, None)
        }),
        ("pull request ref", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/pull/123/head"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            (base, None)
        }),
        ("ORIG_HEAD file", true, |d| {
            let (repo, base) = past_repo(d);
            let f = commit(&repo, None, "a.py", "fix", BASE + DAY, &[base]);
            std::fs::write(repo.path().join("ORIG_HEAD"), format!("{f}\n")).unwrap();
            (base, None)
        }),
        ("FETCH_HEAD file", true, |d| {
            let (repo, base) = past_repo(d);
            let f = commit(&repo, None, "a.py", "fix", BASE + DAY, &[base]);
            std::fs::write(
                repo.path().join("FETCH_HEAD"),
                format!("{f}\t\tbranch 'main' of https://example.com/o/r\n"),
            )
            .unwrap();
            (base, None)
        }),
        ("stash of a future commit", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/stash"),
                "a.py",
                "wip",
                BASE + DAY,
                &[base],
            );
            (base, None)
        }),
        ("reflog file of a deleted branch", true, |d| {
            let (repo, base) = past_repo(d);
            commit(
                &repo,
                Some("refs/heads/gone"),
                "a.py",
                "fix",
                BASE + DAY,
                &[base],
            );
            // Keep the log file, delete the ref the way a manual cleanup would.
            let log = repo.path().join("logs/refs/heads/gone");
            let saved = std::fs::read(&log).unwrap();
            repo.find_reference("refs/heads/gone")
                .unwrap()
                .delete()
                .unwrap();
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            std::fs::write(&log, saved).unwrap();
            (base, None)
        }),
        ("committer date after base, author date before", true, |d| {
            let (repo, base) = past_repo(d);
            let blob = repo.blob(b"fix").unwrap();
            let mut tb = repo.treebuilder(None).unwrap();
            tb.insert("a.py", blob, 0o100644).unwrap();
            let tree = repo.find_tree(tb.write().unwrap()).unwrap();
            let parent = repo.find_commit(base).unwrap();
            repo.commit(
                Some("refs/heads/rebased"),
                &sig(BASE - DAY),
                &sig(BASE + DAY),
                "fix",
                &tree,
                &[&parent],
            )
            .unwrap();
            (base, None)
        }),
    ]
}

fn history_flags(dir: &Path, base: Oid, base_time: Option<i64>) -> bool {
    let inst = instance(base, "2020-09-13T12:26:40Z");
    let reasons = history::check(dir, base_time, &inst).expect("history check runs");
    for r in &reasons {
        assert_eq!(r.kind, ReasonKind::FutureHistory);
        assert!(!r.evidence.is_empty());
    }
    !reasons.is_empty()
}

pub(crate) fn history_counts() -> Counts {
    let mut c = Counts::default();
    for (name, flagged, build) in history_cases() {
        let d = tempfile::tempdir().unwrap();
        let (base, t) = build(d.path());
        let got = history_flags(d.path(), base, t);
        if got != flagged {
            println!("MISS history: {name}: expected {flagged} got {got}");
        }
        c.add(flagged, got);
    }
    c
}

/// patchgrade's own checkout (one commit, no history) is clean; the same
/// repository as a full clone is flagged.
#[test]
fn history_on_patchgrade_checkout_and_full_clone() {
    use patchgrade::repo::{RepoCache, RepoSources, DEFAULT_URL_TEMPLATE};
    let d = tempfile::tempdir().unwrap();
    let src_dir = d.path().join("mirrors/o__r");
    let (repo, base) = past_repo(&src_dir);
    let fix = commit(
        &repo,
        Some("refs/heads/main"),
        "a.py",
        "the fix",
        BASE + DAY,
        &[base],
    );
    let cache = RepoCache::new(RepoSources {
        cache: d.path().join("cache"),
        mirror_dir: Some(d.path().join("mirrors")),
        export_dirs: vec![],
        url_template: DEFAULT_URL_TEMPLATE.into(),
    });
    let mirror = cache
        .ensure("o/r", &[&base.to_string(), &fix.to_string()])
        .unwrap();
    let base_time = history::base_commit_time(&mirror, &base.to_string());
    assert_eq!(base_time, Some(BASE));
    let co = cache
        .checkout("o/r", &base.to_string(), &d.path().join("tree"))
        .unwrap();
    let inst = instance(base, "2020-09-13T12:26:40Z");

    let mut input = AuditInput::new(&inst, "");
    input.checkout = Some(&co.path);
    input.base_time = base_time;
    let audit = audit::audit_static(&input);
    assert!(
        !audit.has(ReasonKind::FutureHistory),
        "{:#?}",
        audit.reasons
    );
    assert!(audit.notes.is_empty(), "{:?}", audit.notes);
    let scan = history::scan(&co.path, BASE, Some(&base.to_string())).unwrap();
    assert_eq!(scan.reachable, 1, "the checkout holds one commit");

    // The mirror (a full clone) reaches the fix.
    input.checkout = Some(&mirror);
    let audit = audit::audit_static(&input);
    let r = audit
        .reasons
        .iter()
        .find(|r| r.kind == ReasonKind::FutureHistory)
        .expect("full clone flagged");
    let shown = serde_json::to_string(r).unwrap();
    assert!(shown.contains(&fix.to_string()[..12]), "{shown}");

    // Not a repository: a note, no reason.
    input.checkout = Some(d.path());
    let audit = audit::audit_static(&input);
    assert!(!audit.has(ReasonKind::FutureHistory));
    assert_eq!(audit.notes.len(), 1, "{:?}", audit.notes);
}

/// This crate's own clone, with its base at the first commit: every later
/// commit is future history. Skipped where the checkout is not a git clone
/// with more than one commit (a source tarball, a shallow CI clone).
#[test]
fn history_on_this_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(repo) = Repository::open(root) else {
        eprintln!("not a git checkout; skipped");
        return;
    };
    let mut walk = repo.revwalk().unwrap();
    if walk.push_head().is_err() {
        return;
    }
    walk.set_sorting(git2::Sort::TIME | git2::Sort::REVERSE)
        .unwrap();
    let commits: Vec<Oid> = walk.flatten().collect();
    if commits.len() < 2 || repo.is_shallow() {
        eprintln!("fewer than two commits; skipped");
        return;
    }
    let first = repo.find_commit(commits[0]).unwrap();
    let t = first.time().seconds();
    let later = commits[1..]
        .iter()
        .filter(|o| repo.find_commit(**o).unwrap().time().seconds() > t)
        .count();
    let scan = history::scan(root, t, Some(&commits[0].to_string())).unwrap();
    assert!(
        scan.future_commits.len() >= later,
        "{} < {later}",
        scan.future_commits.len()
    );
    if later > 0 {
        assert!(history_flags(root, commits[0], Some(t)));
    }
}
