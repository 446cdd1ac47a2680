# The mucode verifier service image (FastAPI + math-verify + mucode's reward programs).
# Build context: the repository root (see .dockerignore). It holds no sandbox: code runs in the
# sandbox containers, reached through Unix sockets in a shared volume (compose.yaml), so this image
# needs neither Docker nor the host's Docker socket.
#
# BASE_IMAGE: any Debian-like image with python3 (3.10-3.12). The public default has pip; a bare base
# (e.g. the registry-free debootstrap image of scripts/build_base_image.sh) works when docker/wheels/
# holds a wheelhouse: docker/build_verifier_image.sh fills it and builds.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1

COPY docker/pip-install.sh docker/verifier-requirements.txt /build/
COPY docker/wheels/ /wheels/
RUN sh /build/pip-install.sh -r /build/verifier-requirements.txt "setuptools>=68" wheel

COPY pyproject.toml README* MANIFEST.in /src/
COPY mucode /src/mucode
# shipped inside the package by pyproject.toml's package-dir mapping
COPY sandbox /src/sandbox
COPY configs /src/configs
COPY eval /src/eval
RUN sh /build/pip-install.sh --no-deps --no-build-isolation /src \
    && rm -rf /src /wheels /build \
    && python3 -c "import mucode.verifier.app, mucode.rewards.math, mucode.rewards.code"

# Listens on all interfaces *inside* its container; compose publishes it on the host's loopback only.
ENV MUCODE_HOST=0.0.0.0 MUCODE_PORT=8000
EXPOSE 8000
# Root inside the container (no capabilities, read-only root fs in compose.yaml): the executors'
# sockets are root-owned with mode 0600 so that sandboxed programs cannot reach them.
CMD ["python3", "-m", "mucode.verifier"]
