"""The verifier's vocabulary, shared by the service, its client, the reward programs and the sandbox.

- ``Status``: why a result has the reward it has; the one status enum of mucode. The sandbox's
  ``Status`` and the reward programs' ``Status`` are this enum under other names.
- ``INFRA_STATUSES`` / ``is_infra``: the two *infrastructure* statuses (``verifier_error``,
  ``sandbox_error``) say "the verifier could not decide": re-sent by the client, and when they
  persist after the retries, *charged* to the program (reward 0.0, ``details["charged"]``): trained
  and counted as a failure, never left out, so that making the verifier fail never pays.
- ``Item`` (one response to score), ``Result`` (its verdict), ``VerifyRequest``/``VerifyResponse``
  (the body of ``POST /v1/verify``) and ``ErrorResponse`` (every 4xx).

Only pydantic is imported here, so any side (the trainer, an adapter loaded by path) can use it.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INFRA_STATUSES",
    "SANDBOX_VERDICTS",
    "ErrorResponse",
    "Item",
    "Result",
    "Status",
    "VerifyRequest",
    "VerifyResponse",
    "is_infra",
]


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
"""The statuses a sandbox gives a job or a test (the sandbox's ``Status``s): the item-level ones
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


_CODE_ITEM: dict[str, Any] = {
    "id": "p1-s0",
    "program": "code",
    "response": "Here is my solution:\n```python\nprint(sum(map(int, input().split())))\n```",
    "spec": {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}, "time_limit_s": 2},
}
_CALL_ITEM: dict[str, Any] = {
    "id": "p2-s0",
    "program": "code",
    "response": "```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```",
    "spec": {
        "tests": {"format": "call", "fn_name": "add", "inputs": ["1\n2"], "outputs": ["3"]},
        "checker": "exact",
    },
}
_ASSERT_ITEM: dict[str, Any] = {
    "id": "p3-s0",
    "program": "code",
    "response": "```python\ndef inc(x):\n    return x + 1\n```",
    "spec": {"tests": {"format": "assert", "assert_code": "assert inc(1) == 2", "entry_point": "inc"}},
}
_MATH_ITEM: dict[str, Any] = {
    "id": "m1-s0",
    "program": "math",
    "response": "So the answer is $\\boxed{\\frac12}$.",
    "spec": {"answer": "0.5"},
}
_SHARED_TESTS: dict[str, Any] = {"format": "stdio", "inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}
_SHARED_KEY = (
    "6d945e43011e0bab44db3c54bd9872558009e55f1dd8ea9d01175fe7fd1eb4c2"  # sha256 of its canonical JSON
)
_SHARED_EXAMPLE: dict[str, Any] = {
    "test_sets": {_SHARED_KEY: _SHARED_TESTS},
    "items": [
        {"id": f"p1-s{k}", "program": "code", "response": response, "spec": {"tests": {"ref": _SHARED_KEY}}}
        for k, response in enumerate(
            ["```python\nprint(sum(map(int, input().split())))\n```", "```python\nprint(0)\n```"]
        )
    ],
}


class VerifyRequest(BaseModel):
    """A batch of items; items of different programs may be mixed.

    Samples of one problem can share its tests: put the tests object once in ``test_sets`` under the
    SHA-256 (hex) of its canonical JSON (``json.dumps(tests, sort_keys=True, separators=(",", ":"))``,
    ASCII escapes) and give each item ``spec.tests = {"ref": "<that hash>"}``. Refs are resolved before
    validation, so reward programs see the full tests; an unknown ref or a wrong hash is a 422.
    ``VerifierClient`` does this by itself."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"items": [_CODE_ITEM, _CALL_ITEM, _ASSERT_ITEM, _MATH_ITEM]}, _SHARED_EXAMPLE]
        }
    )

    items: list[Item] = Field(description="Items to score (item contract).")
    test_sets: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Tests objects shared by items of this request, keyed by the SHA-256 of their canonical "
        'JSON; an item points at one with spec.tests = {"ref": key}.',
    )


class VerifyResponse(BaseModel):
    """One result per item, in the order of the request."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "p1-s0",
                            "reward": 1.0,
                            "status": "correct",
                            "details": {"wall_s": 0.004, "tests": []},
                        },
                        {
                            "id": "m1-s0",
                            "reward": 1.0,
                            "status": "correct",
                            "details": {"extracted": "\\frac{1}{2}"},
                        },
                    ]
                }
            ]
        }
    )

    results: list[Result]


class ErrorResponse(BaseModel):
    """Every 4xx answer: what is wrong, and (for item problems) one line per problem."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "invalid items: 1 problem",
                    "problems": [
                        "items[0].spec.tests: Value error, format 'call' needs 'fn_name' (the function or "
                        "Solution method to call)"
                    ],
                }
            ]
        }
    )

    error: str
    problems: list[str] = Field(default_factory=list)
