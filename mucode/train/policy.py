"""Loading the policy for training and handing it over in Hugging Face format.

``model.path = tiny`` names the embedded tiny policy under ``mucode/assets/tiny`` (built by
``scripts/make_tiny_policy.py``); anything else is a local HF directory or a Hub id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["resolve_model_path", "load_policy", "save_policy", "TORCH_DTYPES"]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def resolve_model_path(path: str) -> str:
    if path == "tiny":
        tiny = ASSETS / "tiny"
        if not (tiny / "config.json").exists():
            raise FileNotFoundError(
                f"the embedded tiny policy is missing from {tiny}; build it with "
                f"`python scripts/make_tiny_policy.py` or set model.path to a Hugging Face model"
            )
        return str(tiny)
    return path


def load_policy(path: str, *, dtype: str, device: torch.device, trust_remote_code: bool = False,
                gradient_checkpointing: bool = False) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of the policy at ``path`` (after :func:`resolve_model_path`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    resolved = resolve_model_path(path)
    model = AutoModelForCausalLM.from_pretrained(
        resolved, dtype=TORCH_DTYPES[dtype], trust_remote_code=trust_remote_code
    )
    tokenizer = AutoTokenizer.from_pretrained(resolved, trust_remote_code=trust_remote_code)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    return model.to(device), tokenizer


def save_policy(model: nn.Module, tokenizer: Any, state_dict: dict[str, torch.Tensor], out: Path) -> Path:
    """Write a loadable HF directory (config, weights, tokenizer) atomically to ``out``."""
    import shutil

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
