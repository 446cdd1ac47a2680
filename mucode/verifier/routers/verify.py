"""``POST /v1/verify``: a batch of items in, one result per item out."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, status

from mucode.verifier.deps import Authorized, VerifierDep
from mucode.verifier.schemas import ErrorResponse, VerifyRequest, VerifyResponse

router = APIRouter(tags=["verify"])

_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (400, 401, 413, 422)}


@router.post("/v1/verify", response_model=VerifyResponse, dependencies=[Authorized], responses=_ERRORS)
async def verify(request: VerifyRequest, verifier: VerifierDep) -> VerifyResponse:
    """Scores a batch. Items of different programs may be mixed; they are scored concurrently.

    Infrastructure failures come back per item as ``verifier_error``/``sandbox_error`` (no reward
    signal: mask them); mistakes in the request (unknown program, invalid spec) are a 4xx for the whole
    batch before any work starts.
    """
    limit = verifier.settings.max_items_per_request
    if len(request.items) > limit:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail=(
            f"{len(request.items)} items in one request; the limit is {limit}: split the batch "
            "(VerifierClient(batch_size=...)) or raise MUCODE_MAX_ITEMS_PER_REQUEST"))
    problems = verifier.validate(request.items)
    if problems:
        shown = [str(p) for p in problems[:50]]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail={
            "error": f"invalid items: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
                     + (" (first 50 shown)" if len(problems) > 50 else ""),
            "problems": shown})
    results = await verifier.verify(request.items)
    return VerifyResponse(results=results)
