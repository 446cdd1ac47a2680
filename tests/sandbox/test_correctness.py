"""Correctness on real programs, against both backends: every reference solution of a small set of
stdio, call and assert problems passes; mutated solutions fail with the right verdict."""

from __future__ import annotations

import random

import pytest
from sandbox_helpers import Handle, stdio_job

from mucode.protocol import Status
from mucode.sandbox import CodeJob, RawRun, TestSpec

# ---- stdio problems: (solution, inputs, outputs) -------------------------------------------------

_rng = random.Random(1234)
_pairs = [(_rng.randint(-(10**9), 10**9), _rng.randint(-(10**9), 10**9)) for _ in range(30)]
A_PLUS_B = (
    "a, b = map(int, input().split())\nprint(a + b)",
    [f"{a} {b}\n" for a, b in _pairs],
    [str(a + b) for a, b in _pairs],
)

_lists = [[_rng.randint(0, 100) for _ in range(_rng.randint(1, 20))] for _ in range(8)]
SORT_AND_SUM = (
    "import sys\n"
    "def main():\n"
    "    data = sys.stdin.read().split()\n"
    "    n = int(data[0])\n"
    "    xs = sorted(map(int, data[1:1 + n]))\n"
    "    print(*xs)\n"
    "    print(sum(xs))\n"
    "main()\n",
    [f"{len(x)}\n{' '.join(map(str, x))}\n" for x in _lists],
    [f"{' '.join(map(str, sorted(x)))}\n{sum(x)}\n" for x in _lists],
)

CIRCLE_AREA = (  # float output: code_contests checker tolerates 1e-5
    "import math\nr = float(input())\nprint(f'{math.pi * r * r:.7f}')",
    ["1\n", "2.5\n", "10\n"],
    ["3.14159265", "19.6349540849", "314.159265359"],
)

PALINDROMES = (
    "t = int(input())\nfor _ in range(t):\n    s = input().strip()\n    print('YES' if s == s[::-1] else 'NO')",
    ["3\nabba\nabc\nx\n"],
    ["yes\nno\nyes"],  # code_contests compares lowercased
)

STDIO_PROBLEMS = {
    "a_plus_b": A_PLUS_B,
    "sort_and_sum": SORT_AND_SUM,
    "circle_area": CIRCLE_AREA,
    "palindromes": PALINDROMES,
}


@pytest.mark.parametrize("name", sorted(STDIO_PROBLEMS))
def test_stdio_reference_solutions_pass(sb: Handle, name: str) -> None:
    program, inputs, outputs = STDIO_PROBLEMS[name]
    r = sb.judge(stdio_job(program, inputs, outputs))
    assert r.verdict is Status.correct, [(t.verdict, t.stdout, t.stderr) for t in r.tests]
    assert len(r.tests) == len(inputs)


MUTANTS = [  # (mutated a+b, expected verdict)
    ("a, b = map(int, input().split())\nprint(a - b)", Status.wrong_answer),
    (
        "a, b = map(int, input().split())\nprint(a + b + (a % 7 == 3))",
        Status.wrong_answer,
    ),  # fails some tests
    ("a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(1)", Status.runtime_error),
    ("a, b = map(int, input().split())\nprint([][a + b])", Status.runtime_error),
    ("a, b = map(int, input().split())\nwhile a + b:\n    a += 0", Status.time_limit),
    ("a, b = map(int, input().split()\nprint(a + b)", Status.compile_error),
    ("a, b = map(int, input().split())\nx = [0] * (1 << 30)\nprint(a + b)", Status.memory_limit),
    (
        "import os\na, b = map(int, input().split())\nprint(a + b, flush=True)\nos.kill(os.getpid(), 11)",
        Status.runtime_error,
    ),
]


@pytest.mark.parametrize(
    ("program", "verdict"), MUTANTS, ids=[v.value + str(i) for i, (_, v) in enumerate(MUTANTS)]
)
def test_mutated_stdio_solutions_fail_with_the_right_verdict(
    sb: Handle, program: str, verdict: Status
) -> None:
    _, inputs, outputs = A_PLUS_B
    r = sb.judge(stdio_job(program, inputs, outputs, time_limit_s=1.0, memory_limit_mb=256))
    assert r.verdict is verdict, [(t.verdict, t.stderr[-300:]) for t in r.tests]
    assert r.tests[-1].verdict is verdict
    assert all(t.verdict is Status.correct for t in r.tests[:-1])  # stopped at the first failure


