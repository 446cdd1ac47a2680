"""Phases 1–2 of a stage: generate with the frozen policy, verify while generating, store.

Finished groups go to the verifier as the engine yields them; verified groups get their group
advantages (``mucode.algo.group_stats.one_group_advantages``, plain Python, over the responses whose
verification succeeded) and
are appended to the stage store immediately. Responses whose verification failed for
infrastructure reasons after every retry are *charged* to the policy (``mucode.train.verify``):
stored with reward 0.0 and their infrastructure status, trained as failures, and counted
(``verifier/masked``, ``verifier/masked_frac``: the charged responses; the names predate charging).

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

import functools
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm import tqdm

from mucode.algo.group_stats import one_group_advantages
from mucode.data.types import TaskRecord
from mucode.rollout.types import EngineError, RolloutEngine, Sample
from mucode.train.sampling import Probe, SamplingController
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

    @property
    def mean_reward(self) -> float:
        """Mean reward of the scored responses so far (0 before any)."""
        return self.reward_sum / max(1, self.scored)

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
    temperature: float | None = None,
    sampling: dict[str, float] | None = None,
    policy_version: int = 0,
) -> StoredGroup:
    rewards = [0.0 if m else r for r, m in zip(verdicts.rewards, verdicts.masked, strict=True)]
    advantages = one_group_advantages(rewards, [not m for m in verdicts.masked], std=adv_std, eps=adv_eps)
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
                temperature=temperature,
                sampling=json.dumps(sampling) if sampling else None,
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
    controller: SamplingController | None = None,
    engine_at: Callable[[float], RolloutEngine] | None = None,
    base_temperature: float | None = None,
    policy_version: int = 0,
) -> RolloutStats:
    """Generate, verify and store the groups of ``prompts`` (slot, record, prompt ids) not yet stored.

    ``controller`` (a sampling controller) plans each prompt's temperature, after a probe if it asks
    for one; ``engine_at(t)`` makes an engine sampling at temperature t (needed for a plan that sets
    temperatures); ``base_temperature`` is the stored temperature of prompts the plan leaves alone;
    ``policy_version``: the update count of the sampling policy, recorded in every row."""
    stats = RolloutStats()
    todo = [p for p in prompts if p[0] not in writer.done_group_ids]
    by_slot: dict[int, TaskRecord] = {slot: record for slot, record, _ in todo}
    plan = _plan(
        stage,
        controller,
        engine_factory,
        todo,
        samples_per_prompt,
        by_slot,
        pipeline,
        stats,
        max_engine_restarts,
        base_temperature,
    )
    bar = _progress_bar(stage, len(todo), show_progress)

    def store(verdicts: GroupVerdicts) -> None:
        slot, samples = verdicts.key, verdicts.payload
        stats_of = plan.get(slot, {})
        temperature = stats_of.get("temperature", base_temperature)
        group = _stored_group(
            slot, by_slot[slot], samples, verdicts, adv_std, adv_eps, temperature, stats_of, policy_version
        )
        writer.add(group)
        _count(stats, group, verdicts.charged or [False] * len(group.samples))
        bar.set_postfix(reward=f"{stats.mean_reward:.3f}", charged=stats.masked, refresh=False)

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
    for temperature, bucket in _buckets(todo, plan):
        factory = _factory_at(temperature, engine_factory, engine_at)
        _run_engines(stage, factory, bucket, samples_per_prompt, submit, stats, max_engine_restarts)
    generated = time.perf_counter()
    stats.times["time/rollout"] = generated - start
    for verdicts in pipeline.drain():
        store(verdicts)
    bar.close()
    stats.times["time/verify"] = time.perf_counter() - generated
    stats.resends = pipeline.resends - resends_before
    stats.times["verifier/busy_s"] = pipeline.busy_s - busy_before
    return stats


def _progress_bar(stage: int, groups: int, show: bool) -> tqdm[Any]:
    return tqdm(
        total=groups,
        desc=f"stage {stage} rollout",
        unit="group",
        disable=not show,
        dynamic_ncols=True,
        leave=False,
    )


def _count(stats: RolloutStats, group: StoredGroup, charged: list[bool]) -> None:
    """One stored group in the stage's counts (``charged``: its infrastructure failures charged)."""
    stats.groups += 1
    for s, was_charged in zip(group.samples, charged, strict=True):
        stats.responses += 1
        stats.statuses[s.status] = stats.statuses.get(s.status, 0) + 1
        stats.truncated += int(s.truncated)
        stats.response_tokens += len(s.response_tokens)
        stats.masked += int(was_charged)
        if not s.masked:  # nothing is masked since charging; a store written before may hold some
            stats.scored += 1
            stats.reward_sum += s.reward


