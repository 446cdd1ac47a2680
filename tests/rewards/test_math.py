"""The math reward: math-verify equivalences, the last-box rule, and the worker pool's time limits."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from mucode.rewards.math import MathReward, MathSpec
from mucode.rewards.math_pool import MathWorkerPool
from mucode.rewards.math_worker import check_answer, last_boxed
from mucode.rewards.types import Item, RewardContext

# (gold, response, expected status): equivalent forms a string comparison would get wrong, and the reverse.
CASES = [
    ("0.5", "So the answer is $\\boxed{\\frac12}$.", "correct"),
    ("\\frac{1}{2}", "\\boxed{0.5}", "correct"),
    ("27", "The total is \\boxed{27.0}", "correct"),
    ("27.0", "\\boxed{27}", "correct"),
    ("(1,2]", "\\boxed{(1, 2]}", "correct"),
    ("[1,2)", "\\boxed{(1,2]}", "wrong_answer"),
    ("(-\\infty, 3)", "\\boxed{(-\\infty,3)}", "correct"),
    ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\dfrac{\\sqrt3}{2}}", "correct"),
    ("11\\sqrt2", "\\boxed{11\\sqrt{2}}", "correct"),
    ("28", "\\boxed{27}", "wrong_answer"),
    ("3", "I am not sure what the answer is.", "no_answer"),
    ("3", "\\boxed{2} is wrong, so the answer is \\boxed{3}", "correct"),
    ("3", "\\boxed{3}? No: it is \\boxed{2}.", "wrong_answer"),
]


@pytest.mark.parametrize(("gold", "response", "status"), CASES)
def test_check_answer(gold: str, response: str, status: str) -> None:
    assert check_answer(gold, response)["status"] == status


def test_gold_is_compared_first() -> None:
    # math-verify's verify(gold, target) is not symmetric; a set-valued gold must not match one element.
    assert check_answer("1,2", "\\boxed{1}")["status"] == "wrong_answer"


def test_unparsable_gold_is_a_verifier_error_not_a_reward() -> None:
    out = check_answer("", "\\boxed{1}")
    assert out["status"] == "verifier_error"
    assert "gold answer" in out["details"]["error"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a \\boxed{1} b \\boxed{\\frac{2}{3}} c", "\\boxed{\\frac{2}{3}}"),
        ("\\fbox{x}", "\\fbox{x}"),
        ("no box", None),
        ("\\boxed{unclosed", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_spec_accepts_numbers_and_rejects_booleans() -> None:
    assert MathSpec.model_validate({"answer": 27}).answer == "27"
    assert MathSpec.model_validate({"answer": 0.5}).answer == "0.5"
    with pytest.raises(ValueError, match="boolean"):
        MathSpec.model_validate({"answer": True})
    with pytest.raises(ValueError, match="at least 1"):
        MathSpec.model_validate({"answer": "  "})


# Limits far above what an item needs on a loaded machine: the tests assert which item times out,
# never how fast the others are.
ITEM_LIMIT_S = 5.0
SLOW_LIMIT_S = 6.0  # the pathological / stuck items' limit: the other worker's items finish well within it


@pytest.fixture(scope="module")
def pool_loop():
    loop = asyncio.new_event_loop()
    pool = MathWorkerPool(2, timeout_s=ITEM_LIMIT_S, kill_grace_s=1.0)
    loop.run_until_complete(pool.start())
    yield pool, loop
    loop.run_until_complete(pool.close())
    loop.close()


def test_pool_scores_through_the_reward_program(pool_loop) -> None:
    pool, loop = pool_loop
    ctx = RewardContext(math=pool)
    items = [
        Item(id=str(i), program="math", response=r, spec={"answer": g}) for i, (g, r, _) in enumerate(CASES)
    ]

    async def run():
        return await asyncio.gather(*(MathReward().score(it, ctx) for it in items))

    results = loop.run_until_complete(run())
    assert [r.status.value for r in results] == [s for _, _, s in CASES]
    assert [r.reward for r in results] == [1.0 if s == "correct" else 0.0 for _, _, s in CASES]
    assert [r.id for r in results] == [it.id for it in items]


def test_pathological_item_times_out_while_the_rest_is_scored(pool_loop) -> None:
    """While one worker is stuck on a pathological item (until its limit), the other scores the rest:
    when the slow item ends, every fast item is done but those the pipe had queued behind it."""
    pool, loop = pool_loop

    async def run():
        slow = asyncio.ensure_future(pool.check("1", "\\boxed{9^{9^{9^{9^{9}}}}}", SLOW_LIMIT_S))
        fast = [
            asyncio.ensure_future(pool.check(str(i), f"\\boxed{{{i}}}")) for i in range(20)
        ]  # 20 distinct
        await asyncio.wait([slow])
        done_meanwhile = sum(f.done() for f in fast)
        return await slow, await asyncio.gather(*fast), done_meanwhile

    slow, fast, done_meanwhile = loop.run_until_complete(run())
    assert slow.status == "time_limit"
    assert all(o.status == "correct" for o in fast)
    assert done_meanwhile >= len(fast) - (pool.pipeline_depth - 1), "fast items waited behind the slow one"


def test_stuck_worker_is_killed_and_replaced(pool_loop) -> None:
    # A worker that no signal can interrupt (here: stopped) is killed by the outer wall-clock limit;
    # the items queued behind its stuck item go to the other worker.
    pool, loop = pool_loop

    async def run():
        victim = pool._workers[0]
        os.kill(victim.process.pid, signal.SIGSTOP)
        kills = pool.kills
        outs = await asyncio.gather(*(pool.check(str(i), f"\\boxed{{{i}}}", SLOW_LIMIT_S) for i in range(6)))
        return kills, outs

    kills_before, outs = loop.run_until_complete(run())
    assert sorted(o.status for o in outs) == ["correct"] * 5 + ["time_limit"]
    assert pool.kills == kills_before + 1

    async def recovered():
        deadline = time.monotonic() + 60
        while pool.alive < pool.size and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return await asyncio.gather(*(pool.check("4", "\\boxed{4}") for _ in range(4)))

    outs = loop.run_until_complete(recovered())
    assert pool.alive == pool.size and pool.idle == pool.size
    assert all(o.status == "correct" for o in outs)


def test_a_caller_that_gives_up_does_not_break_the_pool(pool_loop) -> None:
    pool, loop = pool_loop

    async def run():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pool.check("1", "\\boxed{9^{9^{9^{9^{9}}}}}"), 0.2)
        return await asyncio.gather(*(pool.check("3", "\\boxed{3}") for _ in range(4)))

    assert [o.status for o in loop.run_until_complete(run())] == ["correct"] * 4
