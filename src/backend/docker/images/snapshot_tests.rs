//! Unit tests of `images::snapshot`, on real repositories and the git
//! command line (what the instance image runs).

use std::path::Path;
use std::process::Command;

use git2::{Repository, Signature, Time};

use super::*;

/// A commit of `files` (path, content, mode) at unix time `t`.
fn commit_at(r: &Repository, files: &[(&str, &str, i32)], t: i64) -> Oid {
    let mut root = r.treebuilder(None).unwrap();
    let mut dirs: std::collections::BTreeMap<String, Vec<(String, Oid, i32)>> = Default::default();
    for (path, body, mode) in files {
        let blob = r.blob(body.as_bytes()).unwrap();
        match path.rsplit_once('/') {
            Some((dir, name)) => {
                dirs.entry(dir.to_string())
                    .or_default()
                    .push((name.to_string(), blob, *mode))
            }
            None => {
                root.insert(path, blob, *mode).unwrap();
            }
        }
    }
    // One level of folders is all these tests need.
    for (dir, entries) in dirs {
        let mut tb = r.treebuilder(None).unwrap();
        for (name, blob, mode) in entries {
            tb.insert(name, blob, mode).unwrap();
        }
        root.insert(dir, tb.write().unwrap(), 0o040000).unwrap();
    }
    let tree = r.find_tree(root.write().unwrap()).unwrap();
    let sig = Signature::new("t", "t@t", &Time::new(t, 0)).unwrap();
    let parent = r.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    r.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents)
        .unwrap()
}

fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A git that fails early closes its stdin: its stderr says why.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or_default());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const W: i64 = WINDOW_SECS;

#[test]
fn the_anchor_is_the_newest_first_parent_ancestor_before_the_window() {
    let d = tempfile::tempdir().unwrap();
    let r = Repository::init_bare(d.path()).unwrap();
    let f = |s: &'static str| [("a.txt", s, 0o100644)];
    let c0 = commit_at(&r, &f("0"), 10 * W + 5); // window 10, a root
    let c1 = commit_at(&r, &f("1"), 11 * W + 5); // window 11
    let c2 = commit_at(&r, &f("2"), 11 * W + 9);
    let c3 = commit_at(&r, &f("3"), 12 * W + 1); // window 12
    let c4 = commit_at(&r, &f("4"), 12 * W + 7);
    assert_eq!(
        anchor(&r, c0, Windows::of(None)).unwrap(),
        None,
        "history starts in its window"
    );
    assert_eq!(anchor(&r, c1, Windows::of(None)).unwrap(), Some(c0));
    assert_eq!(
        anchor(&r, c2, Windows::of(None)).unwrap(),
        Some(c0),
        "same window, same anchor"
    );
    assert_eq!(anchor(&r, c3, Windows::of(None)).unwrap(), Some(c2));
    assert_eq!(anchor(&r, c4, Windows::of(None)).unwrap(), Some(c2));
}

