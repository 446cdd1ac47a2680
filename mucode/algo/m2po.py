"""``m2po``: Second-Moment Trust Policy Optimization (Zheng et al. 2025, arXiv 2510.01161), a baseline.

M2 = (log ρ)² per token. Candidates are the tokens where a PPO clip would act:
C = {(A>0, ρ>1) or (A<0, ρ<1)} among valid tokens.

- ``greedy_mask`` (default, the paper's Algorithm 1): mask the largest-M2 candidates until the mean
  M2 over the remaining candidates is ≤ τ_M2 (0.04); objective (1/Σ|o_i|) ΣΣ M·ρ·A with no ε-clip.
  Ties in M2 are broken by position (the earlier flat index is masked first). If even the smallest
  candidate exceeds τ_M2 every candidate is masked.
- ``water_fill`` (the authors' public code): find one cap τ with mean over C of min(M2, τ²) = τ_M2
  (solved exactly here; their code rounds τ down to a breakpoint), then use the PPO-clip surrogate
  with ρ clipped to [e^−τ, e^τ], the bounds never tighter than [1 − 0.3, 1 + 0.5] (their "miniclip").

The selection couples every token of the batch it sees. The paper applies it to the whole
minibatch: call ``M2PO.prepare`` (no grad) on the minibatch and pass row slices of its result as
``prepared`` to each micro-batch call. Without ``prepared`` each call selects within its own batch,
which is what the authors' code does per micro-batch. Masked tokens stay in the token-mean
denominator (the paper normalizes by all valid tokens).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from mucode.algo.metrics import MetricBuffer, frac
from mucode.algo.modes import LossAggregation, M2POMode, parse_mode
from mucode.algo.objective import LossInputs, Objective, ObjectiveParams, clamped_surrogate, dot

__all__ = ["M2PO", "M2POParams", "m2po_candidates", "m2po_greedy_keep", "m2po_water_level"]

KEEP_KEY = "m2po_keep"
LOW_KEY = "m2po_ratio_low"
HIGH_KEY = "m2po_ratio_high"


@dataclass(frozen=True)
class M2POParams(ObjectiveParams):
    """Parameters of ``m2po`` (paper defaults)."""

    aggregation: LossAggregation = LossAggregation.TOKEN_MEAN
    """The paper divides by all valid tokens of the minibatch."""
    m2_threshold: float = 0.04
    """τ_M2, the bound on the mean second moment of the candidates' log-ratios."""
    mode: M2POMode = M2POMode.GREEDY_MASK
    """``greedy_mask`` (paper) or ``water_fill`` (authors' code)."""
    min_clip_low: float = 0.3
    """water_fill: the lower ratio bound is never above 1 − this."""
    min_clip_high: float = 0.5
    """water_fill: the upper ratio bound is never below 1 + this."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "mode", parse_mode(M2POMode, self.mode, "mode"))
        if not (math.isfinite(self.m2_threshold) and self.m2_threshold >= 0):
            raise ValueError(
                f"m2_threshold (τ_M2) must be finite and >= 0 (paper: 0.04), got {self.m2_threshold}"
            )
        if not 0.0 <= self.min_clip_low <= 1.0 or not self.min_clip_high >= 0.0:
            raise ValueError(
                f"min_clip_low must be in [0, 1] and min_clip_high >= 0, got {self.min_clip_low}, {self.min_clip_high}"
            )


@torch.no_grad()
def m2po_candidates(
    log_rho: torch.Tensor, response_mask: torch.Tensor, advantages: torch.Tensor
) -> torch.Tensor:
    """[B, T] bool: valid tokens with (A>0 and ρ>1) or (A<0 and ρ<1)."""
    a = advantages[:, None]
    lr = log_rho.detach()
    return response_mask.to(torch.bool) & (((a > 0) & (lr > 0)) | ((a < 0) & (lr < 0)))


@torch.no_grad()
def m2po_greedy_keep(
    log_rho: torch.Tensor, response_mask: torch.Tensor, advantages: torch.Tensor, threshold: float
) -> torch.Tensor:
    """[B, T] bool tokens M2PO keeps (valid and not masked) under the paper's greedy rule."""
    mask = response_mask.to(torch.bool)
    cand = m2po_candidates(log_rho, mask, advantages).flatten()
    flat_idx = cand.nonzero().squeeze(1)
    keep = mask.flatten().clone()
    values = log_rho.detach().flatten()[flat_idx].to(torch.float64).square()
    n = values.numel()
    if n == 0 or values.mean().item() <= threshold:
        return keep.view_as(mask)
    desc, order = torch.sort(values, descending=True, stable=True)
    counts = torch.arange(1, n + 1, dtype=torch.float64, device=values.device)
    ok = (desc.flip(0).cumsum(0) / counts) <= threshold  # ok[j]: the j+1 smallest have mean ≤ τ
    kept = int(ok.nonzero().max().item()) + 1 if bool(ok.any()) else 0
    keep[flat_idx[order[: n - kept]]] = False
    return keep.view_as(mask)


