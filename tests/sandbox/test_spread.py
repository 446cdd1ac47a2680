"""A job's tests spread over idle slots (mucode/sandbox/pooled.py): when a slot is free and no job
waits for one, it takes the second half of the tests a running job has not started, and the job
stops before them. Whatever ran where, the verdict and the outcomes are those of one slot running
every test in order: the outcomes by index up to the first failure, or all of them.

The sandbox tests run one job at a time, so each job here starts on an idle pool (3 slots on both
backends) and is spread at once. Backend tests run against both backends (``sb``)."""

from __future__ import annotations

import secrets
import socket
from typing import Any

import pytest
from mucode.sandbox.executor.protocol import recv_frame, send_frame
from sandbox_helpers import Handle, stdio_job
from test_testsets import SUM_OK, _endpoints, _sent, problem

from mucode.protocol import Status

ECHO = (
    "import sys, time\nt0 = time.monotonic()\nword = sys.stdin.read().split()[0]\ntime.sleep(0.2)\n"
    "print(word)\nprint(t0, time.monotonic(), file=sys.stderr)"
)
"""Prints its input's first word after 0.2 s; its start and end (CLOCK_MONOTONIC) on stderr."""


def _spread_parts(sb: Handle) -> int:
    return int(sb.backend.spread_parts)  # type: ignore[attr-defined]


def _echo_job(n: int, wrong: tuple[int, ...] = (), **kw: Any) -> Any:
    inputs = [f"t{k}\n" for k in range(n)]
    outputs = ["nope" if k in wrong else f"t{k}" for k in range(n)]
    return stdio_job(ECHO, inputs, outputs, **kw)


def test_a_job_alone_runs_its_tests_on_idle_slots_at_once_and_in_order(sb: Handle) -> None:
    before = _spread_parts(sb)
    result = sb.judge(_echo_job(8))
    assert result.verdict is Status.correct, result
    assert [o.stdout.strip() for o in result.tests] == [f"t{k}" for k in range(8)]
    assert _spread_parts(sb) > before
    spans = [tuple(map(float, o.stderr.split())) for o in result.tests]
    # some test started before an earlier one ended: they ran at the same time, on two slots
    assert any(spans[j][0] < spans[i][1] for i in range(8) for j in range(i + 1, 8)), spans


@pytest.mark.parametrize("wrong", [0, 3, 5, 7])
def test_the_first_failure_decides_wherever_its_test_ran(sb: Handle, wrong: int) -> None:
    result = sb.judge(_echo_job(8, wrong=(wrong, 6)))
    first = min(wrong, 6)
    assert result.verdict is Status.wrong_answer, result
    assert len(result.tests) == first + 1, [o.stdout for o in result.tests]
    assert [o.verdict for o in result.tests] == [Status.correct] * first + [Status.wrong_answer]
    assert [o.stdout.strip() for o in result.tests] == [f"t{k}" for k in range(first + 1)]


def test_a_job_that_runs_every_test_gets_every_outcome_in_order(sb: Handle) -> None:
    result = sb.judge(_echo_job(8, wrong=(2, 5), stop_on_first_failure=False))
    assert result.verdict is Status.wrong_answer, result
    assert [o.stdout.strip() for o in result.tests] == [f"t{k}" for k in range(8)]
    wrong = [k for k, o in enumerate(result.tests) if o.verdict is Status.wrong_answer]
    assert wrong == [2, 5]


def test_a_large_test_set_is_spread_by_range_and_sent_once(sb: Handle) -> None:
    inputs, outputs = problem("spread-" + secrets.token_hex(4), tests=6)
    sent, resent = _sent(sb)
    before = _spread_parts(sb)
    result = sb.judge(stdio_job(SUM_OK, inputs, outputs))
    assert result.verdict is Status.correct and len(result.tests) == 6, result
    assert [o.stdout for o in result.tests] == outputs  # each part's frames judged against its own tests
    assert _spread_parts(sb) > before
    assert _sent(sb) == (sent + 1, resent)  # the parts named the test set by key and range
    outputs[4] = "0\n"
    wrong = sb.judge(stdio_job(SUM_OK, inputs, outputs))
    assert wrong.verdict is Status.wrong_answer and len(wrong.tests) == 5, wrong


def test_an_executor_that_takes_no_range_gets_a_parts_inputs_inline(sb: Handle) -> None:
    inputs, outputs = problem("inline-" + secrets.token_hex(4), tests=6)
    eps = _endpoints(sb)
    saved = [ep.info.get("test_range") for ep in eps]
    for ep in eps:
        ep.info["test_range"] = False  # what an executor of an older image says (nothing)
    try:
        before = _spread_parts(sb)
        result = sb.judge(stdio_job(SUM_OK, inputs, outputs))
        outputs[5] = "0\n"
        wrong = sb.judge(stdio_job(SUM_OK, inputs, outputs))
    finally:
        for ep, value in zip(eps, saved, strict=True):
            ep.info["test_range"] = value
    assert result.verdict is Status.correct and len(result.tests) == 6, result
    assert _spread_parts(sb) > before
    assert wrong.verdict is Status.wrong_answer and len(wrong.tests) == 6, wrong


def _exchange(sb: Handle, request: dict[str, Any], tests: int) -> list[dict[str, Any]]:
    """The executor's frames for ``request``, answering ``next`` after each test frame but the last."""
    frames: list[dict[str, Any]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(_endpoints(sb)[0].socket_path))
        send_frame(s, request)
        while (frame := recv_frame(s)) is not None:
            frames.append(frame)
            if frame.get("ev") in ("done", "error"):
                break
            if frame.get("ev") == "test" and frame["index"] + 1 < tests:
                send_frame(s, {"op": "next"})
    return frames


def test_the_executor_runs_a_range_numbered_from_zero_and_refuses_one_outside(sb: Handle) -> None:
    request: dict[str, Any] = {
        "op": "run",
        "language": "python",
        "mode": "stdio",
        "program": "print(input())",
        "inputs": ["a\n", "b\n", "c\n"],
        "time_limit_s": 2.0,
        "memory_limit_mb": 256,
    }
    frames = _exchange(sb, {**request, "test_range": [1, 3]}, 2)
    tests = [f for f in frames if f.get("ev") == "test"]
    assert [(f["index"], f["stdout"]) for f in tests] == [(0, "b\n"), (1, "c\n")], frames
    for bad in ([2, 4], [2, 2], [-1, 1], [0], "0:1", [0.0, 1]):
        frames = _exchange(sb, {**request, "test_range": bad}, 3)
        assert frames[-1]["ev"] == "error" and "test_range" in frames[-1]["message"], (bad, frames)


def test_a_job_with_a_compile_step_keeps_one_run(sb: Handle) -> None:
    before = _spread_parts(sb)
    result = sb.judge(_echo_job(4, language="python-pyc"))
    assert result.verdict is Status.correct and len(result.tests) == 4, result
    assert _spread_parts(sb) == before  # a part would compile again
