//! Normalisation: CRLF, missing final newline, plain and prefix-less
//! diffs, prose and fences, hunk counts, blank context lines, missing
//! `---`/`+++` lines, a byte order mark; and the hash of the result.

use super::*;

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
fn missing_final_newline_is_added() {
    let patch = base_modify_patch();
    let cut = patch.trim_end_matches('\n');
    // libgit2 alone rejects it ("invalid patch instruction").
    assert!(git2::Diff::from_buffer(cut.as_bytes()).is_err());
    let p = Patch::parse(cut).unwrap();
    assert!(p.text.ends_with('\n'));
    changes_line_5(BASE, &p, ApplyStrategy::Strict);
}

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

#[test]
fn sha256_is_of_normalised_text() {
    let a = Patch::parse(&base_modify_patch()).unwrap();
    let b = Patch::parse(&format!("Sure!\n```\n{}```", base_modify_patch())).unwrap();
    assert_eq!(a.sha256(), b.sha256());
    assert_eq!(a.sha256().len(), 64);
    assert_ne!(a.sha256(), Patch::parse(PLAIN).unwrap().sha256());
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
fn byte_order_mark_is_ignored() {
    let raw = format!("\u{feff}{PLAIN}");
    assert_eq!(
        Patch::parse(&raw).unwrap().text,
        Patch::parse(PLAIN).unwrap().text
    );
}
