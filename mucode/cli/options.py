"""What the commands share: the config options, config loading and printing.

A user's mistake is one line on stderr and exit code 2, never a traceback: usage mistakes through
:class:`mucode.cli.usage.OneLineUsageErrors`, invalid configs through :func:`resolve_config`, everything else a user can
fix through :mod:`mucode.cli.errors`.
"""

from __future__ import annotations

from typing import Annotated

import typer
import yaml

from mucode.config import ConfigError, MucodeConfig, load_config, preset_names
from mucode.train.plan import batch_plan

__all__ = ["ConfigOption", "OverridesArg", "format_config", "resolve_config"]


ConfigOption = Annotated[
    str | None,
    typer.Option("--config", "-c", help=f"YAML file or preset name ({', '.join(preset_names())})."),
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="key=value overrides on top of the file, e.g. algo.veto_scope=suffix batch.num_stages=2"
    ),
]


def resolve_config(config: str | None, overrides: list[str] | None) -> MucodeConfig:
    """Load the config or exit with the validation message (exit code 2, no traceback)."""
    try:
        return load_config(config, overrides or [])
    except ConfigError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def format_config(cfg: MucodeConfig) -> str:
    """The resolved config and its batch plan, as printed before every run."""
    plan = batch_plan(cfg.batch)
    width = max(len(k) for k in plan)
    body = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    lines = [body.rstrip(), "", "batch plan:"]
    lines += [f"  {k:<{width}}  {v:>12,}" for k, v in plan.items()]
    return "\n".join(lines)
