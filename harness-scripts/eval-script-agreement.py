#!/usr/bin/env python3
"""Agreement of two runs of the same predictions: one with the spec's eval
script, one with `--eval-script dataset` (docs/specs.md, issue 12).

    eval-script-agreement.py --dataset test.jsonl --pair SPEC_RUN DATASET_RUN \
        [--pair ...] [--model gold] [--markdown]

Each RUN is a run folder (`<log_dir>/<run_id>`); with several pairs, an
instance is taken from the first pair holding it on both sides with the same
spec hash. Only instances finished in both runs of a pair are compared; an instance whose spec-driven record did not run
the spec's script, or whose dataset-driven record did not run the dataset's,
is an error, and an instance found only with different spec hashes (another
env) is listed, not compared. Prints a per-repository table (compared, same verdict,
different), then every difference with both outcomes, the expected tests
whose status differs, and both details.
"""
import argparse
import json
import os
import sys
from collections import defaultdict


def records(run_dir, model):
    out = {}
    base = os.path.join(run_dir, model)
    if not os.path.isdir(base):
        return out
    for iid in os.listdir(base):
        p = os.path.join(base, iid, "patchgrade.json")
        if os.path.exists(p):
            with open(p) as f:
                out[iid] = json.load(f)
    return out


def expected(inst):
    tests = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        v = inst.get(key) or []
        if isinstance(v, str):
            v = json.loads(v) if v.strip() else []
        tests += [(key, t) for t in v]
    return tests


def status(rec, test):
    st = rec.get("statuses") or {}
    return st.get(test, "absent")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--pair", nargs=2, action="append", required=True,
                    metavar=("SPEC_RUN", "DATASET_RUN"))
    ap.add_argument("--model", default="gold")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    insts = {}
    with open(a.dataset) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                insts[r["instance_id"]] = r
    # An instance is taken from the first pair that has it on both sides
    # with the same spec hash (the same env and instance image: only the
    # script differs); one found only with different specs is listed, not
    # compared.
    spec, ds, other = {}, {}, {}
    for spec_run, dataset_run in a.pair:
        x, y = records(spec_run, a.model), records(dataset_run, a.model)
        for i in sorted(set(x) & set(y)):
            if i in spec:
                continue
            if x[i].get("spec_hash") == y[i].get("spec_hash"):
                spec[i], ds[i] = x[i], y[i]
                other.pop(i, None)
            else:
                other[i] = True
    both = sorted(spec)
    bad = [i for i in both if spec[i].get("eval_script")] + [
        i for i in both if (ds[i].get("eval_script") or {}).get("source") != "dataset"
    ]
    if bad:
        sys.exit("records that did not run the script their side says: " + ", ".join(bad))
    other_spec = sorted(other)
    per_repo = defaultdict(lambda: [0, 0, [], 0.0, 0.0])
    for i in both:
        repo = insts[i]["repo"]
        row = per_repo[repo]
        row[0] += 1
        row[3] += spec[i].get("timings", {}).get("tests", 0.0)
        row[4] += ds[i].get("timings", {}).get("tests", 0.0)
        if spec[i]["outcome"] == ds[i]["outcome"]:
            row[1] += 1
        else:
            row[2].append(i)
    total = sum(r[0] for r in per_repo.values())
    same = sum(r[1] for r in per_repo.values())
    if a.markdown:
        print("| repo | compared | same verdict | different | outcomes (spec → dataset) | container s, spec / dataset |")
        print("|---|---|---|---|---|---|")
    else:
        print(f"{'repo':28} {'compared':>8} {'same':>5} {'diff':>5}")
    for repo in sorted(per_repo):
        n, s, diff, t_spec, t_ds = per_repo[repo]
        outcomes = defaultdict(int)
        for i in both:
            if insts[i]["repo"] == repo:
                outcomes[(spec[i]["outcome"], ds[i]["outcome"])] += 1
        shown = ", ".join(
            f"{k[0]}: {v}" if k[0] == k[1] else f"{k[0]} → {k[1]}: {v}"
            for k, v in sorted(outcomes.items())
        )
        if a.markdown:
            print(f"| {repo} | {n} | {s} | {n - s} | {shown} | {t_spec:.0f} / {t_ds:.0f} |")
        else:
            print(f"{repo:28} {n:>8} {s:>5} {n - s:>5}  {shown}  (container s: spec {t_spec:.0f}, dataset {t_ds:.0f})")
    pct = 100.0 * same / total if total else 0.0
    ts = sum(r[3] for r in per_repo.values())
    td = sum(r[4] for r in per_repo.values())
    if a.markdown:
        print(f"| **all** | **{total}** | **{same}** | **{total - same}** | {pct:.1f}% agree | {ts:.0f} / {td:.0f} |")
    else:
        print(f"{'all':28} {total:>8} {same:>5} {total - same:>5}  {pct:.1f}% agree")
    print(f"\nrepositories: {len(per_repo)}")
    if other_spec:
        print("not compared (the two runs used different specs): " + ", ".join(other_spec))
    for i in both:
        if spec[i]["outcome"] == ds[i]["outcome"]:
            continue
        print(f"\n{i}: spec {spec[i]['outcome']}, dataset {ds[i]['outcome']}")
        for kind, t in expected(insts[i]):
            x, y = status(spec[i], t), status(ds[i], t)
            if x != y:
                print(f"  {kind} {t}: spec {x}, dataset {y}")
        print(f"  spec detail: {spec[i].get('detail')}")
        print(f"  dataset detail: {ds[i].get('detail')}")


if __name__ == "__main__":
    main()
