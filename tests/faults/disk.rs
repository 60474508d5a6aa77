//! The log folder's disk full: a small tmpfs mounted over the run's log
//! folder (needs root, as CI has).

use patchgrade::exit;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// Writes 4 MiB of output, then passes.
const FOUR_MIB: &str = "    def test_flood(self):\n        import os\n        line = b'flood ' * 170 + b'\\n'\n        for _ in range(4):\n            os.write(1, line * ((1 << 20) // len(line)))\n\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// A tmpfs mounted by the test; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).into_owned();
            if std::env::var("PATCHGRADE_REQUIRE_DOCKER").as_deref() == Ok("1") {
                panic!("the disk-full case needs to mount a tmpfs (root): {why}");
            }
            eprintln!("SKIPPED: cannot mount a tmpfs ({why})");
            return None;
        }
        Some(Tmpfs(dir.to_owned()))
    }

    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_full_log_disk_is_a_clear_error_and_nothing_half_written_is_reused() {
    if !docker_ready("a_full_log_disk_is_a_clear_error_and_nothing_half_written_is_reused") {
        return;
    }
    let _serial = serial();
    let mut c = Corpus::new("fd");
    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    c.add("gold", HIGH, &gold);
    c.add("wrong", HIGH, &wrong);
    c.add("flood", FOUR_MIB, &gold);
    c.write();
    let logs = c.path().join("logs/run_evaluation");
    let Some(disk) = Tmpfs::mount(&logs, "1m") else {
        return;
    };
    let run = "full";
    let env = [("PATCHGRADE_MAX_LOG", "16777216")];
    let out = c.run(run, &["--max-workers", "1"], &env);
    // Completed (0, or the documented exit for infra failures left after
    // the retry); never a crash.
    assert!(!matches!(
        out.status.code(),
        Some(exit::INTERNAL | exit::BAD_INPUT | exit::INTERRUPTED) | None
    ));
    let rec = c.record(run, "flood");
    assert_eq!(rec["outcome"], "infra_error", "{rec}");
    let detail = rec["detail"].as_str().unwrap();
    let log_path = c.eval_dir(run, "flood").join("test_output.txt");
    let named = format!(
        "logs/run_evaluation/{run}/m/{}/test_output.txt",
        c.id("flood")
    );
    assert!(
        detail.contains(&named) && detail.contains("No space left on device"),
        "{detail}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No space left on device"),
        "said on stderr: {err}"
    );
    // Nothing half-written: no temp file, no report.json without its record.
    let files = files_under(&logs);
    assert!(
        !files.iter().any(|f| f.to_string_lossy().contains("/.tmp-")),
        "{files:?}"
    );
    assert!(!c.eval_dir(run, "flood").join("report.json").exists());
    assert!(!log_path.exists());
    assert_eq!(c.record(run, "gold")["outcome"], "resolved");
    assert_eq!(c.record(run, "wrong")["outcome"], "unresolved");

    // Room again: the failed one is evaluated again, the others reused.
    disk.resize("64m");
    let out = c.run(run, &["--max-workers", "1"], &env);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("(reused)").count(), 2, "{err}");
    assert_eq!(c.record(run, "flood")["outcome"], "resolved");
    assert_eq!(c.record(run, "gold")["outcome"], "resolved");
    assert_eq!(c.record(run, "wrong")["outcome"], "unresolved");
    c.assert_nothing_left(None, run);
    drop(disk);
    c.remove_images();
}
