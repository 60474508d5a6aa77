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

# A small repository: a function with a bug, its fix, a test that catches it.
mkdir -p mirrors/bench__calc && cd mirrors/bench__calc
git init -q && git config user.email b@b && git config user.name b
mkdir -p calc tests
printf '' > calc/__init__.py; printf '' > tests/__init__.py
printf 'def add(a, b):\n    return a - b\n' > calc/ops.py
printf 'import unittest\nfrom calc.ops import add\n\n\nclass T(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > tests/test_ops.py
git add -A && git commit -qm base
base=$(git rev-parse HEAD)
printf 'def add(a, b):\n    return a + b\n' > calc/ops.py
gold=$(git diff); git checkout -q -- .
printf '\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n' >> tests/test_ops.py
test_patch=$(git diff); git checkout -q -- .
cd "$work"

python3 - "$n" "$base" "$gold" "$test_patch" <<'EOF'
import json, sys
n, base, gold, tp = int(sys.argv[1]), sys.argv[2], sys.argv[3] + "\n", sys.argv[4] + "\n"
with open("dataset.jsonl", "w") as d, open("preds.jsonl", "w") as p:
    for i in range(n):
        iid = f"bench__calc-{i}"
        d.write(json.dumps({"instance_id": iid, "repo": "bench/calc", "base_commit": base, "patch": gold,
            "test_patch": tp, "problem_statement": "", "hints_text": "", "version": "1.0",
            "environment_setup_commit": base, "FAIL_TO_PASS": ["tests.test_ops.T.test_add"],
            "PASS_TO_PASS": ["tests.test_ops.T.test_zero"], "created_at": "2024-01-01"}) + "\n")
        p.write(json.dumps({"instance_id": iid, "model_name_or_path": "bench", "model_patch": gold}) + "\n")
EOF
mkdir -p specs
cat > specs/calc.yaml <<'EOF'
repo: bench/calc
versions:
  "*":
    python: "3.11"
    test_cmd: time python3 -m unittest -v
    log_parser: unittest
    env:
      TIMEFORMAT: "PATCHGRADE_TEST_SECONDS=%R"
EOF

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
