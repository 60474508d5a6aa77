//! Tests on real git repositories in temp dirs; patches come from real
//! `git diff` where the format matters (binary, renames, modes).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::*;

fn write(dir: &Path, p: &str, c: &[u8]) {
    let full = dir.join(p);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, c).unwrap();
}

fn commit_all(repo: &git2::Repository) {
    let mut idx = repo.index().unwrap();
    idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
        .unwrap();
}

/// A fresh repository with one commit holding `files`.
fn repo_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    repo_setup(files, |_| {})
}

fn repo_setup(files: &[(&str, &[u8])], extra: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path()).unwrap();
    for (p, c) in files {
        write(dir.path(), p, c);
    }
    extra(dir.path());
    commit_all(&repo);
    dir
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.autocrlf=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A patch made by real git: commit `before`, run `change`, diff the index.
fn git_patch(
    before: &[(&str, &[u8])],
    extra: impl FnOnce(&Path),
    change: impl FnOnce(&Path),
) -> String {
    let dir = repo_setup(before, extra);
    change(dir.path());
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["diff", "--cached", "--binary", "-M"])
}

fn read(dir: &Path, p: &str) -> String {
    fs::read_to_string(dir.join(p)).unwrap()
}

fn is_exec(dir: &Path, p: &str) -> bool {
    fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o111 != 0
}

