//! `patchgrade serve --backend swarm` on the two-node swarm of
//! [`two_nodes`]: evaluations submitted over HTTP are graded as
//! `--backend docker` grades them, on both nodes; SIGTERM leaves nothing
//! on the swarm, also when it stops a running evaluation past
//! `--drain-timeout`; after `kill -9`, the next start removes the killed
//! process's services and finishes what was accepted, grading nothing
//! twice.

use super::server::{id, item, record_path, Server};
use super::*;
use serde_json::{json, Value};

/// The service's flags on the swarm.
fn serve_args() -> Vec<&'static str> {
    [
        "--backend",
        "swarm",
        "--registry",
        REGISTRY2,
        "--max-workers",
        "4",
    ]
    .into_iter()
    .chain(LIMITS)
    .collect()
}

/// The gold fix, with `secs` seconds of sleep when the tests import it.
fn slow_gold(w: &Widgets, secs: u32) -> String {
    let core = format!("import time\ntime.sleep({secs})\n{CORE_FIXED}");
    w.repo
        .diff_of(&[("widgets/core.py", Some(core.as_bytes()))], false)
}

/// The services of patchgrade on the swarm, of process `pid` when given.
fn services(e: &Engine, pid: Option<u32>) -> Vec<String> {
    let filter = match pid {
        Some(p) => format!("label=patchgrade.pid={p}"),
        None => "label=patchgrade.swarm".to_string(),
    };
    let out = e.docker_ok(&["service", "ls", "-q", "--filter", &filter]);
    out.lines().map(str::to_string).collect()
}

/// Wait until the evaluations `ids` run and the swarm has a service of
/// each.
fn until_on_swarm(srv: &Server, e: &Engine, ids: &[&str]) {
    for eid in ids {
        srv.until(eid, "running");
    }
    let t = Instant::now();
    while services(e, Some(srv.child.id())).len() < ids.len() {
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "no services for {ids:?}: {}",
            srv.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The node in an evaluation's record (its `environment`).
fn node_in(status: &Value) -> Option<String> {
    let env = status["record"]["environment"].as_str()?;
    patchgrade::record::Environment::parse(env)
        .node()
        .map(str::to_string)
}

#[test]
fn swarm_serve_spreads_over_the_nodes_and_loses_nothing() {
    let Some((_serial, w)) = prepared("swarm_serve_spreads_over_the_nodes_and_loses_nothing")
    else {
        return;
    };
    let s = two_nodes(&w);
    let host = s.e1.sock.clone();
    let start = |extra: &[&str]| Server::launch_on(&w.sb, Some(&host), &serve_args(), extra);

    // One batch: the fixture's evaluations (a resolved, an unresolved, an
    // empty one, no network, the limits) and a slower gold, graded as
    // docker grades them, on both nodes.
    let mut srv = start(&[]);
    let slow = slow_gold(&w, 5);
    let batch: Vec<(&str, &str)> = vec![
        ("w-gold", &w.gold),
        ("w-wrong", &w.wrong),
        ("w-empty", ""),
        ("w-net", &w.gold),
        ("w-limits", &w.gold),
        ("w-gold", &slow),
    ];
    let body: Vec<Value> = batch.iter().map(|(i, p)| item(i, p)).collect();
    let a = srv.submit(&json!(body));
    assert_eq!(a.status, 202, "{}", a.body);
    let ids: Vec<String> = a.body["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let mut nodes = std::collections::BTreeSet::new();
    let mut records = Vec::new();
    for ((instance, patch), eid) in batch.iter().zip(&ids) {
        let done = srv.wait(eid);
        assert_eq!(done["state"], "finished", "{done}");
        let record = &done["record"];
        assert_eq!(record["backend"], "swarm", "{done}");
        let resolved = done["outcome"] == "resolved";
        assert_eq!(done["resolved"], json!(resolved), "{done}");
        if *patch == slow.as_str() {
            assert_eq!(done["outcome"], "resolved", "{done}");
        } else {
            let dk = w.sb.record("dk", "m", instance);
            assert_eq!(verdict(&dk), verdict(record), "{instance}: docker vs serve");
        }
        if !patch.is_empty() {
            nodes.insert(node_in(&done).unwrap_or_else(|| panic!("no node: {done}")));
        }
        records.push(record_path(&w.sb, &done));
    }
    assert_eq!(nodes.len(), 2, "evaluations on both nodes: {nodes:?}");
    srv.terminate(0);
    assert_eq!(s.e1.settled(), "", "left after SIGTERM");
    let graded: Vec<Vec<u8>> = records.iter().map(|p| std::fs::read(p).unwrap()).collect();
    drop(srv);

    // kill -9 while two evaluations run on the swarm: their services stay
    // until the next start, which removes them before it listens, then
    // evaluates both again; what was graded before is left alone.
    let mut srv = start(&[]);
    let running: Vec<String> = [("w-gold", 20), ("w-net", 21)]
        .iter()
        .map(|(i, secs)| id(&srv.submit(&item(i, &slow_gold(&w, *secs)))))
        .collect();
    let refs: Vec<&str> = running.iter().map(String::as_str).collect();
    until_on_swarm(&srv, &s.e1, &refs);
    let killed = srv.child.id();
    srv.signal("-KILL");
    srv.exit_code();
    drop(srv);
    assert!(
        !services(&s.e1, Some(killed)).is_empty(),
        "kill -9 leaves its services"
    );
    let mut srv = start(&["--drain-timeout", "3"]);
    assert!(
        srv.log().contains("2 evaluations queued from before"),
        "{}",
        srv.log()
    );
    assert_eq!(
        services(&s.e1, Some(killed)),
        Vec::<String>::new(),
        "the killed process's services, removed at the start"
    );
    for eid in &running {
        let done = srv.wait(eid);
        assert_eq!(done["outcome"], "resolved", "{done}");
        assert!(node_in(&done).is_some(), "{done}");
    }
    for (path, before) in records.iter().zip(&graded) {
        assert_eq!(
            &std::fs::read(path).unwrap(),
            before,
            "{} graded again",
            path.display()
        );
    }
    assert_eq!(srv.call("GET", "/v1/evaluations", None).body["total"], 8);

    // SIGTERM past --drain-timeout while one runs: it is stopped, its
    // service removed, and it stays queued for the next start.
    let long = id(&srv.submit(&item("w-gold", &slow_gold(&w, 30))));
    until_on_swarm(&srv, &s.e1, &[&long]);
    srv.terminate(1);
    assert_eq!(s.e1.settled(), "", "left after a SIGTERM that stopped one");
    drop(srv);
    let mut srv = start(&[]);
    assert_eq!(srv.wait(&long)["outcome"], "resolved");
    srv.terminate(0);
    assert_eq!(s.e1.settled(), "", "left at the end");
}
