"""The Docker engine as the ``docker`` backend drives it: the Docker SDK (docker-py), off the event loop.

Every SDK call blocks (HTTP over the engine's Unix socket), so :class:`Engine` runs each in a worker
thread (``asyncio.to_thread``) and the events stream in a thread of its own that hands events to the
loop; nothing here blocks the event loop. The API version is negotiated with the engine
(``version="auto"``: Debian's docker.io 20.10 speaks API 1.41, which docker-py 7 supports).

:func:`container_options` is the hardened container, as SDK arguments. The ``docker run`` equivalent
(docs/sandbox.md) is::

    docker run -d --network none --read-only --ipc none --cap-drop ALL --cap-add SETUID
      --cap-add SETGID --security-opt no-new-privileges --pids-limit P --memory M --memory-swap M
      --cpus C --cpu-shares 1024*S --tmpfs /scratch/<i>:size=..,uid=<uid_base+i>,mode=0700,nosuid,nodev,noexec
      --tmpfs /build/<i>:size=..,uid=<uid_base+i+2000>,gid=<uid_base+i>,mode=0750,nosuid,nodev,exec
      -v <private host dir>:/run/mucode  IMAGE --socket /run/mucode/executor.sock --slots S ...

(Docker's default seccomp profile applies, as with the CLI: nothing here turns it off.)

Where the CLI remains, and why: the one-time set-up scripts, which build the sandbox image
(``docker build`` in scripts/docker_setup.sh) and import its debootstrap base (``docker import`` of
a tar stream in scripts/build_base_image.sh). They are bash steps next to ``apt-get`` and starting
``dockerd``, which no SDK does, and a user can re-run them, or the single ``docker build`` line in
docs/sandbox.md, without Python; doing the build from Python would add no behaviour. Tests also use
the CLI to play the part of someone else (killing a container, starting executors for ``attach``).
Everything mucode does at run time (create, start, inspect, logs, list, remove, events, the engine
version of ``mucode env``) goes through the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import docker.errors  # binds `docker` too (one import: ruff would file a bare `import docker` under the repo's docker/ dir)  # noqa: E501

from mucode.sandbox.executor.languages import BUILD_UID_OFFSET

logger = logging.getLogger(__name__)

__all__ = ["LABEL", "DockerError", "Engine", "container_options"]

LABEL = "mucode.sandbox"
"""Label prefix of sandbox containers: ``LABEL=1``, ``LABEL.owner=<pid>-<hex>``, ``LABEL.pidns``."""

R = TypeVar("R")


class DockerError(RuntimeError):
    """The Docker engine refused or failed a call (the message names the fix where there is one)."""


SCRATCH_INODES = 32768
"""Inodes (files, dirs, hard links) per slot scratch tmpfs: about 1 KiB of kernel memory each, so a
slot's files hold at most ~32 MiB beyond their size (the kernel's default is half the RAM in pages).
The local backend's jail.sh mounts its scratch dirs with the same number."""


def container_options(
    *,
    name: str,
    image: str,
    sock_dir: str,
    slots: int,
    uid_base: int,
    scratch_mb: int,
    memory_mb: int,
    cpus: float,
    pids_limit: int,
    owner: str,
    executor_args: list[str],
    oom_score_adj: int | None = -1000,
) -> dict[str, Any]:
    """Keyword arguments of ``DockerClient.containers.create`` for one sandbox container.
    ``oom_score_adj`` (None: the daemon's default): the executor's root processes are never the OOM
    killer's choice at -1000 (its test processes raise theirs to 1000)."""
    tmpfs = {
        f"/scratch/{i}": f"rw,nosuid,nodev,noexec,size={scratch_mb}m,nr_inodes={SCRATCH_INODES},uid={uid},"
        f"gid={uid},mode=0700"
        for i, uid in enumerate(range(uid_base, uid_base + slots))
    }
    # The build dirs: the only exec mounts, written by the compile step's uid alone (languages.py).
    tmpfs.update(
        {
            f"/build/{i}": f"rw,nosuid,nodev,exec,size={scratch_mb}m,nr_inodes=4096,uid={uid + BUILD_UID_OFFSET},"
            f"gid={uid},mode=0750"
            for i, uid in enumerate(range(uid_base, uid_base + slots))
        }
    )
    options: dict[str, Any] = {
        "image": image,
        "name": name,
        "command": [
            "--socket",
            "/run/mucode/executor.sock",
            "--slots",
            str(slots),
            "--uid-base",
            str(uid_base),
            "--scratch",
            "/scratch",
            *executor_args,
        ],
        "labels": {LABEL: "1", f"{LABEL}.owner": owner, f"{LABEL}.pidns": os.readlink("/proc/self/ns/pid")},
        "network_mode": "none",
        "read_only": True,
        "ipc_mode": "none",
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": pids_limit,
        "mem_limit": f"{memory_mb}m",
        "memswap_limit": f"{memory_mb}m",
        # A container is one CPU scheduling group: with the default weight (1024) its slots together
        # weigh as much as one host process. Weight it like `slots` processes.
        "cpu_shares": 1024 * slots,
        "tmpfs": tmpfs,
        "volumes": {sock_dir: {"bind": "/run/mucode", "mode": "rw"}},
    }
    if cpus > 0:
        options["nano_cpus"] = int(cpus * 1e9)
    if oom_score_adj is not None:
        options["oom_score_adj"] = oom_score_adj
    return options


