"""The job handler's zygote: the clean process every test process is cloned from.

A job handler serves many jobs in turn, so its memory holds (or held, in freed blocks) the programs,
inputs and test sets of all of them. No test process may start from that memory: a program could
read another job's program (another sample's solution) out of its own address space. So, before it
takes its first job, the handler forks the zygote, which closes every descriptor but one socket
and never reads a job; each test process (program, assert harness, compile step) is a clone of it:

1. the handler creates the run's pipes and sends their ends to the zygote (``SCM_RIGHTS``), with a
   *payload* pipe, and writes the run's description (a marshal payload: the job, the limits, the
   slot) into that pipe;
2. the zygote clones a child with ``CLONE_PARENT``, so the child is the *handler's* child, as if the
   handler had forked it: the handler waits for it, counts its CPU time, is the subreaper of what
   it leaves and kills it through a pidfd, all as before; the zygote answers the child's pid;
3. the child reads its payload (its own run, nothing else) and becomes the test process
   (``runner.child_main``).

A clone of the zygote costs less than a fork of the handler (the zygote holds no job data, and the
handler's pages are no longer copied on write on both sides while a test runs), and the handler no
longer has to be a fresh process per job (``slots.py``). The zygote's memory is a fork of the handler
taken before any job: the program cannot find anything in it that is not in the executor's code.

The clone is a raw ``clone(2)`` system call made while holding the GIL, between Python's own
``PyOS_BeforeFork`` and ``PyOS_AfterFork_Child``/``_Parent`` (what ``os.fork`` does around
``fork(2)``): the interpreter's locks, signal state and ``os.register_at_fork`` hooks (``random``
reseeds itself) are reset in the child as after ``os.fork``. The seccomp filter (seccomp.py) allows
``clone`` without namespace flags, as docker's default profile does. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import signal
import socket
import struct
import sys

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CLONE_PARENT = 0x00008000
PR_SET_PDEATHSIG = 1
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_PID = struct.Struct("<i")
MAX_FDS = 8
"""Descriptors one spawn may pass (the payload pipe and a run's six pipe ends)."""


_API: list[tuple[Any, Any]] = []


def _clone_parent() -> int:
    """``fork()`` with ``CLONE_PARENT``: 0 in the child, its pid in the caller, -errno on failure."""
    if not _API:
        libc = ctypes.PyDLL(None, use_errno=True)  # a PyDLL call keeps the GIL, as os.fork does
        libc.syscall.restype = ctypes.c_long
        api = ctypes.pythonapi
        for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Child", "PyOS_AfterFork_Parent"):
            getattr(api, name).restype = None
        _API.append((libc, api))
    libc, api = _API[0]
    nr = _SYS_CLONE[os.uname().machine]
    api.PyOS_BeforeFork()
    # x86-64 and aarch64 take (flags, child stack, ...): no new stack, so the child goes on from here
    # on a copy of this stack, as after fork()
    flags = ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD)
    pid = int(libc.syscall(ctypes.c_long(nr), flags, None, None, None, None))
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    return pid if pid > 0 else -(err or 1)


def supported() -> bool:
    return os.uname().machine in _SYS_CLONE


class Zygote:
    """The handler's end of its zygote (see the module docstring)."""

    def __init__(
        self, child_main: Callable[[list[int]], None], keep_maps: list[object], setup: Callable[[], None]
    ) -> None:
        """Fork the zygote now: the caller must not have read any job yet. ``child_main(fds)`` runs in
        each clone and never returns; ``keep_maps`` are shared mappings of the handler that the
        zygote closes (runner.INHERITED_MAPS); ``setup()`` runs in the zygote once, before it serves
        (what every clone would otherwise do for itself)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        handler = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                ours.close()
                _serve(theirs, child_main, keep_maps, handler, setup)
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        self.pid = pid
        self.sock = ours

    def spawn(self, fds: list[int]) -> int:
        """Clone a test process holding ``fds`` (the payload pipe's read end first); its pid. Raises
        OSError when the zygote is gone or the clone failed."""
        socket.send_fds(self.sock, [b"c"], fds)
        reply = self.sock.recv(_PID.size)
        if len(reply) != _PID.size:
            raise OSError("the zygote is gone")
        (pid,) = _PID.unpack(reply)
        if pid <= 0:
            raise OSError(-pid, f"the zygote could not clone: {os.strerror(-pid)}")
        return int(pid)

    def alive(self) -> bool:
        """Whether the zygote still runs (``cleanup.reap`` may have reaped it: then it does not)."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _serve(
    sock: socket.socket,
    child_main: Callable[[list[int]], None],
    keep_maps: list[object],
    handler: int,
    setup: Callable[[], None],
) -> None:
    """The zygote's loop: one clone per request, until the handler closes its end."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # never outlive the handler
    if os.getppid() != handler:
        return  # the handler died before prctl: nobody would ever ask
    for shared in keep_maps:  # e.g. the executor's board: mapped in the handler, not in any test
        with contextlib.suppress(Exception):
            shared.close()  # type: ignore[attr-defined]
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, max(1 << 16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    setup()
    gc.collect()
    gc.freeze()  # clones never scan (and so never copy on write) what is here
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, MAX_FDS)
        except InterruptedError:
            continue
        if not msg:
            return
        pid = _clone_parent()
        if pid == 0:
            try:
                sock.close()
                child_main(fds)
            finally:
                os._exit(121)
        for fd in fds:
            os.close(fd)
        sock.send(_PID.pack(pid))


def read_payload(fd: int, limit: int) -> bytes:
    """A clone's payload: everything written to its pipe until the handler closed it (at most ``limit``
    bytes; more is an error)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, 1 << 16)  # a 1 MiB buffer costs a clone ~0.15 ms of page faults
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"payload over {limit} bytes")
        chunks.append(chunk)


if __name__ == "__main__":
    sys.exit("zygote.py is a module of the executor, not a program")
