"""The sandbox backend protocol and ``make_backend`` (a registry of backend names).

Backends: ``local`` (mucode.sandbox.local: the executor on this host in fresh namespaces) and
``docker`` (mucode.sandbox.docker: a warm pool of hardened containers, or executors started by
someone else, e.g. docker compose services, attached through their socket dir). Both are safe to
call concurrently from one asyncio event loop.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Literal, Protocol, runtime_checkable

from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome


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


BACKENDS: dict[str, str] = {
    "local": "mucode.sandbox.local:LocalBackend",
    "docker": "mucode.sandbox.docker:DockerBackend",
}


def make_backend(name: Literal["docker", "local"], **options: object) -> SandboxBackend:
    """Build a backend by name; ``options`` go to its constructor (see its docstring)."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r}; valid: {sorted(BACKENDS)}") from None
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    valid = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for the {name!r} sandbox backend; valid: {valid}")
    return cls(**options)
