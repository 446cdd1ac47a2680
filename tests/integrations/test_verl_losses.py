"""mucode's losses through real verl 0.9.1: registry lookup, same losses and gradients as mucode.algo."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

# verl is the `verl` extra that scripts/setup.sh (the CI set-up) installs: no skip when it is missing.
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config import FSDPActorConfig

import mucode.integrations.verl.register  # noqa: F401  (registers the losses, as VERL_USE_EXTERNAL_MODULES does)
from mucode.algo import GRPOParams, M2POParams, MuGRPOParams, get_objective, loss_denominator
from mucode.integrations.verl.losses import offpolicy_grpo_policy_loss

F = torch.float64
MODES = ["seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"]


def _actor_config(**overrides) -> FSDPActorConfig:
    fields = {
        "strategy": "fsdp",
        "rollout_n": 4,
        "ppo_micro_batch_size_per_gpu": 4,
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 4.0,
        "clip_ratio_c": 3.0,  # verl's dual-clip default: mucode must ignore it
    }
    fields.update(overrides)
    return FSDPActorConfig(**fields)


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, T = 8, 10
    lengths = torch.tensor([10, 7, 3, 10, 5, 1, 8, 6])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    old = -torch.rand(B, T, generator=g, dtype=F) * 2
    new = old + torch.randn(B, T, generator=g, dtype=F) * 0.7
    new[1, 2] = old[1, 2] - 11.0  # trigger in an A<0 response
    new[3, 6] = old[3, 6] + 1.6  # ρ ≈ 5: near mu_grpo's upper clip
    new[6, 1] = old[6, 1] + 1.5  # ρ ≈ 4.5 in an A<0 response: dual-clip (c = 3) would cap it
    adv = torch.tensor([1.0, -1.0, 0.5, 1.2, -0.3, 0.0, -0.8, 0.4], dtype=F)
    token_adv = adv[:, None] * mask  # how verl's GRPO estimator lays advantages out
    return old, new, adv, token_adv, mask


def _verl_call(name: str, config, old, new, token_adv, mask, loss_agg_mode: str):
    """Call the loss exactly as verl.workers.utils.losses.ppo_loss does (keywords)."""
    lp = new.clone().requires_grad_()
    loss, metrics = get_policy_loss_fn(name)(
        old_log_prob=old,
        log_prob=lp,
        advantages=token_adv,
        response_mask=mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
        rollout_is_weights=None,
    )
    loss.backward()
    return loss.detach(), lp.grad, metrics


def _mucode_call(name: str, params, old, new, adv, mask, denominator):
    lp = new.clone().requires_grad_()
    loss, metrics = get_objective(name)(lp, old, adv, mask, params, denominator=denominator)
    loss.backward()
    return loss.detach(), lp.grad, metrics


@pytest.mark.parametrize("mode", MODES)
def test_mu_grpo_through_verl_equals_mucode(mode: str) -> None:
    old, new, adv, token_adv, mask = _batch()
    config = _actor_config(loss_agg_mode=mode)
    # what verl's ppo_loss writes before calling the loss (one rank, the whole minibatch)
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=mask.shape[0], loss_scale_factor=None
    )
    v_loss, v_grad, v_metrics = _verl_call("mu_grpo", config, old, new, token_adv, mask, mode)
    params = MuGRPOParams(aggregation=mode, ratio_upper=5.0, norm_length=mask.shape[1])
    m_loss, m_grad, m_metrics = _mucode_call("mu_grpo", params, old, new, adv, mask, None)
    torch.testing.assert_close(v_loss, m_loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(v_grad, m_grad, rtol=1e-12, atol=0)
    assert m_metrics["stale/veto_seq_frac"] > 0
    assert v_metrics["actor/stale/veto_seq_frac"] == pytest.approx(m_metrics["stale/veto_seq_frac"])
    assert "actor/loss/policy" not in v_metrics  # verl logs actor/pg_loss itself


def test_verl_dual_clip_is_never_applied_and_vanilla_differs() -> None:
    old, new, adv, token_adv, mask = _batch()
    config = _actor_config(loss_agg_mode="token-mean")
    _, v_grad, _ = _verl_call("mu_grpo", config, old, new, token_adv, mask, "token-mean")
    rho = torch.exp(new[6, 1] - old[6, 1])
    assert rho > 3.0
    # A<0 token at ρ > c: gradient is |A|·ρ·s with s = 1/(valid tokens)
    assert v_grad[6, 1].item() == pytest.approx(0.8 * rho.item() / int(mask.sum()), rel=1e-12)
    _, vanilla_grad, _ = _verl_call("vanilla", config, old, new, token_adv, mask, "token-mean")
    assert vanilla_grad[6, 1] == 0  # verl's vanilla loss caps it (dual-clip): the methods differ


def test_denominator_from_global_batch_info_counts_all_responses_over_ranks() -> None:
    """Two micro-batches on one of two ranks: verl's global sizes give mucode's minibatch denominator."""
    old, new, adv, token_adv, mask = _batch()
    config = _actor_config(loss_agg_mode="seq-mean-token-mean")
    config.global_batch_info.update(
        dp_size=2, batch_num_tokens=999, global_batch_size=16, loss_scale_factor=None
    )
    total = torch.zeros((), dtype=F)
    for rows in (slice(0, 3), slice(3, 8)):
        loss, _, _ = _verl_call(
            "mu_grpo", config, old[rows], new[rows], token_adv[rows], mask[rows], "seq-mean-token-mean"
        )
        total += loss
    # 16 responses over 2 ranks → this rank's 8 responses are divided by 8, vetoed ones included
    expected, _, _ = _mucode_call("mu_grpo", MuGRPOParams(), old, new, adv, mask, denominator=8.0)
    torch.testing.assert_close(total, expected, rtol=1e-12, atol=0)
    assert loss_denominator(mask, "seq-mean-token-mean") == 8.0


@pytest.mark.parametrize("scope", ["trigger", "suffix", "nontrigger_suffix", "none"])
def test_veto_settings_come_from_the_environment(scope: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUCODE_VETO_SCOPE", scope)
    monkeypatch.setenv("MUCODE_VETO_THRESHOLD", "1e-3")
    old, new, adv, token_adv, mask = _batch()
    config = _actor_config(loss_agg_mode="token-mean")
    v_loss, v_grad, _ = _verl_call("mu_grpo", config, old, new, token_adv, mask, "token-mean")
    params = MuGRPOParams(aggregation="token-mean", veto_scope=scope, veto_threshold=1e-3)
    m_loss, m_grad, _ = _mucode_call("mu_grpo", params, old, new, adv, mask, None)
    torch.testing.assert_close(v_loss, m_loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(v_grad, m_grad, rtol=1e-12, atol=0)


@pytest.mark.parametrize("m2po_mode", ["greedy_mask", "water_fill"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_m2po_through_verl_equals_mucode(m2po_mode: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUCODE_M2PO_MODE", m2po_mode)
    old, new, adv, token_adv, mask = _batch(seed=3)
    config = _actor_config(loss_agg_mode=mode)
    v_loss, v_grad, v_metrics = _verl_call("m2po", config, old, new, token_adv, mask, mode)
    params = M2POParams(aggregation=mode, mode=m2po_mode)
    m_loss, m_grad, _ = _mucode_call("m2po", params, old, new, adv, mask, None)
    torch.testing.assert_close(v_loss, m_loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(v_grad, m_grad, rtol=1e-12, atol=0)
    assert "actor/stale/m2po_candidate_token_frac" in v_metrics


def test_misuse_is_rejected_with_a_fix() -> None:
    old, new, _, token_adv, mask = _batch()
    config = _actor_config()
    fn = get_policy_loss_fn("mu_grpo")
    with pytest.raises(ValueError, match="rollout_is=null"):
        fn(old, new, token_adv, mask, "token-mean", config, rollout_is_weights=torch.ones_like(old))
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        fn(old, new, token_adv, mask, "token-sum", config)
    varying = token_adv + torch.arange(mask.shape[1], dtype=F) * 0.1 * mask
    with pytest.raises(ValueError, match="one advantage per response"):
        fn(old, new, varying, mask, "token-mean", config)


def test_registration_happens_only_when_the_module_is_imported() -> None:
    script = textwrap.dedent(
        """
        import sys
        import mucode, mucode.algo
        assert "verl" not in sys.modules and "mucode.integrations.verl.register" not in sys.modules
        import verl  # imports VERL_USE_EXTERNAL_MODULES
        from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, get_policy_loss_fn
        from mucode.integrations.verl.register import m2po_policy_loss, mu_grpo_policy_loss
        assert get_policy_loss_fn("mu_grpo") is mu_grpo_policy_loss
        assert get_policy_loss_fn("m2po") is m2po_policy_loss
        print("ok")
        """
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "mucode.integrations.verl.register"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def _documented_overrides() -> tuple[list[str], list[str]]:
    """(exported env assignments, Hydra overrides) from the command block of docs/verl.md."""
    doc = (Path(__file__).parents[2] / "docs" / "verl.md").read_text()
    block = doc.split("<!-- verl-overrides:start -->")[1].split("<!-- verl-overrides:end -->")[0]
    words = block.replace("\\\n", " ").replace("```bash", "").replace("```", "").split()
    exports = [w for w in words if "=" in w and words[words.index(w) - 1] == "export"]
    start = words.index("verl.trainer.main_ppo") + 1
    return exports, words[start:]


def test_documented_overrides_compose_against_the_installed_verl_config() -> None:
    import verl
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    from mucode.integrations.verl.losses import mu_grpo_params

    exports, overrides = _documented_overrides()
    assert exports == ["VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register"]
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(
            config_name="ppo_trainer",
            overrides=[*overrides, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"],
        )
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_USE_EXTERNAL_MODULES == "mucode.integrations.verl.register"
    assert cfg.data.train_batch_size // cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 1024  # μ
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)  # what verl's workers build
    assert actor.policy_loss.loss_mode == "mu_grpo"
    params = mu_grpo_params(actor, actor.loss_agg_mode, 4096)
    assert (params.ratio_upper, params.aggregation.value) == (5.0, "seq-mean-token-mean")
    assert actor.rollout_n == 8 and not cfg.algorithm.rollout_correction.bypass_mode


def test_verl_worker_ppo_loss_runs_mu_grpo_end_to_end() -> None:
    """verl's own worker loss (ppo_loss: unpadding, global batch info, metric wrapping) with loss_mode=mu_grpo."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import ppo_loss

    old, new, adv, token_adv, mask = _batch()
    old, new, token_adv = old.float(), new.float(), token_adv.float()
    B, R = mask.shape
    P = 3
    attention = torch.cat([torch.ones(B, P, dtype=torch.long), mask.long()], dim=1)
    # the model's flat (no-padding) output: response token t of row i sits at offset P − 1 + t
    flat = torch.cat(
        [torch.cat([torch.zeros(P - 1), new[i, : int(mask[i].sum())], torch.zeros(1)]) for i in range(B)]
    )
    flat.requires_grad_()
    data = TensorDict(
        {
            "prompts": torch.ones(B, P, dtype=torch.long),
            "responses": torch.ones(B, R, dtype=torch.long),
            "attention_mask": attention,
            "response_mask": mask.long(),
            "old_log_probs": old,
            "advantages": token_adv,
        },
        batch_size=[B],
    )
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=B)
    config = _actor_config(loss_agg_mode="seq-mean-token-mean", policy_loss={"loss_mode": "mu_grpo"})
    loss, metrics = ppo_loss(config, {"log_probs": flat}, data)
    loss.backward()

    lp = new.clone().requires_grad_()
    expected, _ = get_objective("mu_grpo")(lp, old, adv.float(), mask, MuGRPOParams(), denominator=float(B))
    expected.backward()
    torch.testing.assert_close(loss.detach(), expected.detach(), rtol=1e-6, atol=1e-7)
    assert flat.grad is not None and lp.grad is not None
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), (attention.sum(dim=1)).cumsum(0)[:-1]])
    for i in range(B):
        n = int(mask[i].sum())
        torch.testing.assert_close(flat.grad[offsets[i] + P - 1 : offsets[i] + P - 1 + n], lp.grad[i, :n])
    assert "actor/stale/veto_seq_frac" in metrics and "actor/pg_loss" in metrics


