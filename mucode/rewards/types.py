"""Types shared by every reward program: the item/result contract.

An ``Item`` is what a trainer, an evaluator or ``mucode verify`` hands in; a ``Result`` is what
comes back (both defined with the status enum in ``mucode.protocol``, re-exported here).
``status`` says why a reward is what it is. Two statuses are *infrastructure* failures (``verifier_error``,
``sandbox_error``): they carry no reward signal and a trainer must
mask them out (``INFRA_STATUSES``), never treat them as reward 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mucode.protocol import INFRA_STATUSES, Item, Result, Status

if TYPE_CHECKING:
    from mucode.rewards.math_pool import MathWorkerPool
    from mucode.sandbox.base import SandboxBackend

__all__ = [
    "INFRA_STATUSES",
    "Item",
    "Result",
    "RewardContext",
    "RewardProgram",
    "Status",
]


@dataclass
class RewardContext:
    """What a reward program may use. Built once per service (or ``mucode verify`` run)."""

    sandbox: SandboxBackend | None = None
    """The code sandbox backend, or None when this process serves no program that needs one."""
    math: MathWorkerPool | None = None
    """Worker processes running math-verify, or None when math is not served."""
    options: dict[str, Any] = field(default_factory=dict)
    """Free-form settings for plug-ins (``MUCODE_PLUGIN_OPTIONS`` as JSON)."""


@runtime_checkable
class RewardProgram(Protocol):
    """A reward program. Register one under the ``mucode.rewards`` entry-point group.

    Optional class attributes the service uses when present:

    - ``spec_model``: a pydantic model; every item's ``spec`` is validated against it before any
      work starts, so a malformed spec is a 422 naming the item and field instead of a result.
    - ``needs``: a set drawn from ``{"sandbox", "math"}``; the service starts only what is needed.
    """

    name: str

    async def score(self, item: Item, ctx: RewardContext) -> Result: ...
