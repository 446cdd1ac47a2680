"""Hand-computed losses for every objective, mode and veto scope (numbers worked out on paper)."""

from __future__ import annotations

import math

import pytest
import torch

from mucode.algo import GRPOParams, M2POParams, MuGRPOParams, get_objective

F = torch.float64


def _batch(log_rhos: list[list[float]], lengths: list[int], adv: list[float]):
    """logprobs with b = 0 so that log ρ = logprobs; rows padded with zeros to the longest."""
    T = max(len(r) for r in log_rhos)
    lp = torch.zeros(len(log_rhos), T, dtype=F)
    mask = torch.zeros(len(log_rhos), T, dtype=torch.bool)
    for i, row in enumerate(log_rhos):
        lp[i, : len(row)] = torch.tensor(row, dtype=F)
        mask[i, : lengths[i]] = True
    return lp.requires_grad_(), torch.zeros_like(lp), torch.tensor(adv, dtype=F), mask


L = math.log


def test_grpo_clip_both_signs_and_dual_clip() -> None:
    grpo = get_objective("grpo")
    lp, b, a, m = _batch([[L(0.5), 0.0, L(1.5)]], [3], [1.0])
    loss, met = grpo(lp, b, a, m, GRPOParams())
    assert loss.item() == pytest.approx(-(0.5 + 1.0 + 1.2) / 3)  # A>0: min(ρ, 1.2)
    assert met["stale/clip_frac_high"] == pytest.approx(1 / 3)
    lp, b, a, m = _batch([[L(0.5), 0.0, L(1.5), L(4.0)]], [4], [-1.0])
    loss, met = grpo(lp, b, a, m, GRPOParams())
    assert loss.item() == pytest.approx((0.8 + 1.0 + 1.5 + 4.0) / 4)  # A<0: max(ρ, 0.8)
    assert met["stale/clip_frac_low"] == pytest.approx(1 / 4)
    assert met["stale/clip_frac_dual"] == 0.0
    loss, met = grpo(lp, b, a, m, GRPOParams(dual_clip=3.0))
    assert loss.item() == pytest.approx((0.8 + 1.0 + 1.5 + 3.0) / 4)  # ρ=4 capped at c=3
    assert met["stale/clip_frac_dual"] == pytest.approx(1 / 4)
    loss, _ = grpo(lp, b, a, m, GRPOParams(clip_low=0.1, clip_high=0.3))
    assert loss.item() == pytest.approx((0.9 + 1.0 + 1.5 + 4.0) / 4)


def test_mu_grpo_relaxed_clip() -> None:
    mu = get_objective("mu_grpo")
    lp, b, a, m = _batch([[L(0.5), L(6.0)], [L(0.5), L(6.0)]], [2, 2], [1.0, -1.0])
    loss, met = mu(lp, b, a, m)
    # row 0 (A=+1): (0.5 + 5)/2 ; row 1 (A=-1): −(0.5 + 6)/2 (no clip for A<0, ρ=6 included)
    assert loss.item() == pytest.approx(-((0.5 + 5.0) / 2 - (0.5 + 6.0) / 2) / 2)
    assert met["stale/clip_frac_high"] == pytest.approx(1 / 4)
    assert met["stale/clip_frac_low"] == 0.0
    loss, _ = mu(lp, b, a, m, MuGRPOParams(ratio_upper=math.inf))
    assert loss.item() == pytest.approx(-((0.5 + 6.0) / 2 - (0.5 + 6.0) / 2) / 2)


# Row 0: A = −1, ratios [1, 1e-5 (trigger, κ=1), 2, 1e-6 (trigger), 3]; row 1: A = +1, 3 tokens of ρ=1.
RATIOS = [1.0, 1e-5, 2.0, 1e-6, 3.0]
KEPT = {
    "none": [0, 1, 2, 3, 4],
    "trigger": [0, 2, 4],
    "suffix": [0, 1],
    "nontrigger_suffix": [0, 1, 3],
    "sequence": [],
}
VETO_TOKENS = {"none": 0, "trigger": 2, "suffix": 3, "nontrigger_suffix": 2, "sequence": 5}


