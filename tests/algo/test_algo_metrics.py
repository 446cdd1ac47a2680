"""The diagnostics: values against plain loops, and every returned key is in the glossary."""

from __future__ import annotations

import math

import pytest
import torch

from mucode.algo import (
    METRICS,
    GRPOParams,
    M2POParams,
    MuGRPOParams,
    ObjectiveParams,
    Reduce,
    get_objective,
    reduce_metrics,
)

F = torch.float64


def _batch():
    g = torch.Generator().manual_seed(11)
    B, T = 6, 9
    mask = torch.arange(T)[None, :] < torch.tensor([9, 4, 7, 0, 9, 2])[:, None]
    b = -torch.rand(B, T, generator=g, dtype=F) * 2
    lp = b + torch.randn(B, T, generator=g, dtype=F)
    lp[1, 1] = b[1, 1] - 12.0  # trigger (A<0)
    lp[4, 3] = b[4, 3] + 2.0  # ρ ≈ 7.4 with A>0: above mu_grpo's upper clip
    adv = torch.tensor([0.5, -1.0, -0.2, 1.0, 2.0, 0.0], dtype=F)
    entropy = torch.rand(B, T, generator=g, dtype=F)
    return lp, b, adv, mask, entropy


def test_ratio_diagnostics_match_plain_loops() -> None:
    lp, b, adv, mask, entropy = _batch()
    _, met = get_objective("mu_grpo")(lp, b, adv, mask, entropy=entropy)
    cells = [(i, t) for i in range(mask.shape[0]) for t in range(mask.shape[1]) if mask[i, t]]
    lr = {(i, t): float(lp[i, t] - b[i, t]) for i, t in cells}
    rho = {c: math.exp(v) for c, v in lr.items()}
    neg = [c for c in cells if adv[c[0]] < 0]
    pos = [c for c in cells if adv[c[0]] > 0]
    n = len(cells)
    expected = {
        "stale/tokens": n,
        "stale/responses": 5,
        "stale/tokens_neg_adv": len(neg),
        "stale/tokens_pos_adv": len(pos),
        "stale/ratio_mean": sum(rho.values()) / n,
        "stale/ratio_mean_neg_adv": sum(rho[c] for c in neg) / len(neg),
        "stale/ratio_mean_pos_adv": sum(rho[c] for c in pos) / len(pos),
        "stale/ratio_min": min(rho.values()),
        "stale/ratio_max": max(rho.values()),
        "stale/abs_log_ratio_mean": sum(abs(v) for v in lr.values()) / n,
        "stale/log_ratio_sq_mean": sum(v * v for v in lr.values()) / n,
        "stale/approx_kl": sum(rho[c] - 1 - lr[c] for c in cells) / n,
        "policy/entropy": sum(float(entropy[c]) for c in cells) / n,
        "stale/clip_frac_low": 0.0,
        "stale/clip_frac_high": sum(1 for c in pos if rho[c] > 5.0) / n,
        "stale/trigger_token_frac": sum(1 for c in neg if rho[c] < 1e-4) / n,
        "stale/veto_token_frac": int(mask[1].sum()) / n,  # sequence scope: all of response 1
        "stale/veto_seq_frac": 1 / 5,
    }
    assert expected["stale/clip_frac_high"] > 0 and expected["stale/trigger_token_frac"] > 0
    for key, value in expected.items():
        assert met[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


ALL_CONFIGS: list[tuple[str, ObjectiveParams]] = [
    ("grpo", GRPOParams()),
    ("grpo", GRPOParams(dual_clip=3.0)),
    *[
        ("mu_grpo", MuGRPOParams(veto_scope=s))
        for s in ("none", "trigger", "suffix", "nontrigger_suffix", "sequence")
    ],
    ("m2po", M2POParams()),
    ("m2po", M2POParams(mode="water_fill")),
]


@pytest.mark.parametrize(("name", "params"), ALL_CONFIGS)
def test_every_returned_key_is_documented_in_the_glossary(name: str, params: ObjectiveParams) -> None:
    lp, b, adv, mask, entropy = _batch()
    loss, met = get_objective(name)(lp, b, adv, mask, params, entropy=entropy)
    assert set(met) <= set(METRICS), set(met) - set(METRICS)
    assert met["loss/policy"] == pytest.approx(loss.item())
    assert all(math.isfinite(v) for v in met.values())
    for key in met:
        spec = METRICS[key]
        assert spec.description
        if spec.reduce is Reduce.MEAN:
            assert spec.weight in METRICS and METRICS[spec.weight].reduce is Reduce.SUM


def test_glossary_is_documented_in_the_module_docstring() -> None:
    import mucode.algo.metrics as metrics_module

    doc = metrics_module.__doc__ or ""
    for key in METRICS:
        assert f"``{key}``" in doc, key


def test_metrics_off_returns_nothing_and_reduce_rejects_unknown_keys() -> None:
    lp, b, adv, mask, _ = _batch()
    _, met = get_objective("mu_grpo")(lp, b, adv, mask, metrics=False)
    assert met == {}
    with pytest.raises(KeyError, match="glossary"):
        reduce_metrics([{"stale/made_up": 1.0}])
