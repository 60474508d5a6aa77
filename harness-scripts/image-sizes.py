#!/usr/bin/env python3
"""Disk taken by patchgrade's images, per tier and per repository (issue 12).

    harness-scripts/image-sizes.py [INSPECT_JSON]

Reads `docker image inspect` of every image (runs it when no file is given)
and gives each image the bytes of its own layers: its size minus the size
of the longest image whose layer chain is a prefix of its own (its parent:
an instance image is built FROM an env image, an env image FROM a base
image). Shared layers are thus counted once, under the tier that made them,
which `docker system df -v`'s UNIQUE column does not do (an env image with
instance images on it shows 0 there). What each --cache-level keeps after
a run is the sum of the tiers up to it: base, base + env, base + env +
instance. Untagged images (dangling: left by rebuilt tags) are listed apart;
intermediate build images (`docker image ls -a`) are not counted.
"""
import collections
import json
import re
import subprocess
import sys


def inspect_all():
    ids = subprocess.run(
        ["docker", "image", "ls", "-q", "--no-trunc"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    ids = sorted(set(ids))
    if not ids:
        return []
    out = subprocess.run(
        ["docker", "image", "inspect", *ids], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def tier(image):
    tags = image.get("RepoTags") or []
    name = tags[0] if tags else ""
    m = re.match(r"patchgrade\.(root|base|env|eval)\b", name)
    if m:
        return {"root": "base", "eval": "instance"}.get(m.group(1), m.group(1)), name
    return ("untagged" if not tags else "other"), name


def instance_repo(name):
    m = re.match(r"patchgrade\.eval\.[^.]+\.(.+)-\d+:", name)
    return m.group(1) if m else "?"


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    images = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else inspect_all()
    by_chain = {tuple(i["RootFS"].get("Layers") or []): i["Size"] for i in images}
    tiers = collections.defaultdict(lambda: [0, 0])
    repos = collections.defaultdict(lambda: [0, 0])
    for image in images:
        chain = tuple(image["RootFS"].get("Layers") or [])
        parent = 0
        for n in range(len(chain) - 1, 0, -1):
            if chain[:n] in by_chain:
                parent = by_chain[chain[:n]]
                break
        own = max(image["Size"] - parent, 0)
        t, name = tier(image)
        tiers[t][0] += 1
        tiers[t][1] += own
        if t == "instance":
            repos[instance_repo(name)][0] += 1
            repos[instance_repo(name)][1] += own
    print("| tier | images | own layers |")
    print("|---|---:|---:|")
    for t in ["base", "env", "instance", "untagged", "other"]:
        if t in tiers:
            n, u = tiers[t]
            print(f"| {t} | {n} | {gib(u)} |")
    print()
    print("| --cache-level | keeps | size |")
    print("|---|---|---:|")
    acc = 0
    kept = []
    for t in ["base", "env", "instance"]:
        acc += tiers[t][1] if t in tiers else 0
        kept.append(t)
        print(f"| {t} | {' + '.join(kept)} | {gib(acc)} |")
    print()
    print("| repository | instance images | own layers | per image |")
    print("|---|---:|---:|---:|")
    for r, (n, u) in sorted(repos.items()):
        print(f"| {r} | {n} | {gib(u)} | {u / n / 2**20:.0f} MiB |")


if __name__ == "__main__":
    main()