/// Everything in the worktree but `.git`: path -> (content or link target, mode).
fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, (Vec<u8>, u32)>) {
        for e in fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, (t.to_string_lossy().as_bytes().to_vec(), 0o120000));
            } else if m.is_dir() {
                out.insert(rel.clone(), (Vec::new(), 0o040000));
                walk(root, &p, out);
            } else {
                out.insert(rel, (fs::read(&p).unwrap(), m.permissions().mode()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn apply_text(dir: &Path, raw: &str) -> Result<ApplyStrategy, PatchError> {
    apply(dir, &Patch::parse(raw)?)
}

const BASE: &str =
    "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10\n";

fn base_modify_patch() -> String {
    git_patch(
        &[("src/a.txt", BASE.as_bytes())],
        |_| {},
        |d| {
            write(
                d,
                "src/a.txt",
                BASE.replace("line 5\n", "line five\n").as_bytes(),
            );
        },
    )
}

/// `p` applied by `strategy` to a src/a.txt holding `text`: only line 5
/// becomes "line five", the file's own line ends and whitespace kept.
fn changes_line_5(text: &str, p: &Patch, strategy: ApplyStrategy) {
    let dir = repo_with(&[("src/a.txt", text.as_bytes())]);
    assert_eq!(apply(dir.path(), p).unwrap(), strategy);
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    assert_eq!(
        read(dir.path(), "src/a.txt"),
        text.replace(&format!("line 5{eol}"), &format!("line five{eol}"))
    );
}

/// [`base_modify_patch`] applied to a src/a.txt holding `text`.
fn modifies_line_5(text: &str, strategy: ApplyStrategy) {
    changes_line_5(text, &Patch::parse(&base_modify_patch()).unwrap(), strategy);
}

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

fn binary_blob(n: usize, seed: u32) -> Vec<u8> {
    // xorshift: deterministic bytes that zlib cannot shrink much.
    // A PNG-like header with NULs, so git treats it as binary.
    let mut x = seed.max(1);
    let head = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR";
    head.iter()
        .copied()
        .chain((head.len()..n).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x & 0xff) as u8
        }))
        .take(n)
        .collect()
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
fn crlf_mangled_patch_is_repaired() {
    let patch = base_modify_patch().replace('\n', "\r\n");
    let p = Patch::parse(&patch).unwrap();
    assert!(!p.text.contains('\r'));
    assert_eq!(
        p.sha256(),
        Patch::parse(&base_modify_patch()).unwrap().sha256()
    );
    changes_line_5(BASE, &p, ApplyStrategy::Strict);
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
fn missing_final_newline_is_added() {
    let patch = base_modify_patch();
    let cut = patch.trim_end_matches('\n');
    // libgit2 alone rejects it ("invalid patch instruction").
    assert!(git2::Diff::from_buffer(cut.as_bytes()).is_err());
    let p = Patch::parse(cut).unwrap();
    assert!(p.text.ends_with('\n'));
    changes_line_5(BASE, &p, ApplyStrategy::Strict);
}

const PLAIN: &str =
    "--- src/a.txt\n+++ src/a.txt\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n";

#[test]
fn libgit2_needs_git_headers_and_normalise_adds_them() {
    // The reason for synthesising `diff --git`: libgit2 rejects plain diffs.
    assert!(git2::Diff::from_buffer(PLAIN.as_bytes()).is_err());
    let text = normalise(PLAIN);
    assert!(
        text.starts_with("diff --git a/src/a.txt b/src/a.txt\n--- a/src/a.txt\n+++ b/src/a.txt\n"),
        "{text}"
    );
    assert!(git2::Diff::from_buffer(text.as_bytes()).is_ok());
}

#[test]
fn no_prefix_plain_diff_applies() {
    changes_line_5(BASE, &Patch::parse(PLAIN).unwrap(), ApplyStrategy::Strict);
}

#[test]
fn no_prefix_git_diff_applies() {
    let patch = base_modify_patch()
        .replace(" a/src", " src")
        .replace(" b/src", " src");
    assert!(patch.contains("diff --git src/a.txt src/a.txt"), "{patch}");
    let p = Patch::parse(&patch).unwrap();
    assert_eq!(p.files[0].path, "src/a.txt");
    changes_line_5(BASE, &p, ApplyStrategy::Strict);
}

#[test]
fn plain_new_and_deleted_files_via_dev_null() {
    let raw = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n\
               --- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
    let p = Patch::parse(raw).unwrap();
    assert_eq!(p.files[0].kind, ChangeKind::Added);
    assert_eq!(p.files[1].kind, ChangeKind::Deleted);
    assert_eq!(p.files[1].path, "old.txt");
    let dir = repo_with(&[("old.txt", b"bye\n")]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "new.txt"), "hello\nworld\n");
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn prose_and_fences_are_stripped() {
    let raw = format!(
        "Here is the fix for the bug:\n\n```diff\n{}```\n\nThis changes line 5.\n- it is safe\n+ it is short\n",
        base_modify_patch()
    );
    let p = Patch::parse(&raw).unwrap();
    assert!(p.text.starts_with("diff --git"));
    assert!(
        !p.text.contains("```") && !p.text.contains("safe"),
        "{}",
        p.text
    );
    changes_line_5(BASE, &p, ApplyStrategy::Strict);
}

#[test]
fn wrong_hunk_counts_are_recounted() {
    // Two hunks, both miscounted, so the second's new start is off too.
    let raw = "--- a/f.txt\n+++ b/f.txt\n@@ -1,9 +1,2 @@\n line 1\n+inserted\n line 2\n\
               @@ -8,7 +8,1 @@\n line 8\n-line 9\n+line nine\n line 10\n";
    let text = normalise(raw);
    assert!(text.contains("@@ -1,2 +1,3 @@\n"), "{text}");
    assert!(text.contains("@@ -8,3 +9,3 @@\n"), "{text}");
    let dir = repo_with(&[("f.txt", BASE.as_bytes())]);
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Strict);
    let want = BASE
        .replace("line 1\n", "line 1\ninserted\n")
        .replace("line 9\n", "line nine\n");
    assert_eq!(read(dir.path(), "f.txt"), want);
}

#[test]
fn blank_context_lines_without_space_are_context() {
    let base = "a\n\nb\nc\n";
    let raw = "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n a\n\n-b\n+B\n c\n";
    let dir = repo_with(&[("f", base.as_bytes())]);
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Strict);
    assert_eq!(read(dir.path(), "f"), "a\n\nB\nc\n");
}

fn shifted_base() -> String {
    format!("new a\nnew b\nnew c\n{BASE}")
}

#[test]
fn offset_hunk_needs_fuzzy() {
    // The patch was made against BASE; the tree has three extra lines on top.
    modifies_line_5(&shifted_base(), ApplyStrategy::Fuzzy);
}

