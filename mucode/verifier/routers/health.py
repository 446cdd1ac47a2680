"""``GET /healthz`` (the process answers) and ``GET /readyz`` (sandbox reachable, pools warm)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mucode.verifier.deps import VerifierDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, Any]:
    """Liveness: 200 while the process serves HTTP."""
    return {"ok": True}


@router.get("/readyz", responses={503: {"description": "Not ready: the body says which part is down."}})
async def readyz(verifier: VerifierDep) -> JSONResponse:
    """Readiness: 200 once the sandbox backend answers and the math workers are up; else 503."""
    health = await verifier.health()
    return JSONResponse(status_code=200 if health["ok"] else 503, content=health)
