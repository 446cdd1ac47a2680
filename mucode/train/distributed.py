"""Multi-process training under ``torchrun``: process group, model wrapping, data split.

``torchrun --nproc-per-node N -m mucode.cli train ...`` starts N ranks. Each update's minibatch of
groups is split across ranks (group ``i`` goes to rank ``i % N``); the loss on a rank is divided
by the *whole* minibatch's response count and multiplied by N, so the wrapper's gradient average
gives exactly the single-process gradient.

- CUDA: the policy is wrapped in FSDP (full sharding, one unit per decoder layer, ``MixedPrecision``
  from ``model.dtype``/``model.master_dtype``: float32 shards, bfloat16 compute, float32 gradient
  reduction); checkpoints and the per-stage HF export gather a full state dict on rank 0.
- CPU (``gloo``, for tests and laptops): the plain model on every rank and an explicit all-reduce
  (sum) of the gradients after the micro-batches (DDP's per-backward hooks would need the same
  number of micro-batches on every rank); same maths.

Generation is data-parallel: every rank runs its own engine on its share of the stage's prompts
(``mucode.train.rollout_runner``). Sharded optimizer checkpoints are not written (the optimizer state is
gathered to rank 0).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from mucode.train.precision import Precision

__all__ = [
    "DistInfo",
    "init_distributed",
    "wrap_model",
    "is_fsdp",
    "is_wrapped",
    "unwrap",
    "full_state_dict",
    "iter_full_tensors",
    "optimizer_state",
    "load_optimizer_state",
    "barrier",
    "all_reduce_sum",
]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def _pick_device(preference: str, local_rank: int) -> torch.device:
    if preference == "auto":
        preference = "cuda" if torch.cuda.is_available() else "cpu"
    if preference == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                "train.device=cuda but no CUDA device is visible; use train.device=cpu or auto"
            )
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device(preference)


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the process group when started by torchrun (WORLD_SIZE > 1); a no-op otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = _pick_device(device, local_rank)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=dev)


def wrap_model(model: nn.Module, info: DistInfo, precision: Precision | None = None) -> nn.Module:
    """FSDP on CUDA ranks (with ``precision``'s ``MixedPrecision``); the plain model otherwise."""
    if not info.enabled:
        return model
    if info.device.type == "cuda":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch
        from torch.distributed.fsdp import ShardingStrategy  # lazy: torch
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy  # lazy: torch

        layer_classes = {type(m) for m in model.modules() if type(m).__name__.endswith("DecoderLayer")}
        return FSDP(
            model,
            sharding_strategy=ShardingStrategy.FULL_SHARD,
            auto_wrap_policy=ModuleWrapPolicy(layer_classes) if layer_classes else None,
            device_id=info.device,
            use_orig_params=True,
            mixed_precision=precision.fsdp_mixed_precision() if precision is not None else None,
        )
    return model  # CPU: gradients are all-reduced explicitly by the updater


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside a DDP or FSDP wrapper (its parameters may be sharded under FSDP)."""
    if is_wrapped(model):
        return model.module  # type: ignore[return-value]
    return model


def is_fsdp(model: nn.Module) -> bool:
    """True when ``model`` is FSDP-wrapped (its parameters are sharded across ranks): the one FSDP test."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    return isinstance(model, FSDP)


def is_wrapped(model: nn.Module) -> bool:
    """True when ``model`` is a DDP or FSDP wrapper rather than the user's module itself."""
    return isinstance(model, nn.parallel.DistributedDataParallel) or is_fsdp(model)


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded model state on CPU (complete on rank 0 under FSDP)."""
    if is_fsdp(model):
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType  # lazy: torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch

        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            return model.state_dict()
    return {k: v.detach().cpu().clone() for k, v in unwrap(model).state_dict().items()}


def iter_full_tensors(model: nn.Module, dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """``(hf_name, full tensor)`` pairs on the model's device, floating ones cast to ``dtype``, for an engine
    that loads weights in memory. Under FSDP every rank gathers the full state dict (a collective: call
    it on every rank); peak memory is the full model in the master dtype on each rank."""
    if is_fsdp(model):
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType  # lazy: torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch

        cfg = FullStateDictConfig(offload_to_cpu=False, rank0_only=False)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            state = model.state_dict()
    else:
        state = unwrap(model).state_dict()
    for name, tensor in state.items():
        yield name, tensor.detach().to(dtype) if tensor.is_floating_point() else tensor.detach()


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    if is_fsdp(model):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch

        return FSDP.full_optim_state_dict(model, optimizer, rank0_only=True)
    return optimizer.state_dict()


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    if is_fsdp(model):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch

        state = FSDP.shard_full_optim_state_dict(state, model)
    optimizer.load_state_dict(state)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def all_reduce_sum(values: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.enabled:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values
