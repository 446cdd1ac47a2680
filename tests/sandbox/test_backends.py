"""Pool behaviour: a dead or tampered executor is replaced and its in-flight job gets sandbox_error
(never a verdict); attach mode (executors started by someone else, as docker compose does); close()
leaves nothing behind. Each test builds its own small backend so it can break it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from sandbox_helpers import GUARD as GUARD_SAFE
from sandbox_helpers import Handle, docker_cli, slot_processes, stdio_job, wait_until

from mucode.protocol import Status
from mucode.sandbox import make_backend
from mucode.sandbox.docker import LABEL

SLEEPER = (
    "import time\ntime.sleep(6)\nprint(1)"  # still running when the breaker fires (once it is seen busy)
)
BENIGN = stdio_job("print(int(input()) + 1)", ["41\n"], ["42"])


def _in_flight_then(h: Handle, breaker) -> object:  # type: ignore[no-untyped-def]
    """Start a long job, break its executor once the job holds a slot, return the job's result."""
    fut = asyncio.run_coroutine_threadsafe(
        h.backend.judge(stdio_job(SLEEPER, [""], ["1"], time_limit_s=20)), h.loop
    )

    def busy() -> bool:
        health = h.health()
        return bool(health["idle"] < health["pool_size"])

    wait_until(lambda: fut.done() or busy(), 60, "the job to hold a slot")
    assert not fut.done(), f"the job ended before its executor could be broken: {fut.result()}"
    breaker()
    return fut.result(120)


@pytest.mark.docker
def test_docker_dead_container_is_replaced_and_its_job_re_run_there() -> None:
    h = Handle("docker", containers=1, slots_per_container=2, uid_base=10600, health_interval_s=0.5)
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        result = _in_flight_then(h, lambda: docker_cli("kill", name))
        # the job failed with its container and ran once more on the replacement's fresh slot
        assert result.verdict is Status.correct, result  # type: ignore[attr-defined]
        assert h.backend.replaced >= 1  # type: ignore[attr-defined]
        wait_until(lambda: h.health()["ok"] and name not in h.backend.container_names, 60, "a replacement")  # type: ignore[attr-defined]
        assert h.judge(BENIGN).verdict is Status.correct
        assert not docker_cli("ps", "-aq", "--filter", f"name={name}").strip()
    finally:
        h.close()


@pytest.mark.docker
def test_docker_tampered_container_is_replaced() -> None:
    """A process of a slot uid that outlives every job (here planted with docker exec) marks the
    container as tampered: the monitor replaces it."""
    h = Handle("docker", containers=1, slots_per_container=2, uid_base=10700, health_interval_s=0.5)
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        uid = h.slot_uids[1]
        docker_cli("exec", "-d", "-u", str(uid), name, "python3", "-c", "import time; time.sleep(600)")
        wait_until(lambda: name not in h.backend.container_names and h.health()["ok"], 60, "the replacement")  # type: ignore[attr-defined]
        assert h.health()["replaced"] >= 1
        assert h.judge(BENIGN).verdict is Status.correct
        assert not slot_processes([uid]) or all(  # the planted process died with its container
            os.stat(f"/proc/{pid}").st_uid != uid for pid, _ in slot_processes([uid])
        )
    finally:
        h.close()


@pytest.mark.docker
def test_docker_close_leaves_nothing_behind() -> None:
    h = Handle("docker", containers=2, slots_per_container=1, uid_base=10800, health_interval_s=0)
    uids = h.slot_uids
    assert uids == [10800, 10801]  # one uid range per container (RLIMIT_NPROC counts host-wide)
    owner = h.backend.owner  # type: ignore[attr-defined]
    host_dir = h.backend._host_dir  # type: ignore[attr-defined]
    assert h.judge(BENIGN).verdict is Status.correct
    assert len(docker_cli("ps", "-q", "--filter", f"label={LABEL}.owner={owner}").split()) == 2
    h.close()
    assert not docker_cli("ps", "-aq", "--filter", f"label={LABEL}.owner={owner}").strip()
    assert host_dir is not None and not Path(host_dir).exists()
    assert not slot_processes(uids)


