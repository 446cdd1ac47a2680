"""``POST /v1/verify``: a batch of items in, one result per item out.

Order of checks, all before any work: item count (413), text that is not valid Unicode (422), shared
test-set refs (422), item programs and specs (422), room in the queue (429 with ``Retry-After``). The
request then runs under ``request_timeout_s`` (queueing included), shortened to answer before the
client gives up when it says how long it waits (header ``X-Mucode-Timeout-S``, sent by ``VerifierClient``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request, status

from mucode.protocol import Result
from mucode.verifier.core import QueueFullError, Verifier
from mucode.verifier.deps import Authorized, VerifierDep
from mucode.verifier.schemas import ErrorResponse, VerifyRequest, VerifyResponse
from mucode.verifier.text import text_problems
from mucode.verifier.wire import MAX_ITEMS_HEADER, answer_within, resolve_test_sets

router = APIRouter(tags=["verify"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 413, 422, 429)
}


def _unprocessable(what: str, problems: list[str]) -> HTTPException:
    shown = problems[:50]
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        detail={
            "error": f"{what}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
            + (" (first 50 shown)" if len(problems) > 50 else ""),
            "problems": shown,
        },
    )


def _check(request: VerifyRequest, verifier: Verifier, raw: bytes | None) -> HTTPException | None:
    """Every check that reads the whole request (CPU-bound on megabytes of tests: runs in a thread);
    ``raw``: the body it was decoded from, when there is one (test-set keys are hashed where they lie)."""
    text = text_problems(request.test_sets, "test_sets")
    for i, item in enumerate(request.items):
        text += text_problems(item.wire(), f"items[{i}]")
    if text:
        return _unprocessable("invalid text", text)
    refs = resolve_test_sets(request.items, request.test_sets, raw)
    if refs:
        return _unprocessable("invalid test-set references", refs)
    problems = verifier.validate(request.items)
    if problems:
        return _unprocessable("invalid items", [str(p) for p in problems])
    return None


@router.post("/v1/verify", response_model=VerifyResponse, dependencies=[Authorized], responses=_ERRORS)
async def verify(
    request: VerifyRequest,
    http: Request,
    verifier: VerifierDep,
    x_mucode_timeout_s: Annotated[
        float | None,
        Header(
            description="Seconds the client will wait (VerifierClient sends its timeout_s): the outer limit "
            "is shortened so the answer arrives first."
        ),
    ] = None,
) -> VerifyResponse:
    """Scores a batch. Items of different programs may be mixed; they are scored concurrently.

    Infrastructure failures come back per item as ``verifier_error``/``sandbox_error`` (no reward
    signal: mask them); mistakes in the request (unknown program, invalid spec, unknown test-set ref,
    invalid Unicode) are a 4xx for the whole batch before any work starts. A full queue is a 429 with
    ``Retry-After``; items not scored within ``request_timeout_s`` come back ``verifier_error``.
    """
    body = await http.body() if request.test_sets else None  # read already (FastAPI decoded it)
    results = await score_request(request, verifier, x_mucode_timeout_s, body)
    return VerifyResponse(results=results)


async def score_request(
    request: VerifyRequest, verifier: Verifier, client_timeout_s: float | None, body: bytes | None = None
) -> list[Result]:
    """Every check, then the scoring, of a verify request; raises the HTTP errors described above.

    Shared by the routes that speak other frameworks' formats (``openrlhf``), so they keep the same
    limits, queue bound and outer time limit."""
    settings = verifier.settings
    limit = settings.max_items_per_request
    if len(request.items) > limit:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            detail=(
                f"{len(request.items)} items in one request; the limit is {limit}: split the batch "
                "(VerifierClient(batch_size=...)) or raise MUCODE_MAX_ITEMS_PER_REQUEST"
            ),
            headers={MAX_ITEMS_HEADER: str(limit)},
        )
    error = await asyncio.to_thread(_check, request, verifier, body)
    if error is not None:
        raise error
    n = len(request.items)
    try:
        verifier.admit(n)
    except QueueFullError as exc:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail=str(exc),
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None
    try:
        within = answer_within(settings.request_timeout_s, client_timeout_s)
        return await verifier.verify(request.items, timeout_s=within)
    finally:
        verifier.release(n)