def _factory_at(
    temperature: float | None,
    engine_factory: Callable[[], RolloutEngine],
    engine_at: Callable[[float], RolloutEngine] | None,
) -> Callable[[], RolloutEngine]:
    """The engine factory of one temperature bucket (None: the stage's own engine)."""
    if temperature is None:
        return engine_factory
    if engine_at is None:
        raise ValueError("the sampling controller sets per-prompt temperatures, but this engine cannot")
    return functools.partial(engine_at, temperature)


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
    starts = 0
    while True:
        remaining = [p for p in todo if p[0] not in submitted]
        if not remaining and starts > 0:
            return
        begin = time.perf_counter()
        engine = engine_factory()
        starts += 1
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
            if starts > max_engine_restarts:
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


def _buckets(
    todo: list[tuple[int, TaskRecord, list[int]]], plan: dict[int, dict[str, float]]
) -> list[tuple[float | None, list[tuple[int, TaskRecord, list[int]]]]]:
    """The prompts grouped by planned temperature (None: the engine's own), in first-seen order."""
    out: dict[float | None, list[tuple[int, TaskRecord, list[int]]]] = {}
    for prompt in todo:
        out.setdefault(plan.get(prompt[0], {}).get("temperature"), []).append(prompt)
    return list(out.items())


def _plan(
    stage: int,
    controller: SamplingController | None,
    engine_factory: Callable[[], RolloutEngine],
    todo: list[tuple[int, TaskRecord, list[int]]],
    samples_per_prompt: int,
    by_slot: dict[int, TaskRecord],
    pipeline: VerifyPipeline,
    stats: RolloutStats,
    max_engine_restarts: int,
    base_temperature: float | None,
) -> dict[int, dict[str, float]]:
    """The controller's plan for ``todo`` (after its probe, if it asks for one); {} without a controller."""
    if controller is None or not todo:
        return {}
    probes = (
        _probe(
            stage,
            engine_factory,
            todo,
            controller.probe_samples or samples_per_prompt,
            by_slot,
            pipeline,
            stats,
            max_engine_restarts,
        )
        if controller.probes
        else {}
    )
    return controller.plan([slot for slot, _, _ in todo], probes, base_temperature or 1.0)


def _probe(
    stage: int,
    engine_factory: Callable[[], RolloutEngine],
    todo: list[tuple[int, TaskRecord, list[int]]],
    samples: int,
    by_slot: dict[int, TaskRecord],
    pipeline: VerifyPipeline,
    stats: RolloutStats,
    max_engine_restarts: int,
) -> dict[int, Probe]:
    """Sample ``samples`` responses per prompt with the stage's policy at its base temperature, score them,
    and return them per slot (never stored, never trained on)."""
    start = time.perf_counter()
    texts: dict[int, list[str]] = {}

    def submit(group: list[Sample]) -> None:
        slot = int(group[0].prompt_id)
        texts[slot] = [s.response_text for s in group]
        items: list[dict[str, Any]] = [
            by_slot[slot].verifier_item(s.response_text, item_id=f"p{stage}-g{slot}-r{s.sample_index}")
            for s in group
        ]
        pipeline.submit(("probe", slot), items, payload=None)

    probe_stats = RolloutStats()
    _run_engines(stage, engine_factory, todo, samples, submit, probe_stats, max_engine_restarts)
    out: dict[int, Probe] = {}
    for verdicts in pipeline.drain():
        _, slot = verdicts.key
        rewards = [math.nan if m else r for r, m in zip(verdicts.rewards, verdicts.masked, strict=True)]
        out[slot] = Probe(rewards, texts[slot])
    stats.engine_starts += probe_stats.engine_starts
    stats.extra["probe/responses"] = float(sum(len(p.rewards) for p in out.values()))
    stats.times["time/probe"] = time.perf_counter() - start
    return out
