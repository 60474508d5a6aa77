//! The kinds of patchgrade's images, finer than their [`Tier`], told by
//! the name prefixes `plans`, `python` and `toolchain` give them.

use serde::Serialize;

use super::Tier;

/// What an image is, finer than its [`Tier`]: the name prefixes of
/// [`super::plans`], [`super::python`] and [`super::toolchain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Root,
    Base,
    Python,
    Toolchain,
    Env,
    Snapshot,
    Instance,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Root => "root",
            Kind::Base => "base",
            Kind::Python => "python",
            Kind::Toolchain => "toolchain",
            Kind::Env => "env",
            Kind::Snapshot => "snapshot",
            Kind::Instance => "instance",
        }
    }

    /// The tier it is kept and removed with (`--cache-level`).
    pub fn tier(self) -> Tier {
        match self {
            Kind::Root | Kind::Base | Kind::Python | Kind::Toolchain => Tier::Base,
            Kind::Env | Kind::Snapshot => Tier::Env,
            Kind::Instance => Tier::Instance,
        }
    }

    /// The kind of an image by its name (`repository:tag`, a registry
    /// prefix ignored), and the rest of its repository after the kind's
    /// prefix; None for images that are not patchgrade's.
    pub fn of(name: &str) -> Option<(Kind, &str)> {
        let last = name.rsplit('/').next().unwrap_or(name);
        let repository = last.split_once(':').map_or(last, |(r, _)| r);
        let rest = repository.strip_prefix("patchgrade.")?;
        let (prefix, rest) = rest.split_once('.')?;
        let kind = match prefix {
            "root" => Kind::Root,
            // `base.py.<arch>.<suite>` is the base, `base.apt.…` a base
            // with a spec's `apt_base_packages`, `base.pip.…` a python image
            // with its `pip_base_packages`; `base.py3.8.…` the python image
            // (`images::python::python_image_name`).
            "base" if ["py.", "apt.", "pip."].iter().any(|p| rest.starts_with(p)) => Kind::Base,
            "base" => Kind::Python,
            "tool" => Kind::Toolchain,
            "env" => Kind::Env,
            "snap" => Kind::Snapshot,
            "eval" => Kind::Instance,
            _ => return None,
        };
        Some((kind, rest))
    }
}
