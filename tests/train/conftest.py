"""Fixtures of the trainer tests: a small random policy, reward plug-ins, data files, run helpers.

The policy is a 2-layer Qwen2 with a BPE tokenizer trained on the toy prompts (built once per
session with mucode.train.tiny_build, no warm-up): its responses are random,
so the tests use reward *plug-ins* registered through the real ``mucode.rewards`` entry-point
group (a dist-info directory on the path) to get mixed rewards, and a plug-in that raises for
some items to exercise infrastructure failures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from plugin_dist import write_dist

REPO = Path(__file__).resolve().parents[2]

PLUGIN_MODULE = '''
"""Reward plug-ins used by mucode's trainer tests."""
from mucode.protocol import Status
from mucode.rewards.types import Item, Result, RewardContext


class ParityReward:
    """1 when the response has an even number of characters: a signal a random policy can learn."""

    name = "parity"

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        good = len(item.response) % 2 == 0
        return Result(id=item.id, reward=float(good),
                      status=Status.correct if good else Status.wrong_answer, details={})


class FlakyReward(ParityReward):
    """Like parity, but its own code crashes on the first response of every group (ids ending -r0)."""

    name = "flaky"

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        if (item.id or "").endswith("-r0"):
            raise RuntimeError("flaky reward program crashed (on purpose)")
        return await super().score(item, ctx)


class BrokenReward(ParityReward):
    """A reward program whose code always crashes (a verifier that fails on every item)."""

    name = "broken"

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        raise RuntimeError("broken reward program crashed (on purpose)")
'''


@pytest.fixture(scope="session")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory that, on sys.path, installs the ``parity`` and ``flaky`` reward programs."""
    return write_dist(
        tmp_path_factory.mktemp("plugins"),
        "mucode_test_rewards",
        PLUGIN_MODULE,
        "mucode.rewards",
        {"parity": "ParityReward", "flaky": "FlakyReward", "broken": "BrokenReward"},
    )


@pytest.fixture()
def plugins_on_path(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugin_dir), os.environ.get("PYTHONPATH", "")]))
    return plugin_dir


@pytest.fixture(scope="session")
def small_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer policy with the toy tokenizer and chat template, saved in HF format."""
    import torch

    from mucode.data.toy import toy_tasks
    from mucode.train.tiny_build import build_model, build_tokenizer

    corpus = [m["content"] for task in ("math", "code") for r in toy_tasks(task) for m in r.messages]
    tokenizer = build_tokenizer(corpus, 400)
    torch.manual_seed(0)
    model = build_model(tokenizer, hidden=32, layers=2)
    out = tmp_path_factory.mktemp("policy") / "small"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
