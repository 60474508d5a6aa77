//! Test harness: drives the real binary against real git repositories made
//! in the test (git2), real patches and real test runners.
#![allow(dead_code)]

pub mod cext;
pub mod layers;
pub mod shapes;
pub mod widgets;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use git2::{Repository, Signature};
use serde_json::{json, Value};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_patchgrade"))
}

pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch folder: cwd for the binary, its own cache and mirrors.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    /// PATCHGRADE_TEST_KEEP=1 keeps the folder for a look after a failure.
    pub fn new() -> Sandbox {
        let keep = std::env::var_os("PATCHGRADE_TEST_KEEP").is_some();
        let dir = tempfile::Builder::new()
            .prefix("pg-test-")
            .disable_cleanup(keep)
            .tempdir()
            .expect("tempdir");
        if keep {
            eprintln!("sandbox kept at {}", dir.path().display());
        }
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn cache(&self) -> PathBuf {
        self.path().join("cache")
    }

    pub fn mirrors(&self) -> PathBuf {
        self.path().join("mirrors")
    }

    /// Run `patchgrade ARGS` in the sandbox with its own cache.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    /// [`Sandbox::run`] with more environment variables (`PATH` for a
    /// tool placed in front of the real one).
    pub fn run_env(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
        let out = Command::new(bin())
            .args(args)
            .current_dir(self.path())
            .env("PATCHGRADE_CACHE", self.cache())
            .env_remove("PATCHGRADE_MIRROR_DIR")
            .envs(env.iter().copied())
            .output()
            .expect("run patchgrade");
        eprintln!(
            "patchgrade {}\n--- stderr ---\n{}\n--- exit {:?}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            out.status.code()
        );
        out
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// patchgrade.json of one evaluation.
    pub fn record(&self, run_id: &str, model: &str, id: &str) -> Value {
        let p = self
            .path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join(model)
            .join(id)
            .join("patchgrade.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).unwrap()
    }

    pub fn outcome(&self, run_id: &str, model: &str, id: &str) -> String {
        self.record(run_id, model, id)["outcome"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn summary(&self, model: &str, run_id: &str) -> Value {
        let p = self.path().join(format!("{model}.{run_id}.json"));
        serde_json::from_str(
            &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap()
    }
}

/// A real git repository in `mirrors/<owner>__<name>` with a commit per call.
pub struct FixtureRepo {
    pub repo: Repository,
    pub name: String,
}

impl FixtureRepo {
    pub fn new(sandbox: &Sandbox, name: &str) -> FixtureRepo {
        let dir = sandbox.mirrors().join(name.replace('/', "__"));
        let repo = Repository::init(&dir).unwrap();
        FixtureRepo {
            repo,
            name: name.into(),
        }
    }

    /// The id of the current HEAD commit.
    pub fn head(&self) -> String {
        self.repo
            .head()
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id()
            .to_string()
    }

    /// Write files (None deletes) and commit; returns the commit id.
    pub fn commit(&self, files: &[(&str, Option<&[u8]>)], msg: &str) -> String {
        let root = self.repo.workdir().unwrap().to_owned();
        let mut idx = self.repo.index().unwrap();
        for (rel, body) in files {
            let p = root.join(rel);
            match body {
                Some(b) => {
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, b).unwrap();
                    idx.add_path(Path::new(rel)).unwrap();
                }
                None => {
                    let _ = std::fs::remove_file(&p);
                    idx.remove_path(Path::new(rel)).unwrap();
                }
            }
        }
        idx.write().unwrap();
        let tree = self.repo.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = Signature::now("t", "t@example.invalid").unwrap();
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
            .unwrap()
            .to_string()
    }

    /// A unified diff made by real `git diff` between the worktree edits and
    /// HEAD; the edits are undone afterwards.
    pub fn diff_of(&self, files: &[(&str, Option<&[u8]>)], binary: bool) -> String {
        let root = self.repo.workdir().unwrap().to_owned();
        for (rel, body) in files {
            let p = root.join(rel);
            match body {
                Some(b) => {
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, b).unwrap();
                }
                None => std::fs::remove_file(&p).unwrap(),
            }
        }
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&root)
                .output()
                .expect("git");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["add", "-N", "."]);
        let diff = if binary {
            git(&["diff", "--binary"])
        } else {
            git(&["diff"])
        };
        git(&["reset", "-q"]);
        git(&["checkout", "-q", "--", "."]);
        git(&["clean", "-qfd"]);
        diff
    }
}

/// One dataset row.
pub fn instance(
    id: &str,
    repo: &str,
    base: &str,
    patch: &str,
    test_patch: &str,
    f2p: &[&str],
    p2p: &[&str],
) -> Value {
    json!({
        "instance_id": id, "repo": repo, "base_commit": base, "patch": patch, "test_patch": test_patch,
        "problem_statement": "fix it", "hints_text": "", "version": "1.0", "environment_setup_commit": base,
        "FAIL_TO_PASS": serde_json::to_string(f2p).unwrap(), "PASS_TO_PASS": p2p, "created_at": "2024-01-01T00:00:00Z",
    })
}

/// `COMMAND` over the sandbox's dataset.jsonl, specs/ and mirrors/ on the
/// Docker backend, the base image bootstrapped (`--base-image none`): the
/// arguments every Docker test starts from.
/// `run` on the local backend over the sandbox's dataset.jsonl and mirrors,
/// with the spec folder `specs`.
pub fn local_args<'a>(run_id: &'a str, preds: &'a str, specs: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        preds,
        "--run-id",
        run_id,
        "--backend",
        "local",
        "--specs",
        specs,
        "--mirror-dir",
        "mirrors",
    ]
}

