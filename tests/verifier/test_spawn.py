"""The verifier in a child process (what the trainer starts): serves, fails loud, never outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from mucode.verifier.session import VerifierSession
from mucode.verifier.spawn import spawned_verifier

MATH = {"programs": ["math"], "run_code": False, "math_workers": 1}


def test_spawned_verifier_scores_and_stops() -> None:
    with spawned_verifier("local", **MATH) as url, VerifierSession(url) as session:
        results = session.verify(
            [{"id": "a", "program": "math", "response": "\\boxed{2}", "spec": {"answer": "2"}}]
        )
        assert [r.status.value for r in results] == ["correct"]
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz", timeout=2)


def test_a_bad_setting_fails_loud() -> None:
    with (
        pytest.raises(RuntimeError, match="exited during start-up"),
        spawned_verifier("no-such-backend", **MATH),
    ):
        pass


def test_the_child_exits_when_its_parent_is_killed() -> None:
    script = (
        "from mucode.verifier.spawn import spawned_verifier\nimport time\n"
        f"with spawned_verifier('local', **{MATH!r}) as url:\n    print(url, flush=True)\n    time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert parent.stdout is not None
    url = parent.stdout.readline().strip()
    parent.stdout.close()
    assert httpx.get(url + "/healthz", timeout=10).status_code == 200
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=2)
        except httpx.TransportError:
            return
        time.sleep(0.2)
    pytest.fail("the verifier process still serves after its parent was killed")
