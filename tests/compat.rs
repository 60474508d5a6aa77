//! Compatibility with patchgrade 0.1.0: run folders it wrote stay readable by
//! every command, and the commands print and write what it printed and wrote
//! (tests/fixtures/rundir-0.1.0, golden outputs made by the binary before the
//! restructure). Only what legitimately varies is redacted: durations.

mod common;

use patchgrade::exit;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, project_root, Sandbox};
use serde_json::Value;

fn fixture() -> PathBuf {
    project_root().join("tests/fixtures/rundir-0.1.0")
}

fn golden(name: &str) -> String {
    let p = fixture().join("golden").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A sandbox laid out as the goldens were made in: `instances/demo`, the
/// fixture's run folders under `logs/run_evaluation`, the samples'
/// predictions. Paths given to the binary are relative to it, as then.
struct Old {
    sb: Sandbox,
}

impl Old {
    fn new() -> Old {
        let sb = Sandbox::new();
        copy_dir(
            &project_root().join("instances/demo"),
            &sb.path().join("instances/demo"),
        );
        copy_dir(
            &fixture().join("run_evaluation"),
            &sb.path().join("logs/run_evaluation"),
        );
        std::fs::copy(
            fixture().join("samples.predictions.jsonl"),
            sb.path().join("samples.predictions.jsonl"),
        )
        .unwrap();
        Old { sb }
    }

    fn path(&self) -> &Path {
        self.sb.path()
    }

    /// The binary, to be run there with its own cache.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.path())
            .env("PATCHGRADE_CACHE", self.path().join("cache"))
            .env_remove("PATCHGRADE_MIRROR_DIR");
        c
    }

    /// Runs the binary there; it must succeed.
    fn run(&self, args: &[&str]) -> Output {
        let out = self.sb.run(args);
        assert_eq!(
            out.status.code(),
            Some(exit::OK),
            "patchgrade {}",
            args.join(" ")
        );
        out
    }

    fn read(&self, rel: &str) -> String {
        let p = self.path().join(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }
}

/// `run` on the demo's dataset, paths relative to the sandbox.
fn demo_run<'a>(predictions: &'a str, run_id: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--dataset",
        "instances/demo/dataset.jsonl",
        "--predictions",
        predictions,
        "--run-id",
        run_id,
    ];
    args.extend_from_slice(extra);
    args
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `finished in 0.4s` -> `finished in Xs`.
fn redact_elapsed(s: &str) -> String {
    s.lines()
        .map(|l| match l.strip_prefix("finished in ") {
            Some(rest) if rest.ends_with('s') => "finished in Xs".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sets every number under a key named `key`, at any depth, to 0.
/// The note the future-copy check (added after 0.1.0) leaves when the
/// run's cache has no mirror of the repository: removed, counted.
fn drop_future_notes(v: &mut Value) -> usize {
    let mut n = 0;
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(notes)) = map.get_mut("notes") {
                let before = notes.len();
                notes.retain(|x| {
                    !x.as_str()
                        .is_some_and(|t| t.starts_with("future-copy check not run: no mirror"))
                });
                n += before - notes.len();
                if notes.is_empty() {
                    map.remove("notes");
                }
            }
            n += map.values_mut().map(drop_future_notes).sum::<usize>();
        }
        Value::Array(items) => n += items.iter_mut().map(drop_future_notes).sum::<usize>(),
        _ => {}
    }
    n
}

fn zero_key(v: &mut Value, key: &str) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k == key && x.is_number() {
                    *x = Value::from(0);
                } else {
                    zero_key(x, key);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| zero_key(x, key)),
        _ => {}
    }
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// The progress lines (`[i/n] ...`) as a sorted list with the counters
/// dropped, and the rest of the text as it is. With several evaluations
/// per instance the order in which they finish is not fixed.
fn split_progress(s: &str) -> (Vec<String>, String) {
    let mut progress = Vec::new();
    let mut rest = Vec::new();
    for l in s.lines() {
        match l.strip_prefix('[').and_then(|r| r.split_once("] ")) {
            Some((_, line)) => progress.push(line.to_string()),
            None => rest.push(l),
        }
    }
    progress.sort();
    (progress, rest.join("\n"))
}

