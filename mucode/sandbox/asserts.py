"""``assert`` tests: what the caller sends, and what it checks of the executor's answer.

The test code runs in the sandbox, but never in the program's process: the executor forks a
second process for it, the *harness* (executor/harness.py), which shares no memory with the
program and calls the program's functions through a pipe with plain-data arguments and results
(executor/plaindata.py). Builtins, the test's helpers and imports, its loop iterables, predicates
and expected values are the harness's alone; the harness writes the end-of-tests record (with a
random token of the run that only it knows) after the test code returned, so no hook the program
can call ends the tests, and an exit status never counts.

``prepare`` appends ``check(<entry_point>)`` when an entry point is set (HumanEval style); code
that does not parse is sent unchanged (the harness fails it). ``judge`` checks the shape of the
executor's answer (an ``asserts`` list; the executor sends it empty: every comparison happened in
the harness). Limits: see harness.py (arguments are copies; only plain data crosses; helpers the
test code uses but does not define are looked up in the program).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AssertPlan:
    """What the sandbox runs (``source``). ``expected``/``required`` stay empty: nothing is
    compared outside the harness any more (kept for callers that read them)."""

    source: str
    expected: dict[int, tuple[str, Any]] = field(default_factory=dict)
    required: set[int] = field(default_factory=set)


def prepare(assert_code: str | None, entry_point: str | None) -> AssertPlan:
    """The test code the harness runs (``check(<entry_point>)`` appended when set)."""
    source = (assert_code or "") + "\n"
    if entry_point:
        source += f"\ncheck({entry_point})\n"
    return AssertPlan(source)


def judge(plan: AssertPlan, reports: Any) -> str | None:
    """None when the executor's answer has the shape of a harness run, else why not."""
    if not isinstance(reports, list):
        return "no assertion reports"
    if reports:
        return "unexpected assertion reports"
    return None
