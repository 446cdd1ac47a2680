"""``POST /run_code``: SandboxFusion-compatible, so verl's ``sandbox_fusion`` reward route works unchanged.

Field semantics as SandboxFusion defines them: ``run_timeout`` is wall-clock (a program sleeping past
it is ``TimeLimitExceeded``); ``run_result.status`` is ``Finished`` for every program that ran — its
``return_code`` says how it ended (negative: killed by that signal, e.g. at the memory limit) — and
``Error`` only when the sandbox itself failed, which is also the response's ``status: SandboxError``
(verl maps it to -1, not to a wrong answer). mucode adds ``cpu_timeout`` (CPU seconds of all the
program's processes; default ``run_timeout``).

Languages: ``python`` (or ``python3``), ``cpp`` (g++ -std=gnu++17 -O2) and ``java`` (the public class,
else ``Main``). A compiled language's response has ``compile_result`` (``Finished`` with the
compiler's return code, or ``TimeLimitExceeded`` past ``compile_timeout``, CPU seconds here); a
failed compile is ``status: Failed`` with no ``run_result``, as in SandboxFusion. ``files`` (path ->
base64) are written into the program's working dir (and beside a compiled program's source) first.

Deviations from SandboxFusion: other languages are a 422; no ``fetch_files`` (a 422 when non-empty);
``compile_timeout`` is capped by the executor's compile limit (30 s by default); Java's class path
is the compiled classes only (a ``.jar`` in ``files`` is not on it).

Runs share the scoring slots and the queue bound of /v1/verify (a full queue is a 429 with
``Retry-After``); a run not finished within ``request_timeout_s`` (queueing included) is a 504 with
``Retry-After`` (verl's client retries a 504). Text that is not valid Unicode is a 422 before any work.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from fastapi import APIRouter, HTTPException, status

from mucode.protocol import Status
from mucode.sandbox.executor.languages import ALIASES
from mucode.sandbox.types import RawRun
from mucode.verifier.core import QueueFullError, Verifier
from mucode.verifier.deps import Authorized, VerifierDep
from mucode.verifier.schemas import ErrorResponse, RunCodeRequest, RunCodeResponse, RunResult
from mucode.verifier.text import text_problems

router = APIRouter(tags=["sandboxfusion"])

_DEFAULT_MEMORY_MB = 1024
LANGUAGES = ("python", "cpp", "java")
COMPILED = ("cpp", "java")
MAX_FILES_BYTES = 16 << 20


@router.post(
    "/run_code",
    response_model=RunCodeResponse,
    dependencies=[Authorized],
    responses={code: {"model": ErrorResponse} for code in (401, 413, 422, 429, 503, 504)},
)
async def run_code(request: RunCodeRequest, verifier: VerifierDep) -> RunCodeResponse:
    """Runs one program with one stdin and returns its exit status and output (no checking)."""

    problems = _request_problems(request, verifier.settings.run_code_max_timeout_s)
    if problems:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"error": "invalid run_code request", "problems": problems},
        )
    sandbox = verifier.ctx.sandbox
    if sandbox is None or not verifier.settings.run_code:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="this verifier serves no sandbox (started with MUCODE_RUN_CODE=false)",
        )
    run = RawRun(
        program=request.code,
        stdin=request.stdin or "",
        language=_language(request.language),
        time_limit_s=request.cpu_timeout or request.run_timeout,
        wall_limit_s=request.run_timeout,
        memory_limit_mb=_DEFAULT_MEMORY_MB if request.memory_limit_MB == -1 else request.memory_limit_MB,
        files={name: data for name, data in request.files.items() if isinstance(data, str)},
        compile_time_limit_s=request.compile_timeout or None,
    )
    try:
        verifier.admit(1)
    except QueueFullError as exc:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail=str(exc),
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None
    limit = verifier.settings.request_timeout_s
    try:
        outcome = await asyncio.wait_for(_run_in_slot(verifier, sandbox, run), limit)
    except TimeoutError:
        verifier.metrics.items.labels("run_code", Status.sandbox_error.value).inc()
        raise HTTPException(
            status.HTTP_504_GATEWAY_TIMEOUT,
            detail=(
                f"the run did not finish within the request limit of {limit} s (queueing included; "
                "MUCODE_REQUEST_TIMEOUT_S): the sandbox is overloaded or stuck, retry later"
            ),
            headers={"Retry-After": str(verifier.settings.retry_after_s)},
        ) from None
    except Exception as exc:  # noqa: BLE001 - infrastructure: SandboxFusion's SandboxError
        verifier.metrics.items.labels("run_code", Status.sandbox_error.value).inc()
        return RunCodeResponse(status="SandboxError", message=f"sandbox backend failed: {exc!r}"[:1000])
    finally:
        verifier.release(1)
    return _response(outcome, verifier, run.language)


async def _run_in_slot(verifier: Verifier, sandbox: Any, run: Any) -> Any:
    async with verifier.slots:
        return await sandbox.run_raw(run)


def _request_problems(request: RunCodeRequest, max_timeout_s: float) -> list[str]:
    """What is wrong with a request, one line each (empty: it can run)."""
    problems = text_problems(request.model_dump())
    if _language(request.language) not in LANGUAGES:
        problems.append(
            f"language: {request.language!r} is not supported; mucode runs {', '.join(LANGUAGES)} (or python3)"
        )
    if request.fetch_files:
        problems.append("fetch_files: not supported by mucode; print what you need to stdout")
    problems += _file_problems(request.files)
    for name in ("run_timeout", "cpu_timeout"):
        value = getattr(request, name)
        if value is not None and value > max_timeout_s:
            problems.append(
                f"{name}: {value} s is over the limit of {max_timeout_s} s (MUCODE_RUN_CODE_MAX_TIMEOUT_S)"
            )
    if request.memory_limit_MB != -1 and not 16 <= request.memory_limit_MB <= 8192:
        problems.append(
            f"memory_limit_MB: {request.memory_limit_MB} is outside 16..8192 (or -1 for the default)"
        )
    return problems


def _language(name: str) -> str:
    return str(ALIASES.get(name.lower(), name.lower()))


def _file_problems(files: dict[str, str | None]) -> list[str]:
    problems = []
    total = 0
    for name, data in files.items():
        parts = name.split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            problems.append(f"files: {name!r} must be a relative path without '..'")
        if data is None:
            continue
        try:
            total += len(base64.b64decode(data, validate=True))
        except ValueError:
            problems.append(f"files[{name!r}]: not base64")
    if total > MAX_FILES_BYTES:
        problems.append(f"files: {total} bytes in all, over the limit of {MAX_FILES_BYTES}")
    return problems


def _compile_result(outcome: Any) -> RunResult:
    """The compile step as SandboxFusion reports it (the outcome itself on a compile error)."""
    if outcome.verdict is Status.compile_error:
        limit = outcome.limit_hit in ("cpu_time", "wall_time")
        code = outcome.exit_code if outcome.exit_code is not None else -(outcome.signal or 0) or None
        return RunResult(
            status="TimeLimitExceeded" if limit else "Finished",
            execution_time=outcome.wall_s,
            return_code=None if limit else code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
    info = outcome.compile or {}
    return RunResult(
        status="Finished",
        execution_time=float(info.get("wall_s") or 0.0),
        return_code=int(info.get("exit_code") or 0),
        stdout=str(info.get("stdout") or ""),
        stderr=str(info.get("stderr") or ""),
    )


def _response(outcome: Any, verifier: Verifier, language: str) -> RunCodeResponse:
    """SandboxFusion's answer for a finished run (``Success`` only for exit code 0 within the limits)."""
    verdict = Status(outcome.verdict)
    verifier.metrics.items.labels("run_code", verdict.value).inc()
    if verdict is Status.sandbox_error:
        return RunCodeResponse(status="SandboxError", message=outcome.stderr[:1000] or "sandbox error")
    compiled = _compile_result(outcome) if language in COMPILED else None
    if verdict is Status.compile_error:
        return RunCodeResponse(status="Failed", message=verdict.value, compile_result=compiled)
    timed_out = verdict is Status.time_limit
    code = (
        outcome.exit_code if outcome.exit_code is not None else (-outcome.signal if outcome.signal else None)
    )
    result = RunResult(
        status="TimeLimitExceeded" if timed_out else "Finished",
        execution_time=outcome.wall_s,
        return_code=code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
    )
    ok = not timed_out and code == 0
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        message="" if ok else verdict.value,
        compile_result=compiled,
        run_result=result,
    )
