"""A generator process of asynchronous μ-GRPO: sample with the latest admitted policy, verify, store.

Started by the trainer before it loads its own model (``python -m mucode.train.async_generator RUN_DIR
INDEX TRAINER_PID``), it gets two JSON lines on stdin: first the run's resolved config, on which it
loads the tokenizer, the data and its engine from the base policy (while the trainer prepares: the
start-up overlaps), then, once the trainer is ready, the verifier URLs, its log file and the weight
hand-off to join. It walks the run's updates in order and, for each update whose slots it owns
(``mucode.train.async_feed``), waits until the latest published policy version is admitted by the lag
bound, loads it into its running engine if it is new (``mucode.train.async_engine``: in place, from
the pushed tensors or the published directory; the engine is never restarted for a version), and
generates, verifies and stores those groups with the staged trainer's own phase
(``mucode.train.rollout_phase.generate_stage``: same advantages, same masking of infrastructure
failures, same store rows, with the sampling version recorded).

Restart rules: a generator started again (after a crash, or on ``--resume``) reopens its stores and
samples only the slots they lack; it exits when its last stage store is complete, when the trainer
process is gone (it checks the trainer's pid while it waits, and between updates; an end of stdin
before its start message means the same), and with an error when the weight push to it broke (the
trainer restarts it, and it joins again).

The engine is reseeded per update (``derive_seed(rollout.seed, ROLLOUT_ENGINE, stage, rank=generator,
index=update_in_stage)``), so a generator's groups do not depend on when it ran. ``rollout.engine=vllm``
runs the in-process vLLM engine (``ColocatedVLLM``, awake for the whole run, on the generator's own
GPU), so that pushed weights can be loaded into it: ``gpu``-tested only.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from mucode.assets import resolve_model_path
from mucode.config import MucodeConfig
from mucode.data.prompts import render_prompt
from mucode.data.types import TaskRecord
from mucode.rollout.types import RolloutEngine
from mucode.rollout.vllm_colocated import ColocatedVLLM
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.async_engine import has_safetensors, load_in_place, policy_tensors
from mucode.train.async_feed import (
    GeneratorStats,
    admitted,
    gen_store,
    generator_of,
    process_alive,
    stats_path,
    update_slots,
)
from mucode.train.async_handoff import PolicyHandoff, PolicyVersion, make_handoff
from mucode.train.async_push import PushReceiver
from mucode.train.loop import stage_dir, stage_prompts
from mucode.train.preflight import drop_long_prompts
from mucode.train.prepare import load_records
from mucode.train.rollout_phase import RolloutStats, generate_stage
from mucode.train.store import StageStore, StageWriter
from mucode.train.verify import VerifyPipeline

__all__ = ["TrainerGone", "build_engine", "main", "prepare_generator", "run_generator"]

logger = logging.getLogger(__name__)


class TrainerGone(RuntimeError):
    """The trainer process that started this generator is no longer running."""


class _KeptEngine:
    """An engine lent to one ``generate_stage`` call: its ``close`` keeps it for the next update."""

    def __init__(self, engine: RolloutEngine) -> None:
        self.engine = engine

    def generate(self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int) -> Any:
        return self.engine.generate(prompts, samples_per_prompt)

    def close(self) -> None:
        pass


class _GuardedPipeline:
    """The verify pipeline, refusing groups with verifier failures once the trainer is gone: the trainer
    hosts the run's local verifier, so its death fails every pending verification, and such groups
    would be stored masked (as if the verifier had failed) instead of being verified after the resume."""

    def __init__(self, pipeline: VerifyPipeline, check_trainer: Any) -> None:
        self.pipeline, self.check_trainer = pipeline, check_trainer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline, name)

    def _guard(self, verdicts: Any) -> Any:
        for group in verdicts:
            if any(group.masked):
                self.check_trainer()
            yield group

    def done(self) -> Any:
        return self._guard(self.pipeline.done())

    def drain(self) -> Any:
        return self._guard(self.pipeline.drain())


def build_engine(cfg: MucodeConfig, policy_path: str, seed: int) -> RolloutEngine:
    """A generator's engine holding the policy at ``policy_path`` (``asynchronous.engine_factory``, or the
    engine ``rollout.engine`` names)."""
    if cfg.asynchronous.engine_factory:
        module, _, name = cfg.asynchronous.engine_factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
        return factory(cfg, policy_path, seed)
    r = cfg.rollout
    if r.engine == "vllm":  # in this process, so that new weights load into the running engine
        os.environ.setdefault("MASTER_PORT", str(_free_port()))  # its one-process world: a port of its own
        return ColocatedVLLM(
            policy_path,
            r.sampling_params().replace(seed=seed),
            dtype=cfg.model.dtype,
            batch_size=r.batch_size,
            gpu_memory_utilization=r.gpu_memory_utilization,
        )
    from mucode.rollout.factory import make_engine  # lazy: torch

    return make_engine(
        r.engine,
        policy_path,
        r.sampling_params().replace(seed=seed),
        dtype=cfg.model.dtype,
        device=cfg.train.device,
        batch_size=r.batch_size,
        tensor_parallel_size=r.tensor_parallel_size,
        data_parallel_size=r.data_parallel_size,
        gpu_memory_utilization=r.gpu_memory_utilization,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reseed(engine: RolloutEngine, seed: int) -> None:
    generator = getattr(engine, "generator", None)  # hf: a torch.Generator
    if generator is not None and hasattr(generator, "manual_seed"):
        generator.manual_seed(seed)
    elif hasattr(engine, "reseed"):
        engine.reseed(seed)
    elif hasattr(engine, "stage_seed"):  # ColocatedVLLM: every request is seeded from it
        engine.stage_seed = seed


@dataclass
class Generator:
    """One generator process's state (see the module doc)."""

    cfg: MucodeConfig
    run_dir: Path
    index: int
    trainer_pid: int
    pipeline: Any
    records: list[TaskRecord]
    tokenizer: Any
    engine: RolloutEngine
    """Built once from the base policy; every version is loaded into it."""
    version: PolicyVersion | None
    """The version the engine holds (the base policy as version 0 at first); None after a failed load."""
    handoff: PolicyHandoff | Any = None
    stats: GeneratorStats = field(default_factory=GeneratorStats)

    def _check_trainer(self) -> None:
        if os.getppid() != self.trainer_pid or not process_alive(self.trainer_pid):
            raise TrainerGone(f"generator {self.index}: the trainer (pid {self.trainer_pid}) is gone")

    def _check_trainer_settled(self) -> None:
        """:meth:`_check_trainer` after a verifier failure: a dying trainer closes its sockets (the local
        verifier's) a moment before it is gone, so look a few times before trusting it is alive."""
        for _ in range(5):
            self._check_trainer()
            time.sleep(0.1)

    def wait_admitted(self, update: int) -> PolicyVersion:
        """The latest version once the lag bound admits it for ``update`` (polling; time counted as idle)."""
        bound = self.cfg.asynchronous.max_lag_updates
        start = time.perf_counter()
        while True:
            latest = self.handoff.latest()
            if latest is not None and admitted(update, latest.version, bound):
                self.stats.wait_s += time.perf_counter() - start
                return latest
            self._check_trainer()
            error = getattr(self.handoff, "error", None)  # the push receiver's thread ended
            if error is not None:
                raise RuntimeError(
                    f"generator {self.index}: the weight push broke ({error}); restart to rejoin"
                )
            time.sleep(self.cfg.asynchronous.poll_s)

    def engine_for(self, version: PolicyVersion, seed: int) -> RolloutEngine:
        """The engine holding ``version`` (loaded in place when new), reseeded with ``seed``."""
        if self.version != version:
            begin = time.perf_counter()
            self.version = None  # until the load is complete
            if version.weights is not None:
                if not load_in_place(self.engine, version.weights.items()):
                    raise RuntimeError(
                        f"asynchronous.handoff=push: the engine {type(self.engine).__name__} cannot load "
                        "weights in place (no load_weights, no model); use asynchronous.handoff=file"
                    )
            elif not (
                has_safetensors(version.path) and load_in_place(self.engine, policy_tensors(version.path))
            ):
                self.engine.close()  # not loadable in place: a new engine from the version's directory
                self.engine = build_engine(self.cfg, version.path, seed)
                self.stats.builds += 1
            self.version = version
            self.stats.load_s += time.perf_counter() - begin
            self.stats.loads += 1
        _reseed(self.engine, seed)
        return self.engine

    def run_stage(self, k: int) -> None:
        """Sample, verify and store this generator's slots of stage ``k`` (those not yet stored)."""
        b, a = self.cfg.batch, self.cfg.asynchronous
        path = gen_store(stage_dir(self.run_dir, k), self.index)
        if StageStore.is_complete(path):
            return
        prompts = stage_prompts(
            self.records, k, b.prompts_per_update * b.updates_per_stage, self.cfg.data.shuffle_seed
        )
        mine = [(slot, record) for slot, record in prompts if generator_of(slot, a.generators) == self.index]
        if (path / "manifest.json").exists():
            writer = StageWriter.resume(path, groups_per_shard=1)
        else:
            writer = StageWriter.create(
                path, stage=k, expected_groups=len(mine), groups_per_shard=1, meta={"generator": self.index}
            )
        parts: list[dict[str, object]] = [writer.meta.get("rollout_stats", RolloutStats().to_dict())]
        for j in range(b.updates_per_stage):
            slots = set(update_slots(j, b.prompts_per_update))
            todo = [(s, r) for s, r in mine if s in slots and s not in writer.done_group_ids]
            if not todo:
                continue
            self._check_trainer()
            parts.append(self._generate(k, j, todo, writer).to_dict())
            writer.update_meta({"rollout_stats": _summed(parts).to_dict()})
        stats = _summed(parts)
        writer.finish(extra_meta={"rollout": stats.as_metrics(), "rollout_stats": stats.to_dict()})

    def _generate(
        self, k: int, j: int, todo: list[tuple[int, TaskRecord]], writer: StageWriter
    ) -> RolloutStats:
        cfg = self.cfg
        update = k * cfg.batch.updates_per_stage + j
        seed = derive_seed(cfg.rollout.seed, SeedPurpose.ROLLOUT_ENGINE, stage=k, rank=self.index, index=j)
        for attempt in range(5):
            version = self.wait_admitted(update)
            try:
                engine = self.engine_for(version, seed)
                break
            except FileNotFoundError:  # its directory was pruned while loading: a newer one is latest
                if attempt == 4:
                    raise
        begin = time.perf_counter()
        part = generate_stage(
            stage=k,
            engine_factory=lambda: _KeptEngine(engine),
            prompts=[(s, r, render_prompt(self.tokenizer, r)) for s, r in todo],
            samples_per_prompt=cfg.batch.samples_per_prompt,
            writer=writer,
            pipeline=self.pipeline,
            adv_std=cfg.algo.adv_std,
            adv_eps=cfg.algo.adv_eps,
            show_progress=False,
            policy_version=version.version,
        )
        writer.flush()
        self.stats.busy_s += time.perf_counter() - begin
        self.stats.groups += len(todo)
        self.stats.write(stats_path(self.run_dir, self.index))
        return part


