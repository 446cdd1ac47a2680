"""Group-level helpers of the algorithm core: which rows share a prompt, which groups are flat.

An objective that reads groups gets ``groups`` ([B] integer id of each response's prompt group) and
``rewards`` ([B]) beside its token inputs. A call must then hold *whole* groups: every statistic
here treats the rows of a group present in the call as the whole group (the trainer packs
micro-batches by group for such objectives).

- :func:`zero_variance_rows`: rows whose group's rewards are all equal (a group of one included).
  Zero-variance masking takes these rows out of the loss *and* out of the denominator.
- :func:`group_token_scale`: the row scale of "token-mean within each prompt, mean over prompts"
  (AGPO's aggregation, and the scale ConSPO's optional KL term uses).
- :func:`group_count`: groups with at least one valid token (the denominator of that scale).
"""

from __future__ import annotations

import torch

__all__ = ["group_count", "group_token_scale", "zero_variance_rows"]


def _inverse(groups: torch.Tensor) -> tuple[torch.Tensor, int]:
    if groups.dim() != 1:
        raise ValueError(f"groups must be [B] (one group id per response), got {tuple(groups.shape)}")
    if groups.numel() == 0:
        return groups.to(torch.long), 0
    _, idx = torch.unique(groups, return_inverse=True)
    return idx, int(idx.max().item()) + 1


@torch.no_grad()
def zero_variance_rows(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """[B] bool: True where every reward of the row's group (among the rows given) is equal."""
    if rewards.shape != groups.shape:
        raise ValueError(f"rewards {tuple(rewards.shape)} and groups {tuple(groups.shape)} must both be [B]")
    idx, n = _inverse(groups)
    if n == 0:
        return torch.zeros(0, dtype=torch.bool, device=rewards.device)
    r = rewards.to(torch.float64)
    big = torch.finfo(torch.float64).max
    hi = torch.full((n,), -big, dtype=torch.float64, device=r.device).scatter_reduce_(
        0, idx, r, reduce="amax"
    )
    lo = torch.full((n,), big, dtype=torch.float64, device=r.device).scatter_reduce_(0, idx, r, reduce="amin")
    return (hi <= lo)[idx]


@torch.no_grad()
def group_count(mask: torch.Tensor, groups: torch.Tensor) -> float:
    """Number of groups with at least one valid token in the [B, T] ``mask``."""
    idx, n = _inverse(groups)
    if n == 0:
        return 0.0
    tokens = torch.zeros(n, dtype=torch.float64, device=mask.device).index_add_(
        0, idx.to(mask.device), mask.to(torch.float64).sum(dim=1)
    )
    return float((tokens > 0).sum().item())


@torch.no_grad()
def group_token_scale(
    mask_float: torch.Tensor, groups: torch.Tensor, denominator: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """[B, 1] s_i = 1 / (T_g(i) · D): each group's tokens averaged, then D groups averaged.

    T_g is the number of valid tokens of the whole group of row i (in this call)."""
    idx, n = _inverse(groups)
    if n == 0:
        return torch.zeros((0, 1), dtype=dtype, device=mask_float.device)
    idx = idx.to(mask_float.device)
    rows = mask_float.to(torch.float64).sum(dim=1)
    tokens = torch.zeros(n, dtype=torch.float64, device=mask_float.device).index_add_(0, idx, rows)
    return (1.0 / (tokens[idx].clamp(min=1.0) * float(denominator))).to(dtype)[:, None]
