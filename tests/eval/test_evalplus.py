"""EvalPlus: fixtures in evalplus's record format, judged in the sandbox through the verifier.

Every verdict is compared with evalplus's own in-process runner (`untrusted_check`) on the same
code, inputs and ground truth, except HumanEval/32 where evalplus 0.3.1's runner fails every
solution (see `mucode.eval.evalplus.driver`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mucode.eval.core import SamplesSource
from mucode.eval.evalplus.evaluate import EvalPlusTask, evaluate_evalplus, load_evalplus
from mucode.eval.judge import VerifierOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "evalplus"
OVERRIDES = {"humaneval": FIXTURES / "HumanEvalPlus.jsonl", "mbpp": FIXTURES / "MbppPlus.jsonl"}


def fenced(code: str) -> str:
    return f"Here is the function:\n```python\n{code}\n```\nIt handles every case."


SOLUTIONS: dict[str, dict[str, str]] = {
    "HumanEval/900": {
        "correct": "def average(xs: list) -> float:\n    return sum(xs) / len(xs)",  # float tolerance needed
        "plus_fail": "def average(xs: list) -> float:\n    return round(sum(xs) / len(xs), 1)",
        "wrong": "def average(xs: list) -> float:\n    return xs[0]",
    },
    "HumanEval/901": {
        "correct": "def sum_positive(xs: list) -> int:\n    return sum(x for x in xs if x > 0)",
        "plus_fail": "def sum_positive(xs: list) -> int:\n    return sum(xs)",  # base inputs have no negatives
        "wrong": "def sum_positive(xs: list) -> int:\n    return len(xs)",
    },
    "HumanEval/32": {
        "correct": (
            "import math\n\ndef poly(xs, x):\n    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n\n"
            "def find_zero(xs: list):\n    lo, hi = -100.0, 100.0\n    for _ in range(200):\n        mid = (lo + hi) / 2\n"  # noqa: E501
            "        if poly(xs, lo) * poly(xs, mid) <= 0:\n            hi = mid\n        else:\n            lo = mid\n"
            "    return lo"
        ),
        "plus_fail": None,  # type: ignore[dict-item]
        "wrong": "def find_zero(xs: list):\n    return 0.0",
    },
}
MBPP_SOLUTIONS = {
    "correct": "def similar_elements(a, b):\n    return sorted(set(a) & set(b), reverse=True)",  # set-equality oracle
    "wrong": "def similar_elements(a, b):\n    return tuple(a)",
}


@pytest.fixture(scope="module")
def humaneval() -> tuple[dict[str, Any], dict[str, Any]]:
    return load_evalplus("humaneval", override_path=OVERRIDES["humaneval"])


def evalplus_reference(
    dataset: str, problem: dict[str, Any], truth: dict[str, Any], code: str, which: str
) -> bool:
    """evalplus's own verdict (its in-process runner; our fixture code is trusted)."""
    from evalplus.eval import PASS, untrusted_check

    status, _ = untrusted_check(
        dataset,
        code,
        problem[f"{which}_input"],
        problem["entry_point"],
        expected=truth[which],
        atol=problem["atol"],
        ref_time=truth[f"{which}_time"],
        fast_check=True,
    )
    return status == PASS


def test_fixtures_load_through_evalplus_with_ground_truth(
    humaneval: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    problems, expected = humaneval
    assert list(problems) == ["HumanEval/900", "HumanEval/901", "HumanEval/32"]
    assert expected["HumanEval/901"]["plus"] == [0, 6, 0]
    assert len(expected["HumanEval/900"]["plus_time"]) == 3
    mbpp, truth = load_evalplus("mbpp", override_path=OVERRIDES["mbpp"])
    assert mbpp["Mbpp/2"]["base_input"][0] == [(3, 4, 5, 6), (5, 7, 4, 10)]  # evalplus's deserialization
    assert set(truth["Mbpp/2"]["base"][0]) == {4, 5}


def test_prompts_follow_evalplus_codegen(humaneval: tuple[dict[str, Any], dict[str, Any]]) -> None:
    problems, expected = humaneval
    chat = EvalPlusTask("humaneval", problems, expected).problems[0].prompt
    assert (
        isinstance(chat, list)
        and chat[-1]["role"] == "assistant"
        and chat[-1]["content"].endswith("```python\n")
    )
    assert problems["HumanEval/900"]["prompt"].strip() in chat[0]["content"]
    base = EvalPlusTask("humaneval", problems, expected, prompt_style="base").problems[0].prompt
    assert base == problems["HumanEval/900"]["prompt"].strip() + "\n"


def test_verdicts_match_evalplus_rules(
    humaneval: tuple[dict[str, Any], dict[str, Any]], code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    problems, expected = humaneval
    samples = {tid: [fenced(code) for code in sols.values() if code] for tid, sols in SOLUTIONS.items()}
    report = evaluate_evalplus(
        SamplesSource(samples),
        ("humaneval",),
        override_paths=OVERRIDES,
        verifier=code_verifier,
        run_dir=tmp_path,
    )
    base, plus = report["humaneval"], report["humaneval+"]
    assert base["infra_errors"] == 0 and plus["infra_errors"] == 0, (base["statuses"], plus["statuses"])
    # base: correct and plus_fail pass, wrong fails; plus: only correct passes
    assert base["pass@1"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 2) / 3)
    assert plus["pass@1"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 2) / 3)
    task = EvalPlusTask("humaneval", problems, expected)
    rows = [json.loads(x) for x in (tmp_path / "humaneval" / "verdicts.jsonl").read_text().splitlines()]
    ours = {(r["id"], r["index"], r["part"]): r["status"] == "correct" for r in rows}
    for tid, texts in samples.items():
        for index, text in enumerate(texts):
            code = task.solution(tid, text)
            for which in ("base", "plus"):
                if tid == "HumanEval/32":
                    continue  # evalplus 0.3.1 fails every find_zero solution (documented deviation)
                reference = evalplus_reference("humaneval", problems[tid], expected[tid], code, which)
                assert ours[(tid, index, which)] == reference, (tid, index, which)
    assert ours[("HumanEval/32", 0, "base")] and ours[("HumanEval/32", 0, "plus")]
    assert not ours[("HumanEval/32", 1, "base")]


