"""The toy tasks: well-formed records, and reference responses that really are right / wrong."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mucode.data import load_tasks
from mucode.data.toy import toy_problems

_FENCE_START = "```python\n"


def _run(response: str, stdin: str) -> str:
    assert response.startswith(_FENCE_START) and response.endswith("\n```")
    program = response[len(_FENCE_START) : -len("\n```")]
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program], input=stdin, capture_output=True, text=True, timeout=10
    )
    return done.stdout


def _passes(response: str, tests: dict) -> bool:
    return all(
        _run(response, i).split() == o.split() for i, o in zip(tests["inputs"], tests["outputs"], strict=True)
    )


def test_toy_splits_are_disjoint_and_ids_unique() -> None:
    for task in ("math", "code"):
        train = {r.prompt_id for r in load_tasks("toy", task)}
        test = {r.prompt_id for r in load_tasks("toy", task, split="test")}
        assert train and test and not train & test
        assert len(train) == len(load_tasks("toy", task))
    assert len(load_tasks("toy", "math", limit=10)) == 10
    with pytest.raises(ValueError, match="splits"):
        load_tasks("toy", "math", split="valid")


def test_toy_math_answers_are_the_arithmetic() -> None:
    for problem in toy_problems("math", split="all"):
        meta = problem.record.meta
        expected = eval(f"{meta['a']} {meta['op']} {meta['b']}")  # noqa: S307 - our own digits and operator
        assert problem.record.spec == {"answer": str(expected)}
        assert problem.correct.endswith(f"\\boxed{{{expected}}}.")
        assert all(f"\\boxed{{{expected}}}" not in wrong for wrong in problem.wrong)
        assert problem.record.program == "math"


def test_toy_code_reference_programs_pass_and_wrong_ones_fail() -> None:
    seen_families = set()
    for problem in toy_problems("code", split="all"):
        family = problem.record.meta["family"]
        if family in seen_families:  # phrasings of one program share tests and programs
            continue
        seen_families.add(family)
        tests = problem.record.spec["tests"]
        assert tests["format"] == "stdio" and len(tests["inputs"]) == len(tests["outputs"]) == 5
        assert _passes(problem.correct, tests), family
        for wrong in problem.wrong:
            assert not _passes(wrong, tests), (family, wrong)
    assert len(seen_families) == 24


def test_instruction_is_configurable() -> None:
    (record,) = load_tasks("toy", "math", limit=1, instruction="Box it.")
    assert record.messages[-1]["content"].endswith("? Box it.")


def test_unformatted_responses_score_nothing_with_the_real_extractors() -> None:
    from mucode.data.toy import unformatted
    from mucode.rewards.extract import extract_code
    from mucode.rewards.math_worker import check_answer

    for problem in toy_problems("math")[:20]:
        gold = problem.record.spec["answer"]
        assert check_answer(gold, problem.correct)["status"] == "correct"
        assert check_answer(gold, unformatted("math", problem.correct))["status"] == "no_answer"
    for problem in toy_problems("code")[:6]:
        program = extract_code(problem.correct)
        assert program is not None and program.strip() == unformatted("code", problem.correct)
        assert extract_code(unformatted("code", problem.correct)) is None
