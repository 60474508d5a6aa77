//! Command line: argument definitions, the `run` command, exit codes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio::sync::{mpsc, watch};

use crate::backend::docker::DockerOptions;
use crate::backend::{Backend, LocalBackend};
use crate::image::CacheLevel;
use crate::dataset::{load_predictions, model_dir, Dataset, Prediction};
use crate::outcome::{EvalRecord, Outcome};
use crate::repo::{RepoCache, RepoSources, DEFAULT_URL_TEMPLATE};
use crate::report::{write_json_atomic, Summary, SummaryExtra};
use crate::runner::{Job, RecordKey, RunConfig, RunEvent, Runner, VERSION};
use crate::spec::SpecSet;

/// Documented exit codes (README, "Exit codes").
pub mod exit {
    /// The run completed (whatever the verdicts).
    pub const OK: i32 = 0;
    /// Internal error (a bug).
    pub const INTERNAL: i32 = 1;
    /// Bad input: arguments, dataset, predictions or specs.
    pub const BAD_INPUT: i32 = 2;
    /// Infrastructure failure: could not write reports, no backend.
    pub const INFRA: i32 = 3;
    /// Interrupted (Ctrl-C); finished results are kept.
    pub const INTERRUPTED: i32 = 130;
}

/// An error that maps to a documented exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    BadInput(anyhow::Error),
    #[error(transparent)]
    Infra(anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => exit::BAD_INPUT,
            CliError::Infra(_) => exit::INFRA,
        }
    }
}

fn bad(e: impl Into<anyhow::Error>) -> CliError {
    CliError::BadInput(e.into())
}

fn infra(e: impl Into<anyhow::Error>) -> CliError {
    CliError::Infra(e.into())
}

