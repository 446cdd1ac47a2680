"""The replay batch composer: draw frequencies against the priority distribution (χ², fixed seed),
age eviction in updates, warm-up, capacity, fresh-anchored minibatches, zero-variance filter."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from plugin_dist import write_dist
from scipy.stats import chi2

from mucode.components import COMPOSERS
from mucode.config import ConfigError, load_config
from mucode.train.compose import ReplayComposer, ReplayParams, draw_without_replacement
from mucode.train.store import StoredGroup, StoredSample


def _group(gid: int, rewards: list[float], advantages: list[float] | None = None) -> StoredGroup:
    adv = advantages if advantages is not None else [r - sum(rewards) / len(rewards) for r in rewards]
    return StoredGroup(
        gid,
        f"p{gid}",
        [
            StoredSample(
                prompt_id=f"p{gid}",
                sample_index=i,
                prompt_tokens=[1, 2],
                response_tokens=[3, 4, 5],
                behaviour_logprobs=[-1.0, -1.0, -1.0],
                reward=r,
                status="ok",
                masked=False,
                advantage=a,
            )
            for i, (r, a) in enumerate(zip(rewards, adv, strict=True))
        ],
    )


def test_single_draws_follow_the_priority_distribution() -> None:
    """k = 1 draws from a buffer of 6 priorities: χ² against P(i) = p_i / Σ p (df 5, fixed seed)."""
    weights = [(abs(a) + 1e-6) ** 0.5 for a in (0.0, 0.1, 0.4, 0.9, 1.6, 2.5)]
    rng = random.Random(1234)
    n = 30000
    counts = [0] * len(weights)
    for _ in range(n):
        counts[draw_without_replacement(weights, 1, rng)[0]] += 1
    expected = [n * w / sum(weights) for w in weights]
    stat = sum((c - e) ** 2 / e for c, e in zip(counts, expected, strict=True))
    assert stat < chi2.ppf(0.999, df=len(weights) - 1), (counts, expected)
    assert counts[0] < counts[1] < counts[3] < counts[5]  # |A| = 0 is drawn almost never (p = 1e-3)


def test_draws_without_replacement_are_successive_weighted_draws() -> None:
    """k = 2 of 3: the first pick follows P(i), the second P(j | i) = p_j / (Σ p − p_i) (χ² over 6 pairs)."""
    weights = [1.0, 2.0, 3.0]
    rng = random.Random(7)
    n = 30000
    pairs: dict[tuple[int, int], int] = {}
    for _ in range(n):
        i, j = draw_without_replacement(weights, 2, rng)
        pairs[(i, j)] = pairs.get((i, j), 0) + 1
    total = sum(weights)
    stat = 0.0
    for i in range(3):
        for j in range(3):
            if i != j:
                e = n * weights[i] / total * weights[j] / (total - weights[i])
                stat += (pairs.get((i, j), 0) - e) ** 2 / e
    assert stat < chi2.ppf(0.999, df=5)


def test_replay_is_fresh_anchored_evicts_by_age_and_waits_for_warmup() -> None:
    composer = ReplayComposer(
        ReplayParams(replay_ratio=0.5, max_age=2, warmup_updates=1, capacity=100), seed=0
    )
    batch0 = [_group(0, [1, 0, 0, 1]), _group(1, [1, 1, 1, 1])]  # group 1: zero variance
    out, m = composer.compose(batch0, update=0)
    assert [g.group_id for g in out] == [0]  # the flat group is dropped, nothing replayed in warm-up
    assert (
        m["replay/replayed"] == 0 and m["replay/buffer_size"] == 4 and m["groups/zero_variance_frac"] == 0.5
    )
    out, m = composer.compose([_group(2, [0, 1, 0, 0])], update=1)
    assert [g.group_id for g in out][0] == 2 and all(g.replayed for g in out[1:])
    assert m["replay/replayed"] == 2 == round(0.5 * 4) and m["replay/age_max"] == 1
    assert m["replay/fraction"] == pytest.approx(2 / 6)
    composer.compose([_group(3, [0, 1, 1, 1])], update=3)  # update 3: rollouts born at 0 are 3 > 2 old
    assert min(e.birth for e in composer.buffer) == 1
    out, m = composer.compose([_group(4, [1, 0, 1, 0])], update=4)
    assert m["replay/age_max"] <= 2 and m["replay/buffer_age_max"] <= 2
    frozen = next(s for g in out if g.replayed for s in g.samples)
    assert frozen.behaviour_logprobs == [-1.0, -1.0, -1.0]  # stored log-probs, never recomputed


def test_replay_capacity_drops_the_oldest() -> None:
    composer = ReplayComposer(ReplayParams(capacity=6, warmup_updates=100), seed=0)
    for u in range(3):
        composer.compose([_group(u, [1, 0, 1, 0])], update=u)
    assert len(composer.buffer) == 6 and {e.birth for e in composer.buffer} == {1, 2}


def test_composers_are_a_registry_with_typed_params() -> None:
    assert {"fresh", "replay"} <= set(COMPOSERS.names())
    cfg = load_config(None, ["compose.composer=replay", "compose.max_age=3"])
    assert isinstance(cfg.compose.params, ReplayParams) and cfg.compose.params.max_age == 3
    with pytest.raises(ConfigError, match="tau: not a parameter of replay"):
        load_config(None, ["compose.composer=replay", "compose.tau=3"])
    with pytest.raises(ConfigError, match="unknown batch composer 'fifo'"):
        load_config(None, ["compose.composer=fifo"])


PLUGIN = '''
from dataclasses import dataclass

from mucode.components import Component


@dataclass(frozen=True)
class KeepFirstParams:
    groups: int = 1
    """How many of the fresh groups to train on."""


class KeepFirst:
    def __init__(self, params, seed):
        self.params = params

    def compose(self, fresh, update):
        return fresh[: self.params.groups], {"keep_first/dropped": float(len(fresh) - self.params.groups)}


KEEP_FIRST = Component("keep_first", KeepFirstParams, KeepFirst, "test plug-in composer")
'''


def test_a_plugin_composer_is_found_through_its_entry_point_with_typed_params(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_dist(
        tmp_path / "site", "mucode_test_composer", PLUGIN, "mucode.composers", {"keep_first": "KEEP_FIRST"}
    )
    monkeypatch.syspath_prepend(str(root))
    COMPOSERS.refresh()
    try:
        cfg = load_config(None, ["compose.composer=keep_first", "compose.groups=2"])
        assert type(cfg.compose.params).__name__ == "KeepFirstParams" and cfg.compose.params.groups == 2
        composer = COMPOSERS.get("keep_first").build(cfg.compose.params, 0)
        out, metrics = composer.compose([_group(i, [1, 0]) for i in range(5)], update=0)
        assert [g.group_id for g in out] == [0, 1] and metrics == {"keep_first/dropped": 3.0}
        with pytest.raises(ConfigError, match="ratio: not a parameter of keep_first"):
            load_config(None, ["compose.composer=keep_first", "compose.ratio=2"])
    finally:
        monkeypatch.undo()
        COMPOSERS.refresh()
