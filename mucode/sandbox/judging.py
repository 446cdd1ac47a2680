"""Judging what a program produced, bounded: canonical JSON equality, and a pool of judge processes.

Everything a program produces (a test's reply frame: its stdout, its call result, its assert
reports) is attacker data. Three rules apply where the host reads it:

- **Caps.** A reply frame over ``MAX_FRAME_BYTES`` is not read into a structure: it is the test's
  ``output_limit``. A structure nested deeper than the host decodes (about 1000 levels) is the
  program's failure (a call result: ``wrong_answer``; a frame that cannot be decoded: ``runtime_error``). A
  judge that runs out
  of memory is the program's ``memory_limit``.
- **No hashing of attacker data.** :func:`json_equal` decodes JSON objects as sorted lists of pairs
  (a canonical order) and compares by list equality, so no program-chosen value is ever hashed.
- **Off the event loop, bounded.** A frame larger than ``INLINE_BYTES`` is decoded and judged in a
  :class:`JudgePool` worker process, under an address-space limit (``memory_mb``) and a CPU limit per
  call (``cpu_s``, enforced by ``RLIMIT_CPU`` and a wall-clock watchdog of the parent); a call that
  overruns kills its worker (a fresh one replaces it) and is the program's ``time_limit``. Small
  frames are judged in place: at that size every comparison is bounded by the size itself.

A :class:`JudgeFault` carries the program's verdict for a judge that failed on the program's data;
only a worker that cannot be started at all is an infrastructure failure (``JudgeUnavailable``).

Cost: decoding objects through ``object_pairs_hook`` is slower than plain ``json.loads``: on a
result of 100k small objects (2.8 MB) about 6x (0.35 s → 2.3 s on a loaded 2-core host); on arrays
the same (1.0x). It is paid in a worker, within its CPU limit.

Limits: a worker is a fresh ``python -c`` process (0.5–1.5 s to start, measured; done lazily and again
after each kill; it gets this process's ``sys.path``); values cross the pipe pickled, so a reply frame is
copied once more. Assert
reports are decoded by ``mucode.sandbox.asserts`` (sets and dicts built there do hash their
values); they are bounded by the worker's limits here, not made linear.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import multiprocessing.connection
import operator
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["INLINE_BYTES", "MAX_FRAME_BYTES", "JudgeFault", "JudgePool", "JudgeUnavailable", "json_equal"]

MAX_FRAME_BYTES = 96 << 20
"""Largest reply frame the host decodes (the executor's 16 MiB output cap, JSON-escaped, fits)."""
INLINE_BYTES = 8 << 10
"""Frames up to this size are decoded and judged on the caller's thread; larger ones in a worker."""


class JudgeFault(Exception):
    """Judging failed because of what the program produced; ``status`` is the program's verdict."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class JudgeUnavailable(RuntimeError):
    """No judge worker could be started (an infrastructure failure the program cannot cause)."""


# ---- canonical JSON equality ---------------------------------------------------------------------

_OBJECT = ("<json object>",)
"""Heads a decoded JSON object's pair list; a 1-tuple, which no JSON value decodes to, so an object
never equals an array (not even ``{}`` and ``[]``)."""


def _canonical(pairs: list[tuple[str, Any]]) -> list[Any]:
    """A JSON object as ``[_OBJECT, (key, value), ...]`` sorted by key, the last of duplicate keys
    kept (as ``json.loads`` does): compared by list equality, in C, and nothing is hashed."""
    if len(pairs) < 2:
        return [_OBJECT, *pairs]
    pairs.sort(key=_first)  # stable: duplicates stay in their order
    keys = [p[0] for p in pairs]
    if not any(map(operator.eq, keys, keys[1:])):
        return [_OBJECT, *pairs]
    out: list[Any] = [_OBJECT]
    for key, value in pairs:
        if len(out) > 1 and out[-1][0] == key:
            out[-1] = (key, value)
        else:
            out.append((key, value))
    return out


_first = operator.itemgetter(0)


def loads_pairs(text: str) -> Any:
    """``text`` decoded with objects in canonical form (``_canonical``); raises ValueError when it is
    not JSON or is nested deeper than the decoder's recursion limit."""
    try:
        return json.loads(text, object_pairs_hook=_canonical)
    except RecursionError:
        raise ValueError("nested deeper than this host decodes") from None


def json_equal(expected: Any, actual: str) -> bool:
    """Whether the JSON text ``actual`` equals ``expected`` (a value from :func:`loads_pairs`): arrays
    element by element, objects by sorted keys, scalars by ``==`` (so ``1 == 1.0``, as ``json.loads``
    and ``==`` gave); a malformed or too deep ``actual`` is not equal. Never hashes a value of ``actual``."""
    try:
        value = loads_pairs(actual)
    except ValueError:
        return False
    try:
        return bool(expected == value)
    except RecursionError:
        return False


# ---- the worker pool -----------------------------------------------------------------------------


def _serve(fd: int, memory_mb: int) -> None:
    """A judge worker's main (``python -c``): runs ``module.fn(*args)`` per request on the pipe ``fd``
    under the CPU limit it is given, after saying it is ready."""
    conn = multiprocessing.connection.Connection(fd)
    if memory_mb > 0:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conn.send(("ready", None))
    while True:
        try:
            module, fn, args, cpu_s = conn.recv()
        except (EOFError, OSError):
            return
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(used.ru_utime + used.ru_stime + cpu_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        try:
            reply: tuple[str, Any] = ("ok", getattr(importlib.import_module(module), fn)(*args))
        except JudgeFault as exc:
            reply = ("fault", (exc.status, str(exc)))
        except MemoryError:
            reply = ("fault", ("memory_limit", f"judging the program's output needed over {memory_mb} MiB"))
        except RecursionError:
            reply = ("fault", ("runtime_error", "the program's output is nested too deeply to judge"))
        except Exception as exc:  # noqa: BLE001 - reported to the caller, who decides
            reply = ("error", f"{type(exc).__name__}: {exc}"[:1000])
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("fault", ("memory_limit", "the judge's reply did not fit its memory limit")))


@dataclass
class _Worker:
    process: Any
    conn: multiprocessing.connection.Connection

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.conn.close()


class JudgePool:
    """``size`` judge processes, started on first use; ``await pool.call(module, fn, *args)``.

    ``fn`` (a module-level function, looked up by name in the worker) returns a picklable value or
    raises ``JudgeFault``. A call past ``cpu_s`` of CPU (or ``2 * cpu_s + 5`` s of wall clock) raises
    ``JudgeFault("time_limit")`` and its worker is replaced; a worker that dies mid-call (out of
    memory) raises ``JudgeFault("memory_limit")``. The pool's threads are its own, never the event
    loop's default executor, so a judge never waits behind other work (or the other way round)."""

    def __init__(self, size: int = 2, *, cpu_s: float = 10.0, memory_mb: int = 2048) -> None:
        if size < 1 or cpu_s <= 0:
            raise ValueError("JudgePool needs size >= 1 and cpu_s > 0")
        self.size, self.cpu_s, self.memory_mb = size, cpu_s, memory_mb
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._threads = concurrent.futures.ThreadPoolExecutor(size, thread_name_prefix="mucode-judge")
        self._slots: asyncio.Semaphore | None = None
        self.calls = 0
        self.kills = 0
        weakref.finalize(self, _stop_all, self._idle)  # a pool never closed (a module's own, one
        # dropped): its idle workers are stopped when it is collected or the interpreter exits

    def _spawn(self) -> _Worker:
        """A fresh worker: a plain ``python -c`` (not multiprocessing's spawn, which re-imports the
        caller's ``__main__``), on a socket pair, ready when it says so. A worker that cannot start
        is infrastructure (``JudgeUnavailable``), never a program's verdict."""
        parent_sock, child_sock = socket.socketpair()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYTHONHASHSEED": "random",
        }  # str hashes keyed by a secret of this worker
        code = (
            f"from mucode.sandbox.judging import _serve; _serve({child_sock.fileno()}, {int(self.memory_mb)})"
        )
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", code],
                env=env,
                pass_fds=(child_sock.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            parent_sock.close()
            raise JudgeUnavailable(f"cannot start a judge worker: {exc}") from exc
        finally:
            child_sock.close()
        conn = multiprocessing.connection.Connection(parent_sock.detach())
        worker = _Worker(process, conn)
        try:
            ready = conn.poll(60) and conn.recv() == ("ready", None)
        except (EOFError, OSError):
            ready = False
        if not ready:
            worker.kill()
            raise JudgeUnavailable(f"a judge worker did not start (exit {process.poll()}); see its stderr")
        return worker

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.poll() is None:
                    return worker
                worker.kill()
        return self._spawn()

    def _call_blocking(self, module: str, fn: str, args: tuple[Any, ...]) -> Any:
        worker = self._take()
        deadline = 2 * self.cpu_s + 5
        start = time.monotonic()
        try:
            worker.conn.send((module, fn, args, self.cpu_s))
            ready = worker.conn.poll(max(0.0, deadline - (time.monotonic() - start)))
            reply = worker.conn.recv() if ready else None
        except (EOFError, OSError, BrokenPipeError):
            reply = ("dead", None)
        if reply is None or reply[0] == "dead":
            worker.kill()
            self.kills += 1
            code = worker.process.returncode
            if reply is None or code == -signal.SIGXCPU:  # the watchdog, or RLIMIT_CPU
                raise JudgeFault(
                    "time_limit", f"judging the program's output ran past its limit of {self.cpu_s:g} s"
                )
            raise JudgeFault(
                "memory_limit",
                f"the judge died judging the program's output (exit {code}): over its {self.memory_mb} MiB?",
            )
        with self._lock:
            self._idle.append(worker)
        kind, value = reply
        if kind == "ok":
            return value
        if kind == "fault":
            raise JudgeFault(*value)
        raise RuntimeError(f"judge worker failed: {value}")

    async def call(self, module: str, fn: str, *args: Any) -> Any:
        """``module.fn(*args)`` in a worker (see the class docstring)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            self.calls += 1
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, self._call_blocking, module, fn, args)

    def close(self) -> None:
        """Stops every worker (idempotent; a later call starts new ones)."""
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        _stop_all(idle)


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.kill()


def cpu_count() -> int:
    """How many CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
