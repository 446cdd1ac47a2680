"""``run_study``: a built-in study's grid run (resumable, parallel) and its report, as one function."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mucode.study.grid import get_study
from mucode.study.report import write_report
from mucode.study.runner import grid, run_grid

__all__ = ["default_jobs", "run_study"]


def default_jobs() -> int:
    """The cores this process may use (each run takes one thread)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_study(
    name: str,
    *,
    seeds: int = 3,
    jobs: int | None = None,
    root: Path | None = None,
    updates: int | None = None,
    variants: list[str] | None = None,
    heldout_every: int = 16,
    report_only: bool = False,
    base_steps: int = 600,
    task: str = "chain",
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run study ``name`` (``seeds`` seeds per variant, ``jobs`` runs at once) on ``task`` under ``root``
    (default ``runs/study/<name>``, ``<name>-<task>`` for another task than ``chain``) and write its
    report; returns the report's path and the runs that failed."""
    study = get_study(name)
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {seeds}")
    root = root or Path("runs") / "study" / (name if task == "chain" else f"{name}-{task}")
    specs = grid(
        study,
        root,
        seeds,
        updates=updates,
        variants=variants,
        heldout_every=heldout_every,
        base_steps=base_steps,
        task=task,
    )
    failed: list[dict[str, Any]] = []
    if not report_only:
        jobs = jobs or default_jobs()
        say(
            f"study {name}: {len(specs)} runs ({len(specs) // seeds} variants × {seeds} seeds), {jobs} at a time"
        )
        failed = [o for o in run_grid(specs, jobs, say) if not o["ok"]]
    report = write_report(specs, root, title=f"mucode study {name} ({task}): {study.about}", stage_every=min(
        study.mu, updates or study.updates))  # fmt: skip
    return {"report": report, "failed": failed, "runs": len(specs)}
