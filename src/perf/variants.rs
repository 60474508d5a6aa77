//! Host side of a measurement: one checkout of the base tree per variant,
//! its patch applied (as an evaluation applies it), the test patch when the
//! workload needs it, and the files that differ from base, ready for
//! [`super::container::measure`].

use std::path::Path;

use super::container::{variant_files, ContainerError, VariantFiles};
use super::record::{Role, VariantInfo};
use crate::dataset::Instance;
use crate::patch::{self, ChangeKind, Patch, PatchError};
use crate::repo::{RepoCache, RepoError};

/// A variant to prepare.
#[derive(Debug, Clone)]
pub struct PatchVariant {
    pub info: VariantInfo,
    /// The patch; `None` for base and its A/A copy.
    pub patch: Option<String>,
}

impl PatchVariant {
    pub fn base() -> Self {
        Self::reference("base", Role::Base)
    }

    /// The A/A copy of base.
    pub fn base_copy() -> Self {
        Self::reference("base-aa", Role::BaseCopy)
    }

    fn reference(name: &str, role: Role) -> Self {
        Self {
            info: VariantInfo {
                name: name.into(),
                role,
                model: None,
                resolved: None,
            },
            patch: None,
        }
    }
}

/// A variant could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum VariantError {
    #[error("instance {instance}: {source}")]
    Repo {
        instance: String,
        #[source]
        source: RepoError,
    },
    #[error("variant {variant}: its patch cannot be used: {source}")]
    Patch {
        variant: String,
        #[source]
        source: PatchError,
    },
    #[error("variant {variant}: the test patch does not apply: {source}")]
    TestPatch {
        variant: String,
        #[source]
        source: PatchError,
    },
    #[error("variant {variant}: cannot restore test file {path}: {reason}")]
    Restore {
        variant: String,
        path: String,
        reason: String,
    },
    #[error(transparent)]
    Files(#[from] ContainerError),
}

/// Checks out `inst`'s base tree under `workdir/<name>` for each variant,
/// applies its patch and, with `test_patch`, the instance's test patch (test
/// files restored to base first, as the eval script does), and returns the
/// files each variant changes. One variant's failure is its own: the result
/// is per variant, in input order.
pub fn prepare(
    repos: &RepoCache,
    inst: &Instance,
    workdir: &Path,
    variants: &[PatchVariant],
    test_patch: bool,
) -> Result<Vec<Result<VariantFiles, VariantError>>, VariantError> {
    let repo_err = |source| VariantError::Repo {
        instance: inst.instance_id.clone(),
        source,
    };
    repos
        .ensure(&inst.repo, &[&inst.base_commit])
        .map_err(repo_err)?;
    let tests = if test_patch && !inst.test_patch.trim().is_empty() {
        Some(
            Patch::parse(&inst.test_patch).map_err(|source| VariantError::TestPatch {
                variant: "(all)".into(),
                source,
            })?,
        )
    } else {
        None
    };
    let mut out = Vec::new();
    for v in variants {
        let name = &v.info.name;
        let dir = workdir.join(name);
        repos
            .checkout(&inst.repo, &inst.base_commit, &dir)
            .map_err(repo_err)?;
        out.push(prepare_one(&dir, name, v.patch.as_deref(), tests.as_ref()));
    }
    Ok(out)
}

fn prepare_one(
    dir: &Path,
    name: &str,
    patch: Option<&str>,
    tests: Option<&Patch>,
) -> Result<VariantFiles, VariantError> {
    if let Some(text) = patch.filter(|p| !p.trim().is_empty()) {
        let p = Patch::parse(text).map_err(|source| VariantError::Patch {
            variant: name.to_string(),
            source,
        })?;
        patch::apply(dir, &p).map_err(|source| VariantError::Patch {
            variant: name.to_string(),
            source,
        })?;
    }
    if let Some(t) = tests {
        restore_test_files(dir, name, t)?;
        patch::apply(dir, t).map_err(|source| VariantError::TestPatch {
            variant: name.to_string(),
            source,
        })?;
    }
    Ok(variant_files(name, dir)?)
}

