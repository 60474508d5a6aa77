//! Tests on real git repositories in temp dirs; patches come from real
//! `git diff` where the format matters (binary, renames, modes).
//!
//! The shared fixtures live here; the tests sit in one file per topic:
//! `strict` (git's own output applied by libgit2), `normalise` (patches
//! repaired before applying), `fuzzy` (the fallback search), `safety`
//! (paths and symlinks that leave the tree) and `malformed` (input that
//! is not a diff, or a broken one).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::*;

mod fuzzy;
mod malformed;
mod normalise;
mod safety;
mod strict;

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

const PLAIN: &str =
    "--- src/a.txt\n+++ src/a.txt\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n";

fn symlink_patch(path: &str, target: &str) -> String {
    format!(
        "diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/{path}\n\
         @@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    )
}
