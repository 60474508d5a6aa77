//! The harness of tests/swarm.rs: a real swarm of
//! private Docker engines that the test starts, each in a network namespace
//! of its own (own socket, data-root, exec-root, pidfile, no bridge, no
//! iptables), so the machine's engine never enters swarm mode and every
//! address used is one the test made. Images come from the machine's engine
//! (`docker save`, then `docker load` into the private engine); the
//! registry is Debian's `docker-registry`.
//!
//! Needs root, dockerd, nsenter, ip (iproute2) and docker-registry; without
//! them the tests skip, printing why, unless PATCHGRADE_REQUIRE_DOCKER=1,
//! where they fail.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Whatever the tests need; panics instead of skipping when required.
pub fn ready(test: &str) -> bool {
    let mut missing = Vec::new();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        missing.push("root (network namespaces, dockerd)".to_string());
    }
    for (what, path) in [
        ("dockerd", "/usr/sbin/dockerd"),
        ("nsenter", "/usr/bin/nsenter"),
        ("ip (iproute2)", "/usr/sbin/ip"),
        ("docker-registry", "/usr/bin/docker-registry"),
    ] {
        let found = Path::new(path).exists()
            || Command::new("sh")
                .args([
                    "-c",
                    &format!("command -v {}", what.split(' ').next().unwrap()),
                ])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        if !found {
            missing.push(what.to_string());
        }
    }
    let engine = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !engine {
        missing.push("the machine's Docker engine".into());
    }
    if missing.is_empty() {
        return true;
    }
    let why = missing.join(", ");
    if std::env::var("PATCHGRADE_REQUIRE_DOCKER").as_deref() == Ok("1") {
        panic!("{test}: PATCHGRADE_REQUIRE_DOCKER=1 but missing: {why}");
    }
    eprintln!(
        "SKIPPED {test}: missing {why}; set PATCHGRADE_REQUIRE_DOCKER=1 to make this a failure"
    );
    false
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    if !out.status.success() {
        eprintln!(
            "{cmd:?} -> {:?}\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

pub fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(out.status.success(), "{cmd:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A short tag unique to this test process.
pub fn tag() -> String {
    format!("{:x}", std::process::id() % 0xffff)
}

/// A network namespace made by the test, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(name: &str) -> Netns {
        let _ = run(Command::new("ip").args(["netns", "del", name]));
        ok(Command::new("ip").args(["netns", "add", name]));
        ok(Command::new("ip").args(["-n", name, "link", "set", "lo", "up"]));
        Netns { name: name.into() }
    }

    pub fn path(&self) -> String {
        format!("/var/run/netns/{}", self.name)
    }

    /// A command run in this namespace only (nsenter keeps the mounts,
    /// unlike `ip netns exec`, which dockerd's cgroups need).
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path())).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A veth pair between two namespaces with an address on each end.
pub fn link(a: &Netns, a_addr: &str, b: &Netns, b_addr: &str) {
    let (ea, eb) = (format!("pg{}a", tag()), format!("pg{}b", tag()));
    ok(Command::new("ip").args([
        "link", "add", &ea, "netns", &a.name, "type", "veth", "peer", "name", &eb, "netns", &b.name,
    ]));
    ok(Command::new("ip").args([
        "-n",
        &a.name,
        "addr",
        "add",
        &format!("{a_addr}/24"),
        "dev",
        &ea,
    ]));
    ok(Command::new("ip").args([
        "-n",
        &b.name,
        "addr",
        "add",
        &format!("{b_addr}/24"),
        "dev",
        &eb,
    ]));
    ok(Command::new("ip").args(["-n", &a.name, "link", "set", &ea, "up"]));
    ok(Command::new("ip").args(["-n", &b.name, "link", "set", &eb, "up"]));
}

/// A private dockerd in a namespace; stopped and its folders removed on
/// drop.
pub struct Engine {
    pub dir: PathBuf,
    pub child: Option<Child>,
    pub sock: String,
}

