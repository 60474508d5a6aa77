//! A running `patchgrade serve` driven over real HTTP on loopback: the
//! harness of tests/serve.rs and of the swarm service test in
//! tests/swarm.rs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{bin, Sandbox};

/// Held by every test of a binary that serves on the machine's engine: they
/// share the run id `svc`, and a service starting removes the containers an
/// earlier process left on its run id, so two at once would stop each
/// other's tests (`stopped from outside (signal 9)`).
pub fn one_on_the_engine() -> std::sync::MutexGuard<'static, ()> {
    static ENGINE: Mutex<()> = Mutex::new(());
    ENGINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running `patchgrade serve` and what it said on stderr.
pub struct Server {
    pub child: Child,
    pub addr: String,
    stderr: Arc<Mutex<String>>,
    token: Option<String>,
}

/// One HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or("")
    }
}

impl Server {
    /// On the local backend.
    pub fn start(sb: &Sandbox, extra: &[&str]) -> Server {
        Server::launch(sb, &["--backend", "local"], extra)
    }

    pub fn launch(sb: &Sandbox, backend: &[&str], extra: &[&str]) -> Server {
        Server::launch_on(sb, None, backend, extra)
    }

    /// Against the engine at `docker_host` (the machine's without).
    pub fn launch_on(
        sb: &Sandbox,
        docker_host: Option<&str>,
        backend: &[&str],
        extra: &[&str],
    ) -> Server {
        let mut args = vec!["serve", "--dataset", "dataset.jsonl", "--run-id", "svc"];
        args.extend_from_slice(backend);
        args.extend_from_slice(&[
            "--specs",
            "specs",
            "--mirror-dir",
            "mirrors",
            "--listen",
            "127.0.0.1:0",
        ]);
        args.extend_from_slice(extra);
        let mut cmd = Command::new(bin());
        cmd.args(&args)
            .current_dir(sb.path())
            .env("PATCHGRADE_CACHE", sb.cache())
            .env_remove("PATCHGRADE_MIRROR_DIR")
            .stderr(Stdio::piped());
        if let Some(host) = docker_host {
            cmd.env("DOCKER_HOST", host);
        }
        let mut child = cmd.spawn().expect("start patchgrade serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.split("listening on http://").nth(1) {
                addr = Some(rest.split_whitespace().next().unwrap().to_string());
                break;
            }
        }
        let addr = addr.unwrap_or_else(|| panic!("no address: {}", stderr.lock().unwrap()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let token = extra
            .iter()
            .position(|a| *a == "--token-file")
            .map(|i| std::fs::read_to_string(sb.path().join(extra[i + 1])).unwrap());
        Server {
            child,
            addr,
            stderr,
            token: token.map(|t| t.trim().to_string()),
        }
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// A request with the server's token (if any).
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> Answer {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        self.call_as(method, path, body, auth.as_deref())
    }

    pub fn call_as(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        auth: Option<&str>,
    ) -> Answer {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let body = body.unwrap_or("");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(a) = auth {
            req.push_str(&format!("Authorization: {a}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, text) = raw.split_once("\r\n\r\n").unwrap();
        let mut head = head.lines();
        let status = head
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = head
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let body = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()));
        Answer {
            status,
            headers,
            body,
        }
    }

    pub fn submit(&self, body: &Value) -> Answer {
        self.call("POST", "/v1/evaluations", Some(&body.to_string()))
    }

    /// Wait until the evaluation ends; its status.
    pub fn wait(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(900);
        loop {
            let a = self.call(
                "GET",
                &format!("/v1/evaluations/{id}/wait?timeout=20"),
                None,
            );
            assert_eq!(a.status, 200, "{}", a.body);
            let state = a.body["state"].as_str().unwrap().to_string();
            if state == "finished" || state == "cancelled" {
                return a.body;
            }
            assert!(
                Instant::now() < deadline,
                "{id} never ended: {}",
                self.log()
            );
        }
    }

    /// Poll until the evaluation is in `state`.
    pub fn until(&self, id: &str, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self
            .call("GET", &format!("/v1/evaluations/{id}"), None)
            .body["state"]
            != state
        {
            assert!(
                Instant::now() < deadline,
                "{id} never {state}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// SIGTERM: the drain ends in exit 0, saying that `queued`
    /// evaluations stay queued for the next start.
    pub fn terminate(&mut self, queued: usize) {
        self.signal("-TERM");
        assert_eq!(
            self.exit_code(),
            Some(patchgrade::exit::OK),
            "{}",
            self.log()
        );
        let said = format!("{queued} evaluations stay queued");
        // The last lines may still be on their way from the pipe.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.log().contains(&said) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(self.log().contains(&said), "{said}: {}", self.log());
    }

    /// Wait for the process to end; its exit code.
    pub fn exit_code(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "did not stop: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!("--- serve stderr ---\n{}", self.log());
    }
}

pub fn item(instance: &str, patch: &str) -> Value {
    json!({"instance_id": instance, "model_patch": patch, "model_name_or_path": "m"})
}

pub fn id(a: &Answer) -> String {
    a.body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {}", a.body))
        .to_string()
}

/// The `patchgrade.json` of an evaluation the service (run id `svc`)
/// graded, from its status.
pub fn record_path(sb: &Sandbox, status: &Value) -> std::path::PathBuf {
    sb.path().join(format!(
        "logs/run_evaluation/svc/m/{}@{}/patchgrade.json",
        status["instance_id"].as_str().unwrap(),
        status["sample_id"].as_str().unwrap()
    ))
}