#[derive(Debug, Parser)]
#[command(
    name = "patchgrade",
    version,
    about = "Grade SWE-bench-style candidate patches by running them"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate predictions against a dataset and write reports.
    Run(RunArgs),
    /// Check instances: FAIL_TO_PASS fails without the fix and passes with
    /// gold, PASS_TO_PASS passes on both; gold runs repeat to find flaky tests.
    Validate(ValidateArgs),
    /// Audit a finished run again: static checks from its files; with
    /// --rerun, held-out tests and divergence from gold.
    Audit(AuditArgs),
    /// pass@k / pass^k with intervals, clean variants, slices and plots from
    /// run folders; or a paired comparison of two runs.
    Report(ReportArgs),
    /// Best-of-n: choose one sample per instance without the hidden tests.
    Select(SelectArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendKind {
    /// Docker when a daemon answers, else local.
    Auto,
    Docker,
    Local,
}

/// Where datasets' repositories come from and where caches live.
#[derive(Debug, Args, Clone)]
pub struct SourceArgs {
    /// Extra spec files or folders (repeatable); they override built-ins.
    #[arg(long = "specs", value_name = "PATH")]
    pub specs: Vec<PathBuf>,
    /// Folder of local clones named <owner>__<name>[.git].
    #[arg(long, value_name = "DIR", env = "PATCHGRADE_MIRROR_DIR")]
    pub mirror_dir: Option<PathBuf>,
    /// URL to clone repositories missing from the cache, `{repo}` = owner/name.
    #[arg(long, default_value = DEFAULT_URL_TEMPLATE)]
    pub repo_url_template: String,
    /// Cache folder for mirrors and environments.
    #[arg(long, value_name = "DIR", env = "PATCHGRADE_CACHE")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Dataset file (.jsonl or .json).
    #[arg(long, value_name = "FILE")]
    pub dataset: PathBuf,
    /// Predictions file(s) (.jsonl, .json), or `gold` for the dataset's patches.
    #[arg(long, value_name = "FILE|gold", required = true)]
    pub predictions: Vec<PathBuf>,
    /// Name of this run (log folder and summary file name).
    #[arg(long)]
    pub run_id: String,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Folder for the summary <model>.<run_id>.json.
    #[arg(long, default_value = ".")]
    pub report_dir: PathBuf,
    /// Print the summary JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The run folder: logs/run_evaluation/<run_id>.
    pub run_dir: PathBuf,
    /// Dataset; default: the one RUN_DIR/run.json names.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Also run the dynamic checks (held-out tests, divergence from gold).
    #[arg(long)]
    pub rerun: bool,
    /// Held-out tests: JSON lines with instance_id, HELD_OUT_TESTS and
    /// held_out_test_patch (instances may also carry those fields).
    #[arg(long, value_name = "FILE")]
    pub held_out: Option<PathBuf>,
    /// Print the audit counts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Dataset file (.jsonl or .json).
    #[arg(long, value_name = "FILE")]
    pub dataset: PathBuf,
    /// Name of this validation (log folder and report name).
    #[arg(long, default_value = "validate")]
    pub run_id: String,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// How many times gold runs (flaky tests change between runs); 0 checks
    /// the base side only (no false resolutions).
    #[arg(long, default_value_t = 3)]
    pub gold_runs: usize,
    /// Folder for the report validate.<run_id>.json.
    #[arg(long, default_value = ".")]
    pub report_dir: PathBuf,
    /// Print the report JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run folders (`logs/run_evaluation/<run_id>`).
    #[arg(
        value_name = "RUN_DIR",
        required_unless_present = "compare",
        conflicts_with = "compare"
    )]
    pub run_dirs: Vec<PathBuf>,
    /// k values for pass@k and pass^k (comma-separated); default 1, 2, 5,
    /// 10, 20, 50, 100 up to the largest number of samples.
    #[arg(long, value_name = "K", value_delimiter = ',')]
    pub k: Vec<u64>,
    /// Also slice by this dataset or metadata field (repeatable), e.g. difficulty.
    #[arg(long, value_name = "FIELD")]
    pub by: Vec<String>,
    /// Dataset for slices; default: the one RUN_DIR/run.json names, if found.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Per-instance fields joined on instance_id (or id), e.g.
    /// swebench-verified-metadata.jsonl (repeatable).
    #[arg(long, value_name = "FILE")]
    pub metadata: Vec<PathBuf>,
    /// Paired comparison of two run folders: A minus B.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Vec<PathBuf>,
    /// Print the numbers as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Folder for report.md and its SVG plots; default RUN_DIR/passk.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Bootstrap resamples per interval.
    #[arg(long, default_value_t = crate::metrics::DEFAULT_RESAMPLES)]
    pub resamples: usize,
}

