//! End-to-end tests of `patchgrade run --backend swarm` on a real swarm of
//! private Docker engines that the test starts (see `swarm/harness.rs`):
//! the same instances and patches give the same verdicts as
//! `--backend docker` on the machine's engine, the tasks have no network,
//! and no service, config or container is left after a run, a timed-out
//! evaluation, Ctrl-C, or a killed run (removed at the next start).
//!
//! Without root, dockerd, nsenter, iproute2 or docker-registry these tests
//! skip, printing why, unless PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run),
//! where they fail.

mod common;
#[path = "swarm/harness.rs"]
mod harness;
#[path = "swarm/serve.rs"]
mod serve;
#[path = "serve/server.rs"]
mod server;

use patchgrade::exit;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::widgets::*;
use common::*;
use harness::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// The address and port of the listener the tasks must not reach.
const LISTEN_ADDR: &str = "10.234.0.2";
const LISTEN_PORT: u16 = 18080;
const REGISTRY: &str = "127.0.0.1:15000";

/// `patchgrade ARGS` in the sandbox, against `docker_host` when given.
fn pg_cmd(sb: &Sandbox, docker_host: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(sb.path())
        .env("PATCHGRADE_CACHE", sb.cache())
        .env_remove("PATCHGRADE_MIRROR_DIR");
    match docker_host {
        Some(h) => c.env("DOCKER_HOST", h),
        None => c.env_remove("DOCKER_HOST"),
    };
    c
}

fn pg(sb: &Sandbox, docker_host: Option<&str>, args: &[&str]) -> Output {
    let t = Instant::now();
    let out = pg_cmd(sb, docker_host, args).output().expect("patchgrade");
    eprintln!(
        "patchgrade {} ({:.1}s)\n--- stderr ---\n{}\n--- exit {:?}",
        args.join(" "),
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    );
    out
}

/// `patchgrade ARGS` in the background, its stderr in `stderr`.
fn pg_spawn(sb: &Sandbox, docker_host: &str, args: &[&str], stderr: &str) -> Child {
    let log = std::fs::File::create(sb.path().join(stderr)).unwrap();
    pg_cmd(sb, Some(docker_host), args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("patchgrade")
}

/// Set the value of `--max-workers` in run arguments.
fn workers(a: &mut [&str], n: &'static str) {
    let at = a.iter().position(|x| *x == "--max-workers").unwrap();
    a[at + 1] = n;
}

/// Common arguments of a run of the widgets dataset.
fn run_args<'a>(dataset: &'a str, run_id: &'a str, backend: &'a str) -> Vec<&'a str> {
    let preds = match dataset {
        "hang.jsonl" => "hang-preds.jsonl",
        "gold.jsonl" => "gold-preds.jsonl",
        "slow.jsonl" => "slow-preds.jsonl",
        _ => "preds.jsonl",
    };
    vec![
        "run",
        "--dataset",
        dataset,
        "--predictions",
        preds,
        "--run-id",
        run_id,
        "--backend",
        backend,
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--max-workers",
        "2",
    ]
    .into_iter()
    .chain(LIMITS)
    .collect()
}

/// What every evaluation here runs with: the bootstrapped root (no pull),
/// half a CPU, 512 MB.
const LIMITS: [&str; 6] = ["--base-image", "none", "--cpus", "0.5", "--memory", "512m"];