def test_all_tests_run_when_not_stopping_at_the_first_failure(sb: Handle) -> None:
    program = "n = int(input())\nprint(n if n % 2 else n + 1)"
    job = stdio_job(
        program, [f"{i}\n" for i in range(6)], [str(i) for i in range(6)], stop_on_first_failure=False
    )
    r = sb.judge(job)
    assert r.verdict is Status.wrong_answer
    assert [t.verdict for t in r.tests] == [Status.wrong_answer, Status.correct] * 3


def test_large_output_and_input_are_passed_intact(sb: Handle) -> None:
    """Well past the 64 KiB pipe buffer (the peer's false timeout started at ~200 KB)."""
    n = 300_000
    big_in = " ".join(str(i) for i in range(n)) + "\n"
    r = sb.judge(
        stdio_job(
            "import sys\nxs = sys.stdin.read().split()\nprint('\\n'.join(reversed(xs)))",
            [big_in],
            ["\n".join(str(i) for i in reversed(range(n))) + "\n"],
            checker="exact",
        )
    )
    assert r.verdict is Status.correct, r.tests[0].stderr
    assert not r.tests[0].truncated and len(r.tests[0].stdout) > 1_500_000


# ---- call problems (LiveCodeBench functional style) ---------------------------------------------

TWO_SUM = """
class Solution:
    def twoSum(self, nums: list[int], target: int) -> list[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
        return []
"""
TWO_SUM_TESTS = (["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6", "[3, 3]\n6"], ["[0, 1]", "[1, 2]", "[0, 1]"])

MAX_PROFIT = """
def maxProfit(prices):
    best, low = 0, float("inf")
    for p in prices:
        low = min(low, p)
        best = max(best, p - low)
    print("debug output does not count")
    return best
"""


def call_job(program: str, fn: str, inputs: list[str], outputs: list[str], **kw: object) -> CodeJob:
    return CodeJob(program, TestSpec("call", inputs, outputs, fn_name=fn), checker="livecodebench", **kw)  # type: ignore[arg-type]


def test_call_solution_method_and_function(sb: Handle) -> None:
    r = sb.judge(call_job(TWO_SUM, "twoSum", *TWO_SUM_TESTS))
    assert r.verdict is Status.correct, [(t.stdout, t.stderr) for t in r.tests]
    r = sb.judge(call_job(MAX_PROFIT, "maxProfit", ["[7,1,5,3,6,4]", "[7,6,4,3,1]"], ["5", "0"]))
    assert r.verdict is Status.correct, [(t.stdout, t.stderr) for t in r.tests]
    tup = "def pair(a, b):\n    return (b, a)\n"  # a tuple compares equal to the JSON list
    assert sb.judge(call_job(tup, "pair", ['1\n"x"'], ['["x", 1]'])).verdict is Status.correct


@pytest.mark.parametrize(
    ("program", "verdict"),
    [
        (TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]"), Status.wrong_answer),
        (TWO_SUM.replace("seen = {}", "seen = None"), Status.runtime_error),
        (TWO_SUM.replace("def twoSum", "def two_sum"), Status.runtime_error),  # missing function
        (
            TWO_SUM.replace("return []", "return []\n    def f(self): pass\n") + "\nimport sys\nsys.exit(0)",
            Status.runtime_error,
        ),  # exits before the call
        (TWO_SUM.replace("seen = {}", "seen = {}\n        while True: pass"), Status.time_limit),
    ],
)
def test_mutated_call_solutions(sb: Handle, program: str, verdict: Status) -> None:
    r = sb.judge(call_job(program, "twoSum", *TWO_SUM_TESTS, time_limit_s=1.0))
    assert r.verdict is verdict, [(t.verdict, t.stdout, t.stderr[-300:]) for t in r.tests]


# ---- assert problems (HumanEval / MBPP style) ------------------------------------------------------

