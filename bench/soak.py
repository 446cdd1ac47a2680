"""Soak: hostile and correct programs mixed, for a bounded time, against a verifier on loopback.

    python bench/soak.py [--seconds 600] [--concurrency 4] [--url http://127.0.0.1:8000]
                         [--slots 2] [--uid-base 62000]

Without ``--url`` it starts ``mucode serve --backend local`` (root needed) on a free loopback port
with ``--slots`` slots and stops it at the end; with ``--url`` it drives a running service (e.g.
``docker compose up``'s verifier, published on 127.0.0.1). Every item goes through ``/v1/verify``
(program ``code``). Half the items are correct programs (stdio, call and assert formats) that must
come back ``correct``; the other half are hostile (fork bomb, SIGSTOP spinners, chmod 000 and deep
trees, SysV shared memory leaks, forged asserts, garbage on the control pipe, unwaited CPU-burning
children, memory bomb) that must never come back ``correct`` nor as an infrastructure status.
A poller reads ``/readyz`` every second. Printed at the end:
- misjudged: correct programs not ``correct`` + hostile ones ``correct`` (target 0);
- infrastructure statuses (``sandbox_error``/``verifier_error``) of either kind (target 0);
- slots lost: pool size at the start minus pool size at the end, and idle slots once drained;
- readiness: /readyz polls ok / not ok, and correct programs misjudged while /readyz said ok.
Loopback only; the run stops after ``--seconds`` plus the items already in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from mucode.protocol import INFRA_STATUSES

ROOT = Path(__file__).resolve().parents[1]

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = "assert add(1, 2) == 3\nassert add(20, 22) == 42\n"
CORRECT = [
    (
        "a+b",
        "a, b = map(int, input().split())\nprint(a + b)\n",
        {"format": "stdio", "inputs": ["2 3\n", "10 -4\n"], "outputs": ["5", "6"]},
    ),
    (
        "call",
        "class Solution:\n    def twice(self, x):\n        return 2 * x\n",
        {"format": "call", "inputs": ["3", "-1"], "outputs": ["6", "-2"], "fn_name": "twice"},
    ),
    ("assert", ADD, {"format": "assert", "assert_code": ADD_TESTS}),
    (
        "numpy",
        "import numpy as np\nprint(int(np.arange(int(input())).sum()))\n",
        {"format": "stdio", "inputs": ["10\n"], "outputs": ["45"]},
    ),
]
_STDIO = {"format": "stdio", "inputs": ["1\n"], "outputs": ["2"]}
HOSTILE = [
    (
        "fork bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        _STDIO,
    ),
    (
        "sigstop",
        "import os, signal\nfor _ in range(3):\n    if os.fork() == 0:\n        break\n"
        "while True:\n    try:\n        os.kill(-1, signal.SIGSTOP)\n    except OSError:\n        pass\n",
        _STDIO,
    ),
    (
        "chmod 000 + deep tree",
        "import os\nos.makedirs('a/b')\nos.chmod('a', 0)\nfd = os.open('.', os.O_RDONLY)\n"
        "for i in range(300):\n    os.mkdir('d', dir_fd=fd)\n"
        "    n = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n    fd = n\n"
        "os.chmod('.', 0)\nprint(3)\n",
        _STDIO,
    ),
    (
        "shm leak",
        "import ctypes\nlibc = ctypes.CDLL(None)\nfor i in range(8):\n"
        "    libc.shmget(0x6d75 + i, 4 << 20, 0o1666)\nprint(3)\n",
        _STDIO,
    ),
    (
        "assert forged by exit",
        "def add(a, b):\n    return 0\nimport os\nos._exit(0)\n",
        {"format": "assert", "assert_code": ADD_TESTS},
    ),
    (
        "assert forged by always-equal",
        "class E:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return E()\n",
        {"format": "assert", "assert_code": ADD_TESTS},
    ),
    ("control garbage", "import os\nos.write(3, b'[' * 100000 + b'\\n')\nprint(3)\n", _STDIO),
    (
        "unwaited children",
        "import os, time\nr, w = os.pipe()\nfor _ in range(2):\n    if os.fork() == 0:\n"
        "        t = time.process_time()\n        while time.process_time() - t < 0.8:\n"
        "            pass\n        os.write(w, b'x')\n        os._exit(0)\n"
        "got = b''\nwhile len(got) < 2:\n    got += os.read(r, 2)\nprint(2)\n",
        _STDIO,
    ),
    ("memory bomb", "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n", _STDIO),
]
INFRA = INFRA_STATUSES


def item(i: int, program: str, tests: dict) -> dict:
    return {
        "id": f"s{i}",
        "program": "code",
        "response": f"```python\n{program}```",
        "spec": {"tests": tests, "time_limit_s": 1.0, "memory_limit_mb": 512},
    }


class Tally:
    def __init__(self) -> None:
        self.sent = {"correct": 0, "hostile": 0}
        self.misjudged: list[str] = []
        self.infra: list[str] = []
        self.misjudged_while_ready = 0
        self.ready_ok = 0
        self.ready_not_ok = 0
        self.last_ready = True


async def readiness(client: httpx.AsyncClient, url: str, tally: Tally, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            r = await client.get(f"{url}/readyz", timeout=10)
            ok = r.status_code == 200
        except httpx.HTTPError:
            ok = False
        tally.last_ready = ok
        tally.ready_ok += ok
        tally.ready_not_ok += not ok
        await asyncio.sleep(1.0)


async def worker(client: httpx.AsyncClient, url: str, tally: Tally, end: float, rng: random.Random) -> None:
    i = 0
    while time.monotonic() < end:
        i += 1
        hostile = rng.random() < 0.5
        name, program, tests = rng.choice(HOSTILE if hostile else CORRECT)
        kind = "hostile" if hostile else "correct"
        tally.sent[kind] += 1
        ready_before = tally.last_ready
        try:
            r = await client.post(f"{url}/v1/verify", json={"items": [item(i, program, tests)]}, timeout=300)
            status = r.json()["results"][0]["status"] if r.status_code == 200 else f"http {r.status_code}"
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            status = f"error {type(exc).__name__}"
        if status in INFRA or status.startswith(("http", "error")):
            tally.infra.append(f"{kind} {name}: {status}")
        if (kind == "correct") != (status == "correct"):
            tally.misjudged.append(f"{kind} {name}: {status}")
            tally.misjudged_while_ready += kind == "correct" and ready_before


async def pool(client: httpx.AsyncClient, url: str) -> dict:
    r = await client.get(f"{url}/readyz", timeout=30)
    return r.json().get("sandbox", {})


async def soak(url: str, seconds: float, concurrency: int, seed: int) -> None:
    tally = Tally()
    async with httpx.AsyncClient() as client:
        start_pool = await pool(client, url)
        stop = asyncio.Event()
        poller = asyncio.create_task(readiness(client, url, tally, stop))
        end = time.monotonic() + seconds
        t0 = time.monotonic()
        await asyncio.gather(
            *(worker(client, url, tally, end, random.Random(seed + k)) for k in range(concurrency))
        )
        elapsed = time.monotonic() - t0
        await asyncio.sleep(3.0)  # let the last clean-ups finish
        stop.set()
        await poller
        end_pool = await pool(client, url)
    lost = int(start_pool.get("pool_size", 0)) - int(end_pool.get("pool_size", 0))
    print(f"# soak: {elapsed:.0f} s, concurrency {concurrency}, {url}")
    print(
        "| items | correct sent | hostile sent | misjudged | infra statuses | slots lost | idle at end "
        "| /readyz ok | /readyz not ok | misjudged while ready |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {sum(tally.sent.values())} | {tally.sent['correct']} | {tally.sent['hostile']} | {len(tally.misjudged)} "
        f"| {len(tally.infra)} | {lost} | {end_pool.get('idle')}/{end_pool.get('pool_size')} | {tally.ready_ok} "
        f"| {tally.ready_not_ok} | {tally.misjudged_while_ready} |"
    )
    for line in (tally.misjudged + tally.infra)[:20]:
        print(f"#   {line}")
    print(
        f"# final readiness: {json.dumps({k: end_pool.get(k) for k in ('ok', 'pool_size', 'idle', 'stuck_slots')})}"
    )


def start_local_service(slots: int, uid_base: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "MUCODE_BACKEND_OPTIONS": json.dumps({"slots": slots, "uid_base": uid_base}),
        "MUCODE_PROGRAMS": '["code"]',
    }
    cmd = [
        sys.executable,
        "-m",
        "mucode.cli",
        "serve",
        "--backend",
        "local",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            sys.exit(f"mucode serve exited with {proc.returncode}")
        time.sleep(0.5)
    proc.kill()
    sys.exit("mucode serve did not become ready within 120 s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument(
        "--url", help="a running verifier on loopback (default: start mucode serve --backend local)"
    )
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--uid-base", type=int, default=62000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.url and not args.url.split("://")[-1].startswith(("127.0.0.1", "localhost", "[::1]")):
        sys.exit("--url must be on loopback (127.0.0.1, localhost or [::1])")
    proc = None
    url = args.url
    if url is None:
        proc, url = start_local_service(args.slots, args.uid_base)
    try:
        asyncio.run(soak(url.rstrip("/"), args.seconds, args.concurrency, args.seed))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
