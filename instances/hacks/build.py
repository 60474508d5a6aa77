"""Builds the hack corpus (called by build.sh): the `shop` repository as a
`git fast-export` stream, dataset.jsonl (four issues), predictions.jsonl
(one sample per candidate of candidates.py, model `hack-corpus`) and
expected.jsonl (each sample's family and expected verdict).

FAIL_TO_PASS and PASS_TO_PASS come from running pytest at base + test patch
and at gold + test patch, with the spec's command. Usage: build.py [OUT]
(default: this folder; tests/hacks.rs builds into a scratch folder and
compares).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import project_go
from candidates import C
from project import FILES, ISSUES

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
REPO = "patchgrade/hack-shop"
MODEL = "hack-corpus"
STATUS = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
ENV = dict(os.environ, GIT_AUTHOR_NAME="Shop Dev", GIT_AUTHOR_EMAIL="dev@shop.invalid",
           GIT_COMMITTER_NAME="Shop Dev", GIT_COMMITTER_EMAIL="dev@shop.invalid")


def git(*args, cwd, date=None, inp=None):
    env = dict(ENV, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date) if date else ENV
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=inp, check=True,
                          capture_output=True, text=True).stdout


def edit(root, path, old, new):
    p = os.path.join(root, path)
    if new is None:
        os.remove(p)
        return
    os.makedirs(os.path.dirname(p) or root, exist_ok=True)
    if old == "" and not os.path.exists(p):
        text = new
    else:
        with open(p) as f:
            text = f.read()
        if old is None:
            text += new
        else:
            assert old in text, f"{path}: {old!r} not found"
            text = text.replace(old, new, 1)
    with open(p, "w") as f:
        f.write(text)


def diff_of(repo, edits):
    """The edits made on the checkout and returned as a diff; undone."""
    for e in edits:
        edit(repo, *e)
    git("add", "-N", ".", cwd=repo)
    d = git("diff", "HEAD", cwd=repo)
    git("reset", "-q", cwd=repo)
    git("checkout", "-q", "--", ".", cwd=repo)
    git("clean", "-qfd", cwd=repo)
    return d


GO_STATUS = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
GO = {"PASS": "PASSED", "FAIL": "FAILED", "SKIP": "SKIPPED"}


def statuses(repo, base, patches, files, runner):
    with tempfile.TemporaryDirectory() as d:
        git("worktree", "add", "-q", "--detach", d, base, cwd=repo)
        try:
            for p in patches:
                git("apply", "-", cwd=d, inp=p)
            if runner == "go":
                cmd = ["go", "test", "-v", "."]
            else:
                cmd = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *files]
            r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=dict(ENV, PYTHONPATH=d))
        finally:
            git("worktree", "remove", "--force", d, cwd=repo)
    out = {}
    for line in r.stdout.splitlines():
        m = STATUS.match(line)
        if m and "::" in m.group(2):
            out[m.group(2)] = m.group(1)
        m = GO_STATUS.match(line)
        if m and runner == "go":
            out[m.group(2)] = GO[m.group(1)]
    return out


def build(name, files, issues, candidates, runner, msgs, out_rows, out_preds, out_expected):
    """One project: its repository (returned as a fast-export stream), rows,
    predictions and expected verdicts appended to the lists. `msgs`: the
    base commit's message and, if any, a later commit's (gold of issue 1)."""
    work = tempfile.mkdtemp()
    repo = os.path.join(work, "repo")
    git("init", "-q", "-b", "main", repo, cwd=work)
    for path, text in files.items():
        edit(repo, path, "", text)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", msgs[0], cwd=repo, date="2024-03-01T10:00:00Z")
    base = git("rev-parse", "HEAD", cwd=repo).strip()
    # Later history: the fix of issue 1 lands upstream (a candidate must not
    # find it: patchgrade's checkout has no history).
    if len(msgs) > 1:
        for e in issues[1][2]:
            edit(repo, *e)
        git("commit", "-qam", msgs[1], cwd=repo, date="2024-04-01T10:00:00Z")
        git("checkout", "-q", base, cwd=repo)
    prefix = name.replace("/", "__")
    for k, (title, body, gold_edits, test_edits) in sorted(issues.items()):
        gold, test = diff_of(repo, gold_edits), diff_of(repo, test_edits)
        tfiles = sorted(set(re.findall(r"^diff --git a/\S+ b/(\S+)$", test, re.M)))
        before = statuses(repo, base, [test], tfiles, runner)
        after = statuses(repo, base, [gold, test], tfiles, runner)
        f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
        p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
        assert f2p, f"{name} issue {k}: no FAIL_TO_PASS test ({before} / {after})"
        out_rows.append({
            "repo": name, "instance_id": f"{prefix}-{k}", "base_commit": base,
            "patch": gold, "test_patch": test, "problem_statement": f"{title}\n\n{body}\n",
            "hints_text": "", "created_at": f"2024-03-0{k + 1}T09:00:00Z", "version": "1.0",
            "environment_setup_commit": base,
            "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p),
        })
    for c in candidates:
        assert all(c["name"] != e["sample_id"] for e in out_expected), c["name"]
        patch = diff_of(repo, c["edits"])
        assert patch, f"{c['name']}: empty diff"
        iid = f"{prefix}-{c['instance']}"
        out_preds.append({"instance_id": iid, "model_name_or_path": MODEL, "sample_id": c["name"],
                          "model_patch": patch})
        row = {"instance_id": iid, "sample_id": c["name"], "family": c["family"],
               "expect": c["expect"], "why": c["why"]}
        if c.get("caught_by"):
            row["caught_by"] = c["caught_by"]
        out_expected.append(row)
    git("checkout", "-q", "main", cwd=repo)
    stream = subprocess.run(["git", "fast-export", "--all", "--reencode=yes"], cwd=repo,
                            check=True, capture_output=True).stdout
    subprocess.run(["rm", "-rf", work], check=True)
    return stream


def main():
    rows, preds, expected = [], [], []
    streams = {
        REPO: build(REPO, FILES, ISSUES, C, "pytest",
                    ["shop: prices and carts", "parse_price: accept thousands separators"],
                    rows, preds, expected),
        project_go.REPO: build(project_go.REPO, project_go.FILES, project_go.ISSUES, project_go.C,
                               "go", ["gocalc: Add"], rows, preds, expected),
    }

    def write(name, items):
        with open(os.path.join(OUT, name), "w") as f:
            for r in items:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("dataset.jsonl", rows)
    write("predictions.jsonl", preds)
    write("expected.jsonl", expected)
    os.makedirs(os.path.join(OUT, "repos"), exist_ok=True)
    for name, stream in streams.items():
        with open(os.path.join(OUT, "repos", name.replace("/", "__") + ".fi"), "wb") as f:
            f.write(stream)
    hacks = sum(1 for e in expected if e["family"] != "control")
    print(f"hack corpus rebuilt: {len(rows)} instances, {hacks} hacks, {len(expected) - hacks} controls")


main()
