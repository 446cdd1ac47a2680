"""Types shared by every reward program: the item/result contract.

An ``Item`` is what a trainer, an evaluator or ``mucode verify`` hands in; a ``Result`` is what
comes back. ``status`` says why a reward is what it is. Two statuses are *infrastructure*
failures (``verifier_error``, ``sandbox_error``): they carry no reward signal and a trainer must
mask them out (``INFRA_STATUSES``), never treat them as reward 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from mucode.rewards.math_pool import MathWorkerPool
    from mucode.sandbox.base import SandboxBackend

__all__ = [
    "INFRA_STATUSES",
    "Item",
    "Result",
    "RewardContext",
    "RewardProgram",
    "RewardStatus",
]


class RewardStatus(str, Enum):
    """Why a result has the reward it has."""

    correct = "correct"
    wrong_answer = "wrong_answer"
    runtime_error = "runtime_error"
    time_limit = "time_limit"
    memory_limit = "memory_limit"
    output_limit = "output_limit"
    compile_error = "compile_error"
    no_code = "no_code"
    no_answer = "no_answer"
    verifier_error = "verifier_error"
    sandbox_error = "sandbox_error"


INFRA_STATUSES: frozenset[RewardStatus] = frozenset({RewardStatus.verifier_error, RewardStatus.sandbox_error})
"""Statuses that mean "the verifier could not decide": never a reward, masked by the trainer."""


class Item(BaseModel):
    """One response to score. Extra top-level fields pass through untouched."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, description="Caller's id, echoed in the result.")
    program: str = Field(description="Reward program name: 'code', 'math' or an installed plug-in.")
    response: str = Field(description="The model's response text.")
    spec: dict[str, Any] = Field(default_factory=dict, description="Program-specific task spec.")


class Result(BaseModel):
    """The verdict on one item."""

    id: str | None = None
    reward: float
    status: RewardStatus
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def infra(cls, item_id: str | None, status: RewardStatus, error: str) -> Result:
        """An infrastructure failure: reward 0.0 by convention, but the status marks it as no signal."""
        if status not in INFRA_STATUSES:
            raise ValueError(f"Result.infra needs an infrastructure status {sorted(INFRA_STATUSES)}, got {status}")
        return cls(id=item_id, reward=0.0, status=status, details={"error": error})


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
