//! One container per instance holding every variant: orchestration of a perf
//! measurement on the Docker engine.
//!
//! The instance image has the base tree, environment installed, at
//! `/testbed`. One archive goes in before the container starts: the timing
//! driver, its plan, the workload's scripts, and each variant's changed
//! files. The container's command (`/perf/run.sh`) moves `/testbed` aside,
//! copies it once per variant to `/perf/trees/<name>`, applies that variant's
//! files and deletions, makes `/testbed` a symlink to base's tree for the
//! setup lines, activates the environment, and execs the driver, which
//! renames each variant's tree to `/testbed` for its runs (installs that
//! refer to `/testbed` load the variant's code; the code sees a plain
//! folder) and runs the builds, warm-ups and interleaved rounds with the
//! integrity defences (harness-scripts/perf/defences.py).
//! Setup output goes to stderr, the driver's JSON lines to stdout.
//! The container is removed on every path (the end, an error, a timeout, a
//! dropped future): it is run through [`crate::backend::docker::engine`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::Docker;
use serde_json::json;

use super::record::{parse_driver_output, DriverOutput, RecordError};
use super::workload::{Workload, WorkloadItem};
use crate::backend::docker::engine::{self, ApiError, ContainerSpec, RunFailure, RunPlan};
use crate::backend::docker::images::TESTBED;
use crate::script::quote;

/// The driver and its defences, embedded so the binary needs nothing
/// beside it.
pub const DRIVER: &str = include_str!("../../harness-scripts/perf/driver.py");
pub const DEFENCES: &str = include_str!("../../harness-scripts/perf/defences.py");

/// Shared places swept for files a run leaves (`~`: the container's home),
/// besides the tree (perf::integrity).
const SWEEP_ROOTS: [&str; 4] = ["/tmp", "/var/tmp", "/dev/shm", "~"];

/// A perf measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("variant name {0:?}: use letters, digits, '.', '_' and '-' only")]
    BadName(String),
    #[error("variant names must be unique: {0:?} appears twice")]
    DuplicateName(String),
    #[error("no variants to measure")]
    NoVariants,
    #[error("failed to list the changes of {path}: {reason}")]
    Changes { path: String, reason: String },
    #[error("failed to build the archive: {0}")]
    Archive(#[from] std::io::Error),
    #[error(transparent)]
    Engine(#[from] ApiError),
    #[error("the measurement did not finish within {0:?}")]
    Timeout(Duration),
    #[error("the perf container exited with {code:?}: {stderr_tail}")]
    Failed {
        code: Option<i64>,
        stderr_tail: String,
    },
    #[error(transparent)]
    Output(#[from] RecordError),
}

/// One changed file of a variant, relative to the tree's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileData {
    File { bytes: Vec<u8>, executable: bool },
    Symlink { target: String },
}

/// What a variant changes in the base tree: files to write, paths to delete
/// (what the Docker backend sends for an evaluation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VariantFiles {
    /// Unique, `[A-Za-z0-9._-]+`; the driver's variant name.
    pub name: String,
    pub files: Vec<(String, FileData)>,
    pub delete: Vec<String>,
}

/// The changes of the git checkout `tree` against its HEAD (the base
/// commit), as the Docker backend finds them: the variant's patch (and the
/// test patch, when the workload needs it) applied by the caller.
pub fn variant_files(name: &str, tree: &Path) -> Result<VariantFiles, ContainerError> {
    let fail = |reason: String| ContainerError::Changes {
        path: tree.display().to_string(),
        reason,
    };
    let changes = crate::backend::docker::archive::candidate_changes(tree)
        .map_err(|e| fail(e.to_string()))?;
    let mut files = Vec::new();
    for rel in &changes.upload {
        let full = tree.join(rel);
        let meta = full.symlink_metadata().map_err(|e| fail(e.to_string()))?;
        let data = if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&full).map_err(|e| fail(e.to_string()))?;
            FileData::Symlink {
                target: t.to_string_lossy().into_owned(),
            }
        } else if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            FileData::File {
                bytes: std::fs::read(&full).map_err(|e| fail(e.to_string()))?,
                executable: meta.permissions().mode() & 0o111 != 0,
            }
        } else {
            continue;
        };
        files.push((rel.to_string_lossy().into_owned(), data));
    }
    Ok(VariantFiles {
        name: name.to_string(),
        files,
        delete: changes
            .delete
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    })
}

