"""What a rollout engine returns, and the engine protocol."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

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
