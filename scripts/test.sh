#!/usr/bin/env bash
# The test command: set up what is missing (scripts/setup.sh), lint (ruff) and type-check (mypy,
# configured in pyproject.toml) and then run every test that does not need a GPU. A lint or type
# error fails the run before any test starts. Docker tests run for real (setup starts the engine
# and builds the images).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/algo -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] ruff check and ruff format --check"
.venv/bin/ruff check mucode sandbox configs eval tests bench scripts
.venv/bin/ruff format --check mucode sandbox configs eval tests bench scripts
echo "[test] mypy (the mucode package, then the in-sandbox executor, strict)"
.venv/bin/mypy
.venv/bin/mypy --strict sandbox
exec .venv/bin/python -m pytest -m "not gpu" "$@"
