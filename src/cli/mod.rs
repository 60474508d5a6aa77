//! Command-line arguments: every clap definition, and nothing else. What the
//! commands do with them is in `commands`.

pub mod engine_args;
pub mod perf_args;
pub mod reuse;

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use engine_args::EngineArgs;
use perf_args::{MeasureArgs, PerfArgs};

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

/// Where the instances come from: a dataset file, or the reference 5.0's
/// task directories (one of the two, never both).
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct DatasetArg {
    /// Dataset file (.jsonl or .json).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// A task repository (the reference 5.0's `tasks/<instance_id>/`
    /// directories), read as the same rows a dataset file gives. Images are
    /// built from patchgrade's spec for the repository, not the tasks'
    /// Dockerfiles.
    #[arg(long, value_name = "DIR")]
    pub task_repo: Option<PathBuf>,
}

impl DatasetArg {
    /// The path given; run.json records it as the run's dataset.
    pub fn path(&self) -> &Path {
        match (&self.dataset, &self.task_repo) {
            (Some(p), _) | (None, Some(p)) => p,
            // clap's group makes one of them required.
            (None, None) => Path::new(""),
        }
    }
}

/// How a command prints, the same flags on every command: results on
/// stdout with `--json`, progress and notices on stderr unless `--quiet`.
#[derive(Debug, Clone, Copy, Args)]
pub struct OutputArgs {
    /// Print the command's results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress and no notices on stderr; the results, the tables and
    /// errors still show.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate predictions against a dataset and write reports.
    Run(RunArgs),
    /// Check instances: FAIL_TO_PASS fails without the fix and passes with
    /// gold, PASS_TO_PASS passes on both; gold runs repeat to find flaky tests.
    Validate(ValidateArgs),
    /// Audit a finished run again: static checks from its files; with
    /// --rerun, held-out tests and divergence from gold. Or, with --dataset
    /// and --predictions, a static audit of a submission (nothing run).
    Audit(AuditArgs),
    /// pass@k / pass^k with intervals, clean variants, slices and plots from
    /// run folders; or a paired comparison of two runs.
    Report(ReportArgs),
    /// Grade a run's saved test logs again with today's parsers and rules
    /// (no container, no checkout): patchgrade's run folders, or the
    /// reference's logs/run_evaluation/<run_id>/<model>/<instance>/.
    Regrade(RegradeArgs),
    /// Best-of-n: choose one sample per instance without the hidden tests.
    Select(SelectArgs),
    /// Efficiency: grade, then time base, gold and each candidate per
    /// instance in one container (Docker), with statistics against base.
    Perf(PerfArgs),
    /// Code review: the static rubric (real linters on the changed lines,
    /// complexity, diff hygiene, size against gold) in each instance's
    /// container; with --judge-url, an LLM judge too.
    Review(ReviewArgs),
    /// Grading as a service: an HTTP/JSON API over the same engine as
    /// `run` (docs/serve.md); every accepted evaluation is recorded in the
    /// run folder before it is acknowledged.
    Serve(ServeArgs),
    /// Impossible variants (ImpossibleBench): each instance's test patch
    /// changed by rule so that no fix that follows the issue can pass it;
    /// with --validate, gold is run on each and only the variants gold
    /// fails are kept.
    Impossible(ImpossibleArgs),
    /// Docker: what the engine holds of patchgrade's images per tier and
    /// repository; with --dataset, what a cold run of it would build
    /// (estimated from recorded builds); with --evict, eviction by the cache
    /// budget's rule.
    Images(ImagesArgs),
}

#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// Dataset file (.jsonl or .json): which of its instances have an image
    /// and what a cold run of the others would build, in seconds and disk.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(
        long,
        value_name = "ID",
        num_args = 1..,
        value_delimiter = ',',
        requires = "dataset"
    )]
    pub instance_ids: Vec<String>,
    /// With --dataset: estimate from an empty engine (every image built, as
    /// on a first run), not from what the engine holds now.
    #[arg(long, requires = "dataset")]
    pub from_empty: bool,
    /// Cache folder: its image index (what --evict may remove) and test
    /// durations.
    #[arg(long, value_name = "DIR", env = "PATCHGRADE_CACHE")]
    pub cache_dir: Option<PathBuf>,
    /// The runs' log folder, as given to `run`: build logs are read from
    /// build_images/ beside it.
    #[arg(long, default_value = "logs/run_evaluation")]
    pub log_dir: PathBuf,
    /// Evict the least recently used images of the cache folder's index
    /// until it fits the budget; never one a container was made from.
    #[arg(long)]
    pub evict: bool,
    /// With --evict: say what would be removed, remove nothing.
    #[arg(long, requires = "evict")]
    pub dry_run: bool,
    /// With --evict: the budget (e.g. 20g) [default: min(50 GiB, half of the
    /// free space on Docker's data root plus the cache's usage)].
    #[arg(long, value_name = "SIZE", requires = "evict")]
    pub cache_budget: Option<String>,
    #[command(flatten)]
    pub print: OutputArgs,
}

