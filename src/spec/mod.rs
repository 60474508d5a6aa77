//! Per-repository environment and test specs (YAML), keyed by version.
//!
//! A spec file names one repository and maps versions (or `"*"`) to a
//! [`Spec`]. A `defaults:` section is merged under every version so that the
//! many identical versions of a repo are written once. Unknown keys are an
//! error: a misspelt `pip_pakages` silently ignored would build the wrong
//! environment and give wrong verdicts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::parse::LogParser;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("failed to read spec {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("spec {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("spec {path}, version {version:?}: {reason}")]
    Version {
        path: PathBuf,
        version: String,
        reason: String,
    },
    #[error("no spec for {repo} version {version:?} (known repos: {known}); add one with --specs")]
    Missing {
        repo: String,
        version: String,
        known: String,
    },
    #[error(
        "instance {instance}: log_parser {name:?} is not a parser patchgrade knows ({reason})"
    )]
    InstanceParser {
        instance: String,
        name: String,
        reason: String,
    },
    /// The reference's parser picks its parser by the instance and has none
    /// for this one (it raises `ValueError: Unknown instance id`).
    #[error("instance {instance}: the reference's parse_log_{parser} has no parser for this instance id")]
    InstanceDispatch { instance: String, parser: LogParser },
}

/// How the test files named in the test patch become runner arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TestDirectives {
    /// Paths as they are (pytest, sympy's bin/test, most runners).
    #[default]
    #[serde(alias = "pytest", alias = "sympy")]
    Paths,
    /// Django's runtests.py labels: `tests/foo/tests.py` -> `foo.tests`.
    Django,
    /// Run `test_cmd` alone (cargo test, go test ./...).
    None,
}

/// A tree of another repository, by commit, from the mirrors.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SourceTree {
    /// `owner/name`, found in `--mirror-dir` like the instances' repos.
    pub repo: String,
    /// Full commit id (a tag can move; a commit cannot).
    pub commit: String,
}

/// How a repository's snapshot images are cut from its history
/// (`backend::docker::images::snapshot`): base commits of one window share
/// a snapshot, and the snapshots of the windows of one chain are each built
/// over the one before, holding only what changed. Shorter windows make
/// smaller instance images (less changed since the snapshot); chains keep
/// the many snapshots that makes from each holding a whole tree.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRule {
    /// Days per window (calendar-aligned from the Unix epoch).
    pub window_days: u32,
    /// Windows per chain (aligned the same way): 1 makes every snapshot a
    /// whole tree; n makes a snapshot over the previous window's snapshot
    /// when both lie in one span of n windows, so a cold build of one
    /// instance builds at most n snapshots.
    pub chain: u32,
}

/// A git repository that the build fetches by URL (a Cargo git
/// dependency), served from a mirror: the history up to `commit` is put in
/// the env image as a bare repository and git is told to fetch `url` from
/// there, so the lock file stays as the repository wrote it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GitSource {
    /// The URL exactly as the build asks for it (the lock file's spelling:
    /// `https://github.com/salsa-rs/salsa.git`), rewritten whole.
    pub url: String,
    /// `owner/name`, found in `--mirror-dir`.
    pub repo: String,
    /// Full commit id the lock file pins.
    pub commit: String,
    /// The branch the dependency names (`?branch=main`), pointed at
    /// `commit`; without one the served repository's only branch is
    /// `patchgrade`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// A file the instance image writes into the repository before
/// `pre_install`, from `images/fixtures/<name>` (or a `fixtures/` folder
/// beside a `--specs` file): what the reference writes from its own
/// fixtures (a pinned Cargo.lock where the repository commits none). Named
/// in YAML; its content (read when the spec is loaded) is part of the
/// spec's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixture {
    pub name: String,
    pub content: String,
}

impl Serialize for Fixture {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let digest = hex(&Sha256::digest(self.content.as_bytes()));
        (&self.name, digest).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Fixture {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Fixture {
            name: String::deserialize(d)?,
            content: String::new(),
        })
    }
}

