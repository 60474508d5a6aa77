//! Patches as git writes them (new, deleted, renamed, mode changes, binary,
//! CRLF content, empty files) applied strictly by libgit2, and how that
//! meets the worktree: local changes kept, existing files and directories
//! in the way.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

#[test]
fn plain_modify_applies_strictly() {
    modifies_line_5(BASE, ApplyStrategy::Strict);
}

#[test]
fn new_file_is_created() {
    let patch = git_patch(
        &[("a.txt", b"x\n")],
        |_| {},
        |d| write(d, "pkg/new.py", b"print(1)\n"),
    );
    let p = Patch::parse(&patch).unwrap();
    assert_eq!(p.files[0].kind, ChangeKind::Added);
    assert_eq!(p.files[0].path, "pkg/new.py");
    let dir = repo_with(&[("a.txt", b"x\n")]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "pkg/new.py"), "print(1)\n");
}

#[test]
fn deleted_file_is_removed() {
    let files: &[(&str, &[u8])] = &[("a.txt", b"x\n"), ("gone.txt", b"bye\n")];
    let patch = git_patch(
        files,
        |_| {},
        |d| fs::remove_file(d.join("gone.txt")).unwrap(),
    );
    let p = Patch::parse(&patch).unwrap();
    assert_eq!(p.files[0].kind, ChangeKind::Deleted);
    assert_eq!(p.files[0].path, "gone.txt");
    let dir = repo_with(files);
    apply(dir.path(), &p).unwrap();
    assert!(!dir.path().join("gone.txt").exists());
    assert_eq!(read(dir.path(), "a.txt"), "x\n");
}

#[test]
fn pure_rename_moves_the_file() {
    let files: &[(&str, &[u8])] = &[("old/name.txt", BASE.as_bytes())];
    let patch = git_patch(
        files,
        |_| {},
        |d| {
            fs::create_dir_all(d.join("new")).unwrap();
            fs::rename(d.join("old/name.txt"), d.join("new/name.txt")).unwrap();
        },
    );
    assert!(patch.contains("rename from old/name.txt"), "{patch}");
    let p = Patch::parse(&patch).unwrap();
    assert_eq!(
        p.files[0].kind,
        ChangeKind::Renamed {
            from: "old/name.txt".into()
        }
    );
    let dir = repo_with(files);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "new/name.txt"), BASE);
    assert!(!dir.path().join("old/name.txt").exists());
}

#[test]
fn rename_with_change() {
    let files: &[(&str, &[u8])] = &[("a.txt", BASE.as_bytes())];
    let changed = BASE.replace("line 9\n", "line nine\n");
    let patch = git_patch(
        files,
        |_| {},
        |d| {
            fs::remove_file(d.join("a.txt")).unwrap();
            write(d, "b.txt", changed.as_bytes());
        },
    );
    assert!(
        patch.contains("rename to b.txt") && patch.contains("+line nine"),
        "{patch}"
    );
    let dir = repo_with(files);
    assert_eq!(
        apply_text(dir.path(), &patch).unwrap(),
        ApplyStrategy::Strict
    );
    assert_eq!(read(dir.path(), "b.txt"), changed);
    assert!(!dir.path().join("a.txt").exists());
}