HUMANEVAL_PROGRAM = """
def below_zero(operations: list[int]) -> bool:
    balance = 0
    for op in operations:
        balance += op
        if balance < 0:
            return True
    return False
"""
HUMANEVAL_TEST = """
def check(candidate):
    assert candidate([]) is False
    assert candidate([1, 2, -3, 1, 2, -3]) is False
    assert candidate([1, 2, -4, 5, 6]) is True
    assert candidate([1, -1, 2, -2, 5, -5, 4, -4]) is False
"""
MBPP_PROGRAM = "def square_perimeter(a):\n    return 4 * a\n"
MBPP_TEST = "assert square_perimeter(10) == 40\nassert square_perimeter(5) == 20\n"


def assert_job(program: str, test: str, entry_point: str | None = None) -> CodeJob:
    return CodeJob(program, TestSpec("assert", assert_code=test, entry_point=entry_point), time_limit_s=2.0)


def test_assert_problems(sb: Handle) -> None:
    assert sb.judge(assert_job(HUMANEVAL_PROGRAM, HUMANEVAL_TEST, "below_zero")).verdict is Status.correct
    assert sb.judge(assert_job(MBPP_PROGRAM, MBPP_TEST)).verdict is Status.correct
    wrong = sb.judge(assert_job(HUMANEVAL_PROGRAM.replace("< 0", "<= 0"), HUMANEVAL_TEST, "below_zero"))
    assert wrong.verdict is Status.wrong_answer, wrong.tests[0].stderr
    crash = sb.judge(assert_job(MBPP_PROGRAM.replace("4 * a", "4 * b"), MBPP_TEST))
    assert crash.verdict is Status.runtime_error, crash.tests[0].stderr
    assert "NameError" in crash.tests[0].stderr


def test_run_raw(sb: Handle) -> None:
    out = sb.run_raw(RawRun("import sys\nprint(sys.stdin.read().upper())", stdin="hi"))
    assert (out.verdict, out.stdout, out.exit_code) == (Status.correct, "HI\n", 0)
    out = sb.run_raw(RawRun("raise ValueError('boom')"))
    assert out.verdict is Status.runtime_error and "ValueError: boom" in out.stderr
    assert 'File "solution.py"' in out.stderr and "pyrun" not in out.stderr  # no executor frames


def test_malformed_jobs_raise_value_error(sb: Handle) -> None:
    with pytest.raises(ValueError, match="outputs"):
        sb.judge(stdio_job("print(1)", ["1", "2"], ["1"]))
    with pytest.raises(ValueError, match="fn_name"):
        sb.judge(CodeJob("x = 1", TestSpec("call", ["1"], ["1"])))
    with pytest.raises(ValueError, match="language"):
        sb.judge(CodeJob("print(1)", TestSpec("stdio", [""], ["1"]), language="cobol"))


def test_exec_language_entry(sb: Handle) -> None:
    """The table's exec path (a fresh interpreter per test) judges like the fork path."""
    program, inputs, outputs = A_PLUS_B
    r = sb.judge(CodeJob(program, TestSpec("stdio", inputs[:3], outputs[:3]), language="python-exec"))
    assert r.verdict is Status.correct, [t.stderr for t in r.tests]
    bad = sb.judge(
        CodeJob("while True: pass", TestSpec("stdio", [""], [""]), language="python-exec", time_limit_s=1.0)
    )
    assert bad.verdict is Status.time_limit


def test_compiled_language_entry_compiles_once_and_runs_per_test(sb: Handle) -> None:
    """The table's compile path (what C++ uses): build once per job, run the output per test."""
    program, inputs, outputs = A_PLUS_B
    counting = (
        program + "\nimport os, sys\nprint(len(os.listdir(os.path.dirname(sys.argv[0]))), file=sys.stderr)"
    )
    r = sb.judge(CodeJob(counting, TestSpec("stdio", inputs[:3], outputs[:3]), language="python-pyc"))
    assert r.verdict is Status.correct, [t.stderr for t in r.tests]
    assert [t.stderr.strip() for t in r.tests] == ["2"] * 3  # source + build output, built once
    broken = sb.judge(CodeJob("def f(:\n", TestSpec("stdio", inputs[:3], outputs[:3]), language="python-pyc"))
    assert broken.verdict is Status.compile_error and len(broken.tests) == 1
    assert "SyntaxError" in broken.tests[0].stderr
    # later jobs, in another language, do not see a previous job's build dir (whatever slot they get)
    for _ in range(6):
        after = sb.judge(stdio_job("import os\nprint(sorted(os.listdir('.')))", [""], ["[]"]))
        assert after.tests[0].stdout == "[]\n"
