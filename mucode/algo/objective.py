"""The :class:`Objective` wrapper every policy loss shares: input checks, ratios, denominator, metrics.

An objective is a pure function of tensors plus a frozen, typed params dataclass. This module does
the work common to all of them once (shape checks, log-ratio, ρ, the aggregation row scale, the
ratio diagnostics) and hands a :class:`LossInputs` to the objective's own ``loss_fn``, which returns
the scalar loss and adds its own metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Generic, TypeVar

import torch

from mucode.algo.aggregation import row_scale
from mucode.algo.metrics import MetricBuffer, add_ratio_diagnostics
from mucode.algo.modes import LossAggregation, parse_mode
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "aggregation", parse_mode(LossAggregation, self.aggregation, "aggregation"))
        if self.max_abs_log_ratio is not None and not self.max_abs_log_ratio > 0:
            raise ValueError(f"max_abs_log_ratio must be > 0 or None, got {self.max_abs_log_ratio}")


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


LossFn = Callable[[LossInputs, P, Mapping[str, torch.Tensor] | None, MetricBuffer | None], torch.Tensor]
PrepareFn = Callable[[LossInputs, P], dict[str, torch.Tensor]]


@dataclass(frozen=True)
class Objective(Generic[P]):
    """A registered policy objective. Call it like a function; see :mod:`mucode.algo` for the API."""

    name: str
    params_type: type[P]
    loss_fn: LossFn[P] = field(repr=False)
    prepare_fn: PrepareFn[P] | None = field(default=None, repr=False)
    summary: str = ""

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
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss (scalar, to minimize) and a flat dict of namespaced metrics (empty if ``metrics=False``)."""
        params = self._check_params(params)
        inputs = self._inputs(logprobs, behaviour_logprobs, advantages, response_mask, params, denominator)
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
            inputs = replace(inputs, **counts)
        if prepared is not None:
            self._check_prepared(prepared, inputs.mask.shape[0])
        loss = self.loss_fn(inputs, params, prepared, buf)
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
        inputs = self._inputs(logprobs.detach(), behaviour_logprobs, advantages, response_mask, params, None)
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

    @staticmethod
    def _inputs(
        logprobs: torch.Tensor,
        behaviour_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        params: ObjectiveParams,
        denominator: float | None,
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
        scale = row_scale(
            mask_float, params.aggregation, denominator, norm_length=params.norm_length, dtype=rho.dtype
        )
        return LossInputs(
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
