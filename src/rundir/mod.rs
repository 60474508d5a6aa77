//! The run folder, and its one reader and writer.
//!
//! Layout: `<log_root>/<run_id>/run.json` (what the run was) and one folder
//! per evaluation, `<log_root>/<run_id>/<model>/<instance_id>[@<sample>]`
//! (the reference's layout for single samples), holding the patch, the eval
//! script, the test log, `report.json` (reference schema) and
//! `patchgrade.json` (the [`EvalRecord`], written last: its presence marks
//! the evaluation as finished). Everything is read and written typed.

pub mod atomic;
pub mod eval_dir;
pub mod serve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::model_dir;
use crate::key::EvalName;
use crate::record::EvalRecord;
use crate::rundir::eval_dir::EvalDir;
use crate::script::dataset::ScriptSource;
use crate::settings::{BackendKind, CacheLevel};

/// A run folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Record {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("no evaluations (<model>/<instance>/patchgrade.json) found under {0}; a run folder is <log_dir>/<run_id>")]
    Empty(PathBuf),
    /// Another live process holds the run folder's lock.
    #[error("{path} is in use by another patchgrade process{}; wait for it to end or choose another --run-id", holder.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Locked { path: PathBuf, holder: Option<u32> },
}

/// The run folder's lock (`<run_dir>/.lock`, flock), held for the life of
/// the process that runs evaluations in it: two processes on one run id
/// would evaluate the same instances twice and overwrite each other's
/// files. The kernel releases it when the process dies, even by `kill -9`,
/// so whoever holds it knows that every earlier user of the folder is gone.
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

/// `run.json`: what a run was, for commands that read finished runs, and
/// the setup that evaluates it again (`audit --rerun`, `select`, `validate`
/// reuse it). Fields after `created_at` are optional: 0.1.0 wrote none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub patchgrade_version: String,
    /// The dataset path as given to the run.
    pub dataset: String,
    pub created_at: u64,
    /// sha256 of the dataset file's bytes when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<RunSetup>,
    /// The Python interpreters the run's images got (Docker), written when
    /// the run ends: they are resolved as evaluations need them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pythons: Vec<crate::python::InterpreterRecord>,
    /// The toolchains the run's images got (Docker; a spec's
    /// `toolchains:`), written when the run ends, as `pythons` is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<crate::toolchain::ToolchainRecord>,
    /// Which node ran each evaluation (backends that spread them over
    /// machines: swarm), keyed `<model>/<instance>[@<sample>]`; kept across
    /// the segments of a resumed run, written when each segment ends.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, String>,
    /// A task repository's run (`--task-repo`): where its images came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_images: Option<TaskImages>,
}

/// Where the images of a task repository's instances came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskImages {
    /// patchgrade's spec for the repository built them; the tasks'
    /// Dockerfiles were not built (they start from the reference's images,
    /// on a registry not reachable offline).
    Spec,
}

/// Where a run's tests came from and how they ran: everything, besides the
/// dataset, needed to evaluate the same way again. Paths are absolute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSetup {
    /// `--specs` files or folders.
    #[serde(default)]
    pub specs: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_url_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
    /// The backend that ran the tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// Local backend: bubblewrap was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Per-evaluation time limit, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// `--eval-script dataset`: the tests ran each instance's own
    /// `eval_script` (absent: the spec's script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_script: Option<ScriptSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSetup>,
}

/// The Docker options of a run, as given (defaults resolved).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DockerSetup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub instance_image_tag: String,
    pub base_image: String,
    /// `--ca-cert` as given (None: the default lookup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<String>,
    /// None: not given, the cache budget decides (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_level: Option<CacheLevel>,
    /// `--cache-budget` as given (None: the default rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_budget: Option<String>,
    /// `--shelve`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shelve: bool,
    /// `--python-dir` entries (`X.Y=PREFIX`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python_dirs: Vec<String>,
    pub memory: String,
    pub cpus: f64,
    pub pids_limit: i64,
    pub build_timeout_secs: u64,
}

