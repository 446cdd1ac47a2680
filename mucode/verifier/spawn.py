"""``spawned_verifier(...)``: the verifier service in a child process on a free loopback port.

What the trainer starts when no verifier URL is configured. Unlike ``local_verifier`` (a thread of
the caller's process) the service's event loop, JSON and HTTP work then run on a core of their own
instead of sharing the trainer's GIL; only the placement differs: the same ``create_app``, uvicorn
and HTTP on 127.0.0.1.

The child (``python -m mucode.verifier.spawn SETTINGS_JSON``) binds port 0, serves, and writes
``ready <port>`` on its stdout once the lifespan start-up (sandbox pool, math workers) is done. It
stops when its stdin reaches end of file, so it never outlives the trainer, even one that was
killed; on a normal exit the parent closes that pipe and waits for the graceful shutdown.

Limits: ``settings`` must be JSON (they cross a process boundary); start-up costs the child's
imports (~1 s of CPU) on top of the service's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from mucode import logs
from mucode.verifier.settings import VerifierSettings

__all__ = ["spawned_verifier"]


@contextlib.contextmanager
def spawned_verifier(
    backend: str = "local", *, start_timeout_s: float = 300.0, **settings: Any
) -> Iterator[str]:
    """Starts the verifier service in a child process, yields its base URL, stops it.

    ``settings`` are ``VerifierSettings`` fields (e.g. ``math_workers=2``, ``programs=["math"]``).
    Raises ``RuntimeError`` if the service does not become ready (its log, on stderr, says why).
    """
    config = json.dumps({"backend": backend, **settings})
    child = subprocess.Popen(
        [sys.executable, "-m", "mucode.verifier.spawn", config],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: lines.put(child.stdout.readline() if child.stdout else ""),
        name="mucode-verifier-ready",
        daemon=True,
    ).start()
    try:
        line = lines.get(timeout=start_timeout_s)
    except queue.Empty:
        line = ""
    try:
        if not line.startswith("ready "):
            if line:  # something else wrote on the readiness pipe
                why = f"said {line.strip()[:200]!r} instead of 'ready <port>'"
            elif child.poll() is None and not _exited(child):
                why = f"did not start within {start_timeout_s} s"
            else:
                why = f"exited during start-up (code {child.returncode}; its log above says why)"
            raise RuntimeError(f"the verifier process (backend={backend!r}) {why}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        with contextlib.suppress(OSError):
            child.stdin.close()  # end of file: the child shuts down gracefully
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()


def _exited(child: subprocess.Popen[str], wait_s: float = 10.0) -> bool:
    try:
        child.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _serve(config: dict[str, Any]) -> None:
    import uvicorn  # lazy: uvicorn

    from mucode.verifier.app import create_app  # lazy: fastapi

    logs.configure()
    settings = VerifierSettings(host="127.0.0.1", port=0, **config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), log_level="warning", lifespan="on", access_log=False)
    )
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # a stray print must not look like the readiness line

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        if server.started:
            out.write(f"ready {port}\n")

    def watch_parent() -> None:
        sys.stdin.read()  # returns at end of file: the parent closed the pipe or died
        server.should_exit = True

    threading.Thread(target=announce, daemon=True).start()
    threading.Thread(target=watch_parent, daemon=True).start()
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
