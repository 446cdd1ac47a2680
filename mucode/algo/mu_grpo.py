"""``mu_grpo``: relaxed clipping [0, 5] plus the negative-advantage veto (Tian, Xie, Wei 2026).

Per token: min(ρA, clip(ρ, 0, U)·A) with U = 5. For A<0 this is exactly ρA — the clip never binds
and there is no dual-clip — so for A<0 the gradient is |A|·ρ·∇(−log π) at any ratio (up to the ±20
log-ratio guard of :mod:`mucode.algo.ratios`). For A>0 it is A·min(ρ, U).

Veto (NAV): token t of response i is a *trigger* if A_i < 0 and ρ_{i,t} < τ_c (τ_c = 1e-4, decided
as log ρ < log τ_c so underflow cannot matter); κ_i is the first trigger. The scope decides which
tokens of such a response get weight 0 (:class:`mucode.algo.modes.VetoScope`). The mask is computed
from the current ratios at every call under ``no_grad``; it is never differentiated.

Reading of the scopes: ``suffix`` and ``nontrigger_suffix`` mask tokens *strictly after* κ, as the
spec's table states (t > κ); the trigger token κ itself stays in the loss under those two scopes.

Vetoed responses keep counting in the denominator and keep their full length T_i.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from mucode.algo.metrics import MetricBuffer, frac
from mucode.algo.modes import VetoScope, parse_mode
from mucode.algo.objective import LossInputs, Objective, ObjectiveParams, dot

__all__ = ["MU_GRPO", "MuGRPOParams", "veto_mask"]


@dataclass(frozen=True)
class MuGRPOParams(ObjectiveParams):
    """Parameters of ``mu_grpo`` (paper defaults)."""

    ratio_upper: float = 5.0
    """U, the upper end of the clip interval [0, U]; binds only for A>0. ``inf`` disables it."""
    veto_scope: VetoScope = VetoScope.SEQUENCE
    """Which tokens of a negative-advantage response with a trigger get masked."""
    veto_threshold: float = 1e-4
    """τ_c: a token of an A<0 response with ρ < τ_c is a trigger."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "veto_scope", parse_mode(VetoScope, self.veto_scope, "veto_scope"))
        if not self.ratio_upper > 0:
            raise ValueError(f"ratio_upper must be > 0 (paper: 5.0), got {self.ratio_upper}")
        if not 0.0 < self.veto_threshold < 1.0:
            raise ValueError(
                f"veto_threshold (τ_c) must be in (0, 1) (paper: 1e-4), got {self.veto_threshold}"
            )


def _strictly_after_first(trigger: torch.Tensor) -> torch.Tensor:
    counts = trigger.to(torch.int32).cumsum(dim=1)
    return (counts - trigger.to(torch.int32)) > 0


_Scope = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | None"]

_SCOPES: dict[VetoScope, _Scope] = {
    VetoScope.NONE: lambda trigger, mask: None,
    VetoScope.TRIGGER: lambda trigger, mask: trigger,
    VetoScope.SUFFIX: lambda trigger, mask: _strictly_after_first(trigger) & mask,
    VetoScope.NONTRIGGER_SUFFIX: lambda trigger, mask: _strictly_after_first(trigger) & mask & ~trigger,
    VetoScope.SEQUENCE: lambda trigger, mask: trigger.any(dim=1, keepdim=True) & mask,
}


@torch.no_grad()
def veto_mask(
    log_rho: torch.Tensor,
    response_mask: torch.Tensor,
    advantages: torch.Tensor,
    scope: VetoScope | str,
    threshold: float,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(vetoed [B, T] bool or None for scope ``none``, triggers [B, T] bool).

    ``log_rho`` [B, T] current log-ratios, ``response_mask`` [B, T] bool, ``advantages`` [B].
    """
    scope = parse_mode(VetoScope, scope, "veto_scope")
    mask = response_mask.to(torch.bool)
    trigger = (log_rho.detach() < math.log(threshold)) & mask & (advantages < 0)[:, None]
    return _SCOPES[scope](trigger, mask), trigger


def _mu_grpo_loss(
    x: LossInputs, p: MuGRPOParams, prepared: Mapping[str, torch.Tensor] | None, out: MetricBuffer | None
) -> torch.Tensor:
    pos = x.advantages > 0
    neg = x.advantages < 0
    # min(ρA, clip(ρ, 0, U)A) = A·min(ρ, U) for A>0 and ρA for A<0: one upper bound per response
    high = torch.where(pos, p.ratio_upper, math.inf).to(x.rho.dtype)[:, None]
    row_weight = x.advantages[:, None] * x.scale
    with torch.no_grad():
        below = (x.log_rho_detached < math.log(p.veto_threshold)) & x.mask  # triggers if A<0
        if p.veto_scope is VetoScope.SEQUENCE:  # per-response veto: fold it into the row weight
            vetoed_rows = below.any(dim=1) & neg
            weights = x.mask_float * (row_weight * (~vetoed_rows).to(row_weight.dtype)[:, None])
            vetoed = None
        else:
            vetoed = _SCOPES[p.veto_scope](below & neg[:, None], x.mask)
            keep = x.mask if vetoed is None else x.mask & ~vetoed
            weights = keep.to(x.rho.dtype) * row_weight
    loss = -dot(torch.clamp(x.rho, max=high), weights)
    if out is not None:
        assert x.tokens is not None and x.responses is not None
        with torch.no_grad():
            row_tokens = x.mask_float.sum(dim=1)
            out.add("stale/clip_frac_low", 0.0)
            out.add("stale/clip_frac_high", frac((x.mask & (x.rho.detach() > high)).sum(), x.tokens))
            out.add("stale/trigger_token_frac", frac((below.sum(dim=1) * neg).sum(), x.tokens))
            if p.veto_scope is VetoScope.SEQUENCE:
                out.add("stale/veto_token_frac", frac((row_tokens * vetoed_rows).sum(), x.tokens))
                out.add("stale/veto_seq_frac", frac((vetoed_rows & (row_tokens > 0)).sum(), x.responses))
            elif vetoed is None:
                out.add("stale/veto_token_frac", 0.0)
                out.add("stale/veto_seq_frac", 0.0)
            else:
                out.add("stale/veto_token_frac", frac(vetoed.sum(), x.tokens))
                out.add("stale/veto_seq_frac", frac(vetoed.any(dim=1).sum(), x.responses))
    return loss


MU_GRPO: Objective[MuGRPOParams] = Objective(
    name="mu_grpo",
    params_type=MuGRPOParams,
    loss_fn=_mu_grpo_loss,
    summary="μ-GRPO: clip [0, 5] (never binds for A<0) + negative-advantage veto",
)
