//! The fuzzy fallback: offsets, whitespace drift, fuzz, CRLF files, final
//! newlines, binary sections, renames and modes; and failing cleanly:
//! nothing written, nothing applied twice or in reverse.

use std::fs;

use super::*;

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
