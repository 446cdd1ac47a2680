"""The objective registry: built-ins (``grpo``, ``mu_grpo``, ``m2po``, ``offpolicy_grpo``, ``conspo``,
``agpo``) and plug-ins.

Plug-in packages declare objectives under the ``mucode.objectives`` entry-point group::

    [project.entry-points."mucode.objectives"]
    my_loss = "my_package.losses:MY_LOSS"     # an Objective whose name is "my_loss"

They are loaded on first lookup, so ``algo.objective=my_loss`` in a config selects one; its
``params_type`` decides which ``algo.params`` keys the config accepts.
"""

from __future__ import annotations

from typing import Any

from mucode.algo.agpo import AGPO
from mucode.algo.conspo import CONSPO
from mucode.algo.grpo import GRPO
from mucode.algo.m2po import M2PO
from mucode.algo.mu_grpo import MU_GRPO
from mucode.algo.objective import Objective
from mucode.algo.offpolicy_grpo import OFFPOLICY_GRPO
from mucode.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "OBJECTIVES", "get_objective", "objective_names", "register_objective"]

ENTRY_POINT_GROUP = "mucode.objectives"


def _as_objective(loaded: object) -> Objective[Any]:
    """An entry point's object as an Objective: the instance itself, or a no-argument factory's result."""
    item = loaded() if callable(loaded) and not isinstance(loaded, Objective) else loaded
    if not isinstance(item, Objective):
        raise TypeError(f"expected a mucode.algo.Objective, got {type(item).__name__}")
    return item


OBJECTIVES: Registry[Objective[Any]] = Registry(
    "objective", entry_point_group=ENTRY_POINT_GROUP, adapt=_as_objective
)
"""Every objective by name: the built-ins and what installed packages declare."""
for _builtin in (GRPO, MU_GRPO, M2PO, OFFPOLICY_GRPO, CONSPO, AGPO):
    OBJECTIVES.register(_builtin.name, _builtin)


def register_objective(objective: Objective[Any]) -> Objective[Any]:
    """Add a new objective under ``objective.name``; raises DuplicateNameError if the name is taken."""
    return OBJECTIVES.register(objective.name, objective)


def get_objective(name: str) -> Objective[Any]:
    """The objective registered as ``name``; raises UnknownNameError listing the valid names."""
    return OBJECTIVES.get(name)


def objective_names() -> tuple[str, ...]:
    """Names of every registered objective (plug-ins included)."""
    return OBJECTIVES.names()
