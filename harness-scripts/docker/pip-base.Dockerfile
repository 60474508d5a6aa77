# patchgrade pip base image: a spec's `pip_base_packages` (exact pins) in the
# python image's venv, without their dependencies, so that env images on this
# Python naming the same list share one layer (xarray's four envs: 0.9 GB
# each before). The env's own resolve runs over it and keeps what satisfies
# it. The tag is a hash of the python image and the list. Generated from
# harness-scripts/docker/pip-base.Dockerfile.
FROM {{python}}
COPY pip-base.txt /root/patchgrade-pip-base.txt
RUN {{venv}}/bin/python -m pip install --no-deps -r /root/patchgrade-pip-base.txt && rm /root/patchgrade-pip-base.txt
