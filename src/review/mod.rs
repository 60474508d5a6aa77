//! Code review of candidate patches: would a maintainer merge it?
//!
//! Two layers (docs/review.md): cheap, reproducible static findings, and an
//! optional model reading the diff against a rubric.
//!
//! - [`lines`]: line mapping base ↔ patched through a diff's hunks.
//! - [`lint`]: typed linter findings (ruff, flake8, pylint) and the delta
//!   that blames a patch only for what it introduced.
pub mod complexity;
pub mod lines;
pub mod lint;
