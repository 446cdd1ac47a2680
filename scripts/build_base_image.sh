#!/usr/bin/env bash
# Build the sandbox *base* image without a registry: debootstrap a minimal Debian with python3, the
# libraries programs may import (numpy, scipy, sortedcontainers, networkx, from Debian's packages),
# g++ and a JDK (the compiled languages of sandbox/languages.py), then `docker import` it. Cached: does nothing when the image exists with the same package list and
# suite (their hash is the image's `mucode.base` label), so a changed list rebuilds it.
#
#   bash scripts/build_base_image.sh [IMAGE]      (default IMAGE: $MUCODE_SANDBOX_BASE_TAG or
#                                                 mucode-sandbox-base:bookworm)
#
# Env: MUCODE_DEBIAN_MIRROR (default http://deb.debian.org/debian), MUCODE_DEBIAN_SUITE (bookworm),
#      MUCODE_REBUILD_BASE=1 forces a rebuild.
set -euo pipefail

IMAGE="${1:-${MUCODE_SANDBOX_BASE_TAG:-mucode-sandbox-base:bookworm}}"
MIRROR="${MUCODE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${MUCODE_DEBIAN_SUITE:-bookworm}"
# What programs can import besides the standard library (also installed on the host for the local
# backend by scripts/docker_setup.sh). Changing this list changes KEY and so rebuilds the image.
PACKAGES="python3,python3-numpy,python3-scipy,python3-sortedcontainers,python3-networkx,g++,openjdk-17-jdk-headless"
KEY="$(printf '%s %s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)"

HAVE="$(docker image inspect "$IMAGE" --format '{{ index .Config.Labels "mucode.base" }}' 2>/dev/null || true)"
if [[ "${MUCODE_REBUILD_BASE:-0}" != "1" && "$HAVE" == "$KEY" ]]; then
    echo "[base] $IMAGE up to date (set MUCODE_REBUILD_BASE=1 to rebuild)"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "[base] debootstrap needs root: run this script as root (sudo)" >&2
    exit 1
fi
if ! command -v debootstrap >/dev/null; then
    echo "[base] debootstrap missing: apt-get install -y debootstrap" >&2
    exit 1
fi

WORK="$(mktemp -d /var/tmp/mucode-base.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
echo "[base] debootstrap $SUITE from $MIRROR into $WORK (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/log" 2>&1 || {
    tail -30 "$WORK/log" >&2
    echo "[base] debootstrap failed (is $MIRROR reachable? set MUCODE_DEBIAN_MIRROR)" >&2
    exit 1
}
# Trim what a sandbox never needs: apt lists, caches, docs, man pages, locales (the JDK's
# /usr/share/doc entries are symlink targets of nothing it loads).
rm -rf "$WORK/root/var/lib/apt/lists/"* "$WORK/root/var/cache/apt/"*.bin "$WORK/root/var/cache/apt/archives/"*.deb \
       "$WORK/root/usr/share/doc" "$WORK/root/usr/share/man" "$WORK/root/usr/share/info" "$WORK/root/usr/share/locale"
tar --numeric-owner -C "$WORK/root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/usr/bin/python3"]' --change "LABEL mucode.base=$KEY" - "$IMAGE" >/dev/null
echo "[base] built $IMAGE"
