//! The Python provider chain: which interpreter an image gets for a spec's
//! `python: "X.Y"`, and the pip/setuptools/wheel its venv gets.
//!
//! In order:
//! 1. bookworm's own `python3.11` for 3.11;
//! 2. a CPython build found on the host ([`find`]): `--python-dir
//!    X.Y=PATH` entries, then uv's managed interpreters, then pyenv's
//!    `versions/` folder. It is copied into a bookworm image at the path it
//!    has on the host: pyenv's builds are not relocatable (built
//!    `--enable-shared` with a runpath to their own prefix, linked against
//!    bookworm's libssl3, libffi8 and glibc 2.36);
//! 3. otherwise another suite's own python3 (bullseye 3.9, trixie 3.13).
//!
//! So with host builds every python image shares bookworm's root and base.
//!
//! The result is a typed [`Interpreter`], recorded in image labels and
//! run.json. Pure sync code apart from the host search reading folders.

pub mod find;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::debian::Suite;
pub use find::{HostPython, HostSearch, PythonDir};

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("Python version {value:?}: expected MAJOR.MINOR, such as 3.6")]
    BadVersion { value: String },
    #[error("Python {version} is not supported in images (3.6 and newer are)")]
    Unsupported { version: PyVersion },
    #[error(
        "no Python {version} for the image: no Debian suite ships it (bullseye has 3.9, \
         bookworm 3.11, trixie 3.13) and no CPython {version} build was found on this host \
         (searched: {searched}). Install one built on Debian bookworm (`pyenv install {version}`), \
         or pass --python-dir {version}=PREFIX"
    )]
    NotFound {
        version: PyVersion,
        searched: String,
    },
    #[error("--python-dir {arg:?}: {reason}")]
    BadPythonDir { arg: String, reason: String },
    #[error("reading the interpreter at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A Python version as specs write it: `MAJOR.MINOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PyVersion {
    pub major: u32,
    pub minor: u32,
}

impl PyVersion {
    pub const fn new(major: u32, minor: u32) -> PyVersion {
        PyVersion { major, minor }
    }

    pub fn parse(s: &str) -> Result<PyVersion, PythonError> {
        let bad = || PythonError::BadVersion {
            value: s.to_string(),
        };
        let (a, b) = s.trim().split_once('.').ok_or_else(bad)?;
        let num = |t: &str| {
            (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
                .then(|| t.parse::<u32>().ok())
                .flatten()
        };
        match (num(a), num(b)) {
            (Some(major), Some(minor)) => Ok(PyVersion { major, minor }),
            _ => Err(bad()),
        }
    }

    /// `pythonX.Y`, the executable name in `bin/`.
    pub fn exe_name(self) -> String {
        format!("python{self}")
    }
}

impl fmt::Display for PyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Where an image's interpreter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// The Debian suite's own python3.
    Suite,
    /// A `--python-dir X.Y=PATH` entry.
    PythonDir,
    /// One of uv's managed interpreters.
    Uv,
    /// A build in pyenv's `versions/` folder.
    Pyenv,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Suite => "debian-suite",
            Provider::PythonDir => "python-dir",
            Provider::Uv => "uv",
            Provider::Pyenv => "pyenv",
        }
    }
}

/// The packaging tools a venv gets, pinned per Python version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tools {
    pub pip: &'static str,
    pub setuptools: &'static str,
    pub wheel: &'static str,
}

impl Tools {
    /// The `pip install` arguments that pin them.
    pub fn requirements(&self) -> [String; 3] {
        [
            format!("pip=={}", self.pip),
            format!("setuptools=={}", self.setuptools),
            format!("wheel=={}", self.wheel),
        ]
    }
}

/// The newest toolset used anywhere: the 3.8 line. pip 25.1 dropped the
/// legacy `setup.py develop` fallback that the reference's pip (24) used for
/// build backends without PEP 660 (pylint 2.14/2.15 pin setuptools~=62.6);
/// setuptools and wheel are held to the same months (late 2024, the era of
/// the reference's images), so every env from 3.8 up installs with one
/// toolset.
pub const TOOLS_CAP: Tools = Tools {
    pip: "25.0.1",
    setuptools: "75.3.4",
    wheel: "0.45.1",
};