#[test]
fn whitespace_drift_needs_fuzzy() {
    let drifted = BASE
        .replace("line 4\n", "line 4   \n")
        .replace("line 6\n", "line 6\t\n");
    // Context keeps the file's own whitespace; only line 5 changed.
    modifies_line_5(&drifted, ApplyStrategy::Fuzzy);
}

#[test]
fn edge_context_mismatch_needs_fuzz() {
    // Outermost context lines differ from the tree: fuzz 1 drops them.
    let changed = BASE
        .replace("line 2\n", "LINE 2\n")
        .replace("line 8\n", "LINE 8\n");
    modifies_line_5(&changed, ApplyStrategy::Fuzzy);
}

#[test]
fn crlf_file_with_lf_patch_keeps_crlf() {
    let crlf = BASE.replace('\n', "\r\n");
    modifies_line_5(&crlf, ApplyStrategy::Fuzzy);
}

#[test]
fn hunk_that_fits_nowhere_fails_and_leaves_tree() {
    let other = BASE.replace("line 5\n", "something else\n");
    let files: &[(&str, &[u8])] = &[("src/a.txt", other.as_bytes()), ("b.txt", BASE.as_bytes())];
    // A second file that would apply: it must not be written either.
    let raw = format!(
        "{}--- a/b.txt\n+++ b/b.txt\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line two\n line 3\n",
        base_modify_patch()
    );
    let dir = repo_with(files);
    let before = tree(dir.path());
    let err = apply_text(dir.path(), &raw).unwrap_err();
    match &err {
        PatchError::DoesNotApply { strict, fuzzy } => {
            assert!(!strict.is_empty());
            assert!(
                fuzzy.contains("src/a.txt") && fuzzy.contains("hunk #1"),
                "{fuzzy}"
            );
        }
        e => panic!("unexpected {e:?}"),
    }
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn failed_fuzzy_after_partial_files_writes_nothing() {
    // File 1 needs fuzzy (offset), file 2 cannot apply: nothing is written.
    let raw = format!(
        "{}--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n nope\n-nada\n+zip\n",
        base_modify_patch()
    );
    let dir = repo_with(&[("src/a.txt", shifted_base().as_bytes()), ("b.txt", b"x\n")]);
    let before = tree(dir.path());
    let err = apply_text(dir.path(), &raw).unwrap_err();
    assert!(
        matches!(&err, PatchError::DoesNotApply { fuzzy, .. } if fuzzy.contains("b.txt")),
        "{err}"
    );
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn already_applied_patch_is_not_reversed() {
    let patch = base_modify_patch();
    let applied = BASE.replace("line 5\n", "line five\n");
    let dir = repo_with(&[("src/a.txt", applied.as_bytes())]);
    let err = apply_text(dir.path(), &patch).unwrap_err();
    assert!(
        matches!(&err, PatchError::DoesNotApply { fuzzy, .. } if fuzzy.contains("already applied")),
        "{err}"
    );
    assert_eq!(read(dir.path(), "src/a.txt"), applied);

    // A pure addition at the end of file would otherwise be added twice.
    let raw = "--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n b\n c\n+d\n";
    let dir = repo_with(&[("f", b"x\na\nb\nc\nd\n")]);
    let err = apply_text(dir.path(), raw).unwrap_err();
    assert!(err.to_string().contains("already applied"), "{err}");
    assert_eq!(read(dir.path(), "f"), "x\na\nb\nc\nd\n");
}

#[test]
fn hunk_header_without_ranges_is_placed_by_fuzzy() {
    let raw =
        "--- a/src/a.txt\n+++ b/src/a.txt\n@@ ... @@\n line 6\n-line 7\n+line seven\n line 8\n";
    let dir = repo_with(&[("src/a.txt", BASE.as_bytes())]);
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Fuzzy);
    assert_eq!(
        read(dir.path(), "src/a.txt"),
        BASE.replace("line 7\n", "line seven\n")
    );
}

#[test]
fn fuzzy_also_applies_binary_sections() {
    let png = binary_blob(200, 3);
    let bin = git_patch(&[("a.txt", b"x\n")], |_| {}, |d| write(d, "img.png", &png));
    let raw = format!("{}{bin}", base_modify_patch());
    let dir = repo_with(&[("src/a.txt", shifted_base().as_bytes()), ("a.txt", b"x\n")]);
    assert_eq!(apply_text(dir.path(), &raw).unwrap(), ApplyStrategy::Fuzzy);
    assert_eq!(fs::read(dir.path().join("img.png")).unwrap(), png);
    assert_eq!(
        read(dir.path(), "src/a.txt"),
        shifted_base().replace("line 5\n", "line five\n")
    );
}

#[test]
fn fuzzy_handles_rename_mode_and_new_file() {
    // The offset forces the fuzzy path for the whole patch.
    let raw = format!(
        "{}diff --git a/run.sh b/tools/run.sh\nold mode 100644\nnew mode 100755\nsimilarity index 100%\n\
         rename from run.sh\nrename to tools/run.sh\n\
         diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+n\n",
        base_modify_patch()
    );
    let p = Patch::parse(&raw).unwrap();
    let kinds: Vec<_> = p.files.iter().map(|f| f.kind.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            ChangeKind::Modified,
            ChangeKind::Renamed {
                from: "run.sh".into()
            },
            ChangeKind::Added
        ]
    );
    let dir = repo_with(&[
        ("src/a.txt", shifted_base().as_bytes()),
        ("run.sh", b"echo\n"),
    ]);
    assert_eq!(apply(dir.path(), &p).unwrap(), ApplyStrategy::Fuzzy);
    assert!(!dir.path().join("run.sh").exists());
    assert_eq!(read(dir.path(), "tools/run.sh"), "echo\n");
    assert!(is_exec(dir.path(), "tools/run.sh"));
    assert_eq!(read(dir.path(), "n.txt"), "n\n");
}

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