impl Engine {
    pub fn start(ns: &Netns, dir: PathBuf, extra: &[&str]) -> Engine {
        std::fs::create_dir_all(&dir).unwrap();
        let sock = format!("unix://{}", dir.join("d.sock").display());
        let log = std::fs::File::create(dir.join("dockerd.log")).unwrap();
        let child = ns
            .cmd("dockerd")
            .args(["-H", &sock])
            .arg(format!("--data-root={}", dir.join("data").display()))
            .arg(format!("--exec-root={}", dir.join("exec").display()))
            .arg(format!("--pidfile={}", dir.join("dockerd.pid").display()))
            .args(["--bridge=none", "--iptables=false", "--ip-masq=false"])
            .args(extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start dockerd");
        let e = Engine {
            dir,
            child: Some(child),
            sock,
        };
        let t = Instant::now();
        while !e.docker(&["version"]).status.success() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "private dockerd did not come up: {}",
                std::fs::read_to_string(e.dir.join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        e
    }

    pub fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(["-H", &self.sock])
            .args(args)
            .output()
            .expect("docker")
    }

    pub fn docker_ok(&self, args: &[&str]) -> String {
        ok(Command::new("docker").args(["-H", &self.sock]).args(args))
    }

    /// Stop the engine (SIGTERM, then SIGKILL after 30 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = std::fs::read_to_string(self.dir.join("dockerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        // nsenter execs dockerd, so the child is dockerd itself.
        let pid = pid.unwrap_or(child.id() as i32);
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .output();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Services, configs, containers and per-evaluation networks of
    /// patchgrade on this engine.
    pub fn leftovers(&self) -> String {
        let s = self.docker_ok(&["service", "ls", "-q", "--filter", "label=patchgrade.swarm"]);
        let c = self.docker_ok(&["config", "ls", "-q", "--filter", "label=patchgrade.swarm"]);
        let k = self.docker_ok(&["ps", "-a", "-q", "--filter", "label=patchgrade.swarm"]);
        let n = self.docker_ok(&["network", "ls", "-q", "--filter", "label=patchgrade.pid"]);
        [s, c, k, n]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Wait (up to 30 s: task containers go asynchronously) until nothing
    /// of patchgrade is left; returns what is left then.
    pub fn settled(&self) -> String {
        let t = Instant::now();
        loop {
            let left = self.leftovers();
            if left.is_empty() || t.elapsed() > Duration::from_secs(30) {
                return left;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
        // Mounts of a killed engine would make removal fail; unmount first.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "grep -o ' {d}[^ ]*' /proc/self/mounts | sort -r | xargs -r -n1 umount -l",
                d = self.dir.display()
            ))
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Debian's docker-registry in a namespace, storing under `dir`.
pub struct Registry {
    pub child: Child,
}

impl Registry {
    pub fn start(ns: &Netns, dir: &Path, addr: &str) -> Registry {
        std::fs::create_dir_all(dir.join("store")).unwrap();
        let cfg = dir.join("registry.yml");
        std::fs::write(
            &cfg,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                dir.join("store").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = ns
            .cmd("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let (host, port) = addr.rsplit_once(':').unwrap();
        let t = Instant::now();
        while !run(ns
            .cmd("bash")
            .args(["-c", &format!("echo > /dev/tcp/{host}/{port}")]))
        .status
        .success()
        {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "registry did not come up"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Registry { child }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP listener in a namespace that prints every peer it accepts.
pub struct Listener {
    pub child: Child,
    pub out: PathBuf,
}

impl Listener {
    pub fn start(ns: &Netns, addr: &str, port: u16, out: PathBuf) -> Listener {
        let code = format!(
            "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('{addr}', {port}))\ns.listen(16)\nprint('listening', flush=True)\n\
             while True:\n    c, a = s.accept()\n    print('accepted', a[0], flush=True)\n    c.close()\n"
        );
        let child = ns
            .cmd("python3")
            .args(["-c", &code])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("listener");
        let t = Instant::now();
        while !std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("listening")
        {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "listener did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Listener { child, out }
    }

    pub fn accepted(&self) -> Vec<String> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("accepted ").map(str::to_string))
            .collect()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `docker save` the images an instance image was built from (root, base,
/// env: every tagged ancestor, not the instance image itself) from the
/// machine's engine into `tar`.
pub fn save_ancestors(instance_image: &str, tar: &Path) {
    let names: Vec<String> = crate::common::tagged_ancestors(instance_image)
        .into_iter()
        .filter(|n| n.starts_with("patchgrade."))
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("patchgrade.root.")),
        "no root image among the ancestors of {instance_image}: {names:?}"
    );
    let mut c = Command::new("docker");
    c.args(["save", "-o"]).arg(tar).args(&names);
    ok(&mut c);
}

/// What must be equal between backends for the same instance and patch.
pub fn verdict(record: &Value) -> Value {
    serde_json::json!({
        "outcome": record["outcome"],
        "grade": record["grade"],
        "statuses": record["statuses"],
        "test_exit_code": record["test_exit_code"],
        "ungradable": record["ungradable"],
        "apply_strategy": record["apply_strategy"],
    })
}
