"""The config tree: precedence, presets, and errors that name the fix."""

from __future__ import annotations

import pytest

from mucode.config import ConfigError, MucodeConfig, batch_plan, load_config, preset_names


def test_defaults_are_the_paper_settings() -> None:
    cfg = MucodeConfig()
    assert cfg.algo.objective == "mu_grpo"
    assert 1 - cfg.algo.clip_eps_low == 0.0 and 1 + cfg.algo.clip_eps_high == 5.0
    assert cfg.algo.veto_scope == "sequence" and cfg.algo.veto_threshold == 1e-4
    assert (cfg.batch.samples_per_prompt, cfg.batch.prompts_per_update) == (8, 32)
    assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (1024, 4)
    assert cfg.optim.lr == 1e-6 and cfg.optim.betas == (0.9, 0.999) and cfg.optim.weight_decay == 0.01


def test_mu_grpo_preset_equals_defaults() -> None:
    assert load_config("mu_grpo") == MucodeConfig()


@pytest.mark.parametrize(
    ("preset", "objective", "mu", "stages", "low", "high"),
    [
        ("grpo_mu4", "grpo", 4, 1024, 0.2, 0.2),
        ("grpo_mu1024", "grpo", 1024, 4, 0.2, 0.2),
        ("m2po", "m2po", 1024, 4, 1.0, 4.0),
    ],
)
def test_baseline_presets(preset: str, objective: str, mu: int, stages: int, low: float, high: float) -> None:
    cfg = load_config(preset)
    assert cfg.algo.objective == objective
    assert cfg.algo.veto_scope == "none"
    assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (mu, stages)
    assert (cfg.algo.clip_eps_low, cfg.algo.clip_eps_high) == (low, high)
    assert batch_plan(cfg)["total_updates"] == 4096


def test_every_shipped_preset_resolves() -> None:
    names = preset_names()
    assert {"mu_grpo", "grpo_mu4", "grpo_mu1024", "m2po"} <= set(names)
    for name in names:
        load_config(name)


def test_overrides_beat_the_file_and_are_typed() -> None:
    cfg = load_config("grpo_mu4", ["batch.updates_per_stage=8", "optim.betas=[0.9, 0.95]", "verifier.token=abc"])
    assert cfg.batch.updates_per_stage == 8
    assert cfg.optim.betas == (0.9, 0.95)
    assert cfg.verifier.token == "abc"
    assert cfg.algo.objective == "grpo"  # untouched keys keep the file's value


def test_config_file_path(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("defaults: grpo_mu4\nbatch:\n  num_stages: 2\n")
    cfg = load_config(path)
    assert cfg.batch.num_stages == 2 and cfg.batch.updates_per_stage == 4


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["algo.veto_scope=everything"], "'none', 'trigger', 'suffix', 'nontrigger_suffix' or 'sequence'"),
        (["algo.dual_clip_c=3"], "dual-clip"),
        (["algo.objective=grpo"], "set algo.veto_scope=none"),
        (["algo.objective=ppo"], "'grpo', 'mu_grpo' or 'm2po'"),
        (["batch.samples_per_prompt=1"], "greater than or equal to 2"),
        (["batch.prompts_per_updat=3"], "valid keys here: samples_per_prompt, prompts_per_update"),
        (["optimizer.lr=1"], "sections: model, data"),
        (["rollout.engine=vllm", "train.device=cpu"], "needs a GPU"),
        (["lr"], "is not key=value"),
    ],
)
def test_impossible_configs_name_the_fix(overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert needle in str(err.value)


def test_unknown_preset_lists_presets() -> None:
    with pytest.raises(ConfigError, match="mu_grpo"):
        load_config("no_such_preset")


def test_batch_plan_is_consistent() -> None:
    cfg = load_config(None, ["batch.prompts_per_update=16", "batch.updates_per_stage=64", "batch.num_stages=3"])
    plan = batch_plan(cfg)
    assert plan["prompts_per_stage (B_train)"] == 16 * 64
    assert plan["responses_per_stage"] == 16 * 64 * 8
    assert plan["total_updates"] == 64 * 3
    assert plan["engine_switches"] == 6
