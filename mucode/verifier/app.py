"""The FastAPI app factory. Nothing is built at import time: ``create_app(settings)`` does it all.

The app's lifespan starts the ``Verifier`` (sandbox pool, math workers) and closes it on shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from mucode.verifier.core import Verifier
from mucode.verifier.errors import install_error_handlers
from mucode.verifier.limits import BodySizeLimit, RequestMetrics
from mucode.verifier.routers import health, metrics, openrlhf, run_code, verify
from mucode.verifier.settings import VerifierSettings

__all__ = ["create_app"]


def create_app(settings: VerifierSettings | None = None, *, verifier: Verifier | None = None) -> FastAPI:
    """Builds the service. Pass ``verifier`` to serve one you built (e.g. with a given sandbox backend)."""
    settings = settings or (verifier.settings if verifier is not None else VerifierSettings())
    core = verifier or Verifier(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await core.start()
        try:
            yield
        finally:
            await core.close()

    app = FastAPI(
        title="mucode verifier",
        summary="Binary rewards for code (sandboxed tests) and math (math-verify), plus plug-in programs.",
        version="1",
        lifespan=lifespan,
    )
    app.state.verifier = core
    install_error_handlers(app)
    for router in (verify.router, run_code.router, openrlhf.router, health.router, metrics.router):
        app.include_router(router)

    app.add_middleware(RequestMetrics, metrics=core.metrics)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    return app
