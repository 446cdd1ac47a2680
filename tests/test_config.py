"""The config tree: precedence, presets, and errors that name the fix."""

from __future__ import annotations

import pytest
from plugin_dist import write_dist

from mucode.algo import GRPOParams, M2POMode, M2POParams, MuGRPOParams, VetoScope
from mucode.config import ConfigError, MucodeConfig, load_config, preset_names
from mucode.train.plan import batch_plan


def test_defaults_are_the_paper_settings() -> None:
    cfg = MucodeConfig()
    assert cfg.algo.objective == "mu_grpo"
    assert cfg.algo.params == MuGRPOParams()  # the objective's own defaults, the paper's
    assert cfg.algo.params.ratio_upper == 5.0
    assert cfg.algo.params.veto_scope is VetoScope.SEQUENCE and cfg.algo.params.veto_threshold == 1e-4
    assert (cfg.batch.samples_per_prompt, cfg.batch.prompts_per_update) == (8, 32)
    assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (1024, 4)
    assert cfg.optim.lr == 1e-6 and cfg.optim.betas == (0.9, 0.999) and cfg.optim.weight_decay == 0.01


def test_mu_grpo_preset_equals_defaults() -> None:
    assert load_config("mu_grpo") == MucodeConfig()


@pytest.mark.parametrize(
    ("preset", "objective", "mu", "stages", "params"),
    [
        ("grpo_mu4", "grpo", 4, 1024, GRPOParams(clip_low=0.2, clip_high=0.2, dual_clip=3.0)),
        ("grpo_mu1024", "grpo", 1024, 4, GRPOParams(clip_low=0.2, clip_high=0.2, dual_clip=3.0)),
        (
            "m2po",
            "m2po",
            1024,
            4,
            M2POParams(m2_threshold=0.04, mode="greedy_mask", aggregation="token-mean"),
        ),
    ],
)
def test_baseline_presets(preset: str, objective: str, mu: int, stages: int, params: object) -> None:
    cfg = load_config(preset)  # each builds on mu_grpo: switching the objective drops mu_grpo's params
    assert cfg.algo.objective == objective
    assert cfg.algo.params == params
    assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (mu, stages)
    assert batch_plan(cfg.batch)["total_updates"] == 4096


def test_every_shipped_preset_resolves() -> None:
    names = preset_names()
    assert {"mu_grpo", "grpo_mu4", "grpo_mu1024", "m2po"} <= set(names)
    for name in names:
        load_config(name)


def test_overrides_beat_the_file_and_are_typed() -> None:
    cfg = load_config(
        "grpo_mu4", ["batch.updates_per_stage=8", "optim.betas=[0.9, 0.95]", "verifier.token=abc"]
    )
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
        (["algo.dual_clip=3"], "dual_clip: not a parameter of algo.objective=mu_grpo"),
        (
            ["algo.clip_low=0.2"],
            "its parameters: aggregation, norm_length, max_abs_log_ratio, kl_coef, kl_estimator, mask_zero_variance, ratio_upper",  # noqa: E501
        ),
        (
            ["algo.objective=grpo", "algo.veto_scope=suffix"],
            "veto_scope: not a parameter of algo.objective=grpo",
        ),
        (
            ["algo.objective=ppo"],
            "unknown objective 'ppo'; valid names: agpo, conspo, grpo, m2po, mu_grpo, offpolicy_grpo",
        ),
        (["algo.objective=m2po", "algo.mode=greedy"], "'greedy_mask' or 'water_fill'"),
        (["algo.ratio_upper=-1"], "ratio_upper must be > 0"),
        (["algo.veto_threshold=abc"], "valid number"),
        (["algo.veto_scope=suffix", "algo.params.veto_scope=trigger"], "both set; keep one"),
        (["algo.adv_std=bessel"], "'unbiased', 'population' or 'none'"),
        (
            ["data.format=csv"],
            "unknown data schema 'csv'; valid names: auto, code_contests, math, mucode, trl, verl",
        ),
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
    cfg = load_config(
        None, ["batch.prompts_per_update=16", "batch.updates_per_stage=64", "batch.num_stages=3"]
    )
    plan = batch_plan(cfg.batch)
    assert plan["prompts_per_stage (B_train)"] == 16 * 64
    assert plan["responses_per_stage"] == 16 * 64 * 8
    assert plan["total_updates"] == 64 * 3
    assert plan["engine_switches"] == 6


