//! Container images for the docker backend: the three tiers of the reference
//! harness (base, env, instance), their names, content-addressed tags and
//! build contexts.
//!
//! - **root**: a plain Debian suite, pulled (`--base-image`) or bootstrapped
//!   with debootstrap (`harness-scripts/bootstrap-base.sh`) where no registry
//!   answers.
//! - **base**: root + git, patch, build tools, the suite's python3 and the CA
//!   bundle. The suite is chosen by the spec's Python version (through
//!   [`crate::python::resolve`]).
//! - **python** (in the base tier): base + the spec's interpreter (the
//!   suite's own, or a host build copied in) and a venv at `/opt/venv` with
//!   pinned pip, setuptools and wheel ([`python`]).
//! - **env**: the python image (the base for specs without Python) + the
//!   spec's apt packages, and its requirements (read from the mirror) and
//!   pip packages in the venv.
//! - **snapshot** (in the env tier): env + an older commit's tree at
//!   `/testbed`, shared by the instances of nearby base commits
//!   ([`snapshot`]).
//! - **instance**: env + the base commit's tree at `/testbed` as a one-commit
//!   repository, `pre_install` and `install` run, then a setup commit; over
//!   a snapshot, only the differences are sent and stored.
//!
//! Every tag is a hash of what built the image (its Dockerfile, scripts,
//! files and parent image), so a changed spec makes a new image and an
//! unchanged one is found and reused.

//!
//! This module names the tiers and their images; [`plans`] says what builds
//! each image (pure code: nothing there talks to the engine); [`build`]
//! finds, pulls, bootstraps or builds them on the engine.

pub mod bases;
pub mod build;
pub mod chain;
pub mod gitsources;
pub mod hostfiles;
mod instance;
pub mod kind;
pub(crate) mod lines;
pub mod nodebug;
pub mod plans;
pub mod python;
pub mod setup;
pub mod snapshot;
pub mod toolchain;

use sha2::{Digest, Sha256};

use crate::spec::hex;

/// The debootstrap driver, written out and run by the docker backend.
pub const BOOTSTRAP_SCRIPT: &str = include_str!("../../../../harness-scripts/bootstrap-base.sh");

/// Where the venv of env images lives.
pub const VENV: &str = "/opt/venv";
/// Where the repository lives in instance images (as in the reference).
pub const TESTBED: &str = "/testbed";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("reading {what} for the build context: {source}")]
    Git { what: String, source: git2::Error },
    #[error("writing the build context: {0}")]
    Tar(std::io::Error),
}

/// The Debian suites base images are made from (defined below `python`,
/// which chooses interpreters by suite).
pub use crate::debian::Suite;

pub use kind::Kind;

/// An image tier, as in the reference's cache levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    Base,
    Env,
    Instance,
}

impl Tier {
    /// Every tier, lowest first.
    pub const ALL: [Tier; 3] = [Tier::Base, Tier::Env, Tier::Instance];

    /// Its name in metrics (`base`, `env`, `instance`).
    pub fn name(self) -> &'static str {
        match self {
            Tier::Base => "base",
            Tier::Env => "env",
            Tier::Instance => "instance",
        }
    }

    /// Folder under `logs/build_images/` (the reference's names).
    pub fn log_dir(self) -> &'static str {
        match self {
            Tier::Base => "base",
            Tier::Env => "env",
            Tier::Instance => "instances",
        }
    }
}

pub use crate::settings::{CacheLevel, UnknownCacheLevel};

/// The reference's `should_remove`: an image of `tier` goes at the end of a
/// run when the cache level does not keep its tier, and only if `--clean`
/// was given or the run created it.
pub fn should_remove(tier: Tier, level: CacheLevel, clean: bool, existed_before: bool) -> bool {
    let dropped = match tier {
        Tier::Base => level == CacheLevel::None,
        Tier::Env => matches!(level, CacheLevel::None | CacheLevel::Base),
        Tier::Instance => level != CacheLevel::Instance,
    };
    dropped && (clean || !existed_before)
}

