#!/bin/bash
# Would a snapshot built with an earlier snapshot's compiler cache compile
# less? (docs/cold-start-log.md "Session 23", an experiment for issue 22.) Run
# inside a matplotlib snapshot image (3.5-3.7) with the other snapshot's
# /opt/patchgrade/ccache mounted read-only at /seed (an empty folder for the
# cold case); it repeats the snapshot's pre_install and install through
# ccache and the -g0 wrappers, as the snapshot setup does, and prints the
# install's seconds and the cache's hits:
#
#   docker create --name seedsrc <earlier snapshot> true
#   docker cp seedsrc:/opt/patchgrade/ccache /tmp/seed && docker rm seedsrc
#   docker run --rm -v /tmp/seed:/seed:ro \
#       -v $PWD/harness-scripts/seeded-snapshot-build.sh:/s.sh:ro <snapshot> bash /s.sh
set -e
cp -a /seed /tmp/cc
mkdir -p /tmp/nodebug; for c in gcc g++ cc c++ x86_64-linux-gnu-gcc x86_64-linux-gnu-g++; do [ -x /usr/bin/$c ] && printf '#!/bin/sh\nexec /usr/bin/%s "$@" -g0\n' $c > /tmp/nodebug/$c && chmod +x /tmp/nodebug/$c; done
export PATH=/usr/lib/ccache:/tmp/nodebug:$PATH CCACHE_DIR=/tmp/cc CCACHE_COMPILERCHECK=content
source /opt/venv/bin/activate; cd /testbed
mkdir -p build; ln -s /opt/patchgrade/sources/qhull-2020.2 build/qhull-2020.2; cp -as /opt/patchgrade/sources/freetype-2.6.1 build/freetype-2.6.1; (cd build/freetype-2.6.1 && sh autogen.sh) >/dev/null 2>&1
export SETUPTOOLS_SCM_PRETEND_VERSION=3.7.0
ccache -z >/dev/null; s=$(date +%s); CPPFLAGS=-fno-lto pip install --no-build-isolation --no-deps -e . >/tmp/log 2>&1 || tail -5 /tmp/log; e=$(date +%s)
echo "install $((e-s)) s"; ccache -s | grep -E "Hits|Misses" | head -2
