"""An in-process verifier for the trainer: reward programs called directly, no HTTP, no service.

:class:`InProcessPipeline` has :class:`mucode.train.verify.VerifyPipeline`'s interface (``submit``,
``done``, ``drain``, ``close``, ``busy_s``, ``infra_failures``, ``resends``), so the rollout phase
cannot tell them apart; :func:`in_process_verifier` wraps it as the :class:`Verifier` that
``run_training(verifier=...)`` takes. A group is scored at ``submit``, synchronously, by the program
its items name: through the program's ``score_now(item)`` when it has one (a pure-Python program such
as ``chain``), else its ``async score(item, ctx)`` on a private event loop with an empty
:class:`RewardContext`.

Limits (on purpose): for programs that need no sandbox and no math workers, and are fast enough to
run between generated groups (the study task's ``chain``); the service's limits, batching and spec
checks' HTTP 422 do not apply (a malformed spec raises). An exception from a program masks the group
like an infrastructure failure (NaN reward, never 0) and is counted in ``infra_failures``. The
evaluator, which scores over HTTP, gets no URL: a run through it must leave ``eval.benchmarks``
empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mucode.protocol import Item, Result, Status
from mucode.rewards.types import RewardContext
from mucode.train.prepare import Verifier
from mucode.train.verify import GroupVerdicts

__all__ = ["InProcessPipeline", "in_process_verifier"]


class InProcessPipeline:
    """Scores each submitted group at once with ``programs`` (name → reward program)."""

    def __init__(self, programs: Mapping[str, Any]) -> None:
        self.programs = dict(programs)
        self._ready: list[GroupVerdicts] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.busy_s = 0.0
        self.infra_failures = 0
        self.resends = 0
        self.pending = 0

    def _score(self, item: Item) -> Result:
        program = self.programs.get(item.program)
        if program is None:
            raise KeyError(f"no in-process reward program {item.program!r}; have {sorted(self.programs)}")
        if hasattr(program, "score_now"):
            return program.score_now(item)
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(program.score(item, RewardContext()))

    def submit(self, key: Any, items: Sequence[Item | Mapping[str, Any]], payload: Any = None) -> None:
        start = time.perf_counter()
        parsed = [i if isinstance(i, Item) else Item.model_validate(i) for i in items]
        try:
            results = [self._score(i) for i in parsed]
        except Exception as err:  # noqa: BLE001 - masked and counted, never a reward of 0
            error = f"{type(err).__name__}: {err}"
            results = [Result.infra_failure(i.id, Status.verifier_error, error) for i in parsed]
        masked = [r.infra for r in results]
        elapsed = time.perf_counter() - start
        self.busy_s += elapsed
        self.infra_failures += sum(masked)
        self._ready.append(
            GroupVerdicts(
                key=key,
                rewards=[
                    float("nan") if m else float(r.reward) for r, m in zip(results, masked, strict=True)
                ],
                statuses=[r.status.value for r in results],
                masked=masked,
                verify_s=elapsed,
                payload=payload,
                errors=[r.error for r in results if r.infra],
            )
        )

    def done(self) -> list[GroupVerdicts]:
        ready, self._ready = self._ready, []
        return ready

    def drain(self) -> Iterator[GroupVerdicts]:
        yield from self.done()

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def in_process_verifier(programs: Mapping[str, Any]) -> Verifier:
    """A :class:`Verifier` scoring in this process with ``programs`` (no URL: no evaluator)."""
    return Verifier(pipeline=InProcessPipeline(programs), urls=[])  # type: ignore[arg-type]