#[test]
fn demo_prints_and_summarises_as_0_1_0_did() {
    let old = Old::new();
    std::fs::remove_dir_all(old.path().join("logs/run_evaluation/demo")).unwrap();
    let out = old.run(&demo_run(
        "instances/demo/predictions.jsonl",
        "demo",
        &["--max-workers", "1", "--json", "--backend", "local"],
    ));
    assert_eq!(
        redact_elapsed(&text(&out.stderr)),
        redact_elapsed(&golden("demo.stderr.txt"))
    );
    let mut got = json(&text(&out.stdout));
    let mut want = json(&golden("demo.summary.json"));
    zero_key(&mut got, "wall_seconds");
    zero_key(&mut want, "wall_seconds");
    assert_eq!(got, want);
    // The same summary in the file, byte for byte but the duration.
    let mut file = json(&old.read("demo-agent.demo.json"));
    zero_key(&mut file, "wall_seconds");
    assert_eq!(file, want);
}

#[test]
fn report_of_an_old_samples_folder_is_unchanged() {
    let old = Old::new();
    let out = old.run(&["report", "logs/run_evaluation/samples", "--json"]);
    assert_eq!(text(&out.stdout), golden("samples.report.json"));
    assert!(old
        .path()
        .join("logs/run_evaluation/samples/passk/report.md")
        .is_file());
    // The single-sample demo folder reads too.
    let out = old.run(&["report", "logs/run_evaluation/demo", "--json"]);
    let v = json(&text(&out.stdout));
    assert_eq!(v["run_id"], "demo");
    assert_eq!(v["models"]["demo-agent"]["instances"], 5);
}

#[test]
fn static_audit_of_an_old_folder_is_unchanged() {
    let old = Old::new();
    let before =
        old.read("logs/run_evaluation/samples/agent-a/patchgrade__demo-calc-1@0/patchgrade.json");
    let out = old.run(&["audit", "logs/run_evaluation/samples", "--json"]);
    let mut got = json(&text(&out.stdout));
    let mut want = json(&golden("samples.audit.json"));
    drop_future_notes(&mut got);
    zero_key(&mut got, "seconds");
    zero_key(&mut want, "seconds");
    assert_eq!(got, want);
    let stderr = text(&out.stderr);
    assert_eq!(stderr, golden("samples.audit.stderr.txt"));
    // Verdicts written back: the same record but the audit's duration.
    let after =
        old.read("logs/run_evaluation/samples/agent-a/patchgrade__demo-calc-1@0/patchgrade.json");
    let (mut a, mut b) = (json(&before), json(&after));
    zero_key(&mut a, "seconds");
    zero_key(&mut b, "seconds");
    // The one addition since 0.1.0: the future-copy check could not run (no
    // mirror in this folder's cache), said as a note, the verdict unchanged.
    assert_eq!(drop_future_notes(&mut b), 1, "{b}");
    assert_eq!(a, b);
}

#[test]
fn select_over_an_old_folder_chooses_as_0_1_0_did() {
    let old = Old::new();
    let out = old.run(&[
        "select",
        "logs/run_evaluation/samples",
        "--predictions",
        "samples.predictions.jsonl",
        "--backend",
        "local",
        "--max-workers",
        "2",
        "--json",
    ]);
    assert_eq!(text(&out.stdout), golden("samples.select.json"));
    assert_eq!(
        old.read("samples.selected.jsonl"),
        golden("samples.selected.jsonl")
    );
    let stderr = text(&out.stderr);
    let table = stderr
        .split_once("\nfinished in ")
        .and_then(|(_, t)| t.split_once('\n'))
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no table after the progress: {stderr}"));
    assert_eq!(table, golden("samples.select.stderr.txt"));
}

