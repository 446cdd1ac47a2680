"""Mixed precision: master weights and optimizer state in ``model.master_dtype`` (float32), forward
and backward in ``model.dtype`` (bfloat16 on GPUs).

Why: at the paper's lr 1e-6 an AdamW step moves a weight by ~1e-6, far below bfloat16's resolution
(8 bits of mantissa: a weight of 0.02 has a spacing of ~1.2e-4), so updating bfloat16 parameters
directly rounds almost every update away. Keeping float32 masters and computing in bfloat16 is what
verl (FSDP ``MixedPrecision``) and Megatron do.

How, per set-up (the same semantics everywhere: float32 masters and optimizer state, low-precision
matrix multiplies, float32 gradients):

- FSDP (torchrun on CUDA): ``MixedPrecision(param_dtype=dtype, reduce_dtype=float32,
  buffer_dtype=dtype)``: FSDP casts each unit's gathered parameters to ``dtype`` for the forward and
  backward, reduces gradients in float32 and keeps the float32 shards for the optimizer.
- One process (CPU or one GPU) and ``gloo`` ranks: ``torch.autocast(dtype)`` around every forward
  of the trainer and of the ``hf`` engine that shares its weights. Autocast runs matrix multiplies
  in ``dtype`` and keeps numerically sensitive ops (softmax, norms) in float32, where FSDP casts every
  parameter; both keep float32 masters, which is what the updates need.

``model.master_dtype = model.dtype`` gives pure low-precision training (half the memory of the
weights, and the rounding above); it is allowed, never the default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Precision", "TORCH_DTYPES"]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass(frozen=True)
class Precision:
    """The two dtypes of a run: ``master`` (stored, optimized, checkpointed) and ``compute``."""

    master: torch.dtype = torch.float32
    compute: torch.dtype = torch.float32

    @classmethod
    def from_names(cls, master: str, compute: str) -> Precision:
        return cls(master=TORCH_DTYPES[master], compute=TORCH_DTYPES[compute])

    @property
    def mixed(self) -> bool:
        """True when forwards run in a narrower dtype than the stored weights."""
        return self.compute != self.master

    @property
    def compute_name(self) -> str:
        return next(k for k, v in TORCH_DTYPES.items() if v == self.compute)

    @contextlib.contextmanager
    def autocast(self, device: torch.device) -> Iterator[None]:
        """Forwards inside run in ``compute`` (a no-op when not mixed)."""
        if not self.mixed:
            yield
            return
        with torch.autocast(device_type=device.type, dtype=self.compute):
            yield

    def fsdp_mixed_precision(self) -> Any:
        """FSDP's ``MixedPrecision`` for this precision (None when not mixed)."""
        if not self.mixed:
            return None
        from torch.distributed.fsdp import MixedPrecision  # lazy: torch

        return MixedPrecision(param_dtype=self.compute, reduce_dtype=torch.float32, buffer_dtype=self.compute)

    def export_state(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The hand-over copy of a master state dict: floating tensors cast to ``compute``, the dtype
        the engine generates in."""
        return {k: v.to(self.compute) if v.is_floating_point() else v for k, v in state.items()}
