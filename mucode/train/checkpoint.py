"""Training checkpoints: model, optimizer, data position and RNG, written atomically.

Layout under ``<run_dir>/checkpoints/``::

    update-00000128/  model.pt  optimizer.pt  rng.pt  state.json
    latest            # text file naming the newest complete checkpoint directory

A checkpoint directory is written under a temporary name and renamed into place, and ``latest`` is
replaced atomically afterwards, so a crash at any moment leaves the previous checkpoint usable.
``keep`` bounds how many are kept (oldest removed first).

The per-stage Hugging Face export (``<run_dir>/policy/stage-K``) is separate: it is what the next
stage's engine loads and what users evaluate. ``model.pt`` and ``optimizer.pt`` hold the master
weights and optimizer state in ``model.master_dtype`` (float32), so a resume loses nothing in a
mixed-precision run; the export is in the compute dtype. With ``train.weight_sync=memory`` stage ends
are checkpointed only every ``train.checkpoint_every`` updates (and after the last stage). Limits: the model
state is a full (unsharded) state
dict gathered on rank 0; sharded FSDP checkpoints for models that do not fit one host are not
implemented.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["Checkpoint", "Checkpointer", "TrainerState", "capture_rng", "restore_rng"]


@dataclass
class TrainerState:
    """Where a run stands; saved with every checkpoint and enough to resume it exactly."""

    stage: int = 0
    """The stage being worked on (0-based)."""
    update_in_stage: int = 0
    """Optimizer updates already done in ``stage`` (the data position: next minibatch index)."""
    global_update: int = 0
    """Optimizer updates done in the whole run."""
    engine_switches: int = 0
    """Switches between trainer and inference engine: 2 per engine start, counted from the stage
    stores' manifests (``meta.engine_starts``) at the end of a run."""
    times: dict[str, float] = field(default_factory=dict)
    """Accumulated wall-clock seconds per phase (``time/rollout`` …) over the run so far."""
    stage_times: list[dict[str, float]] = field(default_factory=list)
    """Per finished stage: its phase times and counts, for the summary table."""


@dataclass
class Checkpoint:
    """One checkpoint as :meth:`Checkpointer.load` reads it back (everything on CPU)."""

    path: Path
    state: TrainerState
    model: dict[str, torch.Tensor]
    """The full (unsharded) model state dict, in ``model.master_dtype``."""
    optimizer: dict[str, Any]
    """The full optimizer state dict (gathered to rank 0 under FSDP when saved)."""
    rng: dict[str, Any]
    """Python, numpy, torch and CUDA RNG states (:func:`capture_rng`)."""


def capture_rng() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Checkpointer:
    """Saves and loads checkpoints under ``root``."""

    def __init__(self, root: str | Path, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 (got {keep}): the latest checkpoint is always kept")
        self.root = Path(root)
        self.keep = keep

    def latest(self) -> Path | None:
        pointer = self.root / "latest"
        if not pointer.exists():
            return None
        path = self.root / pointer.read_text().strip()
        if not (path / "state.json").exists():
            raise RuntimeError(
                f"{pointer} names {path}, which is not a complete checkpoint. Remove {pointer} to "
                f"fall back to an older checkpoint, or start the run again without --resume."
            )
        return path

    def save(
        self, state: TrainerState, model_state: dict[str, torch.Tensor], optim_state: dict[str, Any]
    ) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"update-{state.global_update:08d}"
        final = self.root / name
        tmp = self.root / (name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save(model_state, tmp / "model.pt")
        torch.save(optim_state, tmp / "optimizer.pt")
        torch.save(capture_rng(), tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps(asdict(state), indent=2))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer_tmp = self.root / "latest.tmp"
        pointer_tmp.write_text(name)
        os.replace(pointer_tmp, self.root / "latest")
        self._prune(keep_name=name)
        return final

    def _prune(self, keep_name: str) -> None:
        done = sorted(p for p in self.root.glob("update-*") if p.is_dir() and not p.name.endswith(".tmp"))
        for old in done[: max(0, len(done) - self.keep)]:
            if old.name != keep_name:
                shutil.rmtree(old, ignore_errors=True)

    @staticmethod
    def load(path: Path) -> Checkpoint:
        """The checkpoint in ``path`` (a directory :meth:`save` wrote)."""
        return Checkpoint(
            path=path,
            state=TrainerState(**json.loads((path / "state.json").read_text())),
            model=torch.load(path / "model.pt", map_location="cpu", weights_only=True),
            optimizer=torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True),
            rng=torch.load(path / "rng.pt", map_location="cpu", weights_only=False),
        )
