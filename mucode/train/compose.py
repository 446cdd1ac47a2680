"""The batch composer: what one optimizer update trains on, between the stage store and the optimizer.

A :class:`BatchComposer` gets each update's fresh minibatch (the store's groups) and the global
update number, and returns the groups to train on plus its metrics. Built-ins:

- ``fresh``: the minibatch as it is (every run before this existed).
- ``replay``: rollout-level, advantage-prioritized replay (arXiv 2606.04560). Per update: drop the
  fresh groups whose rewards are all equal → evict buffered rollouts older than ``max_age`` updates
  (``update − birth > max_age``) → after ``warmup_updates`` updates, draw round(``replay_ratio`` ·
  B_fresh) rollouts (B_fresh: fresh rollouts kept) without replacement with P(i) ∝ (|A_i| + ε)^α;
  drawn entries stay in the buffer → train on fresh ‖ replayed → insert the fresh survivors with
  birth = this update (FIFO beyond ``capacity``). A buffered rollout keeps the advantage, behaviour
  log-probs and temperature it was stored with (never recomputed); its ratio is to those stored
  log-probs, with no other correction. Replayed rollouts are one-response groups
  (``StoredGroup.replayed``): objectives that read groups (conspo, agpo) cannot take them.

Ages count optimizer updates since a rollout was first trained on (its birth), not since it was
generated: with long stages (μ-GRPO's μ = 1024) fresh rollouts are already up to μ − 1 updates
old, and replay adds rollouts up to ``max_age`` updates older again; within a stage the buffer
holds rollouts of the same behaviour policy.

Limits: the buffer is not checkpointed: a resumed run starts with an empty buffer (and a new
warm-up). Every rank holds the same buffer (each sees the whole minibatch and draws with the same
seeded generator), and the replayed rollouts are spread over ranks like fresh groups.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from mucode.components import COMPOSERS, Component
from mucode.train.store import StoredGroup, StoredSample

__all__ = ["BatchComposer", "FreshComposer", "ReplayComposer", "ReplayParams", "draw_without_replacement"]


class BatchComposer(Protocol):
    """Makes each update's training groups from its fresh minibatch."""

    def compose(self, fresh: list[StoredGroup], update: int) -> tuple[list[StoredGroup], dict[str, float]]:
        """(groups to train on, metrics) for global update ``update`` (0-based, before the step)."""
        ...


@dataclass(frozen=True)
class FreshParams:
    """``fresh`` has no parameters."""


class FreshComposer:
    def compose(self, fresh: list[StoredGroup], update: int) -> tuple[list[StoredGroup], dict[str, float]]:
        return fresh, {}


@dataclass(frozen=True)
class ReplayParams:
    """Parameters of ``replay``; every default is from a third-party verl-fork reproduction [T]."""

    replay_ratio: float = 0.5
    """Replayed rollouts per update = round(replay_ratio · fresh rollouts kept) [T]."""
    max_age: int = 10
    """τ_max: evict a rollout when update − birth > max_age (in optimizer updates) [T]."""
    priority_alpha: float = 0.5
    """α of the priority (|A| + ε)^α [T]."""
    priority_eps: float = 1e-6
    """ε of the priority [T]."""
    warmup_updates: int = 20
    """No replay during the first this-many updates (the buffer still fills) [T]."""
    capacity: int = 30000
    """Most rollouts buffered (oldest dropped first) [T]."""
    drop_zero_variance: bool = True
    """Fresh groups whose rewards are all equal are neither trained on nor buffered [T]."""

    def __post_init__(self) -> None:
        if not self.replay_ratio >= 0:
            raise ValueError(f"replay_ratio must be >= 0 (reproduction: 0.5), got {self.replay_ratio}")
        if self.max_age < 0 or self.warmup_updates < 0 or self.capacity < 1:
            raise ValueError("max_age and warmup_updates must be >= 0 and capacity >= 1")
        if not self.priority_alpha >= 0 or not self.priority_eps > 0:
            raise ValueError("priority_alpha must be >= 0 and priority_eps > 0")


