"""``mucode verl-config`` for ``asynchronous.enabled``: a verl 0.9.1 ``fully_async_policy`` run.

verl 0.9.1 ships the fully asynchronous trainer as ``verl.experimental.fully_async_policy``
(``fully_async_main``, its Hydra config ``fully_async_ppo_trainer`` on top of ``ppo_trainer``): a
rollouter on its own GPUs streams samples through a message queue to a trainer on other GPUs, which
syncs its weights to the rollouter (NCCL checkpoint engine) every ``trigger_parameter_sync_step``
steps. ``fully_async_ppo_trainer`` cannot be a default of another file (it sets ``hydra.searchpath``,
which Hydra allows only in a primary config), so the file written here is a primary config like it:
``defaults: [ppo_trainer, _self_]`` with verl's config directory on the search path, every key of the
recipe's file (:data:`RECIPE_DEFAULTS`, verl 0.9.1's values; the test checks them against the
installed file) and, over them and what the synchronous run carries (the loss, the batch plan, the
model, data, reward and verifier):

- ``async_training.trigger_parameter_sync_step = asynchronous.sync_every``; one trainer step is one
  update of ``ppo_mini_batch_size = batch.prompts_per_update`` prompts (``require_batches = 1``);
- ``async_training.staleness_threshold`` η with verl's bound of (η + 1) · sync_every minibatches in
  flight, i.e. a lag of (η + 1) · sync_every − 1 updates = ``max_lag_updates``;
- ``partial_rollout = false`` (mucode samples a group with one version; verl would otherwise finish an
  interrupted rollout with the new weights);
- the ratio against the stored behaviour log-probs, as mucode's asynchronous mode has it:
  ``algorithm.rollout_correction.bypass_mode = true`` and ``actor.use_rollout_log_probs = true``
  (verl's recipe requires both);
- the streaming batch shape verl requires: ``data.train_batch_size = 0``, ``data.gen_batch_size = 1``,
  ``actor_rollout_ref.hybrid_engine = false``, ``rollout.total_rollout_steps`` = the run's prompts
  (``num_stages × B_train``), ``trainer.total_training_steps`` = its updates;
- the device split: ``trainer.n_gpus_per_node`` train, ``rollout.n_gpus_per_node`` generate, on
  ``nnodes`` nodes each (e.g. 4 GPUs: 2 + 2).

Deviations: verl's rollouter admits samples by count, not by the version that sampled them, so the lag
bound holds on average rather than for every group as in mucode; verl's recipe is experimental
(mucode tests that it composes and that its checks pass, not a GPU run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mucode.config import MucodeConfig
from mucode.integrations.verl.config import (
    ACTOR,
    EXTERNAL_MODULE,
    VerlRun,
    _fmt,
    _run_settings,
    verl_settings,
    verl_warnings,
)

__all__ = [
    "ASYNC_CONFIG_NAME",
    "ASYNC_MAIN",
    "RECIPE_DEFAULTS",
    "verl_async_command",
    "verl_async_run_config",
    "verl_async_settings",
    "verl_async_warnings",
    "write_verl_async_run",
]

RECIPE_DEFAULTS: list[tuple[str, Any]] = [
    ("async_training.staleness_threshold", 0.1),
    ("async_training.trigger_parameter_sync_step", 4),
    ("async_training.require_batches", 1),
    ("async_training.partial_rollout", True),
    ("async_training.use_trainer_do_validate", False),
    ("async_training.use_dynamic_resource_scheduling", False),
    ("async_training.dynamic_schedule_policy", "default"),
    ("async_training.dynamic_schedule_deactivate_ratio", 0.3),
    ("async_training.dynamic_schedule_enable_rebalance", True),
    ("async_training.concurrent_samples_per_replica", 16),
    ("rollout.nnodes", 1),
    ("rollout.n_gpus_per_node", 8),
    ("rollout.n", 4),
    ("rollout.total_rollout_steps", 100),
    ("data.gen_batch_size", 1),
    ("actor_rollout_ref.rollout.calculate_log_probs", True),
    ("actor_rollout_ref.rollout.standalone_gpu_memory_utilization", None),
    ("actor_rollout_ref.rollout.checkpoint_engine.backend", "nccl"),
    ("actor_rollout_ref.actor.use_rollout_log_probs", True),
    ("actor_rollout_ref.model.use_remove_padding", True),
    ("algorithm.rollout_correction.bypass_mode", True),
]
"""The keys of verl 0.9.1's ``fully_async_policy/config/fully_async_ppo_trainer.yaml`` with its values."""
ASYNC_MAIN = "verl.experimental.fully_async_policy.fully_async_main"
ASYNC_CONFIG_NAME = "mucode_verl_async"
_SEARCHPATH = ["pkg://verl.trainer.config"]
_REPLACED = {
    "algorithm.rollout_correction.bypass_mode",
    "trainer.total_training_steps",
    "data.train_batch_size",
}


