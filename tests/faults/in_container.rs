//! Hostile or broken tests inside the container, all in one run (images
//! shared, 2 workers): each case's instance has a test patch whose test does
//! the faulty thing, as a hostile candidate's tests would. Every test here
//! checks its own case, then that every instance of the run kept its
//! expected verdict and that nothing of the run is left.

use patchgrade::exit;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use serde_json::Value;

use crate::support::*;

const RUN: &str = "corpus";
const MEMORY: &str = "256m";
/// PATCHGRADE_MAX_LOG for the run: the flood case writes 2 GiB past it.
const LOG_CAP: usize = 1 << 20;

/// Allocates (and touches) 2 GiB under a 256 MiB limit.
const OOM: &str = "    def test_high(self):\n        blocks = []\n        for _ in range(64):\n            blocks.append(b'\\x01' * (32 << 20))\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// Forks until the pids limit stops it, counts, then kills the bomb.
const BOMB: &str = concat!(
    "    def test_high(self):\n",
    "        import os, signal, time\n",
    "        pid = os.fork()\n",
    "        if pid == 0:\n",
    "            os.setsid()\n",
    "            while True:\n",
    "                try:\n",
    "                    os.fork()\n",
    "                except OSError:\n",
    "                    time.sleep(0.05)\n",
    "        time.sleep(4)\n",
    "        n = len([p for p in os.listdir('/proc') if p.isdigit()])\n",
    "        print('processes at the limit:', n)\n",
    "        for _ in range(50):\n",
    "            try:\n",
    "                os.killpg(pid, signal.SIGKILL)\n",
    "            except ProcessLookupError:\n",
    "                break\n",
    "            time.sleep(0.1)\n",
    "        self.assertGreater(n, 100)\n",
    "        self.assertLessEqual(n, 256)\n",
    "        self.assertEqual(clamp(9, 0, 3), 3)\n",
);

/// 2 GiB of output from a test that runs first (`test_flood` < `test_high`).
const FLOOD: &str = "    def test_flood(self):\n        import os\n        line = b'flood ' * 170 + b'\\n'\n        chunk = line * ((1 << 20) // len(line))\n        for _ in range(2048):\n            os.write(1, chunk)\n\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// The network is tried, and must fail; loopback, `localhost` included,
/// must work (Django's live-server tests bind to `localhost`).
const NET: &str = "    def test_high(self):\n        import socket\n        with self.assertRaises(OSError):\n            socket.create_connection(('deb.debian.org', 80), timeout=3)\n        with self.assertRaises(OSError):\n            socket.create_connection(('1.1.1.1', 53), timeout=3)\n        self.assertEqual(socket.gethostbyname('localhost'), '127.0.0.1')\n        srv = socket.socket()\n        srv.bind(('localhost', 0))\n        srv.listen(1)\n        socket.create_connection(('localhost', srv.getsockname()[1]), timeout=3).close()\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// Replaces the repository's .git with a made-up history, then fails.
const GIT: &str = "    def test_high(self):\n        import shutil, subprocess\n        shutil.rmtree('.git')\n        subprocess.run('git init -q . && git -c user.name=x -c user.email=x@x commit -q --allow-empty -m forged && git tag v99', shell=True)\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// Rewrites the eval script so that, were bash to read on from the file,
/// the exit code would read 0 and a line would be printed; then fails.
const SCRIPT: &str = "    def test_high(self):\n        word = 'INJ' + 'ECTED'\n        with open('/eval.sh') as f:\n            text = f.read()\n        text = text.replace('PATCHGRADE_TEST_EXIT_CODE=$?', 'PATCHGRADE_TEST_EXIT_CODE=0; echo ' + word + '-BY-TEST')\n        with open('/eval.sh', 'r+') as f:\n            f.write(text)\n            f.truncate()\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// Kills the eval script that runs it (its parent bash).
const KILLER: &str = "    def test_high(self):\n        import os, signal\n        os.kill(os.getppid(), signal.SIGKILL)\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

/// The whole corpus run, done once.
pub struct Shared {
    pub c: Corpus,
    pub code: Option<i32>,
    pub stderr: String,
    /// Case -> the outcome docs/faults.md fixes for it.
    pub expected: BTreeMap<&'static str, &'static str>,
}

