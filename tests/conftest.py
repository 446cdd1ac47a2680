"""Shared test set-up: Docker-marked tests need a running engine.

In CI (CI=true) a missing engine is a failure, never a skip: scripts/setup.sh installs and starts
it, so its absence means the set-up broke. On a developer machine without Docker the docker tests
are skipped with the command that provides it.
"""

from __future__ import annotations

import functools
import os
import subprocess

import pytest


@functools.cache
def docker_engine_error() -> str | None:
    try:
        out = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except (FileNotFoundError, subprocess.TimeoutExpired) as err:
        return f"docker engine unavailable ({err})"
    return None if out.returncode == 0 else f"docker engine unavailable: {out.stderr.strip()[:200]}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    error = docker_engine_error()
    if error is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{error}; CI must run the docker tests (scripts/setup.sh starts dockerd)")
    pytest.skip(f"{error}; run `bash scripts/setup.sh` to install and start it")
