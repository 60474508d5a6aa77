#!/usr/bin/env python3
"""Tests whose status differs between two runs of the same predictions.

    harness-scripts/flaky-compare.py RUN_DIR_A RUN_DIR_B [--model gold]

RUN_DIR_* are run folders (`<log_root>/<run_id>`). For every instance both
evaluated, the per-test statuses in patchgrade.json are compared; a test
with a different status in the two runs (same patch, same image) is listed
as flaky, with the FAIL_TO_PASS / PASS_TO_PASS list it is in, if any.
Verdicts that differ are listed too. A run folder's records only: nothing
is re-run (`validate --gold-runs N` does that).
"""
import argparse
import json
import os
import sys


def records(run_dir, model):
    base = os.path.join(run_dir, model)
    out = {}
    if not os.path.isdir(base):
        sys.exit(f"flaky-compare: no folder {base}")
    for name in sorted(os.listdir(base)):
        p = os.path.join(base, name, "patchgrade.json")
        if os.path.isfile(p):
            with open(p) as f:
                out[name] = json.load(f)
    return out


def expected(rec):
    grade = rec.get("grade") or {}
    lists = {}
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        side = grade.get(key) or {}
        for t in (side.get("success") or []) + (side.get("failure") or []):
            lists[t] = key
    return lists


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--model", default="gold")
    args = ap.parse_args()
    ra, rb = records(args.a, args.model), records(args.b, args.model)
    both = sorted(set(ra) & set(rb))
    flaky = []
    verdicts = []
    for name in both:
        a, b = ra[name], rb[name]
        if a.get("outcome") != b.get("outcome"):
            verdicts.append((name, a.get("outcome"), b.get("outcome")))
        sa, sb = a.get("statuses") or {}, b.get("statuses") or {}
        lists = expected(a)
        for test in sorted(set(sa) | set(sb)):
            if sa.get(test) != sb.get(test):
                flaky.append((name, test, sa.get(test), sb.get(test), lists.get(test, "-")))
    print(f"{len(both)} instances in both runs; {len(verdicts)} verdicts differ; "
          f"{len(flaky)} test statuses differ")
    for name, x, y in verdicts:
        print(f"verdict  {name}: {x} -> {y}")
    for name, test, x, y, where in flaky:
        print(f"status   {name} [{where}] {test}: {x} -> {y}")


if __name__ == "__main__":
    main()
