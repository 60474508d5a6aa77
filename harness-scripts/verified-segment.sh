#!/bin/bash
# One resumable segment of a gold run on SWE-bench Verified (issue 12) or
# Multilingual (issue 21).
#
#   harness-scripts/verified-segment.sh NAME IDS_FILE [more `run` options]
#
# Every segment uses the same run id, log folder and cache, so finished
# results are reused and running a segment again continues it. Each one is
# wrapped in /usr/bin/time -v (peak RSS) and appends a line to
# $ROOT/segments.tsv: name, start, end, wall seconds, peak RSS (KiB), exit
# code, instances, load average at start and end, free disk at the end,
# patchgrade's own peak RSS (KiB, VmHWM sampled each second).
#
# Environment (defaults in brackets):
#   PATCHGRADE  the binary [target/debug/patchgrade]
#   DATASET     the Verified jsonl [required]
#   MIRRORS     --mirror-dir [required]
#   ROOT        log root: logs, reports, cache, segment logs [required]
#   RUN_ID      [verified-gold]   PREDICTIONS [gold]   WORKERS [1]
#   COMMAND     [run], or validate (no --predictions; give --gold-runs)
#   SPECS       the spec folder [images/specs]. The run uses a copy in
#               $ROOT/specs-timed whose test_cmd is timed with bash `time`
#               (`PATCHGRADE_TEST_SECONDS=` in each test_output.txt: the
#               test command's own time; a command run with
#               `test_directives: none`, such as Multilingual's `a && b`
#               chains, is timed whole in braces). test_cmd is in no image's
#               tag, so the images are those of the specs as they are.
set -euo pipefail
name=${1:?segment name}
ids_file=${2:?file of instance ids, one per line}
shift 2
: "${DATASET:?}" "${MIRRORS:?}" "${ROOT:?}"
bin=${PATCHGRADE:-target/debug/patchgrade}
run_id=${RUN_ID:-verified-gold}
mkdir -p "$ROOT/segments"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log="$ROOT/segments/$name-$stamp.log"
mapfile -t ids < <(grep -v '^\s*$' "$ids_file")
rm -rf "$ROOT/specs-timed"
mkdir -p "$ROOT/specs-timed"
python3 - "${SPECS:-images/specs}" "$ROOT/specs-timed" <<'PY'
import os, sys, yaml
src, out = sys.argv[1:]
for name in sorted(os.listdir(src)):
    if not name.endswith(".yaml"):
        continue
    spec = yaml.safe_load(open(os.path.join(src, name)))
    defaults = spec.get("defaults") or {}
    for sec in [defaults] + list((spec.get("versions") or {}).values()):
        if sec and sec.get("test_cmd"):
            cmd = sec["test_cmd"]
            # No directives follow the command: time the whole list.
            if sec.get("test_directives", defaults.get("test_directives")) == "none":
                cmd = "{ " + cmd + "\n}"
            sec["test_cmd"] = "TIMEFORMAT=PATCHGRADE_TEST_SECONDS=%R; time " + cmd
    yaml.safe_dump(spec, open(os.path.join(out, name), "w"), sort_keys=False)
PY
specs=(--specs "$ROOT/specs-timed")
# With the scheduler's autogroups on, `nice` orders processes only within
# one session: a niced build started elsewhere (setsid, another shell)
# takes an equal share of the cores from this segment (session 28: 27% of
# the CPU during astropy's). Said before the segment starts; to work
# beside a segment: echo 0 > /proc/sys/kernel/sched_autogroup_enabled
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
    echo "note: autogroup scheduling is on: niced work elsewhere is not kept off this segment's cores"
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
set +e
command=${COMMAND:-run}
predictions=()
[ "$command" = run ] && predictions=(--predictions "${PREDICTIONS:-gold}")
/usr/bin/time -v -o "$log.time" "$bin" "$command" --dataset "$DATASET" \
    "${predictions[@]}" --run-id "$run_id" --backend docker \
    --mirror-dir "$MIRRORS" --log-dir "$ROOT/logs" --report-dir "$ROOT" \
    --cache-dir "$ROOT/cache" --max-workers "${WORKERS:-1}" "${specs[@]}" "$@" \
    --instance-ids "${ids[@]}" >"$log" 2>&1 &
timer=$!
# time -v's figure is the largest of patchgrade and every child it waited
# for (git clone, bootstrap scripts); VmHWM is patchgrade's own peak.
own=0
while kill -0 "$timer" 2>/dev/null; do
    pid=$(pgrep -P "$timer" | head -1 || true)
    if [ -n "$pid" ]; then
        hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        [ -n "$hwm" ] && own=$hwm
    fi
    sleep 1
done
wait "$timer"
rc=$?
set -e
t1=$(date +%s)
rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log.time")
free=$(df -P / | awk 'NR == 2 {print $4}')
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" \
    "$(date -u -d @"$t0" +%FT%TZ)" "$(date -u -d @"$t1" +%FT%TZ)" $((t1 - t0)) \
    "$rss" "$rc" "${#ids[@]}" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "${free}K" "$own" \
    >>"$ROOT/segments.tsv"
echo "segment $name: exit $rc, $((t1 - t0)) s, peak RSS ${rss} KiB (patchgrade alone ${own} KiB); log $log"
exit "$rc"