/// pip, setuptools and wheel for a Python version, by rule: each tool's last
/// release whose `Requires-Python` admits the version, never newer than
/// [`TOOLS_CAP`]. The table is that rule evaluated on PyPI's metadata
/// (`pip index versions pip --python-version 3.6`); tests/python_images.rs
/// re-derives it from PyPI. None: older than 3.6, which no image supports.
pub fn tools_for(v: PyVersion) -> Option<Tools> {
    match (v.major, v.minor) {
        (3, 6) => Some(Tools {
            pip: "21.3.1",
            setuptools: "59.6.0",
            wheel: "0.37.1",
        }),
        (3, 7) => Some(Tools {
            pip: "24.0",
            setuptools: "68.0.0",
            wheel: "0.42.0",
        }),
        (3, m) if m >= 8 => Some(TOOLS_CAP),
        _ => None,
    }
}

/// A version run on another one, by rule (listed in docs/specs.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Substitution {
    pub from: PyVersion,
    pub to: PyVersion,
    pub note: &'static str,
}

/// Python 3.5 runs on 3.6. No 3.5 build can exist here: 3.5 predates
/// OpenSSL 1.1/3 support and bookworm has only libssl3. The Verified
/// instances whose spec says 3.5 are django 1.11 and 2.2, which support 3.6
/// too (the reference's own 3.5 env is a conda build).
pub const SUBSTITUTIONS: [Substitution; 1] = [Substitution {
    from: PyVersion::new(3, 5),
    to: PyVersion::new(3, 6),
    note: "spec says 3.5, runs on 3.6: no CPython 3.5 builds against bookworm's OpenSSL 3; \
           django 1.11 and 2.2 (the Verified instances on 3.5) support 3.6",
}];

/// The version actually provided for `requested`, with the rule applied.
pub fn substitute(requested: PyVersion) -> (PyVersion, Option<&'static Substitution>) {
    match SUBSTITUTIONS.iter().find(|s| s.from == requested) {
        Some(s) => (s.to, Some(s)),
        None => (requested, None),
    }
}

/// The Debian suite that ships `v` as its python3, if one does.
pub fn suite_shipping(v: PyVersion) -> Option<Suite> {
    let want = v.to_string();
    Suite::ALL.into_iter().find(|s| s.python() == want)
}

/// The suite host builds are copied into: the one pyenv's builds here were
/// made on (their libssl3, libffi8 and glibc 2.36 are bookworm's).
pub const HOST_BUILD_SUITE: Suite = Suite::Bookworm;

/// The interpreter an image gets for a spec's Python version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    /// What the spec asked for.
    pub requested: PyVersion,
    /// What runs (differs only by a [`Substitution`]).
    pub version: PyVersion,
    pub provider: Provider,
    /// The Debian suite of the image.
    pub suite: Suite,
    /// The full release (`3.6.15`) where known before the build.
    pub release: Option<String>,
    /// The host folder copied into the image; None for a suite's python3.
    pub host_prefix: Option<PathBuf>,
    /// The interpreter's path inside the image.
    pub executable: PathBuf,
    pub tools: Tools,
    pub substitution: Option<&'static Substitution>,
}

impl Interpreter {
    /// Whether the image gets files copied from the host.
    pub fn is_copied(&self) -> bool {
        self.host_prefix.is_some()
    }

    /// One line for records: version, release, provider and where from.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "python {} ({}",
            self.release.as_deref().unwrap_or(&self.version.to_string()),
            self.provider.name()
        );
        match &self.host_prefix {
            Some(p) => s.push_str(&format!(" {}", p.display())),
            None => s.push_str(&format!(" {}", self.suite.name())),
        }
        s.push(')');
        if let Some(sub) = self.substitution {
            s.push_str(&format!("; spec says {}, runs on {}", sub.from, sub.to));
        }
        s
    }

    /// Labels of the python image (`patchgrade.python.*`), sorted: what
    /// the interpreter is, not who asked for it, so a spec saying 3.5 shares
    /// the 3.6 image.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(format!("patchgrade.python.{k}"), v);
        };
        put("version", self.version.to_string());
        put("provider", self.provider.name().into());
        put("suite", self.suite.name().into());
        put("executable", self.executable.display().to_string());
        put("pip", self.tools.pip.into());
        put("setuptools", self.tools.setuptools.into());
        put("wheel", self.tools.wheel.into());
        if let Some(r) = &self.release {
            put("release", r.clone());
        }
        if let Some(p) = &self.host_prefix {
            put("host_prefix", p.display().to_string());
        }
        m
    }

    /// Labels of the env image: the version the spec asked for, and the
    /// deviation when another one runs.
    pub fn request_labels(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert(
            "patchgrade.python.requested".to_string(),
            self.requested.to_string(),
        );
        if let Some(s) = self.substitution {
            m.insert("patchgrade.python.deviation".to_string(), s.note.into());
        }
        m
    }

    /// The same facts, for run.json.
    pub fn record(&self) -> InterpreterRecord {
        InterpreterRecord {
            requested: self.requested.to_string(),
            version: self.version.to_string(),
            release: self.release.clone(),
            provider: self.provider.name().to_string(),
            suite: self.suite.name().to_string(),
            host_prefix: self.host_prefix.clone(),
            executable: self.executable.clone(),
            pip: self.tools.pip.to_string(),
            setuptools: self.tools.setuptools.to_string(),
            wheel: self.tools.wheel.to_string(),
            deviation: self.substitution.map(|s| s.note.to_string()),
        }
    }
}

