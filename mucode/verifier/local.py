"""``local_verifier(...)``: the verifier service on a free loopback port, in a background thread.

For the trainer, the evaluators and tests: ``with local_verifier("local") as url: ...``. The service
is the real one (``create_app``, uvicorn, HTTP): only its placement differs. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mucode.verifier.settings import VerifierSettings

__all__ = ["local_verifier"]


@contextmanager
def local_verifier(
    backend: str = "local", *, start_timeout_s: float = 300.0, **settings: Any
) -> Iterator[str]:
    """Starts the verifier service on 127.0.0.1:<free port>, yields its base URL, stops it.

    ``settings`` are ``VerifierSettings`` fields (e.g. ``math_workers=2``, ``programs=["math"]``).
    Raises ``RuntimeError`` if the service does not become ready (the log says why).
    """
    import uvicorn  # lazy: uvicorn

    from mucode.verifier.app import create_app  # lazy: fastapi

    config = VerifierSettings(backend=backend, host="127.0.0.1", port=0, **settings)
    app = create_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            failure.append(exc)

    thread = threading.Thread(target=run, name="mucode-local-verifier", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or failure or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout=30)
            sock.close()
            raise RuntimeError(
                f"the local verifier (backend={backend!r}) did not start"
                + (f": {failure[0]!r}" if failure else " (see the log above for the startup error)")
            )
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
