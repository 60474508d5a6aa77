//! `patchgrade serve`: the real binary over real HTTP on loopback, on the
//! local backend with the shapes repository made in the test (real git,
//! real unittest runs). Submit/wait, idempotency, cancel, back-pressure,
//! bad requests, the token, kill -9 and restart, SIGTERM drain, the Python
//! client.

mod common;
#[path = "serve/images.rs"]
mod images;
#[path = "serve/options.rs"]
mod options;
#[path = "serve/server.rs"]
mod server;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::shapes::{shapes, Shapes};
use common::widgets::{Widgets, UNITTEST_SPEC};
use common::{docker_ready, jsonl, project_root};
use patchgrade::exit;
use serde_json::{json, Value};
use server::{id, item, record_path, Server};

/// A candidate that makes the tests take `secs` seconds (and fails them).
fn slow_patch(secs: u32) -> String {
    format!(
        "diff --git a/shapes/core.py b/shapes/core.py\n--- a/shapes/core.py\n+++ b/shapes/core.py\n@@ -1,2 +1,4 @@\n+import time\n+time.sleep({secs})\n def clamp(x, lo, hi):\n     return max(lo, x)\n"
    )
}

#[test]
fn submit_wait_idempotency_cancel_and_the_folder_report_reads() {
    let Shapes { sb, gold, overfit } = shapes();
    let mut srv = Server::start(&sb, &["--max-workers", "1"]);
    assert_eq!(srv.call_as("GET", "/healthz", None, None).status, 200);
    assert_eq!(srv.call("GET", "/readyz", None).status, 200);

    let first = srv.submit(&item("s-gold", &gold));
    assert_eq!(first.status, 202, "{}", first.body);
    let gold_id = id(&first);
    assert_eq!(
        first.header("location"),
        Some(&*format!("/v1/evaluations/{gold_id}"))
    );
    // The same submission again is the same evaluation.
    let again = srv.submit(&item("s-gold", &gold));
    assert_eq!((again.status, id(&again)), (200, gold_id.clone()));
    let done = srv.wait(&gold_id);
    assert_eq!(done["outcome"], "resolved", "{done}");
    assert_eq!(done["resolved"], true);
    assert_eq!(done["environment_failure"], false);
    // The record is the run folder's patchgrade.json, audit included.
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(record_path(&sb, &done)).unwrap()).unwrap();
    assert_eq!(done["record"], on_disk);
    assert!(on_disk["audit"].is_object(), "{on_disk}");

    // A batch: one known, one new.
    let batch = srv.submit(&json!([item("s-gold", &gold), item("s-over", &overfit)]));
    assert_eq!(batch.status, 202, "{}", batch.body);
    let listed = &batch.body["evaluations"];
    assert_eq!(listed[0]["id"], gold_id.as_str());
    // Its events: each change of state, the stream ending with the record.
    let over_id = listed[1]["id"].as_str().unwrap();
    let stream = srv.call("GET", &format!("/v1/evaluations/{over_id}/events"), None);
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let text = stream.body.as_str().unwrap();
    assert!(text.contains("event: finished\ndata: {"), "{text}");
    assert!(text.contains("\"record\":{"), "{text}");
    let over = srv.wait(over_id);
    assert_eq!(over["state"], "finished", "{over}");

    // Cancel: a slow one running, another queued behind it.
    let slow = id(&srv.submit(&item("s-gold", &slow_patch(60))));
    srv.until(&slow, "running");
    let queued = id(&srv.submit(&item("s-gold", &slow_patch(61))));
    assert_eq!(
        srv.call("GET", &format!("/v1/evaluations/{queued}"), None)
            .body["queue_position"],
        1
    );
    let c = srv.call("DELETE", &format!("/v1/evaluations/{queued}"), None);
    assert_eq!(
        (c.status, c.body["state"].as_str()),
        (200, Some("cancelled")),
        "{}",
        c.body
    );
    let started = Instant::now();
    let c = srv.call("DELETE", &format!("/v1/evaluations/{slow}"), None);
    assert_eq!(
        (c.status, c.body["state"].as_str()),
        (200, Some("cancelled")),
        "{}",
        c.body
    );
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the running one was stopped"
    );
    let c = srv.call("DELETE", &format!("/v1/evaluations/{slow}"), None);
    assert_eq!(c.status, 409, "{}", c.body);
    assert!(c.error().contains("cancelled already"), "{}", c.body);
    let c = srv.call("DELETE", &format!("/v1/evaluations/{gold_id}"), None);
    assert_eq!(c.status, 409);

    let all = srv.call("GET", "/v1/evaluations", None).body;
    assert_eq!(all["total"], 4, "{all}");
    assert!(all["next"].is_null(), "one page: {all}");
    // Pages: 3, then the one after; their ids in order are the whole list.
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["evaluations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let first = srv.call("GET", "/v1/evaluations?limit=3", None).body;
    let next = first["next"].as_str().expect("a next page").to_string();
    assert_eq!(
        (ids(&first).len(), first["total"].as_u64()),
        (3, Some(4)),
        "{first}"
    );
    let second = srv
        .call(
            "GET",
            &format!("/v1/evaluations?limit=3&after={next}"),
            None,
        )
        .body;
    assert!(second["next"].is_null(), "{second}");
    assert_eq!([ids(&first), ids(&second)].concat(), ids(&all));
    let c = srv.call("GET", "/v1/evaluations?after=nosuch", None);
    assert_eq!(c.status, 400, "{}", c.body);
    assert!(c.error().contains("nosuch"), "{}", c.body);
    let finished = srv.call("GET", "/v1/evaluations?state=finished", None).body;
    assert_eq!(finished["total"], 2, "{finished}");
    let metrics = srv.call("GET", "/metrics", None).body;
    let metrics = metrics.as_str().unwrap();
    for line in [
        "patchgrade_queue_depth 0",
        "patchgrade_running 0",
        "patchgrade_cancelled_total 2",
        "patchgrade_evaluation_seconds_count 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}:\n{metrics}");
    }
    assert!(srv.call("GET", "/openapi.json", None).body["paths"]["/v1/evaluations"].is_object());

    srv.terminate(0);
    let out = sb.run(&["report", "logs/run_evaluation/svc"]);
    assert_eq!(out.status.code(), Some(exit::OK));
}

