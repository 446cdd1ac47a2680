"""The ``mucode`` application: the Typer app, its global options, and every command registered on it.

Each command module of this package (``train``, ``eval``, ``serve``, ``verl``, ``config``) adds its
commands with ``register(app)``; the areas (``mucode.train``, ``mucode.eval``, ``mucode.verifier``,
``mucode.integrations``) export functions and know nothing of the command line. Command modules
import torch, transformers and the service's dependencies inside the commands, so ``mucode --help``
stays fast; and ``main`` registers only ``serve``'s module for ``mucode verify`` and ``mucode serve``,
so scoring a file does not import the trainer's configuration or the evaluators.
"""

from __future__ import annotations

import importlib.metadata
import sys
from types import ModuleType
from typing import Annotated

import typer

from mucode import logs
from mucode.cli.usage import OneLineUsageErrors

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
        typer.echo(f"mucode {importlib.metadata.version('mucode')}")
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


_registered: set[str] = set()


def _register(*modules: ModuleType) -> typer.Typer:
    for module in modules:
        if module.__name__ not in _registered:
            module.register(app)
            _registered.add(module.__name__)
    return app


def get_app() -> typer.Typer:
    """The full CLI (every command registered once)."""
    from mucode.cli import config, serve, study, train, verl  # lazy: command
    from mucode.cli import eval as evaluate  # lazy: command

    return _register(train, evaluate, serve, verl, config, study)


def main() -> None:
    """``mucode``: ``serve`` and ``verify``, named first, load their own module only (scoring a file
    should not pay a third of a CPU-second for the trainer's config and the evaluators); anything else
    (``mucode --help``, a global option first, any other command) gets the full CLI."""
    if sys.argv[1:2] in (["serve"], ["verify"]):
        from mucode.cli import serve  # lazy: command

        _register(serve)()
    else:
        get_app()()
