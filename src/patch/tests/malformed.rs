//! Input that holds no diff or a broken one is reported, and no input
//! makes parsing or normalising panic.

use super::*;

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
