"""Loss aggregation with an explicit denominator, so micro-batching cannot change the loss.

Every objective computes ``loss = −Σ_{i,t} w_{i,t} · objective_{i,t}`` where the per-token weight is
``w_{i,t} = keep_{i,t} · s_i`` and the row scale ``s_i`` comes from the aggregation mode and ONE
number, the *denominator*, that describes the whole minibatch:

=========================  ==========================================  ==========================
mode                       s_i                                         denominator (minibatch)
=========================  ==========================================  ==========================
seq-mean-token-mean        1 / (T_i · D)                               D = responses with T_i > 0
token-mean                 1 / D                                       D = Σ_i T_i
seq-mean-token-sum-norm    1 / D                                       D = responses · L
=========================  ==========================================  ==========================

T_i is the number of valid tokens of response i (its ``response_mask``), *not* the number left after
a veto or an M2PO mask: a vetoed response still counts in D and its surviving tokens are still
divided by its full length. verl's ``seq-mean-token-mean`` instead drops fully masked
responses from D; here nothing is dropped unless the caller removes the response from
``response_mask`` itself. L is ``norm_length`` (default: the padded length T of the mask given).

Call :func:`loss_denominator` once on the whole minibatch's ``response_mask`` and pass the number to
every micro-batch call; the micro-batch losses then sum to the minibatch loss exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from mucode.algo.modes import LossAggregation, parse_mode

__all__ = ["loss_denominator", "row_scale"]


@dataclass(frozen=True)
class _Aggregation:
    denominator: Callable[[torch.Tensor, int | None], float]
    """(response_mask [B, T] bool, norm_length) → the minibatch denominator."""
    per_token_length: bool
    """True when each row is also divided by its own number of valid tokens."""


def _responses(mask: torch.Tensor, norm_length: int | None) -> float:
    return float(mask.any(dim=-1).sum().item())


def _tokens(mask: torch.Tensor, norm_length: int | None) -> float:
    return float(mask.sum().item())


def _responses_times_length(mask: torch.Tensor, norm_length: int | None) -> float:
    length = mask.shape[-1] if norm_length is None else norm_length
    return float(mask.any(dim=-1).sum().item()) * float(length)


_AGGREGATIONS: dict[LossAggregation, _Aggregation] = {
    LossAggregation.SEQ_MEAN_TOKEN_MEAN: _Aggregation(_responses, per_token_length=True),
    LossAggregation.TOKEN_MEAN: _Aggregation(_tokens, per_token_length=False),
    LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM: _Aggregation(_responses_times_length, per_token_length=False),
}


def loss_denominator(
    response_mask: torch.Tensor,
    aggregation: LossAggregation | str,
    *,
    norm_length: int | None = None,
) -> float:
    """The denominator D of ``aggregation`` for a minibatch with this [B, T] ``response_mask``.

    ``norm_length`` is L of ``seq-mean-token-sum-norm`` (default: ``response_mask.shape[-1]``; set it
    to a constant such as the maximum response length so it does not depend on padding).
    """
    mode = parse_mode(LossAggregation, aggregation, "aggregation")
    if norm_length is not None and norm_length <= 0:
        raise ValueError(f"norm_length must be a positive number of tokens, got {norm_length}")
    return _AGGREGATIONS[mode].denominator(response_mask.to(torch.bool), norm_length)


def row_scale(
    response_mask: torch.Tensor,
    aggregation: LossAggregation,
    denominator: float | None,
    *,
    norm_length: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """[B, 1] per-response scale s_i (no gradient); ``denominator=None`` uses this batch's own D.

    ``response_mask`` may be bool or 0/1 floats (passing the float copy avoids a cast).
    """
    mask = response_mask
    if denominator is None:
        denominator = loss_denominator(mask, aggregation, norm_length=norm_length) or 1.0
    elif not denominator > 0:
        raise ValueError(
            f"denominator must be > 0, got {denominator}; compute it with "
            "mucode.algo.loss_denominator(minibatch_response_mask, aggregation)"
        )
    spec = _AGGREGATIONS[aggregation]
    if spec.per_token_length:
        lengths = mask.to(dtype).sum(dim=-1, keepdim=True).clamp(min=1)
        return 1.0 / (lengths * float(denominator))
    return torch.full((mask.shape[0], 1), 1.0 / float(denominator), dtype=dtype, device=mask.device)