@torch.no_grad()
def m2po_water_level(
    log_rho: torch.Tensor, response_mask: torch.Tensor, advantages: torch.Tensor, threshold: float
) -> float:
    """τ ≥ 0 with mean over candidates of min((log ρ)², τ²) = threshold; ``inf`` if no cap is needed."""
    cand = m2po_candidates(log_rho, response_mask, advantages)
    values = log_rho.detach()[cand].to(torch.float64).square()
    n = values.numel()
    if n == 0 or values.mean().item() <= threshold:
        return math.inf
    asc, _ = torch.sort(values)
    before = asc.cumsum(0) - asc  # sum of the values below position j
    below_cap = before + (n - torch.arange(n, dtype=torch.float64, device=asc.device)) * asc
    target = n * threshold
    m = int((below_cap <= target).sum().item())  # values entirely under the cap
    level_sq = (target - (before[m].item() if m < n else 0.0)) / (n - m)
    return math.sqrt(max(level_sq, 0.0))


def _prepare(x: LossInputs, p: M2POParams) -> dict[str, torch.Tensor]:
    if p.mode is M2POMode.GREEDY_MASK:
        return {KEEP_KEY: m2po_greedy_keep(x.log_rho_detached, x.mask, x.advantages, p.m2_threshold)}
    tau = m2po_water_level(x.log_rho_detached, x.mask, x.advantages, p.m2_threshold)
    low = min(math.exp(-tau), 1.0 - p.min_clip_low)
    high = max(math.exp(tau), 1.0 + p.min_clip_high)
    rows = x.mask.shape[0]
    return {
        LOW_KEY: torch.full((rows,), low, dtype=x.rho.dtype, device=x.rho.device),
        HIGH_KEY: torch.full((rows,), high, dtype=x.rho.dtype, device=x.rho.device),
    }


def _m2po_loss(
    x: LossInputs, p: M2POParams, prepared: Mapping[str, torch.Tensor] | None, out: MetricBuffer | None
) -> torch.Tensor:
    state = _prepare(x, p) if prepared is None else prepared
    row_weight = x.advantages[:, None] * x.scale
    a = x.advantages[:, None]
    bounds: torch.Tensor | None = None
    if p.mode is M2POMode.GREEDY_MASK:
        if KEEP_KEY not in state:
            raise ValueError(f"prepared must hold {KEEP_KEY!r} (from M2PO.prepare with mode greedy_mask)")
        keep = state[KEEP_KEY][:, : x.mask.shape[1]].to(torch.bool) & x.mask  # trimmed padding
        loss = -dot(x.rho, keep.to(x.rho.dtype) * row_weight)
    else:
        if LOW_KEY not in state or HIGH_KEY not in state:
            raise ValueError(
                f"prepared must hold {LOW_KEY!r} and {HIGH_KEY!r} (from M2PO.prepare with mode water_fill)"
            )
        bounds = torch.stack([state[LOW_KEY], state[HIGH_KEY]], dim=1).to(x.rho.dtype)  # [B, 2]
        low = torch.where(a > 0, torch.zeros_like(a), bounds[:, :1])
        high = torch.where(a > 0, bounds[:, 1:], torch.full_like(a, math.inf))
        keep = x.mask
        loss = clamped_surrogate(x.rho, low, high, x.mask_float * row_weight)
    if out is not None:
        assert x.tokens is not None
        with torch.no_grad():
            r = x.rho.detach()
            cand = m2po_candidates(x.log_rho_detached, x.mask, x.advantages)
            out.add("stale/m2po_candidate_token_frac", frac(cand.sum(), x.tokens))
            if bounds is None:
                out.add("stale/clip_frac_low", 0.0)
                out.add("stale/clip_frac_high", 0.0)
                out.add("stale/m2po_masked_token_frac", frac((x.mask & ~keep).sum(), x.tokens))
            else:
                low_cut = x.mask & (a < 0) & (r < bounds[:, :1])
                high_cut = x.mask & (a > 0) & (r > bounds[:, 1:])
                out.add("stale/clip_frac_low", frac(low_cut.sum(), x.tokens))
                out.add("stale/clip_frac_high", frac(high_cut.sum(), x.tokens))
                out.add("stale/m2po_ratio_low", bounds[0, 0] if bounds.shape[0] else 1.0)
                out.add("stale/m2po_ratio_high", bounds[0, 1] if bounds.shape[0] else 1.0)
    return loss


M2PO: Objective[M2POParams] = Objective(
    name="m2po",
    params_type=M2POParams,
    loss_fn=_m2po_loss,
    prepare_fn=_prepare,
    summary="M2PO: second-moment trust region (greedy mask; water-fill variant)",
)
