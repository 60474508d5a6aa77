//! The judge client against a local OpenAI-compatible server started here:
//! a TcpListener on 127.0.0.1 that answers each request with the next reply
//! of its script (tests/fixtures/review/judge/, chat-completions JSON in the
//! OpenAI format), optionally after a delay. No real model runs.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use patchgrade::review::judge::client::{CallError, Client};
use patchgrade::review::judge::rubric::Rubric;
use patchgrade::review::judge::{
    judge, JudgeConfig, JudgeError, JudgeInput, Mode, Order, SampleOutcome,
};

/// One scripted answer.
#[derive(Clone)]
struct Answer {
    status: u16,
    body: String,
    delay: Duration,
    headers: Vec<(&'static str, &'static str)>,
}

fn ok(fixture: &str) -> Answer {
    answer(200, fixture)
}

fn answer(status: u16, fixture: &str) -> Answer {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/review/judge")
        .join(fixture);
    Answer {
        status,
        body: std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        delay: Duration::ZERO,
        headers: Vec::new(),
    }
}

/// What the server received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    authorization: Option<String>,
    body: serde_json::Value,
}

struct Server {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    fn start(script: Vec<Answer>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(script.into_iter()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let rec = received.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let script = script.clone();
                let rec = rec.clone();
                // One thread per connection: a delayed answer must not hold
                // up the client's retry on a new connection.
                thread::spawn(move || serve(conn, &script, &rec));
            }
        });
        Server { url, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn serve(conn: TcpStream, script: &Mutex<std::vec::IntoIter<Answer>>, rec: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let Some(crate::common::HttpRequest {
        line: request_line,
        authorization,
        body,
    }) = crate::common::read_http_request(&mut reader)
    else {
        return;
    };
    rec.lock().unwrap().push(Received {
        path: request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string(),
        authorization,
        body: serde_json::from_slice(&body).unwrap(),
    });
    let a = script.lock().unwrap().next().unwrap_or(Answer {
        status: 500,
        body: "{\"error\": \"the test script has no more answers\"}".into(),
        delay: Duration::ZERO,
        headers: Vec::new(),
    });
    thread::sleep(a.delay);
    let mut out = conn;
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (k, v) in &a.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    // The client may have given up (timeout): a failed write is expected.
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(a.body.as_bytes());
}

fn config(server: &Server) -> JudgeConfig {
    let mut c = JudgeConfig::new(&server.url, "judge-model");
    c.timeout = Duration::from_secs(5);
    c.backoff = Duration::from_millis(10);
    c.retries = 2;
    c
}

const ISSUE: &str = "calc.add(None, 1) raises TypeError instead of returning 1.";
const CANDIDATE: &str = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,4 @@\n def add(a, b):\n+    if a is None:\n+        return b\n     return a + b\n";
const GOLD: &str = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return (a or 0) + b\n";

fn input(gold: Option<&'static str>) -> JudgeInput<'static> {
    JudgeInput {
        instance_id: "calc-1",
        issue: ISSUE,
        candidate: CANDIDATE,
        gold,
    }
}

fn scores(o: &SampleOutcome) -> Vec<u8> {
    match o {
        SampleOutcome::Scored { scores, .. } => scores.values().copied().collect(),
        other => panic!("not scored: {other:?}"),
    }
}

#[test]
fn good_reply_with_key_usage_cost_and_cache() {
    let server = Server::start(vec![ok("pointwise-good.json")]);
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = config(&server);
    std::env::set_var("PG_TEST_JUDGE_KEY_1", "sk-test-secret-1");
    cfg.key_env = Some("PG_TEST_JUDGE_KEY_1".into());
    cfg.price_in = Some(2.0);
    cfg.price_out = Some(8.0);
    cfg.temperature = 0.3;
    cfg.cache_dir = Some(cache.path().to_path_buf());
    let client = Client::new(&cfg);
    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();

    assert_eq!(r.mode, Mode::Pointwise);
    assert_eq!(r.samples.len(), 1);
    // BTreeMap order: correctness_risk, idiom, readability, scope, tests.
    assert_eq!(scores(&r.samples[0].outcome), vec![4, 4, 5, 5, 1]);
    assert_eq!(r.criteria["tests"].mean, 1.0);
    assert_eq!(r.overall.unwrap().mean, 3.8);
    assert_eq!(
        (
            r.usage.requests,
            r.usage.prompt_tokens,
            r.usage.completion_tokens
        ),
        (1, 812, 164)
    );
    let cost = r.usage.cost_usd.unwrap();
    assert!(
        (cost - (812.0 * 2.0 + 164.0 * 8.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert!(r.truncation.is_empty());

    let got = server.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/v1/chat/completions");
    assert_eq!(
        got[0].authorization.as_deref(),
        Some("Bearer sk-test-secret-1")
    );
    assert_eq!(got[0].body["model"], "judge-model");
    assert_eq!(got[0].body["temperature"], 0.3);
    let user = got[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains(ISSUE) && user.contains(CANDIDATE));

    // The key is in no output: the result, the cache files.
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("sk-test-secret"));
    let mut files = 0;
    for d in std::fs::read_dir(cache.path()).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            assert!(!text.contains("sk-test-secret"));
            files += 1;
        }
    }
    assert_eq!(files, 1);

    // Again: served from the cache, no request (the script is empty).
    let again = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    assert!(again.samples[0].cached);
    assert_eq!(again.usage.requests, 0);
    assert_eq!(scores(&again.samples[0].outcome), vec![4, 4, 5, 5, 1]);
    assert_eq!(server.received().len(), 1);
    // Another temperature is another key: it asks (and gets the script's 500).
    cfg.temperature = 0.7;
    let other = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    assert!(!other.samples[0].cached);
    assert_eq!(other.failed, 1);
}

#[test]
fn malformed_reply_is_retried_then_reported() {
    let server = Server::start(vec![
        ok("pointwise-malformed.json"),
        ok("pointwise-good.json"),
        // Second judgement: never fits the schema.
        ok("pointwise-malformed.json"),
        ok("pointwise-out-of-range.json"),
        ok("pointwise-malformed.json"),
    ]);
    let cfg = config(&server);
    let client = Client::new(&cfg);
    let rubric = Rubric::default_rubric();
    let r = judge(&client, &cfg, &rubric, &input(None)).unwrap();
    let s = &r.samples[0];
    assert_eq!((s.malformed, s.requests), (1, 2));
    assert_eq!(scores(&s.outcome), vec![4, 4, 5, 5, 1]);
    // Tokens of the malformed reply count too.
    assert_eq!(r.usage.completion_tokens, 20 + 164);

    let r = judge(&client, &cfg, &rubric, &input(None)).unwrap();
    assert_eq!(r.failed, 1);
    assert!(r.overall.is_none());
    let s = &r.samples[0];
    assert_eq!((s.malformed, s.requests), (3, 3));
    match &s.outcome {
        SampleOutcome::Failed { error } => {
            assert!(
                error.contains("malformed judge reply") && error.contains("3 replies"),
                "{error}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 5);
}

#[test]
fn rate_limit_and_server_errors_are_retried_with_backoff() {
    let mut limited = answer(429, "rate-limited.json");
    limited.headers.push(("Retry-After", "1"));
    let server = Server::start(vec![
        limited,
        answer(503, "overloaded.json"),
        ok("pointwise-good.json"),
        // Then a client error: not retried.
        answer(400, "bad-request.json"),
    ]);
    let cfg = config(&server);
    let client = Client::new(&cfg);
    let t0 = Instant::now();
    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    // Retry-After: 1 was honoured.
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(r.samples[0].requests, 3);
    assert_eq!(r.usage.requests, 3);
    assert_eq!(scores(&r.samples[0].outcome), vec![4, 4, 5, 5, 1]);

    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    match &r.samples[0].outcome {
        SampleOutcome::Failed { error } => {
            assert!(error.contains("HTTP 400 after 1 attempt"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 4);

    // Retries run out: the last status is reported.
    let server = Server::start(vec![
        answer(500, "overloaded.json"),
        answer(502, "overloaded.json"),
        answer(503, "overloaded.json"),
    ]);
    let cfg = config(&server);
    let e = Client::new(&cfg).chat(&[]).unwrap_err();
    assert!(
        matches!(
            e,
            CallError::Http {
                status: 503,
                attempts: 3,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn timeouts_are_retried_then_reported() {
    let mut slow = ok("pointwise-good.json");
    slow.delay = Duration::from_secs(3);
    let server = Server::start(vec![
        slow.clone(),
        ok("pointwise-good-2.json"),
        slow.clone(),
        slow,
    ]);
    let mut cfg = config(&server);
    cfg.timeout = Duration::from_millis(400);
    cfg.retries = 1;
    let client = Client::new(&cfg);
    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    assert_eq!(r.samples[0].requests, 2);
    assert_eq!(scores(&r.samples[0].outcome), vec![2, 4, 5, 5, 3]);

    let t0 = Instant::now();
    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(None)).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    match &r.samples[0].outcome {
        SampleOutcome::Failed { error } => {
            assert!(error.contains("timed out after 2 attempt"), "{error}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pairwise_in_both_orders_with_samples() {
    // Sample 0: the model prefers gold in both orders (consistent); sample 1:
    // it prefers whatever is shown as B (position bias).
    let server = Server::start(vec![
        ok("pairwise-prefers-b.json"), // candidate first, sample 0: gold
        ok("pairwise-prefers-b.json"), // candidate first, sample 1: gold
        ok("pairwise-prefers-a.json"), // gold first, sample 0: gold
        ok("pairwise-prefers-b.json"), // gold first, sample 1: candidate
    ]);
    let mut cfg = config(&server);
    cfg.samples = 2;
    let client = Client::new(&cfg);
    let r = judge(&client, &cfg, &Rubric::default_rubric(), &input(Some(GOLD))).unwrap();
    assert_eq!(r.mode, Mode::Pairwise);
    let orders: Vec<(Option<Order>, u32)> = r.samples.iter().map(|s| (s.order, s.index)).collect();
    assert_eq!(
        orders,
        vec![
            (Some(Order::CandidateFirst), 0),
            (Some(Order::CandidateFirst), 1),
            (Some(Order::GoldFirst), 0),
            (Some(Order::GoldFirst), 1),
        ]
    );
    let o = r.overall.unwrap();
    assert_eq!((o.n, o.mean), (4, 0.25));
    assert!(o.sd > 0.0);
    assert_eq!(r.position_consistent, Some((1, 2)));
    // The prompts showed the patches in both orders.
    let got = server.received();
    let user = |i: usize| {
        got[i].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let a_of =
        |u: &str| u[u.find("## Patch A").unwrap()..u.find("## Patch B").unwrap()].to_string();
    assert!(a_of(&user(0)).contains("if a is None"));
    assert!(a_of(&user(2)).contains("(a or 0)"));
}

#[test]
fn a_missing_key_fails_before_any_request() {
    let server = Server::start(vec![ok("pointwise-good.json")]);
    let mut cfg = config(&server);
    cfg.key_env = Some("PG_TEST_JUDGE_KEY_UNSET".into());
    let e = judge(
        &Client::new(&cfg),
        &cfg,
        &Rubric::default_rubric(),
        &input(None),
    )
    .unwrap_err();
    assert!(matches!(
        &e,
        JudgeError::Call {
            source: CallError::MissingKey { .. },
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "calc-1: the judge's API key variable PG_TEST_JUDGE_KEY_UNSET is not set"
    );
    assert!(server.received().is_empty());
}
