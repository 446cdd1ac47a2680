"""The ``local`` backend: the sandbox executor on this host, in fresh Linux namespaces.

``start()`` runs, as root, ``env -i unshare --net --pid --mount --ipc --uts --fork --kill-child
sh executor/jail.sh ...``: the executor becomes pid 1 of a new pid namespace, with no network
interface but a down loopback, inside a minimal read-only root (the host's /usr, /bin, /lib* bound
read-only, a private /proc, a tmpfs scratch dir per slot owned by that slot's uid); see
``sandbox/jail.sh``. Jobs reach it through a Unix socket in a private temp dir.
Every test runs in a fresh process under the slot's unprivileged uid with the executor's rlimits
(see ``executor/runner.py``).

On a cgroup-v1 host (``cgroups=True``) each slot also gets cgroups of its own: one CPU weight (a
fork bomb competes as one task, not as 64), a memory limit (``slot_memory_mb``, scratch included;
an OOM kill there is ``memory_limit``) and a pids limit; they are removed by ``close()``.

What it does NOT protect against, compared with ``docker``:
- Without cgroup v1 (e.g. a cgroup-v2-only host) only rlimits apply: memory per process
  (RLIMIT_AS), per slot only NPROC x AS; CPU per process (RLIMIT_CPU) and the wall-clock kill; a
  fork bomb's processes each compete for CPU. No CPU quota either way: a run can use every core.
- No seccomp filter (docker applies its default profile): the whole syscall surface of the host
  kernel is reachable by the program, as an unprivileged uid.
- The host's /usr, /bin and /lib are visible (read-only): installed software, its versions and
  configuration under /usr are readable. /etc, /home, /root, /tmp, /var and the repo are not.
- The executor itself runs as the host's root with all capabilities inside the namespaces; a kernel
  bug that lets a program become root in there is a host root compromise. Docker adds a dropped
  capability set, no-new-privileges on the container and a separate root filesystem.
- Slot uids (``uid_base`` ...) are real host uids: they must not be used by anything else on the
  host (RLIMIT_NPROC counts every process of the uid, host-wide).
Needs root (or CAP_SYS_ADMIN) and ``unshare`` from util-linux.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from mucode.sandbox.client import Endpoint, ExecutorError, SlotPool
from mucode.sandbox.executor import EXECUTOR_DIR
from mucode.sandbox.executor.languages import BUILD_UID_OFFSET
from mucode.sandbox.pooled import PooledBackend

logger = logging.getLogger(__name__)

CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_CONTROLLERS = ("cpu", "memory", "pids")
UNSHARE_FLAGS = ("--net", "--pid", "--mount", "--ipc", "--uts", "--fork", "--kill-child")


def collect_stale_cgroups(min_age_s: float = 60.0) -> None:
    """Remove per-slot cgroups (and the temp dir of the same name) that a local backend which died
    without close() left behind: no task in any of them and older than ``min_age_s`` (so that a
    backend starting right now is never touched). Its jail exited on its own (stdin lifeline)."""
    for base in CGROUP_V1.glob("cpu/mucode-local-*"):
        name = base.name
        dirs = [CGROUP_V1 / c / name for c in CGROUP_CONTROLLERS]
        try:
            if time.time() - base.stat().st_mtime < min_age_s:
                continue
            if any(t.read_text().strip() for d in dirs if d.is_dir() for t in d.glob("slot*/tasks")):
                continue
        except OSError:
            continue
        for d in dirs:
            for slot in d.glob("slot*"):
                with contextlib.suppress(OSError):
                    slot.rmdir()
            with contextlib.suppress(OSError):
                d.rmdir()
        stale = Path(tempfile.gettempdir()) / name
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


class LocalBackend(PooledBackend):
    """One jailed executor with ``slots`` concurrent runs.

    Options: ``slots`` (concurrent runs, default 2), ``uid_base`` (slot i runs as uid_base+i,
    default 61000), ``scratch_mb`` (tmpfs per slot), ``python`` (interpreter under /usr used inside
    the jail), ``executor_dir`` (default: the installed ``sandbox``), ``nproc``/``fsize_mb``/
    ``output_limit_bytes``/``wall_factor``/``deadline_slack_s`` (executor limits; see the docker
    backend), ``cgroups``/``slot_memory_mb``
    (per-slot cgroups on cgroup-v1 hosts), ``start_timeout_s``,
    ``health_interval_s`` (restart a dead jail; 0 disables).
    """

    name = "local"

    def __init__(
        self,
        *,
        slots: int = 2,
        uid_base: int = 61000,
        scratch_mb: int = 64,
        python: str = "/usr/bin/python3",
        executor_dir: str | Path | None = None,
        nproc: int = 64,
        fsize_mb: int = 32,
        output_limit_bytes: int = 16 << 20,
        wall_factor: float = 2.0,
        deadline_slack_s: float = 45.0,
        cgroups: bool = True,
        slot_memory_mb: int = 2048,
        start_timeout_s: float = 20.0,
        health_interval_s: float = 5.0,
        acquire_timeout_s: float = 600.0,
    ) -> None:
        super().__init__(acquire_timeout_s=acquire_timeout_s)
        self.slots = slots
        self.uid_base = uid_base
        self.scratch_mb = scratch_mb
        self.python = python
        self.executor_dir = Path(executor_dir) if executor_dir else EXECUTOR_DIR
        self.executor_args = [
            "--exit-on-stdin-eof",
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
        self.start_timeout_s = start_timeout_s
        self.health_interval_s = health_interval_s
        self.cgroups = cgroups
        self.slot_memory_mb = slot_memory_mb
        self.nproc = nproc
        self._cgroup: str | None = None
        self._workdir: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._lock: asyncio.Lock | None = None
        self.restarts = 0

    @property
    def slot_uids(self) -> list[int]:
        return [self.uid_base + i for i in range(self.slots)]

    @property
    def build_uids(self) -> list[int]:
        """The uids compile steps run as (one per slot: ``languages.BUILD_UID_OFFSET``)."""
        return [uid + BUILD_UID_OFFSET for uid in self.slot_uids]

    def _check_host(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError(
                "the local sandbox backend needs root (it creates namespaces and switches "
                "uids): run as root, or use the docker backend"
            )
        if shutil.which("unshare") is None:
            raise RuntimeError("the local sandbox backend needs `unshare` (apt-get install util-linux)")
        if not (self.executor_dir / "executor.py").is_file():
            raise RuntimeError(
                f"executor not found in {self.executor_dir}; reinstall mucode (the wheel ships it in "
                "sandbox) or pass executor_dir=DIR"
            )
        real = os.path.realpath(self.python)
        if not real.startswith(("/usr/", "/bin/", "/lib")) or not os.access(real, os.X_OK):
            raise RuntimeError(
                f"python={self.python!r} must be an interpreter under /usr (it is the only "
                "tree visible in the jail), e.g. /usr/bin/python3 (apt-get install python3)"
            )

    async def start(self) -> None:
        if self._pool is not None:
            return
        self._check_host()
        collect_stale_cgroups()
        self._pool = SlotPool()
        self._lock = asyncio.Lock()
        await self._launch()
        if self.health_interval_s > 0:
            self._start_monitor(self.health_interval_s, "local", self._restart_if_empty)

    async def _launch(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="mucode-local-"))
        (self._workdir / "run").mkdir(mode=0o700)
        (self._workdir / "root").mkdir(mode=0o700)
        self._cgroup = self._make_cgroups(self._workdir.name) if self.cgroups else None
        cmd = [
            "env",
            "-i",
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "unshare",
            *UNSHARE_FLAGS,
            "sh",
            str(self.executor_dir / "jail.sh"),
            str(self._workdir),
            str(self.slots),
            str(self.uid_base),
            str(self.scratch_mb),
            self.python,
            self._cgroup or "-",
            str(BUILD_UID_OFFSET),
            *self.executor_args,
        ]
        log_path = self._workdir / "jail.log"
        with open(log_path, "wb") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.PIPE, stdout=log, stderr=log, start_new_session=True
            )
        # The jail's stdin is a lifeline: if this process dies without close(), the executor sees
        # EOF and exits, which takes its whole namespace down (--exit-on-stdin-eof).
        ep = Endpoint(
            name=f"local-{self._proc.pid}",
            socket_path=self._workdir / "run" / "executor.sock",
            slots=self.slots,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        while True:
            if self._proc.returncode is not None:
                err = log_path.read_text(errors="replace")
                code = self._proc.returncode
                await self._teardown()
                raise RuntimeError(
                    f"the local sandbox jail exited at start (code {code}): {err.strip()[-2000:]}"
                )
            try:
                info = await ep.ping(timeout_s=2.0)
                break
            except ExecutorError:
                if loop.time() > deadline:
                    await self._teardown()
                    raise RuntimeError(
                        f"the local sandbox executor did not answer within {self.start_timeout_s:.0f} s"
                    ) from None
                await asyncio.sleep(0.05)
        ep.slots = int(info.get("slots", self.slots))
        await self.pool.add(ep)

    def _make_cgroups(self, name: str) -> str | None:
        """cgroup-v1 dirs ``<controller>/<name>/slot<i>``: one CPU weight, memory limit
        (``slot_memory_mb``, scratch tmpfs included) and pids limit (``nproc``) per slot. None when
        the host has no writable cgroup v1 (the rlimits still apply)."""
        if not all((CGROUP_V1 / c / "cgroup.procs").is_file() for c in CGROUP_CONTROLLERS):
            return None
        try:
            for c in CGROUP_CONTROLLERS:
                for i in range(self.slots):
                    (CGROUP_V1 / c / name / f"slot{i}").mkdir(parents=True)
                    slot = CGROUP_V1 / c / name / f"slot{i}"
                    if c == "memory":
                        (slot / "memory.limit_in_bytes").write_text(str(self.slot_memory_mb << 20))
                        (slot / "memory.swappiness").write_text("0")  # a host with swap: no paging out
                        memsw = slot / "memory.memsw.limit_in_bytes"  # only with swap accounting
                        if memsw.exists():
                            memsw.write_text(str(self.slot_memory_mb << 20))
                    elif c == "pids":
                        (slot / "pids.max").write_text(str(self.nproc + 8))  # + manager, handler, helpers
        except OSError as exc:
            logger.warning("local sandbox: no per-slot cgroups (%s); rlimits only", exc)
            self._remove_cgroups(name)
            return None
        return name

    def _remove_cgroups(self, name: str) -> None:
        for c in CGROUP_CONTROLLERS:
            base = CGROUP_V1 / c / name
            for i in range(self.slots):
                with contextlib.suppress(OSError):
                    (base / f"slot{i}").rmdir()
            with contextlib.suppress(OSError):
                base.rmdir()

    async def _teardown(self) -> None:
        if self._pool is not None:
            for name in list(self._pool.endpoints):
                await self._pool.remove(name)
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            # SIGKILL to the executor, pid 1 of the namespace: the kernel kills everything in the
            # namespace and pid 1 is reaped only once all of it is gone; unshare then exits. (Killing
            # unshare alone would return before the namespace is torn down.)
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                    children = [int(p) for p in f.read().split()]
            except OSError:
                children = []
            for pid in children or [proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                os.kill(proc.pid, signal.SIGKILL)  # --kill-child takes the namespace down with it
        if proc is not None:
            await proc.wait()
            if proc.stdin is not None:
                proc.stdin.close()
        if self._cgroup is not None:  # empty now: every process of the namespace is gone
            for _ in range(50):
                self._remove_cgroups(self._cgroup)
                if not any((CGROUP_V1 / c / self._cgroup).exists() for c in CGROUP_CONTROLLERS):
                    break
                await asyncio.sleep(0.05)
            self._cgroup = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    async def _restart(self) -> None:
        assert self._lock is not None
        async with self._lock:
            await self._teardown()
            self.restarts += 1
            await self._launch()

    async def _executor_failed(self, ep: Endpoint, exc: Exception) -> None:
        if await self._probe(ep) is None:
            return  # healthy, or a stuck slot the executor is replacing itself
        if self._pool is not None and ep.name in self._pool.endpoints:
            await self._pool.remove(ep.name)  # no new job goes there; restart in the background
            task = asyncio.create_task(self._restart())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _restart_if_empty(self) -> None:
        """A failed restart left no executor: try again."""
        if not self.pool.endpoints and not self._tasks:
            await self._restart()

    async def health(self) -> dict[str, object]:
        out = await super().health()
        out["restarts"] = self.restarts
        out["cgroups"] = self._cgroup is not None
        return out

    async def close(self) -> None:
        await self._stop_background()
        await self._teardown()
        self._pool = None
