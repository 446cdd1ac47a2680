"""Evaluator throughput at real size, next to the upstream graders on the same samples.

    python bench/eval.py [--lcb-mb 12] [--lcb-values 60000] [--samples 8] [--plus-inputs 1000] [--workers 2]
                         [--backend local|docker] [--image IMAGE] [--slots 2] [--rounds 1]

Rows (samples scored per second, wall clock):
- LiveCodeBench, one stdin problem with `--lcb-mb` MB of private tests (LiveCodeBench's encoding,
  read from a release file) and `--samples` samples (5 of 8 correct): mucode's `evaluate_livecodebench`
  through a verifier service (a child process, `--slots` sandbox slots), and LiveCodeBench's own
  grader (`evaluate_generations`, the part of `codegen_metrics` that runs the programs, in a child
  process with `--workers` processes and its 6 s timeout);
- EvalPlus, one HumanEval+ task with `--plus-inputs` plus inputs: mucode's `evaluate_evalplus`
  through the same service, and evalplus's own `untrusted_check` (base and plus tests, fast check)
  in `--workers` processes.
Both sides are timed the same way: grading only, with imports warmed and data decoded before the
clock (mucode's LiveCodeBench problems are loaded, and `datasets` imported, before its timed call,
as the upstream grader gets decoded tests), and nothing traced. ``--client-memory`` adds a second,
separate mucode pass under tracemalloc for the client's peak Python memory (the evaluator process
only: building items, hashing test sets, sending requests); tracing slows Python several times, so
it never shares a clock with a rate. The upstream graders run the programs in their own processes
without isolation; mucode runs every test in a fresh sandboxed process.
The machine may be shared: rerun before trusting a small difference; ``--rounds N`` alternates the two
LiveCodeBench graders N times (the same load for both) and prints the median of the ratios.
Each round also runs the LiveCodeBench samples' programs alone (each sample's tests in order until its
first failing one, as every grader runs them: no grader, no isolation) twice, in one plain warm process
(stdin and stdout in memory) and with a fork of it per test, and prints two *ceilings*:
LiveCodeBench's wall time over the least wall time a grader could take on ``--workers`` busy cores,
the programs' CPU time spread evenly over them. No grader can beat LiveCodeBench by more than the
first on this problem; none that gives each test a fresh process (mucode does) by more than the
second: a fresh process pays for every page the program touches again. With ``--backend local``
each round also splits mucode's CPU between the test processes, the job handlers, their zygotes,
the service and the evaluator (the executors are in the service's process tree; docker's are not),
beside the forked floor's CPU a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

SUM_OK = "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(map(int, data[1:n + 1])))"
SUM_WRONG = "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(map(int, data[1:n])))"
CLAMP_OK = "def clamp_sum(xs, hi):\n    return sum(x if x < hi else hi for x in xs)"
CLAMP_WRONG = "def clamp_sum(xs, hi):\n    return max(0, sum(min(x, hi) for x in xs))"


def lcb_problem(directory: Path, megabytes: float, per_test: int = 60_000) -> list[dict[str, str]]:
    """Write a release file with one stdin problem (``per_test`` integers a test, ``megabytes`` of tests);
    returns its tests (public + private)."""
    import base64
    import pickle
    import zlib

    rng = random.Random(0)
    tests: list[dict[str, str]] = []
    size = 0
    while size < megabytes * 1e6:
        values = [rng.randrange(-(10**9), 10**9) for _ in range(per_test)]
        tests.append({"input": f"{len(values)}\n{' '.join(map(str, values))}\n", "output": f"{sum(values)}\n", "testtype": "stdin"})  # fmt: skip  # noqa: E501
        size += len(tests[-1]["input"])
    public = [{"input": "2\n1 2\n", "output": "3\n", "testtype": "stdin"}]
    row = {
        "question_title": "Big Sum", "question_content": "Print the sum of N integers.", "platform": "atcoder",
        "question_id": "abc999_z", "contest_id": "abc999", "contest_date": "2025-01-04T00:00:00",
        "starter_code": "", "difficulty": "hard", "public_test_cases": json.dumps(public), "metadata": "{}",
        "private_test_cases": base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode(),
    }  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test.jsonl").write_text(json.dumps(row) + "\n")
    return public + tests


def lcb_codes(samples: int) -> list[str]:
    return [f"{SUM_OK if i % 8 < 5 else SUM_WRONG}\n# sample {i}" for i in range(samples)]


def timed_client(fn: Any, trace: bool = False) -> tuple[Any, float, float | None]:
    """(result, wall seconds, peak traced MB or None) of fn() in this process; traced only if asked."""
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        result = fn()
    finally:
        wall = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 1e6 if trace else None
        if trace:
            tracemalloc.stop()
    return result, wall, peak


def mucode_lcb(
    url: str, data: Path, samples: int, trace: bool = False
) -> tuple[dict[str, Any], float, float | None]:
    from mucode.eval.core import SamplesSource
    from mucode.eval.judge import VerifierOptions
    from mucode.eval.livecodebench.data import load_livecodebench
    from mucode.eval.livecodebench.evaluate import evaluate_livecodebench

    problems = load_livecodebench(
        "release_v1", source=data
    )  # decoded (and `datasets` imported) off the clock
    source = SamplesSource({"abc999_z": [f"```python\n{c}\n```" for c in lcb_codes(samples)]})
    return timed_client(
        lambda: evaluate_livecodebench(
            source, release="release_v1", problems=problems, verifier=VerifierOptions(urls=[url])
        )["livecodebench"],
        trace,
    )


_LCB_GRADER = r"""
import json, sys, time
from livecodebench.evaluation.compute_code_generation_metrics import evaluate_generations
job = json.load(sys.stdin)
sample = {"input_output": job["io"]}
t0 = time.perf_counter()
# as codegen_metrics does: one (sample, [generation]) job per generation, in a process pool
results, _ = evaluate_generations([sample] * len(job["codes"]), [[c] for c in job["codes"]],
                                  num_process_evaluate=job["workers"], timeout=6)
