"""What goes wrong while the host judges what a program produced is that program's verdict, never an
infrastructure status, and it never holds the event loop: hostile call results and assert reports on
both backends (each followed by a correct program), the host's frame cap, and the judge pool's limits.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import subprocess
import sys
import time

import pytest
from sandbox_helpers import GUARD, Handle, every_slot_correct

from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec
from mucode.sandbox.client import _decode_inline, _recv_reply
from mucode.sandbox.judging import (
    INLINE_BYTES,
    MAX_FRAME_BYTES,
    JudgeFault,
    JudgePool,
    json_equal,
    loads_pairs,
)
from mucode.sandbox.pooled import job_for_frame, judge_body
from mucode.sandbox.types import JobResult

# A program that returns a list nested 5000 deep: the sandbox encodes it (it raised its own recursion
# limit), the host's JSON decoder cannot decode it.
DEEP = (
    GUARD
    + """
import sys
sys.setrecursionlimit(100000)
def f():
    x = [1]
    for _ in range(5000):
        x = [x]
    return x
"""
)
# ~14000 integers that all hash to 0: a set of them costs O(n²) to build wherever it is built.
COLLIDING = (
    GUARD
    + """
def f():
    m = 2 ** 61 - 1
    return {k * m for k in range(1, 14001)}
"""
)
CORRECT_CALL = "def f():\n    return {'a': [1, 2], 'b': None}\n"


def _call(program: str, expected: str = "[1]", time_limit_s: float = 10) -> CodeJob:
    return CodeJob(
        program, TestSpec("call", [""], [expected], fn_name="f"), checker="exact", time_limit_s=time_limit_s
    )


def _assert(program: str, test: str, time_limit_s: float = 30) -> CodeJob:
    return CodeJob(program, TestSpec("assert", assert_code=test), time_limit_s=time_limit_s)


def _not_infra(r: JobResult) -> None:
    assert r.verdict is not Status.correct and r.verdict is not Status.sandbox_error, (r.verdict, r.error)


def test_a_result_too_deep_for_the_host_is_a_wrong_answer(sb: Handle) -> None:
    r = sb.judge(_call(DEEP))
    _not_infra(r)
    assert r.verdict is Status.wrong_answer, [(t.verdict, t.stderr[-300:]) for t in r.tests]
    ok = sb.judge(_call(CORRECT_CALL, '{"b": null, "a": [1, 2]}'))
    assert ok.verdict is Status.correct, [(t.verdict, t.stderr[-300:]) for t in ok.tests]
    every_slot_correct(sb)


def test_a_judge_flood_holds_neither_the_loop_nor_its_neighbours(sb: Handle) -> None:
    """A report of hash-colliding integers and a deep result, judged while correct jobs run beside
    them: the event loop never stalls (its lag is sampled every 20 ms), the neighbours are correct,
    the hostile jobs get a verdict of their own."""
    flood = _assert(COLLIDING, "assert f() == {1, 2}")
    neighbours = [_call(CORRECT_CALL, '{"a": [1, 2], "b": null}') for _ in range(3)]

    async def run() -> tuple[list[JobResult], float]:
        lag, stop = 0.0, asyncio.Event()

        async def watch() -> None:
            nonlocal lag
            while not stop.is_set():
                t = time.monotonic()
                await asyncio.sleep(0.02)
                lag = max(lag, time.monotonic() - t - 0.02)

        watcher = asyncio.create_task(watch())
        try:
            results = await asyncio.gather(
                sb.backend.judge(flood),
                sb.backend.judge(_call(DEEP)),
                *(sb.backend.judge(j) for j in neighbours),
            )
        finally:
            stop.set()
            await watcher
        return list(results), lag

    results, lag = sb.call(run(), timeout=300)
    for r in results[:2]:
        _not_infra(r)
    assert all(r.verdict is Status.correct for r in results[2:]), [r.verdict for r in results[2:]]
    assert lag < 1.0, f"the event loop stalled for {lag:.2f} s while the judge was flooded"
    ok = sb.judge(_assert("def f():\n    return {1, 2}\n", "assert f() == {1, 2}"))
    assert ok.verdict is Status.correct, [(t.verdict, t.stderr[-300:]) for t in ok.tests]
    every_slot_correct(sb)


# ---- the host's own caps, without a sandbox --------------------------------------------------------


def test_a_frame_over_the_host_cap_is_drained_and_is_output_limit() -> None:
    async def run() -> tuple[dict, dict]:
        reader = asyncio.StreamReader(limit=1 << 20)
        length = MAX_FRAME_BYTES + 1
        reader.feed_data(struct.pack(">I", length) + b" " * length)
        small = b'{"ev":"done"}'
        reader.feed_data(struct.pack(">I", len(small)) + small)
        reader.feed_eof()
        return await _recv_reply(reader, _decode_inline), await _recv_reply(reader, _decode_inline)

    big, after = asyncio.run(run())
    assert big["status"] == "output_limit" and big["ev"] == "test"
    assert after == {"ev": "done"}  # the stream stayed in step


def test_canonical_json_equality() -> None:
    exp = loads_pairs('{"a": [1, 2.0], "b": {"c": null}}')
    assert json_equal(exp, '{"b": {"c": null}, "a": [1.0, 2]}')
    assert json_equal(loads_pairs('{"a": 1}'), '{"a": 2, "a": 1}')  # the last duplicate key counts
    assert not json_equal(exp, '{"a": [1, 2], "b": {"c": 0}, "x": 1}')
    assert not json_equal(exp, "[" * 100000 + "]" * 100000)
    assert not json_equal(loads_pairs("[1]"), "not json")
    assert not json_equal(loads_pairs("{}"), "[]") and not json_equal(loads_pairs("[]"), "{}")
    assert not json_equal(loads_pairs('{"a": 1}'), '[["a", 1]]')
    assert json_equal(loads_pairs("[1, true, null]"), "[1.0, 1, null]")  # Python's scalar equality, as before


def _spin() -> None:
    while True:
        pass


def _hog() -> bytes:
    return b"x" * (4 << 30)


def _double(x: int) -> int:
    return 2 * x


@pytest.mark.parametrize(("fn", "status"), [("_spin", "time_limit"), ("_hog", "memory_limit")])
def test_a_judge_that_overruns_is_the_programs_verdict_and_the_pool_recovers(fn: str, status: str) -> None:
    pool = JudgePool(1, cpu_s=1.0, memory_mb=1024)

    async def run() -> int:
        with pytest.raises(JudgeFault) as info:
            await pool.call(__name__, fn)
        assert info.value.status == status, str(info.value)
        return await pool.call(__name__, "_double", 21)  # type: ignore[no-any-return]

    try:
        assert asyncio.run(run()) == 42
    finally:
        pool.close()


def test_a_large_reply_goes_to_its_judge_without_the_test_set() -> None:
    """A reply over ``INLINE_BYTES`` is judged in a worker; what crosses the pipe is the job without
    its inputs and with only that test's expected output, and the verdict is the same as with the
    whole job, for every test of a real frame the executor's encoder wrote."""
    from mucode.sandbox.executor.protocol import HEADER, encode_frame

    n = 5
    outputs = [f"{i}\n" + "y" * (INLINE_BYTES + i) + "\n" for i in range(n)]
    job = CodeJob("print(0)", TestSpec("stdio", ["x" * (1 << 20)] * n, outputs))
    full = len(pickle.dumps(job))
    for i in range(n):
        for stdout, want in ((outputs[i], Status.correct), (outputs[(i + 1) % n], Status.wrong_answer)):
            frame = {"ev": "test", "index": i, "status": "ok", "stdout": stdout, "stderr": "", "exit_code": 0}
            body = encode_frame(frame)[HEADER.size :]
            assert len(body) > INLINE_BYTES
            slim = job_for_frame(job, body)
            assert not slim.tests.inputs and slim.tests.outputs[i] == outputs[i]
            assert len(pickle.dumps(slim)) < full / 50
            assert judge_body(slim, None, body)["_outcome"] == judge_body(job, None, body)["_outcome"]
            assert judge_body(slim, None, body)["_outcome"].verdict is want
    other = encode_frame({"ev": "compile", "status": "ok"})[HEADER.size :]  # not a test frame: no inputs
    assert job_for_frame(job, other).tests.outputs == outputs and not job_for_frame(job, other).tests.inputs


