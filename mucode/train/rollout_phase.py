"""Phases 1–2 of a stage: generate with the frozen policy, verify while generating, store.

Finished groups go to the verifier as the engine yields them; verified groups get their group
advantages (``mucode.algo.group_advantages`` over the responses whose verification succeeded) and
are appended to the stage store immediately. Responses whose verification failed for
infrastructure reasons are stored with ``masked=True`` and a NaN reward: they enter neither the
group statistics nor the loss, and they are counted (``verifier/masked``).

Timing: ``time/rollout`` is the engine's wall-clock (start to last group); ``time/verify`` is the
time spent waiting for the verifier after generation ended (the part of verification that did not
overlap generation); ``verifier/busy_s`` is the sum of the groups' verification latencies.

With ``rescore`` (``algo.recompute_behaviour_logprobs``) the stored behaviour log-probs are the
trainer's own, computed with β_k's weights as each group arrives, instead of the engine's.

An engine that fails with :class:`~mucode.rollout.types.EngineError` (its process died) is started
again, up to ``max_engine_restarts`` times, and the stage continues with the prompts it had not yet
generated; groups already handed to the verifier are kept. Other exceptions end the stage.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from tqdm import tqdm

from mucode.algo.advantages import group_advantages
from mucode.data.types import TaskRecord
from mucode.rollout.types import EngineError, RolloutEngine, Sample
from mucode.train.store import StageWriter, StoredGroup, StoredSample
from mucode.train.verify import GroupVerdicts, VerifyPipeline

__all__ = ["RolloutStats", "generate_stage"]

logger = logging.getLogger(__name__)


@dataclass
class RolloutStats:
    groups: int = 0
    responses: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    masked: int = 0
    resends: int = 0
    truncated: int = 0
    response_tokens: int = 0
    engine_starts: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    """Other per-stage figures (``memory/…``); merged across ranks by maximum."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def merged(cls, parts: list[dict[str, object]]) -> RolloutStats:
        """The stats of ranks that generated concurrently: counts add up, times and extras take the maximum
        (the ranks ran side by side), ``verifier/busy_s`` adds up."""
        out = cls()
        for part in parts:
            other = cls(**part)  # type: ignore[arg-type]
            for name in (
                "groups",
                "responses",
                "reward_sum",
                "scored",
                "masked",
                "resends",
                "truncated",
                "response_tokens",
            ):
                setattr(out, name, getattr(out, name) + getattr(other, name))
            out.engine_starts = max(out.engine_starts, other.engine_starts)
            for key, n in other.statuses.items():
                out.statuses[key] = out.statuses.get(key, 0) + n
            for key, v in other.times.items():
                add = key == "verifier/busy_s"
                out.times[key] = out.times.get(key, 0.0) + v if add else max(out.times.get(key, 0.0), v)
            for key, v in other.extra.items():
                out.extra[key] = max(out.extra.get(key, v), v)
        return out

    def as_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "reward/rollout_mean": self.reward_sum / self.scored if self.scored else math.nan,
            "rollout/groups": self.groups,
            "rollout/responses": self.responses,
            "rollout/truncated_frac": self.truncated / max(1, self.responses),
            "rollout/mean_response_tokens": self.response_tokens / max(1, self.responses),
            "verifier/masked": self.masked,
            "verifier/masked_frac": self.masked / max(1, self.responses),
            "verifier/resends": self.resends,
        }
        out.update({f"verifier/status/{k}": v for k, v in sorted(self.statuses.items())})
        out.update(self.times)
        out.update(self.extra)
        return out


def _stored_group(
    slot: int,
    record: TaskRecord,
    samples: list[Sample],
    verdicts: GroupVerdicts,
    adv_std: str,
    adv_eps: float,
    policy_version: int = 0,
) -> StoredGroup:
    rewards = torch.tensor([0.0 if m else r for r, m in zip(verdicts.rewards, verdicts.masked, strict=True)])
    valid = torch.tensor([not m for m in verdicts.masked])
    advantages = group_advantages(
        rewards, torch.zeros(len(samples), dtype=torch.long), std=adv_std, eps=adv_eps, valid=valid
    ).tolist()
    per_sample_verify = verdicts.verify_s / max(1, len(samples))
    return StoredGroup(
        group_id=slot,
        prompt_id=record.prompt_id,
        samples=[
            StoredSample(
                prompt_id=record.prompt_id,
                sample_index=s.sample_index,
                prompt_tokens=list(s.prompt_token_ids),
                response_tokens=list(s.response_token_ids),
                behaviour_logprobs=list(s.behaviour_logprobs),
                reward=verdicts.rewards[i],
                status=verdicts.statuses[i],
                masked=verdicts.masked[i],
                advantage=advantages[i],
                response_text=s.response_text,
                truncated=s.finish_reason == "length",
                verify_s=per_sample_verify,
                policy_version=policy_version,
            )
            for i, s in enumerate(samples)
        ],
    )


