use super::*;

const TEST_PATCH: &str = "\
diff --git a/tests/test_x.py b/tests/test_x.py
--- a/tests/test_x.py
+++ b/tests/test_x.py
@@ -1,5 +1,9 @@
 import x
 
 def test_old():
     assert x.f(1) == 1
+
+def test_new():
+    assert x.f(2) == 4
+    assert x.g(2)
 
@@ -10,3 +14,4 @@ def test_other():
     y = 1
     assert y
+    assert x.h() == 'a'
";

fn instance(f2p: &[&str]) -> Instance {
    with_patch(TEST_PATCH, f2p)
}

fn with_patch(test_patch: &str, f2p: &[&str]) -> Instance {
    serde_json::from_value(serde_json::json!({
        "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc",
        "test_patch": test_patch, "FAIL_TO_PASS": f2p,
    }))
    .unwrap()
}

#[test]
fn oneoff_changes_the_first_expected_value_of_a_fail_to_pass_test() {
    let v = variant(&instance(&["tests/test_x.py::test_new"]), Mode::OneOff).unwrap();
    let m = &v.mutation;
    assert_eq!((m.file.as_str(), m.line), ("tests/test_x.py", 7));
    assert_eq!(m.function, "test_new");
    assert_eq!(m.tests, ["tests/test_x.py::test_new"]);
    assert_eq!(m.change, Change::ExpectedValue);
    assert_eq!(m.after, "    assert x.f(2) == 5");
    assert_eq!(
        v.test_patch,
        TEST_PATCH.replace("+    assert x.f(2) == 4\n", "+    assert x.f(2) == 5\n")
    );
}

#[test]
fn conflicting_adds_the_changed_copy_and_moves_the_later_hunks() {
    let v = variant(&instance(&["tests/test_x.py::test_new"]), Mode::Conflicting).unwrap();
    let want = TEST_PATCH
        .replace(
            "+    assert x.f(2) == 4\n",
            "+    assert x.f(2) == 4\n+    assert x.f(2) == 5\n",
        )
        .replace("@@ -1,5 +1,9 @@", "@@ -1,5 +1,10 @@")
        .replace("@@ -10,3 +14,4 @@", "@@ -10,3 +15,4 @@");
    assert_eq!(v.test_patch, want);
    assert_eq!(v.mutation.line, 8);
}

#[test]
fn the_hunk_section_names_the_function() {
    // Django's and unittest's ids; the function known from the section.
    let v = variant(&instance(&["test_other (tests.test_x.T)"]), Mode::OneOff).unwrap();
    assert_eq!(v.mutation.function, "test_other");
    assert_eq!(v.mutation.after, "    assert x.h() == 'ax'");
    assert_eq!(v.mutation.line, 16);
}

#[test]
fn sense_and_negation_only_without_an_expected_value() {
    let patch = "\
diff --git a/t.py b/t.py
--- a/t.py
+++ b/t.py
@@ -1,1 +1,4 @@
 import x
+def test_a():
+    assert x.ok()
+    assert x.f() == [1]
";
    let inst = with_patch(patch, &["test_a"]);
    let v = variant(&inst, Mode::OneOff).unwrap();
    assert_eq!(v.mutation.change, Change::Negation);
    assert_eq!(v.mutation.after, "    assert not (x.ok())");
}

#[test]
fn nothing_to_change_says_why() {
    // The only assertions are in a test that is not FAIL_TO_PASS.
    assert_eq!(
        variant(&instance(&["tests/test_x.py::test_gone"]), Mode::OneOff).unwrap_err(),
        Skip::NoAssertion
    );
    let go = "\
diff --git a/a_test.go b/a_test.go
--- a/a_test.go
+++ b/a_test.go
@@ -1,1 +1,2 @@
 package a
+func TestA(t *testing.T) {}
";
    let inst = with_patch(go, &["TestA"]);
    assert_eq!(
        variant(&inst, Mode::OneOff).unwrap_err(),
        Skip::Language(".go".into())
    );
}

#[test]
fn the_row_keeps_the_original() {
    let row = serde_json::json!({"instance_id": "o__r-1", "test_patch": TEST_PATCH, "x": 1});
    let v = variant(&instance(&["tests/test_x.py::test_new"]), Mode::OneOff).unwrap();
    let out = variant_row(&row, &v);
    assert_eq!(out["original_test_patch"], TEST_PATCH);
    assert_eq!(out["impossible_type"], "oneoff");
    assert_eq!(out["impossible"]["change"], "expected_value");
    assert_eq!(out["x"], 1);
    assert_ne!(out["test_patch"], TEST_PATCH);
}

#[test]
fn a_triple_quoted_string_at_column_0_keeps_its_function_open() {
    let patch = "\
diff --git a/t.py b/t.py
--- a/t.py
+++ b/t.py
@@ -1,1 +1,8 @@
 import x
+def test_a():
+    want = \"\"\"\\
+one
+two
+\"\"\"
+    self.assertEqual(
+        x.f(), want)
";
    let inst = with_patch(patch, &["test_a (t.T)"]);
    let v = variant(&inst, Mode::Conflicting).unwrap();
    assert_eq!(v.mutation.function, "test_a");
    assert_eq!(v.mutation.change, Change::Sense);
    assert_eq!(v.mutation.line, 9);
    assert!(v.test_patch.contains("@@ -1,1 +1,10 @@"));
    assert!(v.test_patch.ends_with(
        "+    self.assertEqual(\n+        x.f(), want)\n+    self.assertNotEqual(\n+        x.f(), want)\n"
    ));
}

#[test]
fn assertions_in_a_subtest_are_left_alone() {
    // A failure inside subTest is reported under the subtest's id; the
    // assertion after the block is the one changed.
    let patch = "\
diff --git a/t.py b/t.py
--- a/t.py
+++ b/t.py
@@ -1,1 +1,7 @@
 import x
+    def test_a(self):
+        for v in (1, 2):
+            with self.subTest(v=v):
+                self.assertEqual(x.f(v), 1)
+        self.assertTrue(x.done())
+        self.assertSequenceEqual(x.items(), [1])
";
    let inst = with_patch(patch, &["test_a (t.T)"]);
    let v = variant(&inst, Mode::OneOff).unwrap();
    assert_eq!(v.mutation.change, Change::Sense);
    assert_eq!(v.mutation.line, 6);
    assert_eq!(v.mutation.after, "        self.assertFalse(x.done())");
}
