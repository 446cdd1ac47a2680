"""Scoring groups while generation continues: the trainer's use of ``VerifierSession``.

The generate phase calls :meth:`VerifyPipeline.submit` for every finished group and keeps
generating; the session's background thread scores it. Finished groups are collected, in
submission order, with :meth:`VerifyPipeline.done` (non-blocking) and :meth:`VerifyPipeline.drain`.

Retries are the session's one retry layer (``verifier.retries``: re-sends of an item after an
infrastructure failure, counted once per item, across HTTP and service-side failures). What still
fails is returned with ``masked=True`` and counted; ``resends`` counts every re-send of every
collected group (the ``verifier/resends`` metric). Such an item is never given reward 0: its reward
is NaN in the result and the trainer masks it out of the advantage and the loss. A group the client
refuses outright (a 4xx, e.g. an item over the request cap) is masked whole, with the error.

The trainer reaches the verifier only through this session; with no URL configured,
:func:`verifier_urls` starts an in-process verifier on loopback with ``local_verifier``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mucode.protocol import Item, Status
from mucode.verifier.client import Scored
from mucode.verifier.local import local_verifier
from mucode.verifier.session import VerifierSession

__all__ = ["GroupVerdicts", "VerifyPipeline", "verifier_urls"]

logger = logging.getLogger(__name__)


@dataclass
class GroupVerdicts:
    """The results of one group, in sample order, and how they were obtained."""

    key: Any
    rewards: list[float]
    statuses: list[str]
    masked: list[bool]
    retries: int = 0
    """Re-sends of the group's most re-sent item."""
    resends: int = 0
    """Re-sends of all its items together."""
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

    with local_verifier(backend=backend) as url:
        yield [url]


class VerifyPipeline:
    """Verification of submitted groups on a ``VerifierSession`` (keyword arguments are the client's)."""

    def __init__(self, urls: list[str], *, max_pending: int = 256, **client_options: Any) -> None:
        client_options.setdefault("max_concurrency", 32)
        self.session = VerifierSession(urls, name="mucode-verify", **client_options)
        self.max_pending = max_pending
        self._futures: list[tuple[Future[GroupVerdicts], Any, Any, int]] = []
        self.busy_s = 0.0
        self.infra_failures = 0
        self.resends = 0

    def submit(self, key: Any, items: Sequence[Item | Mapping[str, Any]], payload: Any = None) -> None:
        """Queue one group's verifier items and return at once, unless ``max_pending`` groups are
        already held (submitted, not yet collected): then wait for the oldest, so a generator faster than
        the verifier holds a bounded number of groups in memory, whatever the stage size."""
        if self.max_pending and len(self._futures) >= self.max_pending:
            self._futures[0][0].exception()  # blocks until the oldest is verified; done() then collects it
        future = self.session.submit(items, lambda scored: _group(key, payload, scored))
        self._futures.append((future, key, payload, len(items)))

    def _collect(self, future: Future[GroupVerdicts], key: Any, payload: Any, n: int) -> GroupVerdicts:
        error = future.exception()
        if error is None:
            verdicts = future.result()
        else:  # the client refused the group (4xx): mask it whole, never a reward
            logger.error("verifier refused a group of %d items: %s", n, error)
            verdicts = GroupVerdicts(
                key=key,
                rewards=[float("nan")] * n,
                statuses=[Status.verifier_error.value] * n,
                masked=[True] * n,
                payload=payload,
                errors=[f"{type(error).__name__}: {error}"],
            )
        self.busy_s += verdicts.verify_s
        self.infra_failures += sum(verdicts.masked)
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
        ready = 0
        while ready < len(self._futures) and self._futures[ready][0].done():
            ready += 1
        finished, self._futures = self._futures[:ready], self._futures[ready:]
        return [self._collect(*entry) for entry in finished]

    def drain(self) -> Iterator[GroupVerdicts]:
        """Wait for every submitted group, yielding each in submission order."""
        while self._futures:
            self._futures[0][0].exception()  # blocks until the oldest is done
            yield from self.done()

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> VerifyPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _group(key: Any, payload: Any, scored: Scored) -> GroupVerdicts:
    masked = [r.infra for r in scored.results]
    return GroupVerdicts(
        key=key,
        rewards=[float("nan") if m else float(r.reward) for r, m in zip(scored.results, masked, strict=True)],
        statuses=[r.status.value for r in scored.results],
        masked=masked,
        retries=max(scored.sends, default=1) - 1,
        resends=scored.resends,
        verify_s=scored.elapsed_s,
        payload=payload,
        errors=[r.error for r in scored.results if r.infra],
    )