class Engine:
    """One Docker engine connection (``base_url`` None: ``DOCKER_HOST`` or the default socket).
    Connecting is lazy: building an Engine talks to nothing."""

    def __init__(self, base_url: str | None = None, timeout_s: float = 60.0) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._client: docker.DockerClient | None = None

    def _connect(self) -> docker.DockerClient:
        if self._client is None:
            try:
                if self.base_url:
                    self._client = docker.DockerClient(
                        base_url=self.base_url, version="auto", timeout=int(self.timeout_s)
                    )
                else:
                    self._client = docker.from_env(version="auto", timeout=int(self.timeout_s))
            except docker.errors.DockerException as exc:
                raise DockerError(
                    f"cannot reach the Docker engine ({exc}); start it with "
                    "`bash scripts/docker_setup.sh`, or set DOCKER_HOST"
                ) from None
        return self._client

    async def call(self, what: str, fn: Callable[[docker.DockerClient], R]) -> R:
        """``fn(client)`` in a worker thread; SDK errors become DockerError naming ``what``."""

        def run() -> R:
            client = self._connect()
            try:
                return fn(client)
            except docker.errors.DockerException as exc:
                raise DockerError(f"docker {what} failed: {str(exc)[-1500:]}") from exc

        return await asyncio.to_thread(run)

    @property
    def api_version(self) -> str:
        """The negotiated API version (connects if needed; blocking)."""
        return str(self._connect().api.api_version)

    def server_version(self) -> str:
        """The engine's version, e.g. ``20.10.24+dfsg1`` (blocking; raises DockerError if unreachable)."""
        try:
            return str(self._connect().version().get("Version", "unknown"))
        except docker.errors.DockerException as exc:
            raise DockerError(f"docker version failed: {exc}") from None

    async def check_image(self, image: str) -> None:
        try:
            await self.call("image inspect", lambda c: c.images.get(image))
        except DockerError as exc:
            raise DockerError(
                f"sandbox image {image!r} not available ({exc}); build it with `bash scripts/docker_setup.sh`"
            ) from None

    async def run(self, options: dict[str, Any]) -> None:
        """Create and start a container; a container that fails to start is removed again."""

        def create_and_start(client: docker.DockerClient) -> None:
            container = client.containers.create(**options)
            try:
                container.start()
            except docker.errors.DockerException:
                client.api.remove_container(options["name"], force=True, v=True)
                raise

        await self.call("run", create_and_start)

    async def inspect(self, name: str) -> dict[str, Any]:
        attrs: dict[str, Any] = await self.call("inspect", lambda c: c.api.inspect_container(name))
        return attrs

    async def logs(self, name: str, tail: int = 20) -> str:
        try:
            out: bytes = await self.call("logs", lambda c: c.api.logs(name, tail=tail))
            return out.decode(errors="replace")[-1500:]
        except DockerError as exc:
            return str(exc)

    async def remove(self, name: str) -> None:
        """Force-remove a container and its anonymous volumes; a missing one is not an error."""

        def rm(client: docker.DockerClient) -> None:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(name, force=True, v=True)

        await self.call("rm", rm)

    async def labelled(self, label: str) -> list[tuple[str, dict[str, str]]]:
        """``(name, labels)`` of every container (running or not) carrying ``label`` (``k`` or ``k=v``)."""

        def ls(client: docker.DockerClient) -> list[tuple[str, dict[str, str]]]:
            return [
                (str(c.name), dict(c.labels))
                for c in client.containers.list(all=True, filters={"label": label})
            ]

        return await self.call("ps", ls)

    def watch_events(self, filters: dict[str, Any], on_event: Callable[[dict[str, Any]], None]) -> EventWatch:
        """Start streaming the engine's events matching ``filters`` (SDK filter syntax) to
        ``on_event``, called on the running event loop. Returns a handle whose ``close()`` stops it."""
        return EventWatch(self, filters, on_event, asyncio.get_running_loop())

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class EventWatch:
    """The engine's events stream, read by a daemon thread; reconnects after a broken stream (an
    engine restart) until closed. Events pass to ``on_event`` through ``loop.call_soon_threadsafe``."""

    def __init__(
        self,
        engine: Engine,
        filters: dict[str, Any],
        on_event: Callable[[dict[str, Any]], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._engine = engine
        self._filters = filters
        self._on_event = on_event
        self._loop = loop
        self._closed = threading.Event()
        self._stream: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mucode-docker-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        since: int | None = None  # after a reconnect, replay what happened since the last event seen
        pause = 1.0
        while not self._closed.is_set():
            wait_s = 1.0  # a stream the engine ended cleanly (shutdown): try again soon
            try:
                since = since if since is not None else int(time.time())
                stream = self._engine._connect().api.events(since=since, decode=True, filters=self._filters)
                with self._lock:
                    if self._closed.is_set():
                        stream.close()
                        return
                    self._stream = stream
                for event in stream:
                    if self._closed.is_set():
                        return
                    since = event.get("time", since)
                    pause = 1.0
                    self._loop.call_soon_threadsafe(self._on_event, event)
            except Exception as exc:  # noqa: BLE001 - a broken stream (engine restart, loop closed): retry
                if self._closed.is_set() or self._loop.is_closed():
                    return
                logger.warning("docker events stream broke (%r); reconnecting in %.0f s", exc, pause)
                wait_s, pause = pause, min(30.0, pause * 2)
            self._closed.wait(wait_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the stream and wait (bounded) for its thread to end."""
        with self._lock:
            self._closed.set()
            if self._stream is not None:
                try:
                    self._stream.close()
                except Exception as exc:  # noqa: BLE001 - closing a dead socket is fine
                    logger.debug("closing the docker events stream: %r", exc)
        self._thread.join(timeout_s)
