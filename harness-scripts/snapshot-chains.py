#!/usr/bin/env python3
"""How many tree bytes a repository's snapshot images would hold if each
were built over another snapshot instead of from its whole tree (issue 22).

    harness-scripts/snapshot-chains.py DATASET REPO MIRROR [--outer K]

For every instance of REPO in DATASET (a jsonl), its snapshot anchor is
found as patchgrade finds it (`images::snapshot::anchor`: the newest
first-parent ancestor of the base commit committed before its 91-day
window), in the bare MIRROR. Then, counting the blobs' uncompressed sizes
(`git cat-file`), it prints:

- whole: every anchor's whole tree (what the snapshot images hold today,
  one per anchor; envs apart);
- outer: each anchor over the snapshot of an "outer" anchor, the anchor's
  own anchor in a window K times as long (aligned the same way): the
  outer anchors' whole trees plus each anchor's changed files since its
  outer one;
- consecutive: the anchors in time order, each over the one before: the
  first whole tree plus each step's changed files.

With --windows DAYS:CHAIN[,DAYS:CHAIN...] it prints instead, for each cut
(a spec's `snapshots: {window_days, chain}`), what the snapshots and the
instance images over them would hold as patchgrade builds them
(`images::snapshot::chain`): every link of every chain an instance needs
(the first of a chain a whole tree, each later one the files changed since
the one before, links no instance uses directly included), and each
instance's files changed since its anchor (a whole tree without one).

Only files written count (added or changed blobs); a snapshot's git pack
adds roughly a third of its tree again, and its build outputs are not
counted. Snapshots differ per env too, which this ignores.
"""
import functools
import argparse
import json
import subprocess

WINDOW = 91 * 24 * 3600


def git(mirror, *args, stdin=None):
    return subprocess.run(
        ["git", "-C", mirror, *args], input=stdin,
        capture_output=True, text=True, check=True,
    ).stdout


@functools.lru_cache(maxsize=None)
def commit_time(mirror, commit):
    return int(git(mirror, "log", "-1", "--format=%ct", commit).strip())


@functools.lru_cache(maxsize=None)
def anchor(mirror, commit, span):
    """The newest first-parent ancestor before `commit`'s window of `span`."""
    start = commit_time(mirror, commit) // span * span
    out = git(mirror, "rev-list", "--first-parent", "-1", f"--before={start - 1}", commit)
    return out.strip() or None


def blob_bytes(mirror, ids):
    if not ids:
        return 0
    out = git(mirror, "cat-file", "--batch-check=%(objectsize)", stdin="\n".join(ids) + "\n")
    return sum(int(x) for x in out.split())


@functools.lru_cache(maxsize=None)
def whole(mirror, commit):
    ids = []
    for line in git(mirror, "ls-tree", "-r", commit).splitlines():
        meta, _ = line.split("\t", 1)
        _, kind, oid = meta.split()
        if kind == "blob":
            ids.append(oid)
    return blob_bytes(mirror, ids)


@functools.lru_cache(maxsize=None)
def changed(mirror, old, new):
    ids = []
    for line in git(mirror, "diff-tree", "-r", "--no-renames", old, new).splitlines():
        meta, _ = line.split("\t", 1)
        parts = meta.split()
        status, oid = parts[4], parts[3]
        if status[0] in "AMT" and oid != "0" * 40:
            ids.append(oid)
    return blob_bytes(mirror, ids)


def cut(mirror, bases, days, chain):
    """(links, whole links, link bytes, instance bytes) for one cut."""
    span = days * 24 * 3600
    inst, links = 0, {}
    for b in bases:
        a = anchor(mirror, b, span)
        if not a:
            inst += whole(mirror, b)
            continue
        inst += changed(mirror, a, b)
        x = a
        while x and x not in links:
            prev = anchor(mirror, x, span)
            same = prev and commit_time(mirror, prev) // (span * chain) == commit_time(mirror, x) // (span * chain)
            if chain > 1 and same:
                links[x] = (False, changed(mirror, prev, x))
                x = prev
            else:
                links[x] = (True, whole(mirror, x))
                x = None
    return len(links), sum(w for w, _ in links.values()), sum(n for _, n in links.values()), inst


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("repo")
    p.add_argument("mirror")
    p.add_argument("--outer", type=int, default=4, help="outer window in windows [4]")
    p.add_argument("--windows", help="cuts to compare, DAYS:CHAIN[,DAYS:CHAIN...]")
    a = p.parse_args()
    if a.windows:
        with open(a.dataset) as f:
            bases = [r["base_commit"] for r in map(json.loads, f) if r["repo"] == a.repo]
        mb = lambda n: f"{n / 1e6:,.0f} MB"
        print(f"{a.repo}: {len(bases)} instances")
        for c in a.windows.split(","):
            days, chain = (int(x) for x in c.split(":"))
            n, w, snap, inst = cut(a.mirror, bases, days, chain)
            print(f"  {days}-day windows, chain {chain}: {n} snapshots ({w} whole) {mb(snap)}, "
                  f"instances {mb(inst)}, together {mb(snap + inst)}")
        return
    anchors = set()
    with open(a.dataset) as f:
        for line in f:
            row = json.loads(line)
            if row["repo"] == a.repo:
                found = anchor(a.mirror, row["base_commit"], WINDOW)
                if found:
                    anchors.add(found)
    if not anchors:
        raise SystemExit(f"no instance of {a.repo} in {a.dataset} has a snapshot anchor")
    outer = {x: anchor(a.mirror, x, a.outer * WINDOW) for x in anchors}
    outers = {o for o in outer.values() if o}
    by_time = sorted(anchors, key=lambda x: commit_time(a.mirror, x))
    mb = lambda n: f"{n / 1e6:,.0f} MB"
    print(f"{a.repo}: {len(anchors)} anchors")
    print(f"  whole:       {mb(sum(whole(a.mirror, x) for x in anchors))}")
    print(f"  outer (x{a.outer}):  {mb(sum(whole(a.mirror, o) for o in outers) + sum(changed(a.mirror, outer[x], x) if outer[x] else whole(a.mirror, x) for x in anchors))} ({len(outers)} outer anchors)")
    print(f"  consecutive: {mb(whole(a.mirror, by_time[0]) + sum(changed(a.mirror, by_time[i - 1], by_time[i]) for i in range(1, len(by_time))))}")


if __name__ == "__main__":
    main()
