"""The ``hf`` rollout engine: batched sampling with a transformers causal LM, CPU or GPU.

Departures from ``model.generate`` (on purpose): the engine runs its own sampling loop over the
model's KV cache, because it must (1) record each sampled token's log-prob at the sampling
temperature over the full vocabulary -- exactly ``mucode.rollout.logprobs.token_logprobs``, the
trainer's definition -- (2) draw from a private ``torch.Generator`` so that sampling neither
reads nor advances the trainer's global RNG, and (3) stay independent of generation-config
defaults that differ between transformers releases.

Layout: the rows of a batch are left-padded with position ids counted over real tokens, the
layout ``response_logprobs`` recomputes with. A row that samples a stop token keeps that token
(it is trained on) and is then frozen. Limits: no continuous batching -- a batch decodes until its
longest row ends, so set ``batch_size`` to what fits; rows are grouped in prompt order.

``autocast_dtype``: when the engine shares a trainer's float32 master weights in a mixed-precision
run, its forwards run under ``torch.autocast`` in the trainer's compute dtype, so the behaviour
log-probs come from the same arithmetic as the trainer's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from mucode.rollout.logprobs import accepts_logits_to_keep, scale_logits, scaled_token_logprobs
from mucode.rollout.types import FinishReason, Sample, SamplingParams, refuse_keywords

logger = logging.getLogger(__name__)

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; valid: auto, {', '.join(_DTYPES)}") from None


def filter_logits(scaled: Tensor, top_k: int, top_p: float) -> Tensor:
    """Top-k then top-p (nucleus) filtering of temperature-scaled logits ``[B, V]``: removed
    entries become -inf. ``top_k <= 0`` and ``top_p >= 1`` switch each filter off."""
    if top_k > 0 and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token when the mass before it already reaches top_p (the top token always stays)
        drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled


class HFEngine:
    """Rollout engine over a transformers model held in this process."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams | None = None,
        *,
        batch_size: int = 64,
        stop_token_ids: list[int] | None = None,
        autocast_dtype: torch.dtype | None = None,
        **old: Any,
    ) -> None:
        refuse_keywords("HFEngine", old)
        sampling = sampling if sampling is not None else SamplingParams()
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if sampling.truncated:
            logger.warning(
                "top_p=%s top_k=%s: the behaviour log-probs are the full-vocabulary ones at the temperature "
                "(the trainer's), not those of the truncated sampling distribution",
                sampling.top_p,
                sampling.top_k,
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.batch_size = batch_size
        self.batch_size = batch_size
        self.device = next(model.parameters()).device
        self.stop_token_ids = sorted(
            set(stop_token_ids if stop_token_ids is not None else _stop_ids(model, tokenizer))
        )
        if not self.stop_token_ids:
            raise ValueError("no stop token: the tokenizer has no eos_token; pass stop_token_ids=[...]")
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad if pad is not None else self.stop_token_ids[0])
        self._keeps_last_logits = accepts_logits_to_keep(model)  # prefill: no [B, P, V] logits
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(sampling.seed)
        self.autocast_dtype = autocast_dtype

    def _precision(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    @classmethod
    def from_pretrained(
        cls,
        model_path: str,
        sampling: SamplingParams | None = None,
        *,
        dtype: str = "auto",
        device: str = "auto",
        **options: Any,
    ) -> HFEngine:
        """Load a Hugging Face checkpoint directory (or Hub id) into an engine."""
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

        torch_device = resolve_device(device)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=resolve_dtype(dtype, torch_device))
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        return cls(model.to(torch_device), tokenizer, sampling, **options)  # type: ignore[arg-type]  # transformers types .to badly

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        if samples_per_prompt < 1:
            raise ValueError(f"samples_per_prompt must be >= 1, got {samples_per_prompt}")
        if self.model is None:
            raise RuntimeError("this hf engine is closed; make a new one")
        rows = [(p, s) for p in range(len(prompts)) for s in range(samples_per_prompt)]
        pending: dict[int, list[Sample]] = {}
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            outputs = self._decode([prompts[p][1] for p, _ in chunk])
            for (p, s), (tokens, logprobs, reason) in zip(chunk, outputs, strict=True):
                prompt_id, prompt_ids = prompts[p]
                sample = Sample(
                    prompt_id=prompt_id,
                    sample_index=s,
                    prompt_token_ids=list(prompt_ids),
                    response_token_ids=tokens,
                    behaviour_logprobs=logprobs,
                    response_text=self.tokenizer.decode(tokens, skip_special_tokens=True),
                    finish_reason=reason,
                )
                pending.setdefault(p, []).append(sample)
                if len(pending[p]) == samples_per_prompt:
                    yield pending.pop(p)

    @torch.no_grad()
    def _decode(self, prompt_rows: list[list[int]]) -> list[tuple[list[int], list[float], FinishReason]]:
        batch = len(prompt_rows)
        width = max(len(r) for r in prompt_rows)
        if min(len(r) for r in prompt_rows) == 0:
            raise ValueError("empty prompt: every prompt needs at least one token")
        ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        for i, row in enumerate(prompt_rows):
            ids[i, width - len(row) :] = torch.as_tensor(row, dtype=torch.long)
            attention[i, width - len(row) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        ids, attention, positions = ids.to(self.device), attention.to(self.device), positions.to(self.device)
        stop = torch.as_tensor(self.stop_token_ids, device=self.device)

        prefill: dict[str, Any] = {"logits_to_keep": 1} if self._keeps_last_logits else {}
        with self._precision():
            out = self.model(
                input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, **prefill
            )
        cache, logits = out.past_key_values, out.logits[:, -1, :]
        next_position = positions[:, -1] + 1
        done = torch.zeros(batch, dtype=torch.bool, device=self.device)
        lengths = torch.full((batch,), self.sampling.max_new_tokens, dtype=torch.long, device=self.device)
        tokens: list[Tensor] = []
        logprobs: list[Tensor] = []
        for step in range(self.sampling.max_new_tokens):
            scaled = scale_logits(logits, self.sampling.temperature)  # shared by the sampler and the log-prob
            token = self._sample(scaled)
            token = torch.where(done, torch.full_like(token, self.pad_token_id), token)
            tokens.append(token)
            logprobs.append(scaled_token_logprobs(scaled, token))
            stopped = ~done & torch.isin(token, stop)
            lengths = torch.where(stopped, torch.full_like(lengths, step + 1), lengths)
            done |= stopped
            if bool(done.all()) or step + 1 == self.sampling.max_new_tokens:
                break
            attention = torch.cat(
                [attention, torch.ones((batch, 1), dtype=attention.dtype, device=self.device)], 1
            )
            with self._precision():
                out = self.model(
                    input_ids=token[:, None],
                    attention_mask=attention,
                    position_ids=next_position[:, None],
                    past_key_values=cache,
                    use_cache=True,
                )
            cache, logits = out.past_key_values, out.logits[:, -1, :]
            next_position = next_position + 1
        all_tokens = torch.stack(tokens, 1).tolist()
        all_logprobs = torch.stack(logprobs, 1).tolist()
        finished = done.tolist()
        results: list[tuple[list[int], list[float], FinishReason]] = []
        for i, length in enumerate(lengths.tolist()):
            reason: FinishReason = "stop" if finished[i] else "length"
            results.append((all_tokens[i][:length], all_logprobs[i][:length], reason))
        return results

    def _sample(self, scaled: Tensor) -> Tensor:
        """A token per row from logits already scaled by the temperature (``scale_logits``)."""
        if self.sampling.temperature == 0:
            return scaled.argmax(-1)
        probs = torch.softmax(filter_logits(scaled, self.sampling.top_k, self.sampling.top_p), dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)

    def close(self) -> None:
        """Drop the engine's references to the model (the caller may still hold it)."""
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _stop_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    for value in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, list | tuple):
            ids.extend(int(v) for v in value)
    return ids
