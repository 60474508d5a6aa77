#!/usr/bin/env bash
# Swarm backend benchmark (not a test): per-evaluation overhead of
# `--backend swarm` against `--backend docker` on the same N small instances,
# warm image caches, --max-workers 1.
#
#   harness-scripts/bench-swarm.sh [N]     (default N=8; needs root, dockerd,
#                                          nsenter, ip, docker-registry)
#   BENCH_KEEP=1 keeps the work folder (run folders, each run's stderr).
#
# The swarm is a one-node swarm of a private dockerd in a network namespace
# made here (own socket, data-root, exec-root; the machine's engine never
# enters swarm mode), with Debian's docker-registry on its loopback and the
# base images copied from the machine's engine (docker save | load).
#
# Per evaluation: "backend" is the record's timings.tests (docker: container
# create -> removed; swarm: configs, service, task run, logs, removal) minus
# the test command's own time (bash `time` in the eval script). The first
# run of each backend builds (and for swarm pushes) the images and is not
# counted; the measured runs are --force reruns.
set -euo pipefail
n=${1:-8}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PATCHGRADE_BIN:-}
if [ -z "$bin" ]; then
    if [ -x "$here/target/release/patchgrade" ]; then bin=$here/target/release/patchgrade; else bin=$here/target/debug/patchgrade; fi
fi
bin=$(realpath "$bin" 2>/dev/null || echo "$bin")
[ -x "$bin" ] || { echo "bench-swarm: build patchgrade first (cargo build --release)" >&2; exit 2; }
for tool in dockerd nsenter ip /usr/bin/docker-registry; do
    command -v "$tool" >/dev/null || { echo "bench-swarm: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench-swarm: needs root (network namespace, dockerd)" >&2; exit 2; }

work=$(mktemp -d /tmp/patchgrade-bench-swarm.XXXXXX)
ns=pgbench$$
sock=unix://$work/engine/d.sock
reg=127.0.0.1:15090
dockerd_pid= registry_pid=
cleanup() {
    [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null || true
        for _ in $(seq 1 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    fi
    ip netns del "$ns" 2>/dev/null || true
    grep -o " $work[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    if [ -n "${BENCH_KEEP:-}" ]; then echo "bench-swarm: keeping $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
cd "$work"

. "$here/harness-scripts/bench-fixture.sh"
calc_fixture "$n"

# run ID BACKEND [DOCKER_HOST] -- ARGS: one patchgrade run; prints its figures.
run() {
    local id=$1 backend=$2 host=$3; shift 3
    local t0 t1
    t0=$(date +%s.%N)
    (if [ -n "$host" ]; then export DOCKER_HOST=$host; else unset DOCKER_HOST; fi
     PATCHGRADE_CACHE=$work/cache "$bin" run --backend "$backend" --dataset dataset.jsonl --predictions preds.jsonl \
        --run-id "$id" --specs specs --mirror-dir mirrors --base-image none --cache-level instance \
        --cpus 1 --memory 1g --max-workers 1 "$@" > "$id.out" 2> "$id.err") \
        || { echo "bench-swarm: run $id failed:" >&2; tail -20 "$id.err" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 - "$id" "$t0" "$t1" "$n" <<'EOF'
import glob, json, re, statistics, sys
rid, t0, t1, n = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
total, backend, tests, outcomes = [], [], [], {}
for rec_path in glob.glob(f"logs/run_evaluation/{rid}/bench/*/patchgrade.json"):
    rec = json.load(open(rec_path))
    outcomes[rec["outcome"]] = outcomes.get(rec["outcome"], 0) + 1
    log = open(rec_path.replace("patchgrade.json", "test_output.txt")).read()
    m = re.search(r"^PATCHGRADE_TEST_SECONDS=([0-9.]+)", log, re.M)
    t = float(m.group(1)) if m else 0.0
    tests.append(t)
    total.append(rec["timings"]["total"] - t)
    backend.append(rec["timings"]["tests"] - t)
json.dump({"backend": statistics.mean(backend), "total": statistics.mean(total)}, open(f"{rid}.json", "w"))
wall = t1 - t0
print(f"{rid:12} n={n:<3} wall {wall:6.2f}s ({wall / n:5.2f}s/evaluation)  overhead/evaluation: "
      f"backend mean {statistics.mean(backend):.3f}s median {statistics.median(backend):.3f}s max {max(backend):.3f}s; "
      f"whole evaluation mean {statistics.mean(total):.3f}s  test command median {statistics.median(tests):.3f}s  {outcomes}")
EOF
}

echo "bench-swarm: $n instances, binary $bin, $(nproc) cores, docker $(docker version --format '{{.Server.Version}}')"
run dk-warmup docker "" >/dev/null
run docker docker "" --force

# The base images the instance images were built from, for the private engine.
img=$(python3 -c "import json;print(json.load(open('logs/run_evaluation/docker/bench/bench__calc-0/patchgrade.json'))['environment'].split()[1])")
names=()
id=$(docker image inspect --format '{{.Parent}}' "$img")
while [ -n "$id" ]; do
    while read -r name; do [[ $name == patchgrade.* ]] && names+=("$name"); done \
        < <(docker images --no-trunc --format '{{.ID}} {{.Repository}}:{{.Tag}}' | awk -v id="$id" '$1 == id {print $2}')
    id=$(docker image inspect --format '{{.Parent}}' "$id")
done
docker save -o images.tar "${names[@]}"
for i in $(seq 0 $((n - 1))); do docker rmi -f "$(docker images --format '{{.Repository}}:{{.Tag}}' "patchgrade.eval.*.bench__calc-$i" | head -1)" >/dev/null 2>&1 || true; done

# A one-node swarm in a namespace of its own, and a registry on its loopback.
ip netns add "$ns"; ip -n "$ns" link set lo up
ip -n "$ns" link add pgbench0 type dummy 2>/dev/null || ip -n "$ns" link add pgbench0 type bridge
ip -n "$ns" addr add 10.241.0.1/24 dev pgbench0; ip -n "$ns" link set pgbench0 up
mkdir -p engine registry
nsenter --net=/var/run/netns/$ns dockerd -H "$sock" --data-root "$work/engine/data" --exec-root "$work/engine/exec" \
    --pidfile "$work/engine/d.pid" --bridge=none --iptables=false --ip-masq=false \
    --default-address-pool base=10.242.0.0/16,size=24 > engine/dockerd.log 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 60); do docker -H "$sock" version >/dev/null 2>&1 && break; sleep 0.5; done
docker -H "$sock" swarm init --advertise-addr 10.241.0.1 --default-addr-pool 10.243.0.0/16 >/dev/null
docker -H "$sock" load -q -i images.tar >/dev/null
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
    "$work/registry/store" "$reg" > registry/config.yml
nsenter --net=/var/run/netns/$ns /usr/bin/docker-registry serve registry/config.yml > registry/log 2>&1 &
registry_pid=$!
for _ in $(seq 1 60); do nsenter --net=/var/run/netns/$ns bash -c "echo > /dev/tcp/${reg%:*}/${reg#*:}" 2>/dev/null && break; sleep 0.2; done

run sw-warmup swarm "$sock" --registry "$reg" >/dev/null
run swarm swarm "$sock" --registry "$reg" --force
python3 - <<'EOF'
import json
d, s = json.load(open("docker.json")), json.load(open("swarm.json"))
print(f"swarm - docker, per evaluation: backend {s['backend'] - d['backend']:+.3f}s, "
      f"whole evaluation {s['total'] - d['total']:+.3f}s (target: <= +1 s)")
EOF
