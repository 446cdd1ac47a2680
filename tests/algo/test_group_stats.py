"""The plain-Python one-group advantages equal the tensor version's, value for value."""

from __future__ import annotations

import random

import pytest
import torch

from mucode.algo.advantages import group_advantages
from mucode.algo.group_stats import one_group_advantages


@pytest.mark.parametrize("std", ["unbiased", "population", "none"])
def test_equals_group_advantages(std: str) -> None:
    rng = random.Random(0)
    for trial in range(400):
        n = rng.randint(1, 16)
        kind = trial % 3
        rewards = [
            float(rng.random() < 0.5)
            if kind == 0
            else rng.choice([0.0, 0.25, 1.0])
            if kind == 1
            else rng.uniform(-3, 3)
            for _ in range(n)
        ]
        valid = [rng.random() > 0.2 for _ in range(n)]
        eps = rng.choice([0.0, 1e-6, 1e-2])
        want = group_advantages(
            torch.tensor(rewards),
            torch.zeros(n, dtype=torch.long),
            std=std,
            eps=eps,
            valid=torch.tensor(valid),
        ).tolist()
        assert one_group_advantages(rewards, valid, std=std, eps=eps) == want, (rewards, valid, eps)
        want_all = group_advantages(
            torch.tensor(rewards), torch.zeros(n, dtype=torch.long), std=std, eps=eps
        ).tolist()
        assert one_group_advantages(rewards, std=std, eps=eps) == want_all


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="eps"):
        one_group_advantages([1.0, 0.0], eps=-1)
    with pytest.raises(ValueError, match="length"):
        one_group_advantages([1.0, 0.0], [True])
