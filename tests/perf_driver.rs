//! The in-container timing driver (harness-scripts/perf/driver.py), run on
//! the host with real processes: what it measures, the interleaving, the
//! warm-ups, the build step, the symlink swap and the timeout.
//!
//! It runs under `python3`, and under every interpreter named in
//! `PATCHGRADE_TEST_PYTHONS` (colon-separated; e.g. a Python 3.6, the oldest
//! the driver supports).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn driver() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("harness-scripts/perf/driver.py")
}

fn pythons() -> Vec<String> {
    let mut v = vec!["python3".to_string()];
    if let Ok(list) = std::env::var("PATCHGRADE_TEST_PYTHONS") {
        v.extend(list.split(':').filter(|s| !s.is_empty()).map(String::from));
    }
    v
}

fn run_driver(python: &str, plan: &Value, dir: &Path) -> Vec<Value> {
    let path = dir.join("plan.json");
    std::fs::write(&path, serde_json::to_vec(plan).unwrap()).unwrap();
    let out = Command::new(python)
        .arg(driver())
        .arg(&path)
        .output()
        .expect("run the driver");
    assert!(
        out.status.success(),
        "{python}: driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// A tree whose `work.py` burns `spin` seconds of CPU, holds `mb` MiB, and
/// appends its variant name and the shared env var to `../trace.txt`.
fn tree(root: &Path, name: &str, spin: f64, mb: usize) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("name.txt"), name).unwrap();
    std::fs::write(
        dir.join("work.py"),
        format!(
            "import os, time\n\
             block = bytearray({mb} * 1024 * 1024)\n\
             for i in range(0, len(block), 4096): block[i] = 1\n\
             end = time.process_time() + {spin}\n\
             while time.process_time() < end: pass\n\
             with open('name.txt') as f: me = f.read()\n\
             with open(os.path.join('{root}', 'trace.txt'), 'a') as f:\n\
             \x20   f.write('%s %s %s\\n' % (me, os.environ.get('PG_SAME'), os.path.exists('built')))\n",
            root = root.display()
        ),
    )
    .unwrap();
    dir
}

fn runs(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["type"] == "run").collect()
}

