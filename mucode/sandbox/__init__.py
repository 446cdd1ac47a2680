"""Sandboxed execution of untrusted programs: backends, contract types and output checkers.

See docs/sandbox.md. The in-sandbox executor lives in the top-level ``sandbox/`` directory
(standard library only); this package talks to it over Unix sockets and never imports it.
"""

from mucode.sandbox.base import SandboxBackend, make_backend
from mucode.sandbox.checkers import check
from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome, TestSpec, Verdict

__all__ = ["CodeJob", "JobResult", "RawRun", "SandboxBackend", "TestOutcome", "TestSpec", "Verdict",
           "check", "make_backend"]
