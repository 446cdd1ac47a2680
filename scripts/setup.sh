#!/usr/bin/env bash
# Set up a fresh machine for mucode, idempotently: a Python virtual env in .venv with mucode and its
# test dependencies, a Docker engine and the sandbox images (built without a registry if need be).
#   TORCH_SPEC   torch requirement to install first (default: the CPU build torch==2.13.0; on a GPU
#                machine use e.g. TORCH_SPEC=torch to get a CUDA build)
#   PYTHON       interpreter for the venv (default python3; 3.10–3.12)
#   MUCODE_SKIP_DOCKER=1  skip the Docker engine and images (the local sandbox backend still works)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
echo "[setup] installing $TORCH_SPEC and mucode[dev,verl] into .venv"
.venv/bin/pip install -q --disable-pip-version-check "$TORCH_SPEC" 2> >(grep -v "is ignored: it is neither" >&2)
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,verl]' 2> >(grep -v "is ignored: it is neither" >&2)
for plugin in examples/*/pyproject.toml; do
  [ -e "$plugin" ] || continue
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -e "$(dirname "$plugin")" 2> >(grep -v "is ignored: it is neither" >&2)
done

if [ "${MUCODE_SKIP_DOCKER:-0}" != "1" ] && [ -f scripts/docker_setup.sh ]; then
  bash scripts/docker_setup.sh
  # `docker compose up` (compose.yaml) is tested with Debian's docker-compose 1.29 and with the v2
  # plugin where one is installed.
  if ! command -v docker-compose >/dev/null && ! docker compose version >/dev/null 2>&1; then
    echo "[setup] installing docker-compose"
    apt-get install -y -qq docker-compose >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null; }
  fi
fi
if [ "${MUCODE_SKIP_DOCKER:-0}" = "1" ]; then
  bash scripts/host_packages.sh  # the local backend still needs them (docker_setup.sh runs it otherwise)
fi
echo "[setup] done: .venv/bin/mucode --help"
