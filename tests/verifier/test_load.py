"""A bounded load test: `mucode serve --backend docker` as its own process, a fixed request rate on
loopback, no errors, flat memory; then SIGTERM shuts it down cleanly. The longer run is
``python bench/verifier.py --load-seconds 120``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mucode.verifier.loadtest import run_load

pytestmark = pytest.mark.docker

WARMUP_S, MEASURE_S, RATE = 4.0, 20.0, 8.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def batch(i: int) -> list[dict]:
    a, b = i % 7, i % 5
    stdio = {"format": "stdio", "inputs": [f"{a} {b}\n"], "outputs": [f"{a + b}\n"]}
    good = "```python\nx, y = map(int, input().split())\nprint(x + y)\n```"
    bad = "```python\nx, y = map(int, input().split())\nprint(x - y - 1)\n```"
    return [
        {"id": f"{i}-c1", "program": "code", "response": good, "spec": {"tests": stdio}, "want": "correct"},
        {"id": f"{i}-c0", "program": "code", "response": bad, "spec": {"tests": stdio}, "want": "wrong_answer"},
        {"id": f"{i}-m1", "program": "math", "response": f"\\boxed{{\\frac{{{2 * a}}}{{2}}}}", "spec": {"answer": a},
         "want": "correct"},
        {"id": f"{i}-m0", "program": "math", "response": f"\\boxed{{{a + 1}}}", "spec": {"answer": a}, "want": "wrong_answer"},
    ]


def test_fixed_rate_load_no_errors_flat_memory() -> None:
    port = _free_port()
    mucode = shutil.which("mucode", path=str(Path(sys.executable).parent)) or "mucode"
    env = {**os.environ, "MUCODE_MATH_WORKERS": "2", "MUCODE_BACKEND_OPTIONS": json.dumps(
        {"containers": 2, "slots_per_container": 2})}
    proc = subprocess.Popen([mucode, "serve", "--backend", "docker", "--port", str(port), "--log-level", "info"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, "mucode serve exited during start-up (its log follows the test)"
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "mucode serve did not become ready"
            time.sleep(0.3)

        def check(item: dict, result: dict) -> bool:
            return result["status"] == item["want"]

        warm = asyncio.run(run_load(url, batch, rate_per_s=RATE, duration_s=WARMUP_S, check=check))
        assert not warm.errors, warm.errors[:5]
        report = asyncio.run(run_load(url, batch, rate_per_s=RATE, duration_s=MEASURE_S, check=check,
                                      server_pid=proc.pid))
        print(report.summary())
        assert not report.errors, report.errors[:5]
        assert report.items == 4 * report.requests >= 4 * RATE * MEASURE_S * 0.9
        assert report.latency(0.99) < 5.0
        early = sum(report.rss_mb[:3]) / 3
        late = sum(report.rss_mb[-3:]) / 3
        assert late - early < max(25.0, 0.1 * early), f"memory grew {early:.0f} -> {late:.0f} MB: {report.rss_mb}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        assert proc.stdout is not None
        log = proc.stdout.read()
        proc.stdout.close()
    # uvicorn re-raises the signal after a graceful shutdown, so the exit status is -SIGTERM.
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log, log[-2000:]
    left = subprocess.run(["docker", "ps", "-a", "--filter", "label=mucode.sandbox=1", "--format",
                           '{{.Label "mucode.sandbox.owner"}}'], capture_output=True, text=True, check=True).stdout
    assert not [o for o in left.split() if o.startswith(f"{proc.pid}-")], "containers left behind after SIGTERM"
