"""Validation of code task specs: every mistake is named, with how to fix it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mucode.rewards.code import CodeSpec


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ({"format": "stdio", "inputs": ["1"], "outputs": []}, "give one expected output per input"),
        ({"format": "stdio", "inputs": [], "outputs": []}, "at least one test"),
        ({"format": "call", "inputs": ["1"], "outputs": ["1"]}, "needs 'fn_name'"),
        ({"format": "assert"}, "needs 'assert_code'"),
        ({"format": "junit", "inputs": ["1"], "outputs": ["1"]}, "'stdio', 'call' or 'assert'"),
        ({"format": "stdio", "inputs": ["1"], "outputs": ["1"], "expected": ["1"]}, "Extra inputs"),
    ],
)
def test_invalid_tests_are_explained(tests: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CodeSpec.model_validate({"tests": tests})


def test_limits_and_options_are_bounded() -> None:
    ok = {"format": "stdio", "inputs": ["1"], "outputs": ["1"]}
    with pytest.raises(ValidationError, match="less than or equal to 60"):
        CodeSpec.model_validate({"tests": ok, "time_limit_s": 3600})
    with pytest.raises(ValidationError, match="greater than 0"):
        CodeSpec.model_validate({"tests": ok, "time_limit_s": 0})
    with pytest.raises(
        ValidationError, match="unknown extract method 'first_fence'; valid names: evalplus, last_fence, none"
    ):
        CodeSpec.model_validate({"tests": ok, "extract": "first_fence"})
    with pytest.raises(
        ValidationError,
        match="unknown output checker 'strict'; valid names: code_contests, exact, livecodebench",
    ):
        CodeSpec.model_validate({"tests": ok, "checker": "strict"})


def test_extra_fields_pass_through() -> None:
    spec = CodeSpec.model_validate(
        {"tests": {"format": "assert", "assert_code": "assert 1"}, "source": "mbpp/1"}
    )
    assert spec.model_extra == {"source": "mbpp/1"}
    assert spec.extract == "last_fence" and spec.checker == "code_contests"


def test_setup_code_goes_to_the_harness_before_the_asserts() -> None:
    """A data set's helpers (HumanEval's `poly`) travel as test code, so the harness defines them."""
    spec = CodeSpec.model_validate(
        {
            "tests": {
                "format": "assert",
                "setup_code": "def poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n",
                "assert_code": "def check(candidate):\n    assert abs(poly([1, 1], candidate([1, 1]))) < 1e-6\n",
                "entry_point": "find_zero",
            }
        }
    )
    fields = spec.tests.sandbox_fields()
    assert "setup_code" not in fields
    assert fields["assert_code"].startswith("def poly(xs, x):") and fields["assert_code"].endswith("< 1e-6\n")
    plain = CodeSpec.model_validate({"tests": {"format": "assert", "assert_code": "assert f() == 1"}})
    assert plain.tests.sandbox_fields()["assert_code"] == "assert f() == 1"