/// The widgets fixture as four instances (gold, wrong, empty, and a test
/// that must not reach the listener), and a fifth that hangs, in its own
/// dataset.
fn fixture() -> Widgets {
    let w = Widgets::new(UNITTEST_SPEC, &[]);
    let high = w.test_patch.clone();
    let net = w.tests_adding(&format!(
        "    def test_high(self):\n        import socket\n        with self.assertRaises(OSError):\n            socket.create_connection((\"{LISTEN_ADDR}\", {LISTEN_PORT}), timeout=3)\n"
    ));
    // The limits of --cpus 0.5 --memory 512m and the default --pids-limit,
    // as the test run sees them in its cgroups (v1 or v2).
    let limits = w.tests_adding(concat!(
        "    def test_high(self):\n",
        "        import os\n",
        "        def read(*paths):\n",
        "            for p in paths:\n",
        "                if os.path.exists(p):\n",
        "                    return open(p).read().split()\n",
        "            raise AssertionError(paths)\n",
        "        self.assertEqual(read('/sys/fs/cgroup/pids/pids.max', '/sys/fs/cgroup/pids.max')[0], '1024')\n",
        "        mem = read('/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/memory.max')\n",
        "        self.assertEqual(int(mem[0]), 512 << 20)\n",
        "        q = read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us', '/sys/fs/cgroup/cpu.max')\n",
        "        period = int(q[1]) if len(q) == 2 else int(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')[0])\n",
        "        self.assertEqual(int(q[0]) * 2, period)\n",
    ));
    let hang =
        w.tests_adding("    def test_high(self):\n        import time\n        time.sleep(600)\n");
    let row =
        |id: &str, tp: &str| instance(id, "acme/widgets", &w.base, &w.gold, tp, &[F2P], &[P2P]);
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[
            row("w-gold", &high),
            row("w-wrong", &high),
            row("w-empty", &high),
            row("w-net", &net),
            row("w-limits", &limits),
        ]),
    );
    w.sb.write("hang.jsonl", &jsonl(&[row("w-hang", &hang)]));
    w.sb.write("gold.jsonl", &jsonl(&[row("w-gold", &high)]));
    w.sb.write(
        "gold-preds.jsonl",
        &jsonl(&[prediction("w-gold", "m", Some(&w.gold))]),
    );
    w.sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("w-gold", "m", Some(&w.gold)),
            prediction("w-wrong", "m", Some(&w.wrong)),
            prediction("w-empty", "m", None),
            prediction("w-net", "m", Some(&w.gold)),
            prediction("w-limits", "m", Some(&w.gold)),
        ]),
    );
    w.sb.write(
        "hang-preds.jsonl",
        &jsonl(&[prediction("w-hang", "m", Some(&w.gold))]),
    );
    w
}

const IDS: [&str; 5] = ["w-gold", "w-wrong", "w-empty", "w-net", "w-limits"];

/// Run the dataset on the machine's engine with `--backend docker`, keep
/// the instance images long enough to save their ancestors into
/// `images.tar`, then remove them.
fn docker_reference(w: &Widgets) {
    let mut a = run_args("dataset.jsonl", "dk", "docker");
    a.extend(["--cache-level", "instance"]);
    let out = pg(&w.sb, None, &a);
    assert!(out.status.success(), "docker run failed");
    let image = image_of(&w.sb.record("dk", "m", "w-gold"));
    save_ancestors(&image, &w.sb.path().join("images.tar"));
    for id in IDS {
        let name = image_of(&w.sb.record("dk", "m", id));
        if !name.is_empty() {
            let _ = run(Command::new("docker").args(["rmi", &name]));
        }
    }
}

/// A one-node swarm in namespace `ns1`, with the machine's base images
/// loaded and a registry on loopback; `ns2` holds the listener.
struct OneNode {
    engine: Engine,
    _registry: Registry,
    listener: Listener,
    ns1: Netns,
    _ns2: Netns,
}

/// Namespaces `pgsw<tag><prefix>1` (10.234.0.1) and `…2` (`second`),
/// joined by a veth pair.
fn linked_pair(prefix: &str, second: &str) -> (Netns, Netns) {
    let t = tag();
    let ns1 = Netns::new(&format!("pgsw{t}{prefix}1"));
    let ns2 = Netns::new(&format!("pgsw{t}{prefix}2"));
    link(&ns1, "10.234.0.1", &ns2, second);
    (ns1, ns2)
}

fn one_node(w: &Widgets) -> OneNode {
    let t = tag();
    let (ns1, ns2) = linked_pair("n", LISTEN_ADDR);
    let listener = Listener::start(
        &ns2,
        LISTEN_ADDR,
        LISTEN_PORT,
        w.sb.path().join("listener.out"),
    );
    let engine = manager(w, &ns1, &format!("pgsw-{t}-e1"), &[]);
    let registry = Registry::start(&ns1, &w.sb.path().join("registry"), REGISTRY);
    OneNode {
        engine,
        _registry: registry,
        listener,
        ns1,
        _ns2: ns2,
    }
}

