"""Verifier throughput: HTTP vs. the engines it wraps, measured in one run.

    python bench/verifier.py [--code-items 400] [--math-items 500] [--containers 2] [--slots 2]
                             [--math-workers 2] [--load-seconds 120]

Rows (items per second):
- code, sandbox direct: ``DockerBackend.judge`` at concurrency = pool slots;
- code, HTTP: the same items through ``/v1/verify`` (extraction, validation, JSON, uvicorn) on a
  service with the same pool; target: HTTP costs at most 20% of code throughput;
- math, in-process: math-verify (``check_answer``) in a loop in this process = one core;
- math, HTTP: MATH500 solutions through ``/v1/verify`` with ``--math-workers`` workers; per core =
  items/s / workers; target: at least 70% of in-process per core.
``--load-seconds`` adds a fixed-rate load run (mixed code+math) with the server's memory over time.
Math items are the MATH500 reference solutions (their own \\boxed answer) from ../shared/data/math.
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
MATH500 = ROOT.parent / "shared" / "data" / "math" / "math500.jsonl"

PROGRAM = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))\n"


def code_items(n: int) -> list[dict]:
    items = []
    for i in range(n):
        inputs = [f"{i} {k} {i * k}\n" for k in range(3)]
        outputs = [f"{i + k + i * k}\n" for k in range(3)]
        items.append({"id": f"c{i}", "program": "code", "response": f"```python\n{PROGRAM}```",
                      "spec": {"tests": {"format": "stdio", "inputs": inputs, "outputs": outputs}}})
    return items


def math_items(n: int) -> list[dict]:
    rows = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
    return [{"id": f"m{i}", "program": "math", "response": rows[i % len(rows)]["solution"],
             "spec": {"answer": rows[i % len(rows)]["answer"]}} for i in range(n)]


async def bench_sandbox_direct(items: list[dict], backend_options: dict) -> float:
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
        t0 = time.perf_counter()
        verdicts = await asyncio.gather(*(one(j) for j in jobs))
        wall = time.perf_counter() - t0
    finally:
        await backend.close()
    assert all(v == "correct" for v in verdicts), set(verdicts)
    return len(items) / wall


async def bench_http(url: str, items: list[dict], batch: int, concurrency: int) -> tuple[float, dict[str, int]]:
    from mucode.verifier.client import VerifierClient

    client = VerifierClient(url, batch_size=batch, max_concurrency=concurrency, max_retries=0)
    try:
        await client.verify(items[: batch * concurrency])  # warm-up
        t0 = time.perf_counter()
        results = await client.verify(items)
        wall = time.perf_counter() - t0
    finally:
        await client.aclose()
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return len(items) / wall, counts


def bench_math_in_process(items: list[dict]) -> tuple[float, dict[str, int]]:
    import logging

    from mucode.rewards.math_worker import check_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    check_answer("1", "\\boxed{1}")
    counts: dict[str, int] = {}
    t0 = time.perf_counter()
    for it in items:
        status = check_answer(str(it["spec"]["answer"]), it["response"])["status"]
        counts[status] = counts.get(status, 0) + 1
    return len(items) / (time.perf_counter() - t0), counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code-items", type=int, default=400)
    ap.add_argument("--math-items", type=int, default=500)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--slots", type=int, default=2, help="slots per sandbox container")
    ap.add_argument("--math-workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                    help="math-verify workers (default: cores - 1, leaving one for the server and this client)")
    ap.add_argument("--batch", type=int, default=32, help="items per HTTP request")
    ap.add_argument("--concurrency", type=int, default=4, help="HTTP requests in flight")
    ap.add_argument("--load-seconds", type=float, default=0.0, help="also run a fixed-rate load test this long")
    ap.add_argument("--load-rate", type=float, default=8.0, help="requests/s of the load test (4 items each)")
    args = ap.parse_args()

    from mucode.verifier.local import local_verifier

    backend_options = {"containers": args.containers, "slots_per_container": args.slots}
    codes, maths = code_items(args.code_items), math_items(args.math_items)
    print(f"# verifier bench: {os.cpu_count()} cores (load avg {os.getloadavg()[0]:.1f} at start), "
          f"{args.containers}x{args.slots} sandbox slots, {args.math_workers} math workers, "
          f"HTTP batches of {args.batch} x {args.concurrency} in flight", flush=True)

    direct = asyncio.run(bench_sandbox_direct(codes, backend_options))
    in_process, math_counts_local = bench_math_in_process(maths)
    with local_verifier("docker", backend_options=backend_options, math_workers=args.math_workers,
                        run_code=False) as url:
        http_code, code_counts = asyncio.run(bench_http(url, codes, args.batch, args.concurrency))
        http_math, math_counts = asyncio.run(bench_http(url, maths, args.batch, args.concurrency))

    per_core = http_math / args.math_workers
    rows = [
        ("code, sandbox direct (judge)", direct, "", ""),
        ("code, HTTP /v1/verify", http_code, f"{http_code / direct:.0%} of direct",
         "PASS" if http_code >= 0.8 * direct else "MISS (target >= 80%)"),
        ("math, math-verify in-process (1 core)", in_process, "", ""),
        (f"math, HTTP ({args.math_workers} workers), per core", per_core, f"{per_core / in_process:.0%} of in-process",
         "PASS" if per_core >= 0.7 * in_process else "MISS (target >= 70%)"),
        (f"math, HTTP ({args.math_workers} workers), total", http_math, "", ""),
    ]
    print("\n| path | items/s | ratio | target |\n|---|---:|---|---|")
    for name, rate, ratio, target in rows:
        print(f"| {name} | {rate:.1f} | {ratio} | {target} |")
    print(f"\nstatuses: code HTTP {code_counts}; math HTTP {math_counts}; math in-process {math_counts_local}")
    print(f"load avg at end {os.getloadavg()[0]:.1f}", flush=True)

    if args.load_seconds > 0:
        run_load_test(args, backend_options)


def run_load_test(args: argparse.Namespace, backend_options: dict) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "verifier"))
    from test_load import batch  # the same mixed batches as the CI load test

    from mucode.verifier.loadtest import run_load

    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "MUCODE_MATH_WORKERS": str(args.math_workers),
           "MUCODE_BACKEND_OPTIONS": json.dumps(backend_options)}
    proc = subprocess.Popen([sys.executable, "-m", "mucode.verifier"], env={**env, "MUCODE_PORT": str(port),
                                                                           "MUCODE_BACKEND": "docker"})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        report = asyncio.run(run_load(url, batch, rate_per_s=args.load_rate, duration_s=args.load_seconds,
                                      check=lambda item, result: result["status"] == item["want"],
                                      server_pid=proc.pid))
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"\nload test ({args.load_rate:g} req/s x 4 items, {args.load_seconds:g} s): {report.summary()}")
    rss = report.rss_mb
    if rss:
        step = max(1, len(rss) // 10)
        print("server RSS (MB) over time: " + " ".join(f"{x:.0f}" for x in rss[::step]))
    for error in report.errors[:10]:
        print("  error:", error)


if __name__ == "__main__":
    main()
