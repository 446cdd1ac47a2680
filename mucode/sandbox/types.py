"""Typed contract of the sandbox backends (names fixed by the team contract).

Verdicts are :class:`mucode.protocol.Status` members: a job or test gets ``correct`` … ``compile_error``
or ``sandbox_error`` (an infrastructure failure, never a reward); ``mucode.protocol.SANDBOX_VERDICTS``
lists the statuses a sandbox gives.

A ``CodeJob`` is a program plus its tests; a backend runs it and returns a ``JobResult`` with one
``TestOutcome`` per test that ran. Expected outputs stay on this side: the executor only ever sees
the program and the inputs; outputs are compared here (checkers.py), or by a checker program in a
separate sandbox run after the program's (checker_program.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mucode.protocol import Status

TestFormat = Literal["stdio", "call", "assert"]


@dataclass(frozen=True)
class TestSpec:
    """code spec ``tests``."""

    __test__ = False  # not a pytest test class

    format: TestFormat
    inputs: list[str] = field(default_factory=list)
    """stdio: one stdin per test; call: one test per entry, one JSON argument per line."""
    outputs: list[str] = field(default_factory=list)
    """Expected stdout (stdio) or JSON return value (call), same length as inputs."""
    fn_name: str | None = None
    """call: a top-level function, or a method of ``Solution()``."""
    assert_code: str | None = None
    """assert: test code run after the program; the test passes iff the process exits 0."""
    entry_point: str | None = None
    """assert: when set, ``check(<entry_point>)`` is appended (HumanEval style)."""


@dataclass(frozen=True)
class CheckerProgram:
    """A special judge run in the sandbox, testlib-style (mucode.sandbox.checker_program): it gets
    the test's input, the program's output and the expected answer as the files named by its
    ``argv[1:4]`` and exits 0 (accepted), 1 (wrong answer) or 2 (presentation error, counted wrong);
    anything else is a failed checker, which scores as a wrong answer."""

    source: str
    language: str = "python"
    """A language of the executor's table (``sandbox/languages.py``) that has a checker wrapper."""
    time_limit_s: float = 10.0
    """CPU seconds per checked test."""
    memory_limit_mb: int = 1024


@dataclass(frozen=True)
class CodeJob:
    program: str
    tests: TestSpec
    language: str = "python"
    """A name in the executor's table (sandbox/languages.py): python, cpp, java, ..."""
    checker: str = "code_contests"
    """A name in :data:`mucode.sandbox.checkers.CHECKERS` (the one list of checker names)."""
    checker_program: CheckerProgram | None = None
    """When set (stdio tests only), this program judges each test's output instead of ``checker``."""
    time_limit_s: float = 5.0
    """Per test, CPU time; the wall-clock limit is 2x + 0.5 s (executor --wall-factor)."""
    memory_limit_mb: int = 512
    """Per test process: address space (RLIMIT_AS), so it counts virtual memory."""
    stop_on_first_failure: bool = True


@dataclass
class TestOutcome:
    """One test (or one raw run)."""

    __test__ = False

    verdict: Status
    stdout: str
    stderr: str
    truncated: bool
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float
    peak_memory_mb: float
    limit_hit: str | None
    """None, or which limit ended the run: "cpu_time", "wall_time", "memory", "output"."""
    compile: dict[str, Any] | None = None
    """A compiled language's first test: its compile step (``wall_s``, ``cpu_s``, ``stdout``,
    ``stderr``, ``exit_code``). A ``compile_error`` outcome is the compile step itself."""


@dataclass
class JobResult:
    verdict: Status
    """correct iff every test is correct; sandbox_error on an infrastructure failure; otherwise the
    verdict of the first test that was not correct."""
    tests: list[TestOutcome]
    wall_s: float
    error: str | None = None
    """Infrastructure message when verdict is sandbox_error."""


@dataclass(frozen=True)
class RawRun:
    """One program run with one stdin, no checking (SandboxFusion ``/run_code``)."""

    program: str
    stdin: str = ""
    language: str = "python"
    time_limit_s: float = 10.0
    """CPU seconds."""
    memory_limit_mb: int = 1024
    wall_limit_s: float | None = None
    """Wall-clock seconds; None: the executor's default (a multiple of ``time_limit_s``)."""
    files: dict[str, str] = field(default_factory=dict)
    """Relative path -> base64 content, written into the run's dir (and the build dir) first."""
    compile_time_limit_s: float | None = None
    """CPU seconds of the compile step; None: the executor's (a larger value is cut to it)."""
