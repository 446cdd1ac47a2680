"""An example mucode reward program, found through the ``mucode.rewards`` entry-point group."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel, Field

from mucode.rewards import Item, Result, RewardContext, Status

__all__ = ["ExactMatchReward", "ExactMatchSpec"]

_ANSWER = re.compile(r"^\s*answer\s*:\s*(?P<answer>.+?)\s*$", re.I | re.M)


class ExactMatchSpec(BaseModel):
    """Validated by the service before any work starts: a bad spec is a 422 naming the field."""

    answer: str = Field(min_length=1, description="The expected final answer.")
    case_sensitive: bool = False


class ExactMatchReward:
    name: ClassVar[str] = "exact_match"
    spec_model: ClassVar[type[BaseModel]] = ExactMatchSpec
    needs: ClassVar[frozenset[str]] = frozenset()  # neither the sandbox nor math workers

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        spec = ExactMatchSpec.model_validate(item.spec)
        matches = _ANSWER.findall(item.response)
        if not matches:
            return Result(
                id=item.id,
                reward=0.0,
                status=Status.no_answer,
                details={"error": "no 'Answer: ...' line in the response"},
            )
        given, expected = " ".join(matches[-1].split()), " ".join(spec.answer.split())
        if not spec.case_sensitive:
            given, expected = given.casefold(), expected.casefold()
        ok = given == expected
        return Result(
            id=item.id,
            reward=float(ok),
            status=Status.correct if ok else Status.wrong_answer,
            details={"extracted": matches[-1]},
        )
