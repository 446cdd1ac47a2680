"""``dummy``: a rollout engine with no model, for running the stage machinery at full size on a CPU.

It samples every response token from one fixed distribution over the tokenizer's vocabulary and
returns the exact log-prob of each sampled token under it, so everything downstream (decoding,
verification, advantages, the stage store, the minibatch reader, the optimizer's ratios) runs on
data of the real shape and volume while generation itself costs almost nothing.

The distribution, at temperature 1: the stop (EOS) token has probability ``1 / mean_response_tokens``
(so responses are geometric in length with that mean, cut at ``max_new_tokens``); the other tokens
share the rest in a Zipf law (weight ∝ 1/rank, over a fixed permutation of the vocabulary). At
temperature T the engine samples from, and reports log-probs of, p^(1/T) renormalised — exactly as
``log_softmax(logits / T)`` would for logits = log p.

Sampling is exact but not token by token: a response's length is drawn first (the number of
non-stop tokens before the first stop is geometric in the stop probability), then its tokens from
the distribution restricted to non-stop tokens. Both give the same joint law of the sequence.

Limits: ``top_p``/``top_k`` are ignored (a warning says so); responses carry no meaning, so a
verifier scores nearly all of them wrong (the data still goes through the real verification code).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from mucode.rollout.types import Sample, SamplingParams, refuse_keywords

__all__ = ["DummyEngine", "fixed_distribution"]

logger = logging.getLogger(__name__)


def fixed_distribution(
    vocab_size: int, eos_token_id: int, mean_response_tokens: float, temperature: float = 1.0
) -> np.ndarray:
    """Log-probs (float64, ``[vocab_size]``) of the engine's distribution at ``temperature``."""
    if vocab_size < 2 or not 0 <= eos_token_id < vocab_size:
        raise ValueError(
            f"need a vocabulary of at least 2 tokens holding eos_token_id, got {vocab_size}, {eos_token_id}"
        )
    if mean_response_tokens < 1:
        raise ValueError(f"mean_response_tokens must be >= 1, got {mean_response_tokens}")
    ranks = np.random.default_rng(12345).permutation(vocab_size - 1) + 1.0
    others = 1.0 / ranks
    p_eos = 1.0 / mean_response_tokens
    logp = np.empty(vocab_size, dtype=np.float64)
    non_eos = np.arange(vocab_size) != eos_token_id
    logp[non_eos] = np.log(others / others.sum()) + math.log1p(-p_eos) if p_eos < 1 else -np.inf
    logp[eos_token_id] = math.log(p_eos)
    scaled = logp / temperature
    return scaled - np.logaddexp.reduce(scaled)


class DummyEngine:
    """Random responses from :func:`fixed_distribution`, with their exact behaviour log-probs."""

    def __init__(
        self,
        tokenizer: Any,
        sampling: SamplingParams | None = None,
        *,
        batch_size: int = 256,
        mean_response_tokens: float = 256.0,
        vocab_size: int | None = None,
        decode: bool = True,
        **old: Any,
    ) -> None:
        refuse_keywords("DummyEngine", old)
        sampling = sampling if sampling is not None else SamplingParams()
        if sampling.truncated:
            logger.warning(
                "the dummy engine ignores top_p/top_k: it samples its fixed distribution at the temperature"
            )
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the dummy engine needs a tokenizer with an eos_token_id")
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size or len(tokenizer))
        self.eos_token_id = int(eos)
        self.sampling = sampling
        self.max_new_tokens = sampling.max_new_tokens
        self.batch_size = batch_size
        self.decode = decode
        self.logp = fixed_distribution(
            self.vocab_size, self.eos_token_id, mean_response_tokens, sampling.temperature
        )
        self._logp32 = self.logp.astype(np.float32)
        self._p_stop = float(math.exp(self.logp[self.eos_token_id]))
        self._others = np.delete(np.arange(self.vocab_size), self.eos_token_id)
        weights = np.exp(np.delete(self.logp, self.eos_token_id))
        self._cdf = np.cumsum(weights / weights.sum())
        self._cdf[-1] = 1.0
        self._rng = np.random.default_rng(sampling.seed)
        self._closed = False

    def _sample(self) -> tuple[np.ndarray, bool]:
        """One response's token ids and whether it stopped (True) or hit max_new_tokens."""
        body = int(self._rng.geometric(self._p_stop)) - 1 if self._p_stop > 0 else self.max_new_tokens
        stopped = body < self.max_new_tokens
        n = body if stopped else self.max_new_tokens
        tokens = self._others[
            np.searchsorted(self._cdf, self._rng.random(n), side="right").clip(max=len(self._cdf) - 1)
        ]
        if stopped:
            tokens = np.append(tokens, self.eos_token_id)
        return tokens, stopped

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        """Yields each prompt's group (``samples_per_prompt`` samples), ``batch_size`` prompts decoded together."""
        if self._closed:
            raise RuntimeError("the dummy engine is closed")
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            drawn = [[self._sample() for _ in range(samples_per_prompt)] for _ in chunk]
            flat = [tokens.tolist() for group in drawn for tokens, _ in group]
            texts = (
                self.tokenizer.batch_decode(flat, skip_special_tokens=True)
                if self.decode
                else [""] * len(flat)
            )
            for i, (prompt_id, prompt_ids) in enumerate(chunk):
                group = []
                for j, (tokens, stopped) in enumerate(drawn[i]):
                    k = i * samples_per_prompt + j
                    group.append(
                        Sample(
                            prompt_id=prompt_id,
                            sample_index=j,
                            prompt_token_ids=list(prompt_ids),
                            response_token_ids=flat[k],
                            behaviour_logprobs=self._logp32[tokens].tolist(),
                            response_text=texts[k],
                            finish_reason="stop" if stopped else "length",
                        )
                    )
                yield group

    def close(self) -> None:
        self._closed = True
