//! What a spec must hold beyond its YAML's shape, checked when a spec file
//! is read so that a bad spec is an error naming its file and version, not
//! a wrong image.

use super::*;

impl Spec {
    /// `build_jobs` names shell variables: the setup exports them.
    pub(super) fn check_build_jobs(&self) -> Result<(), String> {
        let name = |v: &str| {
            v.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        match self.build_jobs.iter().find(|v| !name(v)) {
            Some(bad) => Err(format!("build_jobs: {bad:?} is not a variable name")),
            None => Ok(()),
        }
    }

    /// `snapshots` needs whole days and chains, and a chain needs a spec
    /// that builds nothing in its snapshots: a link holds the changed files
    /// only, and a build's outputs over an older build are another matter.
    pub(super) fn check_snapshots(&self) -> Result<(), String> {
        let Some(rule) = self.snapshots else {
            return Ok(());
        };
        if rule.window_days == 0 || rule.chain == 0 {
            return Err("snapshots: window_days and chain must be at least 1".into());
        }
        if rule.chain > 1 && self.snapshot_build {
            return Err("snapshots: chain > 1 needs a spec without snapshot_build".into());
        }
        Ok(())
    }

    /// `pip_base_packages` are exact pins (`name==version`), each name once,
    /// and need a Python.
    pub(super) fn check_pip_base(&self) -> Result<(), String> {
        if self.pip_base_packages.is_empty() {
            return Ok(());
        }
        if self.python.is_none() {
            return Err("pip_base_packages: the spec has no python".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for pin in &self.pip_base_packages {
            let exact = pin.split_once("==").filter(|(name, version)| {
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                    && !version.is_empty()
                    && version
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!'))
            });
            let Some((name, _)) = exact else {
                return Err(format!(
                    "pip_base_packages: {pin:?} is not an exact pin (name==version)"
                ));
            };
            // pip's normalised name: case, `-`, `_` and `.` are one.
            let key = name.to_ascii_lowercase().replace(['_', '.'], "-");
            if !names.insert(key) {
                return Err(format!("pip_base_packages: {name} is pinned twice"));
            }
        }
        Ok(())
    }

    /// What is wrong with the spec's `sources`, if anything.
    pub(super) fn check_trees(&self) -> Result<(), String> {
        fn plain(s: &str) -> bool {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        }
        fn owner_name(repo: &str) -> bool {
            let parts: Vec<&str> = repo.split('/').collect();
            parts.len() == 2 && parts.iter().all(|p| plain(p))
        }
        fn full_commit(c: &str) -> bool {
            c.len() == 40 && c.chars().all(|c| c.is_ascii_hexdigit())
        }
        for (name, src) in &self.sources {
            if !plain(name) {
                return Err(format!("source name {name:?} is not a plain folder name"));
            }
            if !owner_name(&src.repo) {
                return Err(format!(
                    "source {name}: repo {:?} is not owner/name",
                    src.repo
                ));
            }
            if !full_commit(&src.commit) {
                return Err(format!(
                    "source {name}: commit {:?} is not a full 40-digit commit id",
                    src.commit
                ));
            }
        }
        for (name, src) in &self.git_sources {
            if !plain(name) {
                return Err(format!(
                    "git source name {name:?} is not a plain folder name"
                ));
            }
            if !owner_name(&src.repo) {
                return Err(format!(
                    "git source {name}: repo {:?} is not owner/name",
                    src.repo
                ));
            }
            if !full_commit(&src.commit) {
                return Err(format!(
                    "git source {name}: commit {:?} is not a full 40-digit commit id",
                    src.commit
                ));
            }
            let scheme = ["https://", "http://", "git://", "ssh://"];
            if !scheme.iter().any(|p| src.url.starts_with(p))
                || src.url.contains(char::is_whitespace)
            {
                return Err(format!(
                    "git source {name}: url {:?} is not an http(s), git or ssh URL",
                    src.url
                ));
            }
            if let Some(b) = &src.branch {
                if !plain(b) {
                    return Err(format!(
                        "git source {name}: branch {b:?} is not a plain name"
                    ));
                }
            }
        }
        crate::conda::translate_packages(&self.conda_packages).map_err(|e| e.to_string())?;
        let relative = |path: &str| {
            !path.is_empty()
                && !path.starts_with('/')
                && !path
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..")
        };
        for path in &self.absent_files {
            if !relative(path) {
                return Err(format!("absent file {path:?} is not a relative path"));
            }
        }
        for (path, repo) in &self.submodules {
            if !relative(path) {
                return Err(format!("submodule path {path:?} is not a relative path"));
            }
            let parts: Vec<&str> = repo.split('/').collect();
            if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
                return Err(format!("submodule {path}: repo {repo:?} is not owner/name"));
            }
        }
        Ok(())
    }
}
