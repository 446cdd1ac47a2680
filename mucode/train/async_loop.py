"""The asynchronous trainer (``asynchronous.enabled``): generator processes sample while this process trains.

:func:`run_async_training` prepares the run as the staged trainer does (``mucode.train.prepare``:
checks, data, policy, resume, the same :class:`~mucode.train.optimize.Updater`), publishes version 0
(the base policy), lets its ``asynchronous.generators`` generator processes go (started before the
preparation, so that their start-up overlaps it: ``mucode.train.async_pool``) and then makes the run's
updates in order: update ``u`` waits for
its own slots' groups (``mucode.train.async_feed``), trains on them with the configured objective
(μ-GRPO's clip and veto against the stored behaviour log-probs, whatever version sampled them), and
every ``asynchronous.sync_every`` updates checkpoints and publishes its weights
(``asynchronous.handoff``: ``file``, ``mucode.train.async_handoff``, or ``push``,
``mucode.train.async_push``). When a stage's updates are done its generators' stores become one
complete stage store, and the stage gets its record (staleness histogram included).

Crash safety: the trainer checkpoints *before* every publish, so a published version is always one a
resumed trainer can reach; ``--resume`` restores the last checkpoint (a publish point), republishes
that version, restarts the generators (which keep every group they stored and sample only the missing
ones) and continues with the next unused slots: no verified group is lost, none is trained twice in the
resumed run. A generator that dies is started again, up to ``asynchronous.max_generator_restarts``
times in all; then the run stops with the generator's log named. A generator whose trainer is gone
exits by itself.

Deviations and limits: one trainer process (no torchrun); ``train.checkpoint_every`` is replaced by
``asynchronous.sync_every`` (a checkpoint at every publish: for large models this costs the optimizer
state's write every ``sync_every`` updates); ``train.weight_sync`` does not apply
(``asynchronous.handoff`` does); groups older than ``max_lag_updates`` cannot reach the trainer (admission control),
and would be dropped and counted (``async/dropped_for_age``) if they did.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from mucode.config import MucodeConfig
from mucode.train.async_feed import (
    GeneratorStats,
    GroupFeed,
    gen_store,
    merged_rollout,
    stats_path,
    update_slots,
)
from mucode.train.async_handoff import PolicyHandoff, make_handoff
from mucode.train.async_pool import GeneratorPool
from mucode.train.async_push import PushHandoff, push_backend
from mucode.train.checkpoint import TrainerState
from mucode.train.distributed import full_state_dict, init_distributed, iter_full_tensors, unwrap
from mucode.train.loop import RunResult, StageClock, UpdateHook, finish, stage_dir
from mucode.train.plan import run_path
from mucode.train.policy import save_policy
from mucode.train.precision import Precision
from mucode.train.prepare import TrainingRun, Verifier, final_dir, open_verifier, prepare_run
from mucode.train.store import StageStore, merge_stores
from mucode.train.summary import run_totals, stage_line, stage_record

__all__ = ["AsyncTrainer", "run_async_training", "stage_staleness"]


def _no_hook(state: TrainerState) -> None:
    pass


def run_async_training(
    cfg: MucodeConfig,
    *,
    resume: bool = False,
    verifier: Verifier | None = None,
    on_update: UpdateHook = _no_hook,
    pool: GeneratorPool | None = None,
) -> RunResult:
    """Run (or resume) the asynchronous trainer of ``cfg`` (``asynchronous.enabled``) with its generators
    (``pool``: already started by the caller, see ``async_pool.start_generators``)."""
    if not cfg.asynchronous.enabled:
        raise ValueError("run_async_training needs asynchronous.enabled=true (else use run_training)")
    info = init_distributed(cfg.train.device)
    if info.enabled:
        raise ValueError("asynchronous.enabled runs one trainer process: start it without torchrun")
    started = pool is not None
    pool = pool if pool is not None else GeneratorPool(cfg, run_path(cfg.train))
    with contextlib.ExitStack() as stack:
        stack.push(lambda kind, err, tb: pool.stop(abort=kind is not None))  # a refused run: they go at once
        if not started:
            pool.start()  # their start-up (imports, data, engine) overlaps the trainer's preparation
        run = prepare_run(cfg, info, resume=resume, records=None)
        stack.callback(run.close)
        verify = verifier if verifier is not None else stack.enter_context(open_verifier(cfg))
        handoff = open_handoff(cfg, run)
        stack.callback(getattr(handoff, "close", lambda: None))
        trainer = AsyncTrainer(run, verify, handoff, on_update, pool)
        stack.push(lambda kind, err, tb: pool.stop(abort=kind is not None))  # before the verifier closes
        trainer.publish_current()
        pool.go(
            verify.urls, handoff.child_info() if isinstance(handoff, PushHandoff) else {"handoff": "file"}
        )
        while run.state.stage < cfg.batch.num_stages:
            trainer.train_stage()
        pool.stop()
        trainer.export_final()
        finish(run, verify)
    return trainer.summarize()


def open_handoff(cfg: MucodeConfig, run: TrainingRun) -> PolicyHandoff:
    """The run's weight hand-off (``asynchronous.handoff``)."""
    a = cfg.asynchronous
    if a.handoff == "file":
        return make_handoff(run.run_dir)
    backend = push_backend(a.push_backend, str(run.info.device), a.generator_devices)
    device = run.info.device if backend == "nccl" else torch.device("cpu")
    return PushHandoff(backend, a.generators, torch.device(device))


