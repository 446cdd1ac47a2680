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
        """Samples charged to the policy so far."""
        self.first_error = ""
        """The first charged sample's error (the cause a stopped run names)."""
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
