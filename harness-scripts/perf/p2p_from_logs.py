#!/usr/bin/env python3
"""PASS_TO_PASS from gold runs, as SWE-fficiency fills it (issue 13).

Usage: p2p_from_logs.py LOG_DIR/RUN_ID/gold OUT.json

For each instance folder whose evaluation resolved, the tests its
test_output.txt reports as passed (sympy's `bin/test --verbose` lines
`test_x ok`, read as patchgrade's sympy log parser reads them), between the
test markers. An evaluation that did not resolve (e.g. timed out) is left
out; one whose log has no test that parser reads gets an empty list (named
on stderr): its only check is then that the covering tests ran.
"""
import json
import os
import sys


def passed(text):
    start, end = ">>>>> Start Test Output", ">>>>> End Test Output"
    if start in text and end in text:
        text = text.split(start, 1)[1].split(end, 1)[0]
    out = []
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith("test_") and line.endswith(" ok"):
            name = line.split()[0]
            if name not in out:
                out.append(name)
    return out


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    root, out_path = sys.argv[1], sys.argv[2]
    result = {}
    if os.path.exists(out_path):
        with open(out_path) as f:
            result = json.load(f)
    for iid in sorted(os.listdir(root)):
        path = os.path.join(root, iid, "test_output.txt")
        try:
            with open(os.path.join(root, iid, "patchgrade.json")) as f:
                outcome = json.load(f).get("outcome")
            with open(path, errors="replace") as f:
                tests = passed(f.read())
        except (OSError, ValueError):
            outcome, tests = None, []
        if outcome != "resolved":
            result.pop(iid, None)
            sys.stderr.write("%s: gold evaluation %s; left out\n" % (iid, outcome or "missing"))
            continue
        result[iid] = tests
        if tests:
            print("%s: %d passing tests" % (iid, len(tests)))
        else:
            sys.stderr.write("%s: no test the sympy parser reads in %s\n" % (iid, path))
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
