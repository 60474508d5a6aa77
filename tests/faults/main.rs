//! The fault corpus (docs/faults.md): faults of the engine, the process,
//! the disk, the inputs and hostile tests, each with the result fixed for
//! it in docs/faults.md, on the real binary and the real Docker engine.
//!
//! Without a daemon the Docker cases skip, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where they fail. They run
//! one at a time (a lock) and share images (content-addressed tags).

#[path = "../common/mod.rs"]
mod common;

mod daemon;
mod disk;
mod in_container;
mod inputs;
mod process;
mod support;
