#!/usr/bin/env bash
# Install on this host what programs run by the `local` sandbox backend use (its jail sees the host's
# /usr): the same Debian packages as the sandbox image (scripts/build_base_image.sh), i.e. numpy,
# scipy, sortedcontainers and networkx for /usr/bin/python3, g++ for C++ and a JDK for Java.
# Idempotent: installs only what is missing. Called by scripts/docker_setup.sh and scripts/setup.sh.
set -euo pipefail

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

HOST_PKGS=(python3-numpy python3-scipy python3-sortedcontainers python3-networkx g++ openjdk-17-jdk-headless)
missing=()
for p in "${HOST_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "[host] installing ${missing[*]} (programs under the local sandbox backend use them)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
fi
