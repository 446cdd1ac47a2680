"""`/run_code` with SandboxFusion's field semantics (`RunCodeRequest` / `RunCodeResponse`).

SandboxFusion: `run_timeout` is wall-clock; `run_result.status` is `Finished` for any program that ran
(`return_code` says how it ended), `TimeLimitExceeded` when it was stopped at the limit, and `Error`
only when the sandbox failed (then the response's `status` is `SandboxError`). `status` is `Success`
iff the program finished with return code 0. Local sandbox backend, real HTTP on loopback.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mucode.verifier.local import local_verifier


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_verifier("local", programs=["code"], backend_options={"slots": 2, "uid_base": 63600}) as base:
        yield base


def run(url: str, code: str, **fields: object) -> dict:
    r = httpx.post(f"{url}/run_code", json={"code": code, "language": "python", **fields}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_program_that_exits_0_is_success(url: str) -> None:
    body = run(url, "print(input()[::-1])", stdin="abc\n", run_timeout=5)
    assert body["status"] == "Success"
    assert body["run_result"]["status"] == "Finished" and body["run_result"]["return_code"] == 0
    assert body["run_result"]["stdout"] == "cba\n"


def test_a_runtime_error_is_finished_with_its_return_code(url: str) -> None:
    body = run(url, "import sys\nprint('partial')\nsys.exit(3)", run_timeout=5)
    assert body["status"] == "Failed"
    assert body["run_result"]["status"] == "Finished"  # the program ran; the sandbox did not fail
    assert body["run_result"]["return_code"] == 3 and body["run_result"]["stdout"] == "partial\n"
    body = run(url, "raise ValueError('boom')", run_timeout=5)
    assert body["run_result"]["status"] == "Finished" and body["run_result"]["return_code"] == 1
    assert "ValueError: boom" in body["run_result"]["stderr"]


def test_run_timeout_is_wall_clock(url: str) -> None:
    """A program that sleeps uses no CPU: SandboxFusion still stops it at run_timeout."""
    body = run(url, "import time\ntime.sleep(1.6)\nprint('late')", run_timeout=1)
    assert body["status"] == "Failed" and body["run_result"]["status"] == "TimeLimitExceeded"
    assert body["run_result"]["stdout"] == ""  # a CPU-time limit (+ a 2x wall margin) would let it print


def test_cpu_timeout_is_mucodes_extra_field(url: str) -> None:
    spin = "x = 0\nwhile True:\n    x += 1"
    body = run(url, spin, run_timeout=20, cpu_timeout=1)
    assert body["run_result"]["status"] == "TimeLimitExceeded"
    assert body["run_result"]["execution_time"] < 20  # the CPU limit, not the wall limit, stopped it
