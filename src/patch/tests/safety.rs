//! Paths and symlinks that leave the tree or reach into `.git` are refused
//! before anything is written; names that only look like git's are not.

use std::fs;
use std::path::Path;

use super::*;

fn assert_refused(raw: &str, files: &[(&str, &[u8])]) {
    let p = Patch::parse(raw).unwrap_or_else(|e| panic!("parse {raw}: {e}"));
    assert!(
        matches!(p.check_safe(), Err(PatchError::UnsafePath { .. })),
        "check_safe let through {raw}"
    );
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("repo");
    fs::create_dir(&dir).unwrap();
    let repo = git2::Repository::init(&dir).unwrap();
    for (p, c) in files {
        write(&dir, p, c);
    }
    commit_all(&repo);
    let before = tree(&dir);
    let git_config = fs::read(dir.join(".git/config")).unwrap();
    let err = apply(&dir, &p).unwrap_err();
    assert!(
        matches!(err, PatchError::UnsafePath { .. }),
        "apply: {err:?} for {raw}"
    );
    assert_eq!(tree(&dir), before);
    assert_eq!(fs::read(dir.join(".git/config")).unwrap(), git_config);
    // Nothing appeared next to the repo either.
    assert_eq!(fs::read_dir(outer.path()).unwrap().count(), 1);
}

#[test]
fn escaping_paths_are_refused() {
    let files: &[(&str, &[u8])] = &[("a.txt", b"x\n")];
    let new_file = |path: &str| format!("--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n");
    assert_refused(&new_file("../escape.txt"), files);
    assert_refused(&new_file("sub/../../escape.txt"), files);
    assert_refused(&new_file(".git/config"), files);
    assert_refused(&new_file(".GIT/config"), files);
    assert_refused(&new_file("sub/.Git/hooks/pre-commit"), files);
    assert_refused(
        "--- /dev/null\n+++ /tmp/escape.txt\n@@ -0,0 +1 @@\n+pwned\n",
        files,
    );
    assert_refused(
        "diff --git a/.git b/.git\nnew file mode 100644\n--- /dev/null\n+++ b/.git\n@@ -0,0 +1 @@\n+x\n",
        files,
    );
    // Hidden behind git's octal quoting: \056 is '.'.
    assert_refused(
        "diff --git \"a/\\056\\056/x\" \"b/\\056\\056/x\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/\\056\\056/x\"\n@@ -0,0 +1 @@\n+x\n",
        files,
    );
    // Only the rename line points out.
    assert_refused(
        "diff --git a/a.txt b/a.txt\nsimilarity index 100%\nrename from a.txt\nrename to ../a.txt\n",
        files,
    );
    assert_refused(
        "diff --git a/a.txt b/b.txt\nsimilarity index 100%\ncopy from a.txt\ncopy to .git/hooks/post-checkout\n",
        files,
    );
    // Modifying an existing file through a path with `..` inside the tree.
    assert_refused(
        "--- a/sub/../a.txt\n+++ b/sub/../a.txt\n@@ -1 +1 @@\n-x\n+y\n",
        files,
    );
}

#[test]
fn escaping_symlinks_are_refused() {
    let files: &[(&str, &[u8])] = &[("a.txt", b"x\n")];
    assert_refused(&symlink_patch("link", "/etc/passwd"), files);
    assert_refused(&symlink_patch("sub/link", "../../etc/passwd"), files);
    assert_refused(&symlink_patch("link", ".git/config"), files);
    // Each link alone stays inside, but `d/up/..` climbs out of `d/up`, which
    // is itself a symlink to the tree's root.
    assert_refused(
        &format!(
            "{}{}",
            symlink_patch("d/up", ".."),
            symlink_patch("esc", "d/up/..")
        ),
        files,
    );
}

#[test]
fn symlink_inside_tree_is_created() {
    let dir = repo_with(&[("docs/a.txt", b"x\n")]);
    assert_eq!(
        apply_text(dir.path(), &symlink_patch("docs/latest", "a.txt")).unwrap(),
        ApplyStrategy::Strict
    );
    assert_eq!(
        fs::read_link(dir.path().join("docs/latest")).unwrap(),
        Path::new("a.txt")
    );
}

#[test]
fn writing_below_an_existing_symlink_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let raw = "--- /dev/null\n+++ b/link/x.txt\n@@ -0,0 +1 @@\n+pwned\n";
    let dir = repo_setup(&[("a.txt", b"x\n")], |d| {
        std::os::unix::fs::symlink(outside.path(), d.join("link")).unwrap();
    });
    let err = apply_text(dir.path(), raw).unwrap_err();
    assert!(matches!(err, PatchError::UnsafePath { .. }), "{err:?}");
    assert!(!outside.path().join("x.txt").exists());
}

#[test]
fn existing_symlink_cannot_be_retargeted_or_moved_out() {
    let setup = |d: &Path| {
        fs::create_dir_all(d.join("sub/deep")).unwrap();
        std::os::unix::fs::symlink("../x", d.join("sub/deep/link")).unwrap();
        std::os::unix::fs::symlink("a.txt", d.join("top")).unwrap();
    };
    let files: &[(&str, &[u8])] = &[("a.txt", b"x\n"), ("sub/x", b"y\n")];
    // Retarget with an index line that claims a regular file.
    let raw = "diff --git a/top b/top\nindex 1234567..89abcde 100644\n--- a/top\n+++ b/top\n\
               @@ -1 +1 @@\n-a.txt\n\\ No newline at end of file\n+/etc/passwd\n\\ No newline at end of file\n";
    // Moving `../x` up one level makes it point out of the tree.
    let moved = "diff --git a/sub/deep/link b/link\nsimilarity index 100%\nrename from sub/deep/link\nrename to link\n";
    for raw in [raw, moved] {
        let dir = repo_setup(files, setup);
        let before = tree(dir.path());
        let err = apply_text(dir.path(), raw).unwrap_err();
        assert!(
            matches!(err, PatchError::UnsafePath { .. }),
            "{err:?} for {raw}"
        );
        assert_eq!(tree(dir.path()), before);
    }
}

#[test]
fn git_lookalike_names_are_allowed() {
    let raw = "--- /dev/null\n+++ b/.github/workflows/ci.yml\n@@ -0,0 +1 @@\n+on: push\n\
               --- a/.gitignore\n+++ b/.gitignore\n@@ -1 +1,2 @@\n target\n+*.log\n\
               --- /dev/null\n+++ b/docs/a..b.txt\n@@ -0,0 +1 @@\n+x\n";
    let p = Patch::parse(raw).unwrap();
    p.check_safe().unwrap();
    let dir = repo_with(&[(".gitignore", b"target\n")]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), ".github/workflows/ci.yml"), "on: push\n");
    assert_eq!(read(dir.path(), ".gitignore"), "target\n*.log\n");
    assert_eq!(read(dir.path(), "docs/a..b.txt"), "x\n");
}