@pytest.mark.parametrize(
    ("variable", "build"),
    [
        ("MUCODE_VETO_THRESHOLD", "mu_grpo_params"),
        ("MUCODE_M2PO_THRESHOLD", "m2po_params"),
    ],
)
def test_a_threshold_that_is_not_a_number_names_the_variable(
    variable: str, build: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mucode.integrations.verl import losses

    monkeypatch.setenv(variable, "1e-4x")
    with pytest.raises(ValueError, match=f"{variable}='1e-4x' is not a number"):
        getattr(losses, build)(None, "seq-mean-token-mean", 8)
    monkeypatch.setenv(variable, "0.5")
    params = getattr(losses, build)(None, "seq-mean-token-mean", 8)
    assert 0.5 in (getattr(params, "veto_threshold", None), getattr(params, "m2_threshold", None))


def test_offpolicy_grpo_through_verl_equals_mucode_on_the_rows_with_an_advantage() -> None:
    """verl's call masks the A = 0 row (a zero-variance group's) out of the loss; mucode's grpo on the
    same mask with verl's global denominator gives the same loss and gradient."""
    old, new, adv, token_adv, mask = _batch()
    config = _actor_config(loss_agg_mode="token-mean", clip_ratio_high=0.28)
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=mask.shape[0], loss_scale_factor=None
    )
    v_loss, v_grad, _ = _verl_call("offpolicy_grpo", config, old, new, token_adv, mask, "token-mean")
    kept = mask & (adv != 0)[:, None]
    params = GRPOParams(aggregation="token-mean", clip_low=0.2, clip_high=0.28)
    m_loss, m_grad, _ = _mucode_call("grpo", params, old, new, adv, kept, float(mask.sum()))
    torch.testing.assert_close(v_loss, m_loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(v_grad, m_grad, rtol=1e-12, atol=0)
    assert v_grad[5].abs().sum() == 0 and get_policy_loss_fn("offpolicy_grpo") is offpolicy_grpo_policy_loss