/// How to measure.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    pub repeat: usize,
    pub warmup: usize,
    /// Seed of the per-round shuffle of the variants.
    pub seed: u64,
    /// CPUs the container may use (`--cpuset-cpus`, e.g. `"1"`); one CPU
    /// keeps runs from competing with each other's threads.
    pub cpuset: Option<String>,
    pub memory_bytes: i64,
    pub pids_limit: i64,
    /// Network for the workload (default: none).
    pub network: bool,
    /// Environment of every run (the spec's `env`).
    pub env: BTreeMap<String, String>,
    /// Shell lines run once before the driver, in `/testbed`: activating the
    /// environment, the spec's `eval_commands`.
    pub setup: Vec<String>,
    /// Shell line run in each variant's tree before any timing (the spec's
    /// `eval_install`; a failed build takes that variant out).
    pub build: Option<String>,
    /// Limit on one timed process.
    pub run_timeout: Duration,
    /// Limit on the whole measurement.
    pub timeout: Duration,
    /// Count instructions where `perf stat` works in the container.
    pub instructions: bool,
    /// Python workloads' `timeit` read the process's CPU time instead of
    /// the wall clock (the driver's `own_timer`), so their own figure
    /// ([`super::Metric::Reported`]) does not count time other processes
    /// held the CPU.
    pub cpu_own_timer: bool,
    /// Labels the container (`patchgrade.run_id`) and prefixes its name.
    pub run_id: String,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        Self {
            repeat: 10,
            warmup: 1,
            seed: 1,
            cpuset: None,
            memory_bytes: 4 << 30,
            pids_limit: 1024,
            network: false,
            env: BTreeMap::new(),
            setup: Vec::new(),
            build: None,
            run_timeout: Duration::from_secs(600),
            timeout: Duration::from_secs(3600),
            instructions: false,
            cpu_own_timer: false,
            run_id: "perf".into(),
        }
    }
}

// (Also `commands::perf::Measured`, the command's view of a whole run.)
/// What the container produced.
#[derive(Debug, Clone)]
pub struct Measured {
    pub output: DriverOutput,
    /// The driver's stdout, as printed (for the run folder).
    pub driver_stdout: String,
    /// Setup output and anything else on stderr.
    pub stderr: String,
    /// Create to removal.
    pub elapsed: Duration,
}

impl Measured {
    /// Everything but the timed processes and the builds (creating the
    /// container, copying trees, starting the driver, fork/exec/wait,
    /// removal), spread over every run and warm-up: the measurement's
    /// overhead per variant and repetition.
    pub fn overhead_per_run(&self) -> Option<f64> {
        let o = &self.output;
        let n = o.runs.len() + o.warmups.len();
        if n == 0 {
            return None;
        }
        let timed: f64 = o
            .runs
            .iter()
            .chain(&o.warmups)
            .map(|r| r.wall_s)
            .sum::<f64>()
            + o.builds.iter().map(|b| b.wall_s).sum::<f64>();
        Some((self.elapsed.as_secs_f64() - timed).max(0.0) / n as f64)
    }
}

fn check_names(variants: &[VariantFiles]) -> Result<(), ContainerError> {
    if variants.is_empty() {
        return Err(ContainerError::NoVariants);
    }
    let mut seen = std::collections::BTreeSet::new();
    for v in variants {
        let ok = !v.name.is_empty()
            && v.name != "."
            && v.name != ".."
            && v.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !ok {
            return Err(ContainerError::BadName(v.name.clone()));
        }
        if !seen.insert(v.name.as_str()) {
            return Err(ContainerError::DuplicateName(v.name.clone()));
        }
    }
    Ok(())
}

/// The driver's plan (see harness-scripts/perf/driver.py).
pub fn plan(variants: &[VariantFiles], workload: &Workload, opts: &MeasureOptions) -> String {
    let vs: Vec<_> = variants
        .iter()
        .map(|v| json!({"name": v.name, "dir": format!("/perf/trees/{}", v.name)}))
        .collect();
    let items: Vec<_> = workload
        .items
        .iter()
        .map(|i| json!({"name": i.name(), "argv": i.argv("/perf/w")}))
        .collect();
    let build = opts.build.as_ref().map(|b| vec!["bash", "-c", b.as_str()]);
    json!({
        "variants": vs,
        // Renamed in, not linked: a symlink to /perf/trees/<name> named the
        // variant to its code.
        "swap": TESTBED,
        "integrity": {
            "clean_state": true,
            "sweep_roots": SWEEP_ROOTS,
            "final_sweep": true,
            "reap": true,
        },
        "workload": items,
        "build": build,
        "repeat": opts.repeat,
        "warmup": opts.warmup,
        "seed": opts.seed,
        "timeout": opts.run_timeout.as_secs_f64(),
        "env": opts.env,
        "log_dir": "/perf/logs",
        "instructions": opts.instructions,
        "own_timer": if opts.cpu_own_timer { "cpu" } else { "wall" },
    })
    .to_string()
}

