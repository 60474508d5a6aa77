#!/usr/bin/env python3
"""Figures of a (possibly partial) gold run on SWE-bench Verified (issue 12).

Usage: verified-summary.py DATASET RUN_DIR [RUN_DIR ...] [SEGMENTS_TSV]

RUN_DIR is <log_dir>/<run_id>; every <model>/<instance>/patchgrade.json in
it is read. With several, an instance's record is taken from the last
RUN_DIR that has one (give them oldest first: a later run that re-ran an
instance after a spec fix replaces the earlier result). Prints Markdown: a per-repository table (instances of the
dataset, run, resolved, each other outcome, summed eval / env / tests
seconds from the records' timings, and the summed test-command time, the
`PATCHGRADE_TEST_SECONDS=` line that harness-scripts/verified-segment.sh's
timed specs print), then every instance that did not resolve with its
outcome, the failing tests and the record's detail, then the segments.

With SEGMENTS_TSV, a timeline too: per repository, when its records were
written on the summed clock of the segments (seconds since the first
segment's start, the gaps between segments left out: the issue 22 measure
"summed wall time"), and how many had finished at each hour mark. A
segment still running (the newest log in the `segments` folder beside the
tsv, no line in the tsv yet) counts up to now; an older log without a tsv
line is a segment cut short, counted up to its log's last write.
"""
import glob
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone


