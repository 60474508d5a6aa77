#!/usr/bin/env bash
# Calibration of the perf method on the perf demo (issue 13): builds the
# demo's instance image with `patchgrade run --backend docker` (grading gold
# and the three candidates on the way), then measures the demo RUNS times
# (examples/perf_calibrate.rs) and prints, for wall and for CPU time, how
# often gold and candidate a were reported faster, b slower, c scored, and
# the A/A interval contained 1.0.
# Usage: harness-scripts/perf/calibrate.sh [RUNS=20] [REPEAT=10]
# Needs a Docker engine; the perf.json of every measurement is kept in
# target/perf-calibrate/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-20}
repeat=${2:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
cargo build -q --bin patchgrade --example perf_calibrate
cd "$work"
for preds in gold "$root/instances/perf-demo/predictions.jsonl"; do
    "$root/target/debug/patchgrade" run --dataset "$root/instances/perf-demo/dataset.jsonl" \
        --predictions "$preds" --run-id calibrate --backend docker --base-image none \
        --cache-level instance >/dev/null
done
for r in logs/run_evaluation/calibrate/*/*/patchgrade.json; do
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["outcome"], sys.argv[1].split("/")[3])' "$r"
done
image=$(python3 -c 'import json; print(json.load(open("logs/run_evaluation/calibrate/gold/patchgrade__demo-perf-1/patchgrade.json"))["environment"].split()[2])')
echo "image $image"
"$root/target/debug/examples/perf_calibrate" "$runs" "$image" "$root/target/perf-calibrate" "$repeat"
