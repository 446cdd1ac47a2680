"""Helpers for the sandbox tests: a backend driven from a background event loop (so plain sync tests
can call it), checks that hostile programs are really confined before firing them, and that nothing
survives them."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from mucode.protocol import Status
from mucode.sandbox import CodeJob, JobResult, RawRun, TestOutcome, TestSpec, make_backend

T = TypeVar("T")
# Visible in this process's environment before any backend starts: no sandboxed program may see it.
CANARY = "mucode-canary-" + secrets.token_hex(8)
os.environ["MUCODE_SANDBOX_TEST_CANARY"] = CANARY


class Handle:
    """A started backend on its own event-loop thread, with blocking helpers for tests."""

    def __init__(self, kind: str, **options: Any) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.backend = make_backend(kind, **options)  # type: ignore[arg-type]
        self.call(self.backend.start())

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def judge(self, job: CodeJob) -> JobResult:
        return self.call(self.backend.judge(job))

    def run_raw(self, run: RawRun) -> TestOutcome:
        return self.call(self.backend.run_raw(run))

    def health(self) -> dict[str, Any]:
        return self.call(self.backend.health())

    def judge_many(self, jobs: list[CodeJob]) -> list[JobResult]:
        async def all_() -> list[JobResult]:
            return list(await asyncio.gather(*[self.backend.judge(j) for j in jobs]))

        return self.call(all_())

    @property
    def slot_uids(self) -> list[int]:
        return list(self.backend.slot_uids)  # type: ignore[attr-defined]

    def close(self) -> None:
        try:
            self.call(self.backend.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


# ---- helpers --------------------------------------------------------------------------------

HOST_PIDNS = os.readlink("/proc/self/ns/pid")

GUARD = f"""import os, sys
if os.getuid() == 0 or os.geteuid() == 0 or os.readlink("/proc/self/ns/pid") == {HOST_PIDNS!r}:
    print("UNSAFE: refusing to run the hostile part as root or in the host pid namespace")
    sys.exit(99)
"""


def stdio_job(program: str, inputs: list[str], outputs: list[str], **kw: Any) -> CodeJob:
    return CodeJob(program=program, tests=TestSpec("stdio", inputs, outputs), **kw)


def assert_confined(sb: Handle) -> None:
    """Before a destructive test: the program really runs unprivileged, without capabilities, in a
    pid namespace of its own. Fails (never fires the hostile program) otherwise."""
    probe = (
        'import os\nst = open("/proc/self/status").read()\n'
        'cap = [l.split()[1] for l in st.splitlines() if l.startswith("CapEff")][0]\n'
        'nnp = [l.split()[1] for l in st.splitlines() if l.startswith("NoNewPrivs")][0]\n'
        'print(os.getuid(), os.geteuid(), cap, nnp, os.readlink("/proc/self/ns/pid"))'
    )
    out = sb.run_raw(RawRun(probe, time_limit_s=5))
    if out.verdict is not Status.correct:
        pytest.fail(f"confinement probe did not run: {out}")
    uid, euid, cap, nnp, pidns = out.stdout.split()
    if int(uid) == 0 or int(euid) == 0 or int(cap, 16) != 0 or nnp != "1" or pidns == HOST_PIDNS:
        pytest.fail(
            f"sandbox not confined (uid={uid} euid={euid} CapEff={cap} NoNewPrivs={nnp} pidns={pidns}, "
            f"host pidns {HOST_PIDNS}); refusing to run the hostile program"
        )
    assert int(uid) in sb.slot_uids


def slot_processes(uids: list[int]) -> list[tuple[int, int]]:
    """Processes of the slot uids anywhere on this host (containers and namespaces included)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uid = os.stat(f"/proc/{name}").st_uid
            except OSError:
                continue
            if uid in uids:
                found.append((int(name), uid))
    return found


def assert_nothing_left(sb: Handle, timeout_s: float = 5.0) -> None:
    """No process of any slot uid survives (the slot manager cleans up right after each job)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = slot_processes(sb.slot_uids)
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"processes survived their run: {left}")
        time.sleep(0.05)


def assert_still_works(sb: Handle) -> None:
    """The next benign program still gets a correct verdict (and a wrong one gets wrong_answer)."""
    ok = sb.judge(
        stdio_job("a, b = map(int, input().split())\nprint(a + b)", ["2 3\n", "10 -4\n"], ["5", "6"])
    )
    assert ok.verdict is Status.correct, ok
    bad = sb.judge(stdio_job("a, b = map(int, input().split())\nprint(a - b)", ["2 3\n"], ["5"]))
    assert bad.verdict is Status.wrong_answer, bad


def every_slot(sb: Handle, job: CodeJob) -> list[JobResult]:
    """Run ``job`` once on every slot: as many concurrent copies as the pool has slots (the pool
    never hands one slot two jobs at once, so each slot gets exactly one)."""
    slots = int(sb.health()["pool_size"])
    assert slots >= 1
    return sb.judge_many([job] * slots)


def every_slot_correct(sb: Handle) -> None:
    """After a hostile program: a correct program on every slot comes back correct (and a wrong
    one wrong_answer), within the normal limits."""
    ok = stdio_job("a, b = map(int, input().split())\nprint(a + b)", ["2 3\n", "10 -4\n"], ["5", "6"])
    for r in every_slot(sb, ok):
        assert r.verdict is Status.correct, r
    bad = stdio_job("a, b = map(int, input().split())\nprint(a - b)", ["2 3\n"], ["5"])
    for r in every_slot(sb, bad):
        assert r.verdict is Status.wrong_answer, r


def docker_cli(*args: str) -> str:
    """The Docker CLI, as an operator would run it (the tests check the SDK-driven backend from outside)."""
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True, timeout=60).stdout


def wait_until(cond: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll ``cond`` until it is true; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)
