"""The in-process verifier: the pipeline's interface, the chain program's verdicts, failures masked."""

from __future__ import annotations

import math

from mucode.data.chain import chain_records
from mucode.protocol import Item, Result, Status
from mucode.rewards.chain import ChainReward
from mucode.rewards.types import RewardContext
from mucode.train.inprocess import InProcessPipeline, in_process_verifier


class _AsyncOnly:
    name = "echo"

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        return Result(id=item.id, reward=float(item.response == "yes"), status=Status.correct)


class _Broken:
    name = "broken"

    def score_now(self, item: Item) -> Result:
        raise RuntimeError("boom")


def test_groups_come_back_in_order_with_the_programs_verdicts() -> None:
    record = chain_records()[0]
    verifier = in_process_verifier({"chain": ChainReward(), "echo": _AsyncOnly()})
    pipeline = verifier.pipeline
    assert verifier.urls == []
    pipeline.submit(
        0, [record.verifier_item("A " + record.spec["answer"], "a"), record.verifier_item("B", "b")]
    )
    pipeline.submit(1, [{"id": "c", "program": "echo", "response": "yes", "spec": {}}])
    groups = list(pipeline.drain())
    assert [g.key for g in groups] == [0, 1]
    assert groups[0].rewards == [1.0, 0.0] and groups[0].statuses == ["correct", "no_answer"]
    assert groups[1].rewards == [1.0] and not any(groups[1].masked)
    assert pipeline.done() == [] and pipeline.infra_failures == 0
    pipeline.close()


def test_a_failing_program_masks_its_group_never_scores_it_zero() -> None:
    pipeline = InProcessPipeline({"broken": _Broken()})
    pipeline.submit("k", [{"id": "x", "program": "broken", "response": "r", "spec": {}}])
    pipeline.submit("u", [{"id": "y", "program": "unknown", "response": "r", "spec": {}}])
    broken, unknown = pipeline.done()
    assert broken.masked == [True] and math.isnan(broken.rewards[0]) and "boom" in broken.errors[0]
    assert unknown.masked == [True] and "no in-process reward program 'unknown'" in unknown.errors[0]
    assert pipeline.infra_failures == 2
