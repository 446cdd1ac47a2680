"""A bounded load test: `mucode serve --backend docker` as its own process, a fixed request rate on
loopback: every item answered with the right status, flat memory; then SIGTERM shuts it down cleanly.

It asserts behaviour only: throughput and latency depend on what else the machine runs, so they are
printed here and measured by ``python bench/verifier.py --load-seconds 120``.
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

from loadgen import mixed_batch, run_load, wanted

pytestmark = pytest.mark.docker

WARMUP_S, MEASURE_S, RATE = 4.0, 20.0, 8.0
REQUEST_TIMEOUT_S = 300.0  # a request answered late on a loaded machine is still answered


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fixed_rate_load_no_errors_flat_memory() -> None:
    port = _free_port()
    mucode = shutil.which("mucode", path=str(Path(sys.executable).parent)) or "mucode"
    env = {
        **os.environ,
        "MUCODE_MATH_WORKERS": "2",
        "MUCODE_BACKEND_OPTIONS": json.dumps({"containers": 2, "slots_per_container": 2}),
    }
    proc = subprocess.Popen(
        [mucode, "serve", "--backend", "docker", "--port", str(port), "--log-level", "info"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # image start-up on a loaded machine
        while True:
            assert proc.poll() is None, "mucode serve exited during start-up (its log follows the test)"
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "mucode serve did not become ready"
            time.sleep(0.3)

        warm = asyncio.run(
            run_load(
                url,
                mixed_batch,
                rate_per_s=RATE,
                duration_s=WARMUP_S,
                check=wanted,
                timeout_s=REQUEST_TIMEOUT_S,
            )
        )
        assert not warm.errors, warm.errors[:5]
        report = asyncio.run(
            run_load(
                url,
                mixed_batch,
                rate_per_s=RATE,
                duration_s=MEASURE_S,
                check=wanted,
                server_pid=proc.pid,
                timeout_s=REQUEST_TIMEOUT_S,
            )
        )
        print(report.summary())  # throughput and latency: figures, not asserted
        assert not report.errors, report.errors[:5]  # no HTTP error, no transport failure, no wrong status
        assert (
            report.requests > 0 and report.items == 4 * report.requests
        )  # every item of every request answered
        assert len(report.rss_mb) >= 6, report.rss_mb
        early = sum(report.rss_mb[:3]) / 3
        late = sum(report.rss_mb[-3:]) / 3
        assert late - early < max(25.0, 0.1 * early), (
            f"memory grew {early:.0f} -> {late:.0f} MB: {report.rss_mb}"
        )
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
    left = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            "label=mucode.sandbox=1",
            "--format",
            '{{.Label "mucode.sandbox.owner"}}',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not [o for o in left.split() if o.startswith(f"{proc.pid}-")], (
        "containers left behind after SIGTERM"
    )
