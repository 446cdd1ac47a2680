"""``mucode export``: any training checkpoint as a Hugging Face model directory.

Stage ends hand over a policy in Hugging Face format (``policy/stage-KKKK``), but inside a stage (at
μ = 1024 a stage lasts hours) only checkpoints exist: ``checkpoints/update-NNNNNNNN/model.pt`` holds
the master weights as a plain state dict. Exporting one rebuilds the model from the run's base
(``model.path`` in the run's ``config.yaml``), loads those weights, and writes config, weights (in the
run's compute dtype, as the trainer's own hand-overs) and tokenizer with ``save_pretrained``.

:func:`as_model_path` lets every command that takes a model (``mucode eval … --model``) accept a
checkpoint directory or a run directory too: it exports once into ``<checkpoint>/hf`` and reuses it.
"""

from __future__ import annotations

from pathlib import Path

from mucode.config import load_config

__all__ = ["CheckpointError", "as_model_path", "export_checkpoint", "find_checkpoint"]


class CheckpointError(ValueError):
    """The path is not a usable checkpoint; the message says what to pass instead."""


def find_checkpoint(path: Path) -> Path:
    """The checkpoint directory ``path`` names: itself, or a run's (or ``checkpoints/``'s) latest."""
    path = Path(path)
    if (path / "model.pt").is_file() and (path / "state.json").is_file():
        return path
    for root in (path / "checkpoints", path):
        pointer = root / "latest"
        if pointer.is_file():
            found = root / pointer.read_text().strip()
            if (found / "model.pt").is_file():
                return found
            raise CheckpointError(
                f"{pointer} names {found}, which holds no model.pt: pass an older "
                f"checkpoint directory (ls {root})"
            )
    raise CheckpointError(
        f"{path} is not a mucode checkpoint (no model.pt + state.json) nor a run directory "
        "with checkpoints/latest: pass e.g. RUN_DIR/checkpoints/update-00000128"
    )


def _run_dir_of(checkpoint: Path) -> Path:
    run_dir = checkpoint.resolve().parent.parent
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(
            f"{run_dir} holds no config.yaml, so the checkpoint's base model is unknown: "
            "export from inside its run directory (RUN_DIR/checkpoints/update-N)"
        )
    return run_dir


def export_checkpoint(path: Path, out: Path, *, dtype: str | None = None) -> Path:
    """Writes the checkpoint ``path`` names as a Hugging Face model in ``out``; returns ``out``.

    ``dtype`` (``float32``, ``bfloat16``, ``float16``) defaults to the run's ``model.dtype``."""
    import torch  # lazy: torch

    from mucode.train.policy import TORCH_DTYPES, load_policy, save_policy  # lazy: torch

    checkpoint = find_checkpoint(path)
    cfg = load_config(_run_dir_of(checkpoint) / "config.yaml")
    model, tokenizer = load_policy(
        cfg.model.path,
        dtype=cfg.model.master_dtype,
        device=torch.device("cpu"),
        trust_remote_code=cfg.model.trust_remote_code,
    )
    weights = torch.load(checkpoint / "model.pt", map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"{checkpoint}/model.pt does not fit {cfg.model.path}: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    return save_policy(model, tokenizer, weights, Path(out), dtype=TORCH_DTYPES[dtype or cfg.model.dtype])


def as_model_path(path: str) -> str:
    """``path`` unchanged unless it is a checkpoint or run directory: then its export (made once)."""
    candidate = Path(path)
    if not candidate.is_dir() or (candidate / "config.json").is_file():
        return path
    try:
        checkpoint = find_checkpoint(candidate)
    except CheckpointError:
        return path
    out = checkpoint / "hf"
    if not (out / "config.json").is_file():
        export_checkpoint(checkpoint, out)
    return str(out)
