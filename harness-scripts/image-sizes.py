#!/usr/bin/env python3
"""Disk taken by patchgrade's images, per tier and per repository (issue 12).

    harness-scripts/image-sizes.py [--only IMAGES_FILE] [--by-image N] [INSPECT_JSON]

Reads `docker image inspect` of every image, intermediate build images
included (runs it when no file is given). An image's size is that of its
layer chain, so a layer's size is the size of the image ending at it minus
that of the image ending one layer earlier (the classic builder keeps an
image per step). Layers are then counted once each, under the first tier
whose tagged images hold them, in the order base (root, base and python
images), env (env and snapshot images), instance: what each --cache-level
keeps is the sum of the tiers up to it. Instance layers are also summed per
repository. `docker system df -v`'s UNIQUE column cannot give this: an env
image with instance images on it shows 0 there.

With --only, IMAGES_FILE names instance images (one `name:tag` a line, e.g.
those the records of a run used): only they and the base, env and snapshot
images they are built on are counted, i.e. the disk a warm rerun of exactly
those instances needs. Names not in the engine are reported, not guessed.

With --by-image N, the N base, env and snapshot images holding the most
layers of their own are listed too, each with the instances built on it
per repository: where the tiers' space is. Within a tier, shorter chains
are counted first, so an image's own layers are those above its parent.
"""
import collections
import json
import re
import subprocess
import sys

TIERS = ["base", "env", "instance"]


def inspect_all():
    ids = subprocess.run(
        ["docker", "image", "ls", "-aq", "--no-trunc"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    ids = sorted(set(ids))
    out = []
    for i in range(0, len(ids), 200):
        out += json.loads(subprocess.run(
            ["docker", "image", "inspect", *ids[i:i + 200]],
            check=True, capture_output=True, text=True,
        ).stdout)
    return out


def tier(tag):
    m = re.match(r"patchgrade\.(root|base|env|snap|eval)\b", tag)
    if not m:
        return None
    return {"root": "base", "snap": "env", "eval": "instance"}.get(m.group(1), m.group(1))


def repo_of(tag):
    m = re.match(r"patchgrade\.eval\.[^.]+\.(.+)-\d+:", tag)
    return m.group(1) if m else "?"


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    args = sys.argv[1:]
    only = None
    by_image = 0
    while args[:1] in (["--only"], ["--by-image"]):
        if args[0] == "--only":
            only = {l.strip() for l in open(args[1]) if l.strip()}
        else:
            by_image = int(args[1])
        args = args[2:]
    images = json.load(open(args[0])) if args else inspect_all()
    size_of = {}
    for i in images:
        size_of[tuple(i["RootFS"].get("Layers") or [])] = i["Size"]

    def layer_size(chain, k):
        # Layer k of chain: the image ending at it minus the nearest shorter
        # image (several layers at once when no image ends in between).
        here = size_of.get(chain[:k + 1])
        if here is None:
            return 0
        for j in range(k, 0, -1):
            if chain[:j] in size_of:
                return max(here - size_of[chain[:j]], 0)
        return here

    tagged = collections.defaultdict(list)
    for i in images:
        for tag in i.get("RepoTags") or []:
            t = tier(tag)
            if t:
                tagged[t].append((tag, tuple(i["RootFS"].get("Layers") or [])))
    if only is not None:
        wanted = [(tag, chain) for tag, chain in tagged["instance"] if tag in only]
        missing = only - {tag for tag, _ in wanted}
        chains = [chain for _, chain in wanted]
        tagged["instance"] = wanted
        for t in ("base", "env"):
            tagged[t] = [(tag, c) for tag, c in tagged[t]
                         if any(ch[:len(c)] == c for ch in chains)]
        print(f"{len(wanted)} of {len(only)} named instance images are in the engine"
              f" ({len(missing)} not: not counted)")
        print()
    for t in TIERS:
        tagged[t].sort(key=lambda tc: len(tc[1]))
    counted = set()
    owns = []
    totals = collections.Counter()
    counts = collections.Counter()
    repos = collections.defaultdict(lambda: [0, 0])
    for t in TIERS:
        for tag, chain in tagged[t]:
            counts[t] += 1
            own = 0
            for k in range(len(chain)):
                if chain[:k + 1] in counted:
                    continue
                counted.add(chain[:k + 1])
                own += layer_size(chain, k)
            totals[t] += own
            owns.append((own, t, tag, chain))
            if t == "instance":
                repos[repo_of(tag)][0] += 1
                repos[repo_of(tag)][1] += own
    print("| tier | tagged images | layers first held (size) |")
    print("|---|---:|---:|")
    for t in TIERS:
        print(f"| {t} | {counts[t]} | {gib(totals[t])} |")
    print()
    print("| --cache-level | keeps | size |")
    print("|---|---|---:|")
    acc = 0
    for n, t in enumerate(TIERS):
        acc += totals[t]
        print(f"| {t} | {' + '.join(TIERS[:n + 1])} | {gib(acc)} |")
    print()
    print("| repository | instance images | their own layers | per image |")
    print("|---|---:|---:|---:|")
    for r, (n, u) in sorted(repos.items()):
        print(f"| {r} | {n} | {gib(u)} | {u / n / 2**20:.0f} MiB |")
    if by_image:
        print_by_image(owns, tagged["instance"], by_image)


def print_by_image(owns, instances, n):
    print()
    print("| image | tier | its own layers | instances on it |")
    print("|---|---|---:|---|")
    below = [(own, t, tag, c) for own, t, tag, c in owns if t != "instance"]
    for own, t, tag, chain in sorted(below, key=lambda x: -x[0])[:n]:
        on = collections.Counter(repo_of(i) for i, ic in instances if ic[:len(chain)] == chain)
        users = ", ".join(f"{r} {k}" for r, k in sorted(on.items()))
        print(f"| {tag} | {t} | {own / 2**20:.0f} MiB | {users or '-'} |")


if __name__ == "__main__":
    main()
