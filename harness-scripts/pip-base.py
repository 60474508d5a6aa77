#!/usr/bin/env python3
"""Print the `pip_base_packages` of a set of env images: the exact pins
(`name==version`) that every image's venv holds (`pip freeze` in each).

    harness-scripts/pip-base.py IMAGE [IMAGE ...] > pins.yaml

Give the env images of one spec's versions on one Python (built without a
pip base, or with one: the answer is the same). The list goes into the spec
as `pip_base_packages`; an env built over it keeps what satisfies its own
resolve, so its packages stay what they were when the list was taken (check
with `--compare`: the freezes of old and new env images, name by name).
Given a spec's instance images instead (one that installs its
dependencies per instance, as sphinx's `pip install -e .[test]`), it
prints what every instance's install resolved to; the editable checkout
itself has no `==` line and is never a pin.

    harness-scripts/pip-base.py --compare OLD_IMAGE NEW_IMAGE
"""
import subprocess
import sys

VENV_PYTHON = "/opt/venv/bin/python"


def freeze(image):
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", VENV_PYTHON,
         image, "-m", "pip", "freeze", "--all"],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{image}: pip freeze failed: {out.stderr.strip()}")
    pins = {}
    for line in out.stdout.splitlines():
        name, sep, version = line.partition("==")
        if sep and name and " " not in name:
            pins[name.lower().replace("_", "-").replace(".", "-")] = line
    return pins


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--compare":
        if len(argv) != 3:
            sys.exit("--compare takes two images")
        old, new = freeze(argv[1]), freeze(argv[2])
        differ = 0
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                differ += 1
                print(f"{name}: {old.get(name, '-')} -> {new.get(name, '-')}")
        print(f"{len(old)} and {len(new)} pins, {differ} differ")
        return 1 if differ else 0
    freezes = [freeze(i) for i in argv]
    common = set(freezes[0].values())
    for f in freezes[1:]:
        common &= set(f.values())
    # pip, setuptools and wheel are the python image's (pinned by rule).
    tools = {"pip", "setuptools", "wheel"}
    pins = sorted((p for p in common if p.partition("==")[0].lower() not in tools),
                  key=str.lower)
    print(f"# {len(pins)} pins common to {len(argv)} env images", file=sys.stderr)
    print("pip_base_packages:")
    for p in pins:
        print(f"  - {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
