//! Faults of the patchgrade process itself: killed outright and run again,
//! interrupted once or twice (in the tests, or in an image build), two
//! processes on one run id, a test that outlives `--timeout` ignoring
//! SIGTERM.

use patchgrade::exit;
use std::time::{Duration, Instant};

use crate::support::*;

/// Quick instances q1..qn (gold, passing) and `hang` (never ends), hang first.
fn hang_and_quick(prefix: &str, n: usize) -> Corpus {
    let mut c = Corpus::new(prefix);
    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    c.add("hang", HANG, &gold);
    for i in 1..=n {
        let patch = if i == n { &wrong } else { &gold };
        c.add(&format!("q{i}"), HIGH, patch);
    }
    c.write();
    c
}

/// One SIGINT: the run stops, exiting 130 within 30 s.
fn interrupt_once(p: &mut Running) {
    let t = Instant::now();
    p.signal(libc::SIGINT);
    assert_eq!(p.wait(Duration::from_secs(60)), Some(exit::INTERRUPTED));
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "stopped in {:?}",
        t.elapsed()
    );
}

fn quick_expected(n: usize, i: usize) -> &'static str {
    if i == n {
        "unresolved"
    } else {
        "resolved"
    }
}

#[test]
fn kill_9_then_rerun_reuses_results_and_removes_leftovers() {
    if !docker_ready("kill_9_then_rerun_reuses_results_and_removes_leftovers") {
        return;
    }
    let _serial = serial();
    let c = hang_and_quick("fk", 3);
    let run = "k9";
    let extra = ["--max-workers", "2", "--timeout", "20"];
    let mut first = c.spawn(run, &extra, "first");
    wait_for(
        "the quick results and the hanging container",
        Duration::from_secs(240),
        || {
            // Exactly one: a quick test's container is removed after its
            // record is written, and on a loaded machine that can still be
            // under way.
            (1..=3).all(|i| c.has_record(run, &format!("q{i}")))
                && containers_of(None, run).len() == 1
        },
    );
    first.signal(libc::SIGKILL);
    assert_eq!(
        first.wait(Duration::from_secs(10)),
        None,
        "killed by a signal"
    );
    // What the killed process left: its container and its scratch.
    let left = containers_of(None, run);
    assert_eq!(
        left.len(),
        1,
        "the hanging test's container is left: {left:?}"
    );
    assert!(
        std::fs::read_dir(c.tmp()).unwrap().count() > 0,
        "scratch left"
    );
    let before: Vec<String> = (1..=3)
        .map(|i| c.file(run, &format!("q{i}"), "patchgrade.json"))
        .collect();

    let out = c.run(run, &extra, &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("left by an earlier process"), "{err}");
    assert_eq!(err.matches("(reused)").count(), 3, "{err}");
    for i in 1..=3 {
        let case = format!("q{i}");
        assert_eq!(
            c.file(run, &case, "patchgrade.json"),
            before[i - 1],
            "{case} reused as is"
        );
        assert_eq!(c.record(run, &case)["outcome"], quick_expected(3, i));
    }
    assert_eq!(c.record(run, "hang")["outcome"], "tests_timed_out");
    let summary = c.w.sb.summary("m", run);
    // Nothing counted twice: each id once, in its place.
    assert_eq!(summary["submitted_instances"], 4, "{summary}");
    assert_eq!(
        summary["resolved_ids"],
        serde_json::json!([c.id("q1"), c.id("q2")])
    );
    assert_eq!(summary["unresolved_ids"], serde_json::json!([c.id("q3")]));
    assert_eq!(summary["error_ids"], serde_json::json!([c.id("hang")]));
    let counted: u64 = summary["patchgrade"]["outcomes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(counted, 4, "{summary}");
    c.assert_nothing_left(None, run);
    c.remove_images();
}

#[test]
fn one_sigint_stops_running_evaluations_and_writes_what_finished() {
    if !docker_ready("one_sigint_stops_running_evaluations_and_writes_what_finished") {
        return;
    }
    let _serial = serial();
    let c = hang_and_quick("fi", 2);
    let run = "int1";
    let mut p = c.spawn(run, &["--max-workers", "2", "--timeout", "300"], "int1");
    wait_for(
        "q1, q2 and the hanging container",
        Duration::from_secs(240),
        || {
            c.has_record(run, "q1")
                && c.has_record(run, "q2")
                && !containers_of(None, run).is_empty()
        },
    );
    interrupt_once(&mut p);
    assert!(p
        .stderr()
        .contains("interrupted: stopping running evaluations"));
    assert_eq!(c.record(run, "q1")["outcome"], "resolved");
    assert_eq!(c.record(run, "q2")["outcome"], "unresolved");
    assert!(
        !c.has_record(run, "hang"),
        "nothing recorded for the stopped one"
    );
    let summary = c.w.sb.summary("m", run);
    assert_eq!(summary["completed_instances"], 2, "{summary}");
    c.assert_nothing_left(None, run);
    c.remove_images();
}

#[test]
fn a_second_sigint_exits_at_once_and_removes_containers() {
    if !docker_ready("a_second_sigint_exits_at_once_and_removes_containers") {
        return;
    }
    let _serial = serial();
    let c = hang_and_quick("fj", 1);
    let run = "int2";
    let mut p = c.spawn(run, &["--max-workers", "2", "--timeout", "300"], "int2");
    wait_for(
        "q1 and the hanging container",
        Duration::from_secs(240),
        || c.has_record(run, "q1") && !containers_of(None, run).is_empty(),
    );
    let t = Instant::now();
    p.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(50));
    p.signal(libc::SIGINT);
    assert_eq!(p.wait(Duration::from_secs(30)), Some(exit::INTERRUPTED));
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "exited in {:?}",
        t.elapsed()
    );
    assert_eq!(c.record(run, "q1")["outcome"], "unresolved");
    assert!(!c.has_record(run, "hang"));
    c.assert_nothing_left(None, run);
    c.remove_images();
}

