//! The reference harness 5.0's task repositories, read as a [`Dataset`].
//!
//! A task repository holds `sweb.yaml` at its root and one directory per
//! instance under `tasks/<instance_id>/`: `task.yaml` (the short columns),
//! `tests.json` (`FAIL_TO_PASS`, `PASS_TO_PASS`), `problem_statement.md`,
//! `hints.md` (absent when there are no hints), `gold.patch`, `test.patch`,
//! `eval.sh`, `Dockerfile` and `test_assets/`. Each directory becomes the
//! same row the reference's `load_task` builds (task.yaml, then the files,
//! then tests.json over them), read by the same rules as a dataset file's
//! row, so both sources give equal [`Instance`]s.
//!
//! The Dockerfile is kept in the instance's `extra` as `dockerfile` (its
//! text), but patchgrade builds images from its own spec for the repository:
//! the task Dockerfiles start from images on a registry that is not reachable
//! offline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::dataset::json_kind as kind;
use crate::dataset::{Dataset, InputError, Instance};
pub use crate::dataset::{TaskRepoError, TASKS_SUBDIR};

pub const TASK_FILE: &str = "task.yaml";
pub const TESTS_FILE: &str = "tests.json";
pub const DOCKERFILE: &str = "Dockerfile";
/// The `extra` key the Dockerfile's text is kept under.
pub const DOCKERFILE_FIELD: &str = "dockerfile";
/// Columns kept as files of their own (the reference's `AS_FILE`).
const AS_FILE: [(&str, &str); 4] = [
    ("patch", "gold.patch"),
    ("test_patch", "test.patch"),
    ("eval_script", "eval.sh"),
    ("problem_statement", "problem_statement.md"),
];
/// Written only when non-empty (the reference's `OPTIONAL_FILE`).
const OPTIONAL_FILE: [(&str, &str); 1] = [("hints_text", "hints.md")];
const TEST_KEYS: [&str; 2] = ["FAIL_TO_PASS", "PASS_TO_PASS"];

impl Dataset {
    /// A dataset file, or a task repository when `path` is a directory
    /// (`--task-repo`; and a finished run records either as its dataset).
    /// Here, not in `dataset`, which knows nothing of task repositories.
    pub fn open(path: &Path) -> Result<Dataset, InputError> {
        if is_task_repo(path) {
            return Ok(load(path)?);
        }
        Dataset::load(path)
    }
}

/// Is `path` a task repository (a directory), rather than a dataset file?
pub fn is_task_repo(path: &Path) -> bool {
    path.is_dir()
}

