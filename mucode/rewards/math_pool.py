"""A pool of math-verify worker processes with an outer wall-clock kill per item.

Why processes: math-verify's timeouts rely on SIGALRM, which only works in a main thread, and an
asyncio service (or Ray, or a thread pool) calls it from elsewhere. Each worker runs one item at a
time under its own alarm (see ``math_worker``); if the worker does not answer within
``timeout_s + kill_grace_s`` (a computation a signal cannot interrupt) the parent kills it, reports
``time_limit`` for that item and starts a replacement in the background. The rest of a batch keeps
using the other workers meanwhile.

Workers are plain ``python -m mucode.rewards.math_worker`` subprocesses speaking JSON lines over
pipes: safe to start from any thread, no re-import of the caller's ``__main__`` (as multiprocessing's
spawn would do) and no request data inherited from the parent's memory.
Limits: a replaced worker costs ~1-2 s of CPU to import sympy again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["MathOutcome", "MathWorkerPool"]

logger = logging.getLogger(__name__)

_LINE_LIMIT = 64 * 1024 * 1024  # replies are small; requests carry one response text


@dataclass(frozen=True)
class MathOutcome:
    status: str
    details: dict[str, Any]
    wall_s: float


@dataclass(eq=False)
class _Worker:
    process: asyncio.subprocess.Process


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
    ) -> None:
        if workers < 1:
            raise ValueError(f"math workers must be >= 1, got {workers}")
        if timeout_s <= 0:
            raise ValueError(f"math timeout_s must be > 0, got {timeout_s}")
        self.size = workers
        self.timeout_s = timeout_s
        self.kill_grace_s = kill_grace_s
        self.memory_limit_mb = memory_limit_mb
        self.start_timeout_s = start_timeout_s
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: set[_Worker] = set()
        self._respawns: set[asyncio.Task[None]] = set()
        self._closed = False
        self.kills = 0
        """Workers killed by the outer wall-clock limit since start (exported as a metric)."""

    @property
    def idle(self) -> int:
        return 0 if self._idle is None else self._idle.qsize()

    @property
    def alive(self) -> int:
        return len(self._all)

    async def start(self) -> None:
        """Starts every worker and waits until each has imported math-verify."""
        self._idle = asyncio.Queue()
        self._closed = False
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for w in workers:
            self._idle.put_nowait(w)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._respawns):
            task.cancel()
        for w in list(self._all):
            await self._stop(w)

    async def check(self, gold: str, response: str, timeout_s: float | None = None) -> MathOutcome:
        """Scores one response; never raises for a bad or slow input."""
        if self._idle is None or self._closed:
            raise RuntimeError("MathWorkerPool.check() called before start() or after close()")
        limit = self.timeout_s if timeout_s is None else timeout_s
        worker = await self._idle.get()
        t0 = time.perf_counter()
        request = json.dumps({"gold": gold, "response": response, "timeout_s": limit}) + "\n"
        try:
            assert worker.process.stdin is not None and worker.process.stdout is not None
            worker.process.stdin.write(request.encode())
            await worker.process.stdin.drain()
            line = await asyncio.wait_for(worker.process.stdout.readline(), limit + self.kill_grace_s)
        except asyncio.TimeoutError:
            self.kills += 1
            self._replace(worker)
            return MathOutcome("time_limit", {"error": f"math-verify took over {limit} s; worker killed"},
                               time.perf_counter() - t0)
        except (OSError, ValueError) as exc:  # broken pipe, over-long line
            self._replace(worker)
            return MathOutcome("verifier_error", {"error": f"math worker failed: {exc!r}"}, time.perf_counter() - t0)
        except BaseException:
            self._replace(worker)  # cancelled mid-item: the worker's state is unknown
            raise
        wall = time.perf_counter() - t0
        if not line:
            self._replace(worker)
            code = worker.process.returncode
            return MathOutcome("verifier_error", {"error": f"math worker exited (code {code}) mid-item"}, wall)
        self._idle.put_nowait(worker)
        reply = json.loads(line)
        return MathOutcome(reply["status"], reply["details"], wall)

    async def _spawn(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mucode.rewards.math_worker", str(self.memory_limit_mb),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_LINE_LIMIT,
        )
        worker = _Worker(process)
        self._all.add(worker)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), self.start_timeout_s)
        except asyncio.TimeoutError:
            line = b""
        if line.strip() != b'"ready"':
            await self._stop(worker)
            raise RuntimeError(
                f"a math-verify worker did not start within {self.start_timeout_s} s "
                f"(try `{sys.executable} -m mucode.rewards.math_worker` to see its error)"
            )
        return worker

    def _replace(self, worker: _Worker) -> None:
        async def respawn() -> None:
            await self._stop(worker)
            while not self._closed:
                try:
                    new = await self._spawn()
                except Exception:  # noqa: BLE001 - keep trying; the pool must not shrink for good
                    logger.exception("could not restart a math-verify worker; retrying in 1 s")
                    await asyncio.sleep(1.0)
                    continue
                if self._closed or self._idle is None:
                    await self._stop(new)
                else:
                    self._idle.put_nowait(new)
                return

        self._all.discard(worker)
        task = asyncio.get_running_loop().create_task(respawn())
        self._respawns.add(task)
        task.add_done_callback(self._respawns.discard)

    async def _stop(self, worker: _Worker) -> None:
        self._all.discard(worker)
        if worker.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.process.wait(), 5)
