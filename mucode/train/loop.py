"""The staged trainer, top to bottom: prepare, then for each stage generate → verify → store → optimize →
checkpoint → hand over, then finish.

:func:`run_training` is the story; each phase is a function below it, over one :class:`TrainingRun`
(``prepare``: checks, data, policy, resume; ``rollout_runner``/``rollout_phase``: generate+verify+store;
``optimize``: one update; ``output``: what rank 0 prints and writes; ``summary``: the arithmetic).
The engine and the verifier can be passed in (``engine_factory``, ``verifier``); by default they are
the ones the config names. Restart rules:

- a stage whose store is complete is never generated again; an incomplete store is finished (only
  its missing groups are generated) with the policy of the stage's start;
- optimization continues from the latest checkpoint (model, optimizer, RNG, data position);
- ``--resume`` on a finished run, or on a directory with nothing to resume, is an error (a resume
  never silently runs 0 updates); a fresh run refuses a directory that already holds a run.

Deviations: the stage's prompts are the next B_train prompts of one seeded order of the data set,
wrapping around (with a new order) when the data set is smaller than the run needs.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mucode.config import MucodeConfig
from mucode.data.prompts import render_prompt
from mucode.data.types import TaskRecord
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.checkpoint import TrainerState
from mucode.train.distributed import barrier, init_distributed
from mucode.train.preflight import ResumeError
from mucode.train.prepare import TrainingRun, Verifier, final_dir, final_pending, open_verifier, prepare_run
from mucode.train.rollout_runner import EngineFactory
from mucode.train.store import StageStore, StoreManifest
from mucode.train.summary import run_totals, stage_line, stage_record
from mucode.train.verify import check_charged

__all__ = ["ResumeError", "RunResult", "run_training", "stage_prompts"]

UpdateHook = Callable[[TrainerState], None]
"""Called on every rank after each update is complete (logged, checkpointed and evaluated when due)."""


def _no_hook(state: TrainerState) -> None:
    pass


@dataclass
class RunResult:
    run_dir: Path
    state: TrainerState
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageClock:
    """One stage's number, start and phase times (``time/rollout`` …, ``time/total``)."""

    stage: int
    start: float = field(default_factory=time.perf_counter)
    times: dict[str, float] = field(default_factory=dict)


def run_training(
    cfg: MucodeConfig,
    *,
    resume: bool = False,
    records: list[TaskRecord] | None = None,
    verifier: Verifier | None = None,
    engine_factory: EngineFactory | None = None,
    on_update: UpdateHook = _no_hook,
    update_hook: Callable[[TrainingRun], UpdateHook] | None = None,
) -> RunResult:
    """Run (or resume) the staged trainer described by ``cfg``; returns where its outputs are.

    ``verifier``: score through it (the caller closes it; default :func:`open_verifier`); ``engine_factory``:
    the engine of each stage (default: ``rollout.engine``); ``on_update``: see :data:`UpdateHook`;
    ``update_hook``: builds one from the prepared run (its model, its output), used instead."""
    run = prepare_run(
        cfg, init_distributed(cfg.train.device), resume=resume, records=records, engine_factory=engine_factory
    )
    if update_hook is not None:
        on_update = update_hook(run)
    with contextlib.ExitStack() as stack:
        stack.callback(run.close)
        verify = verifier if verifier is not None else stack.enter_context(open_verifier(cfg))
        while run.state.stage < cfg.batch.num_stages:
            clock = StageClock(run.state.stage)
            rollout = generate(run, clock, verify)
            store = StageStore.open(
                stage_dir(run.run_dir, clock.stage)
            )  # checksums verified: corrupt stops here
            recent_rewards = optimize(run, clock, store, verify, on_update)
            hand_over(run, clock, store, rollout, recent_rewards)
        finish(run, verify)
    return summarize(run)


def stage_dir(run_dir: Path, stage: int) -> Path:
    return run_dir / "stages" / f"stage-{stage:04d}"


def stage_prompts(
    records: list[TaskRecord], stage: int, per_stage: int, seed: int
) -> list[tuple[int, TaskRecord]]:
    """The (slot, record) pairs of ``stage``: slots ``stage*per_stage …`` of a seeded, repeating order.

    Each pass over the data set (epoch) has its own shuffle, made once: O(per_stage + n) per stage."""
    out = []
    n = len(records)
    orders: dict[int, list[int]] = {}
    for slot in range(per_stage):
        epoch, index = divmod(stage * per_stage + slot, n)
        order = orders.get(epoch)
        if order is None:
            order = orders[epoch] = list(range(n))
            random.Random(derive_seed(seed, SeedPurpose.PROMPT_ORDER, index=epoch)).shuffle(order)
        out.append((slot, records[order[index]]))
    return out


