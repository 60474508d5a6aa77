//! Task instances and predictions: loading SWE-bench-format files.
//!
//! Both accept `.jsonl` and `.json`; errors name the file and line (or list
//! index) so a bad row is found without guessing. Loading is all-or-nothing:
//! the run starts only when every row parses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// An input file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Row {
        path: PathBuf,
        /// 1-based line for `.jsonl`, 1-based list position for `.json`.
        line: usize,
        reason: String,
    },
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("{path}: unsupported extension (expected .jsonl or .json)")]
    Extension { path: PathBuf },
    #[error("{what} not in the dataset: {}", ids.join(", "))]
    UnknownIds {
        what: &'static str,
        ids: Vec<String>,
    },
    #[error(transparent)]
    TaskRepo(#[from] TaskRepoError),
    #[error("{path}:{line}: duplicate instance_id {id} (first at line {first})")]
    Duplicate {
        path: PathBuf,
        line: usize,
        first: usize,
        id: String,
    },
}

/// One SWE-bench task instance. Unknown fields are kept in `extra` so that a
/// dataset round-trips and audits can read dataset-specific fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Instance {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    #[serde(default)]
    pub patch: String,
    #[serde(default)]
    pub test_patch: String,
    #[serde(default)]
    pub problem_statement: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub hints_text: String,
    #[serde(default, deserialize_with = "version_string")]
    pub version: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub environment_setup_commit: String,
    #[serde(rename = "FAIL_TO_PASS", default, deserialize_with = "test_list")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS", default, deserialize_with = "test_list")]
    pub pass_to_pass: Vec<String>,
    /// SWE-fficiency's `covering_tests`: the test files that cover the
    /// changed code. When given, the evaluation runs them instead of the
    /// test patch's files (SWE-fficiency's tasks often have no test patch).
    #[serde(default, deserialize_with = "test_list")]
    pub covering_tests: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub created_at: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Instance {
    /// `owner__name`, the mirror-dir key of this instance's repository.
    pub fn repo_key(&self) -> String {
        self.repo.replace('/', "__")
    }
}

fn null_as_default<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Versions are strings in SWE-bench, but hand-written datasets often say
/// `version: 1.2` as a number; `1.10` as a float would silently become `1.1`,
/// so numbers are refused with a message rather than guessed.
fn version_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s),
        other => Err(serde::de::Error::custom(format!(
            "version must be a string (e.g. \"1.10\"), got {other}"
        ))),
    }
}

/// FAIL_TO_PASS / PASS_TO_PASS: a JSON-encoded list in a string (as shipped by
/// SWE-bench) or a real list.
fn test_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Vec::new()),
        Value::String(s) => serde_json::from_str::<Vec<String>>(&s).map_err(|e| {
            serde::de::Error::custom(format!(
                "test list string is not a JSON list of strings: {e}"
            ))
        }),
        v @ Value::Array(_) => serde_json::from_value(v).map_err(serde::de::Error::custom),
        other => Err(serde::de::Error::custom(format!(
            "expected a list of test ids, got {other}"
        ))),
    }
}

/// A sample id given as a string or a number.
fn id_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(serde::de::Error::custom(format!(
            "sample_id must be a string or a number, got {other}"
        ))),
    }
}

/// A candidate patch for one instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prediction {
    pub instance_id: String,
    pub model_name_or_path: String,
    /// None or "" is an empty patch: not run, counted as empty.
    #[serde(default)]
    pub model_patch: Option<String>,
    /// Several samples per instance are told apart by this (or by position).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "id_string"
    )]
    pub sample_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Prediction {
    /// A prediction made by patchgrade itself (gold runs, base runs).
    pub fn new(instance_id: &str, model: &str, model_patch: Option<String>) -> Prediction {
        Prediction {
            instance_id: instance_id.to_string(),
            model_name_or_path: model.to_string(),
            model_patch,
            sample_id: None,
            extra: Map::new(),
        }
    }

    pub fn is_empty_patch(&self) -> bool {
        self.model_patch
            .as_deref()
            .is_none_or(|p| p.trim().is_empty())
    }

    /// Model name as used in paths: `/` becomes `__`, as in the reference.
    pub fn model_dir(&self) -> String {
        model_dir(&self.model_name_or_path)
    }

    /// What identifies the patch (in records, and to evaluate identical
    /// samples once): the SHA-256 of its text; none for an empty patch.
    pub fn patch_sha256(&self) -> Option<String> {
        self.model_patch
            .as_deref()
            .filter(|p| !p.trim().is_empty())
            .map(sha256_hex)
    }
}

