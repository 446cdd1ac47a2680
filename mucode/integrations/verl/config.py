"""``mucode verl-config``: a complete verl 0.9.1 run (config file + command) for a mucode config.

The config side of the verl integration: it imports neither verl nor the loss registration
(:mod:`mucode.integrations.verl.register`), so writing a config file does not need verl installed.

What it emits, for a :class:`MucodeConfig` plus the facts of one cluster (:class:`VerlRun`):

- a nested, typed Hydra config file (``defaults: [ppo_trainer, _self_]``, verl's config directory
  on the search path through ``pkg://verl.trainer.config``) holding the model, the data files, the
  reward through mucode's verifier (``reward.custom_reward_function`` → ``mucode/integrations/verl/reward.py``), the GPU
  and node counts, the project name and mucode's losses;
- the command that runs it (``python -m verl.trainer.main_ppo --config-path DIR --config-name NAME``);
- optionally the training data in verl's Parquet schema (:func:`write_verl_parquet`): each row's
  ``extra_info.mucode`` holds the verifier program and spec, so one file may mix math and code.

Mapping (μ-GRPO stage = one verl step): ``data.train_batch_size = prompts_per_update ×
updates_per_stage`` (B_train), ``ppo_mini_batch_size = prompts_per_update`` (B_mini),
``ppo_epochs = batch.update_epochs`` (1), ``trainer.total_training_steps = num_stages``. A
reference KL (``kl_coef`` > 0) is verl's own KL loss (k3: ``low_var_kl``, k1: ``kl``) against the
initial policy. Behaviour log-probs: verl's
decoupled mode recomputes them with the actor (the "recompute" option); bypass mode would replace
the loss, so it is kept off. Micro-batches are token-budgeted (``use_dynamic_bsz``) with
``batch.micro_batch_tokens`` per GPU. verl keeps a whole step's batch (B_train × G responses) on
its driver: see docs/verl.md for the host memory that takes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from mucode.algo.modes import LossAggregation, StdEstimator
from mucode.config import MucodeConfig
from mucode.registry import Registry

__all__ = [
    "EXTERNAL_MODULE",
    "VERL_LOSSES",
    "VerlRun",
    "verl_command",
    "verl_overrides",
    "parquet_rows",
    "verl_refusal",
    "verl_run_config",
    "verl_run_warnings",
    "verl_settings",
    "verl_warnings",
    "write_verl_parquet",
    "write_verl_run",
]

EXTERNAL_MODULE = "mucode.integrations.verl.register"
CONFIG_NAME = "mucode_verl"
ENV = "ray_kwargs.ray_init.runtime_env.env_vars"
ACTOR = "actor_rollout_ref.actor"
REWARD_FILE = Path(__file__).resolve().parent / "reward.py"
"""verl's custom reward function file (named by path: importing its package would import verl)."""
_NO_LIMIT = 1e9  # verl has no "off" for dual-clip and grad clipping: an unreachable constant


@dataclass(frozen=True)
class VerlRun:
    """What a verl run needs beyond the algorithm: model, data, reward hookup and hardware."""

    model_path: str
    """A Hugging Face model directory or Hub id, loadable by every node."""
    train_files: list[str] = field(default_factory=list)
    """verl Parquet files (``write_verl_parquet`` makes them from mucode data)."""
    val_files: list[str] = field(default_factory=list)
    """Validation Parquet files; empty: verl's validation is off (``trainer.val_before_train=false``,
    ``test_freq=-1``) and the training files fill ``data.val_files`` only because verl requires some."""
    verifier_url: str | None = None
    """Base URL(s) of a mucode verifier, comma-separated, reachable from every node."""
    gpus_per_node: int = 8
    nnodes: int = 1
    project: str = "mucode"


@dataclass(frozen=True)
class _VerlLoss:
    """How one objective's typed params become verl settings; ``carries`` are the params it passes on."""

    settings: Callable[[Any], list[tuple[str, Any]]]
    carries: tuple[str, ...]


def _mu_grpo(p: Any) -> list[tuple[str, Any]]:
    return [
        (f"{ENV}.MUCODE_VETO_SCOPE", p.veto_scope.value),
        (f"{ENV}.MUCODE_VETO_THRESHOLD", str(p.veto_threshold)),
        (f"{ACTOR}.policy_loss.loss_mode", "mu_grpo"),
        (f"{ACTOR}.clip_ratio_high", p.ratio_upper - 1.0),
    ]


def _m2po(p: Any) -> list[tuple[str, Any]]:
    return [
        (f"{ENV}.MUCODE_M2PO_THRESHOLD", str(p.m2_threshold)),
        (f"{ENV}.MUCODE_M2PO_MODE", p.mode.value),
        (f"{ACTOR}.policy_loss.loss_mode", "m2po"),
    ]


