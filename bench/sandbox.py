"""Sandbox throughput and latency: tests per second and p50/p95 job latency.

    .venv/bin/python bench/sandbox.py [--backends local,docker] [--concurrency 1,2,8] [--jobs 200]

Workloads: (a) hello-world, (b) read two integers and print their sum (one test per job),
(c) one problem with 30 stdio tests (one job of 30 tests; latency is per job); (b) and (c) also in
C++ and Java (``--languages``; a job compiles once, then runs its tests), printed as ratios to
Python's tests/s at the end. Rows:
- ``local`` / ``docker``: mucode's backends through ``judge()`` (docker: a warm pool of
  ``--containers`` containers x ``--slots`` slots, one Unix socket per container);
- floor ``subprocess``: a fresh ``/usr/bin/python3 -I -S -c`` per test, no isolation at all;
- floor ``fork``: ``os.fork()`` of an already started interpreter that ``exec``s the program with
  stdin/stdout on pipes, no isolation at all;
- ``docker run``: one ``docker run --rm -i --network none`` of the sandbox image per program (b).
- ``local`` / ``docker`` under attack: (b) at concurrency 2 while a fork bomb and a CPU spinner run
  back to back in two other slots.
``--compare-dir OLD/sandbox [--compare-image IMAGE]``: instead, an A/B of this executor
against another version of it (e.g. ``git archive <rev> sandbox | tar -x -C /tmp/old``;
``sandbox`` for revisions before the executor moved into the package; and an image built
from it), both running at once, in interleaved rounds so both see the same load; prints the median
tests/s of each and the ratio, for a+b and 30-test jobs at concurrency 1 and 4, and the CPU time
the executors used per test (their process tree with ``local``, their containers' cpuacct cgroups
with ``docker``): on a shared machine tests/s moves with other work, CPU per test much less.
``--assert-ab OLD_TREE``: instead, HumanEval-style assert jobs (three problems with their
``check(candidate)``, one job = one test) through the local backend of this tree and of another
checkout of mucode (e.g. ``git archive <rev> | tar -x -C /tmp/old``), each in a subprocess of its
own, in interleaved rounds; prints the median jobs/s of each and the ratio (the assert harness's
second process is in the new figure). Run it on a quiet machine; figures on a shared machine move with the
other load (printed). On a
cgroup-v1 host the bench moves itself into a CPU cgroup weighted like ``/docker`` (all containers
share that one weight), so that local/floor rows and docker rows compete alike with other work.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec, make_backend  # noqa: E402
from proctree import cpu_s  # noqa: E402  (bench/proctree.py)

HELLO = "print('hello world')"
A_PLUS_B = "a, b = map(int, input().split())\nprint(a + b)"
CPP_A_PLUS_B = (
    '#include <cstdio>\nint main() { long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\\n", a + b); }'
)
JAVA_A_PLUS_B = (
    "import java.io.*;\npublic class Main { public static void main(String[] x) throws IOException {\n"
    '  String[] t = new BufferedReader(new InputStreamReader(System.in)).readLine().split(" ");\n'
    "  System.out.println(Long.parseLong(t[0]) + Long.parseLong(t[1])); } }"
)
THIRTY = ([f"{i} {2 * i}\n" for i in range(30)], [str(3 * i) for i in range(30)])
WORKLOADS: dict[str, tuple[str, list[str], list[str], str]] = {  # program, inputs, outputs, language
    "hello": (HELLO, [""], ["hello world"], "python"),
    "a+b": (A_PLUS_B, ["3 4\n"], ["7"], "python"),
    "30 tests": (A_PLUS_B, *THIRTY, "python"),
    "a+b cpp": (CPP_A_PLUS_B, ["3 4\n"], ["7"], "cpp"),
    "30 tests cpp": (CPP_A_PLUS_B, *THIRTY, "cpp"),
    "a+b java": (JAVA_A_PLUS_B, ["3 4\n"], ["7"], "java"),
    "30 tests java": (JAVA_A_PLUS_B, *THIRTY, "java"),
}
PY = "/usr/bin/python3"


@dataclass
class Row:
    system: str
    workload: str
    concurrency: int
    tests_per_s: float
    p50_ms: float
    p95_ms: float
    jobs: int

    def line(self) -> str:
        return (
            f"| {self.system} | {self.workload} | {self.concurrency} | {self.tests_per_s:.0f} | "
            f"{self.p50_ms:.1f} | {self.p95_ms:.1f} | {self.jobs} |"
        )


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] * 1000


def _row(system: str, workload: str, conc: int, lat: list[float], wall: float, tests_per_job: int) -> Row:
    return Row(
        system, workload, conc, len(lat) * tests_per_job / wall, _pct(lat, 0.5), _pct(lat, 0.95), len(lat)
    )


async def bench_backend(
    name: str, options: dict, concs: list[int], jobs: int, langs: list[str], attack: bool = True
) -> list[Row]:
    backend = make_backend(name, **options)  # type: ignore[arg-type]
    await backend.start()
    rows = []
    try:
        for workload, (program, inputs, outputs, lang) in WORKLOADS.items():
            if lang not in langs:
                continue
            job = CodeJob(program, TestSpec("stdio", inputs, outputs), language=lang, time_limit_s=5)
            n = max(4, jobs // len(inputs)) if len(inputs) > 1 else jobs
            n = n if lang == "python" else max(4, n // 10)  # a compile per job: fewer jobs
            for _ in range(3):  # warm-up
                await backend.judge(job)
            for conc in concs:
                lat: list[float] = []
                sem = asyncio.Semaphore(conc)

                async def one(sem: asyncio.Semaphore, job: CodeJob, lat: list[float]) -> None:
                    async with sem:
                        t = time.perf_counter()
                        r = await backend.judge(job)
                        lat.append(time.perf_counter() - t)
                        if r.verdict is not Status.correct:
                            raise RuntimeError(f"{name}: {r}")

                start = time.perf_counter()
                await asyncio.gather(*[one(sem, job, lat) for _ in range(n)])
                rows.append(_row(name, workload, conc, lat, time.perf_counter() - start, len(inputs)))
                print(rows[-1].line(), flush=True)
        if attack:
            rows.append(await under_attack(backend, name, jobs))
            print(rows[-1].line(), flush=True)
    finally:
        await backend.close()
    return rows


HOSTILE = [  # each keeps one slot busy, looping until the measurement ends
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "while True:\n    pass\n",
]


async def under_attack(backend, name: str, jobs: int, conc: int = 2) -> Row:  # type: ignore[no-untyped-def]
    """a+b at concurrency 2 while a fork bomb and a CPU spinner occupy two other slots."""
    stop = asyncio.Event()

    async def hostile(program: str) -> None:
        while not stop.is_set():
            await backend.judge(CodeJob(program, TestSpec("stdio", [""], [""]), time_limit_s=2))

    attackers = [asyncio.create_task(hostile(p)) for p in HOSTILE]
    await asyncio.sleep(1.0)
    program, inputs, outputs, _ = WORKLOADS["a+b"]
    job = CodeJob(program, TestSpec("stdio", inputs, outputs), time_limit_s=5)
    sem = asyncio.Semaphore(conc)
    lat: list[float] = []

    async def one() -> None:
        async with sem:
            t = time.perf_counter()
            r = await backend.judge(job)
            lat.append(time.perf_counter() - t)
            if r.verdict is not Status.correct:
                raise RuntimeError(f"{name} under attack: {r}")

    start = time.perf_counter()
    try:
        await asyncio.gather(*[one() for _ in range(jobs // 2)])
    finally:
        stop.set()
        await asyncio.gather(*attackers, return_exceptions=True)
    return _row(name, "a+b, fork bomb + spin in 2 other slots", conc, lat, time.perf_counter() - start, 1)


def _fresh_subprocess(program: str, stdin: str) -> str:
    return subprocess.run(
        [PY, "-I", "-S", "-c", program], input=stdin.encode(), capture_output=True, check=True
    ).stdout.decode()


def _forked(program: str, stdin: str) -> str:
    """Fork of this (already started) interpreter; the child execs the program on pipes."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        import io

        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
        try:
            exec(compile(program, "solution.py", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
        finally:
            os._exit(0)
    os.close(in_r)
    os.close(out_w)
    os.write(in_w, stdin.encode())
    os.close(in_w)
    chunks = []
    while chunk := os.read(out_r, 65536):
        chunks.append(chunk)
    os.close(out_r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def _fork_worker(args: tuple[str, list[str], int]) -> list[float]:
    program, inputs, n = args
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        for stdin in inputs:
            _forked(program, stdin)
        lat.append(time.perf_counter() - t)
    return lat


def bench_floors(concs: list[int], jobs: int) -> list[Row]:
    import multiprocessing as mp

    rows = []
    for workload, (program, inputs, _, lang) in WORKLOADS.items():
        if lang != "python":
            continue
        n = max(4, jobs // len(inputs)) if len(inputs) > 1 else jobs
        for conc in concs:

            def one(_: int) -> float:
                t = time.perf_counter()
                for stdin in inputs:  # noqa: B023
                    _fresh_subprocess(program, stdin)  # noqa: B023
                return time.perf_counter() - t

            start = time.perf_counter()
            with ThreadPoolExecutor(conc) as pool:
                lat = list(pool.map(one, range(n)))
            rows.append(
                _row(
                    "floor: fresh python3 -I -S",
                    workload,
                    conc,
                    lat,
                    time.perf_counter() - start,
                    len(inputs),
                )
            )
            print(rows[-1].line(), flush=True)
            ctx = mp.get_context("fork")
            start = time.perf_counter()
            with ctx.Pool(conc) as pool:
                parts = pool.map(_fork_worker, [(program, inputs, max(1, n // conc))] * conc)
            lat = [x for part in parts for x in part]
            rows.append(
                _row(
                    "floor: fork of a started interpreter",
                    workload,
                    conc,
                    lat,
                    time.perf_counter() - start,
                    len(inputs),
                )
            )
            print(rows[-1].line(), flush=True)
    return rows


def bench_docker_run(image: str, concs: list[int], n: int) -> list[Row]:
    rows = []
    program, inputs, _, _ = WORKLOADS["a+b"]
    cmd = [
        "docker",
        "run",
        "--rm",
        "-i",
        "--network",
        "none",
        "--entrypoint",
        "python3",
        image,
        "-I",
        "-S",
        "-c",
        program,
    ]
    for conc in concs:

        def one(_: int) -> float:
            t = time.perf_counter()
            subprocess.run(cmd, input=inputs[0].encode(), capture_output=True, check=True)  # noqa: B023
            return time.perf_counter() - t

        start = time.perf_counter()
        with ThreadPoolExecutor(conc) as pool:
            lat = list(pool.map(one, range(n)))
        rows.append(_row("docker run per program", "a+b", conc, lat, time.perf_counter() - start, 1))
        print(rows[-1].line(), flush=True)
    return rows


CGROUP = Path("/sys/fs/cgroup/cpu/mucode-bench")


def enter_fair_cgroup() -> bool:
    """Docker puts every container under /docker, one CPU cgroup of weight 1024: on a machine busy
    with other work, all containers together weigh as much as one busy host process, while the
    local backend and the floors run as individual host processes. For a like-for-like table, move
    this process (and so the local jail and the floor subprocesses) into a sibling cgroup of the
    same weight (cgroup v1 only; removed at exit)."""
    try:
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "cpu.shares").write_text("1024")
        (CGROUP / "cgroup.procs").write_text(str(os.getpid()))
        return True
    except OSError as exc:
        print(f"# could not enter {CGROUP} ({exc}); rows are not weighted alike under load")
        return False


def leave_fair_cgroup() -> None:
    try:
        Path("/sys/fs/cgroup/cpu/cgroup.procs").write_text(str(os.getpid()))
        CGROUP.rmdir()
    except OSError:
        pass


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="local,docker")
    p.add_argument("--concurrency", default="1,2,8")
    p.add_argument("--jobs", type=int, default=200, help="jobs per cell (30-test cells: jobs/30, at least 4)")
    p.add_argument("--containers", type=int, default=8)
    p.add_argument(
        "--slots", type=int, default=1, help="slots per container (docker); local gets containers x slots"
    )
    p.add_argument("--image", default="mucode-sandbox:latest")
    p.add_argument("--docker-run-programs", type=int, default=16)
    p.add_argument("--no-floors", action="store_true")
    p.add_argument("--no-attack", action="store_true", help="skip the rows under attack")
    p.add_argument(
        "--uid-base", type=int, default=61000, help="the local backend's slot uids (keep them unshared)"
    )
    p.add_argument("--languages", default="python,cpp,java", help="workload languages (python always first)")
    p.add_argument(
        "--no-fair-cgroup", action="store_true", help="do not weight this process like the /docker cgroup"
    )
    p.add_argument("--compare-dir", help="A/B against the executor in this dir (local) ...")
    p.add_argument("--compare-image", help="... and this sandbox image (docker)")
    p.add_argument("--rounds", type=int, default=6, help="A/B: interleaved rounds")
    p.add_argument(
        "--assert-ab", metavar="OLD_TREE", help="A/B of HumanEval-style assert jobs against that checkout"
    )
    args = p.parse_args()
    if args.assert_ab:
        assert_ab(Path(args.assert_ab), args.rounds)
        return
    if args.compare_dir:
        for name in [b for b in args.backends.split(",") if b and (b == "local" or args.compare_image)]:
            asyncio.run(compare(name, args))
        return
    fair = not args.no_fair_cgroup and Path("/sys/fs/cgroup/cpu/docker").is_dir() and enter_fair_cgroup()
    try:
        run(args, fair)
    finally:
        if fair:
            leave_fair_cgroup()


def _executor_cpu_s(backend) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds used so far by a backend's executors (the jail's process tree; the containers'
    cgroups). A measure that other load on a shared machine barely moves, unlike tests/s."""
    if backend.name == "local":
        return cpu_s(backend._proc.pid)
    total = 0.0
    for name in backend.container_names:
        cid = subprocess.run(
            ["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True
        ).stdout.strip()
        usage = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        total += int(usage.read_text()) / 1e9 if usage.exists() else float("nan")
    return total


async def compare(kind: str, args: argparse.Namespace) -> None:
    """A/B of two executor versions started side by side, in interleaved rounds."""
    import statistics

    if kind == "local":
        old = make_backend(
            "local", slots=4, uid_base=62100, executor_dir=args.compare_dir, health_interval_s=0
        )
        new = make_backend("local", slots=4, uid_base=62200, health_interval_s=0)
    else:
        old = make_backend(
            "docker", containers=4, uid_base=12100, image=args.compare_image, health_interval_s=0
        )
        new = make_backend("docker", containers=4, uid_base=12200, image=args.image, health_interval_s=0)
    for flag in ("--deadline-slack-s",):  # options an older executor may not know
        i = old.executor_args.index(flag)  # type: ignore[attr-defined]
        del old.executor_args[i : i + 2]  # type: ignore[attr-defined]
    one = CodeJob(A_PLUS_B, TestSpec("stdio", ["3 4\n"], ["7"]))
    thirty = CodeJob(A_PLUS_B, TestSpec("stdio", *THIRTY))

    async def cell(b, job: CodeJob, conc: int, n: int) -> float:  # type: ignore[no-untyped-def]
        sem = asyncio.Semaphore(conc)

        async def one_job() -> None:
            async with sem:
                r = await b.judge(job)
                if r.verdict is not Status.correct:
                    raise RuntimeError(f"{kind}: {r}")

        t0, c0 = time.perf_counter(), _executor_cpu_s(b)
        await asyncio.gather(*(one_job() for _ in range(n)))
        tests = n * len(job.tests.inputs)
        cpu.setdefault(id(b), {}).setdefault((len(job.tests.inputs), conc), []).append(
            (_executor_cpu_s(b) - c0) * 1000 / tests
        )
        return tests / (time.perf_counter() - t0)

    await old.start()
    await new.start()
    res: dict[tuple[str, int, str], list[float]] = {}
    cpu: dict[int, dict[tuple[int, int], list[float]]] = {}
    try:
        for b in (old, new):
            for _ in range(5):
                await b.judge(one)
        for r in range(args.rounds):
            for name, b in (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old)):
                for wl, job, n in (("a+b", one, 60), ("30 tests", thirty, 4)):
                    for conc in (1, 4):
                        res.setdefault((wl, conc, name), []).append(await cell(b, job, conc, n))
    finally:
        await old.close()
        await new.close()
    print(
        f"# {kind}: A/B, median tests/s over {args.rounds} interleaved rounds, load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| backend | workload | concurrency | old tests/s | new tests/s | new/old "
        "| old executor CPU ms/test | new | new/old |\n|---|---|---|---|---|---|---|---|---|"
    )
    for wl, job in (("a+b", one), ("30 tests", thirty)):
        for conc in (1, 4):
            o, n = (statistics.median(res[(wl, conc, v)]) for v in ("old", "new"))
            co, cn = (statistics.median(cpu[id(b)][(len(job.tests.inputs), conc)]) for b in (old, new))
            print(
                f"| {kind} | {wl} | {conc} | {o:.0f} | {n:.0f} | {n / o:.2f} | {co:.2f} | {cn:.2f} | {cn / co:.2f} |"
            )


HUMANEVAL = [  # (program, test code, entry point): HumanEval/0, /2 and /3 with their canonical solutions
    (
        "def has_close_elements(numbers, threshold):\n    for i, a in enumerate(numbers):\n"
        "        for j, b in enumerate(numbers):\n            if i != j and abs(a - b) < threshold:\n"
        "                return True\n    return False\n",
        "def check(candidate):\n    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
        "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
        "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False\n"
        "    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1) == True\n"
        "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True\n"
        "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False\n",
        "has_close_elements",
    ),
    (
        "def truncate_number(number):\n    return number % 1.0\n",
        "def check(candidate):\n    assert candidate(3.5) == 0.5\n    assert abs(candidate(1.33) - 0.33) < 1e-6\n"
        "    assert abs(candidate(123.456) - 0.456) < 1e-6\n",
        "truncate_number",
    ),
    (
        "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
        "        if balance < 0:\n            return True\n    return False\n",
        "def check(candidate):\n    assert candidate([]) == False\n    assert candidate([1, 2, -3, 1, 2, -3]) == False\n"  # noqa: E501
        "    assert candidate([1, 2, -4, 5, 6]) == True\n    assert candidate([1, -1, 2, -2, 5, -5, 4, -4]) == False\n"
        "    assert candidate([1, -1, 2, -2, 5, -5, 4, -5]) == True\n"
        "    assert candidate([1, -2, 2, -2, 5, -5, 4, -4]) == True\n",
        "below_zero",
    ),
]
_ASSERT_CELL = """
import asyncio, json, sys, time
from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec, make_backend
problems, conc, n, bench_dir = json.loads(sys.argv[1])
sys.path.insert(0, bench_dir)
from proctree import cpu_s
jobs = [CodeJob(p, TestSpec("assert", assert_code=t, entry_point=e)) for p, t, e in problems]
async def main():
    b = make_backend("local", slots=4, uid_base=62300, health_interval_s=0)
    await b.start()
    try:
        for j in jobs:
            assert (await b.judge(j)).verdict is Status.correct
        sem = asyncio.Semaphore(conc)
        async def one(j):
            async with sem:
                r = await b.judge(j)
                assert r.verdict is Status.correct, r
        t, c = time.perf_counter(), cpu_s(b._proc.pid)
        await asyncio.gather(*(one(jobs[i % len(jobs)]) for i in range(n)))
        print(json.dumps([n / (time.perf_counter() - t), (cpu_s(b._proc.pid) - c) * 1000 / n]))
    finally:
        await b.close()
asyncio.run(main())
"""


def assert_ab(old_tree: Path, rounds: int) -> None:
    """HumanEval-style assert jobs/s through the local backend of ``old_tree`` and of this tree."""
    import json
    import statistics

    new_tree = Path(__file__).resolve().parents[1]
    res: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        for name, tree in (
            (("old", old_tree), ("new", new_tree)) if r % 2 == 0 else (("new", new_tree), ("old", old_tree))
        ):
            for conc in (1, 4):
                cell = json.dumps([HUMANEVAL, conc, 150, str(Path(__file__).resolve().parent)])
                out = subprocess.run(
                    [sys.executable, "-c", _ASSERT_CELL, cell],
                    cwd=tree,
                    capture_output=True,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    text=True,
                    check=True,
                    timeout=600,
                )
                rate, ms = json.loads(out.stdout.splitlines()[-1])
                res.setdefault((name, conc), []).append(rate)
                cpu.setdefault((name, conc), []).append(ms)
    print(
        f"# HumanEval-style assert jobs, local backend, median jobs/s over {rounds} interleaved rounds, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| concurrency | old jobs/s | new jobs/s | new/old | old executor CPU ms/job | new | new/old |\n"
        "|---|---|---|---|---|---|---|"
    )
    for conc in (1, 4):
        o, n = (statistics.median(res[(v, conc)]) for v in ("old", "new"))
        co, cn = (statistics.median(cpu[(v, conc)]) for v in ("old", "new"))
        print(f"| {conc} | {o:.0f} | {n:.0f} | {n / o:.2f} | {co:.2f} | {cn:.2f} | {cn / co:.2f} |")


def run(args: argparse.Namespace, fair: bool) -> None:
    concs = [int(c) for c in args.concurrency.split(",")]
    print(
        f"# sandbox bench, {os.cpu_count()} cores, load before: {os.getloadavg()[0]:.2f}, "
        f"bench in a CPU cgroup weighted like /docker: {fair}"
    )
    print("| system | workload | concurrency | tests/s | p50 ms/job | p95 ms/job | jobs |")
    print("|---|---|---|---|---|---|---|")
    rows: list[Row] = []
    for name in [b for b in args.backends.split(",") if b]:
        opts = (
            {
                "containers": args.containers,
                "slots_per_container": args.slots,
                "health_interval_s": 0,
                "image": args.image,
            }
            if name == "docker"
            else {"slots": args.slots * args.containers, "health_interval_s": 0, "uid_base": args.uid_base}
        )
        langs = args.languages.split(",")
        rows += asyncio.run(bench_backend(name, opts, concs, args.jobs, langs, not args.no_attack))
    if not args.no_floors:
        rows += bench_floors(concs, args.jobs)
    if "docker" in args.backends and args.docker_run_programs:
        rows += bench_docker_run(args.image, [c for c in concs if c <= 2], args.docker_run_programs)
    print(f"# load after: {os.getloadavg()[0]:.2f}")
    by = {(r.system, r.workload, r.concurrency): r.tests_per_s for r in rows}
    for conc in concs:
        for system in ("local", "docker"):
            d, f = by.get((system, "a+b", conc)), by.get(("floor: fresh python3 -I -S", "a+b", conc))
            if d and f:
                print(
                    f"# a+b at concurrency {conc}: {system} {d:.0f} tests/s = {d / f:.2f}x the "
                    "fresh-subprocess floor"
                )
    for (system, workload, conc), value in by.items():
        py = by.get((system, workload.rsplit(" ", 1)[0], conc))
        if workload.endswith((" cpp", " java")) and py:
            print(
                f"# {system} {workload} at concurrency {conc}: {value:.0f} tests/s = {value / py:.2f}x Python's"
            )
    run1 = by.get(("docker run per program", "a+b", 1))
    if run1:
        best = max((v for (s, w, _), v in by.items() if s == "docker" and w == "a+b"), default=0)
        print(
            f"# a+b: docker backend best {best:.0f} tests/s = {best / run1:.1f}x one `docker run` per program"
        )


if __name__ == "__main__":
    main()
