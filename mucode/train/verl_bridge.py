"""``mucode verl-config``: the verl 0.9.1 overrides that run the same config on verl (Ray, multi-node).

The losses come from ``mucode.integrations.verl`` (registered in verl's policy-loss registry when
verl imports the module named in ``VERL_USE_EXTERNAL_MODULES``); docs/verl.md explains every
override. This module only translates a :class:`MucodeConfig` into those overrides.

Mapping (μ-GRPO stage = one verl step): ``data.train_batch_size = prompts_per_update ×
updates_per_stage`` (B_train), ``ppo_mini_batch_size = prompts_per_update`` (B_mini),
``ppo_epochs = 1``, ``trainer.total_training_steps = num_stages``. Behaviour log-probs: verl's
decoupled mode recomputes them with the actor (the "recompute" option); bypass mode would
replace the loss, so it is kept off. Not translated: model/data paths, hardware and micro-batch
sizes (add them as for any verl run); GRPO's ``dual_clip_c`` maps to verl's ``clip_ratio_c``.
"""

from __future__ import annotations

from mucode.config import MucodeConfig

__all__ = ["EXTERNAL_MODULE", "verl_command", "verl_overrides", "verl_warnings"]

EXTERNAL_MODULE = "mucode.integrations.verl"
_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars"
_ACTOR = "actor_rollout_ref.actor"


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return str(value)


def _objective_overrides(cfg: MucodeConfig) -> list[tuple[str, str]]:
    a = cfg.algo
    if a.objective == "mu_grpo":
        return [
            (f"{_ENV}.MUCODE_VETO_SCOPE", a.veto_scope),
            (f"{_ENV}.MUCODE_VETO_THRESHOLD", _fmt(a.veto_threshold)),
            (f"{_ACTOR}.policy_loss.loss_mode", "mu_grpo"),
            (f"{_ACTOR}.clip_ratio_high", _fmt(a.clip_eps_high)),
        ]
    if a.objective == "m2po":
        return [
            (f"{_ENV}.MUCODE_M2PO_THRESHOLD", _fmt(a.m2po_threshold)),
            (f"{_ENV}.MUCODE_M2PO_MODE", {"greedy": "greedy_mask", "waterfill": "water_fill"}[a.m2po_mode]),
            (f"{_ACTOR}.policy_loss.loss_mode", "m2po"),
        ]
    # grpo: verl's own vanilla PPO-clip loss
    out = [
        (f"{_ACTOR}.policy_loss.loss_mode", "vanilla"),
        (f"{_ACTOR}.clip_ratio_low", _fmt(a.clip_eps_low)),
        (f"{_ACTOR}.clip_ratio_high", _fmt(a.clip_eps_high)),
    ]
    # verl always applies dual-clip to A<0 tokens in vanilla; "off" is an unreachable constant.
    out.append((f"{_ACTOR}.clip_ratio_c", _fmt(a.dual_clip_c if a.dual_clip_c is not None else 1e9)))
    return out


def verl_overrides(cfg: MucodeConfig) -> list[tuple[str, str]]:
    """(key, value) Hydra overrides for ``python -m verl.trainer.main_ppo`` equivalent to ``cfg``."""
    b, r, o = cfg.batch, cfg.rollout, cfg.optim
    pairs: list[tuple[str, str]] = [(f"{_ENV}.VERL_USE_EXTERNAL_MODULES", EXTERNAL_MODULE)]
    pairs += [p for p in _objective_overrides(cfg) if p[0].startswith(_ENV)]
    pairs += [
        ("algorithm.adv_estimator", "grpo"),
        ("algorithm.norm_adv_by_std_in_grpo", _fmt(cfg.algo.adv_std != "none")),
        ("algorithm.use_kl_in_reward", "false"),
        ("algorithm.rollout_correction.bypass_mode", "false"),
        ("algorithm.rollout_correction.rollout_is", "null"),
        ("actor_rollout_ref.rollout.n", _fmt(b.samples_per_prompt)),
        ("actor_rollout_ref.rollout.temperature", _fmt(r.temperature)),
        ("actor_rollout_ref.rollout.top_p", _fmt(r.top_p)),
        ("actor_rollout_ref.rollout.top_k", _fmt(r.top_k)),
        ("data.max_response_length", _fmt(r.max_response_tokens)),
        ("data.max_prompt_length", _fmt(cfg.data.max_prompt_tokens)),
        ("data.train_batch_size", _fmt(b.prompts_per_update * b.updates_per_stage)),
        (f"{_ACTOR}.ppo_mini_batch_size", _fmt(b.prompts_per_update)),
        (f"{_ACTOR}.ppo_epochs", "1"),
        ("trainer.total_training_steps", _fmt(b.num_stages)),
    ]
    pairs += [p for p in _objective_overrides(cfg) if not p[0].startswith(_ENV)]
    pairs += [
        (f"{_ACTOR}.loss_agg_mode", cfg.algo.loss_agg),
        (f"{_ACTOR}.use_kl_loss", "false"),
        (f"{_ACTOR}.entropy_coeff", "0"),
        (f"{_ACTOR}.optim.lr", _fmt(o.lr)),
        (f"{_ACTOR}.optim.weight_decay", _fmt(o.weight_decay)),
        (f"{_ACTOR}.optim.betas", f"[{o.betas[0]},{o.betas[1]}]"),
        (f"{_ACTOR}.grad_clip", _fmt(o.grad_clip if o.grad_clip is not None else 1e9)),
        (f"{_ACTOR}.optim.lr_warmup_steps", _fmt(o.warmup_updates)),
        ("trainer.experiment_name", cfg.train.run_name),
    ]
    return pairs


def verl_warnings(cfg: MucodeConfig) -> list[str]:
    """Settings of ``cfg`` that verl cannot reproduce exactly."""
    out = []
    if cfg.algo.adv_std == "population":
        out.append("verl's GRPO std is the unbiased one; algo.adv_std=population has no verl equivalent")
    if cfg.algo.loss_agg == "seq-mean-token-sum-norm":
        out.append("seq-mean-token-sum-norm: verl's L is its padded response length")
    if not cfg.algo.recompute_behaviour_logprobs:
        out.append("verl recomputes the behaviour log-probs with the actor (decoupled mode); "
                   "the engine's stored log-probs are not used there")
    return out


def verl_command(cfg: MucodeConfig) -> str:
    """The shell command (export + python -m verl.trainer.main_ppo with the overrides)."""
    lines = [f"export VERL_USE_EXTERNAL_MODULES={EXTERNAL_MODULE}", "python -m verl.trainer.main_ppo \\"]
    pairs = verl_overrides(cfg)
    lines += [f"  {k}={v}" + (" \\" if i < len(pairs) - 1 else "") for i, (k, v) in enumerate(pairs)]
    return "\n".join(lines)
