#!/usr/bin/env bash
# Calibration of `patchgrade perf` on the perf demo (issue 13): runs the real
# command RUNS times on instances/perf-demo with its predictions (the first
# run grades and builds the instance image; later runs reuse the grading by
# its cache key) and prints, over the runs, how often gold and candidate a
# were reported faster, b slower, c scored, the A/A interval contained 1.0,
# and the instance was too noisy; with the load averages and the overhead
# (calibrate_summary.py DIR RUNS prints them again from the kept JSON).
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
python3 "$root/harness-scripts/perf/calibrate_summary.py" "$out" "$runs"
