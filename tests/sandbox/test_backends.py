"""Pool behaviour: a dead or tampered executor is replaced and its in-flight job gets sandbox_error
(never a verdict); attach mode (executors started by someone else, as docker compose does); close()
leaves nothing behind. Each test builds its own small backend so it can break it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from sandbox_helpers import Handle, slot_processes, stdio_job

from mucode.sandbox import Verdict, make_backend
from mucode.sandbox.docker import LABEL

SLEEPER = "import time\ntime.sleep(30)\nprint(1)"
BENIGN = stdio_job("print(int(input()) + 1)", ["41\n"], ["42"])


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True, timeout=60).stdout


def _wait_until(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def _in_flight_then(h: Handle, breaker) -> object:  # type: ignore[no-untyped-def]
    """Start a long job, break its executor while it runs, return the job's result."""
    fut = asyncio.run_coroutine_threadsafe(h.backend.judge(stdio_job(SLEEPER, [""], ["1"], time_limit_s=20)), h.loop)
    time.sleep(1.0)
    breaker()
    return fut.result(60)


@pytest.mark.docker
def test_docker_dead_container_is_replaced_and_its_job_gets_sandbox_error() -> None:
    h = Handle("docker", containers=1, slots_per_container=2, health_interval_s=0.5)
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        result = _in_flight_then(h, lambda: _docker("kill", name))
        assert result.verdict is Verdict.sandbox_error and result.error  # type: ignore[attr-defined]
        _wait_until(lambda: h.health()["ok"] and name not in h.backend.container_names, 60, "a replacement")  # type: ignore[attr-defined]
        assert h.judge(BENIGN).verdict is Verdict.correct
        assert not _docker("ps", "-aq", "--filter", f"name={name}").strip()
    finally:
        h.close()


@pytest.mark.docker
def test_docker_tampered_container_is_replaced() -> None:
    """A process of a slot uid that outlives every job (here planted with docker exec) marks the
    container as tampered: the monitor replaces it."""
    h = Handle("docker", containers=1, slots_per_container=2, health_interval_s=0.5)
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        uid = h.slot_uids[1]
        _docker("exec", "-d", "-u", str(uid), name, "python3", "-c", "import time; time.sleep(600)")
        _wait_until(lambda: name not in h.backend.container_names and h.health()["ok"], 60, "the replacement")  # type: ignore[attr-defined]
        assert h.health()["replaced"] >= 1
        assert h.judge(BENIGN).verdict is Verdict.correct
        assert not slot_processes([uid]) or all(  # the planted process died with its container
            os.stat(f"/proc/{pid}").st_uid != uid for pid, _ in slot_processes([uid]))
    finally:
        h.close()


@pytest.mark.docker
def test_docker_close_leaves_nothing_behind() -> None:
    h = Handle("docker", containers=2, slots_per_container=1, health_interval_s=0)
    owner = h.backend.owner  # type: ignore[attr-defined]
    host_dir = h.backend._host_dir  # type: ignore[attr-defined]
    assert h.judge(BENIGN).verdict is Verdict.correct
    assert len(_docker("ps", "-q", "--filter", f"label={LABEL}.owner={owner}").split()) == 2
    h.close()
    assert not _docker("ps", "-aq", "--filter", f"label={LABEL}.owner={owner}").strip()
    assert host_dir is not None and not Path(host_dir).exists()
    assert not slot_processes(list(range(10000, 10002)))


@pytest.mark.docker
def test_docker_attach_mode_uses_executors_started_elsewhere() -> None:
    """What docker compose does: sandbox containers write <hostname>.sock into a shared volume; the
    verifier attaches to that dir without any access to the Docker engine."""
    sock_dir = Path(tempfile.mkdtemp(prefix="mucode-attach-"))
    names = [f"mucode-attach-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for name in names:
            _docker("run", "-d", "--name", name, "--hostname", name, "--network", "none", "--read-only",
                    "--ipc", "none", "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID",
                    "--security-opt", "no-new-privileges", "--pids-limit", "200", "--memory", "1g",
                    "--tmpfs", "/scratch/0:rw,nosuid,nodev,size=32m,uid=10000,gid=10000,mode=0700",
                    "--tmpfs", "/scratch/1:rw,nosuid,nodev,size=32m,uid=10001,gid=10001,mode=0700",
                    "-v", f"{sock_dir}:/run/mucode", "mucode-sandbox:latest",
                    "--socket-dir", "/run/mucode", "--slots", "2")
        _wait_until(lambda: all((sock_dir / f"{n}.ctl").exists() for n in names), 30, "the executors' sockets")
        h = Handle("docker", socket_dir=str(sock_dir), health_interval_s=0.5)
        try:
            health = h.health()
            assert health["ok"] and health["pool_size"] == 4 and health["mode"] == "attach", health
            results = h.judge_many([BENIGN] * 8)
            assert all(r.verdict is Verdict.correct for r in results)
            # an attached executor that dies is dropped (its job: sandbox_error), the other keeps serving
            result = _in_flight_then(h, lambda: [_docker("kill", n) for n in names[:1]] and None)
            if result.verdict is not Verdict.correct:  # type: ignore[attr-defined]
                assert result.verdict is Verdict.sandbox_error  # type: ignore[attr-defined]
            _wait_until(lambda: h.health()["pool_size"] == 2, 30, "the dead executor to be dropped")
            assert h.judge(BENIGN).verdict is Verdict.correct
        finally:
            h.close()
        # attach mode never stops what it did not start
        assert names[1] in _docker("ps", "--format", "{{.Names}}")
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True, timeout=60)
        subprocess.run(["rm", "-rf", str(sock_dir)], timeout=30)


def _local_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")


def test_local_dead_executor_is_restarted_and_its_job_gets_sandbox_error() -> None:
    _local_or_skip()
    h = Handle("local", slots=1, uid_base=61100, health_interval_s=0.5)
    try:
        proc = h.backend._proc  # type: ignore[attr-defined]
        result = _in_flight_then(h, lambda: os.kill(proc.pid, signal.SIGKILL))
        assert result.verdict is Verdict.sandbox_error and result.error  # type: ignore[attr-defined]
        _wait_until(lambda: h.health()["ok"], 30, "the restart")
        assert h.health()["restarts"] >= 1
        assert h.judge(BENIGN).verdict is Verdict.correct
    finally:
        h.close()
    assert not slot_processes([61100])


def test_local_close_leaves_nothing_behind() -> None:
    _local_or_skip()
    h = Handle("local", slots=2, uid_base=61200, health_interval_s=0)
    workdir = h.backend._workdir  # type: ignore[attr-defined]
    proc = h.backend._proc  # type: ignore[attr-defined]
    assert h.judge(BENIGN).verdict is Verdict.correct
    h.close()
    assert workdir is not None and not Path(workdir).exists()
    assert proc.returncode is not None
    assert not slot_processes([61200, 61201])
    with open("/proc/mounts") as f:
        assert str(workdir) not in f.read()


def test_unknown_backend_or_option_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="docker.*local|local.*docker"):
        make_backend("podman")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slots_per_container"):
        make_backend("docker", pool_size=8)