#[derive(Debug, Args)]
pub struct SelectArgs {
    /// The run folder whose samples to choose from (`logs/run_evaluation/<run_id>`).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The predictions file(s) that run evaluated, in the same order.
    #[arg(long, value_name = "FILE", required = true)]
    pub predictions: Vec<PathBuf>,
    /// Dataset; default: the one RUN_DIR/run.json names.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Where to write the chosen predictions; default <run_id>.selected.jsonl.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Run id of the selection's own test runs; default <run_id>.select.
    #[arg(long)]
    pub select_run_id: Option<String>,
    /// Print the selection report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// How evaluations run: backend, limits, logs, caches. Shared by every
/// command that runs tests.
#[derive(Debug, Args, Clone)]
pub struct EngineArgs {
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Evaluations run at once.
    #[arg(long, default_value_t = default_workers())]
    pub max_workers: usize,
    /// Per-evaluation time limit, seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Root of the per-instance logs (logs/run_evaluation/<run_id>/...).
    #[arg(long, default_value = "logs/run_evaluation")]
    pub log_dir: PathBuf,
    /// Re-evaluate even when a finished result with the same inputs exists.
    #[arg(long)]
    pub force: bool,
    /// Local backend: run without bubblewrap even where it is installed.
    #[arg(long)]
    pub no_sandbox: bool,
    #[command(flatten)]
    pub docker: DockerArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// Docker flags of `patchgrade run`.
#[derive(Debug, Clone, Args)]
pub struct DockerArgs {
    /// Docker: use prebuilt instance images NS/sweb.eval.<arch>.<id>:<tag> (as the
    /// reference publishes them), from the engine or pulled, instead of building.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Docker: tag of the --namespace instance images.
    #[arg(long, default_value = "latest", value_name = "TAG")]
    pub instance_image_tag: String,
    /// Docker: image base images start from, pulled where a registry answers
    /// (`{suite}`: bullseye, bookworm, trixie). Otherwise, or with `none`, the
    /// suite is bootstrapped with debootstrap (needs root).
    #[arg(long, default_value = "debian:{suite}-slim", value_name = "IMAGE")]
    pub base_image: String,
    /// Docker: CA bundle installed in every image [default: $SSL_CERT_FILE,
    /// $PIP_CERT or $REQUESTS_CA_BUNDLE, else /etc/ssl/certs/ca-certificates.crt
    /// if present]; `none` for none.
    #[arg(long, value_name = "PATH")]
    pub ca_cert: Option<String>,
    /// Docker: which images to keep after the run.
    #[arg(long, value_enum, default_value = "env")]
    pub cache_level: CacheLevelArg,
    /// Docker: also remove images that existed before the run (per --cache-level).
    #[arg(long)]
    pub clean: bool,
    /// Docker: rebuild base, env and instance images even when they exist.
    #[arg(long)]
    pub force_rebuild: bool,
    /// Docker: memory limit of each test container (e.g. 4g, 512m).
    #[arg(long, default_value = "4g", value_name = "SIZE")]
    pub memory: String,
    /// Docker: CPU limit of each test container (clamped to the host's cores).
    #[arg(long, default_value_t = 2.0, value_name = "N")]
    pub cpus: f64,
    /// Docker: process limit of each test container (contains fork bombs).
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub pids_limit: i64,
    /// Docker: time limit of one image build, seconds.
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    pub build_timeout: u64,
}


/// `--cache-level` values (the library's `CacheLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum CacheLevelArg {
    /// Remove every image the run built or pulled.
    None,
    /// Keep base images.
    Base,
    /// Keep base and env images (default).
    #[default]
    Env,
    /// Keep everything, instance images included: the fastest reruns.
    Instance,
}

impl DockerArgs {
    pub fn options(&self) -> DockerOptions {
        DockerOptions {
            namespace: self.namespace.clone(),
            instance_image_tag: self.instance_image_tag.clone(),
            base_image: self.base_image.clone(),
            ca_cert: self.ca_cert.clone(),
            cache_level: match self.cache_level {
                CacheLevelArg::None => CacheLevel::None,
                CacheLevelArg::Base => CacheLevel::Base,
                CacheLevelArg::Env => CacheLevel::Env,
                CacheLevelArg::Instance => CacheLevel::Instance,
            },
            clean: self.clean,
            force_rebuild: self.force_rebuild,
            memory: self.memory.clone(),
            cpus: self.cpus,
            pids_limit: self.pids_limit,
            build_timeout: self.build_timeout,
        }
    }
}

fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
}

pub fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("patchgrade");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache/patchgrade"),
        None => std::env::temp_dir().join("patchgrade-cache"),
    }
}

impl SourceArgs {
    pub fn cache(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }

    pub fn spec_set(&self) -> Result<SpecSet, CliError> {
        let mut specs = SpecSet::builtin().map_err(bad)?;
        for p in &self.specs {
            specs.add_path(p).map_err(bad)?;
        }
        Ok(specs)
    }

    pub fn repo_cache(&self, dataset: &Path) -> RepoCache {
        let ds_dir = dataset.parent().map(Path::to_path_buf).unwrap_or_default();
        RepoCache::new(RepoSources {
            cache: self.cache().join("repos"),
            mirror_dir: self.mirror_dir.clone(),
            export_dirs: vec![ds_dir.join("repos")],
            url_template: self.repo_url_template.clone(),
        })
    }
}

