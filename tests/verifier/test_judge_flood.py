"""One program flooding the judge (a report of hash-colliding integers, a result nested too deeply
for the host's decoder, a large result) freezes neither the service nor its other items: ``/healthz``
keeps answering at once while it is judged, concurrent correct items come back correct, and the
hostile items get a verdict of their own (never ``correct``, never an infrastructure status)."""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from mucode.protocol import INFRA_STATUSES
from mucode.verifier.local import local_verifier
from mucode.verifier.session import VerifierSession

HOST_PIDNS = os.readlink("/proc/self/ns/pid")
GUARD = f"""import os, sys
if os.getuid() == 0 or os.geteuid() == 0 or os.readlink("/proc/self/ns/pid") == {HOST_PIDNS!r}:
    print("UNSAFE: refusing to run the hostile part as root or in the host pid namespace")
    sys.exit(99)
"""
COLLIDING = GUARD + "def f():\n    m = 2 ** 61 - 1\n    return {k * m for k in range(1, 14001)}\n"
DEEP = (
    GUARD
    + "sys.setrecursionlimit(100000)\ndef f():\n    x = [1]\n    for _ in range(5000):\n        x = [x]\n    return x\n"
)
LARGE = GUARD + "def f():\n    return [[k, str(k)] for k in range(300000)]\n"


def _code(item_id: str, program: str, tests: dict, time_limit_s: float = 30) -> dict:
    return {
        "id": item_id,
        "program": "code",
        "response": f"```python\n{program}```",
        "spec": {"tests": tests, "time_limit_s": time_limit_s, "checker": "exact"},
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox backend needs root (CI runs as root)")
def test_healthz_and_neighbours_keep_their_latency_while_one_program_floods_the_judge() -> None:
    hostile = [
        _code("colliding", COLLIDING, {"format": "assert", "assert_code": "assert f() == {1, 2}"}),
        _code("deep", DEEP, {"format": "call", "fn_name": "f", "inputs": [""], "outputs": ["[1]"]}),
        _code("large", LARGE, {"format": "call", "fn_name": "f", "inputs": [""], "outputs": ["[]"]}),
    ]
    correct = [
        _code(
            f"ok{i}",
            "print(sum(map(int, input().split())))\n",
            {"format": "stdio", "inputs": [f"{i} 1\n"], "outputs": [f"{i + 1}\n"]},
        )
        for i in range(4)
    ]
    with local_verifier("local", programs=["code"], backend_options={"slots": 4, "uid_base": 61700}) as url:
        latencies: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    t = time.monotonic()
                    assert http.get(f"{url}/healthz").status_code == 200
                    latencies.append(time.monotonic() - t)
                    stop.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        with VerifierSession(url, retries=0, batch_size=1, max_concurrency=8, timeout_s=240) as session:
            results = {r.id: r for r in session.verify(hostile + correct)}
        stop.set()
        poller.join(60)

    for item in hostile:
        r = results[item["id"]]
        assert r.status.value != "correct" and r.status not in INFRA_STATUSES, (r.id, r.status, r.details)
    for item in correct:
        assert results[item["id"]].status.value == "correct", results[item["id"]]
    assert len(latencies) > 10
    assert max(latencies) < 1.0, f"/healthz took {max(latencies):.2f} s while the judge was flooded"