/// A private engine in `ns` (folder `dir` under the temporary folder),
/// the manager of a new swarm advertised on 10.234.0.1, with the images
/// of `images.tar` loaded; `extra`: more dockerd flags.
fn manager(w: &Widgets, ns: &Netns, dir: &str, extra: &[&str]) -> Engine {
    let mut flags = vec!["--default-address-pool", "base=10.237.0.0/16,size=24"];
    flags.extend_from_slice(extra);
    let engine = Engine::start(ns, std::env::temp_dir().join(dir), &flags);
    engine.docker_ok(&[
        "swarm",
        "init",
        "--advertise-addr",
        "10.234.0.1",
        "--listen-addr",
        "10.234.0.1:2377",
        "--default-addr-pool",
        "10.238.0.0/16",
    ]);
    let tar = w.sb.path().join("images.tar");
    engine.docker_ok(&["load", "-i", tar.to_str().unwrap()]);
    engine
}

/// The registry of the two-node swarm, on the manager's veth address.
const REGISTRY2: &str = "10.234.0.1:15001";

/// A swarm of two nodes: the manager `e1` (namespace 1, 10.234.0.1, with
/// the images of `images.tar` and the registry [`REGISTRY2`]) and the
/// worker `e2` (namespace 2, 10.234.0.2, no image), joined over a veth
/// pair. Dropped in field order: registry, worker, manager, namespaces.
struct TwoNodes {
    _registry: Registry,
    e2: Engine,
    e1: Engine,
    _ns2: Netns,
    _ns1: Netns,
}

fn two_nodes(w: &Widgets) -> TwoNodes {
    let t = tag();
    let (ns1, ns2) = linked_pair("m", "10.234.0.2");
    let e1 = manager(
        w,
        &ns1,
        &format!("pgsw-{t}-m1"),
        &["--insecure-registry", REGISTRY2],
    );
    let e2 = Engine::start(
        &ns2,
        std::env::temp_dir().join(format!("pgsw-{t}-m2")),
        &[
            "--default-address-pool",
            "base=10.239.0.0/16,size=24",
            "--insecure-registry",
            REGISTRY2,
        ],
    );
    let token = e1.docker_ok(&["swarm", "join-token", "-q", "worker"]);
    e2.docker_ok(&[
        "swarm",
        "join",
        "--token",
        &token,
        "--advertise-addr",
        "10.234.0.2",
        "--listen-addr",
        "10.234.0.2:2377",
        "10.234.0.1:2377",
    ]);
    assert_eq!(
        e2.docker_ok(&["images", "-q"]),
        "",
        "the worker starts with no image"
    );
    let registry = Registry::start(&ns1, &w.sb.path().join("registry"), REGISTRY2);
    TwoNodes {
        _registry: registry,
        e2,
        e1,
        _ns2: ns2,
        _ns1: ns1,
    }
}

