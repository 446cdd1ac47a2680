"""The ``docker`` backend: a warm pool of hardened sandbox containers, or attached executors.

Managed mode (``make_backend("docker")``): ``start()`` runs ``containers`` containers of ``image``
(built by scripts/docker_setup.sh), each running the executor with ``slots_per_container`` slots:

    docker run -d --network none --read-only --ipc none --cap-drop ALL --cap-add SETUID
      --cap-add SETGID --security-opt no-new-privileges --pids-limit P --memory M --memory-swap M
      --cpus C --tmpfs /scratch/<i>:size=..,uid=<uid_base+i>,mode=0700,nosuid,nodev (one per slot)
      -v <private host dir>:/run/mucode  IMAGE --socket /run/mucode/executor.sock --slots S ...

Jobs go over the Unix socket in the bind-mounted dir (no network, no ``docker exec`` per job). A
monitor pings every executor every ``health_interval_s``; a container that stopped, does not
answer, or reports leftover processes of an idle slot or a writable shared dir (tampering) is
removed and replaced. Jobs running there come back ``sandbox_error``.

Attach mode (``make_backend("docker", socket_dir="/run/mucode")``): executors someone else
started (docker compose services sharing a volume of Unix sockets; see docs/sandbox.md). Every
``*.sock`` with a matching ``.ctl`` in the dir is used; the dir is rescanned by the monitor, an
executor that stops answering is dropped until it answers again. Nothing is started or stopped, and
the verifier needs no access to the Docker socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from mucode.sandbox.client import Endpoint, ExecutorError, SlotPool, ctl_path_for
from mucode.sandbox.pooled import PooledBackend

logger = logging.getLogger(__name__)

LABEL = "mucode.sandbox"


class DockerError(RuntimeError):
    pass


async def _docker(*args: str, docker: str = "docker", timeout_s: float = 60.0) -> str:
    proc = await asyncio.create_subprocess_exec(docker, *args, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise DockerError(f"`docker {' '.join(args[:2])}` timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise DockerError(f"`docker {' '.join(args[:3])} ...` failed: {err.decode(errors='replace').strip()[-1500:]}")
    return out.decode()


def run_args(*, name: str, image: str, sock_dir: str, slots: int, uid_base: int, scratch_mb: int,
             memory_mb: int, cpus: float, pids_limit: int, owner: str, executor_args: list[str]) -> list[str]:
    """The ``docker run`` arguments of one sandbox container (also shown in docs/sandbox.md)."""
    args = ["run", "-d", "--name", name, "--label", f"{LABEL}=1", "--label", f"{LABEL}.owner={owner}",
            "--label", f"{LABEL}.pidns={os.readlink('/proc/self/ns/pid')}",
            "--network", "none", "--read-only", "--ipc", "none",
            "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID",
            "--security-opt", "no-new-privileges",
            "--pids-limit", str(pids_limit), "--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m",
            "-v", f"{sock_dir}:/run/mucode"]
    if cpus > 0:
        args += ["--cpus", str(cpus)]
    # A container is one CPU scheduling group: with the default weight (1024) its slots together
    # weigh as much as one host process. Weight it like `slots` processes.
    args += ["--cpu-shares", str(1024 * slots)]
    for i in range(slots):
        uid = uid_base + i
        args += ["--tmpfs", f"/scratch/{i}:rw,nosuid,nodev,noexec,size={scratch_mb}m,uid={uid},gid={uid},mode=0700"]
    args += [image, "--socket", "/run/mucode/executor.sock", "--slots", str(slots), "--uid-base", str(uid_base),
             "--scratch", "/scratch", *executor_args]
    return args


class DockerBackend(PooledBackend):
    """Options (managed mode): ``image`` (default mucode-sandbox:latest), ``containers`` (4),
    ``slots_per_container`` (1: every run has a container, and so CPU, memory and pids cgroups, of
    its own; more slots per container trade that for density: the slots then share the container's
    cgroups, so a fork bomb in one slot takes CPU from the others), ``uid_base`` (10000; container k uses uid_base + k*slots + i),
    ``scratch_mb`` (64, tmpfs per slot),
    ``memory_mb`` (per container; default 1024 x slots), ``cpus`` (per container, default: all
    cores; 0: no CPU quota),
    ``pids_limit`` (per container, default 64 x slots + 16), ``nproc``/``fsize_mb``/
    ``output_limit_bytes``/``wall_factor`` (executor limits), ``deadline_slack_s`` (how long a slot
    may stay busy past a test's wall limit before the executor counts it as stuck and replaces its
    processes; health is not ok meanwhile), ``docker`` (CLI path),
    ``health_interval_s`` (5), ``start_timeout_s`` (60).
    Attach mode: ``socket_dir`` (a dir of executor sockets); the managed options are ignored."""

    name = "docker"

    def __init__(self, *, socket_dir: str | Path | None = None, image: str = "mucode-sandbox:latest",
                 containers: int = 4, slots_per_container: int = 1, uid_base: int = 10000,
                 scratch_mb: int = 64, memory_mb: int | None = None, cpus: float | None = None,
                 pids_limit: int | None = None, nproc: int = 64, fsize_mb: int = 32,
                 output_limit_bytes: int = 16 << 20, wall_factor: float = 2.0, deadline_slack_s: float = 45.0,
                 docker: str = "docker",
                 health_interval_s: float = 5.0, start_timeout_s: float = 60.0,
                 acquire_timeout_s: float = 600.0) -> None:
        super().__init__(acquire_timeout_s=acquire_timeout_s)
        self.socket_dir = Path(socket_dir) if socket_dir else None
        self.image = image
        self.containers = containers
        self.slots = slots_per_container
        self.uid_base = uid_base
        self.scratch_mb = scratch_mb
        self.memory_mb = memory_mb or 1024 * slots_per_container
        self.cpus = float(os.cpu_count() or 1) if cpus is None else cpus
        self.pids_limit = pids_limit or nproc * slots_per_container + 16
        self.executor_args = ["--nproc", str(nproc), "--fsize-mb", str(fsize_mb),
                              "--output-limit-bytes", str(output_limit_bytes), "--wall-factor", str(wall_factor),
                              "--deadline-slack-s", str(deadline_slack_s)]
        self.docker = docker
        self.health_interval_s = health_interval_s
        self.start_timeout_s = start_timeout_s
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._host_dir: Path | None = None
        self._containers: dict[str, Path] = {}  # container name -> its socket dir
        self._index: dict[str, int] = {}  # container name -> its index k (uids uid_base + k*slots + i)
        self._replacing: set[str] = set()
        self._starting: set[str] = set()
        self.replaced = 0

    @property
    def attached(self) -> bool:
        return self.socket_dir is not None

    @property
    def slot_uids(self) -> list[int]:
        """Every container gets uids of its own: RLIMIT_NPROC counts per uid across the host, so
        a fork bomb in one container must not exhaust a slot of another."""
        return [self.uid_base + i for i in range(self.containers * self.slots)]

    @property
    def container_names(self) -> list[str]:
        return list(self._containers)

    async def start(self) -> None:
        if self._pool is not None:
            return
        self._pool = SlotPool()
        try:
            if self.attached:
                await self._scan()
                if not self._pool.endpoints:
                    raise DockerError(f"no executor answers in {self.socket_dir} (expected <name>.sock and "
                                      "<name>.ctl from sandbox containers sharing that volume)")
            else:
                await self._check_image()
                await self._collect_stale()
                self._host_dir = Path(tempfile.mkdtemp(prefix=f"mucode-docker-{os.getpid()}-"))
                await asyncio.gather(*[self._launch(k) for k in range(self.containers)])
        except BaseException:
            await self.close()
            raise
        if self.health_interval_s > 0:
            self._monitor = asyncio.create_task(self._watch())

    async def _check_image(self) -> None:
        if shutil.which(self.docker) is None:
            raise DockerError(f"`{self.docker}` not found: run `bash scripts/docker_setup.sh` (installs Docker, "
                              "starts dockerd, builds the sandbox image)")
        try:
            await _docker("image", "inspect", self.image, docker=self.docker, timeout_s=30)
        except DockerError as exc:
            raise DockerError(f"sandbox image {self.image!r} not available ({exc}); build it with "
                              "`bash scripts/docker_setup.sh`") from None

    async def _collect_stale(self) -> None:
        """Remove sandbox containers whose owner process (on this host) died without close()."""
        pidns = os.readlink("/proc/self/ns/pid")  # owners in other pid namespaces are not judged
        out = await _docker("ps", "-a", "--filter", f"label={LABEL}.pidns={pidns}", "--format",
                            f'{{{{.Names}}}} {{{{.Label "{LABEL}.owner"}}}}', docker=self.docker)
        for line in out.splitlines():
            name, _, owner = line.partition(" ")
            pid = owner.split("-")[0]
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
            with contextlib.suppress(DockerError):
                await _docker("rm", "-f", "-v", name, docker=self.docker)
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

    async def _start_container(self, name: str, sock_dir: Path, uid_base: int) -> None:
        await _docker(*run_args(name=name, image=self.image, sock_dir=str(sock_dir), slots=self.slots,
                                uid_base=uid_base, scratch_mb=self.scratch_mb, memory_mb=self.memory_mb,
                                cpus=self.cpus, pids_limit=self.pids_limit, owner=self.owner,
                                executor_args=self.executor_args), docker=self.docker)
        ep = Endpoint(name=name, socket_path=sock_dir / "executor.sock", slots=self.slots)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        while True:
            try:
                info = await ep.ping(timeout_s=2.0)
                break
            except ExecutorError:
                if loop.time() > deadline:
                    logs = await self._logs(name)
                    raise DockerError(f"sandbox container {name} did not answer within "
                                      f"{self.start_timeout_s:.0f} s; its log: {logs}") from None
                await asyncio.sleep(0.05)
        if not info.get("ok"):
            raise DockerError(f"sandbox container {name} reports unhealthy at start: {info}")
        ep.slots = int(info.get("slots", self.slots))
        await self.pool.add(ep)

    async def _logs(self, name: str) -> str:
        try:
            return (await _docker("logs", "--tail", "20", name, docker=self.docker, timeout_s=10))[-1500:]
        except DockerError as exc:
            return str(exc)

    async def _remove(self, name: str) -> None:
        if self._pool is not None:
            await self._pool.remove(name)
        sock_dir = self._containers.pop(name, None)
        self._index.pop(name, None)
        try:
            await _docker("rm", "-f", "-v", name, docker=self.docker, timeout_s=60)
        except DockerError as exc:
            if "No such container" not in str(exc):
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

    async def _probe(self, ep: Endpoint) -> str | None:
        """None when healthy, else why not. An executor must miss two pings in a row (a busy host
        can delay one) to count as gone."""
        try:
            info = await ep.ping_twice(timeout_s=3.0)
        except ExecutorError as exc:
            return str(exc)
        if not info.get("ok") and info.get("tampered", True):  # a stuck slot is replaced in there
            return (f"executor reports leftover processes {info.get('leftover_processes')} or writable "
                    f"shared dirs {info.get('writable_shared_dirs')} or broken slots {info.get('broken_slots')}")
        return None

    async def _executor_failed(self, ep: Endpoint, exc: Exception) -> None:
        reason = await self._probe(ep)
        if reason is None:
            return
        if self.attached:
            if self._pool is not None:
                await self._pool.remove(ep.name)
        elif ep.name not in self._replacing:
            if self._pool is not None:  # no new job goes there while it is being replaced
                await self._pool.remove(ep.name)
            task = asyncio.create_task(self._replace(ep.name, f"{reason} (after: {exc})"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _scan(self) -> None:
        """Attach mode: add every answering executor socket in socket_dir."""
        assert self.socket_dir is not None and self._pool is not None
        for sock in sorted(self.socket_dir.glob("*.sock")):
            if sock.stem in self._pool.endpoints or not ctl_path_for(sock).exists():
                continue
            ep = Endpoint(name=sock.stem, socket_path=sock)
            try:
                info = await ep.ping(timeout_s=2.0)
            except ExecutorError:
                continue
            if info.get("ok"):
                ep.slots = int(info.get("slots", 1))
                await self._pool.add(ep)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            try:
                for ep in list(self.pool.endpoints.values()):
                    await self._executor_failed(ep, RuntimeError("periodic health check"))
                if self.attached:
                    await self._scan()
                else:
                    for name in [n for n in self._containers if n not in self.pool.endpoints
                                 and n not in self._replacing and n not in self._starting]:
                        await self._replace(name, "missing from the pool")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep monitoring whatever happened
                logger.warning("sandbox monitor: %r", exc)

    async def health(self) -> dict[str, object]:
        out = await super().health()
        out.update({"mode": "attach" if self.attached else "managed", "replaced": self.replaced})
        return out

    async def close(self) -> None:
        await self._stop_background()
        if not self.attached:
            await asyncio.gather(*[self._remove(name) for name in list(self._containers)],
                                 return_exceptions=True)
            if self._host_dir is not None:
                shutil.rmtree(self._host_dir, ignore_errors=True)
                self._host_dir = None
        self._pool = None
