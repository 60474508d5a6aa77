# patchgrade snapshot image of a spec that builds nothing in it: env + the
# tree of an older commit at /testbed, shared by the instance images of
# nearby base commits (src/backend/docker/images/snapshot.rs). Its git
# objects are a pack made from the mirror (no `git add` in the image), at
# {{objects}}: an alternate of each instance's repository; /testbed has no
# .git, each instance makes its own one-commit repository.
# Generated from harness-scripts/docker/snapshot-tree.Dockerfile.
FROM {{env}}
COPY testbed /testbed
COPY snapshot-objects {{objects}}
RUN git index-pack {{objects}}/pack/{{pack}}.pack > /dev/null
WORKDIR /testbed
