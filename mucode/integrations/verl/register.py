"""Register mucode's ``mu_grpo``, ``m2po`` and ``offpolicy_grpo`` in verl's policy-loss registry (verl 0.9.1).

Importing this module registers them — that is the whole point of the module and the one import
side effect in mucode: verl loads external code by importing the modules named in
``VERL_USE_EXTERNAL_MODULES`` in every worker process::

    VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register python -m verl.trainer.main_ppo \\
        actor_rollout_ref.actor.policy_loss.loss_mode=mu_grpo ...

``import mucode`` alone never touches verl. Registering is idempotent; if verl already holds a
*different* loss under one of these names, registration raises instead of replacing it.
See docs/verl.md for the full set of overrides and :mod:`mucode.integrations.verl.losses` for how
parameters are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mucode.integrations.verl.losses import m2po_policy_loss, mu_grpo_policy_loss, offpolicy_grpo_policy_loss

__all__ = ["LOSSES", "m2po_policy_loss", "mu_grpo_policy_loss", "offpolicy_grpo_policy_loss", "register"]

LOSSES: dict[str, Callable[..., tuple[Any, dict[str, Any]]]] = {
    "mu_grpo": mu_grpo_policy_loss,
    "m2po": m2po_policy_loss,
    "offpolicy_grpo": offpolicy_grpo_policy_loss,
}


def register() -> None:
    """Add :data:`LOSSES` to ``verl.trainer.ppo.core_algos``'s registry (no-op if already there)."""
    from verl.trainer.ppo import core_algos  # lazy: verl

    for name, fn in LOSSES.items():
        existing = core_algos.POLICY_LOSS_REGISTRY.get(name)
        if existing is fn:
            continue
        if existing is not None:
            raise RuntimeError(
                f"verl already has a policy loss named {name!r} "
                f"({existing.__module__}.{existing.__qualname__}); mucode will not replace it. "
                "Use verl's own loss or remove the other registration."
            )
        core_algos.register_policy_loss(name)(fn)


register()
