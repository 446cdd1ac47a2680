"""One stage's rollout as the loop asks for it: which engine holds β_k, where the trainer's state goes
while it runs, which prompts this rank generates, and the stage store across ranks.

- **Data-parallel generation.** Under torchrun every rank generates the stage's slots ``rank::world``
  with its own engine and its own verifier pipeline, into its own store ``stage-K/rank-RR/`` (a
  complete stage store of its own, with shards and a manifest). When every rank has finished, rank 0
  writes ``stage-K/manifest.json`` listing every rank's shards (``rank-RR/shard-…``) and marks the
  stage complete. An interrupted stage resumes per rank: a finished rank store is kept as it is, an
  unfinished one keeps its shards and generates only its missing prompts. The number of ranks must
  not change while a stage is unfinished.
- **Engines.** The ``hf`` engine shares the trainer's weights when the model is not sharded (one
  process, or ``gloo`` ranks, which all hold the full weights); otherwise each rank's engine loads
  the handed-over policy (``hf`` on the rank's device; ``vllm``: one replica on the rank's GPU). With
  ``train.weight_sync=memory`` and vLLM, one colocated engine per rank stays alive across stages,
  sleeping while the trainer trains and taking new weights in memory
  (``mucode.rollout.vllm_colocated``).
- **The trainer steps aside** while the engine runs (``mucode.train.aside``): gradients dropped,
  optimizer state (and parameters, unless the engine computes with them) parked in host memory and
  restored bit-identical afterwards. The stage record says how many bytes the trainer still held
  (``memory/trainer_bytes_in_rollout``, ``memory/optimizer_bytes_in_rollout``) and how many it parked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from mucode.assets import resolve_model_path
from mucode.components import SAMPLERS
from mucode.config import AlgoConfig, BatchConfig, ModelConfig, MucodeConfig, RolloutConfig, TrainConfig
from mucode.config_methods import SamplingConfig
from mucode.data.types import TaskRecord
from mucode.rollout.types import RolloutEngine
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.aside import held_bytes, step_aside
from mucode.train.distributed import DistInfo, barrier, is_wrapped, unwrap
from mucode.train.precision import Precision
from mucode.train.rollout_phase import RolloutStats, generate_stage
from mucode.train.store import StageStore, StageWriter, StoreError, StoreManifest, merge_stores

__all__ = [
    "EngineFactory",
    "RolloutSections",
    "StageRollout",
    "engine_shares_weights",
    "merge_rank_stores",
    "rank_store",
    "resolve_weight_sync",
]

Prompt = tuple[int, TaskRecord, list[int]]
EngineFactory = Callable[[int, Path, int], RolloutEngine]
"""``(stage, behaviour policy path, seed) -> engine`` holding β_stage: given to :class:`StageRollout`, it
replaces the engine ``rollout.engine`` names (the loop's caller chooses the engine; tests pass real ones)."""


@dataclass(frozen=True)
class RolloutSections:
    """The config sections a stage's rollout reads (built once by :meth:`from_config`)."""

    rollout: RolloutConfig
    """The engine and how it samples."""
    sampling: SamplingConfig
    """The sampling controller (per-prompt temperatures, probes)."""
    batch: BatchConfig
    """G, μ and the number of stages."""
    algo: AlgoConfig
    """The advantage estimate (``adv_std``, ``adv_eps``) and ``recompute_behaviour_logprobs``."""
    train: TrainConfig
    """``weight_sync``, ``checkpoint_every``, ``groups_per_shard``."""
    model: ModelConfig
    """The base model's path (the colocated engine starts from it) and the dtypes."""

    @classmethod
    def from_config(cls, cfg: MucodeConfig) -> RolloutSections:
        return cls(cfg.rollout, cfg.sampling, cfg.batch, cfg.algo, cfg.train, cfg.model)


def engine_shares_weights(sections: RolloutSections, model: nn.Module) -> bool:
    """True when the stage's engine computes with the trainer's own parameters (``hf``, unsharded)."""
    return sections.rollout.engine == "hf" and not is_wrapped(model)


def resolve_weight_sync(sections: RolloutSections, model: nn.Module) -> Literal["disk", "memory"]:
    """``train.weight_sync`` made concrete for this run (see its docstring)."""
    in_memory = engine_shares_weights(sections, model) or (
        sections.rollout.engine == "vllm" and not _is_sharded_tp(sections)
    )
    requested = sections.train.weight_sync
    if requested == "memory" and not in_memory:
        raise ValueError(
            f"train.weight_sync=memory needs an engine that takes weights in memory (hf without FSDP, or vllm "
            f"with tensor_parallel_size=1); this run has rollout.engine={sections.rollout.engine} on a sharded model. "
            f"Use train.weight_sync=disk"
        )
    if requested == "auto":
        short = sections.batch.updates_per_stage < sections.train.checkpoint_every
        return "memory" if in_memory and short else "disk"
    return requested


def _is_sharded_tp(sections: RolloutSections) -> bool:
    return sections.rollout.tensor_parallel_size > 1 or sections.rollout.data_parallel_size > 1


def rank_store(store_dir: Path, rank: int) -> Path:
    return store_dir / f"rank-{rank:02d}"


def merge_rank_stores(store_dir: Path, *, stage: int, world_size: int, expected_groups: int) -> StoreManifest:
    """Rank 0, once every rank's store is complete: the stage's manifest listing every rank's shards."""
    return merge_stores(
        store_dir,
        [rank_store(store_dir, rank) for rank in range(world_size)],
        stage=stage,
        expected_groups=expected_groups,
        meta=lambda parts: _merged_meta(parts, world_size),
    )


def _merged_meta(parts: list[StoreManifest], world_size: int) -> dict[str, Any]:
    """The ranks' metadata as one stage's: rollout statistics merged, the most engine starts of any rank."""
    meta: dict[str, Any] = {}
    for part in parts:
        meta = {**part.meta, **meta}
    stats = RolloutStats.merged([p.meta.get("rollout_stats", RolloutStats().to_dict()) for p in parts])
    meta.pop("rank", None)
    meta.update(
        {
            "rollout": stats.as_metrics(),
            "rollout_stats": stats.to_dict(),
            "world_size": world_size,
            "engine_starts": max(int(p.meta.get("engine_starts", 1)) for p in parts),
        }
    )
    return meta


def _check_layout(store_dir: Path, world: int) -> None:
    """An unfinished stage must be resumed with the number of ranks that started it."""
    if StageStore.is_complete(store_dir):
        return
    ranks = sorted(int(p.name.removeprefix("rank-")) for p in store_dir.glob("rank-[0-9][0-9]") if p.is_dir())
    started_alone = (store_dir / "manifest.json").exists()
    if (world > 1 and started_alone) or (world == 1 and ranks) or (ranks and ranks[-1] >= world):
        by = "one process" if started_alone else f"torchrun with {ranks[-1] + 1}+ ranks"
        raise StoreError(
            f"{store_dir} was started by {by}; finish it with the same number of ranks, "
            f"or delete {store_dir} to regenerate the stage"
        )


class StageRollout:
    """Runs phase 1–2 of each stage for the loop; holds a long-lived engine when weights sync in memory."""

    def __init__(
        self,
        sections: RolloutSections,
        info: DistInfo,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        tokenizer: Any,
        *,
        engine_factory: EngineFactory | None = None,
    ) -> None:
        self.sections, self.info, self.model, self.optimizer, self.tokenizer = (
            sections,
            info,
            model,
            optimizer,
            tokenizer,
        )
        self.engine_factory = engine_factory
        self.sampling_params = (
            sections.rollout.sampling_params()
        )  # each stage's engine: this with its own seed
        self.precision = Precision.from_names(sections.model.master_dtype, sections.model.dtype)
        self.shares_weights = engine_shares_weights(sections, model)
        self.weight_sync = resolve_weight_sync(sections, model)
        if sections.algo.recompute_behaviour_logprobs and is_wrapped(model):
            raise ValueError(
                "algo.recompute_behaviour_logprobs needs the full model on every rank; under FSDP the "
                "ranks generate independently. Set algo.recompute_behaviour_logprobs=false"
            )
        if info.enabled and sections.rollout.engine == "vllm" and _is_sharded_tp(sections):
            raise ValueError(
                "under torchrun each rank runs one vLLM engine on its own GPU: set "
                "rollout.tensor_parallel_size=1 and rollout.data_parallel_size=1"
            )
        self._colocated: Any = None
        self.controller = SAMPLERS.get(sections.sampling.controller).build(
            sections.sampling.params, derive_seed(sections.rollout.seed, SeedPurpose.SAMPLING)
        )
        if sections.sampling.controller != "fixed" and not self.shares_weights and engine_factory is None:
            raise ValueError(
                f"sampling.controller={sections.sampling.controller} sets a temperature per prompt, which "
                "needs the hf engine sharing the trainer's weights (rollout.engine=hf, no FSDP)"
            )

    def run(
        self,
        stage: int,
        prompts: list[Prompt],
        store_dir: Path,
        pipeline: Any,
        *,
        policy_path: Path,
        show_progress: bool,
    ) -> dict[str, float]:
        """Generate, verify and store this rank's share of ``prompts``; the stage's rollout metrics."""
        info, world = self.info, self.info.world_size
        mine = [p for p in prompts if p[0] % world == info.rank]
        target = store_dir if world == 1 else rank_store(store_dir, info.rank)
        _check_layout(store_dir, world)
        if not StageStore.is_complete(target):
            writer = self._writer(target, stage, len(mine), policy_path)
            stats = self._generate(stage, mine, writer, pipeline, policy_path, show_progress)
            restarts = max(0, stats.engine_starts - 1)  # the first start is counted when the store opens
            writer.finish(
                extra_meta={
                    "rollout": stats.as_metrics(),
                    "rollout_stats": stats.to_dict(),
                    "engine_starts": int(writer.meta.get("engine_starts", 1)) + restarts,
                }
            )
        if world > 1:
            barrier(info)
            if info.is_main:
                merge_rank_stores(store_dir, stage=stage, world_size=world, expected_groups=len(prompts))
            barrier(info)
        return dict(StoreManifest.read(store_dir).meta.get("rollout", {}))

    def _writer(self, path: Path, stage: int, expected: int, policy_path: Path) -> StageWriter:
        groups_per_shard = self.sections.train.groups_per_shard
        if (path / "manifest.json").exists():
            writer = StageWriter.resume(path, groups_per_shard=groups_per_shard)
            writer.update_meta({"engine_starts": int(writer.meta.get("engine_starts", 0)) + 1})
            print(
                f"stage {stage}: finishing an interrupted store {path.name} "
                f"({writer.groups_written}/{expected} groups kept)",
                flush=True,
            )
            return writer
        behaviour = (
            str(policy_path)
            if self.weight_sync == "disk" or stage == 0
            else f"in memory (after stage {stage - 1})"
        )
        return StageWriter.create(
            path,
            stage=stage,
            expected_groups=expected,
            groups_per_shard=groups_per_shard,
            meta={
                "policy": behaviour,
                "engine_starts": 1,
                "rank": self.info.rank,
                "world_size": self.info.world_size,
            },
        )

    def _generate(
        self,
        stage: int,
        prompts: list[Prompt],
        writer: StageWriter,
        pipeline: Any,
        policy_path: Path,
        show_progress: bool,
    ) -> RolloutStats:
        sections, model = self.sections, self.model
        rescore = self._rescorer() if sections.algo.recompute_behaviour_logprobs else None
        keep_params = self.shares_weights or rescore is not None
        if self.weight_sync == "memory" and sections.rollout.engine == "vllm":
            parked = step_aside(model, self.optimizer, params=False)  # room for the engine's weights
            self._push_weights()
            parked.extend(step_aside(model, self.optimizer, params=not keep_params))
        else:
            parked = step_aside(model, self.optimizer, params=not keep_params)
        held = held_bytes(model, self.optimizer)
        try:
            stats = generate_stage(
                stage=stage,
                engine_factory=lambda: self._engine(stage, policy_path),
                prompts=prompts,
                samples_per_prompt=sections.batch.samples_per_prompt,
                writer=writer,
                pipeline=pipeline,
                adv_std=sections.algo.adv_std,
                adv_eps=sections.algo.adv_eps,
                rescore=rescore,
                show_progress=show_progress,
                controller=self.controller,
                engine_at=lambda t: self._engine(stage, policy_path, t),
                base_temperature=sections.rollout.temperature,
                policy_version=stage * sections.batch.updates_per_stage,
            )
        finally:
            parked.restore()
            model.train()
        stats.extra.update(
            {
                "memory/trainer_bytes_in_rollout": float(sum(held.values())),
                "memory/optimizer_bytes_in_rollout": float(held["optimizer"]),
                "memory/parked_bytes": float(parked.parked_bytes),
            }
        )
        return stats

    def _engine(self, stage: int, policy_path: Path, temperature: float | None = None) -> Any:
        """The stage's engine; ``temperature``: sampling at that temperature instead of rollout.temperature
        (a sampling controller's per-prompt plan; a factory's engine gets its ``sampling`` replaced)."""
        r, info = self.sections.rollout, self.info
        seed = derive_seed(r.seed, SeedPurpose.ROLLOUT_ENGINE, stage=stage, rank=info.rank)
        if temperature is not None:  # a distinct stream per planned temperature
            seed += int(round(temperature * 1e6))
        sampling = self.sampling_params.replace(seed=seed)
        if temperature is not None:
            sampling = sampling.replace(temperature=temperature)
        if self.engine_factory is not None:
            engine = self.engine_factory(stage, policy_path, seed)
            if temperature is not None:
                if not hasattr(engine, "sampling"):
                    raise ValueError(
                        "the sampling controller sets per-prompt temperatures; this engine has no "
                        "settable sampling (SamplingParams)"
                    )
                engine.sampling = engine.sampling.replace(temperature=temperature)
            return engine
        if self.shares_weights:
            from mucode.rollout.hf import HFEngine  # lazy: torch

            return HFEngine(
                unwrap(self.model),
                self.tokenizer,
                sampling,
                batch_size=r.batch_size,
                autocast_dtype=self.precision.compute if self.precision.mixed else None,
            )
        if self._colocated is not None:
            return self._colocated.stage_view(seed)
        from mucode.rollout.factory import make_engine  # lazy: torch

        extra: dict[str, Any] = {}
        if r.engine == "vllm" and info.enabled:
            from mucode.rollout.vllm import visible_gpus  # lazy: torch

            extra["devices"] = [visible_gpus()[info.local_rank]]
        return make_engine(
            r.engine,
            str(policy_path),
            sampling,
            dtype=self.sections.model.dtype,
            device=str(info.device),
            batch_size=r.batch_size,
            tensor_parallel_size=r.tensor_parallel_size,
            data_parallel_size=r.data_parallel_size,
            gpu_memory_utilization=r.gpu_memory_utilization,
            **extra,
        )

    def _push_weights(self) -> None:
        """vLLM in memory mode: start the colocated engine once (from the base model), then give it the
        trainer's current weights (β_k) in memory, every stage."""
        from mucode.rollout.vllm_colocated import ColocatedVLLM  # lazy: torch
        from mucode.train.distributed import iter_full_tensors  # lazy: torch

        r = self.sections.rollout
        if self._colocated is None:
            self._colocated = ColocatedVLLM(
                resolve_model_path(self.sections.model.path),
                self.sampling_params.replace(
                    seed=derive_seed(r.seed, SeedPurpose.COLOCATED_ENGINE, rank=self.info.rank)
                ),
                dtype=self.sections.model.dtype,
                batch_size=r.batch_size,
                gpu_memory_utilization=r.gpu_memory_utilization,
            )
        self._colocated.load_weights(iter_full_tensors(self.model, self.precision.compute))

    def _rescorer(self) -> Any:
        from mucode.rollout.logprobs import response_logprobs  # lazy: torch

        model, precision, device, temperature = (
            self.model,
            self.precision,
            self.info.device,
            self.sections.rollout.temperature,
        )

        @torch.no_grad()
        def rescore(group: list[Any]) -> list[list[float]]:
            with precision.autocast(device):
                out = response_logprobs(
                    model,
                    [s.prompt_token_ids for s in group],
                    [s.response_token_ids for s in group],
                    temperature,
                )
            return [
                out.logprobs[i, : len(s.response_token_ids)].float().tolist() for i, s in enumerate(group)
            ]

        return rescore

    def close(self) -> None:
        if self._colocated is not None:
            self._colocated.close()
            self._colocated = None

    def hand_over(self, stage: int, policy_dir: Path, global_update: int) -> bool:
        """Phase 4, β_{k+1}. ``disk``: export ``policy_dir`` in the engine's dtype; ``memory``: nothing to do
        (the engine shares or receives the weights), except after the last stage, which is always exported.
        Returns whether the stage-end checkpoint is due (always with ``disk``; with ``memory`` only every
        ``train.checkpoint_every`` updates and after the last stage)."""
        from mucode.train.distributed import full_state_dict  # lazy: torch
        from mucode.train.policy import save_policy  # lazy: torch

        last = stage == self.sections.batch.num_stages - 1
        if self.weight_sync == "disk" or last:
            weights = full_state_dict(self.model)
            if self.info.is_main:
                save_policy(
                    unwrap(self.model),
                    self.tokenizer,
                    weights,
                    policy_dir,
                    dtype=self.precision.compute if self.precision.mixed else None,
                )
        return self.weight_sync == "disk" or last or global_update % self.sections.train.checkpoint_every == 0
