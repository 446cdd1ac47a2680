"""Plain-loop reference implementations of the objectives, written from token by token.

They share nothing with mucode.algo except torch scalars (so autograd gives reference gradients).
Tests compare the vectorized code against these on many random cases.
"""

from __future__ import annotations

import math

import torch


def triggers_of_row(log_rho: list[float], valid: list[bool], adv: float, tau: float) -> list[int]:
    """Positions t of the row that are triggers: A<0 and ρ_t < τ_c (decided as log ρ < log τ_c)."""
    if not adv < 0:
        return []
    return [t for t, (lr, v) in enumerate(zip(log_rho, valid, strict=True)) if v and lr < math.log(tau)]


def vetoed_positions(log_rho: list[float], valid: list[bool], adv: float, scope: str, tau: float) -> set[int]:
    """The positions the veto masks in one response, straight from the veto-scope table."""
    trig = triggers_of_row(log_rho, valid, adv, tau)
    if not trig:
        return set()
    kappa = min(trig)
    valid_pos = [t for t, v in enumerate(valid) if v]
    if scope == "none":
        return set()
    if scope == "trigger":
        return set(trig)
    if scope == "suffix":
        return {t for t in valid_pos if t > kappa}
    if scope == "nontrigger_suffix":
        return {t for t in valid_pos if t > kappa and not log_rho[t] < math.log(tau)}
    if scope == "sequence":
        return set(valid_pos)
    raise ValueError(scope)


def row_count_and_tokens(mask: torch.Tensor) -> tuple[int, int]:
    rows = sum(1 for i in range(mask.shape[0]) if bool(mask[i].any()))
    return rows, int(mask.sum())


def aggregate(terms: dict[tuple[int, int], torch.Tensor], mask: torch.Tensor, mode: str) -> torch.Tensor:
    """J from per-token objective terms of the kept tokens; denominators count every valid token/row."""
    rows, tokens = row_count_and_tokens(mask)
    total = torch.zeros((), dtype=torch.float64)
    for (i, _t), term in terms.items():
        length = int(mask[i].sum())
        if mode == "seq-mean-token-mean":
            total = total + term / (length * rows)
        elif mode == "token-mean":
            total = total + term / tokens
        elif mode == "seq-mean-token-sum-norm":
            total = total + term / (rows * mask.shape[1])
        else:
            raise ValueError(mode)
    return total


def mu_grpo_loss(
    logprobs: torch.Tensor,
    behaviour: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    scope: str,
    tau: float,
    upper: float,
    mode: str,
) -> torch.Tensor:
    B, T = logprobs.shape
    terms: dict[tuple[int, int], torch.Tensor] = {}
    for i in range(B):
        lr_row = [float(logprobs[i, t].detach() - behaviour[i, t]) for t in range(T)]
        valid = [bool(mask[i, t]) for t in range(T)]
        vetoed = vetoed_positions(lr_row, valid, float(adv[i]), scope, tau)
        for t in range(T):
            if not valid[t] or t in vetoed:
                continue
            rho = torch.exp(logprobs[i, t] - behaviour[i, t])
            a = adv[i]
            terms[(i, t)] = torch.minimum(rho * a, torch.clamp(rho, 0.0, upper) * a)
    return -aggregate(terms, mask, mode)


def grpo_loss(
    logprobs: torch.Tensor,
    behaviour: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    dual: float | None,
    mode: str,
) -> torch.Tensor:
    B, T = logprobs.shape
    terms: dict[tuple[int, int], torch.Tensor] = {}
    for i in range(B):
        for t in range(T):
            if not bool(mask[i, t]):
                continue
            rho = torch.exp(logprobs[i, t] - behaviour[i, t])
            a = adv[i]
            term = torch.minimum(rho * a, torch.clamp(rho, 1 - eps_low, 1 + eps_high) * a)
            if dual is not None and float(a) < 0:
                term = torch.maximum(term, dual * a)
            terms[(i, t)] = term
    return -aggregate(terms, mask, mode)


def m2po_greedy_masked(log_rho: torch.Tensor, mask: torch.Tensor, adv: torch.Tensor, thr: float) -> set[int]:
    """Flat indices the paper's greedy rule masks: drop the largest M2 (earliest index on ties)."""
    B, T = log_rho.shape
    cand: list[tuple[int, float]] = []
    for i in range(B):
        for t in range(T):
            lr = float(log_rho[i, t])
            a = float(adv[i])
            if bool(mask[i, t]) and ((a > 0 and lr > 0) or (a < 0 and lr < 0)):
                cand.append((i * T + t, lr * lr))
    masked: set[int] = set()
    while cand and sum(v for _, v in cand) / len(cand) > thr:
        best = max(range(len(cand)), key=lambda k: (cand[k][1], -cand[k][0]))
        masked.add(cand.pop(best)[0])
    return masked


def m2po_greedy_loss(
    logprobs: torch.Tensor,
    behaviour: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    thr: float,
    mode: str,
) -> torch.Tensor:
    B, T = logprobs.shape
    masked = m2po_greedy_masked((logprobs - behaviour).detach(), mask, adv, thr)
    terms = {
        (i, t): torch.exp(logprobs[i, t] - behaviour[i, t]) * adv[i]
        for i in range(B)
        for t in range(T)
        if bool(mask[i, t]) and i * T + t not in masked
    }
    return -aggregate(terms, mask, mode)


def water_level_bisection(values: list[float], thr: float) -> float:
    """τ with mean min(v, τ²) = thr by bisection (inf if the mean is already ≤ thr)."""
    if not values or sum(values) / len(values) <= thr:
        return math.inf
    lo, hi = 0.0, max(values)
    for _ in range(200):
        mid = (lo + hi) / 2
        if sum(min(v, mid) for v in values) / len(values) > thr:
            hi = mid
        else:
            lo = mid
    return math.sqrt((lo + hi) / 2)
