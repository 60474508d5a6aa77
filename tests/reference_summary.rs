//! The run summary against the reference's own: patchgrade runs a set of
//! candidates with the local backend, then the `swebench` package (5.0.2,
//! its `make_run_report`) reads the same run folder, and every field the
//! reference writes must be equal in patchgrade's summary, the infra and
//! ambiguous failure lists (#586) among them. The reference is found by
//! PATCHGRADE_SWEBENCH_PYTHON (a python whose environment has swebench
//! installed, as `.ci/run` makes one); without it the test skips unless
//! PATCHGRADE_REQUIRE_SWEBENCH=1.

mod common;

use std::process::Command;

use common::widgets::*;
use common::*;
use serde_json::{json, Value};

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// A test method that prints `line` and fails.
fn failing_with(line: &str) -> String {
    format!("    def test_high(self):\n        print({line:?})\n        self.assertEqual(clamp(9, 0, 3), 3)\n")
}

#[test]
fn summary_fields_equal_the_references_on_the_same_run_folder() {
    let Some(python) = reference_python("swebench.harness.reporting") else {
        return;
    };
    let w = Widgets::new(SPEC, &[]);
    let sb = &w.sb;
    let with_test = |id: &str, test_patch: &str| {
        instance(
            id,
            "acme/widgets",
            &w.base,
            &w.gold,
            test_patch,
            &[F2P],
            &[P2P],
        )
    };
    let module = w.tests_adding(&failing_with(
        "ModuleNotFoundError: No module named 'numpy'",
    ));
    // On a line of its own: unittest writes "... " before the output.
    let killed = w.tests_adding(&failing_with("\nKilled"));
    let hang =
        w.tests_adding("    def test_high(self):\n        import time\n        time.sleep(600)\n");
    let escape = "diff --git a/../x.txt b/../x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../x.txt\n@@ -0,0 +1 @@\n+x\n";
    let rows = vec![
        w.row("w-gold"),
        w.row("w-wrong"),
        with_test("w-module", &module),
        with_test("w-killed", &killed),
        with_test("w-hang", &hang),
        w.row("w-escape"),
        w.row("w-empty"),
        w.row("w-unsubmitted"),
    ];
    sb.write("dataset.jsonl", &jsonl(&rows));
    let preds = vec![
        prediction("w-gold", "m", Some(&w.gold)),
        prediction("w-wrong", "m", Some(&w.wrong)),
        prediction("w-module", "m", Some(&w.wrong)),
        prediction("w-killed", "m", Some(&w.wrong)),
        prediction("w-hang", "m", Some(&w.gold)),
        prediction("w-escape", "m", Some(escape)),
        prediction("w-empty", "m", None),
    ];
    sb.write("preds.jsonl", &jsonl(&preds));
    let mut args = local_args("ref", "preds.jsonl", "specs");
    args.extend(["--timeout", "5"]);
    let out = sb.run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = sb.summary("m", "ref");
    // Our own view first: what each evaluation was.
    assert_eq!(sb.outcome("ref", "m", "w-killed"), "unresolved");
    assert_eq!(sb.outcome("ref", "m", "w-hang"), "tests_timed_out");
    assert_eq!(ours["infra_failure_ids"], json!(["w-killed"]));
    assert_eq!(ours["ambiguous_failure_ids"], json!(["w-hang", "w-module"]));
    assert_eq!(
        ours["failure_reasons"],
        json!({"w-hang": "tests_timed_out", "w-killed": "out_of_memory", "w-module": "missing_module"})
    );

    // The reference's report of the same folder, written to ref-report/.
    let script = r#"
import json, sys
from swebench.harness.reporting import make_run_report
dataset = [json.loads(l) for l in open("dataset.jsonl")]
preds = {p["instance_id"]: p for p in map(json.loads, open("preds.jsonl"))}
path = make_run_report(preds, dataset, "ref", client=None, report_dir="ref-report")
print(path)
"#;
    let reference = Command::new(&python)
        .args(["-c", script])
        .current_dir(sb.path())
        .output()
        .expect("reference python runs");
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let path = String::from_utf8_lossy(&reference.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let theirs: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join(path.trim())).unwrap())
            .unwrap();
    let fields = theirs.as_object().expect("an object");
    assert!(fields.contains_key("infra_failure_ids"), "{theirs}");
    for (key, value) in fields {
        assert_eq!(
            &ours[key], value,
            "field {key}: ours {} theirs {value}",
            ours[key]
        );
    }
}
