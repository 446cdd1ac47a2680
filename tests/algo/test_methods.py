"""offpolicy_grpo, conspo and agpo against independent references written here in float64 loops:
loss and gradient, groups without a positive or a negative, a planted zero-variance group, the
ConSPO margin schedule, and AGPO's temperature and clip against the official code's formulas."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch

from mucode.algo import (
    AGPOParams,
    ConSPOParams,
    OffPolicyGRPOParams,
    conspo_margin,
    get_objective,
    group_advantages,
)
from mucode.algo.agpo import TemperatureEMA, answer_key, clip_eps, dispersion, skewness, vote_entropy


@pytest.fixture(autouse=True)
def _float64() -> Iterator[None]:
    """References in float64 (restored after each test: other modules' tests use float32)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logprobs requiring grad, behaviour log-probs, bool mask) for responses of ``lengths``."""
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    lp = (-torch.rand(len(lengths), width, generator=gen) * 2 - 0.05).requires_grad_(True)
    b = lp.detach() + 0.3 * torch.randn(len(lengths), width, generator=gen)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for i, n in enumerate(lengths):
        mask[i, :n] = True
    return lp, b, mask


# ── ConSPO ───────────────────────────────────────────────────────────────────────────────────────
def _conspo_reference(
    lp: torch.Tensor, mask: torch.Tensor, groups: list[int], rewards: list[float], tau: float, m: float
) -> tuple[torch.Tensor, int, int]:
    """−Σ_q J(q) / (#contrastive groups), written out term by term; (loss, kept, discarded)."""
    scores = []
    for i in range(lp.shape[0]):
        n = int(mask[i].sum())
        scores.append(sum(lp[i, t] for t in range(n)) / n)
    total, kept, discarded = lp.new_zeros(()), 0, 0
    for g in sorted(set(groups)):
        rows = [i for i, gi in enumerate(groups) if gi == g]
        pos = [i for i in rows if rewards[i] >= 1.0]
        neg = [i for i in rows if rewards[i] < 1.0]
        if not pos or not neg:
            discarded += 1
            continue
        kept += 1
        j = lp.new_zeros(())
        for i in pos:
            num = torch.exp((scores[i] - m) / tau)
            den = num + sum(torch.exp(scores[k] / tau) for k in neg)
            j = j + tau * torch.log(num / den)
        total = total + j / len(pos)
    return -total / kept, kept, discarded


@pytest.mark.parametrize("progress", [0.0, 0.15, 0.3, 1.0])
def test_conspo_loss_and_gradient_match_the_hand_reference(progress: float) -> None:
    groups = [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]  # group 1 all positive, group 2 all negative: discarded
    rewards = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    lp, b, mask = _batch([3, 5, 2, 4, 1, 6, 2, 3, 4, 5])
    params = ConSPOParams(margin=0.5)  # a large M so the margin's effect is visible
    m = {0.0: 0.0, 0.15: 0.25, 0.3: 0.5, 1.0: 0.5}[progress]  # (M/2)(1 − cos(π·min(λ/0.3, 1))) by hand
    assert conspo_margin(progress, 0.5, 0.3) == pytest.approx(m, abs=1e-12)
    objective = get_objective("conspo")
    g, r = torch.tensor(groups), torch.tensor(rewards)
    loss, metrics = objective(lp, b, torch.zeros(10), mask, params, groups=g, rewards=r, progress=progress)
    (grad,) = torch.autograd.grad(loss, lp)
    ref_lp = lp.detach().clone().requires_grad_(True)
    ref, kept, discarded = _conspo_reference(ref_lp, mask, groups, rewards, 10.0, m)
    (ref_grad,) = torch.autograd.grad(ref, ref_lp)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-12)
    assert metrics["conspo/margin"] == pytest.approx(m)
    assert (metrics["conspo/groups"], metrics["conspo/discarded_groups"]) == (kept, discarded) == (2, 2)
    assert grad[3:7].abs().sum() == 0  # discarded groups get no gradient
    assert objective.denominator(mask, params, groups=g, rewards=r) == 2


