"""Checkpoints load with ``torch.load(weights_only=True)``: the RNG state is tensors and plain data,
so a restored run draws the same numbers; an old pickled ``rng.pt`` is refused with the fix, and
its conversion restores the same streams."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from mucode.train.checkpoint import (
    Checkpointer,
    LegacyCheckpointError,
    TrainerState,
    capture_rng,
    convert_legacy_rng,
    restore_rng,
)


def _draw() -> tuple[float, float, float, float]:
    return random.random(), random.gauss(0, 1), float(np.random.rand()), float(torch.rand(1))


def _save(tmp_path: Path) -> Path:
    ck = Checkpointer(tmp_path / "checkpoints")
    return ck.save(TrainerState(stage=1), {"w": torch.zeros(2)}, {})


def test_rng_round_trip_with_weights_only(tmp_path: Path) -> None:
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    random.gauss(0, 1)  # leaves a cached gaussian in Python's state
    np.random.standard_normal()
    path = _save(tmp_path)
    expected = _draw()
    torch.load(path / "rng.pt", weights_only=True)  # loads without unpickling any object
    restore_rng(Checkpointer.load(path).rng)
    assert _draw() == expected


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch PWNED",))


def test_pickled_rng_is_refused_and_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path)
    torch.save({"python": random.getstate(), "evil": _Evil()}, path / "rng.pt")
    with pytest.raises(LegacyCheckpointError, match="convert_legacy_rng"):
        Checkpointer.load(path)
    assert not (tmp_path / "PWNED").exists()


def test_legacy_rng_converts(tmp_path: Path) -> None:
    random.seed(7), np.random.seed(8), torch.manual_seed(9)
    path = _save(tmp_path)
    legacy = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": None,
    }  # the format older mucode wrote
    torch.save(legacy, path / "rng.pt")
    expected = _draw()
    with pytest.raises(LegacyCheckpointError):
        Checkpointer.load(path)
    convert_legacy_rng(path / "rng.pt")
    restore_rng(Checkpointer.load(path).rng)
    assert _draw() == expected
    assert set(capture_rng()) == {"format", "python", "numpy", "torch", "cuda"}