@pytest.mark.docker
def test_attach_backend_uses_executors_started_elsewhere() -> None:
    """What docker compose does: sandbox containers write <hostname>.sock into a shared volume; the
    verifier attaches to that dir without any access to the Docker engine."""
    sock_dir = Path(tempfile.mkdtemp(prefix="mucode-attach-"))
    names = [f"mucode-attach-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for k, name in enumerate(names):
            u = 10900 + 2 * k  # a uid range per executor
            docker_cli(
                "run",
                "-d",
                "--name",
                name,
                "--hostname",
                name,
                "--network",
                "none",
                "--read-only",
                "--ipc",
                "none",
                "--cap-drop",
                "ALL",
                "--cap-add",
                "SETUID",
                "--cap-add",
                "SETGID",
                "--security-opt",
                "no-new-privileges",
                "--pids-limit",
                "200",
                "--memory",
                "1g",
                "--tmpfs",
                f"/scratch/0:rw,nosuid,nodev,size=32m,uid={u},gid={u},mode=0700",
                "--tmpfs",
                f"/scratch/1:rw,nosuid,nodev,size=32m,uid={u + 1},gid={u + 1},mode=0700",
                "-v",
                f"{sock_dir}:/run/mucode",
                "mucode-sandbox:latest",
                "--socket-dir",
                "/run/mucode",
                "--slots",
                "2",
                "--uid-base",
                str(u),
            )
        wait_until(lambda: all((sock_dir / f"{n}.ctl").exists() for n in names), 30, "the executors' sockets")
        h = Handle("attach", socket_dir=str(sock_dir), health_interval_s=0.5)
        try:
            health = h.health()
            assert health["ok"] and health["pool_size"] == 4 and health["mode"] == "attach", health
            results = h.judge_many([BENIGN] * 8)
            assert all(r.verdict is Status.correct for r in results)
            # an attached executor that dies is dropped (its job: sandbox_error), the other keeps serving
            result = _in_flight_then(h, lambda: [docker_cli("kill", n) for n in names[:1]] and None)
            if result.verdict is not Status.correct:  # type: ignore[attr-defined]
                assert result.verdict is Status.sandbox_error  # type: ignore[attr-defined]
            wait_until(lambda: h.health()["pool_size"] == 2, 30, "the dead executor to be dropped")
            assert h.judge(BENIGN).verdict is Status.correct
        finally:
            h.close()
        # attach mode never stops what it did not start
        assert names[1] in docker_cli("ps", "--format", "{{.Names}}")
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True, timeout=60)
        subprocess.run(["rm", "-rf", str(sock_dir)], timeout=30)


def _local_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")


def test_local_dead_executor_is_restarted_and_its_job_re_run_there() -> None:
    _local_or_skip()
    h = Handle("local", slots=1, uid_base=61100, health_interval_s=0.5)
    try:
        proc = h.backend._proc  # type: ignore[attr-defined]
        result = _in_flight_then(h, lambda: os.kill(proc.pid, signal.SIGKILL))
        assert result.verdict is Status.correct, result  # re-run once on the restarted executor
        wait_until(lambda: h.health()["ok"], 30, "the restart")
        assert h.health()["restarts"] >= 1
        assert h.judge(BENIGN).verdict is Status.correct
    finally:
        h.close()
    assert not slot_processes([61100])