/// Jobs from predictions. A model with several predictions for one
/// instance (repeated rows, `sample_id`, or several files) has samples: each
/// sample is its own job, named by its `sample_id` or its position.
pub fn jobs(dataset: &Dataset, preds: Vec<Prediction>) -> Result<Vec<Job>, CliError> {
    let by_id: BTreeMap<&str, Arc<crate::dataset::Instance>> = dataset
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), Arc::new(i.clone())))
        .collect();
    let preds: Vec<Prediction> = preds
        .into_iter()
        .filter(|p| by_id.contains_key(p.instance_id.as_str()))
        .collect();
    let mut per_pair: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for p in &preds {
        *per_pair
            .entry((p.model_name_or_path.as_str(), p.instance_id.as_str()))
            .or_default() += 1;
    }
    let sampled: BTreeSet<String> = preds
        .iter()
        .filter(|p| {
            p.sample_id.is_some()
                || per_pair[&(p.model_name_or_path.as_str(), p.instance_id.as_str())] > 1
        })
        .map(|p| p.model_name_or_path.clone())
        .collect();
    let mut position: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut out = Vec::new();
    for p in preds {
        let inst = by_id[p.instance_id.as_str()].clone();
        let sample = if sampled.contains(&p.model_name_or_path) {
            let pos = position
                .entry((p.model_name_or_path.clone(), p.instance_id.clone()))
                .or_default();
            let id = p.sample_id.clone().unwrap_or_else(|| pos.to_string());
            *pos += 1;
            if id.is_empty() || id.contains('/') {
                return Err(bad(anyhow::anyhow!(
                    "sample_id {id:?} of {} must be non-empty with no '/'",
                    p.instance_id
                )));
            }
            if !seen.insert((
                p.model_name_or_path.clone(),
                p.instance_id.clone(),
                id.clone(),
            )) {
                return Err(bad(anyhow::anyhow!(
                    "two predictions for {} from model {} have sample id {id}",
                    p.instance_id,
                    p.model_name_or_path
                )));
            }
            Some(id)
        } else {
            None
        };
        out.push(Job {
            instance: inst,
            prediction: p,
            sample,
            directives: None,
            run_without_patch: false,
        });
    }
    Ok(out)
}

/// A runner ready to execute jobs, with its scratch space.
pub struct Engine {
    pub runner: Arc<Runner>,
    pub backend_name: String,
    _work: tempfile::TempDir,
}

/// The outcome of executing jobs.
pub struct Executed {
    pub records: BTreeMap<RecordKey, EvalRecord>,
    pub interrupted: bool,
    pub elapsed: Duration,
}

impl Engine {
    pub fn build(args: &EngineArgs, run_id: &str, dataset_path: &Path) -> Result<Engine, CliError> {
        if run_id.trim().is_empty() || run_id.contains('/') {
            return Err(bad(anyhow::anyhow!(
                "--run-id must be non-empty and contain no '/'"
            )));
        }
        let specs = args.sources.spec_set()?;
        let cache = args.sources.cache();
        let repos = args.sources.repo_cache(dataset_path);
        let use_docker = match args.backend {
            BackendKind::Local => false,
            BackendKind::Docker => {
                crate::backend::docker::daemon_answers().map_err(infra)?;
                true
            }
            // Auto: docker when a daemon answers.
            BackendKind::Auto => match crate::backend::docker::daemon_answers() {
                Ok(()) => true,
                Err(e) => {
                    tracing::info!("--backend auto: {e}; using the local backend");
                    false
                }
            },
        };
        let backend = if use_docker {
            let b = crate::backend::DockerBackend::new(
                args.docker.options(),
                &cache,
                &args.log_dir,
                repos.clone(),
                run_id,
            )
            .map_err(bad)?;
            Backend::Docker(Box::new(b))
        } else {
            Backend::Local(LocalBackend::new(&cache, repos.clone(), !args.no_sandbox))
        };
        let work = tempfile::Builder::new()
            .prefix("patchgrade-")
            .tempdir()
            .map_err(infra)?;
        let cfg = RunConfig {
            run_id: run_id.to_string(),
            log_root: args.log_dir.clone(),
            work_root: work.path().to_owned(),
            max_workers: args.max_workers,
            timeout: Duration::from_secs(args.timeout),
            force: args.force,
        };
        let backend_name = backend.name().to_string();
        let runner = Arc::new(Runner {
            cfg,
            specs,
            repos,
            backend,
        });
        std::fs::create_dir_all(args.log_dir.join(run_id))
            .with_context(|| format!("cannot create {}", args.log_dir.display()))
            .map_err(infra)?;
        runner.write_run_meta(dataset_path).map_err(infra)?;
        Ok(Engine {
            runner,
            backend_name,
            _work: work,
        })
    }

