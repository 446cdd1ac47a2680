"""The `mucode` command line.

Each area adds its own commands through a `register(app)` function in its `commands.py`
(`mucode/cli/serve.py`, `mucode/cli/train.py`, `mucode/cli/eval.py`); this file
only wires them together and holds the small commands that belong to no area (`config`, `env`).
Command modules import their heavy dependencies inside the commands, so `mucode --help` is fast.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import platform
import sys
from typing import Annotated, Any

import typer
import yaml
from typer.core import TyperGroup

from mucode import logs
from mucode.config import ConfigError, MucodeConfig, batch_plan, load_config, preset_names


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
        typer.echo(f"mucode {_version('mucode')}")
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


config_app = typer.Typer(
    help="Inspect the resolved configuration.", no_args_is_help=True, cls=OneLineUsageErrors
)
app.add_typer(config_app, name="config")

_AREAS = ("mucode.cli.serve", "mucode.cli.train", "mucode.cli.eval", "mucode.cli.verl")

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
    plan = batch_plan(cfg)
    width = max(len(k) for k in plan)
    body = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    lines = [body.rstrip(), "", "batch plan:"]
    lines += [f"  {k:<{width}}  {v:>12,}" for k, v in plan.items()]
    return "\n".join(lines)


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
    from mucode.config_methods import component_param_keys

    field = "composer" if section == "compose" else "controller"
    for component, key, default, annotation, doc in component_param_keys(
        "COMPOSERS" if section == "compose" else "SAMPLERS"
    ):
        shown = yaml.safe_dump(default, default_flow_style=True).strip().removesuffix("\n...")
        typer.echo(
            f"  {section}.{key}={shown}    [{_type_name(annotation)}]  (with {section}.{field}={component})"
        )
        typer.echo(f"      {doc}")


def _objective_param_keys() -> None:
    """Each registered objective's parameters, as `algo.KEY` (shorthand of `algo.params.KEY`)."""
    from mucode.config import objective_param_keys

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
    import enum
    import types
    import typing

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


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _docker_version() -> str:
    """Through the Docker SDK, as the docker sandbox backend reaches the engine (no CLI needed)."""
    from mucode.sandbox.docker_engine import DockerError, Engine

    engine = Engine(timeout_s=10)
    try:
        return engine.server_version()
    except DockerError:
        return "not reachable (start it: bash scripts/docker_setup.sh, or set DOCKER_HOST)"
    finally:
        engine.close()


def _accelerators() -> str:
    try:
        import torch
    except ImportError:
        return "unknown (torch not installed)"
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return f"{len(names)} CUDA: " + ", ".join(names)
    return "none (CPU only)"


@app.command("env")
def env(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Versions of Python, torch, transformers, verl, vLLM and Docker, and the accelerators seen."""
    info = {
        "mucode": _version("mucode"),
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "verl": _version("verl"),
        "vllm": _version("vllm"),
        "math-verify": _version("math-verify"),
        "docker engine": _docker_version(),
        "accelerators": _accelerators(),
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    width = max(map(len, info))
    for key, value in info.items():
        typer.echo(f"{key:<{width}}  {value}")


_registered = False


def get_app() -> typer.Typer:
    """The full CLI: the commands above plus every area's `register(app)` (done once)."""
    global _registered
    if _registered:
        return app
    for module_name in _AREAS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and module_name.startswith(err.name):
                continue  # the area is not part of this build
            raise
        module.register(app)
    _registered = True
    return app


def main() -> None:
    get_app()()


if __name__ == "__main__":
    main()


__all__ = ["format_config", "get_app", "main", "resolve_config"]