#[test]
fn driver_measures_interleaved_runs_of_each_variant() {
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let fast = tree(root, "fast", 0.05, 4);
        let slow = tree(root, "slow", 0.20, 80);
        let plan = json!({
            "variants": [
                {"name": "fast", "dir": fast},
                {"name": "slow", "dir": slow},
            ],
            "workload": [{"name": "work", "argv": [&python, "work.py"]}],
            "repeat": 6, "warmup": 2, "seed": 11, "timeout": 60,
            "env": {"PG_SAME": "same-for-all"},
            "log_dir": root.join("logs"),
        });
        let lines = run_driver(&python, &plan, root);

        let fp = &lines[0];
        assert_eq!(fp["type"], "fingerprint", "{python}");
        assert!(fp["cpu_model"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(fp["cores"].as_u64().unwrap() >= 1);
        assert!(fp["kernel"].as_str().unwrap().starts_with("Linux "));
        assert_eq!(fp["load_before"].as_array().unwrap().len(), 3);
        let instr = fp["instructions"].as_str().unwrap();
        assert!(
            instr == "available" || instr.starts_with("unavailable: "),
            "{instr}"
        );
        let end = lines.last().unwrap();
        assert_eq!(end["type"], "end");
        assert_eq!(end["load_after"].as_array().unwrap().len(), 3);

        // 6 rounds x 2 variants, and 2 warm-ups per variant before them.
        let rs = runs(&lines);
        assert_eq!(rs.len(), 12, "{python}");
        let warm: Vec<&Value> = lines.iter().filter(|l| l["type"] == "warmup").collect();
        assert_eq!(warm.len(), 4);
        let first_run = lines.iter().position(|l| l["type"] == "run").unwrap();
        let last_warm = lines.iter().rposition(|l| l["type"] == "warmup").unwrap();
        assert!(last_warm < first_run, "warm-ups come first");
        // Each round runs each variant once.
        let mut per_round: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for r in &rs {
            per_round
                .entry(r["round"].as_u64().unwrap())
                .or_default()
                .push(r["variant"].as_str().unwrap().to_string());
            assert_eq!(r["exit_code"], 0, "{r}");
            assert_eq!(r["timed_out"], false);
        }
        assert_eq!(per_round.len(), 6);
        let orders: Vec<&Vec<String>> = per_round.values().collect();
        for o in &orders {
            let mut s = (*o).clone();
            s.sort();
            assert_eq!(s, ["fast", "slow"]);
        }
        // Shuffled: with seed 11 not every round starts with the same variant.
        assert!(
            orders.iter().any(|o| o[0] == "fast") && orders.iter().any(|o| o[0] == "slow"),
            "{orders:?}"
        );

        // The trace (written by the runs themselves, warm-ups included) shows
        // every process saw the same environment; the last 12 entries are the
        // measured runs, in the printed order.
        let trace = std::fs::read_to_string(root.join("trace.txt")).unwrap();
        let trace: Vec<&str> = trace.lines().collect();
        assert_eq!(trace.len(), 4 + 12);
        for (t, r) in trace[4..].iter().zip(&rs) {
            assert_eq!(
                *t,
                format!("{} same-for-all False", r["variant"].as_str().unwrap())
            );
        }

        // What rusage measured matches what the processes did.
        let med = |v: &str, key: &str| {
            let mut xs: Vec<f64> = rs
                .iter()
                .filter(|r| r["variant"] == v)
                .map(|r| r[key].as_f64().unwrap())
                .collect();
            xs.sort_by(f64::total_cmp);
            (xs[2] + xs[3]) / 2.0
        };
        let (cpu_fast, cpu_slow) = (med("fast", "cpu_s"), med("slow", "cpu_s"));
        assert!(
            cpu_fast >= 0.05 && cpu_slow >= 0.20,
            "{cpu_fast} {cpu_slow}"
        );
        assert!(cpu_slow > cpu_fast + 0.1);
        assert!(med("slow", "wall_s") >= cpu_slow * 0.9);
        let (rss_fast, rss_slow) = (med("fast", "max_rss_kb"), med("slow", "max_rss_kb"));
        assert!(
            rss_slow - rss_fast > 60.0 * 1024.0,
            "peak RSS {rss_fast} KiB vs {rss_slow} KiB"
        );
    }
}

#[test]
fn driver_builds_each_variant_through_the_link_and_drops_broken_ones() {
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let trees = root.join("trees");
        let a = tree(&trees, "a", 0.0, 1);
        let b = tree(&trees, "b", 0.0, 1);
        let broken = tree(&trees, "broken", 0.0, 1);
        let link = root.join("testbed");
        // The build step creates `built` in whatever tree the link points at,
        // and fails in the tree named "broken".
        let build = "test \"$(cat name.txt)\" != broken && touch built";
        let plan = json!({
            "variants": [
                {"name": "a", "dir": a},
                {"name": "b", "dir": b},
                {"name": "broken", "dir": broken},
            ],
            "link": link,
            "build": ["bash", "-c", build],
            "workload": [
                {"name": "work", "argv": [&python, "work.py"]},
                // Its own short limit; the rest keep the plan's long one, so a
                // slow start on a busy machine never reads as a timeout.
                {"name": "sleepy", "argv": [&python, "-c", "import time; time.sleep(60)"], "timeout": 1},
            ],
            "repeat": 2, "warmup": 0, "seed": 1, "timeout": 120,
            "log_dir": root.join("logs"),
        });
        let lines = run_driver(&python, &plan, root);
        let builds: Vec<&Value> = lines.iter().filter(|l| l["type"] == "build").collect();
        assert_eq!(builds.len(), 3);
        for bl in &builds {
            let ok = bl["variant"] != "broken";
            assert_eq!(bl["ok"], ok, "{bl}");
        }
        assert!(a.join("built").exists() && b.join("built").exists());
        assert!(!broken.join("built").exists());
        // The link is a symlink, left pointing at a variant's tree.
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());

        let rs = runs(&lines);
        // 2 rounds x 2 live variants x 2 items; the broken variant never runs.
        assert_eq!(rs.len(), 8, "{python}");
        assert!(rs.iter().all(|r| r["variant"] != "broken"));
        for r in &rs {
            if r["item"] == "sleepy" {
                assert_eq!(r["timed_out"], true, "{r}");
                assert_eq!(r["signal"], 9);
                assert!(r["wall_s"].as_f64().unwrap() < 30.0);
            } else {
                assert_eq!(r["exit_code"], 0, "{r}");
            }
        }
        // Runs through the link ran in the right tree, after its build.
        let trace = std::fs::read_to_string(trees.join("trace.txt")).unwrap();
        let names: Vec<String> = rs
            .iter()
            .filter(|r| r["item"] == "work")
            .map(|r| format!("{} None True", r["variant"].as_str().unwrap()))
            .collect();
        assert_eq!(trace.lines().collect::<Vec<_>>(), names);
    }
}

