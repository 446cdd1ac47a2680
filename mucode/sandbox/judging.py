"""Judging what a program produced, bounded: canonical JSON equality, and a pool of judge processes.

Everything a program produces (a test's reply frame: its stdout, its call result, its assert
reports) is attacker data. Three rules apply where the host reads it:

- **Caps.** A reply frame over ``MAX_FRAME_BYTES`` is not read into a structure: it is the test's
  ``output_limit``. A structure nested deeper than ``MAX_DEPTH`` is the program's failure (a call
  result: ``wrong_answer``; a frame that cannot be decoded: ``runtime_error``). A judge that runs out
  of memory is the program's ``memory_limit``.
- **No hashing of attacker data.** :func:`json_equal` decodes JSON objects as lists of pairs and
  compares them by a canonical (sorted-key) order, so no program-chosen value is ever hashed.
- **Off the event loop, bounded.** A frame larger than ``INLINE_BYTES`` is decoded and judged in a
  :class:`JudgePool` worker process, under an address-space limit (``memory_mb``) and a CPU limit per
  call (``cpu_s``, enforced by ``RLIMIT_CPU`` and a wall-clock watchdog of the parent); a call that
  overruns kills its worker (a fresh one replaces it) and is the program's ``time_limit``. Small
  frames are judged in place: at that size every comparison is bounded by the size itself.

A :class:`JudgeFault` carries the program's verdict for a judge that failed on the program's data;
only a worker that cannot be started at all is an infrastructure failure (``JudgeUnavailable``).

Limits: a worker is a ``spawn``-ed Python process (about 0.5 s to start, done lazily and again
after each kill); values cross the pipe pickled, so a reply frame is copied once more. Assert
reports are decoded by ``mucode.sandbox.asserts`` (sets and dicts built there do hash their
values); they are bounded by the worker's limits here, not made linear.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["INLINE_BYTES", "MAX_DEPTH", "MAX_FRAME_BYTES", "JudgeFault", "JudgePool", "JudgeUnavailable",
           "json_equal"]

MAX_DEPTH = 200
"""Deepest nesting of a program-produced structure the host compares (deeper: not equal)."""
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

class _Object(list):  # type: ignore[type-arg]
    """A decoded JSON object: its (key, value) pairs, never a dict (no hashing of its keys)."""


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    return _Object(pairs)


def _canonical(obj: _Object) -> list[tuple[str, Any]]:
    """The object's pairs sorted by key, the last of duplicate keys kept (as ``json.loads`` does)."""
    ordered = sorted(enumerate(obj), key=lambda p: (p[1][0], p[0]))
    out: list[tuple[str, Any]] = []
    for _, (key, value) in ordered:
        if out and out[-1][0] == key:
            out[-1] = (key, value)
        else:
            out.append((key, value))
    return out


def _equal(a: Any, b: Any, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(a, _Object) or isinstance(b, _Object):
        if not (isinstance(a, _Object) and isinstance(b, _Object)):
            return False
        ca, cb = _canonical(a), _canonical(b)
        return len(ca) == len(cb) and all(
            ka == kb and _equal(va, vb, depth + 1) for (ka, va), (kb, vb) in zip(ca, cb, strict=True))
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return False
        return all(_equal(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    return bool(a == b)  # scalars: Python's own equality (1 == 1.0 == true, as json.loads + == gave)


def loads_pairs(text: str) -> Any:
    """``text`` decoded with objects as pair lists; raises ValueError (not JSON, too deep, too large)."""
    try:
        return json.loads(text, object_pairs_hook=_pairs)
    except RecursionError:
        raise ValueError(f"nested deeper than this host decodes (limit about {MAX_DEPTH})") from None


def json_equal(expected: Any, actual: str) -> bool:
    """Whether the JSON text ``actual`` equals ``expected`` (a value from :func:`loads_pairs`): lists
    element by element, objects by sorted keys, scalars by ``==``; a malformed, too deep or too large
    ``actual`` is not equal. Never hashes a value of ``actual``."""
    try:
        value = loads_pairs(actual)
    except ValueError:
        return False
    try:
        return _equal(expected, value, 0)
    except RecursionError:
        return False


# ---- the worker pool -----------------------------------------------------------------------------

def _worker(conn: multiprocessing.connection.Connection, memory_mb: int) -> None:
    """A judge worker: runs ``module.fn(*args)`` per request under the CPU limit it is given."""
    if memory_mb > 0:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
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
        self.process.join(5)
        self.conn.close()


class JudgePool:
    """``size`` judge processes, started on first use; ``await pool.call(module, fn, *args)``.

    ``fn`` (a module-level function, looked up by name in the worker) returns a picklable value or
    raises ``JudgeFault``. A call past ``cpu_s`` of CPU (or ``4 * cpu_s + 5`` s of wall clock) raises
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

    def _spawn(self) -> _Worker:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_worker, args=(child, self.memory_mb), name="mucode-judge", daemon=True)
        try:
            process.start()
        except OSError as exc:
            raise JudgeUnavailable(f"cannot start a judge worker: {exc}") from exc
        child.close()
        return _Worker(process, parent)

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                worker.kill()
        return self._spawn()

    def _call_blocking(self, module: str, fn: str, args: tuple[Any, ...]) -> Any:
        worker = self._take()
        deadline = 4 * self.cpu_s + 5
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
            code = worker.process.exitcode
            if reply is None or code == -signal.SIGXCPU:  # the watchdog, or RLIMIT_CPU
                raise JudgeFault("time_limit", f"judging the program's output ran past its limit of {self.cpu_s:g} s")
            raise JudgeFault("memory_limit", f"the judge died judging the program's output (exit {code}): "
                                             f"over its {self.memory_mb} MiB?")
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
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


def cpu_count() -> int:
    """How many CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
