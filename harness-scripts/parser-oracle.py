#!/usr/bin/env python3
"""The reference harness's log parsers as an oracle for patchgrade's.

Runs the `swebench` package's PARSER_REGISTRY (install swebench==5.0.2 into
a venv and run this script with that venv's python) on captured logs and
writes, beside each `<case>.log`, the `<case>.json` that patchgrade's parser
tests compare with: {"parser": ..., "instance_id": ..., "version": ...,
"statuses": {test id: status}} or {"raises": "<exception>"} when the
reference parser raises on the log.

    parser-oracle.py write DIR...   (re)write <case>.json from the logs
    parser-oracle.py check DIR...   exit 1 when a <case>.json differs

A case's parser is its folder's name (`src/parse/testdata/<parser>/<case>.log`);
an optional `<case>.meta` beside it holds `instance_id=<id> version=<v>`
(jekyll and a few JavaScript parsers dispatch on the instance id or version).
"""
import contextlib
import io
import json
import pathlib
import sys

from swebench.harness.log_parsers import PARSER_REGISTRY  # type: ignore[attr-defined]
from swebench.types import TestSpec


def meta_of(log: pathlib.Path) -> dict:
    meta = {"instance_id": "patchgrade__oracle-1", "version": "1"}
    path = log.with_suffix(".meta")
    if path.exists():
        for word in path.read_text().split():
            key, _, value = word.partition("=")
            meta[key] = value
    return meta


def oracle(parser: str, log: pathlib.Path) -> dict:
    meta = meta_of(log)
    spec = TestSpec(
        instance_id=meta["instance_id"],
        image="",
        eval_script_list=[],
        repo="",
        version=meta["version"],
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        log_parser=parser,
    )
    text = log.read_bytes().decode("utf-8", errors="replace")
    out = {"parser": parser, **meta}
    try:
        # Some reference parsers print warnings; they are not the map.
        with contextlib.redirect_stdout(io.StringIO()):
            statuses = PARSER_REGISTRY[parser](text, spec)
        out["statuses"] = dict(sorted(statuses.items()))
    except Exception as e:  # the reference raising is a fact to record
        out["raises"] = f"{type(e).__name__}: {e}"
    return out


def cases(dirs):
    for d in map(pathlib.Path, dirs):
        for log in sorted(d.rglob("*.log")):
            yield "parse_log_" + log.parent.name, log


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for parser, log in cases(sys.argv[2:]):
        got = oracle(parser, log)
        path = log.with_suffix(".json")
        text = json.dumps(got, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        if sys.argv[1] == "write":
            path.write_text(text)
        elif not path.exists() or json.loads(path.read_text()) != got:
            print(f"{log}: differs from the reference's parser", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
