"""A real verifier service on a loopback port, shared by the tests of this directory.

The math-only service needs no sandbox; it serves ``math`` and the example plug-in ``exact_match``
(installed from examples/ by scripts/setup.sh). Tests that need code use their own fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mucode.verifier.local import local_verifier

LIMITS = {"max_items_per_request": 50, "max_request_bytes": 200_000}


@pytest.fixture(scope="session")
def math_url() -> Iterator[str]:
    with local_verifier(
        "local",
        programs=["math", "exact_match"],
        run_code=False,
        math_workers=2,
        math_timeout_s=2.0,
        **LIMITS,
    ) as url:
        yield url