def test_conspo_micro_batches_of_whole_groups_sum_to_the_minibatch() -> None:
    groups = [0, 0, 0, 1, 1, 1, 2, 2]
    rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    lp, b, mask = _batch([2, 4, 3, 5, 1, 2, 3, 3], seed=3)
    objective, params = get_objective("conspo"), ConSPOParams()
    g, r = torch.tensor(groups), torch.tensor(rewards)
    whole, _ = objective(lp, b, torch.zeros(8), mask, params, groups=g, rewards=r, progress=0.5)
    d = objective.denominator(mask, params, groups=g, rewards=r)
    parts = [
        objective(
            lp[s],
            b[s],
            torch.zeros(len(range(*s.indices(8)))),
            mask[s],
            params,
            denominator=d,
            groups=g[s],
            rewards=r[s],
            progress=0.5,
        )[0]
        for s in (slice(0, 3), slice(3, 8))
    ]
    assert sum(p.item() for p in parts) == pytest.approx(whole.item(), rel=1e-12)


def test_conspo_with_no_contrastive_group_has_zero_loss_and_gradient() -> None:
    lp, b, mask = _batch([2, 3, 4, 1])
    loss, metrics = get_objective("conspo")(
        lp,
        b,
        torch.zeros(4),
        mask,
        ConSPOParams(),
        groups=torch.tensor([0, 0, 1, 1]),
        rewards=torch.tensor([1.0, 1.0, 0.0, 0.0]),
    )
    assert loss.item() == 0 and metrics["conspo/discarded_groups"] == 2
    (grad,) = torch.autograd.grad(loss, lp, allow_unused=True, materialize_grads=True)
    assert grad.abs().sum() == 0


def test_conspo_truncated_correction_weights_each_positive() -> None:
    lp, b, mask = _batch([3, 2, 4])
    g, r = torch.tensor([0, 0, 0]), torch.tensor([1.0, 0.0, 1.0])
    objective = get_objective("conspo")
    off, _ = objective(lp, b, torch.zeros(3), mask, ConSPOParams(), groups=g, rewards=r)
    on, m = objective(
        lp,
        b,
        torch.zeros(3),
        mask,
        ConSPOParams(correction="truncated", correction_cap=1.0),
        groups=g,
        rewards=r,
    )
    w = [min(1.0, math.exp(float(((lp.detach()[i] - b[i]) * mask[i]).sum() / mask[i].sum()))) for i in (0, 2)]
    assert m["conspo/weight_mean"] == pytest.approx(sum(w) / 2)
    assert on.item() != pytest.approx(off.item())


def test_objectives_that_read_groups_refuse_a_call_without_them() -> None:
    lp, b, mask = _batch([2, 2])
    with pytest.raises(ValueError, match="needs groups= and rewards="):
        get_objective("conspo")(lp, b, torch.zeros(2), mask)
    with pytest.raises(ValueError, match="mask_zero_variance is on"):
        get_objective("offpolicy_grpo")(lp, b, torch.zeros(2), mask, ref_logprobs=b)
    with pytest.raises(ValueError, match="pass ref_logprobs"):
        get_objective("offpolicy_grpo")(
            lp, b, torch.zeros(2), mask, groups=torch.tensor([0, 0]), rewards=torch.ones(2)
        )