# ── 1+2. generate with β_k, verify while generating, store (every rank generates its share) ──────────
def generate(run: TrainingRun, clock: StageClock, verify: Verifier) -> dict[str, float]:
    """The stage's store, generated unless a complete one exists; its rollout metrics (``{}`` when reused)."""
    k, store_dir, b = clock.stage, stage_dir(run.run_dir, clock.stage), run.cfg.batch
    rollout: dict[str, float] = {}
    if not StageStore.is_complete(store_dir):
        if run.state.update_in_stage > 0:
            raise ResumeError(
                f"checkpoint says stage {k} was being optimized, but its store {store_dir} is "
                f"not complete. Delete {run.run_dir / 'checkpoints'} to restart the stage."
            )
        rollout = _rollouts(run, k, b.prompts_per_stage(), store_dir, verify)
        clock.times.update({key: v for key, v in rollout.items() if key.startswith("time/")})
        check_charged(
            k, rollout, run.cfg.verifier.max_masked_fraction, getattr(verify.pipeline, "first_error", "")
        )
    barrier(run.info)
    return rollout


def _rollouts(run: TrainingRun, k: int, prompts: int, store_dir: Path, verify: Verifier) -> dict[str, float]:
    """Generate, verify and store ``prompts`` prompts of the data order's stage ``k`` with β_k."""

    slots = stage_prompts(run.records, k, prompts, run.cfg.data.shuffle_seed)
    rendered = [
        (slot, record, render_prompt(run.tokenizer, record)) for slot, record in slots
    ]  # lengths checked
    behaviour = run.run_dir / "policy" / f"stage-{k - 1:04d}" if k > 0 else Path(run.base_path)
    return run.rollout.run(
        k, rendered, store_dir, verify.pipeline, policy_path=behaviour, show_progress=run.cfg.train.progress
    )


# ── 3. optimize: μ minibatches of B_mini groups streamed from the store ─────────────────────────────
def optimize(
    run: TrainingRun, clock: StageClock, store: StageStore, verify: Verifier, on_update: UpdateHook
) -> list[float]:
    """The stage's remaining updates; returns this invocation's training rewards, one per update."""
    state, b, k = run.state, run.cfg.batch, clock.stage
    opt_start, eval_before = time.perf_counter(), run.evaluator.seconds
    remaining = b.updates_per_stage - state.update_in_stage
    bar = tqdm(
        total=b.updates_per_stage,
        initial=state.update_in_stage,
        desc=f"stage {k} optimize",
        unit="update",
        disable=not run.output.show_progress,
        dynamic_ncols=True,
        leave=False,
    )
    recent_rewards: list[float] = []
    seed = derive_seed(run.cfg.train.seed, SeedPurpose.MINIBATCH_ORDER, stage=k)
    run.updater.begin_stage(k)  # resets the reference policy when due
    for minibatch in store.minibatches(
        b.prompts_per_update, seed=seed, start=state.update_in_stage, count=b.updates_per_stage
    ):
        metrics = run.updater.step(
            minibatch,
            update=state.global_update,
            progress=state.global_update / (b.updates_per_stage * b.num_stages),
        )
        state.update_in_stage += 1
        state.global_update += 1
        recent_rewards.append(metrics.get("reward/mean", math.nan))
        run.output.log_update(
            {"stage": k, "update": state.global_update, "update_in_stage": state.update_in_stage, **metrics}
        )
        bar.update(1)
        bar.set_postfix(
            reward=f"{metrics.get('reward/mean', math.nan):.3f}",
            veto=f"{metrics.get('stale/veto_token_frac', 0.0):.4f}",
            refresh=False,
        )
        if run.evaluator.due(state.global_update):
            run.evaluator.run(
                run.model,
                run.tokenizer,
                verify.urls,
                state.global_update,
                run.output,
                since_start=state.times.get("time/total", 0.0) + time.perf_counter() - clock.start,
                eval_so_far=state.times.get("time/eval", 0.0) + run.evaluator.seconds - eval_before,
            )
        on_update(state)
        if (
            state.global_update % run.cfg.train.checkpoint_every == 0
            and state.update_in_stage < b.updates_per_stage
        ):  # after the update's evaluations: a checkpoint at N holds everything logged at N
            run.checkpoint()  # the stage-end checkpoint is the hand-over's
    bar.close()
    if remaining > 0 and state.update_in_stage != b.updates_per_stage:
        raise RuntimeError(
            f"stage {k} ended after {state.update_in_stage} updates, expected {b.updates_per_stage}"
        )
    clock.times["time/eval"] = run.evaluator.seconds - eval_before
    clock.times["time/optimize"] = time.perf_counter() - opt_start - clock.times["time/eval"]
    return recent_rewards


