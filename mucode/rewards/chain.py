"""The ``chain`` reward program: the study task's judge (``mucode.data.chain``).

spec: ``{"answer": "s3 s17 …"}`` (the correct chain, space-separated). A response scores 1.0 iff its
first word is the format ``A``, the next words are exactly the answer's and nothing follows them (the
policy's response budget is the answer's length plus the stop token, so a response that did not stop
right after the answer fails: stopping is part of the task). Statuses:
``correct``; ``no_answer`` for the failing format ``B`` or an empty response; ``wrong_answer``
otherwise. Pure Python, so it also runs in-process (``mucode.verifier.inprocess``) without HTTP.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from mucode.protocol import Status
from mucode.rewards.types import Item, Result, RewardContext

__all__ = ["ChainReward", "ChainSpec", "score_chain"]


class ChainSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    answer: str = Field(min_length=1, description="The correct chain, symbols separated by spaces.")


def score_chain(response: str, answer: str) -> tuple[float, Status, int]:
    """(reward, status, correct leading steps) of ``response`` against the chain ``answer``."""
    words = response.split()
    if not words or words[0] != "A":
        return 0.0, Status.no_answer, 0
    expected = answer.split()
    got = words[1 : 1 + len(expected)]
    right = 0
    for a, b in zip(got, expected, strict=False):
        if a != b:
            break
        right += 1
    ok = right == len(expected) and len(words) == 1 + len(expected)  # and nothing after the answer
    return (1.0 if ok else 0.0), (Status.correct if ok else Status.wrong_answer), right


class ChainReward:
    """Scores the study task's answers (no sandbox, no math workers)."""

    name = "chain"
    spec_model: ClassVar[type[BaseModel]] = ChainSpec
    needs: ClassVar[frozenset[str]] = frozenset()

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        return self.score_now(item)

    def score_now(self, item: Item) -> Result:
        """The same verdict, synchronously (the in-process verifier's path)."""
        spec = ChainSpec.model_validate(item.spec)
        reward, status, right = score_chain(item.response, spec.answer)
        return Result(id=item.id, reward=reward, status=status, details={"steps_right": right})