/// The run (made by the first test that asks), or None when Docker is
/// absent and not required.
pub fn shared() -> Option<MutexGuard<'static, Shared>> {
    // A Mutex: the fixture's git2 repository is Send, not Sync.
    static SHARED: OnceLock<Option<Mutex<Shared>>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            if !docker_ready("faults::in_container") {
                return None;
            }
            let _serial = serial();
            Some(Mutex::new(corpus_run()))
        })
        .as_ref()
        .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
}

fn corpus_run() -> Shared {
    let mut c = Corpus::new("fc");
    // The symlink case: the base holds widgets/vendor -> a folder outside
    // the tree.
    let outside = c.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let root = c.w.repo.repo.workdir().unwrap().to_owned();
    std::os::unix::fs::symlink(&outside, root.join("widgets/vendor")).unwrap();
    let mut idx = c.w.repo.repo.index().unwrap();
    idx.add_path(std::path::Path::new("widgets/vendor"))
        .unwrap();
    idx.write().unwrap();
    c.w.repo.commit(&[], "vendor link");
    c.w.base = c.w.repo.head();

    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    let mut expected = BTreeMap::new();
    let mut case = |c: &mut Corpus, name: &'static str, test: &str, patch: &str, outcome| {
        c.add(name, test, patch);
        expected.insert(name, outcome);
    };
    case(&mut c, "gold", HIGH, &gold, "resolved");
    case(&mut c, "wrong", HIGH, &wrong, "unresolved");
    case(&mut c, "oom", OOM, &gold, "unresolved");
    case(&mut c, "bomb", BOMB, &gold, "resolved");
    case(&mut c, "flood", FLOOD, &gold, "resolved");
    case(&mut c, "net", NET, &gold, "resolved");
    case(&mut c, "git", GIT, &wrong, "unresolved");
    case(&mut c, "script", SCRIPT, &wrong, "unresolved");
    case(&mut c, "killer", KILLER, &gold, "unresolved");
    case(&mut c, "panic", HIGH, &gold, "infra_error");
    let evil = format!(
        "{gold}diff --git a/widgets/vendor/evil.py b/widgets/vendor/evil.py\nnew file mode 100644\nindex 0000000..1b2c3d4\n--- /dev/null\n+++ b/widgets/vendor/evil.py\n@@ -0,0 +1 @@\n+PWNED = True\n"
    );
    case(&mut c, "symlink", HIGH, &evil, "patch_apply_failed");
    case(&mut c, "bigstmt", HIGH, &gold, "resolved");
    let big = "The clamp function ignores its upper bound; values above hi come back unchanged.\n"
        .repeat(10 << 20 >> 6);
    let id = c.id("bigstmt");
    c.row_mut(&id)["problem_statement"] = Value::from(big);
    c.write();

    let panic_id = c.id("panic");
    let cap = LOG_CAP.to_string();
    let out = c.run(
        RUN,
        &[
            "--max-workers",
            "2",
            "--timeout",
            "180",
            "--memory",
            MEMORY,
            "--pids-limit",
            "256",
        ],
        &[
            ("PATCHGRADE_FAULT_PANIC", &panic_id),
            ("PATCHGRADE_MAX_LOG", &cap),
        ],
    );
    Shared {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        c,
        expected,
    }
}

impl Shared {
    /// The run completed and wrote its summary; every instance has the
    /// verdict fixed for it; nothing of the run is left.
    fn check_run(&self) {
        // 0, or the documented exit for infra failures left after the retry
        // (the panic case); never a crash, bad input or interrupt.
        assert!(
            !matches!(
                self.code,
                Some(exit::INTERNAL | exit::BAD_INPUT | exit::INFRA | exit::INTERRUPTED) | None
            ),
            "exit {:?}: {}",
            self.code,
            self.stderr
        );
        let summary = self.c.w.sb.summary("m", RUN);
        assert_eq!(summary["total_instances"], self.expected.len());
        for (case, want) in &self.expected {
            let rec = self.c.record(RUN, case);
            assert_eq!(rec["outcome"], *want, "{case} kept its verdict: {rec}");
        }
        self.c.assert_nothing_left(None, RUN);
    }

    fn record(&self, case: &str) -> Value {
        self.c.record(RUN, case)
    }