/// The files under images/fixtures/, embedded like the specs.
const BUILTIN_FIXTURES: &[(&str, &str)] =
    include!(concat!(env!("OUT_DIR"), "/builtin_fixtures.rs"));

/// The content of fixture `name` for the spec file at `spec_path`: a
/// `--specs` file's own `fixtures/` folder (beside it, or beside its
/// folder), else the built-in ones.
fn fixture_text(spec_path: &Path, builtin: bool, name: &str) -> Result<String, String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name != "."
        && name != "..";
    if !plain {
        return Err(format!("fixture {name:?} is not a plain file name"));
    }
    if !builtin {
        let dir = spec_path.parent().unwrap_or(Path::new("."));
        for cand in [
            dir.join("fixtures").join(name),
            dir.join("../fixtures").join(name),
        ] {
            if let Ok(t) = std::fs::read_to_string(&cand) {
                return Ok(t);
            }
        }
    }
    BUILTIN_FIXTURES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t.to_string())
        .ok_or_else(|| {
            format!("fixture {name:?} is neither in images/fixtures nor beside the spec")
        })
}

/// Where the env image keeps the spec's `sources`.
pub const SOURCES_DIR: &str = "/opt/patchgrade/sources";
/// Where the env image keeps the spec's `git_sources`, one bare repository
/// each.
pub const GIT_SOURCES_DIR: &str = "/opt/patchgrade/git";

