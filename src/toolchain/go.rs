//! Go: the host's Go (`/usr/local/go`) when it is the release asked for,
//! else the exact release from the Go module proxy, where Go's own
//! `GOTOOLCHAIN` switching gets it (the module
//! `golang.org/toolchain@v0.0.1-go<ver>.linux-<arch>`, a whole GOROOT),
//! downloaded with `go mod download` into patchgrade's cache; else the
//! host's Go when it is newer, a listed deviation (Go builds modules that
//! name an older `go` line).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{pick, Language, Search, Source, Toolchain, ToolchainError, Version};

/// GOROOT in the image (as in the reference's images).
pub const HOME: &str = "/usr/local/go";
/// GOPATH in the image: the module cache `go mod download` fills when the
/// instance image is built.
pub const GOPATH: &str = "/root/go";
/// The module that holds Go toolchains on the module proxy.
pub const TOOLCHAIN_MODULE: &str = "golang.org/toolchain";

/// Go's name for the host architecture.
pub fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The release of a toolchain module version (`v0.0.1-go1.23.8.linux-amd64`)
/// for `arch`; None for other platforms and pre-releases (`go1.18beta1`).
pub fn module_release(version: &str, arch: &str) -> Option<Version> {
    let rest = version.strip_prefix("v0.0.1-go")?;
    let rel = rest.strip_suffix(&format!(".linux-{arch}"))?;
    let v = Version::parse(Language::Go, rel).ok()?;
    // `go1.18` is 1.18.0.
    Some(if v.0.len() == 2 {
        Version(vec![v.0[0], v.0[1], 0])
    } else {
        v
    })
}

/// The host Go's release, from `$GOROOT/VERSION` (`go1.26.8`).
pub fn host_release(root: &Path) -> Option<Version> {
    let text = std::fs::read_to_string(root.join("VERSION")).ok()?;
    let first = text.lines().next()?.trim().strip_prefix("go")?;
    Version::parse(Language::Go, first).ok()
}

/// The go command of the host (the proxy is asked through it).
fn go_cmd(search: &Search, cache: &Path) -> Command {
    let mut c = Command::new(search.go_root.join("bin/go"));
    c.env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .env("GOFLAGS", "-modcacherw")
        .env("GOMODCACHE", cache.join("gomod"))
        .current_dir(std::env::temp_dir());
    c
}

/// The proxy's toolchain module versions of this platform, as releases.
fn proxy_releases(search: &Search, cache: &Path) -> Result<Vec<(Version, String)>, String> {
    let out = go_cmd(search, cache)
        .args(["list", "-m", "-versions", TOOLCHAIN_MODULE])
        .output()
        .map_err(|e| format!("running go: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|v| module_release(v, goarch()).map(|r| (r, v.to_string())))
        .collect())
}

/// The toolchain module downloaded into the cache; its folder.
fn download(search: &Search, cache: &Path, version: &str) -> Result<PathBuf, String> {
    let module = format!("{TOOLCHAIN_MODULE}@{version}");
    let out = go_cmd(search, cache)
        .args(["mod", "download", "-json", &module])
        .output()
        .map_err(|e| format!("running go: {e}"))?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|_| String::from_utf8_lossy(&out.stderr).trim().to_string())?;
    if let Some(e) = json.get("Error").and_then(|e| e.as_str()) {
        return Err(e.to_string());
    }
    let dir = json
        .get("Dir")
        .and_then(|d| d.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| format!("go mod download {module} gave no folder"))?;
    if !dir.join("bin/go").is_file() {
        return Err(format!("{} has no bin/go", dir.display()));
    }
    Ok(dir)
}

