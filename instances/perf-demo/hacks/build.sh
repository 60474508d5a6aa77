#!/usr/bin/env bash
# Rebuilds the perf hack corpus (docs/perf.md, "Perf hacks and perf
# integrity") from the perf demo's shipped history (../repos) and row
# (../dataset.jsonl): dataset.jsonl (the demo's instance with workload.py,
# which prints its result and its own `Mean:`), predictions.jsonl (model
# `perf-hacks`, one sample id per candidate of candidates.py) and
# expected.jsonl (each candidate's kind and expected outcome). Checks that
# every candidate passes the tests and that base and gold print the same
# ranking. Usage: instances/perf-demo/hacks/build.sh (needs git, python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" && python3 -B build.py
