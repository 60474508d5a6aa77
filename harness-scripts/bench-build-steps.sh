#!/bin/bash
# What a Dockerfile step costs the classic builder (docs/cold-start-log.md
# "Session 23"): the same small change built over IMAGE three ways, ROUNDS
# times each, with --no-cache, and the wall time of each build printed.
#
#   harness-scripts/bench-build-steps.sh IMAGE [ROUNDS]
#
#   seven   the instance-over-snapshot Dockerfile before session 23: copy the
#           delete list, delete, copy the files, copy the script, run it,
#           WORKDIR, and the build's LABEL
#   two     one COPY and one RUN (the same work), and the LABEL
#   bare    one COPY and one RUN, no LABEL
#
# IMAGE needs bash and git and a /testbed (a snapshot image does).
set -euo pipefail
image=${1:?parent image, e.g. a patchgrade.snap.* image}
rounds=${2:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"; docker rmi -f pgsteps:seven pgsteps:two pgsteps:bare >/dev/null 2>&1 || true' EXIT
for v in seven two bare; do
    mkdir -p "$dir/$v/testbed/.git"
    for i in $(seq 40); do
        mkdir -p "$dir/$v/testbed/pgsteps/x$((i % 5))"
        echo "v$i" > "$dir/$v/testbed/pgsteps/x$((i % 5))/f$i.py"
    done
done
printf 'pgsteps/gone\0' > "$dir/seven/delete.list"
printf '#!/bin/bash\ncd /testbed && git --version > /dev/null\n' > "$dir/seven/setup_repo.sh"
for v in two bare; do
    cp "$dir/seven/delete.list" "$dir/$v/testbed/.git/patchgrade-delete.list"
    cp "$dir/seven/setup_repo.sh" "$dir/$v/testbed/.git/patchgrade-setup.sh"
done
cat > "$dir/seven/Dockerfile" <<DF
FROM $image
COPY delete.list /root/patchgrade-delete.list
RUN cd /testbed && xargs -0 -r rm -rf -- < /root/patchgrade-delete.list && rm /root/patchgrade-delete.list
COPY testbed /testbed
COPY setup_repo.sh /root/setup_repo.sh
RUN bash /root/setup_repo.sh && rm /root/setup_repo.sh
WORKDIR /testbed
DF
cat > "$dir/two/Dockerfile" <<DF
FROM $image
COPY testbed /testbed
RUN cd /testbed && xargs -0 -r rm -rf -- < .git/patchgrade-delete.list && bash .git/patchgrade-setup.sh && rm .git/patchgrade-*
DF
cp "$dir/two/Dockerfile" "$dir/bare/Dockerfile"
for _ in $(seq "$rounds"); do
    for v in seven two bare; do
        label=(--label patchgrade.tier=instances)
        [ "$v" = bare ] && label=()
        s=$(date +%s%N)
        DOCKER_BUILDKIT=0 docker build -q --no-cache "${label[@]}" -t "pgsteps:$v" "$dir/$v" > /dev/null 2>&1
        e=$(date +%s%N)
        echo "$v $(( (e - s) / 1000000 )) ms"
    done
done
