"""Reward programs: score a response against a task spec.

Built in: ``code`` (sandboxed tests) and ``math`` (math-verify). More come from installed packages
through the ``mucode.rewards`` entry-point group (``registry``). Submodules are imported on use, so
importing this package stays cheap and free of side effects.
"""

from mucode.protocol import Status
from mucode.rewards.types import INFRA_STATUSES, Item, Result, RewardContext, RewardProgram

__all__ = ["INFRA_STATUSES", "Item", "Result", "RewardContext", "RewardProgram", "Status"]
