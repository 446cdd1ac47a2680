"""Liveness: every wait has a deadline, a broken slot is replaced and its job re-run once, health is
honest while a slot is stuck, and slots of the local backend share no IPC or abstract sockets.

Hostile programs carry GUARD and every test checks confinement first (assert_confined)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import pytest
from mucode.sandbox.executor import EXECUTOR_DIR
from sandbox_helpers import (
    GUARD,
    Handle,
    assert_confined,
    assert_nothing_left,
    every_slot_correct,
    slot_processes,
    stdio_job,
)

from mucode.protocol import Status

SLOW = "import time\ntime.sleep(1.5)\nprint(int(input()) + 1)\n"


def _live_parent(pid: int) -> int | None:
    """The parent of ``pid`` if ``pid`` is alive (not a zombie) and its parent is root's, else None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        ppid = int(status["PPid"])
        root_parent = os.stat(f"/proc/{ppid}").st_uid == 0
    except (OSError, KeyError, ValueError):
        return None
    return ppid if root_parent and not status["State"].strip().startswith("Z") else None


def _handler_of_running_job(h: Handle, timeout_s: float = 30.0) -> int:
    """The job handler (root, parent of the slot-uid test process) of the job now running: SLOW's
    process, which sleeps 1.5 s. A process still there 0.2 s later is it, not the exiting test
    process of an earlier job (whose handler may be finishing that job on another slot)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = {pid: ppid for pid, _ in slot_processes(h.slot_uids) if (ppid := _live_parent(pid))}
        if seen:
            time.sleep(0.2)
            for pid, ppid in seen.items():
                if _live_parent(pid) == ppid:
                    return ppid
        time.sleep(0.02)
    pytest.fail("no running job found")


def test_a_killed_job_handler_means_a_re_run_on_a_fresh_slot(sb: Handle) -> None:
    assert_confined(sb)
    fut = asyncio.run_coroutine_threadsafe(sb.backend.judge(stdio_job(SLOW, ["41\n"], ["42"])), sb.loop)
    os.kill(_handler_of_running_job(sb), signal.SIGKILL)
    result = fut.result(120)
    assert result.verdict is Status.correct, result
    every_slot_correct(sb)
    assert_nothing_left(sb)


def _zygote_of(handler: int) -> int:
    """The handler's zygote: its child that runs as root (a test process runs as the slot uid)."""
    for name in os.listdir("/proc"):
        if name.isdigit() and _live_parent(int(name)) == handler and os.stat(f"/proc/{name}").st_uid == 0:
            return int(name)
    pytest.fail(f"handler {handler} has no zygote")


def test_a_killed_zygote_means_a_re_run_on_a_fresh_handler(sb: Handle) -> None:
    """The zygote dies between a job's two tests: the second cannot start, the handler gives up the
    job (the client re-runs it once) and is replaced, with a zygote of its own."""
    assert_confined(sb)
    fut = asyncio.run_coroutine_threadsafe(
        sb.backend.judge(stdio_job(SLOW, ["1\n", "2\n"], ["2", "3"])), sb.loop
    )
    handler = _handler_of_running_job(sb)
    os.kill(_zygote_of(handler), signal.SIGKILL)
    result = fut.result(120)
    assert result.verdict is Status.correct, result
    assert _live_parent(handler) is None
    every_slot_correct(sb)
    assert_nothing_left(sb)


@pytest.mark.parametrize(
    "kind", [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]
)
def test_a_handler_serves_its_jobs_then_a_fresh_one_takes_over(kind: str) -> None:
    """A handler serves HANDLER_JOBS jobs and exits; the manager forks a new one (and it a new zygote)."""
    if kind == "local" and os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")
    slots_py = (EXECUTOR_DIR / "slots.py").read_text()  # the executor's modules import each other flat
    handler_jobs = int(re.search(r"^HANDLER_JOBS = (\d+)$", slots_py, re.M)[1])  # type: ignore[index]
    one_slot = {"slots": 1} if kind == "local" else {"containers": 1, "slots_per_container": 1}
    options = {**one_slot, "uid_base": 61400 if kind == "local" else 11400}
    h = Handle(kind, **options)
    try:
        assert_confined(h)
        slow = stdio_job(SLOW, ["1\n"], ["2"])
        handlers = []
        for _ in range(2):
            fut = asyncio.run_coroutine_threadsafe(h.backend.judge(slow), h.loop)
            handlers.append(_handler_of_running_job(h))
            assert fut.result(60).verdict is Status.correct
            quick = [
                stdio_job("print(int(input()) * 2)", [f"{i}\n"], [str(2 * i)]) for i in range(handler_jobs)
            ]
            assert all(r.verdict is Status.correct for r in h.judge_many(quick))
        assert handlers[0] != handlers[1] and _live_parent(handlers[0]) is None
        every_slot_correct(h)
        uids = h.slot_uids
    finally:
        h.close()
    assert not slot_processes(uids)


