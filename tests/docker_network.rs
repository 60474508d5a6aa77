//! Spec `blackhole_routes` on both backends that honour it: inside the
//! test's network namespace, a connect to a non-local address times out
//! (as the tests of psf/requests expect) while a name lookup fails at once
//! (it used to wait out the resolver: 20 s of psf__requests-3362's run).
//!
//! Docker: skips without a daemon unless PATCHGRADE_REQUIRE_DOCKER=1.
//! Local: needs bubblewrap (PATCHGRADE_REQUIRE_SANDBOX=1 makes it required).

mod common;

use common::widgets::*;
use common::*;
use patchgrade::exit;

/// The test the test patch adds: what `blackhole_routes` promises, timed.
const PROBE: &str = "    def test_high(self):\n        import socket, time\n        t = time.monotonic()\n        with self.assertRaises(OSError):\n            socket.getaddrinfo('pypi.org', 443)\n        self.assertLess(time.monotonic() - t, 3, 'a name lookup waited')\n        s = socket.socket()\n        s.settimeout(1.0)\n        t = time.monotonic()\n        with self.assertRaises(socket.timeout):\n            s.connect(('10.255.255.1', 80))\n        self.assertGreater(time.monotonic() - t, 0.5, 'the connect failed at once')\n";

fn spec(python: &str) -> String {
    format!(
        "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"{python}\"\n    blackhole_routes: true\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n"
    )
}

/// Gold with the probe as its test: resolved only if both promises hold.
fn run_probe(w: &Widgets, backend: &str) -> String {
    let probe = w.tests_adding(PROBE);
    let row = instance(
        "w-hole",
        "acme/widgets",
        &w.base,
        &w.gold,
        &probe,
        &[F2P],
        &[P2P],
    );
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let mut args = docker_args("run", "gold", "hole");
    // docker_args names the Docker backend; the local run swaps it.
    let at = args.iter().position(|a| *a == "docker").unwrap();
    args[at] = backend;
    if backend == "local" {
        args.truncate(args.len() - 2); // no --base-image for the local backend
    }
    let out = w.sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec = w.sb.record("hole", "gold", "w-hole");
    let log = std::fs::read_to_string(
        w.sb.path()
            .join("logs/run_evaluation/hole/gold/w-hole/test_output.txt"),
    )
    .unwrap_or_default();
    assert_eq!(rec["outcome"], "resolved", "{log}");
    log
}

#[test]
fn docker_blackhole_routes_time_connects_out_and_fail_lookups_at_once() {
    if !docker_ready("docker_blackhole_routes") {
        return;
    }
    let w = Widgets::new(&spec("3.11"), &[]);
    run_probe(&w, "docker");
}

#[test]
fn local_blackhole_routes_time_connects_out_and_fail_lookups_at_once() {
    if !available("bubblewrap", "PATCHGRADE_REQUIRE_SANDBOX", bwrap_works()) {
        return;
    }
    // The local backend runs the host's python3 in a venv.
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let w = Widgets::new(&spec(&version), &[]);
    run_probe(&w, "local");
}