/// Every task directory of the repository, in name order (as the
/// reference's `task_dirs`), as one dataset.
pub fn load(root: &Path) -> Result<Dataset, TaskRepoError> {
    let tasks = root.join(TASKS_SUBDIR);
    if !tasks.is_dir() {
        return Err(TaskRepoError::NoTasks {
            path: root.to_owned(),
        });
    }
    let read_dir = |path: &Path| {
        std::fs::read_dir(path).map_err(|source| TaskRepoError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let mut dirs = Vec::new();
    for entry in read_dir(&tasks)? {
        let entry = entry.map_err(|source| TaskRepoError::Read {
            path: tasks.clone(),
            source,
        })?;
        let path = entry.path();
        // Dot folders are a tool's (an editor's, git's), never tasks.
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if path.is_dir() && !hidden {
            dirs.push(path);
        }
    }
    dirs.sort();
    if dirs.is_empty() {
        return Err(TaskRepoError::Empty {
            path: root.to_owned(),
        });
    }
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut instances = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let inst = load_task(&dir)?;
        if let Some(first) = seen.insert(inst.instance_id.clone(), dir.clone()) {
            return Err(TaskRepoError::Duplicate {
                dir,
                first,
                id: inst.instance_id,
            });
        }
        instances.push(inst);
    }
    Ok(Dataset { instances })
}

/// The split a run evaluates when no instance ids are named: the
/// reference's `swebench eval --split` default.
pub const DEFAULT_SPLIT: &str = "test";

/// Keep the tasks of `split`, as the reference's `load_instances` does when
/// no ids are named (a task repository holds every split at once; named ids
/// are taken from any split). `root` is for the message.
pub fn keep_split(ds: &mut Dataset, root: &Path, split: &str) -> Result<(), TaskRepoError> {
    let split_of = |i: &Instance| {
        i.extra
            .get("split")
            .and_then(Value::as_str)
            .map(String::from)
    };
    let available: std::collections::BTreeSet<String> =
        ds.instances.iter().filter_map(split_of).collect();
    ds.instances
        .retain(|i| split_of(i).as_deref() == Some(split));
    if ds.instances.is_empty() {
        return Err(TaskRepoError::NoSplit {
            path: root.to_owned(),
            split: split.to_string(),
            available: available.into_iter().collect(),
        });
    }
    Ok(())
}

/// One task directory as an instance.
///
/// A directory without task.yaml is an error, not skipped as the reference's
/// reader skips it: a task that silently drops out shrinks the run unseen.
pub fn load_task(dir: &Path) -> Result<Instance, TaskRepoError> {
    let row = task_row(dir)?;
    let inst: Instance =
        serde_json::from_value(Value::Object(row)).map_err(|e| TaskRepoError::Instance {
            dir: dir.to_owned(),
            reason: e.to_string(),
        })?;
    for (field, value) in [
        ("instance_id", &inst.instance_id),
        ("repo", &inst.repo),
        ("base_commit", &inst.base_commit),
    ] {
        if value.trim().is_empty() {
            return Err(TaskRepoError::Instance {
                dir: dir.to_owned(),
                reason: format!("{field} is empty"),
            });
        }
    }
    if !inst.repo.contains('/') {
        return Err(TaskRepoError::Instance {
            dir: dir.to_owned(),
            reason: format!("repo {:?} is not of the form owner/name", inst.repo),
        });
    }
    Ok(inst)
}

/// The row the reference's `load_task` makes of a task directory, with the
/// Dockerfile's text beside it.
pub fn task_row(dir: &Path) -> Result<Map<String, Value>, TaskRepoError> {
    let task_path = dir.join(TASK_FILE);
    if !task_path.is_file() {
        return Err(TaskRepoError::Missing {
            dir: dir.to_owned(),
            file: TASK_FILE,
        });
    }
    let text = read(&task_path)?;
    let meta: Value = serde_yaml_ng::from_str(&text).map_err(|e| TaskRepoError::Yaml {
        path: task_path.clone(),
        reason: e.to_string(),
    })?;
    let mut row = match meta {
        Value::Object(map) => map,
        other => {
            return Err(TaskRepoError::Shape {
                path: task_path,
                reason: format!("expected a mapping of columns, got {}", kind(&other)),
            })
        }
    };
    for (column, file) in AS_FILE {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(TaskRepoError::Missing {
                dir: dir.to_owned(),
                file,
            });
        }
        row.insert(column.into(), Value::String(read(&path)?));
    }
    for (column, file) in OPTIONAL_FILE {
        let path = dir.join(file);
        let text = if path.is_file() {
            read(&path)?
        } else {
            String::new()
        };
        row.insert(column.into(), Value::String(text));
    }
    let tests_path = dir.join(TESTS_FILE);
    if !tests_path.is_file() {
        return Err(TaskRepoError::Missing {
            dir: dir.to_owned(),
            file: TESTS_FILE,
        });
    }
    row.extend(read_tests(&tests_path)?);
    let dockerfile = dir.join(DOCKERFILE);
    if dockerfile.is_file() {
        row.insert(DOCKERFILE_FIELD.into(), Value::String(read(&dockerfile)?));
    }
    Ok(row)
}

