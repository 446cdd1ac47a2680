"""The metric glossary of the algorithm core, the shared diagnostics, and micro-batch reduction.

Every key an objective returns is defined in :data:`METRICS` with its meaning and how values from
several micro-batches combine (:func:`reduce_metrics`): ``sum`` (counts and the loss contribution),
``mean`` weighted by a count key, ``min`` or ``max``. A test checks that objectives return no key
missing from the glossary. Token-level statistics are over the valid tokens of ``response_mask``
(vetoed / M2PO-masked tokens included: they describe the data, not the gradient).

Glossary (``ρ = π_θ/β`` per token, A the response's advantage):

- ``loss/policy``: this call's loss (with the minibatch denominator the micro-batch values sum to
  the minibatch loss).
- ``stale/tokens``, ``stale/responses``: valid tokens, responses with ≥ 1 valid token.
- ``stale/tokens_neg_adv``, ``stale/tokens_pos_adv``: valid tokens of responses with A<0 / A>0.
- ``stale/ratio_mean``, ``stale/ratio_mean_neg_adv``, ``stale/ratio_mean_pos_adv``: E[ρ], E[ρ|A<0],
  E[ρ|A>0] (ρ after the ±20 log-ratio clamp of :mod:`mucode.algo.ratios`).
- ``stale/ratio_min``, ``stale/ratio_max``: min / max ρ, unclamped (on a batch without valid tokens
  min is +inf and max is 0).
- ``stale/abs_log_ratio_mean``: E|log ρ|.
- ``stale/log_ratio_sq_mean``: E[(log ρ)²], M2PO's second moment M2 over all valid tokens.
- ``stale/approx_kl``: KL(β‖π_θ) estimated with k3 = E_β[ρ − 1 − log ρ] (≥ 0, unbiased).
- ``stale/clip_frac_low``: fraction of tokens where a lower ratio clip cuts the gradient (A<0 and
  ρ below the lower bound); always 0 for ``mu_grpo`` (no lower clip) and greedy ``m2po``.
- ``stale/clip_frac_high``: fraction of tokens where the upper clip cuts the gradient (A>0, ρ above
  the upper bound).
- ``stale/clip_frac_dual``: ``grpo`` only: fraction of tokens where dual-clip caps an A<0 token.
- ``stale/trigger_token_frac``: ``mu_grpo``: fraction of tokens that are triggers (A<0, ρ<τ_c).
- ``stale/veto_token_frac``: ``mu_grpo``: vetoed tokens / all valid tokens.
- ``stale/veto_seq_frac``: ``mu_grpo``: responses with ≥ 1 vetoed token / all responses.
- ``stale/m2po_candidate_token_frac``: ``m2po``: fraction of tokens in the trust-region candidate set
  {(A>0, ρ>1) or (A<0, ρ<1)}.
- ``stale/m2po_masked_token_frac``: ``m2po`` greedy: masked tokens / all valid tokens.
- ``stale/m2po_ratio_low``, ``stale/m2po_ratio_high``: ``m2po`` water-fill: the ratio clip bounds.
- ``policy/entropy``: mean entropy of π_θ over valid tokens (only when the caller passes ``entropy``).
- ``kl/ref``: mean per-token KL(π_θ ‖ π_ref) estimate (the params' ``kl_estimator``) over valid tokens,
  whenever the caller passes ``ref_logprobs``.
- ``groups/count``, ``groups/zero_variance``: groups in the call, groups whose rewards are all equal;
  ``groups/zero_variance_frac`` their ratio (whenever the caller passes ``groups`` and ``rewards``).
- ``conspo/margin`` m_t of this update; ``conspo/groups`` contrastive groups (≥ 1 positive and ≥ 1
  negative); ``conspo/discarded_groups`` groups without a positive or without a negative;
  ``conspo/score_pos``, ``conspo/score_neg`` mean length-normalized log-prob of positives /
  negatives; ``conspo/weight_mean`` mean staleness-correction weight of the positives (1 when off).
- ``agpo/clip_eps_mean``, ``agpo/clip_eps_min``, ``agpo/clip_eps_max``: the per-prompt clip ε;
  ``agpo/temperature_mean``, ``agpo/temperature_min``, ``agpo/temperature_max``: the prompts'
  sampling temperatures; ``agpo/entropy_old`` mean token entropy per prompt; ``agpo/entropy_ref``
  and ``agpo/kl_ema`` the trainer-held EMAs the clip used; ``agpo/kl_step`` mean over prompts of
  max(0, mean_t(b − log π_θ)).

Not produced here (they need the model or the data; the trainer logs them): ``optim/grad_norm``,
``reward/mean``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

__all__ = ["METRICS", "MetricSpec", "Reduce", "reduce_metrics"]


class Reduce(str, Enum):
    """How values of one metric from several micro-batches combine."""

    SUM = "sum"
    MEAN = "mean"
    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class MetricSpec:
    """One glossary entry."""

    description: str
    reduce: Reduce
    weight: str | None = None
    """For ``mean``: the count key whose values weight the micro-batch means."""


def _mean(description: str, weight: str = "stale/tokens") -> MetricSpec:
    return MetricSpec(description, Reduce.MEAN, weight)


METRICS: dict[str, MetricSpec] = {
    "loss/policy": MetricSpec(
        "policy loss of this call (micro-batch values sum to the minibatch's)", Reduce.SUM
    ),
    "stale/tokens": MetricSpec("valid response tokens", Reduce.SUM),
    "stale/responses": MetricSpec("responses with at least one valid token", Reduce.SUM),
    "stale/tokens_neg_adv": MetricSpec("valid tokens of responses with A<0", Reduce.SUM),
    "stale/tokens_pos_adv": MetricSpec("valid tokens of responses with A>0", Reduce.SUM),
    "stale/ratio_mean": _mean("E[ρ] over valid tokens"),
    "stale/ratio_mean_neg_adv": _mean("E[ρ | A<0]", "stale/tokens_neg_adv"),
    "stale/ratio_mean_pos_adv": _mean("E[ρ | A>0]", "stale/tokens_pos_adv"),
    "stale/ratio_min": MetricSpec("min ρ (unclamped)", Reduce.MIN),
    "stale/ratio_max": MetricSpec("max ρ (unclamped)", Reduce.MAX),
    "stale/abs_log_ratio_mean": _mean("E|log ρ|"),
    "stale/log_ratio_sq_mean": _mean("E[(log ρ)²] (M2)"),
    "stale/approx_kl": _mean("KL(β‖π_θ), k3 estimator E[ρ − 1 − log ρ]"),
    "stale/clip_frac_low": _mean("fraction of tokens whose gradient a lower ratio clip cuts (A<0)"),
    "stale/clip_frac_high": _mean("fraction of tokens whose gradient the upper ratio clip cuts (A>0)"),
    "stale/clip_frac_dual": _mean("grpo: fraction of tokens capped by dual-clip (A<0, ρ>c)"),
    "stale/trigger_token_frac": _mean("mu_grpo: fraction of tokens with A<0 and ρ<τ_c"),
    "stale/veto_token_frac": _mean("mu_grpo: vetoed tokens / valid tokens"),
    "stale/veto_seq_frac": _mean("mu_grpo: responses with a vetoed token / responses", "stale/responses"),
    "stale/m2po_candidate_token_frac": _mean("m2po: fraction of tokens with (A>0, ρ>1) or (A<0, ρ<1)"),
    "stale/m2po_masked_token_frac": _mean("m2po greedy: masked tokens / valid tokens"),
    "stale/m2po_ratio_low": _mean("m2po water-fill: lower ratio bound"),
    "stale/m2po_ratio_high": _mean("m2po water-fill: upper ratio bound"),
    "policy/entropy": _mean("mean entropy of π_θ over valid tokens"),
    "kl/ref": _mean("mean per-token KL(π_θ ‖ π_ref) estimate"),
    "groups/count": MetricSpec("groups in the call", Reduce.SUM),
    "groups/zero_variance": MetricSpec("groups whose rewards are all equal", Reduce.SUM),
    "groups/zero_variance_frac": _mean("fraction of groups whose rewards are all equal", "groups/count"),
    "conspo/margin": MetricSpec("conspo: margin m_t of this update", Reduce.MAX),
    "conspo/groups": MetricSpec("conspo: groups with a positive and a negative", Reduce.SUM),
    "conspo/discarded_groups": MetricSpec(
        "conspo: groups without a positive or without a negative", Reduce.SUM
    ),
    "conspo/score_pos": _mean("conspo: mean length-normalized log-prob of positives", "conspo/groups"),
    "conspo/score_neg": _mean("conspo: mean length-normalized log-prob of negatives", "conspo/groups"),
    "conspo/weight_mean": _mean("conspo: mean staleness-correction weight of positives", "conspo/groups"),
    "agpo/clip_eps_mean": _mean("agpo: mean per-prompt clip ε", "groups/count"),
    "agpo/clip_eps_min": MetricSpec("agpo: smallest per-prompt clip ε", Reduce.MIN),
    "agpo/clip_eps_max": MetricSpec("agpo: largest per-prompt clip ε", Reduce.MAX),
    "agpo/temperature_mean": _mean("agpo: mean per-prompt sampling temperature", "groups/count"),
    "agpo/temperature_min": MetricSpec("agpo: lowest per-prompt sampling temperature", Reduce.MIN),
    "agpo/temperature_max": MetricSpec("agpo: highest per-prompt sampling temperature", Reduce.MAX),
    "agpo/entropy_old": _mean("agpo: mean token entropy per prompt (H_old)", "groups/count"),
    "agpo/entropy_ref": MetricSpec("agpo: the EMA H_ref the clip used", Reduce.MAX),
    "agpo/kl_ema": MetricSpec("agpo: the EMA KL_ema the clip used", Reduce.MAX),
    "agpo/kl_step": _mean("agpo: mean over prompts of max(0, mean_t(b − log π_θ))", "groups/count"),
}


def reduce_metrics(parts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Combine the metric dicts of a minibatch's micro-batch calls into the minibatch's metrics.

    With the minibatch denominator and (for M2PO) the minibatch ``prepared`` tensors, the result
    equals the metrics of one call on the whole minibatch (up to float rounding).
    """
    keys: list[str] = []
    for part in parts:
        keys.extend(k for k in part if k not in keys)
    out: dict[str, float] = {}
    for key in keys:
        if key not in METRICS:
            raise KeyError(f"metric {key!r} is not in mucode.algo.metrics.METRICS; add it to the glossary")
        spec = METRICS[key]
        values = [part[key] for part in parts if key in part]
        if spec.reduce is Reduce.SUM:
            out[key] = math.fsum(values)
        elif spec.reduce is Reduce.MIN:
            out[key] = min(values)
        elif spec.reduce is Reduce.MAX:
            out[key] = max(values)
        else:
            assert spec.weight is not None
            weights = [part.get(spec.weight, 0.0) for part in parts if key in part]
            total = math.fsum(weights)
            out[key] = (
                math.fsum(v * w for v, w in zip(values, weights, strict=True)) / total if total > 0 else 0.0
            )
    return out


