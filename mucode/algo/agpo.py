"""``agpo``: uncertainty-adaptive temperature and per-prompt clip (AGPO, arXiv 2605.20722).

Reference: the official code (``wandugu/paper_agpo``, ``CustomAGPOTrainer``). The pure pieces live
here; the trainer's sampling controller (``sampling.controller=agpo``) runs the probe and sets the
temperature, and this objective computes the clip.

Per prompt, from a probe of G samples at τ_base (scored, never trained on):

- σ_p: dispersion of the probe rewards (:func:`dispersion`: Bessel std, or MAD·1.4826, or IQR/1.349);
- H_vote: entropy (natural log) of the answer-key counts (:func:`answer_key`, :func:`vote_entropy`);
- κ: adjusted Fisher–Pearson skewness (:func:`skewness`; 0 if std < 1e-6, clamped to ±10).

U = w_r·σ_p + w_e·H_vote + w_k·|κ|; c = (U − EMA_U)/(EMA_U + 1e-8), then EMA_U ← 0.1·U + 0.9·EMA_U
(first prompt: c = 0, EMA_U = U); τ = clamp(τ_base·(1 + λ·c), τ_min, τ_max) (:class:`TemperatureEMA`).

Clip (:func:`clip_eps`), per prompt, symmetric [1 − ε, 1 + ε]:
ε = clamp(ε_base · clamp(H_old/(H_ref + 1e-8), 0.5, 1.5) · (1 + δ·H_vote)
          / (1 + α_var·σ_p + γ·KL_ema + ζ·|κ|), ε_min, ε_max).

Loss: per prompt the token-mean of min(ρA, clip(ρ, 1 ± ε)A), mean over the minibatch's prompts
(``denominator`` = number of prompts), plus β_ref·mean(log π_θ − log π_ref) (``kl_coef`` 0.03 with
``kl_estimator=k1``: the official code's plain log-ratio). Advantages: A = (r − mean)/max(std, 1e-8)
(``algo.adv_eps``), computed by the trainer as usual.

Deviations (documented): H_old is the token entropy of the policy being trained in this update's
forward (at the first update of a stage it is the sampling policy's, as in the official code; later
epochs see the updated policy). step_KL = mean over prompts of max(0, mean_t(b − log π_θ)) is
measured *before* each update from the ratio to the sampling policy, so KL_ema lags one update
behind the official code, which measures it after the step. H_ref is an EMA (α = 0.01) of the
per-update mean H_old, updated after the update that used it. The clip formula changed after the
code's first commit; which version the paper ran is unknown: this is the later one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from mucode.algo.groups import group_count, group_token_scale
from mucode.algo.metrics import MetricBuffer
from mucode.algo.modes import KLEstimator
from mucode.algo.objective import LossInputs, Objective, ObjectiveParams, clamped_surrogate

__all__ = [
    "AGPO",
    "AGPOParams",
    "TemperatureEMA",
    "answer_key",
    "clip_eps",
    "dispersion",
    "skewness",
    "uncertainty",
    "vote_entropy",
]

PROBE_KEYS = ("probe_sigma", "probe_vote_entropy", "probe_skewness")
"""The per-prompt probe statistics the sampling controller stores and this objective reads."""


def dispersion(rewards: Sequence[float], method: Literal["std", "mad", "iqr"] = "std") -> float:
    """σ_p of probe rewards: Bessel std (0 for n < 2), MAD·1.4826, or IQR/1.349 (linear quantiles)."""
    x = [float(r) for r in rewards]
    n = len(x)
    if n < 2:
        return 0.0
    if method == "std":
        mean = sum(x) / n
        return math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    t = torch.tensor(x, dtype=torch.float64)
    if method == "mad":
        med = t.median() if n % 2 else t.quantile(0.5)
        return float((t - med).abs().quantile(0.5)) * 1.4826
    if method == "iqr":
        return float(t.quantile(0.75) - t.quantile(0.25)) / 1.349
    raise ValueError(f"dispersion method {method!r} is not valid; choose std, mad or iqr")


def skewness(rewards: Sequence[float]) -> float:
    """Adjusted Fisher–Pearson skewness G1 = g1·√(n(n−1))/(n−2); 0 if n < 3 or std < 1e-6; clamped to ±10."""
    x = [float(r) for r in rewards]
    n = len(x)
    if n < 3:
        return 0.0
    mean = sum(x) / n
    m2 = sum((v - mean) ** 2 for v in x) / n
    if math.sqrt(m2) < 1e-6:
        return 0.0
    m3 = sum((v - mean) ** 3 for v in x) / n
    g1 = m3 / m2**1.5
    return float(max(-10.0, min(10.0, g1 * math.sqrt(n * (n - 1)) / (n - 2))))


_BOXED = re.compile(r"\\boxed\s*\{")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i, depth = starts[-1], 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return None


def answer_key(text: str) -> str:
    """The vote key of a response: the last ``\\boxed{}``, else the text after ``####``, else the last
    number, else the whitespace-normalized lower-cased text."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    if "####" in text:
        return text.rsplit("####", 1)[1].strip()
    numbers = _NUMBER.findall(text)
    if numbers:
        return str(numbers[-1])
    return " ".join(text.lower().split())