# The paper's settings (its appendix): model → (Hub id, context = prompt + response, task, B_mini).
PAPER_MODELS = {
    "qwen2.5-math-7b": ("Qwen/Qwen2.5-Math-7B", 4096, "math", 32),
    "r1-distill-qwen-7b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 8192, "math", 32),
    "qwen3-1.7b-base": ("Qwen/Qwen3-1.7B-Base", 8192, "math", 32),
    "qwen3-4b-base": ("Qwen/Qwen3-4B-Base", 8192, "math", 32),
    "qwen3-8b-base": ("Qwen/Qwen3-8B-Base", 8192, "math", 32),
    "qwen2.5-coder-7b": ("Qwen/Qwen2.5-Coder-7B", 8192, "code", 16),
}
# algorithm → (objective, μ, stages, the objective's params)
_MU_GRPO = MuGRPOParams(ratio_upper=5.0, veto_scope="sequence", veto_threshold=1e-4)
_GRPO = GRPOParams(clip_low=0.2, clip_high=0.2, dual_clip=3.0)
PAPER_ALGOS = {
    None: ("mu_grpo", 1024, 4, _MU_GRPO),
    "mu_grpo": ("mu_grpo", 1024, 4, _MU_GRPO),
    "grpo_mu4": ("grpo", 4, 1024, _GRPO),
    "grpo_mu1024": ("grpo", 1024, 4, _GRPO),
    "m2po": ("m2po", 1024, 4, M2POParams(m2_threshold=0.04, mode="greedy_mask", aggregation="token-mean")),
}
MATH_BENCHMARKS = ["aime24", "aime25", "amc23", "amc24", "math500"]


@pytest.mark.parametrize("algo", list(PAPER_ALGOS))
@pytest.mark.parametrize("model", list(PAPER_MODELS))
def test_paper_presets_resolve_to_the_appendix_numbers(model: str, algo: str | None) -> None:
    hub, context, task, b_mini = PAPER_MODELS[model]
    objective, mu, stages, params = PAPER_ALGOS[algo]
    for names in [model] if algo is None else [f"{model},{algo}", f"{algo},{model}"]:  # either order
        cfg = load_config(names)
        assert cfg.model.path == hub and cfg.data.task == task and cfg.model.dtype == "bfloat16"
        assert cfg.data.max_prompt_tokens + cfg.rollout.max_response_tokens == context
        assert cfg.batch.prompts_per_update == b_mini and cfg.batch.samples_per_prompt == 8
        assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (mu, stages)
        assert batch_plan(cfg.batch)["total_updates"] == 4096
        assert (cfg.algo.objective, cfg.algo.params) == (objective, params)
        assert cfg.optim.lr == 1e-6 and cfg.optim.betas == (0.9, 0.999) and cfg.optim.weight_decay == 0.01
        assert cfg.optim.warmup_updates == 0 and cfg.rollout.temperature == 1.0
        assert cfg.train.eval_every == 200
        assert cfg.eval.benchmarks == (MATH_BENCHMARKS if task == "math" else ["livecodebench"])


def test_parameters_belong_to_the_objective_they_were_written_for() -> None:
    # dual-clip is grpo's: μ-GRPO has no such parameter, so it cannot be set by mistake
    assert load_config("grpo_mu4").algo.params.dual_clip == 3.0
    with pytest.raises(
        ConfigError, match=r"dual_clip: not a parameter of algo.objective=mu_grpo \(MuGRPOParams\)"
    ):
        load_config("mu_grpo", ["algo.dual_clip=3"])
    # a later layer that selects another objective starts from that objective's defaults
    assert load_config("grpo_mu4", ["algo.objective=mu_grpo"]).algo.params == MuGRPOParams()
    assert load_config("mu_grpo", ["algo.objective=grpo"]).algo.params == GRPOParams()
    # within one layer, order does not matter and parameters of the new objective apply
    for overrides in (
        ["algo.objective=grpo", "algo.clip_high=0.28"],
        ["algo.clip_high=0.28", "algo.objective=grpo"],
    ):
        assert load_config("mu_grpo", overrides).algo.params == GRPOParams(clip_high=0.28)
    # the same objective again keeps the earlier layer's parameters
    assert load_config("grpo_mu4", ["algo.objective=grpo", "algo.clip_low=0.1"]).algo.params == GRPOParams(
        clip_low=0.1, clip_high=0.2, dual_clip=3.0
    )


