"""What a checker program costs per test, against the in-process exact checker, in the same process.

    .venv/bin/python bench/checkers.py [--backends local,docker] [--tests 30] [--rounds 8]

One job = one program (read two integers, print their sum) with ``--tests`` stdio tests, judged by:
- ``exact``: the in-process checker (``checker="exact"``; the baseline);
- ``program``: a Python checker program (testlib-style, token comparison), one checker request per
  job (what mucode does: the checker forks per test in one slot);
- ``program, a request per test``: the same checker with every test in a checker request of its
  own (``MAX_REQUEST_BYTES`` set to 1), the cost a checker started per test would add.
Rounds interleave the three so they see the same load; prints the median job time of each, the
checker's overhead per test (``(program - exact) / tests``) and the ratio to ``exact``. Figures
move with other work on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mucode.protocol import Status  # noqa: E402
from mucode.sandbox import CodeJob, TestSpec, checker_program, make_backend  # noqa: E402
from mucode.sandbox.types import CheckerProgram  # noqa: E402

A_PLUS_B = "a, b = map(int, input().split())\nprint(a + b)"
TOKENS = CheckerProgram(
    "import sys\nout, ans = (open(p).read().split() for p in sys.argv[2:4])\nsys.exit(0 if out == ans else 1)\n"
)


def _job(tests: int, checker: CheckerProgram | None) -> CodeJob:
    spec = TestSpec("stdio", [f"{i} {2 * i}\n" for i in range(tests)], [f"{3 * i}\n" for i in range(tests)])
    return CodeJob(A_PLUS_B, spec, checker="exact", checker_program=checker)


async def _time(backend: object, job: CodeJob) -> float:
    start = time.perf_counter()
    result = await backend.judge(job)  # type: ignore[attr-defined]
    if result.verdict is not Status.correct:
        raise SystemExit(f"bench job not correct: {result.verdict} {result.error}")
    return time.perf_counter() - start


async def bench(kind: str, tests: int, rounds: int) -> None:
    options = (
        {"slots": 2, "uid_base": 63000}
        if kind == "local"
        else {
            "containers": 1,
            "slots_per_container": 2,
            "image": os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest"),
        }
    )
    backend = make_backend(kind, **options)  # type: ignore[arg-type]
    await backend.start()
    rows: dict[str, list[float]] = {"exact": [], "program": [], "program, a request per test": []}
    try:
        for _ in range(2):  # warm-up
            await _time(backend, _job(tests, TOKENS))
        for _ in range(rounds):
            rows["exact"].append(await _time(backend, _job(tests, None)))
            rows["program"].append(await _time(backend, _job(tests, TOKENS)))
            saved = checker_program.MAX_REQUEST_BYTES
            checker_program.MAX_REQUEST_BYTES = 1
            try:
                rows["program, a request per test"].append(await _time(backend, _job(tests, TOKENS)))
            finally:
                checker_program.MAX_REQUEST_BYTES = saved
    finally:
        await backend.close()
    base = statistics.median(rows["exact"])
    print(f"\n{kind}: one job of {tests} tests, median of {rounds} rounds")
    print(f"{'checker':32} {'job ms':>8} {'ms/test over exact':>19} {'ratio':>6}")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"{name:32} {med * 1e3:8.1f} {(med - base) / tests * 1e3:19.2f} {med / base:6.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="local")
    p.add_argument("--tests", type=int, default=30)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    for kind in args.backends.split(","):
        asyncio.run(bench(kind, args.tests, args.rounds))


if __name__ == "__main__":
    main()
