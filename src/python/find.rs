//! The host half of the provider chain: CPython builds on this machine, in
//! order `--python-dir X.Y=PATH` entries, uv's managed interpreters, pyenv's
//! `versions/` folder. A build is a prefix with `bin/pythonX.Y` and
//! `lib/pythonX.Y/os.py`; its release is read from its `patchlevel.h`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{PyVersion, PythonError};
use crate::python::Provider;

/// A `--python-dir X.Y=PATH` entry, checked when parsed: PATH is the prefix
/// of a CPython X.Y build (or its `bin/pythonX.Y`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonDir {
    pub version: PyVersion,
    /// The build's prefix, symlinks resolved (a build that is not
    /// relocatable must be found where it was built).
    pub prefix: PathBuf,
    pub release: Option<String>,
}

impl PythonDir {
    pub fn parse(arg: &str) -> Result<PythonDir, PythonError> {
        let bad = |reason: String| PythonError::BadPythonDir {
            arg: arg.to_string(),
            reason,
        };
        let (v, path) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected X.Y=PATH, such as 3.6=/opt/python3.6".into()))?;
        let version = PyVersion::parse(v).map_err(|e| bad(e.to_string()))?;
        let path = PathBuf::from(path.trim());
        let real = path
            .canonicalize()
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        // `.../bin/python3.6` names its prefix.
        let prefix = if real.is_file() {
            real.parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf)
                .ok_or_else(|| bad(format!("{} has no prefix", real.display())))?
        } else {
            real
        };
        if let Some(why) = not_a_build(&prefix, version) {
            return Err(bad(why));
        }
        let release = release_of(&prefix, version);
        if let Some(r) = &release {
            if !release_is(r, version) {
                return Err(bad(format!(
                    "{} holds Python {r}, not {version}",
                    prefix.display()
                )));
            }
        }
        Ok(PythonDir {
            version,
            prefix,
            release,
        })
    }
}

/// A CPython build found on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPython {
    pub provider: Provider,
    pub prefix: PathBuf,
    pub release: Option<String>,
}

/// Where the host search looks, in order.
#[derive(Debug, Clone, Default)]
pub struct HostSearch {
    pub python_dirs: Vec<PythonDir>,
    /// Folders of uv's managed interpreters (`uv python dir`).
    pub uv_dirs: Vec<PathBuf>,
    /// pyenv roots (their `versions/` folders are searched).
    pub pyenv_roots: Vec<PathBuf>,
}

