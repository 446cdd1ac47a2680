"""Verifier throughput: HTTP vs. the engines it wraps, measured in one run.

    python bench/verifier.py [--code-items 400] [--math-items 500] [--containers 2] [--slots 2]
                             [--math-workers 2] [--load-seconds 120]

Rows (items per second):
- code, sandbox direct: ``DockerPoolBackend.judge`` at concurrency = pool slots;
- code, HTTP: the same items through ``/v1/verify`` (extraction, validation, JSON, uvicorn) on a
  service with the same pool; target: HTTP costs at most 20% of code throughput;
- math, in-process: math-verify (``check_answer``) in a loop in this process = one core;
- math, HTTP: MATH500 solutions through ``/v1/verify`` with ``--math-workers`` workers; per core =
  items per CPU-second of the service's whole process tree (server + workers), compared with items
  per CPU-second in-process; target: at least 70%. CPU time, unlike wall time, stays meaningful on
  a shared machine.
The service runs as a child process (``python -m mucode.verifier``) so its CPU time is its own.
``--load-seconds`` adds a fixed-rate load run (mixed code+math) with the server's memory over time.
``--run-code N`` (alone): N whole programs (read two integers, print their sum) through HTTP
``/run_code`` with SandboxFusion's fields, on a ``--backend`` service, against the bare floor of a
fresh ``/usr/bin/python3 -I -S`` per program (no isolation), at each ``--run-code-concurrency``, in
``--rounds`` alternating rounds; the median ratio, and the median CPU per program of this client,
the service (with ``local``, its executors too), the sandbox containers (``docker``) and the floor.
``--big-tests-mb N`` (alone with ``--only-big-tests``) sends one problem with N MB of stdio tests and
``--samples`` samples through ``VerifierClient`` with the default request cap: requests sent, wall
time, the service's CPU time and the client's peak Python memory while it prepares and sends
(tracemalloc), next to the size of the test set and of the inlined request it replaces.
Math items are the MATH500 reference solutions (their own \\boxed answer) shipped in eval/math.
The machine may be shared: rerun before trusting a small difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
MATH500 = ROOT / "mucode" / "assets" / "math" / "math500.jsonl"

PROGRAM = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))\n"


def code_items(n: int) -> list[dict]:
    items = []
    for i in range(n):
        inputs = [f"{i} {k} {i * k}\n" for k in range(3)]
        outputs = [f"{i + k + i * k}\n" for k in range(3)]
        items.append(
            {
                "id": f"c{i}",
                "program": "code",
                "response": f"```python\n{PROGRAM}```",
                "spec": {"tests": {"format": "stdio", "inputs": inputs, "outputs": outputs}},
            }
        )
    return items


def math_items(n: int) -> list[dict]:
    rows = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
    return [
        {
            "id": f"m{i}",
            "program": "math",
            "response": rows[i % len(rows)]["solution"],
            "spec": {"answer": rows[i % len(rows)]["answer"]},
        }
        for i in range(n)
    ]


async def bench_sandbox_direct(items: list[dict], backend_options: dict) -> tuple[float, float]:
    """(items/s, CPU ms per item in this process) for DockerPoolBackend.judge at concurrency = slots."""
    from mucode.sandbox import CodeJob, TestSpec, make_backend

    backend = make_backend("docker", **backend_options)
    await backend.start()
    try:
        slots = int((await backend.health()).get("pool_size", 1))
        sem = asyncio.Semaphore(slots)
        jobs = [CodeJob(program=PROGRAM, tests=TestSpec(**it["spec"]["tests"])) for it in items]

        async def one(job: CodeJob) -> str:
            async with sem:
                return (await backend.judge(job)).verdict.value

        await asyncio.gather(*(one(j) for j in jobs[: slots * 2]))  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        verdicts = await asyncio.gather(*(one(j) for j in jobs))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await backend.close()
    assert all(v == "correct" for v in verdicts), set(verdicts)
    return len(items) / wall, 1000 * cpu / len(items)


async def bench_http(
    url: str, pid: int, items: list[dict], warmup: list[dict], batch: int, concurrency: int
) -> tuple[float, float, dict[str, int]]:
    """(items/s, CPU ms per item in the service's process tree, statuses) through /v1/verify."""
    from mucode.verifier.client import VerifierClient
    from proctree import cpu_s

    client = VerifierClient(url, batch_size=batch, max_concurrency=concurrency, retries=0)
    try:
        await client.verify(warmup)
        t0, c0 = time.perf_counter(), cpu_s(pid)
        results = await client.verify(items)
        wall, cpu = time.perf_counter() - t0, cpu_s(pid) - c0
    finally:
        await client.aclose()
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    return len(items) / wall, 1000 * cpu / len(items), counts


def bench_math_in_process(items: list[dict], warmup: list[dict]) -> tuple[float, float, dict[str, int]]:
    """(items/s, CPU ms per item, statuses) for math-verify called in a loop in this process."""
    import logging

    from mucode.rewards.math_worker import check_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for it in warmup:
        check_answer(str(it["spec"]["answer"]), it["response"])
    counts: dict[str, int] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    for it in items:
        status = check_answer(str(it["spec"]["answer"]), it["response"])["status"]
        counts[status] = counts.get(status, 0) + 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return len(items) / wall, 1000 * cpu / len(items), counts


class Service:
    """`python -m mucode.verifier` as a child process (so its CPU time can be measured alone)."""

    def __init__(
        self, backend_options: dict, math_workers: int, backend: str = "docker", run_code: bool = False
    ) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        env = {
            **os.environ,
            "MUCODE_PORT": str(self.port),
            "MUCODE_BACKEND": backend,
            "MUCODE_RUN_CODE": "true" if run_code else "false",
            "MUCODE_BACKEND_OPTIONS": json.dumps(backend_options),
            "MUCODE_MATH_WORKERS": str(math_workers),
            "MUCODE_PROGRAMS": '["code", "math"]',
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mucode.verifier"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.close()
        raise RuntimeError("the verifier service did not become ready")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def bench_big_tests(mb: float, samples: int, backend: str, backend_options: dict) -> None:
    """One problem with ``mb`` MB of tests x ``samples`` samples (half correct) through the client."""
    import re
    import tracemalloc

    from mucode.verifier.session import VerifierSession
    from mucode.verifier.wire import DEFAULT_MAX_REQUEST_BYTES, canonical_json
    from proctree import cpu_s

    n_tests = 12
    lengths = [int(mb * 1e6) // n_tests + k for k in range(n_tests)]
    tests = {
        "format": "stdio",
        "inputs": ["a" * n + "\n" for n in lengths],
        "outputs": [f"{n}\n" for n in lengths],
    }
    right = "```python\nimport sys\nprint(len(sys.stdin.read().strip()))\n```"
    items = [
        {
            "id": f"s{k}",
            "program": "code",
            "response": right if k % 2 else "```python\nprint(0)\n```",
            "spec": {"tests": tests, "time_limit_s": 10},
        }
        for k in range(samples)
    ]
    set_mb = len(canonical_json(tests)) / 1e6
    inlined_mb = len(json.dumps({"items": items})) / 1e6
    service = Service(backend_options, 1, backend=backend)

    def sent() -> int:
        text = httpx.get(f"{service.url}/metrics").text
        return int(
            sum(
                float(x)
                for x in re.findall(r"^verifier_requests_total\{[^}]*/v1/verify[^}]*\} (\S+)$", text, re.M)
            )
        )

    try:
        before, c0 = sent(), cpu_s(service.proc.pid)
        client = VerifierSession(service.url, retries=0)
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            results = client.verify(items)
        finally:
            wall = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            client.close()
        requests, cpu = sent() - before, cpu_s(service.proc.pid) - c0
    finally:
        service.close()
    statuses = [r.status.value for r in results]
    print(
        f"\n| test set | samples | inlined request | cap | requests sent | wall s | service CPU s | "
        f"client peak MB |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {set_mb:.1f} MB | {samples} | {inlined_mb:.1f} MB | {DEFAULT_MAX_REQUEST_BYTES / 2**20:.0f} MiB | "
        f"{requests} | {wall:.2f} | {cpu:.2f} | {peak / 1e6:.1f} |"
    )
    print(f"statuses: {statuses}")


A_PLUS_B = "a, b = map(int, input().split())\nprint(a + b)\n"


def _floor_run(_: int) -> float:
    """One fresh ``python3 -I -S`` per program, stdin on a pipe, no isolation: the bare floor."""
    t = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", "-c", A_PLUS_B], input=b"20 22\n", capture_output=True, check=True
    )
    assert out.stdout == b"42\n", out
    return time.perf_counter() - t


async def _run_code_pass(url: str, n: int, conc: int) -> float:
    """Wall seconds for ``n`` /run_code requests (SandboxFusion's fields) at ``conc`` in flight."""
    sem = asyncio.Semaphore(conc)
    body = {"code": A_PLUS_B, "stdin": "20 22\n", "language": "python", "run_timeout": 10}
    async with httpx.AsyncClient(timeout=60) as client:

        async def one() -> None:
            async with sem:
                r = await client.post(f"{url}/run_code", json=body)
                reply = r.json()
                assert reply["status"] == "Success" and reply["run_result"]["stdout"] == "42\n", reply

        await asyncio.gather(*(one() for _ in range(conc * 2)))  # warm-up: connections, slots
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return time.perf_counter() - t0


def _containers_cpu_s() -> float:
    """CPU seconds of every running docker container so far (their cpuacct cgroups, v1); 0 without."""
    root = Path("/sys/fs/cgroup/cpuacct/docker")
    return sum(int(u.read_text()) / 1e9 for u in root.glob("*/cpuacct.usage")) if root.is_dir() else 0.0


def bench_run_code(backend: str, options: dict, n: int, concs: list[int], rounds: int) -> None:
    """Whole programs through HTTP ``/run_code`` against the bare subprocess floor, in alternating
    rounds (the same load for both); the median ratio per concurrency, and where the CPU of one
    program goes: this client (httpx), the service (uvicorn, FastAPI, the sandbox client; with
    ``local`` its process tree holds the executors too), the sandbox (docker: the containers), and
    the floor's own interpreter. On cores that are all busy, a ratio of 1.0 needs the three parts
    together to cost no more than the floor's interpreter."""
    import statistics
    from concurrent.futures import ThreadPoolExecutor

    from proctree import children_cpu_s, cpu_s

    service = Service(options, 1, backend=backend, run_code=True)
    print(
        f"\n| /run_code ({backend}) | concurrency | programs/s | floor programs/s | ratio | "
        "CPU ms a program: client | service | containers | floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for conc in concs:
            ratios, served, floors = [], [], []
            parts: list[tuple[float, float, float, float]] = []
            with ThreadPoolExecutor(conc) as pool:
                list(pool.map(_floor_run, range(conc * 2)))
                for _ in range(rounds):
                    kids0 = children_cpu_s()
                    t0 = time.perf_counter()
                    list(pool.map(_floor_run, range(n)))
                    floor = n / (time.perf_counter() - t0)
                    floor_cpu = children_cpu_s() - kids0
                    own0, svc0, box0 = time.process_time(), cpu_s(service.proc.pid), _containers_cpu_s()
                    rate = n / asyncio.run(_run_code_pass(service.url, n, conc))
                    own, svc = time.process_time() - own0, cpu_s(service.proc.pid) - svc0
                    parts.append((own, svc, _containers_cpu_s() - box0, floor_cpu))
                    ratios.append(rate / floor)
                    served.append(rate)
                    floors.append(floor)
            cpu = " | ".join(f"{1000 * statistics.median(p[i] for p in parts) / n:.1f}" for i in range(4))
            print(
                f"| python a+b | {conc} | {statistics.median(served):.0f} | {statistics.median(floors):.0f} | "
                f"{statistics.median(ratios):.2f}x | {cpu} |",
                flush=True,
            )
    finally:
        service.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code-items", type=int, default=400)
    ap.add_argument("--math-items", type=int, default=500, help="MATH500 rows to use (at most 500)")
    ap.add_argument("--repeat", type=int, default=2, help="alternating passes; the best of each path is kept")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--slots", type=int, default=2, help="slots per sandbox container")
    ap.add_argument(
        "--math-workers",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 1),
        help="math-verify workers (default: cores - 1, leaving one for the server and this client)",
    )
    ap.add_argument("--batch", type=int, default=32, help="items per HTTP request")
    ap.add_argument("--concurrency", type=int, default=4, help="HTTP requests in flight")
    ap.add_argument(
        "--load-seconds", type=float, default=0.0, help="also run a fixed-rate load test this long"
    )
    ap.add_argument("--load-rate", type=float, default=8.0, help="requests/s of the load test (4 items each)")
    ap.add_argument(
        "--big-tests-mb", type=float, default=0.0, help="also send one problem with this many MB of tests"
    )
    ap.add_argument("--samples", type=int, default=8, help="samples of the --big-tests-mb problem")
    ap.add_argument("--only-big-tests", action="store_true", help="run only the --big-tests-mb row")
    ap.add_argument(
        "--backend",
        choices=["docker", "local"],
        default="docker",
        help="sandbox backend of the --big-tests-mb service (the other rows use docker)",
    )
    ap.add_argument(
        "--run-code",
        type=int,
        default=0,
        metavar="N",
        help="only: N whole programs through HTTP /run_code vs a fresh python3 per program (--backend)",
    )
    ap.add_argument("--run-code-concurrency", default="1,2", help="concurrencies of the --run-code rows")
    ap.add_argument("--rounds", type=int, default=3, help="--run-code: alternating rounds (median ratio)")
    args = ap.parse_args()

    backend_options = {"containers": args.containers, "slots_per_container": args.slots}
    if args.run_code > 0:
        options = backend_options if args.backend == "docker" else {"slots": args.containers * args.slots}
        concs = [int(c) for c in args.run_code_concurrency.split(",")]
        print(f"# /run_code bench: {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f} at start")
        bench_run_code(args.backend, options, args.run_code, concs, args.rounds)
        return
    if args.big_tests_mb > 0:
        options = backend_options if args.backend == "docker" else {"slots": args.slots}
        bench_big_tests(args.big_tests_mb, args.samples, args.backend, options)
        if args.only_big_tests:
            return
    codes = code_items(args.code_items)
    # Steady state on both sides: math-verify, its ANTLR parser (DFA cache) and sympy get faster as they
    # see inputs, so each side scores the measured items once, unmeasured, before the timed pass.
    maths = math_items(min(args.math_items, 500))
    math_warm = maths
    print(
        f"# verifier bench: {os.cpu_count()} cores (load avg {os.getloadavg()[0]:.1f} at start), "
        f"{args.containers}x{args.slots} sandbox slots, {args.math_workers} math workers, "
        f"HTTP batches of {args.batch} x {args.concurrency} in flight",
        flush=True,
    )

    best: dict[str, tuple[float, float]] = {}
    statuses: dict[str, dict[str, int]] = {}

    def keep(name: str, rate: float, cpu_ms: float) -> None:
        old = best.get(name)
        best[name] = (max(rate, old[0]) if old else rate, min(cpu_ms, old[1]) if old else cpu_ms)

    for rep in range(args.repeat):
        keep("direct", *asyncio.run(bench_sandbox_direct(codes, backend_options)))
        rate, cpu, statuses["math in-process"] = bench_math_in_process(maths, math_warm)
        keep("in_process", rate, cpu)
        service = Service(backend_options, args.math_workers)
        try:
            rate, cpu, statuses["code HTTP"] = asyncio.run(
                bench_http(service.url, service.proc.pid, codes, codes[:16], args.batch, args.concurrency)
            )
            keep("http_code", rate, cpu)
            rate, cpu, statuses["math HTTP"] = asyncio.run(
                bench_http(service.url, service.proc.pid, maths, math_warm, args.batch, args.concurrency)
            )
            keep("http_math", rate, cpu)
        finally:
            service.close()
        print(
            f"pass {rep + 1} done (load avg {os.getloadavg()[0]:.1f}); best so far: "
            + ", ".join(f"{k} {v[0]:.1f}/s {v[1]:.1f} CPU ms" for k, v in best.items()),
            flush=True,
        )

    d, hc, ip, hm = best["direct"], best["http_code"], best["in_process"], best["http_math"]
    per_core_http, per_core_local = 1000 / hm[1], 1000 / ip[1]
    rows = [
        ("code, sandbox direct (DockerPoolBackend.judge)", d, "", ""),
        (
            "code, HTTP /v1/verify",
            hc,
            f"throughput {hc[0] / d[0]:.0%} of direct",
            "PASS" if hc[0] >= 0.8 * d[0] else "MISS (target: HTTP costs <= 20%)",
        ),
        ("math, math-verify in-process", ip, f"{per_core_local:.1f} items per CPU-s", ""),
        (
            f"math, HTTP ({args.math_workers} worker(s); CPU = server + workers)",
            hm,
            f"{per_core_http:.1f} items per CPU-s = {per_core_http / per_core_local:.0%} of in-process",
            "PASS" if per_core_http >= 0.7 * per_core_local else "MISS (target >= 70% per core)",
        ),
    ]
    print(
        "\n| path | items/s (wall) | CPU ms/item (verifier side) | ratio | target |\n|---|---:|---:|---|---|"
    )
    for name, (rate, cpu), ratio, target in rows:
        print(f"| {name} | {rate:.1f} | {cpu:.1f} | {ratio} | {target} |")
    print(
        "\nCPU ms/item counts the verifier's side only: this process for the direct rows, the service's "
        "process tree for HTTP rows (not the sandbox containers, not the HTTP client)."
    )
    print(f"statuses: {statuses}")
    print(f"load avg at end {os.getloadavg()[0]:.1f}", flush=True)

    if args.load_seconds > 0:
        run_load_test(args, backend_options)


def run_load_test(args: argparse.Namespace, backend_options: dict) -> None:
    from loadgen import mixed_batch, run_load, wanted  # the same mixed batches as the CI load test

    service = Service(backend_options, args.math_workers)
    try:
        report = asyncio.run(
            run_load(
                service.url,
                mixed_batch,
                rate_per_s=args.load_rate,
                duration_s=args.load_seconds,
                check=wanted,
                server_pid=service.proc.pid,
            )
        )
    finally:
        service.close()
    print(f"\nload test ({args.load_rate:g} req/s x 4 items, {args.load_seconds:g} s): {report.summary()}")
    rss = report.rss_mb
    if rss:
        step = max(1, len(rss) // 10)
        print("server RSS (MB) over time: " + " ".join(f"{x:.0f}" for x in rss[::step]))
    for error in report.errors[:10]:
        print("  error:", error)


if __name__ == "__main__":
    main()
