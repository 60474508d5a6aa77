# patchgrade instance image: the base commit's tree at /testbed as a git
# repository with one commit (no history, no clone), pre_install and install
# run, then a setup commit so that `git diff` shows only later changes.
# Generated from harness-scripts/docker/instance.Dockerfile.
FROM {{env}}
COPY testbed /testbed
COPY setup_repo.sh /root/setup_repo.sh
RUN bash /root/setup_repo.sh && rm /root/setup_repo.sh
WORKDIR /testbed