passed = [all(r > 0 for r in results[i][0]) for i in range(len(job["codes"]))]
print(json.dumps({"wall": time.perf_counter() - t0, "pass@1": sum(passed) / len(passed)}))
"""


_PROGRAMS_ALONE = r"""
import io, json, os, sys, time
job = json.load(sys.stdin)
codes = [compile(c, "solution.py", "exec") for c in job["codes"]]
pairs = list(zip(job["inputs"], job["outputs"]))
real = sys.stdin, sys.stdout


def in_process(code, text):
    sys.stdin, sys.stdout = io.StringIO(), io.StringIO()
    sys.stdin.write(text)  # written, not StringIO(text): no 4-byte-a-character copy of the input
    sys.stdin.seek(0)
    exec(code, {"__name__": "__main__"})
    out = sys.stdout.getvalue()
    sys.stdin, sys.stdout = real
    return out


def forked(code, text):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = in_process(code, text)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


result = {"tests": 0}
for name, run in (("in_process", in_process), ("fork", forked)):
    t0, k0 = time.process_time(), os.times()
    result["tests"] = 0
    for code in codes:
        for text, expected in pairs:  # as every grader does: a sample stops at its first failure
            result["tests"] += 1
            if run(code, text).strip() != expected.strip():
                break
    k1 = os.times()
    children = k1.children_user - k0.children_user + k1.children_system - k0.children_system
    result[name] = time.process_time() - t0 + children
