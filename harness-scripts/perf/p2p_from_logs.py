#!/usr/bin/env python3
"""PASS_TO_PASS from gold runs, as SWE-fficiency fills it (issue 13).

Usage: p2p_from_logs.py LOG_DIR/RUN_ID/gold OUT.json

For each instance folder, the tests its test_output.txt reports as passed
(sympy's `bin/test --verbose` lines `test_x ok`, read as patchgrade's sympy
log parser reads them), between the test markers. Instances whose output is
missing or holds no passing test are left out and named on stderr.
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
            with open(path, errors="replace") as f:
                tests = passed(f.read())
        except OSError:
            tests = []
        if tests:
            result[iid] = tests
            print("%s: %d passing tests" % (iid, len(tests)))
        else:
            sys.stderr.write("%s: no passing test in %s\n" % (iid, path))
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
