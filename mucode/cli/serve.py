"""``mucode serve`` and ``mucode verify`` (registered on the main CLI by ``register(app)``)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from mucode.rewards.types import Item
from mucode.verifier.core import Verifier
from mucode.verifier.settings import VerifierSettings
from mucode.verifier.text import text_problems

__all__ = ["register"]


def serve(
    backend: Annotated[
        str,
        typer.Option(
            help="Sandbox backend: docker (a managed pool of containers), attach "
            "(executors started elsewhere; MUCODE_BACKEND_OPTIONS names their "
            "socket_dir) or local (namespaces on this host, root)."
        ),
    ] = "docker",
    host: Annotated[
        str | None, typer.Option(help="Bind address (default 127.0.0.1, or MUCODE_HOST).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default 8000, or MUCODE_PORT).")] = None,
    programs: Annotated[
        list[str] | None, typer.Option("--program", help="Serve only these programs.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Run the verifier service (settings: MUCODE_* environment variables, see docs/verifier.md)."""
    import uvicorn  # lazy: uvicorn

    from mucode.verifier.app import create_app  # lazy: fastapi

    overrides: dict[str, Any] = {"backend": backend}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if programs:
        overrides["programs"] = programs
    try:
        settings = VerifierSettings(**overrides)
    except ValidationError as err:
        lines = [
            (f"MUCODE_{'_'.join(map(str, e['loc'])).upper()}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in err.errors(include_url=False)
        ]
        typer.secho("invalid verifier settings: " + "; ".join(lines), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.token is None:
        typer.secho(
            f"warning: serving on {settings.host} without a token; set MUCODE_TOKEN to require one",
            fg=typer.colors.YELLOW,
            err=True,
        )
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_level=log_level, access_log=False
    )


def verify(
    program: Annotated[str, typer.Option(help="Reward program for items that name none (e.g. code, math).")],
    input: Annotated[Path, typer.Option("--input", "-i", help="JSONL file, one item per line ('-': stdin).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="JSONL results (default: stdout).")
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            help="Sandbox backend for code: local (namespaces on this host, root) "
            "or docker (a managed pool of containers)."
        ),
    ] = "local",
    math_workers: Annotated[
        int | None,
        typer.Option(help="math-verify worker processes (default: one per core, at most one per math item)."),
    ] = None,
) -> None:
    """Score items without a server, through the same code as the service (one result line per item)."""

    text = sys.stdin.read() if str(input) == "-" else _read(input)
    items: list[Item] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("each line must be a JSON object")
            raw.setdefault("program", program)
            bad_text = text_problems(raw, limit=1)
            if bad_text:
                raise ValueError(bad_text[0])
            items.append(Item.model_validate(raw))
        except (ValueError, ValidationError) as err:
            typer.secho(f"{input}:{lineno}: not a valid item: {err}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
    names = sorted({item.program for item in items} | {program})
    overrides: dict[str, Any] = {"backend": backend, "programs": names, "run_code": False}
    if math_workers is not None:
        overrides["math_workers"] = math_workers
    elif (
        "MUCODE_MATH_WORKERS" not in os.environ
    ):  # no more workers than math items (each imports sympy, ~1 CPU-s)
        overrides["math_workers"] = max(
            1, min(os.cpu_count() or 1, sum(item.program == "math" for item in items))
        )
    try:
        core = Verifier(VerifierSettings(**overrides))
    except (KeyError, ValueError, RuntimeError) as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    problems = core.validate(items)
    if problems:
        typer.secho(
            f"{len(problems)} invalid item(s):\n" + "\n".join(f"  {p}" for p in problems[:50]),
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(2)
    try:
        results = asyncio.run(_run(core, items))
    except _StartError as err:
        typer.secho(
            f"could not start the verifier (backend {backend!r}): {err.__cause__}",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(1) from None
    lines = "".join(r.model_dump_json() + "\n" for r in results)
    if output is None:
        sys.stdout.write(lines)
    else:
        output.write_text(lines, encoding="utf-8")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    typer.echo(f"{len(results)} items: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), err=True)


class _StartError(Exception):
    pass


async def _run(core: Any, items: list[Any]) -> list[Any]:
    try:
        await core.start()
    except Exception as err:
        raise _StartError() from err
    try:
        verdicts: list[Any] = await core.verify(items)
        return verdicts
    finally:
        await core.close()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        typer.secho(f"cannot read {path}: {err.strerror}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Adds ``serve`` and ``verify`` to the main CLI."""
    app.command("serve")(serve)
    app.command("verify")(verify)
