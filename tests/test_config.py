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
        (["algo.objective=grpo", "algo.veto_scope=suffix"], "set algo.veto_scope=none"),
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


# The paper's settings (its appendix): model → (Hub id, context = prompt + response, task, B_mini).
PAPER_MODELS = {
    "qwen2.5-math-7b": ("Qwen/Qwen2.5-Math-7B", 4096, "math", 32),
    "r1-distill-qwen-7b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 8192, "math", 32),
    "qwen3-1.7b-base": ("Qwen/Qwen3-1.7B-Base", 8192, "math", 32),
    "qwen3-4b-base": ("Qwen/Qwen3-4B-Base", 8192, "math", 32),
    "qwen3-8b-base": ("Qwen/Qwen3-8B-Base", 8192, "math", 32),
    "qwen2.5-coder-7b": ("Qwen/Qwen2.5-Coder-7B", 8192, "code", 16),
}
# algorithm → (objective, μ, stages, clip low, clip high, dual-clip c, veto scope, M2PO τ)
PAPER_ALGOS = {
    None: ("mu_grpo", 1024, 4, 1.0, 4.0, None, "sequence", None),
    "mu_grpo": ("mu_grpo", 1024, 4, 1.0, 4.0, None, "sequence", None),
    "grpo_mu4": ("grpo", 4, 1024, 0.2, 0.2, 3.0, "none", None),
    "grpo_mu1024": ("grpo", 1024, 4, 0.2, 0.2, 3.0, "none", None),
    "m2po": ("m2po", 1024, 4, 1.0, 4.0, None, "none", 0.04),
}
MATH_BENCHMARKS = ["aime24", "aime25", "amc23", "amc24", "math500"]


@pytest.mark.parametrize("algo", list(PAPER_ALGOS))
@pytest.mark.parametrize("model", list(PAPER_MODELS))
def test_paper_presets_resolve_to_the_appendix_numbers(model: str, algo: str | None) -> None:
    hub, context, task, b_mini = PAPER_MODELS[model]
    objective, mu, stages, low, high, dual, veto, m2 = PAPER_ALGOS[algo]
    for names in ([model] if algo is None else [f"{model},{algo}", f"{algo},{model}"]):  # either order
        cfg = load_config(names)
        assert cfg.model.path == hub and cfg.data.task == task and cfg.model.dtype == "bfloat16"
        assert cfg.data.max_prompt_tokens + cfg.rollout.max_response_tokens == context
        assert cfg.batch.prompts_per_update == b_mini and cfg.batch.samples_per_prompt == 8
        assert (cfg.batch.updates_per_stage, cfg.batch.num_stages) == (mu, stages)
        assert batch_plan(cfg)["total_updates"] == 4096
        assert (cfg.algo.objective, cfg.algo.clip_eps_low, cfg.algo.clip_eps_high) == (objective, low, high)
        assert cfg.algo.dual_clip_c == dual and cfg.algo.veto_scope == veto
        if m2 is not None:
            assert cfg.algo.m2po_threshold == m2
        if objective == "mu_grpo":
            assert cfg.algo.veto_threshold == 1e-4
        assert cfg.optim.lr == 1e-6 and cfg.optim.betas == (0.9, 0.999) and cfg.optim.weight_decay == 0.01
        assert cfg.optim.warmup_updates == 0 and cfg.rollout.temperature == 1.0
        assert cfg.train.eval_every == 200
        assert cfg.eval.benchmarks == (MATH_BENCHMARKS if task == "math" else ["livecodebench"])


def test_mu_grpo_refuses_dual_clip_and_grpo_presets_carry_it() -> None:
    for preset in ("grpo_mu4", "grpo_mu1024"):
        assert load_config(preset).algo.dual_clip_c == 3.0
    with pytest.raises(ConfigError, match="dual_clip_c must be null with algo.objective=mu_grpo"):
        load_config("mu_grpo", ["algo.dual_clip_c=3"])
    with pytest.raises(ConfigError, match="dual_clip_c must be null"):
        load_config("grpo_mu4", ["algo.objective=mu_grpo", "algo.veto_scope=sequence"])


def test_code_task_takes_the_code_batch_unless_overridden() -> None:
    assert load_config(None, ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config("mu_grpo", ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config("grpo_mu4", ["data.task=code"]).batch.prompts_per_update == 16
    assert load_config(None, ["data.task=code", "batch.prompts_per_update=32"]).batch.prompts_per_update == 32
    assert load_config("tiny", ["data.task=code"]).batch.prompts_per_update == 8  # the file sets it
    assert load_config(None, ["data.task=math"]).batch.prompts_per_update == 32
    assert batch_plan(load_config(None, ["data.task=code"]))["prompts_per_stage (B_train)"] == 16 * 1024
