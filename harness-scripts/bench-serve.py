#!/usr/bin/env python3
"""Benchmark `patchgrade serve` against `patchgrade run` on the same evaluations.

    harness-scripts/bench-serve.py --dataset instances/demo/dataset.jsonl \
        --predictions instances/demo/predictions.jsonl --backend local \
        --repeat 4 --clients 4 --workers 2 [--rounds K] \
        [--soak 10000 [--queue-limit 200] [--soak-only]] [-- ENGINE FLAGS]

Prints, per round (--rounds, each with its own `run` and service):
  - throughput: `run` of the predictions (each repeated --repeat times as
    samples) against the service graded by --clients concurrent clients
    (each submit then wait, one at a time), then as one batch request. The
    service's share is given against run's wall time (the command, start to
    exit) and against run's evaluation phase (its "finished in" line:
    without the engine's start and end), the stricter of the two;
  - added latency: one evaluation in flight at a time, acknowledged to
    result available at the client, minus the evaluation's own seconds
    (the record's timings.total), p50 and p99; and where it goes, from the
    timestamps of run_instance.log: "dispatch" (acknowledged to the
    evaluation's first line) and "after" (its outcome line to the result
    at the client), split at the record's rename (its ctime) into
    "written" (the logs and the record written and synced) and "answer"
    (the service's wake-up and reply, and the client);
  - how busy the workers were in each phase: the evaluations' own seconds
    (their records' timings.total) over workers x the phase's seconds; the
    rest is time between evaluations (dispatch, the records' writes, no
    work at hand), whatever the machine's speed;
  - the load average (1 min) at the start and end of each phase;
  - with --soak N: N submissions of empty patches (each a real evaluation
    ending empty_patch, a record written) through a bounded queue, with the
    service's RSS before and after and its peak (VmHWM).
A warm-up `run` comes first so environments (and, with --backend docker,
images) are cached for both. Engine flags after `--` go to both (e.g.
`-- --cache-dir DIR --base-image none`).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from patchgrade_client import Client  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


def rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--predictions", required=True)
    ap.add_argument("--backend", default="local")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/patchgrade"))
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--latency-samples", type=int, default=20)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--queue-limit", type=int, default=200, help="the soak's --queue-limit")
    ap.add_argument("--soak-only", action="store_true", help="skip run and the throughput phases")
    ap.add_argument("--rounds", type=int, default=1, help="run, then the service, this many times")
    ap.add_argument("extra", nargs="*", help="more engine flags for both (after --)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-serve-")
    logs = os.path.join(work, "logs")
    common = ["--backend", a.backend, "--max-workers", str(a.workers), "--log-dir", logs] + a.extra
    preds = rows(a.predictions)
    # The same evaluations for both: each prediction --repeat times, as
    # samples whose patch text differs (trailing newlines, which the
    # normaliser drops), so `run` does not evaluate identical samples once.
    batch = []
    for r in range(a.repeat):
        for p in preds:
            patch = p.get("model_patch")
            if patch and patch.strip():
                patch = patch + "\n" * r
            own = p.get("sample_id")
            batch.append(dict(p, model_patch=patch, sample_id=f"{own}-r{r}" if own else f"r{r}"))
    batch_file = os.path.join(work, "batch.jsonl")
    with open(batch_file, "w") as f:
        for p in batch:
            f.write(json.dumps({k: p[k] for k in ("instance_id", "model_name_or_path", "model_patch", "sample_id")}) + "\n")

    def run(run_id, predictions):
        """`run`'s wall time and its evaluation phase (its "finished in")."""
        t = time.monotonic()
        done = subprocess.run(
            [a.bin, "run", "--dataset", a.dataset, "--predictions", predictions, "--run-id", run_id,
             "--report-dir", work] + common,
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t
        phase = re.findall(r"finished in ([0-9.]+)s", done.stderr)
        if not phase:
            raise SystemExit(f"run {run_id} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        return wall, float(phase[-1])

    run("warmup", a.predictions)

    def start(run_id, extra=()):
        p = subprocess.Popen(
            [a.bin, "serve", "--dataset", a.dataset, "--run-id", run_id, "--listen", "127.0.0.1:0"]
            + common + list(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
                return p, Client(m.group(1))
        raise SystemExit("serve did not start")

    def stop(p):
        p.terminate()
        p.wait(timeout=300)

    try:
        if a.soak_only:
            soak(a, preds, start, stop)
        else:
            for k in range(a.rounds):
                load = [os.getloadavg()[0]]
                run_secs = run(f"bench-run{k}", batch_file)
                load.append(os.getloadavg()[0])
                measure(a, preds, batch, run_secs, load, start, stop, k, logs)
            if a.soak:
                soak(a, preds, start, stop)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(a, preds, batch, run_secs, load, start, stop, k, logs):

    # Throughput: --clients threads share the batch.
    run_id = f"bench-serve{k}"
    srv, client = start(run_id, ["--queue-limit", str(len(batch) + 10)])
    try:
        measured = phases(a, preds, batch, client, srv, load, os.path.join(logs, run_id))
    finally:
        stop(srv)
    measured["busy"] = [busy(os.path.join(logs, f"bench-run{k}"), False),
                        busy(os.path.join(logs, run_id), False), busy(os.path.join(logs, run_id), True)]
    report(a, preds, batch, run_secs, measured, load, k)


def busy(folder, batch):
    """Seconds the evaluations of the batch (`batch`: the one-request phase's
    samples, `b-…`; else the others, but the latency phase's `lat…`) took by
    their records (timings.total), copies of identical patches left out."""
    total = 0.0
    for model in os.listdir(folder):
        if not os.path.isdir(os.path.join(folder, model)) or model.startswith("."):
            continue
        for name in os.listdir(os.path.join(folder, model)):
            record = os.path.join(folder, model, name, "patchgrade.json")
            sample = name.rsplit("@", 1)[-1]
            if "@" not in name or sample.startswith("lat") or sample.startswith("b-") != batch \
                    or not os.path.exists(record):
                continue
            with open(record) as f:
                r = json.load(f)
            if not r.get("evaluated_as"):
                total += r.get("timings", {}).get("total", 0.0)
    return total


def log_times(eval_dir):
    """The first and last timestamps of an evaluation's run_instance.log."""
    with open(os.path.join(eval_dir, "run_instance.log")) as f:
        ts = [float(m.group(1)) for m in re.finditer(r"^\[(\d+\.\d+)\]", f.read(), re.M)]
    return ts[0], ts[-1]


def phases(a, preds, batch, client, srv, load, folder):
    todo = list(batch)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                p = todo.pop()
            r = client.grade(p["instance_id"], p.get("model_patch"), p["model_name_or_path"], p["sample_id"])
            assert r.state == "finished", r.data

    t = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(a.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    serve_secs = time.monotonic() - t
    load.append(os.getloadavg()[0])

    # The same evaluations again as one batch request (new sample ids).
    keys = ("instance_id", "model_name_or_path", "model_patch", "sample_id")
    again = [dict({k: p[k] for k in keys}, sample_id="b-" + p["sample_id"]) for p in batch]
    t = time.monotonic()
    for r in client.submit_many(again):
        assert client.wait(r).state == "finished"
    batch_secs = time.monotonic() - t
    load.append(os.getloadavg()[0])

    # Added latency: one at a time, new samples; where it goes, from the
    # log's timestamps (wall clock, as time.time()).
    added, dispatch, after, written, answer = [], [], [], [], []
    for i in range(a.latency_samples):
        p = preds[i % len(preds)]
        sub = client.submit(p["instance_id"], p.get("model_patch"), p["model_name_or_path"], f"lat{i}")
        t_ack, w_ack = time.monotonic(), time.time()
        r = client.wait(sub)
        t_done, w_done = time.monotonic(), time.time()
        own = (r.record or {}).get("timings", {}).get("total", 0.0)
        added.append(max(0.0, (t_done - t_ack) - own) * 1000)
        eval_dir = os.path.join(folder, p["model_name_or_path"], f"{p['instance_id']}@lat{i}")
        first, last = log_times(eval_dir)
        # The record's rename (after its fsync) sets its ctime: the file
        # system's coarse clock, a few ms.
        durable = os.stat(os.path.join(eval_dir, "patchgrade.json")).st_ctime_ns / 1e9
        dispatch.append((first - w_ack) * 1000)
        after.append((w_done - last) * 1000)
        written.append((durable - last) * 1000)
        answer.append((w_done - durable) * 1000)
    load.append(os.getloadavg()[0])
    return {
        "serve_secs": serve_secs, "batch_secs": batch_secs, "added": added,
        "dispatch": dispatch, "after": after, "written": written, "answer": answer,
        "peak": rss_kb(srv.pid, "VmHWM"),
    }


def report(a, preds, batch, run_secs, m, load, k):
    n = len(batch)
    wall, phase = run_secs
    print(f"round {k + 1}: evaluations: {n} ({len(preds)} predictions x {a.repeat}), "
          f"workers {a.workers}, backend {a.backend}")
    print(f"load average (1 min) at: run {load[0]:.1f} -> {load[1]:.1f}; clients -> {load[2]:.1f}; "
          f"batch -> {load[3]:.1f}; latency -> {load[4]:.1f}")
    # Busy: the evaluations' own seconds over the workers' seconds in the
    # phase; what is not busy is the time between evaluations (dispatch,
    # writes, waiting for work), whatever the machine's speed.
    run_busy, clients_busy, batch_busy = m["busy"]
    print(f"run:   {wall:7.2f} s  {n / wall:6.2f} eval/s  (the command; its evaluation phase {phase:.2f} s, "
          f"{n / phase:.2f} eval/s, busy {100 * run_busy / (phase * a.workers):.1f}%)")
    for name, secs, used in ((f"{a.clients} clients", m["serve_secs"], clients_busy),
                             ("one batch request", m["batch_secs"], batch_busy)):
        print(f"serve: {secs:7.2f} s  {n / secs:6.2f} eval/s  ({name})  = {100 * wall / secs:5.1f}% of run's "
              f"throughput, {100 * phase / secs:5.1f}% of its evaluation phase's, "
              f"busy {100 * used / (secs * a.workers):.1f}%")
    print(f"evaluations' own seconds: run {run_busy:.1f}, serve {clients_busy:.1f} ({a.clients} clients), "
          f"{batch_busy:.1f} (one batch)")
    added = m["added"]
    print(f"added latency (ack -> result at client - evaluation's own time), {len(added)} sequential: "
          f"p50 {pct(added, 50):.1f} ms  p99 {pct(added, 99):.1f} ms")
    print(f"  of which: dispatch (ack -> first log line) p50 {pct(m['dispatch'], 50):.1f} ms, "
          f"after (outcome line -> result at client) p50 {pct(m['after'], 50):.1f} ms  "
          f"p99 {pct(m['after'], 99):.1f} ms")
    print(f"  after = written (outcome line -> record renamed, synced) p50 {pct(m['written'], 50):.1f} ms  "
          f"p99 {pct(m['written'], 99):.1f} ms + answer (-> result at client) p50 {pct(m['answer'], 50):.1f} ms  "
          f"p99 {pct(m['answer'], 99):.1f} ms")
    print(f"serve peak RSS: {m['peak'] / 1024:.1f} MiB", flush=True)



def soak(a, preds, start, stop):
    srv, client = start("bench-soak", ["--queue-limit", str(a.queue_limit)])
    curve = []
    try:
        inst = preds[0]["instance_id"]
        rss_start = rss_kb(srv.pid, "VmRSS")
        t = time.monotonic()
        ids = []
        first = None
        for i in range(a.soak):
            r = client.submit(inst, None, "soak", f"s{i}")
            first = first or r.id
            ids.append(r.id)
            if len(ids) >= 100:
                for eid in ids:
                    client.wait(eid)
                ids = []
            if (i + 1) % 1000 == 0:
                curve.append(rss_kb(srv.pid, "VmRSS"))
        for eid in ids:
            client.wait(eid)
        secs = time.monotonic() - t
        rss_end, hwm = rss_kb(srv.pid, "VmRSS"), rss_kb(srv.pid, "VmHWM")
        # The first one, long finished, submitted again: the same evaluation.
        again = client.submit(inst, None, "soak", "s0")
        assert again.id == first and again.state == "finished", again.data
    finally:
        stop(srv)
    print(f"soak: {a.soak} submissions in {secs:.1f} s ({a.soak / secs:.0f}/s); "
          f"RSS {rss_start / 1024:.1f} -> {rss_end / 1024:.1f} MiB, peak {hwm / 1024:.1f} MiB")
    print("RSS every 1000 (MiB): " + " ".join(f"{kb / 1024:.1f}" for kb in curve))


if __name__ == "__main__":
    main()