/// SHA-256 of a text, in hex.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

pub fn model_dir(model: &str) -> String {
    model.replace('/', "__")
}

/// Rows of a `.jsonl` or `.json` file (a list, or an object whose values
/// are the rows) with their 1-based positions.
pub fn read_rows(path: &Path) -> Result<Vec<(usize, Value)>, InputError> {
    let mut rows = Vec::new();
    for_each_row(path, |line, v| {
        rows.push((line, v));
        Ok(())
    })?;
    Ok(rows)
}

/// Each row of a `.jsonl` or `.json` file with its 1-based position, one at
/// a time: a `.jsonl` file's rows are never all held as JSON values at once
/// (prediction files of 100,000 rows).
pub fn for_each_row(
    path: &Path,
    mut each: impl FnMut(usize, Value) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    // JSON is UTF-8: bytes that are not are an error at their line (a patch
    // in another encoding), not a failure to read the whole file.
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        InputError::Row {
            path: path.to_owned(),
            line: before.iter().filter(|b| **b == b'\n').count() + 1,
            reason: format!(
                "invalid UTF-8 at byte {} of the line (JSON text must be UTF-8)",
                at - line_start + 1
            ),
        }
    })?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "jsonl" => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(line).map_err(|e| InputError::Row {
                    path: path.to_owned(),
                    line: i + 1,
                    reason: format!("invalid JSON: {e}"),
                })?;
                each(i + 1, v)?;
            }
            Ok(())
        }
        "json" => {
            let v: Value = serde_json::from_str(&text).map_err(|e| InputError::Row {
                path: path.to_owned(),
                line: e.line(),
                reason: format!("invalid JSON: {e}"),
            })?;
            match v {
                Value::Array(items) => items
                    .into_iter()
                    .enumerate()
                    .try_for_each(|(i, v)| each(i + 1, v)),
                // The SWE-agent `preds.json` shape: only the values are used.
                Value::Object(map) => map
                    .into_iter()
                    .enumerate()
                    .try_for_each(|(i, (_, v))| each(i + 1, v)),
                _ => Err(InputError::File {
                    path: path.to_owned(),
                    reason: "expected a JSON list or object of rows".into(),
                }),
            }
        }
        _ => Err(InputError::Extension {
            path: path.to_owned(),
        }),
    }
}

fn from_row<T: for<'de> Deserialize<'de>>(
    path: &Path,
    line: usize,
    v: Value,
) -> Result<T, InputError> {
    if !v.is_object() {
        return Err(InputError::Row {
            path: path.to_owned(),
            line,
            reason: "row is not a JSON object".into(),
        });
    }
    serde_json::from_value(v).map_err(|e| InputError::Row {
        path: path.to_owned(),
        line,
        reason: e.to_string(),
    })
}

/// The folder of a task repository that holds one directory per task.
pub const TASKS_SUBDIR: &str = "tasks";

/// A task repository (`crate::task_repo`), or one of its task directories,
/// could not be read. Here, beside the other input errors it is one of,
/// so the dataset needs nothing of `task_repo`.
#[derive(Debug, thiserror::Error)]
pub enum TaskRepoError {
    #[error("{path}: not a task repository (no {TASKS_SUBDIR}/ directory)")]
    NoTasks { path: PathBuf },
    #[error("{path}: no task directories under {TASKS_SUBDIR}/")]
    Empty { path: PathBuf },
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{dir}: missing {file}")]
    Missing { dir: PathBuf, file: &'static str },
    #[error("{path}: not valid YAML: {reason}")]
    Yaml { path: PathBuf, reason: String },
    #[error("{path}: not valid JSON: {reason}")]
    Json { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Shape { path: PathBuf, reason: String },
    #[error("{dir}: {reason}")]
    Instance { dir: PathBuf, reason: String },
    #[error("{path}: no tasks in split {split:?} (it has: {})", if available.is_empty() { "none".to_string() } else { available.join(" ") })]
    NoSplit {
        path: PathBuf,
        split: String,
        available: Vec<String>,
    },
    #[error("{dir}: duplicate instance_id {id} (also {first})")]
    Duplicate {
        dir: PathBuf,
        first: PathBuf,
        id: String,
    },
}

/// A loaded dataset, in file order.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    pub instances: Vec<Instance>,
}

impl Dataset {
    // `Dataset::open` (a file or a task repository) is in `task_repo`.

