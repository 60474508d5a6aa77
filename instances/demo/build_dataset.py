"""Writes the demo's dataset.jsonl and predictions.jsonl (called by build.sh).

FAIL_TO_PASS and PASS_TO_PASS come from running the real tests: a test is
FAIL_TO_PASS when it fails at base + test patch and passes at gold + test
patch, PASS_TO_PASS when it passes at both. Ids are normalised the way
patchgrade's `unittest` parser writes them: module.Class.test_name.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

out, base, repo = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
REPO = "patchgrade/demo-calc"
LINE = re.compile(r"^(\w+) \(([\w.]+?)(?:\.\1)?\) \.\.\. (ok|FAIL|ERROR)")

ISSUES = {
    1: ("div(1, 0) raises ZeroDivisionError instead of CalcError",
        "Every other invalid calculation raises `calc.CalcError`, but `div(1, 0)` lets a bare "
        "ZeroDivisionError escape. It should raise CalcError."),
    2: ("evaluate() needs spaces around the operator",
        "`evaluate(\"1+2\")` fails with `ValueError: not enough values to unpack`. "
        "Expressions without spaces, like `1+2` or `2-5`, should work."),
    3: ("mean([]) raises ZeroDivisionError",
        "The mean of an empty list should be 0 rather than an exception."),
    4: ("mul('ab', 1.5) gives a confusing TypeError",
        "Repeating a string a non-integer number of times should raise CalcError with a clear message."),
    5: ("sub() should accept more than two arguments",
        "`sub(10, 1, 2, 3)` should subtract every further argument: 4."),
}


def sh(*args, cwd):
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_files(diff):
    return [m for m in re.findall(r"^diff --git a/\S+ b/(\S+)$", diff, re.M) if m.endswith(".py")]


def run_tests(patches, files):
    with tempfile.TemporaryDirectory() as d:
        sh("git", "worktree", "add", "-q", "--detach", d, base, cwd=repo)
        try:
            for p in patches:
                subprocess.run(["git", "apply", "-"], input=p, text=True, cwd=d, check=True)
            r = subprocess.run([sys.executable, "-m", "unittest", "-v", *files], cwd=d,
                               capture_output=True, text=True)
        finally:
            sh("git", "worktree", "remove", "--force", d, cwd=repo)
    status = {}
    for line in r.stderr.splitlines():
        m = LINE.match(line)
        if m:
            status[f"{m.group(2)}.{m.group(1)}"] = "PASSED" if m.group(3) == "ok" else "FAILED"
    return status


def read(name):
    with open(os.path.join(out, name + ".diff")) as f:
        return f.read()


rows = []
for k in sorted(ISSUES):
    gold, test = read(f"gold{k}"), read(f"test{k}")
    files = test_files(test)
    before = run_tests([test], files)
    after = run_tests([gold, test], files)
    f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    assert f2p, f"instance {k}: no FAIL_TO_PASS test"
    title, body = ISSUES[k]
    rows.append({
        "repo": REPO,
        "instance_id": f"patchgrade__demo-calc-{k}",
        "base_commit": base,
        "patch": gold,
        "test_patch": test,
        "problem_statement": f"{title}\n\n{body}\n",
        "hints_text": "",
        "created_at": f"2024-01-1{k}T09:00:00Z",
        "version": "1.0",
        "environment_setup_commit": base,
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
    })

# Candidate 4 was written against a file that does not look like this one.
not_applying = """diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -20,4 +20,6 @@ def div(a, b):
 def multiply(x, y):
-    return x * y
+    if isinstance(x, str) and isinstance(y, float):
+        raise CalcError("bad repeat")
+    return x * y
"""
preds = [
    (1, read("cand1"), "resolved: a different, correct fix"),
    (2, read("cand2"), "unresolved: one FAIL_TO_PASS test still fails"),
    (3, read("cand3"), "unresolved: fixes the issue but breaks a PASS_TO_PASS test"),
    (4, not_applying, "patch_apply_failed: written against other code"),
    (5, "", "empty_patch: the agent gave up"),
]
with open(os.path.join(here, "dataset.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
with open(os.path.join(here, "predictions.jsonl"), "w") as f:
    for k, patch, expect in preds:
        f.write(json.dumps({"instance_id": f"patchgrade__demo-calc-{k}", "model_name_or_path": "demo-agent",
                            "model_patch": patch, "expected_outcome": expect.split(":")[0]}) + "\n")