print(json.dumps(result))
"""


def programs_alone(tests: list[dict[str, str]], samples: int) -> dict[str, float]:
    """CPU seconds the samples' programs need on their own, each sample stopping at its first failing
    test as every grader does: ``in_process``, each test in one plain warm process (stdin and stdout
    in memory: no grader, no isolation); ``fork``, each test in a fork of that warm process (stdout
    back through a pipe), the least a grader that gives every test a process of its own can spend.
    No grader can spend less CPU than the first; no process-per-test grader less than the second."""
    job = json.dumps(
        {
            "codes": lcb_codes(samples),
            "inputs": [t["input"] for t in tests],
            "outputs": [t["output"] for t in tests],
        }
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", _PROGRAMS_ALONE], input=job, capture_output=True, text=True, check=True
    )
    times: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def split_cpu(before: dict[int, Any], after: dict[int, Any], service: int) -> dict[str, float] | None:
    """Where the service tree's CPU went between two ``cpu_by_process`` snapshots, for the ``local``
    backend (whose executors are in the tree: main, slot managers, job handlers, each handler's zygote,
    a leaf): the test processes (clones of a zygote, reaped by its handler), the handlers, the zygotes,
    the rest of the executors and the service; None when no executor is in the tree (docker)."""
    executors = {p for p, (_, cmd, _, _) in after.items() if "executor.py" in cmd}
    if not executors:
        return None
    parents = {after[p][0] for p in executors}
    zygotes = {p for p in executors if p not in parents and after[p][0] in executors}
    handlers = {after[p][0] for p in zygotes}
    parts = {
        "test processes": 0.0,
        "job handlers": 0.0,
        "zygotes": 0.0,
        "other executors": 0.0,
        "service": 0.0,
    }
    for p, (_, _, own, reaped) in after.items():
        was = before.get(p, (0, "", 0.0, 0.0))
        d_own, d_reaped = own - was[2], reaped - was[3]
        if p == service:
            parts["service"] += d_own
        elif p in zygotes:
            parts["zygotes"] += d_own
        elif p in handlers:
            parts["job handlers"] += d_own
            parts["test processes"] += d_reaped
        elif p in executors:
            parts["other executors"] += d_own + d_reaped
    return parts


def upstream_lcb(tests: list[dict[str, str]], samples: int, workers: int) -> dict[str, Any]:
    io = json.dumps(
        {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests], "fn_name": None}
    )
    job = json.dumps({"io": io, "codes": lcb_codes(samples), "workers": workers})
    done = subprocess.run(
        [sys.executable, "-c", _LCB_GRADER], input=job, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def evalplus_task(path: Path, plus_inputs: int) -> None:
    rng = random.Random(1)
    record = {
        "task_id": "HumanEval/950",
        "prompt": 'def clamp_sum(xs: list, hi: int) -> int:\n    """Sum of xs, each clamped to at most hi."""\n',
        "entry_point": "clamp_sum", "canonical_solution": "    return sum(min(x, hi) for x in xs)\n",
        "contract": "", "atol": 0, "test": "", "base_input": [[[1, 2, 3], 2], [[5], 10]],
        "plus_input": [[[rng.randrange(-1000, 1000) for _ in range(rng.randrange(0, 50))], rng.randrange(-10, 500)]
                       for _ in range(plus_inputs)],
    }  # fmt: skip
    path.write_text(json.dumps(record) + "\n")


def evalplus_codes(samples: int) -> list[str]:
    return [f"{CLAMP_OK if i % 8 < 5 else CLAMP_WRONG}\n# sample {i}" for i in range(samples)]


def mucode_evalplus(
    url: str, data: Path, samples: int, trace: bool = False
) -> tuple[dict[str, Any], float, float | None]:
    from mucode.eval.evalplus.evaluate import evaluate_evalplus
    from mucode.eval.judge import VerifierOptions

    chosen = {"humaneval": ({"HumanEval/950": evalplus_codes(samples)}, "solution")}
    return timed_client(
        lambda: evaluate_evalplus(
            None, ("humaneval",), override_paths={"humaneval": data}, samples=chosen,  # type: ignore[arg-type]
            verifier=VerifierOptions(urls=[url]),
        ), trace
    )  # fmt: skip


_EVALPLUS_GRADER = r"""
import json, sys, time
from concurrent.futures import ProcessPoolExecutor
from mucode.eval.evalplus.evaluate import load_evalplus
from evalplus.eval import PASS, untrusted_check

job = json.load(sys.stdin)
problems, expected = load_evalplus("humaneval", override_path=job["data"])
problem, truth = problems["HumanEval/950"], expected["HumanEval/950"]

def grade(code):
    ok = True
    for which in ("base", "plus"):
        status, _ = untrusted_check("humaneval", code, problem[f"{which}_input"], problem["entry_point"],
                                    expected=truth[which], atol=problem["atol"], ref_time=truth[f"{which}_time"],
                                    fast_check=True)
        ok = ok and status == PASS
    return ok

