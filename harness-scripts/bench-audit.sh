#!/usr/bin/env bash
# Measures the static audit checks on real SWE-bench Lite data (release
# build): per-instance cost over all 300 gold patches, and the leakage
# calibration behind the thresholds in docs/audit.md (gold-patch scores with
# the Agentless "solution in description" labels, one row per instance).
#
# Usage: harness-scripts/bench-audit.sh [path/to/swebench-lite/test.jsonl]
# Default data: tests/fixtures/swebench-lite/test.jsonl (a copy of Lite).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
    export PATCHGRADE_LITE="$1"
fi
cargo test --release --test audit -- --ignored --nocapture --test-threads 1 \
    bench_static_audit_lite calibrate_leakage_lite
