#!/usr/bin/env bash
# Idempotent Docker setup for the mucode sandbox on a fresh Debian/Ubuntu machine (run as root):
#   1. apt-get install docker.io and debootstrap if missing;
#   2. start dockerd in the background if no engine answers, and wait for it;
#   3. build the base image without a registry (scripts/build_base_image.sh, cached);
#   4. build the sandbox image (sandbox/Dockerfile, BASE_IMAGE = that base), tag mucode-sandbox:latest;
#   5. install on the host, for the local backend (its jail sees the host's /usr), what programs
#      use: the same Debian packages as the image (numpy, scipy, sortedcontainers, networkx for
#      /usr/bin/python3; g++ and openjdk-17-jdk-headless for C++ and Java).
# Every step is skipped when already done, so calling it twice is cheap.
#
# Env: MUCODE_SANDBOX_IMAGE (default mucode-sandbox:latest), MUCODE_BASE_IMAGE (default: build one
# with debootstrap; set e.g. python:3.11-slim to use a registry image instead),
# MUCODE_SANDBOX_BASE_TAG (the tag of the debootstrap base, default mucode-sandbox-base:bookworm),
# MUCODE_DOCKERD_LOG (default /var/log/mucode-dockerd.log).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
IMAGE="${MUCODE_SANDBOX_IMAGE:-mucode-sandbox:latest}"
BASE="${MUCODE_BASE_IMAGE:-${MUCODE_SANDBOX_BASE_TAG:-mucode-sandbox-base:bookworm}}"
DLOG="${MUCODE_DOCKERD_LOG:-/var/log/mucode-dockerd.log}"

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v docker >/dev/null || need_pkgs+=(docker.io)
if [[ -z "${MUCODE_BASE_IMAGE:-}" ]]; then command -v debootstrap >/dev/null || need_pkgs+=(debootstrap); fi
if ((${#need_pkgs[@]})); then
    echo "[docker] installing ${need_pkgs[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "[docker] starting dockerd (log: $DLOG)"
    as_root bash -c "nohup dockerd >>'$DLOG' 2>&1 </dev/null &"
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || { tail -20 "$DLOG" >&2; echo "[docker] dockerd did not come up" >&2; exit 1; }
fi
echo "[docker] engine up: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

if [[ -z "${MUCODE_BASE_IMAGE:-}" ]]; then
    bash "$HERE/build_base_image.sh" "$BASE"
fi

# The sandbox image is rebuilt only when the executor dir or the base image changed: the hash of both
# is a label on the image (the base's image id changes whenever its package list does).
EXECUTOR=sandbox
BASE_ID="$(docker image inspect "$BASE" --format '{{.Id}}' 2>/dev/null | cut -c8-23 || true)"
SRC_HASH="$(cd "$ROOT" && find "$EXECUTOR" -type f -not -name '*.pyc' -not -path '*/__pycache__/*' | LC_ALL=C sort \
            | xargs sha256sum | sha256sum | cut -c1-16)-$BASE-$BASE_ID"
HAVE="$(docker image inspect "$IMAGE" --format '{{ index .Config.Labels "mucode.src" }}' 2>/dev/null || true)"
if [[ "$HAVE" == "$SRC_HASH" ]]; then
    echo "[docker] $IMAGE up to date"
else
    echo "[docker] building $IMAGE from $BASE"
    # The Docker CLI here, not the SDK mucode's docker backend uses at run time: a one-time bash step
    # (like installing and starting dockerd above), re-runnable without Python (mucode/sandbox/docker_engine.py).
    docker build -q --build-arg "BASE_IMAGE=$BASE" --label "mucode.src=$SRC_HASH" -t "$IMAGE" \
        -f "$ROOT/$EXECUTOR/Dockerfile" "$ROOT/$EXECUTOR" >/dev/null
    echo "[docker] built $IMAGE"
fi

bash "$HERE/host_packages.sh"