#[test]
fn driver_reports_a_failing_run_with_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let d = root.join("v");
    std::fs::create_dir_all(&d).unwrap();
    let plan = json!({
        "variants": [{"name": "v", "dir": d}],
        "workload": [
            {"name": "fails", "argv": ["python3", "-c", "import sys; print('boom here'); sys.exit(3)"]},
            {"name": "missing", "argv": ["/nonexistent/program"]},
        ],
        "repeat": 1, "warmup": 0, "log_dir": root.join("logs"),
    });
    let lines = run_driver("python3", &plan, root);
    let rs = runs(&lines);
    assert_eq!(rs[0]["exit_code"], 3);
    assert!(rs[0]["output_tail"].as_str().unwrap().contains("boom here"));
    assert_eq!(rs[1]["exit_code"], 127);
    assert!(rs[1]["output_tail"]
        .as_str()
        .unwrap()
        .contains("cannot run"));
}

#[test]
fn driver_reads_the_workloads_own_mean_line() {
    // SWE-fficiency's workloads end with `print("Mean:", ...)`; the first
    // such figure becomes reported_s. No figure, or one that is not a
    // finite number, gives none (never a made-up value).
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dir = root.join("v");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("swf.py"),
            "import statistics, timeit\n\
             runtimes = timeit.repeat(lambda: sum(range(1000)), number=10, repeat=5)\n\
             print('noise line')\n\
             print('Mean:', statistics.mean(runtimes))\n\
             print('Std Dev:', statistics.stdev(runtimes))\n\
             print('Mean:', 99)\n",
        )
        .unwrap();
        std::fs::write(dir.join("none.py"), "print('no figure')\n").unwrap();
        std::fs::write(dir.join("nan.py"), "print('Mean:', float('nan'))\n").unwrap();
        let plan = json!({
            "variants": [{"name": "v", "dir": dir}],
            "workload": [
                {"name": "swf", "argv": [&python, "swf.py"]},
                {"name": "none", "argv": [&python, "none.py"]},
                {"name": "nan", "argv": [&python, "nan.py"]},
            ],
            "repeat": 2, "warmup": 1, "seed": 1, "timeout": 60,
            "log_dir": root.join("logs"),
        });
        let lines = run_driver(&python, &plan, root);
        let of = |item: &str| -> Vec<&Value> {
            lines
                .iter()
                .filter(|l| (l["type"] == "run" || l["type"] == "warmup") && l["item"] == item)
                .collect()
        };
        for r in of("swf") {
            let own = r["reported_s"].as_f64().unwrap_or_else(|| panic!("{r}"));
            // The mean of 10 sums of range(1000): well under the process time.
            assert!(own > 0.0 && own < r["wall_s"].as_f64().unwrap(), "{r}");
            assert_ne!(own, 99.0, "the first Mean: line counts");
        }
        for r in of("none").into_iter().chain(of("nan")) {
            assert!(r.get("reported_s").is_none(), "{python}: {r}");
        }
    }
}