def _summed(parts: list[dict[str, object]]) -> RolloutStats:
    """Rollout stats of consecutive chunks of one generator: counts and times add up."""
    out = RolloutStats.merged(parts)
    out.times = {}
    for part in parts:
        for key, value in dict(part.get("times") or {}).items():  # type: ignore[call-overload]
            out.times[key] = out.times.get(key, 0.0) + float(value)
    return out


def load_run_config(run_dir: Path) -> MucodeConfig:
    """The run's resolved config (``config.yaml``, written by the trainer when it prepares the run)."""
    return MucodeConfig.model_validate(yaml.safe_load((run_dir / "config.yaml").read_text()))


@dataclass
class Prepared:
    """What a generator loads before the trainer is ready (see the module doc)."""

    cfg: MucodeConfig
    tokenizer: Any
    records: list[TaskRecord]
    engine: RolloutEngine
    base: PolicyVersion
    startup_s: float = 0.0


def prepare_generator(cfg: MucodeConfig) -> Prepared:
    """Tokenizer, data and the engine on the base policy: everything that needs no trainer."""
    from transformers import AutoTokenizer  # lazy: transformers

    if cfg.train.cpu_threads is not None:
        torch.set_num_threads(cfg.train.cpu_threads)
    base = resolve_model_path(cfg.model.path)
    tokenizer = AutoTokenizer.from_pretrained(base, trust_remote_code=cfg.model.trust_remote_code)
    records, _ = drop_long_prompts(load_records(cfg), tokenizer, cfg.data.max_prompt_tokens)
    engine = build_engine(cfg, base, cfg.rollout.seed)
    return Prepared(cfg, tokenizer, records, engine, PolicyVersion(version=0, path=base))


