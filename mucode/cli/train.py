"""The trainer's commands: ``mucode train``, ``mucode plot``, ``mucode report`` (``verl-config``: mucode.integrations).

Heavy imports (torch, transformers, matplotlib) happen inside the commands so ``mucode --help``
stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from mucode.cli.options import resolve_config
from mucode.config import ConfigError
from mucode.train.async_pool import start_generators
from mucode.train.export import CheckpointError, export_checkpoint
from mucode.train.plot import plot_run
from mucode.train.report import load_run, plot_accuracy, render_report
from mucode.train.verify import VerifierFailureError  # lazy: torch

__all__ = ["register"]

ConfigOpt = Annotated[
    str | None,
    typer.Option("--config", "-c", help="YAML file or preset name (e.g. configs/tiny.yaml, mu_grpo)."),
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="key=value overrides, e.g. batch.updates_per_stage=64 optim.lr=1e-5", show_default=False
    ),
]


def _overrides(task: str | None, run_dir: Path | None, overrides: list[str] | None) -> list[str]:
    out = list(overrides or [])
    if task is not None:
        out.insert(0, f"data.task={task}")
    if run_dir is not None:
        out.append(f"train.run_dir={run_dir}")
    return out


def train(
    task: Annotated[Literal["code", "math"] | None, typer.Option("--task", help="Sets data.task.")] = None,
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Output directory (default runs/<train.run_name>).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in the run directory from its last checkpoint.")
    ] = False,
    plot: Annotated[bool, typer.Option("--plot/--no-plot", help="Write the PNG plots at the end.")] = True,
) -> None:
    """Run staged μ-GRPO: generate → verify → store → optimize (μ updates) → checkpoint → hand over, per stage
    (or, with asynchronous.enabled, generator processes and the trainer at once)."""
    cfg = resolve_config(config, _overrides(task, run_dir, overrides))
    pool = start_generators(cfg) if cfg.asynchronous.enabled else None  # their imports overlap ours
    from transformers.utils import logging as hf_logging  # lazy: transformers

    from mucode.train.async_loop import run_async_training  # lazy: torch
    from mucode.train.loop import ResumeError, run_training  # lazy: torch

    hf_logging.disable_progress_bar()  # weight-loading bars would drown the trainer's own

    try:
        if pool is not None:
            result = run_async_training(cfg, resume=resume, pool=pool)
        else:
            result = run_training(cfg, resume=resume)
    except (ResumeError, ConfigError) as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except VerifierFailureError as err:  # the verifier failed too often: stop, resumable
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if plot:
        paths = plot_run(result.run_dir)
        typer.echo(f"plots: {', '.join(str(p) for p in paths)}")


def plot(run_dir: Annotated[Path, typer.Argument(help="A run directory (holds metrics.jsonl).")]) -> None:
    """Write PNGs of reward, veto fraction, clip fraction and E[ρ|A<0] over updates (stage boundaries dashed)."""

    try:
        paths = plot_run(run_dir)
    except (FileNotFoundError, ValueError) as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    for p in paths:
        typer.echo(str(p))


def report(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories to compare (two give a time-to-accuracy ratio).")
    ],
    plot_path: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="PNG of accuracy against wall-clock "
            "(default: accuracy_vs_time.png in the first run directory).",
        ),
    ] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Print the table only.")] = False,
) -> None:
    """The paper's Table 1 for runs: accuracy at the best checkpoint, T_rollout, T_total, engine switches,
    veto fraction per stage; for two runs, the time-to-accuracy ratio; a plot of accuracy against wall-clock."""

    try:
        runs = [load_run(d) for d in run_dirs]
    except (FileNotFoundError, ValueError) as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    typer.echo(render_report(runs))
    if not no_plot:
        drawn = plot_accuracy(runs, plot_path or run_dirs[0] / "accuracy_vs_time.png")
        typer.echo(f"plot: {drawn}" if drawn else "plot: none (no run has an evaluation)")


def export(
    checkpoint: Annotated[
        Path,
        typer.Argument(
            help="A checkpoint (RUN_DIR/checkpoints/update-N) or a run directory (its latest checkpoint)."
        ),
    ],
    out: Annotated[Path, typer.Argument(help="Directory to write the Hugging Face model to.")],
    dtype: Annotated[
        str | None, typer.Option(help="float32, bfloat16 or float16 (default: the run's model.dtype).")
    ] = None,
) -> None:
    """Write a training checkpoint as a Hugging Face model (config, weights, tokenizer) for eval or serving."""

    if dtype is not None and dtype not in ("float32", "bfloat16", "float16"):
        typer.secho(f"--dtype {dtype!r}: use float32, bfloat16 or float16", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    try:
        typer.echo(str(export_checkpoint(checkpoint, out, dtype=dtype)))
    except CheckpointError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("plot")(plot)
    app.command("export")(export)
    app.command("report")(report)
