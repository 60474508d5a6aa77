#!/usr/bin/env bash
# Calibration of `patchgrade perf` on the perf demo (issue 13): runs the real
# command RUNS times on instances/perf-demo with its predictions (the first
# run grades and builds the instance image; later runs reuse the grading by
# its cache key) and prints, over the runs, how often gold and candidate a
# were reported faster, b slower, c scored, the A/A interval contained 1.0,
# and the instance was too noisy; with the load averages and the overhead.
# Usage: harness-scripts/perf/calibrate.sh [RUNS=20] [REPEAT=10] [extra perf flags...]
# e.g. calibrate.sh 20 10 --metric wall
# Needs a Docker engine. Every run's JSON is kept in target/perf-calibrate/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-20}
repeat=${2:-10}
shift $(( $# < 2 ? $# : 2 ))
out="$root/target/perf-calibrate"
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
cargo build -q --bin patchgrade
# A copy: rebuilding the tree during the calibration does not change it.
cp target/debug/patchgrade "$work/patchgrade"
cd "$work"
demo="$root/instances/perf-demo"
for i in $(seq 1 "$runs"); do
    set +e
    "$work/patchgrade" perf --dataset "$demo/dataset.jsonl" \
        --predictions "$demo/predictions.jsonl" --run-id calibrate --backend docker \
        --base-image none --repeat "$repeat" --cpuset-cpus 1 --json "$@" \
        >"$out/run-$i.json" 2>"$out/run-$i.stderr"
    rc=$?
    set -e
    echo "run $i: exit $rc, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$out" "$runs" <<'EOF'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
n = dict(measured=0, too_noisy=0, gold_faster=0, a_faster=0, b_slower=0,
         c_scored=0, aa_contains_1=0, under_load=0)
loads, overheads, metric = [], [], None
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
        v = {x["name"]: x for x in a["variants"]}
        verdict = lambda name: (v[name].get("comparison") or {}).get("verdict")
        # "reported faster": the verdict, and the figure counts (scored).
        scored = lambda name: v[name]["status"] == "scored"
        n["gold_faster"] += verdict("gold") == "faster" and scored("gold")
        n["a_faster"] += verdict("a") == "faster" and scored("a")
        n["b_slower"] += verdict("b") == "slower" and scored("b")
        n["c_scored"] += scored("c")
        aa = a.get("aa")
        n["aa_contains_1"] += bool(aa and aa["low"] <= 1.0 <= aa["high"])
loads = [x for x in loads if x is not None]
print(f"metric {metric}; {n['measured']} of {runs} runs measured")
print(f"targets: gold faster >= 19, a faster >= 18, b slower >= 18, c scored = 0, A/A contains 1.0 >= 17")
for k, x in n.items():
    print(f"  {k:15} {x}")
if loads:
    print(f"1-minute load average: {min(loads):.1f} to {max(loads):.1f}")
if overheads:
    print(f"overhead per variant and run: {min(overheads):.3f} to {max(overheads):.3f} s")
EOF