    /// A dataset file (`.jsonl`, `.json`).
    pub fn load(path: &Path) -> Result<Dataset, InputError> {
        let mut instances: Vec<Instance> = Vec::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (line, v) in read_rows(path)? {
            let inst: Instance = from_row(path, line, v)?;
            for (field, value) in [
                ("instance_id", &inst.instance_id),
                ("repo", &inst.repo),
                ("base_commit", &inst.base_commit),
            ] {
                if value.trim().is_empty() {
                    return Err(InputError::Row {
                        path: path.to_owned(),
                        line,
                        reason: format!("{field} is empty"),
                    });
                }
            }
            if !inst.repo.contains('/') {
                return Err(InputError::Row {
                    path: path.to_owned(),
                    line,
                    reason: format!("repo {:?} is not of the form owner/name", inst.repo),
                });
            }
            if let Some(first) = seen.insert(inst.instance_id.clone(), line) {
                return Err(InputError::Duplicate {
                    path: path.to_owned(),
                    line,
                    first,
                    id: inst.instance_id,
                });
            }
            instances.push(inst);
        }
        Ok(Dataset { instances })
    }

    pub fn get(&self, id: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.instance_id == id)
    }

    /// Keep only `ids` (in dataset order); unknown ids are an error naming them.
    pub fn filter(&mut self, ids: &[String]) -> Result<(), InputError> {
        if ids.is_empty() {
            return Ok(());
        }
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let have: BTreeSet<&str> = self
            .instances
            .iter()
            .map(|i| i.instance_id.as_str())
            .collect();
        let unknown: Vec<String> = wanted.difference(&have).map(|s| s.to_string()).collect();
        if !unknown.is_empty() {
            return Err(InputError::UnknownIds {
                what: "--instance-ids",
                ids: unknown,
            });
        }
        self.instances
            .retain(|i| wanted.contains(i.instance_id.as_str()));
        Ok(())
    }
}

/// The pseudo-prediction source name for the dataset's own patches.
pub const GOLD: &str = "gold";

/// Load predictions from files (or `gold`), each row validated; several rows
/// for one instance are several samples.
pub fn load_predictions(
    sources: &[PathBuf],
    dataset: &Dataset,
) -> Result<Vec<Prediction>, InputError> {
    let mut preds = Vec::new();
    for src in sources {
        if src.as_os_str() == GOLD && !src.exists() {
            preds.extend(dataset.instances.iter().map(|i| Prediction {
                instance_id: i.instance_id.clone(),
                model_name_or_path: GOLD.into(),
                model_patch: Some(i.patch.clone()),
                sample_id: None,
                extra: Map::new(),
            }));
            continue;
        }
        for_each_row(src, |line, v| {
            let p: Prediction = from_row(src, line, v)?;
            if p.instance_id.trim().is_empty() {
                return Err(InputError::Row {
                    path: src.clone(),
                    line,
                    reason: "instance_id is empty".into(),
                });
            }
            if p.model_name_or_path.trim().is_empty() {
                return Err(InputError::Row {
                    path: src.clone(),
                    line,
                    reason: "model_name_or_path is empty (report paths are named by it)".into(),
                });
            }
            preds.push(p);
            Ok(())
        })?;
    }
    let ids: BTreeSet<&str> = dataset
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    let unknown: BTreeSet<String> = preds
        .iter()
        .filter(|p| !ids.contains(p.instance_id.as_str()))
        .map(|p| p.instance_id.clone())
        .collect();
    if !unknown.is_empty() {
        return Err(InputError::UnknownIds {
            what: "predictions",
            ids: unknown.into_iter().collect(),
        });
    }
    Ok(preds)
}

