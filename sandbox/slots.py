"""Slot managers and the executor's per-slot bookkeeping (the *board*).

The board is an anonymous shared mapping written by each slot's manager and handler and read by
the executor's main process: per slot a busy flag, a job counter (mod 256) and a *deadline*
(``time.monotonic()`` seconds) by which the slot must be done with what it is doing (a test: its
wall limit plus clean-up time; waiting for the client: the idle timeout; cleaning: the clean-up
deadline). Main treats a busy slot past its deadline as stuck: it kills that slot's manager (and
so its handler), cleans the slot from outside and starts a new manager. Test children close the
mapping before the program runs (runner.INHERITED_MAPS), so a program cannot write it.

A slot manager, where it may (the local backend's executor holds CAP_SYS_ADMIN in its namespaces;
docker's does not), first moves into an IPC and a network namespace of its own: no SysV IPC
object or abstract Unix socket is shared between slots, and its IPC namespace has
``shm_rmid_forced`` on and small ``shmmni``/``shmall``; it then installs the seccomp filter
(seccomp.py) on itself, so its handlers and test processes inherit it. Either way every job ends with
cleanup.clean_slot (processes, scratch files, SysV IPC of the slot uid). Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import signal
import socket
import struct
import time
from collections.abc import Callable

import cleanup
import runner
import seccomp
import zygote
from protocol import ProtocolError
from runner import (
    INHERITED_MAPS,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    Slot,
    SlotStuck,
    clean,
    prctl,
)

CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
SECCOMP_FAILED = 6  # a manager's exit code: the slot cannot be protected, main marks it broken
CLEAN_DEADLINE_S = 60.0  # kill (10 s) + wipe (30 s) + IPC, with room
IPC_LIMITS = {
    "shm_rmid_forced": "1",
    "shmmni": "32",
    "shmall": str((64 << 20) // 4096),
    "shmmax": str(64 << 20),
    "msgmni": "32",
    "sem": "250 8000 32 32",
}
_REC = struct.Struct("<BBxxxxxxd")
_LIBC = ctypes.CDLL(None, use_errno=True)


class Board:
    """busy flag, job counter and deadline per slot, shared by fork."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.mem = mmap.mmap(-1, _REC.size * max(1, slots))

    def get(self, i: int) -> tuple[int, int, float]:
        return _REC.unpack_from(self.mem, i * _REC.size)

    def set(self, i: int, busy: int, deadline: float, bump: bool = False) -> None:
        _, counter, _ = self.get(i)
        _REC.pack_into(self.mem, i * _REC.size, busy, (counter + bump) % 256, deadline)

    def deadline(self, i: int, seconds_from_now: float) -> None:
        busy, counter, _ = self.get(i)
        _REC.pack_into(self.mem, i * _REC.size, busy, counter, time.monotonic() + seconds_from_now)

    def snapshot(self) -> list[tuple[int, int, float]]:
        return [self.get(i) for i in range(self.slots)]

    def stuck(self, grace_s: float = 0.0) -> list[int]:
        now = time.monotonic()
        return [
            i
            for i, (busy, _, deadline) in enumerate(self.snapshot())
            if busy and 0 < deadline < now - grace_s
        ]


def private_namespaces() -> bool:
    """Move this process into new IPC and network namespaces with tight SysV IPC limits; False
    where not permitted (docker: no CAP_SYS_ADMIN; one slot per container gives the same)."""
    if _LIBC.unshare(CLONE_NEWIPC | CLONE_NEWNET) != 0:
        return False
    for name, value in IPC_LIMITS.items():
        with contextlib.suppress(OSError), open(f"/proc/sys/kernel/{name}", "w") as f:
            f.write(value)
    return True


