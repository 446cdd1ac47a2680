"""Checker programs (testlib-style special judges) run in the sandbox after the judged program, on
both backends: verdicts by exit code, a failed checker scored as a wrong answer (never an
infrastructure status), the program unable to reach the checker, and the C++ wrapper compiled with
this host's g++ and run as a C++ checker inside the sandbox.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from sandbox_helpers import GUARD, Handle, assert_confined, assert_nothing_left, assert_still_works, stdio_job

from mucode.data import load_tasks
from mucode.protocol import Item, Status
from mucode.registry import UnknownNameError
from mucode.rewards.code import CodeReward, CodeSpec
from mucode.rewards.types import RewardContext
from mucode.sandbox.checker_program import FAILED_PREFIX, WRAPPERS, bundle
from mucode.sandbox.checkers import CHECKERS
from mucode.sandbox.types import CheckerProgram, CodeJob

# Any permutation of 1..n is accepted; some outputs make the checker misbehave on purpose.
PERMUTATION = CheckerProgram(
    """import sys
n = int(open(sys.argv[1]).read())
out = open(sys.argv[2]).read().split()
answer = open(sys.argv[3]).read().split()
assert sorted(answer, key=int) == [str(i) for i in range(1, n + 1)], "the answer file is the expected output"
if out == ["PE"]:
    sys.exit(2)
if out == ["EXIT7"]:
    sys.exit(7)
if out == ["HANG"]:
    while True:
        pass
if out == ["FLOOD"]:
    while True:
        print("x" * 65536)