pub fn resolve(asked: &str, want: &Version, search: &Search) -> Result<Toolchain, ToolchainError> {
    let host: Vec<(Version, PathBuf)> = host_release(&search.go_root)
        .map(|v| vec![(v, search.go_root.clone())])
        .unwrap_or_default();
    // The host's Go when it is the release asked for: nothing to download.
    if let Some((given, dir)) = host.iter().find(|(v, _)| v.matches(want)) {
        return Ok(Toolchain {
            language: Language::Go,
            asked: asked.to_string(),
            given: given.clone(),
            source: Source::Host { dir: dir.clone() },
            home: PathBuf::from(HOME),
            deviation: None,
        });
    }
    let mut why = Vec::new();
    if let Some(cache) = &search.cache {
        match proxy_releases(search, cache) {
            Ok(releases) => {
                let exact = releases
                    .iter()
                    .filter(|(v, _)| v.matches(want))
                    .max_by(|a, b| a.0.cmp(&b.0));
                match exact {
                    Some((given, version)) => match download(search, cache, version) {
                        Ok(dir) => {
                            return Ok(Toolchain {
                                language: Language::Go,
                                asked: asked.to_string(),
                                given: given.clone(),
                                source: Source::GoProxy {
                                    module: format!("{TOOLCHAIN_MODULE}@{version}"),
                                    dir,
                                },
                                home: PathBuf::from(HOME),
                                deviation: None,
                            })
                        }
                        Err(e) => why.push(format!("downloading {version}: {e}")),
                    },
                    None => why.push(format!("the module proxy has no go{asked}")),
                }
            }
            Err(e) => why.push(format!("the module proxy did not answer: {e}")),
        }
    } else {
        why.push("registries not asked".into());
    }
    match pick(want, &host) {
        Some((given, dir, newer)) => Ok(Toolchain {
            language: Language::Go,
            asked: asked.to_string(),
            deviation: newer.then(|| {
                format!(
                    "spec says Go {asked}, runs on the host's {given}: {}",
                    why.join("; ")
                )
            }),
            given,
            source: Source::Host { dir },
            home: PathBuf::from(HOME),
        }),
        None => Err(ToolchainError::NotFound {
            language: Language::Go,
            asked: asked.to_string(),
            reason: format!(
                "{}; the host's Go is {}",
                why.join("; "),
                host.first()
                    .map(|(v, _)| v.to_string())
                    .unwrap_or_else(|| "absent".into())
            ),
            searched: format!("{TOOLCHAIN_MODULE}, {}", search.go_root.display()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_versions_name_releases_of_one_platform() {
        let r = |v| module_release(v, "amd64").map(|v| v.to_string());
        assert_eq!(r("v0.0.1-go1.23.8.linux-amd64").as_deref(), Some("1.23.8"));
        assert_eq!(r("v0.0.1-go1.18.linux-amd64").as_deref(), Some("1.18.0"));
        assert_eq!(r("v0.0.1-go1.18beta1.linux-amd64"), None);
        assert_eq!(r("v0.0.1-go1.23.8.linux-arm64"), None);
        assert_eq!(r("v0.0.1-go1.23.8.darwin-amd64"), None);
    }

    #[test]
    fn without_registries_the_host_go_is_a_deviation() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("VERSION"),
            "go1.26.8\ntime 2026-08-28T16:20:06Z\n",
        )
        .unwrap();
        let search = Search {
            go_root: d.path().to_path_buf(),
            cache: None,
            ..Search::from_env(None)
        };
        let want = Version::parse(Language::Go, "1.23.8").unwrap();
        let t = resolve("1.23.8", &want, &search).unwrap();
        assert_eq!(t.given.to_string(), "1.26.8");
        assert_eq!(
            t.source,
            Source::Host {
                dir: d.path().to_path_buf()
            }
        );
        assert!(t
            .deviation
            .unwrap()
            .contains("spec says Go 1.23.8, runs on the host's 1.26.8"));
        let exact = resolve(
            "1.26",
            &Version::parse(Language::Go, "1.26").unwrap(),
            &search,
        )
        .unwrap();
        assert!(exact.deviation.is_none());
        let e = resolve(
            "1.27",
            &Version::parse(Language::Go, "1.27").unwrap(),
            &search,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no go 1.27") && e.contains("1.26.8"), "{e}");
    }
}