/// What a JSON value is, for messages about a field of the wrong shape.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    const ROW: &str = r#"{"instance_id":"o__r-1","repo":"o/r","base_commit":"abc","patch":"","test_patch":"","version":"1.0","FAIL_TO_PASS":"[\"t::a\"]","PASS_TO_PASS":["t::b"],"difficulty":"easy"}"#;

    #[test]
    fn loads_string_and_list_test_fields_and_keeps_extras() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "ds.jsonl", &format!("{ROW}\n\n"));
        let ds = Dataset::load(&p).unwrap();
        let i = &ds.instances[0];
        assert_eq!(i.fail_to_pass, vec!["t::a"]);
        assert_eq!(i.pass_to_pass, vec!["t::b"]);
        assert_eq!(i.extra["difficulty"], "easy");
    }

    #[test]
    fn swe_fficiency_covering_tests_as_list_or_json_string() {
        let d = tempfile::tempdir().unwrap();
        let list = ROW.replace("}", r#","covering_tests":["a/tests/test_x.py"]}"#);
        let text = ROW.replace("}", r#","covering_tests":"[\"b/tests/test_y.py\"]"}"#);
        let bad = ROW.replace("}", r#","covering_tests":3}"#);
        let p = write(&d, "ds.jsonl", &format!("{list}\n"));
        let ds = Dataset::load(&p).unwrap();
        assert_eq!(ds.instances[0].covering_tests, vec!["a/tests/test_x.py"]);
        assert!(!ds.instances[0].extra.contains_key("covering_tests"));
        let p = write(&d, "ds.jsonl", &format!("{text}\n"));
        let ds = Dataset::load(&p).unwrap();
        assert_eq!(ds.instances[0].covering_tests, vec!["b/tests/test_y.py"]);
        // Absent: empty, and the test patch's files are used.
        let p = write(&d, "ds.jsonl", &format!("{ROW}\n"));
        assert!(Dataset::load(&p).unwrap().instances[0]
            .covering_tests
            .is_empty());
        let p = write(&d, "ds.jsonl", &format!("{ROW}\n{bad}\n"));
        let e = Dataset::load(&p).unwrap_err().to_string();
        assert!(e.contains("ds.jsonl:2:") && e.contains("test ids"), "{e}");
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "ds.jsonl", &format!("{ROW}\n{{not json\n"));
        let e = Dataset::load(&p).unwrap_err().to_string();
        assert!(e.contains("ds.jsonl:2: invalid JSON"), "{e}");
    }

    #[test]
    fn missing_field_names_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "ds.jsonl", "{\"instance_id\":\"x\",\"repo\":\"o/r\"}\n");
        let e = Dataset::load(&p).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("base_commit"), "{e}");
    }

    #[test]
    fn numeric_version_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "ds.jsonl", &ROW.replace("\"1.0\"", "1.10"));
        let e = Dataset::load(&p).unwrap_err().to_string();
        assert!(e.contains("version must be a string"), "{e}");
    }

    #[test]
    fn predictions_in_all_three_shapes_and_unknown_ids() {
        let d = tempfile::tempdir().unwrap();
        let ds = Dataset::load(&write(&d, "ds.jsonl", ROW)).unwrap();
        let pred = r#"{"instance_id":"o__r-1","model_name_or_path":"m/x","model_patch":null}"#;
        let a = write(&d, "a.jsonl", pred);
        let b = write(&d, "b.json", &format!("[{pred}]"));
        let c = write(&d, "c.json", &format!("{{\"o__r-1\": {pred}}}"));
        let all = load_predictions(&[a, b, c], &ds).unwrap();
        assert_eq!(all.len(), 3);
        assert!(all
            .iter()
            .all(|p| p.is_empty_patch() && p.model_dir() == "m__x"));
        let bad = write(&d, "bad.jsonl", &pred.replace("o__r-1", "nope-2"));
        let e = load_predictions(&[bad], &ds).unwrap_err().to_string();
        assert!(e.contains("nope-2"), "{e}");
    }

    #[test]
    fn gold_uses_dataset_patches() {
        let d = tempfile::tempdir().unwrap();
        let ds = Dataset::load(&write(
            &d,
            "ds.jsonl",
            &ROW.replace("\"patch\":\"\"", "\"patch\":\"diff\""),
        ))
        .unwrap();
        let preds = load_predictions(&[PathBuf::from("gold")], &ds).unwrap();
        assert_eq!(preds[0].model_patch.as_deref(), Some("diff"));
        assert_eq!(preds[0].model_name_or_path, "gold");
    }

    /// Rows of SWE-bench Lite as published (test and dev splits; the
    /// upstream code and issue texts replaced by notes, see the fixture).
    #[test]
    fn real_swebench_lite_rows_load() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-lite/rows.jsonl");
        let ds = Dataset::load(&path).unwrap();
        let ids: Vec<&str> = ds
            .instances
            .iter()
            .map(|i| i.instance_id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "django__django-15202",
                "sympy__sympy-12171",
                "sqlfluff__sqlfluff-1625"
            ]
        );
        let django = &ds.instances[0];
        assert_eq!(django.fail_to_pass.len(), 2);
        assert!(django.fail_to_pass[0].starts_with("test_urlfield_clean_invalid ("));
        assert!(!django.pass_to_pass.is_empty());
        assert_eq!(django.version, "4.1");
        assert!(ds.instances.iter().all(|i| !i.fail_to_pass.is_empty()
            && !i.environment_setup_commit.is_empty()
            && !i.created_at.is_empty()));
    }
}
