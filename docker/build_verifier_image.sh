#!/usr/bin/env bash
# Build mucode-verifier:latest without a registry: download a wheelhouse with the host's pip (PyPI or
# its mirror) into docker/wheels/, then `docker build` on a bare base image that only has python3.
#   MUCODE_VERIFIER_BASE_IMAGE  base image (default: mucode-sandbox-base:bookworm, the debootstrap base)
#   MUCODE_VERIFIER_IMAGE       tag (default: mucode-verifier:latest)
#   PIP                         pip to download with (default: .venv/bin/pip)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BASE="${MUCODE_VERIFIER_BASE_IMAGE:-mucode-sandbox-base:bookworm}"
IMAGE="${MUCODE_VERIFIER_IMAGE:-mucode-verifier:latest}"
PIP="${PIP:-.venv/bin/pip}"
PYV="$(docker run --rm --entrypoint python3 "$BASE" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
echo "[verifier-image] wheelhouse for cp$PYV in docker/wheels"
"$PIP" download -q -d docker/wheels --only-binary=:all: --python-version "$PYV" \
    -r docker/verifier-requirements.txt pip "setuptools>=68" wheel 2> >(grep -v "is ignored: it is neither" >&2)
echo "[verifier-image] building $IMAGE from $BASE"
docker build -q --build-arg "BASE_IMAGE=$BASE" -f docker/verifier.Dockerfile -t "$IMAGE" . >/dev/null
echo "[verifier-image] built $IMAGE"
