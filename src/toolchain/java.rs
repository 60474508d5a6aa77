//! Java: the JDK package of the image's Debian suite where the suite ships
//! that major version (bullseye 11 and 17, bookworm 17, trixie 21), else a
//! JDK on the host of that major version (`/usr/lib/jvm/*`, its `release`
//! file), else the next newer host JDK (Temurin 25 here), a listed
//! deviation. Maven is Debian's `maven` package, named in the spec's
//! `apt_packages`.

use std::path::{Path, PathBuf};

use super::{pick, Language, Search, Source, Toolchain, ToolchainError, Version};
use crate::debian::Suite;

/// Where a copied JDK lives in the image.
pub const HOME: &str = "/opt/patchgrade/jdk";

/// The JDK major versions a suite packages (`openjdk-N-jdk-headless`).
pub fn suite_jdks(suite: Suite) -> &'static [u32] {
    match suite {
        Suite::Bullseye => &[11, 17],
        Suite::Bookworm => &[17],
        Suite::Trixie => &[21],
    }
}

/// The suite to build on for a JDK major version: the one that packages it.
pub fn suite_for(major: u32) -> Option<Suite> {
    [Suite::Bookworm, Suite::Bullseye, Suite::Trixie]
        .into_iter()
        .find(|s| suite_jdks(*s).contains(&major))
}

/// A JDK folder's release, from its `release` file (`JAVA_VERSION="17.0.12"`).
pub fn jdk_release(dir: &Path) -> Option<Version> {
    let text = std::fs::read_to_string(dir.join("release")).ok()?;
    let line = text.lines().find(|l| l.starts_with("JAVA_VERSION="))?;
    let v = line.trim_start_matches("JAVA_VERSION=").trim_matches('"');
    Version::parse(Language::Java, v.split(['+', '-']).next()?).ok()
}

/// The JDKs in `dirs` (symlinked aliases resolved and counted once).
pub fn host_jdks(dirs: &[PathBuf]) -> Vec<(Version, PathBuf)> {
    let mut found: Vec<(Version, PathBuf)> = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            let Ok(real) = p.canonicalize() else { continue };
            if !real.join("bin/javac").is_file() || found.iter().any(|(_, f)| *f == real) {
                continue;
            }
            if let Some(v) = jdk_release(&real) {
                found.push((v, real));
            }
        }
    }
    found
}

pub fn resolve(
    asked: &str,
    want: &Version,
    suite: Suite,
    search: &Search,
) -> Result<Toolchain, ToolchainError> {
    let major = want.0[0];
    if want.0.len() == 1 && suite_jdks(suite).contains(&major) {
        return Ok(Toolchain {
            language: Language::Java,
            asked: asked.to_string(),
            given: Version(vec![major]),
            source: Source::Debian {
                package: format!("openjdk-{major}-jdk-headless"),
            },
            home: PathBuf::from(format!(
                "/usr/lib/jvm/java-{major}-openjdk-{}",
                debian_arch()
            )),
            deviation: None,
        });
    }
    let found = host_jdks(&search.jvm_dirs);
    match pick(want, &found) {
        Some((given, dir, newer)) => Ok(Toolchain {
            language: Language::Java,
            asked: asked.to_string(),
            deviation: newer.then(|| {
                format!(
                    "spec says Java {asked}, runs on the host's JDK {given}: Debian {} has no \
                     openjdk-{major} and the host no JDK {asked}",
                    suite.name()
                )
            }),
            given,
            source: Source::Host { dir },
            home: PathBuf::from(HOME),
        }),
        None => Err(ToolchainError::NotFound {
            language: Language::Java,
            asked: asked.to_string(),
            reason: format!(
                "Debian {} packages JDK {:?} and the host has {:?}",
                suite.name(),
                suite_jdks(suite),
                found.iter().map(|(v, _)| v.to_string()).collect::<Vec<_>>()
            ),
            searched: search
                .jvm_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Debian's name for the host architecture (JDK folders carry it).
pub fn debian_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_package_then_a_host_jdk() {
        let d = tempfile::tempdir().unwrap();
        for (name, v) in [("temurin-25", "25.0.3"), ("java-17-openjdk", "17.0.12")] {
            let j = d.path().join(name);
            std::fs::create_dir_all(j.join("bin")).unwrap();
            std::fs::write(j.join("bin/javac"), "").unwrap();
            std::fs::write(j.join("release"), format!("JAVA_VERSION=\"{v}\"\n")).unwrap();
        }
        let search = Search {
            jvm_dirs: vec![d.path().to_path_buf()],
            ..Search::from_env(None)
        };
        let r = |a: &str, s| resolve(a, &Version::parse(Language::Java, a).unwrap(), s, &search);
        let deb = r("11", Suite::Bullseye).unwrap();
        assert_eq!(deb.source.kind(), "debian");
        assert_eq!(deb.source.origin(), "openjdk-11-jdk-headless");
        let host = r("17", Suite::Trixie).unwrap();
        assert_eq!(
            (host.given.to_string(), host.deviation.is_none()),
            ("17.0.12".into(), true)
        );
        let newer = r("21", Suite::Bookworm).unwrap();
        assert_eq!(newer.given.to_string(), "25.0.3");
        assert!(newer.deviation.unwrap().contains("spec says Java 21"));
        assert!(r("26", Suite::Bookworm).is_err());
        assert_eq!(suite_for(11), Some(Suite::Bullseye));
        assert_eq!(suite_for(21), Some(Suite::Trixie));
    }
}
