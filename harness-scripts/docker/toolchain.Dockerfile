# patchgrade toolchain image: a base image with the toolchains a spec asks
# for (Rust, Go, Node.js, a JDK), each copied from the host or a registry
# download (one COPY layer each, under the path it has in the image) or
# installed from the suite's Debian packages, checked by running it. Shared
# by every env image that asks for the same toolchains; the tag is a hash of
# what built it. Generated from harness-scripts/docker/toolchain.Dockerfile.
FROM {{base}}
{{copies}}
COPY setup_toolchain.sh /root/setup_toolchain.sh
{{env}}
RUN bash /root/setup_toolchain.sh && rm /root/setup_toolchain.sh
{{labels}}
