#!/usr/bin/env bash
# Measures `audit --dataset --predictions` (the static audit of a whole
# submission, no Docker: review::submission) on SWE-bench Lite, release
# build: wall time and counts for the 300 gold patches, and for a real
# submission's predictions when given, with and without hints.
#
# Usage: harness-scripts/bench-static-audit.sh [lite/test.jsonl [predictions.jsonl]]
# Default data: ../shared/data/swebench-lite/test.jsonl beside the repo.
# PATCHGRADE_BENCH_VERBOSE=1 lists every finding.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATCHGRADE_LITE="${1:-../shared/data/swebench-lite/test.jsonl}"
if [ $# -gt 1 ]; then
    export PATCHGRADE_PREDICTIONS="$2"
fi
cargo test --release --test review -- --ignored --nocapture --test-threads 1 \
    bench_submission_audit_lite
