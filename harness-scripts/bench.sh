#!/usr/bin/env bash
# Docker backend benchmark (not a test): per-instance overhead and batch wall
# time for N small instances on a warm image cache, at --max-workers 1 and 2.
#
#   harness-scripts/bench.sh [N]        (default N=10; needs a Docker daemon)
#
# Overhead of an instance = patchgrade's whole time for it (host checkout,
# image lookup, container create, upload, start, eval script, removal,
# grading, reports) minus the test command's own time, which the eval script
# measures with bash's `time` (TIMEFORMAT set through the spec's env).
# "run" is the backend's part alone: container create -> container removed.
# The image build of the first (cold) run is not counted.
set -euo pipefail
n=${1:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PATCHGRADE_BIN:-}
if [ -z "$bin" ]; then
    if [ -x "$here/target/release/patchgrade" ]; then bin=$here/target/release/patchgrade; else bin=$here/target/debug/patchgrade; fi
fi
bin=$(realpath "$bin" 2>/dev/null || echo "$bin")
[ -x "$bin" ] || { echo "bench: build patchgrade first (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d /tmp/patchgrade-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

. "$here/harness-scripts/bench-fixture.sh"
calc_fixture "$n"

run() {
    local id=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    PATCHGRADE_CACHE=$work/cache "$bin" run --backend docker --dataset dataset.jsonl --predictions preds.jsonl \
        --run-id "$id" --specs specs --mirror-dir mirrors --cache-level instance "$@" > "$id.out" 2> "$id.err" \
        || { echo "bench: run $id failed:" >&2; tail -20 "$id.err" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 - "$id" "$t0" "$t1" "$n" <<'EOF'
import glob, json, re, statistics, sys
rid, t0, t1, n = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
over, run_over, tests = [], [], []
outcomes = {}
for rec_path in glob.glob(f"logs/run_evaluation/{rid}/bench/*/patchgrade.json"):
    rec = json.load(open(rec_path))
    outcomes[rec["outcome"]] = outcomes.get(rec["outcome"], 0) + 1
    log = open(rec_path.replace("patchgrade.json", "test_output.txt")).read()
    m = re.search(r"^PATCHGRADE_TEST_SECONDS=([0-9.]+)", log, re.M)
    t = float(m.group(1)) if m else 0.0
    tests.append(t)
    over.append(rec["timings"]["total"] - t)
    run_over.append(rec["timings"]["tests"] - t)
wall = t1 - t0
print(f"{rid:10} n={n:<3} wall {wall:6.2f}s  ({wall / n:5.2f}s/instance)  "
      f"overhead/instance: median {statistics.median(over):.3f}s, max {max(over):.3f}s "
      f"[backend run only: median {statistics.median(run_over):.3f}s]  "
      f"test command: median {statistics.median(tests):.3f}s  outcomes {outcomes}")
EOF
}

echo "bench: $n instances, binary $bin, $(nproc) cores, docker $(docker version --format '{{.Server.Version}}')"
run warmup --max-workers 2 >/dev/null   # builds the images once (not measured)
run workers1 --max-workers 1 --force
run workers2 --max-workers 2 --force
t0=$(date +%s.%N); docker run --rm "$(docker images -q 'patchgrade.eval.*' | head -1)" true; t1=$(date +%s.%N)
python3 -c "print(f'docker run --rm IMAGE true: {float(\"$t1\") - float(\"$t0\"):.2f}s (reference point)')"
for i in $(seq 0 $((n - 1))); do docker rmi -f "$(docker images --format '{{.Repository}}:{{.Tag}}' "patchgrade.eval.*.bench__calc-$i" | head -1)" >/dev/null 2>&1 || true; done