    /// Run jobs with progress on stderr; Ctrl-C stops running evaluations
    /// (their results are not recorded), a second Ctrl-C exits.
    pub async fn execute(&self, jobs: Vec<Job>) -> Executed {
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let interrupted = interrupted.clone();
            let runner = self.runner.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
                    eprintln!("\ninterrupted: stopping running evaluations (finished results are kept); Ctrl-C again to exit now");
                    let _ = cancel_tx.send(true);
                    if tokio::signal::ctrl_c().await.is_ok() {
                        // Containers would outlive the process: remove them first.
                        let _ = tokio::time::timeout(
                            Duration::from_secs(10),
                            runner.backend.kill_running(),
                        )
                        .await;
                        std::process::exit(exit::INTERRUPTED);
                    }
                }
            })
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let reporter = tokio::spawn(report_progress(rx));
        let started = std::time::Instant::now();
        let records = self.runner.clone().run(jobs, tx, cancel_rx).await;
        let _ = reporter.await;
        watcher.abort();
        self.runner.backend.finish().await;
        Executed {
            records,
            interrupted: interrupted.load(std::sync::atomic::Ordering::SeqCst),
            elapsed: started.elapsed(),
        }
    }
}

/// Load a dataset and keep `--instance-ids` (space- or comma-separated).
pub fn load_dataset(path: &Path, instance_ids: &[String]) -> Result<Dataset, CliError> {
    let mut dataset = Dataset::load(path).map_err(bad)?;
    let ids: Vec<String> = instance_ids
        .iter()
        .flat_map(|s| s.split_whitespace().map(String::from))
        .collect();
    dataset.filter(&ids).map_err(bad)?;
    Ok(dataset)
}

pub async fn run(args: RunArgs) -> Result<i32, CliError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(bad)?;
    let jobs = jobs(&dataset, preds)?;
    let engine = Engine::build(&args.engine, &args.run_id, &args.dataset)?;
    let backend_name = engine.backend_name.clone();
    let Executed {
        records,
        interrupted,
        elapsed,
    } = engine.execute(jobs.clone()).await;

    // One summary per model, as the reference names them.
    let mut models: Vec<String> = Vec::new();
    for j in &jobs {
        if !models.contains(&j.prediction.model_name_or_path) {
            models.push(j.prediction.model_name_or_path.clone());
        }
    }
    let mut summaries = Vec::new();
    for model in &models {
        let preds: Vec<&Prediction> = jobs
            .iter()
            .filter(|j| &j.prediction.model_name_or_path == model)
            .map(|j| &j.prediction)
            .collect();
        // The reference's summary has one verdict per instance: with samples,
        // the first sample stands for it (pass@k is reported separately).
        let mut recs: BTreeMap<String, EvalRecord> = BTreeMap::new();
        for ((m, id, _), r) in &records {
            if m == model {
                recs.entry(id.clone()).or_insert_with(|| r.clone());
            }
        }
        let extra = SummaryExtra {
            version: VERSION.into(),
            run_id: args.run_id.clone(),
            model_name_or_path: model.clone(),
            backend: backend_name.clone(),
            outcomes: BTreeMap::new(),
            ids_by_outcome: BTreeMap::new(),
            audit: Default::default(),
            wall_seconds: elapsed.as_secs_f64(),
        };
        let summary = Summary::build(&dataset, &preds, &recs, extra);
        let path = args
            .report_dir
            .join(Summary::file_name(&model_dir(model), &args.run_id));
        write_json_atomic(&path, &summary)
            .with_context(|| format!("cannot write {}", path.display()))
            .map_err(infra)?;
        eprintln!("\n{model}:\n{}", summary.table(&recs));
        eprintln!("summary written to {}", path.display());
        summaries.push(summary);
    }
    // Several samples per instance: the pass@k table (`report` has more).
    let run_dir = args.engine.log_dir.join(&args.run_id);
    if let Some(table) = crate::passk::after_run(&run_dir, &args.run_id, records.values()) {
        eprintln!("\npass@k (95% bootstrap intervals over instances):\n{table}");
    }
    if args.json {
        let v = if summaries.len() == 1 {
            serde_json::to_value(&summaries[0])
        } else {
            serde_json::to_value(&summaries)
        }
        .map_err(infra)?;
        println!("{}", serde_json::to_string_pretty(&v).map_err(infra)?);
    }
    if interrupted {
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::OK)
}

