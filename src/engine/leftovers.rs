//! What a killed run leaves behind, found and removed when the next run on
//! the same run id starts (it holds the run folder's lock, so the earlier
//! process is gone): its scratch folders here; its containers through
//! [`crate::backend::Backend::remove_stale`].

use std::path::{Path, PathBuf};

/// Scratch folders are `<tmp>/patchgrade-work-XXXX`, each with this file
/// naming its run folder and process.
const PREFIX: &str = "patchgrade-work-";
const OWNER_FILE: &str = ".patchgrade-owner";

/// A scratch folder for workspaces, marked with its owner.
pub fn scratch(run_dir: &Path) -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix(PREFIX).tempdir()?;
    std::fs::write(dir.path().join(OWNER_FILE), owner_line(run_dir))?;
    Ok(dir)
}

fn owner_line(run_dir: &Path) -> String {
    format!("{} {}\n", std::process::id(), absolute(run_dir).display())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

/// Remove the scratch folders of earlier processes on `run_dir`; returns
/// how many. Only call it holding the run folder's lock.
pub fn remove_stale_scratch(run_dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let ours = absolute(run_dir);
    let me = std::process::id();
    let mut removed = 0;
    for entry in rd.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let Ok(owner) = std::fs::read_to_string(entry.path().join(OWNER_FILE)) else {
            continue;
        };
        let Some((pid, dir)) = owner.trim_end_matches('\n').split_once(' ') else {
            continue;
        };
        if Path::new(dir) == ours && pid.parse() != Ok(me) {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(
                        "removed {} left by an earlier run (pid {pid})",
                        entry.path().display()
                    );
                    removed += 1;
                }
                Err(e) => tracing::warn!("cannot remove {}: {e}", entry.path().display()),
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_processes_scratch_of_the_same_run_goes() {
        let runs = tempfile::tempdir().unwrap();
        let (a, b) = (runs.path().join("a"), runs.path().join("b"));
        let mine = scratch(&a).unwrap();
        let other_run = scratch(&b).unwrap();
        let dead = tempfile::Builder::new().prefix(PREFIX).tempdir().unwrap();
        std::fs::write(
            dead.path().join(OWNER_FILE),
            format!("4194305 {}\n", a.display()),
        )
        .unwrap();
        let dead_path = dead.keep();
        assert_eq!(remove_stale_scratch(&a), 1);
        assert!(!dead_path.exists());
        assert!(mine.path().exists() && other_run.path().exists());
    }
}
