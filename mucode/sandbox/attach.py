"""The ``attach`` backend: executors someone else started, reached through a dir of their sockets.

``make_backend("attach", socket_dir="/run/mucode")``: what docker compose does (compose.yaml) —
sandbox containers run the executor with ``--socket-dir``, each writing ``<hostname>.sock`` (jobs)
and ``<hostname>.ctl`` (health) into a shared volume, and the verifier attaches to that dir. Every
``*.sock`` with a matching ``.ctl`` that answers a ping is used; a monitor rescans the dir every
``health_interval_s``, so executors that come up later join the pool, and an executor that stops
answering (or reports leftover processes, writable shared dirs or broken slots) is dropped until it
answers healthy again.

Limits: nothing is started, stopped or replaced here — whoever started the executors restarts them
(compose's ``restart: unless-stopped`` and its health check). So this backend needs no Docker
socket, no Docker SDK and no network: the verifier container of compose.yaml has none of them.
Jobs running on an executor that dies come back ``sandbox_error`` (after one re-run on another slot).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from mucode.sandbox.client import Endpoint, ExecutorError, SlotPool, ctl_path_for
from mucode.sandbox.pooled import PooledBackend

logger = logging.getLogger(__name__)

__all__ = ["AttachBackend", "NoExecutorError"]


class NoExecutorError(RuntimeError):
    """No executor answers in the socket dir at start."""


class AttachBackend(PooledBackend):
    """Options: ``socket_dir`` (required: the dir of executor sockets), ``health_interval_s`` (5;
    0: no monitor, no rescans), ``acquire_timeout_s`` (600: how long a job waits for a free slot)."""

    name = "attach"

    def __init__(
        self, *, socket_dir: str | Path, health_interval_s: float = 5.0, acquire_timeout_s: float = 600.0
    ) -> None:
        super().__init__(acquire_timeout_s=acquire_timeout_s)
        if not socket_dir:
            raise ValueError(
                "the attach backend needs socket_dir (the dir of executor sockets, e.g. "
                'MUCODE_BACKEND_OPTIONS=\'{"socket_dir": "/run/mucode"}\')'
            )
        self.socket_dir = Path(socket_dir)
        self.health_interval_s = health_interval_s

    async def start(self) -> None:
        if self._pool is not None:
            return
        self._pool = SlotPool()
        await self._scan()
        if not self._pool.endpoints:
            self._pool = None
            raise NoExecutorError(
                f"no executor answers in {self.socket_dir} (expected <name>.sock and <name>.ctl "
                "from sandbox containers sharing that volume): start them first"
            )
        if self.health_interval_s > 0:
            self._start_monitor(self.health_interval_s, "attached", self._scan)

    async def _scan(self) -> None:
        """Add every answering executor socket in socket_dir that is not in the pool yet."""
        pool = self.pool
        for sock in sorted(self.socket_dir.glob("*.sock")):
            if sock.stem in pool.endpoints or not ctl_path_for(sock).exists():
                continue
            ep = Endpoint(name=sock.stem, socket_path=sock)
            try:
                info = await ep.ping(timeout_s=2.0)
            except ExecutorError:
                continue
            if info.get("ok"):
                ep.slots = int(info.get("slots", 1))
                await pool.add(ep)

    async def _executor_failed(self, ep: Endpoint, exc: Exception) -> None:
        reason = await self._probe(ep)
        if reason is not None and self._pool is not None:
            logger.warning(
                "dropping attached executor %s until it answers healthy again: %s (after: %s)",
                ep.name,
                reason,
                exc,
            )
            await self._pool.remove(ep.name)

    async def health(self) -> dict[str, object]:
        out = await super().health()
        out.update({"mode": "attach", "socket_dir": str(self.socket_dir)})
        return out

    async def close(self) -> None:
        """Stops monitoring; the executors keep running (they were not started here)."""
        with contextlib.suppress(Exception):
            await self._stop_background()
        self._pool = None
