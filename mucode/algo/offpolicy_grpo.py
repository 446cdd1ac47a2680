"""``offpolicy_grpo``: off-policy GRPO (Mroueh et al., arXiv 2505.22257) as one objective.

The surrogate is ``grpo``'s, min(ρA, clip(ρ, 1 − ε, 1 + ε)A) with ρ = π_θ/α the ratio to the policy
that sampled (ε = 0.2), with the paper's two additions switched on by default:

- zero-variance masking: groups whose rewards are all equal leave the loss and the denominator;
- β·KL(π_θ ‖ π_ref) with the k3 estimator, β = 0.1 (the paper's GSM8K / 0.5B value; it used 0.001
  for DeepScaleR / 1.5B). The trainer resets π_ref to the current policy every
  ``reference.reset_every_stages`` stages (the paper's outer loops).

The serving lag v is the stage length (``batch.updates_per_stage``; preset: 10, one optimizer step
per sampled batch). The paper's clip is stated around r′ ≈ 1 in general form; PPO-clip around 1 is
a reconstruction. Dual-clip stays off.
"""

from __future__ import annotations

from dataclasses import dataclass

from mucode.algo.grpo import GRPOParams, _grpo_loss
from mucode.algo.objective import Objective

__all__ = ["OFFPOLICY_GRPO", "OffPolicyGRPOParams"]


@dataclass(frozen=True)
class OffPolicyGRPOParams(GRPOParams):
    """``grpo``'s parameters with off-policy GRPO's defaults."""

    kl_coef: float = 0.1
    """β (paper: 0.1 on GSM8K with a 0.5B model, 0.001 on DeepScaleR with 1.5B)."""
    mask_zero_variance: bool = True
    """The paper masks groups with equal rewards out of the loss and the denominator."""


OFFPOLICY_GRPO: Objective[OffPolicyGRPOParams] = Objective(
    name="offpolicy_grpo",
    params_type=OffPolicyGRPOParams,
    loss_fn=_grpo_loss,
    summary="off-policy GRPO: PPO-clip 0.2 to the sampler, zero-variance masking, k3 KL to a reset reference",
)