/// Terminal reporter: a progress bar on a terminal, one line per finished
/// evaluation otherwise.
async fn report_progress(mut rx: mpsc::UnboundedReceiver<RunEvent>) {
    let tty = std::io::stderr().is_terminal();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let (mut done, mut total) = (0usize, 0usize);
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            RunEvent::Started { total: t, workers } => {
                total = t;
                eprintln!("evaluating {t} predictions with {workers} workers");
                if tty {
                    let b = indicatif::ProgressBar::new(t as u64);
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{bar:30} {pos}/{len} {elapsed_precise} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    bar = Some(b);
                }
            }
            RunEvent::InstanceStarted { .. } => {}
            RunEvent::InstanceFinished { record, reused } => {
                done += 1;
                *counts.entry(record.outcome).or_default() += 1;
                let line = format!(
                    "[{done}/{total}] {} {}{}",
                    record.instance_id,
                    record.outcome,
                    if reused { " (reused)" } else { "" }
                );
                match &bar {
                    Some(b) => {
                        b.inc(1);
                        let msg: Vec<String> =
                            counts.iter().map(|(o, n)| format!("{o} {n}")).collect();
                        b.set_message(msg.join(", "));
                        b.println(line);
                    }
                    None => eprintln!("{line}"),
                }
            }
            RunEvent::InstanceCancelled { instance_id } => {
                let line = format!("{instance_id}: stopped, nothing recorded");
                match &bar {
                    Some(b) => b.println(line),
                    None => eprintln!("{line}"),
                }
            }
            RunEvent::Finished { elapsed } => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                eprintln!("finished in {:.1}s", elapsed.as_secs_f64());
            }
        }
    }
}

pub async fn validate(args: ValidateArgs) -> Result<i32, CliError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let engine = Engine::build(&args.engine, &args.run_id, &args.dataset)?;
    let jobs = crate::validate::jobs(&dataset, args.gold_runs);
    let done = engine.execute(jobs).await;
    let cfg = &engine.runner.cfg;
    let log_dir_of = |model: &str, id: &str| {
        cfg.log_root
            .join(&cfg.run_id)
            .join(model_dir(model))
            .join(id)
    };
    let report = crate::validate::judge(
        &dataset,
        args.gold_runs,
        &done.records,
        &engine.runner.specs,
        log_dir_of,
        &args.run_id,
    );
    let path = args
        .report_dir
        .join(format!("validate.{}.json", args.run_id));
    write_json_atomic(&path, &report)
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(infra)?;
    eprintln!("\n{}", report.table());
    eprintln!("report written to {}", path.display());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(infra)?);
    }
    Ok(if done.interrupted {
        exit::INTERRUPTED
    } else {
        exit::OK
    })
}

