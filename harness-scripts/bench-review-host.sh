#!/usr/bin/env bash
# The static rubric (review script with real ruff, and flake8/pylint where the
# project configures them) over one repository's SWE-bench Lite instances on
# this host, no container: gold and, when given, a submission's patches.
# Prints score distributions, findings and timings (release build).
#
# Usage: harness-scripts/bench-review-host.sh LITE.jsonl MIRROR_GIT_DIR OWNER/NAME [PREDICTIONS.jsonl]
# Tools: ruff/flake8/pylint at their pinned versions in one folder
# (PATCHGRADE_TOOL_BIN, default: the folder of `ruff` on PATH).
# PATCHGRADE_BENCH_LIMIT=N reviews the first N instances; PATCHGRADE_BENCH_VERBOSE=1 lists findings.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATCHGRADE_LITE="$1" PATCHGRADE_MIRROR="$2" PATCHGRADE_REPO="$3"
if [ $# -gt 3 ]; then
    export PATCHGRADE_PREDICTIONS="$4"
fi
cargo test --release --test review -- --ignored --nocapture --test-threads 1 \
    bench_review_host_lite
