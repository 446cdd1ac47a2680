"""The ``mucode`` application: the Typer app, its global options, and every command registered on it.

Each command module of this package (``train``, ``eval``, ``serve``, ``verl``, ``config``) adds its
commands with ``register(app)``; the areas (``mucode.train``, ``mucode.eval``, ``mucode.verifier``,
``mucode.integrations``) export functions and know nothing of the command line. Command modules
import torch, transformers and the service's dependencies inside the commands, so ``mucode --help``
stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mucode import logs
from mucode.cli import config, serve, study, train, verl
from mucode.cli import eval as evaluate
from mucode.cli.options import OneLineUsageErrors

__all__ = ["app", "get_app", "main"]

app = typer.Typer(
    cls=OneLineUsageErrors,
    name="mucode",
    help="μ-GRPO: staged, highly off-policy GRPO for code and math with verifiable rewards.\n\n"
    "Log records go to standard error: INFO and up by default, DEBUG too with -v, warnings only with -q.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mucode {config.version_of('mucode')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print mucode's version and exit."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Log DEBUG records too (default: INFO and up, e.g. rows a data set dropped).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Log warnings and errors only.")] = False,
) -> None:
    """μ-GRPO: staged, highly off-policy GRPO for code and math with verifiable rewards."""
    try:
        level = logs.level_for(verbose, quiet)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    logs.configure(level)


_registered = False


def get_app() -> typer.Typer:
    """The full CLI (every command registered once)."""
    global _registered
    if not _registered:
        for module in (train, evaluate, serve, verl, config, study):
            module.register(app)
        _registered = True
    return app


def main() -> None:
    get_app()()
