# patchgrade: the eval step that puts the candidate's code into a
# NON-editable install (spec `install: pip install .`). Reinstalling with pip
# costs about a second per evaluation; when the candidate only modified files
# that the install holds byte for byte as the base commit has them, copying
# those files is exactly what the reinstall would do, so that is done instead.
# Arguments: the files the candidate modified (patchgrade reinstalls with pip
# without asking when it adds, deletes or renames any: the package's file
# list may change). Anything else exits 1 and the eval script reinstalls:
#   - a changed file the install does not hold under the same relative path,
#     or holds transformed (setup.py, build steps, src/ layouts);
#   - no distribution installed from this directory with a RECORD and
#     direct_url.json (old pip), or more than one;
#   - any installed file that no longer matches its RECORD hash (an earlier
#     evaluation in a reused env changed it).
# Python 3.6+, standard library only: it runs in the project's env.
import base64
import csv
import hashlib
import json
import os
import subprocess
import sys
import sysconfig


def reinstall(why):
    print("patchgrade: reinstalling with pip: " + why)
    sys.exit(1)


def head_version(path):
    return subprocess.run(("git", "show", "HEAD:" + path),
                          stdout=subprocess.PIPE, check=True).stdout


def installed_from_here():
    here = "file://" + os.getcwd()
    sites = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    found = []
    for site in sites:
        if not os.path.isdir(site):
            continue
        for name in os.listdir(site):
            info = os.path.join(site, name)
            if not name.endswith(".dist-info"):
                continue
            try:
                with open(os.path.join(info, "direct_url.json")) as f:
                    url = json.load(f).get("url", "").rstrip("/")
            except (OSError, ValueError):
                continue
            if url == here:
                found.append((site, info))
    if len(found) != 1:
        reinstall("{} distributions installed from {}".format(len(found), here))
    return found[0]


def digest(path):
    with open(path, "rb") as f:
        raw = hashlib.sha256(f.read()).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def record(site, info):
    files = {}
    with open(os.path.join(info, "RECORD"), newline="") as f:
        for row in csv.reader(f):
            if len(row) < 2 or not row[1]:
                continue
            full = os.path.normpath(os.path.join(site, row[0]))
            try:
                same = digest(full) == row[1]
            except OSError:
                same = False
            if not same:
                reinstall("{} differs from its install record".format(row[0]))
            files[row[0]] = full
    return files


def main():
    paths = sys.argv[1:]
    if not paths:
        print("patchgrade: nothing changed, the install is the tree's")
        return
    site, info = installed_from_here()
    files = record(site, info)
    copies = []
    for path in paths:
        target = files.get(path)
        if target is None:
            reinstall(path + " is not installed under the same path")
        with open(target, "rb") as f:
            if f.read() != head_version(path):
                reinstall(path + " is installed transformed")
        copies.append((path, target))
    for path, target in copies:
        with open(path, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read())
        # Bytecode of the old file: Python would notice the new mtime, but
        # a copy within the same second and of the same size would not.
        cache = os.path.join(os.path.dirname(target), "__pycache__")
        stem = os.path.splitext(os.path.basename(target))[0] + "."
        if os.path.isdir(cache):
            for name in os.listdir(cache):
                if name.startswith(stem) and name.endswith(".pyc"):
                    os.remove(os.path.join(cache, name))
    print("patchgrade: copied {} changed file(s) into the install from {} "
          "(what reinstalling would do)".format(len(copies), os.path.basename(info)))


main()
