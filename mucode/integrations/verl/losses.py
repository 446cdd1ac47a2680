"""verl policy-loss adapters for ``mu_grpo``, ``m2po`` and ``offpolicy_grpo`` (verl 0.9.1's ``PolicyLossFn``).

verl calls a registered policy loss per micro-batch with keywords ``old_log_prob, log_prob,
advantages, response_mask, loss_agg_mode, config, rollout_is_weights`` and expects
``(loss, metrics)``. These adapters translate that call into :mod:`mucode.algo` and nothing else:
the maths is mucode's, so the verl run and mucode's own trainer optimize the same objective.

Parameters (verl's actor config has no fields for the veto, and its dataclass configs reject
unknown keys, so those come from environment variables; see docs/verl.md):

=================  =============================================  ============================
mucode parameter   source                                         default
=================  =============================================  ============================
U (mu_grpo)        ``1 + actor.clip_ratio_high``                   5.0 if the key is absent
veto scope         ``MUCODE_VETO_SCOPE``                           ``sequence``
τ_c                ``MUCODE_VETO_THRESHOLD``                       1e-4
τ_M2 (m2po)        ``MUCODE_M2PO_THRESHOLD``                       0.04
M2PO mode          ``MUCODE_M2PO_MODE``                            ``greedy_mask``
aggregation        verl's ``loss_agg_mode`` argument               (verl's default token-mean)
L (sum-norm)       ``actor.loss_scale_factor``                     the micro-batch's padded T
=================  =============================================  ============================

Deliberate differences from verl's ``vanilla`` loss:

- ``clip_ratio_c`` (dual-clip) is never applied and ``clip_ratio_low`` is ignored by ``mu_grpo``:
  for A<0 its term is exactly ρA.
- The denominator comes from ``config.global_batch_info`` (``global_batch_size`` responses /
  ``batch_num_tokens`` tokens over ``dp_size`` ranks), so vetoed responses are counted, as in
  mucode; verl's own local fallback drops fully masked rows, ours does not.
- verl's ``rollout_is_weights`` are rejected (the ratio is already π_θ/β); ``token-sum`` and
  ``seq-mean-token-sum`` aggregation are not offered.
- M2PO's selection runs per micro-batch (verl offers no minibatch-wide hook), as the authors'
  code does; mucode's own trainer can apply it to the whole minibatch.
- ``offpolicy_grpo``: PPO-clip with ε from ``actor.clip_ratio_low``/``clip_ratio_high``; the rows of
  zero-variance groups are recognised by an advantage of exactly 0 (verl's GRPO gives those groups
  A = 0) and leave the loss, but verl's global denominator still counts them. Its KL term is verl's
  own KL loss (``use_kl_loss``), not this adapter's; the reference is never reset.
- ``conspo``, ``agpo`` and the replay composer have no adapter (``mucode verl-config`` says why).
- Metrics are returned as ``actor/<mucode key>`` for the ``mean``-type keys of
  :data:`mucode.algo.METRICS` (verl averages them over micro-batches), plus ``actor/pg_clipfrac``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import Any

import torch

from mucode.algo import (
    GRPO,
    M2PO,
    METRICS,
    MU_GRPO,
    GRPOParams,
    LossAggregation,
    M2POParams,
    MuGRPOParams,
    Objective,
    ObjectiveParams,
    Reduce,
)

__all__ = [
    "m2po_params",
    "m2po_policy_loss",
    "mu_grpo_params",
    "mu_grpo_policy_loss",
    "offpolicy_grpo_params",
    "offpolicy_grpo_policy_loss",
]

logger = logging.getLogger(__name__)

_SUPPORTED_AGGREGATIONS = {mode.value: mode for mode in LossAggregation}


def _config_value(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    value = config.get(key, default)  # verl's BaseConfig and OmegaConf's DictConfig both have .get
    return default if value is None else value


def _aggregation(loss_agg_mode: str) -> LossAggregation:
    try:
        return _SUPPORTED_AGGREGATIONS[loss_agg_mode]
    except KeyError:
        raise ValueError(
            f"actor.loss_agg_mode={loss_agg_mode!r} is not supported by mucode's losses; "
            f"use one of {', '.join(_SUPPORTED_AGGREGATIONS)}"
        ) from None


def _env(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


def _env_float(name: str, default: str) -> float:
    """A number from the environment; the error names the variable and the paper's value."""
    value = _env(name, default)
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number (paper: {default})") from None


def mu_grpo_params(config: Any, loss_agg_mode: str, response_length: int) -> MuGRPOParams:
    """MuGRPOParams from verl's actor config, the call's ``loss_agg_mode`` and the environment."""
    clip_high = _config_value(config, "clip_ratio_high", None)
    if clip_high is None:
        clip_high = _config_value(config, "clip_ratio", None)
    upper = 5.0 if clip_high is None else 1.0 + float(clip_high)
    _warn_if_ppo_upper(upper)
    tau = _env_float("MUCODE_VETO_THRESHOLD", "1e-4")
    return MuGRPOParams(
        aggregation=_aggregation(loss_agg_mode),
        norm_length=int(_config_value(config, "loss_scale_factor", response_length)),
        ratio_upper=upper,
        veto_scope=_env("MUCODE_VETO_SCOPE", "sequence"),  # type: ignore[arg-type]  # parsed by the params
        veto_threshold=tau,
    )


