#!/usr/bin/env bash
# Benchmark of the measurement overhead of `patchgrade perf` (issue 13:
# everything but the workload, per variant and repetition, target <= 0.5 s).
# Runs the real command on the perf demo twice: with the demo's workload,
# and with a near-empty one (`pass`), so that almost everything left is the
# harness: container create/start/removal, copying the variants' trees,
# the driver's start, fork/exec/wait4 per run. Prints per run of the
# command: the container's elapsed time, the sum of the timed processes and
# builds, the number of runs (warm-ups included), and the overhead per
# variant and run = (elapsed - timed) / runs; and the command's own wall
# time outside grading (host checkouts of the variants included). Also the
# integrity defences' own share (perf::integrity): their time per run
# (integrity_s: scratch, sweep, reaper, output digest; part of the
# overhead) and the wide sweeps per instance (after the warm-ups and after
# the last run).
# Usage: harness-scripts/perf/overhead.sh [REPEAT=10]
# OVERHEAD_WORKLOADS (default "demo empty"): which of demo (the demo's
# workload), empty (`pass`) and hacks (the perf hack corpus,
# instances/perf-demo/hacks, 22 variants) to run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
repeat=${1:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
cargo build -q --bin patchgrade
demo="$root/instances/perf-demo"
cp -r "$demo/repos" "$work/repos"
python3 - "$demo/dataset.jsonl" "$work/empty.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    r["workload"] = "pass\n"
with open(sys.argv[2], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
EOF
cp "$demo/dataset.jsonl" "$work/demo.jsonl"
cp "$demo/hacks/dataset.jsonl" "$work/hacks.jsonl"
cd "$work"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ds in ${OVERHEAD_WORKLOADS:-demo empty}; do
    preds="$demo/predictions.jsonl"
    flags=()
    if [ "$ds" = hacks ]; then
        preds="$demo/hacks/predictions.jsonl"
        flags=(--metric reported --own-timer cpu)
    fi
    # Grading first (not timed here), then the timed perf run reuses it.
    "$root/target/debug/patchgrade" run --dataset "$ds.jsonl" --predictions "$preds" \
        --run-id "oh-$ds" --backend docker --base-image none --cache-level instance >/dev/null 2>&1 || true
    "$root/target/debug/patchgrade" run --dataset "$ds.jsonl" --predictions gold \
        --run-id "oh-$ds" --backend docker --base-image none --cache-level instance >/dev/null 2>&1 || true
    start=$(date +%s.%N)
    "$root/target/debug/patchgrade" perf --dataset "$ds.jsonl" --predictions "$preds" \
        --run-id "oh-$ds" --backend docker --base-image none --repeat "$repeat" --cpuset-cpus 1 \
        "${flags[@]}" --json >"$ds.json" 2>"$ds.stderr"
    end=$(date +%s.%N)
    python3 - "$ds" "$ds.json" "$start" "$end" <<'EOF'
import json, sys
name, path, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
for rec in json.load(open(path))["records"]:
    runs = rec["runs"] + rec["warmups"]
    timed = sum(r["wall_s"] for r in runs) + sum(b["wall_s"] for b in rec["builds"])
    nvar = len(rec["variants"])
    print(f"{name:6} workload: {nvar} variants x ({rec['repeat']} rounds + {rec['warmup']} warm-up) = {len(runs)} runs; "
          f"container {rec['elapsed_s']:.2f} s, timed processes {timed:.2f} s, "
          f"overhead per variant and run {rec['overhead_per_run_s']:.3f} s; "
          f"whole command {end - start:.2f} s (grading reused)")
    cost = [r["integrity_s"] for r in runs if "integrity_s" in r]
    if cost:
        cost.sort()
        print(f"{'':6} defences: per run mean {1000 * sum(cost) / len(cost):.1f} ms, "
              f"median {1000 * cost[len(cost) // 2]:.1f} ms, max {1000 * cost[-1]:.1f} ms; "
              f"wide sweeps {rec.get('sweep', {}).get('elapsed_s', 0):.2f} s per instance")
EOF
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
