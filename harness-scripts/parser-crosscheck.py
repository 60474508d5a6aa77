#!/usr/bin/env python3
"""Cross-check patchgrade's status maps against the reference's parsers on
the logs of finished runs.

For every `<run>/<model>/<instance>/patchgrade.json` under the given log
folders that holds `statuses`, the reference parser the dataset row names
(`log_parser`; the swebench package's PARSER_REGISTRY, run this with a
python that has swebench 5.0.2) reads the same `test_output.txt` between the
test-output markers, and the two maps are compared. Prints one line per
parser (logs, equal, different) and each difference; exit 1 on any.

    parser-crosscheck.py DATASET.jsonl LOG_DIR...
"""
import contextlib
import glob
import io
import json
import os
import sys
from collections import Counter

from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.types import TestSpec

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = {}
    for line in open(sys.argv[1]):
        r = json.loads(line)
        rows[r["instance_id"]] = r
    seen, same, bad = Counter(), Counter(), []
    for root in sys.argv[2:]:
        for rec_path in sorted(glob.glob(os.path.join(root, "**", "patchgrade.json"), recursive=True)):
            rec = json.load(open(rec_path))
            row = rows.get(rec["instance_id"])
            if row is None or rec.get("statuses") is None or not row.get("log_parser"):
                continue
            log_path = os.path.join(os.path.dirname(rec_path), "test_output.txt")
            text = open(log_path, "rb").read().decode("utf-8", errors="replace")
            if START in text and END in text:
                text = text.split(START, 1)[1].split(END, 1)[0]
            spec = TestSpec(instance_id=row["instance_id"], image="", eval_script_list=[],
                            repo=row["repo"], version=str(row.get("version", "")),
                            FAIL_TO_PASS=[], PASS_TO_PASS=[], log_parser=row["log_parser"])
            with contextlib.redirect_stdout(io.StringIO()):
                theirs = PARSER_REGISTRY[row["log_parser"]](text, spec)
            parser = row["log_parser"]
            seen[parser] += 1
            if theirs == rec["statuses"]:
                same[parser] += 1
            else:
                only_ours = sorted(set(rec["statuses"]) - set(theirs))[:3]
                only_theirs = sorted(set(theirs) - set(rec["statuses"]))[:3]
                bad.append(f"{log_path}: {parser} differs (ours only {only_ours}, theirs only {only_theirs})")
    for p in sorted(seen):
        print(f"{p}: {seen[p]} logs, {same[p]} equal, {seen[p] - same[p]} different")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