def test_local_slots_have_their_own_cgroups() -> None:
    """On a cgroup-v1 host each slot has its own memory/pids/CPU cgroup: processes that stay under
    RLIMIT_AS one by one but together exceed the slot's memory end as memory_limit."""
    _local_or_skip()
    if not Path("/sys/fs/cgroup/memory/cgroup.procs").is_file():
        pytest.skip("no cgroup v1 memory controller on this host")
    h = Handle("local", slots=1, uid_base=61300, slot_memory_mb=160, health_interval_s=0)
    try:
        assert h.health()["cgroups"] is True
        where = h.judge(stdio_job("print(open('/proc/self/cgroup').read())", [""], [""]))
        lines = [ln for ln in where.tests[0].stdout.splitlines() if ":memory:" in ln or ":pids:" in ln]
        assert len(lines) == 2 and all(ln.endswith("/slot0") for ln in lines), where.tests[0].stdout
        hogs = GUARD_SAFE + (
            "import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
            "        block = bytearray(80 << 20)\n        time.sleep(3)\n        os._exit(0)\n    kids.append(pid)\n"
            "for pid in kids:\n    os.waitpid(pid, 0)\nprint('survived')\n"
        )
        r = h.judge(stdio_job(hogs, [""], ["survived"], memory_limit_mb=200, time_limit_s=5))
        assert r.verdict is Status.memory_limit, r.tests[0]
        assert r.tests[0].limit_hit == "memory"  # no process hit RLIMIT_AS: the slot cgroup did it
        assert h.judge(BENIGN).verdict is Status.correct
    finally:
        h.close()


def test_local_close_leaves_nothing_behind() -> None:
    _local_or_skip()
    h = Handle("local", slots=2, uid_base=61200, health_interval_s=0)
    workdir = h.backend._workdir  # type: ignore[attr-defined]
    proc = h.backend._proc  # type: ignore[attr-defined]
    cgroup = h.backend._cgroup  # type: ignore[attr-defined]
    assert h.judge(BENIGN).verdict is Status.correct
    h.close()
    assert workdir is not None and not Path(workdir).exists()
    assert proc.returncode is not None
    assert not slot_processes([61200, 61201])
    with open("/proc/mounts") as f:
        assert str(workdir) not in f.read()
    if cgroup is not None:
        assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup}"))


def test_unknown_backend_or_option_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="docker.*local|local.*docker"):
        make_backend("podman")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slots_per_container"):
        make_backend("docker", pool_size=8)


ORPHAN_OWNER = """
import asyncio, sys, time
from mucode.sandbox import make_backend
async def main():
    b = make_backend(sys.argv[1], health_interval_s=0, **eval(sys.argv[2]))
    await b.start()
    print("started", flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


def _start_and_kill_owner(kind: str, options: str) -> int:
    """A process that starts a backend and dies by SIGKILL, without close(); returns its pid."""
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_OWNER, kind, options], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    finally:
        proc.kill()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    return proc.pid


def _containers_of(owner_pid: int) -> list[str]:
    out = docker_cli(
        "ps", "-a", "--filter", f"label={LABEL}=1", "--format", '{{.Names}} {{.Label "mucode.sandbox.owner"}}'
    )
    return [
        ln.split()[0]
        for ln in out.splitlines()
        if ln.split()[1:] and ln.split()[1].startswith(f"{owner_pid}-")
    ]


def test_local_jail_dies_with_its_owner() -> None:
    _local_or_skip()
    _start_and_kill_owner("local", "{'slots': 1, 'uid_base': 61400}")
    # the executor sees EOF on its stdin lifeline and takes its namespace down
    wait_until(
        lambda: (
            not slot_processes([61400])
            and not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).count("--uid-base 61400")]
        ),
        30,
        "the jail to exit",
    )


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.docker
def test_docker_containers_of_a_dead_owner_are_collected() -> None:
    owner = _start_and_kill_owner("docker", "{'containers': 1, 'slots_per_container': 1, 'uid_base': 11000}")
    assert len(_containers_of(owner)) == 1  # left behind by the killed owner...
    assert list(Path(tempfile.gettempdir()).glob(f"mucode-docker-{owner}-*"))
    h = Handle("docker", containers=1, slots_per_container=1, uid_base=11010, health_interval_s=0)
    try:
        assert _containers_of(owner) == []  # ...and collected by the next backend that starts
        assert not list(Path(tempfile.gettempdir()).glob(f"mucode-docker-{owner}-*"))
        assert h.judge(BENIGN).verdict is Status.correct
    finally:
        h.close()