def m2po_params(config: Any, loss_agg_mode: str, response_length: int) -> M2POParams:
    """M2POParams from the call's ``loss_agg_mode`` and the environment."""
    tau = _env_float("MUCODE_M2PO_THRESHOLD", "0.04")
    return M2POParams(
        aggregation=_aggregation(loss_agg_mode),
        norm_length=int(_config_value(config, "loss_scale_factor", response_length)),
        m2_threshold=tau,
        mode=_env("MUCODE_M2PO_MODE", "greedy_mask"),  # type: ignore[arg-type]  # parsed by the params
    )


@functools.lru_cache(maxsize=8)
def _warn_if_ppo_upper(upper: float) -> None:
    if upper < 2.0:
        logger.warning(
            "mu_grpo runs with ratio clip [0, %.3g] from actor.clip_ratio_high; the paper uses [0, 5]: "
            "set actor_rollout_ref.actor.clip_ratio_high=4.0",
            upper,
        )


def per_response_advantages(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[B] advantage of each response from verl's [B, T] token advantages (constant per response)."""
    if advantages.dim() == 1:
        return advantages
    mask = response_mask.to(advantages.dtype)
    row = (advantages * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    spread = (
        ((advantages - row[:, None]).abs() * mask).max() if advantages.numel() else advantages.new_zeros(())
    )
    if spread.item() > 1e-5 * (1.0 + row.abs().max().item()):
        raise ValueError(
            "mucode's losses need one advantage per response (outcome advantages such as "
            "algorithm.adv_estimator=grpo); these advantages vary along the response"
        )
    return row


def _denominator(config: Any, aggregation: LossAggregation, norm_length: int) -> float | None:
    info: Mapping[str, Any] = _config_value(config, "global_batch_info", {}) or {}
    dp_size = float(info.get("dp_size") or 1)
    if aggregation is LossAggregation.TOKEN_MEAN:
        tokens = info.get("batch_num_tokens")
        return None if tokens is None else float(tokens) / dp_size
    responses = info.get("global_batch_size")
    if responses is None:
        return None
    if aggregation is LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM:
        return float(responses) * norm_length / dp_size
    return float(responses) / dp_size


def _verl_metrics(metrics: Mapping[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"actor/{key}": value for key, value in metrics.items() if METRICS[key].reduce is Reduce.MEAN
    }
    out["actor/pg_clipfrac"] = metrics["stale/clip_frac_low"] + metrics["stale/clip_frac_high"]
    return out


def _run(
    objective: Objective[Any],
    params: ObjectiveParams,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any,
    rollout_is_weights: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    if rollout_is_weights is not None:
        raise ValueError(
            f"{objective.name} does not take verl's rollout IS weights (its ratio is already π_θ/β); "
            "set algorithm.rollout_correction.rollout_is=null"
        )
    denominator = _denominator(config, params.aggregation, params.norm_length or response_mask.shape[-1])
    loss, metrics = objective(
        log_prob,
        old_log_prob,
        per_response_advantages(advantages, response_mask),
        response_mask,
        params,
        denominator=denominator,
    )
    return loss, _verl_metrics(metrics)


def mu_grpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy loss ``mu_grpo``: mucode.algo's μ-GRPO with ``old_log_prob`` as behaviour log-probs."""
    params = mu_grpo_params(config, loss_agg_mode, response_mask.shape[-1])
    return _run(
        MU_GRPO, params, old_log_prob, log_prob, advantages, response_mask, config, rollout_is_weights
    )


def m2po_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy loss ``m2po``: mucode.algo's M2PO, selection within the micro-batch."""
    params = m2po_params(config, loss_agg_mode, response_mask.shape[-1])
    return _run(M2PO, params, old_log_prob, log_prob, advantages, response_mask, config, rollout_is_weights)


def offpolicy_grpo_params(config: Any, loss_agg_mode: str, response_length: int) -> GRPOParams:
    """PPO-clip params from verl's ``clip_ratio_low``/``clip_ratio_high`` (0.2 when absent); no KL here."""
    low = float(_config_value(config, "clip_ratio_low", None) or _config_value(config, "clip_ratio", 0.2))
    high = float(_config_value(config, "clip_ratio_high", None) or _config_value(config, "clip_ratio", 0.2))
    return GRPOParams(
        aggregation=_aggregation(loss_agg_mode),
        norm_length=int(_config_value(config, "loss_scale_factor", response_length)),
        clip_low=low,
        clip_high=high,
    )


def offpolicy_grpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy loss ``offpolicy_grpo``: PPO-clip, rows with advantage exactly 0 (zero-variance groups) masked."""
    params = offpolicy_grpo_params(config, loss_agg_mode, response_mask.shape[-1])
    row_adv = per_response_advantages(advantages, response_mask)
    mask = response_mask.bool() & (row_adv != 0)[:, None]
    return _run(GRPO, params, old_log_prob, log_prob, advantages, mask, config, rollout_is_weights)