/// `--mode` of `impossible` (the library's `impossible::Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImpossibleModeArg {
    /// One assertion of a FAIL_TO_PASS test changed.
    Oneoff,
    /// The assertion kept and a changed copy added after it.
    Conflicting,
}

impl From<ImpossibleModeArg> for patchgrade::impossible::Mode {
    fn from(m: ImpossibleModeArg) -> Self {
        match m {
            ImpossibleModeArg::Oneoff => patchgrade::impossible::Mode::OneOff,
            ImpossibleModeArg::Conflicting => patchgrade::impossible::Mode::Conflicting,
        }
    }
}

#[derive(Debug, Args)]
pub struct ImpossibleArgs {
    /// Dataset file (.jsonl or .json): its rows are written again with the
    /// test patch changed, every other field kept.
    #[arg(long, value_name = "FILE")]
    pub dataset: PathBuf,
    #[arg(long, value_enum)]
    pub mode: ImpossibleModeArg,
    /// The variant dataset (.jsonl); its report goes beside it as
    /// <stem>.report.json.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Run gold on every variant (the engine's flags below) and keep only
    /// those where the test patch applies and gold fails the changed test;
    /// the unchecked variants are the run's dataset, <stem>.candidates.jsonl.
    #[arg(long)]
    pub validate: bool,
    /// Run folder of the validation (default: impossible-<mode>).
    #[arg(long)]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub print: OutputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
    /// Run folder name: the service's evaluations go in
    /// <log_dir>/<run_id>/, readable by `report` and `audit`; a restart on
    /// the same run id takes up what was queued.
    #[arg(long, default_value = "serve")]
    pub run_id: String,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Address to listen on (port 0: any free port, said on stderr).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8787")]
    pub listen: std::net::SocketAddr,
    /// Listen on an address other than loopback (refused without it).
    #[arg(long)]
    pub allow_remote: bool,
    /// File holding the bearer token every request but /healthz and
    /// /readyz must carry (`Authorization: Bearer <token>`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Evaluations waiting at most; beyond, submissions get 429 with
    /// Retry-After.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub queue_limit: usize,
    /// Largest request body, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_body: usize,
    /// On SIGTERM or Ctrl-C: seconds running evaluations get to finish
    /// before they are stopped and left queued for the next start.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub drain_timeout: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
    /// Predictions file(s) (.jsonl, .json), or `gold` for the dataset's patches.
    #[arg(long, value_name = "FILE|gold", required = true)]
    pub predictions: Vec<PathBuf>,
    /// Run folder name: review.json goes beside each evaluation's files in
    /// <log_dir>/<run_id>/<model>/<instance_id>/.
    #[arg(long)]
    pub run_id: String,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Read the hints with the problem statement (unrelated-file check, judge).
    #[arg(long)]
    pub with_hints: bool,
    /// Review only the predictions whose evaluation in this run folder (a
    /// `run` with the same --run-id) ended resolved.
    #[arg(long)]
    pub resolved_only: bool,
    #[command(flatten)]
    pub print: OutputArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The LLM judge: nothing is sent anywhere without --judge-url.
#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// Base URL of an OpenAI-compatible API (or its /chat/completions URL).
    #[arg(long, value_name = "URL", requires = "judge_model")]
    pub judge_url: Option<String>,
    /// Model name sent to the endpoint.
    #[arg(long, value_name = "NAME", requires = "judge_url")]
    pub judge_model: Option<String>,
    /// Name of the environment variable holding the API key (never logged).
    #[arg(long, value_name = "VAR", requires = "judge_url")]
    pub judge_key_env: Option<String>,
    /// Rubric YAML; default images/rubrics/default.yaml.
    #[arg(long, value_name = "FILE", requires = "judge_url")]
    pub judge_rubric: Option<PathBuf>,
    /// Judge against gold, in both orders (pairwise) instead of pointwise.
    #[arg(long, requires = "judge_url")]
    pub judge_pairwise: bool,
    /// Samples per patch (and per order): mean and spread.
    #[arg(long, default_value_t = 1)]
    pub judge_samples: u32,
    #[arg(long, default_value_t = 0.0)]
    pub judge_temperature: f64,
    /// Seconds per request.
    #[arg(long, default_value_t = 120)]
    pub judge_timeout: u64,
    /// Price per million prompt tokens (for the cost).
    #[arg(long, value_name = "USD", requires = "judge_url")]
    pub judge_price_in: Option<f64>,
    /// Price per million completion tokens.
    #[arg(long, value_name = "USD", requires = "judge_url")]
    pub judge_price_out: Option<f64>,
    /// The model's context window, in tokens (longer diffs are cut, said).
    #[arg(long, default_value_t = 32768)]
    pub judge_max_context: usize,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
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
    #[command(flatten)]
    pub print: OutputArgs,
    /// After grading, measure the runtime of the resolved patches against
    /// base (and gold) as `perf` does (Docker).
    #[arg(long)]
    pub perf: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The run folder: logs/run_evaluation/<run_id>. Or, instead, --dataset
    /// with --predictions: a static audit of a submission, nothing run.
    #[arg(required_unless_present = "predictions")]
    pub run_dir: Option<PathBuf>,
    /// Dataset file or task repository; default: the one RUN_DIR/run.json
    /// names.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Static audit of these predictions (or `gold`) against --dataset, with
    /// no run and no Docker; not with RUN_DIR.
    #[arg(
        long,
        value_name = "FILE|gold",
        conflicts_with = "run_dir",
        requires = "dataset"
    )]
    pub predictions: Vec<PathBuf>,
    /// Static audit: judge leakage on the problem statement and the hints
    /// (default: the statement alone, what an agent sees).
    #[arg(long, requires = "predictions")]
    pub with_hints: bool,
    /// Also run the dynamic checks (held-out tests, divergence from gold).
    #[arg(long, conflicts_with = "predictions")]
    pub rerun: bool,
    /// Also confirm each resolved pass: its FAIL_TO_PASS tests run again
    /// where test-aware code cannot tell it is graded (pytest and go test;
    /// docs/audit.md, "Confirmation run"). One extra run per pass; gold's
    /// run and a second one only where the first disagrees.
    #[arg(long, conflicts_with = "predictions")]
    pub confirm: bool,
    /// Held-out tests: JSON lines with instance_id, HELD_OUT_TESTS and
    /// held_out_test_patch (instances may also carry those fields).
    #[arg(long, value_name = "FILE", conflicts_with = "predictions")]
    pub held_out: Option<PathBuf>,
    #[command(flatten)]
    pub print: OutputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
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
    #[command(flatten)]
    pub print: OutputArgs,
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
    /// Dataset file or task repository for slices; default: the one
    /// RUN_DIR/run.json names, if found.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Per-instance fields joined on instance_id (or id), e.g.
    /// swebench-verified-metadata.jsonl (repeatable).
    #[arg(long, value_name = "FILE")]
    pub metadata: Vec<PathBuf>,
    /// Paired comparison of two run folders: A minus B.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Vec<PathBuf>,
    #[command(flatten)]
    pub print: OutputArgs,
    /// Folder for report.md and its SVG plots; default RUN_DIR/passk.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Bootstrap resamples per interval.
    #[arg(long, default_value_t = patchgrade::metrics::bootstrap::DEFAULT_RESAMPLES)]
    pub resamples: usize,
}

#[derive(Debug, Args)]
pub struct RegradeArgs {
    /// The run folder (`logs/run_evaluation/<run_id>`).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Dataset file or task repository; default: the one RUN_DIR/run.json
    /// names (a reference run folder needs it).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Extra spec files or folders (repeatable), over the built-ins: where a
    /// dataset row names no `log_parser`, its spec's parser reads the log.
    #[arg(long, value_name = "PATH")]
    pub specs: Vec<PathBuf>,
    /// Where the run summaries `<model>.<run_id>.json` are rewritten.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub report_dir: PathBuf,
    /// Say what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub print: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SelectArgs {
    /// The run folder whose samples to choose from (`logs/run_evaluation/<run_id>`).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The predictions file(s) that run evaluated, in the same order.
    #[arg(long, value_name = "FILE", required = true)]
    pub predictions: Vec<PathBuf>,
    /// Dataset file or task repository; default: the one RUN_DIR/run.json
    /// names.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Where to write the chosen predictions; default <run_id>.selected.jsonl.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Run id of the selection's own test runs; default <run_id>.select.
    #[arg(long)]
    pub select_run_id: Option<String>,
    #[command(flatten)]
    pub print: OutputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}
