#!/usr/bin/env python3
"""Per-repository results table (Markdown) of a finished patchgrade run.

Usage: results-table.py RUN_DIR [MODEL]    (RUN_DIR = logs/run_evaluation/<run_id>)

Reads every <model>/<instance>/patchgrade.json of the run and, when a Docker
engine answers, the unique disk size of each instance image (`docker system
df -v`). Columns: instances run, resolved, unresolved/other outcomes, summed
evaluation time, summed environment time (image builds and reuse), summed
test time, and the disk of the repository's instance images (layers not
shared with other images; env and base images are listed once at the end).
"""
import json
import os
import re
import subprocess
import sys
from collections import defaultdict


def size_bytes(text):
    m = re.match(r"([\d.]+)\s*([kMGT]?B)", text.strip())
    if not m:
        return 0
    mult = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m.group(2)]
    return float(m.group(1)) * mult


def image_sizes():
    """(repository, tag) -> unique bytes, from `docker system df -v`."""
    try:
        out = subprocess.run(["docker", "system", "df", "-v"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    sizes = {}
    in_images = False
    for line in out.splitlines():
        if line.startswith("REPOSITORY"):
            in_images = True
            continue
        if in_images and not line.strip():
            break
        if in_images:
            cols = re.split(r"\s{2,}", line.strip())
            if len(cols) >= 7:
                sizes[(cols[0], cols[1])] = size_bytes(cols[6])
    return sizes


def main():
    run_dir = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else None
    rows = defaultdict(lambda: defaultdict(float))
    outcomes = defaultdict(lambda: defaultdict(int))
    images = defaultdict(set)
    for m in sorted(os.listdir(run_dir)):
        if model and m != model:
            continue
        mdir = os.path.join(run_dir, m)
        if not os.path.isdir(mdir):
            continue
        for leaf in sorted(os.listdir(mdir)):
            p = os.path.join(mdir, leaf, "patchgrade.json")
            if not os.path.isfile(p):
                continue
            r = json.load(open(p))
            repo = r["instance_id"].rsplit("-", 1)[0].replace("__", "/")
            t = r.get("timings", {})
            rows[repo]["n"] += 1
            rows[repo]["total"] += t.get("total", 0)
            rows[repo]["env"] += t.get("env", 0)
            rows[repo]["tests"] += t.get("tests", 0)
            outcomes[repo][r["outcome"]] += 1
            env = r.get("environment") or ""
            m2 = re.match(r"image (\S+):(\S+)", env)
            if m2:
                images[repo].add((m2.group(1), m2.group(2)))
    sizes = image_sizes()
    print("| repo | instances | resolved | other outcomes | eval time (s) | env/image time (s) | test time (s) | instance images disk |")
    print("|---|---|---|---|---|---|---|---|")
    tot = defaultdict(float)
    for repo in sorted(rows):
        r = rows[repo]
        o = outcomes[repo]
        other = ", ".join(f"{n} {k}" for k, n in sorted(o.items()) if k != "resolved") or "-"
        disk = sum(sizes.get(i, 0) for i in images[repo])
        print(f"| {repo} | {int(r['n'])} | {o.get('resolved', 0)} | {other} | {r['total']:.0f} | {r['env']:.0f} | {r['tests']:.0f} | {disk / 1e6:.0f} MB |")
        for k in ("n", "total", "env", "tests"):
            tot[k] += r[k]
        tot["resolved"] += o.get("resolved", 0)
        tot["disk"] += disk
    print(f"| **all** | {int(tot['n'])} | {int(tot['resolved'])} | | {tot['total']:.0f} | {tot['env']:.0f} | {tot['tests']:.0f} | {tot['disk'] / 1e6:.0f} MB |")
    shared = {k: v for k, v in sizes.items() if k[0].startswith(("patchgrade.env.", "patchgrade.base.", "patchgrade.root."))}
    if shared:
        print(f"\nEnv, base and root images: {len(shared)} images, {sum(shared.values()) / 1e6:.0f} MB unique.")


if __name__ == "__main__":
    main()