impl RunMeta {
    pub fn new(run_id: &str, dataset: &Path) -> RunMeta {
        RunMeta {
            run_id: run_id.to_string(),
            patchgrade_version: crate::VERSION.into(),
            dataset: dataset.display().to_string(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            dataset_sha256: file_sha256(dataset),
            setup: None,
            pythons: Vec::new(),
            toolchains: Vec::new(),
            nodes: BTreeMap::new(),
            task_images: crate::task_repo::is_task_repo(dataset).then_some(TaskImages::Spec),
        }
    }

    /// The dataset path it names, if any.
    pub fn dataset_path(&self) -> Option<PathBuf> {
        (!self.dataset.is_empty()).then(|| PathBuf::from(&self.dataset))
    }
}

/// sha256 (hex) of a file's bytes; None when it cannot be read.
pub fn file_sha256(path: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).ok()?;
    Some(format!("{:x}", Sha256::digest(&bytes)))
}

/// One finished evaluation of a run folder.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub dir: EvalDir,
    pub record: EvalRecord,
}

/// A run folder: `<log_root>/<run_id>`.
#[derive(Debug, Clone)]
pub struct RunDir {
    log_root: PathBuf,
    run_id: String,
}

impl RunDir {
    pub fn new(log_root: &Path, run_id: &str) -> RunDir {
        RunDir {
            log_root: log_root.to_owned(),
            run_id: run_id.to_string(),
        }
    }