fn symlink_patch(path: &str, target: &str) -> String {
    format!(
        "diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/{path}\n\
         @@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    )
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
fn no_diff_is_reported() {
    assert!(matches!(Patch::parse(""), Err(PatchError::NoDiff)));
    assert!(matches!(
        Patch::parse("I could not fix this bug.\n```\n```\n"),
        Err(PatchError::NoDiff)
    ));
    assert_eq!(normalise("no diff here"), "");
}

#[test]
fn malformed_patches_are_reported() {
    // A context line lost its leading space in the middle of a hunk.
    let raw = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\nb\n-c\n+C\n";
    assert!(
        matches!(
            Patch::parse(raw),
            Err(PatchError::Malformed { line: 5, .. })
        ),
        "{:?}",
        Patch::parse(raw)
    );
    let raw = "--- a/f\n+++ b/f\n@@ -x,3 +1,3 @@\n a\n";
    assert!(matches!(
        Patch::parse(raw),
        Err(PatchError::Malformed { line: 3, .. })
    ));
    let raw = "@@ -1,3 +1,3 @@\n a\n";
    assert!(matches!(
        Patch::parse(raw),
        Err(PatchError::Malformed { line: 1, .. })
    ));
    let raw = "diff --git a/f b/f\nindex 123..456 100644\n";
    assert!(matches!(
        Patch::parse(raw),
        Err(PatchError::Malformed { .. })
    ));
    let raw = "diff --git a/f b/f\nold mode 10x644\nnew mode 100755\n";
    assert!(matches!(
        Patch::parse(raw),
        Err(PatchError::Malformed { line: 2, .. })
    ));
}

#[test]
fn no_input_panics() {
    // Every prefix of a rich patch, and every single-line deletion of it.
    let rich = format!(
        "prose\n```diff\n{}{}{}\"quoted\\\n```\n",
        base_modify_patch(),
        git_patch(
            &[("a.txt", b"x\n")],
            |_| {},
            |d| write(d, "b.bin", &binary_blob(64, 5))
        ),
        symlink_patch("l", "a.txt")
    );
    let mut inputs: Vec<String> = (0..=rich.len())
        .filter(|&k| rich.is_char_boundary(k))
        .map(|k| rich[..k].to_string())
        .collect();
    let lines: Vec<&str> = rich.lines().collect();
    for k in 0..lines.len() {
        let mut l = lines.clone();
        l.remove(k);
        inputs.push(l.join("\n"));
    }
    inputs.extend(
        [
            "@@",
            "@@ -",
            "--- \n+++ \n",
            "diff --git \"",
            "diff --git a/\"x b/",
            "--- a\n+++ b\n@@ -99999999999999999999,1 +1 @@\n-x\n",
            "--- a\n+++ b\n@@ -9223372036854775807,1 +9223372036854775807 @@\n-x\n",
            "--- a\n+++ b\n@@ -18446744073709551615,0 +1 @@\n+x\n",
        ]
        .map(String::from),
    );
    for raw in &inputs {
        let n = normalise(raw);
        if let Ok(p) = Patch::parse(raw) {
            let _ = p.check_safe();
            assert_eq!(normalise(&p.text), p.text, "normalise is idempotent");
            assert_eq!(n, p.text);
        }
    }
}

#[test]
fn sha256_is_of_normalised_text() {
    let a = Patch::parse(&base_modify_patch()).unwrap();
    let b = Patch::parse(&format!("Sure!\n```\n{}```", base_modify_patch())).unwrap();
    assert_eq!(a.sha256(), b.sha256());
    assert_eq!(a.sha256().len(), 64);
    assert_ne!(a.sha256(), Patch::parse(PLAIN).unwrap().sha256());
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
fn absurd_hunk_starts_do_not_panic_when_applied() {
    let dir = repo_with(&[("a", b"x\n")]);
    for raw in [
        "--- a/a\n+++ b/a\n@@ -9223372036854775807,1 +9223372036854775807 @@\n-x\n+y\n",
        "--- a/a\n+++ b/a\n@@ -18446744073709551615,1 +1 @@\n-x\n+y\n",
    ] {
        // Found by the fuzzy search despite the header.
        assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Fuzzy);
        assert_eq!(read(dir.path(), "a"), "y\n");
        write(dir.path(), "a", b"x\n");
    }
}

#[test]
fn git_header_without_dash_lines_gets_them() {
    let raw = "diff --git a/src/a.txt b/src/a.txt\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n";
    let text = normalise(raw);
    assert!(
        text.contains("--- a/src/a.txt\n+++ b/src/a.txt\n@@ -4,3 +4,3 @@"),
        "{text}"
    );
    changes_line_5(BASE, &Patch::parse(raw).unwrap(), ApplyStrategy::Strict);
}

#[test]
fn fuzzy_keeps_and_sets_final_newline_state() {
    // The file lacks a final newline; the hunk is offset so fuzzy runs.
    let base = "pad\na\nb\nc";
    let raw = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n b\n-c\n\\ No newline at end of file\n+C\n\\ No newline at end of file\n";
    let dir = repo_with(&[("f", base.as_bytes())]);
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Fuzzy);
    assert_eq!(read(dir.path(), "f"), "pad\na\nb\nC");
    // Adding the newline at the end.
    let raw = "--- a/f\n+++ b/f\n@@ -2,1 +2,1 @@\n-C\n\\ No newline at end of file\n+C\n";
    assert_eq!(apply_text(dir.path(), raw).unwrap(), ApplyStrategy::Fuzzy);
    assert_eq!(read(dir.path(), "f"), "pad\na\nb\nC\n");
}

#[test]
fn directory_in_the_way_is_a_clean_failure() {
    let dir = repo_with(&[("src/a.txt", b"x\n")]);
    let before = tree(dir.path());
    let err = apply_text(dir.path(), "--- /dev/null\n+++ b/src\n@@ -0,0 +1 @@\n+x\n").unwrap_err();
    assert!(matches!(err, PatchError::DoesNotApply { .. }), "{err:?}");
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn byte_order_mark_is_ignored() {
    let raw = format!("\u{feff}{PLAIN}");
    assert_eq!(
        Patch::parse(&raw).unwrap().text,
        Patch::parse(PLAIN).unwrap().text
    );
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
