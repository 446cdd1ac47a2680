"""The :class:`Objective` wrapper every policy loss shares: input checks, ratios, denominator, metrics.

An objective is a pure function of tensors plus a frozen, typed params dataclass. This module does
the work common to all of them once (shape checks, log-ratio, ρ, the aggregation row scale, the
ratio diagnostics) and hands a :class:`LossInputs` to the objective's own ``loss_fn``, which returns
the scalar loss and adds its own metrics.

Extension points every objective has (fields of :class:`ObjectiveParams`, so plug-ins get them too):

- ``kl_coef`` β > 0 adds β · KL(π_θ ‖ π_ref) per token (``kl_estimator`` k3 by default, or k1),
  aggregated with the objective's own row scale; the call must then pass ``ref_logprobs``. Metric
  ``kl/ref`` (logged whenever ``ref_logprobs`` is given).
- ``mask_zero_variance``: rows whose group's rewards are all equal leave the loss and the
  denominator (:meth:`Objective.denominator` applies the same rule to the minibatch); the call must
  pass ``groups`` and ``rewards``. Metric ``groups/zero_variance_frac``.

Inputs beyond the tokens, for objectives that need them (all optional): ``groups`` and ``rewards``
([B]; a call holds whole groups), ``progress`` (training progress in [0, 1], for schedules),
``row_data`` (named [B] per-response tensors, e.g. a sampling controller's per-prompt statistics)
and ``state`` (floats the trainer keeps across updates; ``Objective.state_fn`` says how they change).
An objective may replace the denominator (``denominator_fn``) and the row scale (``scale_fn``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Generic, TypeVar

import torch

from mucode.algo.aggregation import loss_denominator, row_scale
from mucode.algo.groups import zero_variance_rows
from mucode.algo.metrics import MetricBuffer, add_ratio_diagnostics, frac
from mucode.algo.modes import KLEstimator, LossAggregation, parse_mode
from mucode.algo.ratios import DEFAULT_MAX_ABS_LOG_RATIO, log_ratio, ratio

__all__ = ["LossInputs", "Objective", "ObjectiveParams"]


@dataclass(frozen=True)
class ObjectiveParams:
    """Fields every objective has."""

    aggregation: LossAggregation = LossAggregation.SEQ_MEAN_TOKEN_MEAN
    """How per-token losses become one scalar (see mucode.algo.aggregation)."""
    norm_length: int | None = None
    """L of seq-mean-token-sum-norm; None uses the padded length of the mask."""
    max_abs_log_ratio: float | None = DEFAULT_MAX_ABS_LOG_RATIO
    """Clamp of log ρ before exp (numerical guard); None disables it."""
    kl_coef: float = 0.0
    """β of the reference-policy KL term β·KL(π_θ ‖ π_ref); 0 (default) turns it and the reference off."""
    kl_estimator: KLEstimator = KLEstimator.K3
    """Per-token KL estimate: k3 (exp(d) − d − 1, d = log π_ref − log π_θ) or k1 (log π_θ − log π_ref)."""
    mask_zero_variance: bool = False
    """Take groups whose rewards are all equal out of the loss and out of the denominator."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "aggregation", parse_mode(LossAggregation, self.aggregation, "aggregation"))
        object.__setattr__(self, "kl_estimator", parse_mode(KLEstimator, self.kl_estimator, "kl_estimator"))
        if self.max_abs_log_ratio is not None and not self.max_abs_log_ratio > 0:
            raise ValueError(f"max_abs_log_ratio must be > 0 or None, got {self.max_abs_log_ratio}")
        if not self.kl_coef >= 0:
            raise ValueError(f"kl_coef (β) must be >= 0, got {self.kl_coef}")


P = TypeVar("P", bound=ObjectiveParams)