class AsyncTrainer:
    """The trainer's side of the asynchronous mode over one prepared :class:`TrainingRun`."""

    def __init__(
        self,
        run: TrainingRun,
        verify: Verifier,
        handoff: PolicyHandoff,
        on_update: UpdateHook,
        pool: GeneratorPool,
    ) -> None:
        self.run, self.verify, self.handoff, self.on_update = run, verify, handoff, on_update
        self.cfg = run.cfg
        self.a = run.cfg.asynchronous
        self.pool = pool

    # ── weights ──────────────────────────────────────────────────────────────────────────────────────
    def publish_current(self) -> None:
        """Version ``global_update``: the base policy at 0; else the current (checkpointed) weights."""
        state = self.run.state
        self.handoff.drop_after(state.global_update)
        if state.global_update == 0:
            self.handoff.publish_path(0, self.run.base_path)
        else:
            self._publish()

    def _publish(self) -> None:
        run, precision = self.run, Precision.from_names(self.cfg.model.master_dtype, self.cfg.model.dtype)
        dtype = precision.compute if precision.mixed else None

        def save(directory: Path) -> None:
            save_policy(unwrap(run.model), run.tokenizer, full_state_dict(run.model), directory, dtype=dtype)

        def tensors() -> Any:  # what save() writes, from the model's memory
            return iter_full_tensors(run.model, dtype or precision.master)

        seconds = self.handoff.publish(run.state.global_update, save, tensors)
        self._add("async/publish_s", seconds)
        self._add("async/publishes", 1.0)

    def _add(self, key: str, value: float) -> None:
        self.run.state.times[key] = self.run.state.times.get(key, 0.0) + value

    # ── generator processes ──────────────────────────────────────────────────────────────────────────
    def supervise(self) -> None:
        """Restart a generator that died (``max_generator_restarts`` in all), or stop the run naming its log."""
        for index, code in self.pool.dead():
            log = self.pool.log(index)
            if self.pool.restarts >= self.a.max_generator_restarts:
                raise RuntimeError(
                    f"generator {index} died (exit {code}) after {self.pool.restarts} restarts "
                    f"(asynchronous.max_generator_restarts); see {log}"
                )
            self.pool.restarts += 1
            self.run.output.say(f"generator {index} died (exit {code}); starting it again (see {log})")
            self.run.output.log_event(
                "generator_restart",
                {"generator": index, "exit": code, "update": self.run.state.global_update},
            )
            self._add("async/generator_restarts", 1.0)
            self.pool.spawn(index)

    # ── training ─────────────────────────────────────────────────────────────────────────────────────
    def _wait_for(self, feed: GroupFeed, slots: range) -> list[Any]:
        while True:
            groups = feed.take(slots)
            if groups is not None:
                return groups
            self.supervise()
            time.sleep(self.a.poll_s)

    def train_stage(self) -> None:
        """The current stage's remaining updates, then its store and record."""
        run, state, b = self.run, self.run.state, self.cfg.batch
        clock = StageClock(state.stage)
        feed = GroupFeed(stage_dir(run.run_dir, clock.stage), self.a.generators)
        rewards: list[float] = []
        waited = trained = 0.0
        while state.update_in_stage < b.updates_per_stage:
            begin = time.perf_counter()
            groups = self._wait_for(feed, update_slots(state.update_in_stage, b.prompts_per_update))
            got = time.perf_counter()
            metrics = self._update(groups, waited=got - begin)
            rewards.append(metrics.get("reward/mean", math.nan))
            waited, trained = waited + got - begin, trained + time.perf_counter() - got
        self._add("async/wait_s", waited)
        self._add("async/train_s", trained)
        clock.times.update({"time/wait": waited, "time/optimize": trained})
        self._end_stage(clock, rewards)

    def _update(self, groups: list[Any], waited: float) -> dict[str, float]:
        run, state = self.run, self.run.state
        u, bound = state.global_update, self.a.max_lag_updates
        staleness = [u - g.samples[0].policy_version for g in groups]
        fresh = [g for g, s in zip(groups, staleness, strict=True) if s <= bound]
        start = time.perf_counter()
        metrics = run.updater.step(fresh)
        state.update_in_stage += 1
        state.global_update += 1
        self._add("async/dropped_for_age", float(len(groups) - len(fresh)))
        times = state.times
        wait, busy = times.get("async/wait_s", 0.0), times.get("async/train_s", 0.0)
        metrics.update(
            {
                "async/staleness_max": float(max(staleness)),
                "async/staleness_mean": sum(staleness) / len(staleness),
                "async/dropped_for_age": float(len(groups) - len(fresh)),
                "async/step_s": time.perf_counter() - start,
                "async/wait_s": waited,
                "async/trainer_idle_ratio": wait / (wait + busy) if wait + busy > 0 else 0.0,
            }
        )
        run.output.log_update(
            {"stage": state.stage, "update": u + 1, "update_in_stage": state.update_in_stage, **metrics}
        )
        if run.evaluator.due(state.global_update):
            run.evaluator.run(
                run.model,
                run.tokenizer,
                self.verify.urls,
                state.global_update,
                run.output,
                since_start=time.perf_counter() - run.started + state.times.get("time/total", 0.0),
                eval_so_far=state.times.get("time/eval", 0.0) + run.evaluator.seconds,
            )
        self.on_update(state)
        if state.global_update % self.a.sync_every == 0:  # after the evaluations: see loop.optimize
            run.checkpoint()  # before the publish: a published version is always a resumable one
            self._publish()
        return metrics

    def _end_stage(self, clock: StageClock, rewards: list[float]) -> None:
        run, state, k = self.run, self.run.state, clock.stage
        sdir = stage_dir(run.run_dir, k)
        while not GroupFeed(sdir, self.a.generators).complete():  # the last group is stored, the mark follows
            self.supervise()
            time.sleep(self.a.poll_s)
        parts = [gen_store(sdir, g) for g in range(self.a.generators)]
        b = self.cfg.batch
        merge_stores(
            sdir,
            parts,
            stage=k,
            expected_groups=b.prompts_per_update * b.updates_per_stage,
            meta=lambda ms: {
                "rollout": merged_rollout([m.meta.get("rollout", {}) for m in ms]),
                "engine_starts": 0,
                "asynchronous": True,
            },
        )
        store = StageStore.open(sdir)
        hist = stage_staleness(store, k * b.updates_per_stage, b.prompts_per_update)
        clock.times["time/total"] = time.perf_counter() - clock.start
        record = stage_record(
            k, state.update_in_stage, store.meta.get("rollout", {}), store.num_rows, clock.times, rewards
        )
        record["async/staleness_hist"] = {str(s): n for s, n in sorted(hist.items())}
        record["async/staleness_max"] = max(hist) if hist else 0
        state.stage_times = [r for r in state.stage_times if r["stage"] != k] + [record]
        for key, value in clock.times.items():
            state.times[key] = state.times.get(key, 0.0) + value
        state.stage += 1
        state.update_in_stage = 0
        run.output.log_event("stage", {**record, "update": state.global_update})
        run.output.say(f"stage {k} done: {stage_line(record)}, staleness max {record['async/staleness_max']}")

    # ── the end ──────────────────────────────────────────────────────────────────────────────────────
    def export_final(self) -> None:
        """The last stage's policy as the staged trainer exports it (``policy/stage-K``), and a checkpoint
        of the finished run (a later ``--resume`` says there is nothing to do)."""
        run, last = self.run, self.cfg.batch.num_stages - 1
        if not (run.run_dir / "policy" / f"stage-{last:04d}").exists():
            run.rollout.hand_over(last, run.run_dir / "policy" / f"stage-{last:04d}", run.state.global_update)
        run.checkpoint()

    def summarize(self) -> RunResult:
        """The staged trainer's totals plus the asynchronous figures (idle ratios, staleness, hand-off)."""
        run, state = self.run, self.run.state
        totals = {**run_totals(state, time.perf_counter() - run.started, run.base_path), **run.data_counts}
        totals.update(async_totals(run.run_dir, state, self.a.generators))
        if StageStore.is_complete(final_dir(run.run_dir)):
            final_stats = StageStore.open(final_dir(run.run_dir)).meta.get("rollout", {})
            totals["reward/final_mean"] = final_stats.get("reward/rollout_mean")
        summary = run.output.write_summary(state.stage_times, totals)
        return RunResult(run_dir=run.run_dir, state=state, summary=summary)


