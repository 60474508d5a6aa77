#!/usr/bin/env bash
# Warm-by-default benchmark (not a test): the same instances run twice with
# default flags (no --cache-level), the second time as new predictions (a new
# run id; nothing is reused but the images), at 1 and then 2 workers.
#
#   harness-scripts/bench-warm.sh [N]                         N fixture instances (default 5)
#   harness-scripts/bench-warm.sh --lite DATASET MIRRORS ID...  real SWE-bench instances, gold
#
# MIRRORS holds <owner>__<name> clones; DATASET is a SWE-bench .jsonl.
# Prints per instance and in total: patchgrade's wall time for it (the
# record's timings.total), the test command's own time (bash `time` around
# it, through a --specs copy of the built-in spec whose test_cmd is timed;
# test_cmd is in no image's tag, so the images are the built-in spec's),
# the overhead between them, the container phases, and
# `docker run --rm IMAGE true` on the same instance image as the floor.
# The first (cold) run's wall time is printed too. BENCH_CACHE keeps the
# cache folder between invocations (default: a fresh one: mirrors imported
# and the index started in the cold run). BENCH_KEEP=1 keeps the work folder
# (run folders, eval scripts, logs).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PATCHGRADE_BIN:-}
if [ -z "$bin" ]; then
    if [ -x "$here/target/release/patchgrade" ]; then bin=$here/target/release/patchgrade; else bin=$here/target/debug/patchgrade; fi