@pytest.mark.parametrize(
    "kind", [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]
)
def test_stuck_slot_makes_health_not_ok_then_is_replaced_and_its_job_re_run(kind: str) -> None:
    if kind == "local" and os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")
    options = (
        {"slots": 2, "uid_base": 61300}
        if kind == "local"
        else {"containers": 1, "slots_per_container": 2, "uid_base": 11300}
    )
    h = Handle(kind, health_interval_s=0.5, deadline_slack_s=2.0, **options)
    try:
        assert_confined(h)
        every_slot_correct(h)  # each handler has served a job (and cleaned its slot) before this one
        job = stdio_job(SLOW, ["1\n"], ["2"], time_limit_s=1.0)
        fut = asyncio.run_coroutine_threadsafe(h.backend.judge(job), h.loop)
        stuck = _handler_of_running_job(h)
        os.kill(stuck, signal.SIGSTOP)  # a handler that never finishes
        seen_stuck = False
        health: dict[str, object] = {}
        deadline = time.monotonic() + 60
        while not fut.done() and time.monotonic() < deadline:
            health = h.health()
            if health["stuck_slots"]:
                assert not health["ok"], health
                seen_stuck = True
            time.sleep(0.05)
        assert seen_stuck, (
            f"health never reported the stuck slot; job: {fut.result(1) if fut.done() else 'running'}, "
            f"last health: {health}"
        )
        assert fut.result(60).verdict is Status.correct  # re-run once on a fresh slot
        assert _live_parent(stuck) is None  # gone with its manager, though it had switched uids
        assert h.health()["ok"]
        every_slot_correct(h)
        uids = h.slot_uids
    finally:
        h.close()
    assert not slot_processes(uids)


IPC_OWNER = (
    GUARD
    + """
import ctypes, socket, time
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0x6d7563, 4096, 0o1666)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0mucode-cross-slot")
s.listen(1)
print(shm >= 0)
time.sleep(3)
"""
)
IPC_PROBE = (
    GUARD
    + """
import ctypes, socket, time
libc = ctypes.CDLL(None, use_errno=True)
reached = []
end = time.monotonic() + 2.5
while time.monotonic() < end:
    if libc.shmget(0x6d7563, 0, 0) >= 0:
        reached.append("shm")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect("\\0mucode-cross-slot")
        reached.append("socket")
    except OSError:
        pass
    if reached:
        break
    time.sleep(0.05)
print(reached or "isolated")
"""
)


def test_local_slots_share_no_sysv_ipc_or_abstract_sockets(local_handle: Handle) -> None:
    """Each slot manager of the local backend has an IPC and a network namespace of its own.
    (docker: a container's slots share its namespaces; one slot per container, the default, keeps
    them apart.)"""
    h = local_handle
    assert_confined(h)
    # "False": making a SysV object is refused on every backend (seccomp; test_integrity), so the
    # probe can only find one if that refusal broke; the abstract socket is this test's own check
    owner, probe = h.judge_many(
        [
            stdio_job(IPC_OWNER, [""], ["False"], time_limit_s=5.0),
            stdio_job(IPC_PROBE, [""], ["isolated"], time_limit_s=5.0),
        ]
    )
    assert owner.verdict is Status.correct, owner
    assert probe.verdict is Status.correct, probe.tests[0].stdout
    every_slot_correct(h)
    assert_nothing_left(h)