@pytest.mark.parametrize("scope", list(KEPT))
def test_mu_grpo_veto_scopes_by_hand(scope: str) -> None:
    mu = get_objective("mu_grpo")
    lp, b, a, m = _batch([[L(r) for r in RATIOS], [0.0, 0.0, 0.0]], [5, 3], [-1.0, 1.0])
    s = sum(RATIOS[t] for t in KEPT[scope])
    loss, met = mu(lp, b, a, m, MuGRPOParams(veto_scope=scope))
    # seq-mean-token-mean: row 0 still divides by its full length 5, |B| = 2 even when vetoed
    assert loss.item() == pytest.approx(-(-s / 5 + 1.0) / 2, rel=1e-12)
    assert met["stale/veto_token_frac"] == pytest.approx(VETO_TOKENS[scope] / 8)
    assert met["stale/veto_seq_frac"] == pytest.approx((VETO_TOKENS[scope] > 0) / 2)
    assert met["stale/trigger_token_frac"] == pytest.approx(2 / 8)
    loss, _ = mu(lp, b, a, m, MuGRPOParams(veto_scope=scope, aggregation="token-mean"))
    assert loss.item() == pytest.approx(-(-s + 3.0) / 8, rel=1e-12)
    loss, _ = mu(lp, b, a, m, MuGRPOParams(veto_scope=scope, aggregation="seq-mean-token-sum-norm"))
    assert loss.item() == pytest.approx(-(-s + 3.0) / (2 * 5), rel=1e-12)


def test_veto_threshold_is_configurable() -> None:
    mu = get_objective("mu_grpo")
    lp, b, a, m = _batch([[L(r) for r in RATIOS]], [5], [-1.0])
    _, met = mu(lp, b, a, m, MuGRPOParams(veto_threshold=1e-7))
    assert met["stale/trigger_token_frac"] == 0.0
    _, met = mu(lp, b, a, m, MuGRPOParams(veto_threshold=0.5))
    assert met["stale/trigger_token_frac"] == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="τ_c"):
        MuGRPOParams(veto_threshold=1.5)


def test_positive_advantage_responses_are_never_vetoed() -> None:
    mu = get_objective("mu_grpo")
    lp, b, a, m = _batch([[L(r) for r in RATIOS]], [5], [1.0])
    loss, met = mu(lp, b, a, m)
    assert met["stale/veto_token_frac"] == 0.0
    assert loss.item() == pytest.approx(-sum(RATIOS) / 5)


def _m2po_case():
    # row 0 (A=+1): log ρ [0.1, 0.5, −0.3] → candidates t0 (M2 0.01), t1 (0.25)
    # row 1 (A=−1): log ρ [−0.2, 0.4]      → candidate  t0 (0.04)
    return _batch([[0.1, 0.5, -0.3], [-0.2, 0.4]], [3, 2], [1.0, -1.0])


def test_m2po_greedy_by_hand() -> None:
    m2po = get_objective("m2po")
    lp, b, a, m = _m2po_case()
    # mean(0.01, 0.25, 0.04) = 0.1 > 0.04 → mask t1 of row 0 → mean 0.025 ≤ 0.04 → stop
    loss, met = m2po(lp, b, a, m)
    e = math.exp
    assert loss.item() == pytest.approx(-((e(0.1) + e(-0.3)) - (e(-0.2) + e(0.4))) / 5)  # all 5 tokens
    assert met["stale/m2po_masked_token_frac"] == pytest.approx(1 / 5)
    assert met["stale/m2po_candidate_token_frac"] == pytest.approx(3 / 5)
    loss, met = m2po(lp, b, a, m, M2POParams(m2_threshold=0.2))  # mean 0.1 already ≤ 0.2
    assert met["stale/m2po_masked_token_frac"] == 0.0
    loss, met = m2po(lp, b, a, m, M2POParams(m2_threshold=0.001))  # even 0.01 > 0.001: mask all 3
    assert met["stale/m2po_masked_token_frac"] == pytest.approx(3 / 5)


def test_m2po_water_fill_by_hand() -> None:
    m2po = get_objective("m2po")
    lp, b, a, m = _m2po_case()
    # values 0.01, 0.04, 0.25; target 3·0.04 = 0.12 = 0.01 + 0.04 + τ² → τ² = 0.07
    tau = math.sqrt(0.07)
    params = M2POParams(mode="water_fill", min_clip_low=0.0, min_clip_high=0.0)
    loss, met = m2po(lp, b, a, m, params)
    e = math.exp
    assert met["stale/m2po_ratio_high"] == pytest.approx(e(tau))
    assert met["stale/m2po_ratio_low"] == pytest.approx(e(-tau))
    # ρ = e^0.5 (A>0) is clipped to e^τ; row 1's ρ = e^−0.2 stays above e^−τ
    assert loss.item() == pytest.approx(-((e(0.1) + e(tau) + e(-0.3)) - (e(-0.2) + e(0.4))) / 5)
    assert met["stale/clip_frac_high"] == pytest.approx(1 / 5)
    _, met = m2po(lp, b, a, m, M2POParams(mode="water_fill"))  # authors' minimum clip widths
    assert met["stale/m2po_ratio_low"] == pytest.approx(0.7)
    assert met["stale/m2po_ratio_high"] == pytest.approx(1.5)