/// The environment and test recipe for one (repo, version).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Python version, e.g. "3.9". Absent: the runner needs no Python env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// Toolchains by language (`rust: "1.81"`, `go: "1.23.8"`, `node: "20"`,
    /// `java: "17"`), resolved by [`crate::toolchain`] and installed in the
    /// toolchain image between base and env; an unknown language is an
    /// error.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toolchains: BTreeMap<crate::toolchain::Language, String>,
    #[serde(default)]
    pub apt_packages: Vec<String>,
    /// Debian packages installed in an image of their own below the
    /// interpreter (the apt base), so that env images naming the same list
    /// share it whatever their Python and other packages (matplotlib's TeX
    /// Live: 1.5 GB, which 3.1-3.4 on Python 3.8 and 3.5-3.9 on 3.11 install
    /// with different extras). The env holds both lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apt_base_packages: Vec<String>,
    #[serde(default)]
    pub pip_packages: Vec<String>,
    /// Exact pins (`name==version`) installed without their dependencies in
    /// an image of their own between the interpreter and the env (the pip
    /// base), so that env images naming the same list on the same Python
    /// share it (xarray's four envs: 113 of their ~120 packages, 0.9 GB
    /// each). The env's own resolve runs over it and keeps what satisfies
    /// it, as pip does with installed packages. Exact, so that the base
    /// never drifts with the index: the list is what the envs resolved to
    /// (`harness-scripts/pip-base.py`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip_base_packages: Vec<String>,
    /// Requirements file path in the repo at `environment_setup_commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<String>,
    /// A conda environment file in the repo at `environment_setup_commit`,
    /// translated by rule into pip requirements and Debian packages
    /// ([`crate::conda`]) and installed in one resolve with `pip_packages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_yml: Option<String>,
    /// The reference's conda `packages` string, as a list of conda match
    /// specs: translated like an environment file's entries and installed
    /// in a pip step of their own before everything else, as conda installs
    /// them before pip runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conda_packages: Vec<String>,
    /// conda packages of `environment_yml` left out (the spec says why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conda_skip: Vec<String>,
    /// Source trees read from mirrors (never downloaded), put at
    /// `/opt/patchgrade/sources/<name>` in the env image for `pre_install`
    /// to use: what the reference downloads from sites other than a
    /// package registry (matplotlib's FreeType and Qhull tarballs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, SourceTree>,
    /// Git repositories the build fetches (Cargo's git dependencies on
    /// GitHub, not reachable here), served from mirrors: name -> source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub git_sources: BTreeMap<String, GitSource>,
    /// Submodules filled from mirrors: path in the repository -> the
    /// `owner/name` whose mirror holds the commit the base tree records
    /// there (what a recursive clone, or a build's own `git submodule
    /// update`, would put there; otherwise a submodule is an empty folder).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub submodules: BTreeMap<String, String>,
    /// Files of the repository that a mirror may lack (snapshots leave out
    /// files of 4 MiB or more) and that no build step or test reads: when
    /// the mirror lacks one's content, the image's tree leaves it out
    /// instead of failing (a listed deviation); a mirror that has it gives
    /// it as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent_files: Vec<String>,
    /// Files written into the checkout before `pre_install`: path in the
    /// repository -> fixture name ([`Fixture`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, Fixture>,
    /// Shell commands run in the checkout before `install`.
    #[serde(default)]
    pub pre_install: Vec<String>,
    /// Whether the repository's snapshot images run `pre_install` and
    /// `install` too, through a compiler cache kept in the snapshot: the
    /// instance images over one then find the dependencies installed and
    /// compile through the cache, from their own clean tree
    /// (`backend::docker::images::setup`; docs/verified.md "Cold start").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot_build: bool,
    /// How the repository's snapshot images are cut from its history
    /// (default: 91-day windows, each snapshot a whole tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<SnapshotRule>,
    /// Variables the image setup sets to the machine's core count (`nproc`)
    /// for a build that reads its parallelism from one (numpy.distutils'
    /// `NPY_NUM_BUILD_JOBS`): the same output from every core. A snapshot
    /// build is otherwise one process while the other workers wait for it.
    /// Neither the image's environment nor the tests see them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_jobs: Vec<String>,
    /// Shell command that installs the checkout into the env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    /// What the eval script runs to put the candidate's code into the env
    /// before the tests. Default: derived from `install` (see
    /// [`Spec::eval_install`]); `""` turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_install: Option<String>,
    /// Shell commands run in the eval script before the tests.
    #[serde(default)]
    pub eval_commands: Vec<String>,
    /// Shell command run in the eval script after the test patch is
    /// applied, before the tests (the reference's `build`): what compiles
    /// the tests themselves (a C++ test binary), which `eval_install`, run
    /// before the test patch, would leave stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    pub test_cmd: String,
    pub log_parser: LogParser,
    #[serde(default)]
    pub test_directives: TestDirectives,
    /// Whether the test run may use the network (default: no).
    #[serde(default)]
    pub network: bool,
    /// Set when this environment cannot be built on this machine, saying
    /// why (a package registry it needs is not reachable): its evaluations
    /// end `environment_build_failed` with this reason, before any build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Without network: route every non-local address to nowhere, so that a
    /// connection attempt times out (as on a host whose packets are dropped)
    /// instead of failing at once with "network unreachable". Tests that
    /// expect an unroutable address to time out need it (psf/requests'
    /// connect-timeout tests use 10.255.255.1).
    #[serde(default)]
    pub blackhole_routes: bool,
    /// Extra environment for the test run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl Spec {
    /// Content hash: anything that changes what the env or the eval script
    /// does changes this, which keys both env caches and result caches.
    pub fn hash(&self) -> String {
        let canon = serde_json::to_vec(self).expect("spec serialises");
        hex(&Sha256::digest(canon))[..16].to_string()
    }

    /// The install step of the eval script. The reference re-runs `install`
    /// in every evaluation (seconds each). An editable install already points
    /// at the tree, so re-running it is skipped (exact for pure-Python code;
    /// a spec whose editable install builds extensions sets `eval_install`).
    /// Any other pip install is re-run offline, so the tests import the
    /// candidate's code and never the copy installed at setup.
    pub fn eval_install(&self) -> Option<String> {
        if let Some(explicit) = &self.eval_install {
            return (!explicit.trim().is_empty()).then(|| explicit.clone());
        }
        let install = self.install.as_deref()?.trim();
        if editable(install) {
            return None;
        }
        if self.derived_reinstall() {
            return Some(format!(
                "{install} --no-deps --no-build-isolation --no-index"
            ));
        }
        Some(install.to_string())
    }

    /// Whether the eval's install step is the derived offline reinstall of a
    /// single non-editable `pip install` (no explicit `eval_install`): the
    /// one case where copying the changed files can stand in for it (see
    /// `script::install_step`).
    pub fn derived_reinstall(&self) -> bool {
        let Some(install) = self.install.as_deref().map(str::trim) else {
            return false;
        };
        let words: Vec<&str> = install.split_whitespace().collect();
        self.eval_install.is_none()
            && !editable(install)
            && words.windows(2).any(|w| w == ["pip", "install"])
            && !install.contains("&&")
            && !install.contains(';')
    }

    /// Whether the env needs more than the interpreter itself.
    pub fn needs_env(&self) -> bool {
        !self.pip_packages.is_empty()
            || !self.pip_base_packages.is_empty()
            || self.requirements.is_some()
            || self.environment_yml.is_some()
            || !self.conda_packages.is_empty()
            || self.install.is_some()
    }
}