pub async fn audit(args: AuditArgs) -> Result<i32, CliError> {
    use crate::reaudit;
    let started = std::time::Instant::now();
    let audited = reaudit::load(&args.run_dir).map_err(|e| bad(anyhow::anyhow!(e)))?;
    let dataset_path = match &args.dataset {
        Some(p) => p.clone(),
        None => crate::runner::RunMeta::read(&args.run_dir)
            .and_then(|m| m.dataset_path())
            .ok_or_else(|| {
                bad(anyhow::anyhow!(
                    "no --dataset, and {}/run.json names none",
                    args.run_dir.display()
                ))
            })?,
    };
    let dataset = Dataset::load(&dataset_path).map_err(bad)?;
    let specs = args.engine.sources.spec_set()?;
    let held_out = match &args.held_out {
        Some(p) => crate::audit::dynamic::load_sidecar(p).map_err(|e| bad(anyhow::anyhow!(e)))?,
        None => BTreeMap::new(),
    };
    let mut audits: BTreeMap<usize, crate::audit::Audit> = BTreeMap::new();
    for (idx, a) in audited.iter().enumerate() {
        let Some(inst) = dataset.get(&a.record.instance_id) else {
            return Err(bad(anyhow::anyhow!(
                "{}: instance {} is not in {}",
                a.dir.display(),
                a.record.instance_id,
                dataset_path.display()
            )));
        };
        if let Some(audit) = reaudit::static_audit(a, inst, &specs, args.rerun) {
            audits.insert(idx, audit);
        }
    }
    let mut interrupted = false;
    if args.rerun {
        let run_id = args
            .run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let mut engine_args = args.engine.clone();
        engine_args.log_dir = args
            .run_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let engine = Engine::build(&engine_args, &format!("{run_id}.audit"), &dataset_path)?;
        let repos = engine.runner.repos.clone();
        let list_files = |inst: &crate::dataset::Instance| {
            repos
                .ensure(&inst.repo, &[&inst.base_commit])
                .and_then(|_| repos.list_files(&inst.repo, &inst.base_commit))
                .unwrap_or_default()
        };
        let (jobs, purposes) = reaudit::plan(&audited, &dataset, &held_out, list_files);
        eprintln!("dynamic audit: {} evaluations", jobs.len());
        let t = std::time::Instant::now();
        let done = engine.execute(jobs.clone()).await;
        interrupted = done.interrupted;
        reaudit::judge(
            &audited,
            &mut audits,
            &engine.runner.cfg,
            &engine.runner.specs,
            jobs,
            &purposes,
            &done.records,
        );
        let secs = t.elapsed().as_secs_f64();
        for audit in audits.values_mut() {
            audit
                .notes
                .push(format!("dynamic checks of this run took {secs:.1}s in all"));
        }
    }
    let mut report = reaudit::AuditReport {
        run_dir: args.run_dir.display().to_string(),
        rerun: args.rerun,
        ..Default::default()
    };
    let mut lines = Vec::new();
    for (idx, a) in audited.iter().enumerate() {
        let record = match audits.remove(&idx) {
            Some(audit) => reaudit::write_back(a, audit)
                .with_context(|| format!("cannot write {}", a.dir.display()))
                .map_err(infra)?,
            None => a.record.clone(),
        };
        let leaf = a
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        report
            .models
            .entry(record.model_name_or_path.clone())
            .or_default()
            .add(&leaf, &record);
        if record.outcome == Outcome::Resolved {
            let verdict = match &record.audit {
                Some(au) if au.is_suspect() => {
                    let kinds: Vec<String> = au
                        .reasons
                        .iter()
                        .map(|r| {
                            format!(
                                "{}: {}",
                                serde_json::to_value(r.kind)
                                    .ok()
                                    .and_then(|v| v.as_str().map(String::from))
                                    .unwrap_or_default(),
                                r.message
                            )
                        })
                        .collect();
                    format!("suspect  {}", kinds.join("; "))
                }
                Some(_) => "clean".to_string(),
                None => "not audited".to_string(),
            };
            lines.push(format!("{}  {leaf}  {verdict}", record.model_name_or_path));
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    for l in &lines {
        eprintln!("{l}");
    }
    for (m, c) in &report.models {
        eprintln!(
            "{m}: {} resolved, {} clean, {} suspect",
            c.resolved, c.clean_resolved, c.suspect_resolved
        );
    }
    let path = args.run_dir.join("audit.json");
    write_json_atomic(&path, &report)
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(infra)?;
    eprintln!("audit written to {}", path.display());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(infra)?);
    }
    Ok(if interrupted {
        exit::INTERRUPTED
    } else {
        exit::OK
    })
}
