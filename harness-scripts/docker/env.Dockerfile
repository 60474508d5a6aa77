# patchgrade env image: the spec's apt packages (a step of their own, so that
# env images installing the same ones share the layer), and a venv at
# /opt/venv with its requirements and pip packages. Generated from
# harness-scripts/docker/env.Dockerfile.
FROM {{base}}
{{apt}}
COPY . /root/patchgrade-env/
RUN bash /root/patchgrade-env/setup_env.sh && rm -rf /root/patchgrade-env
