#!/bin/bash
# patchgrade python image setup (harness-scripts/docker/setup_python.sh,
# values filled in by patchgrade): runtime libraries of a copied build, the
# interpreter checked, its standard library byte-compiled, and the venv.
set -euxo pipefail
py={{python}}
version={{version}}
copied={{copied}}
prefix={{prefix}}

if [ "$copied" = 1 ]; then
    # The shared libraries a CPython built on bookworm links against (readelf
    # -d of libpython and lib-dynload/*.so); the base has most through its
    # python3 already. Tk is left out: tkinter fails to import, as on Debian
    # without python3-tk.
    missing=()
    for p in {{apt_packages}}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
        rm -rf /var/lib/apt/lists/*
    fi
    # Every extension module must find its libraries (Tk aside).
    unresolved=$(for f in "$prefix"/lib/libpython*.so* "$prefix/lib/python$version"/lib-dynload/*.so; do
        case "$f" in *_tkinter*) continue ;; esac
        ldd "$f" 2>&1 | grep 'not found' | sed "s|^|$f: |" || true
    done)
    if [ -n "$unresolved" ]; then
        echo "patchgrade: the copied Python $version misses libraries in this image:" >&2
        echo "$unresolved" >&2
        exit 1
    fi
fi

check='
import sys, ssl, sqlite3, ctypes, zlib, bz2, lzma, hashlib, decimal, pyexpat, readline, curses, uuid
got = "%d.%d" % sys.version_info[:2]
if got != sys.argv[1]:
    sys.exit("patchgrade: the interpreter is Python %s, the image wants %s" % (got, sys.argv[1]))
ctypes.CDLL(None)
hashlib.sha256(b"x").hexdigest()
print("patchgrade python:", sys.version.split()[0], sys.executable, ssl.OPENSSL_VERSION, "sqlite", sqlite3.sqlite_version)
'
"$py" -c "$check" "$version"

if [ "$copied" = 1 ]; then
    # The host's __pycache__ folders were left out (three optimisation levels
    # each); one level compiled here spares every container the work.
    "$py" -m compileall -q -j 0 "$prefix/lib/python$version" >/dev/null \
        || echo "patchgrade: some standard library files did not byte-compile; they compile on import"
fi

rm -rf {{venv}}
"$py" -m venv {{venv}}
# ensurepip's pip before 19 (18.1 with 3.6) takes the base image's
# PIP_NO_CACHE_DIR=1 for a cache folder named 1; the flag it reads right.
env -u PIP_NO_CACHE_DIR {{venv}}/bin/python -m pip install --no-cache-dir {{tools}}
{{venv}}/bin/python -c "$check" "$version"
{{venv}}/bin/python - {{tools}} <<'PY'
import sys
import setuptools  # first: its distutils shim refuses a distutils already imported
import pip, wheel
got = ["pip==" + pip.__version__, "setuptools==" + setuptools.__version__, "wheel==" + wheel.__version__]
if got != sys.argv[1:]:
    sys.exit("patchgrade: the venv has %s, wanted %s" % (got, sys.argv[1:]))
print("patchgrade venv:", " ".join(got))
PY
