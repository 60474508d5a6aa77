//! The review commands through the real binary: `audit --dataset
//! --predictions` (the static audit of a submission, nothing run) on rows
//! of the SWE-bench Lite fixture, and `review` (the static rubric in the
//! instance's container) on a fixture repository with planted problems.

mod common;

use common::*;
use serde_json::Value;

/// Rows of the Lite fixture (tests/fixtures/swebench-lite/test.jsonl).
fn lite_rows(ids: &[&str]) -> String {
    let text =
        std::fs::read_to_string(project_root().join("tests/fixtures/swebench-lite/test.jsonl"))
            .expect("read the Lite fixture");
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| ids.contains(&v["instance_id"].as_str().unwrap()))
        .collect();
    assert_eq!(rows.len(), ids.len());
    jsonl(&rows)
}

/// An agent's patch for django-14855: the fix, with a debug print left in.
const AGENT_14855: &str = r#"diff --git a/django/contrib/admin/helpers.py b/django/contrib/admin/helpers.py
--- a/django/contrib/admin/helpers.py
+++ b/django/contrib/admin/helpers.py
@@ -209,7 +209,8 @@ class AdminReadonlyField:
             remote_field.model._meta.model_name,
         )
         try:
-            url = reverse(url_name, args=[quote(remote_obj.pk)])
+            print("debug", url_name)
+            url = reverse(url_name, args=[quote(remote_obj.pk)], current_app=self.model_admin.admin_site.name)
             return format_html('<a href="{}">{}</a>', url, remote_obj)
         except NoReverseMatch:
             return str(remote_obj)
"#;

#[test]
fn audit_of_a_submission_prints_findings_and_runs_nothing() {
    let sb = Sandbox::new();
    sb.write(
        "lite.jsonl",
        &lite_rows(&["django__django-14855", "sympy__sympy-20322"]),
    );
    sb.write(
        "agent.jsonl",
        &jsonl(&[
            prediction("django__django-14855", "agent", Some(AGENT_14855)),
            prediction("sympy__sympy-20322", "agent", None),
        ]),
    );
    let base = ["audit", "--dataset", "lite.jsonl", "--predictions"];

    // Gold: django-14855's fix is in its problem statement; sympy-20322's
    // gold keeps commented-out code at mul.py:1266 (on purpose upstream).
    let out = sb.run(&[&base[..], &["gold", "--json"]].concat());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gold  django__django-14855  suspect"), "{err}");
    assert!(err.contains("    solution_in_issue: "), "{err}");
    assert!(
        err.contains("gold  sympy__sympy-20322  clean  score 95"),
        "{err}"
    );
    assert!(
        err.contains("    commented_out_code sympy/core/mul.py:1266: "),
        "{err}"
    );
    assert!(
        err.contains("(leakage judged on the problem statement only)"),
        "{err}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(json["summary"]["predictions"], 2);
    assert_eq!(json["summary"]["suspect"], 1);
    assert_eq!(json["audit"]["with_hints"], false);

    // The agent: the debug print at its line, leakage too; the empty patch
    // counted and not audited.
    let out = sb.run(&[&base[..], &["agent.jsonl"]].concat());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("    debug_print django/contrib/admin/helpers.py:212: "),
        "{err}"
    );
    assert!(
        err.contains("2 predictions (1 empty, not audited)"),
        "{err}"
    );

    // With hints the text judged is wider.
    let out = sb.run(&[&base[..], &["gold", "--with-hints"]].concat());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(leakage judged on the problem statement and hints)"),
        "{err}"
    );

    // Nothing ran, nothing was written.
    assert!(!sb.path().join("logs").exists());

    // Exactly one of the two forms.
    let out = sb.run(&[
        "audit",
        "logs/run_evaluation/x",
        "--dataset",
        "lite.jsonl",
        "--predictions",
        "gold",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    let out = sb.run(&["audit"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sb.run(&["audit", "--predictions", "gold"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sb.run(&[
        "audit",
        "--dataset",
        "lite.jsonl",
        "--predictions",
        "gold",
        "--rerun",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A predictions file naming an unknown instance is bad input.
    sb.write(
        "bad.jsonl",
        &jsonl(&[prediction("nope-1", "agent", Some(AGENT_14855))]),
    );
    let out = sb.run(&[&base[..], &["bad.jsonl"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope-1"));
}