pub fn docker_args<'a>(command: &'a str, preds: &'a str, run_id: &'a str) -> Vec<&'a str> {
    vec![
        command,
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        preds,
        "--run-id",
        run_id,
        "--backend",
        "docker",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--base-image",
        "none",
    ]
}

/// One HTTP/1.1 request read from a test server's connection: the request
/// line, the `Authorization` header and the body (by `Content-Length`);
/// None when the client closed without sending one.
pub struct HttpRequest {
    pub line: String,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

pub fn read_http_request(reader: &mut impl std::io::BufRead) -> Option<HttpRequest> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let (mut len, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => len = value.trim().parse().unwrap(),
            "authorization" => authorization = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    Some(HttpRequest {
        line,
        authorization,
        body,
    })
}

pub fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|r| r.to_string() + "\n").collect()
}

pub fn prediction(id: &str, model: &str, patch: Option<&str>) -> Value {
    json!({"instance_id": id, "model_name_or_path": model, "model_patch": patch})
}

/// Whether an optional facility is there; when it is not, the test is
/// skipped with a message, unless `require_var` is set to 1 (CI sets it, so
/// CI can never pass by skipping).
pub fn available(what: &str, require_var: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var(require_var).as_deref() == Ok("1") {
        panic!("{what} is required ({require_var}=1) but not available");
    }
    eprintln!("SKIPPED: {what} is not available (set {require_var}=1 to make this a failure)");
    false
}

/// The python that has the reference harness (the `swebench` package)
/// installed, named by PATCHGRADE_SWEBENCH_PYTHON, through [`available`]:
/// a test skips without it unless PATCHGRADE_REQUIRE_SWEBENCH=1. `module`
/// is what the test needs of it.
pub fn reference_python(module: &str) -> Option<std::path::PathBuf> {
    let py = std::env::var_os("PATCHGRADE_SWEBENCH_PYTHON").map(std::path::PathBuf::from);
    let ok = py.as_ref().is_some_and(|py| {
        Command::new(py)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    available(
        "the swebench package (PATCHGRADE_SWEBENCH_PYTHON)",
        "PATCHGRADE_REQUIRE_SWEBENCH",
        ok,
    )
    .then(|| py.expect("checked"))
}

/// PyPI answers pip here.
pub fn pypi_reachable() -> bool {
    Command::new("python3")
        .args([
            "-m",
            "pip",
            "index",
            "versions",
            "pytest",
            "--disable-pip-version-check",
            "--timeout",
            "5",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether a Docker daemon answers, through [`available`]: a test skips
/// without one unless PATCHGRADE_REQUIRE_DOCKER=1.
pub fn docker_ready(test: &str) -> bool {
    let answers = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    available(
        &format!("a Docker daemon ({test})"),
        "PATCHGRADE_REQUIRE_DOCKER",
        answers,
    )
}

/// bubblewrap is installed and works.
pub fn bwrap_works() -> bool {
    Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-net", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Debian's docker-registry serving on a free loopback port (which the
/// machine's engine pulls from and pushes to without TLS), storing under
/// `dir`; stopped on drop. None, through [`available`], when it is not
/// installed.
pub struct LoopbackRegistry {
    child: std::process::Child,
    pub port: u16,
}

impl LoopbackRegistry {
    pub fn start(dir: &Path) -> Option<LoopbackRegistry> {
        let bin = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let bin = available(
            "docker-registry (apt-get install docker-registry)",
            "PATCHGRADE_REQUIRE_DOCKER",
            bin.is_some(),
        )
        .then(|| bin.expect("checked"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let store = dir.join("store");
        std::fs::create_dir_all(&store).unwrap();
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n", store.display()),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = LoopbackRegistry { child, port };
        let up = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "docker-registry did not listen on 127.0.0.1:{port}");
        Some(registry)
    }
}

impl Drop for LoopbackRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names of the images `image` was built from, nearest first (the
/// parent chain of the machine's engine, tagged ones only).
pub fn tagged_ancestors(image: &str) -> Vec<String> {
    let docker = |args: &[&str]| {
        let out = Command::new("docker").args(args).output().expect("docker");
        assert!(out.status.success(), "docker {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let tagged = docker(&[
        "images",
        "--no-trunc",
        "--format",
        "{{.ID}} {{.Repository}}:{{.Tag}}",
    ]);
    let mut names = Vec::new();
    let mut id = docker(&["image", "inspect", "--format", "{{.Parent}}", image]);
    while !id.is_empty() {
        names.extend(
            tagged
                .lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(i, _)| *i == id)
                .map(|(_, name)| name.to_string()),
        );
        id = docker(&["image", "inspect", "--format", "{{.Parent}}", &id]);
    }
    names
}

/// The image name in a Docker record's `environment` ("image NAME ID…").
pub fn image_of(record: &Value) -> String {
    let env = record["environment"].as_str().unwrap_or_default();
    env.split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// A shared flock on a cache folder's lease file (`<cache>/docker/images.lock`),
/// as a live run holds it.
pub fn hold_lease(path: &std::path::Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    // SAFETY: flock(2) on a descriptor this function owns.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) }, 0);
    file
}

/// Whether a Docker engine answers (`docker version` reaches the server).
pub fn docker_answers() -> bool {
    std::process::Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the engine holds image `name`.
pub fn image_present(name: &str) -> bool {
    std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .output()
        .is_ok_and(|o| o.status.success())
}