fn editable(install: &str) -> bool {
    install
        .split_whitespace()
        .any(|w| w == "-e" || w == "--editable" || w.starts_with("--editable="))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    repo: String,
    #[serde(default)]
    defaults: Option<serde_json::Map<String, Value>>,
    versions: BTreeMap<String, serde_json::Map<String, Value>>,
}

/// A spec with where it came from (for error messages and reports).
#[derive(Debug, Clone)]
pub struct ResolvedSpec {
    pub spec: Spec,
    pub source: PathBuf,
    pub version_key: String,
}

/// The environment variable that gives setuptools_scm the version a
/// one-commit repository (no tags) cannot tell it.
pub const PRETEND_VERSION: &str = "SETUPTOOLS_SCM_PRETEND_VERSION";

impl ResolvedSpec {
    /// The upstream's version (from the base's tags) for setuptools_scm,
    /// unless the spec sets one: part of the environment, so the instance
    /// image of `run` and of `review` is the same.
    pub fn pretend_version(&mut self, version: String) {
        self.spec
            .env
            .entry(PRETEND_VERSION.into())
            .or_insert(version);
    }
}

impl Spec {
    /// The spec as a setup at another commit runs it (a snapshot's older
    /// tree): the version it pretends, when it pretends one, is that
    /// commit's upstream version, so the instances of every base commit
    /// over one snapshot share it.
    pub fn at_version(&self, version: Option<String>) -> Spec {
        let mut s = self.clone();
        if let (Some(v), Some(slot)) = (version, s.env.get_mut(PRETEND_VERSION)) {
            *slot = v;
        }
        s
    }
}

/// All specs known to a run: built-ins first, then `--specs` in order, later
/// files overriding earlier ones per (repo, version key).
#[derive(Debug, Default)]
pub struct SpecSet {
    by_repo: BTreeMap<String, BTreeMap<String, ResolvedSpec>>,
}

/// The specs under images/specs/, embedded at build time so the binary works
/// from any directory.
const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_specs.rs"));

impl SpecSet {
    pub fn builtin() -> Result<SpecSet, SpecError> {
        let mut set = SpecSet::default();
        for (name, text) in BUILTIN {
            set.add_text(Path::new(&format!("images/specs/{name}")), text, true)?;
        }
        Ok(set)
    }

    /// Add a spec file, or every `.yaml`/`.yml` file in a folder (sorted).
    pub fn add_path(&mut self, path: &Path) -> Result<(), SpecError> {
        let read_err = |source| SpecError::Read {
            path: path.to_owned(),
            source,
        };
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(read_err)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
                .collect();
            files.sort();
            for f in files {
                self.add_path(&f)?;
            }
            return Ok(());
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        self.add_text(path, &text, false)
    }