def test_params_shorthand_nested_form_and_round_trip(tmp_path) -> None:
    short = load_config(None, ["algo.objective=m2po", "algo.mode=water_fill", "algo.min_clip_low=0.25"])
    nested = load_config(
        None, ["algo.objective=m2po", "algo.params.mode=water_fill", "algo.params.min_clip_low=0.25"]
    )
    assert short == nested and short.algo.params.mode is M2POMode.WATER_FILL
    dumped = short.model_dump(mode="json")
    assert (
        dumped["algo"]["params"]["mode"] == "water_fill"
        and dumped["algo"]["params"]["aggregation"] == "token-mean"
    )
    import yaml

    path = tmp_path / "saved.yaml"
    path.write_text(yaml.safe_dump(dumped))
    assert load_config(path) == short  # a run's saved config.yaml loads back to the same config


def test_assigning_another_objective_alone_is_refused() -> None:
    cfg = load_config(None)
    with pytest.raises(ValueError, match="takes GRPOParams; set both together"):
        cfg.algo.objective = "grpo"


def test_code_task_takes_the_code_batch_unless_overridden() -> None:
    assert load_config(None, ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config("mu_grpo", ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config("grpo_mu4", ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config(None, ["data.task=code", "batch.prompts_per_update=32"]).batch.prompts_per_update == 32
    assert load_config("tiny", ["data.task=code"]).batch.prompts_per_update == 8  # the file sets it
    assert load_config(None, ["data.task=math"]).batch.prompts_per_update == 32
    assert batch_plan(load_config(None, ["data.task=code"]).batch)["prompts_per_stage (B_train)"] == 16 * 1024


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        (
            "algo:\n  objective: sgd\n",
            "algo.objective: unknown objective 'sgd'; valid names: agpo, conspo, grpo, m2po, mu_grpo, offpolicy_grpo",
        ),
        (
            "rollout:\n  engine: sglang\n",
            "rollout.engine: unknown rollout engine 'sglang'; valid names: dummy, hf, vllm",
        ),
        (
            "algo:\n  objective: grpo\n  params:\n    ratio_upper: 5\n",
            "ratio_upper: not a parameter of algo.objective=grpo (GRPOParams); its parameters: aggregation",
        ),
    ],
)
def test_unknown_names_in_a_yaml_file_are_one_line_listing_the_valid_ones(
    tmp_path, yaml_text: str, needle: str
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_plugin_engine_is_selectable_and_built_by_name(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``mucode.engines`` entry point (a dist-info on sys.path) is a valid `rollout.engine`."""
    from mucode.rollout.factory import ENGINES, make_engine
    from mucode.rollout.types import SamplingParams

    source = (
        "def build(model_path, sampling, **settings):\n"
        "    return ('echo-engine', model_path, sampling.max_new_tokens)\n"
    )
    write_dist(tmp_path, "echo_engine", source, "mucode.engines", {"echo": "build"})
    monkeypatch.syspath_prepend(str(tmp_path))
    ENGINES.refresh()
    try:
        assert load_config(None, ["rollout.engine=echo"]).rollout.engine == "echo"
        built = make_engine("echo", "some/model", SamplingParams(max_new_tokens=7))
        assert built == ("echo-engine", "some/model", 7)
    finally:
        monkeypatch.undo()
        ENGINES.refresh()
    with pytest.raises(ConfigError, match="unknown rollout engine 'echo'"):
        load_config(None, ["rollout.engine=echo"])


def test_importing_the_config_does_not_import_torch() -> None:
    """`mucode --help` and `import mucode.config` stay light; torch comes with the first config load."""
    import subprocess
    import sys

    code = (
        "import sys, mucode.config, mucode.algo.modes; assert 'torch' not in sys.modules, 'torch imported'; "
        "mucode.config.load_config(None, ['algo.objective=grpo']); assert 'torch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
