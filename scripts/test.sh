#!/usr/bin/env bash
# The test command: set up what is missing (scripts/setup.sh), then run every test that does not
# need a GPU. Docker tests run for real (setup starts the engine and builds the images).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/algo -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -m "not gpu" "$@"