sys.exit(0 if sorted(out, key=int) == [str(i) for i in range(1, n + 1)] else 1)
""",
    time_limit_s=1.0,
)
REVERSED = "n = int(input())\nprint(*range(n, 0, -1))"


def _perm_job(program: str, ns: list[int], **kw: Any) -> CodeJob:
    inputs = [f"{n}\n" for n in ns]
    outputs = [" ".join(map(str, range(1, n + 1))) + "\n" for n in ns]
    return stdio_job(program, inputs, outputs, checker_program=PERMUTATION, **kw)


def test_a_valid_answer_other_than_the_stored_one_is_accepted(sb: Handle) -> None:
    res = sb.judge(_perm_job(REVERSED, [1, 3, 5]))
    assert res.verdict is Status.correct, res
    assert len(res.tests) == 3 and all(
        t.stdout.startswith(str(n)) for t, n in zip(res.tests, [1, 3, 5], strict=True)
    )
    token = sb.judge(stdio_job(REVERSED, ["3\n"], ["1 2 3\n"]))  # the token checker refuses it
    assert token.verdict is Status.wrong_answer


@pytest.mark.parametrize(
    ("printed", "note"),
    [
        ("1 1 2", "[checker: wrong answer]"),
        ("PE", "[checker: presentation error]"),
        ("EXIT7", f"{FAILED_PREFIX} exit 7"),
        ("HANG", f"{FAILED_PREFIX} time_limit"),
        ("FLOOD", f"{FAILED_PREFIX} output_limit"),
        ("a b c", f"{FAILED_PREFIX} exit 3"),  # int('a') raises in the checker: set-up code 3
    ],
)
def test_wrong_and_checker_breaking_outputs_are_wrong_answers(sb: Handle, printed: str, note: str) -> None:
    res = sb.judge(_perm_job(f"print({printed!r})", [3]))
    assert res.verdict is Status.wrong_answer, res
    assert note in res.tests[0].stderr, res.tests[0].stderr


def test_runs_that_fail_keep_their_verdict_and_stop_before_the_checker(sb: Handle) -> None:
    program = "n = int(input())\nif n == 4:\n    raise SystemExit(5)\nprint(*range(n, 0, -1))"
    res = sb.judge(_perm_job(program, [2, 4, 3]))
    assert res.verdict is Status.runtime_error and [t.verdict for t in res.tests] == [
        Status.correct,
        Status.runtime_error,
    ]
    tle = sb.judge(_perm_job("while True:\n    pass", [2], time_limit_s=0.5))
    assert tle.verdict is Status.time_limit


def test_without_stop_on_first_failure_every_test_is_checked(sb: Handle) -> None:
    program = "n = int(input())\nprint(*(range(n, 0, -1) if n != 3 else [1, 1, 1]))"
    res = sb.judge(_perm_job(program, [2, 3, 4], stop_on_first_failure=False))
    assert [t.verdict for t in res.tests] == [Status.correct, Status.wrong_answer, Status.correct]
    assert res.verdict is Status.wrong_answer


def test_the_checker_gets_the_three_texts_byte_for_byte(sb: Handle) -> None:
    checker = CheckerProgram(
        "import sys\nt = [open(p, 'rb').read() for p in sys.argv[1:4]]\n"
        "ok = t[1] == t[0].decode()[::-1].encode() + b'\\n' and t[2] == 'ANS é 中 🙂'.encode()\n"
        "sys.exit(0 if ok else 1)\n"
    )
    text = "0 0 0\nline é\n中 🙂 5 5 5\n"  # looks like the bundle's header: lengths decide, not lines
    mirror = "import sys\nprint(sys.stdin.read()[::-1])"
    res = sb.judge(stdio_job(mirror, [text, "x"], ["ANS é 中 🙂", "ANS é 中 🙂"], checker_program=checker))
    assert res.verdict is Status.correct, res
    wrong = sb.judge(stdio_job("print(input())", [text], ["ANS é 中 🙂"], checker_program=checker))
    assert wrong.verdict is Status.wrong_answer


def test_the_program_cannot_reach_its_checker(sb: Handle) -> None:
    """A program that plants the checker's file names as links and leaves processes behind to
    rewrite them with a valid answer still gets wrong_answer: its processes are gone and the slot
    emptied before the checker's run, which writes its files itself."""
    assert_confined(sb)
    hostile = (
        GUARD
        + """import os, time
for name in ("input.txt", "output.txt", "answer.txt"):
    os.symlink("/dev/null", name)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(400):
            for root in [os.getcwd()] + ["/scratch/%d" % i for i in range(8)]:
                try:
                    with open(os.path.join(root, "output.txt"), "w") as f:
                        f.write("1 2 3\\n")
                except OSError:
                    pass
            time.sleep(0.01)
    os._exit(0)
print("3 3 3")
"""
    )
    res = sb.judge(_perm_job(hostile, [3, 3]))
    assert res.verdict is Status.wrong_answer, res
    assert "[checker: wrong answer]" in res.tests[0].stderr
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_a_checker_that_does_not_compile_is_refused_loudly(sb: Handle) -> None:
    broken = CheckerProgram("def (:\n")
    res = sb.judge(stdio_job(REVERSED, ["2\n"], ["1 2\n"], checker_program=broken))
    assert res.verdict is Status.sandbox_error and "does not compile" in str(res.error)
    with pytest.raises(ValidationError, match="checker program does not compile: SyntaxError"):
        CodeSpec.model_validate(_spec({"source": "def (:\n"}))


def _spec(checker_program: dict[str, object], fmt: str = "stdio") -> dict[str, object]:
    tests: dict[str, object] = {"format": fmt, "inputs": ["1\n"], "outputs": ["1\n"]}
    if fmt == "call":
        tests["fn_name"] = "f"
    return {"tests": tests, "checker_program": checker_program}


def test_the_spec_names_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match=r"checker language 'cobol' .* use one of \[.*'python'"):
        CodeSpec.model_validate(_spec({"source": "pass", "language": "cobol"}))
    with pytest.raises(ValidationError, match="judges stdio tests only"):
        CodeSpec.model_validate(_spec({"source": "pass"}, fmt="call"))
    with pytest.raises(ValidationError, match="time_limit_s"):
        CodeSpec.model_validate(_spec({"source": "pass", "time_limit_s": 0}))
    spec = CodeSpec.model_validate(_spec({"source": "import sys\nsys.exit(0)\n"}))
    assert spec.checker_program is not None and spec.checker_program.to_checker().language == "python"
    with pytest.raises(
        UnknownNameError, match=r"valid names: .*code_contests.*'mucode.checkers' entry-point"
    ):
        CHECKERS.get("no-such-checker")