def test_mbpp_set_oracle_and_solution_samples_file_via_cli(
    code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from mucode.cli import get_app

    samples = tmp_path / "mbpp_samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": "Mbpp/2", "solution": code}) + "\n" for code in MBPP_SOLUTIONS.values()
        )
    )
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        get_app(),
        [
            "eval",
            "evalplus",
            "--datasets",
            "mbpp",
            "--samples",
            str(samples),
            "--mbpp-file",
            str(OVERRIDES["mbpp"]),
            "--output",
            str(out),
            "--no-cache",
            "--verifier-url",
            code_verifier.urls[0],
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["mbpp"]["pass@1"] == pytest.approx(0.5) and report["mbpp+"]["pass@1"] == pytest.approx(0.5)
    assert report["mbpp"]["samples_per_problem"] == 2 and report["mbpp"]["pass@2"] == pytest.approx(1.0)
    mbpp, truth = load_evalplus("mbpp", override_path=OVERRIDES["mbpp"])
    for code, ours in zip(MBPP_SOLUTIONS.values(), (True, False), strict=True):
        assert evalplus_reference("mbpp", mbpp["Mbpp/2"], truth["Mbpp/2"], code, "plus") == ours


FORGED_SAMPLES = {  # each passed when the driver decided the verdict in the sample's process
    "prints the old pass marker": (
        "def average(xs):\n    import os\n    os.write(1, b'MUCODE_EVALPLUS_PASS\\n')\n    os._exit(0)"
    ),
    "ground truth from the caller's frame": (
        "import sys\ndef average(xs):\n    f = sys._getframe(1)\n"
        "    return f.f_locals.get('exp', f.f_globals.get('_P', {}).get('expected', [0])[0])"
    ),
    "patched comparison": (
        "import sys\ndef average(xs):\n    main = sys.modules['__main__']\n"
        "    main.__dict__['_check'] = lambda *a: (True, 0)\n    return 0.0"
    ),
}


def test_a_sample_cannot_forge_its_evalplus_verdict(code_verifier: VerifierOptions, tmp_path: Path) -> None:
    samples = {tid: [fenced(sols["correct"])] * (len(FORGED_SAMPLES) + 1) for tid, sols in SOLUTIONS.items()}
    samples["HumanEval/900"] = [fenced(code) for code in FORGED_SAMPLES.values()] + samples["HumanEval/900"][
        :1
    ]
    report = evaluate_evalplus(
        SamplesSource(samples),
        ("humaneval",),
        override_paths=OVERRIDES,
        verifier=code_verifier,
        run_dir=tmp_path,
    )
    rows = [json.loads(x) for x in (tmp_path / "humaneval" / "verdicts.jsonl").read_text().splitlines()]
    statuses = {(r["index"], r["part"]): r["status"] for r in rows if r["id"] == "HumanEval/900"}
    for index, name in enumerate(FORGED_SAMPLES):
        for part in ("base", "plus"):
            assert statuses[(index, part)] in ("wrong_answer", "runtime_error"), (name, part, statuses)
    n = len(FORGED_SAMPLES)
    assert statuses[(n, "base")] == "correct" and statuses[(n, "plus")] == "correct", statuses
    assert report["humaneval"]["infra_errors"] == 0