#[test]
fn mode_change_sets_exec_bit() {
    let files: &[(&str, &[u8])] = &[("run.sh", b"echo hi\n")];
    let patch = git_patch(
        files,
        |_| {},
        |d| {
            fs::set_permissions(d.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        },
    );
    assert!(
        patch.contains("old mode 100644") && patch.contains("new mode 100755"),
        "{patch}"
    );
    let p = Patch::parse(&patch).unwrap();
    assert_eq!(
        (p.files[0].old_mode, p.files[0].new_mode),
        (Some(0o100644), Some(0o100755))
    );
    let dir = repo_with(files);
    assert!(!is_exec(dir.path(), "run.sh"));
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert!(is_exec(dir.path(), "run.sh"));
    assert_eq!(read(dir.path(), "run.sh"), "echo hi\n");
}

#[test]
fn binary_literal_new_file() {
    let png = binary_blob(300, 7);
    let patch = git_patch(
        &[("a.txt", b"x\n")],
        |_| {},
        |d| write(d, "img/expected.png", &png),
    );
    assert!(
        patch.contains("GIT binary patch") && patch.contains("literal 300"),
        "{patch}"
    );
    let p = Patch::parse(&patch).unwrap();
    assert!(p.files[0].binary);
    let dir = repo_with(&[("a.txt", b"x\n")]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(fs::read(dir.path().join("img/expected.png")).unwrap(), png);
}

#[test]
fn binary_delta_modification() {
    let old = binary_blob(8192, 11);
    let mut new = old.clone();
    new[100] ^= 0xff;
    new[5000] ^= 0x0f;
    let patch = git_patch(
        &[("data.bin", &old)],
        |_| {},
        |d| write(d, "data.bin", &new),
    );
    assert!(patch.contains("\ndelta "), "expected a delta hunk: {patch}");
    let dir = repo_with(&[("data.bin", &old)]);
    assert_eq!(
        apply_text(dir.path(), &patch).unwrap(),
        ApplyStrategy::Strict
    );
    assert_eq!(fs::read(dir.path().join("data.bin")).unwrap(), new);
}

#[test]
fn crlf_file_content_is_kept() {
    let crlf = BASE.replace('\n', "\r\n");
    let changed = crlf.replace("line 3\r\n", "line three\r\n");
    let patch = git_patch(
        &[("win.txt", crlf.as_bytes())],
        |_| {},
        |d| write(d, "win.txt", changed.as_bytes()),
    );
    assert!(patch.contains("+line three\r\n"));
    let p = Patch::parse(&patch).unwrap();
    assert!(
        p.text.contains("+line three\r\n"),
        "content CR must survive"
    );
    let dir = repo_with(&[("win.txt", crlf.as_bytes())]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "win.txt"), changed);
}

#[test]
fn apply_strategy_serialises_snake_case() {
    let s = serde_json::to_string(&[ApplyStrategy::Strict, ApplyStrategy::Fuzzy]).unwrap();
    assert_eq!(s, r#"["strict","fuzzy"]"#);
}

#[test]
fn empty_new_and_deleted_files_apply_strictly() {
    // git's own output for empty files, which libgit2 alone cannot parse.
    let files: &[(&str, &[u8])] = &[("a.txt", b"x\n"), ("empty_old", b"")];
    let patch = git_patch(
        files,
        |_| {},
        |d| {
            write(d, "empty_new", b"");
            fs::remove_file(d.join("empty_old")).unwrap();
        },
    );
    assert!(!patch.contains("@@"), "{patch}");
    let dir = repo_with(files);
    assert_eq!(
        apply_text(dir.path(), &patch).unwrap(),
        ApplyStrategy::Strict
    );
    assert_eq!(fs::read(dir.path().join("empty_new")).unwrap(), b"");
    assert!(!dir.path().join("empty_old").exists());
}

fn with_script(d: &Path) {
    write(d, "run.sh", b"echo\n");
    fs::set_permissions(d.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn plain_delete_of_executable_is_strict() {
    let dir = repo_setup(&[("a.txt", b"x\n")], with_script);
    let raw = "--- a/run.sh\n+++ /dev/null\n@@ -1 +0,0 @@\n-echo\n";
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Strict);
    assert!(!dir.path().join("run.sh").exists());
}

#[test]
fn wrong_mode_on_index_line_is_aligned() {
    let dir = repo_setup(&[("a.txt", b"x\n")], with_script);
    let raw =
        "diff --git a/run.sh b/run.sh\nindex 1234567..89abcde 100644\n--- a/run.sh\n+++ b/run.sh\n\
               @@ -1 +1 @@\n-echo\n+echo hi\n";
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "run.sh"), "echo hi\n");
    assert!(is_exec(dir.path(), "run.sh"), "mode must not be dropped");
}

#[test]
fn creating_an_existing_file_fails() {
    let dir = repo_with(&[("a.txt", b"x\n")]);
    write(dir.path(), "untracked.txt", b"mine\n");
    for p in ["a.txt", "untracked.txt"] {
        let before = tree(dir.path());
        let err = apply_text(
            dir.path(),
            &format!("--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+theirs\n"),
        )
        .unwrap_err();
        assert!(
            matches!(&err, PatchError::DoesNotApply { fuzzy, .. } if fuzzy.contains("already exists")),
            "{err}"
        );
        assert_eq!(tree(dir.path()), before);
    }
}

#[test]
fn other_local_changes_are_kept() {
    let dir = repo_with(&[("src/a.txt", BASE.as_bytes()), ("b.txt", b"b\n")]);
    let local = BASE.replace("line 9\n", "line 9 local\n");
    write(dir.path(), "src/a.txt", local.as_bytes());
    write(dir.path(), "b.txt", b"b local\n");
    assert_eq!(
        apply_text(dir.path(), &base_modify_patch()).unwrap(),
        ApplyStrategy::Strict
    );
    assert_eq!(
        read(dir.path(), "src/a.txt"),
        local.replace("line 5\n", "line five\n")
    );
    assert_eq!(read(dir.path(), "b.txt"), "b local\n");
}

#[test]
fn directory_in_the_way_is_a_clean_failure() {
    let dir = repo_with(&[("src/a.txt", b"x\n")]);
    let before = tree(dir.path());
    let err = apply_text(dir.path(), "--- /dev/null\n+++ b/src\n@@ -0,0 +1 @@\n+x\n").unwrap_err();
    assert!(matches!(err, PatchError::DoesNotApply { .. }), "{err:?}");
    assert_eq!(tree(dir.path()), before);
}
