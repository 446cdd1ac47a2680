"""Files in the upstream harnesses' formats: LiveCodeBench's generation output in, its eval files out;
evalplus's sample folders in, its eval_results out."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mucode.eval.judge import VerifierOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUM_OK = "n = int(input())\nfor _ in range(n):\n    a, b = map(int, input().split())\n    print(a + b)"
TWO_SUM_OK = (
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i"
)


def cli(*args: str) -> Any:
    from mucode.cli import get_app

    result = CliRunner().invoke(get_app(), ["eval", *args])
    assert result.exit_code == 0, result.stderr
    return result


def lcb_pass_k_utils() -> Any:
    """LiveCodeBench's own pass@k code (loaded by file: its package __init__ changes process-wide limits)."""
    import livecodebench

    path = Path(livecodebench.__file__).parent / "evaluation" / "pass_k_utils.py"
    spec = importlib.util.spec_from_file_location("lcb_pass_k_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_livecodebench_generation_output_in_and_eval_files_out(
    tmp_path: Path, code_verifier: VerifierOptions
) -> None:
    data = tmp_path / "lcb"
    shutil.copytree(FIXTURES / "livecodebench", data)
    generations = [
        {"question_id": "abc900_a", "code_list": [SUM_OK, "print(0)"], "output_list": ["...", "..."]},
        {"question_id": "9001", "code_list": [TWO_SUM_OK, ""]},
    ]
    samples = tmp_path / "Scenario.codegeneration_2_0.2.json"
    samples.write_text(json.dumps(generations))
    out, upstream = tmp_path / "report.json", tmp_path / "upstream"
    cli("livecodebench", "--samples", str(samples), "--release", "v1", "--data-dir", str(data), "--output", str(out),
        "--upstream-dir", str(upstream), "--no-cache", "--verifier-url", code_verifier.urls[0])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["livecodebench"]["pass@1"] == pytest.approx(0.5)
    assert report["meta"]["samples_file"] == str(samples) and report["meta"]["data"]["livecodebench"][
        "files"
    ] == ["test.jsonl"]
    eval_all = json.loads((upstream / "livecodebench_eval_all.json").read_text())
    assert [p["question_id"] for p in eval_all] == ["9001", "abc900_a"]  # sorted, as LiveCodeBench sorts
    assert eval_all[1]["code_list"] == [SUM_OK, "print(0)"] and eval_all[1]["graded_list"] == [True, False]
    assert eval_all[0]["graded_list"] == [True, False] and eval_all[0]["pass@1"] == 0.5
    assert {"question_title", "contest_date", "difficulty", "platform", "metadata"} <= set(eval_all[0])
    metrics, results, _ = json.loads((upstream / "livecodebench_eval.json").read_text())
    theirs = lcb_pass_k_utils().compute_metrics_from_results(results, k_list=[1, 2])
    assert metrics["pass@1"] == pytest.approx(theirs["pass@1"]) == pytest.approx(0.5)
    assert metrics["detail"]["pass@1"] == pytest.approx({"0": 0.5, "1": 0.5})


