//! `--task-repo`: the reference 5.0's task directories read as the same
//! instances dataset rows give. The reference's own writer (swebench 5.0.2,
//! found by PATCHGRADE_SWEBENCH_PYTHON; skipped without it unless
//! PATCHGRADE_REQUIRE_SWEBENCH=1) makes a task repository of 20 Verified
//! rows, and every instance patchgrade reads from it equals the row's; a
//! task repository written here by hand gives the same verdicts as its
//! rows, and `report`/`regrade` read the run it made; bad task directories
//! are exit 2, naming the file.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::widgets::*;
use common::*;
use patchgrade::dataset::Dataset;
use patchgrade::exit;
use serde_json::{json, Value};

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
/// What the writer adds to task.yaml beside the row's own columns.
const WRITER_COLUMNS: [&str; 2] = ["split", "datasets"];

fn fixture(rel: &str) -> PathBuf {
    project_root().join("tests/fixtures/task-repo").join(rel)
}

/// Each instance as JSON, by id (in id order: a task repository lists its
/// tasks by directory name, a file in its own order).
fn by_id(ds: &Dataset) -> BTreeMap<String, Value> {
    ds.instances
        .iter()
        .map(|i| (i.instance_id.clone(), serde_json::to_value(i).unwrap()))
        .collect()
}