/// The container's command: trees, then the driver.
fn run_script(variants: &[VariantFiles], opts: &MeasureOptions) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# patchgrade perf: one tree per variant, then the timing driver.\n\
         set -eo pipefail\nexec 3>&1 1>&2\n\
         mkdir -p /perf/trees /perf/logs\nmv /testbed /perf/pristine\n",
    );
    for v in variants {
        let tree = format!("/perf/trees/{}", v.name);
        s.push_str(&format!("cp -a --reflink=auto /perf/pristine {tree}\n"));
        if !v.files.is_empty() {
            s.push_str(&format!("cp -a /perf/changes/{}/. {tree}/\n", v.name));
        }
        if !v.delete.is_empty() {
            let d: Vec<String> = v.delete.iter().map(|p| quote(p)).collect();
            s.push_str(&format!("(cd {tree} && rm -f -- {})\n", d.join(" ")));
        }
    }
    s.push_str(&format!(
        "rm -rf /perf/pristine\nln -s /perf/trees/{} {TESTBED}\ncd {TESTBED}\n",
        variants[0].name
    ));
    for line in &opts.setup {
        s.push_str(line);
        s.push('\n');
    }
    // The watchdog kills the driver if patchgrade is gone and nobody removes
    // the container.
    let watchdog = opts.timeout.as_secs() + 60;
    s.push_str(&format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL {watchdog} python3 /perf/driver.py /perf/plan.json 1>&3; fi\n\
         exec python3 /perf/driver.py /perf/plan.json 1>&3\n"
    ));
    s
}

fn append_file(
    b: &mut tar::Builder<Vec<u8>>,
    path: &str,
    data: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    h.set_mtime(0);
    b.append_data(&mut h, path, data)
}

/// The one archive uploaded at `/`.
fn archive(
    variants: &[VariantFiles],
    workload: &Workload,
    opts: &MeasureOptions,
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    append_file(&mut b, "perf/driver.py", DRIVER.as_bytes(), 0o644)?;
    append_file(&mut b, "perf/defences.py", DEFENCES.as_bytes(), 0o644)?;
    append_file(
        &mut b,
        "perf/plan.json",
        plan(variants, workload, opts).as_bytes(),
        0o644,
    )?;
    append_file(
        &mut b,
        "perf/run.sh",
        run_script(variants, opts).as_bytes(),
        0o755,
    )?;
    for item in &workload.items {
        if let WorkloadItem::Script {
            file_name, body, ..
        } = item
        {
            append_file(
                &mut b,
                &format!("perf/w/{file_name}"),
                body.as_bytes(),
                0o755,
            )?;
        }
    }
    for v in variants {
        for (rel, data) in &v.files {
            let dest = format!("perf/changes/{}/{rel}", v.name);
            match data {
                FileData::File { bytes, executable } => append_file(
                    &mut b,
                    &dest,
                    bytes,
                    if *executable { 0o755 } else { 0o644 },
                )?,
                FileData::Symlink { target } => {
                    let mut h = tar::Header::new_gnu();
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.set_mode(0o777);
                    h.set_mtime(0);
                    b.append_link(&mut h, &dest, target)?;
                }
            }
        }
    }
    b.into_inner()
}

