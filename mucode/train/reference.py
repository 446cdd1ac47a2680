"""The reference policy π_ref of an objective's KL term (``algo.kl_coef`` > 0), and when it is reset.

Made only when the objective's ``kl_coef`` is > 0 (no copy of the model otherwise). The copy lives
in host memory and is moved to the training device only for the forward passes of one update, then
moved back, so the accelerator holds it only while it is used. It starts as the policy the run
starts from (the base model) and is reset to the current policy at the start of every
``reference.reset_every_stages`` stages (off-policy GRPO's outer loops); None: never reset.

Limits: not under FSDP (a sharded model has no full copy to keep; the trainer refuses it). Not
checkpointed: a run resumed mid-way rebuilds π_ref from the policy at the resume point, which is
exact when the resume falls on a reset stage boundary and otherwise not.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from mucode.rollout.logprobs import response_logprobs
from mucode.train.distributed import DistInfo, is_fsdp, unwrap
from mucode.train.precision import Precision

__all__ = ["ReferencePolicy", "reset_due"]


def reset_due(stage: int, every: int | None) -> bool:
    """Whether π_ref is reset to the current policy at the start of ``stage`` (never at stage 0: it
    already is the starting policy)."""
    return every is not None and stage > 0 and stage % every == 0


class ReferencePolicy:
    """A frozen copy of the policy in host memory, used for ``ref_logprobs``."""

    def __init__(
        self,
        model: nn.Module,
        info: DistInfo,
        precision: Precision,
        *,
        reset_every: int | None,
        pad_token_id: int,
    ) -> None:
        if is_fsdp(model):
            raise ValueError(
                "a reference policy (algo.kl_coef > 0) is not supported under FSDP; set algo.kl_coef=0"
            )
        self.info, self.precision, self.reset_every, self.pad_token_id = (
            info,
            precision,
            reset_every,
            pad_token_id,
        )
        self.model = self._copy(model)
        self.resets = 0

    @staticmethod
    def _copy(model: nn.Module) -> nn.Module:
        ref = copy.deepcopy(unwrap(model)).to("cpu").eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def begin_stage(self, stage: int, model: nn.Module) -> bool:
        """Reset π_ref to ``model``'s weights if ``stage`` starts an outer loop; True if it did."""
        if not reset_due(stage, self.reset_every):
            return False
        with torch.no_grad():
            source = unwrap(model).state_dict()
            for name, tensor in self.model.state_dict().items():
                tensor.copy_(source[name].to(tensor.device, tensor.dtype))
        self.resets += 1
        return True

    @contextlib.contextmanager
    def on_device(self) -> Iterator[None]:
        """π_ref on the training device for the duration (one update), back in host memory after."""
        device = self.info.device
        moved = torch.device(device).type != "cpu"
        if moved:
            self.model.to(device)
        try:
            yield
        finally:
            if moved:
                self.model.to("cpu")
                torch.cuda.empty_cache()

    @torch.no_grad()
    def logprobs(
        self, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], temperature: Any
    ) -> torch.Tensor:
        """[B, R] log π_ref of the responses (0 on padding), at the responses' temperatures."""
        with self.precision.autocast(self.info.device):
            out = response_logprobs(
                self.model, prompts, responses, temperature, pad_token_id=self.pad_token_id
            )
        return out.logprobs.float()
