"""``mucode config show|keys`` and ``mucode env``: the resolved configuration and the environment."""

from __future__ import annotations

import enum
import importlib.metadata
import json
import platform
import sys
import types
import typing
from typing import Annotated

import typer
import yaml

from mucode.cli.options import ConfigOption, OverridesArg, format_config, resolve_config
from mucode.cli.usage import OneLineUsageErrors
from mucode.config import MucodeConfig, objective_param_keys
from mucode.config_methods import component_param_keys

__all__ = ["register"]

config_app = typer.Typer(
    help="Inspect the resolved configuration.", no_args_is_help=True, cls=OneLineUsageErrors
)


@config_app.command("show")
def config_show(config: ConfigOption = None, overrides: OverridesArg = None) -> None:
    """Print the resolved config (defaults ← file ← overrides) and the batch plan it implies."""
    typer.echo(format_config(resolve_config(config, overrides)))


@config_app.command("keys")
def config_keys(
    section: Annotated[str | None, typer.Argument(help="Only this section, e.g. algo.")] = None,
) -> None:
    """List every config key with its type, default and meaning."""
    sections = MucodeConfig.model_fields
    if section is not None and section not in sections:
        typer.secho(
            f"unknown section {section!r}; sections: {', '.join(sections)}", fg=typer.colors.RED, err=True
        )
        raise typer.Exit(2)
    defaults = MucodeConfig().model_dump(mode="json")
    for name, field in sections.items():
        if section is not None and name != section:
            continue
        typer.secho(f"[{name}]", bold=True)
        model = field.annotation
        for key, sub in model.model_fields.items():  # type: ignore[union-attr]
            if (name, key) == ("algo", "params"):
                typer.echo("  algo.params={}    [mapping: the selected objective's parameters, listed below]")
                typer.echo(f"      {sub.description or ''}")
                continue
            default = (
                yaml.safe_dump(defaults[name][key], default_flow_style=True).strip().removesuffix("\n...")
            )
            typer.echo(f"  {name}.{key}={default}    [{_type_name(sub.annotation)}]")
            typer.echo(f"      {sub.description or ''}")
        if name == "algo":
            _objective_param_keys()
        if name in ("compose", "sampling"):  # each registered component's own parameters
            _component_param_keys(name)


def _component_param_keys(section: str) -> None:
    field = "composer" if section == "compose" else "controller"
    registry = "COMPOSERS" if section == "compose" else "SAMPLERS"
    for component, key, default, annotation, doc in component_param_keys(registry):
        shown = yaml.safe_dump(default, default_flow_style=True).strip().removesuffix("\n...")
        typer.echo(
            f"  {section}.{key}={shown}    [{_type_name(annotation)}]  (with {section}.{field}={component})"
        )
        typer.echo(f"      {doc}")


def _objective_param_keys() -> None:
    """Each registered objective's parameters, as `algo.KEY` (shorthand of `algo.params.KEY`)."""
    current = None
    for objective, key, default, annotation, doc in objective_param_keys():
        if objective != current:
            typer.secho(f"  with algo.objective={objective} (algo.KEY is algo.params.KEY):", bold=True)
            current = objective
        value = getattr(default, "value", default)
        shown = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...")
        typer.echo(f"  algo.{key}={shown}    [{_type_name(annotation)}]")
        typer.echo(f"      {doc}")


def _type_name(annotation: object) -> str:
    """A field's type as a user writes its values: `int`, `float or null`, `one of: a, b`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of: " + ", ".join(str(m.value) for m in annotation)
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if origin in (list, tuple):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"list of {inner}" if origin is list else f"[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def version_of(dist: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _docker_version() -> str:
    """Through the Docker SDK, as the docker sandbox backend reaches the engine (no CLI needed)."""
    from mucode.sandbox.docker_engine import DockerError, Engine  # lazy: docker

    engine = Engine(timeout_s=10)
    try:
        return engine.server_version()
    except DockerError:
        return "not reachable (start it: bash scripts/docker_setup.sh, or set DOCKER_HOST)"
    finally:
        engine.close()


def _accelerators() -> str:
    try:
        import torch  # lazy: torch
    except ImportError:
        return "unknown (torch not installed)"
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return f"{len(names)} CUDA: " + ", ".join(names)
    return "none (CPU only)"


def env(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Versions of Python, torch, transformers, verl, vLLM and Docker, and the accelerators seen."""
    info = {
        "mucode": version_of("mucode"),
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "torch": version_of("torch"),
        "transformers": version_of("transformers"),
        "verl": version_of("verl"),
        "vllm": version_of("vllm"),
        "math-verify": version_of("math-verify"),
        "docker engine": _docker_version(),
        "accelerators": _accelerators(),
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    width = max(map(len, info))
    for key, value in info.items():
        typer.echo(f"{key:<{width}}  {value}")


def register(app: typer.Typer) -> None:
    """Adds ``config show|keys`` and ``env`` to the main CLI."""
    app.add_typer(config_app, name="config")
    app.command("env")(env)