fi
bin=$(realpath "$bin" 2>/dev/null || echo "$bin")
[ -x "$bin" ] || { echo "bench-warm: build patchgrade first (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d /tmp/patchgrade-bench-warm.XXXXXX)
if [ -n "${BENCH_KEEP:-}" ]; then echo "bench-warm: keeping $work" >&2; else trap 'rm -rf "$work"' EXIT; fi
cache=${BENCH_CACHE:-$work/cache}
ids=()

if [ "${1:-}" = "--lite" ]; then
    [ $# -ge 4 ] || { echo "usage: $0 --lite DATASET MIRRORS ID..." >&2; exit 2; }
    dataset=$(realpath "$2"); mirrors=$(realpath "$3"); shift 3; ids=("$@")
    cd "$work"
    preds=gold
else
    n=${1:-5}
    cd "$work"
    mirrors=$work/mirrors
    mkdir -p mirrors/bench__calc && (
        cd mirrors/bench__calc
        git init -q && git config user.email b@b && git config user.name b
        mkdir -p calc tests
        printf '' > calc/__init__.py; printf '' > tests/__init__.py
        printf 'def add(a, b):\n    return a - b\n' > calc/ops.py
        printf 'import unittest\nfrom calc.ops import add\n\n\nclass T(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > tests/test_ops.py
        git add -A && git commit -qm base
    )
    base=$(git -C mirrors/bench__calc rev-parse HEAD)
    python3 - "$n" "$base" <<'EOF'
import json, sys
n, base = int(sys.argv[1]), sys.argv[2]
gold = ("diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
        "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
tp = ("diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n"
      "@@ -6,2 +6,5 @@ class T(unittest.TestCase):\n     def test_zero(self):\n         self.assertEqual(add(0, 0), 0)\n"
      "+\n+    def test_add(self):\n+        self.assertEqual(add(2, 3), 5)\n")
with open("dataset.jsonl", "w") as d:
    for i in range(n):
        d.write(json.dumps({"instance_id": f"bench__calc-warm{i}", "repo": "bench/calc", "base_commit": base,
            "patch": gold, "test_patch": tp, "problem_statement": "", "hints_text": "", "version": "1.0",
            "environment_setup_commit": base, "FAIL_TO_PASS": ["tests.test_ops.T.test_add"],
            "PASS_TO_PASS": ["tests.test_ops.T.test_zero"], "created_at": "2024-01-01"}) + "\n")
EOF
    dataset=$work/dataset.jsonl
    preds=gold
    mapfile -t ids < <(python3 -c "import json;[print(json.loads(l)['instance_id']) for l in open('$dataset')]")
    mkdir -p specs-src
    printf 'repo: bench/calc\nversions:\n  "*":\n    python: "3.11"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n' > specs-src/bench__calc.yaml
fi

# The specs with the test command timed (same images: test_cmd is in no tag).
mkdir -p specs
python3 - "$dataset" "$here/images/specs" "$work/specs-src" "$work/specs" <<'EOF'
import json, os, sys, yaml
dataset, builtin, extra, out = sys.argv[1:]
repos = {json.loads(l)["repo"] for l in open(dataset) if l.strip()}
for repo in repos:
    name = repo.replace("/", "__") + ".yaml"
    src = next((p for p in (os.path.join(extra, name), os.path.join(builtin, name)) if os.path.exists(p)), None)
    if src is None:
        sys.exit(f"bench-warm: no spec for {repo}")
    spec = yaml.safe_load(open(src))
    for sec in [spec.get("defaults") or {}] + list((spec.get("versions") or {}).values()):
        if sec and sec.get("test_cmd"):
            sec["test_cmd"] = "TIMEFORMAT=PATCHGRADE_TEST_SECONDS=%R; time " + sec["test_cmd"]
    yaml.safe_dump(spec, open(os.path.join(out, name), "w"), sort_keys=False)
EOF

run() {
    local id=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    local timer=()
    [ -x /usr/bin/time ] && timer=(/usr/bin/time -f %M -o "$id.rss")
    PATCHGRADE_CACHE=$cache "${timer[@]}" "$bin" run --backend docker --dataset "$dataset" --predictions "$preds" \
        --instance-ids "${ids[@]}" --run-id "$id" --specs specs --mirror-dir "$mirrors" "$@" > "$id.out" 2> "$id.err" \
        || { echo "bench-warm: run $id failed:" >&2; tail -20 "$id.err" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t0 $t1" > "$id.wall"
}

report() {
    local id=$1
    python3 - "$id" <<'EOF'
import glob, json, re, statistics, subprocess, sys, time
rid = sys.argv[1]
t0, t1 = map(float, open(f"{rid}.wall").read().split())
rows = []
for rec_path in sorted(glob.glob(f"logs/run_evaluation/{rid}/*/*/patchgrade.json")):
    rec = json.load(open(rec_path))
    log = open(rec_path.replace("patchgrade.json", "test_output.txt"), errors="replace").read()
    m = re.search(r"^PATCHGRADE_TEST_SECONDS=([0-9.]+)", log, re.M)
    test = float(m.group(1)) if m else float("nan")
    image = (rec.get("environment") or "").split()[1] if rec.get("environment") else None
    floor = float("nan")
    if image:
        runs = []
        for _ in range(3):
            s = time.time()
            subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
            runs.append(time.time() - s)
        floor = statistics.median(runs)
    t = rec["timings"]
    c = t.get("container") or {}
    rows.append((rec["instance_id"], rec["outcome"], t["total"], test, floor, t["checkout"], t["env"], t["apply"], c))
rss = open(f"{rid}.rss").read().split()[-1] if __import__("os").path.exists(f"{rid}.rss") else "?"
print(f"== {rid}: wall {t1 - t0:.2f}s for {len(rows)} instances; patchgrade peak RSS {rss} KiB")
print(f"{'instance':40} {'outcome':10} {'total':>6} {'test':>6} {'overh':>6} {'floor':>6} {'o-fl':>6}  checkout env apply | archive create upload attach start run")
for iid, out, total, test, floor, co, env, ap, c in rows:
    ph = " ".join(f"{c.get(k, 0):.3f}" for k in ("archive", "create", "upload", "attach", "start", "run"))
    print(f"{iid:40} {out:10} {total:6.2f} {test:6.2f} {total - test:6.2f} {floor:6.2f} {total - test - floor:6.2f}  {co:.3f} {env:.3f} {ap:.3f} | {ph}")
tot = sum(r[2] for r in rows); tt = sum(r[3] for r in rows); fl = sum(r[4] for r in rows)
print(f"{'sum':40} {'':10} {tot:6.2f} {tt:6.2f} {tot - tt:6.2f} {fl:6.2f} {tot - tt - fl:6.2f}")
EOF
}

echo "bench-warm: ${#ids[@]} instances, binary $bin, $(nproc) cores, docker $(docker version --format '{{.Server.Version}}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
run cold --max-workers 2
echo "== cold (first run, --max-workers 2): wall $(python3 -c "a,b=map(float,open('cold.wall').read().split());print(f'{b-a:.1f}')")s; $(grep '^images:' cold.err || true)"
for w in ${BENCH_WORKERS:-1 2}; do
    run "warm$w" --max-workers "$w"
    report "warm$w"
    grep -h '^images:\|^image cache:' "warm$w.err" || true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# The fixture's instance images are this benchmark's own: not left behind.
if [ -z "${BENCH_KEEP:-}" ] && [ "${preds}" = gold ] && [ -d "$work/specs-src" ]; then
    docker images --format '{{.Repository}}:{{.Tag}}' 'patchgrade.eval.*.bench__calc-warm*' | xargs -r docker rmi >/dev/null || true
fi