t0 = time.perf_counter()
with ProcessPoolExecutor(job["workers"]) as pool:
    verdicts = list(pool.map(grade, job["codes"]))
print(json.dumps({"wall": time.perf_counter() - t0, "correct": sum(verdicts)}))
"""


def upstream_evalplus(data: Path, samples: int, workers: int) -> dict[str, Any]:
    job = json.dumps({"data": str(data), "codes": evalplus_codes(samples), "workers": workers})
    done = subprocess.run(
        [sys.executable, "-c", _EVALPLUS_GRADER], input=job, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mb(peak: float | None) -> str:
    return "–" if peak is None else f"{peak:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lcb-mb", type=float, default=12.0)
    ap.add_argument(
        "--lcb-values",
        type=int,
        default=60_000,
        help="integers in each LiveCodeBench test (~0.6 MB a test by default; 100: an ordinary ~1 KB test)",
    )
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--plus-inputs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2, help="processes of the upstream graders")
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--slots", type=int, default=2, help="sandbox slots of the verifier service")
    ap.add_argument(
        "--image",
        default=os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest"),
        help="docker: the sandbox image (a branch's own executor; default $MUCODE_SANDBOX_IMAGE)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="LiveCodeBench: alternate mucode and the upstream grader this many times; the median ratio",
    )
    ap.add_argument(
        "--client-memory", action="store_true", help="also measure mucode's client memory (a second pass)"
    )
    args = ap.parse_args()

    from proctree import children_cpu_s, cpu_by_process, cpu_s  # bench/proctree.py
    from verifier import Service  # bench/verifier.py

    options = (
        {"slots": args.slots} if args.backend == "local" else {"containers": args.slots, "image": args.image}
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tests = lcb_problem(Path(tmp) / "lcb", args.lcb_mb, args.lcb_values)
        plus = Path(tmp) / "HumanEvalPlus.jsonl"
        evalplus_task(plus, args.plus_inputs)
        from mucode.eval.evalplus.evaluate import load_evalplus

        load_evalplus("humaneval", override_path=plus)  # ground truth computed and cached before timing
        service = Service(options, 1, backend=args.backend)
        ratios: list[float] = []
        ceilings: dict[str, list[float]] = {"in_process": [], "fork": []}  # per round: the best any
        # grader (a process-per-test grader) could do against upstream's wall
        cores = min(args.workers, os.cpu_count() or 1)
        try:
            for _ in range(args.rounds - 1):  # extra rounds, interleaved, so both sides see the same load
                split0, own0 = cpu_by_process(service.proc.pid), time.process_time()
                cpu0 = cpu_s(service.proc.pid) + own0
                wall_m = mucode_lcb(service.url, Path(tmp) / "lcb", args.samples)[1]
                cpu_m = cpu_s(service.proc.pid) + time.process_time() - cpu0
                split = split_cpu(split0, cpu_by_process(service.proc.pid), service.proc.pid)
                if split is not None:
                    split["evaluator (loading included)"] = time.process_time() - own0
                kids = children_cpu_s()
                wall_u = upstream_lcb(tests, args.samples, args.workers)["wall"]
                cpu_u = children_cpu_s() - kids
                ratios.append(wall_u / wall_m)
                alone = programs_alone(tests, args.samples)
                for kind, ceiling in ceilings.items():
                    ceiling.append(wall_u * cores / alone[kind])
                print(
                    f"round {len(ratios)}: mucode {wall_m:.2f} s ({cpu_m:.2f} CPU-s: evaluator, service, "
                    f"sandbox; loading included), upstream {wall_u:.2f} s ({cpu_u:.2f} CPU-s, its "
                    f"process start included): {ratios[-1]:.2f}x"
                )
                if split is not None:
                    n = alone["tests"]
                    print(
                        f"  mucode's CPU-s: {', '.join(f'{k} {v:.3f}' for k, v in split.items())}; the test "
                        f"processes {1000 * split['test processes'] / n:.1f} ms a test against "
                        f"{1000 * alone['fork'] / n:.1f} for a fork of a warm process ({n:.0f} tests)"
                    )
            entry, wall, _ = mucode_lcb(service.url, Path(tmp) / "lcb", args.samples)
            peak = (
                mucode_lcb(service.url, Path(tmp) / "lcb", args.samples, True)[2]
                if args.client_memory
                else None
            )
            problem = f"LiveCodeBench, {args.lcb_mb:g} MB of tests ({len(tests)})"
            rows.append(
                (problem, "mucode (sandbox, HTTP)", args.samples / wall, f"{entry['pass@1']:.3f}", _mb(peak))
            )
            report, wall, _ = mucode_evalplus(service.url, plus, args.samples)
            peak = mucode_evalplus(service.url, plus, args.samples, True)[2] if args.client_memory else None
            rows.append((f"EvalPlus, {args.plus_inputs} plus inputs", "mucode (sandbox, HTTP)", args.samples / wall,
                         f"{report['humaneval+']['pass@1']:.3f}", _mb(peak)))  # fmt: skip
        finally:
            service.close()
        kids = children_cpu_s()
        upstream = upstream_lcb(tests, args.samples, args.workers)
        upstream_cpu = children_cpu_s() - kids
        ratios.append(upstream["wall"] * rows[0][2] / args.samples)
        alone = programs_alone(tests, args.samples)
        for kind, ceiling in ceilings.items():
            ceiling.append(upstream["wall"] * cores / alone[kind])
        rows.insert(1, ("", f"LiveCodeBench evaluate_generations ({args.workers} proc.)",
                        args.samples / upstream["wall"], f"{upstream['pass@1']:.3f}", "–"))  # fmt: skip
        theirs = upstream_evalplus(plus, args.samples, args.workers)
        rows.append(("", f"evalplus untrusted_check ({args.workers} proc.)", args.samples / theirs["wall"],
                     f"{theirs['correct'] / args.samples:.3f}", "–"))  # fmt: skip
    from mucode.eval.benchmarks import get_protocol

    lcb, plus = get_protocol("livecodebench"), get_protocol("evalplus")
    print(
        f"\nbackend {args.backend}, {args.slots} slots; {args.samples} samples per problem; mucode's prompts "
        f"from the default protocols ({lcb.kind}/{lcb.name}: {lcb.prompt}, {plus.kind}/{plus.name}: {plus.prompt})\n"
    )
    ratios.sort()
    print(
        f"LiveCodeBench, mucode / upstream samples/s: median {ratios[len(ratios) // 2]:.2f}x over "
        f"{len(ratios)} rounds ({', '.join(f'{r:.2f}' for r in ratios)}); load average {os.getloadavg()[0]:.1f}"
    )
    for ceiling in ceilings.values():
        ceiling.sort()
    any_grader, per_test = ceilings["in_process"], ceilings["fork"]
    print(
        f"LiveCodeBench's ceiling: a grader with no cost of its own (the programs alone, each sample "
        f"stopping at its first failing test, on {cores} busy cores) would be at most "
        f"{any_grader[len(any_grader) // 2]:.2f}x LiveCodeBench's samples/s with no isolation (all tests "
        f"in one warm process; rounds: {', '.join(f'{c:.2f}' for c in any_grader)}) and "
        f"{per_test[len(per_test) // 2]:.2f}x with a process per test (a fork of a warm process; rounds: "
        f"{', '.join(f'{c:.2f}' for c in per_test)}). Last round: the programs alone needed "
        f"{alone['in_process']:.2f} CPU-s in one process and {alone['fork']:.2f} CPU-s forked for "
        f"{alone['tests']:.0f} tests run ({1000 * alone['in_process'] / alone['tests']:.1f} and "
        f"{1000 * alone['fork'] / alone['tests']:.1f} ms a test); LiveCodeBench's grader "
        f"{upstream_cpu:.2f} CPU-s (its process start included) and {upstream['wall']:.2f} s of wall time"
    )
    print("| problem | grader | samples/s | pass@1 | client peak MB |\n|---|---|---:|---:|---:|")
    for problem, grader, rate, passed, peak in rows:
        print(f"| {problem} | {grader} | {rate:.2f} | {passed} | {peak} |")


if __name__ == "__main__":
    main()
