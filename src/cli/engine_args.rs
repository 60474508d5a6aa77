//! The flags shared by every command that runs tests: backend, limits,
//! logs, caches, Docker.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use patchgrade::backend::docker::images::CacheLevel;
use patchgrade::backend::docker::DockerOptions;
use patchgrade::backend::swarm::SwarmOptions;
use patchgrade::engine::{BackendChoice, EngineOptions, Sources};
use patchgrade::python::PythonDir;
use patchgrade::repo::DEFAULT_URL_TEMPLATE;
use patchgrade::script::dataset::ScriptSource;

/// `--backend` values (the library's `BackendChoice`).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendArg {
    /// Docker when a daemon answers, else local.
    Auto,
    Docker,
    Local,
    /// Docker Swarm: one service per evaluation across the swarm's nodes
    /// (DOCKER_HOST is a manager; needs --registry).
    Swarm,
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

/// How evaluations run: backend, limits, logs, caches. Shared by every
/// command that runs tests.
#[derive(Debug, Args, Clone)]
pub struct EngineArgs {
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
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
    /// Where each evaluation's eval script comes from: `spec` renders it
    /// from the repository's spec; `dataset` runs the instance's own
    /// `eval_script` field unchanged in patchgrade's image (Docker only).
    #[arg(long, value_enum, default_value = "spec")]
    pub eval_script: EvalScriptArg,
    #[command(flatten)]
    pub docker: DockerArgs,
    #[command(flatten)]
    pub swarm: SwarmArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// `--eval-script` values (the library's `ScriptSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalScriptArg {
    /// The script rendered from the spec (harness-scripts/eval.sh.tmpl).
    Spec,
    /// The instance's own `eval_script` field, run unchanged.
    Dataset,
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
    /// Docker: which images to keep after the run, by tier (the reference's
    /// meaning) [default: keep all within --cache-budget, least recently used
    /// evicted first].
    #[arg(long, value_enum)]
    pub cache_level: Option<CacheLevelArg>,
    /// Docker: disk budget of the image cache when no --cache-level is given
    /// (e.g. 20g) [default: min(50 GiB, half of the free space on Docker's
    /// data root plus what the cache takes)].
    #[arg(long, value_name = "SIZE")]
    pub cache_budget: Option<String>,
    /// Docker: also remove images that existed before the run (per --cache-level).
    #[arg(long)]
    pub clean: bool,
    /// Docker: at the end of the run, put the instance images it used on the
    /// shelf (zstd archives of their own layers in the cache folder) and
    /// remove them from the engine. Any run loads a shelved image back
    /// instead of building it.
    #[arg(long)]
    pub shelve: bool,
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
    /// Docker: a CPython X.Y build to copy into images (its prefix or its
    /// bin/pythonX.Y), searched before uv's and pyenv's; repeatable.
    #[arg(long = "python-dir", value_name = "X.Y=PATH", value_parser = PythonDir::parse)]
    pub python_dirs: Vec<PythonDir>,
}

/// Swarm flags of `patchgrade run`.
#[derive(Debug, Clone, Args)]
pub struct SwarmArgs {
    /// Swarm: registry every node can reach, HOST:PORT; instance images are
    /// pushed there and run by digest.
    #[arg(long, value_name = "HOST:PORT")]
    pub registry: Option<String>,
}

/// `--cache-level` values (the library's `CacheLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum CacheLevelArg {
    /// Remove every image the run built or pulled.
    None,
    /// Keep base images.
    Base,
    /// Keep base and env images.
    #[default]
    Env,
    /// Keep everything, instance images included: the fastest reruns.
    Instance,
}

/// A clap enum and the library enum it stands for, variant for variant:
/// `From` both ways (the command line into the engine's options, a
/// run.json's setting back under the flags), from the one list.
macro_rules! same_values {
    ($arg:ident <=> $lib:ident { $($v:ident),* $(,)? }) => {
        impl From<$arg> for $lib {
            fn from(a: $arg) -> $lib {
                match a {
                    $($arg::$v => $lib::$v,)*
                }
            }
        }

        impl From<$lib> for $arg {
            fn from(l: $lib) -> $arg {
                match l {
                    $($lib::$v => $arg::$v,)*
                }
            }
        }
    };
}

same_values!(BackendArg <=> BackendChoice { Auto, Docker, Local, Swarm });
same_values!(CacheLevelArg <=> CacheLevel { None, Base, Env, Instance });
same_values!(EvalScriptArg <=> ScriptSource { Spec, Dataset });

impl DockerArgs {
    pub fn options(&self) -> DockerOptions {
        DockerOptions {
            namespace: self.namespace.clone(),
            instance_image_tag: self.instance_image_tag.clone(),
            base_image: self.base_image.clone(),
            ca_cert: self.ca_cert.clone(),
            cache_level: self.cache_level.map(CacheLevel::from),
            cache_budget: self.cache_budget.clone(),
            clean: self.clean,
            shelve: self.shelve,
            force_rebuild: self.force_rebuild,
            memory: self.memory.clone(),
            cpus: self.cpus,
            pids_limit: self.pids_limit,
            build_timeout: self.build_timeout,
            python_dirs: self.python_dirs.clone(),
        }
    }
}

impl EngineArgs {
    /// The engine's options, as given.
    pub fn options(&self) -> EngineOptions {
        EngineOptions {
            backend: self.backend.into(),
            max_workers: self.max_workers,
            timeout: Duration::from_secs(self.timeout),
            log_dir: self.log_dir.clone(),
            force: self.force,
            sandbox: !self.no_sandbox,
            docker: self.docker.options(),
            swarm: SwarmOptions {
                registry: self.swarm.registry.clone(),
            },
            eval_script: self.eval_script.into(),
            quiet: false,
            sources: Sources {
                specs: self.sources.specs.clone(),
                mirror_dir: self.sources.mirror_dir.clone(),
                repo_url_template: self.sources.repo_url_template.clone(),
                cache_dir: self.sources.cache_dir.clone(),
            },
        }
    }
}

fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
}
