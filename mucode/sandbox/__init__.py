"""Sandboxed execution of untrusted programs: backends, contract types and output checkers.

See docs/sandbox.md. The in-sandbox executor ships in ``sandbox``
(standard library only, run as plain files inside the image or jail); this package talks to it over
Unix sockets and imports only its wire-protocol module from there.
"""

from mucode.sandbox.base import (
    SANDBOX_BACKENDS,
    SandboxBackend,
    backend_names,
    make_backend,
    production_backend_names,
    register_backend,
)
from mucode.sandbox.checkers import check
from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome, TestSpec

__all__ = [
    "SANDBOX_BACKENDS",
    "CodeJob",
    "JobResult",
    "RawRun",
    "SandboxBackend",
    "TestOutcome",
    "TestSpec",
    "backend_names",
    "check",
    "make_backend",
    "production_backend_names",
    "register_backend",
]