def main():
    dataset = sys.argv[1]
    run_dirs = [a for a in sys.argv[2:] if not a.endswith(".tsv")]
    segments = next((a for a in sys.argv[2:] if a.endswith(".tsv")), None)
    latest = {}
    for run_dir in run_dirs:
        for path in glob.glob(os.path.join(run_dir, "*", "*", "patchgrade.json")):
            latest[os.path.basename(os.path.dirname(path))] = path
    repo_of, n_of = {}, Counter()
    for line in open(dataset):
        if line.strip():
            d = json.loads(line)
            repo_of[d["instance_id"]] = d["repo"]
            n_of[d["repo"]] += 1
    sums = defaultdict(lambda: defaultdict(float))
    outcomes = defaultdict(Counter)
    bad = []
    for path in sorted(latest.values(), key=lambda p: os.path.basename(os.path.dirname(p))):
        rec = json.load(open(path))
        iid = rec["instance_id"]
        repo = repo_of.get(iid, iid.rsplit("-", 1)[0].replace("__", "/"))
        t = rec.get("timings") or {}
        s = sums[repo]
        s["run"] += 1
        for k in ("total", "env", "tests"):
            s[k] += t.get(k) or 0
        out_path = os.path.join(os.path.dirname(path), "test_output.txt")
        if os.path.exists(out_path):
            m = re.search(r"^PATCHGRADE_TEST_SECONDS=([0-9.]+)", open(out_path, errors="replace").read(), re.M)
            if m:
                s["own"] += float(m.group(1))
                s["timed"] += 1
        outcomes[repo][rec["outcome"]] += 1
        if rec["outcome"] != "resolved":
            g = rec.get("grade") or {}
            failed = (g.get("fail_to_pass") or {}).get("failure", []) + (g.get("pass_to_pass") or {}).get("failure", [])
            bad.append((iid, rec["outcome"], failed, (rec.get("detail") or "").replace("\n", " ")[:300]))
    total = defaultdict(float)
    all_out = Counter()
    print("| repo | instances | run | resolved | other outcomes | eval (s) | env/image (s) | tests (s) | test commands' own time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for repo in sorted(n_of):
        s, o = sums.get(repo, {}), outcomes.get(repo, Counter())
        other = ", ".join(f"{v} {k}" for k, v in sorted(o.items()) if k != "resolved") or "-"
        print(f"| {repo} | {n_of[repo]} | {int(s.get('run', 0))} | {o.get('resolved', 0)} | {other} | "
              f"{s.get('total', 0):.0f} | {s.get('env', 0):.0f} | {s.get('tests', 0):.0f} | {s.get('own', 0):.0f} |")
        for k in ("run", "total", "env", "tests", "own"):
            total[k] += s.get(k, 0)
        all_out.update(o)
    other = ", ".join(f"{v} {k}" for k, v in sorted(all_out.items()) if k != "resolved") or "-"
    print(f"| **all** | {sum(n_of.values())} | {int(total['run'])} | {all_out.get('resolved', 0)} | {other} | "
          f"{total['total']:.0f} | {total['env']:.0f} | {total['tests']:.0f} | {total['own']:.0f} |")
    print()
    print("Not resolved:")
    print()
    for iid, out, failed, detail in bad:
        shown = ", ".join(failed[:4]) + (f" (+{len(failed) - 4})" if len(failed) > 4 else "")
        print(f"- {iid}: {out}; failing: {shown or '-'}; {detail}")
    if segments and os.path.exists(segments):
        timeline(latest, repo_of, segments)
        print()
        # Peak RSS: time -v's (patchgrade or any child it waited for);
        # patchgrade's own VmHWM where the segment recorded it.
        print("| segment | start | end | wall (s) | peak RSS (MiB) | patchgrade's own (MiB) | exit | instances | load start | load end | free disk |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for line in open(segments):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 10:
                rss = f"{int(f[4]) / 1024:.1f}" if f[4].isdigit() else f[4]
                free = f"{int(f[9].rstrip('K')) / 1048576:.1f} GiB" if f[9].rstrip("K").isdigit() else f[9]
                own = f"{int(f[10]) / 1024:.1f}" if len(f) > 10 and f[10].isdigit() and f[10] != "0" else "-"
                print(f"| {f[0]} | {f[1]} | {f[2]} | {f[3]} | {rss} | {own} | {f[5]} | {f[6]} | {f[7]} | {f[8]} | {free} |")


def segment_spans(segments):
    """[(start, end)] epoch seconds, oldest first: the tsv's segments, and
    any whose log (`NAME-%Y%m%dT%H%M%SZ.log`) has no tsv line yet (running:
    up to now)."""
    def epoch(stamp, fmt):
        return datetime.strptime(stamp, fmt).replace(tzinfo=timezone.utc).timestamp()
    spans = {}
    for line in open(segments):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 3:
            start = epoch(f[1], "%Y-%m-%dT%H:%M:%SZ")
            spans[start] = epoch(f[2], "%Y-%m-%dT%H:%M:%SZ")
    logs = os.path.join(os.path.dirname(segments), "segments")
    unrecorded = []
    for log in glob.glob(os.path.join(logs, "*.log")):
        m = re.search(r"-(\d{8}T\d{6}Z)\.log$", log)
        if m:
            start = epoch(m.group(1), "%Y%m%dT%H%M%SZ")
            # The tsv's start and the log's name come from two clock
            # readings, a second or so apart.
            if not any(abs(start - s) <= 5 for s in spans):
                unrecorded.append((start, os.path.getmtime(log)))
    # A segment without a tsv line is running only if it is the newest;
    # an older one was cut short (killed before its line was written) and
    # ended when its log was last written.
    newest = max(spans, default=None)
    for start, last_write in unrecorded:
        running = all(start > s for s, _ in unrecorded if s != start) and (newest is None or start > newest)
        spans[start] = time.time() if running else last_write
    return sorted(spans.items())


def timeline(latest, repo_of, segments):
    spans = segment_spans(segments)
    if not spans:
        return
    def summed(t):
        before = 0.0
        for start, end in spans:
            if start <= t <= end + 1:
                return before + t - start
            before += end - start
        return None
    when = defaultdict(list)
    outside = 0
    for iid, path in latest.items():
        at = summed(os.path.getmtime(path))
        if at is None:
            outside += 1
            continue
        when[repo_of.get(iid, iid.rsplit("-", 1)[0])].append(at)
    total = sum(end - start for start, end in spans)
    print()
    print(f"Timeline on the summed clock of {len(spans)} segment(s), {total:.0f} s:")
    print()
    print("| repo | records | first (s) | last (s) |")
    print("|---|---|---|---|")
    for repo, ts in sorted(when.items(), key=lambda kv: min(kv[1])):
        print(f"| {repo} | {len(ts)} | {min(ts):,.0f} | {max(ts):,.0f} |")
    every = [t for ts in when.values() for t in ts]
    marks = [f"{sum(t <= h * 3600 for t in every)} by {h} h" for h in range(1, int(total // 3600) + 1)]
    marks.append(f"{len(every)} by {total:,.0f} s")
    print()
    print(f"Records finished: {', '.join(marks)}" + (f"; {outside} written outside these segments" if outside else ""))


if __name__ == "__main__":
    main()