fn without(mut v: Value, keys: &[&str]) -> Value {
    for k in keys {
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

#[test]
fn the_references_task_repo_of_verified_rows_reads_as_the_rows() {
    let Some(python) = reference_python("swebench.task.repo") else {
        return;
    };
    let sb = Sandbox::new();
    let rows = fixture("verified-20.jsonl");
    let out = Command::new(&python)
        .arg(fixture("write_task_repo.py"))
        .arg(&rows)
        .arg(sb.path().join("repo"))
        .arg(sb.path().join("loaded.jsonl"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_rows = by_id(&Dataset::load(&rows).unwrap());
    let from_dirs = by_id(&Dataset::open(&sb.path().join("repo")).unwrap());
    // What the reference's own reader makes of the directories, as rows.
    let from_reference = by_id(&Dataset::load(&sb.path().join("loaded.jsonl")).unwrap());
    assert_eq!(from_rows.len(), 20);
    let repos: std::collections::BTreeSet<&str> = from_rows
        .values()
        .map(|v| v["repo"].as_str().unwrap())
        .collect();
    assert!(repos.len() >= 5, "{repos:?}");
    assert_eq!(
        from_dirs.keys().collect::<Vec<_>>(),
        from_rows.keys().collect::<Vec<_>>()
    );
    for (id, row) in &from_rows {
        let dir = &from_dirs[id];
        assert_eq!(
            dir["dockerfile"],
            format!("FROM {}\n", row["image"].as_str().unwrap())
        );
        let dir = without(dir.clone(), &["dockerfile"]);
        assert_eq!(
            dir, from_reference[id],
            "{id}: patchgrade and the reference"
        );
        assert_eq!(
            &without(dir, &WRITER_COLUMNS),
            row,
            "{id}: the task and its row"
        );
    }
}

/// A task repository of `rows`, written the way the reference lays one out.
fn write_task_repo(root: &Path, rows: &[Value]) {
    std::fs::write(
        root.join("sweb.yaml"),
        "datasets:\n- local/widgets\nsplits:\n- test\n",
    )
    .unwrap();
    for row in rows {
        let mut meta = row.as_object().unwrap().clone();
        let id = meta["instance_id"].as_str().unwrap().to_string();
        let dir = root.join("tasks").join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        let mut take = |k: &str| meta.remove(k).unwrap_or(Value::Null);
        let text = |v: Value| v.as_str().map(String::from).unwrap_or_default();
        let files = [
            ("gold.patch", text(take("patch"))),
            ("test.patch", text(take("test_patch"))),
            ("problem_statement.md", text(take("problem_statement"))),
            ("hints.md", text(take("hints_text"))),
            (
                "eval.sh",
                "#!/bin/bash\n: the spec's script runs unless --eval-script dataset\n".into(),
            ),
            (
                "Dockerfile",
                format!("FROM swebench/sweb.eval.x86_64.{id}:latest\n"),
            ),
        ];
        let list = |v: Value| match v {
            Value::String(s) => serde_json::from_str::<Value>(&s).unwrap(),
            v => v,
        };
        let tests = json!({"FAIL_TO_PASS": list(take("FAIL_TO_PASS")), "PASS_TO_PASS": list(take("PASS_TO_PASS"))});
        meta.insert("split".into(), json!("test"));
        for (name, text) in files
            .iter()
            .filter(|(n, t)| *n != "hints.md" || !t.is_empty())
        {
            std::fs::write(dir.join(name), text).unwrap();
        }
        std::fs::write(
            dir.join("tests.json"),
            serde_json::to_string_pretty(&tests).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.join("task.yaml"),
            serde_yaml_ng::to_string(&meta).unwrap(),
        )
        .unwrap();
    }
}

fn setup() -> Widgets {
    let w = Widgets::new(SPEC, &[]);
    let mut rows = vec![w.row("w-gold"), w.row("w-wrong")];
    rows[1]["hints_text"] = json!("Mind the upper bound.");
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    write_task_repo(w.sb.path(), &rows);
    let preds = vec![
        prediction("w-gold", "m", Some(&w.gold)),
        prediction("w-wrong", "m", Some(&w.wrong)),
    ];
    w.sb.write("preds.jsonl", &jsonl(&preds));
    w
}

/// `run` over the task repository in the sandbox's root instead of dataset.jsonl.
fn task_repo_args(run_id: &str) -> Vec<&str> {
    let mut args = local_args(run_id, "preds.jsonl", "specs");
    let at = args.iter().position(|a| *a == "--dataset").unwrap();
    args.splice(at..at + 2, ["--task-repo", "."]);
    args
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_hand_written_task_repo_reads_as_its_rows() {
    let w = setup();
    let rows = by_id(&Dataset::load(&w.sb.path().join("dataset.jsonl")).unwrap());
    let dirs = by_id(&Dataset::open(w.sb.path()).unwrap());
    assert_eq!(rows.len(), 2);
    for (id, row) in &rows {
        let dir = without(dirs[id].clone(), &["split", "dockerfile", "eval_script"]);
        assert_eq!(&dir, row, "{id}");
        assert!(dirs[id]["eval_script"]
            .as_str()
            .unwrap()
            .starts_with("#!/bin/bash"));
    }
    assert_eq!(dirs["w-wrong"]["hints_text"], "Mind the upper bound.");
}

#[test]
fn run_on_the_task_repo_gives_the_rows_verdicts_and_later_commands_read_it() {
    let w = setup();
    let sb = &w.sb;
    let out = sb.run(&local_args("rows", "preds.jsonl", "specs"));
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let out = sb.run(&task_repo_args("tasks"));
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    for run in ["rows", "tasks"] {
        assert_eq!(sb.outcome(run, "m", "w-gold"), "resolved", "{run}");
        assert_eq!(sb.outcome(run, "m", "w-wrong"), "unresolved", "{run}");
    }
    assert_eq!(
        sb.summary("m", "tasks")["resolved_ids"],
        sb.summary("m", "rows")["resolved_ids"]
    );
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("logs/run_evaluation/tasks/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["dataset"], ".", "run.json names the task repository");
    assert_eq!(meta["task_images"], "spec", "{meta}");

    // report, audit and regrade find the instances through run.json.
    let out = sb.run(&["report", "logs/run_evaluation/tasks", "--json"]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report.to_string().contains("\"m\""), "{report}");
    let out = sb.run(&["audit", "logs/run_evaluation/tasks", "--json"]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let audit: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(audit["models"]["m"]["clean_resolved"], 1, "{audit}");
    let out = sb.run(&["regrade", "logs/run_evaluation/tasks", "--specs", "specs"]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    assert_eq!(sb.outcome("tasks", "m", "w-gold"), "resolved");
    assert_eq!(sb.outcome("tasks", "m", "w-wrong"), "unresolved");
}

#[test]
fn bad_task_directories_are_bad_input_naming_the_file() {
    let w = setup();
    let sb = &w.sb;
    // Without --instance-ids only the test split runs, as in the reference.
    for id in ["w-gold", "w-wrong"] {
        let path = sb.path().join(format!("tasks/{id}/task.yaml"));
        let yaml = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, yaml.replace("split: test", "split: dev")).unwrap();
    }
    let out = sb.run(&task_repo_args("dev"));
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no tasks in split \"test\" (it has: dev)"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        sb.path().join("tasks/w-wrong/tests.json"),
        "{\"FAIL_TO_PASS\": 3}",
    )
    .unwrap();
    let out = sb.run(&task_repo_args("bad"));
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tasks/w-wrong/tests.json") && stderr(&out).contains("FAIL_TO_PASS"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(sb.path().join("tasks/w-gold/task.yaml")).unwrap();
    let out = sb.run(&task_repo_args("bad"));
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tasks/w-gold: missing task.yaml"),
        "{}",
        stderr(&out)
    );
    // One of --dataset and --task-repo, not both.
    let mut both = task_repo_args("both");
    both.extend(["--dataset", "dataset.jsonl"]);
    let out = sb.run(&both);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    let out = sb.run(&["run", "--predictions", "gold", "--run-id", "none"]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    let out = sb.run(&[
        "run",
        "--task-repo",
        "dataset.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "file",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a directory"), "{}", stderr(&out));
}
