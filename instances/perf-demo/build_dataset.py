"""Writes the perf demo's dataset.jsonl and predictions.jsonl (called by
build.sh).

FAIL_TO_PASS and PASS_TO_PASS come from running the real tests: a test is
FAIL_TO_PASS when it fails at base + test patch and passes at gold + test
patch, PASS_TO_PASS when it passes at both. Ids are normalised the way
patchgrade's `unittest` parser writes them: module.Class.test_name. The
candidates are checked too: a and b pass every test, c fails FAIL_TO_PASS.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

out, base, repo = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
REPO = "patchgrade/demo-perf"
LINE = re.compile(r"^(\w+) \(([\w.]+?)(?:\.\1)?\) \.\.\. (ok|FAIL|ERROR)")


def sh(*args, cwd):
    return subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def run_tests(patches):
    with tempfile.TemporaryDirectory() as d:
        sh("git", "worktree", "add", "-q", "--detach", d, base, cwd=repo)
        try:
            for p in patches:
                subprocess.run(["git", "apply", "-"], input=p, universal_newlines=True,
                               cwd=d, check=True)
            r = subprocess.run([sys.executable, "-m", "unittest", "-v", "tests/test_core.py"],
                               cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
        finally:
            sh("git", "worktree", "remove", "--force", d, cwd=repo)
    status = {}
    for line in r.stderr.splitlines():
        m = LINE.match(line)
        if m:
            status["%s.%s" % (m.group(2), m.group(1))] = "PASSED" if m.group(3) == "ok" else "FAILED"
    return status


def read(name):
    with open(os.path.join(out, name + ".diff")) as f:
        return f.read()


gold, test = read("gold"), read("test")
before = run_tests([test])
after = run_tests([gold, test])
f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
assert f2p and p2p, (before, after)

expect = {"a": "faster", "b": "slower", "c": "not credited"}
for k in expect:
    st = run_tests([read("cand_" + k), test])
    passes = all(st.get(t) == "PASSED" for t in f2p + p2p)
    assert passes == (k != "c"), (k, st)
    if k == "c":
        assert all(st.get(t) == "FAILED" for t in f2p), st

with open(os.path.join(here, "workload.py")) as f:
    workload = f.read()
row = {
    "repo": REPO,
    "instance_id": "patchgrade__demo-perf-1",
    "base_commit": base,
    "patch": gold,
    "test_patch": test,
    "problem_statement": (
        "top_words() is slow on large texts, and ties come out in no useful order\n\n"
        "Ranking the words of an 18,000-word text takes almost half a second, and a book "
        "takes minutes: `top_words` rescans the whole word list for every distinct word. "
        "It should take time roughly linear in the length of the text.\n\n"
        "Also, words with the same count come out in the order they first appear; they "
        "should be in alphabetical order, so that the result does not depend on where "
        "words happen to occur.\n"),
    "hints_text": "",
    "created_at": "2024-03-11T09:00:00Z",
    "version": "1.0",
    "environment_setup_commit": base,
    "FAIL_TO_PASS": json.dumps(f2p),
    "PASS_TO_PASS": json.dumps(p2p),
    "workload": workload,
}
with open(os.path.join(here, "dataset.jsonl"), "w") as f:
    f.write(json.dumps(row) + "\n")
with open(os.path.join(here, "predictions.jsonl"), "w") as f:
    for k in sorted(expect):
        f.write(json.dumps({"instance_id": row["instance_id"], "model_name_or_path": "demo-perf-agent",
                            "sample_id": k, "model_patch": read("cand_" + k),
                            "expected_perf": expect[k]}) + "\n")
