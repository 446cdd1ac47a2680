"""Vectorized objectives vs the plain-loop references on many random cases, and gradient checks."""

from __future__ import annotations

import math

import pytest
import torch
from algo_reference import (
    grpo_loss,
    m2po_greedy_loss,
    m2po_greedy_masked,
    mu_grpo_loss,
    vetoed_positions,
    water_level_bisection,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mucode.algo import (
    GRPOParams,
    M2POParams,
    MuGRPOParams,
    get_objective,
    m2po_candidates,
    m2po_greedy_keep,
    m2po_water_level,
    veto_mask,
)

F = torch.float64
SCOPES = ["none", "trigger", "suffix", "nontrigger_suffix", "sequence"]
MODES = ["seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"]
ADVANTAGES = st.sampled_from([-1.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0])
# log-ratios from deep veto territory (ρ ≈ e^-15) to well above the upper clip (ρ ≈ e^3)
LOG_RATIOS = st.one_of(
    st.floats(-15.0, 3.0, allow_nan=False),
    st.sampled_from([0.0, math.log(1e-4) - 1e-3, math.log(1e-4) + 1e-3, math.log(5.0) + 0.01]),
)


@st.composite
def batches(draw: st.DrawFn, log_ratios: st.SearchStrategy[float] = LOG_RATIOS):
    B = draw(st.integers(1, 5))
    T = draw(st.integers(1, 7))
    lr = torch.tensor([[draw(log_ratios) for _ in range(T)] for _ in range(B)], dtype=F)
    lengths = [draw(st.integers(0, T)) for _ in range(B)]
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i, n in enumerate(lengths):
        mask[i, :n] = True
    adv = torch.tensor([draw(ADVANTAGES) for _ in range(B)], dtype=F)
    b = torch.tensor([[draw(st.floats(-6.0, 0.0)) for _ in range(T)] for _ in range(B)], dtype=F)
    return lr + b, b, adv, mask


def _grads(loss_fn, lp: torch.Tensor) -> tuple[float, torch.Tensor]:
    x = lp.clone().requires_grad_()
    loss = loss_fn(x)
    (grad,) = torch.autograd.grad(loss, x, allow_unused=True) if loss.requires_grad else (None,)
    return loss.item(), torch.zeros_like(lp) if grad is None else grad


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(SCOPES), st.sampled_from(MODES), st.sampled_from([1e-4, 1e-2]))
def test_veto_mask_matches_the_spec_table_loop(batch, scope: str, mode: str, tau: float) -> None:
    lp, b, adv, mask = batch
    lr = lp - b
    vetoed, trigger = veto_mask(lr, mask, adv, scope, tau)
    for i in range(lp.shape[0]):
        expected = vetoed_positions(lr[i].tolist(), mask[i].tolist(), float(adv[i]), scope, tau)
        got = set() if vetoed is None else set(vetoed[i].nonzero().flatten().tolist())
        assert got == expected, (i, scope)


