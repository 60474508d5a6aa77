# patchgrade's confirmation run for pytest (docs/audit.md, "Confirmation
# run"): the FAIL_TO_PASS test files run again under conditions a
# test-aware candidate cannot tell from an ordinary run by the signals it
# could read in the graded one. The eval script writes this file and its
# configuration under random names in a fresh temporary folder and runs
# `python <this file> <config>`; the configuration is deleted once read.
#
# - No runner entry point: this file calls pytest.main, so sys.argv is only
#   this file's random path (not `pytest ...`, not the test files).
# - pytest's variables scrubbed: every PYTEST_* variable is removed once
#   pytest has read its own configuration, and PYTEST_CURRENT_TEST is never
#   set.
# - The test files renamed: each FAIL_TO_PASS file gets a random name in its
#   own folder (imports and relative paths keep working); their ids are
#   mapped back to the original names in the results.
# - Two rounds in one process: every test of those files in the reverse of
#   the collected order, then the FAIL_TO_PASS tests again in order. State a
#   candidate keeps between calls (call counts) carries over.
#
# The working directory and the rootdir stay the tree's: honest code may
# depend on them. One `STATUS id` line per test (its worst status over the
# rounds and phases) is printed last, in the short summary form pytest's log
# parsers read; the process then ends with os._exit, so no exit handler of
# the code under test can print after it. Python 3.6+, pytest 3+.
import binascii
import json
import os
import sys

RANK = {"PASSED": 0, "XPASS": 1, "XFAIL": 2, "SKIPPED": 3, "FAILED": 4, "ERROR": 5}


def random_name():
    return "m" + binascii.hexlify(os.urandom(5)).decode()


def scrub():
    for key in [k for k in os.environ if k.upper().startswith("PYTEST")]:
        del os.environ[key]


def load():
    path = sys.argv[1]
    with open(path) as f:
        cfg = json.load(f)
    os.remove(path)
    del sys.argv[1:]
    return cfg


def rename(ids):
    """The FAIL_TO_PASS test files under random names: {new: old}."""
    renamed = {}
    for f in sorted({i.split("::")[0] for i in ids if "::" in i}):
        if f.endswith(".py") and os.path.isfile(f) and f not in renamed.values():
            new = os.path.join(os.path.dirname(f), random_name() + ".py")
            os.rename(f, new)
            renamed[new] = f
    return renamed


def main():
    cfg = load()
    # sys.path as the command would have it: not this file's folder; the
    # working directory first for `python -m pytest`.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    if cfg.get("cwd_on_path"):
        sys.path.insert(0, os.getcwd())
    f2p = set(cfg["fail_to_pass"])
    renamed = rename(cfg["fail_to_pass"])
    paths = sorted(renamed) + sorted(
        {i.split("::")[0] for i in f2p if "::" in i} - set(renamed.values())
    )
    paths = [p for p in paths if os.path.exists(p)]
    if not paths:
        print(">>>>> Confirmation: none of the FAIL_TO_PASS test files exists")
        sys.stdout.flush()
        os._exit(4)

    import pytest
    import _pytest.runner

    # pytest sets PYTEST_CURRENT_TEST around every phase of every test.
    if hasattr(_pytest.runner, "_update_current_test_var"):
        _pytest.runner._update_current_test_var = lambda item, when: None

    statuses = {}
    order = []

    def record(orig, status):
        if orig not in statuses:
            order.append(orig)
            statuses[orig] = status
        elif RANK[status] > RANK[statuses[orig]]:
            statuses[orig] = status

    class Round(object):
        def __init__(self, number):
            self.number = number
            self.back = {}

        def original(self, nodeid):
            for new_rel, old_rel in self.back.items():
                if nodeid == new_rel or nodeid.startswith(new_rel + "::"):
                    return old_rel + nodeid[len(new_rel):]
            return nodeid

        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self, early_config):
            # pytest has read PYTEST_ADDOPTS and PYTEST_PLUGINS by now; the
            # code under test is imported after this (conftests, tests).
            scrub()
            root = str(getattr(early_config, "rootpath", None) or early_config.rootdir)
            for new, old in renamed.items():
                new_rel = os.path.relpath(os.path.abspath(new), root).replace(os.sep, "/")
                old_rel = os.path.relpath(os.path.abspath(old), root).replace(os.sep, "/")
                self.back[new_rel] = old_rel

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, config, items):
            if self.number == 1:
                items.reverse()
                return
            keep = [i for i in items if self.original(i.nodeid).split(" ")[0] in f2p]
            if keep and len(keep) < len(items):
                dropped = [i for i in items if i not in keep]
                config.hook.pytest_deselected(items=dropped)
                items[:] = keep

        def pytest_collectreport(self, report):
            if report.failed:
                record(self.original(report.nodeid), "ERROR")

        def pytest_runtest_logreport(self, report):
            xfail = hasattr(report, "wasxfail")
            if report.when == "call":
                if report.passed:
                    status = "XPASS" if xfail else "PASSED"
                elif report.skipped:
                    status = "XFAIL" if xfail else "SKIPPED"
                else:
                    status = "FAILED"
            elif report.failed:
                status = "ERROR"
            elif report.skipped:
                status = "XFAIL" if xfail else "SKIPPED"
            else:
                status = "PASSED"
            record(self.original(report.nodeid), status)

    args = list(cfg["args"]) + ["-p", "no:cacheprovider", "-rN"]
    codes = []
    try:
        for number in (1, 2):
            print(">>>>> Confirmation round %d" % number)
            sys.stdout.flush()
            codes.append(int(pytest.main(args + paths, plugins=[Round(number)])))
    finally:
        for new, old in renamed.items():
            os.rename(new, old)
    print(">>>>> Confirmation: test files renamed: %s" % ", ".join(
        "%s -> %s" % (old, new) for new, old in sorted(renamed.items())))
    for orig in sorted(order):
        print("%s %s" % (statuses[orig], orig))
    ok = bool(order) and all(RANK[s] <= RANK["XFAIL"] for s in statuses.values())
    code = 0 if ok else (1 if order else max(codes))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


main()