    fn log(&self, case: &str) -> String {
        self.c.file(RUN, case, "test_output.txt")
    }
}

#[test]
fn memory_past_the_limit_is_unresolved_oom_killed() {
    let Some(s) = shared() else { return };
    let rec = s.record("oom");
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    let detail = rec["detail"].as_str().unwrap();
    assert!(detail.starts_with("OOM-killed at 256m"), "{detail}");
    let report = s.c.file(RUN, "oom", "report.json");
    assert!(report.contains("OOM-killed at 256m"), "{report}");
    s.check_run();
}

#[test]
fn fork_bomb_is_contained_by_the_pids_limit() {
    let Some(s) = shared() else { return };
    assert_eq!(s.record("bomb")["outcome"], "resolved");
    assert!(s.log("bomb").contains("processes at the limit:"));
    s.check_run();
}

#[test]
fn gigabytes_of_output_are_capped_and_the_cap_reported() {
    let Some(s) = shared() else { return };
    let rec = s.record("flood");
    assert_eq!(rec["outcome"], "resolved", "{rec}");
    let detail = rec["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("test output capped at {LOG_CAP} bytes")),
        "{detail}"
    );
    let log = s.log("flood");
    assert!(log.len() < LOG_CAP + 1024, "log of {} bytes", log.len());
    assert!(
        log.contains("bytes of output dropped here"),
        "note in the log"
    );
    // The results after the flood are kept, so grading read them.
    assert_eq!(rec["test_exit_code"], 0);
    s.check_run();
}

#[test]
fn network_attempts_fail_inside_the_container() {
    let Some(s) = shared() else { return };
    assert_eq!(s.record("net")["outcome"], "resolved");
    s.check_run();
}

#[test]
fn rewriting_git_does_not_change_the_grade() {
    let Some(s) = shared() else { return };
    let rec = s.record("git");
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    assert_eq!(rec["test_exit_code"], 1, "the real exit code: {rec}");
    assert_eq!(
        rec["grade"]["fail_to_pass"]["failure"],
        serde_json::json!([F2P])
    );
    s.check_run();
}

#[test]
fn rewriting_the_eval_script_does_not_change_the_grade() {
    let Some(s) = shared() else { return };
    let rec = s.record("script");
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    assert_eq!(rec["test_exit_code"], 1, "the real exit code: {rec}");
    let log = s.log("script");
    assert!(
        !log.contains("INJECTED-BY-TEST"),
        "injected commands ran: {log}"
    );
    let codes: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with(">>>>> Test Exit Code:"))
        .collect();
    assert_eq!(codes, [">>>>> Test Exit Code: 1"], "{log}");
    s.check_run();
}

#[test]
fn killing_the_eval_script_is_the_candidates_failure() {
    let Some(s) = shared() else { return };
    let rec = s.record("killer");
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    assert!(rec["ungradable"].is_object(), "{rec}");
    s.check_run();
}

#[test]
fn a_panic_in_an_evaluation_is_an_infra_error_record() {
    let Some(s) = shared() else { return };
    let rec = s.record("panic");
    assert_eq!(rec["outcome"], "infra_error", "{rec}");
    let detail = rec["detail"].as_str().unwrap();
    assert!(
        detail.contains("panicked") && detail.contains("PATCHGRADE_FAULT_PANIC"),
        "{detail}"
    );
    // Retried once, as every infra error.
    assert!(s.stderr.contains("retrying once"), "{}", s.stderr);
    let summary = s.c.w.sb.summary("m", RUN);
    assert_eq!(
        summary["patchgrade"]["outcomes"]["infra_error"], 1,
        "{summary}"
    );
    s.check_run();
}

#[test]
fn a_patch_through_a_symlink_out_of_the_tree_is_refused() {
    let Some(s) = shared() else { return };
    let rec = s.record("symlink");
    assert_eq!(rec["outcome"], "patch_apply_failed", "{rec}");
    let outside = s.c.path().join("outside");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside the tree"
    );
    s.check_run();
}

#[test]
fn a_ten_megabyte_problem_statement_is_evaluated() {
    let Some(s) = shared() else { return };
    let rec = s.record("bigstmt");
    assert_eq!(rec["outcome"], "resolved", "{rec}");
    s.check_run();
}
