"""``GET /metrics``: Prometheus text format (metric glossary in mucode/verifier/metrics.py)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from mucode.verifier.deps import Authorized, VerifierDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", dependencies=[Authorized], response_class=Response)
async def metrics(verifier: VerifierDep) -> Response:
    await verifier.health()  # refreshes the pool gauges
    return Response(generate_latest(verifier.metrics.registry), media_type=CONTENT_TYPE_LATEST)
