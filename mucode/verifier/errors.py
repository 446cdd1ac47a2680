"""Error handlers: every user mistake is a 4xx ``ErrorResponse`` that says what is wrong."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["install_error_handlers"]

logger = logging.getLogger(__name__)


def _loc(loc: tuple[object, ...] | list[object]) -> str:
    parts = [p for p in loc if p != "body"]
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".") or "body"


def _problem(error: dict[str, Any]) -> str:
    if tuple(error["loc"]) == ("body",) and error.get("type") in ("model_attributes_type", "dict_type"):
        return (
            "body: must be a JSON object (e.g. {\"items\": [...]}) sent with 'Content-Type: application/json'"
        )
    return f"{_loc(error['loc'])}: {error['msg']}"


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        e = next(e for e in errors if e.get("type") == "json_invalid")
        ctx = e.get("ctx") or {}
        return JSONResponse(
            status_code=400,
            content={
                "error": f"request body is not valid JSON: {ctx.get('error', e.get('msg'))}",
                "problems": [],
            },
        )
    problems = [_problem(e) for e in errors]
    return JSONResponse(
        status_code=422,
        content={
            "error": f"invalid request: {len(problems)} problem{'s' if len(problems) != 1 else ''}",
            "problems": problems,
        },
    )


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    detail = exc.detail
    if isinstance(detail, dict):
        content = {"error": str(detail.get("error", "")), "problems": list(detail.get("problems", []))}
    else:
        content = {"error": str(detail), "problems": []}
    return JSONResponse(status_code=exc.status_code, content=content, headers=getattr(exc, "headers", None))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse(
        status_code=500,
        content={
            "error": f"internal verifier error ({type(exc).__name__}); this is a bug in mucode, please report it",
            "problems": [],
        },
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