#[test]
fn a_chain_links_each_window_to_the_one_before_within_its_span() {
    let d = tempfile::tempdir().unwrap();
    let r = Repository::init_bare(d.path()).unwrap();
    let f = |s: &'static str| [("a.txt", s, 0o100644)];
    // 10-day windows, 4 to a span: windows 0-3 are span 0, 4-7 span 1.
    let w = Windows::of(Some(SnapshotRule {
        window_days: 10,
        chain: 4,
    }));
    let day = 24 * 3600;
    let c0 = commit_at(&r, &f("0"), 5 * day); // window 0
    let c1 = commit_at(&r, &f("1"), 15 * day); // window 1
    let c2 = commit_at(&r, &f("2"), 35 * day); // window 3 (2 is empty)
    let c4 = commit_at(&r, &f("4"), 45 * day); // window 4: a new span
    let c5 = commit_at(&r, &f("5"), 55 * day); // window 5
    let c6 = commit_at(&r, &f("6"), 65 * day); // window 6
                                               // The anchor of a window-6 base is c5; its chain goes back to the
                                               // span's first window with a commit, c4, and not into span 0.
    assert_eq!(anchor(&r, c6, w).unwrap(), Some(c5));
    assert_eq!(chain(&r, c5, w).unwrap(), vec![c4, c5]);
    assert_eq!(
        chain(&r, c4, w).unwrap(),
        vec![c4],
        "a span's first link is whole"
    );
    // An empty window is skipped: c2's link is over c1's, c1's over c0's.
    assert_eq!(chain(&r, c2, w).unwrap(), vec![c0, c1, c2]);
    // Every link but the first is the anchor of the next one.
    let links = chain(&r, c2, w).unwrap();
    for pair in links.windows(2) {
        assert_eq!(anchor(&r, pair[1], w).unwrap(), Some(pair[0]));
    }
    // Without chains every snapshot is whole.
    assert_eq!(chain(&r, c2, Windows::of(None)).unwrap(), vec![c2]);
    // At most `chain` links, however many commits a span has.
    let w2 = Windows::of(Some(SnapshotRule {
        window_days: 1,
        chain: 3,
    }));
    let mut last = c6;
    for i in 0..6 {
        last = commit_at(&r, &f("x"), 72 * day + i * day + 1);
    }
    assert!(chain(&r, last, w2).unwrap().len() <= 3);
}

