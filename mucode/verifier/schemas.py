"""Request and response models of the HTTP API (with the examples shown on the OpenAPI page).

The verify bodies (``VerifyRequest``, ``VerifyResponse``, ``ErrorResponse``) are built from the
ground-floor ``Item`` and ``Result`` (``mucode.protocol``) and shared by the service and its client;
SandboxFusion's ``/run_code`` models are the service's alone."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mucode.protocol import Item, Result

__all__ = [
    "ErrorResponse",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunResult",
    "VerifyRequest",
    "VerifyResponse",
]


_CODE_ITEM: dict[str, Any] = {
    "id": "p1-s0",
    "program": "code",
    "response": "Here is my solution:\n```python\nprint(sum(map(int, input().split())))\n```",
    "spec": {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}, "time_limit_s": 2},
}
_CALL_ITEM: dict[str, Any] = {
    "id": "p2-s0",
    "program": "code",
    "response": "```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```",
    "spec": {
        "tests": {"format": "call", "fn_name": "add", "inputs": ["1\n2"], "outputs": ["3"]},
        "checker": "exact",
    },
}
_ASSERT_ITEM: dict[str, Any] = {
    "id": "p3-s0",
    "program": "code",
    "response": "```python\ndef inc(x):\n    return x + 1\n```",
    "spec": {"tests": {"format": "assert", "assert_code": "assert inc(1) == 2", "entry_point": "inc"}},
}
_CHECKER_ITEM: dict[str, Any] = {
    "id": "p4-s0",
    "program": "code",
    "response": "```python\nn = int(input())\nprint(*range(n, 0, -1))\n```",
    "spec": {
        "tests": {"format": "stdio", "inputs": ["3\n"], "outputs": ["1 2 3\n"]},
        "checker_program": {
            "language": "python",
            "source": "import sys\nn = int(open(sys.argv[1]).read())\n"
            "got = open(sys.argv[2]).read().split()\n"
            "sys.exit(0 if sorted(got) == [str(i) for i in range(1, n + 1)] else 1)\n",
        },
    },
}
_MATH_ITEM: dict[str, Any] = {
    "id": "m1-s0",
    "program": "math",
    "response": "So the answer is $\\boxed{\\frac12}$.",
    "spec": {"answer": "0.5"},
}
_SHARED_TESTS: dict[str, Any] = {"format": "stdio", "inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}
_SHARED_KEY = (
    "6d945e43011e0bab44db3c54bd9872558009e55f1dd8ea9d01175fe7fd1eb4c2"  # sha256 of its canonical JSON
)
_SHARED_EXAMPLE: dict[str, Any] = {
    "test_sets": {_SHARED_KEY: _SHARED_TESTS},
    "items": [
        {"id": f"p1-s{k}", "program": "code", "response": response, "spec": {"tests": {"ref": _SHARED_KEY}}}
        for k, response in enumerate(
            ["```python\nprint(sum(map(int, input().split())))\n```", "```python\nprint(0)\n```"]
        )
    ],
}


class VerifyRequest(BaseModel):
    """A batch of items; items of different programs may be mixed.

    Samples of one problem can share its tests: put the tests object once in ``test_sets`` under the
    SHA-256 (hex) of its canonical JSON (``json.dumps(tests, sort_keys=True, separators=(",", ":"))``,
    ASCII escapes) and give each item ``spec.tests = {"ref": "<that hash>"}``. Refs are resolved before
    validation, so reward programs see the full tests; an unknown ref or a wrong hash is a 422.
    ``VerifierClient`` does this by itself."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"items": [_CODE_ITEM, _CALL_ITEM, _ASSERT_ITEM, _CHECKER_ITEM, _MATH_ITEM]},
                _SHARED_EXAMPLE,
            ]
        }
    )

    items: list[Item] = Field(description="Items to score (item contract).")
    test_sets: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Tests objects shared by items of this request, keyed by the SHA-256 of their canonical "
        'JSON; an item points at one with spec.tests = {"ref": key}.',
    )


class VerifyResponse(BaseModel):
    """One result per item, in the order of the request."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "p1-s0",
                            "reward": 1.0,
                            "status": "correct",
                            "details": {"wall_s": 0.004, "tests": []},
                        },
                        {
                            "id": "m1-s0",
                            "reward": 1.0,
                            "status": "correct",
                            "details": {"extracted": "\\frac{1}{2}"},
                        },
                    ]
                }
            ]
        }
    )

    results: list[Result]


class ErrorResponse(BaseModel):
    """Every 4xx answer: what is wrong, and (for item problems) one line per problem."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "invalid items: 1 problem",
                    "problems": [
                        "items[0].spec.tests: Value error, format 'call' needs 'fn_name' (the function or "
                        "Solution method to call)"
                    ],
                }
            ]
        }
    )

    error: str
    problems: list[str] = Field(default_factory=list)


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``/run_code`` request (the fields verl's sandbox_fusion client sends)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "code": "print(input()[::-1])",
                    "stdin": "abc\n",
                    "language": "python",
                    "run_timeout": 10,
                    "memory_limit_MB": 1024,
                }
            ]
        },
    )

    code: str
    language: str = "python"
    stdin: str | None = None
    compile_timeout: float = Field(default=10.0, ge=0)
    run_timeout: float = Field(default=10.0, gt=0, description="Wall-clock seconds, as in SandboxFusion.")
    cpu_timeout: float | None = Field(
        default=None,
        gt=0,
        description=(
            "mucode extension: CPU seconds of the program (all its processes); default: run_timeout."
        ),
    )
    memory_limit_MB: int = Field(default=-1, description="-1: the default (1024 MB).")
    files: dict[str, str | None] = Field(
        default_factory=dict,
        description="Relative path -> base64 content, written into the program's working dir (and, for "
        "a compiled language, beside its source) before it runs; a null content is skipped.",
    )
    fetch_files: list[str] = Field(default_factory=list, description="Not supported: must be empty.")


class RunResult(BaseModel):
    """``Finished``: the program ran (``return_code`` says how it ended; negative: killed by that
    signal); ``TimeLimitExceeded``: killed at ``run_timeout``/``cpu_timeout``; ``Error``: the sandbox
    failed to run it."""

    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion's ``/run_code`` response. ``status``: ``Success`` iff the program finished with
    return code 0, ``Failed`` if it ran otherwise, ``SandboxError`` if the sandbox failed."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: RunResult | None = None
    run_result: RunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, Any] = Field(default_factory=dict)
