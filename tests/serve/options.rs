//! Per-request options over HTTP: checked against the service's limits,
//! graded with, and part of what an evaluation is.

use super::*;

#[test]
fn per_request_options_are_checked_graded_and_keyed() {
    let Shapes { sb, gold, .. } = shapes();
    let srv = Server::start(&sb, &["--max-workers", "2", "--timeout", "120"]);
    let mut over = item("s-gold", &gold);
    over["timeout_seconds"] = json!(121);
    let a = srv.submit(&over);
    assert_eq!(a.status, 422, "{}", a.body);
    assert_eq!(
        a.error(),
        "evaluation 0 (s-gold): timeout_seconds 121 is over the service's limit of 120 s (--timeout)"
    );
    let mut bad = item("s-gold", &gold);
    bad["audit"] = json!("no");
    let a = srv.submit(&bad);
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.error().contains("audit"), "{}", a.body);

    // The service's own settings spelt out: the same evaluation.
    let plain = id(&srv.submit(&item("s-gold", &gold)));
    let mut spelt = item("s-gold", &gold);
    spelt["timeout_seconds"] = json!(120);
    spelt["audit"] = json!(true);
    assert_eq!(id(&srv.submit(&spelt)), plain);
    // No audit: another evaluation, graded without one.
    let mut unaudited = item("s-gold", &gold);
    unaudited["audit"] = json!(false);
    let first = srv.submit(&unaudited);
    assert_eq!(first.status, 202, "{}", first.body);
    let quiet = id(&first);
    assert_ne!(quiet, plain);
    // A short timeout: a slow candidate is stopped at it.
    let mut short = item("s-gold", &slow_patch(60));
    short["timeout_seconds"] = json!(3);
    let started = Instant::now();
    let timed = srv.wait(&id(&srv.submit(&short)));
    assert_eq!(timed["outcome"], "tests_timed_out", "{timed}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "stopped at 3 s"
    );

    let plain = srv.wait(&plain);
    let quiet = srv.wait(&quiet);
    assert_eq!(plain["outcome"], "resolved", "{plain}");
    assert_eq!(quiet["outcome"], "resolved", "{quiet}");
    assert!(plain["record"]["audit"].is_object(), "{plain}");
    assert!(quiet["record"].get("audit").is_none(), "{quiet}");
    assert_ne!(plain["sample_id"], quiet["sample_id"]);
    // Again once finished: the same evaluation.
    let again = srv.submit(&unaudited);
    assert_eq!(
        (again.status, id(&again)),
        (200, quiet["id"].as_str().unwrap().to_string())
    );
    // Under one named sample, other options are another evaluation of the
    // same folder: refused.
    let mut named = item("s-gold", &gold);
    named["sample_id"] = json!("k");
    srv.wait(&id(&srv.submit(&named)));
    named["audit"] = json!(false);
    let c = srv.submit(&named);
    assert_eq!(c.status, 409, "{}", c.body);
}