#[test]
fn validate_of_the_demo_is_unchanged() {
    let old = Old::new();
    let out = old.run(&[
        "validate",
        "--dataset",
        "instances/demo/dataset.jsonl",
        "--gold-runs",
        "2",
        "--backend",
        "local",
        "--max-workers",
        "1",
        "--json",
    ]);
    assert_eq!(text(&out.stdout), golden("demo.validate.json"));
    let (got_progress, got_rest) = split_progress(&redact_elapsed(&text(&out.stderr)));
    let (want_progress, want_rest) =
        split_progress(&redact_elapsed(&golden("demo.validate.stderr.txt")));
    assert_eq!(got_progress, want_progress);
    assert_eq!(got_rest, want_rest);
}

/// Exit 3: `--backend docker` and no daemon answers; nothing is run.
#[test]
fn no_docker_daemon_is_an_infrastructure_failure() {
    let old = Old::new();
    let out = old
        .command(&demo_run(
            "instances/demo/predictions.jsonl",
            "nodocker",
            &["--backend", "docker"],
        ))
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::INFRA), "{stderr}");
    assert!(
        stderr.contains("error: no Docker daemon answers at unix:///nonexistent/docker.sock"),
        "{stderr}"
    );
    assert!(!old.path().join("logs/run_evaluation/nodocker").exists());
}

/// Exit 3: the summary cannot be written (its folder is a file).
#[test]
fn unwritable_report_is_an_infrastructure_failure() {
    let old = Old::new();
    std::fs::write(old.path().join("not-a-dir"), "").unwrap();
    let out = old.sb.run(&demo_run(
        "instances/demo/predictions.jsonl",
        "unwritable",
        &["--backend", "local", "--report-dir", "not-a-dir"],
    ));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::INFRA), "{stderr}");
    assert!(
        stderr.contains("error: cannot write not-a-dir/demo-agent.unwritable.json"),
        "{stderr}"
    );
}

/// Exit 130: Ctrl-C while a candidate's tests run stops them; nothing is
/// recorded for that evaluation, the summary of the rest is written.
#[test]
fn interrupt_stops_the_run_and_exits_130() {
    let old = Old::new();
    // A fix of instance 1 whose module sleeps on import: its tests hang.
    let slow = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -15,4 +15,8 @@ def mul(a, b):\n \n+import time; time.sleep(300)\n \n def div(a, b):\n-    return a / b\n+    try:\n+        return a / b\n+    except ZeroDivisionError as e:\n+        raise CalcError(str(e)) from None\n";
    let pred = serde_json::json!({
        "instance_id": "patchgrade__demo-calc-1",
        "model_name_or_path": "slow",
        "model_patch": slow,
    });
    std::fs::write(old.path().join("slow.jsonl"), format!("{pred}\n")).unwrap();
    let mut child = old
        .command(&demo_run(
            "slow.jsonl",
            "stopped",
            &["--backend", "local", "--max-workers", "1"],
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, "evaluating 1 predictions with 1 workers");
    // Until its tests run: the test log's folder has the eval script.
    let dir = old
        .path()
        .join("logs/run_evaluation/stopped/slow/patchgrade__demo-calc-1");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("eval.sh").exists() {
        assert!(Instant::now() < deadline, "the evaluation never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    let rest = rest.join("\n");
    assert_eq!(status.code(), Some(exit::INTERRUPTED), "{rest}");
    assert!(
        rest.contains("interrupted: stopping running evaluations"),
        "{rest}"
    );
    assert!(
        rest.contains("patchgrade__demo-calc-1: stopped, nothing recorded"),
        "{rest}"
    );
    assert!(!rest.contains("error:"), "{rest}");
    assert!(!dir.join("patchgrade.json").exists());
    let summary: Value = serde_json::from_str(&old.read("slow.stopped.json")).unwrap();
    assert_eq!(
        summary["error_ids"],
        serde_json::json!(["patchgrade__demo-calc-1"])
    );
}
