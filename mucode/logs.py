"""Where mucode's log records go when it runs as a program.

Importing mucode configures nothing (a library leaves logging to its host). The programs do:
``mucode`` (its ``-v``/``-q`` options) and ``python -m mucode.verifier`` call :func:`configure`,
which puts one handler on the ``mucode`` logger, writing ``HH:MM:SS LEVEL logger: message`` lines
to standard error. INFO is shown by default because the project's INFO records are meant for the
user (rows a data set dropped, items the verifier client re-sent, the verifier's readiness line);
DEBUG only with ``-v``; ``-q`` keeps warnings and errors.

Limits: only the ``mucode`` logger is configured; third-party loggers (httpx, uvicorn, transformers)
keep their own settings. Records still propagate to the root logger, so a host that configured the
root as well sees them twice.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["DEFAULT_LEVEL", "configure", "level_for"]

DEFAULT_LEVEL = logging.INFO
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (test runners swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def level_for(verbose: bool, quiet: bool) -> int:
    """The ``mucode`` logger's level for the CLI's ``-v``/``-q`` flags."""
    if verbose and quiet:
        raise ValueError("-v/--verbose and -q/--quiet contradict each other; pass one")
    if verbose:
        return logging.DEBUG
    return logging.WARNING if quiet else DEFAULT_LEVEL


def configure(level: int = DEFAULT_LEVEL) -> None:
    """One stderr handler on the ``mucode`` logger at ``level`` (calling it again replaces it)."""
    logger = logging.getLogger("mucode")
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
