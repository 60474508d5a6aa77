#!/bin/bash
# patchgrade base image setup (harness-scripts/docker/setup_base.sh).
set -euxo pipefail
# What Debian's own images set up: apt keeps no downloaded package and no
# package cache, here and in every apt layer above (a bootstrapped root does
# not have it: 179 MB of this image were /var/cache/apt, and each env's apt
# layer kept its .deb files too). Documentation is not installed either
# (the copyright files are).
cat > /etc/apt/apt.conf.d/docker-clean <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
mkdir -p /etc/dpkg/dpkg.cfg.d
cat > /etc/dpkg/dpkg.cfg.d/excludes <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
EOF
for i in 1 2 3; do
    apt-get update -qq && break
    sleep $((i * 5))
done
apt-get install -y -qq --no-install-recommends \
    ca-certificates git patch build-essential iproute2 \
    python3 python3-venv python3-dev
update-ca-certificates
rm -rf /var/lib/apt/lists/*
# /testbed belongs to whoever runs the tests; git must not refuse it.
git config --system --add safe.directory '*'
git config --system user.name patchgrade
git config --system user.email patchgrade@localhost
git config --system init.defaultBranch main