    fn add_text(&mut self, path: &Path, text: &str, builtin: bool) -> Result<(), SpecError> {
        let invalid = |reason: String| SpecError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let file: SpecFile = serde_yaml_ng::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if !file.repo.contains('/') {
            return Err(invalid(format!("repo {:?} is not owner/name", file.repo)));
        }
        let entry = self.by_repo.entry(file.repo.clone()).or_default();
        for (version, fields) in file.versions {
            let mut merged = file.defaults.clone().unwrap_or_default();
            merged.extend(fields);
            let mut spec: Spec =
                serde_json::from_value(Value::Object(merged)).map_err(|e| SpecError::Version {
                    path: path.to_owned(),
                    version: version.clone(),
                    reason: e.to_string(),
                })?;
            for (file, fixture) in spec.files.iter_mut() {
                fixture.content = fixture_text(path, builtin, &fixture.name).map_err(|reason| {
                    SpecError::Version {
                        path: path.to_owned(),
                        version: version.clone(),
                        reason: format!("files: {file}: {reason}"),
                    }
                })?;
            }
            spec.check_trees()
                .and_then(|()| spec.check_build_jobs())
                .and_then(|()| spec.check_pip_base())
                .and_then(|()| spec.check_snapshots())
                .map_err(|reason| SpecError::Version {
                    path: path.to_owned(),
                    version: version.clone(),
                    reason,
                })?;
            // One key may name several versions that share a spec: "1.0 1.1".
            for v in version.split([' ', ',']).filter(|v| !v.is_empty()) {
                entry.insert(
                    v.to_string(),
                    ResolvedSpec {
                        spec: spec.clone(),
                        source: path.to_owned(),
                        version_key: v.to_string(),
                    },
                );
            }
        }
        Ok(())
    }

    /// The spec for a repo and version: the exact version, else `"*"`.
    pub fn lookup(&self, repo: &str, version: &str) -> Result<&ResolvedSpec, SpecError> {
        self.by_repo
            .get(repo)
            .and_then(|m| m.get(version).or_else(|| m.get("*")))
            .ok_or_else(|| SpecError::Missing {
                repo: repo.to_string(),
                version: version.to_string(),
                known: self.by_repo.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The spec an instance runs with: its repository and version's, with
    /// the log parser the instance itself names when it carries a
    /// `log_parser` field (the reference's current datasets do, e.g.
    /// `parse_log_django`), resolved for the instance when the reference
    /// picks the parser by instance (`LogParser::for_instance`). The parser
    /// is part of the spec's hash, so a result graded with another parser is
    /// not reused.
    pub fn for_instance(
        &self,
        inst: &crate::dataset::Instance,
    ) -> Result<std::borrow::Cow<'_, ResolvedSpec>, SpecError> {
        let rs = self.lookup(&inst.repo, &inst.version)?;
        let named = match inst.extra.get("log_parser").and_then(Value::as_str) {
            Some(name) => name.parse().map_err(|e: crate::parse::UnknownParser| {
                SpecError::InstanceParser {
                    instance: inst.instance_id.clone(),
                    name: name.to_string(),
                    reason: e.to_string(),
                }
            })?,
            None => rs.spec.log_parser,
        };
        // A parser the reference picks by instance (parse_log_immutable_js)
        // is resolved here, so grading reads the log with the concrete one.
        let parser = named
            .for_instance(&inst.instance_id, &inst.version)
            .map_err(|_| SpecError::InstanceDispatch {
                instance: inst.instance_id.clone(),
                parser: named,
            })?;
        if parser == rs.spec.log_parser {
            return Ok(std::borrow::Cow::Borrowed(rs));
        }
        let mut own = rs.clone();
        own.spec.log_parser = parser;
        Ok(std::borrow::Cow::Owned(own))
    }

    pub fn repos(&self) -> impl Iterator<Item = &str> {
        self.by_repo.keys().map(String::as_str)
    }
}

mod checks;
#[cfg(test)]
mod tests;
