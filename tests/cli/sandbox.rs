//! bubblewrap failing to set the sandbox up (fault 23 of docs/faults.md):
//! the script never ran, so the evaluation is an `infra_error`, retried
//! once, and never a verdict on the candidate. The fault comes from a
//! `bwrap` on PATH that runs the real one, except that it fails the eval
//! script's sandbox as many times as its state file says.

use super::*;
use patchgrade::exit;
use std::path::Path;
use std::process::{Command, Output};

const FAILING_BWRAP: &str = r#"#!/bin/bash
# Fails the eval script's sandbox while the state file holds a count > 0.
if [[ "$*" == *eval.sh* ]]; then
    n=$(cat "$PATCHGRADE_TEST_BWRAP_FAILURES")
    if [ "$n" -gt 0 ]; then
        echo $((n - 1)) > "$PATCHGRADE_TEST_BWRAP_FAILURES"
        echo "bwrap: Creating new namespace failed: Resource temporarily unavailable" >&2
        exit 1
    fi
fi
exec REAL "$@"
"#;

fn run_with_failing_bwrap(w: &Widgets, run_id: &str, failures: u32) -> Output {
    let real = Command::new("bash")
        .args(["-c", "command -v bwrap"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let bin_dir = w.sb.path().join(format!("fake-bin-{run_id}"));
    let wrapper = w.sb.write(
        &format!("fake-bin-{run_id}/bwrap"),
        &FAILING_BWRAP.replace("REAL", &real),
    );
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let state =
        w.sb.write(&format!("bwrap-failures-{run_id}"), &failures.to_string());
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    w.sb.run_env(
        &w.args(run_id, "gold", &[]),
        &[
            ("PATH", path.as_ref()),
            ("PATCHGRADE_TEST_BWRAP_FAILURES", state.as_os_str()),
        ],
    )
}

fn left(state: &Path) -> String {
    std::fs::read_to_string(state).unwrap().trim().to_string()
}

#[test]
fn a_sandbox_that_did_not_start_is_an_infra_error_retried_once() {
    if !available("bubblewrap", "PATCHGRADE_REQUIRE_SANDBOX", bwrap_works()) {
        return;
    }
    let w = widgets();
    w.sb.write("dataset.jsonl", &jsonl(&[w.row("acme__widgets-1")]));
    let id = "acme__widgets-1";

    // Once: the retry runs the script, and gold is graded as gold.
    let out = run_with_failing_bwrap(&w, "once", 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    assert_eq!(left(&w.sb.path().join("bwrap-failures-once")), "0");
    assert!(
        err.contains("infra error, retrying once: the sandbox did not start: bwrap: Creating new namespace failed"),
        "{err}"
    );
    assert_eq!(w.sb.outcome("once", "gold", id), "resolved");

    // Every time: infra_error naming bwrap's message, exit 4, never a
    // verdict on the candidate.
    let out = run_with_failing_bwrap(&w, "always", 5);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    assert_eq!(
        left(&w.sb.path().join("bwrap-failures-always")),
        "3",
        "two attempts"
    );
    let rec = w.sb.record("always", "gold", id);
    assert_eq!(rec["outcome"], "infra_error", "{rec}");
    assert_eq!(
        rec["detail"],
        "the sandbox did not start: bwrap: Creating new namespace failed: Resource temporarily unavailable",
        "{rec}"
    );
    assert!(rec.get("grade").is_none_or(|g| g.is_null()), "{rec}");
}
