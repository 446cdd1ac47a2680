"""The trainer's verify pipeline coalesces groups into large requests and splits the results back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mucode.train.verify import VerifyPipeline
from mucode.verifier.local import local_verifier


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_verifier(
        "local", programs=["math"], run_code=False, math_workers=1, max_request_bytes=20_000
    ) as base:
        yield base


def _group(g: int) -> list[dict]:
    return [
        {
            "id": f"g{g}-r{r}",
            "program": "math",
            "response": f"\\boxed{{{g + r % 2}}}",
            "spec": {"answer": str(g)},
        }
        for r in range(4)
    ]


def test_groups_coalesce_and_come_back_per_group_in_order(url: str) -> None:
    with VerifyPipeline([url], max_requests=1, coalesce_items=1000) as pipeline:
        for g in range(30):
            pipeline.submit(g, _group(g), payload=f"payload-{g}")
        groups = list(pipeline.drain())
    assert [v.key for v in groups] == list(range(30))
    assert [v.payload for v in groups] == [f"payload-{g}" for g in range(30)]
    assert all(v.statuses == ["correct", "wrong_answer"] * 2 for v in groups)
    assert all(v.rewards == [1.0, 0.0, 1.0, 0.0] and not any(v.masked) for v in groups)
    assert pipeline.requests < 30  # one request in flight at a time: the groups behind it travel together


def test_a_refused_group_is_charged_alone(url: str) -> None:
    big = [
        {"id": "big", "program": "math", "response": "x" * 40_000, "spec": {"answer": "1"}}
    ]  # over the cap
    with VerifyPipeline([url], max_requests=1, coalesce_items=1000) as pipeline:
        pipeline.submit(0, _group(0))
        pipeline.submit(1, big)
        pipeline.submit(2, _group(2))
        groups = list(pipeline.drain())
    assert [v.key for v in groups] == [0, 1, 2]
    # refused (4xx): charged to the policy as a failure, the neighbours in the same request untouched
    assert groups[1].charged == [True] and groups[1].rewards == [0.0] and not any(groups[1].masked)
    assert "RequestTooLargeError" in groups[1].errors[0]
    assert not any(groups[0].charged) and not any(groups[2].charged)
    assert groups[2].statuses == ["correct", "wrong_answer"] * 2
