"""``grpo``: the PPO-clip surrogate of GRPO, the baseline μ-GRPO is compared with.

Per token: min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A), no KL term. Dual-clip (Ye et al. 2020; verl's
``clip_ratio_c``) is available but OFF by default: when ``dual_clip=c`` is set, an A<0 token's term is
additionally floored at c·A, which cuts its gradient once ρ > c.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from mucode.algo.metrics import MetricBuffer, frac
from mucode.algo.objective import LossInputs, Objective, ObjectiveParams, clamped_surrogate, signed_bounds

__all__ = ["GRPO", "GRPOParams"]


@dataclass(frozen=True)
class GRPOParams(ObjectiveParams):
    """Parameters of ``grpo``."""

    clip_low: float = 0.2
    """ε_low: A<0 tokens stop getting gradient below ρ = 1 − ε_low."""
    clip_high: float = 0.2
    """ε_high: A>0 tokens stop getting gradient above ρ = 1 + ε_high."""
    dual_clip: float | None = None
    """c > 1 caps A<0 tokens at c·A (verl's clip_ratio_c = 3); None (default) disables it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.clip_low <= 1.0:
            raise ValueError(f"clip_low (ε_low) must be in [0, 1], got {self.clip_low}")
        if not self.clip_high >= 0.0:
            raise ValueError(f"clip_high (ε_high) must be >= 0, got {self.clip_high}")
        if self.dual_clip is not None and not self.dual_clip > 1.0:
            raise ValueError(f"dual_clip must be > 1 (e.g. 3.0) or None, got {self.dual_clip}")


def _grpo_loss(
    x: LossInputs, p: GRPOParams, prepared: Mapping[str, torch.Tensor] | None, out: MetricBuffer | None
) -> torch.Tensor:
    high_neg = float("inf") if p.dual_clip is None else p.dual_clip
    low, high = signed_bounds(x.advantages, 1.0 - p.clip_low, 1.0 + p.clip_high, high_neg)
    weights = x.mask_float * (x.advantages[:, None] * x.scale)
    loss = clamped_surrogate(x.rho, low, high, weights)
    if out is not None:
        assert x.tokens is not None
        with torch.no_grad():
            r = x.rho.detach()
            a = x.advantages[:, None]
            neg = x.mask & (a < 0)
            out.add("stale/clip_frac_low", frac((neg & (r < 1.0 - p.clip_low)).sum(), x.tokens))
            out.add(
                "stale/clip_frac_high",
                frac((x.mask & (a > 0) & (r > 1.0 + p.clip_high)).sum(), x.tokens),
            )
            out.add("stale/clip_frac_dual", frac((neg & (r > high_neg)).sum(), x.tokens))
    return loss


GRPO: Objective[GRPOParams] = Objective(
    name="grpo",
    params_type=GRPOParams,
    loss_fn=_grpo_loss,
    summary="PPO-clip GRPO surrogate, asymmetric ε, optional dual-clip (off by default)",
)
