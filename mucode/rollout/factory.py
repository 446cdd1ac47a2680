"""``make_engine``: build a rollout engine by name from the :data:`ENGINES` registry.

Built-ins: ``hf``, ``vllm``, ``dummy``. A plug-in package adds one under the ``mucode.engines``
entry-point group, naming a builder ``fn(model_path, sampling, **settings) -> RolloutEngine``:
``sampling`` is a :class:`~mucode.rollout.types.SamplingParams` (temperature, top_p, top_k,
max_new_tokens, seed), the settings are :func:`make_engine`'s other keywords (accept ``**options`` for
the ones you ignore)::

    [project.entry-points."mucode.engines"]
    my_engine = "my_package.engine:build"

after which ``rollout.engine=my_engine`` selects it (the config validates the name at load time). A
builder without a ``sampling`` parameter (the old ``fn(model_path, **settings)`` reading
``settings["temperature"]``) is refused with one line naming the new signature, and so is a caller
passing ``temperature=`` (or another sampling keyword) to ``make_engine``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, cast

from mucode.assets import resolve_model_path
from mucode.registry import Registry
from mucode.rollout.types import RolloutEngine, SamplingParams, reject_sampling_keywords

__all__ = ["ENGINES", "ENTRY_POINT_GROUP", "EngineBuilder", "make_engine", "register_engine"]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mucode.engines"
EngineBuilder = Callable[..., RolloutEngine]


def _as_builder(loaded: object) -> EngineBuilder:
    """An entry point's object as an engine builder (the callable itself: it is called per engine)."""
    if not callable(loaded):
        raise TypeError(
            f"expected a builder fn(model_path, sampling, **settings) -> RolloutEngine, got {type(loaded).__name__}"
        )
    return cast(EngineBuilder, loaded)


ENGINES: Registry[EngineBuilder] = Registry(
    "rollout engine", entry_point_group=ENTRY_POINT_GROUP, adapt=_as_builder
)
"""Rollout engine builders by name: the built-ins and what installed packages declare."""


def register_engine(name: str) -> Callable[[EngineBuilder], EngineBuilder]:
    """Register an engine builder ``fn(model_path, sampling, **settings) -> RolloutEngine``; duplicates raise."""

    def decorate(fn: EngineBuilder) -> EngineBuilder:
        return ENGINES.register(name, fn)

    return decorate


@register_engine("hf")
def _build_hf(
    model_path: str,
    sampling: SamplingParams,
    *,
    dtype: str,
    device: str,
    tensor_parallel_size: int,
    data_parallel_size: int,
    gpu_memory_utilization: float,
    **options: Any,
) -> RolloutEngine:
    from mucode.rollout.hf import HFEngine  # lazy: torch

    model_path = resolve_model_path(model_path)
    if tensor_parallel_size > 1 or data_parallel_size > 1:
        logger.warning("the hf engine runs on one device; tensor/data parallel sizes are ignored")
    return HFEngine.from_pretrained(model_path, sampling, dtype=dtype, device=device, **options)


@register_engine("vllm")
def _build_vllm(model_path: str, sampling: SamplingParams, *, device: str, **options: Any) -> RolloutEngine:
    from mucode.rollout.vllm import VLLMEngine  # lazy: torch

    model_path = resolve_model_path(model_path)
    if device not in ("auto", "cuda"):
        logger.warning(
            "the vllm engine chooses its GPUs itself (CUDA_VISIBLE_DEVICES); device=%r ignored", device
        )
    return VLLMEngine(model_path, sampling, **options)


@register_engine("dummy")
def _build_dummy(
    model_path: str,
    sampling: SamplingParams,
    *,
    dtype: str,
    device: str,
    tensor_parallel_size: int,
    data_parallel_size: int,
    gpu_memory_utilization: float,
    **options: Any,
) -> RolloutEngine:
    """No model: random tokens from a fixed distribution (``mucode.rollout.dummy``); only the tokenizer is read."""
    from transformers import AutoTokenizer  # lazy: transformers

    from mucode.rollout.dummy import DummyEngine  # lazy: torch

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model_path))
    return DummyEngine(tokenizer, sampling, **options)


def make_engine(
    name: str,
    model_path: str,
    sampling: SamplingParams | None = None,
    *,
    dtype: str = "auto",
    device: str = "auto",
    batch_size: int = 64,
    tensor_parallel_size: int = 1,
    data_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.85,
    **extra: Any,
) -> RolloutEngine:
    """Build the rollout engine ``name`` holding the policy saved at ``model_path``, sampling with
    ``sampling`` (None: ``SamplingParams()``).

    ``batch_size``: hf -- sequences decoded together; vllm -- prompts per ``LLM.generate`` call
    (groups come back per call, so smaller values overlap verification sooner). ``dtype``:
    auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16. ``extra`` goes to the engine
    (hf: ``stop_token_ids``; vllm: ``max_model_len``, ``enforce_eager``, ``engine_kwargs``).
    """
    reject_sampling_keywords("make_engine", extra)
    build = ENGINES.get(name)  # UnknownNameError lists the valid names
    _check_builder(name, build)
    return build(
        model_path,
        sampling=sampling if sampling is not None else SamplingParams(),
        dtype=dtype,
        device=device,
        batch_size=batch_size,
        tensor_parallel_size=tensor_parallel_size,
        data_parallel_size=data_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        **extra,
    )


def _check_builder(name: str, build: EngineBuilder) -> None:
    """A builder written for the old keywords (``fn(model_path, **settings)`` reading ``temperature``, …)
    must not silently sample with defaults: it is refused with one line naming the new signature."""
    try:
        parameters = inspect.signature(build).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read, let the call decide
        return
    if "sampling" not in parameters:
        raise TypeError(
            f"rollout engine builder {name!r} takes the old sampling keywords; a builder is now "
            "fn(model_path, sampling: SamplingParams, **settings) (mucode.rollout.SamplingParams)"
        )