def stage_staleness(store: StageStore, first_update: int, prompts_per_update: int) -> Counter[int]:
    """Staleness (consuming update − sampling version) of every group of a complete stage store."""
    out: Counter[int] = Counter()
    for group in store.iter_groups():
        update = first_update + group.group_id // prompts_per_update
        out[update - group.samples[0].policy_version] += 1
    return out


def async_totals(run_dir: Path, state: TrainerState, generators: int) -> dict[str, Any]:
    """The run's asynchronous figures for the summary (``async/…``)."""
    t = state.times
    wait, busy = t.get("async/wait_s", 0.0), t.get("async/train_s", 0.0)
    gens = [GeneratorStats.read(stats_path(run_dir, g)) for g in range(generators)]
    hist: Counter[int] = Counter()
    for record in state.stage_times:
        raw: Any = record.get("async/staleness_hist") or {}  # a stage record of this mode
        hist.update({int(s): int(n) for s, n in raw.items()})
    publishes = t.get("async/publishes", 0.0)
    loads = sum(g.loads for g in gens)
    return {
        "async/trainer_idle_ratio": wait / (wait + busy) if wait + busy > 0 else 0.0,
        "async/generator_idle_ratio": sum(g.wait_s for g in gens)
        / max(1e-9, sum(g.wait_s + g.busy_s + g.load_s for g in gens)),
        "async/staleness_hist": {str(s): n for s, n in sorted(hist.items())},
        "async/staleness_max": max(hist) if hist else 0,
        "async/dropped_for_age": int(t.get("async/dropped_for_age", 0.0)),
        "async/publish_s_mean": t.get("async/publish_s", 0.0) / publishes if publishes else None,
        "async/load_s_mean": sum(g.load_s for g in gens) / loads if loads else None,
        "async/generator_restarts": int(t.get("async/generator_restarts", 0.0)),
        "async/generator_starts": sum(g.starts for g in gens),
        "async/generator_startup_s": max((g.startup_s for g in gens), default=0.0),
    }
