"""Importance ratios ρ = π_θ / β from the behaviour log-probs stored at sampling time.

``behaviour_logprobs`` are the rollout engine's per-token log-probs: they are never
recomputed here. Recomputing them with the trainer is the trainer's option, not this module's.

Limit: the log-ratio is clamped to ±``max_abs_log_ratio`` (default 20, as verl does) before ``exp``
so that one pathological token (e.g. an engine log-prob of −inf) cannot make the loss inf or NaN.
Inside the clamp ρ and its gradient are exact; outside it the gradient is zero. The veto and the
diagnostics read the *unclamped* log-ratio, so ρ < τ_c is decided exactly in log space.
"""

from __future__ import annotations

import torch

__all__ = ["DEFAULT_MAX_ABS_LOG_RATIO", "log_ratio", "ratio"]

DEFAULT_MAX_ABS_LOG_RATIO = 20.0


def log_ratio(logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor) -> torch.Tensor:
    """[B, T] log ρ = log π_θ − b (differentiable through ``logprobs``; ``behaviour_logprobs`` is data).

    Computed in at least float32 (bf16/fp16 log-probs are upcast): the losses sum ~10⁶ terms.
    """
    if logprobs.shape != behaviour_logprobs.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)} and behaviour_logprobs {tuple(behaviour_logprobs.shape)} "
            "must have the same [B, T] shape"
        )
    dtype = torch.promote_types(logprobs.dtype, torch.float32)
    return logprobs.to(dtype) - behaviour_logprobs.detach().to(dtype)


def ratio(log_rho: torch.Tensor, max_abs_log_ratio: float | None = DEFAULT_MAX_ABS_LOG_RATIO) -> torch.Tensor:
    """[B, T] ρ = exp(clamp(log ρ, ±max_abs_log_ratio)); ``None`` disables the clamp."""
    if max_abs_log_ratio is None:
        return torch.exp(log_rho)
    return torch.exp(log_rho.clamp(-max_abs_log_ratio, max_abs_log_ratio))
