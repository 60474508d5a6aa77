#!/usr/bin/env python3
"""Measured gold speedup beside SWE-fficiency's published one (issue 13).

Usage: swefficiency_summary.py TASKS.json PERF_JSON...

Reads each perf.json that `patchgrade perf` wrote and prints one Markdown
row per task: the published gold speedup, the measured one under the
record's metric with its 95% interval and verdict, the whole-process CPU
time speedup from the same runs (median per round), the A/A interval, the
load averages, and whether the two speedups differ by more than 2x.
"""
import json
import statistics
import sys


def median_by_round(runs, variant, key):
    per = {}
    for r in runs:
        if r["variant"] == variant and r.get(key) is not None:
            per[r["round"]] = per.get(r["round"], 0.0) + r[key]
    return statistics.median(per.values()) if per else None


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        published = {t["instance_id"]: t["published"] for t in json.load(f)["tasks"]}
    print("| task | published gold speedup | measured [95% interval] | verdict | measured / published | "
          "whole-process CPU speedup | A/A [95% interval] | load 1-min before / after |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sys.argv[2:]:
        with open(path) as f:
            rec = json.load(f)
        iid = rec["instance_id"]
        pub = published.get(iid, {}).get("gold_speedup")
        an = rec["analysis"]
        gold = next((v for v in an["variants"] if v["role"] == "gold"), None)
        comp = gold.get("comparison") if gold else None
        fp = rec["fingerprint"]
        load = "%s / %s" % (
            (fp.get("load_before") or ["?"])[0], (fp.get("load_after") or ["?"])[0])
        aa = an.get("aa")
        aa_s = "%.3f [%.3f, %.3f]" % (aa["point"], aa["low"], aa["high"]) if aa else "-"
        b = median_by_round(rec["runs"], "base", "cpu_s")
        g = median_by_round(rec["runs"], "gold", "cpu_s")
        cpu = "%.3f" % (b / g) if b and g else "-"
        if comp:
            s = comp["speedup"]
            meas = "%.3g [%.3g, %.3g]" % (s["point"], s["low"], s["high"])
            verdict = comp["verdict"]
            if gold.get("status") != "scored":
                verdict += " (%s: %s)" % (gold.get("status"), gold.get("reason", ""))
            ratio = s["point"] / pub if pub else None
            flag = "" if ratio is None or 0.5 <= ratio <= 2 else " **>2x**"
            ratio_s = ("%.2f%s" % (ratio, flag)) if ratio is not None else "-"
        else:
            reason = gold.get("reason", "not measured") if gold else "no gold variant"
            meas, verdict, ratio_s = "-", "not measured: %s" % reason, "-"
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            iid, "%.3g" % pub if pub else "-", meas, verdict, ratio_s, cpu, aa_s, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