def vote_entropy(texts: Sequence[str]) -> float:
    """H_vote: entropy (nats) of the counts of the responses' answer keys."""
    counts: dict[str, int] = {}
    for t in texts:
        key = answer_key(t)
        counts[key] = counts.get(key, 0) + 1
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values()) if n else 0.0


def uncertainty(
    sigma: float, h_vote: float, kappa: float, weights: tuple[float, float, float] = (1.0, 1.0, 0.0)
) -> float:
    """U = w_r·σ_p + w_e·H_vote + w_k·|κ|."""
    return weights[0] * sigma + weights[1] * h_vote + weights[2] * abs(kappa)


@dataclass
class TemperatureEMA:
    """The adaptive temperature: c from U against its EMA, updated once per prompt (official code)."""

    base: float = 1.0
    gain: float = 0.15
    """λ."""
    low: float = 0.5
    high: float = 1.5
    momentum: float = 0.1
    """The EMA takes this share of each new U."""
    ema: float | None = None
    history: list[float] = field(default_factory=list, repr=False)

    def temperature(self, u: float) -> float:
        """τ for a prompt with uncertainty ``u`` (then folds ``u`` into the EMA)."""
        if self.ema is None:
            c, self.ema = 0.0, u
        else:
            c = (u - self.ema) / (self.ema + 1e-8)
            self.ema = self.momentum * u + (1.0 - self.momentum) * self.ema
        return max(self.low, min(self.high, self.base * (1.0 + self.gain * c)))


def clip_eps(
    h_old: torch.Tensor,
    h_ref: float,
    h_vote: torch.Tensor,
    sigma: torch.Tensor,
    kl_ema: float,
    kappa: torch.Tensor,
    p: AGPOParams,
) -> torch.Tensor:
    """Per-prompt ε (tensors of any common shape) by the official formula."""
    ratio = (h_old / (h_ref + 1e-8)).clamp(0.5, 1.5)
    num = p.clip_base * ratio * (1.0 + p.clip_vote * h_vote)
    den = 1.0 + p.clip_sigma * sigma + p.clip_kl * kl_ema + p.clip_skew * kappa.abs()
    return (num / den).clamp(p.clip_min, p.clip_max)


@dataclass(frozen=True)
class AGPOParams(ObjectiveParams):
    """Parameters of ``agpo`` (the official code's defaults)."""

    kl_coef: float = 0.03
    """β_ref."""
    kl_estimator: KLEstimator = KLEstimator.K1
    """The official code's plain log-ratio mean(log π_θ − log π_ref)."""
    clip_base: float = 0.2
    """ε_base."""
    clip_min: float = 0.05
    clip_max: float = 0.4
    clip_sigma: float = 1.0
    """α_var, weight of σ_p in the denominator."""
    clip_kl: float = 0.5
    """γ, weight of KL_ema."""
    clip_vote: float = 0.1
    """δ, weight of H_vote in the numerator."""
    clip_skew: float = 0.0
    """ζ, weight of |κ|."""
    entropy_momentum: float = 0.01
    """α of H_ref's EMA."""
    kl_momentum: float = 0.1
    """Share of each update's step_KL in KL_ema."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.clip_min <= self.clip_base <= self.clip_max < 1:
            raise ValueError(
                f"need 0 < clip_min <= clip_base <= clip_max < 1, got {self.clip_min}, "
                f"{self.clip_base}, {self.clip_max}"
            )
        for name in ("entropy_momentum", "kl_momentum"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")


def _group_means(
    values: torch.Tensor, mask_float: torch.Tensor, groups: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-row mean of ``values`` over its group's valid tokens [B], group index of each row [B])."""
    _, idx = torch.unique(groups, return_inverse=True)
    idx = idx.to(values.device)
    n = int(idx.max().item()) + 1 if idx.numel() else 0
    sums = torch.zeros(n, dtype=torch.float64, device=values.device).index_add_(
        0, idx, (values.to(torch.float64) * mask_float).sum(dim=1)
    )
    tokens = torch.zeros(n, dtype=torch.float64, device=values.device).index_add_(
        0, idx, mask_float.to(torch.float64).sum(dim=1)
    )
    return (sums / tokens.clamp(min=1.0))[idx], idx


