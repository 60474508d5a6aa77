//! The Debian suites patchgrade's images are made from. Below both
//! `python` (which picks an interpreter by the suite's own `python3`) and
//! `backend::docker::images` (which re-exports it), so neither imports the
//! other for it.

/// The Debian suites base images are made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Suite {
    Bullseye,
    Bookworm,
    Trixie,
}

impl Suite {
    pub const ALL: [Suite; 3] = [Suite::Bullseye, Suite::Bookworm, Suite::Trixie];

    pub fn name(self) -> &'static str {
        match self {
            Suite::Bullseye => "bullseye",
            Suite::Bookworm => "bookworm",
            Suite::Trixie => "trixie",
        }
    }

    /// The `python3` the suite ships.
    pub fn python(self) -> &'static str {
        match self {
            Suite::Bullseye => "3.9",
            Suite::Bookworm => "3.11",
            Suite::Trixie => "3.13",
        }
    }
}
