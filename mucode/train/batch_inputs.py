"""What the optimizer hands an objective beyond the tokens: groups, rewards, per-row data, temperatures.

- Objectives that read groups (``Objective.needs_groups``) get micro-batches of whole groups
  (:func:`pack_group_micro_batches`): a group is never split across micro-batches, and a group
  larger than the token budget gets a micro-batch of its own.
- ``row_data``: every number of a response's ``sampling`` statistics (the sampling controller's,
  stored with the group, e.g. AGPO's probe statistics) as a [B] tensor, plus ``temperature``.
- Temperatures: each response's own (``StoredSample.temperature``), else ``rollout.temperature``;
  the trainer's log-probs are taken at the temperature the response was sampled at.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import torch

from mucode.train.store import StoredSample

__all__ = ["pack_group_micro_batches", "row_inputs", "temperatures"]


def pack_group_micro_batches(
    samples: Sequence[StoredSample], group_of: Sequence[int], budget: int
) -> list[list[int]]:
    """Indices of ``samples`` in micro-batches of whole groups (``group_of[i]``: sample i's group), packed
    greedily in group order so that rows × (longest prompt + longest response) stays within ``budget``."""
    order: dict[int, list[int]] = {}
    for i, g in enumerate(group_of):
        order.setdefault(g, []).append(i)
    batches: list[list[int]] = []
    current: list[int] = []
    width = 0
    for rows in order.values():
        w = max(len(samples[i].prompt_tokens) + max(1, len(samples[i].response_tokens)) for i in rows)
        new_width = max(width, w)
        if current and (len(current) + len(rows)) * new_width > budget:
            batches.append(current)
            current, new_width = [], w
        current.extend(rows)
        width = new_width
    if current:
        batches.append(current)
    return batches


def temperatures(rows: Sequence[StoredSample], default: float) -> list[float]:
    """Each response's sampling temperature (``default`` where the store has none)."""
    out = []
    for s in rows:
        t = s.temperature
        out.append(default if t is None or (isinstance(t, float) and math.isnan(t)) else float(t))
    return out


def row_inputs(
    rows: Sequence[StoredSample],
    group_of: Sequence[int],
    default_temperature: float,
    device: torch.device | str,
) -> dict[str, object]:
    """``groups``, ``rewards`` and ``row_data`` keyword arguments of an objective call for ``rows``."""
    stats = [json.loads(s.sampling) if s.sampling else {} for s in rows]
    keys = sorted({k for st in stats for k, v in st.items() if isinstance(v, int | float)})
    row_data = {
        k: torch.tensor([float(st.get(k, math.nan)) for st in stats], dtype=torch.float32, device=device)
        for k in keys
    }
    row_data["temperature"] = torch.tensor(
        temperatures(rows, default_temperature), dtype=torch.float32, device=device
    )
    return {
        "groups": torch.tensor(list(group_of), dtype=torch.long, device=device),
        "rewards": torch.tensor([float(s.reward) for s in rows], dtype=torch.float32, device=device),
        "row_data": row_data,
    }