CPP_CHECKER = r"""
#include <cstdio>
#include <cstring>
int main(int argc, char *argv[]) {
  if (argc != 4) return 9;
  char in[64] = {0}, out[64] = {0}, ans[64] = {0};
  FILE *f = fopen(argv[1], "r"); fgets(in, sizeof in, f);
  f = fopen(argv[2], "r"); fgets(out, sizeof out, f);
  f = fopen(argv[3], "r"); fgets(ans, sizeof ans, f);
  if (strcmp(out, "PE\n") == 0) return 2;
  return strcmp(in, "7\n") == 0 && strcmp(out, "seven\n") == 0 && strcmp(ans, "7!\n") == 0 ? 0 : 1;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (apt-get install g++)")
@pytest.mark.parametrize(("output", "code"), [("seven\n", 0), ("eight\n", 1), ("PE\n", 2)])
def test_the_cpp_wrapper_hands_main_the_three_files(tmp_path: Path, output: str, code: int) -> None:
    source = tmp_path / "main.cpp"
    source.write_text(WRAPPERS[".cpp"](CPP_CHECKER))
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "main"), str(source)], check=True, timeout=120)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    done = subprocess.run(
        [str(tmp_path / "main")],
        input=bundle("7\n", output, "7!\n").encode(),
        cwd=run_dir,
        capture_output=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == code, done.stderr
    assert (run_dir / "output.txt").read_text() == output
    bad = subprocess.run(
        [str(tmp_path / "main")], input=b"1 2\nxyz", cwd=run_dir, capture_output=True, timeout=30
    )
    assert bad.returncode == 3 and b"malformed" in bad.stderr


def test_a_code_contests_problem_with_several_answers_is_judged(sb: Handle, tmp_path: Path) -> None:
    """From the data set's row to the reward: the loader keeps the problem (the checker table names
    it) and the code reward judges any valid answer correct, an invalid one wrong."""
    row = {
        "name": "9_Z. Any permutation",
        "description": "Print a permutation of 1..n. If there are multiple answers, print any of them.",
        "public_tests": {"input": ["3\n"], "output": ["1 2 3\n"]},
        "private_tests": {"input": ["5\n"], "output": ["1 2 3 4 5\n"]},
        "generated_tests": {"input": [], "output": []},
        "solutions": {"language": [3], "solution": ["print(1)"]},
        "cf_contest_id": 9,
        "cf_index": "Z",
    }
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "cc.parquet")
    (record,) = load_tasks(
        str(tmp_path / "cc.parquet"), "code", checkers={"9/Z": {"source": PERMUTATION.source}}
    )
    ctx = RewardContext(sandbox=sb.backend)
    verdicts = []
    for program in (REVERSED, "print(*range(1, int(input()) + 1))", "print(1, 1, 2)"):
        item = Item(id="x", program="code", response=f"```python\n{program}\n```", spec=record.spec)
        verdicts.append(sb.call(CodeReward().score(item, ctx)).status.value)
    assert verdicts == ["correct", "correct", "wrong_answer"]


CPP_PERMUTATION = r"""
#include <algorithm>
#include <fstream>
#include <vector>
int main(int argc, char *argv[]) {
  if (argc != 4) return 9;
  std::ifstream in(argv[1]), out(argv[2]);
  long n = 0;
  in >> n;
  std::vector<long> got;
  for (long v; out >> v;) got.push_back(v);
  if ((long)got.size() != n) return 1;
  std::sort(got.begin(), got.end());
  for (long i = 0; i < n; ++i)
    if (got[i] != i + 1) return 1;
  return 0;
}
"""


def test_a_cpp_checker_program_judges_in_the_sandbox(sb: Handle) -> None:
    """The C++ wrapper compiled by the executor (build dir, exec allowed there only) re-executes
    itself with the three files: any permutation is accepted, anything else is a wrong answer."""
    checker = CheckerProgram(CPP_PERMUTATION, language="cpp", time_limit_s=2.0)
    ns = [1, 3, 5]
    outputs = [" ".join(map(str, range(1, n + 1))) + "\n" for n in ns]

    def judge(program: str) -> Any:
        return sb.judge(stdio_job(program, [f"{n}\n" for n in ns], outputs, checker_program=checker))

    assert judge(REVERSED).verdict is Status.correct
    wrong = judge("print(1, 1, 2)")
    assert wrong.verdict is Status.wrong_answer and "[checker: wrong answer]" in wrong.tests[0].stderr
