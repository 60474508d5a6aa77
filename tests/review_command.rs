//! The review commands through the real binary: `audit --dataset
//! --predictions` (the static audit of a submission, nothing run) on rows
//! of the SWE-bench Lite fixture, and `review` (the static rubric in the
//! instance's container) on a fixture repository with planted problems.

mod common;

use patchgrade::exit;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::Value;

/// A local OpenAI-compatible server that answers every chat request with
/// the recorded reply tests/fixtures/review/judge/pointwise-good.json and
/// keeps each request's Authorization header. No real model runs.
fn judge_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let body = std::fs::read_to_string(
        project_root().join("tests/fixtures/review/judge/pointwise-good.json"),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let Some(HttpRequest {
                authorization: auth,
                ..
            }) = read_http_request(&mut reader)
            else {
                return;
            };
            seen2.lock().unwrap().push(auth);
            let mut out = conn;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

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
    assert_eq!(out.status.code(), Some(exit::OK));
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    let out = sb.run(&["audit"]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let out = sb.run(&["audit", "--predictions", "gold"]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let out = sb.run(&[
        "audit",
        "--dataset",
        "lite.jsonl",
        "--predictions",
        "gold",
        "--rerun",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    // A predictions file naming an unknown instance is bad input.
    sb.write(
        "bad.jsonl",
        &jsonl(&[prediction("nope-1", "agent", Some(AGENT_14855))]),
    );
    let out = sb.run(&[&base[..], &["bad.jsonl"]].concat());
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope-1"));
}

const BASE_MOD: &str = "\"\"\"Clamp helpers.\"\"\"\n\n\ndef clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef describe(x):\n    import os\n    return \"value %s\" % x\n";
const GOLD_MOD: &str = "\"\"\"Clamp helpers.\"\"\"\n\n\ndef clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n\n\ndef describe(x):\n    import os\n    return \"value %s\" % x\n";
/// The fix with planted problems: a debug print (line 5), commented-out
/// code (6-7), a new F841 (8); the pre-existing F401 moves from 9 to 13.
const PLANTED_MOD: &str = "\"\"\"Clamp helpers.\"\"\"\n\n\ndef clamp(x, lo, hi):\n    print(\"clamp\", x, lo, hi)\n    # result = max(lo, x)\n    # return result\n    unused = hi\n    return min(hi, max(lo, x))\n\n\ndef describe(x):\n    import os\n    return \"value %s\" % x\n";
const BASE_OTHER: &str = "VALUE=1\n";
/// No env: the base image's python3 runs the unittest tests.
const SPEC_NO_PY: &str = "repo: acme/review\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
const TESTS: &str = "import unittest\nfrom pkg.mod import clamp\n\n\nclass TestClamp(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-5, 0, 3), 0)\n";
const WRONG_MOD: &str = "\"\"\"Clamp helpers.\"\"\"\n\n\ndef clamp(x, lo, hi):\n    return min(hi - 1, max(lo, x))\n\n\ndef describe(x):\n    import os\n    return \"value %s\" % x\n";

fn findings(review: &Value) -> Vec<(String, String, Vec<u64>)> {
    review["review"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["file"].as_str().unwrap_or("").to_string(),
                f["lines"]
                    .as_array()
                    .map(|l| l.iter().map(|n| n.as_u64().unwrap()).collect())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn review_finds_planted_problems_in_the_container_and_none_on_gold() {
    if !available(
        "a Docker daemon",
        "PATCHGRADE_REQUIRE_DOCKER",
        docker_answers(),
    ) || !available(
        "PyPI (the review tools)",
        "PATCHGRADE_REQUIRE_PYPI",
        pypi_reachable(),
    ) {
        return;
    }
    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/review");
    repo.commit(
        &[
            ("pkg/__init__.py", Some(b"")),
            ("pkg/mod.py", Some(BASE_MOD.as_bytes())),
            ("pkg/other.py", Some(BASE_OTHER.as_bytes())),
            ("tests/__init__.py", Some(b"")),
            ("tests/test_mod.py", Some(TESTS.as_bytes())),
        ],
        "initial",
    );
    let base = repo.head();
    // A version tag on the base: `run` passes it to setuptools_scm in the
    // instance image's setup, and `review` must find that same image.
    let obj = repo.repo.revparse_single(&base).unwrap();
    repo.repo.tag_lightweight("v1.2.3", &obj, false).unwrap();
    let high =
        format!("{TESTS}\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n");
    let test_patch = repo.diff_of(&[("tests/test_mod.py", Some(high.as_bytes()))], false);
    let wrong = repo.diff_of(&[("pkg/mod.py", Some(WRONG_MOD.as_bytes()))], false);
    let gold = repo.diff_of(&[("pkg/mod.py", Some(GOLD_MOD.as_bytes()))], false);
    let planted = repo.diff_of(
        &[
            ("pkg/mod.py", Some(PLANTED_MOD.as_bytes())),
            ("pkg/other.py", Some(b"VALUE = 1\n")),
            ("pkg/backup_mod.py", Some(b"X = 1\n")),
        ],
        false,
    );
    sb.write("specs/review.yaml", SPEC_NO_PY);
    sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            "review-1",
            "acme/review",
            &base,
            &gold,
            &test_patch,
            &["tests.test_mod.TestClamp.test_high"],
            &["tests.test_mod.TestClamp.test_low"],
        )]),
    );
    sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("review-1", "agent", Some(&planted)),
            prediction("review-1", "gold", Some(&gold)),
            prediction("review-1", "wrong", Some(&wrong)),
        ]),
    );
    // The tests first, in the same run folder: review --resolved-only
    // reviews the two patches that resolve, not the wrong one.
    let out = sb.run(&docker_args("run", "preds.jsonl", "rv"));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(sb.outcome("rv", "agent", "review-1"), "resolved");
    assert_eq!(sb.outcome("rv", "wrong", "review-1"), "unresolved");
    let run_json = sb.path().join("logs/run_evaluation/rv/run.json");
    let recorded = std::fs::read(&run_json).unwrap();
    let out = sb.run(&[
        "review",
        "--resolved-only",
        // Another setup than the run's: its run.json must stay as it was.
        "--timeout",
        "900",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "rv",
        "--backend",
        "docker",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--base-image",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(std::fs::read(&run_json).unwrap(), recorded, "run.json kept");
    let read = |model: &str| -> Value {
        let p = sb.path().join(format!(
            "logs/run_evaluation/rv/{model}/review-1/review.json"
        ));
        serde_json::from_str(&std::fs::read_to_string(&p).expect("review.json")).unwrap()
    };

    let agent = read("agent");
    // Reviewed in the evaluation's own instance image, not a rebuilt one.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(
            sb.path()
                .join("logs/run_evaluation/rv/agent/review-1/patchgrade.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        record["environment"].as_str().unwrap().contains(":"),
        "{record}"
    );
    assert_eq!(agent["environment"], record["environment"], "{agent}");
    let notes = &agent["review"]["notes"];
    assert!(
        notes.is_null() || notes.as_array().unwrap().is_empty(),
        "{notes}"
    );
    let f = findings(&agent);
    let has = |kind: &str, file: &str, line: Option<u64>| {
        f.iter()
            .any(|(k, fi, l)| k == kind && fi == file && line.is_none_or(|n| l.contains(&n)))
    };
    assert!(has("debug_print", "pkg/mod.py", Some(5)), "{f:?}");
    assert!(has("commented_out_code", "pkg/mod.py", Some(6)), "{f:?}");
    assert!(has("new_lint", "pkg/mod.py", Some(8)), "{f:?}");
    assert!(
        has("whitespace_only_hunk", "pkg/other.py", Some(1)),
        "{f:?}"
    );
    assert!(has("unrelated_file", "pkg/backup_mod.py", None), "{f:?}");
    // The pre-existing F401 moved from 9 to 13: kept, not blamed.
    assert!(!has("new_lint", "pkg/mod.py", Some(13)), "{f:?}");
    let lint = &agent["review"]["lint"];
    let new: Vec<&str> = lint["new"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["rule"].as_str().unwrap())
        .collect();
    assert_eq!(new, vec!["F841"], "{lint}");
    assert_eq!(lint["kept"], 1, "{lint}");
    assert!(agent["review"]["score"]["score"].as_f64().unwrap() < 100.0);

    let gold = read("gold");
    assert!(findings(&gold).is_empty(), "{gold}");
    assert!(
        gold["review"]["lint"].is_object(),
        "linters ran on gold: {gold}"
    );
    let notes = &gold["review"]["notes"];
    assert!(
        notes.is_null() || notes.as_array().unwrap().is_empty(),
        "{notes}"
    );
    assert_eq!(gold["review"]["score"]["score"], 100.0);

    // The run's summary and its Markdown quality section.
    let md = std::fs::read_to_string(sb.path().join("logs/run_evaluation/rv/review.md")).unwrap();
    assert!(md.contains("| gold | 1 | 100.0 |"), "{md}");
    assert!(!md.contains("| wrong |"), "{md}");
    assert!(!sb
        .path()
        .join("logs/run_evaluation/rv/wrong/review-1/review.json")
        .exists());
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("logs/run_evaluation/rv/review.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["models"]["gold"]["resolved"], 1, "{summary}");
    assert_eq!(
        summary["models"]["gold"]["mean_score_resolved"], 100.0,
        "{summary}"
    );
    assert!(
        md.contains("| debug_print | 1 | 1 | `review-1 pkg/mod.py:5: "),
        "{md}"
    );

    // `run` again on the same run id: nothing re-evaluated, and its table
    // now shows each evaluation's review (score, kinds) and the mean.
    let out = sb.run(&docker_args("run", "preds.jsonl", "rv"));
    assert_eq!(out.status.code(), Some(exit::OK));
    let table = String::from_utf8_lossy(&out.stderr);
    let row = |model: &str| -> String {
        let at = table.find(&format!("\n{model}:\n")).expect(model);
        table[at..]
            .lines()
            .find(|l| l.starts_with("review-1"))
            .unwrap()
            .to_string()
    };
    assert!(table.contains("instance  outcome"), "{table}");
    let agent_row = row("agent");
    assert!(
        agent_row.contains("resolved")
            && agent_row.contains(" debug_print, commented_out_code")
            && agent_row.contains("unrelated_file"),
        "{agent_row}"
    );
    let gold_row = row("gold");
    let cells: Vec<&str> = gold_row.split_whitespace().collect();
    assert_eq!(cells[..3], ["review-1", "resolved", "100"], "{table}");
    // `wrong` was not reviewed (--resolved-only): no review column.
    assert!(!row("wrong").contains("100"), "{table}");
    assert!(
        table.contains("review of 1: mean score 100.0 (1 resolved: mean 100.0)"),
        "{table}"
    );

    // The judge, only with --judge-url: a local server, the key from the
    // variable named, never written; a second run is served by the cache.
    let (url, seen) = judge_server();
    let judged = |run_id: &str| {
        let out = std::process::Command::new(bin())
            .args(docker_args("review", "preds.jsonl", run_id))
            .args([
                "--judge-url",
                &url,
                "--judge-model",
                "judge-model",
                "--judge-key-env",
                "PG_TEST_JUDGE_KEY",
                "--judge-price-in",
                "1",
                "--judge-price-out",
                "2",
            ])
            .current_dir(sb.path())
            .env("PATCHGRADE_CACHE", sb.cache())
            .env("PG_TEST_JUDGE_KEY", "sk-test-secret")
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(exit::OK));
    };
    judged("rj");
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "one request per patch");
    assert!(requests
        .iter()
        .all(|a| a.as_deref() == Some("Bearer sk-test-secret")));
    let p = sb
        .path()
        .join("logs/run_evaluation/rj/agent/review-1/review.json");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(!text.contains("sk-test-secret"));
    let j: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        j["judge"]["criteria"]["tests"]["mean"], 1.0,
        "{}",
        j["judge"]
    );
    assert_eq!(j["judge"]["usage"]["prompt_tokens"], 812, "{}", j["judge"]);
    judged("rj2");
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "the second run is served by <cache>/judge"
    );
}
