"""The ``docker`` backend: a managed pool of hardened sandbox containers that mucode starts,
watches and replaces.

``make_backend("docker", **options)``: ``start()`` runs ``containers`` containers of ``image``
(built by scripts/docker_setup.sh), each running the executor with ``slots_per_container`` slots,
hardened as :func:`mucode.sandbox.docker_engine.container_options` says (no network, read-only
root, no IPC, every capability dropped but SETUID/SETGID, no-new-privileges, Docker's default
seccomp profile, pids/memory/CPU limits, a private tmpfs per slot). Containers are managed through
the Docker SDK (docker_engine.py), never by running the ``docker`` CLI.

Jobs go over the Unix socket in each container's bind-mounted dir (no network, no ``docker exec``
per job). A container that dies is noticed from the engine's events stream and replaced at once; a
monitor also pings every executor every ``health_interval_s`` and replaces one that does not
answer, or reports leftover processes of an idle slot, a writable shared dir or broken slots
(tampering). Jobs running in a replaced container come back ``sandbox_error`` (after one re-run on
a fresh slot). Sandbox containers (and socket dirs) left by an owner process on this host that died
without ``close()`` are removed by the next backend that starts.

Executors started by someone else (docker compose) are the ``attach`` backend (attach.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, ClassVar

from mucode.sandbox.client import Endpoint, ExecutorError, SlotPool
from mucode.sandbox.docker_engine import LABEL, DockerError, Engine, EventWatch, container_options
from mucode.sandbox.executor.languages import BUILD_UID_OFFSET
from mucode.sandbox.pooled import PooledBackend

logger = logging.getLogger(__name__)

__all__ = ["LABEL", "DockerError", "DockerPoolBackend"]


class DockerPoolBackend(PooledBackend):
    """Options: ``image`` (default mucode-sandbox:latest), ``containers`` (4),
    ``slots_per_container`` (1: every run has a container, and so CPU, memory and pids cgroups, of
    its own; more slots per container trade that for density: the slots then share the container's
    cgroups, so a fork bomb in one slot takes CPU from the others), ``uid_base`` (10000; container k
    uses uid_base + k*slots + i), ``scratch_mb`` (64, tmpfs per slot), ``memory_mb`` (per container;
    default 1024 x slots), ``cpus`` (per container, default: all cores; 0: no CPU quota),
    ``pids_limit`` (per container, default 64 x slots + 16), ``nproc``/``fsize_mb``/
    ``output_limit_bytes``/``wall_factor`` (executor limits), ``deadline_slack_s`` (how long a slot
    may stay busy past a test's wall limit before the executor counts it as stuck and replaces its
    processes; health is not ok meanwhile), ``docker_host`` (engine URL; default ``DOCKER_HOST`` or
    the local socket), ``health_interval_s`` (5; 0: no monitor and no events stream),
    ``start_timeout_s`` (60), ``acquire_timeout_s`` (600), ``oom_score_adj`` (-1000, the
    executor's processes out of the OOM killer's reach; a daemon that may not lower it, one
    without CAP_SYS_RESOURCE, fails to start such a container: the pool then warns once and starts
    its containers without it, at 0, still below the test processes' 1000)."""

    name = "docker"
    option_hints: ClassVar[dict[str, str]] = {
        "socket_dir": "executors started elsewhere (a dir of their sockets, as in compose.yaml) are the "
        "`attach` backend: MUCODE_BACKEND=attach",
        "docker": "the docker backend uses the Docker SDK, not the CLI: set docker_host (or DOCKER_HOST) instead",
    }

    def __init__(
        self,
        *,
        image: str = "mucode-sandbox:latest",
        containers: int = 4,
        slots_per_container: int = 1,
        uid_base: int = 10000,
        scratch_mb: int = 64,
        memory_mb: int | None = None,
        cpus: float | None = None,
        pids_limit: int | None = None,
        nproc: int = 64,
        fsize_mb: int = 32,
        output_limit_bytes: int = 16 << 20,
        wall_factor: float = 2.0,
        deadline_slack_s: float = 45.0,
        docker_host: str | None = None,
        health_interval_s: float = 5.0,
        start_timeout_s: float = 60.0,
        acquire_timeout_s: float = 600.0,
        oom_score_adj: int | None = -1000,
    ) -> None:
        super().__init__(acquire_timeout_s=acquire_timeout_s)
        self.oom_score_adj = oom_score_adj
        self.image = image
        self.containers = containers
        self.slots = slots_per_container
        self.uid_base = uid_base
        self.scratch_mb = scratch_mb
        self.memory_mb = memory_mb or 1024 * slots_per_container
        self.cpus = float(os.cpu_count() or 1) if cpus is None else cpus
        self.pids_limit = pids_limit or nproc * slots_per_container + 16
        self.executor_args = [
            "--nproc",
            str(nproc),
            "--fsize-mb",
            str(fsize_mb),
            "--output-limit-bytes",
            str(output_limit_bytes),
            "--wall-factor",
            str(wall_factor),
            "--deadline-slack-s",
            str(deadline_slack_s),
        ]
        self.engine = Engine(docker_host)
        self.health_interval_s = health_interval_s
        self.start_timeout_s = start_timeout_s
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._host_dir: Path | None = None
        self._containers: dict[str, Path] = {}  # container name -> its socket dir
        self._index: dict[str, int] = {}  # container name -> its index k (uids uid_base + k*slots + i)
        self._replacing: set[str] = set()
        self._starting: set[str] = set()
        self._died_starting: set[str] = set()  # died (events stream) before answering its first ping
        self._events: EventWatch | None = None
        self.replaced = 0

    @property
    def slot_uids(self) -> list[int]:
        """Every container gets uids of its own: RLIMIT_NPROC counts per uid across the host, so
        a fork bomb in one container must not exhaust a slot of another."""
        return [self.uid_base + i for i in range(self.containers * self.slots)]

    @property
    def build_uids(self) -> list[int]:
        """The uids compile steps run as (one per slot: ``languages.BUILD_UID_OFFSET``)."""
        return [uid + BUILD_UID_OFFSET for uid in self.slot_uids]

    @property
    def container_names(self) -> list[str]:
        return list(self._containers)

    async def start(self) -> None:
        if self._pool is not None:
            return
        self._pool = SlotPool()
        try:
            await self.engine.check_image(self.image)
            await self._collect_stale()
            self._host_dir = Path(tempfile.mkdtemp(prefix=f"mucode-docker-{os.getpid()}-"))
            if (
                self.health_interval_s > 0
            ):  # watching from the start: a container that exits at once fails fast
                self._events = self.engine.watch_events(
                    {"type": "container", "event": ["die"], "label": f"{LABEL}.owner={self.owner}"},
                    self._on_event,
                )
            await asyncio.gather(*[self._launch(k) for k in range(self.containers)])
        except BaseException:
            await self.close()
            raise
        if self.health_interval_s > 0:
            self._start_monitor(self.health_interval_s, "managed docker", self._replace_missing)

    async def _collect_stale(self) -> None:
        """Remove sandbox containers whose owner process (on this host) died without close()."""
        pidns = os.readlink("/proc/self/ns/pid")  # owners in other pid namespaces are not judged
        for name, labels in await self.engine.labelled(f"{LABEL}.pidns={pidns}"):
            pid = labels.get(f"{LABEL}.owner", "").split("-")[0]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
                continue  # owner alive (or a pid we cannot judge): leave it
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            logger.warning("removing sandbox container %s: its owner process %s is gone", name, pid)
            try:
                await self.engine.remove(name)
            except DockerError as exc:
                logger.warning("could not remove stale sandbox container %s: %s", name, exc)
        for stale in Path(tempfile.gettempdir()).glob("mucode-docker-*-*"):  # their socket dirs
            pid = stale.name.split("-")[2]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                shutil.rmtree(stale, ignore_errors=True)

    async def _launch(self, index: int) -> None:
        assert self._host_dir is not None
        name = f"mucode-sbx-{uuid.uuid4().hex[:12]}"
        sock_dir = self._host_dir / name
        sock_dir.mkdir(mode=0o700)
        self._containers[name] = sock_dir
        self._index[name] = index
        self._starting.add(name)
        try:
            await self._start_container(name, sock_dir, self.uid_base + index * self.slots)
        finally:
            self._starting.discard(name)

    def options(self, name: str, sock_dir: Path, uid_base: int) -> dict[str, Any]:
        """The SDK arguments of one sandbox container of this pool."""
        return container_options(
            name=name,
            image=self.image,
            sock_dir=str(sock_dir),
            slots=self.slots,
            uid_base=uid_base,
            scratch_mb=self.scratch_mb,
            memory_mb=self.memory_mb,
            cpus=self.cpus,
            pids_limit=self.pids_limit,
            owner=self.owner,
            executor_args=self.executor_args,
            oom_score_adj=self.oom_score_adj,
        )

    async def _start_container(self, name: str, sock_dir: Path, uid_base: int) -> None:
        asked = self.oom_score_adj
        try:
            await self.engine.run(self.options(name, sock_dir, uid_base))
        except DockerError as exc:
            if asked is None or "OCI runtime" not in str(exc):
                raise
            if self.oom_score_adj is not None:
                logger.warning(
                    "docker sandbox: the daemon cannot start a container with oom_score_adj %d (%s); "
                    "starting the pool's containers without it",
                    asked,
                    str(exc)[-200:],
                )
            self.oom_score_adj = None
            await self.engine.remove(name)
            await self.engine.run(self.options(name, sock_dir, uid_base))
        ep = Endpoint(name=name, socket_path=sock_dir / "executor.sock", slots=self.slots)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        while True:
            try:
                info = await ep.ping(timeout_s=2.0)
                break
            except ExecutorError:
                died = name in self._died_starting
                if died or loop.time() > deadline:
                    self._died_starting.discard(name)
                    logs = await self.engine.logs(name)
                    why = "exited at start" if died else f"did not answer within {self.start_timeout_s:.0f} s"
                    raise DockerError(f"sandbox container {name} {why}; its log: {logs}") from None
                await asyncio.sleep(0.05)
        if not info.get("ok"):
            raise DockerError(f"sandbox container {name} reports unhealthy at start: {info}")
        ep.slots = int(info.get("slots", self.slots))
        await self.pool.add(ep)

    async def _remove(self, name: str) -> None:
        if self._pool is not None:
            await self._pool.remove(name)
        sock_dir = self._containers.pop(name, None)
        self._index.pop(name, None)
        try:
            await self.engine.remove(name)
        except DockerError as exc:
            logger.warning("could not remove sandbox container %s: %s", name, exc)
        if sock_dir is not None:
            shutil.rmtree(sock_dir, ignore_errors=True)

    async def _replace(self, name: str, reason: str) -> None:
        if name in self._replacing or name not in self._containers:
            return
        self._replacing.add(name)
        try:
            logger.warning("replacing sandbox container %s: %s", name, reason)
            index = self._index[name]
            await self._remove(name)  # its processes are gone before its uids are reused
            self.replaced += 1
            await self._launch(index)
        except DockerError as exc:  # the monitor retries: the container count is kept
            logger.warning("could not replace sandbox container %s: %s", name, exc)
        finally:
            self._replacing.discard(name)

    def _replace_soon(self, name: str, reason: str) -> None:
        """Replace ``name`` in a background task (kept in ``_tasks`` so close() waits for it)."""
        task = asyncio.create_task(self._replace(name, reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_event(self, event: dict[str, Any]) -> None:
        """A container of this pool died (events stream): replace it now, not at the next ping."""
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        name = str(attrs.get("name", ""))
        if name in self._starting:
            self._died_starting.add(name)  # _start_container gives up now instead of at its deadline
        elif name in self._containers and name not in self._replacing:
            self._replace_soon(
                name, f"container {event.get('Action', 'died')} (exit code {attrs.get('exitCode')})"
            )

    async def _executor_failed(self, ep: Endpoint, exc: Exception) -> None:
        reason = await self._probe(ep)
        if reason is None or ep.name in self._replacing:
            return
        if self._pool is not None:  # no new job goes there while it is being replaced
            await self._pool.remove(ep.name)
        self._replace_soon(ep.name, f"{reason} (after: {exc})")

    async def _replace_missing(self) -> None:
        """Replace each container of the pool that is neither in it nor already being replaced."""
        for name in [
            n
            for n in self._containers
            if n not in self.pool.endpoints and n not in self._replacing and n not in self._starting
        ]:
            await self._replace(name, "missing from the pool")

    async def health(self) -> dict[str, object]:
        out = await super().health()
        out.update({"mode": "managed", "replaced": self.replaced, "events": self._events is not None})
        return out

    async def close(self) -> None:
        if self._events is not None:
            await asyncio.to_thread(self._events.close)
            self._events = None
        await self._stop_background()
        await asyncio.gather(*[self._remove(name) for name in list(self._containers)], return_exceptions=True)
        if self._host_dir is not None:
            shutil.rmtree(self._host_dir, ignore_errors=True)
            self._host_dir = None
        self._pool = None
        self.engine.close()
