"""Scoring groups while generation continues: a background event loop around ``VerifierClient``.

The generate phase calls :meth:`VerifyPipeline.submit` for every finished group and keeps
generating; a background thread runs the client's ``verify`` coroutine for it. Finished groups are
collected, in submission order, with :meth:`VerifyPipeline.done` (non-blocking) and
:meth:`VerifyPipeline.drain`.

Infrastructure failures (status ``verifier_error``/``sandbox_error``, including a request that
raised) are sent again up to ``retries`` times (after the client's own HTTP retries); what still
fails is returned with ``masked=True`` and counted. Such an item is never given reward 0: its
reward is NaN in the result and the trainer masks it out of the advantage and the loss.

The trainer reaches the verifier only through this client; with no URL configured,
:func:`verifier_urls` starts an in-process verifier on loopback with ``local_verifier``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INFRA_STATUSES", "GroupVerdicts", "VerifyPipeline", "verifier_urls"]

INFRA_STATUSES = frozenset({"verifier_error", "sandbox_error"})
"""Mirrors mucode.rewards.types.INFRA_STATUSES (the trainer does not import the service side)."""


@dataclass
class GroupVerdicts:
    """The results of one group, in sample order, and how they were obtained."""

    key: Any
    rewards: list[float]
    statuses: list[str]
    masked: list[bool]
    retries: int = 0
    verify_s: float = 0.0
    payload: Any = None
    """Whatever the caller attached in :meth:`VerifyPipeline.submit` (the generated group)."""
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def verifier_urls(urls: list[str], backend: str = "local") -> Iterator[list[str]]:
    """The configured verifier URLs, or a local verifier started for the duration of the block."""
    if urls:
        yield list(urls)
        return
    from mucode.verifier.local import local_verifier

    with local_verifier(backend=backend) as url:
        yield [url]


class VerifyPipeline:
    """Runs verification of submitted groups on a private event loop in a background thread."""

    def __init__(self, urls: list[str], *, token: str | None = None, timeout_s: float = 300.0,
                 client_retries: int = 3, retries: int = 2, max_concurrency: int = 8, max_pending: int = 256) -> None:
        from mucode.verifier.client import VerifierClient

        self.retries = retries
        self.max_pending = max_pending
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mucode-verify", daemon=True)
        self._thread.start()
        self._client = VerifierClient(urls, token=token, timeout_s=timeout_s, max_retries=client_retries,
                                      max_concurrency=max_concurrency)
        self._futures: list[Future[GroupVerdicts]] = []
        self.busy_s = 0.0
        self.infra_failures = 0
        self.resends = 0

    def submit(self, key: Any, items: list[dict[str, Any]], payload: Any = None) -> None:
        """Queue one group's verifier items (dicts) and return at once, unless ``max_pending`` groups are
        already held (submitted, not yet collected): then wait for the oldest, so a generator faster than
        the verifier holds a bounded number of groups in memory, whatever the stage size."""
        if self.max_pending and len(self._futures) >= self.max_pending:
            self._futures[0].exception()  # blocks until the oldest is verified; done() then collects it
        future = asyncio.run_coroutine_threadsafe(self._verify(key, items, payload), self._loop)
        self._futures.append(future)

    async def _verify(self, key: Any, items: list[dict[str, Any]], payload: Any) -> GroupVerdicts:
        start = time.perf_counter()
        results: list[dict[str, Any] | None] = [None] * len(items)
        errors: list[str] = []
        todo = list(range(len(items)))
        attempts = 0
        while todo and attempts <= self.retries:
            if attempts:
                self.resends += len(todo)
                await asyncio.sleep(min(0.2 * 2**attempts, 5.0))
            try:
                got = await self._client.verify([items[i] for i in todo])
            except Exception as e:  # the client already retried HTTP failures; treat as infra
                errors.append(f"{type(e).__name__}: {e}")
                got = [{"reward": float("nan"), "status": "verifier_error", "details": {"error": str(e)}}
                       for _ in todo]
            for i, result in zip(todo, got, strict=True):
                results[i] = result
            todo = [i for i in todo if results[i]["status"] in INFRA_STATUSES]  # type: ignore[index]
            attempts += 1
        masked = [r["status"] in INFRA_STATUSES for r in results]  # type: ignore[index]
        self.infra_failures += sum(masked)
        errors += [str(r.get("details", {}).get("error", "")) for r, m in zip(results, masked, strict=True) if m]  # type: ignore[union-attr]
        elapsed = time.perf_counter() - start
        self.busy_s += elapsed
        return GroupVerdicts(
            key=key,
            rewards=[float("nan") if m else float(r["reward"]) for r, m in zip(results, masked, strict=True)],  # type: ignore[index]
            statuses=[str(r["status"]) for r in results],  # type: ignore[index]
            masked=masked,
            retries=attempts - 1,
            verify_s=elapsed,
            payload=payload,
            errors=errors,
        )

    @property
    def pending(self) -> int:
        return sum(not f.done() for f in self._futures)

    def done(self) -> list[GroupVerdicts]:
        """Groups finished so far, in submission order (each returned once).

        A group that finished early waits for the groups submitted before it, so the stage store
        lists groups in generation order whatever the verifier's timing (minibatch order, and so
        the trained weights, are then reproducible).
        """
        ready = 0
        while ready < len(self._futures) and self._futures[ready].done():
            ready += 1
        finished, self._futures = self._futures[:ready], self._futures[ready:]
        return [f.result() for f in finished]

    def drain(self) -> Iterator[GroupVerdicts]:
        """Wait for every submitted group, yielding each in submission order."""
        while self._futures:
            self._futures[0].exception()  # blocks until the oldest is done
            yield from self.done()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._client.aclose(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> VerifyPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