#[test]
fn a_full_queue_answers_429_with_retry_after() {
    let Shapes { sb, gold, .. } = shapes();
    let srv = Server::start(&sb, &["--max-workers", "1", "--queue-limit", "1"]);
    let running = id(&srv.submit(&item("s-gold", &slow_patch(20))));
    srv.until(&running, "running");
    let queued = srv.submit(&item("s-gold", &gold));
    assert_eq!(queued.status, 202, "{}", queued.body);
    let full = srv.submit(&item("s-over", &gold));
    assert_eq!(full.status, 429, "{}", full.body);
    assert!(full.error().contains("queue is full"), "{}", full.body);
    let retry: u64 = full.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=600).contains(&retry));
    // What is known already is answered even so.
    assert_eq!(srv.submit(&item("s-gold", &gold)).status, 200);
    let metrics = srv.call("GET", "/metrics", None).body;
    assert!(metrics
        .as_str()
        .unwrap()
        .contains("patchgrade_refused_total{reason=\"queue_full\"} 1"));
}

#[test]
fn bad_requests_are_4xx_naming_the_problem_and_the_token_is_required() {
    let Shapes { sb, gold, .. } = shapes();
    sb.write("token", "s3cret\n");
    let srv = Server::start(&sb, &["--token-file", "token", "--max-body", "4000"]);
    let post = |body: &str| srv.call("POST", "/v1/evaluations", Some(body));
    let cases: Vec<(String, u16, &str)> = vec![
        ("{\"instance_id\": ".into(), 400, "malformed JSON"),
        (r#"{"instance":"s-gold"}"#.into(), 400, "unknown field `instance`"),
        ("[]".into(), 400, "no evaluation"),
        (r#"{"instance_id":"nope"}"#.into(), 404, "(nope): unknown instance_id"),
        (
            json!({"instance_id": "s-gold", "model_patch": "just prose"}).to_string(),
            422,
            "no diff found",
        ),
        (
            json!({"instance_id": "s-gold", "model_patch": gold.replace("shapes/core.py", "../core.py")}).to_string(),
            422,
            "unsafe path",
        ),
        (
            json!({"instance_id": "s-gold", "model_patch": gold, "sample_id": "a/b"}).to_string(),
            422,
            "sample_id \"a/b\"",
        ),
        (
            json!({"instance_id": "s-gold", "model_patch": "x".repeat(5000)}).to_string(),
            413,
            "over 4000 bytes",
        ),
    ];
    for (body, status, message) in &cases {
        let a = post(body);
        assert_eq!(a.status, *status, "{body}: {}", a.body);
        assert!(a.error().contains(message), "{body}: {}", a.body);
    }
    let a = srv.call(
        "GET",
        "/v1/evaluations/0123456789abcdef/wait?timeout=x",
        None,
    );
    assert_eq!(a.status, 400, "{}", a.body);
    let a = srv.call("GET", "/v1/evaluations/0123456789abcdef", None);
    assert_eq!(a.status, 404);
    let a = srv.call("GET", "/v2/nothing", None);
    assert!(
        a.status == 404 && a.error().contains("no such endpoint"),
        "{}",
        a.body
    );
    // A named sample holds one patch.
    let named = json!({"instance_id": "s-gold", "model_patch": gold, "sample_id": 1});
    assert_eq!(srv.submit(&named).status, 202);
    let other = json!({"instance_id": "s-gold", "model_patch": slow_patch(1), "sample_id": 1});
    let a = srv.submit(&other);
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(
        a.error().contains("serve/s-gold@1") || a.error().contains("s-gold@1"),
        "{}",
        a.body
    );

    // The token: required for all but health.
    for auth in [None, Some("Bearer wrong"), Some("s3cret")] {
        let a = srv.call_as("GET", "/v1/evaluations", None, auth);
        assert_eq!(a.status, 401, "{auth:?}");
        assert_eq!(a.header("www-authenticate"), Some("Bearer"));
        assert!(a.error().contains("bearer token"));
    }
    assert_eq!(srv.call_as("GET", "/metrics", None, None).status, 401);
    assert_eq!(srv.call_as("GET", "/healthz", None, None).status, 200);
    assert_eq!(srv.call_as("GET", "/readyz", None, None).status, 200);
    assert_eq!(srv.call("GET", "/v1/evaluations", None).status, 200);

    // Not loopback: refused unless asked for.
    let out = sb.run(&[
        "serve",
        "--dataset",
        "dataset.jsonl",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

#[test]
fn kill_9_and_a_restart_lose_nothing_and_grade_nothing_twice() {
    let Shapes { sb, gold, overfit } = shapes();
    let mut srv = Server::start(&sb, &["--max-workers", "1"]);
    let first = srv.wait(&id(&srv.submit(&item("s-gold", &gold))));
    let first_record = std::fs::read(record_path(&sb, &first)).unwrap();
    let slow = id(&srv.submit(&item("s-over", &slow_patch(30))));
    srv.until(&slow, "running");
    let queued: Vec<String> = [item("s-over", &overfit), item("s-gold", &slow_patch(1))]
        .iter()
        .map(|b| id(&srv.submit(b)))
        .collect();
    srv.signal("-KILL");
    srv.exit_code();
    drop(srv);

    let srv = Server::start(&sb, &["--max-workers", "1"]);
    assert!(
        srv.log().contains("3 evaluations queued from before"),
        "{}",
        srv.log()
    );
    for eid in queued.iter().chain([&slow]) {
        let s = srv.wait(eid);
        assert_eq!(s["state"], "finished", "{s}");
        assert!(record_path(&sb, &s).exists());
    }
    // The one finished before the kill was not evaluated again.
    let s = srv.call(
        "GET",
        &format!("/v1/evaluations/{}", first["id"].as_str().unwrap()),
        None,
    );
    assert_eq!(s.body["state"], "finished");
    assert_eq!(
        std::fs::read(record_path(&sb, &first)).unwrap(),
        first_record
    );
    let metrics = srv.call("GET", "/metrics", None).body;
    let m = metrics.as_str().unwrap();
    assert!(
        m.lines()
            .any(|l| l == "patchgrade_evaluation_seconds_count 3"),
        "{m}"
    );
    assert_eq!(srv.call("GET", "/v1/evaluations", None).body["total"], 4);
    // Finished before the kill, out of memory since: submitted again, it
    // is the same evaluation, and its key still refuses another patch.
    let again = srv.submit(&item("s-gold", &gold));
    assert_eq!(
        (again.status, id(&again), again.body["state"].as_str()),
        (
            200,
            first["id"].as_str().unwrap().to_string(),
            Some("finished")
        ),
        "{}",
        again.body
    );
    let mut named = item("s-over", &overfit);
    named["sample_id"] = json!("n1");
    assert_eq!(srv.submit(&named).status, 202);
    srv.wait(&id(&srv.submit(&named)));
    let mut other = item("s-over", &gold);
    other["sample_id"] = json!("n1");
    let c = srv.submit(&other);
    assert_eq!(c.status, 409, "{}", c.body);
}

#[test]
fn sigterm_finishes_what_runs_keeps_the_queue_and_exits_0() {
    let Shapes { sb, gold, .. } = shapes();
    let mut srv = Server::start(&sb, &["--max-workers", "1"]);
    let running = id(&srv.submit(&item("s-gold", &slow_patch(4))));
    srv.until(&running, "running");
    let queued = id(&srv.submit(&item("s-gold", &gold)));
    srv.terminate(1);
    let folder = sb.path().join("logs/run_evaluation/svc/m");
    let finished: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("patchgrade.json").exists())
        .collect();
    assert_eq!(
        finished.len(),
        1,
        "the running one finished, the queued one waits"
    );
    drop(srv);
    let srv = Server::start(&sb, &["--max-workers", "1"]);
    assert_eq!(srv.wait(&queued)["outcome"], "resolved");
    assert_eq!(srv.wait(&running)["state"], "finished");
}

#[test]
fn the_python_client_grades_as_a_reward_function() {
    let Shapes { sb, gold, overfit } = shapes();
    sb.write("token", "tok\n");
    let srv = Server::start(&sb, &["--token-file", "token"]);
    let script = format!(
        r#"
import json, sys
sys.path.insert(0, {scripts:?})
from patchgrade_client import Client, PatchgradeError
c = Client({url:?}, token="tok")
gold, over = json.loads(sys.stdin.read())
r = c.grade("s-gold", gold)
assert r.resolved and r.outcome == "resolved" and r.record["instance_id"] == "s-gold", r.data
bad = c.grade("s-gold", "not a diff")
assert not bad.resolved and bad.outcome == "rejected" and "no diff" in bad.error, bad.data
many = c.grade_many([("s-gold", gold), ("s-over", over)])
assert [m.state for m in many] == ["finished", "finished"], [m.data for m in many]
assert many[0].id == r.id
listed = [e.id for e in c.list(page=1)]
assert bad.id is None and listed == [r.id, many[1].id], listed
assert [e.id for e in c.list(state="finished", page=2)] == listed, listed
try:
    Client({url:?}).submit("s-gold", gold)
    raise SystemExit("no token: accepted")
except PatchgradeError as e:
    assert e.status == 401, e
print("client ok")
"#,
        scripts = project_root().join("harness-scripts").display().to_string(),
        url = format!("http://{}", srv.addr),
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!([gold, overfit]).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "client ok");
}

/// The Docker backend: the same service grades in containers (images built
/// from the spec, the base bootstrapped) and leaves no container behind.
#[test]
fn docker_serve_grades_in_containers_and_leaves_none() {
    if !docker_ready("docker_serve_grades_in_containers_and_leaves_none") {
        return;
    }
    let _engine = server::one_on_the_engine();
    let w = Widgets::new(UNITTEST_SPEC, &[]);
    w.sb.write("dataset.jsonl", &jsonl(&[w.row("w-svc")]));
    let mut srv = Server::launch(&w.sb, &["--backend", "docker", "--base-image", "none"], &[]);
    let gold = srv.wait(&id(&srv.submit(&item("w-svc", &w.gold))));
    assert_eq!(gold["outcome"], "resolved", "{gold}");
    assert!(
        gold["record"]["environment"]
            .as_str()
            .unwrap_or("")
            .starts_with("image "),
        "{gold}"
    );
    let wrong = srv.wait(&id(&srv.submit(&item("w-svc", &w.wrong))));
    assert_eq!(
        (wrong["outcome"].as_str(), &wrong["resolved"]),
        (Some("unresolved"), &json!(false)),
        "{wrong}"
    );
    // The second evaluation found the images the first one had.
    let metrics = srv.call("GET", "/metrics", None).body;
    let m = metrics.as_str().unwrap();
    let hits: u64 = m
        .lines()
        .filter(|l| l.starts_with("patchgrade_image_cache_hits_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(hits >= 1, "{m}");
    srv.terminate(0);
    let left = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter", "label=patchgrade.run_id=svc"])
        .output()
        .unwrap();
    assert!(left.status.success());
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "",
        "containers left"
    );
}
