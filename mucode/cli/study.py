"""``mucode study NAME``: a built-in study (variants × seeds of real training runs) and its report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mucode.cli.errors import fail

__all__ = ["register"]

STUDIES = "veto-scopes, tau, upper-clip, staleness, methods"


def study(
    name: Annotated[str, typer.Argument(help=f"The study: {STUDIES}.")],
    seeds: Annotated[int, typer.Option(help="Seeds per variant (0, 1, …).")] = 3,
    jobs: Annotated[int | None, typer.Option(help="Runs at once (default: the cores available).")] = None,
    root: Annotated[Path | None, typer.Option(help="Output folder (default runs/study/NAME).")] = None,
    updates: Annotated[int | None, typer.Option(help="Updates per run (default: the study's, 1024).")] = None,
    variants: Annotated[str | None, typer.Option(help="Only these variants, comma-separated.")] = None,
    heldout_every: Annotated[int, typer.Option(help="Evaluate the current policy every N updates.")] = 16,
    report_only: Annotated[
        bool, typer.Option(help="Only (re)write the report from the runs there are.")
    ] = False,
    task: Annotated[
        str,
        typer.Option(help="chain (scored in-process) or chain-code (programs run in the local sandbox)."),
    ] = "chain",
    base_steps: Annotated[
        int,
        typer.Option(help="Supervised steps of each seed's base (fewer: a weaker base, for quick checks)."),
    ] = 600,
) -> None:
    """Run a study's grid (resumable: finished runs are skipped) and write report.md, report.json, reward.png."""
    from mucode.study.run import run_study  # lazy: torch

    try:
        out = run_study(
            name,
            seeds=seeds,
            jobs=jobs,
            root=root,
            updates=updates,
            variants=[v.strip() for v in variants.split(",")] if variants else None,
            heldout_every=heldout_every,
            report_only=report_only,
            base_steps=base_steps,
            task=task,
            say=typer.echo,
        )
    except (KeyError, ValueError) as err:
        fail(str(err.args[0] if isinstance(err, KeyError) else err))
    typer.echo(out["report"].read_text())
    typer.echo(f"report: {out['report']}")
    if out["failed"]:
        fail(f"{len(out['failed'])} of {out['runs']} runs failed; see worker.log in their run directories")


def register(app: typer.Typer) -> None:
    app.command("study")(study)
