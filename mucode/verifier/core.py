"""The verifier core: reward programs + the resources they need, shared by HTTP and ``mucode verify``.

``Verifier.verify(items)`` scores a batch concurrently (items of different programs mixed), at most
``max_concurrent_items`` at once over all callers. A program that raises, or an item that overruns
``item_timeout_s``, yields a ``verifier_error`` result for that item only: the batch goes on.
``validate(items)`` checks program names and specs up front so the HTTP layer can answer 4xx before
any work starts.

Admission: ``admit(n)`` reserves room for ``n`` items (or one /run_code run) and refuses
(``QueueFullError``, a 429 over HTTP) when more than ``max_queued_items`` would wait for a slot;
``release(n)`` gives the room back. ``verify(items, timeout_s=...)`` is the outer limit of one request:
items not scored by then come back ``verifier_error`` and their work is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from mucode.protocol import Status
from mucode.rewards.math_pool import MathWorkerPool
from mucode.rewards.registry import ProgramRegistry, UnknownProgramError, load_programs
from mucode.rewards.types import Item, Result, RewardContext
from mucode.sandbox.base import make_backend
from mucode.verifier.metrics import VerifierMetrics
from mucode.verifier.settings import VerifierSettings

__all__ = ["ItemError", "QueueFullError", "Verifier"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ItemError:
    """One problem with one input item (index into the batch, where, what)."""

    index: int
    loc: str
    message: str

    def __str__(self) -> str:
        return f"items[{self.index}]{self.loc}: {self.message}"


class QueueFullError(RuntimeError):
    """More work than ``max_queued_items`` would wait for a slot: come back after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Verifier:
    """Owns the sandbox backend, the math worker pool and the reward programs."""

    def __init__(
        self,
        settings: VerifierSettings | None = None,
        *,
        registry: ProgramRegistry | None = None,
        sandbox: Any | None = None,
    ) -> None:
        self.settings = settings or VerifierSettings()
        self.registry = registry if registry is not None else load_programs(self.settings.programs)
        self.metrics = VerifierMetrics()
        self._sandbox_given = sandbox is not None
        self.ctx = RewardContext(sandbox=sandbox, options=dict(self.settings.plugin_options))
        self._slots: asyncio.Semaphore | None = None
        self._admitted = 0
        self.started = False

    @property
    def needs_sandbox(self) -> bool:
        return "sandbox" in self.registry.needs() or self.settings.run_code

    async def start(self) -> None:
        """Starts what the registered programs need: the sandbox pool, the math workers.

        If any part fails to start, what did start is stopped again before the error propagates."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        self._slots = asyncio.Semaphore(self.settings.max_concurrent_items)
        needs = self.registry.needs()
        if self.ctx.sandbox is None and self.needs_sandbox:
            self.ctx.sandbox = make_backend(self.settings.backend, **self.settings.backend_options)
        if self.ctx.sandbox is not None and not self._sandbox_given:
            await self.ctx.sandbox.start()
        if "math" in needs:
            pool = MathWorkerPool(
                self.settings.math_workers,
                timeout_s=self.settings.math_timeout_s,
                memory_limit_mb=self.settings.math_memory_limit_mb,
            )
            await pool.start()
            self.ctx.math = pool
        self.started = True
        logger.info(
            "verifier ready: programs %s, sandbox %s, math workers %s",
            self.registry.names(),
            getattr(self.ctx.sandbox, "name", None),
            self.ctx.math.size if self.ctx.math else 0,
        )

    async def close(self) -> None:
        self.started = False
        if self.ctx.math is not None:
            await self.ctx.math.close()
            self.ctx.math = None
        if self.ctx.sandbox is not None and not self._sandbox_given:
            await self.ctx.sandbox.close()
            self.ctx.sandbox = None

    def validate(self, items: list[Item]) -> list[ItemError]:
        """Every problem in the batch (unknown programs, invalid specs); empty when all is well."""
        errors: list[ItemError] = []
        for i, item in enumerate(items):
            try:
                program = self.registry.get(item.program)
            except UnknownProgramError as exc:
                errors.append(ItemError(i, ".program", str(exc)))
                continue
            model: type[BaseModel] | None = getattr(program, "spec_model", None)
            if model is None:
                continue
            try:
                model.model_validate(item.spec)
            except ValidationError as exc:
                for err in exc.errors(include_url=False):
                    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                    errors.append(ItemError(i, ".spec" + loc, err["msg"]))
        return errors

    def admit(self, n: int) -> None:
        """Reserves room for ``n`` items; raises ``QueueFullError`` when they would overfill the queue."""
        s = self.settings
        waiting = self._admitted + n - s.max_concurrent_items
        if waiting > s.max_queued_items:
            raise QueueFullError(
                f"the verifier is full ({self._admitted} items admitted, {s.max_concurrent_items} scored at once, "
                f"at most {s.max_queued_items} may wait): retry after {s.retry_after_s} s, or raise "
                "MUCODE_MAX_QUEUED_ITEMS / add verifier replicas",
                s.retry_after_s,
            )
        self._admitted += n

    def release(self, n: int) -> None:
        """Gives back room reserved with ``admit``."""
        self._admitted = max(0, self._admitted - n)

    @property
    def slots(self) -> asyncio.Semaphore:
        """The scoring slots (for /run_code, which runs outside ``verify``)."""
        if not self.started or self._slots is None:
            raise RuntimeError("Verifier used before start()")
        return self._slots

    async def verify(self, items: list[Item], *, timeout_s: float | None = None) -> list[Result]:
        """Scores every item concurrently; results in input order.

        ``timeout_s`` bounds the whole call (queueing included): items not done by then are cancelled
        and come back ``verifier_error``."""
        if not self.started or self._slots is None:
            raise RuntimeError("Verifier.verify() called before start()")
        tasks = [asyncio.ensure_future(self._score_one(item)) for item in items]
        if not tasks:
            return []
        try:
            await asyncio.wait(tasks, timeout=timeout_s)
        finally:
            late = [t for t in tasks if not t.done()]
            for t in late:
                t.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        return [self._outcome(item, task, timeout_s) for item, task in zip(items, tasks, strict=True)]

    def _outcome(self, item: Item, task: asyncio.Future[Result], timeout_s: float | None) -> Result:
        if not task.cancelled() and task.exception() is None:
            return task.result()
        self.metrics.items.labels(item.program, Status.verifier_error.value).inc()
        return Result.infra_failure(
            item.id,
            Status.verifier_error,
            f"not scored within the request limit of {timeout_s} s (queueing included; "
            "MUCODE_REQUEST_TIMEOUT_S): re-send it",
        )

    async def _score_one(self, item: Item) -> Result:
        assert self._slots is not None
        m = self.metrics
        m.queue_depth.inc()
        try:
            await self._slots.acquire()
        finally:
            m.queue_depth.dec()
        # From here on the slot is ours: cancellation (the request's outer limit) releases it below.
        m.in_flight.inc()
        t0 = time.perf_counter()
        try:
            program = self.registry.get(item.program)
            result = await asyncio.wait_for(program.score(item, self.ctx), self.settings.item_timeout_s)
            if result.id != item.id:
                result = result.model_copy(update={"id": item.id})
        except UnknownProgramError as exc:
            result = Result.infra_failure(item.id, Status.verifier_error, str(exc))
        except asyncio.TimeoutError:
            result = Result.infra_failure(
                item.id,
                Status.verifier_error,
                f"scoring took over item_timeout_s={self.settings.item_timeout_s} s",
            )
        except Exception as exc:  # noqa: BLE001 - one broken item must not sink its batch
            logger.exception("reward program %r failed on item %r", item.program, item.id)
            result = Result.infra_failure(
                item.id,
                Status.verifier_error,
                f"reward program {item.program!r} raised {type(exc).__name__}: {exc}"[:1000],
            )
        finally:
            self._slots.release()
            m.in_flight.dec()
        m.items.labels(item.program, result.status.value).inc()
        m.item_seconds.labels(item.program).observe(time.perf_counter() - t0)
        return result

    async def health(self) -> dict[str, Any]:
        """Readiness: every resource this verifier needs is up. Also refreshes the pool gauges."""
        out: dict[str, Any] = {"ok": self.started, "programs": self.registry.names()}
        if self.ctx.sandbox is not None:
            try:
                sandbox = dict(await asyncio.wait_for(self.ctx.sandbox.health(), 10))
            except Exception as exc:  # noqa: BLE001 - unreachable backend: not ready
                sandbox = {"ok": False, "error": repr(exc)}
            out["sandbox"] = sandbox
            out["ok"] = out["ok"] and bool(sandbox.get("ok"))
            gauges = (
                ("pool_size", self.metrics.pool_size),
                ("idle", self.metrics.pool_idle),
                ("spread_parts", self.metrics.spread_parts),
            )
            for key, gauge in gauges:
                value = sandbox.get(key)
                if isinstance(value, int | float):
                    gauge.set(value)
        elif self.needs_sandbox:
            out["ok"] = False
        if self.ctx.math is not None:
            out["math"] = {
                "workers": self.ctx.math.alive,
                "idle": self.ctx.math.idle,
                "kills": self.ctx.math.kills,
                "sent": self.ctx.math.sent,
                "shared": self.ctx.math.shared,
            }
            out["ok"] = out["ok"] and self.ctx.math.alive > 0
            self.metrics.math_workers.set(self.ctx.math.alive)
            self.metrics.math_kills.set(self.ctx.math.kills)
        return out
