"""VerifierClient against a real service: batching, several URLs, retries on infrastructure errors only."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from mucode.verifier.client import VerifierClient, VerifierRequestError


def _dead_url() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _items(n: int) -> list[dict]:
    return [{"id": str(i), "program": "math", "response": f"\\boxed{{{i % 3}}}", "spec": {"answer": "1"}} for i in range(n)]


def test_batches_come_back_in_order(math_url: str) -> None:
    client = VerifierClient(math_url, batch_size=3, max_concurrency=4)
    try:
        results = client.verify_sync(_items(20))
    finally:
        client.close()
    assert [r["id"] for r in results] == [str(i) for i in range(20)]
    assert [r["status"] for r in results] == ["correct" if i % 3 == 1 else "wrong_answer" for i in range(20)]


def test_a_dead_url_is_retried_on_another(math_url: str) -> None:
    client = VerifierClient([_dead_url(), math_url], batch_size=2, max_retries=3, backoff_s=0.01)
    try:
        results = client.verify_sync(_items(10))
    finally:
        client.close()
    assert all(r["status"] in ("correct", "wrong_answer") for r in results)


def test_unreachable_verifier_gives_infra_results_not_rewards() -> None:
    client = VerifierClient(_dead_url(), max_retries=2, backoff_s=0.01)
    t0 = time.perf_counter()
    try:
        results = client.verify_sync(_items(3))
    finally:
        client.close()
    assert [r["status"] for r in results] == ["verifier_error"] * 3
    assert all("after 3 attempts" in r["details"]["error"] for r in results)
    assert time.perf_counter() - t0 < 10


def test_user_mistakes_raise_and_are_not_retried(math_url: str) -> None:
    client = VerifierClient(math_url, max_retries=5, backoff_s=5.0)
    bad = [{"program": "math", "response": "x", "spec": {}}]
    t0 = time.perf_counter()
    with pytest.raises(VerifierRequestError, match=r"items\[0\]\.spec\.answer: Field required") as err:
        client.verify_sync(bad)
    client.close()
    assert err.value.status_code == 422
    assert time.perf_counter() - t0 < 5, "a 4xx must not be retried"


def test_async_use_and_sync_inside_a_loop_is_refused(math_url: str) -> None:
    async def run() -> list[dict]:
        client = VerifierClient(math_url + "/")
        try:
            with pytest.raises(RuntimeError, match="await client.verify"):
                client.verify_sync(_items(1))
            return await client.verify(_items(4))
        finally:
            await client.aclose()

    assert [r["id"] for r in asyncio.run(run())] == ["0", "1", "2", "3"]


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="at least one base URL"):
        VerifierClient([])
    assert VerifierClient("127.0.0.1:1, http://h:2/").base_urls == ["http://127.0.0.1:1", "http://h:2"]


def test_items_with_infrastructure_status_are_resent_alone() -> None:
    import re

    import httpx

    from mucode.verifier.local import local_verifier

    # item_timeout_s below the math limit: the slow item comes back verifier_error (infrastructure).
    with local_verifier("local", programs=["math"], run_code=False, math_workers=2, math_timeout_s=1.0,
                        item_timeout_s=0.3) as url:
        client = VerifierClient(url, max_retries=2, backoff_s=0.01)
        items = [{"id": "slow", "program": "math", "response": "\\boxed{9^{9^{9^{9^{9}}}}}", "spec": {"answer": 1}},
                 {"id": "fast", "program": "math", "response": "\\boxed{1}", "spec": {"answer": 1}}]
        try:
            results = client.verify_sync(items)
        finally:
            client.close()
        metrics = httpx.get(f"{url}/metrics").text

    assert [r["status"] for r in results] == ["verifier_error", "correct"]
    assert "item_timeout_s" in results[0]["details"]["error"]

    def count(status: str) -> float:
        m = re.search(rf'^verifier_items_total\{{program="math",status="{status}"\}} (\S+)$', metrics, re.M)
        return float(m.group(1)) if m else 0.0

    assert count("verifier_error") == 3  # the slow item: first try + 2 retries
    assert count("correct") == 1  # the fast item was not sent again
