"""A pool of math-verify worker processes with an outer wall-clock kill per item.

Why processes: math-verify's timeouts rely on SIGALRM, which only works in a main thread, and an
asyncio service (or Ray, or a thread pool) calls it from elsewhere. Each worker runs one item at a
time under its own alarm (see ``math_worker``, reported as ``time_limit``). A watchdog here adds the
outer limit: if an item runs ``timeout_s + kill_grace_s`` (a computation a signal cannot interrupt),
the worker is killed, that item is ``time_limit``, the items queued behind it go to other workers,
and a replacement starts in the background. The rest of a batch keeps going meanwhile.

Each worker is fed up to ``pipeline_depth`` items ahead (a FIFO pipe), so it never idles waiting for
the event loop to hand it the next item; an item's clock starts when the worker begins it, not when
it was queued.

Workers are plain ``python -m mucode.rewards.math_worker`` subprocesses speaking JSON lines over
pipes: safe to start from any thread, no re-import of the caller's ``__main__`` (as multiprocessing's
spawn would do) and no request data inherited from the parent's memory.
Limits: a replaced worker costs ~1-2 s of CPU to import sympy again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mucode.protocol import Status

__all__ = ["MathOutcome", "MathWorkerPool"]

logger = logging.getLogger(__name__)

_LINE_LIMIT = 64 * 1024 * 1024  # one request line carries one response text


@dataclass(frozen=True)
class MathOutcome:
    status: str
    details: dict[str, Any]
    wall_s: float


@dataclass(eq=False)
class _Job:
    line: bytes
    limit_s: float
    future: asyncio.Future[MathOutcome]
    started: float | None = None
    """When the worker began this item (it is at the head of its worker's queue)."""


@dataclass(eq=False)
class _Worker:
    process: asyncio.subprocess.Process
    inflight: collections.deque[_Job] = field(default_factory=collections.deque)
    reader: asyncio.Task[None] | None = None


class MathWorkerPool:
    """``await pool.check(gold, response)`` from any number of coroutines of one event loop."""

    def __init__(
        self,
        workers: int = 2,
        *,
        timeout_s: float = 10.0,
        kill_grace_s: float = 2.0,
        memory_limit_mb: int = 2048,
        start_timeout_s: float = 120.0,
        pipeline_depth: int = 2,
    ) -> None:
        if workers < 1:
            raise ValueError(f"math workers must be >= 1, got {workers}")
        if timeout_s <= 0:
            raise ValueError(f"math timeout_s must be > 0, got {timeout_s}")
        if pipeline_depth < 1:
            raise ValueError(f"pipeline_depth must be >= 1, got {pipeline_depth}")
        self.size = workers
        self.timeout_s = timeout_s
        self.kill_grace_s = kill_grace_s
        self.memory_limit_mb = memory_limit_mb
        self.start_timeout_s = start_timeout_s
        self.pipeline_depth = pipeline_depth
        self._workers: list[_Worker] = []
        self._cond: asyncio.Condition | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False
        self.kills = 0
        """Workers killed by the outer wall-clock limit since start (exported as a metric)."""

    @property
    def idle(self) -> int:
        """Live workers with nothing to do."""
        return sum(1 for w in self._workers if not w.inflight)

    @property
    def alive(self) -> int:
        return len(self._workers)

    async def start(self) -> None:
        """Starts every worker and waits until each has imported math-verify."""
        self._closed = False
        self._cond = asyncio.Condition()
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for w in workers:
            self._adopt(w)
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        self._closed = True
        tasks = [
            t for t in (self._watchdog, *self._tasks, *(w.reader for w in self._workers)) if t is not None
        ]
        for task in tasks:
            task.cancel()
        for w in list(self._workers):
            self._fail_all(w, "the math worker pool was closed")
            await self._kill(w)
        self._workers.clear()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def check(self, gold: str, response: str, timeout_s: float | None = None) -> MathOutcome:
        """Scores one response; never raises for a bad or slow input."""
        if self._cond is None or self._closed:
            raise RuntimeError("MathWorkerPool.check() called before start() or after close()")
        limit = self.timeout_s if timeout_s is None else timeout_s
        line = (json.dumps({"gold": gold, "response": response, "timeout_s": limit}) + "\n").encode()
        job = _Job(line, limit, asyncio.get_running_loop().create_future())
        await self._dispatch(job)
        return await job.future

    # -- internals ----------------------------------------------------------------------------
    def _pick(self) -> _Worker | None:
        room = [w for w in self._workers if len(w.inflight) < self.pipeline_depth]
        return min(room, key=lambda w: len(w.inflight)) if room else None

    async def _dispatch(self, job: _Job) -> None:
        assert self._cond is not None
        async with self._cond:
            await self._cond.wait_for(lambda: self._closed or self._pick() is not None)
            worker = self._pick()
            if worker is None:  # closed while waiting
                _resolve(job, Status.verifier_error.value, {"error": "the math worker pool was closed"})
                return
            if not worker.inflight:
                job.started = time.perf_counter()
            worker.inflight.append(job)
            assert worker.process.stdin is not None
            worker.process.stdin.write(job.line)
        with contextlib.suppress(OSError, ConnectionError):  # a dead worker is noticed by its reader
            await worker.process.stdin.drain()

    async def _read(self, worker: _Worker) -> None:
        """Resolves the worker's items in order as its replies come; handles its death."""
        assert worker.process.stdout is not None
        while True:
            try:
                line = await worker.process.stdout.readline()
            except (OSError, ValueError) as exc:  # over-long line, broken pipe
                line, error = b"", repr(exc)
            else:
                error = f"math worker exited (code {worker.process.returncode}) mid-item"
            if not line:
                await self._retire(worker, Status.verifier_error.value, {"error": error})
                return
            job = worker.inflight.popleft() if worker.inflight else None
            now = time.perf_counter()
            if worker.inflight:
                worker.inflight[0].started = now
            if job is not None:
                try:
                    reply = json.loads(line)
                    status, details = str(reply["status"]), dict(reply["details"])
                except (ValueError, KeyError, TypeError) as exc:
                    status, details = (
                        Status.verifier_error.value,
                        {"error": f"bad reply from a math worker: {exc!r}"},
                    )
                _resolve(job, status, details, now - (job.started or now))
            await self._notify()

    async def _watch(self) -> None:
        """The outer wall-clock limit: kills a worker whose current item overran."""
        while not self._closed:
            await asyncio.sleep(0.05)
            now = time.perf_counter()
            for worker in list(self._workers):
                head = worker.inflight[0] if worker.inflight else None
                if head is None or head.started is None:
                    continue
                if now - head.started > head.limit_s + self.kill_grace_s:
                    self.kills += 1
                    await self._retire(
                        worker,
                        "time_limit",
                        {"error": f"math-verify took over {head.limit_s} s; worker killed"},
                    )

    async def _retire(self, worker: _Worker, status: str, details: dict[str, Any]) -> None:
        """Removes a worker: its current item gets ``status``, the queued ones go elsewhere."""
        if worker not in self._workers:
            return
        self._workers.remove(worker)
        head = worker.inflight.popleft() if worker.inflight else None
        if head is not None:
            _resolve(head, status, details, time.perf_counter() - (head.started or time.perf_counter()))
        queued = list(worker.inflight)
        worker.inflight.clear()
        if worker.reader is not None and worker.reader is not asyncio.current_task():
            worker.reader.cancel()
        await self._kill(worker)
        for job in queued:
            job.started = None
            self._background(self._dispatch(job))
        if not self._closed:
            self._background(self._respawn())

    async def _respawn(self) -> None:
        while not self._closed:
            try:
                worker = await self._spawn()
            except Exception:  # noqa: BLE001 - keep trying; the pool must not shrink for good
                logger.exception("could not restart a math-verify worker; retrying in 1 s")
                await asyncio.sleep(1.0)
                continue
            if self._closed:
                await self._kill(worker)
            else:
                self._adopt(worker)
                await self._notify()
            return

    def _adopt(self, worker: _Worker) -> None:
        worker.reader = asyncio.get_running_loop().create_task(self._read(worker))
        self._workers.append(worker)

    async def _notify(self) -> None:
        assert self._cond is not None
        async with self._cond:
            self._cond.notify_all()

    def _background(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fail_all(self, worker: _Worker, error: str) -> None:
        while worker.inflight:
            _resolve(worker.inflight.popleft(), Status.verifier_error.value, {"error": error})

    async def _spawn(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mucode.rewards.math_worker",
            str(self.memory_limit_mb),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=_LINE_LIMIT,
        )
        worker = _Worker(process)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), self.start_timeout_s)
        except asyncio.TimeoutError:
            line = b""
        if line.strip() != b'"ready"':
            await self._kill(worker)
            raise RuntimeError(
                f"a math-verify worker did not start within {self.start_timeout_s} s "
                f"(try `{sys.executable} -m mucode.rewards.math_worker` to see its error)"
            )
        return worker

    @staticmethod
    async def _kill(worker: _Worker) -> None:
        if worker.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.process.wait(), 5)


def _resolve(job: _Job, status: str, details: dict[str, Any], wall_s: float = 0.0) -> None:
    if not job.future.done():  # a caller that gave up (cancelled) no longer waits for it
        job.future.set_result(MathOutcome(status, details, wall_s))
