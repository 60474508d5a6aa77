# patchgrade apt base image: a base image with a spec's `apt_base_packages`
# (one layer), below the interpreter, so that env images on different
# Pythons that name the same list share it (matplotlib's TeX Live, 1.5 GB).
# The tag is a hash of the base and the list. Generated from
# harness-scripts/docker/apt-base.Dockerfile.
FROM {{base}}
{{apt}}
