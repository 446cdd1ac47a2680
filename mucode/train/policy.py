"""Loading the policy for training and handing it over in Hugging Face format.

``model.path = tiny`` names the embedded tiny policy under ``mucode/assets/tiny`` (built by
``scripts/make_tiny_policy.py``); anything else is a local HF directory or a Hub id.

The trainer loads the policy in its *master* dtype (``model.master_dtype``, float32) and exports
hand-overs in the *compute* dtype (``model.dtype``), the one the engine generates in; see
``mucode.train.precision``. Loaded parameters own their memory (a safetensors load may map the
file, and a mapped tensor cannot be freed when the trainer's state steps aside for generation).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mucode.assets import resolve_model_path
from mucode.train.precision import TORCH_DTYPES

__all__ = ["TORCH_DTYPES", "load_policy", "save_policy"]


def load_policy(
    path: str,
    *,
    dtype: str,
    device: torch.device,
    trust_remote_code: bool = False,
    gradient_checkpointing: bool = False,
) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of the policy at ``path`` (after :func:`mucode.assets.resolve_model_path`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

    resolved = resolve_model_path(path)
    model = AutoModelForCausalLM.from_pretrained(
        resolved, dtype=TORCH_DTYPES[dtype], trust_remote_code=trust_remote_code
    )
    tokenizer = AutoTokenizer.from_pretrained(resolved, trust_remote_code=trust_remote_code)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model = model.to(device)  # type: ignore[arg-type]  # transformers types .to badly
    for tensor in [*model.parameters(), *model.buffers()]:
        if not tensor.untyped_storage().resizable():
            tensor.data = tensor.data.clone()
    return model, tokenizer


def save_policy(
    model: nn.Module,
    tokenizer: Any,
    state_dict: dict[str, torch.Tensor],
    out: Path,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write a loadable HF directory (config, weights, tokenizer) atomically to ``out``; with ``dtype``
    the floating weights are cast to it and the config says so (the engine's dtype)."""

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if dtype is not None:
        state_dict = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state_dict.items()}
    model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)  # type: ignore[operator]  # a PreTrainedModel
    if dtype is not None:  # save_pretrained writes the dtype of the model's (master) parameters
        config_file = tmp / "config.json"
        config = json.loads(config_file.read_text())
        name = str(dtype).removeprefix("torch.")
        config.update({key: name for key in ("dtype", "torch_dtype") if key in config} or {"dtype": name})
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