/// An interpreter a run used, as run.json records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InterpreterRecord {
    pub requested: String,
    pub version: String,
    pub release: Option<String>,
    pub provider: String,
    pub suite: String,
    pub host_prefix: Option<PathBuf>,
    pub executable: PathBuf,
    pub pip: String,
    pub setuptools: String,
    pub wheel: String,
    pub deviation: Option<String>,
}

/// The provider chain: the interpreter for a spec's `python` value.
///
/// [`HOST_BUILD_SUITE`]'s own python3 first, then a host build (copied into
/// that suite), then another suite's python3: every python image then sits
/// on one Debian root and one base image where the host has the builds,
/// instead of a second suite's pair for 3.9 (bullseye, 0.64 GiB and a
/// debootstrap in a cold run) or 3.13 (trixie).
pub fn resolve(requested: &str, search: &HostSearch) -> Result<Interpreter, PythonError> {
    let requested = PyVersion::parse(requested)?;
    let (version, substitution) = substitute(requested);
    let tools = tools_for(version).ok_or(PythonError::Unsupported { version })?;
    let suite_python = |suite: Suite| Interpreter {
        requested,
        version,
        provider: Provider::Suite,
        suite,
        release: None,
        host_prefix: None,
        executable: PathBuf::from("/usr/bin").join(version.exe_name()),
        tools,
        substitution,
    };
    let shipped = suite_shipping(version);
    if shipped == Some(HOST_BUILD_SUITE) {
        return Ok(suite_python(HOST_BUILD_SUITE));
    }
    if let Some(host) = search.find(version)? {
        return Ok(Interpreter {
            requested,
            version,
            provider: host.provider,
            suite: HOST_BUILD_SUITE,
            release: host.release,
            executable: host.prefix.join("bin").join(version.exe_name()),
            host_prefix: Some(host.prefix),
            tools,
            substitution,
        });
    }
    match shipped {
        Some(suite) => Ok(suite_python(suite)),
        None => Err(PythonError::NotFound {
            version,
            searched: search.describe(version),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        let v = PyVersion::parse(" 3.10 ").unwrap();
        assert_eq!(v, PyVersion::new(3, 10));
        assert_eq!(v.to_string(), "3.10");
        assert_eq!(v.exe_name(), "python3.10");
        assert!(PyVersion::new(3, 9) < v);
        for bad in ["3", "3.", "three.six", "3.6.15", "", "-3.6", "3.+6"] {
            let e = PyVersion::parse(bad).unwrap_err().to_string();
            assert!(e.contains("MAJOR.MINOR"), "{bad}: {e}");
        }
    }

    #[test]
    fn tools_follow_the_rule() {
        let t = |s: &str| tools_for(PyVersion::parse(s).unwrap());
        assert_eq!(t("3.6").unwrap().pip, "21.3.1");
        assert_eq!(t("3.7").unwrap().pip, "24.0");
        assert_eq!(t("3.8").unwrap(), TOOLS_CAP);
        assert_eq!(t("3.13").unwrap(), TOOLS_CAP);
        assert!(t("3.5").is_none() && t("2.7").is_none());
        assert_eq!(
            t("3.6").unwrap().requirements(),
            ["pip==21.3.1", "setuptools==59.6.0", "wheel==0.37.1"]
        );
        // Older Pythons never get newer tools.
        let order = ["3.6", "3.7", "3.8", "3.9"].map(|v| t(v).unwrap());
        let key = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap()).collect() };
        for w in order.windows(2) {
            assert!(key(w[0].pip) <= key(w[1].pip));
            assert!(key(w[0].setuptools) <= key(w[1].setuptools));
            assert!(key(w[0].wheel) <= key(w[1].wheel));
        }
    }

    #[test]
    fn other_suites_only_without_a_host_build() {
        let empty = HostSearch {
            python_dirs: vec![],
            uv_dirs: vec![],
            pyenv_roots: vec![],
        };
        for (v, suite) in [
            ("3.9", Suite::Bullseye),
            ("3.11", Suite::Bookworm),
            ("3.13", Suite::Trixie),
        ] {
            let i = resolve(v, &empty).unwrap();
            assert_eq!((i.provider, i.suite), (Provider::Suite, suite));
            assert_eq!(i.executable, PathBuf::from(format!("/usr/bin/python{v}")));
            assert!(!i.is_copied());
        }
        let e = resolve("3.6", &empty).unwrap_err().to_string();
        assert!(
            e.contains("no Python 3.6")
                && e.contains("pyenv install 3.6")
                && e.contains("--python-dir 3.6=PREFIX"),
            "{e}"
        );
        // 3.5 is looked for as 3.6, and the error says so.
        let e = resolve("3.5", &empty).unwrap_err().to_string();
        assert!(e.contains("no Python 3.6"), "{e}");
        assert!(matches!(
            resolve("2.7", &empty),
            Err(PythonError::Unsupported { .. })
        ));
        assert!(matches!(
            resolve("3.x", &empty),
            Err(PythonError::BadVersion { .. })
        ));
    }

    /// A pyenv folder holding fake builds of `releases`, and the search of it.
    fn pyenv_with(releases: &[&str]) -> (tempfile::TempDir, HostSearch) {
        let d = tempfile::tempdir().unwrap();
        for r in releases {
            find::tests::fake_build(&d.path().join("pyenv/versions").join(r), r);
        }
        let search = HostSearch {
            python_dirs: vec![],
            uv_dirs: vec![],
            pyenv_roots: vec![d.path().join("pyenv")],
        };
        (d, search)
    }

    #[test]
    fn a_host_build_comes_before_another_suites_python() {
        let (_d, search) = pyenv_with(&["3.9.18", "3.11.7"]);
        // 3.9: the host's build on bookworm, not bullseye's python3.
        let i = resolve("3.9", &search).unwrap();
        assert_eq!((i.provider, i.suite), (Provider::Pyenv, Suite::Bookworm));
        assert_eq!(i.release.as_deref(), Some("3.9.18"));
        // 3.11: bookworm ships it, so the host's build is not copied.
        let i = resolve("3.11", &search).unwrap();
        assert_eq!((i.provider, i.suite), (Provider::Suite, Suite::Bookworm));
        assert!(!i.is_copied());
        // 3.13: no host build, so trixie's.
        let i = resolve("3.13", &search).unwrap();
        assert_eq!((i.provider, i.suite), (Provider::Suite, Suite::Trixie));
    }

    #[test]
    fn a_host_build_is_recorded_with_its_provider_and_deviation() {
        let (d, search) = pyenv_with(&["3.6.15"]);
        let i = resolve("3.5", &search).unwrap();
        assert_eq!(i.requested, PyVersion::new(3, 5));
        assert_eq!(i.version, PyVersion::new(3, 6));
        assert_eq!(i.provider, Provider::Pyenv);
        assert_eq!(i.suite, Suite::Bookworm);
        assert_eq!(i.release.as_deref(), Some("3.6.15"));
        let prefix = d.path().join("pyenv/versions/3.6.15");
        assert_eq!(i.host_prefix.as_deref(), Some(prefix.as_path()));
        assert_eq!(i.executable, prefix.join("bin/python3.6"));
        let labels = i.labels();
        assert_eq!(labels["patchgrade.python.provider"], "pyenv");
        assert_eq!(labels["patchgrade.python.pip"], "21.3.1");
        assert!(!labels.contains_key("patchgrade.python.requested"));
        let asked = i.request_labels();
        assert_eq!(asked["patchgrade.python.requested"], "3.5");
        assert!(asked["patchgrade.python.deviation"].contains("3.5"));
        assert!(
            i.describe().ends_with("; spec says 3.5, runs on 3.6"),
            "{}",
            i.describe()
        );
        let r = i.record();
        assert_eq!(r.version, "3.6");
        assert_eq!(r.release.as_deref(), Some("3.6.15"));
        assert_eq!(r.suite, "bookworm");
        assert!(r.deviation.as_deref().unwrap().contains("django 1.11"));
        // Without the substitution there is no deviation.
        let i = resolve("3.6", &search).unwrap();
        assert!(i.substitution.is_none() && i.record().deviation.is_none());
    }
}