def _grpo(p: Any) -> list[tuple[str, Any]]:
    # verl's own vanilla PPO-clip loss, which always applies dual-clip to A<0 tokens
    return [
        (f"{ACTOR}.policy_loss.loss_mode", "vanilla"),
        (f"{ACTOR}.clip_ratio_low", p.clip_low),
        (f"{ACTOR}.clip_ratio_high", p.clip_high),
        (f"{ACTOR}.clip_ratio_c", p.dual_clip if p.dual_clip is not None else _NO_LIMIT),
    ]


def _offpolicy_grpo(p: Any) -> list[tuple[str, Any]]:
    # mucode's adapter (PPO-clip, zero-advantage rows out of the loss); the KL is verl's own (below)
    return [
        (f"{ACTOR}.policy_loss.loss_mode", "offpolicy_grpo"),
        (f"{ACTOR}.clip_ratio_low", p.clip_low),
        (f"{ACTOR}.clip_ratio_high", p.clip_high),
    ]


_COMMON = ("aggregation", "norm_length", "kl_coef", "kl_estimator")
VERL_LOSSES: Registry[_VerlLoss] = Registry("objective with a verl loss")
"""The objectives a verl run can optimize, by name (mu_grpo and m2po through mucode's adapters)."""
VERL_LOSSES.register(
    "mu_grpo", _VerlLoss(_mu_grpo, (*_COMMON, "ratio_upper", "veto_scope", "veto_threshold"))
)
VERL_LOSSES.register("m2po", _VerlLoss(_m2po, (*_COMMON, "m2_threshold", "mode")))
VERL_LOSSES.register("grpo", _VerlLoss(_grpo, (*_COMMON, "clip_low", "clip_high", "dual_clip")))
VERL_LOSSES.register(
    "offpolicy_grpo", _VerlLoss(_offpolicy_grpo, (*_COMMON, "clip_low", "clip_high", "mask_zero_variance"))
)

_NO_VERL_LOSS = {
    "conspo": "it contrasts the responses of one prompt with each other, and verl's policy-loss call gets "
    "neither group ids nor whole groups",
    "agpo": "its clip needs AGPO's probe statistics per prompt, which verl's rollout does not produce",
}


def verl_refusal(cfg: MucodeConfig) -> str | None:
    """One line saying why verl cannot run ``cfg`` (None: it can)."""
    if cfg.sampling.controller != "fixed":
        return (
            f"sampling.controller={cfg.sampling.controller} has no verl equivalent: verl samples every prompt "
            "at one temperature and has no probe generation"
        )
    if cfg.compose.composer != "fresh":
        return (
            f"compose.composer={cfg.compose.composer} has no verl equivalent: verl trains each step on that "
            "step's own rollouts (no buffer of earlier rollouts)"
        )
    if cfg.algo.objective in _NO_VERL_LOSS:
        return f"algo.objective={cfg.algo.objective} has no verl loss: {_NO_VERL_LOSS[cfg.algo.objective]}"
    if cfg.algo.objective not in VERL_LOSSES:  # a plug-in objective: verl has no loss for it
        return f"algo.objective={cfg.algo.objective} has no verl loss; verl-config supports {', '.join(VERL_LOSSES.names())}"  # noqa: E501
    return None


def _kl_settings(params: Any) -> list[tuple[str, Any]]:
    """verl's own reference KL loss for ``kl_coef`` > 0 (k3 is verl's low_var_kl, k1 its kl)."""
    if params.kl_coef <= 0:
        return [(f"{ACTOR}.use_kl_loss", False)]
    return [
        (f"{ACTOR}.use_kl_loss", True),
        (f"{ACTOR}.kl_loss_coef", params.kl_coef),
        (f"{ACTOR}.kl_loss_type", "low_var_kl" if params.kl_estimator.value == "k3" else "kl"),
    ]


def _objective_settings(cfg: MucodeConfig) -> list[tuple[str, Any]]:
    params = cfg.algo.params
    out = VERL_LOSSES.get(cfg.algo.objective).settings(params)
    out.append((f"{ACTOR}.loss_agg_mode", params.aggregation.value))
    if params.norm_length is not None:
        out.append((f"{ACTOR}.loss_scale_factor", params.norm_length))
    return out