# ── 4. hand over β_{k+1} (HF export, or in memory for short stages); checkpoint if due ──────────────
def hand_over(
    run: TrainingRun,
    clock: StageClock,
    store: StageStore,
    rollout: dict[str, float],
    recent_rewards: list[float],
) -> None:
    """Export (or keep in memory) the stage's policy, record the stage, move the run to the next one."""
    state, k, times = run.state, clock.stage, clock.times
    hand_start = time.perf_counter()
    checkpoint_due = run.rollout.hand_over(k, run.run_dir / "policy" / f"stage-{k:04d}", state.global_update)
    times["time/handover"] = time.perf_counter() - hand_start
    best = run.evaluator.best
    run.output.prune_policies(best["update"] if best else None)
    times["time/total"] = time.perf_counter() - clock.start
    record = stage_record(
        k,
        state.update_in_stage,
        rollout or store.meta.get("rollout", {}),
        store.num_rows,
        times,
        recent_rewards,
    )
    state.stage_times = [r for r in state.stage_times if r["stage"] != k] + [record]
    for key, value in times.items():
        state.times[key] = state.times.get(key, 0.0) + value
    state.stage += 1
    state.update_in_stage = 0
    if checkpoint_due:
        run.checkpoint()
    run.output.log_event("stage", {**record, "update": state.global_update})
    run.output.say(f"stage {k} done: {stage_line(record)}")


# ── 5. finish: the last evaluation, the final policy's own rollouts, the summary ────────────────────
def finish(run: TrainingRun, verify: Verifier) -> None:
    """After the last stage: evaluate the last update (unless just done) and roll the final policy out."""
    cfg, state, evaluator = run.cfg, run.state, run.evaluator
    last = state.global_update
    if cfg.eval.benchmarks and not evaluator.due(last) and not evaluator.done(last):
        before = evaluator.seconds
        evaluator.run(
            run.model,
            run.tokenizer,
            verify.urls,
            last,
            run.output,
            since_start=state.times.get("time/total", 0.0),
            eval_so_far=state.times.get("time/eval", 0.0),
        )
        state.times["time/eval"] = state.times.get("time/eval", 0.0) + evaluator.seconds - before
    if final_pending(cfg, run.run_dir):  # train.final_rollout_prompts
        final = _rollouts(
            run, cfg.batch.num_stages, cfg.train.final_rollout_prompts, final_dir(run.run_dir), verify
        )
        run.output.log_event("final", {**final, "update": state.global_update})
        run.output.say(
            f"final policy: reward {final['reward/rollout_mean']:.3f} on "
            f"{int(final['rollout/responses'])} fresh responses"
        )


def summarize(run: TrainingRun) -> RunResult:
    """The run's totals and summary table (printed and saved by rank 0)."""
    state = run.state
    # engine switches (trainer → engine → trainer) are counted by the stage stores, which survive crashes
    state.engine_switches = 2 * sum(
        int(StoreManifest.read(p.parent).meta.get("engine_starts", 1))
        for p in sorted((run.run_dir / "stages").glob("stage-*/manifest.json"))
    )
    totals = {**run_totals(state, time.perf_counter() - run.started, run.base_path), **run.data_counts}
    if StageStore.is_complete(final_dir(run.run_dir)):
        final_stats = StageStore.open(final_dir(run.run_dir)).meta.get("rollout", {})
        totals["reward/final_mean"] = final_stats.get("reward/rollout_mean")
        totals["final"] = {
            k: final_stats.get(k)
            for k in ("reward/rollout_mean", "verifier/masked", "time/rollout", "time/verify")
        }
    summary = run.output.write_summary(state.stage_times, totals)
    return RunResult(run_dir=run.run_dir, state=state, summary=summary)
