"""The ``code`` reward program: 1.0 iff the extracted program passes every test in the sandbox.

spec: ``{"tests": {"format": "stdio"|"call"|"assert", ...}, "checker"?, "checker_program"?: {"source",
"language"?, "time_limit_s"?, "memory_limit_mb"?}, "time_limit_s"?, "memory_limit_mb"?, "extract"?:
"last_fence"|"none"|"evalplus", "language"?: "python"|"cpp"|"java"}`` (C++ and Java: stdio tests
only). Extra fields pass through untouched. A
``checker_program`` (stdio tests only) judges each output in a sandbox run of its own, testlib-style
(``mucode.sandbox.checker_program``); it replaces ``checker``. The job runs with
``stop_on_first_failure`` (a binary reward needs no more), so ``details.tests`` lists the tests run
up to the first failure. A sandbox infrastructure failure comes back as ``sandbox_error`` (re-sent by
the client, charged as a failure when it persists); what goes wrong while judging what the program
produced is that program's verdict, never an infrastructure status (``mucode.sandbox.pooled``; a
checker program that fails on the program's output is a wrong answer).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mucode.protocol import Status
from mucode.rewards.extract import EXTRACTORS, extract_code_async
from mucode.rewards.types import Item, Result, RewardContext
from mucode.sandbox.checker_program import validate_checker
from mucode.sandbox.checkers import CHECKERS
from mucode.sandbox.types import CheckerProgram, CodeJob, JobResult, TestSpec

__all__ = ["CheckerProgramSpec", "CodeReward", "CodeSpec", "TestsSpec"]

MAX_TIME_LIMIT_S = 60.0
MAX_MEMORY_LIMIT_MB = 8192


class TestsSpec(BaseModel):
    """The tests of one code task."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["stdio", "call", "assert"] = Field(description="How the tests run the program.")
    inputs: list[str] = Field(
        default_factory=list, description="stdio: stdin per test; call: JSON args, one per line."
    )
    outputs: list[str] = Field(
        default_factory=list, description="Expected stdout (stdio) or JSON return value (call)."
    )
    fn_name: str | None = Field(default=None, description="call: the function or Solution method to call.")
    assert_code: str | None = Field(default=None, description="assert: test code run after the program.")
    entry_point: str | None = Field(
        default=None, description="assert: the function the tests call (optional)."
    )
    setup_code: str | None = Field(
        default=None,
        description="assert: test-side code run in the test harness before assert_code, out of the "
        "program's reach: the data set's helpers the tests call (HumanEval's `poly`, `encode_cyclic`). "
        "A helper the tests use but only the program defines is the program's, and it can redefine it.",
    )

    @model_validator(mode="after")
    def _check_format(self) -> TestsSpec:
        if self.format in ("stdio", "call"):
            if not self.inputs:
                raise ValueError(f"format {self.format!r} needs at least one test in 'inputs'")
            if len(self.inputs) != len(self.outputs):
                raise ValueError(
                    f"'inputs' has {len(self.inputs)} tests but 'outputs' has {len(self.outputs)}; "
                    "give one expected output per input"
                )
        if self.format == "call" and not self.fn_name:
            raise ValueError("format 'call' needs 'fn_name' (the function or Solution method to call)")
        if self.format == "assert" and not (self.assert_code and self.assert_code.strip()):
            raise ValueError("format 'assert' needs 'assert_code' (test code run after the program)")
        return self

    def sandbox_fields(self) -> dict[str, Any]:
        """The fields of :class:`mucode.sandbox.TestSpec`: ``setup_code`` goes before ``assert_code``, so
        the harness defines those helpers itself and never asks the program for them."""
        fields = self.model_dump(exclude={"setup_code"})
        if self.setup_code and self.setup_code.strip():
            fields["assert_code"] = self.setup_code.rstrip() + "\n\n" + (self.assert_code or "")
        return fields


