"""The docker backend drives the engine through the Docker SDK: API version negotiation with this
engine, every hardening option on the created container (read back from the engine, and compared
option by option with the same container made by the ``docker run`` form the docs show), a dead
container noticed from the events stream, SDK calls off the event loop, and the ``attach`` backend
importing no Docker SDK at all."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import Handle, docker_cli, stdio_job, wait_until

from mucode.protocol import Status
from mucode.sandbox.docker_engine import LABEL, Engine

BENIGN = stdio_job("print(int(input()) + 1)", ["41\n"], ["42"])
# The HostConfig fields that make up the hardening (docs/sandbox.md lists the same options).
HARDENING = [
    "NetworkMode",
    "ReadonlyRootfs",
    "IpcMode",
    "CapDrop",
    "CapAdd",
    "SecurityOpt",
    "PidsLimit",
    "Memory",
    "MemorySwap",
    "NanoCpus",
    "CpuShares",
    "Tmpfs",
    "Binds",
    "Privileged",
    "OomScoreAdj",
]


def _inspect(name: str) -> dict[str, Any]:
    out: list[dict[str, Any]] = json.loads(docker_cli("inspect", name))
    return out[0]


@pytest.mark.docker
def test_the_sdk_negotiates_this_engines_api_version() -> None:
    """Debian's docker.io speaks an older API than docker-py's default: the SDK must ask the engine."""
    engine = Engine()
    try:
        server = docker_cli("version", "--format", "{{.Server.APIVersion}}").strip()
        assert engine.api_version == server
    finally:
        engine.close()


@pytest.mark.docker
def test_every_hardening_option_is_set_on_the_created_container() -> None:
    h = Handle(
        "docker",
        containers=1,
        slots_per_container=2,
        uid_base=11100,
        memory_mb=700,
        cpus=1.5,
        pids_limit=150,
        scratch_mb=32,
        health_interval_s=0,
    )
    reference = f"mucode-cliref-{uuid.uuid4().hex[:8]}"
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        info = _inspect(name)
        hc = info["HostConfig"]
        sock_dir = h.backend._containers[name]  # type: ignore[attr-defined]
        assert hc["NetworkMode"] == "none" and hc["IpcMode"] == "none"
        assert hc["ReadonlyRootfs"] is True and hc["Privileged"] is False
        assert hc["CapDrop"] == ["ALL"] and sorted(hc["CapAdd"]) == ["SETGID", "SETUID"]
        assert hc["SecurityOpt"] == ["no-new-privileges"]  # and no seccomp=unconfined: the default profile
        assert hc["PidsLimit"] == 150
        assert hc["Memory"] == hc["MemorySwap"] == 700 << 20  # no swap beyond the memory limit
        assert hc["NanoCpus"] == 1_500_000_000 and hc["CpuShares"] == 2048
        assert hc["Tmpfs"] == {
            **{
                f"/scratch/{i}": f"rw,nosuid,nodev,noexec,size=32m,nr_inodes=32768,uid={u},gid={u},mode=0700"
                for i, u in enumerate((11100, 11101))
            },
            **{  # the build dirs: exec, owned by the build uid (slot uid + 2000), group the slot uid
                f"/build/{i}": f"rw,nosuid,nodev,exec,size=32m,nr_inodes=4096,uid={u + 2000},gid={u},mode=0750"
                for i, u in enumerate((11100, 11101))
            },
        }
        # -1000 unless this daemon may not lower it (the pool then starts its containers without it)
        assert hc["OomScoreAdj"] == (h.backend.oom_score_adj or 0)  # type: ignore[attr-defined]
        assert hc["Binds"] == [f"{sock_dir}:/run/mucode:rw"]
        labels = info["Config"]["Labels"]
        assert labels[LABEL] == "1" and labels[f"{LABEL}.owner"] == h.backend.owner  # type: ignore[attr-defined]
        # the kernel's view of the executor (pid 1 of the container): seccomp filter, no new privileges,
        # only SETUID/SETGID left in its bounding set
        status = dict(
            line.split(":\t", 1)
            for line in Path(f"/proc/{info['State']['Pid']}/status").read_text().splitlines()
            if ":\t" in line
        )
        assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
        assert int(status["CapBnd"], 16) == (1 << 6) | (1 << 7)  # CAP_SETGID | CAP_SETUID
        # the same container as the `docker run` form shows it, field by field
        docker_cli(
            "create",
            "--name",
            reference,
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
            "150",
            "--memory",
            "700m",
            "--memory-swap",
            "700m",
            "--cpus",
            "1.5",
            "--cpu-shares",
            "2048",
            "--tmpfs",
            "/scratch/0:rw,nosuid,nodev,noexec,size=32m,nr_inodes=32768,uid=11100,gid=11100,mode=0700",
            "--tmpfs",
            "/scratch/1:rw,nosuid,nodev,noexec,size=32m,nr_inodes=32768,uid=11101,gid=11101,mode=0700",
            "--tmpfs",
            "/build/0:rw,nosuid,nodev,exec,size=32m,nr_inodes=4096,uid=13100,gid=11100,mode=0750",
            "--tmpfs",
            "/build/1:rw,nosuid,nodev,exec,size=32m,nr_inodes=4096,uid=13101,gid=11101,mode=0750",
            *(["--oom-score-adj", "-1000"] if h.backend.oom_score_adj else []),  # type: ignore[attr-defined]
            "-v",
            f"{sock_dir}:/run/mucode",
            "mucode-sandbox:latest",
        )
        ref = _inspect(reference)["HostConfig"]
        for key in HARDENING:
            if key == "Binds":
                assert [b.removesuffix(":rw") for b in hc[key]] == ref[key], key
            elif key in (
                "CapAdd",
                "CapDrop",
            ):  # newer CLIs send CAP_-prefixed, sorted names: same capabilities
                assert sorted(c.removeprefix("CAP_") for c in hc[key]) == sorted(
                    c.removeprefix("CAP_") for c in ref[key]
                )
            else:
                assert hc[key] == ref[key], key
        assert h.judge(BENIGN).verdict is Status.correct
    finally:
        subprocess.run(["docker", "rm", "-f", reference], capture_output=True, timeout=60)
        h.close()


@pytest.mark.docker
def test_a_dead_container_is_noticed_from_the_events_stream() -> None:
    """No job runs and the health monitor would not ping for an hour: only the engine's `die` event
    can tell the pool that its container is gone."""
    h = Handle("docker", containers=1, slots_per_container=1, uid_base=11200, health_interval_s=3600)
    try:
        assert h.health()["events"] is True
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        docker_cli("kill", name)
        wait_until(
            lambda: (
                h.backend.replaced >= 1
                and name not in h.backend.container_names  # type: ignore[attr-defined]
                and h.health()["ok"]
            ),
            90,
            "the replacement",
        )
        assert h.judge(BENIGN).verdict is Status.correct
    finally:
        h.close()


@pytest.mark.docker
def test_a_death_while_the_events_stream_reconnects_is_not_lost() -> None:
    """The stream breaks (as when the engine restarts) and the container dies before it is back: the
    reconnected stream replays events since the last one seen, so the death still reaches the pool."""
    h = Handle("docker", containers=1, slots_per_container=1, uid_base=11250, health_interval_s=3600)
    try:
        (name,) = h.backend.container_names  # type: ignore[attr-defined]
        h.backend._events._stream.close()  # type: ignore[attr-defined]  # the watcher waits 1 s, then reconnects
        docker_cli("kill", name)
        wait_until(
            lambda: (
                h.backend.replaced >= 1
                and name not in h.backend.container_names  # type: ignore[attr-defined]
                and h.health()["ok"]
            ),
            90,
            "the replacement",
        )
    finally:
        h.close()


@pytest.mark.docker
def test_sdk_calls_run_off_the_event_loop() -> None:
    """An SDK call that blocks until a coroutine on the same loop releases it: it completes only if
    the call runs in a worker thread (on the loop it would wait out its 30 s and return False)."""
    engine = Engine()

    async def main() -> bool:
        gate = threading.Event()
        call = asyncio.create_task(
            engine.call("blocking probe", lambda client: client.ping() and gate.wait(30))
        )
        await asyncio.sleep(0.2)
        gate.set()
        return await call

    try:
        assert asyncio.run(main()) is True
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["attach", "local", "fake"])
def test_only_the_docker_backend_imports_the_docker_sdk(kind: str) -> None:
    """compose's verifier image has no Docker SDK: building the other backends must not need it."""
    code = (
        "import sys\nfrom mucode.sandbox import make_backend\nfrom mucode.verifier.settings import VerifierSettings\n"
        f"VerifierSettings(backend={kind!r})\n"
        f"make_backend({kind!r}, **{ {'attach': {'socket_dir': '/tmp'}, 'fake': {'default': 'correct'}}.get(kind, {})!r})\n"  # noqa: E501
        "print('docker' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.docker
def test_a_container_that_exits_at_start_fails_start_with_its_log() -> None:
    """The executor refuses its arguments and exits: its `die` event ends start() with the container's
    log (not a wait until start_timeout_s), and nothing is left behind."""
    from mucode.sandbox import make_backend
    from mucode.sandbox.docker_engine import DockerError

    backend = make_backend(
        "docker", containers=1, fsize_mb="lots", uid_base=11300, start_timeout_s=3600, health_interval_s=1
    )

    async def start() -> None:
        await backend.start()

    with pytest.raises(DockerError, match=r"(?s)exited at start; its log: .*--fsize-mb"):
        asyncio.run(start())
    owner = backend.owner  # type: ignore[attr-defined]
    assert not docker_cli("ps", "-aq", "--filter", f"label={LABEL}.owner={owner}").strip()
