"""The objective registry: built-ins (``grpo``, ``mu_grpo``, ``m2po``) and plugin registration."""

from __future__ import annotations

from typing import Any

from mucode.algo.grpo import GRPO
from mucode.algo.m2po import M2PO
from mucode.algo.mu_grpo import MU_GRPO
from mucode.algo.objective import Objective
from mucode.registry import Registry

__all__ = ["get_objective", "objective_names", "register_objective"]

_OBJECTIVES: Registry[Objective[Any]] = Registry("objective")
for _builtin in (GRPO, MU_GRPO, M2PO):
    _OBJECTIVES.register(_builtin.name, _builtin)


def register_objective(objective: Objective[Any]) -> Objective[Any]:
    """Add a new objective under ``objective.name``; raises DuplicateNameError if the name is taken."""
    return _OBJECTIVES.register(objective.name, objective)


def get_objective(name: str) -> Objective[Any]:
    """The objective registered as ``name``; raises UnknownNameError listing the valid names."""
    return _OBJECTIVES.get(name)


def objective_names() -> tuple[str, ...]:
    """Names of every registered objective."""
    return _OBJECTIVES.names()