fn tail(s: &str, n: usize) -> String {
    let start = s.len().saturating_sub(n);
    let start = (start..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

/// Measures `variants` (the first is the one `/testbed` points at when the
/// setup lines run; put base first) of one instance in one container of
/// `image`, and reads the driver's output.
pub async fn measure(
    docker: &Docker,
    image: &str,
    variants: &[VariantFiles],
    workload: &Workload,
    opts: &MeasureOptions,
) -> Result<Measured, ContainerError> {
    check_names(variants)?;
    let started = Instant::now();
    let tar = archive(variants, workload, opts)?;
    let name = format!(
        "patchgrade-perf.{}.{}-{}-{:08x}",
        opts.run_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>(),
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        rand_suffix()
    );
    let spec = ContainerSpec {
        name,
        image: image.to_string(),
        cmd: vec!["bash".into(), "/perf/run.sh".into()],
        working_dir: "/".into(),
        labels: std::collections::HashMap::from([
            ("patchgrade.run_id".to_string(), opts.run_id.clone()),
            ("patchgrade.perf".to_string(), "1".to_string()),
        ]),
        network: opts.network,
        net_admin: false,
        memory: opts.memory_bytes,
        nano_cpus: None,
        cpuset: opts.cpuset.clone(),
        pids_limit: opts.pids_limit,
        // Removed here, after its exit code is read.
        auto_remove: false,
    };
    let container = engine::create(docker, &spec, &engine::Live::default()).await?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut split = |chunk: LogOutput| match chunk {
        LogOutput::StdOut { message } => out.extend_from_slice(&message),
        other => err.extend_from_slice(&other.into_bytes()),
    };
    let plan = RunPlan {
        upload: Some(tar),
        deadline: None,
        cancel: None,
        watch_exit: false,
        wait_code: true,
        output: &mut split,
    };
    let result = tokio::time::timeout(opts.timeout, container.run(plan)).await;
    container.remove().await;
    let ran = match result.map_err(|_| ContainerError::Timeout(opts.timeout))? {
        Ok(ran) => ran,
        Err(RunFailure::Call(e)) => return Err(e.into()),
        Err(RunFailure::Stream(source)) => {
            return Err(ApiError::Api {
                op: "attach".into(),
                source,
            }
            .into())
        }
    };
    let code = ran.code;
    let stdout = String::from_utf8_lossy(&out).into_owned();
    let stderr = String::from_utf8_lossy(&err).into_owned();
    if code != Some(0) {
        return Err(ContainerError::Failed {
            code,
            stderr_tail: tail(&stderr, 2000),
        });
    }
    Ok(Measured {
        output: parse_driver_output(&stdout)?,
        driver_stdout: stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}

/// Measurements started by this process, for unique container names.
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A few random bits, so two processes with the same pid (in two PID
/// namespaces) never pick the same name.
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish() & 0xffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::workload::WorkloadSource;

    fn variants() -> Vec<VariantFiles> {
        vec![
            VariantFiles {
                name: "base".into(),
                ..Default::default()
            },
            VariantFiles {
                name: "gold".into(),
                files: vec![(
                    "pkg/mod.py".into(),
                    FileData::File {
                        bytes: b"x = 1\n".to_vec(),
                        executable: false,
                    },
                )],
                delete: vec!["old file.py".into()],
            },
        ]
    }

    fn workload() -> Workload {
        Workload {
            source: WorkloadSource::Workload,
            items: vec![WorkloadItem::Script {
                name: "workload".into(),
                file_name: "workload.py".into(),
                body: "print(1)\n".into(),
                interpreter: vec!["python3".into()],
                args: vec![],
            }],
        }
    }

    #[test]
    fn names_are_checked() {
        let mut v = variants();
        v[1].name = "../x".into();
        assert!(matches!(check_names(&v), Err(ContainerError::BadName(_))));
        v[1].name = "base".into();
        assert!(matches!(
            check_names(&v),
            Err(ContainerError::DuplicateName(_))
        ));
        assert!(matches!(check_names(&[]), Err(ContainerError::NoVariants)));
        assert!(check_names(&variants()).is_ok());
    }

    #[test]
    fn plan_script_and_archive() {
        let opts = MeasureOptions {
            build: Some("make".into()),
            setup: vec!["source /opt/venv/bin/activate".into()],
            ..MeasureOptions::default()
        };
        let p: serde_json::Value =
            serde_json::from_str(&plan(&variants(), &workload(), &opts)).unwrap();
        assert_eq!(p["variants"][1]["dir"], "/perf/trees/gold");
        assert_eq!(p["swap"], "/testbed");
        assert_eq!(p["integrity"]["sweep_roots"][0], "/tmp");
        assert_eq!(
            p["workload"][0]["argv"],
            json!(["python3", "/perf/w/workload.py"])
        );
        assert_eq!(p["build"], json!(["bash", "-c", "make"]));
        assert_eq!(p["own_timer"], "wall");
        let cpu = MeasureOptions {
            cpu_own_timer: true,
            ..MeasureOptions::default()
        };
        let p: serde_json::Value =
            serde_json::from_str(&plan(&variants(), &workload(), &cpu)).unwrap();
        assert_eq!(p["own_timer"], "cpu");
        let s = run_script(&variants(), &opts);
        assert!(s.contains("cp -a /perf/changes/gold/. /perf/trees/gold/\n"));
        assert!(!s.contains("/perf/changes/base"));
        assert!(s.contains("(cd /perf/trees/gold && rm -f -- 'old file.py')"));
        assert!(s.contains(
            "ln -s /perf/trees/base /testbed\ncd /testbed\nsource /opt/venv/bin/activate\n"
        ));
        let tar = archive(&variants(), &workload(), &opts).unwrap();
        let mut a = tar::Archive::new(&tar[..]);
        let names: Vec<String> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "perf/driver.py",
                "perf/defences.py",
                "perf/plan.json",
                "perf/run.sh",
                "perf/w/workload.py",
                "perf/changes/gold/pkg/mod.py"
            ]
        );
    }
}