impl HostSearch {
    /// The search of this host: the given `--python-dir` entries, uv's
    /// folder (`$UV_PYTHON_INSTALL_DIR`, `uv python dir`, the XDG default),
    /// pyenv's root (`$PYENV_ROOT`, `~/.pyenv`, `/root/.pyenv`).
    pub fn from_env(python_dirs: Vec<PythonDir>) -> HostSearch {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME");
        let mut uv_dirs: Vec<PathBuf> = Vec::new();
        uv_dirs.extend(var("UV_PYTHON_INSTALL_DIR"));
        uv_dirs.extend(uv_python_dir());
        uv_dirs.extend(
            var("XDG_DATA_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".local/share")))
                .map(|d| d.join("uv/python")),
        );
        let mut pyenv_roots: Vec<PathBuf> = Vec::new();
        pyenv_roots.extend(var("PYENV_ROOT"));
        pyenv_roots.extend(home.map(|h| h.join(".pyenv")));
        pyenv_roots.push(PathBuf::from("/root/.pyenv"));
        dedup(&mut uv_dirs);
        dedup(&mut pyenv_roots);
        HostSearch {
            python_dirs,
            uv_dirs,
            pyenv_roots,
        }
    }

    /// The first build of `v` in search order; within uv's or pyenv's
    /// folder, the newest release there.
    pub fn find(&self, v: PyVersion) -> Result<Option<HostPython>, PythonError> {
        if let Some(d) = self.python_dirs.iter().find(|d| d.version == v) {
            return Ok(Some(HostPython {
                provider: Provider::PythonDir,
                prefix: d.prefix.clone(),
                release: d.release.clone(),
            }));
        }
        for dir in &self.uv_dirs {
            if let Some(found) = newest(dir, v, Provider::Uv, uv_release) {
                return Ok(Some(found));
            }
        }
        for root in &self.pyenv_roots {
            let versions = root.join("versions");
            if let Some(found) = newest(&versions, v, Provider::Pyenv, pyenv_release) {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// What was searched for `v`, for the error when nothing is found.
    pub fn describe(&self, v: PyVersion) -> String {
        let list = |ds: Vec<String>| {
            if ds.is_empty() {
                "none".to_string()
            } else {
                ds.join(", ")
            }
        };
        let dirs: Vec<String> = self
            .python_dirs
            .iter()
            .map(|d| format!("{}={}", d.version, d.prefix.display()))
            .collect();
        format!(
            "--python-dir entries: {}; uv: {}; pyenv: {} (looking for <prefix>/bin/{})",
            list(dirs),
            list(
                self.uv_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect()
            ),
            list(
                self.pyenv_roots
                    .iter()
                    .map(|d| d.join("versions").display().to_string())
                    .collect()
            ),
            v.exe_name(),
        )
    }
}

fn dedup(v: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
}

/// `uv python dir`, when uv is installed.
fn uv_python_dir() -> Option<PathBuf> {
    let out = Command::new("uv")
        .args(["python", "dir"])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

/// The release a pyenv folder name gives (`3.6.15`; not `3.6-dev`,
/// `3.13.0t`, `pypy3.9-7.3`, `miniconda3-...`).
fn pyenv_release(name: &str) -> Option<String> {
    numeric_release(name).then(|| name.to_string())
}

/// The release a uv folder name gives, for this host's architecture
/// (`cpython-3.10.13-linux-x86_64-gnu`; not free-threaded, debug, musl or
/// another machine's builds).
fn uv_release(name: &str) -> Option<String> {
    let rest = name.strip_prefix("cpython-")?;
    let mut parts = rest.split('-');
    let (release, os, arch, libc) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let ok = numeric_release(release)
        && os == "linux"
        && arch == std::env::consts::ARCH
        && libc == "gnu"
        && parts.next().is_none();
    ok.then(|| release.to_string())
}

/// `X.Y.Z`, digits only.
fn numeric_release(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

fn release_is(release: &str, v: PyVersion) -> bool {
    release
        .strip_prefix(&format!("{v}."))
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

fn release_key(release: &str) -> Vec<u32> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// The newest valid build of `v` among the entries of `dir`.
fn newest(
    dir: &Path,
    v: PyVersion,
    provider: Provider,
    release_of_name: fn(&str) -> Option<String>,
) -> Option<HostPython> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let release = release_of_name(&name)?;
            if !release_is(&release, v) {
                return None;
            }
            let prefix = e.path();
            if not_a_build(&prefix, v).is_some() {
                return None;
            }
            // The header is the truth where the name and it differ.
            let release = release_of(&prefix, v).unwrap_or(release);
            release_is(&release, v).then_some((release, prefix))
        })
        .max_by(|a, b| release_key(&a.0).cmp(&release_key(&b.0)))
        .map(|(release, prefix)| HostPython {
            provider,
            prefix,
            release: Some(release),
        })
}

/// Why `prefix` is not a CPython `v` build, or None when it is one.
fn not_a_build(prefix: &Path, v: PyVersion) -> Option<String> {
    let exe = prefix.join("bin").join(v.exe_name());
    let os = prefix.join("lib").join(v.exe_name()).join("os.py");
    if !exe.is_file() {
        Some(format!("no {} (expected a CPython prefix)", exe.display()))
    } else if !os.is_file() {
        Some(format!(
            "no {} (the standard library is missing)",
            os.display()
        ))
    } else {
        None
    }
}

/// `PY_VERSION` of the build's `patchlevel.h` (`include/python3.6m/` before
/// 3.8, `include/python3.8/` since).
pub fn release_of(prefix: &Path, v: PyVersion) -> Option<String> {
    let include = prefix.join("include");
    [v.exe_name(), format!("{}m", v.exe_name())]
        .iter()
        .find_map(|d| std::fs::read_to_string(include.join(d).join("patchlevel.h")).ok())
        .and_then(|text| {
            text.lines().find_map(|l| {
                let rest = l.trim().strip_prefix("#define")?.trim_start();
                let rest = rest.strip_prefix("PY_VERSION")?.trim();
                Some(rest.trim_matches('"').to_string())
            })
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A folder laid out as a CPython build of `release` (enough for the
    /// search; nothing runs it).
    pub(crate) fn fake_build(prefix: &Path, release: &str) {
        let v: Vec<&str> = release.split('.').collect();
        let xy = format!("{}.{}", v[0], v[1]);
        let minor: u32 = v[1].parse().unwrap();
        let inc = if minor < 8 {
            format!("python{xy}m")
        } else {
            format!("python{xy}")
        };
        for d in [
            "bin".to_string(),
            format!("lib/python{xy}"),
            format!("include/{inc}"),
        ] {
            std::fs::create_dir_all(prefix.join(d)).unwrap();
        }
        std::fs::write(prefix.join(format!("bin/python{xy}")), "").unwrap();
        std::fs::write(prefix.join(format!("lib/python{xy}/os.py")), "").unwrap();
        std::fs::write(
            prefix.join(format!("include/{inc}/patchlevel.h")),
            format!("#define PY_MINOR_VERSION {minor}\n#define PY_VERSION      \"{release}\"\n"),
        )
        .unwrap();
    }

    fn v(s: &str) -> PyVersion {
        PyVersion::parse(s).unwrap()
    }

    #[test]
    fn names_of_uv_and_pyenv_folders() {
        assert_eq!(pyenv_release("3.6.15").as_deref(), Some("3.6.15"));
        for bad in [
            "3.6-dev",
            "3.13.0t",
            "pypy3.9-7.3.9",
            "miniconda3-4.7",
            "3.6",
        ] {
            assert_eq!(pyenv_release(bad), None, "{bad}");
        }
        let arch = std::env::consts::ARCH;
        assert_eq!(
            uv_release(&format!("cpython-3.10.13-linux-{arch}-gnu")).as_deref(),
            Some("3.10.13")
        );
        for bad in [
            format!("cpython-3.13.0+freethreaded-linux-{arch}-gnu"),
            format!("cpython-3.10.13-linux-{arch}-musl"),
            format!("cpython-3.10-linux-{arch}-gnu"),
            "cpython-3.10.13-linux-sparc-gnu".to_string(),
            format!("pypy-3.10.14-linux-{arch}-gnu"),
        ] {
            assert_eq!(uv_release(&bad), None, "{bad}");
        }
        assert!(release_is("3.10.13", v("3.10")));
        assert!(!release_is("3.10.13", v("3.1")));
        assert!(release_key("3.6.15") > release_key("3.6.9"));
    }

    #[test]
    fn search_order_python_dir_then_uv_then_pyenv() {
        let d = tempfile::tempdir().unwrap();
        let arch = std::env::consts::ARCH;
        let p = d.path();
        fake_build(&p.join("pyenv/versions/3.8.18"), "3.8.18");
        fake_build(&p.join("pyenv/versions/3.8.9"), "3.8.9");
        fake_build(&p.join("pyenv/versions/3.10.13"), "3.10.13");
        fake_build(
            &p.join(format!("uv/cpython-3.10.4-linux-{arch}-gnu")),
            "3.10.4",
        );
        fake_build(&p.join("opt/py310"), "3.10.2");
        // Named 3.7 but not a build: skipped.
        std::fs::create_dir_all(p.join("pyenv/versions/3.7.16/bin")).unwrap();

        let mut s = HostSearch {
            python_dirs: vec![],
            uv_dirs: vec![p.join("nothing-here"), p.join("uv")],
            pyenv_roots: vec![p.join("pyenv")],
        };
        // Newest pyenv release, by number (3.8.18 over 3.8.9).
        let f = s.find(v("3.8")).unwrap().unwrap();
        assert_eq!(
            (f.provider, f.release.as_deref()),
            (Provider::Pyenv, Some("3.8.18"))
        );
        assert_eq!(f.prefix, p.join("pyenv/versions/3.8.18"));
        // uv before pyenv.
        let f = s.find(v("3.10")).unwrap().unwrap();
        assert_eq!(
            (f.provider, f.release.as_deref()),
            (Provider::Uv, Some("3.10.4"))
        );
        // --python-dir before both; the executable names its prefix.
        let dir = PythonDir::parse(&format!(
            "3.10={}",
            p.join("opt/py310/bin/python3.10").display()
        ))
        .unwrap();
        assert_eq!(dir.prefix, p.join("opt/py310").canonicalize().unwrap());
        s.python_dirs.push(dir);
        let f = s.find(v("3.10")).unwrap().unwrap();
        assert_eq!(
            (f.provider, f.release.as_deref()),
            (Provider::PythonDir, Some("3.10.2"))
        );
        assert_eq!(s.find(v("3.7")).unwrap(), None);
        let what = s.describe(v("3.7"));
        assert!(
            what.contains("uv: ") && what.contains("pyenv/versions") && what.contains("python3.7"),
            "{what}"
        );
    }

    #[test]
    fn bad_python_dirs_are_refused_with_the_reason() {
        let d = tempfile::tempdir().unwrap();
        fake_build(&d.path().join("py38"), "3.8.18");
        let p = d.path().display();
        let e = |arg: String| PythonDir::parse(&arg).unwrap_err().to_string();
        assert!(e(format!("{p}/py38")).contains("expected X.Y=PATH"));
        assert!(e(format!("3.8={p}/none")).contains("/none"));
        let wrong = e(format!("3.9={p}/py38"));
        assert!(
            wrong.contains("python3.9") && wrong.contains("CPython prefix"),
            "{wrong}"
        );
        std::fs::create_dir_all(d.path().join("py38b/bin")).unwrap();
        std::fs::create_dir_all(d.path().join("py38b/lib/python3.8")).unwrap();
        std::fs::write(d.path().join("py38b/bin/python3.8"), "").unwrap();
        assert!(e(format!("3.8={p}/py38b")).contains("standard library"));
        // A header that disagrees with the version asked for.
        fake_build(&d.path().join("odd"), "3.8.18");
        std::fs::create_dir_all(d.path().join("odd/lib/python3.9")).unwrap();
        std::fs::write(d.path().join("odd/lib/python3.9/os.py"), "").unwrap();
        std::fs::write(d.path().join("odd/bin/python3.9"), "").unwrap();
        std::fs::create_dir_all(d.path().join("odd/include/python3.9")).unwrap();
        std::fs::write(
            d.path().join("odd/include/python3.9/patchlevel.h"),
            "#define PY_VERSION \"3.8.18\"\n",
        )
        .unwrap();
        assert!(e(format!("3.9={p}/odd")).contains("holds Python 3.8.18"));
        let ok = PythonDir::parse(&format!("3.8={p}/py38")).unwrap();
        assert_eq!(ok.release.as_deref(), Some("3.8.18"));
    }
}
