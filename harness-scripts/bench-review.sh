#!/usr/bin/env bash
# Measures `patchgrade review` (the static rubric in the instances'
# containers) warm: a first run builds what is missing (instance images, the
# tools in the cache), the second is timed. Prints patches reviewed, wall
# time and seconds per patch (debug build, as the tests use).
#
# Usage: harness-scripts/bench-review.sh [DATASET PREDICTIONS MIRROR_DIR [review flags...]]
#   e.g. after `patchgrade run ... --run-id R`: ... --run-id R --resolved-only
# Without arguments: a fixture repository with gold and a patch with planted
# problems, 50 samples each (100 reviews).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q
BIN="$PWD/target/debug/patchgrade"
WORK=$(mktemp -d /tmp/pg-bench-review.XXXXXX)
export PATCHGRADE_CACHE="$WORK/cache"
if [ $# -ge 3 ]; then
    DATASET=$(realpath "$1"); PREDS=$(realpath "$2"); MIRRORS=$(realpath "$3"); shift 3
    EXTRA=("$@")
    SPECS=()
else
    R="$WORK/mirrors/acme__review"
    mkdir -p "$R/pkg" "$WORK/specs"
    git -C "$R" init -q
    printf '"""Clamp helpers."""\n\n\ndef clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef describe(x):\n    import os\n    return "value %%s" %% x\n' > "$R/pkg/mod.py"
    : > "$R/pkg/__init__.py"
    git -C "$R" add -A && git -C "$R" -c user.name=b -c user.email=b@b commit -qm base
    BASE=$(git -C "$R" rev-parse HEAD)
    sed -i 's/    return max(lo, x)/    return min(hi, max(lo, x))/' "$R/pkg/mod.py"
    GOLD=$(git -C "$R" diff)
    sed -i 's/    return min(hi, max(lo, x))/    print("clamp", x)\n    unused = hi\n    return min(hi, max(lo, x))/' "$R/pkg/mod.py"
    AGENT=$(git -C "$R" diff)
    git -C "$R" checkout -q -- .
    printf 'repo: acme/review\nversions:\n  "*":\n    test_cmd: "true"\n    log_parser: pytest\n' > "$WORK/specs/review.yaml"
    python3 - "$WORK" "$BASE" "$GOLD" "$AGENT" <<'PY'
import json, sys
work, base, gold, agent = sys.argv[1:5]
inst = {"instance_id": "review-1", "repo": "acme/review", "base_commit": base, "patch": gold + "\n",
        "test_patch": "", "problem_statement": "clamp ignores hi", "hints_text": "", "version": "1.0",
        "environment_setup_commit": base, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
open(f"{work}/dataset.jsonl", "w").write(json.dumps(inst) + "\n")
with open(f"{work}/preds.jsonl", "w") as f:
    for i in range(50):
        for model, patch in (("gold", gold), ("agent", agent)):
            f.write(json.dumps({"instance_id": "review-1", "model_name_or_path": model,
                                "model_patch": patch + "\n", "sample_id": str(i)}) + "\n")
PY
    DATASET="$WORK/dataset.jsonl"; PREDS="$WORK/preds.jsonl"; MIRRORS="$WORK/mirrors"
    SPECS=(--specs "$WORK/specs")
    EXTRA=(--run-id bench)
fi
cd "$WORK"
run() {
    "$BIN" review --dataset "$DATASET" --predictions "$PREDS" --mirror-dir "$MIRRORS" \
        --backend docker --base-image none "${SPECS[@]}" "${EXTRA[@]}" "$@"
}
echo "cold run (builds what is missing)..."
run >/dev/null 2>cold.log || { tail -20 cold.log; exit 1; }
t0=$(date +%s.%N)
run 2>warm.log >/dev/null
t1=$(date +%s.%N)
n=$(grep -cE '  score [0-9]+' warm.log || true)
python3 -c "import sys; n=int(sys.argv[1]); s=float(sys.argv[3])-float(sys.argv[2]); print(f'warm: {n} patches reviewed in {s:.1f} s ({s/max(n,1):.2f} s per patch)')" "$n" "$t0" "$t1"
grep -A5 '^model ' warm.log || true
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); work folder $WORK"
