//! Files the env build reads from the repository at the instance's
//! environment setup commit (from the mirror, never downloaded): the
//! requirements file, with `-r` includes inlined, and the conda environment
//! file, translated by [`crate::conda`]; and the mirrors of a spec's other
//! repositories (its sources and git sources).

use std::path::{Path, PathBuf};

use super::EnvError;
use crate::conda::{self, Translation};
use crate::dataset::Instance;
use crate::repo::RepoCache;
use crate::spec::Spec;

/// The commit whose files make the env: the environment setup commit, else
/// the base commit.
fn setup_commit(inst: &Instance) -> &str {
    if inst.environment_setup_commit.is_empty() {
        &inst.base_commit
    } else {
        &inst.environment_setup_commit
    }
}

/// Run `f` with a reader of files at the setup commit; `what` names the
/// file in errors.
fn with_setup_tree<T>(
    repos: &RepoCache,
    inst: &Instance,
    what: &str,
    f: impl FnOnce(&dyn Fn(&str) -> Result<String, EnvError>) -> Result<T, EnvError>,
) -> Result<T, EnvError> {
    let commit = setup_commit(inst);
    let mirror = repos
        .ensure(&inst.repo, &[commit])
        .map_err(|e| EnvError::Other(format!("reading {what}: {e}")))?;
    let r = git2::Repository::open_bare(mirror).map_err(|e| EnvError::Other(e.to_string()))?;
    let tree = git2::Oid::from_str(commit)
        .and_then(|o| r.find_commit(o))
        .and_then(|c| c.tree())
        .map_err(|e| EnvError::Other(format!("{what} at {commit}: {e}")))?;
    let read = |p: &str| -> Result<String, EnvError> {
        let blob = tree
            .get_path(Path::new(p))
            .and_then(|e| r.find_blob(e.id()))
            .map_err(|e| EnvError::Other(format!("{what} {p} at {commit}: {e}")))?;
        Ok(String::from_utf8_lossy(blob.content()).into_owned())
    };
    f(&read)
}

/// A conda environment file as the env installs it.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvFile {
    /// `path at commit`, for the requirements file's header and errors.
    pub source: String,
    pub translation: Translation,
}

impl EnvFile {
    /// The pip requirements file the env installs.
    pub fn requirements_text(&self) -> String {
        self.translation.requirements_text(&self.source)
    }
}

/// The spec's `environment_yml` at the instance's setup commit, translated
/// with the spec's `conda_skip` and `pip_packages`; None without one.
pub fn environment_for(
    repos: &RepoCache,
    inst: &Instance,
    spec: &Spec,
) -> Result<Option<EnvFile>, EnvError> {
    let Some(path) = &spec.environment_yml else {
        return Ok(None);
    };
    let text = with_setup_tree(repos, inst, "environment file", |read| read(path))?;
    let source = format!("{path} at {}", setup_commit(inst));
    let translation = conda::translate(&source, &text, &spec.conda_skip, &spec.pip_packages)
        .map_err(|e| EnvError::Other(e.to_string()))?;
    Ok(Some(EnvFile {
        source,
        translation,
    }))
}

