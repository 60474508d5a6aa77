//! End-to-end tests of `patchgrade run --backend docker` on the real engine:
//! images are built (the debootstrap path included: `--base-image none`),
//! real instances evaluated, and afterwards no container of the run is left.
//!
//! Without a daemon these tests skip, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where they fail.
//! They run one at a time (a lock), so that image builds are not raced and
//! the second test reuses what the first built.

mod common;

use patchgrade::exit;
use std::process::Command;
use std::sync::Mutex;

use common::widgets::*;
use common::*;
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

/// Whether the engine answers; panics instead of skipping when required.
fn docker_ready(test: &str) -> bool {
    let ok = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    let why = match ok {
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

fn docker(args: &[&str]) -> std::process::Output {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("run docker");
    eprintln!(
        "docker {} -> {:?}\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Containers of a run, running or not.
fn containers_of(run_id: &str) -> String {
    docker_ok(&[
        "ps",
        "-a",
        "-q",
        "--filter",
        &format!("label=patchgrade.run_id={run_id}"),
    ])
}

/// Image id by name, None when absent.
fn image_id(name: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .output()
        .expect("docker");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

const LEGACY: &str = "OLD = True\n";

const PYTEST_SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    pip_packages: [pytest]\n    test_cmd: pytest -rA -p no:cacheprovider\n    log_parser: pytest\n";

/// The widgets fixture with one more file, for a candidate to delete.
fn widgets(spec: &str) -> Widgets {
    Widgets::new(spec, &[("widgets/legacy.py", LEGACY.as_bytes())])
}

impl Widgets {
    fn run(&self, run_id: &str, preds: &str, extra: &[&str]) -> std::process::Output {
        let mut a = docker_args("run", preds, run_id);
        a.extend(["--max-workers", "2"]);
        a.extend_from_slice(extra);
        self.sb.run(&a)
    }

    fn record(&self, run_id: &str, model: &str, id: &str) -> Value {
        self.sb.record(run_id, model, id)
    }
}

#[test]
fn docker_runs_real_instances_isolated_and_leaves_no_container() {
    if !docker_ready("docker_runs_real_instances_isolated_and_leaves_no_container") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = widgets(UNITTEST_SPEC);
    let high = w.test_patch.clone();
    let wrong = w.wrong.clone();
    // A test that never ends: the container must be killed and removed.
    let hang =
        w.tests_adding("    def test_high(self):\n        import time\n        time.sleep(600)\n");
    // The test run has no network.
    let net = w.tests_adding(
        "    def test_high(self):\n        import socket\n        with self.assertRaises(OSError):\n            socket.create_connection((\"deb.debian.org\", 80), timeout=3)\n",
    );
    // A fork bomb: the pids limit stops it; the test sees fork fail, counts
    // the processes it reached, then kills them.
    let bomb = w.tests_adding(concat!(
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
        "        self.assertLessEqual(n, 300)\n",
    ));
    // A candidate that deletes a file and adds one in a new folder: both
    // reach the container.
    // (`git add -N .` in diff_of stages deletions, so that one is by hand.)
    let legacy_blob = w.repo.repo.blob(LEGACY.as_bytes()).unwrap().to_string();
    let moved = w.repo.diff_of(
        &[("widgets/core.py", Some(CORE_FIXED.as_bytes())), ("widgets/extra/more.py", Some(b"MORE = 1\n"))],
        false,
    ) + &format!(
        "diff --git a/widgets/legacy.py b/widgets/legacy.py\ndeleted file mode 100644\nindex {}..0000000\n--- a/widgets/legacy.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-{}",
        &legacy_blob[..7],
        LEGACY
    );
    let moved_test = w.tests_adding(
        "    def test_high(self):\n        import os\n        from widgets.extra.more import MORE\n        self.assertEqual(MORE, 1)\n        self.assertFalse(os.path.exists('widgets/legacy.py'))\n        self.assertEqual(clamp(9, 0, 3), 3)\n",
    );
    // Two instances whose environment cannot be made: a Python no Debian
    // suite ships and no host build provides, and a setup step that fails in the instance image.
    let mut bad_python = instance(
        "w-nopython",
        "acme/widgets",
        &w.base,
        &w.gold,
        &high,
        &[F2P],
        &[P2P],
    );
    bad_python["version"] = "nopython".into();
    let mut bad_setup = instance(
        "w-setup",
        "acme/widgets",
        &w.base,
        &w.gold,
        &high,
        &[F2P],
        &[P2P],
    );
    bad_setup["version"] = "badsetup".into();
    w.sb.write(
        "specs/widgets.yaml",
        &format!(
            "{UNITTEST_SPEC}  nopython:\n    python: \"3.99\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n  \
             badsetup:\n    python: \"3.11\"\n    pre_install: [\"echo setup is broken; exit 3\"]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n"
        ),
    );
    let rows = vec![
        bad_python,
        bad_setup,
        instance(
            "w-gold",
            "acme/widgets",
            &w.base,
            &w.gold,
            &high,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-wrong",
            "acme/widgets",
            &w.base,
            &w.gold,
            &high,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-hang",
            "acme/widgets",
            &w.base,
            &w.gold,
            &hang,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-net",
            "acme/widgets",
            &w.base,
            &w.gold,
            &net,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-bomb",
            "acme/widgets",
            &w.base,
            &w.gold,
            &bomb,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-moved",
            "acme/widgets",
            &w.base,
            &moved,
            &moved_test,
            &[F2P],
            &[P2P],
        ),
    ];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let preds = vec![
        prediction("w-nopython", "m", Some(&w.gold)),
        prediction("w-setup", "m", Some(&w.gold)),
        prediction("w-gold", "m", Some(&w.gold)),
        prediction("w-wrong", "m", Some(&wrong)),
        prediction("w-hang", "m", Some(&w.gold)),
        prediction("w-net", "m", Some(&w.gold)),
        prediction("w-bomb", "m", Some(&w.gold)),
        prediction("w-moved", "m", Some(&moved)),
    ];
    w.sb.write("preds.jsonl", &jsonl(&preds));
    let run_id = format!("dk-{}", std::process::id());
    let out = w.run(
        &run_id,
        "preds.jsonl",
        &["--timeout", "25", "--pids-limit", "256"],
    );
    // w-nopython and w-setup end environment_build_failed by design: the run
    // completes, and says those results are inconclusive (exit 4).
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("w-nopython (m) environment_build_failed")
            && stderr.contains("w-setup (m) environment_build_failed"),
        "{stderr}"
    );

    let gold = w.record(&run_id, "m", "w-gold");
    assert_eq!(gold["outcome"], "resolved", "{gold}");
    assert_eq!(gold["backend"], "docker");
    let env = gold["environment"].as_str().unwrap();
    assert!(
        env.contains("patchgrade.eval.") && env.contains("sha256:"),
        "image id recorded: {env}"
    );
    assert!(
        env.ends_with("; python 3.11 (debian-suite bookworm)"),
        "interpreter recorded: {env}"
    );
    let wrong_rec = w.record(&run_id, "m", "w-wrong");
    assert_eq!(wrong_rec["outcome"], "unresolved", "{wrong_rec}");
    assert_eq!(
        wrong_rec["grade"]["fail_to_pass"]["failure"],
        serde_json::json!([F2P])
    );
    assert_eq!(w.sb.outcome(&run_id, "m", "w-hang"), "tests_timed_out");
    let net_rec = w.record(&run_id, "m", "w-net");
    assert_eq!(
        net_rec["outcome"], "resolved",
        "the network attempt failed inside the container: {net_rec}"
    );
    let bomb_rec = w.record(&run_id, "m", "w-bomb");
    assert_eq!(
        bomb_rec["outcome"], "resolved",
        "the fork bomb hit the pids limit: {bomb_rec}"
    );
    let bomb_log = std::fs::read_to_string(w.sb.path().join(format!(
        "logs/run_evaluation/{run_id}/m/w-bomb/test_output.txt"
    )))
    .unwrap();
    assert!(bomb_log.contains("processes at the limit:"), "{bomb_log}");
    let moved_log = std::fs::read_to_string(w.sb.path().join(format!(
        "logs/run_evaluation/{run_id}/m/w-moved/test_output.txt"
    )))
    .unwrap();
    let moved_dir =
        w.sb.path()
            .join(format!("logs/run_evaluation/{run_id}/m/w-moved"));
    let moved_info = format!(
        "{}\n{}\n{moved_log}",
        std::fs::read_to_string(moved_dir.join("patch.diff")).unwrap_or_default(),
        std::fs::read_to_string(moved_dir.join("run_instance.log")).unwrap_or_default()
    );
    assert_eq!(
        w.sb.outcome(&run_id, "m", "w-moved"),
        "resolved",
        "{moved_info}"
    );
    // No suite ships 3.99 and no host has a build: the error says what
    // to do.
    let nopy = w.record(&run_id, "m", "w-nopython");
    assert_eq!(nopy["outcome"], "environment_build_failed", "{nopy}");
    let detail = nopy["detail"].as_str().unwrap();
    assert!(
        detail.contains("no Python 3.99") && detail.contains("--python-dir 3.99=PREFIX"),
        "{nopy}"
    );
    let setup = w.record(&run_id, "m", "w-setup");
    assert_eq!(setup["outcome"], "environment_build_failed", "{setup}");
    let detail = setup["detail"].as_str().unwrap();
    assert!(
        detail.contains("build_image.log") && detail.contains("patchgrade.eval."),
        "{detail}"
    );
    // Build logs where the reference keeps them.
    assert!(w.sb.path().join("logs/build_images/instances").is_dir());
    // Nothing left behind: not the timed-out container, not the bomb's.
    assert_eq!(containers_of(&run_id), "", "containers of the run are left");
}

#[test]
fn docker_pip_env_over_https_and_images_reused_per_cache_level() {
    if !docker_ready("docker_pip_env_over_https_and_images_reused_per_cache_level") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = widgets(PYTEST_SPEC);
    let high = w.test_patch.clone();
    let id = format!("acme__widgets-pip{}", std::process::id());
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            &id,
            "acme/widgets",
            &w.base,
            &w.gold,
            &high,
            &["tests/test_core.py::TestClamp::test_high"],
            &["tests/test_core.py::TestClamp::test_low"],
        )]),
    );
    w.sb.write(
        "preds.jsonl",
        &jsonl(&[prediction(&id, "m", Some(&w.gold))]),
    );

    // --cache-level env: the instance image goes at the end, the env image
    // (pytest from PyPI, through the CA bundle) stays.
    let out = w.run("r1", "preds.jsonl", &["-v", "--cache-level", "env"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec = w.record("r1", "m", &id);
    assert_eq!(rec["outcome"], "resolved", "{rec}");
    let env_str = rec["environment"].as_str().unwrap().to_string();
    let instance_image = env_str.split_whitespace().nth(1).unwrap().to_string();
    assert!(
        image_id(&instance_image).is_none(),
        "--cache-level env removes {instance_image}"
    );
    let env_images = docker_ok(&[
        "images",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        "patchgrade.env.py3.11.*",
    ]);
    assert!(!env_images.is_empty(), "env images are kept");

    // --cache-level instance: only the instance image is built.
    let out = w.run("r2", "preds.jsonl", &["-v", "--cache-level", "instance"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("building patchgrade.eval."), "{err}");
    assert!(
        !err.contains("building patchgrade.env.") && !err.contains("building patchgrade.base."),
        "{err}"
    );
    let built = image_id(&instance_image).expect("instance image kept");

    // And a third run builds nothing at all.
    let out = w.run("r3", "preds.jsonl", &["-v", "--cache-level", "instance"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("building "),
        "a warm run builds nothing: {err}"
    );
    assert_eq!(image_id(&instance_image).as_deref(), Some(built.as_str()));
    assert_eq!(w.sb.outcome("r3", "m", &id), "resolved");
    let _ = docker(&["rmi", &instance_image]);
    assert_eq!(
        containers_of("r1") + &containers_of("r2") + &containers_of("r3"),
        ""
    );
}

#[test]
fn docker_namespace_images_from_a_local_registry() {
    if !docker_ready("docker_namespace_images_from_a_local_registry") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = widgets(UNITTEST_SPEC);
    let high = w.test_patch.clone();
    let id = format!("acme__widgets-ns{}", std::process::id());
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            &id,
            "acme/widgets",
            &w.base,
            &w.gold,
            &high,
            &[F2P],
            &[P2P],
        )]),
    );
    w.sb.write(
        "preds.jsonl",
        &jsonl(&[prediction(&id, "m", Some(&w.gold))]),
    );
    // Build the instance image locally first.
    let out = w.run("build", "preds.jsonl", &["--cache-level", "instance"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec = w.record("build", "m", &id);
    assert_eq!(rec["outcome"], "resolved", "{rec}");
    let local = image_of(&rec);

    // A registry on loopback, and the image pushed under the reference's name.
    let Some(registry) = LoopbackRegistry::start(&w.sb.path().join("registry")) else {
        return;
    };
    let port = registry.port;
    let ns = format!("127.0.0.1:{port}/pgtest");
    let arch = docker_ok(&["version", "--format", "{{.Server.Arch}}"]);
    let arch = if arch == "amd64" {
        "x86_64".to_string()
    } else {
        arch
    };
    let remote = format!(
        "{ns}/sweb.eval.{arch}.{}:latest",
        id.replace("__", "_1776_")
    );
    docker_ok(&["tag", &local, &remote]);
    docker_ok(&["push", &remote]);
    docker_ok(&["rmi", &remote]);
    let _ = docker(&["rmi", &local]);
    assert!(image_id(&remote).is_none());

    let out = w.run(
        "ns",
        "preds.jsonl",
        &["--namespace", &ns, "--cache-level", "env"],
    );
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec = w.record("ns", "m", &id);
    assert_eq!(rec["outcome"], "resolved", "{rec}");
    let env = rec["environment"].as_str().unwrap();
    assert!(
        env.contains(&remote) && env.contains("@sha256:"),
        "pulled image and its digest recorded: {env}"
    );
    // --cache-level env: the pulled instance image is removed again.
    assert!(
        image_id(&remote).is_none(),
        "the pulled image is removed per --cache-level env"
    );

    // The other base path: --base-image from a registry that answers. The
    // bootstrapped root pushed as a "debian" image is pulled, and (same image
    // id, same content address) the base and env images are reused.
    let root = docker_ok(&[
        "images",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        "patchgrade.root.bookworm",
    ]);
    let root = root
        .lines()
        .next()
        .expect("a bootstrapped root image")
        .to_string();
    let debian = format!("{ns}/debian:bookworm-slim");
    docker_ok(&["tag", &root, &debian]);
    docker_ok(&["push", &debian]);
    docker_ok(&["rmi", &debian]);
    let base_image = format!("{ns}/debian:{{suite}}-slim");
    let out = w.sb.run(&[
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "pull",
        "--backend",
        "docker",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--base-image",
        &base_image,
        "-v",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("pulled {debian}")),
        "the pull path was taken: {err}"
    );
    assert!(
        !err.contains("building patchgrade.base.") && !err.contains("debootstrap"),
        "{err}"
    );
    assert_eq!(w.sb.outcome("pull", "m", &id), "resolved");
    let _ = docker(&["rmi", &debian]);
    assert_eq!(
        containers_of("ns") + &containers_of("build") + &containers_of("pull"),
        ""
    );
}

/// A partial mirror (snapshots leave out large files): the instance image's
/// build context cannot be made, so the evaluation is not graded, the
/// missing file is named, and no image is left under the instance image's
/// name for a later run to take as whole.
#[test]
fn docker_a_partial_mirror_names_the_missing_file_and_leaves_no_image() {
    if !docker_ready("docker_a_partial_mirror_names_the_missing_file_and_leaves_no_image") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let data = format!("data only the base tree holds, {pid}\n");
    let w = Widgets::new(UNITTEST_SPEC, &[("data/blob.txt", data.as_bytes())]);
    let blob = w.repo.repo.blob(data.as_bytes()).unwrap().to_string();
    let loose = w
        .repo
        .repo
        .path()
        .join("objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    std::fs::remove_file(&loose).unwrap();
    let id = format!("acme__widgets-partial{pid}");
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            &id,
            "acme/widgets",
            &w.base,
            &w.gold,
            &w.test_patch,
            &["tests/test_core.py::TestClamp::test_high"],
            &[],
        )]),
    );
    w.sb.write(
        "preds.jsonl",
        &jsonl(&[prediction(&id, "m", Some(&w.gold))]),
    );
    let out = w.run("partial", "preds.jsonl", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let rec = w.record("partial", "m", &id);
    assert_ne!(rec["outcome"], "resolved", "{rec}\n{err}");
    assert_ne!(rec["outcome"], "unresolved", "{rec}\n{err}");
    let detail = rec["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("lacks data/blob.txt") && detail.contains(&blob),
        "the cause is named: {detail}"
    );
    let left = docker_ok(&["images", "-q", &format!("patchgrade.eval.*.{id}")]);
    assert_eq!(left, "", "no image left for {id}");
    assert_eq!(containers_of("partial"), "");
}
