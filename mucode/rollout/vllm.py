"""The ``vllm`` rollout engine: offline ``LLM.generate`` in child processes (GPU only).

Written against vLLM's documented offline API (``LLM``, ``SamplingParams``, ``TokensPrompt``,
``RequestOutput.outputs[i].token_ids / .logprobs / .finish_reason``); vLLM is an optional extra
(``pip install mucode[vllm]``) and is imported only inside the child process.

- Each data-parallel replica is one child process (``spawn``) owning ``tensor_parallel_size``
  GPUs of ``CUDA_VISIBLE_DEVICES`` (or of ``devices``: under torchrun each rank passes its own GPU and
  runs one replica there, without torchrun's variables); ``close()`` ends the children, which frees every byte of GPU
  memory vLLM took (the trainer then has the GPUs to itself). Replicas take prompt chunks from a
  shared queue, so a fast replica takes more.
- mucode's ``SamplingParams`` becomes ``vllm.SamplingParams(n=G, temperature, top_p, top_k, max_tokens,
  logprobs=0)`` (:func:`sampling_kwargs`), which returns each sampled
  token's log-prob. The engine is built with ``logprobs_mode="processed_logprobs"`` so that the
  log-prob is taken *after* temperature scaling (vLLM's default ``raw_logprobs`` ignores the
  temperature). With top-p < 1 or top-k > 0 "processed" also means renormalised over the kept
  tokens, which differs from the trainer's full-vocabulary log-softmax: a warning says so.
- Groups come back per ``LLM.generate`` call of ``batch_size`` prompts; a smaller ``batch_size``
  hands groups to the verifier sooner at some cost in throughput.
- vLLM < 0.10.2 has no usable ``logprobs_mode`` (0.10.0/0.10.1 accept it and ignore the temperature;
  the installed version decides): it is then accepted only at temperature 1 without top-p/top-k,
  where raw and processed log-probs agree. ``seed`` seeds each replica's engine
  (``seed + replica``); vLLM does not promise bit-identical samples across batch layouts.
"""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing as mp
import os
import queue
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from mucode.rollout.types import EngineError, Sample, SamplingParams, reject_sampling_keywords
from mucode.seeds import SeedPurpose, derive_seed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VLLMSettings:
    """Everything a replica needs to build its ``LLM`` and ``SamplingParams`` (picklable)."""

    model_path: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    max_model_len: int | None = None
    enforce_eager: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:  # frozen: normalised once, here
        object.__setattr__(self, "dtype", _VLLM_DTYPES.get(self.dtype, self.dtype))
        object.__setattr__(self, "engine_kwargs", dict(self.engine_kwargs or {}))


_VLLM_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""mucode's short dtype names as vLLM spells them."""


def sampling_kwargs(sampling: SamplingParams, samples_per_prompt: int) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one prompt's group (``seed`` is not one of them: it
    seeds the engine, and the colocated engine seeds each request)."""
    return {
        "n": samples_per_prompt,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "max_tokens": sampling.max_new_tokens,
        "logprobs": 0,
    }


def llm_kwargs(settings: VLLMSettings, replica: int) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for one replica."""
    kwargs: dict[str, Any] = {
        "model": settings.model_path,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "dtype": settings.dtype,
        "seed": derive_seed(settings.sampling.seed, SeedPurpose.REPLICA, index=replica),
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "enforce_eager": settings.enforce_eager,
        "logprobs_mode": "processed_logprobs",
    }
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    return {**kwargs, **settings.engine_kwargs}