def _agpo_loss(
    x: LossInputs, p: AGPOParams, prepared: Mapping[str, torch.Tensor] | None, out: MetricBuffer | None
) -> torch.Tensor:
    assert x.groups is not None
    if x.entropy is None:
        raise ValueError("agpo needs the policy's token entropy (H_old): pass entropy= (the trainer does)")
    missing = [k for k in PROBE_KEYS if k not in x.row_data]
    if missing:
        raise ValueError(
            f"agpo needs the probe statistics {', '.join(missing)} in row_data: run it with "
            "the agpo sampling controller (sampling.controller=agpo)"
        )
    with torch.no_grad():
        h_old, idx = _group_means(x.entropy, x.mask_float, x.groups)
        kl_step, _ = _group_means(-x.log_rho_detached, x.mask_float, x.groups)
        live = x.mask.any(dim=1)
        h_old_mean = float(h_old[live].mean().item()) if bool(live.any()) else 0.0
        h_ref = float(x.state.get("agpo/entropy_ref", h_old_mean))
        kl_ema = float(x.state.get("agpo/kl_ema", 0.0))
        rd = {k: v.to(x.rho.device, torch.float64) for k, v in x.row_data.items()}
        eps = clip_eps(
            h_old, h_ref, rd["probe_vote_entropy"], rd["probe_sigma"], kl_ema, rd["probe_skewness"], p
        )
        eps = eps.to(x.rho.dtype)[:, None]
        a = x.advantages[:, None]
        low = torch.where(a > 0, torch.zeros_like(a), 1.0 - eps)
        high = torch.where(a > 0, 1.0 + eps, torch.full_like(a, math.inf))
    loss = clamped_surrogate(x.rho, low, high, x.mask_float * (a * x.scale))
    if out is not None:
        with torch.no_grad():
            first = torch.zeros(
                int(idx.max().item()) + 1 if idx.numel() else 0, dtype=torch.bool, device=idx.device
            )
            rows = []
            for i in range(idx.numel()):  # one row per live group
                if bool(live[i]) and not bool(first[idx[i]]):
                    first[idx[i]] = True
                    rows.append(i)
            sel = torch.tensor(rows, dtype=torch.long, device=eps.device)
            e = eps[sel, 0].double() if rows else eps.new_zeros(1).double()
            temp = rd.get("temperature", torch.ones_like(h_old))[sel] if rows else h_old.new_ones(1)
            out.add("agpo/clip_eps_mean", float(e.mean()))
            out.add("agpo/clip_eps_min", float(e.min()))
            out.add("agpo/clip_eps_max", float(e.max()))
            out.add("agpo/temperature_mean", float(temp.mean()))
            out.add("agpo/temperature_min", float(temp.min()))
            out.add("agpo/temperature_max", float(temp.max()))
            out.add("agpo/entropy_old", float(h_old[sel].mean()) if rows else 0.0)
            out.add("agpo/kl_step", float(kl_step[sel].clamp(min=0).mean()) if rows else 0.0)
            out.add("agpo/entropy_ref", h_ref)
            out.add("agpo/kl_ema", kl_ema)
    return loss


def _denominator(
    mask: torch.Tensor, p: AGPOParams, groups: torch.Tensor | None, rewards: torch.Tensor | None
) -> float:
    if groups is None:
        raise ValueError("agpo averages per prompt: pass groups=")
    return group_count(mask, groups)


def _scale(
    mask_float: torch.Tensor, groups: torch.Tensor | None, denominator: float, p: AGPOParams
) -> torch.Tensor:
    assert groups is not None
    return group_token_scale(mask_float, groups, denominator, dtype=mask_float.dtype)


def _state(state: Mapping[str, float], metrics: Mapping[str, float], p: AGPOParams) -> dict[str, float]:
    """H_ref ← EMA of the update's mean H_old (first: H_old); KL_ema ← EMA of step_KL (first: 0)."""
    out = dict(state)
    if "agpo/entropy_old" in metrics:
        h = metrics["agpo/entropy_old"]
        old = state.get("agpo/entropy_ref")
        out["agpo/entropy_ref"] = (
            h if old is None else p.entropy_momentum * h + (1 - p.entropy_momentum) * old
        )
    if "agpo/kl_step" in metrics:
        out["agpo/kl_ema"] = p.kl_momentum * metrics["agpo/kl_step"] + (1 - p.kl_momentum) * state.get(
            "agpo/kl_ema", 0.0
        )
    return out


AGPO: Objective[AGPOParams] = Objective(
    name="agpo",
    params_type=AGPOParams,
    loss_fn=_agpo_loss,
    summary="AGPO: per-prompt adaptive clip from probe statistics, reference KL (k1)",
    uses_groups=True,
    denominator_fn=_denominator,
    scale_fn=_scale,
    state_fn=_state,
    needs_entropy=True,
)
