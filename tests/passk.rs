//! End-to-end tests of `patchgrade report` (pass@k, pass^k, intervals,
//! slices, plots, paired comparison) and `patchgrade select` (best-of-n) on
//! the demo project with a generated multi-sample predictions file.

mod common;

use patchgrade::exit;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};

const DEMO: [&str; 5] = [
    "patchgrade__demo-calc-1",
    "patchgrade__demo-calc-2",
    "patchgrade__demo-calc-3",
    "patchgrade__demo-calc-4",
    "patchgrade__demo-calc-5",
];

/// An instance of a repository no spec knows: every sample of it ends in
/// environment_build_failed, which must be excluded from n.
const NO_SPEC: &str = "acme__nospec-1";

/// The demo (dataset, its project's fast-export stream) copied into a
/// sandbox, plus the NO_SPEC instance.
struct Demo {
    sb: Sandbox,
    /// instance id -> gold patch.
    gold: Vec<(String, String)>,
    /// instance id -> the demo agent's patch.
    candidate: Vec<(String, String)>,
}

fn demo() -> Demo {
    let sb = Sandbox::new();
    let src = project_root().join("instances/demo");
    let text = std::fs::read_to_string(src.join("dataset.jsonl")).unwrap();
    let mut rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let gold = rows
        .iter()
        .map(|r| {
            (
                r["instance_id"].as_str().unwrap().to_string(),
                r["patch"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut extra = rows[0].clone();
    extra["instance_id"] = json!(NO_SPEC);
    extra["repo"] = json!("acme/nospec");
    rows.push(extra);
    sb.write("demo/dataset.jsonl", &jsonl(&rows));
    let fi = "repos/patchgrade__demo-calc.fi";
    std::fs::create_dir_all(sb.path().join("demo/repos")).unwrap();
    std::fs::copy(src.join(fi), sb.path().join("demo").join(fi)).unwrap();
    let preds = std::fs::read_to_string(src.join("predictions.jsonl")).unwrap();
    let candidate = preds
        .lines()
        .map(|l| {
            let p: Value = serde_json::from_str(l).unwrap();
            (
                p["instance_id"].as_str().unwrap().to_string(),
                p["model_patch"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    Demo {
        sb,
        gold,
        candidate,
    }
}

fn lookup<'a>(list: &'a [(String, String)], id: &str) -> &'a str {
    &list.iter().find(|(i, _)| i == id).unwrap().1
}

impl Demo {
    /// A predictions file for `model`: per instance, samples made from the
    /// gold patch (`g`), the demo agent's candidate (`c`) or nothing (`e`).
    /// Each row keeps a `kind` field, which `select` must carry over.
    fn predictions(&self, file: &str, model: &str, plan: &[(&str, &str)]) {
        let mut rows = Vec::new();
        for (id, kinds) in plan {
            for k in kinds.chars() {
                // NO_SPEC borrows instance 1's patches.
                let src = if *id == NO_SPEC { DEMO[0] } else { id };
                let patch = match k {
                    'g' => lookup(&self.gold, src),
                    'c' => lookup(&self.candidate, src),
                    _ => "",
                };
                rows.push(json!({
                    "instance_id": id, "model_name_or_path": model,
                    "model_patch": patch, "kind": k.to_string(),
                }));
            }
        }
        self.sb.write(file, &jsonl(&rows));
    }

    fn run(&self, run_id: &str, preds: &str) -> String {
        let out = self.sb.run(&[
            "run",
            "--dataset",
            "demo/dataset.jsonl",
            "--predictions",
            preds,
            "--run-id",
            run_id,
            "--backend",
            "local",
            "--max-workers",
            "2",
        ]);
        // The NO_SPEC instance's environment cannot be built: the run
        // completes with results that are inconclusive for it (exit 4).
        let plan = std::fs::read_to_string(self.sb.path().join(preds)).unwrap();
        let want = if plan.contains(NO_SPEC) { 4 } else { 0 };
        assert_eq!(out.status.code(), Some(want));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if want == 4 {
            let end = stderr.lines().last().unwrap_or("");
            assert!(
                end.contains("completed, but some results are inconclusive")
                    && end.contains(&format!("{NO_SPEC}@0 (multi) environment_build_failed")),
                "{end}"
            );
        }
        stderr
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.sb.run(args);
        assert_eq!(out.status.code(), Some(exit::OK));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn run_dir(&self, run_id: &str) -> PathBuf {
        self.sb.path().join("logs/run_evaluation").join(run_id)
    }
}

/// Demo agent outcomes: 1 resolved, 2 and 3 unresolved, 4 does not apply,
/// 5 empty; gold resolves all five.
const PLAN: [(&str, &str); 6] = [
    ("patchgrade__demo-calc-1", "cgec"), // n 4, c 3
    ("patchgrade__demo-calc-2", "cgee"), // n 4, c 1
    ("patchgrade__demo-calc-3", "ccge"), // n 4, c 1
    ("patchgrade__demo-calc-4", "cgge"), // n 4, c 2
    ("patchgrade__demo-calc-5", "ege"),  // n 3, c 1
    (NO_SPEC, "gc"),                     // environment_build_failed: excluded
];

fn choose(n: u64, k: u64) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// pass@k = 1 - C(n-c, k)/C(n, k), pass^k = C(c, k)/C(n, k), averaged.
fn hand(nc: &[(u64, u64)], k: u64) -> (f64, f64) {
    let m = nc.len() as f64;
    let at = nc
        .iter()
        .map(|&(n, c)| 1.0 - choose(n - c, k) / choose(n, k))
        .sum::<f64>()
        / m;
    let hat = nc
        .iter()
        .map(|&(n, c)| choose(c, k) / choose(n, k))
        .sum::<f64>()
        / m;
    (at, hat)
}

const NC: [(u64, u64); 5] = [(4, 3), (4, 1), (4, 1), (4, 2), (3, 1)];

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("not a number: {a}"));
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

/// Starts with `<svg` or `<?xml`, ends with `</svg>`, and has these texts.
fn check_svg(path: &Path, texts: &[&str]) {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = svg.trim();
    assert!(
        t.starts_with("<svg") || t.starts_with("<?xml"),
        "{}",
        path.display()
    );
    assert!(t.ends_with("</svg>"), "{}", path.display());
    assert_eq!(
        svg.matches("<text").count(),
        svg.matches("</text>").count(),
        "balanced text elements"
    );
    for x in texts {
        assert!(svg.contains(x), "{} lacks {x}", path.display());
    }
}

#[test]
fn report_gives_hand_computed_pass_at_k_with_intervals_and_plots() {
    let d = demo();
    d.predictions("multi.jsonl", "multi", &PLAN);
    let stderr = d.run("m", "multi.jsonl");
    // The run prints the pass@k table when a model has samples.
    assert!(stderr.contains("pass@k (95% bootstrap"), "{stderr}");
    assert!(stderr.contains("pass@2"), "{stderr}");

    let rep = d.json(&["report", "logs/run_evaluation/m", "--k", "1,2,3", "--json"]);
    let m = &rep["models"]["multi"];
    assert_eq!(rep["ks"], json!([1, 2, 3]));
    assert_eq!(m["instances"], 5);
    assert_eq!(m["samples"], 19);
    // Instance rows: n and c as planned (empty patches are failures).
    let rows: Vec<(u64, u64)> = m["per_instance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["n"].as_u64().unwrap(), r["c"].as_u64().unwrap()))
        .collect();
    assert_eq!(rows, NC);
    for k in 1..=3 {
        let (at, hat) = hand(&NC, k);
        for (key, want) in [(format!("pass@{k}"), at), (format!("pass^{k}"), hat)] {
            let x = &m["metrics"][&key];
            close(&x["value"], want);
            let (lo, hi) = (
                x["ci"]["low"].as_f64().unwrap(),
                x["ci"]["high"].as_f64().unwrap(),
            );
            assert!(lo <= want + 1e-12 && want <= hi + 1e-12, "{key}: {x}");
            assert!(
                hi > lo,
                "{key}: instances differ, so the interval has width"
            );
            // No audit verdicts: clean equals plain.
            close(&m["clean"][&key]["value"], want);
        }
    }
    // The unknown-spec instance says nothing about the model: excluded.
    assert_eq!(m["excluded_instances"], json!([NO_SPEC]));
    let ex = m["excluded_samples"].as_array().unwrap();
    assert_eq!(ex.len(), 2);
    assert!(ex
        .iter()
        .all(|e| e["outcome"] == "environment_build_failed"));
    // Slices: by repo from the dataset that run.json names, by gold files.
    let repo = &m["slices"]["repo"]["patchgrade/demo-calc"];
    assert_eq!(repo["instances"], 5);
    close(&repo["metrics"]["pass@1"]["value"], hand(&NC, 1).0);
    assert_eq!(m["slices"]["gold_files"]["1"]["instances"], 5);

    // k = 4 > n of instance 5: not reported, and the table says why.
    let rep4 = d.json(&["report", "logs/run_evaluation/m", "--k", "4", "--json"]);
    let p4 = &rep4["models"]["multi"]["metrics"]["pass@4"];
    assert!(p4["value"].is_null() && p4["ci"].is_null(), "{p4}");
    assert_eq!(p4["short_instances"], json!(["patchgrade__demo-calc-5"]));
    assert!(p4["note"].as_str().unwrap().contains("n < k"));
    let out = d.sb.run(&["report", "logs/run_evaluation/m", "--k", "1,4"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("pass@4  not reported"), "{table}");
    assert!(table.contains("patchgrade__demo-calc-5"), "{table}");
    assert!(table.contains("2 samples excluded"), "{table}");
    let p1 = format!("{:.3}", hand(&NC, 1).0);
    assert!(table.contains(&format!("pass@1  {p1}")), "{table}");

    // Markdown with one plot per headline.
    let out_dir = d.run_dir("m").join("passk");
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("](multi.passk.svg)") && md.contains("](multi.repo.svg)"),
        "{md}"
    );
    assert!(md.contains(&format!("| pass@1 | {p1} |")), "{md}");
    check_svg(
        &out_dir.join("multi.passk.svg"),
        &["pass@k", "pass^k", "<polygon"],
    );
    check_svg(
        &out_dir.join("multi.repo.svg"),
        &["patchgrade/demo-calc (5)"],
    );

    // --by a metadata field joined on `id`.
    d.sb.write(
        "meta.jsonl",
        &jsonl(&[
            json!({"id": "patchgrade__demo-calc-1", "difficulty": "easy"}),
            json!({"id": "patchgrade__demo-calc-2", "difficulty": "hard"}),
        ]),
    );
    let rep = d.json(&[
        "report",
        "logs/run_evaluation/m",
        "--k",
        "1",
        "--by",
        "difficulty",
        "--metadata",
        "meta.jsonl",
        "--json",
        "--out",
        "md",
    ]);
    let by = &rep["models"]["multi"]["slices"]["difficulty"];
    close(&by["easy"]["metrics"]["pass@1"]["value"], 0.75);
    close(&by["hard"]["metrics"]["pass@1"]["value"], 0.25);
    assert_eq!(by["(missing)"]["instances"], 3);
    assert!(d.sb.path().join("md/report.md").is_file());

    // A bad k is bad input.
    assert_eq!(
        d.sb.run(&["report", "logs/run_evaluation/m", "--k", "0"])
            .status
            .code(),
        Some(exit::BAD_INPUT)
    );
}

#[test]
fn compare_and_clean_variants() {
    let d = demo();
    d.predictions("a.jsonl", "multi", &PLAN[..5]);
    // Run B: the demo agent alone, three samples each (identical patches are
    // evaluated once): c = n for instance 1, else 0.
    let b_plan: Vec<(&str, &str)> = DEMO.iter().map(|id| (*id, "ccc")).collect();
    d.predictions("b.jsonl", "agent", &b_plan);
    d.run("a", "a.jsonl");
    d.run("b", "b.jsonl");
    let cmp = d.json(&[
        "report",
        "--compare",
        "logs/run_evaluation/a",
        "logs/run_evaluation/b",
        "--k",
        "1,3",
        "--json",
    ]);
    let p = &cmp["compare"]["pairs"][0];
    assert_eq!(
        (p["model_a"].as_str(), p["model_b"].as_str()),
        (Some("multi"), Some("agent"))
    );
    assert_eq!(p["instances"], 5);
    let b_nc = [(3, 3), (3, 0), (3, 0), (3, 0), (3, 0)];
    for k in [1, 3] {
        let key = format!("pass@{k}");
        let x = &p["metrics"][&key];
        let want = hand(&NC, k).0 - hand(&b_nc, k).0;
        close(&x["diff"], want);
        assert!(x["low"].as_f64().unwrap() <= want && want <= x["high"].as_f64().unwrap());
    }
    // Comparable runs must cover k: B has n = 3 < 4.
    let cmp = d.json(&[
        "report",
        "--compare",
        "logs/run_evaluation/a",
        "logs/run_evaluation/b",
        "--k",
        "4",
        "--json",
    ]);
    let x = &cmp["compare"]["pairs"][0]["metrics"]["pass@4"];
    assert!(
        x["diff"].is_null() && x["note"].as_str().unwrap().contains("n < k"),
        "{x}"
    );

    // A suspect audit verdict on a resolved sample (instance 1's gold
    // sample, 1) makes it a failure in the clean variants only.
    let rec_path = d
        .run_dir("a")
        .join("multi/patchgrade__demo-calc-1@1/patchgrade.json");
    let mut rec: Value =
        serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(rec["outcome"], "resolved");
    rec["audit"] = json!({"verdict": "suspect", "reasons": ["test"]});
    std::fs::write(&rec_path, rec.to_string()).unwrap();
    let rep = d.json(&["report", "logs/run_evaluation/a", "--k", "1,2", "--json"]);
    let m = &rep["models"]["multi"];
    assert_eq!(m["suspect_passes"], 1);
    close(&m["metrics"]["pass@1"]["value"], hand(&NC, 1).0);
    let mut clean_nc = NC;
    clean_nc[0].1 -= 1;
    close(&m["clean"]["pass@1"]["value"], hand(&clean_nc, 1).0);
    close(&m["clean"]["pass@2"]["value"], hand(&clean_nc, 2).0);
    // The plot then shows the clean curve too.
    check_svg(
        &d.run_dir("a").join("passk/multi.passk.svg"),
        &["clean pass@k"],
    );
}

#[test]
fn select_prefers_samples_that_keep_existing_tests_passing() {
    let d = demo();
    d.predictions("multi.jsonl", "multi", &PLAN[..5]);
    d.run("m", "multi.jsonl");
    let rep = d.json(&[
        "select",
        "logs/run_evaluation/m",
        "--predictions",
        "multi.jsonl",
        "--output",
        "chosen.jsonl",
        "--backend",
        "local",
        "--max-workers",
        "2",
        "--json",
    ]);
    let m = &rep["models"]["multi"];
    let sel = m["selection"]["value"].as_f64().unwrap();
    let mean = m["mean_pass@1"]["value"].as_f64().unwrap();
    close(&m["mean_pass@1"]["value"], hand(&NC, 1).0);
    close(&m["oracle_pass@n"]["value"], 1.0);
    assert!(sel >= mean, "selection {sel} < mean pass@1 {mean}");

    // The chosen rows keep their original fields, one per instance.
    let text = std::fs::read_to_string(d.sb.path().join("chosen.jsonl")).unwrap();
    let chosen: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(chosen.len(), 5);
    let kind = |id: &str| {
        let row = chosen.iter().find(|r| r["instance_id"] == id).unwrap();
        assert_eq!(row["model_name_or_path"], "multi");
        row["kind"].as_str().unwrap().to_string()
    };
    // 3: the candidate breaks an existing test that passes at base; gold
    // does not. 4: the candidate does not apply. 5: the alternative is empty.
    for id in &DEMO[2..] {
        assert_eq!(kind(id), "g", "{id}");
        assert_eq!(
            chosen.iter().find(|r| r["instance_id"] == *id).unwrap()["model_patch"],
            lookup(&d.gold, id)
        );
    }
    // 1: candidate and gold both resolve and agree; either is right.
    assert_ne!(kind(DEMO[0]), "e");
    let c3 = m["choices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["instance_id"] == DEMO[2])
        .unwrap();
    assert_eq!(c3["base_passing"], 1);
    let cand0 = &c3["candidates"][0];
    assert_eq!(
        (cand0["still_passing"].as_u64(), cand0["score"].as_f64()),
        (Some(0), Some(0.0))
    );
    // The selection's own runs never saw the hidden tests.
    let eval_sh = std::fs::read_to_string(
        d.sb.path()
            .join("logs/run_evaluation/m.select/multi/patchgrade__demo-calc-3@2/eval.sh"),
    )
    .unwrap();
    assert!(eval_sh.contains(": no test patch"), "{eval_sh}");
    assert!(!eval_sh.contains("test_mean_empty"), "{eval_sh}");
    assert!(d
        .sb
        .path()
        .join("logs/run_evaluation/m.select/select.json")
        .is_file());
}
