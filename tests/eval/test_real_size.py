"""The evaluators at the sizes the real benchmarks have, end to end through a loopback verifier.

- LiveCodeBench: one problem whose private tests are 12 MB of JSON, stored in LiveCodeBench's own
  encoding (base64 → zlib → pickle → JSON) in a release file, with 8 samples. Sent naively (the test
  set in every sample's item) that is about 100 MB, over the verifier's 64 MiB request cap (413).
- EvalPlus: a HumanEval+ task with 1,000 plus inputs, whose per-input limits sum to over 1,000 s
  (evalplus's per-task budget applies; the item must stay within the code program's own cap: 422).
- Math: the full MATH500 (500 problems) through the math evaluator.
Data are generated here (MATH500 is the copy shipped with mucode).
"""

from __future__ import annotations

import base64
import json
import pickle
import random
import zlib
from pathlib import Path
from typing import Any

import pytest

from mucode.eval.core import SamplesSource
from mucode.eval.evalplus.evaluate import EvalPlusTask, evaluate_evalplus, load_evalplus, task_time_limits
from mucode.eval.judge import VerifierOptions
from mucode.eval.livecodebench.evaluate import evaluate_livecodebench
from mucode.eval.math_bench import evaluate_math, load_math_problems
from mucode.rewards.code import MAX_TIME_LIMIT_S

SUM_OK = "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(map(int, data[1:n + 1])))"
SUM_WRONG = "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(map(int, data[1:n])))"


def lcb_encode(tests: list[dict[str, str]]) -> str:
    """LiveCodeBench's encoding of private tests: JSON, pickled, zlib-compressed, base64."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("ascii")


def big_lcb_release(directory: Path, megabytes: float = 12.0) -> int:
    """A release file (test.jsonl) with one stdin problem of `megabytes` of private tests; returns the
    size of their JSON in bytes."""
    rng = random.Random(0)
    tests, size = [], 0
    while size < megabytes * 1e6:
        values = [rng.randrange(-(10**9), 10**9) for _ in range(60_000)]
        tests.append(
            {
                "input": f"{len(values)}\n{' '.join(map(str, values))}\n",
                "output": f"{sum(values)}\n",
                "testtype": "stdin",
            }
        )
        size += len(tests[-1]["input"])
    row = {
        "question_title": "Big Sum",
        "question_content": "Print the sum of N integers.",
        "platform": "atcoder",
        "question_id": "abc999_z",
        "contest_id": "abc999",
        "contest_date": "2025-01-04T00:00:00",
        "starter_code": "",
        "difficulty": "hard",
        "public_test_cases": json.dumps([{"input": "2\n1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": lcb_encode(tests),
        "metadata": "{}",
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test.jsonl").write_text(json.dumps(row) + "\n")
    return len(json.dumps(tests))


def test_livecodebench_problem_with_12_mb_of_tests_and_8_samples(
    code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    size = big_lcb_release(tmp_path / "lcb")
    assert size >= 10_000_000
    fence = "```python\n{}\n```".format
    codes = [SUM_OK] * 5 + [SUM_WRONG] * 3  # 8 distinct samples (identical items would be verified once)
    samples = {"abc999_z": [fence(f"{code}\n# sample {i}") for i, code in enumerate(codes)]}
    report = evaluate_livecodebench(
        SamplesSource(samples), release="release_v1", data_dir=tmp_path / "lcb", verifier=code_verifier
    )["livecodebench"]
    assert report["infra_errors"] == 0, report["statuses"]
    assert report["n_samples"] == 8 and report["statuses"] == {"correct": 5, "wrong_answer": 3}
    assert report["pass@1"] == pytest.approx(5 / 8)


def humaneval_task_with_1000_plus_inputs(path: Path) -> None:
    rng = random.Random(1)
    record = {
        "task_id": "HumanEval/950",
        "prompt": 'def clamp_sum(xs: list, hi: int) -> int:\n    """Sum of xs, each clamped to at most hi."""\n',
        "entry_point": "clamp_sum",
        "canonical_solution": "    return sum(min(x, hi) for x in xs)\n",
        "contract": "",
        "base_input": [[[1, 2, 3], 2], [[5], 10]],
        "plus_input": [
            [[rng.randrange(-1000, 1000) for _ in range(rng.randrange(0, 50))], rng.randrange(-10, 500)]
            for _ in range(1000)
        ],
        "atol": 0,
        "test": "",
    }
    path.write_text(json.dumps(record) + "\n")


CLAMP_OK = "def clamp_sum(xs, hi):\n    return sum(x if x < hi else hi for x in xs)"
CLAMP_NO_NEGATIVE = (
    "def clamp_sum(xs, hi):\n    return max(0, sum(min(x, hi) for x in xs))"  # fails some plus inputs
)


def test_evalplus_task_with_1000_plus_inputs(code_verifier: VerifierOptions, tmp_path: Path) -> None:
    data = tmp_path / "HumanEvalPlus.jsonl"
    humaneval_task_with_1000_plus_inputs(data)
    problems, expected = load_evalplus("humaneval", override_path=data)
    task = EvalPlusTask("humaneval", problems, expected, sample_kind="solution")
    item = task.parts("HumanEval/950", 0, CLAMP_OK)[1].item
    assert item is not None and len(problems["HumanEval/950"]["plus_input"]) == 1000
    assert item["spec"]["time_limit_s"] <= MAX_TIME_LIMIT_S  # the verifier refuses more (422)
    samples = {"humaneval": ({"HumanEval/950": [CLAMP_OK, CLAMP_NO_NEGATIVE]}, "solution")}
    report = evaluate_evalplus(
        None,
        ("humaneval",),
        override_paths={"humaneval": data},
        samples=samples,
        verifier=code_verifier,  # type: ignore[arg-type]
    )
    base, plus = report["humaneval"], report["humaneval+"]
    assert base["infra_errors"] == 0 and plus["infra_errors"] == 0, (base["statuses"], plus["statuses"])
    assert base["n_correct"] == 2 and plus["n_correct"] == 1, (base["statuses"], plus["statuses"])


def test_evalplus_limits_follow_its_task_budget_under_the_code_cap() -> None:
    assert task_time_limits([1.0] * 3) == (4.0, 6.0)  # sum 3 s + 1 s budget, + 2 s start-up
    budget, limit = task_time_limits([1.0] * 1000)
    assert budget == 61.0 and limit == MAX_TIME_LIMIT_S


def test_full_math500_through_the_math_evaluator(math_verifier: VerifierOptions) -> None:
    problems = load_math_problems("math500")
    assert len(problems) == 500
    samples: dict[str, list[str]] = {
        p.id: [f"So the answer is $\\boxed{{{p.answer}}}$.", "I give up."] for p in problems
    }
    report: dict[str, Any] = evaluate_math(
        None, ["math500"], samples={"math500": samples}, verifier=math_verifier
    )
    entry = report["math500"]
    assert entry["n_problems"] == 500 and entry["n_samples"] == 1000 and entry["infra_errors"] == 0
    assert entry["statuses"]["correct"] == 500, entry["statuses"]
    assert entry["pass@1"] == pytest.approx(0.5)