# ── off-policy GRPO: PPO-clip, zero-variance masking, k3 KL ───────────────────────────────────────
def test_offpolicy_grpo_masks_a_planted_zero_variance_group_and_adds_k3() -> None:
    groups = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]  # group 1 all correct: planted zero variance
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    lengths = [3, 5, 2, 4, 1, 6, 2, 3, 4, 5]
    lp, b, mask = _batch(lengths, seed=1)
    ref_lp = lp.detach() + 0.2 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(9))
    g, r = torch.tensor(groups), torch.tensor(rewards)
    adv = group_advantages(r, g).double()
    params = OffPolicyGRPOParams(kl_coef=0.1)
    objective = get_objective("offpolicy_grpo")
    loss, metrics = objective(lp, b, adv, mask, params, groups=g, rewards=r, ref_logprobs=ref_lp)
    (grad,) = torch.autograd.grad(loss, lp)

    x = lp.detach().clone().requires_grad_(True)
    live = [i for i in range(10) if groups[i] != 1]
    total = x.new_zeros(())
    for i in live:  # seq-mean-token-mean over the 6 responses left: D = 6, not 10
        row = x.new_zeros(())
        for t in range(lengths[i]):
            rho = torch.exp(x[i, t] - b[i, t])
            a = float(adv[i])
            surrogate = torch.minimum(rho * a, torch.clamp(rho, 0.8, 1.2) * a)
            d = ref_lp[i, t] - x[i, t]
            row = row - surrogate + 0.1 * (torch.exp(d) - d - 1)
        total = total + row / lengths[i]
    ref = total / len(live)
    (ref_grad,) = torch.autograd.grad(ref, x)
    assert objective.denominator(mask, params, groups=g, rewards=r) == 6
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-12)
    assert grad[4:8].abs().sum() == 0
    assert metrics["groups/zero_variance_frac"] == pytest.approx(1 / 3)
    assert metrics["kl/ref"] > 0


# ── AGPO ─────────────────────────────────────────────────────────────────────────────────────────
def test_agpo_probe_statistics_by_hand() -> None:
    assert dispersion([1, 0, 0, 0]) == pytest.approx(0.5)  # Bessel: sqrt((0.75² + 3·0.25²)/3)
    assert skewness([1, 0, 0, 0]) == pytest.approx(2.0)  # g1 = 1.1547, G1 = g1·√12/2
    assert skewness([1, 1, 1, 1]) == 0.0 and skewness([1, 0]) == 0.0
    assert skewness([0] * 200 + [1]) == 10.0  # G1 ≈ 14 unclamped
    assert dispersion([0, 0, 1, 1], "iqr") == pytest.approx(1.0 / 1.349)
    texts = ["so \\boxed{\\frac{1}{2}} done", "x #### 1/2", "the answer is 3", "\\boxed{\\frac{1}{2}}"]
    assert [answer_key(t) for t in texts] == ["\\frac{1}{2}", "1/2", "3", "\\frac{1}{2}"]
    assert vote_entropy(texts) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert answer_key("No Number  Here") == "no number here"


def _official_temperatures(us: list[float], base: float = 1.0, lam: float = 0.15) -> list[float]:
    out, ema = [], None
    for u in us:
        if ema is None:
            c, ema = 0.0, u
        else:
            c = (u - ema) / (ema + 1e-8)
            ema = 0.1 * u + 0.9 * ema
        out.append(min(1.5, max(0.5, base * (1 + lam * c))))
    return out


def test_agpo_temperature_follows_the_official_formula() -> None:
    us = [0.5, 1.0, 0.25, 2.0, 0.01, 40.0]
    ema = TemperatureEMA()
    got = [ema.temperature(u) for u in us]
    assert got == pytest.approx(_official_temperatures(us))
    assert got[:2] == pytest.approx([1.0, 1.15])  # c = 0, then c = (1 − 0.5)/0.5 = 1
    assert got[-1] == 1.5  # clamped at τ_max


def test_agpo_clip_follows_the_official_formula() -> None:
    p = AGPOParams()
    h_old = torch.tensor([0.2, 1.0, 3.0, 0.9])
    h_vote = torch.tensor([0.0, 0.7, 1.2, 0.1])
    sigma = torch.tensor([0.0, 0.5, 0.3, 2.0])
    kappa = torch.tensor([0.0, 2.0, -1.0, 0.5])
    got = clip_eps(h_old, 1.0, h_vote, sigma, 0.2, kappa, p)
    want = [
        min(
            0.4,
            max(
                0.05,
                0.2
                * min(1.5, max(0.5, h / (1.0 + 1e-8)))
                * (1 + 0.1 * v)
                / (1 + s + 0.5 * 0.2 + 0.0 * abs(k)),
            ),
        )
        for h, v, s, k in zip(h_old.tolist(), h_vote.tolist(), sigma.tolist(), kappa.tolist(), strict=True)
    ]
    assert got.tolist() == pytest.approx(want)


