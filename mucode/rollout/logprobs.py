"""The one definition of a token's log-prob, shared by the rollout engines and the trainer.

``logprob(token) = log_softmax(logits / T)[token]`` over the full vocabulary, in float32. The hf
engine stores exactly this as the behaviour log-prob while it samples, and the trainer recomputes
it with ``response_logprobs``, so with the same weights ρ = 1 at the first update (up to the
float error between incremental decoding with a KV cache and one full forward pass).

With top-p < 1 or top-k > 0 the sampler draws from a truncated distribution; this log-prob is
still the full-vocabulary one (the trainer's definition), not the truncated sampler's. At
temperature 0 (greedy) the log-probs are those of temperature 1.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


def scale_logits(logits: Tensor, temperature: float | Tensor) -> Tensor:
    """``logits / T`` in float32 (T = 0: unscaled; a ``[B]`` tensor: one temperature per row): made once
    per decoding step or micro-batch and shared by the sampler, the log-probs and the entropy."""
    scaled = logits.float()
    if isinstance(temperature, Tensor):  # one temperature per row, [B] broadcast over [B, ..., V]
        t = temperature.to(scaled.device, torch.float32).reshape(-1, *([1] * (scaled.dim() - 1)))
        return scaled / torch.where(t > 0, t, torch.ones_like(t))
    return scaled / temperature if temperature > 0 else scaled


def scaled_token_logprobs(scaled: Tensor, targets: Tensor, lse: Tensor | None = None) -> Tensor:
    """``token_logprobs`` of logits already scaled (``scale_logits``); ``lse``: their logsumexp, if known."""
    picked = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - (torch.logsumexp(scaled, dim=-1) if lse is None else lse)


def _temperatures(temperature: float | Sequence[float]) -> float | Tensor:
    """A scalar stays a scalar; per-row temperatures become a [B] tensor (equal ones a scalar)."""
    if isinstance(temperature, int | float):
        return float(temperature)
    values = [float(t) for t in temperature]
    if len(set(values)) <= 1:
        return values[0] if values else 1.0
    return torch.tensor(values, dtype=torch.float32)


def token_logprobs(logits: Tensor, targets: Tensor, temperature: float | Tensor) -> Tensor:
    """Log-prob of ``targets`` under ``softmax(logits / T)``.

    Shapes: logits ``[..., V]``, targets ``[...]`` (int64) -> ``[...]`` float32. Differentiable.
    """
    return scaled_token_logprobs(scale_logits(logits, temperature), targets)


def scaled_entropy(scaled: Tensor, lse: Tensor | None = None) -> Tensor:
    """Entropy of ``softmax(scaled)``, ``H = lse - sum(p * scaled)``; a metric: computed without autograd,
    so no ``[..., V]`` intermediate is kept for a backward pass."""
    with torch.no_grad():
        scaled = scaled.detach()
        lse = torch.logsumexp(scaled, dim=-1) if lse is None else lse.detach()
        return lse - (torch.softmax(scaled, dim=-1) * scaled).sum(-1)


def token_entropy(logits: Tensor, temperature: float | Tensor) -> Tensor:
    """Entropy of ``softmax(logits / T)``: ``[..., V] -> [...]`` float32 (not differentiable)."""
    return scaled_entropy(scale_logits(logits, temperature))


@dataclass
class ResponseLogprobs:
    """Per-token log-probs of a batch of responses, right-padded to the longest response."""

    logprobs: Tensor
    """``[B, R]`` float32; 0 where ``mask`` is False."""
    mask: Tensor
    """``[B, R]`` bool; True on real response tokens."""
    entropy: Tensor | None = None
    """``[B, R]`` float32 when requested."""


def accepts_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward can return the logits of the last positions only (looks
    through one wrapper's ``.module``, e.g. FSDP1/DDP, whose forward takes ``**kwargs``)."""
    for candidate in (model, getattr(model, "module", None)):
        try:
            if candidate is not None and "logits_to_keep" in inspect.signature(candidate.forward).parameters:
                return True
        except (TypeError, ValueError):
            continue
    return False


def response_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    temperature: float | Sequence[float],
    *,
    pad_token_id: int = 0,
    with_entropy: bool = False,
) -> ResponseLogprobs:
    """Log-probs of each response token given its prompt, in one forward pass (with gradient).

    ``temperature`` is one value, or one per response (a response sampled at its own temperature).

    Layout (as the engines decode): prompts left-padded to a common length P, responses
    right-padded to R, position ids counted over real tokens only. Only the logits of the response
    positions are materialised when the model supports ``logits_to_keep``.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    temps = _temperatures(temperature)
    if isinstance(temps, Tensor) and temps.numel() != len(prompts):
        raise ValueError(f"{temps.numel()} temperatures for {len(prompts)} responses")
    device = next(model.parameters()).device
    batch = len(prompts)
    width_p = max(len(p) for p in prompts)
    width_r = max(1, max(len(r) for r in responses))
    ids = torch.full((batch, width_p + width_r), pad_token_id, dtype=torch.long)
    attention = torch.zeros((batch, width_p + width_r), dtype=torch.long)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        ids[row, width_p - len(prompt) : width_p] = torch.as_tensor(list(prompt), dtype=torch.long)
        ids[row, width_p : width_p + len(response)] = torch.as_tensor(list(response), dtype=torch.long)
        attention[row, width_p - len(prompt) : width_p + len(response)] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    ids, attention, positions = ids.to(device), attention.to(device), positions.to(device)
    kwargs: dict[str, Any] = {
        "input_ids": ids,
        "attention_mask": attention,
        "position_ids": positions,
        "use_cache": False,
    }
    if accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = width_r + 1
    logits = model(**kwargs).logits
    # the logit at position P-1+t predicts response token t
    logits = logits[:, -(width_r + 1) : -1, :]
    targets = ids[:, width_p:]
    mask = attention[:, width_p:].bool()
    scaled = scale_logits(logits, temps)  # one [B, R, V] float32 tensor for both
    lse = torch.logsumexp(scaled, dim=-1)
    logprobs = scaled_token_logprobs(scaled, targets, lse).masked_fill(~mask, 0.0)
    entropy = scaled_entropy(scaled, lse).masked_fill(~mask, 0.0) if with_entropy else None
    return ResponseLogprobs(logprobs=logprobs, mask=mask, entropy=entropy)


def sequence_logprobs(
    model: Any, prompt_ids: Sequence[int], response_ids: Sequence[int], temperature: float
) -> Tensor:
    """Log-probs ``[T]`` of one response's tokens given its prompt (``response_logprobs`` for one)."""
    out = response_logprobs(model, [prompt_ids], [response_ids], temperature)
    return out.logprobs[0, : len(response_ids)]