#[test]
fn cpu_own_timer_makes_timeit_count_cpu_time_not_waiting() {
    // A workload whose timed call sleeps 0.2 s: by the wall clock its own
    // Mean is about 0.2 s, by CPU time (own_timer cpu) about nothing. The
    // fingerprint says which clock was used.
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dir = root.join("v");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("sleepy.py"),
            "import statistics, time, timeit\n\
             runtimes = timeit.repeat(lambda: time.sleep(0.2), number=1, repeat=2)\n\
             print('Mean:', statistics.mean(runtimes))\n\
             t = timeit.Timer('import time; time.sleep(0.1)').timeit(number=1)\n\
             print('Timer:', t)\n",
        )
        .unwrap();
        let measure = |own_timer: &str| {
            let plan = json!({
                "variants": [{"name": "v", "dir": dir}],
                "workload": [{"name": "sleepy", "argv": [&python, "sleepy.py"]}],
                "repeat": 1, "warmup": 0, "seed": 1, "timeout": 60,
                "log_dir": root.join(format!("logs-{own_timer}")),
                "env": {"PYTHONPATH": "/nonexistent-kept"},
                "own_timer": own_timer,
            });
            let lines = run_driver(&python, &plan, root);
            assert_eq!(lines[0]["own_timer"], own_timer, "{python}");
            let run = runs(&lines)[0].clone();
            let log = root.join(format!("logs-{own_timer}")).join("v.0.run.log");
            (run, std::fs::read_to_string(log).unwrap())
        };
        let (wall, _) = measure("wall");
        let w = wall["reported_s"].as_f64().unwrap();
        assert!(w >= 0.19, "{python}: wall clock {w}");
        let (cpu, log) = measure("cpu");
        let c = cpu["reported_s"].as_f64().unwrap();
        assert!(c < 0.05, "{python}: CPU clock {c}");
        // timeit.Timer(...) directly uses the CPU clock too.
        let timer: f64 = log
            .lines()
            .find_map(|l| l.strip_prefix("Timer: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(timer < 0.05, "{python}: Timer {timer}");
    }
}

/// The driver's lines of one type.
fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

/// The wide sweep's attribution of a kernel timestamp to a run, with two
/// windows 5 ms apart (closer than the slack). Stamps lag the clock and
/// never lead it: a stamp inside a window is that run's, one just before a
/// window is the run starting then, one after the last window is nobody's.
#[test]
fn the_wide_sweep_charges_a_timestamp_to_the_run_that_made_it() {
    let dir = driver().parent().unwrap().to_path_buf();
    let ms = 1_000_000u64;
    let script = format!(
        "import json, sys\n\
         sys.path.insert(0, {dir:?})\n\
         import defences\n\
         ws = [({a0}, {a1}, 'a'), ({b0}, {b1}, 'b')]\n\
         print(json.dumps([defences.WideSweep._window(ws, n)[0] for n in {stamps:?}]))\n",
        dir = dir.display().to_string(),
        a0 = 1000 * ms,
        a1 = 1100 * ms,
        b0 = 1105 * ms,
        b1 = 1200 * ms,
        stamps = [
            1050 * ms,
            1100 * ms,
            1101 * ms,
            1106 * ms,
            1200 * ms,
            1201 * ms,
            985 * ms,
            900 * ms
        ],
    );
    for python in pythons() {
        let out = Command::new(&python)
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{python}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            got,
            json!(["a", "a", "b", "b", "b", null, "a", null]),
            "{python}"
        );
    }
}