/// The host architecture as image names spell it (`x86_64`, `arm64`).
pub fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        other => other,
    }
}

/// Lowercased, with anything a repository name may not hold replaced.
pub(crate) fn name_part(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A short content hash of what builds an image.
pub(crate) fn tag_of(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize())[..16].to_string()
}

/// A prebuilt instance image under `--namespace`, named as the reference's
/// published images are: `NS/sweb.eval.x86_64.<id, "__" -> "_1776_">:<tag>`.
pub fn namespace_image(namespace: &str, instance_id: &str, tag: &str) -> String {
    let ns = namespace.trim_end_matches('/');
    format!(
        "{ns}/sweb.eval.{}.{}:{tag}",
        arch(),
        instance_id.replace("__", "_1776_")
    )
    .to_lowercase()
}

/// Name of the bootstrapped root image of a suite, addressed by the script
/// that makes it.
pub fn bootstrap_image(suite: Suite) -> String {
    format!(
        "patchgrade.root.{}:{}",
        suite.name(),
        tag_of(&[BOOTSTRAP_SCRIPT.as_bytes()])
    )
}

/// The tier of an image by its name (namespace prefixes ignored), for cleanup.
pub fn tier_of(name: &str) -> Option<Tier> {
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.starts_with("sweb.eval.") {
        return Some(Tier::Instance);
    }
    Kind::of(name).map(|(k, _)| k.tier())
}

/// The shell line that activates an env inside a container: our venv, or a
/// reference image's conda env (for `--namespace` images).
pub fn activate_line() -> String {
    format!(
        "if [ -f {VENV}/bin/activate ]; then source {VENV}/bin/activate; \\
         elif [ -f /opt/miniconda3/bin/activate ]; then source /opt/miniconda3/bin/activate && conda activate testbed; fi"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_levels_have_one_spelling() {
        for level in CacheLevel::ALL {
            let text = level.to_string();
            assert_eq!(text.parse::<CacheLevel>().unwrap(), level);
            assert_eq!(serde_json::to_value(level).unwrap(), text.as_str());
        }
        assert_eq!(CacheLevel::Instance.to_string(), "instance");
        assert!("Env".parse::<CacheLevel>().is_err());
    }

    #[test]
    fn reference_namespace_names() {
        let n = namespace_image("swebench", "django__django-11099", "latest");
        assert_eq!(
            n,
            format!(
                "swebench/sweb.eval.{}.django_1776_django-11099:latest",
                arch()
            )
        );
        assert_eq!(tier_of(&n), Some(Tier::Instance));
        assert_eq!(
            tier_of("127.0.0.1:5000/x/sweb.eval.x86_64.a:latest"),
            Some(Tier::Instance)
        );
        assert_eq!(
            tier_of("patchgrade.env.py.x86_64.bookworm:abc"),
            Some(Tier::Env)
        );
        assert_eq!(
            tier_of("patchgrade.snap.x86_64.acme__w:abc"),
            Some(Tier::Env)
        );
        assert_eq!(tier_of("debian:bookworm-slim"), None);
    }

    #[test]
    fn should_remove_matches_the_reference() {
        use CacheLevel::*;
        // Default level env: instance images go, env and base stay.
        assert!(should_remove(Tier::Instance, Env, false, false));
        assert!(!should_remove(Tier::Env, Env, false, false));
        assert!(!should_remove(Tier::Base, Env, false, false));
        // Images that existed before the run stay unless --clean.
        assert!(!should_remove(Tier::Instance, Env, false, true));
        assert!(should_remove(Tier::Instance, Env, true, true));
        assert!(should_remove(Tier::Base, None, false, false));
        assert!(should_remove(Tier::Env, Base, false, false));
        assert!(!should_remove(Tier::Instance, Instance, true, false));
    }
}
