"""The trainer's first phase: everything a run needs before its first stage, in one :class:`TrainingRun`.

:func:`prepare_run` checks the run directory and the config, loads the data and the policy, prints
and saves the resolved config and the batch plan, restores the latest checkpoint when resuming
(model, optimizer, scheduler, RNG, data position) and builds the pieces the stage phases use: the
updater, the stage rollout (with its engine factory) and the evaluator. :func:`open_verifier` is the
default verifier (the configured service, or one started locally for the run).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mucode.assets import resolve_model_path
from mucode.config import MucodeConfig
from mucode.data.loader import load_tasks
from mucode.data.types import TaskRecord
from mucode.train.checkpoint import Checkpoint, TrainerState, restore_rng
from mucode.train.distributed import (
    DistInfo,
    barrier,
    full_state_dict,
    load_optimizer_state,
    optimizer_state,
    wrap_model,
)
from mucode.train.evaluation import EvalSettings, Evaluator
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
from mucode.train.output import RunOutput, run_output
from mucode.train.plan import batch_plan, run_path
from mucode.train.policy import load_policy
from mucode.train.precision import Precision
from mucode.train.preflight import ResumeError, check_run, check_verifiers, drop_long_prompts
from mucode.train.rollout_runner import EngineFactory, RolloutSections, StageRollout
from mucode.train.store import StageStore
from mucode.train.verify import VerifyPipeline, verifier_urls

__all__ = ["TrainingRun", "Verifier", "final_dir", "final_pending", "open_verifier", "prepare_run"]


@dataclass
class Verifier:
    """What the phases verify through: the pipeline that scores groups while they are generated, and the
    service URLs (the evaluator opens its own client on them)."""

    pipeline: VerifyPipeline
    urls: list[str]


@contextlib.contextmanager
def open_verifier(cfg: MucodeConfig) -> Iterator[Verifier]:
    """The run's verifier: ``verifier.url``, or a local one started for the block; closed at its end."""
    v = cfg.verifier
    with verifier_urls(v.url, v.backend) as urls:
        if not v.url:
            check_verifiers(urls)  # the configured ones were checked before the run started
        pipeline = VerifyPipeline(urls, connection=v.connection())  # every rank verifies what it generates
        try:
            yield Verifier(pipeline, urls)
        finally:
            pipeline.close()


@dataclass
class TrainingRun:
    """A run in progress: built by :func:`prepare_run`, advanced by the stage phases (``state``)."""

    cfg: MucodeConfig
    info: DistInfo
    run_dir: Path
    output: RunOutput
    records: list[TaskRecord]
    data_counts: dict[str, int]
    base_path: str
    model: nn.Module
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    updater: Updater
    rollout: StageRollout
    evaluator: Evaluator
    state: TrainerState
    started: float = field(default_factory=time.perf_counter)
    """When this invocation started training (``time/this_invocation``)."""

    def checkpoint(self) -> None:
        """Save a checkpoint of the current state (a collective: every rank calls it; rank 0 writes)."""
        self.state.best = self.evaluator.best
        model_state = full_state_dict(self.model)
        optim_state = optimizer_state(self.model, self.optimizer)
        self.output.save_checkpoint(self.state, model_state, optim_state)
        barrier(self.info)

    def close(self) -> None:
        self.rollout.close()
        self.output.close()


def final_dir(run_dir: Path) -> Path:
    """The store of the final policy's own rollouts (``train.final_rollout_prompts``)."""
    return run_dir / "stages" / "final"


def final_pending(cfg: MucodeConfig, run_dir: Path) -> bool:
    return cfg.train.final_rollout_prompts > 0 and not StageStore.is_complete(final_dir(run_dir))


def load_records(cfg: MucodeConfig) -> list[TaskRecord]:
    source = cfg.data.source or "default"
    return load_tasks(
        source,
        cfg.data.task,
        split=cfg.data.split,
        limit=cfg.data.limit,
        instruction=cfg.data.instruction,
        schema=cfg.data.format,
        columns=cfg.data.columns,
    )


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def prepare_run(
    cfg: MucodeConfig,
    info: DistInfo,
    *,
    resume: bool,
    records: list[TaskRecord] | None,
    engine_factory: EngineFactory | None = None,
) -> TrainingRun:
    """Phase 0: checks, data, policy, resume; nothing is written before every check on the config passed."""
    run_dir = run_path(cfg.train)
    check_run(cfg, run_dir, resume)
    output = run_output(cfg, run_dir, is_main=info.is_main)
    if cfg.train.cpu_threads is not None:
        torch.set_num_threads(cfg.train.cpu_threads)
    _seed_everything(cfg.train.seed)
    records = records if records is not None else load_records(cfg)
    base_path = resolve_model_path(cfg.model.path)
    model, tokenizer = load_policy(
        base_path,
        dtype=cfg.model.master_dtype,
        device=info.device,
        trust_remote_code=cfg.model.trust_remote_code,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
    )
    records, dropped = drop_long_prompts(records, tokenizer, cfg.data.max_prompt_tokens)
    data_counts = {"data/prompts": len(records), "data/dropped_long_prompts": dropped}
    output.write_plan(batch_plan(cfg.batch), data_counts)

    latest = output.checkpoints.latest() if resume else None
    saved = output.checkpoints.load(latest) if latest is not None else None
    if saved is not None:
        model.load_state_dict(saved.model)  # full weights, before FSDP shards them
    model = wrap_model(model, info, Precision.from_names(cfg.model.master_dtype, cfg.model.dtype))
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    state = _restore(saved, model, optimizer, scheduler) if saved is not None else TrainerState()
    del saved
    if resume:
        _check_resumable(cfg, run_dir, state)
        output.say(
            f"resuming at stage {state.stage}, update {state.update_in_stage}/{cfg.batch.updates_per_stage} "
            f"(global {state.global_update}) from {latest or 'the start (no checkpoint yet)'}"
        )
    run = TrainingRun(
        cfg=cfg,
        info=info,
        run_dir=run_dir,
        output=output,
        records=records,
        data_counts=data_counts,
        base_path=base_path,
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        state=state,
        updater=Updater(
            model,
            optimizer,
            scheduler,
            UpdateSettings.from_config(cfg),
            info,
            pad_token_id=_pad_id(tokenizer),
        ),
        rollout=StageRollout(
            RolloutSections.from_config(cfg), info, model, optimizer, tokenizer, engine_factory=engine_factory
        ),
        evaluator=Evaluator(
            EvalSettings.from_config(cfg), run_dir, info, resumed=state if resume else None
        ),  # every train.eval_every updates; keeps policies, marks the best
    )
    output.open_metrics(
        state.global_update if resume else None
    )  # last: a refused run leaves metrics.jsonl as it was
    return run


def _restore(
    saved: Checkpoint, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> TrainerState:
    """Optimizer, scheduler and RNG from ``saved`` (the model's weights were loaded before wrapping)."""
    load_optimizer_state(model, optimizer, saved.optimizer)
    scheduler.last_epoch = saved.state.global_update
    restore_rng(saved.rng)
    return saved.state


def _check_resumable(cfg: MucodeConfig, run_dir: Path, state: TrainerState) -> None:
    """A resume never silently runs 0 updates."""
    b = cfg.batch
    if state.stage >= b.num_stages and not final_pending(cfg, run_dir):
        raise ResumeError(
            f"--resume: the run in {run_dir} already finished its {b.num_stages} stages "
            f"({state.global_update} updates); nothing to do. Raise batch.num_stages to train further."
        )


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        pad = getattr(tokenizer, "eos_token_id", None)
    return int(pad) if pad is not None else 0
