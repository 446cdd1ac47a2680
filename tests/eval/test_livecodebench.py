"""LiveCodeBench: release files in the real schema load, prompt, extract and score through the verifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mucode.eval.core import SamplesSource
from mucode.eval.extract import last_fenced_block
from mucode.eval.judge import VerifierOptions
from mucode.eval.livecodebench.data import decode_test_cases, load_livecodebench, release_files
from mucode.eval.livecodebench.driver import CALL_ENTRY
from mucode.eval.livecodebench.evaluate import LCB_IMPORT_HEADER, evaluate_livecodebench, lcb_item
from mucode.eval.livecodebench.prompts import SYSTEM_MESSAGE_GENERIC, build_prompt

LCB_DIR = Path(__file__).resolve().parent / "fixtures" / "livecodebench"


def fence(code: str, prose: str = "Here is my solution.") -> str:
    return f"{prose}\n```python\n{code}\n```\nThat's it."


SUM_PAIRS_OK = "n = int(input())\nfor _ in range(n):\n    a, b = map(int, input().split())\n    print(a + b)"
SUM_PAIRS_WRONG = (
    "n = int(input())\nfor _ in range(n):\n    a, b = map(int, input().split())\n    print(a * b)"
)
TWO_SUM_OK = (
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return (seen[target - x], i)\n            seen[x] = i"
)
TWO_SUM_PUBLIC_ONLY = (  # passes the public test, fails the private ones
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        return [0, 1]"
)
MEAN_OK = "n = int(input())\nxs = list(map(int, input().split()))\nprint('%.6f' % (sum(xs) / n))"
MEAN_WRONG = "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) // n)"


def test_release_tags_are_cumulative_over_the_release_files() -> None:
    assert release_files("v1") == ["test.jsonl"] and release_files("v5") == ["test5.jsonl"]
    assert release_files("release_v3") == ["test.jsonl", "test2.jsonl", "test3.jsonl"]
    assert release_files("v2_v4") == ["test2.jsonl", "test3.jsonl", "test4.jsonl"]
    assert release_files("release_latest") == release_files("release_v6") == release_files("v1_v6")
    with pytest.raises(ValueError, match="valid: release_v1"):
        release_files("v9")
    assert [p.question_id for p in load_livecodebench("release_v1", source=LCB_DIR)] == ["abc900_a", "9001"]
    assert [p.question_id for p in load_livecodebench("v2", source=LCB_DIR)] == ["1950Z"]
    both = ["abc900_a", "9001", "1950Z"]
    assert [p.question_id for p in load_livecodebench("release_v2", source=LCB_DIR)] == both
    assert [p.question_id for p in load_livecodebench("v1_v2", source=LCB_DIR)] == both
    with pytest.raises(Exception, match="test3.jsonl"):
        load_livecodebench("release_v3", source=LCB_DIR)


@pytest.mark.usefixtures("hub_offline")
def test_hub_source_offline_fails_with_the_offline_recipe() -> None:
    from mucode.data.files import HubError

    with pytest.raises(HubError, match="--data-dir"):
        load_livecodebench("v1")


def test_date_window_keeps_contests_inside_it() -> None:
    ids = [p.question_id for p in load_livecodebench("release_v2", source=LCB_DIR, start_date="2023-09-01")]
    assert ids == ["9001", "1950Z"]
    ids = [p.question_id for p in load_livecodebench("release_v2", source=LCB_DIR, end_date="2023-09-03")]
    assert ids == ["abc900_a", "9001"]  # the end date includes its whole day
    assert load_livecodebench("release_v2", source=LCB_DIR, start_date="2025-01-01") == []


def test_private_tests_decode_from_plain_and_compressed_json() -> None:
    sum_pairs, two_sum, mean = load_livecodebench("release_v2", source=LCB_DIR)
    assert [t.output for t in sum_pairs.private_tests] == ["0\n", "30\n0\n15\n"]  # compressed
    assert [t.input for t in two_sum.private_tests] == ["[3, 2, 4]\n6", "[1, 5, 5]\n10"]  # plain JSON
    assert len(mean.tests) == 3 and mean.tests[0].output == "1.500000\n"
    assert two_sum.func_name == "twoSum" and two_sum.is_functional and not sum_pairs.is_functional
    raw = json.loads((LCB_DIR / "test.jsonl").read_text().splitlines()[0])["private_test_cases"]
    assert decode_test_cases(raw)[0]["testtype"] == "stdin"


def test_compressed_tests_holding_objects_are_refused() -> None:
    import base64
    import pickle
    import zlib

    evil = base64.b64encode(zlib.compress(pickle.dumps(Path("/etc/passwd")))).decode()
    with pytest.raises(ValueError, match="neither JSON"):
        decode_test_cases(evil)


def test_chat_prompt_is_livecodebench_layout() -> None:
    sum_pairs, two_sum, _ = load_livecodebench("release_v2", source=LCB_DIR)
    messages = build_prompt(sum_pairs, "chat")
    assert messages[0] == {"role": "system", "content": SYSTEM_MESSAGE_GENERIC}
    user = messages[1]["content"]
    assert user.startswith(f"### Question:\n{sum_pairs.content}\n\n### Format: Read the inputs from stdin")
    assert user.endswith(
        "```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the provided format with backticks)\n\n"
    )
    user = build_prompt(two_sum, "chat")[1]["content"]
    assert "### Format: You will use the following starter code" in user
    assert f"```python\n{two_sum.starter_code}\n```\n\n### Answer:" in user
    base = build_prompt(two_sum, "GenericBase")
    assert isinstance(base, str) and base.endswith(
        f"### Question\n{two_sum.content}\n\n### Starter Code\n{two_sum.starter_code}\n\n### Answer\n\n"
    )
    assert "### Starter Code" not in build_prompt(sum_pairs, "base")
    with pytest.raises(ValueError, match="valid: chat"):
        build_prompt(sum_pairs, "fancy")


@pytest.mark.parametrize(
    ("ours", "upstream"), [("chat", "OpenAIChat"), ("codeqwen", "CodeQwenInstruct"), ("base", "GenericBase")]
)
def test_prompts_equal_livecodebench_runner_prompts(ours: str, upstream: str) -> None:
    """Same text as the installed livecodebench package's `format_prompt_generation`, both layouts."""
    import importlib.util
    from types import SimpleNamespace

    import livecodebench
    from livecodebench.lm_styles import LMStyle

    # the package's prompts/__init__ imports an Anthropic name that current anthropic releases lack:
    # load the code-generation prompts module by itself
    path = Path(livecodebench.__file__).parent / "prompts" / "code_generation.py"
    spec = importlib.util.spec_from_file_location("lcb_code_generation_prompts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    format_prompt_generation = module.format_prompt_generation

    for problem in load_livecodebench("release_v2", source=LCB_DIR):
        theirs = format_prompt_generation(
            SimpleNamespace(question_content=problem.content, starter_code=problem.starter_code),
            LMStyle(upstream),
        )
        assert build_prompt(problem, ours) == theirs, (ours, problem.question_id)
        assert build_prompt(problem, upstream) == theirs


def test_code_is_taken_from_the_last_fenced_block() -> None:
    assert last_fenced_block("```python\nfirst\n```\ntext\n```\nsecond\nline\n```") == "second\nline\n"
    assert last_fenced_block("```python\nsecond\n```<|im_end|>") == "second\n"  # the verifier's rule too
    assert last_fenced_block("no code here") is None
    assert last_fenced_block("```python\nunterminated") is None


def test_items_carry_all_tests_the_header_and_the_livecodebench_checker() -> None:
    sum_pairs, two_sum, _ = load_livecodebench("release_v2", source=LCB_DIR)
    item = lcb_item(two_sum, TWO_SUM_OK)
    assert repr(LCB_IMPORT_HEADER) in item["response"] and repr(TWO_SUM_OK) in item["response"]
    assert "load_call(_CODE, _HEADER, 'twoSum', _LIMIT_S)" in item["response"]
    assert item["spec"]["tests"] == {
        "format": "call",
        "inputs": ["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6", "[1, 5, 5]\n10"],
        "outputs": ["[0, 1]", "[1, 2]", "[1, 2]"],
        "fn_name": CALL_ENTRY,
    }
    assert item["spec"]["checker"] == "livecodebench" and item["spec"]["extract"] == "none"
    assert lcb_item(sum_pairs, SUM_PAIRS_OK)["spec"]["tests"]["format"] == "stdio"


def test_correct_solutions_score_1_and_wrong_ones_0(code_verifier: VerifierOptions, tmp_path: Path) -> None:
    samples = {
        "abc900_a": [fence(SUM_PAIRS_OK), fence(SUM_PAIRS_WRONG), "I could not solve it."],
        "9001": [fence(TWO_SUM_OK), fence(TWO_SUM_PUBLIC_ONLY), fence(TWO_SUM_OK, "Again:")],
        "1950Z": [fence(MEAN_OK), fence(MEAN_WRONG), fence("```")],
    }
    report = evaluate_livecodebench(
        SamplesSource(samples),
        release="release_v2",
        data_dir=LCB_DIR,
        verifier=code_verifier,
        run_dir=tmp_path,
    )["livecodebench"]
    assert report["infra_errors"] == 0, report["statuses"]
    assert report["n_correct"] == 4, report["statuses"]  # 1 + 2 + 1
    assert report["statuses"]["no_code"] == 2
    # pass@1 = mean(1/3, 2/3, 1/3); pass@2 = mean(2/3, 1, 2/3); pass@3 = 1
    assert report["pass@1"] == pytest.approx((1 / 3 + 2 / 3 + 1 / 3) / 3)
    assert report["pass@2"] == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)
    assert report["pass@3"] == pytest.approx(1.0)
    assert report["by_difficulty"]["medium"]["pass@1"] == pytest.approx(2 / 3)
    assert set(report["by_platform"]) == {"atcoder", "codeforces", "leetcode"}
    verdicts = [
        json.loads(x) for x in (tmp_path / "livecodebench" / "verdicts.jsonl").read_text().splitlines()
    ]
    by_sample = {(v["id"], v["index"]): v["reward"] for v in verdicts}
    assert by_sample[("abc900_a", 0)] == 1.0 and by_sample[("abc900_a", 1)] == 0.0
    assert by_sample[("9001", 0)] == 1.0 and by_sample[("9001", 1)] == 0.0
    assert by_sample[("1950Z", 0)] == 1.0 and by_sample[("1950Z", 1)] == 0.0


def test_samples_file_cli_writes_a_report_keyed_by_benchmark(
    code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from mucode.cli import get_app

    data = tmp_path / "lcb"
    shutil.copytree(LCB_DIR, data)
    samples = tmp_path / "samples.jsonl"
    rows = [
        ("abc900_a", fence(SUM_PAIRS_OK)),
        ("abc900_a", fence(SUM_PAIRS_WRONG)),
        ("9001", fence(TWO_SUM_OK)),
    ]
    samples.write_text("".join(json.dumps({"question_id": q, "response": r}) + "\n" for q, r in rows))
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        get_app(),
        [
            "eval",
            "livecodebench",
            "--samples",
            str(samples),
            "--release",
            "v1",
            "--data-dir",
            str(data),
            "--output",
            str(out),
            "--run-dir",
            str(tmp_path / "run"),
            "--verifier-url",
            code_verifier.urls[0],
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["livecodebench"]["pass@1"] == pytest.approx((1 / 2 + 1) / 2)
    assert "pass@2" in report["livecodebench"]
    assert "| livecodebench" in result.output
