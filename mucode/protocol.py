"""mucode's vocabulary, on the ground floor: every layer (sandbox, reward programs, verifier, trainer,
evaluators, integrations) speaks it, and it imports nothing of mucode.

- ``Status``: why a result (or one sandbox test) has the reward it has; the one status enum of mucode.
- ``INFRA_STATUSES`` / ``is_infra``: the two *infrastructure* statuses (``verifier_error``,
  ``sandbox_error``) say "the verifier could not decide": re-sent by the client, and when they
  persist after the retries, *charged* to the program (reward 0.0, ``details["charged"]``): trained
  and counted as a failure, never left out, so that making the verifier fail never pays.
- ``Connection``: how a client reaches a verifier (token, timeouts, retries, batching): the one
  place these defaults live, for the trainer's ``verifier.*`` keys, the evaluators'
  ``VerifierOptions``, the TRL and verl adapters and ``VerifierClient``.
- ``Item`` (one response to score) and ``Result`` (its verdict). The HTTP bodies built from them
  (``VerifyRequest``, ``VerifyResponse``, ``ErrorResponse``) are the service's, in
  ``mucode.verifier.schemas``.

Only pydantic is imported here, so any side (the trainer, an adapter loaded by path) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["INFRA_STATUSES", "SANDBOX_VERDICTS", "Connection", "Item", "Result", "Status", "is_infra"]


class Status(str, Enum):
    """Why a result (or a sandbox test) has the verdict it has."""

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

    @property
    def infra(self) -> bool:
        """True for an infrastructure failure (no reward signal)."""
        return self in INFRA_STATUSES


INFRA_STATUSES: frozenset[Status] = frozenset({Status.verifier_error, Status.sandbox_error})
"""Statuses that mean "the verifier could not decide": never a reward; charged as failures after the retries.
Members compare equal to their string values, so ``"sandbox_error" in INFRA_STATUSES`` holds."""


SANDBOX_VERDICTS: frozenset[Status] = frozenset(Status) - {
    Status.no_code,
    Status.no_answer,
    Status.verifier_error,
}
"""The statuses a sandbox gives a job or a test (its verdicts): the item-level ones
(``no_code``, ``no_answer``) and the service's ``verifier_error`` are never a sandbox verdict."""


def is_infra(status: str | Status) -> bool:
    """True when ``status`` (an enum member or its string value) is an infrastructure failure."""
    return status in INFRA_STATUSES


class Item(BaseModel):
    """One response to score. Extra top-level fields pass through untouched."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, description="Caller's id, echoed in the result.")
    program: str = Field(description="Reward program name: 'code', 'math' or an installed plug-in.")
    response: str = Field(description="The model's response text.")
    spec: dict[str, Any] = Field(default_factory=dict, description="Program-specific task spec.")

    def wire(self) -> dict[str, Any]:
        """The item as the JSON object sent on the wire (``spec`` objects are shared, not copied)."""
        return {
            "id": self.id,
            "program": self.program,
            "response": self.response,
            "spec": self.spec,
            **(self.model_extra or {}),
        }


class Result(BaseModel):
    """The verdict on one item."""

    id: str | None = None
    reward: float
    status: Status
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def infra(self) -> bool:
        """True when the verifier could not decide (the reward carries no signal)."""
        return self.status in INFRA_STATUSES

    @property
    def error(self) -> str:
        """The infrastructure message (``details.error``), or "" when there is none."""
        return str(self.details.get("error", ""))

    @classmethod
    def infra_failure(cls, item_id: str | None, status: Status, error: str) -> Result:
        """An infrastructure failure: reward 0.0 by convention, but the status marks it as no signal."""
        if status not in INFRA_STATUSES:
            raise ValueError(
                f"Result.infra_failure needs an infrastructure status {sorted(INFRA_STATUSES)}, got {status}"
            )
        return cls(id=item_id, reward=0.0, status=status, details={"error": error})


@dataclass(frozen=True)
class Connection:
    """How a client reaches a verifier; ``VerifierClient`` documents each setting's effect."""

    token: str | None = None
    """Bearer token (``MUCODE_TOKEN`` of the service), or None."""
    timeout_s: float = 300.0
    """Bound of one send, connect to last byte (the service is told it too)."""
    retries: int = 3
    """Re-sends of an item after an infrastructure failure (an item is sent at most 1 + retries times)."""
    retry_window_s: float = 600.0
    """No re-send starts later than this after the call's first send."""
    batch_size: int = 64
    """Items per HTTP request (lower it for large items: the service caps request bytes)."""
    max_concurrency: int = 8
    """Requests in flight at once."""

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_concurrency < 1 or self.retries < 0 or self.retry_window_s < 0:
            raise ValueError("batch_size and max_concurrency must be >= 1, retries and retry_window_s >= 0")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