def test_evalplus_sample_folder_in_and_eval_results_out(
    tmp_path: Path, code_verifier: VerifierOptions
) -> None:
    from mucode.eval.evalplus.evaluate import evalplus_hash

    humaneval = FIXTURES / "evalplus" / "HumanEvalPlus.jsonl"
    folder = tmp_path / "samples"
    solutions = {
        "HumanEval_900": [
            "def average(xs):\n    return sum(xs) / len(xs)\n",
            "def average(xs):\n    return 0.0\n",
        ],
        "HumanEval_901": ["def sum_positive(xs):\n    return sum(xs)\n"],
    }
    for task, codes in solutions.items():
        (folder / task).mkdir(parents=True)
        for i, code in enumerate(codes):
            (folder / task / f"{i}.py").write_text(code)
    upstream = tmp_path / "upstream"
    cli("evalplus", "--datasets", "humaneval", "--samples", str(folder), "--humaneval-file", str(humaneval),
        "--upstream-dir", str(upstream), "--no-cache", "--allow-partial", "--verifier-url", code_verifier.urls[0])  # fmt: skip  # noqa: E501
    results = json.loads((upstream / "humaneval_eval_results.json").read_text())
    assert set(results) == {"date", "hash", "eval"}
    assert results["hash"] == evalplus_hash("humaneval", override_path=humaneval)
    rows = results["eval"]
    assert [(r["base_status"], r["plus_status"]) for r in rows["HumanEval/900"]] == [
        ("pass", "pass"),
        ("fail", "fail"),
    ]
    assert [(r["base_status"], r["plus_status"]) for r in rows["HumanEval/901"]] == [("pass", "fail")]
    assert rows["HumanEval/900"][0]["solution"] == solutions["HumanEval_900"][0]
    # the failing inputs are evalplus's own (its fast check: the input its details stop at)
    from evalplus.eval import untrusted_check

    from mucode.eval.evalplus.evaluate import load_evalplus

    problems, truth = load_evalplus("humaneval", override_path=humaneval)
    for tid, samples in rows.items():
        problem = problems[tid]
        for row in samples:
            for which in ("base", "plus"):
                status, details = untrusted_check(
                    "humaneval", row["solution"], problem[f"{which}_input"], problem["entry_point"],
                    expected=truth[tid][which], atol=problem["atol"], ref_time=truth[tid][f"{which}_time"],
                    fast_check=True,
                )  # fmt: skip
                theirs = (
                    [] if status == "pass" or not details else [problem[f"{which}_input"][len(details) - 1]]
                )
                assert row[f"{which}_fail_tests"] == theirs, (tid, which)
    assert rows["HumanEval/901"][0]["plus_fail_tests"] == [[[4, -1, 2]]]
    assert set(rows["HumanEval/901"][0]) == {
        "task_id", "solution", "base_status", "plus_status", "base_fail_tests", "plus_fail_tests"
    }  # fmt: skip


def test_evalplus_mixed_samples_and_results_evalplus_finds(
    tmp_path: Path, code_verifier: VerifierOptions, capsys: pytest.CaptureFixture[str]
) -> None:
    """A samples file mixing `solution` and `completion` lines (evalplus reads either, line by line), and a
    results file named so `evalplus.evaluate --samples` loads it instead of running anything."""
    humaneval = FIXTURES / "evalplus" / "HumanEvalPlus.jsonl"
    samples = tmp_path / "mine.jsonl"
    samples.write_text(
        "\n".join(
            json.dumps(row)
            for row in [
                {"task_id": "HumanEval/900", "solution": "def average(xs):\n    return sum(xs) / len(xs)\n"},
                {
                    "task_id": "HumanEval/900",
                    "completion": "    return sum(xs) / len(xs)\n",
                },  # after the prompt
                {"task_id": "HumanEval/901", "completion": "    return 0\n"},
            ]
        )
        + "\n"
    )
    upstream = tmp_path / "upstream"
    cli("evalplus", "--datasets", "humaneval", "--samples", str(samples), "--humaneval-file", str(humaneval),
        "--upstream-dir", str(upstream), "--no-cache", "--allow-partial", "--verifier-url", code_verifier.urls[0])  # fmt: skip  # noqa: E501
    rows = json.loads((upstream / "mine_eval_results.json").read_text())["eval"]
    assert [r["base_status"] for r in rows["HumanEval/900"]] == ["pass", "pass"]
    assert rows["HumanEval/900"][1]["solution"].startswith(
        "def average(xs: list) -> float:"
    )  # prompt + completion
    assert [r["base_status"] for r in rows["HumanEval/901"]] == ["fail"]
    written = [json.loads(line) for line in (upstream / "mine.jsonl").read_text().splitlines()]
    assert [w["task_id"] for w in written] == ["HumanEval/900", "HumanEval/900", "HumanEval/901"]

    from evalplus.evaluate import evaluate

    capsys.readouterr()
    evaluate(dataset="humaneval", samples=str(upstream / "mine.jsonl"))
    printed = capsys.readouterr().out
    assert f"Load from previous results from {upstream / 'mine_eval_results.json'}" in printed
    assert "pass@1:\t0.500" in printed  # base tests: task 900 2/2, task 901 0/1 → mean 0.5


def test_a_samples_file_mixing_response_and_solution_is_refused(tmp_path: Path) -> None:
    from mucode.eval.evalplus.evaluate import read_evalplus_samples

    samples = tmp_path / "s.jsonl"
    samples.write_text('{"task_id": "A", "response": "x"}\n{"task_id": "A", "solution": "y"}\n')
    with pytest.raises(ValueError, match="mixes sample kinds"):
        read_evalplus_samples(samples, prompts=dict)