/// The requirements file as it is at the instance's environment setup
/// commit, read from the mirror (never downloaded), with `-r` includes
/// inlined (relative to the including file) as the reference does.
pub fn read_requirements(
    repos: &RepoCache,
    inst: &Instance,
    path: &str,
) -> Result<String, EnvError> {
    with_setup_tree(repos, inst, "requirements", |read| {
        let mut out = String::new();
        let mut stack = vec![(path.to_string(), 0usize)];
        let mut seen = std::collections::BTreeSet::new();
        while let Some((file, depth)) = stack.pop() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let text = read(&file)?;
            let dir = Path::new(&file)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            for line in text.lines() {
                let t = line.trim();
                let include = t
                    .strip_prefix("--requirement")
                    .or_else(|| t.strip_prefix("-r"));
                match include {
                    Some(rest) if depth < 4 => {
                        let name = rest.trim_start_matches('=').trim();
                        let joined = dir.join(name);
                        // Normalise `a/../b` without touching the filesystem.
                        let mut parts: Vec<&str> = Vec::new();
                        for c in joined.to_str().unwrap_or(name).split('/') {
                            match c {
                                "" | "." => {}
                                ".." => {
                                    parts.pop();
                                }
                                c => parts.push(c),
                            }
                        }
                        stack.push((parts.join("/"), depth + 1));
                    }
                    _ => {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
        }
        Ok(out)
    })
}

/// Drop lines the reference drops from requirements files: the project
/// itself is installed by `install`, not from the requirements.
pub fn filter_requirements(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let t = l.trim();
            !(t.starts_with("-e .") || t.starts_with('#') || t.starts_with(".[test"))
        })
        // Not installable any more; the reference swaps the whole line.
        .map(|l| {
            if l.trim().starts_with("types-pkg_resources") {
                "types-setuptools".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The mirror of `repo` holding `commit`, opened, for a spec's sources.
pub fn source_mirror(
    repos: &RepoCache,
    about: &str,
    repo: &str,
    commit: &str,
) -> Result<(PathBuf, git2::Repository, git2::Oid), EnvError> {
    let mirror = repos
        .ensure(repo, &[commit])
        .map_err(|e| source_failed(about, repo, e))?;
    let r = git2::Repository::open_bare(&mirror).map_err(|e| source_failed(about, repo, e))?;
    let id = git2::Oid::from_str(commit).map_err(|e| source_failed(about, repo, e))?;
    Ok((mirror, r, id))
}

/// A spec source that could not be read: what, why, and the folder to make.
pub fn source_failed(about: &str, repo: &str, e: impl std::fmt::Display) -> EnvError {
    EnvError::Other(format!(
        "{about}: {e}; put a clone named {} in --mirror-dir",
        repo.replace('/', "__")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::RepoSources;

    #[test]
    fn the_environment_file_is_read_at_the_setup_commit_and_translated() {
        let d = tempfile::tempdir().unwrap();
        let src = git2::Repository::init(d.path().join("mirrors/o__r")).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let commit = |files: &[(&str, &str)], parents: &[&git2::Commit]| {
            let mut tb = src.treebuilder(None).unwrap();
            for (name, text) in files {
                let blob = src.blob(text.as_bytes()).unwrap();
                tb.insert(name, blob, 0o100644).unwrap();
            }
            let tree = src.find_tree(tb.write().unwrap()).unwrap();
            src.commit(None, &sig, &sig, "m", &tree, parents).unwrap()
        };
        let setup = commit(
            &[(
                "environment.yml",
                "dependencies:\n  - python=3.10\n  - hdf5\n  - pytest\n  - numpy\n",
            )],
            &[],
        );
        let setup_c = src.find_commit(setup).unwrap();
        // The base commit's file differs: the setup commit's is the one read.
        let base = commit(
            &[("environment.yml", "dependencies: [nose]\n")],
            &[&setup_c],
        );
        src.reference("refs/heads/main", base, true, "m").unwrap();
        let repos = RepoCache::new(RepoSources {
            cache: d.path().join("cache"),
            mirror_dir: Some(d.path().join("mirrors")),
            export_dirs: vec![],
            url_template: String::new(),
        });
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": base.to_string(),
            "environment_setup_commit": setup.to_string(), "version": "1"
        }))
        .unwrap();
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "test_cmd": "t", "log_parser": "pytest", "environment_yml": "environment.yml",
            "pip_packages": ["numpy==1.23.0"]
        }))
        .unwrap();
        let env = environment_for(&repos, &inst, &spec).unwrap().unwrap();
        assert_eq!(env.source, format!("environment.yml at {setup}"));
        assert_eq!(env.translation.requirements, ["pytest"]);
        assert_eq!(env.translation.apt_packages, ["libhdf5-dev"]);
        assert!(env.requirements_text().contains("# dropped numpy: pinned"));
        // No environment file in the spec: nothing to read.
        let plain = Spec {
            environment_yml: None,
            ..spec.clone()
        };
        assert_eq!(environment_for(&repos, &inst, &plain).unwrap(), None);
        // A path missing at the setup commit is an error naming it.
        let missing = Spec {
            environment_yml: Some("ci/env.yml".into()),
            ..spec
        };
        let e = environment_for(&repos, &inst, &missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ci/env.yml") && e.contains(&setup.to_string()),
            "{e}"
        );
    }

    #[test]
    fn includes_are_inlined_and_unusable_lines_dropped() {
        let d = tempfile::tempdir().unwrap();
        let src = git2::Repository::init(d.path().join("mirrors/o__r")).unwrap();
        let root = src.workdir().unwrap().to_owned();
        std::fs::create_dir_all(root.join("reqs")).unwrap();
        std::fs::write(
            root.join("reqs/main.txt"),
            "-r ./base.txt\n-e .\n# c\ntypes-pkg_resources==0.1.3\nrequests\n",
        )
        .unwrap();
        std::fs::write(
            root.join("reqs/base.txt"),
            "--requirement=../top.txt\nsix\n",
        )
        .unwrap();
        std::fs::write(root.join("top.txt"), "attrs\n").unwrap();
        let mut idx = src.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        let tree = src.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let c = src
            .commit(Some("HEAD"), &sig, &sig, "m", &tree, &[])
            .unwrap();
        let repos = RepoCache::new(RepoSources {
            cache: d.path().join("cache"),
            mirror_dir: Some(d.path().join("mirrors")),
            export_dirs: vec![],
            url_template: String::new(),
        });
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": c.to_string(), "version": "1"
        }))
        .unwrap();
        let text = filter_requirements(&read_requirements(&repos, &inst, "reqs/main.txt").unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["types-setuptools", "requests", "six", "attrs"]);
    }
}