/// Files the test patch touches go back to base (tracked) or away (added),
/// so that a candidate's edits to them never meet the test patch.
fn restore_test_files(dir: &Path, name: &str, t: &Patch) -> Result<(), VariantError> {
    let fail = |path: &str, reason: String| VariantError::Restore {
        variant: name.to_string(),
        path: path.to_string(),
        reason,
    };
    let repo = git2::Repository::open(dir).map_err(|e| fail(".", e.to_string()))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(|e| fail("HEAD", e.to_string()))?;
    for f in &t.files {
        let in_base = head.get_path(Path::new(&f.path)).is_ok();
        if f.kind == ChangeKind::Added || !in_base {
            let p = dir.join(&f.path);
            if p.symlink_metadata().is_ok() {
                std::fs::remove_file(&p).map_err(|e| fail(&f.path, e.to_string()))?;
            }
        } else {
            let mut co = git2::build::CheckoutBuilder::new();
            co.force().path(&f.path);
            repo.checkout_tree(head.as_object(), Some(&mut co))
                .map_err(|e| fail(&f.path, e.to_string()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::container::FileData;
    use crate::repo::RepoSources;
    use git2::{Repository, Signature};

    /// A real repository `o/r` in `mirrors/o__r` with one commit.
    fn fixture(root: &Path) -> (RepoCache, String) {
        let dir = root.join("mirrors/o__r");
        let repo = Repository::init(&dir).unwrap();
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::write(dir.join("pkg.py"), "x = 1\n").unwrap();
        std::fs::write(dir.join("tests/test_a.py"), "t = 1\n").unwrap();
        let mut idx = repo.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = Signature::now("t", "t@t").unwrap();
        let c = repo
            .commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        let cache = RepoCache::new(RepoSources {
            cache: root.join("cache"),
            mirror_dir: Some(root.join("mirrors")),
            export_dirs: vec![],
            url_template: "file:///nonexistent/{repo}".into(),
        });
        (cache, c.to_string())
    }

    fn diff(path: &str, old: &str, new: &str) -> String {
        format!("diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n")
    }

    fn text(v: &VariantFiles, path: &str) -> Option<String> {
        v.files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, d)| match d {
                FileData::File { bytes, .. } => String::from_utf8(bytes.clone()).unwrap(),
                FileData::Symlink { target } => format!("-> {target}"),
            })
    }

    #[test]
    fn variants_get_their_patch_and_the_canonical_tests() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, base) = fixture(tmp.path());
        let test_patch = diff("tests/test_a.py", "t = 1", "t = 2")
            + "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+n = 1\n";
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": base,
            "test_patch": test_patch,
        }))
        .unwrap();
        let cand = |name: &str, patch: &str| PatchVariant {
            info: VariantInfo {
                name: name.into(),
                role: Role::Candidate,
                model: Some("m".into()),
                resolved: Some(true),
            },
            patch: Some(patch.into()),
        };
        // The candidate also edits the test file (it is put back before the
        // test patch) and adds the file the test patch adds.
        let tampering = diff("pkg.py", "x = 1", "x = 2")
            + &diff("tests/test_a.py", "t = 1", "t = 99")
            + "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+n = 42\n";
        let variants = vec![
            PatchVariant::base(),
            cand("good", &tampering),
            cand("bad", &diff("pkg.py", "nothing like this", "y")),
        ];
        let out = prepare(&cache, &inst, &tmp.path().join("trees"), &variants, true).unwrap();
        let base_files = out[0].as_ref().unwrap();
        assert_eq!(base_files.name, "base");
        assert_eq!(
            text(base_files, "tests/test_a.py").as_deref(),
            Some("t = 2\n")
        );
        assert_eq!(
            text(base_files, "tests/test_new.py").as_deref(),
            Some("n = 1\n")
        );
        assert_eq!(text(base_files, "pkg.py"), None);
        let good = out[1].as_ref().unwrap();
        assert_eq!(text(good, "pkg.py").as_deref(), Some("x = 2\n"));
        assert_eq!(text(good, "tests/test_a.py").as_deref(), Some("t = 2\n"));
        assert_eq!(text(good, "tests/test_new.py").as_deref(), Some("n = 1\n"));
        assert!(matches!(
            out[2],
            Err(VariantError::Patch { ref variant, .. }) if variant == "bad"
        ));
        // Without the test patch, base changes nothing.
        let out = prepare(
            &cache,
            &inst,
            &tmp.path().join("trees2"),
            &variants[..1],
            false,
        )
        .unwrap();
        assert!(out[0].as_ref().unwrap().files.is_empty());
    }
}
