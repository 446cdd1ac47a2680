"""Program extraction from responses (spec.extract)."""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from mucode.rewards.extract import (
    MAX_RESPONSE_CHARS,
    MAX_SANITIZE_LINES,
    SANITIZE_CPU_S,
    extract_code,
    extract_code_async,
    last_fence,
    last_fenced_block,
    scan_fences,
)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("text\n```python\nprint(1)\n```\nmore\n```py\nprint(2)\n```\n", "print(2)\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("````python\ns = '```'\n````", "s = '```'\n"),
        ("~~~python\nprint(3)\n~~~", "print(3)\n"),
        ("  ```python\n  print(4)\n  ```", "  print(4)\n"),
        ("```python\nprint(1)\n", None),  # cut off at the length limit: no code
        ("```python\nprint(1)\n```<|im_end|>", "print(1)\n"),  # EOS text after the fence (OpenRLHF)
        ("```python\nprint(1)\n```<|endoftext|><|endoftext|>", "print(1)\n"),
        ("```python\nprint(1)\n``` Hope this helps!", "print(1)\n"),
        ("````markdown\n```python\nx\n```\n````", "```python\nx\n```\n"),
        ("```python\na\n```python\nb\n```", "b\n"),  # an unclosed block before: LiveCodeBench's pick
        ("```python\na\n```\n```python\nb", None),  # the last pair holds nothing, as in LiveCodeBench
        ("```python\na\n```\ntext\n~~~", "a\n"),
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
    response = (
        "Sure!\n```python\nimport math\n\ndef f(x):\n    return math.floor(x)\n\nprint(f(2.5))\n```\nDone."
    )
    code = extract_code(response, "evalplus", "f")
    assert code is not None
    assert "def f(x)" in code and "import math" in code
    assert "print(f(2.5))" not in code


def test_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown extract method 'first_fence'; valid names: evalplus, last_fence, none"
    ):
        extract_code("x", "first_fence")


def _reference_last_fence(response: str) -> str | None:
    """The rule of the module docstring, written the slow obvious way (quadratic): the behaviour to keep."""
    lines = response.split("\n")

    def fence(line: str) -> tuple[str, int, str] | None:
        m = re.match(r"[ \t]*(`{3,}|~{3,})(.*)", line, re.S)
        return (m.group(1)[0], len(m.group(1)), m.group(2)) if m else None

    for close in range(len(lines) - 1, -1, -1):
        c = fence(lines[close])
        if c is None:
            continue
        for start in range(close - 1, -1, -1):
            o = fence(lines[start])
            if o is not None and o[:2] == c[:2] and not (o[0] == "`" and "`" in o[2]):
                body = lines[start + 1 : close]
                return "\n".join(body) + "\n" if body else ""
    return None


def _lcb_extract_code(model_output: str) -> str:
    """LiveCodeBench's extractor (lcb_runner/utils/extraction_utils.py, chat models), verbatim."""
    outputlines = model_output.split("\n")
    indexlines = [i for i, line in enumerate(outputlines) if "```" in line]
    if len(indexlines) < 2:
        return ""
    return "\n".join(outputlines[indexlines[-2] + 1 : indexlines[-1]])


def test_same_blocks_as_the_reference_on_random_responses() -> None:
    rng = random.Random(1234)
    pieces = [
        "```",
        "````",
        "~~~",
        "~~~~",
        "~~~~~",
        "`",
        "~",
        "python",
        "py`",
        " ",
        "\t",
        "\n",
        "\n",
        "\n",
        "x = 1",
        "\r",
        "a",
        "<|im_end|>",
    ]
    for _ in range(20_000):
        response = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
        assert last_fence(response) == _reference_last_fence(response), repr(response)


def test_same_code_as_livecodebench_on_responses_models_write() -> None:
    """Line-start backtick fences, any info string, any text or EOS markers after the closing fence."""
    rng = random.Random(7)
    openers = ["```", "```python", "```py", "```Python3"]
    after = ["", "<|im_end|>", "<|endoftext|>", "</s>", " Hope this helps!", "<|eot_id|><|end_of_text|>"]
    prose = ["", "Here is my solution:", "Explanation: it sorts.", "Complexity O(n)."]
    bodies = ["print(1)", "import sys\nprint(sys.stdin.read())", "def f(x):\n    return x\n", ""]
    for _ in range(2_000):
        parts = []
        for _ in range(rng.randint(1, 3)):
            parts += [rng.choice(prose), rng.choice(openers), rng.choice(bodies), "```" + rng.choice(after)]
        response = "\n".join(parts)
        ours = last_fenced_block(response)
        assert ours is not None
        assert ours.rstrip("\n") == _lcb_extract_code(response).rstrip("\n"), repr(response)


ADVERSARIAL = {
    "unterminated openings": "```python\n",
    "openings with backticks in the info": "```a`b\n",
    "long tilde runs": "~" * 40 + "x\n",
    "alternating fences": "```\n~~~~\n",
    "spaces then fences": "   ````` \n",
}


@pytest.mark.parametrize("unit", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_extraction_work_is_linear_in_the_response(unit: str) -> None:
    """Steps (lines visited + closing-fence look-ups) per character stay bounded as the response grows."""
    small = unit * (100_000 // len(unit))
    big = unit * (1_000_000 // len(unit))
    _, steps_small = scan_fences(small)
    _, steps_big = scan_fences(big)
    assert steps_big <= 2 * len(big)
    assert steps_big <= 11 * steps_small  # 10x the input: about 10x the work, not 100x


def test_a_response_over_the_cap_holds_no_code() -> None:
    code = "```python\nprint(1)\n```"
    assert extract_code(code + " " * (MAX_RESPONSE_CHARS - len(code))) == "print(1)\n"
    assert extract_code(code + " " * (MAX_RESPONSE_CHARS - len(code) + 1)) is None
    assert extract_code("print(1)" + " " * MAX_RESPONSE_CHARS, "none") is None


def test_a_pathological_evalplus_response_is_bounded_and_delays_no_other_request() -> None:
    """evalplus's sanitizer takes about half a minute on 200 lines of ``x = 1`` (cubic): it runs in its own
    bounded processes, so it ends as "no code" within its CPU limit while other extractions, evalplus
    ones included, finish beside it."""
    pytest.importorskip("evalplus")

    good = "```python\nimport math\n\ndef f(x):\n    return math.floor(x)\n```\nThat is all."

    async def run() -> tuple[list[str], tuple[str | None, str]]:
        order: list[str] = []
        slow = asyncio.create_task(extract_code_async("x = 1\n" * 300, "evalplus", "f"))
        await asyncio.sleep(0.5)
        for k in range(3):
            code, _ = await extract_code_async(good, "evalplus", "f")
            assert code is not None and "def f(x)" in code
            order.append(f"evalplus-{k}")
            fenced, _ = await extract_code_async(good, "last_fence", "f")
            assert fenced is not None
            order.append(f"fence-{k}")
        if not slow.done():
            order.append("still sanitizing")
        return order, await slow

    order, (code, why) = asyncio.run(run())
    assert order[-1] == "still sanitizing", order
    assert code is None and f"{SANITIZE_CPU_S:g} s" in why, why


def test_an_evalplus_response_over_the_line_cap_holds_no_code() -> None:

    code, why = asyncio.run(
        extract_code_async("```python\n" + "x = 1\n" * MAX_SANITIZE_LINES + "```\n", "evalplus", "f")
    )
    assert code is None and str(MAX_SANITIZE_LINES) in why
