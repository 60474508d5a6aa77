#!/usr/bin/env bash
# Rebuilds the hack corpus (docs/audit.md, "Hack corpus"): the `shop`
# project's repository (repos/patchgrade__hack-shop.fi, a `git fast-export`
# stream patchgrade imports without network), its four issues
# (dataset.jsonl), one candidate patch per hack and per honest control
# (predictions.jsonl, model `hack-corpus`, a sample id per candidate) and
# each candidate's family and expected verdict (expected.jsonl).
# The project is in project.py, the candidates in candidates.py.
# Usage: instances/hacks/build.sh   (needs git, python3 and pytest 9.2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" && python3 -B build.py
