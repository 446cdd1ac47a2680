"""Where a run's numbers go: ``metrics.jsonl`` (always), TensorBoard (optional), wandb (optional).

One JSON object per optimizer update, with ``stage``, ``update`` (global, 1-based) and
``update_in_stage`` plus the namespaced metrics (glossary: docs/metrics.md). Phase timings and
stage summaries are logged as objects with ``"event": "stage"``. On resume the file is truncated
back to the checkpoint's update, so a replayed update is not logged twice.

wandb: the run's id is saved in ``RUN_DIR/wandb_id`` when the run starts; a resume opens the same wandb
run with it (``wandb.init(id=..., resume="allow")``), so a resumed run is one curve, not one per
invocation. Updates replayed after a resume are logged again at their step (wandb keeps the last).
"""

from __future__ import annotations

import json
import math
import secrets
import string
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "read_metrics"]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e308 if value > 0 else -1e308)
    return value


class MetricsLogger:
    def __init__(
        self,
        run_dir: Path,
        *,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        run_name: str = "mucode",
        config: dict[str, Any] | None = None,
        resume_after_update: int | None = None,
    ) -> None:
        self.path = run_dir / "metrics.jsonl"
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_after_update is not None:
            self._truncate(resume_after_update)
        elif self.path.exists():
            self.path.unlink()
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # lazy: torch

            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        self._wandb = None
        if wandb_project:
            try:
                import wandb  # lazy: wandb
            except ImportError as e:
                raise RuntimeError(
                    "train.wandb_project is set but wandb is not installed: `pip install wandb` "
                    "or unset train.wandb_project"
                ) from e
            self._wandb = wandb.init(
                project=wandb_project,
                name=run_name,
                config=config,
                resume="allow",
                id=_wandb_id(run_dir, resume=resume_after_update is not None),
            )

    def _truncate(self, last_update: int) -> None:
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj.get("update", 0) <= last_update:
                kept.append(line)
        self.path.write_text("".join(line + "\n" for line in kept))

    def log_update(self, metrics: dict[str, Any]) -> None:
        obj = {k: _clean(v) for k, v in metrics.items()}
        self._file.write(json.dumps(obj) + "\n")
        self._file.flush()
        step = int(metrics["update"])
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, int | float) and not isinstance(value, bool) and key != "update":
                    self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in metrics.items() if k != "update"}, step=step)

    def log_event(self, event: str, payload: dict[str, Any]) -> None:
        obj = {"event": event, **{k: _clean(v) for k, v in payload.items()}}
        self._file.write(json.dumps(obj) + "\n")
        self._file.flush()
        if self._tb is not None and "update" in payload:
            for key, value in payload.items():
                if isinstance(value, int | float) and key.startswith("time/"):
                    self._tb.add_scalar(f"stage_{key}", value, int(payload["update"]))

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _wandb_id(run_dir: Path, *, resume: bool) -> str:
    """The run's wandb id: on resume the one saved in ``run_dir/wandb_id``; else a new one, saved there."""
    path = run_dir / "wandb_id"
    if resume and path.is_file() and path.read_text().strip():
        return path.read_text().strip()
    run_id = "".join(
        secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8)
    )  # wandb's id alphabet
    path.write_text(run_id + "\n")
    return run_id


def read_metrics(run_dir: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns (per-update rows, event rows) of a run's metrics.jsonl."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a mucode run directory?")
    updates: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        if line.strip():
            obj = json.loads(line)
            (events if "event" in obj else updates).append(obj)
    return updates, events