def generate_stage(
    *,
    stage: int,
    engine_factory: Callable[[], RolloutEngine],
    prompts: list[tuple[int, TaskRecord, list[int]]],
    samples_per_prompt: int,
    writer: StageWriter,
    pipeline: VerifyPipeline,
    adv_std: str,
    adv_eps: float,
    rescore: Callable[[list[Sample]], list[list[float]]] | None = None,
    show_progress: bool = True,
    max_engine_restarts: int = 2,
    policy_version: int = 0,
) -> RolloutStats:
    """Generate, verify and store the groups of ``prompts`` (slot, record, prompt ids) not yet stored;
    ``policy_version``: the update count of the sampling policy, recorded in every row."""
    stats = RolloutStats()
    todo = [p for p in prompts if p[0] not in writer.done_group_ids]
    by_slot: dict[int, TaskRecord] = {slot: record for slot, record, _ in todo}
    bar = tqdm(
        total=len(todo),
        desc=f"stage {stage} rollout",
        unit="group",
        disable=not show_progress,
        dynamic_ncols=True,
        leave=False,
    )

    def store(verdicts: GroupVerdicts) -> None:
        slot, samples = verdicts.key, verdicts.payload
        group = _stored_group(slot, by_slot[slot], samples, verdicts, adv_std, adv_eps, policy_version)
        writer.add(group)
        stats.groups += 1
        for s in group.samples:
            stats.responses += 1
            stats.statuses[s.status] = stats.statuses.get(s.status, 0) + 1
            stats.truncated += int(s.truncated)
            stats.response_tokens += len(s.response_tokens)
            if s.masked:
                stats.masked += 1
            else:
                stats.scored += 1
                stats.reward_sum += s.reward
        bar.set_postfix(
            reward=f"{stats.reward_sum / max(1, stats.scored):.3f}", masked=stats.masked, refresh=False
        )

    def submit(group: list[Sample]) -> None:
        slot = int(group[0].prompt_id)
        if rescore is not None:  # algo.recompute_behaviour_logprobs: b from the trainer, not the engine
            for sample, logprobs in zip(group, rescore(group), strict=True):
                sample.behaviour_logprobs = logprobs
        items: list[dict[str, Any]] = [
            by_slot[slot].verifier_item(s.response_text, item_id=f"s{stage}-g{slot}-r{s.sample_index}")
            for s in group
        ]
        pipeline.submit(slot, items, payload=group)
        bar.update(1)
        for verdicts in pipeline.done():
            store(verdicts)

    start = time.perf_counter()
    resends_before, busy_before = pipeline.resends, pipeline.busy_s
    _run_engines(stage, engine_factory, todo, samples_per_prompt, submit, stats, max_engine_restarts)
    generated = time.perf_counter()
    stats.times["time/rollout"] = generated - start
    for verdicts in pipeline.drain():
        store(verdicts)
    bar.close()
    stats.times["time/verify"] = time.perf_counter() - generated
    stats.resends = pipeline.resends - resends_before
    stats.times["verifier/busy_s"] = pipeline.busy_s - busy_before
    return stats


def _run_engines(
    stage: int,
    engine_factory: Callable[[], RolloutEngine],
    todo: list[tuple[int, TaskRecord, list[int]]],
    samples_per_prompt: int,
    submit: Callable[[list[Sample]], None],
    stats: RolloutStats,
    max_engine_restarts: int,
) -> None:
    """Generate ``todo`` with an engine from ``engine_factory``, handing each group to ``submit``; after an
    :class:`EngineError` a new engine takes the prompts not yet submitted (at most ``max_engine_restarts``)."""
    submitted: set[int] = set()
    while True:
        remaining = [p for p in todo if p[0] not in submitted]
        if not remaining and stats.engine_starts > 0:
            return
        begin = time.perf_counter()
        engine = engine_factory()
        stats.engine_starts += 1
        stats.times["time/engine_start"] = (
            stats.times.get("time/engine_start", 0.0) + time.perf_counter() - begin
        )
        try:
            for group in engine.generate(
                [(str(slot), ids) for slot, _, ids in remaining], samples_per_prompt
            ):
                submit(group)
                submitted.add(int(group[0].prompt_id))
            return
        except EngineError as err:
            if stats.engine_starts > max_engine_restarts:
                raise
            logger.warning(
                "stage %d: the engine failed (%s); starting a new one for the %d prompts left",
                stage,
                err,
                len(todo) - len(submitted),
            )
        finally:
            engine.close()  # release the engine: its memory (and, for vllm, its process) goes
            del engine
