# patchgrade instance image over a snapshot image, in one COPY and one RUN
# (each build step costs the classic builder a container and a commit):
# the changed files written over the snapshot's tree with, in
# /testbed/.git, the pack of the base tree's objects the snapshot lacks, the
# setup script, the list of paths to delete and the files that replace a
# deleted path (moved in after the deletes); then the paths deleted and the
# same one-commit repository, pre_install, install and setup commit as
# instance.Dockerfile gives. WORKDIR comes from the snapshot.
# Generated from harness-scripts/docker/instance-delta.Dockerfile.
FROM {{snapshot}}
COPY testbed /testbed
RUN bash /testbed/.git/{{setup}} && rm /testbed/.git/{{setup}}
