"""``one_group_advantages``: :func:`~mucode.algo.advantages.group_advantages` for one group, in plain Python.

The trainer scores a stage group by group (G = 8 numbers at a time), where creating and reducing
torch tensors costs far more than the arithmetic (7.7% of the trainer's main thread at the paper's
size). Same definition and the same results as the tensor version called on a float32 reward
tensor (the trainer's): rewards rounded to float32, statistics in float64 (Python floats), each
advantage rounded to float32; the tests pin the two against each other.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from mucode.algo.modes import StdEstimator, parse_mode

__all__ = ["one_group_advantages"]

_F32 = struct.Struct("f")


def _to_f32(value: float) -> float:
    return float(_F32.unpack(_F32.pack(value))[0])


def one_group_advantages(
    rewards: Sequence[float],
    valid: Sequence[bool] | None = None,
    *,
    std: StdEstimator | str = StdEstimator.UNBIASED,
    eps: float = 1e-6,
) -> list[float]:
    """Advantages of one group's responses (``valid=False``: left out, advantage 0)."""
    estimator = parse_mode(StdEstimator, std, "std")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    keep = [True] * len(rewards) if valid is None else [bool(v) for v in valid]
    if len(keep) != len(rewards):
        raise ValueError(f"rewards and valid differ in length ({len(rewards)} vs {len(keep)})")
    values = [_to_f32(r) for r in rewards]  # the trainer's reward tensor is float32
    kept = [r for r, k in zip(values, keep, strict=True) if k]
    if not kept or max(kept) <= min(kept):
        return [0.0] * len(rewards)  # all valid rewards equal (or none valid): no gradient
    total = 0.0
    for r in kept:
        total += r
    mean = total / len(kept)
    if estimator is StdEstimator.NONE:
        return [_to_f32(r - mean) if k else 0.0 for r, k in zip(values, keep, strict=True)]
    dof = len(kept) - (1.0 if estimator is StdEstimator.UNBIASED else 0.0)
    if dof <= 0:
        return [0.0] * len(rewards)
    sq = 0.0
    for r in kept:
        sq += (r - mean) * (r - mean)
    scale = math.sqrt(sq / dof) + eps
    return [_to_f32((r - mean) / scale) if k else 0.0 for r, k in zip(values, keep, strict=True)]
