"""``--resume`` continues the same wandb run: its id is saved in the run directory.

Real wandb, in offline mode (nothing leaves the machine): each logger writes an offline run
directory named after the run id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mucode.train.logger import MetricsLogger


def test_a_resume_logs_to_the_same_wandb_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb").mkdir()
    run_dir = tmp_path / "run"

    first = MetricsLogger(run_dir, tensorboard=False, wandb_project="mucode-test", run_name="r")
    first.log_update({"update": 1, "stage": 0, "reward/mean": 0.5})
    assert first._wandb is not None  # noqa: SLF001 - the wandb run it opened
    first_id = first._wandb.id  # noqa: SLF001
    first.close()
    assert (run_dir / "wandb_id").read_text().strip() == first_id

    resumed = MetricsLogger(
        run_dir, tensorboard=False, wandb_project="mucode-test", run_name="r", resume_after_update=1
    )
    resumed.log_update({"update": 2, "stage": 0, "reward/mean": 0.6})
    resumed_id = resumed._wandb.id  # noqa: SLF001
    resumed.close()
    assert resumed_id == first_id

    fresh = MetricsLogger(tmp_path / "other", tensorboard=False, wandb_project="mucode-test", run_name="r")
    fresh_id = fresh._wandb.id  # noqa: SLF001
    fresh.close()
    assert fresh_id != first_id
    # offline-run-<second it started>-<id>, and "-1" after it when the resume starts in the same second
    runs = sorted(p.name for p in (tmp_path / "wandb" / "wandb").glob("offline-run-*"))
    ids = sorted(name.split("-")[3] for name in runs)
    assert ids == sorted([first_id, first_id, fresh_id]), runs
