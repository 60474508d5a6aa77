#!/bin/bash
# patchgrade base image setup (harness-scripts/docker/setup_base.sh).
set -euxo pipefail
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
