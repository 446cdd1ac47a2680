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

Every file is read with ``torch.load(weights_only=True)``: a checkpoint holds tensors and plain data
only (the RNG states are stored as tensors and numbers, :func:`capture_rng`), so loading one cannot
run code. A ``rng.pt`` written before that (pickled numpy and Python objects) is refused with a
one-line error naming the fix: :func:`convert_legacy_rng` rewrites it, for a file you trust.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["Checkpoint", "Checkpointer", "TrainerState", "capture_rng", "convert_legacy_rng", "restore_rng"]


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
    best: dict[str, Any] | None = None
    """The best evaluation so far (what ``best.json`` held when this state was saved); a resume puts
    it back when ``best.json`` names a later update, one the resume replays (``Evaluator``)."""


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
    """The RNG states as tensors and plain numbers (what ``torch.load(weights_only=True)`` reads)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "format": 2,
        "python": {
            "version": int(version),
            "state": torch.tensor(internal, dtype=torch.int64),
            "gauss": gauss,
        },
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_rng(state: dict[str, Any]) -> None:
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]))
    np.random.set_state(
        (npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["cached"])
    )
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class LegacyCheckpointError(RuntimeError):
    """A checkpoint file that only an unsafe (code-running) unpickling could read."""


def _load_rng(path: Path) -> dict[str, Any]:
    try:
        rng = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise LegacyCheckpointError(
            f"{path} holds pickled objects (written by an older mucode) and is not loaded unsafely: if you "
            f'trust it, convert it with `python -c "from mucode.train.checkpoint import convert_legacy_rng; '
            f"convert_legacy_rng('{path}')\"`, or delete it to resume with fresh RNG states"
        ) from None
    if not isinstance(rng, dict) or rng.get("format") != 2:
        raise LegacyCheckpointError(
            f"{path} is not an RNG state this mucode wrote (no format 2); "
            "delete it to resume with fresh RNG states"
        )
    return rng


def convert_legacy_rng(path: str | Path) -> None:
    """Rewrites an old ``rng.pt`` (pickled states) in the tensor format. Unpickles the file, which can
    run code: only for a checkpoint you trust."""
    p = Path(path)
    old = torch.load(p, map_location="cpu", weights_only=False)  # the user asked for it, by name
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        random.setstate(old["python"])
        np.random.set_state(old["numpy"])
        new = capture_rng()
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
    new["torch"], new["cuda"] = old["torch"], old.get("cuda")
    tmp = p.with_suffix(".tmp")
    torch.save(new, tmp)
    os.replace(tmp, p)


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
            rng=_load_rng(path / "rng.pt"),
        )