#[test]
fn defences_give_each_run_a_clean_state_and_see_state_read_across_runs() {
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let shared = root.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let trees = root.join("trees");
        // `cache` keeps its result in the shared folder and reads it back in
        // later runs; `honest` writes its TMPDIR and HOME, a log it never
        // reads, and a file it reads back within the same run.
        let cache = trees.join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(
            cache.join("w.py"),
            format!(
                "import os\n\
                 p = '{shared}/result'\n\
                 if os.path.exists(p):\n\
                 \x20   print(open(p).read())\n\
                 else:\n\
                 \x20   open(p, 'w').write('42')\n\
                 \x20   print('42')\n",
                shared = shared.display()
            ),
        )
        .unwrap();
        let honest = trees.join("honest");
        std::fs::create_dir_all(&honest).unwrap();
        std::fs::write(
            honest.join("w.py"),
            format!(
                "import os, random, tempfile\n\
                 t, h = tempfile.gettempdir(), os.path.expanduser('~')\n\
                 print('fresh', os.listdir(t), os.listdir(h))\n\
                 open(os.path.join(t, 'x'), 'w').write('x'); open(os.path.join(t, 'x')).read()\n\
                 open(os.path.join(h, 'y'), 'w').write('y')\n\
                 open('{shared}/log', 'a').write('%s %s\\n' % (t, h))\n\
                 os.write(2, ('stderr is not compared %s' % random.random()).encode())\n\
                 print('cwd', os.getcwd(), os.path.islink(os.getcwd()), os.path.realpath('.'))\n\
                 print('secret', os.environ.get('PATCHGRADE_SECRET'))\n\
                 lines = ['42', 'b', 'c']; random.shuffle(lines); print('\\n'.join(lines))\n\
                 print('Mean:', random.random())\n",
                shared = shared.display()
            ),
        )
        .unwrap();
        let slot = root.join("testbed");
        let plan = json!({
            "variants": [{"name": "cache", "dir": cache}, {"name": "honest", "dir": honest}],
            "swap": slot,
            "workload": [{"name": "w", "argv": [&python, "w.py"]}],
            "repeat": 3, "warmup": 1, "seed": 3, "timeout": 60,
            "log_dir": root.join("logs"),
            "env": {"PATCHGRADE_SECRET": "driver"},
            "integrity": {"clean_state": true, "sweep_roots": [&shared], "reap": true},
        });
        let lines = run_driver(&python, &plan, root);
        let d = &lines[0]["defences"];
        assert_eq!(d["clean_state"], true, "{python}: {d}");
        assert_eq!(d["swap"], true);
        assert_eq!(d["atime"], "works", "this machine's /tmp reports reads");
        let all: Vec<&Value> = lines
            .iter()
            .filter(|l| l["type"] == "run" || l["type"] == "warmup")
            .collect();
        assert_eq!(all.len(), 2 * 4);
        assert!(all.iter().all(|r| r["integrity_s"].as_f64().is_some()));
        let of = |v: &str| -> Vec<&Value> {
            all.iter().copied().filter(|r| r["variant"] == v).collect()
        };
        // The cache: left by its warm-up, read by every measured run.
        let c = of("cache");
        assert_eq!(c[0]["type"], "warmup");
        let result = format!("{}/result", shared.display());
        assert_eq!(
            c[0]["left_state"],
            json!([{"path": result, "change": "created"}])
        );
        for r in &c[1..] {
            assert_eq!(
                r["read_state"],
                json!([{"path": result, "left_by": {"variant": "cache", "kind": "warmup", "round": 0}}]),
                "{python}: {r}"
            );
        }
        // Honest: its log is left (changed) by every run and never read;
        // what it read back within a run is no read across runs.
        let h = of("honest");
        let log = format!("{}/log", shared.display());
        for r in &h {
            assert!(r.get("read_state").is_none(), "{python}: {r}");
            assert!(r["left_state"].to_string().contains(&log), "{r}");
        }
        // Its runs' output: a fresh, empty TMPDIR and HOME each time, gone
        // afterwards; /testbed a plain folder; the driver's variables not
        // passed on; one digest for every run (line order and the Mean
        // line do not count); the sample printed once.
        let samples: Vec<&str> = h
            .iter()
            .filter_map(|r| r["output_sample"].as_str())
            .collect();
        assert_eq!(samples.len(), 1, "{python}: one digest, one sample: {h:?}");
        let digests: std::collections::BTreeSet<&str> = h
            .iter()
            .map(|r| r["output_sha256"].as_str().unwrap())
            .collect();
        assert_eq!(digests.len(), 1, "{python}: {h:?}");
        let sample = samples[0];
        assert!(sample.starts_with("fresh [] []\n"), "{sample}");
        let dirs: Vec<String> = std::fs::read_to_string(shared.join("log"))
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        let distinct: std::collections::BTreeSet<&String> = dirs.iter().collect();
        assert_eq!((dirs.len(), distinct.len()), (8, 8), "{dirs:?}");
        for p in &dirs {
            assert!(!std::path::Path::new(p).exists(), "{p} is removed");
        }
        assert_eq!(
            sample.lines().find(|l| l.starts_with("cwd ")).unwrap(),
            format!("cwd {} False {}", slot.display(), slot.display())
        );
        assert!(sample.contains("secret None"), "{sample}");
        // The trees are back in their folders or at the slot, nothing lost.
        assert!(slot.is_dir() && !slot.is_symlink());
    }
}