def vllm_settings(
    where: str, model_path: str, sampling: SamplingParams | None, options: dict[str, Any]
) -> VLLMSettings:
    """A vLLM engine's settings from its constructor's arguments (``options``: :class:`VLLMSettings`'s
    fields; the old sampling keywords are refused in one line). Warns when top-p/top-k truncate: vLLM's
    processed log-probs are then renormalised over the kept tokens, not the trainer's."""
    reject_sampling_keywords(where, options)
    settings = VLLMSettings(model_path, sampling if sampling is not None else SamplingParams(), **options)
    if settings.sampling.truncated:
        logger.warning(
            "top_p=%s top_k=%s: vLLM's log-probs are renormalised over the kept tokens and differ from the "
            "trainer's full-vocabulary log-probs, so ratios are biased; use top_p=1, top_k=-1 for exact ratios",
            settings.sampling.top_p,
            settings.sampling.top_k,
        )
    return settings


def group_from_output(prompt_id: str, prompt_ids: list[int], output: Any) -> list[Sample]:
    """A ``vllm.RequestOutput`` (one prompt, ``n`` completions) to a group of ``Sample``."""
    samples = []
    for position, completion in enumerate(output.outputs):
        tokens = [int(t) for t in completion.token_ids]
        if completion.logprobs is None or len(completion.logprobs) < len(tokens):
            raise RuntimeError(
                "vLLM returned no log-prob for some sampled tokens; SamplingParams needs logprobs=0"
            )
        logprobs = [
            float(step[token].logprob) for step, token in zip(completion.logprobs, tokens, strict=False)
        ]
        index = getattr(completion, "index", position)
        samples.append(
            Sample(
                prompt_id=prompt_id,
                sample_index=int(index if index is not None else position),
                prompt_token_ids=list(prompt_ids),
                response_token_ids=tokens,
                behaviour_logprobs=logprobs,
                response_text=completion.text or "",
                finish_reason="length" if completion.finish_reason == "length" else "stop",
            )
        )
    return sorted(samples, key=lambda s: s.sample_index)


