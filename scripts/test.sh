#!/usr/bin/env bash
# The test command: set up what is missing (scripts/setup.sh), lint (ruff) and type-check (mypy,
# configured in pyproject.toml) and then run every test that does not need a GPU. A lint or type
# error fails the run before any test starts. Docker tests run for real (setup starts the engine
# and builds the images).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/algo -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] ruff check mucode tests bench scripts"  # mucode/ holds the in-sandbox executor too
.venv/bin/ruff check mucode tests bench scripts
echo "[test] mypy (the mucode package)"
.venv/bin/mypy
exec .venv/bin/python -m pytest -m "not gpu" "$@"
