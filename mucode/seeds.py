"""Every seed mucode derives from a configured one, in one place: ``derive_seed(base, purpose, …)``.

A configured seed (``train.seed``, ``data.shuffle_seed``, ``rollout.seed``) feeds several random
streams: the data order of each epoch, the minibatch order of each stage, each stage's and rank's
engine, each evaluation. Each stream is one :class:`SeedPurpose`, and its seed is

    base × multiplier + stage × stage_step + rank × rank_step + index

with the purpose's constants. The constants keep the streams of one run apart: ``1_000_003`` (a
prime above any number of stages or epochs a run has) gives every base seed its own range of a
million epoch/stage seeds; ``7_919`` and ``104_729`` (the 1,000th and 10,000th primes) step the
engine seed per stage and per rank so that no (stage, rank) pair of a run shares a seed with another
below 13 ranks × 7,919 stages. The values are the ones mucode has always used: a run resumed with a
newer mucode draws the same prompts, minibatches and samples.

Limits: seeds of *different* purposes may coincide (the streams feed different generators); streams
of different base seeds may overlap for large stage or epoch numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["SeedPurpose", "derive_seed"]


@dataclass(frozen=True)
class _Steps:
    stream: str
    """The stream's name (keeps purposes with equal constants distinct members)."""
    multiplier: int
    stage_step: int
    rank_step: int


class SeedPurpose(Enum):
    """The random streams mucode seeds; each value holds its formula's constants."""

    PROMPT_ORDER = _Steps("prompt_order", 1_000_003, 0, 0)
    """The shuffle of the data set for one epoch (``index`` = epoch) from ``data.shuffle_seed``."""
    MINIBATCH_ORDER = _Steps("minibatch_order", 1_000_003, 1, 0)
    """The seed stage ``stage``'s store is read with (its minibatch order), from ``train.seed``."""
    ROLLOUT_ENGINE = _Steps("rollout_engine", 1, 7_919, 104_729)
    """The engine of stage ``stage`` on rank ``rank``, from ``rollout.seed``."""
    COLOCATED_ENGINE = _Steps("colocated_engine", 1, 0, 1)
    """The long-lived (colocated vLLM) engine of rank ``rank`` when it is built, from ``rollout.seed``."""
    EVAL = _Steps("eval", 1, 0, 0)
    """The sampling of the evaluation after update ``index``, from ``train.seed``."""
    REPLICA = _Steps("replica", 1, 0, 0)
    """Engine replica ``index`` of an engine seeded ``base``."""
    REQUEST = _Steps("request", 1, 0, 0)
    """Request ``index`` of a stage whose engine is seeded ``base`` (per-request seeding)."""
    STORE_PASS = _Steps("store_pass", 1, 0, 0)
    """Pass ``index`` over a stage store read with seed ``base`` (each pass has its own shuffle)."""
    REPLAY = _Steps("replay", 1, 0, 0)
    """The batch composer's draws (replay), from ``train.seed``."""
    SAMPLING = _Steps("sampling", 1, 0, 0)
    """A sampling controller's own randomness, from ``rollout.seed``."""


def derive_seed(base: int, purpose: SeedPurpose, *, stage: int = 0, rank: int = 0, index: int = 0) -> int:
    """The seed of ``purpose``'s stream for ``stage``/``rank``/``index``, derived from ``base``."""
    steps = purpose.value
    return base * steps.multiplier + stage * steps.stage_step + rank * steps.rank_step + index