/// Wait until patchgrade has a service on the engine.
fn wait_for_service(e: &Engine, child: &mut Child) {
    let t = Instant::now();
    loop {
        let s = e.docker_ok(&["service", "ls", "-q", "--filter", "label=patchgrade.swarm"]);
        if !s.is_empty() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("patchgrade ended ({st}) before it made a service");
        }
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "no service after 180 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("patchgrade did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What every test here starts with, when its needs are met: the lock
/// that runs them one at a time, and the fixture with docker's verdicts.
fn prepared(test: &str) -> Option<(MutexGuard<'static, ()>, Widgets)> {
    if !ready(test) {
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = fixture();
    docker_reference(&w);
    Some((serial, w))
}

#[test]
fn swarm_single_node_matches_docker_and_leaves_nothing() {
    let Some((_serial, w)) = prepared("swarm_single_node_matches_docker_and_leaves_nothing") else {
        return;
    };
    let c = one_node(&w);
    let host = c.engine.sock.clone();

    // The same instances and patches on the swarm.
    let mut a = run_args("dataset.jsonl", "sw", "swarm");
    a.extend(["--registry", REGISTRY]);
    let out = pg(&w.sb, Some(&host), &a);
    assert!(out.status.success(), "swarm run failed");
    for id in IDS {
        let (dk, sw) = (w.sb.record("dk", "m", id), w.sb.record("sw", "m", id));
        assert_eq!(verdict(&dk), verdict(&sw), "{id}: docker vs swarm");
        assert_eq!(sw["backend"], "swarm");
    }
    assert_eq!(w.sb.outcome("sw", "m", "w-gold"), "resolved");
    assert_eq!(w.sb.outcome("sw", "m", "w-wrong"), "unresolved");
    assert_eq!(w.sb.outcome("sw", "m", "w-empty"), "empty_patch");
    // The connect failed inside the task (test_high passed) and the
    // listener saw nothing from it.
    assert_eq!(w.sb.outcome("sw", "m", "w-net"), "resolved");
    assert_eq!(w.sb.outcome("sw", "m", "w-limits"), "resolved");
    let env = w.sb.record("sw", "m", "w-gold")["environment"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        env.contains(&format!("{REGISTRY}/")) && env.contains("@sha256:"),
        "{env}"
    );
    assert!(env.contains(" on node "), "{env}");
    assert_eq!(c.engine.settled(), "", "left after a run");
    assert!(
        c.listener.accepted().is_empty(),
        "{:?}",
        c.listener.accepted()
    );
    // The listener is reachable from the node itself: the task's failure
    // was its network's doing.
    ok(c.ns1.cmd("bash").args([
        "-c",
        &format!("echo > /dev/tcp/{LISTEN_ADDR}/{LISTEN_PORT}"),
    ]));
    let t = Instant::now();
    while c.listener.accepted().is_empty() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.listener.accepted(), ["10.234.0.1"]);

    // A timed-out evaluation: its service is removed.
    let mut a = run_args("hang.jsonl", "to", "swarm");
    a.extend(["--registry", REGISTRY, "--timeout", "5"]);
    let out = pg(&w.sb, Some(&host), &a);
    assert!(out.status.success(), "timeout run failed");
    assert_eq!(w.sb.outcome("to", "m", "w-hang"), "tests_timed_out");
    assert_eq!(c.engine.settled(), "", "left after a timeout");

    // Ctrl-C while the evaluation runs.
    let mut a = run_args("hang.jsonl", "int", "swarm");
    a.extend(["--registry", REGISTRY]);
    let mut child = pg_spawn(&w.sb, &host, &a, "int.stderr");
    wait_for_service(&c.engine, &mut child);
    ok(Command::new("kill").args(["-INT", &child.id().to_string()]));
    let st = wait_exit(&mut child, Duration::from_secs(120));
    assert_eq!(st.code(), Some(exit::INTERRUPTED), "exit after Ctrl-C");
    assert_eq!(c.engine.settled(), "", "left after Ctrl-C");

    // A killed run leaves its service; the next run removes it first.
    let mut child = pg_spawn(&w.sb, &host, &a, "kill.stderr");
    wait_for_service(&c.engine, &mut child);
    ok(Command::new("kill").args(["-KILL", &child.id().to_string()]));
    let _ = child.wait();
    assert_ne!(c.engine.leftovers(), "", "a killed run leaves its service");
    let mut a = run_args("gold.jsonl", "next", "swarm");
    a.extend(["--registry", REGISTRY]);
    let out = pg(&w.sb, Some(&host), &a);
    assert!(out.status.success(), "run after a killed one failed");
    assert_eq!(w.sb.outcome("next", "m", "w-gold"), "resolved");
    assert_eq!(c.engine.settled(), "", "left after the next run");
}

/// The node an evaluation ran on, from its record's environment.
/// The node that ran `id`: from its record, which run.json's `nodes` must
/// agree with.
fn node_of(sb: &Sandbox, run_id: &str, id: &str) -> String {
    let env = sb.record(run_id, "m", id)["environment"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let node = patchgrade::record::Environment::parse(&env)
        .node()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{id}: no node in {env:?}"));
    let meta = sb
        .path()
        .join("logs/run_evaluation")
        .join(run_id)
        .join("run.json");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(
        meta["nodes"][format!("m/{id}")].as_str(),
        Some(node.as_str()),
        "run.json names the node of {id}"
    );
    node
}

#[test]
fn swarm_two_nodes_pull_by_digest_and_survive_a_node_leaving() {
    let Some((_serial, w)) = prepared("swarm_two_nodes_pull_by_digest_and_survive_a_node_leaving")
    else {
        return;
    };
    // Instances slow enough that the second node is stopped while it runs
    // some of them.
    let slow = w.tests_adding(
        "    def test_high(self):\n        import time\n        time.sleep(20)\n        self.assertEqual(clamp(9, 0, 3), 3)\n",
    );
    let ids: Vec<String> = (1..=4).map(|i| format!("w-slow{i}")).collect();
    let rows: Vec<_> = ids
        .iter()
        .map(|id| instance(id, "acme/widgets", &w.base, &w.gold, &slow, &[F2P], &[P2P]))
        .collect();
    w.sb.write("slow.jsonl", &jsonl(&rows));
    let preds: Vec<_> = ids
        .iter()
        .map(|id| prediction(id, "m", Some(&w.gold)))
        .collect();
    w.sb.write("slow-preds.jsonl", &jsonl(&preds));

    let mut s = two_nodes(&w);
    let (e1, registry, host) = (&s.e1, REGISTRY2, s.e1.sock.clone());

    // The four instances on two nodes: the same verdicts as docker, run on
    // both nodes; the worker pulled its image by digest.
    let mut a = run_args("dataset.jsonl", "two", "swarm");
    a.extend(["--registry", registry]);
    workers(&mut a, "4");
    let out = pg(&w.sb, Some(&host), &a);
    assert!(out.status.success(), "two-node run failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("evaluations per node: "),
        "progress per node"
    );
    let mut nodes = std::collections::BTreeSet::new();
    for id in IDS {
        let (dk, sw) = (w.sb.record("dk", "m", id), w.sb.record("two", "m", id));
        assert_eq!(verdict(&dk), verdict(&sw), "{id}: docker vs swarm");
        if sw["outcome"] != "empty_patch" {
            nodes.insert(node_of(&w.sb, "two", id));
        }
    }
    assert_eq!(nodes.len(), 2, "evaluations on both nodes: {nodes:?}");
    let pulled = s.e2.docker_ok(&[
        "images",
        "--digests",
        "--format",
        "{{.Repository}}@{{.Digest}}",
    ]);
    assert!(
        pulled
            .lines()
            .any(|l| l.starts_with(&format!("{registry}/")) && l.contains("@sha256:")),
        "the worker pulled from the registry by digest: {pulled}"
    );
    assert_eq!(e1.settled(), "", "left after the two-node run");

    // The worker's engine stops while it runs evaluations: they end as
    // infra errors, are retried once on the manager, and resolve.
    let mut a = run_args("slow.jsonl", "leave", "swarm");
    a.extend(["--registry", registry]);
    workers(&mut a, "4");
    let mut child = pg_spawn(&w.sb, &host, &a, "leave.stderr");
    let t0 = Instant::now();
    while s
        .e2
        .docker_ok(&["ps", "-q", "--filter", "label=patchgrade.swarm"])
        .is_empty()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "nothing ran on the worker"
        );
        assert!(child.try_wait().unwrap().is_none(), "run ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    s.e2.stop();
    let st = wait_exit(&mut child, Duration::from_secs(400));
    let stderr = std::fs::read_to_string(w.sb.path().join("leave.stderr")).unwrap();
    eprintln!("--- run with a node leaving ---\n{stderr}");
    assert!(st.success(), "run with a node leaving: {st}");
    // Some evaluation was lost with the node and retried.
    assert!(stderr.contains("infra error, retrying once"), "no retry");
    let manager_id = e1.docker_ok(&["info", "--format", "{{.Swarm.NodeID}}"]);
    for id in &ids {
        assert_eq!(w.sb.outcome("leave", "m", id), "resolved", "{id}");
        let node = node_of(&w.sb, "leave", id);
        assert!(
            manager_id.starts_with(node.rsplit('/').next().unwrap()),
            "{id} ran on {node}"
        );
    }
    assert_eq!(e1.settled(), "", "left after the node left");
}