@settings(max_examples=120, deadline=None)
@given(batches(), st.sampled_from(SCOPES), st.sampled_from(MODES), st.sampled_from([5.0, 3.0, math.inf]))
def test_mu_grpo_loss_and_gradient_match_the_loop_reference(
    batch, scope: str, mode: str, upper: float
) -> None:
    lp, b, adv, mask = batch
    params = MuGRPOParams(veto_scope=scope, aggregation=mode, ratio_upper=upper)
    mu = get_objective("mu_grpo")
    got_loss, got_grad = _grads(lambda x: mu(x, b, adv, mask, params, metrics=False)[0], lp)
    ref_loss, ref_grad = _grads(
        lambda x: mu_grpo_loss(x, b, adv, mask, scope=scope, tau=1e-4, upper=upper, mode=mode), lp
    )
    assert got_loss == pytest.approx(ref_loss, rel=1e-9, abs=1e-12)
    torch.testing.assert_close(got_grad, ref_grad, rtol=1e-9, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(
    batches(st.floats(-3.0, 3.0)),
    st.sampled_from(MODES),
    st.sampled_from([(0.2, 0.2, None), (0.2, 0.28, None), (0.1, 0.3, 3.0)]),
)
def test_grpo_loss_and_gradient_match_the_loop_reference(batch, mode: str, clip) -> None:
    lp, b, adv, mask = batch
    eps_low, eps_high, dual = clip
    params = GRPOParams(clip_low=eps_low, clip_high=eps_high, dual_clip=dual, aggregation=mode)
    grpo = get_objective("grpo")
    got_loss, got_grad = _grads(lambda x: grpo(x, b, adv, mask, params, metrics=False)[0], lp)
    ref_loss, ref_grad = _grads(
        lambda x: grpo_loss(x, b, adv, mask, eps_low=eps_low, eps_high=eps_high, dual=dual, mode=mode), lp
    )
    assert got_loss == pytest.approx(ref_loss, rel=1e-9, abs=1e-12)
    torch.testing.assert_close(got_grad, ref_grad, rtol=1e-9, atol=1e-12)


# log-ratios on a 1/8 grid: squares and their sums are exact in float64, so "mean ≤ τ" is decided
# identically by the loop and the vectorized code even on exact ties.
GRID = st.integers(-16, 16).map(lambda k: k / 8)


@settings(max_examples=200, deadline=None)
@given(batches(GRID), st.integers(0, 40).map(lambda k: k / 64))
def test_m2po_greedy_mask_matches_the_loop(batch, thr: float) -> None:
    lp, b, adv, mask = batch
    lr = lp - b
    keep = m2po_greedy_keep(lr, mask, adv, thr)
    masked = set((mask & ~keep).flatten().nonzero().flatten().tolist())
    assert masked == m2po_greedy_masked(lr, mask, adv, thr)
    assert not (keep & ~mask).any()


@settings(max_examples=60, deadline=None)
@given(batches(GRID), st.sampled_from(MODES))
def test_m2po_loss_and_gradient_match_the_loop_reference(batch, mode: str) -> None:
    lp, b, adv, mask = batch
    m2po = get_objective("m2po")
    params = M2POParams(aggregation=mode)
    got_loss, got_grad = _grads(lambda x: m2po(x, b, adv, mask, params, metrics=False)[0], lp)
    ref_loss, ref_grad = _grads(lambda x: m2po_greedy_loss(x, b, adv, mask, 0.04, mode), lp)
    assert got_loss == pytest.approx(ref_loss, rel=1e-9, abs=1e-12)
    torch.testing.assert_close(got_grad, ref_grad, rtol=1e-9, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(batches(st.floats(-3.0, 3.0)), st.sampled_from([0.0, 0.01, 0.04, 0.5]))
def test_m2po_water_level_matches_bisection(batch, thr: float) -> None:
    lp, b, adv, mask = batch
    lr = lp - b
    values = (lr[m2po_candidates(lr, mask, adv)] ** 2).tolist()
    expected = water_level_bisection(values, thr)
    got = m2po_water_level(lr, mask, adv, thr)
    if math.isinf(expected):
        assert math.isinf(got)
    else:
        assert got == pytest.approx(expected, rel=1e-7, abs=1e-9)
        assert sum(min(v, got * got) for v in values) / len(values) == pytest.approx(thr, abs=1e-9)


# --- gradient checks -------------------------------------------------------------------------


def test_negative_advantage_gradient_is_abs_a_times_rho_at_any_ratio() -> None:
    """For A<0 (veto off) d loss / d log π_t = |A| · ρ_t · s_i: the clip never binds, even at ρ ≫ 5."""
    log_rho = torch.linspace(-12.0, 12.0, 49, dtype=F)
    lp = (log_rho - 1.0).reshape(1, -1).requires_grad_()
    b = torch.full_like(lp, -1.0)
    adv = torch.tensor([-0.75], dtype=F)
    mask = torch.ones_like(lp, dtype=torch.bool)
    loss, _ = get_objective("mu_grpo")(lp, b, adv, mask, MuGRPOParams(veto_scope="none"))
    loss.backward()
    assert lp.grad is not None
    s = 1.0 / 49  # seq-mean-token-mean, one response of 49 tokens
    torch.testing.assert_close(lp.grad[0], 0.75 * torch.exp(log_rho) * s, rtol=1e-12, atol=0)


@pytest.mark.parametrize("scope", SCOPES)
def test_vetoed_tokens_get_exactly_zero_gradient_and_the_mask_none(scope: str) -> None:
    torch.manual_seed(0)
    lp = (torch.randn(4, 12, dtype=F) - 2).requires_grad_()
    b = lp.detach() + torch.randn(4, 12, dtype=F)
    b[1, 4] = lp[1, 4].detach() + 12.0  # a trigger (ρ ≈ 6e-6) in an A<0 response
    b[1, 9] = lp[1, 9].detach() + 15.0  # a second trigger after κ
    adv = torch.tensor([1.0, -1.0, -0.5, 0.3], dtype=F)
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[3, 8:] = False
    mu = get_objective("mu_grpo")
    params = MuGRPOParams(veto_scope=scope)
    loss, _ = mu(lp, b, adv, mask, params)
    loss.backward()
    assert lp.grad is not None
    vetoed, trigger = veto_mask(lp.detach() - b, mask, adv, scope, 1e-4)
    assert not trigger.requires_grad and (vetoed is None or not vetoed.requires_grad)
    keep = mask if vetoed is None else mask & ~vetoed
    # the mask enters as a constant: the gradient is exactly −A·ρ·s on kept tokens and 0 elsewhere
    rho = torch.exp(lp.detach() - b)
    s = 1.0 / mask.sum(dim=1, keepdim=True).to(F) / 4
    upper_cut = (adv[:, None] > 0) & (rho > 5.0)
    expected = torch.where(keep & ~upper_cut, -adv[:, None] * rho * s, torch.zeros_like(rho))
    torch.testing.assert_close(lp.grad, expected, rtol=1e-12, atol=0)
    if vetoed is not None:
        assert lp.grad[vetoed].eq(0).all()
    if scope == "sequence":
        assert lp.grad[1].eq(0).all()  # the whole response contributes exactly nothing
        assert lp.grad[2].ne(0).any()