#[test]
fn a_delta_and_its_pack_turn_the_snapshot_into_the_base_tree() {
    let d = tempfile::tempdir().unwrap();
    let src = Repository::init_bare(d.path().join("src.git")).unwrap();
    let old = [
        ("keep.txt", "same\n", 0o100644),
        ("mod.txt", "old\n", 0o100644),
        ("gone.txt", "bye\n", 0o100644),
        ("dir/a.txt", "a\n", 0o100644),
        ("dir/b.txt", "b\n", 0o100644),
        ("f2d", "a file\n", 0o100644),
        ("d2f/y", "y\n", 0o100644),
        ("link", "keep.txt", 0o120000),
        ("run.sh", "#!/bin/sh\n", 0o100644),
        ("part/stay.txt", "s\n", 0o100644),
        ("part/drop.txt", "d\n", 0o100644),
    ];
    let new = [
        ("keep.txt", "same\n", 0o100644),
        ("mod.txt", "new\n", 0o100644),
        ("added.txt", "hello\n", 0o100644),
        ("f2d/x", "now a folder\n", 0o100644),
        ("d2f", "now a file\n", 0o100644),
        ("link", "a plain file\n", 0o100644),
        ("run.sh", "#!/bin/sh\n", 0o100755),
        ("part/stay.txt", "s\n", 0o100644),
    ];
    let a = commit_at(&src, &old, 100);
    let b = commit_at(&src, &new, 200);
    let (ta, tb) = (
        src.find_commit(a).unwrap().tree_id(),
        src.find_commit(b).unwrap().tree_id(),
    );
    let delta = tree_delta(&src, ta, tb).unwrap();
    assert_eq!(
        delta.delete,
        ["d2f", "dir", "f2d", "gone.txt", "link", "part/drop.txt"],
        "whole folders once, type changes removed before they are written"
    );
    let written: Vec<(&str, u32)> = delta
        .write
        .iter()
        .map(|w| (w.path.as_str(), w.mode))
        .collect();
    assert_eq!(
        written,
        [
            ("added.txt", 0o100644),
            ("d2f", 0o100644),
            ("f2d/x", 0o100644),
            ("link", 0o100644),
            ("mod.txt", 0o100644),
            ("run.sh", 0o100755),
        ]
    );
    assert_eq!(
        delta.delete_list(),
        b"d2f\0dir\0f2d\0gone.txt\0link\0part/drop.txt\0"
    );

    // The snapshot: the old tree checked out, its objects alone in a store.
    let snap = d.path().join("snap.git");
    let store = Repository::init_bare(&snap).unwrap();
    let mut ids = HashSet::new();
    collect(&src, ta, &mut ids).unwrap();
    let (from, to) = (src.odb().unwrap(), store.odb().unwrap());
    for id in &ids {
        let o = from.read(*id).unwrap();
        to.write(o.kind(), o.data()).unwrap();
    }
    let work = d.path().join("testbed");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q"], None);
    std::fs::write(
        work.join(".git/objects/info/alternates"),
        format!("{}\n", snap.join("objects").display()),
    )
    .unwrap();
    git(&work, &["read-tree", &ta.to_string()], None);
    git(&work, &["checkout-index", "-a"], None);

    // What the instance image does: write in place (its `COPY`, which must
    // meet no path whose type changes), delete, move the rest in, index the
    // pack, commit.
    let deleted = delta.delete.clone();
    let (in_place, moved) = delta.split_writes();
    let moved_paths: Vec<&str> = moved.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        moved_paths,
        ["d2f", "f2d/x", "link"],
        "the writes on deleted paths"
    );
    let write = |w: &Write| {
        use std::os::unix::fs::PermissionsExt;
        let full = work.join(&w.path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        assert!(
            std::fs::symlink_metadata(&full).map_or(true, |m| m.is_file()),
            "{} would replace a folder or symlink",
            w.path
        );
        std::fs::write(&full, src.find_blob(w.blob).unwrap().content()).unwrap();
        let mode = if w.mode == 0o100755 { 0o755 } else { 0o644 };
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for w in &in_place {
        write(w);
    }
    for p in &deleted {
        let full = work.join(p);
        if full.is_dir() && !full.is_symlink() {
            std::fs::remove_dir_all(&full).unwrap();
        } else {
            std::fs::remove_file(&full).unwrap();
        }
    }
    for w in &moved {
        write(w);
    }
    let pack = missing_objects_pack(&src, ta, tb).unwrap();
    let sent = work.join(".git/objects/pack/pack-patchgrade.pack");
    std::fs::write(&sent, &pack).unwrap();
    git(&work, &["index-pack", &sent.display().to_string()], None);
    let commit = git(&work, &["commit-tree", &tb.to_string(), "-m", "base"], None);
    git(&work, &["update-ref", "HEAD", commit.trim()], None);
    git(&work, &["read-tree", "HEAD"], None);
    git(&work, &["update-index", "-q", "--refresh"], None);
    assert_eq!(
        git(&work, &["status", "--porcelain", "--ignored"], None),
        ""
    );
    assert_eq!(
        git(&work, &["rev-list", "--all"], None).trim(),
        commit.trim(),
        "one commit, the snapshot's is unreachable"
    );
    git(
        &work,
        &["fsck", "--connectivity-only", "--no-dangling"],
        None,
    );
    // The pack holds only what the snapshot lacks.
    let listed = git(&work, &["verify-pack", "-v", &pack_path(&work)], None);
    assert!(!listed.contains(
        &src.find_commit(a)
            .unwrap()
            .tree()
            .unwrap()
            .get_name("keep.txt")
            .unwrap()
            .id()
            .to_string()
    ));
}

#[test]
fn an_unchanged_tree_gives_an_empty_delta_and_a_pack_git_accepts() {
    let d = tempfile::tempdir().unwrap();
    let src = Repository::init_bare(d.path().join("src.git")).unwrap();
    let a = commit_at(&src, &[("a.txt", "a\n", 0o100644)], 100);
    let b = commit_at(&src, &[("a.txt", "a\n", 0o100644)], 200);
    let (ta, tb) = (
        src.find_commit(a).unwrap().tree_id(),
        src.find_commit(b).unwrap().tree_id(),
    );
    assert_eq!(ta, tb);
    let delta = tree_delta(&src, ta, tb).unwrap();
    assert!(delta.delete.is_empty() && delta.write.is_empty());
    let pack = missing_objects_pack(&src, ta, tb).unwrap();
    // No object in it, and git's own check of the pack passes.
    let (_, listed) = indexed(d.path(), &pack);
    assert!(
        !listed
            .lines()
            .any(|l| l.contains(" blob ") || l.contains(" tree ")),
        "{listed}"
    );
}

/// `pack` indexed in a new repository `<dir>/w` (git's own check of it):
/// that repository, and `git verify-pack -v`'s listing of the pack.
fn indexed(dir: &Path, pack: &[u8]) -> (std::path::PathBuf, String) {
    let work = dir.join("w");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q"], None);
    let sent = work.join(".git/objects/pack/pack-patchgrade.pack");
    std::fs::write(&sent, pack).unwrap();
    git(&work, &["index-pack", &sent.display().to_string()], None);
    let listed = git(&work, &["verify-pack", "-v", &pack_path(&work)], None);
    (work, listed)
}

fn pack_path(work: &Path) -> String {
    let dir = work.join(".git/objects/pack");
    let idx = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .unwrap();
    idx.display().to_string()
}

#[test]
fn trees_holding_a_submodule_are_sent_since_the_snapshot_cannot_hold_them() {
    let d = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(d.path()).unwrap();
    let blob = repo.blob(b"x\n").unwrap();
    let gitlink = Oid::from_str("8cabd919ca63f0e6c12e8405e8542a45d910fa62").unwrap();
    let mut sub = repo.treebuilder(None).unwrap();
    sub.insert("syntax", gitlink, 0o160000).unwrap();
    sub.insert("a.txt", blob, 0o100644).unwrap();
    let sub = sub.write().unwrap();
    let mut top = repo.treebuilder(None).unwrap();
    top.insert("assets", sub, 0o040000).unwrap();
    top.insert("b.txt", blob, 0o100644).unwrap();
    let top = top.write().unwrap();
    // The same tree on both sides: only what git add cannot rebuild goes.
    let pack = missing_objects_pack(&repo, top, top).unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let other = Repository::init_bare(d2.path()).unwrap();
    let odb = other.odb().unwrap();
    let mut w = odb.packwriter().unwrap();
    std::io::Write::write_all(&mut w, &pack).unwrap();
    w.commit().unwrap();
    assert!(
        odb.exists(top) && odb.exists(sub),
        "both trees hold the gitlink"
    );
    assert!(!odb.exists(blob), "the blob is in the snapshot");
}

/// A snapshot's pack from the mirror holds every tree and blob of its
/// tree and no submodule's commit, and git accepts it: a repository of
/// the pack alone reads the tree back whole.
#[test]
fn a_tree_pack_holds_the_whole_tree() {
    let d = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(d.path().join("m.git")).unwrap();
    let (a, b) = (repo.blob(b"a\n").unwrap(), repo.blob(b"b\n").unwrap());
    let gitlink = Oid::from_str("8cabd919ca63f0e6c12e8405e8542a45d910fa62").unwrap();
    let mut sub = repo.treebuilder(None).unwrap();
    sub.insert("mod", gitlink, 0o160000).unwrap();
    sub.insert("b.txt", b, 0o100755).unwrap();
    let sub = sub.write().unwrap();
    let mut top = repo.treebuilder(None).unwrap();
    top.insert("lib", sub, 0o040000).unwrap();
    top.insert("a.txt", a, 0o100644).unwrap();
    let top = top.write().unwrap();
    let (work, listed) = indexed(d.path(), &tree_pack(&repo, top).unwrap());
    for (id, kind) in [(top, "tree"), (sub, "tree"), (a, "blob"), (b, "blob")] {
        assert!(listed.contains(&format!("{id} {kind}")), "{id}:\n{listed}");
    }
    assert!(!listed.contains(&gitlink.to_string()), "{listed}");
    let back = git(&work, &["ls-tree", "-r", &top.to_string()], None);
    assert!(
        back.contains(&format!("{a}\ta.txt")) && back.contains(&format!("{b}\tlib/b.txt")),
        "{back}"
    );
}
