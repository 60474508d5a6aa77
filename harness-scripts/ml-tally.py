#!/usr/bin/env python3
"""Tally SWE-bench Multilingual gold runs: each instance's latest record.

Reads every `<run>/<model>/<instance>/patchgrade.json` under the given log
folders (the latest by modification time wins for an instance), and, with
`--carried FILE`, outcomes of instances whose records are not on this
machine (a TSV of `instance_id<TAB>outcome<TAB>where`, e.g. a table of an
earlier machine in docs/multilingual.md). Prints a Markdown table per
language and repository (resolved and each other outcome), the total over
the languages whose registries are reachable here, and every instance not
resolved with its record's detail.

    ml-tally.py DATASET.jsonl [--carried FILE] LOG_DIR...
"""
import glob
import json
import os
import sys
from collections import Counter, defaultdict

LANG = {
    "rust": ["burntsushi/ripgrep", "sharkdp/bat", "tokio-rs/tokio", "tokio-rs/axum",
             "uutils/coreutils", "astral-sh/ruff", "nushell/nushell"],
    "go": ["caddyserver/caddy", "gin-gonic/gin", "hashicorp/terraform", "gohugoio/hugo",
           "prometheus/prometheus"],
    "java": ["google/gson", "javaparser/javaparser", "projectlombok/lombok",
             "reactivex/rxjava", "apache/druid", "apache/lucene"],
    "js/ts": ["axios/axios", "immutable-js/immutable-js", "vuejs/core", "babel/babel",
              "preactjs/preact", "facebook/docusaurus", "mrdoob/three.js"],
    "c": ["jqlang/jq", "redis/redis", "valkey-io/valkey", "micropython/micropython"],
    "c++": ["fmtlib/fmt", "nlohmann/json"],
}
REACHABLE = set(LANG)


def main() -> int:
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    dataset, carried_path = args.pop(0), None
    if args[:1] == ["--carried"]:
        carried_path = args[1]
        args = args[2:]
    rows = {}
    for line in open(dataset):
        r = json.loads(line)
        rows[r["instance_id"]] = r
    lang_of = {repo: lang for lang, repos in LANG.items() for repo in repos}
    latest = {}
    for root in args:
        for p in glob.glob(os.path.join(root, "*", "*", "patchgrade.json")):
            rec = json.load(open(p))
            iid = rec["instance_id"]
            if iid not in rows:
                continue
            t = os.path.getmtime(p)
            if iid not in latest or t > latest[iid][0]:
                where = os.path.relpath(p, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(p)))))
                latest[iid] = (t, rec["outcome"], rec.get("detail", ""), where.split(os.sep)[0])
    if carried_path:
        for n, line in enumerate(open(carried_path), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0] not in rows:
                print(f"{carried_path}:{n}: not `instance_id<TAB>outcome<TAB>where`", file=sys.stderr)
                return 2
            latest.setdefault(parts[0], (0, parts[1], "", parts[2]))
    per_repo = defaultdict(Counter)
    size = Counter(r["repo"] for r in rows.values())
    for iid, (_, outcome, _, _) in latest.items():
        per_repo[rows[iid]["repo"]][outcome] += 1
    print("| language | repository | instances | run | resolved | the others |")
    print("|---|---|---|---|---|---|")
    totals = defaultdict(Counter)
    for lang, repos in LANG.items():
        for repo in repos:
            c = per_repo.get(repo, Counter())
            run = sum(c.values())
            others = ", ".join(f"{o} {k}" for o, k in sorted(c.items()) if o != "resolved")
            print(f"| {lang} | {repo} | {size[repo]} | {run} | {c['resolved']} | {others} |")
            totals[lang]["instances"] += size[repo]
            totals[lang]["run"] += run
            totals[lang]["resolved"] += c["resolved"]
    print()
    print("| language | instances | run | resolved |")
    print("|---|---|---|---|")
    all_ = Counter()
    for lang, t in totals.items():
        print(f"| {lang} | {t['instances']} | {t['run']} | {t['resolved']} |")
        all_.update(t)
    print(f"| all reachable | {all_['instances']} | {all_['run']} | {all_['resolved']} |")
    print()
    for iid in sorted(latest):
        _, outcome, detail, where = latest[iid]
        if outcome != "resolved" and lang_of.get(rows[iid]["repo"]) in REACHABLE:
            print(f"- {iid} ({where}): {outcome}: {' '.join(detail.split())[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
