#!/usr/bin/env bash
# Measures the future-copy check (src/audit/future) on real mirrors: one
# row per prediction (tab-separated, stdout) and the counts with the rule
# and with its share condition alone (stderr). See docs/audit.md, "Copies
# of the future".
#
# Usage: harness-scripts/measure-future.sh DATASET.jsonl MIRRORS_DIR [PREDICTIONS|gold]
# e.g.   harness-scripts/measure-future.sh /work/shared/data/swebench-multilingual/test.jsonl /work/mirrors
#        harness-scripts/measure-future.sh lite/test.jsonl /work/mirrors all_preds.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
export PATCHGRADE_FUTURE_DATASET="$1" PATCHGRADE_MIRRORS="$2" PATCHGRADE_FUTURE_PREDS="${3:-gold}"
cargo test --release --test audit -- --ignored --nocapture --test-threads 1 measure_future_copy
