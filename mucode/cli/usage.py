"""Usage mistakes as one line (the main app's and every command group's ``cls``); typer only, so the
main app can be built without importing any command's module."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["OneLineUsageErrors"]


class OneLineUsageErrors(TyperGroup):
    """Usage mistakes (unknown command or option, a missing argument, a value of the wrong type) as one
    line naming the command's --help, exit code 2, instead of click's boxed usage text."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as err:  # typer's (vendored click's) UsageError and subclasses
            if getattr(err, "exit_code", None) != 2 or not hasattr(err, "format_message"):
                raise
            where = getattr(getattr(err, "ctx", None), "command_path", None) or "mucode"
            typer.echo(f"error: {' '.join(err.format_message().split())} — see `{where} --help`", err=True)
            raise typer.Exit(2) from None