def verl_settings(cfg: MucodeConfig) -> list[tuple[str, Any]]:
    """(dotted verl key, typed value) pairs equivalent to ``cfg``'s algorithm and batch plan."""
    b, r, o = cfg.batch, cfg.rollout, cfg.optim
    objective = _objective_settings(cfg)
    return [
        (f"{ENV}.VERL_USE_EXTERNAL_MODULES", EXTERNAL_MODULE),
        *[p for p in objective if p[0].startswith(ENV)],
        ("algorithm.adv_estimator", "grpo"),
        ("algorithm.norm_adv_by_std_in_grpo", cfg.algo.adv_std is not StdEstimator.NONE),
        ("algorithm.use_kl_in_reward", False),
        ("algorithm.rollout_correction.bypass_mode", False),
        ("algorithm.rollout_correction.rollout_is", None),
        ("actor_rollout_ref.rollout.n", b.samples_per_prompt),
        ("actor_rollout_ref.rollout.temperature", r.temperature),
        ("actor_rollout_ref.rollout.top_p", r.top_p),
        ("actor_rollout_ref.rollout.top_k", r.top_k),
        ("data.max_response_length", r.max_response_tokens),
        ("data.max_prompt_length", cfg.data.max_prompt_tokens),
        ("data.train_batch_size", b.prompts_per_stage()),
        (f"{ACTOR}.ppo_mini_batch_size", b.prompts_per_update),
        (f"{ACTOR}.ppo_epochs", b.update_epochs),
        ("trainer.total_training_steps", b.num_stages),
        *[p for p in objective if not p[0].startswith(ENV)],
        *_kl_settings(cfg.algo.params),
        (f"{ACTOR}.entropy_coeff", 0),
        (f"{ACTOR}.optim.lr", o.lr),
        (f"{ACTOR}.optim.weight_decay", o.weight_decay),
        (f"{ACTOR}.optim.betas", [o.betas[0], o.betas[1]]),
        (f"{ACTOR}.grad_clip", o.grad_clip if o.grad_clip is not None else _NO_LIMIT),
        (f"{ACTOR}.optim.lr_warmup_steps", o.warmup_updates),
        ("trainer.experiment_name", cfg.train.run_name),
    ]


def _run_settings(cfg: MucodeConfig, run: VerlRun) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [
        ("actor_rollout_ref.model.path", run.model_path),
        ("actor_rollout_ref.rollout.name", "vllm"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", cfg.rollout.tensor_parallel_size),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", cfg.rollout.gpu_memory_utilization),
        (f"{ACTOR}.use_dynamic_bsz", True),
        (f"{ACTOR}.ppo_max_token_len_per_gpu", cfg.batch.micro_batch_tokens),
        ("data.train_files", list(run.train_files)),
        ("data.val_files", list(run.val_files or run.train_files)),
        *([] if run.val_files else [("trainer.val_before_train", False), ("trainer.test_freq", -1)]),
        ("reward.custom_reward_function.path", str(REWARD_FILE)),
        ("reward.custom_reward_function.name", "compute_score"),
        ("trainer.project_name", run.project),
        ("trainer.n_gpus_per_node", run.gpus_per_node),
        ("trainer.nnodes", run.nnodes),
        ("trainer.logger", ["console"]),
    ]
    if run.verifier_url:
        out.append((f"{ENV}.MUCODE_VERIFIER_URL", run.verifier_url))
    return out


def verl_run_config(cfg: MucodeConfig, run: VerlRun) -> dict[str, Any]:
    """The nested verl config file (a dict to dump as YAML) for ``cfg`` on ``run``."""
    tree: dict[str, Any] = {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
    }
    for key, value in [*verl_settings(cfg), *_run_settings(cfg, run)]:
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def write_verl_run(cfg: MucodeConfig, run: VerlRun, out_dir: Path) -> tuple[Path, str]:
    """Writes ``out_dir/mucode_verl.yaml``; returns it and the shell command that runs it."""

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{CONFIG_NAME}.yaml"
    header = "# verl 0.9.1 run written by `mucode verl-config`; run it with the command printed beside it.\n"
    path.write_text(header + yaml.safe_dump(verl_run_config(cfg, run), sort_keys=False, allow_unicode=True))
    env = f"VERL_USE_EXTERNAL_MODULES={EXTERNAL_MODULE}"
    if run.verifier_url:
        env += f" MUCODE_VERIFIER_URL={run.verifier_url}"
    command = (
        f"{env} python -m verl.trainer.main_ppo --config-path {out_dir.resolve()} --config-name {CONFIG_NAME}"
    )
    return path, command