def visible_gpus() -> list[str]:
    """GPU ids this process may use (``CUDA_VISIBLE_DEVICES`` or all)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    import torch  # lazy: torch

    return [str(i) for i in range(torch.cuda.device_count())]


def processed_logprobs_supported(version: str) -> bool:
    """vLLM takes ``logprobs_mode="processed_logprobs"`` after temperature only from 0.10.2 (0.10.0 and
    0.10.1 accept the option and ignore the temperature), so the version decides, not a TypeError."""

    return Version(version.split("+")[0]) >= Version("0.10.2")


def _build_llm(settings: VLLMSettings, replica: int) -> Any:
    import vllm  # lazy: vllm

    kwargs = llm_kwargs(settings, replica)
    if not processed_logprobs_supported(vllm.__version__):
        if settings.sampling.temperature != 1.0 or settings.sampling.truncated:
            raise RuntimeError(
                f"vLLM {vllm.__version__} takes log-probs before temperature and top-p/top-k: upgrade to "
                "vllm>=0.10.2 or sample at temperature 1 without top_p/top_k"
            )
        kwargs.pop("logprobs_mode")
    return vllm.LLM(**kwargs)


# torchrun's variables: a replica is a process of its own, not a rank of the trainer's process group
_LAUNCHER_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


def _replica_main(replica: int, gpus: list[str], config: VLLMSettings, tasks: Any, results: Any) -> None:
    """Child process: build one vLLM engine, serve prompt chunks until told to stop."""
    try:
        for name in _LAUNCHER_ENV:
            os.environ.pop(name, None)
        if gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        from vllm import SamplingParams as VLLMSamplingParams  # lazy: vllm
        from vllm.inputs import TokensPrompt  # lazy: vllm

        llm = _build_llm(config, replica)
        results.put(("ready", replica, None))
        while True:
            task = tasks.get()
            if task is None:
                break
            items, samples_per_prompt = task
            params = VLLMSamplingParams(**sampling_kwargs(config.sampling, samples_per_prompt))
            outputs = llm.generate(
                [TokensPrompt(prompt_token_ids=ids) for _, ids in items], params, use_tqdm=False
            )
            groups = [
                group_from_output(pid, ids, out) for (pid, ids), out in zip(items, outputs, strict=True)
            ]
            results.put(("groups", replica, groups))
    except BaseException:  # report every failure to the parent, which raises it
        results.put(("error", replica, traceback.format_exc()))


class VLLMEngine:
    """Rollout engine over vLLM replicas in child processes."""

    def __init__(
        self,
        model_path: str,
        sampling: SamplingParams | None = None,
        *,
        batch_size: int = 256,
        data_parallel_size: int = 1,
        start_timeout_s: float = 1800.0,
        devices: list[str] | None = None,
        **options: Any,
    ) -> None:
        """``options``: :class:`VLLMSettings`'s fields (``dtype``, ``tensor_parallel_size``,
        ``gpu_memory_utilization``, ``max_model_len``, ``enforce_eager``, ``engine_kwargs``)."""
        self.settings = vllm_settings("VLLMEngine", model_path, sampling, options)
        if importlib.util.find_spec("vllm") is None:
            raise ImportError(
                "the vllm engine needs vLLM on a CUDA machine: `pip install 'mucode[vllm]'` (in an environment "
                "without verl, whose transformers pin conflicts), or use rollout.engine=hf"
            )
        tensor_parallel_size = self.settings.tensor_parallel_size
        self.batch_size = batch_size
        gpus = list(devices) if devices is not None else visible_gpus()
        needed = tensor_parallel_size * data_parallel_size
        if len(gpus) < needed:
            raise ValueError(
                f"tensor_parallel_size={tensor_parallel_size} x data_parallel_size={data_parallel_size} needs "
                f"{needed} GPUs but {len(gpus)} are visible"
            )
        context = mp.get_context("spawn")
        self._tasks = context.Queue()
        self._results = context.Queue()
        self._replicas = []
        for replica in range(data_parallel_size):
            slice_ = gpus[replica * tensor_parallel_size : (replica + 1) * tensor_parallel_size]
            process = context.Process(
                target=_replica_main,
                args=(replica, slice_, self.settings, self._tasks, self._results),
                name=f"mucode-vllm-{replica}",
            )
            process.start()
            self._replicas.append(process)
        ready = 0
        while ready < data_parallel_size:
            kind, replica, payload = self._next_result(start_timeout_s)
            if kind != "ready":
                self.close()
                raise RuntimeError(f"vLLM replica {replica} failed to start:\n{payload}")
            ready += 1

    def _next_result(self, timeout_s: float) -> tuple[str, int, Any]:
        waited = 0.0
        while True:
            try:
                message: tuple[str, int, Any] = self._results.get(timeout=5.0)
                return message
            except queue.Empty:
                waited += 5.0
                dead = [p.name for p in self._replicas if not p.is_alive()]
                if dead:
                    raise EngineError(f"vLLM replica process(es) {dead} died without a report") from None
                if waited >= timeout_s:
                    raise EngineError(f"no answer from the vLLM replicas in {timeout_s:.0f} s") from None

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        if not self._replicas:
            raise RuntimeError("the vllm engine is closed")
        chunks = [prompts[i : i + self.batch_size] for i in range(0, len(prompts), self.batch_size)]
        for chunk in chunks:
            self._tasks.put(([(pid, list(ids)) for pid, ids in chunk], samples_per_prompt))
        for _ in chunks:
            kind, replica, payload = self._next_result(timeout_s=24 * 3600)
            if kind == "error":
                raise EngineError(f"vLLM replica {replica} failed:\n{payload}")
            yield from payload

    def close(self) -> None:
        """End the replica processes (their GPU memory is freed with them)."""
        for process in self._replicas:
            if process.is_alive():
                self._tasks.put(None)
        for process in self._replicas:
            process.join(timeout=120)
            if process.is_alive():
                logger.warning("vLLM replica %s did not exit; terminating it", process.name)
                process.terminate()
                process.join(timeout=30)
        self._replicas = []

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
