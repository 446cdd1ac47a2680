"""What a rollout engine returns, how it samples (:class:`SamplingParams`), and the engine protocol."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]


class EngineError(RuntimeError):
    """The engine failed as a process (it died, or stopped answering): a new engine may succeed, and the
    trainer starts one for the prompts not yet generated. Errors in the caller's input are not this."""


@dataclass
class Sample:
    """One sampled response to one prompt."""

    prompt_id: str
    sample_index: int
    """0..G-1 within the prompt's group."""
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    """The sampled tokens, the stop (EOS) token included when ``finish_reason == "stop"``."""
    behaviour_logprobs: list[float]
    """Log-prob of each sampled token under the sampler at the sampling temperature
    (``log_softmax(logits / T)[token]``), one per response token."""
    response_text: str
    """The decoded response, special tokens removed."""
    finish_reason: FinishReason
    """``"stop"``: a stop token ended it; ``"length"``: it hit ``max_new_tokens``."""


@runtime_checkable
class RolloutEngine(Protocol):
    """A sampler holding a frozen behaviour policy."""

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        """Sample ``samples_per_prompt`` responses for each ``(prompt_id, prompt token ids)``.

        Yields each finished group (all samples of one prompt, ``sample_index`` order) as soon as
        it is done, so verification overlaps generation. Groups may come in any order.
        """
        ...

    def close(self) -> None:
        """Release the engine (the vllm engine's process ends and frees its GPU memory)."""
        ...


# the old keywords of make_engine and the engines, now fields of SamplingParams
SAMPLING_KEYWORDS = ("temperature", "top_p", "top_k", "max_new_tokens", "seed")


@dataclass(frozen=True)
class SamplingParams:
    """How every engine samples: one value, built once from the config's ``rollout`` section
    (``RolloutConfig.sampling_params()``) and handed to ``make_engine``, the engines and plug-in builders.

    ``temperature`` 0 is greedy (``hf``); behaviour log-probs are taken at the temperature. ``top_p`` < 1 or
    ``top_k`` > 0 truncate the sampling distribution (the engines' log-probs then differ from the
    trainer's; each engine warns). ``max_new_tokens``: the longest response. ``seed``: the engine's random
    stream. Change a field with :meth:`replace` (e.g. a stage's seed, a per-prompt temperature).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_new_tokens: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def truncated(self) -> bool:
        """Whether top-p or top-k cut the distribution (log-probs then differ from the trainer's)."""
        return self.top_p < 1.0 or self.top_k > 0

    def replace(self, **changes: Any) -> SamplingParams:
        """A copy with ``changes`` (field names of this class)."""
        return dataclasses.replace(self, **changes)


def reject_sampling_keywords(where: str, keywords: Mapping[str, Any]) -> None:
    """A caller still passing the old sampling keywords gets one line naming :class:`SamplingParams`."""
    old = [k for k in SAMPLING_KEYWORDS if k in keywords]
    if old:
        raise TypeError(
            f"{where} takes sampling=SamplingParams(...) (mucode.rollout.SamplingParams), not the keywords "
            f"{', '.join(old)}"
        )


def refuse_keywords(where: str, keywords: Mapping[str, Any]) -> None:
    """An engine's leftover keywords: the old sampling ones named as :class:`SamplingParams` fields, any
    other as Python would name it."""
    reject_sampling_keywords(where, keywords)
    if keywords:
        raise TypeError(f"{where} got unexpected keyword arguments: {', '.join(sorted(keywords))}")
