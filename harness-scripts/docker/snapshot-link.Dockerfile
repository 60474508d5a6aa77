# patchgrade snapshot image over the previous snapshot of its chain (a
# spec's `snapshots.chain`; src/backend/docker/images/snapshot.rs): the
# files that changed since the previous snapshot's tree written over it
# (those replacing a deleted path moved in after the deletes), the paths
# gone removed, and a pack of the objects the previous snapshots lack put
# beside theirs at {{objects}}. /testbed has no .git after it, as in every
# snapshot of a spec that builds nothing in it.
# Generated from harness-scripts/docker/snapshot-link.Dockerfile.
FROM {{parent}}
COPY testbed /testbed
COPY snapshot-objects {{objects}}
RUN cd /testbed && xargs -0 -r rm -rf -- < .git/{{delete}} \
 && if [ -d .git/{{moved}} ]; then cp -a .git/{{moved}}/. .; fi \
 && rm -rf .git && git index-pack {{objects}}/pack/{{pack}}.pack > /dev/null
