#!/usr/bin/env python3
"""Counts over the `patchgrade perf --json` outputs of a calibration
(harness-scripts/perf/calibrate.sh): how often gold and candidate a were
reported faster, b slower, c scored, the A/A interval contained 1.0, and the
instance was too noisy. "Reported" = the verdict, on a scored variant (a too
noisy instance scores nothing); the verdicts alone are counted beside.
Usage: calibrate_summary.py DIR RUNS"""
import json
import os
import sys

out, runs = sys.argv[1], int(sys.argv[2])
keys = ["measured", "too_noisy", "under_load", "gold_faster", "a_faster", "b_slower",
        "c_scored", "aa_contains_1", "gold_faster_verdict", "a_faster_verdict",
        "b_slower_verdict"]
n = dict.fromkeys(keys, 0)
loads, overheads, floors, metric = [], [], [], None
for i in range(1, runs + 1):
    try:
        j = json.load(open(os.path.join(out, f"run-{i}.json")))
    except Exception as e:
        print(f"run {i}: no JSON ({e}); see {out}/run-{i}.stderr")
        continue
    for rec in j["records"]:
        a = rec["analysis"]
        metric = rec["options"]["metric"]
        n["measured"] += 1
        n["too_noisy"] += a["too_noisy"]
        n["under_load"] += a["under_load"]
        f = rec["fingerprint"]
        loads += [(f.get("load_before") or [None])[0], (f.get("load_after") or [None])[0]]
        if rec.get("overhead_per_run_s") is not None:
            overheads.append(rec["overhead_per_run_s"])
        if a.get("noise_floor") is not None:
            floors.append(a["noise_floor"])
        v = {x["name"]: x for x in a["variants"]}

        def verdict(name):
            return (v[name].get("comparison") or {}).get("verdict")

        def scored(name):
            return v[name]["status"] == "scored"

        for name, want in [("gold", "faster"), ("a", "faster"), ("b", "slower")]:
            n[f"{name}_{want}"] += verdict(name) == want and scored(name)
            n[f"{name}_{want}_verdict"] += verdict(name) == want
        n["c_scored"] += scored("c")
        aa = a.get("aa")
        n["aa_contains_1"] += bool(aa and aa["low"] <= 1.0 <= aa["high"])
loads = [x for x in loads if x is not None]
print(f"metric {metric}; {n['measured']} of {runs} runs measured")
print("targets: gold faster >= 19, a faster >= 18, b slower >= 18, c scored = 0, "
      "A/A contains 1.0 >= 17")
for k in keys:
    print(f"  {k:20} {n[k]}")
if floors:
    print(f"A/A noise floor: {min(floors):.3f} to {max(floors):.3f}")
if loads:
    print(f"1-minute load average: {min(loads):.1f} to {max(loads):.1f}")
if overheads:
    print(f"overhead per variant and run: {min(overheads):.3f} to {max(overheads):.3f} s")
