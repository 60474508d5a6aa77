//! The settings vocabulary: the one typed form of each setting a run
//! records, spelled the same in run.json, the records and the flags
//! (serde, `Display` and `FromStr` agree). Below every module that names
//! them, so the run folder, the records and the backends share them.

/// Which backend ran a run's tests, as run.json and the summaries name it
/// (`docker`, `local`, `swarm`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Docker,
    Local,
    Swarm,
}

impl BackendKind {
    pub const ALL: [BackendKind; 3] = [BackendKind::Docker, BackendKind::Local, BackendKind::Swarm];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Docker => "docker",
            BackendKind::Local => "local",
            BackendKind::Swarm => "swarm",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that is none of the three.
#[derive(Debug, thiserror::Error)]
#[error("unknown backend {0:?} (docker, local, swarm)")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<BackendKind, UnknownBackend> {
        BackendKind::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

/// Which images outlive a run (`--cache-level`, the reference's meaning).
/// run.json and the flag spell it in lower case (`none`, `base`, `env`,
/// `instance`): serde, `Display` and `FromStr` all use that one spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheLevel {
    /// Remove every image the run built or pulled.
    None,
    /// Keep base images.
    Base,
    /// Keep base and env images (default).
    #[default]
    Env,
    /// Keep everything, instance images included: the fastest reruns.
    Instance,
}

impl CacheLevel {
    pub const ALL: [CacheLevel; 4] = [
        CacheLevel::None,
        CacheLevel::Base,
        CacheLevel::Env,
        CacheLevel::Instance,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CacheLevel::None => "none",
            CacheLevel::Base => "base",
            CacheLevel::Env => "env",
            CacheLevel::Instance => "instance",
        }
    }
}

impl std::fmt::Display for CacheLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--cache-level` value that is none of the four.
#[derive(Debug, thiserror::Error)]
#[error("unknown cache level {0:?} (none, base, env, instance)")]
pub struct UnknownCacheLevel(pub String);

impl std::str::FromStr for CacheLevel {
    type Err = UnknownCacheLevel;

    fn from_str(s: &str) -> Result<CacheLevel, UnknownCacheLevel> {
        CacheLevel::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| UnknownCacheLevel(s.to_string()))
    }
}

/// Per-evaluation settings instead of the run's (`serve`'s per-request
/// options). The default is the run's own: nothing overridden.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// Seconds the tests get instead of `--timeout` (never more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// false: a gradable run is not audited (no `audit` in the record).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub audit: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl Default for Overrides {
    fn default() -> Self {
        Overrides {
            timeout_seconds: None,
            audit: true,
        }
    }
}

impl Overrides {
    pub fn is_default(&self) -> bool {
        *self == Overrides::default()
    }

    /// The tests' timeout: the override, or the run's.
    pub fn timeout(&self, run: std::time::Duration) -> std::time::Duration {
        self.timeout_seconds
            .map_or(run, |s| std::time::Duration::from_secs(s).min(run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_kinds_have_one_spelling() {
        for kind in BackendKind::ALL {
            let text = kind.to_string();
            assert_eq!(text.parse::<BackendKind>().unwrap(), kind);
            assert_eq!(serde_json::to_value(kind).unwrap(), text.as_str());
        }
        assert_eq!(BackendKind::Swarm.to_string(), "swarm");
        assert!("auto".parse::<BackendKind>().is_err());
    }
}
