"""Rollout engines: sample G responses per prompt from a frozen behaviour policy, with the
behaviour log-prob of every sampled token.

Public API::

    from mucode.rollout import SamplingParams, make_engine

    sampling = SamplingParams(temperature=1.0, max_new_tokens=64, seed=0)
    engine = make_engine("hf", "tiny", sampling, batch_size=64)
    for group in engine.generate([(prompt_id, prompt_token_ids), ...], samples_per_prompt=8):
        ...                       # a finished group: G Samples of one prompt, sample_index order
    engine.close()                # vllm: the engine process ends and its GPU memory is freed

``Sample(prompt_id, sample_index, prompt_token_ids, response_token_ids, behaviour_logprobs,
response_text, finish_reason)``: ``behaviour_logprobs[t] = log_softmax(logits_t / T)[token_t]``
(the stop token is part of the response and has its log-prob); ``finish_reason`` is
``"stop"`` or ``"length"``.

``SamplingParams(temperature, top_p, top_k, max_new_tokens, seed)``: how every engine samples (frozen;
``.replace(seed=...)`` for a copy; the config builds one with ``cfg.rollout.sampling_params()``).
``make_engine(name, model_path, sampling, *, dtype, device, batch_size, tensor_parallel_size,
data_parallel_size, gpu_memory_utilization, **extra)``:
``name`` is ``hf`` (transformers, CPU/GPU, this process), ``vllm`` (GPU, a child process), ``dummy``
or a plug-in; ``model_path`` a Hugging Face directory or Hub id, or ``"tiny"`` for the embedded tiny
policy. ``HFEngine(model, tokenizer, sampling, ...)`` wraps an already-loaded model without a copy.
The old sampling keywords (``temperature=``, …) are refused with one line naming ``SamplingParams``.

Log-probs for the trainer: ``response_logprobs(model, prompts, responses, temperature)`` returns
right-padded ``[B, R]`` log-probs (+ mask, optional entropy) with gradient, computed exactly as
the engines define them (``mucode.rollout.logprobs``); ``sequence_logprobs`` does one sequence.
With top_p < 1 or top_k > 0 the engines' log-probs differ from these (a warning is logged).
"""

from mucode.rollout.factory import ENGINES, make_engine, register_engine
from mucode.rollout.hf import HFEngine
from mucode.rollout.logprobs import (
    ResponseLogprobs,
    response_logprobs,
    sequence_logprobs,
    token_entropy,
    token_logprobs,
)
from mucode.rollout.types import EngineError, FinishReason, RolloutEngine, Sample, SamplingParams

__all__ = [
    "ENGINES",
    "EngineError",
    "FinishReason",
    "HFEngine",
    "ResponseLogprobs",
    "RolloutEngine",
    "Sample",
    "SamplingParams",
    "make_engine",
    "register_engine",
    "response_logprobs",
    "sequence_logprobs",
    "token_entropy",
    "token_logprobs",
]