def test_large_outputs_judge_right_through_a_backend(sb: Handle) -> None:
    """stdio tests with 1 MiB inputs and ~40 KB outputs (judged in the worker): right and wrong."""
    program = "s = input()\nprint(len(s))\nprint(s[:40000])\n"
    inputs = [chr(97 + i) * (1 << 20) for i in range(3)]
    outputs = [f"{1 << 20}\n" + chr(97 + i) * 40000 + "\n" for i in range(3)]
    right = sb.judge(CodeJob(program, TestSpec("stdio", inputs, outputs)))
    assert right.verdict is Status.correct, right
    wrong = sb.judge(CodeJob(program, TestSpec("stdio", inputs, [*outputs[:2], outputs[0]])))
    assert wrong.verdict is Status.wrong_answer, wrong
    assert [t.verdict for t in wrong.tests] == [Status.correct, Status.correct, Status.wrong_answer]


def test_a_pool_never_closed_stops_its_workers() -> None:
    """The evalplus sanitizer's pool is a module's own and is never closed: its workers must not outlive
    the pool (dropped and collected, or at the interpreter's exit), nor warn as still running there."""
    probe = (
        "import asyncio, gc, os\n"
        "from mucode.sandbox.judging import JudgePool\n"
        "dropped, kept = JudgePool(1), JudgePool(1)\n"
        "for pool in (dropped, kept):\n"
        "    assert asyncio.run(pool.call('json', 'loads', '[1]')) == [1]\n"
        "print(dropped._idle[0].process.pid, kept._idle[0].process.pid, flush=True)\n"
        "pid = dropped._idle[0].process.pid\n"
        "del dropped, pool\n"
        "gc.collect()\n"
        "print(os.path.exists(f'/proc/{pid}'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert second == "False", "a dropped pool's worker still runs"
    kept_pid = int(first.split()[1])
    assert not os.path.exists(f"/proc/{kept_pid}"), "a worker outlived the interpreter"
    assert "ResourceWarning" not in done.stderr, done.stderr
