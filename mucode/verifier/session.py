"""``VerifierSession``: the verifier for synchronous code (trainer, evaluators, verl/TRL adapters).

One ``VerifierClient`` runs on a private event loop in a background thread (started at the first
call, stopped by ``close``). ``submit`` hands items over and returns a ``concurrent.futures.Future``
at once, so the caller keeps generating while they are scored; ``verify``/``score`` block. Retries
are the client's (one layer: ``retries`` re-sends per item after an infrastructure failure, within
``retry_window_s``); ``stats`` counts every send (``SendStats.resends`` is what retries spent).

``verify(items, strict=True)`` is what reward adapters use: an item the verifier could not score
raises ``VerifierUnavailableError`` instead of coming back as a reward, which a framework would
train on as a wrong answer.

Limits: the blocking calls refuse to run inside a running event loop (use the async client there);
a callback given to ``submit`` runs on the session's loop thread, so it must be quick and thread-safe
with respect to the caller.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from mucode.protocol import Connection, Item, Result
from mucode.verifier.client import Scored, SendStats, VerifierClient

__all__ = ["VerifierSession", "VerifierUnavailableError", "require_verdicts"]

T = TypeVar("T")
Items = Sequence[Item | Mapping[str, Any]]


class VerifierUnavailableError(RuntimeError):
    """The verifier could not score a sample (infrastructure, after every retry); not a wrong answer."""


class _LoopThread:
    """An event loop in a daemon thread, started on first use; ``stop`` closes a client on it first."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self.loop, self.thread = loop, thread
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, client: VerifierClient) -> None:
        with self.lock:
            loop, thread = self.loop, self.thread
            self.loop = self.thread = None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:  # a garbage collection ran the finalizer on the loop itself
            loop.call_soon(loop.stop)
            return
        try:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()


class VerifierSession:
    """A blocking facade over ``VerifierClient`` (keyword arguments are the client's).

    ``close`` (or leaving the ``with`` block) closes the connections and stops the thread; a session
    that is dropped without it (a reward function whose framework never closes it) does the same
    when it is garbage collected, or at interpreter exit."""

    def __init__(
        self,
        urls: str | list[str],
        connection: Connection | None = None,
        *,
        name: str = "mucode-verifier",
        **client_options: Any,
    ) -> None:
        self.client = VerifierClient(urls, connection, **client_options)
        self._thread = _LoopThread(name)
        self._closer = weakref.finalize(self, self._thread.stop, self.client)

    @property
    def stats(self) -> SendStats:
        """Items, sends and failures since the session started (see ``SendStats``)."""
        return self.client.stats

    def submit(self, items: Items, then: Callable[[Scored], T] | None = None) -> Future[Any]:
        """Scores ``items`` in the background; the future holds the ``Scored`` result, or what ``then``
        (run on the session's thread as soon as the items are scored) returns for it."""
        return self._thread.run(self._score(list(items), then))

    def score(self, items: Items) -> Scored:
        """Blocking: the results of ``items`` and how many times each was sent."""
        self._refuse_in_loop()
        return self.submit(items).result()  # type: ignore[no-any-return]

    def verify(self, items: Items, *, strict: bool = False) -> list[Result]:
        """Blocking: one result per item, in order. ``strict``: raise ``VerifierUnavailableError`` when
        any item still has an infrastructure status after its retries."""
        results = self.score(items).results
        if strict:
            require_verdicts(results)
        return results

    def close(self) -> None:
        """Closes the client's connections and stops the thread (a later call starts them again)."""
        self._thread.stop(self.client)

    def __enter__(self) -> VerifierSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _score(self, items: Items, then: Callable[[Scored], T] | None) -> Scored | T:
        scored = await self.client.score(items)
        return then(scored) if then is not None else scored

    def _refuse_in_loop(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise RuntimeError(
            "a blocking VerifierSession call was made from a running event loop; "
            "use `await VerifierClient(...).verify(items)` there"
        )


def require_verdicts(results: Sequence[Result]) -> None:
    """Raises ``VerifierUnavailableError`` naming the first result the verifier could not decide."""
    failed = [r for r in results if r.infra]
    if failed:
        first = failed[0]
        raise VerifierUnavailableError(
            f"the verifier could not score {len(failed)} of {len(results)} samples (e.g. id {first.id!r}: "
            f"{first.status.value}: {first.error[:300]}); check the verifier (`mucode serve` logs, /readyz)"
        )
