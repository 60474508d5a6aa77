//! `patchgrade perf` end to end on the real Docker engine: the perf demo
//! (instances/perf-demo) with its three candidates, graded and measured by
//! the real binary. Asserts the pipeline and the correctness gate, not the
//! calibration (few rounds; harness-scripts/perf/calibrate.sh does that).
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use patchgrade::exit;
use std::process::Command;

use common::*;
use serde_json::Value;

fn containers_of(run_id: &str) -> String {
    let out = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label=patchgrade.run_id={run_id}"))
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn docker_ready() -> bool {
    let ok = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .is_ok_and(|o| o.status.success());
    available("a Docker daemon", "PATCHGRADE_REQUIRE_DOCKER", ok)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn perf_grades_then_measures_the_demo_and_gates_the_wrong_candidate() {
    if !docker_ready() {
        return;
    }
    let sb = Sandbox::new();
    let demo = project_root().join("instances/perf-demo");
    // The demo, and a second instance whose workload field is unusable: it
    // is graded but cannot be measured (exit 4, named).
    copy_dir(&demo.join("repos"), &sb.path().join("repos"));
    let row: Value = serde_json::from_str(
        std::fs::read_to_string(demo.join("dataset.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let mut broken = row.clone();
    broken["instance_id"] = "patchgrade__demo-perf-2".into();
    broken["workload"] = 5.into();
    let dataset = sb.write("dataset.jsonl", &jsonl(&[row, broken]));
    let preds = demo.join("predictions.jsonl");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["perf", "--dataset", dataset.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Few rounds: with the IQR rule dropping values, 3 against 3 could
        // not reach p < 0.05 whatever the effect.
        for s in [
            "--backend",
            "docker",
            "--base-image",
            "none",
            "--cpuset-cpus",
            "0",
            "--outlier-k",
            "none",
        ]
        .iter()
        .chain(extra)
        {
            a.push(s.to_string());
        }
        a
    };
    let run = |a: Vec<String>| sb.run(&a.iter().map(String::as_str).collect::<Vec<_>>());

    let out = run(args(&[
        "--predictions",
        preds.to_str().unwrap(),
        "--run-id",
        "p1",
        "--repeat",
        "5",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(exit::INCONCLUSIVE),
        "one instance cannot be measured"
    );
    assert!(
        stderr.contains("could not be measured: instance patchgrade__demo-perf-2: field `workload` must be a script"),
        "{stderr}"
    );
    assert_eq!(containers_of("p1-perf"), "", "no container is left");
    let perf_dir = sb.path().join("logs/run_evaluation/p1/perf");
    let rec: Value = serde_json::from_str(
        &std::fs::read_to_string(perf_dir.join("patchgrade__demo-perf-1/perf.json")).unwrap(),
    )
    .unwrap();
    assert!(!perf_dir.join("patchgrade__demo-perf-2").exists());
    assert_eq!(rec["repeat"], 5);
    assert_eq!(rec["workload_source"], "workload");
    assert_eq!(rec["options"]["metric"], "cpu");
    assert_eq!(rec["runs"].as_array().unwrap().len(), 6 * 5);
    let v = |name: &str| -> Value {
        rec["analysis"]["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variant {name} in {rec}"))
            .clone()
    };
    let names: Vec<String> = rec["analysis"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["base", "base-aa", "gold", "a", "b", "c"]);
    // Correctness comes from the grading in the same run.
    let resolved: Vec<Value> = rec["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["resolved"].clone())
        .collect();
    assert_eq!(
        resolved,
        [
            Value::Null,
            Value::Null,
            true.into(),
            true.into(),
            true.into(),
            false.into()
        ]
    );
    let gold = v("gold");
    let too_noisy = rec["analysis"]["too_noisy"].as_bool().unwrap();
    assert_eq!(gold["comparison"]["verdict"], "faster", "{gold}");
    assert!(gold["comparison"]["speedup"]["point"].as_f64().unwrap() > 3.0);
    assert_eq!(v("b")["comparison"]["verdict"], "slower");
    // c is fast but wrong: measured, reported, never credited.
    let c = v("c");
    assert_eq!(c["status"], "not_credited", "{c}");
    assert!(c["comparison"]["speedup"]["point"].as_f64().unwrap() > 3.0);
    if !too_noisy {
        assert_eq!(gold["status"], "scored");
        assert_eq!(v("b")["status"], "scored");
    }
    // The report, its plot, and the table on stderr.
    let md = std::fs::read_to_string(perf_dir.join("report.md")).unwrap();
    assert!(md.contains("patchgrade__demo-perf-1"), "{md}");
    assert!(md.contains("perf-1.svg"), "{md}");
    let svg = std::fs::read_to_string(perf_dir.join("perf-1.svg")).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
    assert!(stderr.contains("not credited"), "{stderr}");

    // Gold alone, one instance: exit 0 and the records as JSON on stdout
    // (graded again under a new run id, in the image kept by the first).
    let out = run(args(&[
        "--predictions",
        "gold",
        "--instance-ids",
        "patchgrade__demo-perf-1",
        "--run-id",
        "p2",
        "--repeat",
        "3",
        "--warmup",
        "0",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(exit::OK));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["not_measured"], serde_json::json!([]));
    let recs = j["records"].as_array().unwrap();
    assert_eq!(recs.len(), 1);
    let names: Vec<&str> = recs[0]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "base-aa", "gold"]);
    assert_eq!(recs[0]["warmups"].as_array().unwrap().len(), 0);
    assert!(j["aggregates"]["gold"].is_object(), "{}", j["aggregates"]);
    assert_eq!(containers_of("p2-perf"), "");

    // `run --perf`: a normal run, then its resolved patches are measured
    // by the same code; c (unresolved) is not measured, and said so.
    let out = sb.run(&[
        "run",
        "--dataset",
        dataset.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--instance-ids",
        "patchgrade__demo-perf-1",
        "--run-id",
        "r1",
        "--backend",
        "docker",
        "--base-image",
        "none",
        "--perf",
        "--repeat",
        "3",
        "--warmup",
        "0",
        "--cpuset-cpus",
        "0",
        "--outlier-k",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec: Value = serde_json::from_str(
        &std::fs::read_to_string(
            sb.path()
                .join("logs/run_evaluation/r1/perf/patchgrade__demo-perf-1/perf.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let names: Vec<&str> = rec["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "base-aa", "gold", "a", "b"]);
    // Gold was not part of this run: its correctness is unknown here.
    assert_eq!(rec["variants"][2]["resolved"], Value::Null);
    let notes = rec["analysis"]["notes"].to_string();
    assert!(
        notes.contains("not measured (not resolved or empty): c"),
        "{notes}"
    );
    assert!(sb
        .path()
        .join("logs/run_evaluation/r1/perf/report.md")
        .exists());
    assert_eq!(containers_of("r1-perf"), "");

    // The local backend cannot measure: bad input, before anything runs.
    let out = sb.run(&[
        "perf",
        "--dataset",
        dataset.to_str().unwrap(),
        "--predictions",
        "gold",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--backend docker"));
}
