#!/usr/bin/env python3
"""Remakes the SWE-fficiency sympy rows patchgrade measures (issue 13).

Usage: build_dataset.py SYMPY_GIT_DIR [OUT.jsonl]   (default: dataset.jsonl here)

The rows are SWE-fficiency's (field names and formats as its upload script
writes them: `workload`, `covering_tests`, `speedup`, `FAIL_TO_PASS` empty,
`PASS_TO_PASS`), made from a sympy mirror, because the published rows are on
Hugging Face, out of reach here:

- base_commit: where the pull request branched (merge-base of the merge
  commit's two parents); patch: the pull request's diff from there to its
  head. Each diff has exactly the published patch_length in lines
  (checked below; a mismatch stops the build).
- version: sympy/release.py at the base (1.12.dev -> 1.12).
- workload: workloads/<id>.py, reconstructed (see tasks.json and docs/perf.md).
- covering_tests: the changed module's test file (SWE-fficiency finds them
  by coverage; this is a proxy); PASS_TO_PASS: pass_to_pass.json, the tests
  of those files that passed with gold in a patchgrade run (SWE-fficiency
  also fills it from gold runs); absent, the row has none.
- speedup: the published gold speedup (eval_report_gold.csv).

The output holds sympy's code (the patches): it is not committed.
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", gitdir] + list(args),
        check=True, stdout=subprocess.PIPE, universal_newlines=True,
    ).stdout


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    gitdir = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HERE, "dataset.jsonl")
    with open(os.path.join(HERE, "tasks.json")) as f:
        tasks = json.load(f)["tasks"]
    p2p_path = os.path.join(HERE, "pass_to_pass.json")
    p2p = {}
    if os.path.exists(p2p_path):
        with open(p2p_path) as f:
            p2p = json.load(f)
    rows = []
    for t in tasks:
        iid, pr = t["instance_id"], t["pull_request"]
        merge = git(gitdir, "log", "--all", "--format=%H", "-1",
                    "--grep=Merge pull request #%d " % pr).strip()
        if not merge:
            sys.exit("%s: no merge commit of pull request #%d in %s" % (iid, pr, gitdir))
        head = git(gitdir, "rev-parse", merge + "^2").strip()
        base = git(gitdir, "merge-base", merge + "^1", head).strip()
        patch = git(gitdir, "diff", base, head)
        lines = patch.count("\n")
        if lines != t["published"]["patch_length"]:
            sys.exit("%s: the diff has %d lines, the published patch %d"
                     % (iid, lines, t["published"]["patch_length"]))
        if any("/tests/" in p for p in re.findall(r"^diff --git a/(\S+)", patch, re.M)):
            sys.exit("%s: the pull request changes tests; split them into test_patch" % iid)
        release = git(gitdir, "show", base + ":sympy/release.py")
        m = re.search(r'__version__ = "(\d+\.\d+)', release)
        if not m:
            sys.exit("%s: no version in sympy/release.py at %s" % (iid, base))
        created = git(gitdir, "show", "-s", "--format=%cI", merge).strip()
        with open(os.path.join(HERE, t["workload_file"])) as f:
            workload = f.read()
        rows.append({
            "repo": "sympy/sympy",
            "instance_id": iid,
            "base_commit": base,
            "patch": patch,
            "test_patch": "",
            "problem_statement": "",
            "hints_text": "",
            "created_at": created,
            "version": m.group(1),
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": p2p.get(iid, []),
            "environment_setup_commit": base,
            "workload": workload,
            "speedup": t["published"]["gold_speedup"],
            "covering_tests": t["covering_tests"],
        })
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    for r in rows:
        print("%s version %s base %s, %d P2P" % (
            r["instance_id"], r["version"], r["base_commit"][:10], len(r["PASS_TO_PASS"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
