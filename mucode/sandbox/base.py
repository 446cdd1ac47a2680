"""The sandbox backend protocol and the registry of backend names (``make_backend``).

Built-in backends:

- ``local`` (mucode.sandbox.local): the executor on this host, in fresh Linux namespaces (root);
- ``docker`` (mucode.sandbox.docker): a managed pool of hardened containers that mucode starts,
  watches and replaces through the Docker engine;
- ``attach`` (mucode.sandbox.attach): executors someone else started (e.g. docker compose
  services), reached through a directory of their Unix sockets; needs no Docker access at all;
- ``fake`` (mucode.sandbox.fake): runs nothing and answers verdicts from a table, for tests that
  need verdicts but no sandbox. It is *not a production backend*: ``production_backend_names()``
  (what ``mucode serve --backend`` offers) leaves it out, and it refuses to start without an
  explicit table or rules, so no configuration selects it by accident.

Plug-in packages add backends under the ``mucode.sandbox_backends`` entry-point group (a class
taking keyword options, or a :class:`BackendEntry`). Backend modules are imported only when a
backend of theirs is built, so naming ``local`` never imports the Docker SDK. All backends are safe
to call concurrently from one asyncio event loop.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mucode.registry import Registry
from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome

__all__ = [
    "SANDBOX_BACKENDS",
    "BackendEntry",
    "SandboxBackend",
    "backend_names",
    "make_backend",
    "production_backend_names",
    "register_backend",
]


@runtime_checkable
class SandboxBackend(Protocol):
    name: str

    async def start(self) -> None:
        """Warm the pool (start or attach to executors). Idempotent."""

    async def close(self) -> None:
        """Stop what start() started; leaves no process, container or file behind."""

    async def judge(self, job: CodeJob) -> JobResult:
        """Run the job's tests in the sandbox and check the outputs here, outside it. An
        infrastructure failure is a JobResult with verdict sandbox_error, never an exception;
        a malformed job (e.g. inputs and outputs of different lengths) raises ValueError."""

    async def run_raw(self, run: RawRun) -> TestOutcome:
        """One run, no checking: verdict correct iff it exits 0, else runtime_error or a limit."""

    async def health(self) -> dict[str, object]:
        """``{"ok": bool, "pool_size": int, "idle": int, ...}``"""


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend. ``target`` is its class, or ``"module:Class"`` imported on first use;
    ``production`` False keeps it out of the names offered to users (test doubles)."""

    target: str | Callable[..., SandboxBackend]
    production: bool = True

    def load(self) -> Callable[..., SandboxBackend]:
        if not isinstance(self.target, str):
            return self.target
        module, _, attr = self.target.partition(":")
        loaded: Callable[..., SandboxBackend] = getattr(importlib.import_module(module), attr)
        return loaded


def _adapt(obj: object) -> BackendEntry:
    """An entry point names a backend class (or a ready BackendEntry)."""
    if isinstance(obj, BackendEntry):
        return obj
    if callable(obj):
        return BackendEntry(obj)
    raise TypeError(f"a sandbox backend entry point must name a class, not {obj!r}")


SANDBOX_BACKENDS: Registry[BackendEntry] = Registry(
    "sandbox backend", entry_point_group="mucode.sandbox_backends", adapt=_adapt
)
SANDBOX_BACKENDS.register("local", BackendEntry("mucode.sandbox.local:LocalBackend"))
SANDBOX_BACKENDS.register("docker", BackendEntry("mucode.sandbox.docker:DockerPoolBackend"))
SANDBOX_BACKENDS.register("attach", BackendEntry("mucode.sandbox.attach:AttachBackend"))
SANDBOX_BACKENDS.register("fake", BackendEntry("mucode.sandbox.fake:FakeBackend", production=False))


def register_backend(
    name: str, target: str | Callable[..., SandboxBackend], *, production: bool = True
) -> None:
    """Add a backend under ``name`` (a class or ``"module:Class"``); raises if the name is taken."""
    SANDBOX_BACKENDS.register(name, BackendEntry(target, production))


def backend_names() -> tuple[str, ...]:
    """Every registered backend, test doubles included."""
    return SANDBOX_BACKENDS.names()


def production_backend_names() -> tuple[str, ...]:
    """The backends a user chooses from (``mucode serve --backend``): every one but test doubles."""
    return tuple(name for name, entry in SANDBOX_BACKENDS.items() if entry.production)


def make_backend(name: str, **options: object) -> SandboxBackend:
    """Build a backend by name; ``options`` go to its constructor (see its docstring). An unknown
    name raises :class:`mucode.registry.UnknownNameError` (a ValueError) listing the valid ones; an
    unknown option raises ValueError listing the backend's options."""
    cls = SANDBOX_BACKENDS.get(name).load()
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        valid = [p for p in params if p != "self"]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            hints: dict[str, str] = getattr(cls, "option_hints", {})
            hint = "".join(f"; {hints[o]}" for o in unknown if o in hints)
            raise ValueError(
                f"unknown option(s) {unknown} for the {name!r} sandbox backend; valid: {valid}{hint}"
            )
    return cls(**options)
