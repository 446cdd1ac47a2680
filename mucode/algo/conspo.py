"""``conspo``: group-wise contrastive (InfoNCE) policy optimization (ConSPO, arXiv 2605.12969).

Score of a response: s(o) = (1/|o|) Σ_t log π_θ(o_t | q, o_<t), the *current* policy's
length-normalized log-prob (no ratio). For each prompt group with N⁺ > 0 positives (reward ≥
``positive_reward``) and N⁻ > 0 negatives, maximized:

    J(q) = (1/N⁺) Σ_i τ · log[ e^{(s_i⁺ − m_t)/τ} / ( e^{(s_i⁺ − m_t)/τ} + Σ_j e^{s_j⁻/τ} ) ]

Each positive is contrasted with all negatives of its own group (never with other positives).
The loss is −Σ_q J(q) / D with D the number of contrastive groups of the minibatch
(:meth:`Objective.denominator`); groups with no positive or no negative are discarded (counted,
``conspo/discarded_groups``). Computed with logsumexp.

Margin schedule: ρ_t = min(λ_t/α, 1), m_t = (M/2)(1 − cos(π ρ_t)), λ_t the training progress.
Defaults (paper, confirmed): τ = 10, M = 0.01, α = 0.3.

Staleness: the objective has no importance ratio, clip or KL. On rollouts sampled by an older
policy (μ > 1, replay) it is *uncorrected*: the scores are the current policy's, the contrast set is
the old policy's samples. The optional ``correction="truncated"`` multiplies each positive's term by
w_i = min(exp(mean_t log ρ_i), ``correction_cap``) (no gradient), a sequence-level truncated weight
against the behaviour policy; it is off by default (the paper has none). ``advantages`` are not read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch

from mucode.algo.groups import group_token_scale
from mucode.algo.metrics import MetricBuffer
from mucode.algo.objective import LossInputs, Objective, ObjectiveParams

__all__ = ["CONSPO", "ConSPOParams", "conspo_margin", "contrastive_groups"]


@dataclass(frozen=True)
class ConSPOParams(ObjectiveParams):
    """Parameters of ``conspo`` (paper defaults)."""

    temperature: float = 10.0
    """τ of the InfoNCE softmax over scores (not the sampling temperature)."""
    margin: float = 0.01
    """M, the margin reached at the end of the warm-up of the schedule."""
    margin_warmup: float = 0.3
    """α: the margin rises from 0 to M over this fraction of training (cosine)."""
    positive_reward: float = 1.0
    """A response with reward ≥ this is a positive (verified correct); below, a negative."""
    correction: Literal["none", "truncated"] = "none"
    """Staleness correction of the positives' terms: none (paper) or a truncated sequence weight."""
    correction_cap: float = 1.0
    """c of the truncated weight min(exp(mean_t log ρ), c)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.temperature > 0:
            raise ValueError(f"temperature (τ) must be > 0 (paper: 10), got {self.temperature}")
        if not self.margin >= 0:
            raise ValueError(f"margin (M) must be >= 0 (paper: 0.01), got {self.margin}")
        if not 0 < self.margin_warmup <= 1:
            raise ValueError(f"margin_warmup (α) must be in (0, 1] (paper: 0.3), got {self.margin_warmup}")
        if self.correction not in ("none", "truncated"):
            raise ValueError(f"correction={self.correction!r} is not valid; choose 'none' or 'truncated'")
        if not self.correction_cap > 0:
            raise ValueError(f"correction_cap must be > 0, got {self.correction_cap}")


def conspo_margin(progress: float, margin: float, warmup: float) -> float:
    """m_t = (M/2)(1 − cos(π · min(λ/α, 1)))."""
    rho = min(progress / warmup, 1.0)
    return 0.5 * margin * (1.0 - math.cos(math.pi * rho))


@torch.no_grad()
def contrastive_groups(
    mask: torch.Tensor, groups: torch.Tensor, rewards: torch.Tensor, positive_reward: float
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], int]:
    """([(positive rows, negative rows)] of each contrastive group, discarded groups) among rows with tokens."""
    live = mask.any(dim=1)
    pos = rewards.to(mask.device) >= positive_reward
    out: list[tuple[torch.Tensor, torch.Tensor]] = []
    discarded = 0
    g = groups.to(mask.device)
    for gid in torch.unique(g[live]).tolist():
        rows = live & (g == gid)
        p, n = (rows & pos).nonzero().squeeze(1), (rows & ~pos).nonzero().squeeze(1)
        if p.numel() == 0 or n.numel() == 0:
            discarded += 1
        else:
            out.append((p, n))
    return out, discarded


def _denominator(
    mask: torch.Tensor, p: ConSPOParams, groups: torch.Tensor | None, rewards: torch.Tensor | None
) -> float:
    assert groups is not None and rewards is not None
    return float(len(contrastive_groups(mask, groups, rewards, p.positive_reward)[0]))


def _scale(
    mask_float: torch.Tensor, groups: torch.Tensor | None, denominator: float, p: ConSPOParams
) -> torch.Tensor:
    assert groups is not None
    return group_token_scale(mask_float, groups, denominator, dtype=mask_float.dtype)


def _conspo_loss(
    x: LossInputs, p: ConSPOParams, prepared: Mapping[str, torch.Tensor] | None, out: MetricBuffer | None
) -> torch.Tensor:
    assert x.logprobs is not None and x.groups is not None and x.rewards is not None
    lengths = x.mask_float.sum(dim=1)
    scores = (x.logprobs * x.mask_float).sum(dim=1) / lengths.clamp(min=1.0)  # differentiable
    pairs, discarded = contrastive_groups(x.mask, x.groups, x.rewards, p.positive_reward)
    m = conspo_margin(x.progress, p.margin, p.margin_warmup)
    with torch.no_grad():
        if p.correction == "truncated":
            mean_log_rho = (x.log_rho_detached * x.mask_float).sum(dim=1) / lengths.clamp(min=1.0)
            weight = torch.exp(mean_log_rho).clamp(max=p.correction_cap)
        else:
            weight = torch.ones_like(scores)
    total = (scores * 0.0).sum()  # stays in the graph: a batch with no contrastive group has gradient 0
    for pos, neg in pairs:
        a = (scores[pos] - m) / p.temperature
        lse_neg = torch.logsumexp(scores[neg] / p.temperature, dim=0)
        terms = p.temperature * (a - torch.logaddexp(a, lse_neg))
        total = total + (weight[pos] * terms).mean()
    loss = -total / x.denominator  # D: the minibatch's contrastive groups (a lone call: its own)
    if out is not None:
        with torch.no_grad():
            out.add("conspo/margin", m)
            out.add("conspo/groups", float(len(pairs)))
            out.add("conspo/discarded_groups", float(discarded))
            n = max(1, len(pairs))
            out.add("conspo/score_pos", sum(scores[q].mean().item() for q, _ in pairs) / n if pairs else 0.0)
            out.add("conspo/score_neg", sum(scores[r].mean().item() for _, r in pairs) / n if pairs else 0.0)
            out.add(
                "conspo/weight_mean", sum(weight[q].mean().item() for q, _ in pairs) / n if pairs else 0.0
            )
    return loss


CONSPO: Objective[ConSPOParams] = Objective(
    name="conspo",
    params_type=ConSPOParams,
    loss_fn=_conspo_loss,
    summary="ConSPO: group-wise InfoNCE on length-normalized log-probs, cosine margin schedule",
    uses_groups=True,
    denominator_fn=_denominator,
    scale_fn=_scale,
)
