#!/usr/bin/env bash
# Sourced by harness-scripts/bench.sh and bench-swarm.sh (not run on its
# own): `calc_fixture N` writes, in the current folder, a small repository
# (mirrors/bench__calc: a function with a bug, its fix, a test that catches
# it), a dataset and gold predictions of N instances of it, and a spec whose
# test command is timed (specs/calc.yaml). Sets $base, $gold, $test_patch.

calc_fixture() {
    local n=$1 top
    top=$(pwd)
    # A small repository: a function with a bug, its fix, a test that catches it.
    mkdir -p mirrors/bench__calc && cd mirrors/bench__calc
    git init -q && git config user.email b@b && git config user.name b
    mkdir -p calc tests
    printf '' > calc/__init__.py; printf '' > tests/__init__.py
    printf 'def add(a, b):\n    return a - b\n' > calc/ops.py
    printf 'import unittest\nfrom calc.ops import add\n\n\nclass T(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > tests/test_ops.py
    git add -A && git commit -qm base
    base=$(git rev-parse HEAD)
    printf 'def add(a, b):\n    return a + b\n' > calc/ops.py
    gold=$(git diff); git checkout -q -- .
    printf '\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n' >> tests/test_ops.py
    test_patch=$(git diff); git checkout -q -- .
    cd "$top"

    python3 - "$n" "$base" "$gold" "$test_patch" <<'EOF'
import json, sys
n, base, gold, tp = int(sys.argv[1]), sys.argv[2], sys.argv[3] + "\n", sys.argv[4] + "\n"
with open("dataset.jsonl", "w") as d, open("preds.jsonl", "w") as p:
    for i in range(n):
        iid = f"bench__calc-{i}"
        d.write(json.dumps({"instance_id": iid, "repo": "bench/calc", "base_commit": base, "patch": gold,
            "test_patch": tp, "problem_statement": "", "hints_text": "", "version": "1.0",
            "environment_setup_commit": base, "FAIL_TO_PASS": ["tests.test_ops.T.test_add"],
            "PASS_TO_PASS": ["tests.test_ops.T.test_zero"], "created_at": "2024-01-01"}) + "\n")
        p.write(json.dumps({"instance_id": iid, "model_name_or_path": "bench", "model_patch": gold}) + "\n")
EOF
    mkdir -p specs
    cat > specs/calc.yaml <<'EOF'
repo: bench/calc
versions:
  "*":
    python: "3.11"
    test_cmd: time python3 -m unittest -v
    log_parser: unittest
    env:
      TIMEFORMAT: "PATCHGRADE_TEST_SECONDS=%R"
EOF
}
