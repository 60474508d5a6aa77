# patchgrade instance image over a snapshot image: the paths that differ
# from the snapshot's tree removed, the changed files written with the pack
# of the base tree's objects the snapshot lacks (at
# /testbed/.git/objects/pack/), then the same one-commit repository,
# pre_install, install and setup commit as instance.Dockerfile gives.
# Generated from harness-scripts/docker/instance-delta.Dockerfile.
FROM {{snapshot}}
COPY delete.list /root/patchgrade-delete.list
RUN cd /testbed && xargs -0 -r rm -rf -- < /root/patchgrade-delete.list && rm /root/patchgrade-delete.list
COPY testbed /testbed
COPY setup_repo.sh /root/setup_repo.sh
RUN bash /root/setup_repo.sh && rm /root/setup_repo.sh
WORKDIR /testbed
