"""Open-loop load generation against a running verifier (bench/verifier.py, bench/soak.py and the load test).

Requests are sent at a fixed rate whatever the latency (open loop: a slow server builds a queue
instead of slowing the generator, so overload shows up as latency). The server process's resident
memory (with its children: math workers, local sandbox) is sampled once a second when its pid is given.
:func:`mixed_batch` is the load both the bench and tests/verifier/test_load.py send.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from proctree import rss_mb

__all__ = ["LoadReport", "mixed_batch", "run_load", "wanted"]


@dataclass
class LoadReport:
    requests: int = 0
    items: int = 0
    errors: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def latency(self, q: float) -> float:
        xs = sorted(self.latencies_s)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    def summary(self) -> str:
        rss = f"rss {self.rss_mb[0]:.0f} -> {self.rss_mb[-1]:.0f} MB" if self.rss_mb else "rss n/a"
        return (
            f"{self.requests} requests, {self.items} items in {self.wall_s:.1f} s "
            f"({self.items / max(self.wall_s, 1e-9):.1f} items/s); errors {len(self.errors)}; latency p50 "
            f"{self.latency(0.5) * 1000:.0f} ms p99 {self.latency(0.99) * 1000:.0f} ms; {rss}; "
            f"statuses {dict(self.statuses)}"
        )


def mixed_batch(i: int) -> list[dict[str, Any]]:
    """Request ``i`` of the standard load: a right and a wrong stdio program, a right and a wrong math
    answer (each item's ``want`` is the status it must get)."""
    a, b = i % 7, i % 5
    stdio = {"format": "stdio", "inputs": [f"{a} {b}\n"], "outputs": [f"{a + b}\n"]}
    good = "```python\nx, y = map(int, input().split())\nprint(x + y)\n```"
    bad = "```python\nx, y = map(int, input().split())\nprint(x - y - 1)\n```"
    return [
        {"id": f"{i}-c1", "program": "code", "response": good, "spec": {"tests": stdio}, "want": "correct"},
        {
            "id": f"{i}-c0",
            "program": "code",
            "response": bad,
            "spec": {"tests": stdio},
            "want": "wrong_answer",
        },
        {
            "id": f"{i}-m1",
            "program": "math",
            "response": f"\\boxed{{\\frac{{{2 * a}}}{{2}}}}",
            "spec": {"answer": a},
            "want": "correct",
        },
        {
            "id": f"{i}-m0",
            "program": "math",
            "response": f"\\boxed{{{a + 1}}}",
            "spec": {"answer": a},
            "want": "wrong_answer",
        },
    ]


def wanted(item: dict[str, Any], result: dict[str, Any]) -> bool:
    """The ``check`` for :func:`mixed_batch` items: the result has the status the item wants."""
    return bool(result["status"] == item["want"])


async def run_load(
    url: str,
    make_batch: Callable[[int], list[dict[str, Any]]],
    *,
    rate_per_s: float,
    duration_s: float,
    check: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    server_pid: int | None = None,
    timeout_s: float = 60.0,
) -> LoadReport:
    """Sends ``make_batch(i)`` to /v1/verify ``rate_per_s`` times a second for ``duration_s``.

    An error is a non-200 answer, a transport failure, or a result for which ``check(item, result)``
    is False (e.g. a wrong verdict or an infrastructure status).
    """
    report = LoadReport()
    interval = 1.0 / rate_per_s
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)

    async def one(client: httpx.AsyncClient, i: int) -> None:
        items = make_batch(i)
        t0 = time.perf_counter()
        try:
            r = await client.post(f"{url}/v1/verify", json={"items": items})
        except httpx.HTTPError as exc:
            report.errors.append(f"request {i}: {exc!r}")
            return
        report.latencies_s.append(time.perf_counter() - t0)
        if r.status_code != 200:
            report.errors.append(f"request {i}: HTTP {r.status_code} {r.text[:200]}")
            return
        for item, result in zip(items, r.json()["results"], strict=True):
            report.items += 1
            report.statuses[result["status"]] += 1
            if check is not None and not check(item, result):
                report.errors.append(
                    f"request {i}: item {item.get('id')}: {result['status']} {result['details']}"[:300]
                )

    async def sample_memory(stop: asyncio.Event) -> None:
        while server_pid is not None and not stop.is_set():
            report.rss_mb.append(rss_mb(server_pid))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    stop = asyncio.Event()
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
        sampler = asyncio.create_task(sample_memory(stop))
        tasks: list[asyncio.Task[None]] = []
        start = time.perf_counter()
        i = 0
        while (now := time.perf_counter()) - start < duration_s:
            tasks.append(asyncio.create_task(one(client, i)))
            report.requests += 1
            i += 1
            await asyncio.sleep(max(0.0, start + i * interval - now))
        await asyncio.gather(*tasks)
        report.wall_s = time.perf_counter() - start
        stop.set()
        await sampler
    return report
