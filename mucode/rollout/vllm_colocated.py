"""A vLLM engine that lives in the trainer's process for the whole run (``train.weight_sync=memory``).

For short stages (GRPO μ = 4) starting an engine from disk every stage costs more than the stage.
This engine is built once per rank, sleeps while the trainer trains, and receives each stage's
weights in memory. Written against vLLM's offline API as TRL and verl use it (0.10.2 – 0.33); it
needs a GPU and is covered by ``gpu``-marked tests only.

- Built with ``distributed_executor_backend="external_launcher"`` and ``tensor_parallel_size=1``:
  under torchrun every rank holds its own in-process engine on ``cuda:LOCAL_RANK`` (after
  ``init_process_group`` and ``set_device``); ``enable_sleep_mode=True``; ``seed`` per rank. Building
  the engine reseeds Python's, numpy's and torch's RNGs: they are saved and restored around it.
- Every request is seeded (``SamplingParams(seed=stage seed + slot)``): a prompt's random draws do
  not depend on the batch it landed in or on which engine start generated it (vLLM's batch-dependent
  numerics aside).
- A stage: ``load_weights`` (``wake_up(["weights"])``, then the model runner's
  ``model.load_weights`` one ``(hf_name, tensor)`` at a time, then ``wake_up(["kv_cache"])``) →
  ``generate`` → ``close`` of the stage view, which calls ``sleep(level=2)`` (weights and KV cache
  dropped; the next stage loads weights again). ``sleep`` clears the prefix cache.
- ``gpu_memory_utilization`` is a fraction of the device's *total* memory that must be free when the
  engine is built: the trainer's optimizer state has stepped aside by then, its parameters not yet.
- Log-probs: ``logprobs_mode="processed_logprobs"`` (taken after temperature), as in ``vllm.py``.
Limits: one sleep-mode engine per process; an engine that dies takes the rank with it (no restart,
unlike the child-process engine of ``mucode.rollout.vllm``).
"""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from mucode.rollout.types import Sample, SamplingParams
from mucode.rollout.vllm import (
    VLLMSettings,
    group_from_output,
    llm_kwargs,
    processed_logprobs_supported,
    sampling_kwargs,
    vllm_settings,
)
from mucode.seeds import SeedPurpose, derive_seed

__all__ = ["ColocatedVLLM", "colocated_llm_kwargs"]


# what torchrun would set, for a run without it (one process, one GPU)
_SINGLE_PROCESS_ENV = {
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29513",
}


def colocated_llm_kwargs(settings: VLLMSettings, rank: int) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for the colocated engine of ``rank``."""
    kwargs = llm_kwargs(settings, rank)
    kwargs.update(
        {
            "tensor_parallel_size": 1,
            "distributed_executor_backend": "external_launcher",
            "enable_sleep_mode": True,
        }
    )
    return kwargs


def _capture_rngs() -> tuple[Any, ...]:
    import torch  # lazy: torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda


def _restore_rngs(state: tuple[Any, ...]) -> None:
    import torch  # lazy: torch

    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])
    if state[3] is not None:
        torch.cuda.set_rng_state_all(state[3])


def _runner_model(llm: Any) -> Any:
    """The ``nn.Module`` vLLM runs (V0: ``driver_worker.model_runner``; V1: ``driver_worker.worker.model_runner``)."""
    worker = llm.llm_engine.model_executor.driver_worker
    worker = getattr(worker, "worker", worker)
    return worker.model_runner.model


class ColocatedVLLM:
    """One long-lived in-process vLLM engine per rank; weights arrive in memory each stage."""

    def __init__(
        self,
        model_path: str,
        sampling: SamplingParams | None = None,
        *,
        batch_size: int = 256,
        **options: Any,
    ) -> None:
        """``options``: :class:`~mucode.rollout.vllm.VLLMSettings`'s fields (``dtype``,
        ``gpu_memory_utilization``, ``max_model_len``, ``engine_kwargs``; one GPU per rank)."""
        self.settings = vllm_settings("ColocatedVLLM", model_path, sampling, options)
        if importlib.util.find_spec("vllm") is None:
            raise ImportError(
                "train.weight_sync=memory with rollout.engine=vllm needs vLLM: "
                "`pip install 'mucode[vllm]'`, or set train.weight_sync=disk"
            )
        import vllm  # lazy: vllm

        if not processed_logprobs_supported(vllm.__version__):
            raise RuntimeError(
                f"vLLM {vllm.__version__} takes log-probs before temperature; install vllm>=0.10.2"
            )
        self.batch_size = batch_size
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core stays in this process
        for name, value in _SINGLE_PROCESS_ENV.items():  # external_launcher reads torchrun's variables
            os.environ.setdefault(name, value)
        rngs = _capture_rngs()
        try:
            self.llm = vllm.LLM(**colocated_llm_kwargs(self.settings, 0))
        finally:
            _restore_rngs(rngs)
        self.asleep = False
        self.stage_seed = self.settings.sampling.seed

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Wake the weights, load ``(hf_name, tensor)`` pairs in place, wake the KV cache."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        _runner_model(self.llm).load_weights(iter(weights))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        else:
            self.llm.reset_prefix_cache()

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        from vllm import SamplingParams as VLLMSamplingParams  # lazy: vllm
        from vllm.inputs import TokensPrompt  # lazy: vllm

        if self.asleep:
            raise RuntimeError("the colocated vLLM engine is asleep; load_weights wakes it")
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            params = [
                VLLMSamplingParams(
                    **sampling_kwargs(self.settings.sampling, samples_per_prompt),
                    seed=derive_seed(self.stage_seed, SeedPurpose.REQUEST, index=_index(pid, start + i)),
                )
                for i, (pid, _) in enumerate(chunk)
            ]
            outputs = self.llm.generate(
                [TokensPrompt(prompt_token_ids=list(ids)) for _, ids in chunk], params, use_tqdm=False
            )
            for (pid, ids), out in zip(chunk, outputs, strict=True):
                yield group_from_output(pid, list(ids), out)

    def sleep(self) -> None:
        if not self.asleep:
            self.llm.sleep(level=2)
            self.asleep = True

    def stage_view(self, seed: int) -> _StageView:
        """The engine as one stage sees it (requests seeded from ``seed``): ``close()`` puts it to sleep
        instead of ending it."""
        self.stage_seed = seed
        return _StageView(self)

    def close(self) -> None:
        self.llm = None


def _index(prompt_id: str, position: int) -> int:
    """A request's seed offset: its prompt id when numeric (the stage slot, stable across restarts)."""
    return int(prompt_id) if prompt_id.isdigit() else position


class _StageView:
    def __init__(self, engine: ColocatedVLLM) -> None:
        self.engine = engine

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        return self.engine.generate(prompts, samples_per_prompt)

    def close(self) -> None:
        self.engine.sleep()
