#!/usr/bin/env bash
# The test command: set up what is missing (scripts/setup.sh), lint (ruff) and type-check (mypy,
# configured in pyproject.toml) and then run every test that does not need a GPU. A lint or type
# error fails the run before any test starts. Docker tests run for real (setup starts the engine
# and builds the images).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/algo -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
lint_paths=(mucode tests bench scripts)
[[ -d sandbox ]] && lint_paths+=(sandbox)  # the executor's old home, while it still exists
echo "[test] ruff check ${lint_paths[*]}"
.venv/bin/ruff check "${lint_paths[@]}"
echo "[test] mypy (the mucode package)"
.venv/bin/mypy
exec .venv/bin/python -m pytest -m "not gpu" "$@"
