"""The trainer's CLI commands: verl-config output composes against verl's own config; plot errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app


def _compose(overrides: list[str]):  # noqa: ANN202 - an omegaconf DictConfig
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[*overrides, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"],
        )


def _overrides(output: str) -> list[str]:
    lines = [line.strip().rstrip("\\").strip() for line in output.splitlines()]
    assert lines[0] == "export VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register"
    assert lines[1] == "python -m verl.trainer.main_ppo"
    return [line for line in lines[2:] if line and not line.startswith("note:")]


@pytest.mark.parametrize(
    ("args", "mu", "loss_mode"),
    [
        (["--config", "mu_grpo"], 1024, "mu_grpo"),
        (["--config", "grpo_mu4", "batch.num_stages=8"], 4, "vanilla"),
        (["--config", "mu_grpo", "batch.updates_per_stage=64", "algo.veto_scope=suffix"], 64, "mu_grpo"),
    ],
)
def test_verl_config_composes_against_verl(args: list[str], mu: int, loss_mode: str) -> None:
    from verl.utils.config import omega_conf_to_dataclass

    out = CliRunner().invoke(get_app(), ["verl-config", *args])
    assert out.exit_code == 0, out.output
    cfg = _compose(_overrides(out.stdout))
    actor = cfg.actor_rollout_ref.actor
    assert cfg.data.train_batch_size // actor.ppo_mini_batch_size == mu
    assert actor.ppo_epochs == 1 and actor.policy_loss.loss_mode == loss_mode
    assert not cfg.algorithm.rollout_correction.bypass_mode
    assert (
        cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES
        == "mucode.integrations.verl.register"
    )
    built = omega_conf_to_dataclass(actor)  # what verl's workers construct: rejects unknown keys
    if loss_mode == "mu_grpo":
        assert built.clip_ratio_high == 4.0
        assert (
            "suffix" if "algo.veto_scope=suffix" in args else "sequence"
        ) == cfg.ray_kwargs.ray_init.runtime_env.env_vars.MUCODE_VETO_SCOPE
    else:
        assert built.clip_ratio_low == 0.2 and built.clip_ratio_high == 0.2


def test_plot_of_a_directory_without_metrics_fails_clearly(tmp_path: Path) -> None:
    out = CliRunner().invoke(get_app(), ["plot", str(tmp_path)])
    assert out.exit_code == 2
    assert "metrics.jsonl not found" in out.output


def test_train_rejects_unknown_task_and_bad_override() -> None:
    out = CliRunner().invoke(get_app(), ["train", "--task", "chess"])
    assert out.exit_code == 2 and "is not one of 'code', 'math'" in out.output
    out = CliRunner().invoke(get_app(), ["train", "--task", "math", "batch.prompts_per_updat=3"])
    assert out.exit_code == 2 and "prompts_per_updat" in out.output
