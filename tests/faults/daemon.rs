//! The Docker engine stopped and started again mid-run, on a private
//! dockerd the test starts (its own socket, data-root, exec-root, pidfile,
//! no bridge, in a network namespace of its own), so that no other test or
//! user loses containers. The namespace matters: a dockerd started with
//! `--bridge=none` deletes the `docker0` of the namespace it runs in, which
//! in the host's would cut the machine's own engine off its bridge. Its images
//! come from the main engine (`docker save | docker --host … load`).

use patchgrade::exit;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// Sleeps, then passes: in flight when the engine goes.
const SLOW: &str = "    def test_high(self):\n        import time\n        time.sleep(20)\n        self.assertEqual(clamp(9, 0, 3), 3)\n";

struct Dockerd {
    dir: PathBuf,
    child: Option<Child>,
    netns: String,
}

/// The network namespace the private dockerd runs in (named after its
/// folder, so a restart reuses it).
fn netns_of(dir: &Path) -> String {
    let leaf = dir.file_name().unwrap().to_string_lossy();
    let name = format!("pgf-{}", leaf.trim_start_matches('.'));
    if !Path::new("/run/netns").join(&name).exists() {
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("ip netns add");
        assert!(out.status.success(), "ip netns add {name}: {out:?}");
    }
    name
}

impl Dockerd {
    fn host(dir: &Path) -> String {
        format!("unix://{}", dir.join("d.sock").display())
    }

    fn start(dir: &Path) -> Dockerd {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("dockerd.log"))
            .unwrap();
        let netns = netns_of(dir);
        // nsenter keeps the mounts (dockerd needs the host's cgroups), unlike
        // `ip netns exec`.
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .arg("dockerd")
            .arg("-H")
            .arg(Self::host(dir))
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("--pidfile")
            .arg(dir.join("d.pid"))
            .args(["--bridge=none", "--iptables=false", "--ip-masq=false"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start dockerd");
        let d = Dockerd {
            dir: dir.to_owned(),
            child: Some(child),
            netns,
        };
        let host = Self::host(dir);
        wait_for("the private dockerd", Duration::from_secs(60), || {
            Command::new("docker")
                .args(["--host", &host, "version"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        d
    }

    /// SIGTERM, and wait until it is gone.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let t = std::time::Instant::now();
            while c.try_wait().unwrap().is_none() {
                if t.elapsed() > Duration::from_secs(60) {
                    let _ = c.kill();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.stop();
        let _ = Command::new("umount")
            .arg("-R")
            .arg("-l")
            .arg(self.dir.join("exec"))
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

/// The instance images of a finished run and the root, base and env images
/// under them (by the ids in their history).
fn images_of(records: &[serde_json::Value]) -> Vec<String> {
    let mut names: Vec<String> = records
        .iter()
        .map(|r| {
            let env = r["environment"].as_str().unwrap();
            env.split_whitespace().nth(1).unwrap().to_string()
        })
        .collect();
    let history = docker_out(None, &["history", "-q", &names[0]]);
    let ids: Vec<&str> = history.lines().filter(|l| *l != "<missing>").collect();
    let listed = docker_out(
        None,
        &["images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"],
    );
    for line in listed.lines() {
        let Some((name, id)) = line.split_once(' ') else {
            continue;
        };
        let tier = ["patchgrade.root.", "patchgrade.base.", "patchgrade.env."];
        if tier.iter().any(|t| name.starts_with(t)) && ids.contains(&id) {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn a_dockerd_restart_mid_run_is_retried_once_it_answers_again() {
    if !docker_ready("a_dockerd_restart_mid_run_is_retried_once_it_answers_again") {
        return;
    }
    let _serial = serial();
    let mut c = Corpus::new("fr");
    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    // Warm: the instance images, on the main engine.
    for (case, patch) in [("s1", &gold), ("s2", &gold), ("q1", &gold), ("q2", &wrong)] {
        c.add(case, HIGH, patch);
    }
    c.write();
    let out = c.run("warm", &["--max-workers", "2"], &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let records: Vec<_> = ["s1", "s2", "q1", "q2"]
        .iter()
        .map(|case| c.record("warm", case))
        .collect();
    let images = images_of(&records);
    assert!(
        images.len() >= 6,
        "instance, env, base and root images: {images:?}"
    );

    let dir = tempfile::Builder::new()
        .prefix("pgd-")
        .tempdir_in("/tmp")
        .unwrap();
    let mut daemon = Dockerd::start(dir.path());
    let host = Dockerd::host(dir.path());
    let mut save = Command::new("docker")
        .arg("save")
        .args(&images)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let load = Command::new("docker")
        .args(["--host", &host, "load", "-q"])
        .stdin(save.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(save.wait().unwrap().success());
    assert!(
        load.status.success(),
        "{}",
        String::from_utf8_lossy(&load.stderr)
    );

    // The slow tests now, on the private engine. They must be the two that
    // start first: with the warm run's durations (all alike, so noise)
    // deciding the order, a loaded machine could start q2 first; without
    // any, evaluations start in input order.
    let durations = c.w.sb.cache().join("durations.json");
    if durations.exists() {
        std::fs::remove_file(durations).unwrap();
    }
    let mut c2 = c;
    c2.clear();
    c2.add("s1", SLOW, &gold);
    c2.add("s2", SLOW, &gold);
    c2.add("q1", HIGH, &gold);
    c2.add("q2", HIGH, &wrong);
    c2.write();
    let run = "restart";
    let args = c2.args(run, &["--max-workers", "2", "--timeout", "120"]);
    let err_path = c2.path().join("restart.stderr");
    let mut p = Running {
        child: c2
            .command(&args)
            .env("DOCKER_HOST", &host)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .unwrap(),
        stderr: err_path,
    };
    wait_for("both slow tests running", Duration::from_secs(120), || {
        containers_of(Some(&host), run).len() == 2
    });
    std::thread::sleep(Duration::from_secs(2));
    daemon.stop();
    std::thread::sleep(Duration::from_secs(3));
    daemon = Dockerd::start(dir.path());

    assert_eq!(p.wait(Duration::from_secs(300)), Some(exit::OK));
    let err = p.stderr();
    for case in ["s1", "s2"] {
        let id = c2.id(case);
        assert!(
            err.contains(&format!("{id}: infra error, retrying once")),
            "{case} was in flight: {err}"
        );
        assert_eq!(
            c2.record(run, case)["outcome"],
            "resolved",
            "{case} retried"
        );
    }
    assert_eq!(c2.record(run, "q1")["outcome"], "resolved");
    assert_eq!(c2.record(run, "q2")["outcome"], "unresolved");
    let summary = c2.w.sb.summary("m", run);
    assert_eq!(summary["submitted_instances"], 4, "{summary}");
    c2.assert_nothing_left(Some(&host), run);
    drop(daemon);
    c2.remove_images();
}