def _reader(run_dir: Path, index: int, info: dict[str, str]) -> Any:
    """The generator's side of the hand-off named in its start message."""
    if info.get("handoff") == "push":
        device = torch.device("cuda" if info["backend"] == "nccl" else "cpu")
        return PushReceiver(info["address"], info["backend"], index, device)
    return make_handoff(run_dir)


def run_generator(
    run_dir: Path, index: int, trainer_pid: int, prepared: Prepared, start: dict[str, Any]
) -> None:
    """Run generator ``index`` of the run in ``run_dir`` until its stores are complete (or the trainer goes)."""
    cfg, v = prepared.cfg, prepared.cfg.verifier
    pipeline = VerifyPipeline(list(start["urls"]), token=v.token, timeout_s=v.timeout_s, retries=v.retries)
    gen = Generator(
        cfg,
        run_dir,
        index,
        trainer_pid,
        pipeline,
        prepared.records,
        prepared.tokenizer,
        prepared.engine,
        prepared.base,
    )
    gen.handoff = _reader(run_dir, index, dict(start.get("handoff") or {}))
    gen.pipeline = _GuardedPipeline(pipeline, gen._check_trainer_settled)
    gen.stats = GeneratorStats.read(stats_path(run_dir, index))
    gen.stats.starts += 1
    gen.stats.builds += 1  # prepare_generator's
    gen.stats.startup_s = prepared.startup_s
    gen.stats.write(stats_path(run_dir, index))
    try:
        for k in range(cfg.batch.num_stages):
            gen.run_stage(k)
    finally:
        gen.engine.close()
        pipeline.close()


def _message() -> dict[str, Any] | None:
    """The next start message (a JSON line on stdin); None at the end of stdin (the trainer is gone)."""
    line = sys.stdin.readline()
    return json.loads(line) if line.strip() else None


def _log_to(path: str) -> None:
    """From here on this process writes to its log file (``async/gen-GG.log``), stdout and stderr alike."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s generator %(message)s")
    run_dir, index, trainer_pid = Path(argv[0]), int(argv[1]), int(argv[2])
    first = _message()
    if first is None:
        return 3
    prepared = prepare_generator(MucodeConfig.model_validate(first["config"]))
    prepared.startup_s = time.time() - float(first.get("spawned_at", time.time()))
    start = _message()
    if start is None:
        return 3
    _log_to(str(start["log"]))
    try:
        run_generator(run_dir, index, trainer_pid, prepared, start)
    except TrainerGone as err:
        print(err, file=sys.stderr, flush=True)
        return 3
    return 0


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except BaseException:  # noqa: BLE001 - printed, then the process ends with an error code
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


if __name__ == "__main__":
    os._exit(_exit_code(sys.argv[1:]))  # a push receiver's thread may still wait in a collective
