"""The ``fake`` backend: a test double that runs nothing and answers verdicts from a table.

For tests of the layers above the sandbox (the verifier service and client, the adapters, the
trainer) that need verdicts but not a sandbox: no Docker, no namespaces, no root, no child process.
A program's verdict comes, first match wins, from

1. ``table``: program text, or the sha256 hex of its UTF-8 text, -> a verdict name, or an entry
   ``{"verdict": ..., "stdout": ..., "stderr": ..., "exit_code": ...}``;
2. ``rules``: ``[{"contains": TEXT, "verdict": NAME}, ...]``, the first rule whose ``contains``
   occurs in the program;
3. ``default``: a verdict name for every other program; None makes them ``sandbox_error`` (naming
   the program's hash), so a table that misses a program shows up as an infrastructure failure,
   never as a reward.

All options are JSON values, so ``MUCODE_BACKEND=fake MUCODE_BACKEND_OPTIONS='{"default": "correct"}'``
configures a whole verifier service. Jobs are validated as the real backends validate them (a
malformed job raises ValueError). ``calls`` counts judge/run_raw calls per program hash (how often a
retry layer re-sent something).

Not a production backend: ``production_backend_names()`` leaves it out, so ``mucode serve --help``
does not offer it, and it refuses to be built without a table, rules or default; at start it logs
a warning that programs are not run. Limits: no limit is enforced and nothing is timed (``wall_s``
is 0); a correct verdict echoes each test's expected output; a failing one applies to the first test
(to every test when ``stop_on_first_failure`` is False).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mucode.protocol import SANDBOX_VERDICTS, Status
from mucode.sandbox.pooled import build_request
from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome

logger = logging.getLogger(__name__)

__all__ = ["FakeBackend", "program_hash"]

_LIMIT_HIT = {Status.time_limit: "cpu_time", Status.memory_limit: "memory", Status.output_limit: "output"}


def program_hash(program: str) -> str:
    """The table key form of a program: sha256 hex of its UTF-8 text."""
    return hashlib.sha256(program.encode("utf-8")).hexdigest()


def _entry(value: str | Mapping[str, Any], where: str) -> dict[str, Any]:
    entry = {"verdict": value} if isinstance(value, str) else dict(value)
    try:
        entry["verdict"] = Status(entry["verdict"])
        if entry["verdict"] not in SANDBOX_VERDICTS:
            raise ValueError(entry["verdict"])
    except (KeyError, ValueError):
        raise ValueError(
            f"fake sandbox backend: {where} needs a verdict, one of "
            f"{', '.join(v.value for v in Status if v in SANDBOX_VERDICTS)}; got {value!r}"
        ) from None
    return entry


class FakeBackend:
    """Options: ``table`` ({program text or sha256 hex: verdict or entry}), ``rules``
    ([{"contains": TEXT, "verdict": NAME}]), ``default`` (verdict for the rest; None: sandbox_error),
    ``slots`` (what health reports as the pool size, 4). At least one of table, rules, default."""

    name = "fake"

    def __init__(
        self,
        *,
        table: Mapping[str, str | Mapping[str, Any]] | None = None,
        rules: Sequence[Mapping[str, str]] = (),
        default: str | None = None,
        slots: int = 4,
    ) -> None:
        if not table and not rules and default is None:
            raise ValueError(
                "the fake sandbox backend runs no program and has no verdicts to give: pass table, "
                "rules or default (it is a test double; for real runs use docker, attach or local)"
            )
        self._table = {
            key: _entry(value, f"table entry {key[:40]!r}") for key, value in (table or {}).items()
        }
        self._rules = [(str(rule["contains"]), _entry(rule, f"rule {i}")) for i, rule in enumerate(rules)]
        self._default = None if default is None else _entry(default, "default")
        self.slots = slots
        self.calls: Counter[str] = Counter()
        self._started = False

    def verdict_of(self, program: str) -> dict[str, Any] | None:
        """The entry that decides ``program`` (None: no entry, so sandbox_error)."""
        digest = program_hash(program)
        self.calls[digest] += 1
        found = self._table.get(program) or self._table.get(digest)
        if found is not None:
            return found
        for needle, entry in self._rules:
            if needle in program:
                return entry
        return self._default

    async def start(self) -> None:
        if not self._started:
            logger.warning(
                "fake sandbox backend: programs are NOT run, verdicts come from a table (tests only)"
            )
        self._started = True

    async def close(self) -> None:
        self._started = False

    def _check_started(self) -> None:
        if not self._started:
            raise RuntimeError("fake sandbox backend not started: await backend.start() first")

    async def judge(self, job: CodeJob) -> JobResult:
        self._check_started()
        build_request(job)  # the real backends' validation: a malformed job raises ValueError
        entry = self.verdict_of(job.program)
        if entry is None or entry["verdict"] is Status.sandbox_error:
            why = f"fake sandbox backend: no verdict for program sha256 {program_hash(job.program)}"
            return JobResult(Status.sandbox_error, [], 0.0, error=entry.get("error", why) if entry else why)
        verdict: Status = entry["verdict"]
        expected = list(job.tests.outputs) if job.tests.format != "assert" else [""]
        if verdict is Status.correct:
            return JobResult(verdict, [_outcome(verdict, entry, out) for out in expected], 0.0)
        failing = expected if not job.stop_on_first_failure else expected[:1]
        return JobResult(verdict, [_outcome(verdict, entry, "") for _ in failing], 0.0)

    async def run_raw(self, run: RawRun) -> TestOutcome:
        self._check_started()
        entry = self.verdict_of(run.program)
        if entry is None:
            return _outcome(
                Status.sandbox_error,
                {
                    "stderr": "fake sandbox backend: no verdict for program "
                    f"sha256 {program_hash(run.program)}"
                },
                "",
            )
        verdict = Status.correct if entry["verdict"] is Status.wrong_answer else entry["verdict"]
        return _outcome(verdict, entry, "")  # a raw run has no expected output: it ran and exited 0

    async def health(self) -> dict[str, object]:
        return {
            "ok": self._started,
            "backend": self.name,
            "pool_size": self.slots if self._started else 0,
            "idle": self.slots if self._started else 0,
            "fake": True,
        }


def _outcome(verdict: Status, entry: Mapping[str, Any], stdout: str) -> TestOutcome:
    ok = verdict in (Status.correct, Status.wrong_answer)
    exit_code = entry.get("exit_code", 0 if ok else (1 if verdict is Status.runtime_error else None))
    return TestOutcome(
        verdict=verdict,
        stdout=str(entry.get("stdout", stdout)),
        stderr=str(entry.get("stderr", "")),
        truncated=verdict is Status.output_limit,
        exit_code=exit_code,
        signal=None if exit_code is not None else 9,
        wall_s=0.0,
        cpu_s=0.0,
        peak_memory_mb=0.0,
        limit_hit=_LIMIT_HIT.get(verdict),
    )