def draw_without_replacement(weights: Sequence[float], k: int, rng: random.Random) -> list[int]:
    """``k`` distinct indices, drawn one after another with P(i) ∝ weights[i] among those left
    (Efraimidis–Spirakis keys u^(1/w): the same distribution, one pass)."""
    keyed = [(rng.random() ** (1.0 / w), i) for i, w in enumerate(weights) if w > 0]
    keyed.sort(reverse=True)
    return [i for _, i in keyed[:k]]


@dataclass
class _Entry:
    sample: StoredSample
    birth: int
    group_id: int


@dataclass
class ReplayComposer:
    params: ReplayParams
    seed: int = 0
    buffer: deque[_Entry] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def priority(self, sample: StoredSample) -> float:
        return (abs(sample.advantage) + self.params.priority_eps) ** self.params.priority_alpha

    def compose(self, fresh: list[StoredGroup], update: int) -> tuple[list[StoredGroup], dict[str, float]]:
        p = self.params
        kept = [g for g in fresh if not (p.drop_zero_variance and _flat(g))]
        fresh_rollouts = [s for g in kept for s in g.samples if not s.masked and s.response_tokens]
        while self.buffer and update - self.buffer[0].birth > p.max_age:  # FIFO: oldest first
            self.buffer.popleft()
        drawn: list[_Entry] = []
        if update >= p.warmup_updates and self.buffer:
            k = min(len(self.buffer), round(p.replay_ratio * len(fresh_rollouts)))
            entries = list(self.buffer)
            drawn = [
                entries[i]
                for i in draw_without_replacement([self.priority(e.sample) for e in entries], k, self._rng)
            ]
        replayed = [
            StoredGroup(group_id=-1 - i, prompt_id=e.sample.prompt_id, samples=[e.sample], replayed=True)
            for i, e in enumerate(drawn)
        ]
        metrics = self._metrics(fresh, kept, fresh_rollouts, drawn, update)
        for g in kept:
            for s in g.samples:
                if not s.masked and s.response_tokens:
                    self.buffer.append(_Entry(replace(s), update, g.group_id))
        while len(self.buffer) > p.capacity:
            self.buffer.popleft()
        metrics["replay/buffer_size"] = float(len(self.buffer))
        return kept + replayed, metrics

    def _metrics(
        self,
        fresh: list[StoredGroup],
        kept: list[StoredGroup],
        fresh_rollouts: list[StoredSample],
        drawn: list[_Entry],
        update: int,
    ) -> dict[str, float]:
        ages = [update - e.birth for e in drawn]
        buffer_ages = [update - e.birth for e in self.buffer]
        priorities = [self.priority(e.sample) for e in self.buffer]
        total = len(fresh_rollouts) + len(drawn)
        return {
            "replay/replayed": float(len(drawn)),
            "replay/fraction": len(drawn) / total if total else 0.0,
            "replay/age_mean": sum(ages) / len(ages) if ages else 0.0,
            "replay/age_max": float(max(ages, default=0)),
            "replay/buffer_age_mean": sum(buffer_ages) / len(buffer_ages) if buffer_ages else 0.0,
            "replay/buffer_age_max": float(max(buffer_ages, default=0)),
            "replay/priority_mean": sum(priorities) / len(priorities) if priorities else 0.0,
            "replay/priority_max": max(priorities, default=0.0),
            "groups/zero_variance_frac": (len(fresh) - len(kept)) / len(fresh) if fresh else 0.0,
        }


def _flat(group: StoredGroup) -> bool:
    rewards = [s.reward for s in group.samples if not s.masked and not math.isnan(s.reward)]
    return len(set(rewards)) <= 1


COMPOSERS.register(
    "fresh",
    Component(
        "fresh",
        FreshParams,
        lambda params, seed: FreshComposer(),
        "each update's minibatch as the store gives it",
    ),
)
COMPOSERS.register(
    "replay",
    Component(
        "replay",
        ReplayParams,
        lambda params, seed: ReplayComposer(params, seed),
        "rollout-level advantage-prioritized replay, age eviction in updates",
    ),
)
