#!/usr/bin/env bash
# Peak memory of patchgrade over a long run (not a test): N synthetic
# instances (default 500) of the demo project, gold patches, each a copy of
# the demo's first instance under its own id, with a 64 KiB test log each,
# evaluated on the local backend (BACKEND=docker: the Docker backend, an
# instance image built per id) under /usr/bin/time -v. Prints the peak RSS
# and the wall time. Memory that grows with N (logs kept in records or
# events, memory kept per image build) shows here; the test run itself is
# small on purpose.
#
#   [BACKEND=docker] harness-scripts/bench-memory.sh [N] [extra patchgrade run flags]
set -euo pipefail
n=${1:-500}; shift || true
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PATCHGRADE_BIN:-}
if [ -z "$bin" ]; then
    if [ -x "$here/target/release/patchgrade" ]; then bin=$here/target/release/patchgrade; else bin=$here/target/debug/patchgrade; fi
fi
[ -x "$bin" ] || { echo "bench-memory: build patchgrade first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-memory: needs /usr/bin/time (GNU time)" >&2; exit 2; }
work=$(mktemp -d /tmp/patchgrade-bench-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repos"
cp "$here"/instances/demo/repos/* "$work/repos/"
python3 - "$n" "$here/instances/demo/dataset.jsonl" "$work/dataset.jsonl" <<'EOF'
import json, sys
n, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
row = json.loads(open(src).readline())
# A test that prints 64 KiB, so that a log kept in memory would show.
noisy = ("diff --git a/tests/test_noise.py b/tests/test_noise.py\nnew file mode 100644\n"
         "--- /dev/null\n+++ b/tests/test_noise.py\n@@ -0,0 +1,6 @@\n+import unittest\n+\n+\n"
         "+class TestNoise(unittest.TestCase):\n+    def test_noise(self):\n+        print('x' * 65536)\n")
with open(dst, "w") as out:
    for i in range(n):
        r = dict(row, instance_id=f"patchgrade__demo-calc-mem{i}", test_patch=row["test_patch"] + noisy)
        out.write(json.dumps(r) + "\n")
EOF
cd "$work"
echo "bench-memory: $n instances, binary $bin, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
PATCHGRADE_CACHE=$work/cache /usr/bin/time -v "$bin" run --backend "${BACKEND:-local}" --dataset dataset.jsonl \
    --predictions gold --run-id mem "$@" > run.out 2> run.err || { tail -20 run.err >&2; exit 1; }
grep -E "Maximum resident set size|Elapsed \(wall" run.err
python3 - <<'EOF'
import glob, json, collections
c = collections.Counter(json.load(open(p))["outcome"] for p in glob.glob("logs/run_evaluation/mem/*/*/patchgrade.json"))
print("outcomes:", dict(c))
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