    /// An existing run folder given by its path.
    pub fn at(path: &Path) -> RunDir {
        RunDir {
            log_root: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            run_id: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "run".into()),
        }
    }

    /// Another run beside this one (`<run_id>.audit`, `<run_id>.select`).
    pub fn sibling(&self, run_id: &str) -> RunDir {
        RunDir::new(&self.log_root, run_id)
    }

    pub fn path(&self) -> PathBuf {
        self.log_root.join(&self.run_id)
    }

    /// Where `audit --rerun` evaluates the dynamic checks: `<run_id>.audit`
    /// beside this run.
    pub fn audit_run(&self) -> RunDir {
        self.sibling(&format!("{}.audit", self.run_id))
    }

    /// The run id of `select`'s evaluations when none is given:
    /// `<run_id>.select`.
    pub fn select_run_id(&self) -> String {
        format!("{}.select", self.run_id)
    }

    /// `select`'s chosen predictions when no `--output` is given:
    /// `<run_id>.selected.jsonl` (in the working folder).
    pub fn selected_predictions_name(&self) -> PathBuf {
        PathBuf::from(format!("{}.selected.jsonl", self.run_id))
    }

    /// The run id perf's measuring containers are labelled with:
    /// `<run_id>-perf` (apart from the grading run's own containers).
    pub fn perf_run_id(&self) -> String {
        format!("{}-perf", self.run_id)
    }

    /// The validation report's file name: `validate.<run_id>.json`.
    pub fn validate_report_name(&self) -> PathBuf {
        PathBuf::from(format!("validate.{}.json", self.run_id))
    }

    /// A model's run summary, as the reference names it:
    /// `<model>.<run_id>.json`, `/` in the model as `__`.
    pub fn summary_name(&self, model: &str) -> PathBuf {
        PathBuf::from(format!("{}.{}.json", model_dir(model), self.run_id))
    }

    /// An evaluation container's name: `<image>.<run_id>.<pid>-<n>`, the run
    /// id as Docker names allow it (other characters as `-`).
    pub fn container_name(&self, image: &str, pid: u32, n: u64) -> String {
        let run: String = self
            .run_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("{image}.{run}.{pid}-{n}")
    }

    pub fn log_root(&self) -> &Path {
        &self.log_root
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(self.path())
    }

    /// Take the run folder's lock (creating the folder), or say who holds it.
    pub fn lock(&self) -> Result<RunLock, RunDirError> {
        use std::io::{Read, Seek, Write};
        let path = self.path().join(".lock");
        let io = |source| RunDirError::Io {
            path: path.clone(),
            source,
        };
        self.create().map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(io(e));
            }
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(RunDirError::Locked {
                path: self.path(),
                holder: text.trim().parse().ok(),
            });
        }
        // The holder's pid, for the message the next one gets.
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(io)?;
        Ok(RunLock { _file: file })
    }

    /// The folder of one evaluation: `<model>/<instance_id>[@<sample>]`,
    /// `/` in model names as `__` (as the reference names them).
    pub fn eval_dir(&self, model: &str, instance_id: &str, sample: Option<&str>) -> EvalDir {
        let leaf = EvalName::new(instance_id, sample).to_string();
        EvalDir::new(self.path().join(model_dir(model)).join(leaf))
    }

    pub fn write_meta(&self, meta: &RunMeta) -> std::io::Result<()> {
        atomic::write_json_atomic(&self.path().join("run.json"), meta)
    }

    /// Whether `run.json` is there (readable or not).
    pub fn has_meta(&self) -> bool {
        self.path().join("run.json").exists()
    }

    /// `run.json`, if it is there and readable.
    pub fn meta(&self) -> Option<RunMeta> {
        let text = std::fs::read_to_string(self.path().join("run.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The run id `run.json` gives, else the folder's name.
    pub fn recorded_run_id(&self) -> String {
        self.meta()
            .map(|m| m.run_id)
            .unwrap_or_else(|| self.run_id.clone())
    }

    /// Every finished evaluation, by model folder then leaf, sorted by path;
    /// an error names the record that cannot be read. None at all is an
    /// error too: the path is not a run folder.
    pub fn evaluations(&self) -> Result<Vec<Evaluation>, RunDirError> {
        let root = self.path();
        let mut out = Vec::new();
        for model in sorted_dirs(&root)? {
            for leaf in sorted_dirs(&model)? {
                let dir = EvalDir::new(leaf);
                if let Some(record) = dir.record()? {
                    out.push(Evaluation { dir, record });
                }
            }
        }
        if out.is_empty() {
            return Err(RunDirError::Empty(root));
        }
        Ok(out)
    }
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>, RunDirError> {
    let rd = std::fs::read_dir(dir).map_err(|source| RunDirError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_json_of_0_1_0_reads_and_the_setup_round_trips() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rundir-0.1.0");
        let old = RunDir::at(&root.join("run_evaluation/demo"))
            .meta()
            .unwrap();
        assert_eq!(old.run_id, "demo");
        assert!(old.dataset_sha256.is_none() && old.setup.is_none());

        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("data.jsonl"), "{}\n").unwrap();
        let mut meta = RunMeta::new("r", &d.path().join("data.jsonl"));
        assert_eq!(
            meta.dataset_sha256.as_deref(),
            Some("ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356")
        );
        meta.setup = Some(RunSetup {
            specs: vec![PathBuf::from("/s")],
            mirror_dir: Some(PathBuf::from("/m")),
            backend: Some(BackendKind::Docker),
            docker: Some(DockerSetup {
                memory: "2g".into(),
                pids_limit: 64,
                ..DockerSetup::default()
            }),
            ..RunSetup::default()
        });
        let rundir = RunDir::new(d.path(), "r");
        rundir.create().unwrap();
        rundir.write_meta(&meta).unwrap();
        let back = rundir.meta().unwrap();
        assert_eq!(back.setup, meta.setup);
        assert_eq!(back.dataset_sha256, meta.dataset_sha256);
    }

    #[test]
    fn names_derived_from_the_run_id() {
        let run = RunDir::new(Path::new("logs/run_evaluation"), "r1");
        assert_eq!(
            run.audit_run().path(),
            Path::new("logs/run_evaluation/r1.audit")
        );
        assert_eq!(run.select_run_id(), "r1.select");
        assert_eq!(
            run.selected_predictions_name(),
            Path::new("r1.selected.jsonl")
        );
        assert_eq!(run.perf_run_id(), "r1-perf");
        assert_eq!(run.validate_report_name(), Path::new("validate.r1.json"));
        assert_eq!(
            run.summary_name("org/model"),
            Path::new("org__model.r1.json")
        );
        let odd = RunDir::new(Path::new("logs"), "a b/c");
        assert_eq!(
            odd.container_name("sweb.eval.x", 7, 2),
            "sweb.eval.x.a-b-c.7-2"
        );
    }

    #[test]
    fn settings_keep_their_run_json_spelling() {
        // As the string-typed setup wrote them before the settings were typed.
        let text = r#"{"backend":"swarm","docker":{"instance_image_tag":"latest",
            "base_image":"debian:{suite}-slim","cache_level":"instance","memory":"4g",
            "cpus":2.0,"pids_limit":1024,"build_timeout_secs":3600}}"#;
        let setup: RunSetup = serde_json::from_str(text).unwrap();
        assert_eq!(setup.backend, Some(BackendKind::Swarm));
        let docker = setup.docker.as_ref().unwrap();
        assert_eq!(docker.cache_level, Some(CacheLevel::Instance));
        let back = serde_json::to_value(&setup).unwrap();
        assert_eq!(back["backend"], "swarm");
        assert_eq!(back["docker"]["cache_level"], "instance");
    }
}