/// tests.json: an object whose `FAIL_TO_PASS` and `PASS_TO_PASS` are lists
/// of strings (the shape the reference's `check` demands); its other keys,
/// if any, are columns too.
fn read_tests(path: &Path) -> Result<Map<String, Value>, TaskRepoError> {
    let shape = |reason: String| TaskRepoError::Shape {
        path: path.to_owned(),
        reason,
    };
    let value: Value = serde_json::from_str(&read(path)?).map_err(|e| TaskRepoError::Json {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let Value::Object(tests) = value else {
        return Err(shape(format!(
            "expected an object with {} and {}, got {}",
            TEST_KEYS[0],
            TEST_KEYS[1],
            kind(&value)
        )));
    };
    for key in TEST_KEYS {
        match tests.get(key) {
            None => return Err(shape(format!("has no {key}"))),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
            Some(Value::Array(_)) => {
                return Err(shape(format!("{key} holds something that is not a string")))
            }
            Some(other) => return Err(shape(format!("{key} is {}, not a list", kind(other)))),
        }
    }
    Ok(tests)
}

fn read(path: &Path) -> Result<String, TaskRepoError> {
    // Bytes as they are: CRLF inside a patch must survive (the reference
    // reads with newline="").
    std::fs::read_to_string(path).map_err(|source| TaskRepoError::Read {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(root: &Path, id: &str, tests: &str) -> PathBuf {
        let dir = root.join("tasks").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = format!(
            "instance_id: {id}\nrepo: o/r\nbase_commit: abc\nversion: '1.10'\nsplit: test\ndifficulty: easy\n"
        );
        for (file, text) in [
            ("task.yaml", yaml.as_str()),
            ("tests.json", tests),
            ("gold.patch", "diff --git a/x b/x\r\n"),
            ("test.patch", ""),
            ("eval.sh", "#!/bin/bash\necho hi\n"),
            ("problem_statement.md", "Broken.\n"),
            ("Dockerfile", "FROM scratch\n"),
        ] {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    const TESTS: &str = r#"{"FAIL_TO_PASS": ["a"], "PASS_TO_PASS": []}"#;

    #[test]
    fn reads_every_column_from_its_file() {
        let d = tempfile::tempdir().unwrap();
        task(d.path(), "o__r-2", TESTS);
        let dir = task(d.path(), "o__r-1", TESTS);
        std::fs::write(dir.join("hints.md"), "Try this.").unwrap();
        let ds = load(d.path()).unwrap();
        let ids: Vec<&str> = ds
            .instances
            .iter()
            .map(|i| i.instance_id.as_str())
            .collect();
        assert_eq!(ids, ["o__r-1", "o__r-2"]);
        let i = &ds.instances[0];
        assert_eq!(i.version, "1.10");
        assert_eq!(i.patch, "diff --git a/x b/x\r\n");
        assert_eq!(i.hints_text, "Try this.");
        assert_eq!(ds.instances[1].hints_text, "");
        assert_eq!(i.fail_to_pass, ["a"]);
        assert_eq!(i.extra["eval_script"], "#!/bin/bash\necho hi\n");
        assert_eq!(i.extra["split"], "test");
        assert_eq!(i.extra["difficulty"], "easy");
        assert_eq!(i.extra[DOCKERFILE_FIELD], "FROM scratch\n");
    }

    #[test]
    fn a_split_is_kept_and_an_empty_one_named() {
        let d = tempfile::tempdir().unwrap();
        task(d.path(), "o__r-1", TESTS);
        let dev = task(d.path(), "o__r-2", TESTS);
        let yaml = std::fs::read_to_string(dev.join("task.yaml")).unwrap();
        std::fs::write(
            dev.join("task.yaml"),
            yaml.replace("split: test", "split: dev"),
        )
        .unwrap();
        let mut ds = load(d.path()).unwrap();
        keep_split(&mut ds, d.path(), DEFAULT_SPLIT).unwrap();
        assert_eq!(ds.instances.len(), 1);
        assert_eq!(ds.instances[0].instance_id, "o__r-1");
        let mut ds = load(d.path()).unwrap();
        let e = keep_split(&mut ds, d.path(), "deprecated")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no tasks in split \"deprecated\" (it has: dev test)"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_task_and_file() {
        let d = tempfile::tempdir().unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("no tasks/ directory"), "{e}");
        let dir = task(
            d.path(),
            "o__r-1",
            r#"{"FAIL_TO_PASS": "a", "PASS_TO_PASS": []}"#,
        );
        let e = load(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("o__r-1/tests.json") && e.contains("not a list"),
            "{e}"
        );
        std::fs::write(dir.join("tests.json"), "[1]").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("tests.json: expected an object"), "{e}");
        std::fs::write(dir.join("tests.json"), TESTS).unwrap();
        std::fs::write(dir.join("task.yaml"), "instance_id: [unclosed\n").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("o__r-1/task.yaml: not valid YAML"), "{e}");
        std::fs::remove_file(dir.join("task.yaml")).unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("o__r-1: missing task.yaml"), "{e}");
    }
}
