"""Output checkers, applied outside the sandbox."""

from __future__ import annotations

import pytest

from mucode.sandbox.checkers import CHECKERS, check
from mucode.sandbox.pooled import call_results_equal


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("3\n", "3", True),
        ("YES", "yes\n", True),  # lowercased
        ("1 2\n3", "1\n2 3  \n", True),  # whitespace-insensitive token stream
        ("0.3333333", "0.33333334", True),  # |a-b| < 1e-5
        ("0.33333", "0.33335", False),
        ("1.0", "1.0000001", True),
        ("1", "1.0000001", False),  # an integer expected: the answer must be that integer
        ("100000000000000000", "100000000000000001", False),  # integers compare exactly, not as floats
        ("100000000000000001", "100000000000000001", True),
        ("100000", "1e5", False),  # a float where an integer is expected
        ("100000", "100000.0", False),
        ("1e5", "100000", True),  # a float expected: any number within 1e-5
        ("2.5", "5e-1", False),
        ("0.5", "5e-1", True),
        ("5", "+05", True),  # same integer value
        ("-0", "0", True),
        ("-3", "3", False),
        ("7" * 5000, "7" * 5000 + "\n", True),  # beyond int()'s 4300-digit limit: still exact
        ("7" * 5000, "7" * 4999 + "8", False),
        ("1_000", "1000", False),  # Python literal syntax is not a number token
        ("inf", "infinity", False),
        ("1 2", "1 2 3", False),  # token counts must match
        ("abc", "abd", False),
        ("nan", "nan", True),  # equal strings
        ("nan", "1", False),
        ("", "", True),
    ],
)
def test_code_contests(expected: str, actual: str, ok: bool) -> None:
    assert check("code_contests", expected, actual) is ok


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("3\n", "3", True),
        ("1 2\n3\n", "  1 2 \n3", True),
        ("1.50", "1.5", True),  # equal as decimals
        ("1.5", "1.50001", False),  # no float tolerance
        ("YES", "yes", False),  # case-sensitive
        ("1 2\n3", "1 2 3", False),  # line counts must match
        ("a b", "a  b", False),  # non-numeric lines must match exactly
        ("1 2", "1  2", True),  # numeric lines compare token-wise
        ("1\n\n2", "1\n2", False),
    ],
)
def test_livecodebench(expected: str, actual: str, ok: bool) -> None:
    assert check("livecodebench", expected, actual) is ok


def test_exact() -> None:
    assert check("exact", "3\n", "3\n")
    assert not check("exact", "3", "3\n")


def test_unknown_checker_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="code_contests"):
        check("fuzzy", "a", "a")
    assert set(CHECKERS) == {"code_contests", "livecodebench", "exact"}


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("[0, 1]", "[0,1]", True),
        ("[0, 1]", "[1, 0]", False),
        ("2", "2.0", True),
        ('{"a": [1, 2]}', '{"a": [1, 2]}', True),
        ("true", "true", True),
        ("[1, 2]", "not json", False),
    ],
)
def test_call_results_compare_as_json(expected: str, actual: str, ok: bool) -> None:
    assert call_results_equal(expected, actual, "code_contests") is ok
