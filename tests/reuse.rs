//! Reusing a run's recorded setup (`cli/reuse.rs`): what run.json records
//! and is not reused is said. Real binary, local backend.

mod common;

use patchgrade::exit;

use common::shapes::{shapes, Shapes};
use common::{jsonl, local_args, prediction};
use serde_json::{json, Value};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A run.json that records the swarm backend: run.json has no registry, so
/// `audit --rerun` does not evaluate on the swarm again and says so; a
/// `--backend` given is the usual override, said too.
#[test]
fn audit_rerun_says_why_a_recorded_swarm_backend_is_not_reused() {
    let Shapes { sb, gold, .. } = shapes();
    sb.write(
        "preds.jsonl",
        &jsonl(&[prediction("s-gold", "m", Some(&gold))]),
    );
    let out = sb.run(&local_args("sw", "preds.jsonl", "specs"));
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let meta_path = sb.path().join("logs/run_evaluation/sw/run.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["setup"]["backend"] = json!("swarm");
    std::fs::write(&meta_path, meta.to_string()).unwrap();

    // No daemon at DOCKER_HOST: `--backend auto` picks the local backend.
    let no_daemon = [(
        "DOCKER_HOST",
        std::ffi::OsStr::new("unix:///nonexistent.sock"),
    )];
    let out = sb.run_env(&["audit", "logs/run_evaluation/sw", "--rerun"], &no_daemon);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    assert!(
        err.contains("not reusing run.json's --backend swarm (logs/run_evaluation/sw/run.json): it does not record the registry; using --backend auto"),
        "{err}"
    );
    assert!(
        err.contains("--backend auto: ")
            && err.contains("grading with the local backend (venvs and bubblewrap)"),
        "the fallback is said: {err}"
    );

    let out = sb.run(&[
        "audit",
        "logs/run_evaluation/sw",
        "--rerun",
        "--backend",
        "local",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    assert!(
        err.contains("using --backend local from the command line instead of run.json's swarm"),
        "{err}"
    );
    assert!(!err.contains("not reusing"), "{err}");
}