#[test]
fn a_second_process_on_the_same_run_id_is_refused() {
    if !docker_ready("a_second_process_on_the_same_run_id_is_refused") {
        return;
    }
    let _serial = serial();
    let c = hang_and_quick("fl", 2);
    let run = "locked";
    let extra = ["--max-workers", "2", "--timeout", "300"];
    let mut first = c.spawn(run, &extra, "first");
    wait_for(
        "q1, q2 and the hanging container",
        Duration::from_secs(240),
        || {
            c.has_record(run, "q1")
                && c.has_record(run, "q2")
                && !containers_of(None, run).is_empty()
        },
    );
    let q1 = c.file(run, "q1", "patchgrade.json");
    let second = c.run(run, &extra, &[]);
    assert_eq!(
        second.status.code(),
        Some(exit::BAD_INPUT),
        "documented exit for a run in use"
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("is in use by another patchgrade process")
            && err.contains(&format!("(pid {})", first.pid()))
            && err.contains(&format!("run_evaluation/{run}")),
        "{err}"
    );
    // The first goes on undisturbed.
    assert_eq!(
        first.child.try_wait().unwrap(),
        None,
        "the first still runs"
    );
    assert_eq!(containers_of(None, run).len(), 1);
    first.signal(libc::SIGINT);
    assert_eq!(first.wait(Duration::from_secs(60)), Some(exit::INTERRUPTED));
    assert_eq!(c.file(run, "q1", "patchgrade.json"), q1);
    assert_eq!(c.record(run, "q2")["outcome"], "unresolved");
    // Released with the process: a third run (q1 alone) takes it.
    let q1_pred = prediction(&c.id("q1"), "m", Some(&c.w.gold));
    c.w.sb.write("preds.jsonl", &jsonl(&[q1_pred]));
    let third = c.run(run, &["--instance-ids", &c.id("q1")], &[]);
    assert_eq!(third.status.code(), Some(exit::OK));
    assert!(String::from_utf8_lossy(&third.stderr).contains("(reused)"));
    c.assert_nothing_left(None, run);
    c.remove_images();
}

#[test]
fn a_test_sleeping_past_the_timeout_ignoring_sigterm_times_out() {
    if !docker_ready("a_test_sleeping_past_the_timeout_ignoring_sigterm_times_out") {
        return;
    }
    let _serial = serial();
    let c = hang_and_quick("ft", 2);
    let run = "timeout";
    let t = Instant::now();
    let out = c.run(run, &["--max-workers", "2", "--timeout", "8"], &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(
        t.elapsed() < Duration::from_secs(120),
        "took {:?}",
        t.elapsed()
    );
    let rec = c.record(run, "hang");
    assert_eq!(rec["outcome"], "tests_timed_out", "{rec}");
    assert_eq!(rec["detail"], "exceeded --timeout 8s");
    assert_eq!(c.record(run, "q1")["outcome"], "resolved");
    assert_eq!(c.record(run, "q2")["outcome"], "unresolved");
    c.assert_nothing_left(None, run);
    c.remove_images();
}

/// Whether a process whose command line is exactly `cmd` runs on the host
/// (a container's processes are the host's too).
fn host_runs(cmd: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-fx", cmd])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn one_sigint_stops_an_image_build() {
    if !docker_ready("one_sigint_stops_an_image_build") {
        return;
    }
    let _serial = serial();
    // The instance image's setup sleeps: its build would take 10 minutes.
    let sleep = "sleep 637";
    let spec = UNITTEST_SPEC.replace(
        "    test_cmd:",
        &format!("    pre_install: [{sleep}]\n    test_cmd:"),
    );
    let mut c = Corpus::with_spec("fb", &spec);
    let gold = c.w.gold.clone();
    c.add("slow", HIGH, &gold);
    c.write();
    let run = "intb";
    let mut p = c.spawn(run, &["--max-workers", "1"], "intb");
    wait_for(
        "the instance build's setup",
        Duration::from_secs(300),
        || host_runs(sleep),
    );
    interrupt_once(&mut p);
    let err = p.stderr();
    assert!(
        err.contains(&format!("{}: stopped, nothing recorded", c.id("slow"))),
        "{err}"
    );
    assert!(!c.has_record(run, "slow"));
    // The engine stopped the build: its setup no longer runs, and no image
    // of the instance was tagged.
    wait_for("the build's setup to stop", Duration::from_secs(30), || {
        !host_runs(sleep)
    });
    let tagged = docker_out(None, &["images", "--format", "{{.Repository}}"]);
    assert!(!tagged.contains(&c.id("slow")), "{tagged}");
    c.assert_nothing_left(None, run);
    c.remove_images();
}
