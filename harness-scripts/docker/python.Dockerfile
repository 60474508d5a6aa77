# patchgrade python image: a base image with the interpreter the spec's
# Python version gets (the suite's own python3, or a CPython build copied
# from the host at the path it was built for) and a venv at /opt/venv with
# pip, setuptools and wheel pinned for that version; the interpreter is
# checked before any instance uses it. Generated from
# harness-scripts/docker/python.Dockerfile.
FROM {{base}}
{{add_interpreter}}
COPY setup_python.sh /root/setup_python.sh
RUN bash /root/setup_python.sh && rm /root/setup_python.sh
{{labels}}
