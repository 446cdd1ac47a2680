"""mucode.seeds: every purpose is its own stream, and the derived values are the ones earlier versions
used (a run resumed with this version draws the same prompts, minibatches and samples)."""

from __future__ import annotations

import random

from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.loop import stage_prompts


def test_purposes_are_distinct_members() -> None:
    names = [p.name for p in SeedPurpose]
    assert len(set(names)) == len(names) == 10  # equal constants must not make two purposes aliases
    assert SeedPurpose.REQUEST is not SeedPurpose.EVAL


def test_values_match_the_formulas_of_earlier_versions() -> None:
    for base in (0, 1, 42):
        for stage in (0, 3, 17):
            for rank in (0, 1, 7):
                assert (
                    derive_seed(base, SeedPurpose.ROLLOUT_ENGINE, stage=stage, rank=rank)
                    == base + 7919 * stage + 104_729 * rank
                )
            assert derive_seed(base, SeedPurpose.MINIBATCH_ORDER, stage=stage) == base * 1_000_003 + stage
            assert derive_seed(base, SeedPurpose.PROMPT_ORDER, index=stage) == base * 1_000_003 + stage
        assert derive_seed(base, SeedPurpose.COLOCATED_ENGINE, rank=3) == base + 3
        for purpose in (SeedPurpose.EVAL, SeedPurpose.REPLICA, SeedPurpose.REQUEST, SeedPurpose.STORE_PASS):
            assert derive_seed(base, purpose, index=9) == base + 9


def test_stage_prompts_keep_the_seeded_order_of_earlier_versions() -> None:
    records = list(range(5))  # stage_prompts only indexes the records
    got = [r for _, r in stage_prompts(records, stage=1, per_stage=4, seed=7)]  # type: ignore[arg-type]
    orders = {}
    for epoch in (0, 1):
        orders[epoch] = list(range(5))
        random.Random(7 * 1_000_003 + epoch).shuffle(orders[epoch])
    want = [orders[(4 + slot) // 5][(4 + slot) % 5] for slot in range(4)]
    assert got == want
