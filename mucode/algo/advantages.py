"""Group-relative advantages (GRPO): A_i = (R_i − mean_g R) / (std_g R + eps), one value per response.

Vectorized over any number of groups of any sizes (responses whose verification failed can simply be
left out with ``valid``). Limits and choices:

- A group whose valid rewards are all equal gets A = 0 exactly (no gradient), whatever the estimator.
- With the unbiased estimator a group of one valid response has no std; it gets A = 0.
- Responses with ``valid=False`` get A = 0 and do not enter their group's statistics.
- Statistics are computed in float64 and returned in float32 (the dtype the losses use).
"""

from __future__ import annotations

import torch

from mucode.algo.modes import StdEstimator, parse_mode

__all__ = ["group_advantages"]


def group_advantages(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    *,
    std: StdEstimator | str = StdEstimator.UNBIASED,
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Advantages of responses grouped by prompt.

    Args:
        rewards: [N] reward of each response.
        group_index: [N] integer group id of each response (ids need not be contiguous).
        std: how to scale: ``unbiased`` (n−1, verl), ``population`` (n, TRL) or ``none`` (Dr.GRPO).
        eps: added to the std before dividing.
        valid: [N] bool, False for responses to leave out (e.g. infrastructure failures).

    Returns:
        [N] float32 advantages.
    """
    estimator = parse_mode(StdEstimator, std, "std")
    if rewards.dim() != 1 or group_index.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_index must both be 1-D of the same length, got {tuple(rewards.shape)} "
            f"and {tuple(group_index.shape)}"
        )
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if rewards.numel() == 0:
        return torch.zeros(0, dtype=torch.float32, device=rewards.device)

    r = rewards.to(torch.float64)
    keep = torch.ones_like(r, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    _, idx = torch.unique(group_index, return_inverse=True)
    n_groups = int(idx.max().item()) + 1
    w = keep.to(torch.float64)

    count = torch.zeros(n_groups, dtype=torch.float64, device=r.device).index_add_(0, idx, w)
    total = torch.zeros_like(count).index_add_(0, idx, r * w)
    mean = total / count.clamp(min=1.0)
    dev = (r - mean[idx]) * w

    big = torch.finfo(torch.float64).max
    r_hi = torch.where(keep, r, torch.full_like(r, -big))
    r_lo = torch.where(keep, r, torch.full_like(r, big))
    g_max = torch.full_like(count, -big).scatter_reduce_(0, idx, r_hi, reduce="amax")
    g_min = torch.full_like(count, big).scatter_reduce_(0, idx, r_lo, reduce="amin")
    flat = (g_max <= g_min)[idx]  # all valid rewards of the group equal (or none valid)

    if estimator is StdEstimator.NONE:
        adv = dev
    else:
        ddof = 1.0 if estimator is StdEstimator.UNBIASED else 0.0
        sq = torch.zeros_like(count).index_add_(0, idx, dev * dev)
        dof = count - ddof
        sd = torch.sqrt(sq / dof.clamp(min=1.0))
        adv = dev / (sd[idx] + eps)
        flat = flat | (dof <= 0)[idx]

    adv = torch.where(flat | ~keep, torch.zeros_like(adv), adv)
    return adv.to(torch.float32)
