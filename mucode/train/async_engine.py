"""A generator's engine kept warm across policy versions: new weights are loaded into the running engine.

A generator builds its engine once, from the base policy, while the trainer is still loading
(``mucode.train.async_generator``), and then loads every published version into it in place:

- pushed weights (``asynchronous.handoff=push``) come as ``(hf_name, tensor)`` pairs in memory;
- a file version (``handoff=file``) is read from the published directory's ``*.safetensors``.

:func:`load_in_place` hands the pairs to the engine: an engine with ``load_weights`` (the in-process
vLLM engine, ``mucode.rollout.vllm_colocated.ColocatedVLLM``: vLLM's ``model.load_weights``, which maps
HF names onto its fused layers) takes them as they are; an engine holding a transformers ``model``
(the ``hf`` engine) copies each tensor into the parameter or buffer of that name (tied weights share
storage, so a tensor absent from the file, such as a tied ``lm_head``, follows its twin). Engines
wrapped by another (``.engine``: the bench's slow engine, a test's dying one) are unwrapped first.
An engine that offers neither cannot be loaded in place: :func:`load_in_place` returns False and the
generator builds a new one from the version's directory (pushed weights are then refused: name the
reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import safe_open

__all__ = ["has_safetensors", "load_in_place", "policy_tensors"]


def _target(engine: Any) -> Any:
    seen = 0
    while not hasattr(engine, "load_weights") and not hasattr(engine, "model") and hasattr(engine, "engine"):
        engine, seen = engine.engine, seen + 1
        if seen > 8:
            break
    return engine


def has_safetensors(path: str) -> bool:
    return bool(path) and any(Path(path).glob("*.safetensors"))


def policy_tensors(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """The ``(hf_name, tensor)`` pairs of an HF directory's safetensors files (on CPU)."""
    for file in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                yield name, f.get_tensor(name)


@torch.no_grad()
def _copy_into(model: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    state = model.state_dict(keep_vars=True)
    unknown = []
    for name, tensor in weights:
        target = state.get(name)
        if target is None:
            unknown.append(name)
            continue
        if tuple(target.shape) != tuple(tensor.shape):
            raise ValueError(
                f"weight {name}: shape {tuple(tensor.shape)} does not fit the engine's {tuple(target.shape)}"
            )
        target.data.copy_(tensor.to(device=target.device, dtype=target.dtype))
    if unknown:
        raise ValueError(
            f"{len(unknown)} published weights are not in the engine's model, e.g. {unknown[:3]}"
        )


def load_in_place(engine: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> bool:
    """Load ``weights`` into the running ``engine``; False when the engine cannot be loaded in place."""
    target = _target(engine)
    if hasattr(target, "load_weights"):
        target.load_weights(weights)
        return True
    model = getattr(target, "model", None)
    if isinstance(model, torch.nn.Module):
        _copy_into(model, weights)
        return True
    return False
