"""``mucode verl-config``: write (or print) a complete verl run for a mucode config."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml

from mucode.assets import resolve_model_path
from mucode.cli.options import resolve_config
from mucode.config import MucodeConfig
from mucode.data import load_tasks
from mucode.integrations.verl import config as vc
from mucode.integrations.verl import fully_async as fa
from mucode.integrations.verl.config import write_verl_parquet

__all__ = ["register"]


def verl_config(
    task: Annotated[Literal["code", "math"] | None, typer.Option("--task", help="Sets data.task.")] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help="YAML file or preset name.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value overrides.", show_default=False)
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write DIR/mucode_verl.yaml (and DIR/train.parquet unless --train-files) "
            "and print the command that runs it.",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model path or Hub id (default: model.path).")] = None,
    train_files: Annotated[
        list[str] | None,
        typer.Option(
            "--train-files", help="verl Parquet files (repeat); default: data.source converted into --output."
        ),
    ] = None,
    val_files: Annotated[
        list[str] | None, typer.Option("--val-files", help="Validation Parquet files.")
    ] = None,
    verifier_url: Annotated[
        str | None,
        typer.Option(help="mucode verifier base URL(s) reachable from every node (default: verifier.url)."),
    ] = None,
    gpus_per_node: Annotated[int, typer.Option(min=1)] = 8,
    nnodes: Annotated[int, typer.Option(min=1)] = 1,
    rollout_gpus: Annotated[
        int | None,
        typer.Option(
            help="asynchronous.enabled: GPUs of each node that generate (default: half); the rest train."
        ),
    ] = None,
    project: Annotated[str, typer.Option(help="trainer.project_name")] = "mucode",
    as_yaml: Annotated[
        bool, typer.Option("--yaml", help="Print the nested config file instead of command-line overrides.")
    ] = False,
) -> None:
    """A verl 0.9.1 run (Ray, multi-node) of the same config with mucode's losses and verifier.

    Without --output it prints the algorithm's command-line overrides (or, with --yaml, the whole
    config file) to add to your own verl command."""

    cfg = resolve_config(config, ([f"data.task={task}"] if task else []) + list(overrides or []))
    refusal = vc.verl_refusal(cfg)  # replay, AGPO, ConSPO, plug-ins
    if refusal is not None:
        typer.secho(refusal, fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    url = verifier_url or (",".join(cfg.verifier.url) if cfg.verifier.url else None)
    run = vc.VerlRun(
        model_path=resolve_model_path(model or cfg.model.path),
        train_files=list(train_files or []),
        val_files=list(val_files or []),
        verifier_url=url,
        gpus_per_node=gpus_per_node,
        nnodes=nnodes,
        project=project,
    )
    if cfg.asynchronous.enabled:  # verl's fully_async_policy
        _async_run(cfg, run, output, as_yaml, rollout_gpus)
    elif output is not None:
        _write_run(cfg, run, output)
    elif as_yaml:
        typer.echo(yaml.safe_dump(vc.verl_run_config(cfg, run), sort_keys=False, allow_unicode=True).rstrip())
    else:
        typer.echo(vc.verl_command(cfg))
    for warning in fa.verl_async_warnings(cfg) if cfg.asynchronous.enabled else vc.verl_warnings(cfg):
        typer.secho(f"note: {warning}", fg=typer.colors.YELLOW, err=True)


def _write_run(cfg: MucodeConfig, run: vc.VerlRun, output: Path) -> None:
    """Write the run (converting the data unless --train-files) and print the command that starts it."""
    if not run.train_files:
        run = _convert_data(cfg, run, output)
    path, command = vc.write_verl_run(cfg, run, output)
    typer.echo(f"wrote {path}")
    for warning in vc.verl_run_warnings(cfg, run, vc.parquet_rows(run.train_files)):
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    if not run.verifier_url:
        typer.secho(
            "note: no verifier URL: start one (`mucode serve` or `docker compose up`) and pass "
            "--verifier-url, or export MUCODE_VERIFIER_URL on every node",
            fg=typer.colors.YELLOW,
            err=True,
        )
    typer.echo(command)


def _async_run(
    cfg: MucodeConfig, run: vc.VerlRun, output: Path | None, as_yaml: bool, rollout_gpus: int | None
) -> None:
    try:
        if output is not None:
            path, command = fa.write_verl_async_run(
                cfg, run if run.train_files else _convert_data(cfg, run, output), output, rollout_gpus
            )
            typer.echo(f"wrote {path}")
            typer.echo(command)
        elif as_yaml:
            tree = fa.verl_async_run_config(cfg, run, rollout_gpus)
            typer.echo(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True).rstrip())
        else:
            typer.echo(fa.verl_async_command(cfg, rollout_gpus, run.gpus_per_node))
    except ValueError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def _convert_data(cfg: MucodeConfig, run: vc.VerlRun, output: Path) -> vc.VerlRun:
    """mucode's training data (data.*) written as verl Parquet into ``output``."""

    d = cfg.data
    try:
        records = load_tasks(
            d.source or "default",
            d.task,
            split=d.split,
            limit=d.limit,
            instruction=d.instruction,
            schema=d.format,
            columns=d.columns,
        )
    except (FileNotFoundError, ValueError) as err:
        typer.secho(
            f"cannot convert data.source={d.source!r} for verl: {err}; pass --train-files instead",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(2) from None
    path = (output / "train.parquet").resolve()
    n = write_verl_parquet(records, path, data_source=d.source or d.task)
    typer.echo(f"wrote {path} ({n} prompts in verl's schema)")
    return dataclasses.replace(run, train_files=[str(path)])


def register(app: typer.Typer) -> None:
    app.command("verl-config")(verl_config)
