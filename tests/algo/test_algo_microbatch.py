"""Splitting a minibatch into micro-batches with gradient accumulation changes nothing.

The trainer-facing recipe of mucode.algo's docstring: one minibatch denominator, M2PO's mask from a
no-grad pass over the whole minibatch, micro-batch losses summed, metrics combined with
reduce_metrics. Micro-batches are also trimmed to their own padded length, as a trainer would.
"""

from __future__ import annotations

import math

import pytest
import torch

from mucode.algo import (
    GRPOParams,
    M2POParams,
    MuGRPOParams,
    ObjectiveParams,
    get_objective,
    loss_denominator,
    reduce_metrics,
)

F = torch.float64

CASES: list[tuple[str, ObjectiveParams]] = [
    ("grpo", GRPOParams()),
    ("grpo", GRPOParams(dual_clip=3.0, aggregation="token-mean")),
    ("mu_grpo", MuGRPOParams()),
    ("mu_grpo", MuGRPOParams(veto_scope="suffix", aggregation="token-mean")),
    (
        "mu_grpo",
        MuGRPOParams(veto_scope="nontrigger_suffix", aggregation="seq-mean-token-sum-norm", norm_length=16),
    ),
    ("m2po", M2POParams()),
    ("m2po", M2POParams(mode="water_fill", aggregation="seq-mean-token-mean")),
]


def _minibatch(seed: int):
    g = torch.Generator().manual_seed(seed)
    B, T = 12, 16
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[3] = 0  # a fully padded row
    mask = torch.arange(T)[None, :] < lengths[:, None]
    b = -torch.rand(B, T, generator=g, dtype=F) * 3
    lp = b + torch.randn(B, T, generator=g, dtype=F) * 0.6
    lp[1, 5] = b[1, 5] - 12.0  # triggers
    lp[6, 2] = b[6, 2] - 10.0
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0, 1.2, -0.8, 0.3, -1.1, 0.9, -0.2, 0.7], dtype=F)
    entropy = torch.rand(B, T, generator=g, dtype=F)
    return lp, b, adv, mask, entropy


@pytest.mark.parametrize(("name", "params"), CASES, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("split", [[12], [5, 4, 3], [1] * 12])
def test_micro_batches_give_the_minibatch_loss_gradient_and_metrics(name, params, split) -> None:
    objective = get_objective(name)
    lp, b, adv, mask, entropy = _minibatch(seed=7)

    full_lp = lp.clone().requires_grad_()
    full_loss, full_metrics = objective(full_lp, b, adv, mask, params, entropy=entropy)
    full_loss.backward()

    denominator = loss_denominator(mask, params.aggregation, norm_length=params.norm_length)
    state = objective.prepare(lp, b, adv, mask, params)
    acc_lp = lp.clone().requires_grad_()
    total = torch.zeros((), dtype=F)
    parts = []
    start = 0
    for size in split:
        rows = slice(start, start + size)
        start += size
        width = max(int(mask[rows].sum(dim=1).max()), 1)  # trim to this micro-batch's padding
        loss, metrics = objective(
            acc_lp[rows, :width],
            b[rows, :width],
            adv[rows],
            mask[rows, :width],
            params,
            denominator=denominator,
            entropy=entropy[rows, :width],
            prepared={k: v[rows] for k, v in state.items()},  # rows only: trimmed padding is handled
        )
        loss.backward()
        total = total + loss.detach()
        parts.append(metrics)

    assert total.item() == pytest.approx(full_loss.item(), rel=1e-12, abs=1e-15)
    torch.testing.assert_close(acc_lp.grad, full_lp.grad, rtol=1e-12, atol=1e-15)
    reduced = reduce_metrics(parts)
    assert reduced.keys() == full_metrics.keys()
    for key, value in full_metrics.items():
        assert reduced[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_without_the_minibatch_denominator_micro_batches_disagree() -> None:
    """The check above can fail: per-call denominators change the seq-mean loss."""
    mu = get_objective("mu_grpo")
    lp, b, adv, mask, _ = _minibatch(seed=7)
    full, _ = mu(lp, b, adv, mask)
    parts = sum(mu(lp[r], b[r], adv[r], mask[r])[0].item() for r in (slice(0, 5), slice(5, 12)))
    assert not math.isclose(parts, full.item(), rel_tol=1e-6)
