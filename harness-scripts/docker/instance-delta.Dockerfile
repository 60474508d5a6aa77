# patchgrade instance image over a snapshot image: the paths that differ
# from the snapshot's tree removed, the changed files written, the base
# tree's missing objects indexed, then the same one-commit repository,
# pre_install, install and setup commit as instance.Dockerfile gives.
# Generated from harness-scripts/docker/instance-delta.Dockerfile.
FROM {{snapshot}}
COPY delete.list /root/patchgrade-delete.list
RUN cd /testbed && xargs -0 -r rm -rf -- < /root/patchgrade-delete.list && rm /root/patchgrade-delete.list
COPY testbed /testbed
COPY objects.pack setup_repo.sh /root/
RUN bash /root/setup_repo.sh && rm /root/setup_repo.sh /root/objects.pack
WORKDIR /testbed
