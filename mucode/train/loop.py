"""The staged trainer, top to bottom: for each stage, generate → verify → store → optimize →
checkpoint → hand over.

Everything a stage needs is here in order; the pieces sit behind narrow interfaces in sibling
modules (``rollout_phase`` for generate+verify+store, ``optimize`` for one update, ``store``,
``checkpoint``, ``logger``). Restart rules:

- a stage whose store is complete is never generated again; an incomplete store is finished (only
  its missing groups are generated) with the policy of the stage's start;
- optimization continues from the latest checkpoint (model, optimizer, RNG, data position);
- ``--resume`` on a finished run, or on a directory with nothing to resume, is an error (a resume
  never silently runs 0 updates); a fresh run refuses a directory that already holds a run.

Deviations: the stage's prompts are the next B_train prompts of one seeded order of the data set,
wrapping around (with a new order) when the data set is smaller than the run needs.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from tqdm import tqdm

from mucode.config import MucodeConfig, batch_plan
from mucode.data.types import TaskRecord
from mucode.train.checkpoint import Checkpointer, TrainerState, restore_rng
from mucode.train.distributed import (
    barrier,
    full_state_dict,
    init_distributed,
    load_optimizer_state,
    optimizer_state,
    wrap_model,
)
from mucode.train.evaluation import Evaluator, prune_policies
from mucode.train.logger import MetricsLogger
from mucode.train.optimize import Updater, make_optimizer
from mucode.train.policy import load_policy, resolve_model_path
from mucode.train.precision import Precision
from mucode.train.preflight import ResumeError, check_run, drop_long_prompts
from mucode.train.rollout_runner import StageRollout
from mucode.train.store import StageStore
from mucode.train.summary import write_summary

__all__ = ["ResumeError", "RunResult", "run_training", "stage_prompts"]

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    state: TrainerState
    summary: dict[str, Any] = field(default_factory=dict)


def stage_prompts(records: list[TaskRecord], stage: int, per_stage: int, seed: int) -> list[tuple[int, TaskRecord]]:
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
            random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append((slot, records[order[index]]))
    return out


def _load_records(cfg: MucodeConfig) -> list[TaskRecord]:
    from mucode.data.loader import load_tasks

    source = cfg.data.source or "default"
    return load_tasks(source, cfg.data.task, split=cfg.data.split, limit=cfg.data.limit,
                      instruction=cfg.data.instruction, schema=cfg.data.format, columns=cfg.data.columns)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_training(
    cfg: MucodeConfig, *, resume: bool = False, records: list[TaskRecord] | None = None,
) -> RunResult:
    """Run (or resume) the staged trainer described by ``cfg``; returns where its outputs are."""
    info = init_distributed(cfg.train.device)
    run_dir = cfg.run_path()
    check_run(cfg, run_dir, resume)  # every check on the config runs before anything is written
    plan = batch_plan(cfg)
    b = cfg.batch
    prompts_per_stage = b.prompts_per_update * b.updates_per_stage

    if cfg.train.cpu_threads is not None:
        torch.set_num_threads(cfg.train.cpu_threads)
    _seed_everything(cfg.train.seed)
    records = records if records is not None else _load_records(cfg)
    base_path = resolve_model_path(cfg.model.path)
    model, tokenizer = load_policy(base_path, dtype=cfg.model.master_dtype, device=info.device,
                                   trust_remote_code=cfg.model.trust_remote_code,
                                   gradient_checkpointing=cfg.model.gradient_checkpointing)
    records, dropped = drop_long_prompts(records, tokenizer, cfg.data.max_prompt_tokens)
    data_counts = {"data/prompts": len(records), "data/dropped_long_prompts": dropped}

    # ── the resolved config and the batch plan, printed and saved before any work ───────────────
    if info.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        (run_dir / "config.yaml").write_text(text)
        (run_dir / "batch_plan.json").write_text(json.dumps({**plan, **data_counts}, indent=2, ensure_ascii=False))
        width = max(map(len, plan))
        print(f"mucode train → {run_dir}\n{text}\nbatch plan:")
        print("\n".join(f"  {k:<{width}}  {v:>10,}" for k, v in plan.items()), flush=True)
        print(f"data: {len(records):,} prompts ({dropped:,} dropped: longer than data.max_prompt_tokens="
              f"{cfg.data.max_prompt_tokens})", flush=True)
    checkpoints = Checkpointer(run_dir / "checkpoints", keep=cfg.train.checkpoint_keep)

    # ── resume: model, optimizer, RNG and data position from the latest checkpoint ─────────────
    state = TrainerState()
    latest = checkpoints.latest() if resume else None
    saved = Checkpointer.load(latest) if latest is not None else None
    if saved is not None:
        model.load_state_dict(saved[1])  # full weights, before FSDP shards them
    model = wrap_model(model, info, Precision.from_names(cfg.model.master_dtype, cfg.model.dtype))
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    if resume:
        if saved is not None:
            state, _, optim_state, rng = saved
            load_optimizer_state(model, optimizer, optim_state)
            scheduler.last_epoch = state.global_update
            restore_rng(rng)
            del saved, optim_state
        if state.stage >= b.num_stages and not _final_pending(cfg, run_dir):
            raise ResumeError(
                f"--resume: the run in {run_dir} already finished its {b.num_stages} stages "
                f"({state.global_update} updates); nothing to do. Raise batch.num_stages to train further."
            )
        if info.is_main:
            print(f"resuming at stage {state.stage}, update {state.update_in_stage}/{b.updates_per_stage} "
                  f"(global {state.global_update}) from {latest or 'the start (no checkpoint yet)'}", flush=True)

    metrics_log = (
        MetricsLogger(run_dir, tensorboard=cfg.train.tensorboard, wandb_project=cfg.train.wandb_project,
                      run_name=cfg.train.run_name, config=cfg.model_dump(mode="json"),
                      resume_after_update=state.global_update if resume else None)
        if info.is_main else None
    )
    updater = Updater(model, optimizer, scheduler, cfg, info, pad_token_id=_pad_id(tokenizer))
    rollout = StageRollout(cfg, info, model, optimizer, tokenizer)  # engines, state aside, ranks' stores
    evaluator = Evaluator(cfg, run_dir, info)  # every train.eval_every updates; keeps policies, marks the best

    def checkpoint() -> None:
        model_state = full_state_dict(model)
        optim_state = optimizer_state(model, optimizer)
        if info.is_main:
            checkpoints.save(state, model_state, optim_state)
        barrier(info)

    from mucode.train.verify import VerifyPipeline, verifier_urls

    show_progress = cfg.train.progress
    run_start = time.perf_counter()
    with verifier_urls(cfg.verifier.url, cfg.verifier.backend) as urls:
        pipeline = VerifyPipeline(urls, token=cfg.verifier.token, timeout_s=cfg.verifier.timeout_s,
                                  retries=cfg.verifier.retries)  # every rank verifies what it generates
        try:
            while state.stage < b.num_stages:
                k = state.stage
                stage_start = time.perf_counter()
                stage_times: dict[str, float] = {}
                rollout_metrics: dict[str, float] = {}
                store_dir = run_dir / "stages" / f"stage-{k:04d}"

                # ── 1+2. generate with β_k, verify while generating, store ────────────────────────
                if not StageStore.is_complete(store_dir):  # every rank generates its share
                    if state.update_in_stage > 0:
                        raise ResumeError(
                            f"checkpoint says stage {k} was being optimized, but its store {store_dir} is "
                            f"not complete. Delete {run_dir / 'checkpoints'} to restart the stage."
                        )
                    rollout_metrics = _generate(cfg, k, records, prompts_per_stage, store_dir, rollout, tokenizer,
                                                run_dir, pipeline, show_progress)
                    stage_times.update({key: v for key, v in rollout_metrics.items() if key.startswith("time/")})
                barrier(info)
                store = StageStore.open(store_dir)  # checksums verified: a corrupt store stops here

                # ── 3. optimize: μ minibatches of B_mini groups streamed from the store ───────────
                opt_start, eval_before = time.perf_counter(), evaluator.seconds
                data_seed = cfg.train.seed * 1_000_003 + k
                remaining = b.updates_per_stage - state.update_in_stage
                bar = tqdm(total=b.updates_per_stage, initial=state.update_in_stage, desc=f"stage {k} optimize",
                           unit="update", disable=not (show_progress and info.is_main), dynamic_ncols=True, leave=False)
                recent_rewards: list[float] = []
                for minibatch in store.minibatches(b.prompts_per_update, seed=data_seed,
                                                   start=state.update_in_stage, count=b.updates_per_stage):
                    metrics = updater.step(minibatch)
                    state.update_in_stage += 1
                    state.global_update += 1
                    recent_rewards.append(metrics.get("reward/mean", math.nan))
                    if metrics_log is not None:
                        metrics_log.log_update({"stage": k, "update": state.global_update,
                                                "update_in_stage": state.update_in_stage, **metrics})
                    bar.update(1)
                    bar.set_postfix(reward=f"{metrics.get('reward/mean', math.nan):.3f}",
                                    veto=f"{metrics.get('stale/veto_token_frac', 0.0):.4f}", refresh=False)
                    if state.global_update % cfg.train.checkpoint_every == 0 and state.update_in_stage < b.updates_per_stage:
                        checkpoint()
                    if evaluator.due(state.global_update):
                        evaluator.run(model, tokenizer, urls, state.global_update, metrics_log,
                                      since_start=state.times.get("time/total", 0.0) + time.perf_counter() - stage_start,
                                      eval_so_far=state.times.get("time/eval", 0.0) + evaluator.seconds - eval_before)
                bar.close()
                if remaining > 0 and state.update_in_stage != b.updates_per_stage:
                    raise RuntimeError(f"stage {k} ended after {state.update_in_stage} updates, expected {b.updates_per_stage}")
                stage_times["time/eval"] = evaluator.seconds - eval_before
                stage_times["time/optimize"] = time.perf_counter() - opt_start - stage_times["time/eval"]

                # ── 4. hand over: β_{k+1} (HF export, or in memory for short stages); checkpoint if due ─
                hand_start = time.perf_counter()
                checkpoint_due = rollout.hand_over(k, run_dir / "policy" / f"stage-{k:04d}", state.global_update)
                stage_times["time/handover"] = time.perf_counter() - hand_start
                if info.is_main:
                    prune_policies(run_dir / "policy", cfg.train.keep_policies, b.updates_per_stage,
                                   {f"update-{evaluator.best['update']:07d}"} if evaluator.best else set())
                stage_times["time/total"] = time.perf_counter() - stage_start
                record = _stage_record(k, store, state, stage_times, rollout_metrics, recent_rewards)
                state.stage_times = [r for r in state.stage_times if r["stage"] != k] + [record]
                for key, value in stage_times.items():
                    state.times[key] = state.times.get(key, 0.0) + value
                state.stage += 1
                state.update_in_stage = 0
                if checkpoint_due:
                    checkpoint()
                if metrics_log is not None:
                    metrics_log.log_event("stage", {**record, "update": state.global_update})
                    print(f"stage {k} done: {_stage_line(record)}", flush=True)

            # ── after the last stage: evaluation (unless the last update was just evaluated) ──────────
            last = state.global_update
            if cfg.eval.benchmarks and not evaluator.due(last) and not evaluator.done(last):
                before = evaluator.seconds
                evaluator.run(model, tokenizer, urls, last, metrics_log, since_start=state.times.get("time/total", 0.0),
                              eval_so_far=state.times.get("time/eval", 0.0))
                state.times["time/eval"] = state.times.get("time/eval", 0.0) + evaluator.seconds - before

            # ── after the last stage: the final policy's own rollouts (train.final_rollout_prompts) ─
            if _final_pending(cfg, run_dir):
                final = _generate(cfg, b.num_stages, records, cfg.train.final_rollout_prompts,
                                  _final_dir(run_dir), rollout, tokenizer, run_dir, pipeline, show_progress)
                if metrics_log is not None:
                    metrics_log.log_event("final", {**final, "update": state.global_update})
                    print(f"final policy: reward {final['reward/rollout_mean']:.3f} on "
                          f"{int(final['rollout/responses'])} fresh responses", flush=True)
        finally:
            rollout.close()
            pipeline.close()
            if metrics_log is not None:
                metrics_log.close()

    # engine switches (trainer → engine → trainer) are counted by the stage stores, which survive crashes
    state.engine_switches = 2 * sum(
        int(StageStore(p.parent, json.loads(p.read_text())).meta.get("engine_starts", 1))
        for p in sorted((run_dir / "stages").glob("stage-*/manifest.json")))
    totals = {**_totals(state, time.perf_counter() - run_start, base_path), **data_counts}
    if StageStore.is_complete(_final_dir(run_dir)):
        final_stats = StageStore.open(_final_dir(run_dir)).meta.get("rollout", {})
        totals["reward/final_mean"] = final_stats.get("reward/rollout_mean")
        totals["final"] = {k: final_stats.get(k) for k in ("reward/rollout_mean", "verifier/masked", "time/rollout",
                                                           "time/verify")}
    summary: dict[str, Any] = {}
    if info.is_main:
        text = write_summary(run_dir, state.stage_times, totals)
        print("\n" + text, flush=True)
        summary = {"stages": state.stage_times, "totals": totals}
    return RunResult(run_dir=run_dir, state=state, summary=summary)


def _final_dir(run_dir: Path) -> Path:
    return run_dir / "stages" / "final"


def _final_pending(cfg: MucodeConfig, run_dir: Path) -> bool:
    return cfg.train.final_rollout_prompts > 0 and not StageStore.is_complete(_final_dir(run_dir))


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        pad = getattr(tokenizer, "eos_token_id", None)
    return int(pad) if pad is not None else 0


def _generate(cfg: MucodeConfig, k: int, records: list[TaskRecord], per_stage: int, store_dir: Path,
              rollout: StageRollout, tokenizer: Any, run_dir: Path, pipeline: Any, show_progress: bool) -> dict[str, float]:
    """Phase 1+2 of stage ``k`` with β_k: generate, verify, store (on every rank: ``rollout_runner``)."""
    from mucode.data.prompts import render_prompt

    slots = stage_prompts(records, k, per_stage, cfg.data.shuffle_seed)
    prompts = [(slot, record, render_prompt(tokenizer, record)) for slot, record in slots]  # lengths checked up front
    return rollout.run(k, prompts, store_dir, pipeline, policy_path=_behaviour_path(cfg, run_dir, k),
                       show_progress=show_progress)


def _behaviour_path(cfg: MucodeConfig, run_dir: Path, k: int) -> Path:
    return run_dir / "policy" / f"stage-{k - 1:04d}" if k > 0 else Path(resolve_model_path(cfg.model.path))


def _stage_record(k: int, store: StageStore, state: TrainerState, times: dict[str, float],
                  rollout: dict[str, float], recent: list[float]) -> dict[str, Any]:
    roll = rollout or store.meta.get("rollout", {})
    tail = [r for r in recent[-max(1, len(recent) // 4):] if not math.isnan(r)]
    return {
        "stage": k,
        "updates": state.update_in_stage,
        **roll,
        "reward/last_updates_mean": sum(tail) / len(tail) if tail else None,
        "verifier/masked": int(roll.get("verifier/masked", 0)),
        "rollout/responses": int(roll.get("rollout/responses", store.num_rows)),
        **times,
    }


def _stage_line(record: dict[str, Any]) -> str:
    keys = ["reward/rollout_mean", "reward/last_updates_mean", "verifier/masked", "time/rollout", "time/verify",
            "time/optimize", "time/total"]
    return ", ".join(f"{k}={record[k]:.3f}" if isinstance(record.get(k), float) else f"{k}={record.get(k)}"
                     for k in keys)


def _totals(state: TrainerState, wall: float, base: str) -> dict[str, Any]:
    stages = state.stage_times
    firsts = [s["reward/rollout_mean"] for s in stages if s.get("reward/rollout_mean") is not None]
    lasts = [s["reward/last_updates_mean"] for s in stages if s.get("reward/last_updates_mean") is not None]
    totals: dict[str, Any] = {
        "updates": state.global_update,
        "verifier/masked": sum(int(s.get("verifier/masked", 0)) for s in stages),
        "engine_switches": state.engine_switches,
        "reward/rollout_mean": firsts[-1] if firsts else None,
        "reward/last_updates_mean": lasts[-1] if lasts else None,
        "time/this_invocation": wall,
        **{k: v for k, v in state.times.items()},
        "base_policy": base,
    }
    if firsts:
        totals["reward/first_rollout_mean"] = firsts[0]
    return totals

