"""Writes the perf hack corpus (called by build.sh): dataset.jsonl,
predictions.jsonl and expected.jsonl, from the perf demo's repository
stream and row and candidates.py.

Checks, with real runs: every candidate passes the FAIL_TO_PASS and
PASS_TO_PASS tests (so what perf sees is the hack, not a wrong patch),
and the workload prints the same ranking at base and with gold (the
output check's reference).
"""
import json
import os
import subprocess
import sys
import tempfile

from candidates import CANDIDATES

here = os.path.dirname(os.path.abspath(__file__))
demo = os.path.dirname(here)
MODEL = "perf-hacks"


def sh(*args, cwd, stdin=None):
    return subprocess.run(args, cwd=cwd, check=True, input=stdin, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def main():
    with open(os.path.join(demo, "dataset.jsonl")) as f:
        row = json.loads(f.readline())
    f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    with open(os.path.join(here, "workload.py")) as f:
        workload = f.read()
    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "repo")
        sh("git", "init", "-q", repo, cwd=work)
        with open(os.path.join(demo, "repos", "patchgrade__demo-perf.fi")) as f:
            subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, stdin=f, check=True)
        sh("git", "checkout", "-q", row["base_commit"], cwd=repo)
        core = os.path.join(repo, "wordfreq", "core.py")
        with open(core) as f:
            base_text = f.read()
        head = base_text[: base_text.index("def top_words")]

        def patch_of(body):
            with open(core, "w") as f:
                f.write(head + body)
            diff = sh("git", "diff", cwd=repo)
            sh("git", "checkout", "-q", "--", ".", cwd=repo)
            return diff

        def run_in(patches, argv):
            """Runs argv in a fresh copy of the base tree with `patches`
            (HOME and TMPDIR in the scratch folder)."""
            with tempfile.TemporaryDirectory() as d:
                sh("git", "worktree", "add", "-q", "--detach", d, row["base_commit"], cwd=repo)
                env = dict(os.environ, HOME=work, TMPDIR=work)
                try:
                    for p in patches:
                        sh("git", "apply", "-", cwd=d, stdin=p)
                    return subprocess.run(argv, cwd=d, stdout=subprocess.PIPE, env=env,
                                          stderr=subprocess.PIPE, universal_newlines=True)
                finally:
                    sh("git", "worktree", "remove", "--force", d, cwd=repo)

        def ranking(patches):
            with open(os.path.join(work, "workload.py"), "w") as f:
                f.write(workload)
            r = run_in(patches, [sys.executable, os.path.join(work, "workload.py")])
            assert r.returncode == 0, r.stderr
            return [l for l in r.stdout.splitlines() if not l.startswith(("Mean:", "Std Dev:"))]

        assert ranking([]) == ranking([row["patch"]]), "base and gold rank alike"
        preds, expected = [], []
        for c in CANDIDATES:
            patch = patch_of(c["body"])
            preds.append({"instance_id": row["instance_id"], "model_name_or_path": MODEL,
                          "sample_id": c["sample_id"], "model_patch": patch})
            expected.append({"instance_id": row["instance_id"], "sample_id": c["sample_id"],
                             "family": "perf", "kind": c["kind"], "expect": c["expect"],
                             "reason": c["reason"], "why": c["why"]})
            if c.get("outside_tree"):
                continue
            r = run_in([patch, row["test_patch"]],
                       [sys.executable, "-m", "unittest", "-v", "tests/test_core.py"])
            # unittest prints one line per test; every one of them passes.
            for t in f2p + p2p:
                name = t.rsplit(".", 1)[1]
                assert any(l.startswith(name + " ") and l.endswith("ok")
                           for l in r.stderr.splitlines()), (c["sample_id"], t, r.stderr)
    hack_row = dict(row)
    hack_row["workload"] = workload
    for name, rows in (("dataset.jsonl", [hack_row]), ("predictions.jsonl", preds),
                       ("expected.jsonl", expected)):
        with open(os.path.join(here, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print("perf hack corpus: %d candidates" % len(preds))


if __name__ == "__main__":
    main()
