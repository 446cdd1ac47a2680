"""The ``mucode`` command line: every command and what the commands share, nothing else.

``app`` (Typer application and global options), ``options`` (config options, usage errors, config
printing), ``errors`` (a user's mistake as one line, exit code 2), and one module per command group:
``train`` (train, plot, report, export), ``eval`` (``eval <benchmark>``, with ``eval_options`` and
``eval_jobs``), ``serve`` (serve, verify), ``verl`` (verl-config), ``config`` (config show|keys, env).
No area of mucode imports this package.
"""

from mucode.cli.app import get_app, main

__all__ = ["get_app", "main"]