class MetricBuffer:
    """Collects scalar tensors and floats; one device→host transfer turns them into a dict."""

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._values: list[torch.Tensor] = []

    def add(self, key: str, value: torch.Tensor | float) -> None:
        self._keys.append(key)
        self._values.append(torch.as_tensor(value, dtype=torch.float64).reshape(()))

    def to_dict(self) -> dict[str, float]:
        if not self._values:
            return {}
        device = self._values[0].device
        stacked = torch.stack([v.to(device=device, dtype=torch.float64) for v in self._values])
        return dict(zip(self._keys, stacked.tolist(), strict=True))


def frac(count: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """count / total in float64 (0 when total is 0): fractions of integer counts stay exact."""
    return count.to(torch.float64) / total.to(torch.float64).clamp(min=1)


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Σ a·b over all elements in one pass (no [B, T] temporary)."""
    return torch.dot(a.reshape(-1), b.reshape(-1))


@torch.no_grad()
def add_ratio_diagnostics(
    out: MetricBuffer,
    log_rho: torch.Tensor,
    rho: torch.Tensor,
    mask: torch.Tensor,
    mask_float: torch.Tensor,
    advantages: torch.Tensor,
    entropy: torch.Tensor | None,
    max_abs_log_ratio: float | None,
) -> dict[str, torch.Tensor]:
    """Add the objective-independent ``stale/*`` diagnostics; returns the token counts for later fractions.

    ``log_rho`` is unclamped, ``rho`` the (clamped) ratio the loss used, both detached; ``mask`` bool
    and ``mask_float`` its 0/1 copy in ρ's dtype, [B, T]; ``advantages`` [B]; ``max_abs_log_ratio``
    the guard the loss applied to log ρ. Computed in at least float32. Padding positions must hold
    finite log-probs (any value): they are multiplied by 0.
    """
    dtype = torch.promote_types(log_rho.dtype, torch.float32)  # at least fp32, fp64 stays fp64
    m = mask_float.to(dtype)
    lr = log_rho.to(dtype)
    r = rho.to(dtype)
    row_tokens = m.sum(dim=1)
    neg = advantages < 0
    pos = advantages > 0
    tokens = row_tokens.sum()
    tokens_neg = (row_tokens * neg).sum()
    tokens_pos = (row_tokens * pos).sum()
    row_ratio = (
        torch.bmm(r.unsqueeze(1), m.unsqueeze(2)).reshape(-1) if r.numel() else r.new_zeros(r.shape[0])
    )
    ratio_sum = row_ratio.sum()
    out.add("stale/tokens", tokens)
    out.add("stale/responses", (row_tokens > 0).sum())
    out.add("stale/tokens_neg_adv", tokens_neg)
    out.add("stale/tokens_pos_adv", tokens_pos)
    out.add("stale/ratio_mean", frac(ratio_sum, tokens))
    out.add("stale/ratio_mean_neg_adv", frac((row_ratio * neg).sum(), tokens_neg))
    out.add("stale/ratio_mean_pos_adv", frac((row_ratio * pos).sum(), tokens_pos))
    if lr.numel():
        out.add("stale/ratio_min", torch.exp(torch.where(mask, lr, math.inf).amin()))
        out.add("stale/ratio_max", torch.exp(torch.where(mask, lr, -math.inf).amax()))
    else:
        out.add("stale/ratio_min", math.inf)
        out.add("stale/ratio_max", 0.0)
    lr_m = lr * m
    out.add("stale/abs_log_ratio_mean", frac(lr_m.abs().sum(), tokens))
    out.add("stale/log_ratio_sq_mean", frac(_dot(lr_m, lr), tokens))
    # k3 = ρ − 1 − log ρ with the ρ the loss used: log ρ is the (guard-clamped) log-ratio
    log_r_m = lr_m if max_abs_log_ratio is None else _dot(lr.clamp(-max_abs_log_ratio, max_abs_log_ratio), m)
    log_r_sum = log_r_m.sum() if max_abs_log_ratio is None else log_r_m
    out.add("stale/approx_kl", frac(ratio_sum - tokens - log_r_sum, tokens))
    if entropy is not None:
        if entropy.shape != mask.shape:
            raise ValueError(f"entropy must be [B, T] like response_mask, got {tuple(entropy.shape)}")
        out.add("policy/entropy", frac(_dot(entropy.detach().to(dtype), m), tokens))
    return {"tokens": tokens, "responses": (row_tokens > 0).sum()}