def slot_manager(
    slot: Slot,
    listener: socket.socket,
    board: Board,
    idle_timeout_s: float,
    handle_job: Callable[[socket.socket, Slot, Board, zygote.Zygote], None],
) -> None:
    """Fork a job handler, let it serve jobs, wait, clean the slot; forever. The manager never reads
    job data, so every handler (and its zygote, forked before the handler's first job) starts from
    a process that never held any."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    for procs in slot.cgroup_procs:  # the slot's own CPU weight, memory and pids limits: everything
        with open(procs, "w") as f:  # this manager forks (handlers, tests) inherits them
            f.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    private_namespaces()
    if seccomp.supported():  # installed once here (a filter costs ~0.5 ms to load): every handler
        try:  # and test process forked from here inherits it
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            seccomp.install()
        except OSError as exc:
            _log(f"slot {slot.index}: {exc}")
            os._exit(SECCOMP_FAILED)
    INHERITED_MAPS.append(board.mem)
    board.set(slot.index, 1, time.monotonic() + CLEAN_DEADLINE_S)
    if not clean(slot):
        os._exit(5)  # main cleans again or marks the slot broken
    cleanup.reap(1.0)
    board.set(slot.index, 0, 0.0)
    while True:
        # The handler is forked before any job arrives (the fork is off the request path); it serves
        # up to HANDLER_JOBS jobs, one at a time, and exits early on any failure.
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the manager
                prctl(PR_SET_CHILD_SUBREAPER, 1)  # a run's orphans are reaped (and CPU-counted) here
                serve_jobs(slot, listener, board, idle_timeout_s, handle_job)
            except (ProtocolError, OSError, ValueError, SlotStuck) as exc:
                _log(f"slot {slot.index}: job handler failed: {exc!r}")
                code = 2
            except BaseException as exc:
                _log(f"slot {slot.index}: job handler crashed: {exc!r}")
                code = 3
            finally:
                os._exit(code)
        _wait_handler(pid)
        board.set(slot.index, 1, time.monotonic() + CLEAN_DEADLINE_S)
        # Nothing of a job survives it: processes (daemons too), scratch files, SysV IPC. What
        # the job started descends from the handler: with no child left here, nothing is alive.
        _, left = cleanup.reap(0.0)
        if not clean(slot, scan=left):
            os._exit(5)
        cleanup.reap(1.0 if left else 0.0)
        board.set(slot.index, 0, 0.0)


HANDLER_JOBS = 1000
"""Jobs one handler serves before it exits and the manager forks a fresh one (what a long-lived
process may accumulate, heap fragments or a leaked descriptor, is bounded so)."""


def serve_jobs(
    slot: Slot,
    listener: socket.socket,
    board: Board,
    idle_timeout_s: float,
    handle_job: Callable[[socket.socket, Slot, Board, zygote.Zygote], None],
) -> None:
    """The handler: its zygote first (zygote.py), then jobs one at a time, each followed by what the
    manager does after a handler: nothing of the job survives it (processes, scratch files, SysV IPC)."""
    zyg = zygote.Zygote(runner.child_main, INHERITED_MAPS, lambda: runner.zygote_setup(slot))
    try:
        for _ in range(HANDLER_JOBS):
            conn, _ = listener.accept()
            board.set(slot.index, 1, time.monotonic() + idle_timeout_s + 5.0, bump=True)
            with conn:
                handle_job(conn, slot, board, zyg)
            board.set(slot.index, 1, time.monotonic() + CLEAN_DEADLINE_S)
            _, left = cleanup.reap(0.0, zyg.pid)
            if not clean(slot, scan=left):
                raise SlotStuck(f"slot {slot.index} could not be cleaned after a job")
            cleanup.reap(1.0 if left else 0.0, zyg.pid)
            if not zyg.alive():
                raise OSError(f"slot {slot.index}: the zygote is gone")
            board.set(slot.index, 0, 0.0)
    finally:
        zyg.close()


def _log(message: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"executor: {message}\n".encode())


def _wait_handler(pid: int) -> None:
    """Wait for the handler; its deadline is enforced by main (which kills this manager)."""
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
        except InterruptedError:
            continue
