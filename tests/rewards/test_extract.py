"""Program extraction from responses (spec.extract)."""

from __future__ import annotations

import pytest

from mucode.rewards.extract import extract_code


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("text\n```python\nprint(1)\n```\nmore\n```py\nprint(2)\n```\n", "print(2)\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("````python\ns = '```'\n````", "s = '```'\n"),
        ("~~~python\nprint(3)\n~~~", "print(3)\n"),
        ("  ```python\n  print(4)\n  ```", "  print(4)\n"),
        ("```python\nprint(1)\n", None),  # cut off at the length limit: no code
        ("no code at all", None),
        ("```python\n\n```", None),
    ],
)
def test_last_fence(response: str, expected: str | None) -> None:
    assert extract_code(response, "last_fence") == expected


def test_none_runs_the_response_as_is() -> None:
    assert extract_code("print(1)\n", "none") == "print(1)\n"
    assert extract_code("   \n", "none") is None


def test_evalplus_keeps_the_entry_point_and_drops_the_chatter() -> None:
    pytest.importorskip("evalplus")
    response = "Sure!\n```python\nimport math\n\ndef f(x):\n    return math.floor(x)\n\nprint(f(2.5))\n```\nDone."
    code = extract_code(response, "evalplus", "f")
    assert code is not None
    assert "def f(x)" in code and "import math" in code
    assert "print(f(2.5))" not in code


def test_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: \\['evalplus', 'last_fence', 'none'\\]"):
        extract_code("x", "first_fence")
