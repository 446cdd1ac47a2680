"""Scoring groups while generation continues: the trainer's use of ``VerifierSession``.

The generate phase calls :meth:`VerifyPipeline.submit` for every finished group and keeps
generating; the session's background thread scores it. Finished groups are collected, in
submission order, with :meth:`VerifyPipeline.done` (non-blocking) and :meth:`VerifyPipeline.drain`.

Retries are the session's one retry layer (``verifier.retries``: re-sends of an item after an
infrastructure failure, counted once per item, across HTTP and service-side failures). What still
fails is **charged** to the policy: it trains as a failure (reward 0.0, its infrastructure status
kept), never masked out, because a policy that can make the verifier fail on its samples would
otherwise prefer that to being wrong. Charged samples are marked ``charged=True`` and counted
(``verifier/masked``, ``verifier/masked_frac``); ``resends`` counts every re-send of every collected
group (the ``verifier/resends`` metric). A group the client refuses outright (a 4xx, e.g. an item
over the request cap) is charged whole, with the error. :func:`check_charged` stops the run when a
stage's charged fraction passes ``verifier.max_masked_fraction``: at that rate the verifier, not
the policy, is what fails, and the rewards are no longer worth training on.

Groups are coalesced into large requests: a group submitted while ``max_requests`` requests are in
flight waits, with the groups after it, until one returns or ``coalesce_items`` items wait; then they
leave as one request and its results are split back by group. So an idle verifier gets each group at
once and a busy one gets requests of hundreds of items (per-request costs, on both sides, are paid
once per request, not per group). A coalesced request the client refuses (4xx) is sent again group
by group, so only the group at fault is masked.

The trainer reaches the verifier only through this session; with no URL configured,
:func:`verifier_urls` starts a verifier on loopback in a child process (``spawned_verifier``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any

from mucode.protocol import Connection, Item, Status
from mucode.verifier.client import Scored
from mucode.verifier.session import VerifierSession
from mucode.verifier.spawn import spawned_verifier

__all__ = ["GroupVerdicts", "VerifierFailureError", "VerifyPipeline", "check_charged", "verifier_urls"]

logger = logging.getLogger(__name__)


@dataclass
class GroupVerdicts:
    """The results of one group, in sample order, and how they were obtained."""

    key: Any
    rewards: list[float]
    statuses: list[str]
    masked: list[bool]
    """Samples left out of training: none since charging (kept for the store's column)."""
    retries: int = 0
    """Re-sends of the group's most re-sent item."""
    resends: int = 0
    """Re-sends of all its items together."""
    verify_s: float = 0.0
    payload: Any = None
    """Whatever the caller attached in :meth:`VerifyPipeline.submit` (the generated group)."""
    errors: list[str] = field(default_factory=list)
    charged: list[bool] = field(default_factory=list)
    """Samples charged to the policy (an infrastructure status after every retry): reward 0.0."""


@contextlib.contextmanager
def verifier_urls(urls: list[str], backend: str = "local") -> Iterator[list[str]]:
    """The configured verifier URLs, or a local verifier started for the duration of the block (in a child
    process: its event loop and HTTP work must not share the trainer's GIL)."""
    if urls:
        yield list(urls)
        return
    with spawned_verifier(backend=backend) as url:
        yield [url]


@dataclass
class _Waiting:
    """A submitted group not yet sent (or sent inside a coalesced request)."""

    key: Any
    items: list[Item | Mapping[str, Any]]
    payload: Any
    future: Future[GroupVerdicts]


class VerifyPipeline:
    """Verification of submitted groups on a ``VerifierSession`` (keyword arguments are the client's)."""

    def __init__(
        self,
        urls: list[str],
        *,
        max_pending: int = 256,
        coalesce_items: int = 256,
        max_requests: int = 4,
        connection: Connection | None = None,
        **client_options: Any,
    ) -> None:
        # the trainer's traffic: many groups in flight, requests of a coalesced chunk each
        wide = dataclasses.replace(
            connection or Connection(), max_concurrency=32, batch_size=max(64, coalesce_items)
        )
        self.session = VerifierSession(urls, wide, name="mucode-verify", **client_options)
        self.max_pending = max_pending
        self.coalesce_items = coalesce_items
        self.max_requests = max(1, max_requests)
        self._futures: list[tuple[Future[GroupVerdicts], Any, Any, int]] = []
        self._lock = threading.Lock()  # the buffer is shared with the session thread's callbacks
        self._buffer: list[_Waiting] = []
        self._buffered = 0
        self._in_flight = 0
        self.requests = 0
        """Requests sent (coalesced ones and re-sends of a refused one's groups)."""
        self.busy_s = 0.0
        self.infra_failures = 0
        """Samples charged to the policy so far."""
        self.first_error = ""
        """The first charged sample's error (the cause a stopped run names)."""
        self.resends = 0

    def submit(self, key: Any, items: Sequence[Item | Mapping[str, Any]], payload: Any = None) -> None:
        """Queue one group's verifier items and return at once, unless ``max_pending`` groups are
        already held (submitted, not yet collected): then wait for the oldest, so a generator faster than
        the verifier holds a bounded number of groups in memory, whatever the stage size."""
        if self.max_pending and len(self._futures) >= self.max_pending:
            self._flush(force=True)  # the oldest may still be waiting to be sent
            self._futures[0][0].exception()  # blocks until the oldest is verified; done() then collects it
        future: Future[GroupVerdicts] = Future()
        with self._lock:
            self._buffer.append(_Waiting(key, list(items), payload, future))
            self._buffered += len(items)
        self._futures.append((future, key, payload, len(items)))
        self._flush(force=False)

    def _flush(self, *, force: bool) -> None:
        """Sends the waiting groups as one request: now (``force``), or when a request slot is free or
        ``coalesce_items`` items wait."""
        with self._lock:
            if not self._buffer or (
                not force and self._in_flight >= self.max_requests and self._buffered < self.coalesce_items
            ):
                return
            batch, self._buffer, self._buffered = self._buffer, [], 0
            self._in_flight += 1
            self.requests += 1
        sent = self.session.submit([item for waiting in batch for item in waiting.items])
        sent.add_done_callback(lambda done: self._settle(batch, done))

    def _settle(self, batch: list[_Waiting], done: Future[Any]) -> None:
        """Splits a coalesced request's results back into its groups (on the session's thread)."""
        with self._lock:
            self._in_flight -= 1
        try:
            error = done.exception()
        except CancelledError as exc:
            error = exc
        if error is not None and len(batch) > 1:  # one group's refusal must not mask the others
            for waiting in batch:
                self._send_alone(waiting)
        else:
            offset = 0
            for waiting in batch:
                n = len(waiting.items)
                if error is not None:
                    waiting.future.set_exception(error)
                else:
                    scored: Scored = done.result()
                    part = Scored(
                        scored.results[offset : offset + n],
                        scored.sends[offset : offset + n],
                        scored.elapsed_s,
                    )
                    waiting.future.set_result(_group(waiting.key, waiting.payload, part))
                offset += n
        self._flush(force=False)

    def _send_alone(self, waiting: _Waiting) -> None:
        with self._lock:
            self.requests += 1
        sent = self.session.submit(waiting.items, lambda scored: _group(waiting.key, waiting.payload, scored))

        def relay(done: Future[GroupVerdicts]) -> None:
            try:
                error = done.exception()
            except CancelledError as exc:
                error = exc
            if error is None:
                waiting.future.set_result(done.result())
            else:
                waiting.future.set_exception(error)

        sent.add_done_callback(relay)

    def _collect(self, future: Future[GroupVerdicts], key: Any, payload: Any, n: int) -> GroupVerdicts:
        error = future.exception()
        if error is None:
            verdicts = future.result()
        else:  # the client refused the group (4xx): charged whole, never a reward
            logger.error("verifier refused a group of %d items (charged to the policy): %s", n, error)
            verdicts = GroupVerdicts(
                key=key,
                rewards=[0.0] * n,
                statuses=[Status.verifier_error.value] * n,
                masked=[False] * n,
                payload=payload,
                errors=[f"{type(error).__name__}: {error}"],
                charged=[True] * n,
            )
        self.busy_s += verdicts.verify_s
        self.infra_failures += sum(verdicts.charged)
        if verdicts.errors and not self.first_error:
            self.first_error = verdicts.errors[0]
        self.resends += verdicts.resends
        return verdicts

    @property
    def pending(self) -> int:
        return sum(not f.done() for f, *_ in self._futures)

    def done(self) -> list[GroupVerdicts]:
        """Groups finished so far, in submission order (each returned once).

        A group that finished early waits for the groups submitted before it, so the stage store
        lists groups in generation order whatever the verifier's timing (minibatch order, and so
        the trained weights, are then reproducible).
        """
        self._flush(force=False)
        ready = 0
        while ready < len(self._futures) and self._futures[ready][0].done():
            ready += 1
        finished, self._futures = self._futures[:ready], self._futures[ready:]
        return [self._collect(*entry) for entry in finished]

    def drain(self) -> Iterator[GroupVerdicts]:
        """Wait for every submitted group, yielding each in submission order."""
        self._flush(force=True)
        while self._futures:
            self._futures[0][0].exception()  # blocks until the oldest is done
            yield from self.done()

    def close(self) -> None:
        self.session.close()
        with self._lock:
            waiting, self._buffer, self._buffered = self._buffer, [], 0
        for group in waiting:  # never sent: the caller that still collects them sees the pipeline closed
            group.future.set_exception(
                RuntimeError("the verify pipeline was closed before this group was sent")
            )

    def __enter__(self) -> VerifyPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _group(key: Any, payload: Any, scored: Scored) -> GroupVerdicts:
    charged = [r.infra for r in scored.results]  # the client charged them (reward 0.0)
    return GroupVerdicts(
        key=key,
        rewards=[0.0 if c else float(r.reward) for r, c in zip(scored.results, charged, strict=True)],
        statuses=[r.status.value for r in scored.results],
        masked=[False] * len(charged),
        retries=max(scored.sends, default=1) - 1,
        resends=scored.resends,
        verify_s=scored.elapsed_s,
        payload=payload,
        errors=[r.error for r in scored.results if r.infra],
        charged=charged,
    )


class VerifierFailureError(RuntimeError):
    """A stage's charged fraction passed ``verifier.max_masked_fraction``: the run stops (resumable)."""


def check_charged(stage: int, rollout: Mapping[str, Any], bound: float, cause: str = "") -> None:
    """Raises ``VerifierFailureError`` (one line, naming the cause and the fix) when the stage's
    charged fraction (``verifier/masked_frac`` of its rollout metrics) is over ``bound``."""
    frac = float(rollout.get("verifier/masked_frac", 0.0) or 0.0)
    if frac <= bound:
        return
    n, total = int(rollout.get("verifier/masked", 0)), int(rollout.get("rollout/responses", 0))
    why = f" (e.g. {cause[:300]})" if cause else ""
    raise VerifierFailureError(
        f"stage {stage}: the verifier failed on {n} of {total} responses ({frac:.1%}) after its retries{why}, "
        f"over verifier.max_masked_fraction={bound:g}; they were charged as failures, but at this rate the "
        "verifier is broken: fix it (`mucode serve` logs, /readyz) and resume with --resume (the stage's "
        "store is kept; delete it to verify the stage again), or raise verifier.max_masked_fraction"
    )