class CheckerProgramSpec(BaseModel):
    """A special judge run in the sandbox (testlib-style: ``argv[1:4]`` = input, output, answer files;
    exit 0 accepted, 1 wrong answer, 2 presentation error; anything else scores as a wrong answer)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=1 << 20, description="The checker's source code.")
    language: str = Field(
        default="python", description="A language of the sandbox's table with a checker wrapper."
    )
    time_limit_s: float = Field(default=10.0, gt=0, le=MAX_TIME_LIMIT_S, description="CPU seconds per test.")
    memory_limit_mb: int = Field(default=1024, ge=16, le=MAX_MEMORY_LIMIT_MB)

    def to_checker(self) -> CheckerProgram:
        return CheckerProgram(self.source, self.language, self.time_limit_s, self.memory_limit_mb)

    @model_validator(mode="after")
    def _runnable(self) -> CheckerProgramSpec:
        validate_checker(self.to_checker())
        return self


class CodeSpec(BaseModel):
    """Task spec of a code item."""

    model_config = ConfigDict(extra="allow")

    tests: TestsSpec
    checker: str = Field(default="code_contests", description="A name in mucode.sandbox.checkers.CHECKERS.")
    checker_program: CheckerProgramSpec | None = Field(
        default=None, description="stdio tests: a checker program judges each output (replaces `checker`)."
    )
    time_limit_s: float = Field(default=5.0, gt=0, le=MAX_TIME_LIMIT_S, description="Per test.")
    memory_limit_mb: int = Field(default=512, ge=16, le=MAX_MEMORY_LIMIT_MB)
    extract: str = Field(default="last_fence", description="A name in mucode.rewards.extract.EXTRACTORS.")
    language: Literal["python", "cpp", "java"] = Field(
        default="python",
        description="The program's language: cpp (g++ -std=gnu++17 -O2) and java (javac, then java) "
        "compile once per job and take stdio tests only.",
    )

    @model_validator(mode="after")
    def _stdio_only_when_compiled(self) -> CodeSpec:
        if self.language != "python" and self.tests.format != "stdio":
            raise ValueError(
                f"language {self.language!r} takes stdio tests only (format {self.tests.format!r} is Python's)"
            )
        return self

    @field_validator("checker")
    @classmethod
    def _known_checker(cls, name: str) -> str:
        return CHECKERS.validate(name)

    @field_validator("extract")
    @classmethod
    def _known_extract(cls, name: str) -> str:
        return EXTRACTORS.validate(name)

    @model_validator(mode="after")
    def _checker_fits_tests(self) -> CodeSpec:
        program = self.checker_program is not None or isinstance(CHECKERS.get(self.checker), CheckerProgram)
        if program and self.tests.format != "stdio":
            raise ValueError(f"a checker program judges stdio tests only, not format {self.tests.format!r}")
        return self


class CodeReward:
    """Binary reward for a program: all tests pass in the sandbox."""

    name: ClassVar[str] = "code"
    spec_model: ClassVar[type[BaseModel]] = CodeSpec
    needs: ClassVar[frozenset[str]] = frozenset({"sandbox"})

    async def score(self, item: Item, ctx: RewardContext) -> Result:
        spec = CodeSpec.model_validate(item.spec)
        # off the event loop (a thread; evalplus's sanitizer in its own bounded processes)
        program, why = await extract_code_async(
            item.response, spec.extract, spec.tests.entry_point or spec.tests.fn_name
        )
        if program is None:
            return Result(id=item.id, reward=0.0, status=Status.no_code, details={"error": why})
        if ctx.sandbox is None:
            return Result.infra_failure(
                item.id, Status.verifier_error, "this verifier was started without a sandbox"
            )
        job = CodeJob(
            program=program,
            tests=TestSpec(**spec.tests.sandbox_fields()),
            language=spec.language,
            checker=spec.checker,
            checker_program=spec.checker_program.to_checker() if spec.checker_program else None,
            time_limit_s=spec.time_limit_s,
            memory_limit_mb=spec.memory_limit_mb,
            stop_on_first_failure=True,
        )
        try:
            outcome = await ctx.sandbox.judge(job)
        except (RecursionError, MemoryError) as exc:  # only the program's data gets the judge this far
            status = Status.memory_limit if isinstance(exc, MemoryError) else Status.runtime_error
            return Result(
                id=item.id,
                reward=0.0,
                status=status,
                details={"error": f"judging the program's output failed: {type(exc).__name__}"},
            )
        except Exception as exc:  # noqa: BLE001 - a backend failure is infrastructure, never a reward
            return Result.infra_failure(
                item.id, Status.sandbox_error, f"sandbox backend failed: {exc!r}"[:1000]
            )
        return _to_result(item.id, outcome)


def _to_result(item_id: str | None, outcome: JobResult) -> Result:
    status = Status(outcome.verdict)  # the sandbox's Status is the same enum
    details: dict[str, Any] = {
        "wall_s": round(outcome.wall_s, 6),
        "tests": [_test_details(t) for t in outcome.tests],
    }
    if outcome.error:
        details["error"] = outcome.error
    return Result(id=item_id, reward=1.0 if status is Status.correct else 0.0, status=status, details=details)


def _test_details(test: Any) -> dict[str, Any]:
    d = (
        dataclasses.asdict(test)
        if dataclasses.is_dataclass(test) and not isinstance(test, type)
        else dict(test)
    )
    d["verdict"] = str(getattr(test.verdict, "value", test.verdict))
    for key in ("stdout", "stderr"):  # keep results small: the head of each stream is enough to debug
        if isinstance(d.get(key), str) and len(d[key]) > 2000:
            d[key] = d[key][:2000]
            d["truncated"] = True
    return d
