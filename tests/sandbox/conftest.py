"""Sandbox test fixtures: one started backend per kind for the whole session (``sb`` runs a test
against both; the docker one carries the ``docker`` marker)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sandbox_helpers import Handle


def _is_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture(scope="session")
def local_handle() -> Iterator[Handle]:
    if not _is_root():
        pytest.skip("the local sandbox backend needs root (CI runs as root)")
    # uid ranges of their own: other test suites on this host run sandboxes with the default ones
    h = Handle("local", slots=3, uid_base=61500, health_interval_s=1.0)
    yield h
    h.close()


@pytest.fixture(scope="session")
def docker_handle() -> Iterator[Handle]:
    image = os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest")  # scripts/docker_setup.sh's tag
    h = Handle(
        "docker", containers=1, slots_per_container=3, uid_base=10500, health_interval_s=1.0, image=image
    )
    yield h
    h.close()


BACKENDS = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


@pytest.fixture(params=BACKENDS)
def sb(request: pytest.FixtureRequest) -> Handle:
    """Each test using ``sb`` runs against both backends."""
    return request.getfixturevalue(f"{request.param}_handle")
