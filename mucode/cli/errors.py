"""What every `mucode eval` command shares: user errors as one line (exit 2), partial runs, report metadata.

A user's mistake (unknown benchmark, protocol, engine, release or prompt style; a missing or
malformed samples file, reported as `file:line`; a refused request; a missing optional package) is
printed as `error: <what> — <fix>` on stderr and the command exits with code 2; anything else is a
bug and keeps its traceback. A run that skipped a benchmark, or left problems without samples, fails
the same way unless `--allow-partial` is given (the figures would not be comparable).
`MUCODE_DEBUG=1` keeps the traceback of user errors too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import os
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

import typer
import yaml

from mucode.data.files import HubError
from mucode.eval.store import StoreMismatch
from mucode.verifier.client import VerifierRequestError

__all__ = ["fail", "partial_problems", "report_meta", "user_errors", "warnings_to_stderr"]


def say(message: str) -> None:
    typer.echo(message, err=True)


def fail(message: str) -> NoReturn:
    """Print `error: message` (one line) and exit with code 2."""
    say("error: " + " ".join(str(message).split()))
    raise typer.Exit(2)


def _user_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [ValueError, OSError, HubError, StoreMismatch, typer.BadParameter]
    with contextlib.suppress(ImportError):
        types.append(VerifierRequestError)
    with contextlib.suppress(ImportError):
        types.append(yaml.YAMLError)
    return tuple(types)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line and exit code 2 (others keep their traceback)."""
    try:
        yield
    except typer.Exit:
        raise
    except ImportError as err:
        if os.environ.get("MUCODE_DEBUG"):
            raise
        fail(
            f"{err} — install the optional dependency (pip install 'mucode[eval]' for evalplus, "
            "'mucode[vllm]' for vllm)"
        )
    except Exception as err:
        if os.environ.get("MUCODE_DEBUG") or not isinstance(err, _user_error_types()):
            raise
        message = err.format_message() if isinstance(err, typer.BadParameter) else str(err)
        fail(message or type(err).__name__)


@contextlib.contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Library warnings (skipped benchmarks, problems without samples) as one plain line each, when raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *_args, **_kw: say(f"warning: {message}")
        yield


def partial_problems(report: dict[str, Any]) -> list[str]:
    """Why a report is partial: skipped benchmarks and benchmarks with problems left without samples."""
    reasons = [
        f"{name} skipped ({why.splitlines()[0][:200]})" for name, why in (report.get("skipped") or {}).items()
    ]
    for name, entry in report.items():
        if isinstance(entry, dict) and entry.get("problems_without_samples"):
            reasons.append(f"{name}: {entry['problems_without_samples']} problems without samples")
    return reasons


def check_partial(report: dict[str, Any], allow_partial: bool) -> None:
    """Fail (exit 2) on a partial report unless allowed."""
    reasons = partial_problems(report)
    if reasons and not allow_partial:
        fail("; ".join(reasons) + " — the figures are not comparable; fix the data or pass --allow-partial")


def mucode_version() -> str:
    try:
        return importlib.metadata.version("mucode")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def report_meta(
    *,
    protocol: Any,
    sampling: Any,
    prompt: str,
    data: dict[str, Any],
    model: str | None,
    samples: Path | None,
    engine: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `meta` entry of a report: what produced the figures."""
    return {
        "model": model,
        "samples_file": str(samples) if samples is not None else None,
        "engine": engine if samples is None else None,
        "sampling": dataclasses.asdict(sampling) if samples is None else None,
        "prompt": prompt,
        "protocol": {
            "name": protocol.name,
            "source": protocol.source,
            "context_tokens": protocol.context_tokens,
        },
        "data": data,
        "mucode_version": mucode_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **(extra or {}),
    }


def run_guarded(body: Callable[[], None]) -> None:
    """Run a command body with user errors as one line and warnings on stderr."""
    with user_errors(), warnings_to_stderr():
        body()
