#!/usr/bin/env bash
# `patchgrade perf` on the SWE-fficiency sympy tasks (instances/swefficiency-sympy),
# measured gold speedup beside the published one (issue 13; docs/perf.md).
#
# Usage: harness-scripts/perf/swefficiency-sympy.sh OUT_DIR [INSTANCE_ID...]
# Env:   MIRRORS  folder with a sympy__sympy clone (required)
#        PATCHGRADE  binary (default target/debug/patchgrade)
#        REPEAT (10), CPUSET (1), METRIC (reported), OWN_TIMER (wall; cpu on a
#        busy machine), RUN_ID (swf-perf), EXTRA (more perf flags)
# The environments are SWE-fficiency's (instances/swefficiency-sympy/specs).
# 1. builds the rows (build_dataset.py); 2. for instances without
# PASS_TO_PASS, one gold `run` and p2p_from_logs.py fill
# instances/swefficiency-sympy/pass_to_pass.json, and the rows are rebuilt;
# 3. one `perf --predictions gold` per instance, one after the other (they
# must not compete for the CPU); 4. the table (swefficiency_summary.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: $0 OUT_DIR [INSTANCE_ID...]}; shift
: "${MIRRORS:?set MIRRORS to a folder holding sympy__sympy}"
pg=${PATCHGRADE:-$root/target/debug/patchgrade}
here=$root/instances/swefficiency-sympy
mkdir -p "$out"
out=$(cd "$out" && pwd)
ds=$out/dataset.jsonl
common=(--backend docker --mirror-dir "$MIRRORS" --log-dir "$out/logs"
    --cache-dir "$out/cache" --specs "$here/specs")
python3 "$here/build_dataset.py" "$MIRRORS/sympy__sympy" "$ds"
ids=("$@")
[[ ${#ids[@]} -gt 0 ]] || mapfile -t ids < <(python3 -c 'import json,sys; [print(t["instance_id"]) for t in json.load(open(sys.argv[1]))["tasks"]]' "$here/tasks.json")

need=()
for id in "${ids[@]}"; do
    python3 -c 'import json,sys,os; p=sys.argv[1]; d=json.load(open(p)) if os.path.exists(p) else {}; sys.exit(0 if sys.argv[2] in d else 1)' \
        "$here/pass_to_pass.json" "$id" || need+=("$id")
done
if [[ ${#need[@]} -gt 0 ]]; then
    echo "== gold run for PASS_TO_PASS: ${need[*]}" >&2
    "$pg" run --dataset "$ds" --predictions gold --run-id swf-p2p --instance-ids "${need[@]}" \
        "${common[@]}" --report-dir "$out" || true
    python3 "$root/harness-scripts/perf/p2p_from_logs.py" "$out/logs/swf-p2p/gold" "$here/pass_to_pass.json"
    python3 "$here/build_dataset.py" "$MIRRORS/sympy__sympy" "$ds"
fi

for id in "${ids[@]}"; do
    echo "== perf $id ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$pg" perf --dataset "$ds" --predictions gold --run-id "${RUN_ID:-swf-perf}" --instance-ids "$id" \
        --repeat "${REPEAT:-10}" --cpuset-cpus "${CPUSET:-1}" --metric "${METRIC:-reported}" \
        --own-timer "${OWN_TIMER:-wall}" ${EXTRA:-} "${common[@]}" --json > "$out/${RUN_ID:-swf-perf}.$id.json" \
        || echo "perf $id: exit $?" >&2
done
mapfile -t recs < <(find "$out/logs/${RUN_ID:-swf-perf}/perf" -name perf.json | sort)
python3 "$root/harness-scripts/perf/swefficiency_summary.py" "$here/tasks.json" "${recs[@]}"
