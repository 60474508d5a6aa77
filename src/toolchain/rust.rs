//! Rust: a toolchain of the host's rustup, copied into the image without
//! its documentation (`share/doc`, half of it). rustup cannot download
//! toolchains here, so a version the host lacks gets the next newer
//! release the host has, a listed deviation: Rust keeps old editions
//! compiling, and the reference's 1.77–1.84 are all older than the host's.

use std::path::{Path, PathBuf};

use super::{pick, Language, Search, Source, Toolchain, ToolchainError, Version};

/// Where the toolchain lives in the image.
pub const HOME: &str = "/opt/patchgrade/rust";
/// cargo's home in the image: the registry index and crates fetched when
/// the instance image is built.
pub const CARGO_HOME: &str = "/usr/local/cargo";

/// The host triple rustup names its toolchains with.
pub fn triple() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// Whether `rel` (a path under the toolchain folder) goes into the image.
pub fn keep(rel: &Path) -> bool {
    !rel.starts_with("share/doc")
}

/// The release of a rustup toolchain folder named `name`: from the name
/// (`1.95.0-x86_64-unknown-linux-gnu`), or for a channel (`stable-…`) from
/// its channel manifest's `[pkg.rustc]` version. Nightly and beta are no
/// release.
fn release_of(dir: &Path, name: &str, triple: &str) -> Option<Version> {
    let channel = name.strip_suffix(&format!("-{triple}"))?;
    if let Ok(v) = Version::parse(Language::Rust, channel) {
        return (v.0.len() == 3).then_some(v);
    }
    if channel != "stable" {
        return None;
    }
    let manifest =
        std::fs::read_to_string(dir.join("lib/rustlib/multirust-channel-manifest.toml")).ok()?;
    let mut lines = manifest.lines().skip_while(|l| l.trim() != "[pkg.rustc]");
    lines.next()?;
    let line = lines.find(|l| l.starts_with("version = "))?;
    let v = line.trim_start_matches("version = ").trim_matches('"');
    Version::parse(Language::Rust, v.split_whitespace().next()?).ok()
}

/// The releases of the host's rustup toolchains, a release named by
/// version before a channel holding the same one.
pub fn host_toolchains(rustup_home: &Path) -> Vec<(Version, PathBuf)> {
    let triple = triple();
    let dir = rustup_home.join("toolchains");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut found: Vec<(Version, PathBuf)> = Vec::new();
    for name in names {
        let path = dir.join(&name);
        if !path.join("bin/cargo").is_file() || !path.join("bin/rustc").is_file() {
            continue;
        }
        if let Some(v) = release_of(&path, &name, &triple) {
            if !found.iter().any(|(f, _)| *f == v) {
                found.push((v, path));
            }
        }
    }
    found
}

pub fn resolve(asked: &str, want: &Version, search: &Search) -> Result<Toolchain, ToolchainError> {
    let found = host_toolchains(&search.rustup_home);
    let Some((given, dir, newer)) = pick(want, &found) else {
        let have: Vec<String> = found.iter().map(|(v, _)| v.to_string()).collect();
        return Err(ToolchainError::NotFound {
            language: Language::Rust,
            asked: asked.to_string(),
            reason: format!(
                "the host's rustup has no release {asked} or newer (it has: {}); rustup cannot \
                 download toolchains here",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ),
            searched: search.rustup_home.join("toolchains").display().to_string(),
        });
    };
    Ok(Toolchain {
        language: Language::Rust,
        asked: asked.to_string(),
        deviation: newer.then(|| {
            format!(
                "spec says Rust {asked}, runs on {given}: the host's rustup has no {asked} and \
                 cannot download one here; newer releases compile older editions"
            )
        }),
        given,
        source: Source::Rustup { dir },
        home: PathBuf::from(HOME),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A rustup home with toolchain folders holding `bin/cargo` and `bin/rustc`.
    pub(crate) fn fake_rustup(home: &Path, names: &[&str]) {
        for n in names {
            let bin = home.join("toolchains").join(n).join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            std::fs::write(bin.join("cargo"), "").unwrap();
            std::fs::write(bin.join("rustc"), "").unwrap();
            std::fs::create_dir_all(home.join("toolchains").join(n).join("share/doc/rust"))
                .unwrap();
        }
    }

    #[test]
    fn the_host_release_is_picked_and_a_newer_one_is_a_deviation() {
        let d = tempfile::tempdir().unwrap();
        let t = triple();
        fake_rustup(
            d.path(),
            &[
                &format!("1.95.0-{t}"),
                &format!("nightly-{t}"),
                &format!("1.84.1-{t}"),
            ],
        );
        let stable = d.path().join(format!("toolchains/stable-{t}"));
        fake_rustup(d.path(), &[&format!("stable-{t}")]);
        std::fs::create_dir_all(stable.join("lib/rustlib")).unwrap();
        std::fs::write(
            stable.join("lib/rustlib/multirust-channel-manifest.toml"),
            "[pkg.cargo]\nversion = \"0.97.0 (x)\"\n[pkg.rustc]\nversion = \"1.96.0 (abc 2026-05-01)\"\n",
        )
        .unwrap();
        let search = Search {
            rustup_home: d.path().to_path_buf(),
            ..Search::from_env(None)
        };
        let found: Vec<String> = host_toolchains(d.path())
            .iter()
            .map(|(v, _)| v.to_string())
            .collect();
        assert_eq!(found, ["1.84.1", "1.95.0", "1.96.0"]);
        let r = |a: &str| resolve(a, &Version::parse(Language::Rust, a).unwrap(), &search);
        let exact = r("1.84").unwrap();
        assert_eq!(exact.given.to_string(), "1.84.1");
        assert!(exact.deviation.is_none());
        let sub = r("1.81").unwrap();
        assert_eq!(sub.given.to_string(), "1.84.1");
        assert!(sub
            .deviation
            .as_deref()
            .unwrap()
            .contains("spec says Rust 1.81, runs on 1.84.1"));
        assert_eq!(r("1.96").unwrap().source.kind(), "rustup");
        let e = r("1.97").unwrap_err().to_string();
        assert!(e.contains("no rust 1.97") && e.contains("1.95.0"), "{e}");
        assert!(keep(Path::new("lib/librustc_driver.so")) && !keep(Path::new("share/doc/rust")));
    }
}
