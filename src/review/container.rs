//! The static rubric in the instance's own container: what the `review`
//! command sends there and runs.
//!
//! The linters are not installed into the project's env, nor into its
//! image: they are installed once on the host, into the cache, with pip
//! `--target` from PyPI ([`ensure_tools`]; ruff is a static binary, flake8
//! and pylint are pure Python resolved for Python 3.9, the oldest python3 a
//! base image's Debian suite ships), and sent into each review container
//! with the patched files, through the same path as an evaluation's files.
//! There they are moved out of the tree to [`TOOLS`] and run with the
//! image's system `/usr/bin/python3`, so no container needs the network.
//!
//! The container's tree arrives patched (as for an evaluation). The
//! [`prelude`] copies the patched files aside to [`PATCHED`] and checks the
//! base versions out again from the instance image's setup commit; then the
//! review script ([`super::script::build`]) lints base, puts the patched
//! files back and lints again.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::lines::DiffFile;
use super::lint::{self, Tool};
use super::script::{build, tool_requirements, ScriptSpec};

/// Where the tools' executables are in the container.
pub const TOOLS_BIN: &str = "/tmp/pgtools/bin";
/// Where the tools' files are in the container.
pub const TOOLS: &str = "/tmp/pgtools/lib";
/// Where the patched files are put aside in the container.
pub const PATCHED: &str = "/tmp/pg-patched";
/// The tools' folder in the archive, relative to the tree (moved out first).
pub const UPLOAD: &str = ".patchgrade-tools";
/// The Python the pure-Python tools are resolved for.
const TOOLS_PYTHON: &str = "3.9";

