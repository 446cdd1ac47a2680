"""Pure-ASGI middlewares: a request size limit (413 before the body is parsed, chunked bodies
included) and per-endpoint request metrics."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mucode.verifier.wire import MAX_REQUEST_BYTES_HEADER

__all__ = ["BodySizeLimit", "RequestMetrics"]


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> bytes:
        return json.dumps(
            {
                "error": f"request body is larger than the limit of {self.max_bytes} bytes; send smaller batches "
                "(VerifierClient(max_request_bytes=...) cuts them by bytes) or raise MUCODE_MAX_REQUEST_BYTES",
                "problems": [],
            }
        ).encode()

    async def _reject(self, send: Send) -> None:
        body = self._message()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (MAX_REQUEST_BYTES_HEADER.lower().encode(), str(self.max_bytes).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if length is not None:
            try:
                too_large = int(length) > self.max_bytes
            except ValueError:
                too_large = False
            if too_large:
                await self._reject(send)
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): read up to the limit here, then hand the body on in one piece.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body = message.get("body", b"")
            seen += len(body)
            if seen > self.max_bytes:
                await self._reject(send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class RequestMetrics:
    """Counts requests by endpoint and status code and times them (``verifier_request*``)."""

    def __init__(self, app: ASGIApp, metrics: Any) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        code = 500

        async def tracking_send(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(endpoint, str(code)).inc()
            self.metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - t0)
