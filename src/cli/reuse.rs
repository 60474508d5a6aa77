//! Reusing a run's setup: `audit --rerun`, `select` and `validate` evaluate
//! with what the run folder's run.json recorded (specs, mirrors, cache,
//! backend and its options) unless a flag on the command line says
//! otherwise; every such override is said on stderr.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, ValueEnum};

use super::engine_args::{BackendArg, CacheLevelArg, EngineArgs, EvalScriptArg};
use patchgrade::backend::BackendKind;
use patchgrade::engine::BackendChoice;
use patchgrade::python::find::PythonDir;
use patchgrade::rundir::RunSetup;

/// The arguments given on the command line (not defaults, not the
/// environment), by clap id (the field name).
#[derive(Debug, Default, Clone)]
pub struct Given(BTreeSet<String>);

impl Given {
    /// From the matches of the whole command line (the subcommand's args).
    pub fn from_matches(m: &ArgMatches) -> Given {
        let Some((_, sub)) = m.subcommand() else {
            return Given::default();
        };
        Given(
            sub.ids()
                .map(|id| id.as_str())
                .filter(|id| sub.value_source(id) == Some(ValueSource::CommandLine))
                .map(String::from)
                .collect(),
        )
    }

    pub fn has(&self, id: &str) -> bool {
        self.0.contains(id)
    }
}

/// A setting as the command line would spell it, for the messages.
trait Shown {
    fn shown(&self) -> String;
}

impl Shown for PathBuf {
    fn shown(&self) -> String {
        self.display().to_string()
    }
}

impl Shown for String {
    fn shown(&self) -> String {
        self.clone()
    }
}

impl<T: Shown> Shown for Option<T> {
    fn shown(&self) -> String {
        match self {
            Some(x) => x.shown(),
            None => "(none)".into(),
        }
    }
}

impl Shown for Vec<PythonDir> {
    fn shown(&self) -> String {
        if self.is_empty() {
            return "(none)".into();
        }
        let v: Vec<String> = self
            .iter()
            .map(|p| format!("{}={}", p.version, p.prefix.display()))
            .collect();
        v.join(" ")
    }
}

impl Shown for Vec<PathBuf> {
    fn shown(&self) -> String {
        if self.is_empty() {
            return "(none)".into();
        }
        let v: Vec<String> = self.iter().map(|p| p.shown()).collect();
        v.join(" ")
    }
}

macro_rules! shown_by_display {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
shown_by_display!(bool, u64, i64, f64);

macro_rules! shown_by_value_enum {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                self.to_possible_value()
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default()
            }
        }
    )*};
}
shown_by_value_enum!(BackendArg, CacheLevelArg, EvalScriptArg);

/// One setting: run.json's value when the flag was not given, else the
/// command line's, said on stderr when it differs from run.json's.
struct Merge<'a> {
    given: &'a Given,
    source: &'a Path,
    reused: Vec<String>,
}

impl Merge<'_> {
    fn take<T: PartialEq + Shown>(
        &mut self,
        id: &str,
        flag: &str,
        own: &mut T,
        recorded: Option<T>,
    ) {
        let Some(recorded) = recorded else { return };
        if self.given.has(id) {
            if *own != recorded {
                eprintln!(
                    "using {flag} {} from the command line instead of run.json's {} ({})",
                    own.shown(),
                    recorded.shown(),
                    self.source.display()
                );
            }
        } else {
            if *own != recorded {
                self.reused.push(format!("{flag} {}", recorded.shown()));
            }
            *own = recorded;
        }
    }
}

impl EngineArgs {
    /// These arguments with the recorded setup of `source` (a run.json)
    /// filling every flag the command line did not give.
    pub fn over_setup(&self, setup: Option<&RunSetup>, given: &Given, source: &Path) -> EngineArgs {
        let mut a = self.clone();
        let Some(s) = setup else {
            return a;
        };
        let mut m = Merge {
            given,
            source,
            reused: Vec::new(),
        };
        m.take(
            "specs",
            "--specs",
            &mut a.sources.specs,
            Some(s.specs.clone()),
        );
        m.take(
            "mirror_dir",
            "--mirror-dir",
            &mut a.sources.mirror_dir,
            s.mirror_dir.clone().map(Some),
        );
        m.take(
            "repo_url_template",
            "--repo-url-template",
            &mut a.sources.repo_url_template,
            s.repo_url_template.clone(),
        );
        m.take(
            "cache_dir",
            "--cache-dir",
            &mut a.sources.cache_dir,
            s.cache_dir.clone().map(Some),
        );
        // A swarm run is not evaluated on the swarm again unless asked:
        // run.json does not record the registry it needs (`--registry`).
        let backend = match s.backend {
            Some(BackendKind::Swarm) if !given.has("backend") => {
                eprintln!(
                    "not reusing run.json's --backend swarm ({}): it does not record the registry; using --backend {} (give --backend swarm --registry HOST:PORT to evaluate on the swarm)",
                    source.display(),
                    a.backend.shown()
                );
                None
            }
            other => other.map(|b| BackendArg::from(BackendChoice::from(b))),
        };
        m.take("backend", "--backend", &mut a.backend, backend);
        m.take(
            "no_sandbox",
            "--no-sandbox",
            &mut a.no_sandbox,
            s.sandbox.map(|x| !x),
        );
        m.take("timeout", "--timeout", &mut a.timeout, s.timeout_secs);
        let script = s.eval_script.map(EvalScriptArg::from);
        m.take("eval_script", "--eval-script", &mut a.eval_script, script);
        if let Some(d) = &s.docker {
            let o = &mut a.docker;
            m.take(
                "namespace",
                "--namespace",
                &mut o.namespace,
                Some(d.namespace.clone()),
            );
            m.take(
                "instance_image_tag",
                "--instance-image-tag",
                &mut o.instance_image_tag,
                Some(d.instance_image_tag.clone()),
            );
            m.take(
                "base_image",
                "--base-image",
                &mut o.base_image,
                Some(d.base_image.clone()),
            );
            m.take(
                "ca_cert",
                "--ca-cert",
                &mut o.ca_cert,
                Some(d.ca_cert.clone()),
            );
            let level = d.cache_level.map(CacheLevelArg::from);
            m.take(
                "cache_level",
                "--cache-level",
                &mut o.cache_level,
                Some(level),
            );
            let dirs: Option<Vec<PythonDir>> = d
                .python_dirs
                .iter()
                .map(|s| PythonDir::parse(s).ok())
                .collect();
            m.take("python_dirs", "--python-dir", &mut o.python_dirs, dirs);
            m.take(
                "cache_budget",
                "--cache-budget",
                &mut o.cache_budget,
                Some(d.cache_budget.clone()),
            );
            m.take("shelve", "--shelve", &mut o.shelve, Some(d.shelve));
            m.take("memory", "--memory", &mut o.memory, Some(d.memory.clone()));
            m.take("cpus", "--cpus", &mut o.cpus, Some(d.cpus));
            m.take(
                "pids_limit",
                "--pids-limit",
                &mut o.pids_limit,
                Some(d.pids_limit),
            );
            m.take(
                "build_timeout",
                "--build-timeout",
                &mut o.build_timeout,
                Some(d.build_timeout_secs),
            );
        }
        if !m.reused.is_empty() {
            eprintln!(
                "using the setup {} recorded: {}",
                source.display(),
                m.reused.join(", ")
            );
        }
        a
    }
}
