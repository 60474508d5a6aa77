# patchgrade base image: a Debian suite (chosen by the spec's Python version)
# with git, patch, build tools, the suite's python3 and the CA bundle.
# Generated from harness-scripts/docker/base.Dockerfile.
FROM {{root}}
ENV DEBIAN_FRONTEND=noninteractive TZ=Etc/UTC LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
{{copy_ca}}
COPY setup_base.sh /root/setup_base.sh
RUN bash /root/setup_base.sh && rm /root/setup_base.sh
