#!/bin/bash
# patchgrade toolchain image setup (harness-scripts/docker/setup_toolchain.sh,
# steps filled in by patchgrade): Debian packages of the toolchains that come
# from the suite, then each toolchain run once, so that a copy missing a
# library fails here and not in every instance.
set -euxo pipefail
apt_packages=({{apt_packages}})
if [ ${#apt_packages[@]} -gt 0 ]; then
    for i in 1 2 3; do
        apt-get update -qq && break
        sleep $((i * 5))
    done
    apt-get install -y -qq --no-install-recommends "${apt_packages[@]}"
    rm -rf /var/lib/apt/lists/*
fi
{{steps}}
echo 'patchgrade toolchains ready'
