"""The ``math`` reward program: 1.0 iff math-verify finds the response's answer equal to the gold one.

spec: ``{"answer": str | number}``. The response's last ``\\boxed{}`` is taken first (see
``math_worker`` for the exact parsing recipe). Statuses: correct, wrong_answer, no_answer,
time_limit (math-verify ran too long), memory_limit, verifier_error (e.g. an unparsable gold answer:
the data set needs fixing; no reward signal).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mucode.protocol import Status
from mucode.rewards.types import Item, Result, RewardContext

__all__ = ["MathReward", "MathSpec"]


class MathSpec(BaseModel):
    """Task spec of a math item. Extra fields pass through untouched."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

    answer: str = Field(
        min_length=1,
        description="The gold answer, LaTeX or a number (e.g. '\\frac{1}{2}', 27).",
        examples=["\\frac{1}{2}"],
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=60,
        description="Per-item math-verify time limit; the service default if unset.",
    )

    @field_validator("answer", mode="before")
    @classmethod
    def _number_to_text(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("answer must be a string or a number, not a boolean")
        if isinstance(value, (int, float)):
            return repr(value) if isinstance(value, float) else str(value)
        return value


class MathReward:
    """Binary reward for a final answer, checked by math-verify in worker processes."""

    name: ClassVar[str] = "math"
    spec_model: ClassVar[type[BaseModel]] = MathSpec
    needs: ClassVar[frozenset[str]] = frozenset({"math"})

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        if ctx.math is None:
            return Result.infra_failure(
                item.id, Status.verifier_error, "this verifier was started without math workers"
            )
        spec = MathSpec.model_validate(item.spec)
        outcome = await ctx.math.check(spec.answer, item.response, spec.timeout_s)
        status = Status(outcome.status)
        details = dict(outcome.details)
        details["wall_s"] = round(outcome.wall_s, 6)
        return Result(
            id=item.id, reward=1.0 if status is Status.correct else 0.0, status=status, details=details
        )