#[test]
fn a_run_killed_by_its_timeout_is_recorded_once_and_what_it_left_is_reaped() {
    for python in pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let d = root.join("v");
        std::fs::create_dir_all(&d).unwrap();
        let marker = format!("pg-reaper-test-{}", std::process::id());
        // A detached grandchild (its own session) that would outlive the
        // run, then a main process past its time limit; a second item
        // leaves a detached process and ends normally.
        let daemon = format!(
            "import os, sys, time\n\
             if os.fork() == 0:\n\
             \x20   os.setsid()\n\
             \x20   if os.fork() == 0:\n\
             \x20       code = 'import sys, time; open(sys.argv[1], \"w\").close(); time.sleep(300)'\n\
             \x20       os.execv(sys.executable, [sys.executable, '-c', code, 'ready', '{marker}'])\n\
             \x20   os._exit(0)\n\
             os.wait()\n\
             while not os.path.exists('ready'): time.sleep(0.01)\n\
             os.unlink('ready')\n\
             time.sleep(float(sys.argv[1]))\n"
        );
        std::fs::write(d.join("d.py"), daemon).unwrap();
        let plan = json!({
            "variants": [{"name": "v", "dir": d}],
            "workload": [
                {"name": "hangs", "argv": [&python, "d.py", "60"], "timeout": 1},
                {"name": "ends", "argv": [&python, "d.py", "0"]},
            ],
            "repeat": 2, "warmup": 0, "seed": 1, "timeout": 60,
            "log_dir": root.join("logs"),
            "integrity": {"reap": true},
        });
        let lines = run_driver(&python, &plan, root);
        assert_eq!(lines[0]["defences"]["reaper"], "subreaper", "{python}");
        let rs = of_type(&lines, "run");
        // One record per item and round: nothing recorded twice.
        let keys: std::collections::BTreeSet<(String, u64)> = rs
            .iter()
            .map(|r| (r["item"].to_string(), r["round"].as_u64().unwrap()))
            .collect();
        assert_eq!(rs.len(), 4, "{python}: {rs:?}");
        assert_eq!(keys.len(), 4);
        for r in &rs {
            let hung = r["item"] == "hangs";
            assert_eq!(r["timed_out"], hung, "{r}");
            let left = r["left_processes"]
                .as_array()
                .unwrap_or_else(|| panic!("{r}"));
            assert_eq!(left.len(), 1, "{r}");
            assert!(left[0]["cmdline"].as_str().unwrap().contains(&marker));
        }
        let ps = Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .unwrap();
        assert!(
            ps.stdout.is_empty(),
            "reaped: {}",
            String::from_utf8_lossy(&ps.stdout)
        );
    }
}
