#!/usr/bin/env bash
# Bootstraps a minimal Debian root filesystem for patchgrade's base images
# when no registry answers, and writes it as a tar archive that patchgrade
# imports into the engine (`docker import`). Driven by patchgrade, not by
# hand: `bootstrap-base.sh SUITE OUT.tar [MIRROR]`.
#
# The archive holds the `minbase` variant (apt, dpkg, coreutils, bash) of the
# suite; everything else (python3, git, build tools, the CA bundle) is
# installed by the base image's Dockerfile, so this script's output depends
# only on the suite and the mirror's contents that day.
set -euo pipefail

suite=${1:?usage: bootstrap-base.sh SUITE OUT.tar [MIRROR]}
out=${2:?usage: bootstrap-base.sh SUITE OUT.tar [MIRROR]}
mirror=${3:-http://deb.debian.org/debian}

if ! command -v debootstrap >/dev/null; then
    echo "bootstrap-base.sh: debootstrap is not installed (apt-get install -y debootstrap)" >&2
    exit 127
fi
if [ "$(id -u)" != 0 ]; then
    echo "bootstrap-base.sh: debootstrap needs root" >&2
    exit 126
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/patchgrade-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT

debootstrap --variant=minbase "$suite" "$root" "$mirror"
# Smaller image, nothing host-specific left behind.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
: > "$root/etc/hostname"
tar --numeric-owner -C "$root" -cf "$out.partial" .
mv "$out.partial" "$out"
echo "bootstrap-base.sh: wrote $out ($(du -h "$out" | cut -f1)) for $suite from $mirror"