def verl_async_settings(
    cfg: MucodeConfig, rollout_gpus: int | None = None, gpus_per_node: int = 8
) -> list[tuple[str, Any]]:
    """The keys of verl's fully_async_policy that mean what ``asynchronous.*`` means in mucode (see the
    module doc); ``rollout_gpus`` of each node's ``gpus_per_node`` generate (default: half)."""
    a, b = cfg.asynchronous, cfg.batch
    rollout = rollout_gpus if rollout_gpus is not None else max(1, gpus_per_node // 2)
    return [
        ("async_training.trigger_parameter_sync_step", a.sync_every),
        ("async_training.staleness_threshold", round((a.max_lag_updates + 1) / a.sync_every - 1, 6)),
        ("async_training.require_batches", 1),
        ("async_training.partial_rollout", False),
        ("data.train_batch_size", 0),
        ("data.gen_batch_size", 1),
        ("actor_rollout_ref.hybrid_engine", False),
        ("actor_rollout_ref.rollout.calculate_log_probs", True),
        (f"{ACTOR}.use_rollout_log_probs", True),
        ("algorithm.rollout_correction.bypass_mode", True),
        ("rollout.n", b.samples_per_prompt),
        ("rollout.total_rollout_steps", b.num_stages * b.prompts_per_stage()),
        ("trainer.total_training_steps", b.num_stages * b.updates_per_stage),
        ("rollout.n_gpus_per_node", rollout),
        ("trainer.n_gpus_per_node", gpus_per_node - rollout),
    ]


def _check_split(rollout_gpus: int | None, gpus_per_node: int) -> None:
    rollout = rollout_gpus if rollout_gpus is not None else max(1, gpus_per_node // 2)
    if gpus_per_node < 2 or not 1 <= rollout < gpus_per_node:
        raise ValueError(
            f"verl's fully_async_policy trains and generates on separate GPUs: --rollout-gpus={rollout} of "
            f"--gpus-per-node={gpus_per_node} leaves none for one side; give at least 2 GPUs per node and "
            "1 <= --rollout-gpus < --gpus-per-node"
        )


def verl_async_run_config(cfg: MucodeConfig, run: VerlRun, rollout_gpus: int | None = None) -> dict[str, Any]:
    """The nested verl fully_async config file (a dict to dump as YAML) for ``cfg`` on ``run``."""
    _check_split(rollout_gpus, run.gpus_per_node)
    tree: dict[str, Any] = {"hydra": {"searchpath": list(_SEARCHPATH)}, "defaults": ["ppo_trainer", "_self_"]}
    asynchronous = verl_async_settings(cfg, rollout_gpus, run.gpus_per_node)
    replaced = _REPLACED | {k for k, _ in asynchronous}
    sync = [(k, v) for k, v in [*verl_settings(cfg), *_run_settings(cfg, run)] if k not in replaced]
    ours = [*sync, *asynchronous, ("rollout.nnodes", run.nnodes)]
    keys = {k for k, _ in ours}
    settings = [(k, v) for k, v in RECIPE_DEFAULTS if k not in keys] + ours
    for key, value in settings:
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def write_verl_async_run(
    cfg: MucodeConfig, run: VerlRun, out_dir: Path, rollout_gpus: int | None = None
) -> tuple[Path, str]:
    """Writes ``out_dir/mucode_verl_async.yaml``; returns it and the shell command that runs it."""
    tree = verl_async_run_config(cfg, run, rollout_gpus)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{ASYNC_CONFIG_NAME}.yaml"
    header = "# verl 0.9.1 fully_async_policy run written by `mucode verl-config`; run it with the command beside it.\n"
    path.write_text(header + yaml.safe_dump(tree, sort_keys=False, allow_unicode=True))
    env = f"VERL_USE_EXTERNAL_MODULES={EXTERNAL_MODULE}"
    if run.verifier_url:
        env += f" MUCODE_VERIFIER_URL={run.verifier_url}"
    return (
        path,
        f"{env} python -m {ASYNC_MAIN} --config-path {out_dir.resolve()} --config-name {ASYNC_CONFIG_NAME}",
    )


def verl_async_command(cfg: MucodeConfig, rollout_gpus: int | None = None, gpus_per_node: int = 8) -> str:
    """The shell command with command-line overrides (no file), as ``verl_command`` for the synchronous run."""
    _check_split(rollout_gpus, gpus_per_node)
    asynchronous = verl_async_settings(cfg, rollout_gpus, gpus_per_node)
    replaced = _REPLACED | {k for k, _ in asynchronous}
    pairs = [(k, v) for k, v in verl_settings(cfg) if k not in replaced] + asynchronous
    env_prefix = "ray_kwargs.ray_init.runtime_env.env_vars"
    items = [(("+" if k.startswith(env_prefix) else "") + k, _fmt(v)) for k, v in pairs]
    lines = [f"export VERL_USE_EXTERNAL_MODULES={EXTERNAL_MODULE}", f"python -m {ASYNC_MAIN} \\"]
    lines += [f"  {k}={v}" + (" \\" if i < len(items) - 1 else "") for i, (k, v) in enumerate(items)]
    return "\n".join(lines)


def verl_async_warnings(cfg: MucodeConfig) -> list[str]:
    """What verl's fully_async run does not reproduce of ``cfg`` (the synchronous list, less what bypass
    mode changes, plus the lag bound's deviation)."""
    out = [w for w in verl_warnings(cfg) if "recomputes the behaviour log-probs" not in w]
    out.append(
        "verl's fully_async_policy bounds the samples in flight, not each group's version: "
        f"max_lag_updates={cfg.asynchronous.max_lag_updates} holds on average, not for every group"
    )
    return out
