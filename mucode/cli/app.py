"""The ``mucode`` application: the Typer app, its global options, and every command registered on it.

Each command module of this package (``train``, ``eval``, ``serve``, ``verl``, ``config``) adds its
commands with ``register(app)``; the areas (``mucode.train``, ``mucode.eval``, ``mucode.verifier``,
``mucode.integrations``) export functions and know nothing of the command line. Command modules
import torch, transformers and the service's dependencies inside the commands, so ``mucode --help``
stays fast; and ``main`` registers only the module of a lean command (``mucode verify``, ``mucode
serve``), so scoring a file does not import the trainer's configuration or the evaluators.
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


_MODULES = ("train", "eval", "serve", "verl", "config", "study")
"""The command modules, in the order their commands are listed by ``mucode --help``."""
_LEAN = {"serve": "serve", "verify": "serve"}
"""Commands run with only their own module registered (``main``): ``mucode verify`` on a math file
should not pay for the trainer's and the evaluators' imports (a third of a CPU-second)."""
_registered: list[str] = []


def _module(name: str) -> ModuleType:
    """A command module, imported when its commands are registered (see ``_LEAN``)."""
    if name == "train":
        from mucode.cli import train  # lazy: command

        return train
    if name == "eval":
        from mucode.cli import eval as evaluate  # lazy: command

        return evaluate
    if name == "serve":
        from mucode.cli import serve  # lazy: command

        return serve
    if name == "verl":
        from mucode.cli import verl  # lazy: command

        return verl
    if name == "config":
        from mucode.cli import config  # lazy: command

        return config
    from mucode.cli import study  # lazy: command

    return study


def _register(names: tuple[str, ...]) -> typer.Typer:
    for name in names:
        if name not in _registered:
            _module(name).register(app)
            _registered.append(name)
    return app


def get_app() -> typer.Typer:
    """The full CLI (every command registered once)."""
    return _register(_MODULES)


def main() -> None:
    """``mucode``: a lean command (``_LEAN``, named first) loads its own module only; anything else
    (``mucode --help``, a global option first, any other command) the full CLI."""
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    (_register((_LEAN[command],)) if command in _LEAN else get_app())()
