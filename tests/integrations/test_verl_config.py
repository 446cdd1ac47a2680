"""`mucode verl-config` writes a verl run that verl 0.9.1 composes and validates as it would run it.

verl itself is installed (the `verl` extra); nothing here starts Ray or a GPU worker: the file is
composed with Hydra against verl's own config tree, then checked with verl's `validate_config` and
the dataclasses its workers build. The Parquet it writes is read back through the reward function
verl would call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from mucode.cli import get_app
from mucode.integrations.verl.config import VERL_LOSSES, write_verl_parquet
from mucode.integrations.verl.fully_async import RECIPE_DEFAULTS
from mucode.verifier.samples import to_item


def _compose(config_dir: Path, name: str = "mucode_verl"):  # noqa: ANN202 - an omegaconf DictConfig
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=name)


@pytest.mark.parametrize(
    ("args", "mu", "loss_mode"),
    [
        (["--config", "mu_grpo"], 1024, "mu_grpo"),
        (["--config", "grpo_mu4", "batch.num_stages=8"], 4, "vanilla"),
        (["--config", "m2po", "batch.updates_per_stage=64"], 64, "m2po"),
    ],
)
def test_written_run_composes_and_validates_in_verl(
    tmp_path: Path, args: list[str], mu: int, loss_mode: str
) -> None:
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    out = CliRunner().invoke(
        get_app(),
        [
            "verl-config",
            *args,
            "--output",
            str(tmp_path),
            "--model",
            "Qwen/Qwen2.5-Math-7B",
            "--train-files",
            "/data/train.parquet",
            "--verifier-url",
            "http://verifier-host:8000",
            "--gpus-per-node",
            "4",
            "--nnodes",
            "2",
        ],
    )
    assert out.exit_code == 0, out.output
    written = tmp_path / "mucode_verl.yaml"
    assert f"--config-path {tmp_path.resolve()} --config-name mucode_verl" in out.stdout
    assert "VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register" in out.stdout
    raw = yaml.safe_load(written.read_text())
    assert raw["defaults"] == ["ppo_trainer", "_self_"]
    assert isinstance(raw["data"]["train_batch_size"], int)  # typed values, not strings

    cfg = _compose(tmp_path)
    actor = cfg.actor_rollout_ref.actor
    assert cfg.data.train_batch_size // actor.ppo_mini_batch_size == mu
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-Math-7B"
    assert list(cfg.data.train_files) == ["/data/train.parquet"]
    assert (cfg.trainer.n_gpus_per_node, cfg.trainer.nnodes) == (4, 2)
    assert cfg.trainer.project_name == "mucode"
    reward = cfg.reward.custom_reward_function
    assert reward.name == "compute_score" and Path(reward.path).name == "reward.py"
    assert Path(reward.path).is_file()
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_USE_EXTERNAL_MODULES == "mucode.integrations.verl.register"
    assert env.MUCODE_VERIFIER_URL == "http://verifier-host:8000"
    assert all(isinstance(v, str) for v in env.values())  # Ray takes string environment variables
    validate_config(cfg, use_reference_policy=False, use_critic=False)  # verl's own checks
    built = omega_conf_to_dataclass(actor)  # what verl's workers construct: rejects unknown keys
    assert built.policy_loss.loss_mode == loss_mode and built.ppo_epochs == 1
    assert built.use_dynamic_bsz


def test_yaml_flag_prints_the_nested_typed_file() -> None:
    out = CliRunner().invoke(get_app(), ["verl-config", "--config", "mu_grpo", "--yaml"])
    assert out.exit_code == 0, out.output
    tree = yaml.safe_load(out.stdout)
    assert tree["defaults"] == ["ppo_trainer", "_self_"]
    assert tree["actor_rollout_ref"]["actor"]["policy_loss"]["loss_mode"] == "mu_grpo"
    assert tree["actor_rollout_ref"]["actor"]["clip_ratio_high"] == 4.0


def test_mixed_math_and_code_parquet_reaches_the_verifier_items(tmp_path: Path) -> None:
    from mucode.data import load_tasks

    records = load_tasks("toy", "math", limit=3) + load_tasks("toy", "code", limit=3)
    n = write_verl_parquet(records, tmp_path / "train.parquet")
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert n == len(rows) == 6
    for record, row in zip(records, rows, strict=True):
        assert row["prompt"] == record.messages and row["ability"] == record.program
        item = to_item(row["data_source"], "resp", row["reward_model"]["ground_truth"], row["extra_info"])
        assert (item.program, item.spec) == (record.program, record.spec)
        if record.program == "math":
            assert row["reward_model"]["ground_truth"] == str(record.spec["answer"])
        else:
            assert json.loads(row["reward_model"]["ground_truth"]) == record.spec


def test_data_is_converted_when_no_train_files_are_given(tmp_path: Path) -> None:
    out = CliRunner().invoke(get_app(), ["verl-config", "--config", "tiny", "--output", str(tmp_path)])
    assert out.exit_code == 0, out.output
    cfg = yaml.safe_load((tmp_path / "mucode_verl.yaml").read_text())
    train = Path(cfg["data"]["train_files"][0])
    assert train == (tmp_path / "train.parquet").resolve() and train.is_file()
    assert pq.read_table(train).num_rows > 0
    assert (
        Path(cfg["actor_rollout_ref"]["model"]["path"]).joinpath("config.json").is_file()
    )  # "tiny" resolved


def test_objective_params_map_to_verl_keys_and_the_rest_is_warned_about() -> None:
    from mucode.config import load_config
    from mucode.integrations.verl.config import verl_settings, verl_warnings
    from mucode.registry import UnknownNameError

    def settings(overrides: list[str]) -> dict[str, object]:
        return {k.rsplit(".", 1)[-1]: v for k, v in verl_settings(load_config(None, overrides))}

    mu = settings(["algo.ratio_upper=3", "algo.veto_scope=suffix", "algo.aggregation=token-mean"])
    assert (mu["loss_mode"], mu["clip_ratio_high"], mu["MUCODE_VETO_SCOPE"]) == ("mu_grpo", 2.0, "suffix")
    assert mu["loss_agg_mode"] == "token-mean" and "loss_scale_factor" not in mu
    m2 = settings(
        [
            "algo.objective=m2po",
            "algo.mode=water_fill",
            "algo.aggregation=seq-mean-token-sum-norm",
            "algo.norm_length=4096",
        ]
    )
    assert (m2["loss_mode"], m2["MUCODE_M2PO_MODE"], m2["loss_scale_factor"]) == ("m2po", "water_fill", 4096)
    grpo = settings(["algo.objective=grpo", "algo.clip_high=0.28"])
    assert (grpo["clip_ratio_low"], grpo["clip_ratio_high"], grpo["clip_ratio_c"]) == (0.2, 0.28, 1e9)
    # parameters verl cannot take are named, not dropped silently
    warned = verl_warnings(
        load_config(None, ["algo.objective=m2po", "algo.min_clip_low=0.2", "algo.max_abs_log_ratio=5"])
    )
    assert any("algo.min_clip_low=0.2 has no verl equivalent" in w for w in warned)
    assert any("algo.max_abs_log_ratio=5.0 has no verl equivalent" in w for w in warned)
    with pytest.raises(UnknownNameError, match="valid names: grpo, m2po, mu_grpo, offpolicy_grpo"):
        VERL_LOSSES.get("scaled_pg")


def test_small_data_and_no_validation_set_are_said(tmp_path: Path) -> None:
    """The tiny preset's 64 prompts are fewer than one verl step (128): a warning; no --val-files: validation off."""
    out = CliRunner().invoke(get_app(), ["verl-config", "-c", "tiny", "--output", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "has 64 prompts, fewer than one verl step's batch (data.train_batch_size = " in out.stderr
    assert "verl drops the incomplete batch and would train 0 steps" in out.stderr
    assert "no --val-files: verl's validation is off" in out.stderr
    cfg = _compose(tmp_path)
    assert cfg.trainer.val_before_train is False and cfg.trainer.test_freq == -1


def test_a_batch_that_fits_and_a_validation_set_give_no_warning(tmp_path: Path) -> None:
    data = ["batch.prompts_per_update=8", "batch.updates_per_stage=2"]  # 16 prompts a step: the 64 fit
    first = CliRunner().invoke(
        get_app(), ["verl-config", "-c", "tiny", *data, "--output", str(tmp_path / "a")]
    )
    assert first.exit_code == 0, first.output
    train = str(tmp_path / "a" / "train.parquet")
    out = CliRunner().invoke(
        get_app(),
        [
            "verl-config",
            "-c",
            "tiny",
            *data,
            "--output",
            str(tmp_path / "b"),
            "--train-files",
            train,
            "--val-files",
            train,
        ],
    )
    assert out.exit_code == 0, out.output
    assert "warning:" not in out.stderr, out.stderr
    cfg = _compose(tmp_path / "b")
    assert list(cfg.data.val_files) == [train] and cfg.trainer.val_before_train is True


@pytest.mark.parametrize(
    ("preset", "line"),
    [
        (
            "conspo",
            "algo.objective=conspo has no verl loss: it contrasts the responses of one prompt with each other, "
            "and verl's policy-loss call gets neither group ids nor whole groups",
        ),
        (
            "replay_grpo",
            "compose.composer=replay has no verl equivalent: verl trains each step on that step's own "
            "rollouts (no buffer of earlier rollouts)",
        ),
        (
            "agpo",
            "sampling.controller=agpo has no verl equivalent: verl samples every prompt at one temperature and "
            "has no probe generation",
        ),
    ],
)
def test_verl_config_refuses_what_verl_cannot_run_in_one_line(preset: str, line: str) -> None:
    result = CliRunner().invoke(get_app(), ["verl-config", "--config", preset])
    assert result.exit_code == 2 and result.output.strip() == line, result.output


def test_offpolicy_grpo_maps_to_its_loss_and_verls_k3_kl() -> None:
    from mucode.config import load_config
    from mucode.integrations.verl.config import verl_settings, verl_warnings

    cfg = load_config("offpolicy_grpo")
    s = dict(verl_settings(cfg))
    actor = "actor_rollout_ref.actor"
    assert s[f"{actor}.policy_loss.loss_mode"] == "offpolicy_grpo"
    assert (s[f"{actor}.use_kl_loss"], s[f"{actor}.kl_loss_coef"], s[f"{actor}.kl_loss_type"]) == (
        True,
        0.1,
        "low_var_kl",
    )
    assert (s[f"{actor}.clip_ratio_low"], s[f"{actor}.clip_ratio_high"]) == (0.2, 0.2)
    assert s["data.train_batch_size"] == 32 * 10 and s[f"{actor}.ppo_mini_batch_size"] == 32
    warned = verl_warnings(cfg)
    assert any("reference.reset_every_stages=4 has no verl equivalent" in w for w in warned)
    assert dict(verl_settings(load_config("mu_grpo")))[f"{actor}.use_kl_loss"] is False


def test_async_run_composes_on_verls_fully_async_policy_and_passes_its_checks(tmp_path: Path) -> None:
    """asynchronous.enabled: a verl fully_async_policy run (verl.experimental.fully_async_policy), composed
    by Hydra on that recipe's own config and checked as its rollouter and trainer check it."""
    from verl.utils.config import omega_conf_to_dataclass

    out = CliRunner().invoke(
        get_app(),
        [
            "verl-config",
            "--config",
            "async_mu_grpo",
            "asynchronous.sync_every=2",
            "asynchronous.max_lag_updates=5",
            "batch.updates_per_stage=8",
            "batch.num_stages=3",
            "--output",
            str(tmp_path),
            "--train-files",
            "/data/train.parquet",
            "--gpus-per-node",
            "4",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "python -m verl.experimental.fully_async_policy.fully_async_main" in out.stdout
    assert f"--config-path {tmp_path.resolve()} --config-name mucode_verl_async" in out.stdout
    raw = yaml.safe_load((tmp_path / "mucode_verl_async.yaml").read_text())
    assert raw["defaults"] == ["ppo_trainer", "_self_"]
    cfg = _compose(tmp_path, "mucode_verl_async")
    # every key of the installed recipe's own config file is there (a primary config like it)
    import verl.experimental.fully_async_policy as recipe
    from omegaconf import OmegaConf

    own = yaml.safe_load(
        (Path(recipe.__file__).parent / "config" / "fully_async_ppo_trainer.yaml").read_text()
    )
    own = {k: v for k, v in own.items() if k not in ("hydra", "defaults")}

    def leaves(tree: dict, prefix: str = "") -> list[str]:
        return [
            x
            for k, v in tree.items()
            for x in (leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])
        ]

    for key in leaves(own):
        assert OmegaConf.select(cfg, key, default="<missing>") != "<missing>", key
    assert dict(RECIPE_DEFAULTS) == {k: OmegaConf.select(OmegaConf.create(own), k) for k in leaves(own)}
    a = cfg.async_training
    assert (a.trigger_parameter_sync_step, a.require_batches, a.partial_rollout) == (2, 1, False)
    assert (a.staleness_threshold + 1) * a.trigger_parameter_sync_step - 1 == 5  # the lag bound, in updates
    # the device split on 4 GPUs: 2 generate, 2 train
    assert (cfg.rollout.n_gpus_per_node, cfg.trainer.n_gpus_per_node) == (2, 2)
    assert cfg.rollout.total_rollout_steps == 3 * 8 * cfg.actor_rollout_ref.actor.ppo_mini_batch_size
    # what FullyAsyncRollouter.__init__ / _validate_config and FullyAsyncTrainer assert
    assert cfg.data.train_batch_size == 0 and cfg.data.gen_batch_size == 1
    assert not cfg.actor_rollout_ref.hybrid_engine and cfg.actor_rollout_ref.rollout.calculate_log_probs
    assert cfg.algorithm.rollout_correction.bypass_mode and cfg.actor_rollout_ref.actor.use_rollout_log_probs
    built = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)  # rejects unknown keys
    assert built.policy_loss.loss_mode == "mu_grpo" and built.use_rollout_log_probs
    engine = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout.checkpoint_engine)
    assert engine.backend == "nccl"  # the weight sync between the two sides


def test_async_run_needs_gpus_on_both_sides() -> None:
    out = CliRunner().invoke(
        get_app(), ["verl-config", "--config", "async_mu_grpo", "--gpus-per-node", "1", "--yaml"]
    )
    assert out.exit_code == 2
    assert "trains and generates on separate GPUs" in out.output