def write_verl_parquet(records: Iterable[Any], path: Path, *, data_source: str = "mucode") -> int:
    """Writes task records (``mucode.data.TaskRecord``) as verl's RL Parquet schema; returns the row count.

    ``extra_info.mucode`` holds ``{"program", "spec"}`` as JSON text (the verifier item's program and
    spec, read back by ``mucode.integrations.verl.reward.compute_score``), so math and code rows can share one file.
    ``reward_model.ground_truth`` carries the math answer, or the code spec as JSON, for verl's own tools.
    """
    import pyarrow as pa  # lazy: pyarrow
    import pyarrow.parquet as pq  # lazy: pyarrow

    rows = []
    for index, record in enumerate(records):
        answer = record.spec.get("answer") if record.program == "math" else None
        rows.append(
            {
                "data_source": data_source,
                "prompt": [{"role": m["role"], "content": m["content"]} for m in record.messages],
                "ability": record.program,
                "reward_model": {
                    "style": "rule",
                    "ground_truth": str(answer) if answer is not None else json.dumps(record.spec),
                },
                "extra_info": {
                    "index": index,
                    "prompt_id": record.prompt_id,
                    "mucode": json.dumps({"program": record.program, "spec": record.spec}),
                },
            }
        )
    if not rows:
        raise ValueError(f"no records to write to {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return str(value)


def verl_overrides(cfg: MucodeConfig) -> list[tuple[str, str]]:
    """(key, value) Hydra command-line overrides for ``python -m verl.trainer.main_ppo`` equivalent to ``cfg``.

    Keys verl's schema lacks (Ray's environment variables) carry Hydra's ``+`` prefix."""
    return [(("+" if k.startswith(ENV) else "") + k, _fmt(v)) for k, v in verl_settings(cfg)]


def verl_warnings(cfg: MucodeConfig) -> list[str]:
    """Settings of ``cfg`` that verl cannot reproduce exactly."""
    out = []
    if cfg.algo.adv_std is StdEstimator.POPULATION:
        out.append("verl's GRPO std is the unbiased one; algo.adv_std=population has no verl equivalent")
    params = cfg.algo.params
    if params.aggregation is LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM and params.norm_length is None:
        out.append("seq-mean-token-sum-norm: verl's L is its padded response length (set algo.norm_length)")
    carried = VERL_LOSSES.get(cfg.algo.objective).carries
    default = type(params)()
    for f in fields(params):
        if f.name not in carried and getattr(params, f.name) != getattr(default, f.name):
            out.append(
                f"algo.{f.name}={getattr(params, f.name)} has no verl equivalent; verl runs the default "
                f"{getattr(default, f.name)}"
            )
    if params.kl_coef > 0 and cfg.reference.reset_every_stages is not None:
        out.append(
            f"reference.reset_every_stages={cfg.reference.reset_every_stages} has no verl equivalent: "
            "verl's reference policy stays the initial one"
        )
    if getattr(params, "mask_zero_variance", False):
        out.append(
            "zero-variance groups leave verl's loss (their advantages are 0) but stay in its global "
            "denominator"
        )
    if not cfg.algo.recompute_behaviour_logprobs:
        out.append(
            "verl recomputes the behaviour log-probs with the actor (decoupled mode); "
            "the engine's stored log-probs are not used there"
        )
    return out


def verl_run_warnings(cfg: MucodeConfig, run: VerlRun, train_rows: int | None) -> list[str]:
    """What the user of ``run`` should know: a data set smaller than one verl step, no validation set."""
    out = []
    batch = cfg.batch.prompts_per_update * cfg.batch.updates_per_stage
    if train_rows is not None and train_rows < batch:
        out.append(
            f"the training data has {train_rows} prompts, fewer than one verl step's batch "
            f"(data.train_batch_size = {cfg.batch.prompts_per_update} x {cfg.batch.updates_per_stage} = {batch}); "
            "verl drops the incomplete batch and would train 0 steps: add data or lower "
            "batch.updates_per_stage / batch.prompts_per_update"
        )
    if not run.val_files:
        out.append(
            "no --val-files: verl's validation is off (trainer.val_before_train=false, test_freq=-1; the "
            "training files fill data.val_files only because verl requires some); pass --val-files for a "
            "held-out set, or evaluate the checkpoints with `mucode eval` on the benchmarks"
        )
    return out


def parquet_rows(paths: Iterable[str]) -> int | None:
    """Rows of the local Parquet files ``paths`` (from their footers); None when one is not a local file."""
    import pyarrow.parquet as pq  # lazy: pyarrow

    total = 0
    for path in paths:
        if not Path(path).is_file():
            return None
        total += pq.ParquetFile(path).metadata.num_rows
    return total


def verl_command(cfg: MucodeConfig) -> str:
    """The shell command (export + python -m verl.trainer.main_ppo with the overrides)."""
    lines = [f"export VERL_USE_EXTERNAL_MODULES={EXTERNAL_MODULE}", "python -m verl.trainer.main_ppo \\"]
    pairs = verl_overrides(cfg)
    lines += [f"  {k}={v}" + (" \\" if i < len(pairs) - 1 else "") for i, (k, v) in enumerate(pairs)]
    return "\n".join(lines)
