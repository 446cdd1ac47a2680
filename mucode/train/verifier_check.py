"""Before the first stage: the run's verifier answers ``GET /readyz`` with 200, or the run stops.

A run whose verifier is not there would otherwise run every stage with every reward masked (retries
logged by the thousand, reward NaN) and exit 0. ``check_verifiers`` polls each URL's ``/readyz`` for up
to ``READY_WAIT_S`` seconds (a service just started may still be warming its sandbox pool: 503), then
raises ``PreflightError`` with one line naming the URL and what it answered. Configured URLs
(``verifier.url``) are checked with the other preflight checks, before the model is loaded or the run
directory written; the in-process verifier (no URL) right after it starts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx

from mucode.train.preflight import PreflightError

__all__ = ["READY_WAIT_S", "check_verifiers"]

READY_WAIT_S = 15.0
"""How long a verifier may take to become ready (connection refused or 503) before the run stops."""


def _probe(url: str) -> str | None:
    """None when ``url`` is ready; else why not, in a few words."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/readyz", timeout=5.0)
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    if response.status_code == 200:
        return None
    return f"/readyz answered {response.status_code}: {response.text[:200]}"


def check_verifiers(urls: Sequence[str], wait_s: float = READY_WAIT_S) -> None:
    """Returns once every URL is ready; raises ``PreflightError`` naming the first that stays unready."""
    for url in urls:
        deadline = time.monotonic() + wait_s
        while (reason := _probe(url)) is not None:
            if time.monotonic() >= deadline:
                raise PreflightError(
                    f"the verifier at {url} is not ready after {wait_s:.0f} s ({reason}); start it "
                    f"(`mucode serve`), fix verifier.url, or leave verifier.url empty for an in-process one"
                )
            time.sleep(1.0)
