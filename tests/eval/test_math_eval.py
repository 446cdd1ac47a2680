"""Math evaluation on the benchmark copies shipped in eval/math, through a real (loopback) verifier.

Each benchmark's responses are verified once (module fixture); the other tests reuse those verdicts
through the run cache, which is keyed by the exact item, so they also show that a rerun does not
verify again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mucode.eval.judge import VerifierOptions
from mucode.eval.math_bench import MathProblem, evaluate_math, load_math_problems
from mucode.eval.report import format_table

LOCAL = ["math500", "aime24", "aime25", "amc23"]
EXPECTED_ROWS = {"math500": 500, "aime24": 30, "aime25": 30, "amc23": 40}


def boxed(answer: Any, problem_id: str) -> str:
    """A response boxing `answer`; the problem id keeps responses distinct (identical items are verified once)."""
    return f"Working out problem {problem_id} step by step, the answer is $\\boxed{{{answer}}}$."


def other_answer(problems: list[MathProblem], i: int) -> Any:
    """The answer of the nearest later problem whose answer differs as text."""
    own = str(problems[i].answer).strip()
    for step in range(1, len(problems)):
        candidate = problems[(i + step) % len(problems)].answer
        if str(candidate).strip() != own:
            return candidate
    raise AssertionError("all answers are equal")


@pytest.fixture(scope="module")
def problems(math_data: Path) -> dict[str, list[MathProblem]]:
    return {name: load_math_problems(name, data_dir=math_data) for name in LOCAL}


@pytest.fixture(scope="module")
def verified(
    problems: dict[str, list[MathProblem]],
    math_data: Path,
    math_verifier: VerifierOptions,
    tmp_path_factory: Any,
) -> tuple[dict[str, Any], Path]:
    """Sample 0 boxes the problem's own answer, sample 1 another problem's answer."""
    run_dir = tmp_path_factory.mktemp("math-run")
    samples = {
        name: {p.id: [boxed(p.answer, p.id), boxed(other_answer(ps, i), p.id)] for i, p in enumerate(ps)}
        for name, ps in problems.items()
    }
    report = evaluate_math(
        None, LOCAL, data_dir=math_data, samples=samples, verifier=math_verifier, run_dir=run_dir
    )
    return report, run_dir


def verdicts_by_index(run_dir: Path, name: str) -> dict[int, list[str]]:
    by_index: dict[int, list[str]] = {}
    for line in (run_dir / name / "verdicts.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_index.setdefault(row["index"], []).append(row["status"])
    return by_index


def test_local_files_load_with_their_own_field_names(problems: dict[str, list[MathProblem]]) -> None:
    for name, rows in problems.items():
        assert len(rows) == EXPECTED_ROWS[name]
        assert len({p.id for p in rows}) == len(rows)
        assert all(p.problem.strip() and str(p.answer).strip() for p in rows)
    assert problems["math500"][0].id.startswith("test/")  # unique_id
    assert isinstance(problems["amc23"][0].answer, int | float)  # a JSON number there


def test_own_answers_score_100_percent_and_other_answers_near_zero(
    verified: tuple[dict[str, Any], Path],
) -> None:
    report, run_dir = verified
    for name in LOCAL:
        by_index = verdicts_by_index(run_dir, name)
        own, other = by_index[0], by_index[1]
        assert len(own) == EXPECTED_ROWS[name]
        assert own.count("correct") == len(own), f"{name}: own answers not all correct: {set(own)}"
        assert other.count("correct") / len(other) <= 0.03, (
            f"{name}: {other.count('correct')} other answers pass"
        )
        assert report[name]["infra_errors"] == 0
        assert report[name]["n_samples"] == 2 * EXPECTED_ROWS[name]
        assert report[name]["pass@1"] == pytest.approx((len(own) + other.count("correct")) / (2 * len(own)))


def test_mixed_files_give_the_expected_averages(
    problems: dict[str, list[MathProblem]],
    verified: tuple[dict[str, Any], Path],
    math_data: Path,
    math_verifier: VerifierOptions,
) -> None:
    """Problem i gets (i mod 5) own answers among 4 samples: pass@1 is the mean of those fractions."""
    _, run_dir = verified
    samples: dict[str, dict[str, list[str]]] = {}
    expected: dict[str, float] = {}
    for name, ps in problems.items():
        rows = [json.loads(line) for line in (run_dir / name / "verdicts.jsonl").read_text().splitlines()]
        wrong_passes = {r["id"]: r["status"] == "correct" for r in rows if r["index"] == 1}
        assert len(wrong_passes) == len(ps)
        fractions = []
        samples[name] = {}
        for i, p in enumerate(ps):
            own = min(i % 5, 4)
            samples[name][p.id] = [boxed(p.answer, p.id)] * own + [boxed(other_answer(ps, i), p.id)] * (
                4 - own
            )
            fractions.append((own + (4 - own) * wrong_passes[p.id]) / 4)
        expected[name] = sum(fractions) / len(fractions)
    messages: list[str] = []
    report = evaluate_math(
        None,
        LOCAL,
        data_dir=math_data,
        samples=samples,
        verifier=math_verifier,
        run_dir=run_dir,
        progress=messages.append,
    )
    assert not any("to verify" in m for m in messages), "identical items must come from the cache"
    for name in LOCAL:
        assert report[name]["pass@1"] == pytest.approx(expected[name])
        assert report[name]["samples_per_problem"] == 4
        assert "pass@4" in report[name]
    assert report["average"]["pass@1"] == pytest.approx(sum(expected.values()) / len(expected))
    assert report["average"]["benchmarks"] == LOCAL
    table = format_table(report)
    assert "| math500" in table and "average" in table


@pytest.mark.usefixtures("hub_offline")
def test_amc24_without_local_copy_is_skipped_and_the_average_marked_partial(
    math_data: Path, math_verifier: VerifierOptions
) -> None:
    aime = load_math_problems("aime24", data_dir=math_data)
    samples = {"aime24": {p.id: [boxed(p.answer, p.id)] for p in aime}, "amc24": {"0": ["x"]}}
    with pytest.warns(UserWarning, match="amc24 skipped"):
        report = evaluate_math(
            None, ["aime24", "amc24"], data_dir=math_data, samples=samples, verifier=math_verifier
        )
    assert report["aime24"]["pass@1"] == 1.0
    assert "amc24" in report["skipped"]
    assert report["average"]["partial"] is True and report["average"]["missing"] == ["amc24"]


def test_unknown_sample_ids_are_rejected(math_data: Path, math_verifier: VerifierOptions) -> None:
    with pytest.raises(ValueError, match="not problems of the benchmark"):
        evaluate_math(
            None, ["aime24"], data_dir=math_data, samples={"aime24": {"nope": ["1"]}}, verifier=math_verifier
        )


def test_a_hub_shaped_file_in_the_data_dir_is_read_with_the_hub_field_names(tmp_path: Path) -> None:
    """AMC24 has no offline copy here: a file saved from its Hub set (rawsh/2024_AMC12) loads by name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"problem": "What is $1+1$?", "answer": "2"}, {"problem": "What is $2 \\cdot 3$?", "answer": "6"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "amc24.parquet")
    problems = load_math_problems("amc24", data_dir=tmp_path)
    assert [(p.id, p.problem, p.answer) for p in problems] == [
        ("0", rows[0]["problem"], "2"),
        ("1", rows[1]["problem"], "6"),
    ]
    with pytest.raises(ValueError, match="unknown math benchmark"):
        load_math_problems("gsm8k", data_dir=tmp_path)
