"""A pool of math-verify worker processes with an outer wall-clock kill per item.

Why processes: math-verify's timeouts rely on SIGALRM, which only works in a main thread, and an
asyncio service (or Ray, or a thread pool) calls it from elsewhere. Each worker runs one item at a
time under its own alarm (see ``math_worker``, reported as ``time_limit``). A watchdog here adds the
outer limit: if an item runs ``timeout_s + kill_grace_s`` (a computation a signal cannot interrupt),
the worker is killed, that item is ``time_limit``, the items queued behind it go to other workers,
and a replacement starts in the background. The rest of a batch keeps going meanwhile.

Work is batched and each answer verified once. ``check`` reduces a response to its final answer
(``math_worker.final_answer``) and keys the work by (gold, final answer, time limit): an equal key
already decided (an LRU of verdicts; ``time_limit``, ``memory_limit`` and ``verifier_error`` are
never remembered) is answered at once, one being scored is shared, so a group's G responses with a
few distinct answers cost a few verifications. Jobs wait in one FIFO; whenever a worker has room
(at most ``pipeline_depth`` items in flight, refilled once half of them are done) it is sent a chunk
of them in one message, the queue shared fairly among the workers with room, each gold's jobs going
to the worker that has its parse (an idle worker takes any). The queue is pumped
once per event-loop turn (``call_soon``), so a request's items leave together; nothing waits on a
condition. An item's clock starts when its worker begins it (the previous item's reply arrived),
not when it was queued, so the watchdog times every item on its own.

Workers are plain ``python -m mucode.rewards.math_worker`` subprocesses speaking JSON lines over
pipes: safe to start from any thread, no re-import of the caller's ``__main__`` (as multiprocessing's
spawn would do) and no request data inherited from the parent's memory.
Limits: a replaced worker costs ~1-2 s of CPU to import sympy again. Items queued behind a
slow one in a worker's chunk wait for it (at most ``pipeline_depth - 1`` of them).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mucode.protocol import Status
from mucode.rewards.math_worker import final_answer

__all__ = ["MathOutcome", "MathWorkerPool"]

logger = logging.getLogger(__name__)

_LINE_LIMIT = 64 * 1024 * 1024  # one reply line; requests carry final answers, not whole responses
_REMEMBERED = frozenset({"correct", "wrong_answer", "no_answer"})
"""Verdicts that depend only on (gold, answer): remembered. Limits and errors are not."""
_MAX_REMEMBERED_CHARS = 2048
"""Longer final answers (whole responses without a box) are shared while in flight, not remembered."""

_Key = tuple[str, str, float]


@dataclass(frozen=True)
class MathOutcome:
    status: str
    details: dict[str, Any]
    wall_s: float


@dataclass(eq=False)
class _Job:
    key: _Key
    future: asyncio.Future[MathOutcome]
    waiters: int = 1
    """Callers awaiting it; a queued job nobody awaits any more is dropped."""
    started: float | None = None
    """When the worker began this item (it is at the head of its worker's queue)."""

    @property
    def limit_s(self) -> float:
        return self.key[2]


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
        pipeline_depth: int = 8,
        remember: int = 65536,
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
        self.remember = remember
        self._workers: list[_Worker] = []
        self._queue: collections.deque[_Job] = collections.deque()
        self._jobs: dict[_Key, _Job] = {}  # queued or in flight, by key
        self._owners: dict[str, _Worker] = {}  # gold -> the worker its jobs go to (cache affinity)
        self._verdicts: collections.OrderedDict[_Key, MathOutcome] = collections.OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pump_due = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False
        self.kills = 0
        """Workers killed by the outer wall-clock limit since start (exported as a metric)."""
        self.sent = 0
        """Items sent to workers (each distinct key once while remembered)."""
        self.shared = 0
        """Checks answered by a remembered verdict or by an equal item already under way."""

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
        self._loop = asyncio.get_running_loop()
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for w in workers:
            self._adopt(w)
        self._watchdog = self._loop.create_task(self._watch())

    async def close(self) -> None:
        self._closed = True
        tasks = [
            t for t in (self._watchdog, *self._tasks, *(w.reader for w in self._workers)) if t is not None
        ]
        for task in tasks:
            task.cancel()
        for w in list(self._workers):
            self._fail_all(w.inflight, "the math worker pool was closed")
            await self._kill(w)
        self._fail_all(self._queue, "the math worker pool was closed")
        self._workers.clear()
        self._jobs.clear()
        self._owners.clear()
        self._loop = None
        await asyncio.gather(*tasks, return_exceptions=True)

    async def check(self, gold: str, response: str, timeout_s: float | None = None) -> MathOutcome:
        """Scores one response; never raises for a bad or slow input."""
        if self._loop is None or self._closed:
            raise RuntimeError("MathWorkerPool.check() called before start() or after close()")
        key = (gold, final_answer(response), float(self.timeout_s if timeout_s is None else timeout_s))
        known = self._verdicts.get(key)
        if known is not None:
            self._verdicts.move_to_end(key)
            self.shared += 1
            return MathOutcome(known.status, known.details, 0.0)
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = _Job(key, self._loop.create_future())
            self._queue.append(job)
            self._schedule_pump()
        else:
            job.waiters += 1
            self.shared += 1
        try:
            return await asyncio.shield(job.future)  # a caller giving up must not cancel the others' job
        finally:
            job.waiters -= 1

    # -- internals ----------------------------------------------------------------------------
    def _schedule_pump(self) -> None:
        if not self._pump_due and self._loop is not None:
            self._pump_due = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        """Sends queued jobs, in chunks, to the workers with room: each takes a fair share of the queue,
        its own golds' jobs first (see ``_choose``)."""
        self._pump_due = False
        if self._closed:
            return
        refill = self.pipeline_depth // 2
        room = sorted((w for w in self._workers if len(w.inflight) <= refill), key=lambda w: len(w.inflight))
        for n, worker in enumerate(room):
            self._drop_abandoned()
            if not self._queue:
                return
            share = math.ceil(len(self._queue) / (len(room) - n))
            jobs = self._choose(worker, min(share, self.pipeline_depth - len(worker.inflight)))
            if jobs:
                self._send(worker, jobs)

    def _choose(self, worker: _Worker, take: int) -> list[_Job]:
        """Up to ``take`` queued jobs for ``worker``: those of golds it owns or nobody owns (it then owns
        them), so a gold's items meet the same worker's caches (its parse, math-verify's LRU); an idle
        worker that finds none takes the oldest job anyway, so no worker idles while jobs wait."""
        chosen: list[_Job] = []
        kept: collections.deque[_Job] = collections.deque()
        while self._queue and len(chosen) < take:
            job = self._queue.popleft()
            if job.waiters <= 0:
                self._abandon(job)
                continue
            owner = self._owners.get(job.key[0])
            if owner is None or owner not in self._workers:
                owner = self._owners[job.key[0]] = worker
                if len(self._owners) > 4 * self.remember + 1024:
                    self._owners.clear()  # forget old golds (ownership is only a cache hint)
            if owner is worker:
                chosen.append(job)
            else:
                kept.append(job)
        if not chosen and not worker.inflight and kept:
            chosen.append(kept.popleft())
        self._queue.extendleft(reversed(kept))
        return chosen

    def _drop_abandoned(self) -> None:
        while self._queue and self._queue[0].waiters <= 0:
            self._abandon(self._queue.popleft())

    def _abandon(self, job: _Job) -> None:
        self._finish(job, Status.verifier_error.value, {"error": "no caller waits for this item any more"})

    def _send(self, worker: _Worker, jobs: list[_Job]) -> None:
        if not worker.inflight:
            jobs[0].started = time.perf_counter()
        worker.inflight.extend(jobs)
        self.sent += len(jobs)
        line = json.dumps([list(job.key) for job in jobs]) + "\n"
        assert worker.process.stdin is not None
        with contextlib.suppress(
            OSError, ConnectionError, RuntimeError
        ):  # a dead worker: its reader retires it
            worker.process.stdin.write(line.encode())

    def _finish(self, job: _Job, status: str, details: dict[str, Any], wall_s: float = 0.0) -> None:
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]
        outcome = MathOutcome(status, details, wall_s)
        if status in _REMEMBERED and len(job.key[1]) <= _MAX_REMEMBERED_CHARS and self.remember > 0:
            self._verdicts[job.key] = outcome
            if len(self._verdicts) > self.remember:
                self._verdicts.popitem(last=False)
        if not job.future.done():
            job.future.set_result(outcome)

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
                self._finish(job, status, details, now - (job.started or now))
            if self._queue and len(worker.inflight) <= self.pipeline_depth // 2:
                self._schedule_pump()

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
        """Removes a worker: its current item gets ``status``, the queued ones go back to the queue's front."""
        if worker not in self._workers:
            return
        self._workers.remove(worker)
        head = worker.inflight.popleft() if worker.inflight else None
        if head is not None:
            self._finish(head, status, details, time.perf_counter() - (head.started or time.perf_counter()))
        queued = list(worker.inflight)
        worker.inflight.clear()
        if worker.reader is not None and worker.reader is not asyncio.current_task():
            worker.reader.cancel()
        await self._kill(worker)
        for job in reversed(queued):
            job.started = None
            self._queue.appendleft(job)
        self._schedule_pump()
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
                self._schedule_pump()
            return

    def _adopt(self, worker: _Worker) -> None:
        worker.reader = asyncio.get_running_loop().create_task(self._read(worker))
        self._workers.append(worker)

    def _background(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fail_all(self, jobs: collections.deque[_Job], error: str) -> None:
        while jobs:
            job = jobs.popleft()
            if not job.future.done():
                job.future.set_result(MathOutcome(Status.verifier_error.value, {"error": error}, 0.0))

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
