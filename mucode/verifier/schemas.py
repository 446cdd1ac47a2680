"""Request and response models of the HTTP API (with the examples shown on the OpenAPI page).

The verify models (``VerifyRequest``, ``VerifyResponse``, ``ErrorResponse``) are the shared protocol
of service and client and live in ``mucode.verifier.protocol``; they are re-exported here. SandboxFusion's
``/run_code`` models are the service's alone."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mucode.verifier.protocol import ErrorResponse, VerifyRequest, VerifyResponse

__all__ = ["ErrorResponse", "RunCodeRequest", "RunCodeResponse", "RunResult", "VerifyRequest", "VerifyResponse"]

class RunCodeRequest(BaseModel):
    """SandboxFusion's ``/run_code`` request (the fields verl's sandbox_fusion client sends)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [{
        "code": "print(input()[::-1])", "stdin": "abc\n", "language": "python",
        "run_timeout": 10, "memory_limit_MB": 1024,
    }]})

    code: str
    language: str = "python"
    stdin: str | None = None
    compile_timeout: float = Field(default=10.0, ge=0)
    run_timeout: float = Field(default=10.0, gt=0, description="Wall-clock seconds, as in SandboxFusion.")
    cpu_timeout: float | None = Field(default=None, gt=0, description=(
        "mucode extension: CPU seconds of the program (all its processes); default: run_timeout."))
    memory_limit_MB: int = Field(default=-1, description="-1: the default (1024 MB).")
    files: dict[str, str | None] = Field(default_factory=dict, description="Not supported: must be empty.")
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
