//! Unit tests of `hygiene.rs`.
use super::*;

fn kinds(h: &Hygiene) -> Vec<(FindingKind, String)> {
    h.findings.iter().map(|f| (f.kind, f.location())).collect()
}

const GOLD: &str = "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -10,2 +10,2 @@ def add(a, b):\n     x = a\n-    return x - b\n+    return x + b\n";

#[test]
fn planted_problems_are_found_at_their_lines() {
    let patch = concat!(
        "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n",
        "@@ -1,3 +1,3 @@\n import os\n-def f(a,b):\n+def f(a, b):\n     pass\n",
        "@@ -10,2 +10,8 @@ def add(a, b):\n     x = a\n-    return x - b\n+    print(\"debug\", x)\n+    breakpoint()\n+    # y = a - b\n+    # return y\n+    # TODO: handle floats\n+    return  x + b\n",
        "@@ -30,2 +36,2 @@ def mul(a, b):\n     r = a * b\n-    return r\n+    return  r\n",
        "diff --git a/pkg/unrelated.py b/pkg/unrelated.py\n--- a/pkg/unrelated.py\n+++ b/pkg/unrelated.py\n@@ -1 +1,2 @@\n A = 1\n+B = 2\n",
        "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1 +1,3 @@\n import calc\n+def test_add():\n+    print(calc.add(1, 2))\n",
    );
    let h = check(
        patch,
        &Context {
            issue: "add() in calc subtracts instead of adding",
            gold_patch: Some(GOLD),
        },
    );
    assert_eq!(
        kinds(&h),
        vec![
            (FindingKind::DebugPrint, "pkg/calc.py:11".into()),
            (FindingKind::DebuggerCall, "pkg/calc.py:12".into()),
            (FindingKind::CommentedOutCode, "pkg/calc.py:13".into()),
            (FindingKind::TodoAdded, "pkg/calc.py:15".into()),
            (FindingKind::WhitespaceOnlyHunk, "pkg/calc.py:2".into()),
            // The header's new start (36) is derived from the old one, as
            // git apply reads it: 30 + 5 lines added above.
            (FindingKind::WhitespaceOnlyHunk, "pkg/calc.py:36".into()),
            (FindingKind::UnrelatedFile, "pkg/unrelated.py:2".into()),
            (FindingKind::TestEdited, "tests/test_calc.py:2".into()),
            (FindingKind::TestsAdded, "tests/test_calc.py:2".into()),
            (FindingKind::MoreFilesThanGold, String::new()),
        ],
        "{:#?}",
        h.findings
    );
    let cc = h
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::CommentedOutCode)
        .unwrap();
    assert_eq!(cc.lines, vec![13, 14]);
    assert_eq!(h.tests_added, 1);
    assert_eq!(h.footprint.files, 3);
    assert_eq!(h.footprint.code_files, 2);
    assert_eq!(h.gold_footprint.unwrap().changed(), 2);
}

#[test]
fn moves_string_spaces_and_reindents_are_not_whitespace() {
    for p in [
        // A line moved: same text, another order.
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n a = 1\n+b.extend(c)\n d = 2\n-b.extend(c)\n",
        // A space inside a string literal is data.
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = \"{} \\n\".format(a)\n+x = \"{}\\n\".format(a)\n",
        // Lines re-indented under a new block: Python syntax.
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,4 @@\n def f(q):\n-    q.clear()\n-    q.add(1)\n+    if q:\n+        q.clear()\n+        q.add(1)\n",
    ] {
        let h = check(p, &Context::default());
        assert!(h.findings.is_empty(), "{p}\n{:#?}", h.findings);
    }
    // The same re-indent in a JS file is whitespace (not syntax there).
    let js = "diff --git a/m.js b/m.js\n--- a/m.js\n+++ b/m.js\n@@ -1,2 +1,2 @@\n-  f();\n-  g();\n+    f();\n+    g();\n";
    assert_eq!(
        kinds(&check(js, &Context::default())),
        vec![(FindingKind::WhitespaceOnlyHunk, "m.js:1".into())]
    );
}

#[test]
fn churn_inside_a_real_hunk() {
    let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-x = 1\n-y=2\n+x = 10\n+y = 2\n";
    let h = check(p, &Context::default());
    assert_eq!(
        kinds(&h),
        vec![(FindingKind::WhitespaceChurn, "m.py:2".into())]
    );
}

#[test]
fn a_clean_patch_has_no_findings() {
    let p = concat!(
        "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n",
        "@@ -10,2 +10,6 @@ def add(a, b):\n     x = a\n-    return x - b\n",
        "+    # Adding, not subtracting: see the issue.\n+    # return the sum of both values\n",
        "+    print(\"usage\", file=sys.stderr)\n+    msg = \"TODO: not a comment\"\n+    return x + b\n",
        "@@ -20,2 +24,2 @@ def show(v):\n-    print(\"v=%s\" % v)\n+    print(\"value=%s\" % v)\n     return v\n",
        "diff --git a/scripts/run.py b/scripts/run.py\n--- a/scripts/run.py\n+++ b/scripts/run.py\n@@ -1 +1,2 @@\n import calc\n+print(calc.add(1, 2))\n",
        "diff --git a/docs/calc.rst b/docs/calc.rst\n--- a/docs/calc.rst\n+++ b/docs/calc.rst\n@@ -1 +1,2 @@\n Calc\n+TODO list: none\n",
    );
    let h = check(
        p,
        &Context {
            issue: "calc: add() subtracts; run.py shows it",
            gold_patch: Some(GOLD),
        },
    );
    assert_eq!(
        kinds(&h),
        vec![(FindingKind::MoreFilesThanGold, String::new())],
        "{:#?}",
        h.findings
    );
    // The gold patch against itself: nothing at all.
    let g = check(
        GOLD,
        &Context {
            issue: "",
            gold_patch: Some(GOLD),
        },
    );
    assert!(g.findings.is_empty(), "{:#?}", g.findings);
}

#[test]
fn size_against_gold_and_unreadable_text() {
    let mut p = String::from("diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -10,2 +10,31 @@\n     x = a\n-    return x - b\n");
    for i in 0..29 {
        p.push_str(&format!("+    v{i} = {i}\n"));
    }
    let h = check(
        &p,
        &Context {
            issue: "",
            gold_patch: Some(GOLD),
        },
    );
    assert_eq!(
        kinds(&h),
        vec![(FindingKind::LargerThanGold, String::new())]
    );
    let h = check("just prose, no diff", &Context::default());
    assert_eq!(kinds(&h), vec![(FindingKind::Unreadable, String::new())]);
    assert!(check("", &Context::default()).findings.is_empty());
}