@dataclass(frozen=True)
class LossInputs:
    """What an objective's ``loss_fn`` receives (all [B, T] unless noted)."""

    log_rho: torch.Tensor
    """log π_θ − b, differentiable, unclamped."""
    rho: torch.Tensor
    """ρ after the ±max_abs_log_ratio clamp, differentiable."""
    log_rho_detached: torch.Tensor
    """``log_rho.detach()``: for masks and diagnostics (never differentiated)."""
    mask: torch.Tensor
    """bool response mask."""
    mask_float: torch.Tensor
    """the response mask as 0/1 in ρ's dtype."""
    advantages: torch.Tensor
    """[B] per-response advantages, in ρ's dtype."""
    scale: torch.Tensor
    """[B, 1] aggregation row scale s_i (no gradient)."""
    tokens: torch.Tensor | None = None
    """scalar number of valid tokens (set when metrics are on)."""
    responses: torch.Tensor | None = None
    """scalar number of responses with a valid token (set when metrics are on)."""
    denominator: float = 1.0
    """D, the minibatch denominator this call's scale uses (this call's own when none was passed)."""
    logprobs: torch.Tensor | None = None
    """[B, T] log π_θ in at least float32, differentiable (for objectives without a ratio, e.g. ConSPO)."""
    groups: torch.Tensor | None = None
    """[B] group id of each response (when the caller passes groups)."""
    rewards: torch.Tensor | None = None
    """[B] reward of each response (when the caller passes them)."""
    progress: float = 0.0
    """Training progress λ ∈ [0, 1] (update / total updates), for schedules."""
    entropy: torch.Tensor | None = None
    """[B, T] entropy of π_θ (detached), when the caller computed it."""
    row_data: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Named [B] per-response inputs (e.g. a sampling controller's per-prompt statistics)."""
    state: Mapping[str, float] = field(default_factory=dict)
    """Floats the trainer keeps across updates for this objective (see ``Objective.state_fn``)."""


LossFn = Callable[[LossInputs, P, Mapping[str, torch.Tensor] | None, MetricBuffer | None], torch.Tensor]
PrepareFn = Callable[[LossInputs, P], dict[str, torch.Tensor]]
DenominatorFn = Callable[[torch.Tensor, P, "torch.Tensor | None", "torch.Tensor | None"], float]
"""(response mask [B, T] bool after zero-variance masking, params, groups, rewards) → the minibatch denominator."""
ScaleFn = Callable[[torch.Tensor, "torch.Tensor | None", float, P], torch.Tensor]
"""(mask_float [B, T], groups, denominator, params) → [B, 1] row scale (no gradient)."""
StateFn = Callable[[Mapping[str, float], Mapping[str, float], P], dict[str, float]]
"""(state before the update, the update's metrics, params) → the state for the next update."""


@dataclass(frozen=True)
class Objective(Generic[P]):
    """A registered policy objective. Call it like a function; see :mod:`mucode.algo` for the API."""

    name: str
    params_type: type[P]
    loss_fn: LossFn[P] = field(repr=False)
    prepare_fn: PrepareFn[P] | None = field(default=None, repr=False)
    summary: str = ""
    uses_groups: bool = False
    """The loss reads ``groups`` and ``rewards`` (the trainer then packs whole groups per micro-batch)."""
    denominator_fn: DenominatorFn[P] | None = field(default=None, repr=False)
    """Replaces :func:`mucode.algo.loss_denominator` (e.g. a number of groups)."""
    scale_fn: ScaleFn[P] | None = field(default=None, repr=False)
    """Replaces the aggregation's row scale."""
    state_fn: StateFn[P] | None = field(default=None, repr=False)
    """How the trainer-held ``state`` changes after each update (EMAs); None: the objective has none."""
    needs_entropy: bool = False
    """The loss reads ``entropy`` (the trainer computes it even with ``train.log_entropy=false``)."""

    def needs_groups(self, params: P) -> bool:
        """Whether a call with ``params`` must get ``groups`` and ``rewards`` (and hold whole groups)."""
        return self.uses_groups or params.mask_zero_variance

    def denominator(
        self,
        response_mask: torch.Tensor,
        params: P | None = None,
        *,
        groups: torch.Tensor | None = None,
        rewards: torch.Tensor | None = None,
    ) -> float:
        """The minibatch denominator to pass to every micro-batch call: zero-variance masking applied
        (if on), then the objective's ``denominator_fn`` or :func:`mucode.algo.loss_denominator`."""
        params = self._check_params(params)
        mask = _masked(response_mask.to(torch.bool), params, groups, rewards)
        if self.denominator_fn is not None:
            return float(self.denominator_fn(mask, params, groups, rewards))
        return loss_denominator(mask, params.aggregation, norm_length=params.norm_length)

    @property
    def needs_minibatch_pass(self) -> bool:
        """True if :meth:`prepare` must see the whole minibatch before micro-batching (M2PO)."""
        return self.prepare_fn is not None

    def default_params(self) -> P:
        return self.params_type()

    def param_names(self) -> tuple[str, ...]:
        """The fields of ``params_type``: the keys a config may set for this objective."""
        return tuple(f.name for f in fields(self.params_type))

    def __call__(
        self,
        logprobs: torch.Tensor,
        behaviour_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        params: P | None = None,
        *,
        denominator: float | None = None,
        entropy: torch.Tensor | None = None,
        prepared: Mapping[str, torch.Tensor] | None = None,
        metrics: bool = True,
        groups: torch.Tensor | None = None,
        rewards: torch.Tensor | None = None,
        progress: float = 0.0,
        ref_logprobs: torch.Tensor | None = None,
        row_data: Mapping[str, torch.Tensor] | None = None,
        state: Mapping[str, float] | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss (scalar, to minimize) and a flat dict of namespaced metrics (empty if ``metrics=False``)."""
        params = self._check_params(params)
        if self.needs_groups(params) and (groups is None or rewards is None):
            why = "its loss reads groups" if self.uses_groups else "mask_zero_variance is on"
            raise ValueError(f"objective {self.name!r} needs groups= and rewards= ([B] each): {why}")
        if params.kl_coef > 0 and ref_logprobs is None:
            raise ValueError(
                f"objective {self.name!r} has kl_coef={params.kl_coef}: pass ref_logprobs= "
                "(log π_ref of the sampled tokens, [B, T])"
            )
        if not 0.0 <= progress <= 1.0:
            raise ValueError(f"progress must be in [0, 1] (update / total updates), got {progress}")
        mask = _masked(response_mask.to(torch.bool), params, groups, rewards)
        inputs = self._inputs(
            logprobs, behaviour_logprobs, advantages, mask, params, denominator, groups, rewards
        )
        inputs = replace(
            inputs,
            groups=groups,
            rewards=None if rewards is None else rewards.detach(),
            progress=float(progress),
            entropy=None if entropy is None else entropy.detach(),
            row_data=dict(row_data or {}),
            state=dict(state or {}),
        )
        buf: MetricBuffer | None = None
        if metrics:
            buf = MetricBuffer()
            counts = add_ratio_diagnostics(
                buf,
                inputs.log_rho_detached,
                inputs.rho.detach(),
                inputs.mask,
                inputs.mask_float,
                inputs.advantages,
                entropy,
                params.max_abs_log_ratio,
            )
            inputs = replace(inputs, tokens=counts["tokens"], responses=counts["responses"])
        if prepared is not None:
            self._check_prepared(prepared, inputs.mask.shape[0])
        loss = self.loss_fn(inputs, params, prepared, buf)
        if ref_logprobs is not None:
            loss = loss + _reference_term(inputs, ref_logprobs, params, buf)
        if buf is not None and groups is not None and rewards is not None:
            _group_metrics(buf, response_mask.to(torch.bool), groups, rewards)
        if buf is None:
            return loss, {}
        buf.add("loss/policy", loss.detach())
        return loss, buf.to_dict()

    @torch.no_grad()
    def prepare(
        self,
        logprobs: torch.Tensor,
        behaviour_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        params: P | None = None,
    ) -> dict[str, torch.Tensor]:
        """Minibatch-wide state (tensors with leading dim B) to slice by rows and pass as ``prepared``.

        Empty for objectives whose masks are per response (``grpo``, ``mu_grpo``).
        """
        params = self._check_params(params)
        if self.prepare_fn is None:
            return {}
        inputs = self._inputs(
            logprobs.detach(),
            behaviour_logprobs,
            advantages,
            response_mask.to(torch.bool),
            params,
            None,
            None,
            None,
        )
        return self.prepare_fn(inputs, params)

    def _check_params(self, params: P | None) -> P:
        if params is None:
            return self.default_params()
        if not isinstance(params, self.params_type):
            raise TypeError(
                f"objective {self.name!r} takes {self.params_type.__name__}, got {type(params).__name__}; "
                f"build it with get_objective({self.name!r}).params_type(...)"
            )
        return params

    @staticmethod
    def _check_prepared(prepared: Mapping[str, torch.Tensor], batch: int) -> None:
        for key, value in prepared.items():
            if value.shape[0] != batch:
                raise ValueError(
                    f"prepared[{key!r}] has leading dim {value.shape[0]} but the call has {batch} responses; "
                    "slice every prepared tensor with the same rows as the micro-batch"
                )

    def _inputs(
        self,
        logprobs: torch.Tensor,
        behaviour_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        params: P,
        denominator: float | None,
        groups: torch.Tensor | None,
        rewards: torch.Tensor | None,
    ) -> LossInputs:
        if logprobs.dim() != 2:
            raise ValueError(f"logprobs must be [B, T], got shape {tuple(logprobs.shape)}")
        if response_mask.shape != logprobs.shape:
            raise ValueError(
                f"response_mask {tuple(response_mask.shape)} must match logprobs {tuple(logprobs.shape)}"
            )
        if advantages.shape != logprobs.shape[:1]:
            raise ValueError(
                f"advantages must be [B] (one value per response), got {tuple(advantages.shape)} for "
                f"B={logprobs.shape[0]}; token-level advantages are not supported"
            )
        log_rho = log_ratio(logprobs, behaviour_logprobs)
        rho = ratio(log_rho, params.max_abs_log_ratio)
        mask = response_mask.to(torch.bool)
        mask_float = mask.to(rho.dtype)
        if denominator is None:
            denominator = self.denominator(mask, params, groups=groups, rewards=rewards) or 1.0
        if self.scale_fn is not None:
            if not denominator > 0:
                raise ValueError(
                    f"denominator must be > 0, got {denominator}; compute it with objective.denominator()"
                )
            scale = self.scale_fn(mask_float, groups, denominator, params).to(rho.dtype)
        else:
            scale = row_scale(
                mask_float, params.aggregation, denominator, norm_length=params.norm_length, dtype=rho.dtype
            )
        return LossInputs(
            denominator=float(denominator),
            logprobs=logprobs.to(rho.dtype),
            log_rho=log_rho,
            rho=rho,
            log_rho_detached=log_rho.detach(),
            mask=mask,
            mask_float=mask_float,
            advantages=advantages.detach().to(rho.dtype),
            scale=scale,
        )


def clamped_surrogate(
    rho: torch.Tensor, low: torch.Tensor, high: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """−Σ clamp(ρ, low, high) · weights — the one differentiable expression of every objective here.

    ``low``/``high`` are [B, 1] per-response bounds, ``weights`` [B, T] = keep · A · s (no gradient).
    The PPO form min(ρA, clip(ρ, l, h)A) equals A·clamp(ρ, max=h) for A>0 and A·clamp(ρ, min=l)
    for A<0, which is how the objectives build ``low``/``high``.
    """
    return -dot(torch.clamp(rho, min=low, max=high), weights)


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Σ a·b over all elements as one fused, differentiable pass (no [B, T] temporary)."""
    return torch.dot(a.reshape(-1), b.reshape(-1))


def signed_bounds(
    advantages: torch.Tensor, low_neg: float, high_pos: float, high_neg: float = float("inf")
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, 1] (low, high) bounds: A>0 rows get (0, high_pos); A≤0 rows get (low_neg, high_neg)."""
    a = advantages[:, None]
    pos = a > 0
    low = torch.where(pos, torch.zeros_like(a), torch.full_like(a, low_neg))
    high = torch.where(pos, torch.full_like(a, high_pos), torch.full_like(a, high_neg))
    return low, high


def _masked(
    mask: torch.Tensor, params: ObjectiveParams, groups: torch.Tensor | None, rewards: torch.Tensor | None
) -> torch.Tensor:
    """``mask`` with the rows of zero-variance groups removed, when ``mask_zero_variance`` is on."""
    if not params.mask_zero_variance or groups is None or rewards is None:
        return mask
    flat = zero_variance_rows(rewards.to(mask.device), groups.to(mask.device))
    return mask & ~flat[:, None]


def _reference_term(
    x: LossInputs, ref_logprobs: torch.Tensor, p: ObjectiveParams, out: MetricBuffer | None
) -> torch.Tensor:
    """β · Σ kl_t · s_i over valid tokens, with the objective's row scale; logs ``kl/ref``."""
    assert x.logprobs is not None
    if ref_logprobs.shape != x.logprobs.shape:
        raise ValueError(
            f"ref_logprobs {tuple(ref_logprobs.shape)} must match logprobs {tuple(x.logprobs.shape)}"
        )
    d = ref_logprobs.detach().to(x.logprobs.dtype) - x.logprobs
    kl = (
        torch.exp(d.clamp(max=p.max_abs_log_ratio or 20.0)) - d - 1.0
        if p.kl_estimator is KLEstimator.K3
        else -d
    )
    if out is not None:
        assert x.tokens is not None
        out.add("kl/ref", frac(dot(kl.detach(), x.mask_float), x.tokens))
    if p.kl_coef == 0:
        return kl.new_zeros(())
    return p.kl_coef * dot(kl, x.mask_float * x.scale)


@torch.no_grad()
def _group_metrics(
    out: MetricBuffer, mask: torch.Tensor, groups: torch.Tensor, rewards: torch.Tensor
) -> None:
    live = mask.any(dim=1)
    if not bool(live.any()):
        out.add("groups/count", 0.0)
        out.add("groups/zero_variance", 0.0)
        out.add("groups/zero_variance_frac", 0.0)
        return
    g, r = groups.to(mask.device)[live], rewards.to(mask.device)[live]
    flat = zero_variance_rows(r, g)
    ids = torch.unique(g)
    flat_groups = torch.unique(g[flat]).numel()
    out.add("groups/count", float(ids.numel()))
    out.add("groups/zero_variance", float(flat_groups))
    out.add("groups/zero_variance_frac", flat_groups / ids.numel())