/// The review tools could not be installed on the host.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("installing the review tools ({reqs}) into {dir}: `{command}` {status}: {stderr}")]
    Install {
        dir: PathBuf,
        reqs: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("review tools at {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ToolsError + '_ {
    move |source| ToolsError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The tools' folder under `cache` (`review/tools-<hash>/lib`), installed
/// when missing: `python3 -m venv`, then pip `--target` with the pinned
/// [`tool_requirements`]. Reused while the pins stay the same.
pub fn ensure_tools(cache: &Path) -> Result<PathBuf, ToolsError> {
    let reqs = tool_requirements();
    let key = crate::dataset::sha256_hex(&format!("{}\n{TOOLS_PYTHON}", reqs.join("\n")));
    let dir = cache.join("review").join(format!("tools-{}", &key[..12]));
    let lib = dir.join("lib");
    if dir.join(".complete").is_file() {
        return Ok(lib);
    }
    let tmp = cache
        .join("review")
        .join(format!(".tools-{}.{}", &key[..12], std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
    let run = |cmd: &mut Command, what: String| -> Result<(), ToolsError> {
        let out = cmd.output().map_err(io_err(&tmp))?;
        if out.status.success() {
            return Ok(());
        }
        Err(ToolsError::Install {
            dir: dir.clone(),
            reqs: reqs.join(" "),
            command: what,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | "),
        })
    };
    let venv = tmp.join("pip");
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv".into(),
    )?;
    run(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .arg("--target")
            .arg(tmp.join("lib"))
            .args(["--python-version", TOOLS_PYTHON, "--only-binary=:all:"])
            .args(&reqs),
        format!("pip install --target ... {}", reqs.join(" ")),
    )?;
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::write(tmp.join(".complete"), reqs.join("\n")).map_err(io_err(&tmp))?;
    // Another process may have finished first: its copy is as good.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if dir.join(".complete").is_file() {
        Ok(lib)
    } else {
        Err(ToolsError::Io {
            path: dir,
            source: io::Error::other("not complete after install"),
        })
    }
}

/// The tools' files to send, as (path in the archive, bytes, git mode):
/// ruff alone, or everything when flake8 or pylint run too. Caches and the
/// other console scripts (their shebangs name the host's Python) are left.
pub fn tool_files(lib: &Path, everything: bool) -> Result<Vec<(String, Vec<u8>, u32)>, ToolsError> {
    let mut out = Vec::new();
    let ruff = lib.join("bin/ruff");
    if !everything {
        let data = std::fs::read(&ruff).map_err(io_err(&ruff))?;
        out.push((format!("{UPLOAD}/bin/ruff"), data, 0o100755));
        return Ok(out);
    }
    let mut stack = vec![lib.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io_err(&d))? {
            let e = e.map_err(io_err(&d))?;
            let p = e.path();
            let name = e.file_name();
            let ft = e.file_type().map_err(io_err(&p))?;
            if name == "__pycache__" {
                continue;
            }
            if ft.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(lib)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            if rel.starts_with("bin/") && rel != "bin/ruff" {
                continue;
            }
            let data = std::fs::read(&p).map_err(io_err(&p))?;
            let mode = if rel == "bin/ruff" {
                0o100755
            } else {
                0o100644
            };
            out.push((format!("{UPLOAD}/{rel}"), data, mode));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Which linters the project configures (flake8, pylint) and whether it
/// configures ruff, read from the base tree in the mirror (the config files
/// copied to a scratch folder for [`lint::configured`]).
pub fn configured_in_tree(mirror: &Path, commit: &str) -> Result<(Vec<Tool>, bool), git2::Error> {
    let repo = git2::Repository::open_bare(mirror)?;
    let tree = repo.find_commit(git2::Oid::from_str(commit)?)?.tree()?;
    let scratch = tempfile::tempdir().map_err(|e| git2::Error::from_str(&e.to_string()))?;
    for name in [
        "ruff.toml",
        ".ruff.toml",
        "pyproject.toml",
        "setup.cfg",
        "tox.ini",
        ".flake8",
        ".pylintrc",
        "pylintrc",
    ] {
        let Ok(entry) = tree.get_path(Path::new(name)) else {
            continue;
        };
        if let Ok(blob) = repo.find_blob(entry.id()) {
            std::fs::write(scratch.path().join(name), blob.content())
                .map_err(|e| git2::Error::from_str(&e.to_string()))?;
        }
    }
    Ok((
        lint::configured(scratch.path()),
        lint::ruff_configured(scratch.path()),
    ))
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The lines before the review script: tools out of the tree and their
/// wrappers, the patched files aside, the base versions back.
pub fn prelude(root: &str, files: &[DiffFile]) -> String {
    let mut s = format!(
        "#!/bin/bash\n# patchgrade review in the instance container: tools out of the tree, patched files aside, base back.\ncd {} || exit 90\n",
        q(root)
    );
    s.push_str(&format!(
        "mkdir -p {bin} && mv {up} {lib} || {{ echo '>>>>> review tools missing'; exit 91; }}\n\
         ln -sf {lib}/bin/ruff {bin}/ruff\n\
         for t in flake8 pylint; do printf '#!/bin/sh\\nPYTHONPATH={lib} exec /usr/bin/python3 -m %s \"$@\"\\n' \"$t\" > {bin}/$t; chmod +x {bin}/$t; done\n",
        bin = TOOLS_BIN,
        lib = TOOLS,
        up = q(UPLOAD),
    ));
    for f in files.iter().filter_map(|f| f.new_path.as_deref()) {
        s.push_str(&format!(
            "mkdir -p -- \"$(dirname -- {dst})\" && cp -p -- {src} {dst} || echo '>>>>> review copy failed {name}'\n",
            src = q(f),
            dst = q(&format!("{PATCHED}/{f}")),
            name = f.replace('\'', ""),
        ));
    }
    let old: Vec<String> = files
        .iter()
        .filter_map(|f| f.old_path.as_deref())
        .map(q)
        .collect();
    if !old.is_empty() {
        s.push_str(&format!(
            "git checkout -q HEAD -- {} || echo '>>>>> review copy failed (base checkout)'\n",
            old.join(" ")
        ));
    }
    let added: Vec<String> = files
        .iter()
        .filter(|f| f.old_path.is_none())
        .filter_map(|f| f.new_path.as_deref())
        .map(q)
        .collect();
    if !added.is_empty() {
        s.push_str(&format!("rm -f -- {}\n", added.join(" ")));
    }
    s
}

/// The whole script the container runs.
pub fn container_script(spec: &ScriptSpec, files: &[DiffFile]) -> String {
    format!("{}{}", prelude(spec.root, files), build(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prelude_puts_patched_files_aside_and_restores_the_base() {
        let patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\ndiff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+y = 1\n";
        let files = crate::review::lines::parse_diff(patch).unwrap();
        let p = prelude("/testbed", &files);
        assert!(p.contains("cp -p -- 'a.py' '/tmp/pg-patched/a.py'"), "{p}");
        assert!(p.contains("cp -p -- 'n.py' '/tmp/pg-patched/n.py'"), "{p}");
        assert!(p.contains("git checkout -q HEAD -- 'a.py' ||"), "{p}");
        assert!(p.contains("rm -f -- 'n.py'\n"), "{p}");
        assert!(p.contains("mv '.patchgrade-tools' /tmp/pgtools/lib"), "{p}");
    }
}
