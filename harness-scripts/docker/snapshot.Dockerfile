# patchgrade snapshot image: env + the tree of an older commit at /testbed,
# shared by the instance images of nearby base commits, which add only what
# differs (src/backend/docker/images/snapshot.rs). Its git objects are
# packed at {{objects}} (an alternate of each instance's repository) and
# /testbed has no .git: each instance makes its own one-commit repository.
# Generated from harness-scripts/docker/snapshot.Dockerfile.
FROM {{env}}
COPY testbed /testbed
COPY setup_snapshot.sh /root/setup_snapshot.sh
RUN cd /testbed && git init -q && git add -A -f \
 && git -c gc.auto=0 commit -q --no-verify -m 'patchgrade snapshot' \
 && bash /root/setup_snapshot.sh && rm /root/setup_snapshot.sh \
 && git -c pack.threads=1 repack -a -d -q \
 && mkdir -p {{objects_parent}} && mv .git/objects {{objects}} && rm -rf .git
WORKDIR /testbed
