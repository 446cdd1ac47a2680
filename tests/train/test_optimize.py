"""One optimizer update: independent of the micro-batch token budget; infra-masked responses are out."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from train_helpers import synthetic_groups as _groups

from mucode.config import load_config
from mucode.train.distributed import DistInfo
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer, pack_micro_batches
from mucode.train.policy import load_policy
from mucode.train.store import StoredGroup


def _update(policy: Path, overrides: list[str], groups: list[StoredGroup]) -> tuple[dict, dict[str, float]]:
    cfg = load_config(None, [f"model.path={policy}", *overrides])
    torch.manual_seed(0)
    model, tokenizer = load_policy(str(policy), dtype="float32", device=torch.device("cpu"))
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    settings = UpdateSettings.from_config(cfg)
    updater = Updater(model, optimizer, scheduler, settings, DistInfo(), pad_token_id=tokenizer.pad_token_id)
    metrics = updater.step(copy.deepcopy(groups))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, metrics


@pytest.mark.parametrize(
    "objective",
    [
        ["algo.objective=mu_grpo"],
        ["algo.objective=m2po", "algo.aggregation=token-mean"],
    ],
)
def test_update_does_not_depend_on_the_micro_batch_budget(small_policy: Path, objective: list[str]) -> None:
    groups = _groups(vocab=300)
    base = [*objective, "optim.lr=1e-2", "optim.grad_clip=null", "train.log_entropy=true"]
    one_weights, one = _update(small_policy, [*base, "batch.micro_batch_tokens=100000"], groups)
    many_weights, many = _update(small_policy, [*base, "batch.micro_batch_tokens=40"], groups)
    assert one["batch/micro_batches"] == 1 and many["batch/micro_batches"] >= 6
    assert one["optim/grad_norm"] > 0
    for key in (
        "loss/policy",
        "optim/grad_norm",
        "stale/ratio_mean_neg_adv",
        "stale/approx_kl",
        "policy/entropy",
    ):
        assert many[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key
    # Adam's first step is lr·g/(|g|+eps): elements whose gradient is ~0 amplify float rounding,
    # so the weights agree to a small fraction of the step size lr = 1e-2.
    for name in one_weights:
        torch.testing.assert_close(many_weights[name], one_weights[name], rtol=0, atol=1e-4)


def test_masked_responses_carry_no_gradient_and_are_counted(small_policy: Path) -> None:
    groups = _groups(vocab=300)
    flagged = copy.deepcopy(groups)
    for g in flagged:
        s = g.samples[0]
        s.masked, s.status, s.reward = True, "sandbox_error", float("nan")
    dropped = copy.deepcopy(groups)
    for g in dropped:
        del g.samples[0]
    base = ["optim.lr=1e-2", "batch.micro_batch_tokens=64"]
    w_flagged, m_flagged = _update(small_policy, base, flagged)
    w_dropped, m_dropped = _update(small_policy, base, dropped)
    assert m_flagged["batch/masked_responses"] == 4 and m_flagged["batch/responses"] == 12
    assert m_flagged["reward/mean"] == pytest.approx(m_dropped["reward/mean"])
    for name in w_flagged:  # a masked response is exactly as if it were not there
        torch.testing.assert_close(w_flagged[name], w_dropped[name])


def test_micro_batches_respect_the_token_budget() -> None:
    groups = _groups(vocab=50, n_groups=6)
    samples = [s for g in groups for s in g.samples]
    batches = pack_micro_batches(samples, 60)
    assert sorted(i for b in batches for i in b) == list(range(len(samples)))
    for b in batches:
        width = max(len(samples[i].prompt_tokens) for i in b) + max(
            len(samples[i].response_tokens) for i in b
        )
        assert len(b) * width <= 60 or len(b) == 1