def test_agpo_loss_and_gradient_match_the_hand_reference() -> None:
    groups = [0, 0, 0, 1, 1, 1]
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    lengths = [3, 5, 2, 4, 1, 6]
    lp, b, mask = _batch(lengths, seed=2)
    b = lp.detach() + 0.5 * torch.randn(
        lp.shape, generator=torch.Generator().manual_seed(4)
    )  # ratios that clip
    ref_lp = lp.detach() - 0.1
    entropy = torch.rand(lp.shape, generator=torch.Generator().manual_seed(5)) * 2
    g, r = torch.tensor(groups), torch.tensor(rewards)
    adv = group_advantages(r, g).double()
    row_data = {
        "probe_sigma": torch.tensor([0.5, 0.5, 0.5, 0.2, 0.2, 0.2]),
        "probe_vote_entropy": torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]),
        "probe_skewness": torch.tensor([0.3, 0.3, 0.3, -2.0, -2.0, -2.0]),
        "temperature": torch.tensor([0.9, 0.9, 0.9, 1.2, 1.2, 1.2]),
    }
    state = {"agpo/entropy_ref": 0.8, "agpo/kl_ema": 0.05}
    p = AGPOParams()
    objective = get_objective("agpo")
    loss, metrics = objective(
        lp,
        b,
        adv,
        mask,
        p,
        groups=g,
        rewards=r,
        ref_logprobs=ref_lp,
        entropy=entropy,
        row_data=row_data,
        state=state,
    )
    (grad,) = torch.autograd.grad(loss, lp)

    x = lp.detach().clone().requires_grad_(True)
    total, eps_seen = x.new_zeros(()), []
    for q in (0, 1):
        rows = [i for i in range(6) if groups[i] == q]
        tokens = sum(lengths[i] for i in rows)
        h_old = sum(float(entropy[i, t]) for i in rows for t in range(lengths[i])) / tokens
        i0 = rows[0]
        eps = min(
            0.4,
            max(
                0.05,
                0.2
                * min(1.5, max(0.5, h_old / (0.8 + 1e-8)))
                * (1 + 0.1 * float(row_data["probe_vote_entropy"][i0]))
                / (1 + float(row_data["probe_sigma"][i0]) + 0.5 * 0.05),
            ),
        )
        eps_seen.append(eps)
        part = x.new_zeros(())
        for i in rows:
            for t in range(lengths[i]):
                rho = torch.exp(x[i, t] - b[i, t])
                a = float(adv[i])
                part = (
                    part
                    - torch.minimum(rho * a, torch.clamp(rho, 1 - eps, 1 + eps) * a)
                    + 0.03 * (x[i, t] - ref_lp[i, t])
                )
        total = total + part / tokens
    ref = total / 2
    (ref_grad,) = torch.autograd.grad(ref, x)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-12)
    assert (metrics["agpo/clip_eps_min"], metrics["agpo/clip_eps_max"]) == pytest.approx(
        (min(eps_seen), max(eps_seen))
    )
    assert (metrics["agpo/temperature_min"], metrics["agpo/temperature_max"]) == pytest.approx((0.9, 1.2))
    new = objective.state_fn(state, metrics, p)  # type: ignore[misc]
    assert new["agpo/entropy_ref"] == pytest.approx(0.01 * metrics["agpo/entropy_old"] + 0.99 * 0.8)
    assert new["agpo/kl_ema"] == pytest.approx(0.1 * metrics["agpo/kl_step"] + 0.9 * 0.05)


def test_agpo_without_probe_statistics_names_the_controller() -> None:
    lp, b, mask = _batch([2, 2])
    with pytest.raises(ValueError, match="sampling.controller=agpo"):
        get_objective("agpo")(
            lp,
            b,
            torch.zeros(2),
            mask,
            groups=torch.tensor([0, 0]),
            rewards=torch.ones(2),
            ref_logprobs=b,
            entropy=torch.ones(2, 2),
        )
