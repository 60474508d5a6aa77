//! What the fault cases share: the Docker check, the fixture, running the
//! binary (waited for or in the background), and the leftover checks.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use crate::common::widgets::*;
pub use crate::common::*;

/// Docker cases run one at a time: they share images and a 2-core machine.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the engine answers; a failure, not a skip, when
/// PATCHGRADE_REQUIRE_DOCKER=1.
pub fn docker_ready(test: &str) -> bool {
    let out = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return true,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run docker: {e}"),
    };
    if std::env::var("PATCHGRADE_REQUIRE_DOCKER").as_deref() == Ok("1") {
        panic!("{test}: PATCHGRADE_REQUIRE_DOCKER=1 but no Docker daemon answers: {why}");
    }
    eprintln!("SKIPPED {test}: no Docker daemon answers ({why}); set PATCHGRADE_REQUIRE_DOCKER=1 to make this a failure");
    false
}

pub fn docker_out(host: Option<&str>, args: &[&str]) -> String {
    let mut c = Command::new("docker");
    if let Some(h) = host {
        c.args(["--host", h]);
    }
    let out = c.args(args).output().expect("run docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Containers of a run id on an engine, running or not.
pub fn containers_of(host: Option<&str>, run_id: &str) -> Vec<String> {
    let filter = format!("label=patchgrade.run_id={run_id}");
    docker_out(host, &["ps", "-a", "-q", "--filter", &filter])
        .lines()
        .map(String::from)
        .collect()
}

pub const UNITTEST_SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// A widgets sandbox whose instances are named `<prefix>-<case>`.
pub struct Corpus {
    pub w: Widgets,
    pub prefix: String,
    rows: Vec<Value>,
    preds: Vec<Value>,
}

impl Corpus {
    pub fn new(prefix: &str) -> Corpus {
        Corpus::with_spec(prefix, UNITTEST_SPEC)
    }

    /// A corpus of the widgets repository under `spec`.
    pub fn with_spec(prefix: &str, spec: &str) -> Corpus {
        Corpus {
            w: Widgets::new(spec, &[]),
            prefix: prefix.to_string(),
            rows: Vec::new(),
            preds: Vec::new(),
        }
    }

    pub fn id(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    /// An instance whose test patch adds `test_body` (methods of TestClamp),
    /// with `patch` as the prediction of model `m`.
    pub fn add(&mut self, case: &str, test_body: &str, patch: &str) -> String {
        let tp = self.w.tests_adding(test_body);
        self.add_with(case, &tp, patch)
    }

    pub fn add_with(&mut self, case: &str, test_patch: &str, patch: &str) -> String {
        let id = self.id(case);
        let (g, b) = (self.w.gold.clone(), self.w.base.clone());
        self.rows.push(instance(
            &id,
            "acme/widgets",
            &b,
            &g,
            test_patch,
            &[F2P],
            &[P2P],
        ));
        self.preds.push(prediction(&id, "m", Some(patch)));
        id
    }

    /// Forget the rows added so far (same repository and ids, new tests).
    pub fn clear(&mut self) {
        self.rows.clear();
        self.preds.clear();
    }

    pub fn row_mut(&mut self, id: &str) -> &mut Value {
        self.rows
            .iter_mut()
            .find(|r| r["instance_id"] == id)
            .expect("row")
    }

    /// Write dataset.jsonl and preds.jsonl.
    pub fn write(&self) {
        self.w.sb.write("dataset.jsonl", &jsonl(&self.rows));
        self.w.sb.write("preds.jsonl", &jsonl(&self.preds));
    }

    pub fn path(&self) -> &Path {
        self.w.sb.path()
    }

    /// The folder TMPDIR points at for the binary: its scratch goes there.
    pub fn tmp(&self) -> PathBuf {
        let t = self.path().join("tmp");
        std::fs::create_dir_all(&t).unwrap();
        t
    }

    pub fn args<'a>(&self, run_id: &'a str, extra: &[&'a str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "run",
            "--dataset",
            "dataset.jsonl",
            "--predictions",
            "preds.jsonl",
            "--run-id",
            run_id,
            "--specs",
            "specs",
            "--mirror-dir",
            "mirrors",
            "--base-image",
            "none",
            "--cache-level",
            "instance",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if !extra.contains(&"--backend") {
            a.extend(["--backend".to_string(), "docker".to_string()]);
        }
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    pub fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.path())
            .env("PATCHGRADE_CACHE", self.w.sb.cache())
            .env("TMPDIR", self.tmp())
            .env_remove("PATCHGRADE_MIRROR_DIR")
            .env_remove("PATCHGRADE_FAULT_PANIC")
            .env_remove("PATCHGRADE_MAX_LOG");
        c
    }

    /// Run to the end, with extra environment.
    pub fn run(&self, run_id: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let args = self.args(run_id, extra);
        let mut c = self.command(&args);
        c.envs(env.iter().copied());
        let out = c.output().expect("run patchgrade");
        eprintln!(
            "patchgrade {}\n--- stderr ---\n{}\n--- exit {:?}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            out.status.code()
        );
        out
    }

    /// Start in the background; stderr goes to `<name>.stderr`.
    pub fn spawn(&self, run_id: &str, extra: &[&str], name: &str) -> Running {
        let args = self.args(run_id, extra);
        let err_path = self.path().join(format!("{name}.stderr"));
        let err = std::fs::File::create(&err_path).unwrap();
        let child = self
            .command(&args)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start patchgrade");
        Running {
            child,
            stderr: err_path,
        }
    }

    pub fn record(&self, run_id: &str, case: &str) -> Value {
        self.w.sb.record(run_id, "m", &self.id(case))
    }

    pub fn has_record(&self, run_id: &str, case: &str) -> bool {
        self.eval_dir(run_id, case).join("patchgrade.json").exists()
    }

    pub fn eval_dir(&self, run_id: &str, case: &str) -> PathBuf {
        self.path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join("m")
            .join(self.id(case))
    }

    pub fn file(&self, run_id: &str, case: &str, name: &str) -> String {
        let p = self.eval_dir(run_id, case).join(name);
        String::from_utf8_lossy(
            &std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .into_owned()
    }

    /// Nothing of the run is left: no container (on `host`), no scratch.
    pub fn assert_nothing_left(&self, host: Option<&str>, run_id: &str) {
        let left = containers_of(host, run_id);
        assert!(left.is_empty(), "containers of {run_id} left: {left:?}");
        let scratch: Vec<_> = std::fs::read_dir(self.tmp())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("patchgrade"))
            .collect();
        assert!(scratch.is_empty(), "scratch left in TMPDIR: {scratch:?}");
    }

    /// No scratch left in TMPDIR (a run on the local backend).
    pub fn assert_nothing_left_on_host(&self) {
        let left = std::fs::read_dir(self.tmp()).unwrap().count();
        assert_eq!(left, 0, "scratch left in {}", self.tmp().display());
    }

    /// Remove the instance images this corpus built (`--cache-level instance`).
    pub fn remove_images(&self) {
        let listed = docker_out(None, &["images", "--format", "{{.Repository}}:{{.Tag}}"]);
        for img in listed
            .lines()
            .filter(|l| l.contains(&format!(".{}-", self.prefix)))
        {
            let _ = Command::new("docker").args(["rmi", img]).output();
        }
    }
}

/// A patchgrade process in the background.
pub struct Running {
    pub child: Child,
    pub stderr: PathBuf,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill {sig}");
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its exit code, waiting at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                eprintln!("--- background stderr ---\n{}", self.stderr());
                return s.code();
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "patchgrade did not end within {limit:?}:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `cond` holds, at most `limit`.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A test that never ends by itself, and ignores SIGTERM.
pub const HANG: &str = "    def test_high(self):\n        import signal, time\n        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        time.sleep(600)\n";
